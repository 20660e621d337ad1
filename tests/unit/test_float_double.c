/*
 * test_float_double.c - float and double builds agree.
 *
 * Compiled twice: against the double library it writes the logits, loss and parameter
 * gradients of a small instance of every registered model (fixed seed and batch) to a file;
 * against the float library it computes the same and compares with that file. Agreement within
 * float rounding (relative 1e-5 on logits, 1e-3 of each tensor's largest gradient) shows
 * the float path has no precision loss beyond float's own.
 *
 * usage: test_float_double_{write,compare} FILE
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "ops/ops.h"

/* Forward and backward of one model; returns a malloc'd array: logits, loss, grads. */
static double *run_model(const char *name, size_t *count)
{
    sb_model_config mc = {.d_input = 9,
                          .d_output = 13,
                          .d_model = 32,
                          .n_layers = 2,
                          .d_state = 8,
                          .n_head = 4,
                          .dropout = 0.2,
                          .rope_base = 1000};
    snprintf(mc.model, sizeof mc.model, "%s", name);
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create(&mc, 7, &m, &err) != SB_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    const int B = 3, T = 140; /* crosses the attention's 128-query blocks */
    sb_graph g;
    sb_graph_init(&g, 1 << 24);
    g.record = 1;
    int shape[3] = {B, T, 9};
    sb_tensor *x = sb_tensor_zeros(&g, 3, shape);
    int32_t target[3 * 140];
    uint8_t valid[3 * 140];
    for (int f = 0; f < B * T; f++) {
        x->data[(size_t)f * 9 + (size_t)((f * 7) % 9)] = 1;
        target[f] = (f * 5 + f / 11) % 13;
        valid[f] = 1;
    }
    sb_tensor *logits = sb_model_forward(&g, m, x);
    sb_tensor *loss = sb_cross_entropy(&g, logits, target, valid, 1, NULL);
    /* keep the logits before the backward overwrites the probabilities */
    size_t n = logits->size + 1 + m->params.count;
    double *out = malloc(n * sizeof *out);
    for (size_t i = 0; i < logits->size; i++)
        out[i] = (double)logits->data[i];
    out[logits->size] = (double)loss->data[0];
    sb_tensor_grad(&g, loss)[0] = 1;
    sb_graph_backward(&g);
    /* gradients parameter by parameter (the buffers' padding differs between builds) */
    size_t pos = logits->size + 1;
    for (int i = 0; i < m->params.n; i++) {
        const sb_param *p = &m->params.p[i];
        if (p->flags & SB_PARAM_BUFFER)
            continue;
        for (size_t k = 0; k < p->size; k++)
            out[pos++] = (double)m->params.grad[p->offset + k];
    }
    *count = n;
    sb_graph_free(&g);
    sb_model_free(m);
    return out;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    /* every registered model, in the registry's order (the same in both builds) */
    const sb_layer_type *const *types = sb_layer_types();
    const char *models[64];
    int n_models = 0;
    for (; types[n_models] != NULL && n_models < 64; n_models++)
        models[n_models] = types[n_models]->name;
#ifdef SB_REAL_DOUBLE
    FILE *f = fopen(argv[1], "wb");
    if (f == NULL)
        return 1;
    for (int k = 0; k < n_models; k++) {
        size_t n;
        double *v = run_model(models[k], &n);
        fwrite(&n, sizeof n, 1, f);
        fwrite(v, sizeof *v, n, f);
        free(v);
    }
    return fclose(f) == 0 ? 0 : 1;
#else
    FILE *f = fopen(argv[1], "rb");
    if (f == NULL) {
        fprintf(stderr, "no reference file %s (run the double build first)\n", argv[1]);
        return 1;
    }
    int failures = 0;
    for (int k = 0; k < n_models; k++) {
        size_t n_ref, n;
        if (fread(&n_ref, sizeof n_ref, 1, f) != 1)
            return 1;
        double *ref = malloc(n_ref * sizeof *ref);
        if (fread(ref, sizeof *ref, n_ref, f) != n_ref)
            return 1;
        double *got = run_model(models[k], &n);
        if (n != n_ref) {
            fprintf(stderr, "%s: %zu values, reference %zu\n", models[k], n, n_ref);
            return 1;
        }
        /* the layout of run_model: B*T*C = 3*140*13 logits, the loss, the gradients */
        const size_t n_logits = 3 * 140 * 13, params_start = n_logits + 1;
        double worst_logit = 0, gmax = 0, worst_grad = 0;
        for (size_t i = 0; i < n_logits; i++)
            worst_logit = fmax(worst_logit, fabs(got[i] - ref[i]) / fmax(1.0, fabs(ref[i])));
        for (size_t i = params_start; i < n; i++)
            gmax = fmax(gmax, fabs(ref[i]));
        for (size_t i = params_start; i < n; i++)
            worst_grad = fmax(worst_grad, fabs(got[i] - ref[i]));
        double loss_err = fabs(got[n_logits] - ref[n_logits]) / fabs(ref[n_logits]);
        printf("%s: logits %.2e, loss %.2e, gradients %.2e of the largest\n", models[k],
               worst_logit, loss_err, worst_grad / gmax);
        if (!(worst_logit < 1e-5 && loss_err < 1e-6 && worst_grad < 1e-3 * gmax))
            failures++;
        free(ref);
        free(got);
    }
    fclose(f);
    return failures == 0 ? 0 : 1;
#endif
}
