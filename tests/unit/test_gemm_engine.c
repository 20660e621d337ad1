/* test_gemm_engine.c - the GEMM engines (src/tensor/gemm_engine.h): OpenBLAS and oneDNN
 * agree on every transpose and path, each is bit-reproducible (and, in deterministic mode,
 * the same on 1 and 2 threads), --gemm onednn refuses in a build without oneDNN, the default
 * engine table is the size rule and measures nothing, the fingerprint tells settings apart,
 * and a short training runs in
 * each engine and precision (finite, learning, and deterministic across thread counts; bf16
 * refused under --gemm openblas). */
#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tensor/gemm_engine.h"
#include "test_util.h"
#include "train/trainer.h"
#include <cmocka.h>

static char tmpdir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sb_test_gemm_XXXXXX");
    if (mkdtemp(tmpdir) == NULL)
        return -1;
    /* a cache folder of this test's own, to see that nothing is written there */
    return setenv("XDG_CACHE_HOME", tmpdir, 1);
}

static int teardown(void **state)
{
    (void)state;
    return test_remove_dir(tmpdir);
}

typedef struct shape {
    int M, N, K;
} shape;

/* a row split, a column split, a K split (K >= 4096, K >= 4 max(M, N)), the decoder's
 * shape, and one below the serial threshold */
static const shape shapes[] = {
    {300, 200, 150}, {40, 700, 96}, {48, 64, 5000}, {640, 1601, 128}, {7, 5, 3}};

/* op(A) M x K and op(B) K x N with their leading dimensions for the transposes */
static void run_product(sb_gemm_kind engine, int blocked, int ta, int tb, shape s, const real *A,
                        const real *B, real *C)
{
    int lda = ta ? s.M : s.K, ldb = tb ? s.K : s.N;
    sb_gemm_run(engine, blocked, ta, tb, s.M, s.N, s.K, 1, A, lda, B, ldb, 0, C, s.N);
}

static void test_engines_agree(void **state)
{
    (void)state;
    if (!sb_gemm_onednn_available())
        skip();
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        shape s = shapes[k];
        size_t mn = (size_t)s.M * (size_t)s.N;
        real *A = test_random_matrix((size_t)s.M * (size_t)s.K, 1 + k);
        real *B = test_random_matrix((size_t)s.K * (size_t)s.N, 100 + k);
        real *ref = malloc(mn * sizeof *ref), *C = malloc(mn * sizeof *C);
        for (int t = 0; t < 4; t++) {
            int ta = t & 1, tb = t >> 1;
            run_product(SB_GEMM_OPENBLAS, 1, ta, tb, s, A, B, ref);
            for (int blocked = 0; blocked < 2; blocked++) {
                run_product(SB_GEMM_ONEDNN, blocked, ta, tb, s, A, B, C);
                double diff = test_max_rel_diff(C, ref, mn);
                if (!(diff < 1e-5))
                    fail_msg("%dx%dx%d trans %d%d blocked %d: oneDNN vs OpenBLAS %g", s.M, s.N, s.K,
                             ta, tb, blocked, diff);
            }
        }
        free(A);
        free(B);
        free(ref);
        free(C);
    }
}

/* The same product twice on one thread count gives the same bits on every engine and
 * path; blocked (deterministic mode), 1 and 2 threads agree too. */
static void test_reproducible(void **state)
{
    (void)state;
    int engines = sb_gemm_onednn_available() ? 2 : 1;
    const int saved = omp_get_max_threads();
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        shape s = shapes[k];
        size_t mn = (size_t)s.M * (size_t)s.N;
        real *A = test_random_matrix((size_t)s.M * (size_t)s.K, 7 + k);
        real *B = test_random_matrix((size_t)s.K * (size_t)s.N, 70 + k);
        real *c1 = malloc(mn * sizeof *c1), *c2 = malloc(mn * sizeof *c2);
        for (int e = 0; e < engines; e++) {
            sb_gemm_kind engine = e == 0 ? SB_GEMM_OPENBLAS : SB_GEMM_ONEDNN;
            for (int blocked = 0; blocked < 2; blocked++) {
                omp_set_num_threads(2);
                run_product(engine, blocked, 0, 1, s, A, B, c1);
                run_product(engine, blocked, 0, 1, s, A, B, c2);
                assert_memory_equal(c1, c2, mn * sizeof *c1);
                if (blocked || engine == SB_GEMM_OPENBLAS) {
                    omp_set_num_threads(1);
                    run_product(engine, blocked, 0, 1, s, A, B, c2);
                    assert_memory_equal(c1, c2, mn * sizeof *c1);
                }
            }
        }
        free(A);
        free(B);
        free(c1);
        free(c2);
    }
    omp_set_num_threads(saved);
}

static void test_onednn_request(void **state)
{
    (void)state;
    sb_error err = {0};
    sb_status st = sb_gemm_engine_set(SB_GEMM_ONEDNN, 0, &err);
    if (sb_gemm_onednn_available()) {
        assert_int_equal(st, SB_OK);
        assert_non_null(sb_gemm_onednn_version());
    } else {
        assert_int_equal(st, SB_ERR_INVALID);
        assert_string_equal(err.msg, "--gemm onednn: this build has no oneDNN (install "
                                     "libdnnl-dev and rebuild, or use --gemm openblas or auto)");
        assert_null(sb_gemm_onednn_version());
    }
    assert_int_equal(sb_gemm_engine_set(SB_GEMM_OPENBLAS, 0, &err), SB_OK);
}

/* ---- the engine table ---------------------------------------------------------------------- */

/* The default table is the size rule (oneDNN from SB_GEMM_ONEDNN_MIN_FLOPS, OpenBLAS below and
 * inside parallel regions); the two named tables give their engine at the top level. */
static void test_engine_table(void **state)
{
    (void)state;
    sb_error err = {0};
    const int dnnl = sb_gemm_onednn_available();
    const sb_gemm_kind big = dnnl ? SB_GEMM_ONEDNN : SB_GEMM_OPENBLAS;
    assert_int_equal(sb_gemm_engine_set(SB_GEMM_AUTO, 0, &err), SB_OK);
    assert_string_equal(sb_gemm_table_name(), dnnl ? SB_GEMM_TABLE_AUTO : "openblas");
    assert_int_equal(sb_gemm_engine_for(200, 200, 200), big); /* exactly 16 MFLOP */
    assert_int_equal(sb_gemm_engine_for(200, 200, 199), SB_GEMM_OPENBLAS);
    assert_int_equal(sb_gemm_engine_for(6400, 1601, 128), big);
    assert_int_equal(sb_gemm_engine_for(7, 5, 3), SB_GEMM_OPENBLAS);
    int inside = -1;
#pragma omp parallel num_threads(2)
    {
#pragma omp single
        inside = sb_gemm_engine_for(6400, 1601, 128);
    }
    assert_int_equal(inside, SB_GEMM_OPENBLAS);
    /* deterministic mode keeps the table (oneDNN then runs block by block) */
    assert_int_equal(sb_gemm_engine_set(SB_GEMM_AUTO, 1, &err), SB_OK);
    assert_int_equal(sb_gemm_engine_for(6400, 1601, 128), big);
    assert_int_equal(sb_gemm_engine_set(SB_GEMM_OPENBLAS, 0, &err), SB_OK);
    assert_int_equal(sb_gemm_engine_for(6400, 1601, 128), SB_GEMM_OPENBLAS);
    assert_string_equal(sb_gemm_table_name(), "openblas");
    if (dnnl) {
        assert_int_equal(sb_gemm_engine_set(SB_GEMM_ONEDNN, 0, &err), SB_OK);
        assert_int_equal(sb_gemm_engine_for(7, 5, 3), SB_GEMM_ONEDNN);
        assert_string_equal(sb_gemm_table_name(), "onednn");
    }
    /* the recorded names read back; an unknown one is refused with the known ones */
    const char *names[3] = {"openblas", "onednn", SB_GEMM_TABLE_AUTO};
    const sb_gemm_kind kinds[3] = {SB_GEMM_OPENBLAS, SB_GEMM_ONEDNN, SB_GEMM_AUTO};
    for (int i = 0; i < 3; i++) {
        sb_gemm_kind k = (sb_gemm_kind)-1;
        assert_int_equal(sb_gemm_table_parse(names[i], &k, &err), SB_OK);
        assert_int_equal(k, kinds[i]);
    }
    sb_gemm_kind k;
    assert_int_equal(sb_gemm_table_parse("auto", &k, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "'auto' is not one this version knows"));
    assert_int_equal(sb_gemm_engine_set(SB_GEMM_OPENBLAS, 0, &err), SB_OK);
}

/* Nothing is measured or cached: products under the default table leave no file in the
 * cache folder (the previous design wrote gemm.json there, and a full or contended cache
 * changed both the bits and the speed of later runs). */
static void test_nothing_measured(void **state)
{
    (void)state;
    sb_error err = {0};
    assert_int_equal(sb_gemm_engine_set(SB_GEMM_AUTO, 0, &err), SB_OK);
    omp_set_num_threads(2);
    const int n = 256;
    real *A = test_random_matrix((size_t)n * n, 3), *B = test_random_matrix((size_t)n * n, 4);
    real *C = calloc((size_t)n * n, sizeof *C);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            sb_gemm(ta, tb, n, n, n, 1, A, n, B, n, 0, C, n);
    char path[600];
    snprintf(path, sizeof path, "%s/selectivbench", tmpdir);
    assert_int_equal(access(path, F_OK), -1);
    free(A);
    free(B);
    free(C);
    assert_int_equal(sb_gemm_engine_set(SB_GEMM_OPENBLAS, 0, &err), SB_OK);
}

/* The fingerprint: equal for equal settings, different when the table, the thread count
 * (outside deterministic mode) or the precision differs. */
static void test_fingerprint(void **state)
{
    (void)state;
    sb_run_config c = sb_run_config_default();
    sb_fingerprint a, b;
    sb_gemm_fingerprint(&c, 2, &a);
    sb_gemm_fingerprint(&c, 2, &b);
    assert_string_equal(a.digest, b.digest);
    assert_int_equal(strlen(a.digest), 8);
    assert_string_equal(a.table, sb_gemm_onednn_available() ? SB_GEMM_TABLE_AUTO : "openblas");
    assert_non_null(strstr(a.text, "threads=2;"));
    assert_non_null(strstr(a.text, "openblas="));
    sb_gemm_fingerprint(&c, 1, &b);
    assert_string_not_equal(a.digest, b.digest);
    c.deterministic = 1;
    sb_gemm_fingerprint(&c, 1, &a);
    sb_gemm_fingerprint(&c, 2, &b);
    assert_string_equal(a.digest, b.digest);
    assert_non_null(strstr(a.text, "threads=any;"));
    c.deterministic = 0;
    sb_gemm_fingerprint(&c, 2, &a);
    c.gemm = SB_GEMM_OPENBLAS;
    sb_gemm_fingerprint(&c, 2, &b);
    if (sb_gemm_onednn_available())
        assert_string_not_equal(a.digest, b.digest);
    c.gemm = SB_GEMM_AUTO;
    c.precision = SB_PRECISION_BF16;
    sb_gemm_fingerprint(&c, 2, &b);
    assert_string_not_equal(a.digest, b.digest);
}

/* ---- training ----------------------------------------------------------------------------- */

static sb_run_config tiny_run(sb_gemm_kind engine, int deterministic)
{
    sb_run_config c = sb_run_config_default();
    snprintf(c.model, sizeof c.model, "transformer");
    c.task.grammar.vocab = 9, c.task.grammar.amb = 8, c.task.grammar.grammar_scale = 1;
    c.task.train_seqlen_max = c.task.test_seqlen_max = 20;
    c.task.dataset_size = 256;
    c.task.test_size = 32;
    c.feat_size = 32;
    c.layers = 2;
    c.batch_size = 16;
    c.test_bs = 16;
    c.epoch_size = 64;
    c.lr = 3e-3;
    c.seed = c.task.grammar.seed = 3;
    c.gemm = engine;
    c.deterministic = deterministic;
    return c;
}

static void train(const sb_run_config *c, int threads, const char *ckpt, int64_t stop_after,
                  sb_train_outcome *res)
{
    sb_train_options opt = {
        .threads = threads, .ckpt_path = ckpt, .mem_budget_gb = 1.0, .stop_after = stop_after};
    sb_error err = {0};
    if (sb_train(c, &opt, res, &err) != SB_OK)
        fail_msg("training failed: %s", err.msg);
}

static void assert_same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    assert_non_null(fa);
    assert_non_null(fb);
    int x, y, n = 0;
    do {
        x = fgetc(fa), y = fgetc(fb);
        assert_int_equal(x, y);
        n++;
    } while (x != EOF);
    assert_true(n > 1000);
    fclose(fa);
    fclose(fb);
}

/* Wide enough (64) that the blocks' products pass SB_GEMM_BF16_MIN_FLOPS. */
static sb_run_config bf16_run(sb_gemm_kind engine, int deterministic)
{
    sb_run_config c = tiny_run(engine, deterministic);
    c.feat_size = 64;
    c.precision = SB_PRECISION_BF16;
    return c;
}

/* sb_train refuses c with an error naming `why`. */
static void assert_train_refused(const sb_run_config *c, const char *why)
{
    sb_train_options opt = {.threads = 1, .mem_budget_gb = 1.0};
    sb_train_outcome res;
    sb_error err = {0};
    assert_int_not_equal(sb_train(c, &opt, &res, &err), SB_OK);
    if (strstr(err.msg, why) == NULL)
        fail_msg("refused without naming '%s': %s", why, err.msg);
}

/* --precision bf16 under oneDNN and auto: learns, takes most GEMM FLOPs in bf16, and ends
 * near (not at) the float32 run's losses; refused, with the reason, under --gemm openblas. */
static void test_training_bf16(void **state)
{
    (void)state;
    if (!sb_onednn_bf16_supported()) {
        sb_run_config c = bf16_run(SB_GEMM_AUTO, 0);
        assert_train_refused(&c, "--precision bf16");
        return;
    }
    const sb_gemm_kind engines[2] = {SB_GEMM_ONEDNN, SB_GEMM_AUTO};
    for (int e = 0; e < 2; e++) {
        sb_run_config c = bf16_run(engines[e], 0), c32 = c;
        c32.precision = SB_PRECISION_FP32;
        sb_train_outcome early, full, fp32;
        train(&c, 2, NULL, 4, &early);
        sb_gemm_flops_reset();
        train(&c, 2, NULL, 0, &full);
        double openblas, onednn;
        sb_gemm_flops_get(&openblas, &onednn);
        const double bf16_share = sb_gemm_flops_bf16() / (openblas + onednn);
        train(&c32, 2, NULL, 0, &fp32);
        assert_true(isfinite(full.test_loss) && isfinite(full.train_loss));
        if (!(full.test_loss < early.test_loss))
            fail_msg("bf16 --gemm %s: test loss %g after 4 updates, %g after 16",
                     sb_gemm_kind_name(engines[e]), early.test_loss, full.test_loss);
        if (!(bf16_share > 0.5))
            fail_msg("bf16: only %.0f%% of the GEMM FLOPs in bf16", 100 * bf16_share);
        if (!(full.test_loss != fp32.test_loss && fabs(full.test_loss - fp32.test_loss) < 0.05))
            fail_msg("bf16 test loss %.6f vs float32 %.6f", full.test_loss, fp32.test_loss);
    }
    sb_run_config c = bf16_run(SB_GEMM_OPENBLAS, 0);
    assert_train_refused(&c, "--gemm openblas");
    sb_gemm_precision_set(SB_PRECISION_FP32, NULL);
}

static void test_training_each_engine(void **state)
{
    (void)state;
    const sb_gemm_kind engines[3] = {SB_GEMM_OPENBLAS, SB_GEMM_ONEDNN, SB_GEMM_AUTO};
    for (int e = 0; e < 3; e++) {
        if (engines[e] == SB_GEMM_ONEDNN && !sb_gemm_onednn_available())
            continue;
        sb_run_config c = tiny_run(engines[e], 0);
        sb_train_outcome early, full;
        train(&c, 2, NULL, 4, &early); /* stops at the first evaluation */
        train(&c, 2, NULL, 0, &full);
        assert_int_equal(full.steps, 16);
        assert_true(isfinite(full.test_loss) && isfinite(full.train_loss));
        if (!(full.test_loss < early.test_loss))
            fail_msg("--gemm %s: test loss %g after 4 updates, %g after 16",
                     sb_gemm_kind_name(engines[e]), early.test_loss, full.test_loss);
    }
    /* deterministic: 1 and 2 threads write the same weights (in bf16 too) */
    for (int e = 0; e < 5; e++) {
        if (engines[e % 3] == SB_GEMM_ONEDNN && !sb_gemm_onednn_available())
            continue;
        if (e >= 3 && !sb_onednn_bf16_supported())
            continue;
        sb_run_config c = e < 3 ? tiny_run(engines[e], 1) : bf16_run(engines[e - 2], 1);
        char a[512], b[512];
        snprintf(a, sizeof a, "%s/t1_%d.safetensors", tmpdir, e);
        snprintf(b, sizeof b, "%s/t2_%d.safetensors", tmpdir, e);
        sb_train_outcome r1, r2;
        train(&c, 1, a, 0, &r1);
        train(&c, 2, b, 0, &r2);
        assert_true(r1.test_loss == r2.test_loss && r1.train_loss == r2.train_loss);
        assert_same_file(a, b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engines_agree),        cmocka_unit_test(test_reproducible),
        cmocka_unit_test(test_onednn_request),       cmocka_unit_test(test_engine_table),
        cmocka_unit_test(test_nothing_measured),     cmocka_unit_test(test_fingerprint),
        cmocka_unit_test(test_training_each_engine), cmocka_unit_test(test_training_bf16),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
