/*
 * test_model_ref.c - RecNets against the reference PyTorch model (double precision).
 *
 * tests/data/torch/<model>.json were made by tools/make_torch_vectors.py with the
 * reference's models/ssm_models.py: a tiny RecNet built after torch.manual_seed(3), its
 * initial state_dict, and one float64 forward/backward on a fixed batch. Here the same
 * model is built from the same seed: the initial weights must be identical (our init
 * reproduces torch's generator and draw order bit for bit), and logits, loss and every
 * parameter gradient must agree to double-precision rounding.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model/model.h"
#include "ops/ops.h"
#include "test_util.h"

static double rel_err(double a, double b)
{
    double scale = fmax(fabs(a), fabs(b));
    return scale > 0 ? fabs(a - b) / scale : 0.0;
}

static void check_model(const char *name)
{
    char rel[128];
    snprintf(rel, sizeof rel, "torch/%s.json", name);
    json_t *ref = test_load_json(rel);
    sb_model_config mc;
    memset(&mc, 0, sizeof mc);
    snprintf(mc.model, sizeof mc.model, "%s", name);
    mc.d_input = (int)json_integer_value(json_object_get(ref, "inp"));
    mc.d_output = (int)json_integer_value(json_object_get(ref, "out"));
    mc.d_model = (int)json_integer_value(json_object_get(ref, "d_model"));
    mc.n_layers = (int)json_integer_value(json_object_get(ref, "layers"));
    mc.n_head = (int)json_integer_value(json_object_get(ref, "n_head"));
    mc.d_state = 8;
    mc.dropout = 0.2;
    mc.rope_base = 1000;
    sb_model *m = NULL;
    sb_error err = {0};
    if (sb_model_create(&mc, (uint64_t)json_integer_value(json_object_get(ref, "seed")), &m,
                        &err) != SB_OK)
        fail_msg("%s", err.msg);

    /* 1. the state_dict: same names, same order, same shapes, identical initial values */
    json_t *sd = json_object_get(ref, "state_dict");
    assert_int_equal(json_array_size(sd), (size_t)m->params.n);
    for (int i = 0; i < m->params.n; i++) {
        const sb_param *p = &m->params.p[i];
        json_t *e = json_array_get(sd, (size_t)i);
        if (strcmp(p->name, json_string_value(json_object_get(e, "name"))) != 0)
            fail_msg("%s: state_dict entry %d is %s, expected %s", name, i, p->name,
                     json_string_value(json_object_get(e, "name")));
        json_t *shape = json_object_get(e, "shape");
        assert_int_equal(json_array_size(shape), (size_t)p->ndim);
        for (int d = 0; d < p->ndim; d++)
            assert_int_equal(json_integer_value(json_array_get(shape, (size_t)d)), p->shape[d]);
        json_t *values = json_object_get(e, "values");
        for (size_t k = 0; k < p->size; k++) {
            double want = json_number_value(json_array_get(values, k));
            double got = (double)m->params.data[p->offset + k];
            if (want != got)
                fail_msg("%s: initial %s[%zu] = %.9g, torch has %.9g", name, p->name, k, got, want);
        }
    }

    /* 2. forward and backward on the fixed batch (evaluation mode: no dropout) */
    const int B = (int)json_integer_value(json_object_get(ref, "batch"));
    const int T = (int)json_integer_value(json_object_get(ref, "frames"));
    const int I = mc.d_input;
    sb_graph g;
    sb_graph_init(&g, 1 << 22);
    g.record = 1;
    g.training = 0;
    int shape[3] = {B, T, I};
    sb_tensor *x = sb_tensor_zeros(&g, 3, shape);
    int32_t *target = malloc((size_t)(B * T) * sizeof *target);
    uint8_t *valid = malloc((size_t)(B * T));
    json_t *cls = json_object_get(ref, "input_classes"), *tgt = json_object_get(ref, "target");
    for (int f = 0; f < B * T; f++) {
        x->data[(size_t)f * (size_t)I +
                (size_t)json_integer_value(json_array_get(cls, (size_t)f))] = 1;
        target[f] = (int32_t)json_integer_value(json_array_get(tgt, (size_t)f));
        valid[f] = 1;
    }
    sb_tensor *logits = sb_model_forward(&g, m, x);
    json_t *ref_logits = json_object_get(ref, "logits");
    assert_int_equal(json_array_size(ref_logits), logits->size);
    double worst = 0;
    for (size_t k = 0; k < logits->size; k++)
        worst =
            fmax(worst, rel_err(logits->data[k], json_number_value(json_array_get(ref_logits, k))));
    if (!(worst < 1e-10))
        fail_msg("%s: logits differ from torch by %.3g (relative)", name, worst);
    sb_tensor *loss = sb_cross_entropy(&g, logits, target, valid, 1, NULL);
    assert_true(rel_err(loss->data[0], json_number_value(json_object_get(ref, "loss"))) < 1e-12);
    sb_tensor_grad(&g, loss)[0] = 1;
    sb_graph_backward(&g);
    json_t *grads = json_object_get(ref, "grads");
    int n_checked = 0;
    for (int i = 0; i < m->params.n; i++) {
        const sb_param *p = &m->params.p[i];
        json_t *gv = json_object_get(grads, p->name);
        if (p->flags & SB_PARAM_BUFFER) {
            assert_null(gv);
            continue;
        }
        if (gv == NULL)
            fail_msg("%s: torch has no gradient for %s", name, p->name);
        double gmax = 0;
        for (size_t k = 0; k < p->size; k++)
            gmax = fmax(gmax, fabs(json_number_value(json_array_get(gv, k))));
        for (size_t k = 0; k < p->size; k++) {
            double want = json_number_value(json_array_get(gv, k));
            double got = (double)m->params.grad[p->offset + k];
            /* relative to the tensor's largest gradient: tiny entries carry rounding */
            if (!(fabs(got - want) <= 1e-9 * gmax + 1e-15))
                fail_msg("%s: d/d%s[%zu] = %.12g, torch %.12g", name, p->name, k, got, want);
        }
        n_checked++;
    }
    assert_true(n_checked >= 8);
    free(target);
    free(valid);
    sb_graph_free(&g);
    sb_model_free(m);
    json_decref(ref);
}

static void test_transformer_matches_torch(void **state)
{
    (void)state;
    check_model("transformer");
}

static void test_gru_matches_torch(void **state)
{
    (void)state;
    check_model("gru");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transformer_matches_torch),
        cmocka_unit_test(test_gru_matches_torch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
