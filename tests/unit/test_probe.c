/* test_probe.c - the probe's numerics (src/train/probe.c, docs/probe.md): the Cholesky solver
 * and the ridge readout against brute-force Gaussian elimination, and the layers' gate hooks
 * against independent computations from their parameters (Mamba2's decay, Gated DeltaNet's
 * decay and beta, the Transformer's attention share on gap frames). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/rng.h"
#include "model/model.h"
#include "train/probe.h"

/* a small deterministic generator for the test data (uniform in [-1, 1)) */
static double urand(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*s >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

/* Solves A X = B by Gaussian elimination with partial pivoting (A [n x n], B [n x c]). */
static void gauss_solve(double *A, int n, double *B, int c)
{
    for (int k = 0; k < n; k++) {
        int p = k;
        for (int i = k + 1; i < n; i++)
            if (fabs(A[i * n + k]) > fabs(A[p * n + k]))
                p = i;
        for (int j = 0; j < n; j++) {
            double t = A[k * n + j];
            A[k * n + j] = A[p * n + j];
            A[p * n + j] = t;
        }
        for (int j = 0; j < c; j++) {
            double t = B[k * c + j];
            B[k * c + j] = B[p * c + j];
            B[p * c + j] = t;
        }
        for (int i = k + 1; i < n; i++) {
            const double f = A[i * n + k] / A[k * n + k];
            for (int j = k; j < n; j++)
                A[i * n + j] -= f * A[k * n + j];
            for (int j = 0; j < c; j++)
                B[i * c + j] -= f * B[k * c + j];
        }
    }
    for (int i = n - 1; i >= 0; i--)
        for (int j = 0; j < c; j++) {
            double s = B[i * c + j];
            for (int k = i + 1; k < n; k++)
                s -= A[i * n + k] * B[k * c + j];
            B[i * c + j] = s / A[i * n + i];
        }
}

static void test_cholesky_solve(void **state)
{
    (void)state;
    enum { N = 9, C = 4 };
    uint64_t s = 7;
    double M[N * N], A[N * N], A2[N * N], B[N * C], B2[N * C];
    for (int i = 0; i < N * N; i++)
        M[i] = urand(&s);
    for (int i = 0; i < N; i++) /* A = M M^T + I: symmetric positive definite */
        for (int j = 0; j < N; j++) {
            double v = i == j ? 1.0 : 0.0;
            for (int k = 0; k < N; k++)
                v += M[i * N + k] * M[j * N + k];
            A[i * N + j] = A2[i * N + j] = v;
        }
    for (int i = 0; i < N * C; i++)
        B[i] = B2[i] = urand(&s);
    sb_error err = {0};
    assert_int_equal(sb_probe_cholesky_solve(A, N, B, C, &err), SB_OK);
    gauss_solve(A2, N, B2, C);
    for (int i = 0; i < N * C; i++)
        assert_true(fabs(B[i] - B2[i]) <= 1e-10 * (1.0 + fabs(B2[i])));
    /* not positive definite: an error, no crash */
    double bad[4] = {1.0, 2.0, 2.0, 1.0}, rhs[2] = {1.0, 1.0};
    assert_int_equal(sb_probe_cholesky_solve(bad, 2, rhs, 1, &err), SB_ERR_RUNTIME);
    assert_non_null(strstr(err.msg, "--ridge"));
}

static void test_ridge_fit(void **state)
{
    (void)state;
    enum { R = 200, D = 5, C = 6, N = D + 1 };
    uint64_t s = 11;
    double *X = malloc(R * D * sizeof *X), W[N * C], A[N * N] = {0}, Bm[N * C] = {0};
    int32_t y[R];
    for (int r = 0; r < R; r++) {
        for (int d = 0; d < D; d++)
            X[r * D + d] = urand(&s) + (d == 0 ? 3.0 : 0.0); /* an offset: the bias matters */
        y[r] = (int32_t)((urand(&s) + 1.0) * 0.5 * C) % C;
    }
    const double lambda = 0.05;
    sb_error err = {0};
    assert_int_equal(sb_probe_ridge_fit(X, y, R, D, C, lambda, W, &err), SB_OK);
    /* brute force: the normal equations with the bias column, ridge on the features only */
    for (int r = 0; r < R; r++) {
        double xa[N];
        for (int d = 0; d < D; d++)
            xa[d] = X[r * D + d];
        xa[D] = 1.0;
        for (int i = 0; i < N; i++) {
            for (int j = 0; j < N; j++)
                A[i * N + j] += xa[i] * xa[j];
            Bm[i * C + y[r]] += xa[i];
        }
    }
    double scale = 0.0;
    for (int i = 0; i < D; i++)
        scale += A[i * N + i] / D;
    for (int i = 0; i < D; i++)
        A[i * N + i] += lambda * scale;
    gauss_solve(A, N, Bm, C);
    for (int i = 0; i < N * C; i++)
        assert_true(fabs(W[i] - Bm[i]) <= 1e-9 * (1.0 + fabs(Bm[i])));
    /* a known solution: targets that are a linear function of separable features are
     * reproduced exactly as lambda -> 0 (one-hot rows: x = e_c) */
    double Xk[C * 3 * C];
    int32_t yk[3 * C];
    for (int r = 0; r < 3 * C; r++) {
        for (int d = 0; d < C; d++)
            Xk[r * C + d] = d == r % C ? 1.0 : 0.0;
        yk[r] = r % C;
    }
    double Wk[(C + 1) * C];
    assert_int_equal(sb_probe_ridge_fit(Xk, yk, 3 * C, C, C, 1e-12, Wk, &err), SB_OK);
    for (int c = 0; c < C; c++)
        for (int k = 0; k < C; k++) { /* prediction for e_c: W[c] + bias row */
            const double p = Wk[c * C + k] + Wk[C * C + k];
            assert_true(fabs(p - (c == k ? 1.0 : 0.0)) < 1e-6);
        }
    free(X);
}

/* LDA against a direct computation: class means, the pooled covariance from centred rows,
 * the shrinkage on the features' variance, solved by Gaussian elimination; then on well
 * separated Gaussian classes it classifies (nearly) everything, where least squares onto
 * one-hot targets of many classes does visibly worse. */
static void test_lda_fit(void **state)
{
    (void)state;
    enum { R = 600, D = 4, C = 5, N = D + 1 };
    uint64_t s = 23;
    double *X = malloc(R * D * sizeof *X), W[N * C];
    int32_t y[R];
    double centre[C][D];
    for (int c = 0; c < C; c++)
        for (int d = 0; d < D; d++)
            centre[c][d] = 3.0 * urand(&s);
    for (int r = 0; r < R; r++) {
        y[r] = r % C == 4 && r % 3 ? 0 : r % C; /* unequal class sizes: the log prior matters */
        for (int d = 0; d < D; d++)
            X[r * D + d] = centre[y[r]][d] + 0.3 * urand(&s) + (d == 1 ? 0.2 * X[r * D] : 0.0);
    }
    const double lambda = 0.01;
    sb_error err = {0};
    assert_int_equal(sb_probe_lda_fit(X, y, R, D, C, lambda, W, &err), SB_OK);
    double mu[C][D] = {{0}}, cnt[C] = {0}, mean[D] = {0}, S[D * D] = {0};
    for (int r = 0; r < R; r++) {
        cnt[y[r]] += 1.0;
        for (int d = 0; d < D; d++)
            mu[y[r]][d] += X[r * D + d], mean[d] += X[r * D + d] / R;
    }
    for (int c = 0; c < C; c++)
        for (int d = 0; d < D; d++)
            mu[c][d] /= cnt[c];
    double var = 0.0;
    for (int r = 0; r < R; r++)
        for (int i = 0; i < D; i++) {
            var += (X[r * D + i] - mean[i]) * (X[r * D + i] - mean[i]) / (R * D);
            for (int j = 0; j < D; j++)
                S[i * D + j] += (X[r * D + i] - mu[y[r]][i]) * (X[r * D + j] - mu[y[r]][j]) / R;
        }
    for (int i = 0; i < D; i++)
        S[i * D + i] += lambda * var;
    double B[D * C];
    for (int i = 0; i < D; i++)
        for (int c = 0; c < C; c++)
            B[i * C + c] = mu[c][i];
    gauss_solve(S, D, B, C);
    for (int c = 0; c < C; c++) {
        double quad = 0.0;
        for (int i = 0; i < D; i++) {
            assert_true(fabs(W[i * C + c] - B[i * C + c]) <= 1e-8 * (1.0 + fabs(B[i * C + c])));
            quad += mu[c][i] * B[i * C + c];
        }
        const double bias = -0.5 * quad + log(cnt[c] / R);
        assert_true(fabs(W[D * C + c] - bias) <= 1e-8 * (1.0 + fabs(bias)));
    }
    int right = 0;
    for (int r = 0; r < R; r++) {
        int best = 0;
        double bs = -HUGE_VAL;
        for (int c = 0; c < C; c++) {
            double v = W[D * C + c];
            for (int i = 0; i < D; i++)
                v += X[r * D + i] * W[i * C + c];
            if (v > bs)
                bs = v, best = c;
        }
        right += best == y[r];
    }
    assert_true(right >= R * 95 / 100);
    /* a class without rows is never predicted */
    double W6[N * (C + 1)];
    assert_int_equal(sb_probe_lda_fit(X, y, R, D, C + 1, lambda, W6, &err), SB_OK);
    assert_true(W6[D * (C + 1) + C] < -1e29);
    free(X);
}

static sb_model *make_model(const char *name, int D, int L)
{
    sb_model_config cfg = {.d_input = 7,
                           .d_output = 9,
                           .d_model = D,
                           .n_layers = L,
                           .d_state = 8,
                           .n_head = sb_num_heads(D),
                           .dropout = 0.0,
                           .rope_base = 1000.0};
    snprintf(cfg.model, sizeof cfg.model, "%s", name);
    sb_model *m = NULL;
    sb_error err = {0};
    assert_int_equal(sb_model_create(&cfg, 3, &m, &err), SB_OK);
    /* move the parameters off their initial values so that biases matter */
    uint64_t s = 5;
    for (size_t i = 0; i < m->params.total; i++)
        m->params.data[i] += (real)(0.05 * urand(&s));
    return m;
}

static sb_tensor *random_input(sb_graph *g, int B, int T, int D, uint64_t seed)
{
    int shape[3] = {B, T, D};
    sb_tensor *x = sb_tensor_new(g, 3, shape);
    for (size_t i = 0; i < x->size; i++)
        x->data[i] = (real)urand(&seed);
    return x;
}

static const real *param_data(const sb_model *m, const char *name)
{
    sb_param *p = sb_params_find(&m->params, name);
    assert_non_null(p);
    return m->params.data + p->offset;
}

static double softplus(double x)
{
    return x > 20.0 ? x : log(1.0 + exp(x));
}

/* Mamba2: a_t = exp(-softplus(x W_dt^T + dt_bias) exp(A_log)), W_dt the last M rows of
 * in_proj.weight. */
static void test_mamba2_gates(void **state)
{
    (void)state;
    const int D = 16, B = 2, T = 5, E = 2 * D, N = 8;
    sb_model *m = make_model("mamba2", D, 1);
    const int M = 2 * m->cfg.n_head, rows = 2 * E + 2 * N + M;
    sb_graph g;
    sb_graph_init(&g, 1 << 20);
    g.record = 0;
    sb_tensor *x = random_input(&g, B, T, D, 9);
    uint8_t gap[64];
    memset(gap, 0, sizeof gap);
    sb_gate_desc desc;
    assert_non_null(m->type->probe_gates);
    sb_tensor *out = m->type->probe_gates(&g, m, 0, x, gap, &desc);
    assert_int_equal(desc.n_kinds, 1);
    assert_int_equal(desc.n_groups, M);
    assert_int_equal(out->shape[2], M);
    const real *w_in = param_data(m, "layers.0.in_proj.weight");
    const real *dt_bias = param_data(m, "layers.0.dt_bias");
    const real *A_log = param_data(m, "layers.0.A_log");
    for (int r = 0; r < B * T; r++)
        for (int h = 0; h < M; h++) {
            double dt = 0.0;
            for (int d = 0; d < D; d++)
                dt += (double)x->data[r * D + d] * (double)w_in[(size_t)(rows - M + h) * D + d];
            const double want = exp(-softplus(dt + (double)dt_bias[h]) * exp((double)A_log[h]));
            assert_true(fabs((double)out->data[r * M + h] - want) < 1e-5);
            assert_true(want > 0.0 && want <= 1.0);
        }
    sb_graph_free(&g);
    sb_model_free(m);
}

/* Gated DeltaNet: decay exp(-exp(A_log) softplus(x Wa^T + dt_bias)) and beta sigmoid(x Wb^T). */
static void test_gated_delta_net_gates(void **state)
{
    (void)state;
    const int D = 16, B = 1, T = 6;
    sb_model *m = make_model("gated_delta_net", D, 1);
    const int H = m->cfg.n_head;
    sb_graph g;
    sb_graph_init(&g, 1 << 20);
    g.record = 0;
    sb_tensor *x = random_input(&g, B, T, D, 13);
    uint8_t gap[64];
    memset(gap, 0, sizeof gap);
    sb_gate_desc desc;
    sb_tensor *out = m->type->probe_gates(&g, m, 0, x, gap, &desc);
    assert_int_equal(desc.n_kinds, 2);
    assert_int_equal(desc.n_groups, H);
    const real *wa = param_data(m, "layers.0.a_proj.weight");
    const real *wb = param_data(m, "layers.0.b_proj.weight");
    const real *A_log = param_data(m, "layers.0.A_log");
    const real *dt_bias = param_data(m, "layers.0.dt_bias");
    for (int r = 0; r < B * T; r++)
        for (int h = 0; h < H; h++) {
            double a = 0.0, b = 0.0;
            for (int d = 0; d < D; d++) {
                a += (double)x->data[r * D + d] * (double)wa[h * D + d];
                b += (double)x->data[r * D + d] * (double)wb[h * D + d];
            }
            const double decay = exp(-exp((double)A_log[h]) * softplus(a + (double)dt_bias[h]));
            const double beta = 1.0 / (1.0 + exp(-b));
            assert_true(fabs((double)out->data[r * 2 * H + h] - decay) < 1e-5);
            assert_true(fabs((double)out->data[r * 2 * H + H + h] - beta) < 1e-5);
        }
    sb_graph_free(&g);
    sb_model_free(m);
}

/* Transformer: the share of attention on gap frames is 0 with no gap, 1 when every frame is a
 * gap, and at frame 0 it is exactly whether frame 0 is a gap. */
static void test_transformer_gap_attention(void **state)
{
    (void)state;
    const int D = 16, B = 1, T = 7;
    sb_model *m = make_model("transformer", D, 1);
    const int H = m->cfg.n_head;
    sb_graph g;
    sb_graph_init(&g, 1 << 20);
    g.record = 0;
    sb_tensor *x = random_input(&g, B, T, D, 17);
    uint8_t gap[64];
    sb_gate_desc desc;
    for (int fill = 0; fill < 2; fill++) {
        memset(gap, fill, sizeof gap);
        sb_tensor *out = m->type->probe_gates(&g, m, 0, x, gap, &desc);
        for (int i = 0; i < B * T * H; i++)
            assert_true(fabs((double)out->data[i] - fill) < 1e-6);
    }
    for (int t = 0; t < T; t++)
        gap[t] = (uint8_t)(t % 2);
    sb_tensor *out = m->type->probe_gates(&g, m, 0, x, gap, &desc);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            const double v = (double)out->data[t * H + h];
            assert_true(v >= 0.0 && v <= 1.0);
            if (t == 0)
                assert_true(fabs(v) < 1e-6);
        }
    sb_graph_free(&g);
    sb_model_free(m);
}

/* Only the layer files decide: every registered type either has gates or a gating taxonomy. */
static void test_registry_hooks(void **state)
{
    (void)state;
    const sb_layer_type *const *types = sb_layer_types();
    int with = 0;
    for (int i = 0; types[i] != NULL; i++)
        with += types[i]->probe_gates != NULL;
    assert_true(with >= 13); /* all but retnet and s4 */
    assert_null(sb_layer_type_find("retnet")->probe_gates);
    assert_null(sb_layer_type_find("s4")->probe_gates);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cholesky_solve),
        cmocka_unit_test(test_ridge_fit),
        cmocka_unit_test(test_lda_fit),
        cmocka_unit_test(test_mamba2_gates),
        cmocka_unit_test(test_gated_delta_net_gates),
        cmocka_unit_test(test_transformer_gap_attention),
        cmocka_unit_test(test_registry_hooks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
