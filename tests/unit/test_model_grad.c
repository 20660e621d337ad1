/*
 * test_model_grad.c - finite-difference gradient checks of whole RecNets (double
 * precision): every parameter of the encoder, every layer, every norm and the decoder,
 * through the cross-entropy, with dropout active (fixed masks) and off.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gradcheck.h"
#include "model/model.h"
#include "ops/ops.h"

typedef struct model_ctx {
    sb_model *m;
    sb_tensor *input;
    int32_t *target;
    uint8_t *valid;
} model_ctx;

/* inputs[i] are the model's parameters: point the model at them, run the RecNet and the
 * loss (a [1] output, weighted by the harness). */
static sb_tensor *fn_recnet(sb_graph *g, sb_tensor **in, void *arg)
{
    model_ctx *c = arg;
    for (int i = 0; i < c->m->params.n; i++) {
        c->m->params.p[i].tensor.data = in[i]->data;
        c->m->params.p[i].tensor.grad = in[i]->grad;
    }
    sb_tensor *logits = sb_model_forward(g, c->m, c->input);
    return sb_cross_entropy(g, logits, c->target, c->valid, 1, NULL);
}

static void check_recnet(const char *model, int training)
{
    sb_model_config mc = {.d_input = 5,
                          .d_output = 7,
                          .d_model = 8,
                          .n_layers = 2,
                          .d_state = 4,
                          .n_head = 4,
                          .dropout = 0.25,
                          .rope_base = 1000};
    snprintf(mc.model, sizeof mc.model, "%s", model);
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create(&mc, 5, &m, &err) != SB_OK)
        fail_msg("%s", err.msg);
    /* batch 2, 6 frames, the last frame of sample 1 padding */
    const int B = 2, T = 6;
    static real input_data[2 * 6 * 5];
    static int32_t target[12];
    static uint8_t valid[12];
    memset(input_data, 0, sizeof input_data);
    for (int f = 0; f < B * T; f++) {
        input_data[f * 5 + (f * 3) % 5] = 1;
        target[f] = (f * 5 + 1) % 7;
        valid[f] = f != B * T - 1;
    }
    sb_graph holder;
    sb_graph_init(&holder, 1 << 16);
    int shape[3] = {B, T, 5};
    model_ctx ctx = {.m = m,
                     .input = sb_tensor_wrap(&holder, input_data, 3, shape),
                     .target = target,
                     .valid = valid};
    gc_problem p = {.name = model, .fn = fn_recnet, .ctx = &ctx, .training = training};
    /* the parameters become the checked inputs, with their current (initial) values
     * perturbed so that the norms' and beta's gradients are generic */
    for (int i = 0; i < m->params.n; i++) {
        sb_param *q = &m->params.p[i];
        sb_tensor *t = gc_add_input(&p, q->name, q->ndim, q->shape, -0.1, 0.1, (unsigned)i + 1);
        for (size_t k = 0; k < t->size; k++)
            t->data[k] += m->params.data[q->offset + k];
        if (q->flags & SB_PARAM_BUFFER) {
            /* rotary.inv_freq is a constant, not trained: keep its exact value */
            for (size_t k = 0; k < t->size; k++)
                t->data[k] = m->params.data[q->offset + k];
            t->requires_grad = 0;
        }
    }
    p.rtol = 1e-5; /* long chains: finite differences carry ~1e-7 relative noise */
    gc_check(&p);
    gc_free(&p);
    sb_graph_free(&holder);
    /* the model's tensors point at freed data now: only free the model */
    sb_model_free(m);
}

static void test_transformer_recnet(void **state)
{
    (void)state;
    check_recnet("transformer", 0);
    check_recnet("transformer", 1);
}

static void test_gru_recnet(void **state)
{
    (void)state;
    check_recnet("gru", 0);
    check_recnet("gru", 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transformer_recnet),
        cmocka_unit_test(test_gru_recnet),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
