/* ssm_init.h - the initialisation rule Mamba and Mamba2 share (private to src/layers). */
#ifndef SB_SSM_INIT_H
#define SB_SSM_INIT_H

#include <math.h>

#include "tensor/params.h"

/* dt bias as Mamba and Mamba2 draw it: dt = exp(U[0,1) (ln 0.1 - ln 0.001) + ln 0.001),
 * floored at 1e-4, stored as its inverse softplus dt + log(-expm1(-dt)); float32 steps as
 * torch takes them (the scalars are rounded to float first). */
static inline void ssm_init_dt_bias(const sb_param *p, real *data, sb_mt19937 *rng, const void *ctx)
{
    (void)ctx;
    sb_torch_uniform(rng, data, p->size, 0.0, 1.0);
    const float scale = (float)(log(0.1) - log(0.001)), shift = (float)log(0.001);
    for (size_t i = 0; i < p->size; i++) {
        float u = (float)data[i];
        float dt = expf(u * scale + shift);
        if (dt < 1e-4f)
            dt = 1e-4f;
        data[i] = (real)(dt + logf(-expm1f(-dt)));
    }
}

#endif
