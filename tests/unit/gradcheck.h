/*
 * gradcheck.h - central finite differences against the tape's backward, in double
 * precision (the tests that include this are built against the SB_REAL_DOUBLE library).
 *
 * The checked function maps input tensors to an output tensor y; the scalar checked is
 * L = sum(y * r) with a fixed random r (not sum(y), which hides sign and layout errors).
 * Every input's gradient buffer is pre-filled with junk before the backward, so the
 * check also proves that backward accumulates (+=) instead of overwriting.
 */
#ifndef SELECTIVBENCH_GRADCHECK_H
#define SELECTIVBENCH_GRADCHECK_H

#include "model/model.h"
#include "tensor/nn.h"

#define GC_MAX_INPUTS 256

typedef struct gc_input {
    const char *name;
    sb_tensor tensor;    /* data owned by the harness; grad set during the check; inputs
                            with requires_grad = 0 are constants: not checked */
    int allow_zero_grad; /* the gradient may legitimately be zero everywhere */
} gc_input;

/* Builds the computation on graph g from the inputs; returns the output. */
typedef sb_tensor *(*gc_fn)(sb_graph *g, sb_tensor **inputs, void *ctx);

typedef struct gc_problem {
    const char *name;
    gc_input inputs[GC_MAX_INPUTS];
    int n_inputs;
    gc_fn fn;
    void *ctx;
    double step;         /* relative finite-difference step: element x moves by
                            step * max(1, |x|) (default 1e-6) */
    double rtol, atol;   /* default 1e-6, 1e-8 */
    int allow_zero_grad; /* bit i: input i (< 32) may have an all-zero gradient (see also
                            gc_input.allow_zero_grad) */
    int training;        /* graph->training during the check (dropout with a fixed seed) */
} gc_problem;

/* Adds an input of the given shape filled with U(lo, hi) values from `seed`. */
sb_tensor *gc_add_input(gc_problem *p, const char *name, int ndim, const int *shape, double lo,
                        double hi, unsigned seed);

/* Runs the check; fails the current cmocka test with the worst element on mismatch.
 * Returns the largest relative error seen. */
double gc_check(gc_problem *p);

/* Frees the inputs. */
void gc_free(gc_problem *p);

/* For a whole-model problem whose inputs are (input, flat parameters): one backward of p->fn
 * with a fixed output gradient, then a failure naming every parameter tensor of m whose
 * gradient is all zero (buffers skipped when skip_buffers). */
void gc_check_every_param_has_gradient(gc_problem *p, const sb_model *m, int skip_buffers,
                                       const char *label);

#endif
