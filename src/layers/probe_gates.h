/* probe_gates.h - scalar helpers of the layers' probe_gates hooks (the probe command; see
 * sb_layer_type in model.h and docs/probe.md). The hooks recompute a layer's gates from its
 * input in double, outside the tape. Internal to src/layers/. */
#ifndef SELECTIVBENCH_PROBE_GATES_H
#define SELECTIVBENCH_PROBE_GATES_H

#include <math.h>

/* softplus with PyTorch's threshold 20 (x above it passes through) */
static inline double sb_probe_softplus(double x)
{
    return x > 20.0 ? x : log1p(exp(x));
}

static inline double sb_probe_sigmoid(double x)
{
    return 1.0 / (1.0 + exp(-x));
}

#endif
