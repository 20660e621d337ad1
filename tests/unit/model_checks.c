/* model_checks.c - checks of whole models shared by the unit tests (see model_checks.h). */
#include "model_checks.h"

#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ops/ops.h"
#include "test_util.h"

/* ---- streaming ------------------------------------------------------------------------------ */

void check_stream_matches_whole(const sb_model *m, const real *x, int B, int T, const int *chunks,
                                int n_chunks, double tol, const char *label)
{
    const int I = m->cfg.d_input, L = m->cfg.n_layers;
    int covered = 0;
    for (int c = 0; c < n_chunks; c++)
        covered += chunks[c];
    assert_int_equal(covered, T);
    assert_true(sb_model_can_stream(m));
    sb_graph g;
    sb_graph_init(&g, 1 << 22);
    int xs[3] = {B, T, I};
    sb_tensor *xt = sb_tensor_new(&g, 3, xs);
    memcpy(xt->data, x, xt->size * sizeof(real));
    sb_tensor *whole = sb_model_hidden(&g, m, xt, 0);
    const size_t D = whole->size / ((size_t)B * T);
    /* one buffer of B * sf reals per layer, zeroed: the start of the sequences */
    const size_t sf = m->type->stream_state_floats(&m->cfg);
    real *buf = calloc((size_t)L * B * sf, sizeof(real));
    real **states = malloc((size_t)L * sizeof *states);
    assert_true(states != NULL && (buf != NULL || sf == 0));
    for (int l = 0; l < L; l++)
        states[l] = buf + (size_t)l * B * sf;
    int t0 = 0;
    double worst = 0;
    for (int c = 0; c < n_chunks; c++) {
        const int Tc = chunks[c];
        int cs[3] = {B, Tc, I};
        sb_arena_mark mark = sb_arena_get_mark(&g.arena);
        sb_tensor *xc = sb_tensor_new(&g, 3, cs);
        for (int b = 0; b < B; b++)
            memcpy(xc->data + (size_t)b * Tc * I, x + ((size_t)b * T + t0) * I,
                   (size_t)Tc * I * sizeof(real));
        sb_tensor *yc = sb_model_hidden_stream(&g, m, xc, states);
        assert_int_equal(yc->size, (size_t)B * Tc * D);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < Tc; t++)
                for (size_t j = 0; j < D; j++) {
                    double e = fabs((double)yc->data[((size_t)b * Tc + t) * D + j] -
                                    (double)whole->data[((size_t)b * T + t0 + t) * D + j]);
                    worst = e > worst || isnan(e) ? e : worst;
                }
        sb_arena_reset_to(&g.arena, mark);
        t0 += Tc;
    }
    if (!(worst < tol))
        fail_msg("%s: streaming differs from the whole sequence by %g", label, worst);
    free(states);
    free(buf);
    sb_graph_free(&g);
}

/* ---- threads and streaming memory ------------------------------------------------------------ */

real *model_train_step(sb_model *m, int threads, int B, int T, size_t *count)
{
    const int I = m->cfg.d_input, O = m->cfg.d_output;
    omp_set_num_threads(threads);
    sb_graph g;
    sb_graph_init(&g, 1 << 26);
    g.record = 1;
    g.training = 1;
    g.dropout_seed = 5;
    int shape[3] = {B, T, I};
    sb_tensor *x = sb_tensor_zeros(&g, 3, shape);
    int32_t *target = malloc((size_t)B * T * sizeof *target);
    uint8_t *valid = malloc((size_t)B * T);
    assert_true(target != NULL && valid != NULL);
    for (int f = 0; f < B * T; f++) {
        x->data[(size_t)f * I + (size_t)((f * 7 + f / 5) % I)] = 1;
        target[f] = (f * 5 + f / 11) % O;
        valid[f] = 1;
    }
    sb_tensor *logits = sb_model_forward(&g, m, x);
    const size_t n_logits = logits->size;
    real *out = malloc((n_logits + m->params.total) * sizeof(real));
    assert_non_null(out);
    memcpy(out, logits->data, n_logits * sizeof(real));
    sb_tensor *loss = sb_cross_entropy(&g, logits, target, valid, 1, NULL);
    sb_tensor_grad(&g, loss)[0] = 1;
    sb_params_zero_grad(&m->params);
    sb_graph_backward(&g);
    memcpy(out + n_logits, m->params.grad, m->params.total * sizeof(real));
    *count = n_logits + m->params.total;
    free(target);
    free(valid);
    sb_graph_free(&g);
    return out;
}

void check_threads_identical(sb_model *m, int B, int T, const char *label)
{
    const int saved = omp_get_max_threads();
    size_t n1 = 0, n2 = 0;
    real *one = model_train_step(m, 1, B, T, &n1);
    real *two = model_train_step(m, 2, B, T, &n2);
    omp_set_num_threads(saved);
    assert_int_equal(n1, n2);
    if (memcmp(one, two, n1 * sizeof(real)) != 0)
        fail_msg("%s: 1 and 2 threads differ", label);
    free(one);
    free(two);
}

void check_stream_memory_flat(const sb_model *m, int B, int Tc, int chunks, const char *label)
{
    const int I = m->cfg.d_input, L = m->cfg.n_layers;
    const size_t per = m->type->stream_state_floats(&m->cfg);
    real *buf = calloc((size_t)L * B * per, sizeof(real));
    real **states = malloc((size_t)L * sizeof *states);
    assert_true(states != NULL && (buf != NULL || per == 0));
    for (int l = 0; l < L; l++)
        states[l] = buf + (size_t)l * B * per;
    sb_graph g;
    sb_graph_init(&g, 1 << 24);
    size_t first_peak = 0;
    for (int c = 0; c < chunks; c++) {
        sb_graph_reset(&g);
        int shape[3] = {B, Tc, I};
        sb_tensor *x = sb_tensor_zeros(&g, 3, shape);
        for (int f = 0; f < B * Tc; f++)
            x->data[(size_t)f * I + (size_t)((f + c) % I)] = 1;
        sb_tensor *h = sb_model_hidden_stream(&g, m, x, states);
        for (size_t i = 0; i < h->size; i++)
            if (!isfinite((double)h->data[i]))
                fail_msg("%s: streamed output %zu of chunk %d is not finite", label, i, c);
        if (c == 0)
            first_peak = g.arena.peak;
    }
    if (g.arena.peak != first_peak)
        fail_msg("%s: streaming memory grew from %zu to %zu bytes", label, first_peak,
                 g.arena.peak);
    for (size_t i = 0; i < (size_t)L * B * per; i++)
        if (!isfinite((double)buf[i]))
            fail_msg("%s: streamed state %zu is not finite", label, i);
    sb_graph_free(&g);
    free(states);
    free(buf);
}

/* ---- the PyTorch mimic ---------------------------------------------------------------------- */

/* config.<key>, or config.<alt> where the file names it so (alt may be NULL); 0 if neither */
static int config_int(const json_t *cfg, const char *key, const char *alt)
{
    const json_t *v = json_object_get(cfg, key);
    if (v == NULL && alt != NULL)
        v = json_object_get(cfg, alt);
    return (int)json_integer_value(v);
}

void mimic_open(mimic_file *f, const char *relpath)
{
    memset(f, 0, sizeof *f);
    f->root = test_load_json(relpath);
    const json_t *cfg = json_object_get(f->root, "config");
    assert_non_null(cfg);
    f->B = config_int(cfg, "B", NULL);
    f->T = config_int(cfg, "T", NULL);
    f->I = config_int(cfg, "I", "F");
    f->O = config_int(cfg, "O", "C");
    f->D = config_int(cfg, "d", NULL);
    f->H = config_int(cfg, "H", NULL);
    f->L = config_int(cfg, "L", NULL);
    f->seed = (uint64_t)json_integer_value(json_object_get(cfg, "seed"));
    f->input = json_object_get(f->root, "input");
    assert_int_equal(json_array_size(f->input), (size_t)f->B * f->T * f->I);
}

void mimic_close(mimic_file *f)
{
    json_decref(f->root);
    memset(f, 0, sizeof *f);
}

const json_t *mimic_model(const mimic_file *f, const char *name)
{
    const json_t *ref = json_object_get(json_object_get(f->root, "models"), name);
    if (ref == NULL)
        fail_msg("%s: the mimic file has no such model", name);
    return ref;
}

void check_mimic_layout(const json_t *ref_model, const sb_model *m, const char *label)
{
    const json_t *params = json_object_get(ref_model, "params");
    assert_int_equal(json_array_size(params), (size_t)m->params.n);
    assert_int_equal(json_integer_value(json_object_get(ref_model, "count")), m->params.count);
    for (int i = 0; i < m->params.n; i++) {
        const sb_param *p = &m->params.p[i];
        const json_t *rp = json_array_get(params, (size_t)i);
        const char *rname = json_string_value(json_object_get(rp, "name"));
        if (rname == NULL || strcmp(p->name, rname) != 0)
            fail_msg("%s: parameter %d is %s, the reference has %s", label, i, p->name,
                     rname != NULL ? rname : "none");
        const json_t *shape = json_object_get(rp, "shape");
        assert_int_equal(json_array_size(shape), (size_t)p->ndim);
        for (int d = 0; d < p->ndim; d++)
            assert_int_equal(json_integer_value(json_array_get(shape, (size_t)d)), p->shape[d]);
    }
}

void check_mimic_sum_and_first(const json_t *ref_model, const sb_model *m, double sum_rtol,
                               double first_rtol, const char *label)
{
    const json_t *params = json_object_get(ref_model, "params");
    assert_int_equal(json_array_size(params), (size_t)m->params.n);
    for (int i = 0; i < m->params.n; i++) {
        const sb_param *p = &m->params.p[i];
        const json_t *rp = json_array_get(params, (size_t)i);
        double sum = 0;
        for (size_t k = 0; k < p->size; k++)
            sum += (double)p->tensor.data[k];
        const double rsum = json_real_value(json_object_get(rp, "sum"));
        if (!(fabs(sum - rsum) <= sum_rtol * (1 + fabs(rsum))))
            fail_msg("%s: %s sums to %.10g, reference %.10g", label, p->name, sum, rsum);
        const json_t *first = json_object_get(rp, "first");
        assert_true(json_array_size(first) <= p->size);
        for (size_t k = 0; k < json_array_size(first); k++) {
            const double v = (double)p->tensor.data[k];
            const double rv = json_real_value(json_array_get(first, k));
            /* 0 asks for equality itself, not |v - r| <= 0 (which an infinity would fail) */
            const int ok = first_rtol == 0 ? v == rv : fabs(v - rv) <= first_rtol * fabs(rv);
            if (!ok)
                fail_msg("%s: %s[%zu] = %.17g, reference %.17g", label, p->name, k, v, rv);
        }
    }
}

void check_mimic_sampled_values(const json_t *ref_model, const sb_model *m, const char *label)
{
    const json_t *params = json_object_get(ref_model, "params");
    assert_int_equal(json_array_size(params), (size_t)m->params.n);
    for (int i = 0; i < m->params.n; i++) {
        const sb_param *p = &m->params.p[i];
        const json_t *rp = json_array_get(params, (size_t)i);
        const json_t *at = json_object_get(rp, "at"), *vals = json_object_get(rp, "values");
        assert_int_equal(json_array_size(at), json_array_size(vals));
        for (size_t k = 0; k < json_array_size(at); k++) {
            const size_t e = (size_t)json_integer_value(json_array_get(at, k));
            assert_true(e < p->size);
            const double rv = json_real_value(json_array_get(vals, k));
            /* torch keeps float32 weights: compared as float32 in both builds */
            if ((float)p->tensor.data[e] != (float)rv)
                fail_msg("%s: %s[%zu] = %.9g, torch %.9g", label, p->name, e,
                         (double)p->tensor.data[e], rv);
        }
    }
}

double check_mimic_logits(const json_t *ref_model, const sb_model *m, const mimic_file *f,
                          double rel_floor, double tol, const char *label)
{
    sb_graph g;
    sb_graph_init(&g, 1 << 22);
    int xs[3] = {f->B, f->T, f->I};
    sb_tensor *x = sb_tensor_new(&g, 3, xs);
    for (size_t i = 0; i < x->size; i++)
        x->data[i] = (real)json_real_value(json_array_get(f->input, i));
    sb_tensor *y = sb_model_forward(&g, m, x);
    const json_t *logits = json_object_get(ref_model, "logits");
    assert_int_equal(json_array_size(logits), y->size);
    double worst = 0;
    for (size_t i = 0; i < y->size; i++) {
        const double rv = json_real_value(json_array_get(logits, i));
        const double e = fabs((double)y->data[i] - rv) / (rel_floor + fabs(rv));
        worst = e > worst || isnan(e) ? e : worst;
    }
    if (!(worst < tol))
        fail_msg("%s: logits differ from the mimic by %g (relative, floor %g)", label, worst,
                 rel_floor);
    sb_graph_free(&g);
    return worst;
}

void check_against_mimic(const json_t *ref_model, const sb_model *m, const mimic_file *f,
                         const mimic_tolerances *tol, const char *label)
{
    check_mimic_layout(ref_model, m, label);
    check_mimic_sum_and_first(ref_model, m, tol->sum_rtol, tol->first_rtol, label);
    check_mimic_logits(ref_model, m, f, tol->logits_floor, tol->logits_tol, label);
}
