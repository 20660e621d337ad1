/* gradcheck.c - finite-difference gradient checks (see gradcheck.h). */
#include "gradcheck.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static double gc_uniform(unsigned *state)
{
    *state = *state * 1664525u + 1013904223u;
    return (double)(*state >> 8) / 16777216.0;
}

sb_tensor *gc_add_input(gc_problem *p, const char *name, int ndim, const int *shape, double lo,
                        double hi, unsigned seed)
{
    if (p->n_inputs >= GC_MAX_INPUTS)
        fail_msg("too many gradcheck inputs");
    gc_input *in = &p->inputs[p->n_inputs++];
    in->name = name;
    sb_tensor *t = &in->tensor;
    memset(t, 0, sizeof *t);
    t->ndim = ndim;
    t->size = 1;
    for (int d = 0; d < ndim; d++) {
        t->shape[d] = shape[d];
        t->size *= (size_t)shape[d];
    }
    t->data = malloc(t->size * sizeof(real));
    unsigned st = seed * 2654435761u + 12345u;
    for (size_t i = 0; i < t->size; i++)
        t->data[i] = (real)(lo + (hi - lo) * gc_uniform(&st));
    t->requires_grad = 1;
    return t;
}

void gc_free(gc_problem *p)
{
    for (int i = 0; i < p->n_inputs; i++)
        free(p->inputs[i].tensor.data);
    p->n_inputs = 0;
}

/* Evaluates L = sum(y r) without recording. */
static double gc_loss(gc_problem *p, sb_graph *g, const double *r)
{
    sb_graph_reset(g);
    g->record = 0;
    sb_tensor *in[GC_MAX_INPUTS];
    for (int i = 0; i < p->n_inputs; i++) {
        in[i] = &p->inputs[i].tensor;
        in[i]->grad = NULL;
    }
    sb_tensor *y = p->fn(g, in, p->ctx);
    double L = 0;
    for (size_t i = 0; i < y->size; i++)
        L += (double)y->data[i] * r[i];
    return L;
}

double gc_check(gc_problem *p)
{
    const double h = p->step > 0 ? p->step : 1e-6;
    const double rtol = p->rtol > 0 ? p->rtol : 1e-6, atol = p->atol > 0 ? p->atol : 1e-8;
    sb_graph g;
    sb_graph_init(&g, 1 << 20);
    g.training = p->training;
    g.dropout_seed = 42;

    /* analytic gradients, with junk pre-filled */
    sb_tensor *in[GC_MAX_INPUTS];
    real *junk[GC_MAX_INPUTS];
    for (int i = 0; i < p->n_inputs; i++) {
        in[i] = &p->inputs[i].tensor;
        junk[i] = malloc(in[i]->size * sizeof(real));
        for (size_t k = 0; k < in[i]->size; k++)
            junk[i][k] = (real)(0.25 + 0.001 * (double)(k % 97));
    }
    g.record = 1;
    for (int i = 0; i < p->n_inputs; i++)
        in[i]->grad = junk[i];
    sb_tensor *y = p->fn(&g, in, p->ctx);
    double *r = malloc(y->size * sizeof *r);
    unsigned st = 777u;
    for (size_t i = 0; i < y->size; i++)
        r[i] = gc_uniform(&st) * 2.0 - 1.0;
    sb_tensor_grad(&g, y);
    for (size_t i = 0; i < y->size; i++)
        y->grad[i] = (real)r[i];
    sb_graph_backward(&g);
    double **analytic = malloc((size_t)p->n_inputs * sizeof *analytic);
    for (int i = 0; i < p->n_inputs; i++) {
        analytic[i] = malloc(in[i]->size * sizeof(double));
        for (size_t k = 0; k < in[i]->size; k++)
            analytic[i][k] = (double)junk[i][k] - (0.25 + 0.001 * (double)(k % 97));
        in[i]->grad = NULL;
    }

    /* numeric gradients */
    double worst = 0;
    for (int i = 0; i < p->n_inputs; i++) {
        sb_tensor *t = in[i];
        if (!t->requires_grad)
            continue;
        double max_abs = 0;
        for (size_t k = 0; k < t->size; k++) {
            real saved = t->data[k];
            /* relative step: h * max(1, |x|), so that a large |x| still moves by more than
             * its rounding; divided by the step actually taken (x + h and x - h are rounded) */
            const double hk = h * fmax(1.0, fabs((double)saved));
            const real x_plus = (real)((double)saved + hk), x_minus = (real)((double)saved - hk);
            t->data[k] = x_plus;
            double lp = gc_loss(p, &g, r);
            t->data[k] = x_minus;
            double lm = gc_loss(p, &g, r);
            t->data[k] = saved;
            double num = (lp - lm) / ((double)x_plus - (double)x_minus), ana = analytic[i][k];
            double err = fabs(num - ana), scale = fmax(fabs(num), fabs(ana));
            if (!(err <= atol + rtol * scale))
                fail_msg("%s: d/d%s[%zu]: analytic %.12g, numeric %.12g (error %.3g)", p->name,
                         p->inputs[i].name, k, ana, num, err);
            if (scale > 0 && err / scale > worst)
                worst = err / scale;
            if (fabs(ana) > max_abs)
                max_abs = fabs(ana);
        }
        int allowed = p->inputs[i].allow_zero_grad || (i < 32 && (p->allow_zero_grad >> i) & 1);
        if (!(max_abs > 0) && !allowed)
            fail_msg("%s: the gradient of %s is zero everywhere", p->name, p->inputs[i].name);
    }
    for (int i = 0; i < p->n_inputs; i++) {
        free(junk[i]);
        free(analytic[i]);
    }
    free(analytic);
    free(r);
    sb_graph_free(&g);
    return worst;
}

void gc_check_every_param_has_gradient(gc_problem *p, const sb_model *m, int skip_buffers,
                                       const char *label)
{
    sb_graph g;
    sb_graph_init(&g, 1 << 22);
    g.record = 1;
    sb_tensor *in[2] = {&p->inputs[0].tensor, &p->inputs[1].tensor};
    in[0]->grad = in[1]->grad = NULL;
    sb_tensor *y = p->fn(&g, in, p->ctx);
    real *dy = sb_tensor_grad(&g, y);
    for (size_t i = 0; i < y->size; i++)
        dy[i] = (real)sin(0.37 * (double)i + 1);
    sb_graph_backward(&g);
    for (int i = 0; i < m->params.n; i++) {
        const sb_param *pp = &m->params.p[i];
        if (skip_buffers && (pp->flags & SB_PARAM_BUFFER))
            continue;
        double mx = 0;
        for (size_t k = 0; k < pp->size; k++)
            mx = fmax(mx, fabs(m->params.grad[pp->offset + k]));
        if (!(mx > 0))
            fail_msg("%s: the gradient of %s is zero", label, pp->name);
    }
    sb_graph_free(&g);
}
