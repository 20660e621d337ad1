/* gemm_engine.c - the choice between OpenBLAS and oneDNN for each product (gemm_engine.h).
 *
 * Under auto, a shape class is decided once: the first product of the class runs on both
 * engines (a warm-up and three timed calls each, into a scratch output) and oneDNN wins when
 * its best time is under 95% of OpenBLAS's.
 * Decisions must be stable across runs, or a resumed training would round differently
 * from the uninterrupted one: they are written to the cache file and read back by every
 * later process, and a lock on the file (flock) makes the first process to decide a class
 * the one every other process follows, even when several run at once (a sweep's workers,
 * the test suite). Products called from inside a parallel region (small per-head products)
 * always use OpenBLAS: measuring there would time the other threads too.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cblas.h>

#if defined(SB_HAVE_ONEDNN) && !defined(SB_REAL_DOUBLE)
#include <oneapi/dnnl/dnnl.h>
#define SB_USE_ONEDNN 1
#endif

#include "core/alloc.h"
#include "core/timer.h"
#include "tensor/gemm_engine.h"

#define CALIBRATE_MIN_FLOPS 2.0e6 /* smaller products always use OpenBLAS */
#define CALIBRATE_TIMED 3         /* timed calls per engine (the best counts), after a warm-up */
#define CALIBRATE_MARGIN 0.95     /* oneDNN must take under 95% of OpenBLAS's time to win */
#define CLASS_MAX 512             /* decisions held in memory */
#define CLASS_NAME_MAX 48
#define CACHE_VERSION 2 /* the file's "version": another one is ignored and replaced (2: oneDNN
                          * means its matmul primitives) */

typedef struct shape_class {
    char name[CLASS_NAME_MAX]; /* "t2 NT m13 n11 k7": threads, transposes, log2 sizes */
    sb_gemm_kind engine;
} shape_class;

static struct {
    sb_gemm_kind requested;
    int deterministic;
    shape_class classes[CLASS_MAX];
    int n_classes;
    sb_precision_kind precision;
    int bf16_suspended; /* sb_gemm_bf16_suspend: products in float32 for now */
    double flops[3]; /* by sb_gemm_kind */
    double flops_bf16;
} engine_state = {.requested = SB_GEMM_OPENBLAS};

/* ---- settings ----------------------------------------------------------------------------- */

int sb_gemm_onednn_available(void)
{
#ifdef SB_USE_ONEDNN
    return 1;
#else
    return 0;
#endif
}

const char *sb_gemm_onednn_version(void)
{
#ifdef SB_USE_ONEDNN
    static char version[32];
    const dnnl_version_t *v = dnnl_version();
    snprintf(version, sizeof version, "%d.%d.%d", v->major, v->minor, v->patch);
    return version;
#else
    return NULL;
#endif
}

const char *sb_gemm_kind_name(sb_gemm_kind engine)
{
    switch (engine) {
    case SB_GEMM_OPENBLAS: return "openblas";
    case SB_GEMM_ONEDNN: return "onednn";
    default: return "auto";
    }
}

sb_status sb_gemm_engine_set(sb_gemm_kind engine, int deterministic, sb_error *err)
{
    if (engine == SB_GEMM_ONEDNN && !sb_gemm_onednn_available())
        return sb_error_set(err, SB_ERR_INVALID,
                            "--gemm onednn: this build has no oneDNN (install libdnnl-dev "
                            "and rebuild, or use --gemm openblas or auto)");
    engine_state.requested = engine;
    engine_state.deterministic = deterministic != 0;
    return SB_OK;
}

int sb_gemm_deterministic(void)
{
    return engine_state.deterministic;
}

const char *sb_precision_name(sb_precision_kind precision)
{
    return precision == SB_PRECISION_BF16 ? "bf16" : "fp32";
}

sb_status sb_gemm_precision_set(sb_precision_kind precision, sb_error *err)
{
    if (precision == SB_PRECISION_BF16) {
        if (!sb_gemm_onednn_available())
            return sb_error_set(err, SB_ERR_INVALID,
                                "--precision bf16: this build has no oneDNN (install libdnnl-dev "
                                "and rebuild, or use --precision fp32)");
        if (engine_state.requested == SB_GEMM_OPENBLAS)
            return sb_error_set(err, SB_ERR_INVALID,
                                "--precision bf16 multiplies with oneDNN, and --gemm openblas "
                                "forbids it: use --gemm auto or onednn");
        if (!sb_onednn_bf16_supported())
            return sb_error_set(err, SB_ERR_INVALID,
                                "--precision bf16: oneDNN has no bf16 products on this CPU (it "
                                "needs AVX-512); use --precision fp32");
    }
    engine_state.precision = precision;
    return SB_OK;
}

sb_status sb_gemm_configure(const sb_run_config *cfg, sb_error *err)
{
    sb_status st = sb_gemm_engine_set(cfg->gemm, cfg->deterministic, err);
    return st != SB_OK ? st : sb_gemm_precision_set(cfg->precision, err);
}

sb_precision_kind sb_gemm_precision(void)
{
    return engine_state.bf16_suspended ? SB_PRECISION_FP32 : engine_state.precision;
}

int sb_gemm_bf16_suspend(int suspend)
{
    int previous = engine_state.bf16_suspended;
    engine_state.bf16_suspended = suspend != 0;
    return previous;
}

int sb_gemm_bf16_suspended(void)
{
    return engine_state.bf16_suspended;
}

/* ---- FLOP counts -------------------------------------------------------------------------- */

void sb_gemm_flops_add(sb_gemm_kind engine, double flops)
{
    double *slot = &engine_state.flops[engine == SB_GEMM_ONEDNN ? 2 : 1];
#pragma omp atomic
    *slot += flops;
}

void sb_gemm_flops_get(double *openblas, double *onednn)
{
    *openblas = engine_state.flops[1];
    *onednn = engine_state.flops[2];
}

void sb_gemm_flops_add_bf16(double flops)
{
#pragma omp atomic
    engine_state.flops_bf16 += flops;
}

double sb_gemm_flops_bf16(void)
{
    return engine_state.flops_bf16;
}

void sb_gemm_flops_reset(void)
{
    engine_state.flops[1] = engine_state.flops[2] = engine_state.flops_bf16 = 0;
}

/* ---- the cache file ----------------------------------------------------------------------- */

void sb_gemm_cache_path(char *buf, size_t size)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg != NULL && xdg[0] == '/')
        snprintf(buf, size, "%s/selectivbench/gemm.json", xdg);
    else if (home != NULL && home[0] != '\0')
        snprintf(buf, size, "%s/.cache/selectivbench/gemm.json", home);
    else if (size > 0)
        buf[0] = '\0';
}

/* The machine and the libraries the measurements hold for: a cache written under another
 * CPU, OpenBLAS kernel set or oneDNN version is ignored (and replaced). */
static void cache_key(char *buf, size_t size)
{
    char cpu[128] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f != NULL) {
        char line[256];
        while (fgets(line, sizeof line, f) != NULL) {
            const char *colon = strchr(line, ':');
            if (strncmp(line, "model name", 10) == 0 && colon != NULL) {
                snprintf(cpu, sizeof cpu, "%s", colon + 2);
                cpu[strcspn(cpu, "\n")] = '\0';
                break;
            }
        }
        fclose(f);
    }
    const char *dnnl = sb_gemm_onednn_version();
    snprintf(buf, size, "cpu=%s; openblas=%s (%s); onednn=%s", cpu, openblas_get_config(),
             openblas_get_corename(), dnnl != NULL ? dnnl : "none");
}

/* mkdir -p of the folders above path; failures show when the file is opened */
static void make_parents(const char *path)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    for (char *p = dir + 1; *p != '\0'; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST)
            return;
        *p = '/';
    }
}

static shape_class *class_find(const char *name)
{
    for (int i = 0; i < engine_state.n_classes; i++)
        if (strcmp(engine_state.classes[i].name, name) == 0)
            return &engine_state.classes[i];
    return NULL;
}

static void class_add(const char *name, sb_gemm_kind engine)
{
    if (class_find(name) != NULL || engine_state.n_classes >= CLASS_MAX)
        return;
    shape_class *c = &engine_state.classes[engine_state.n_classes++];
    snprintf(c->name, sizeof c->name, "%s", name);
    c->engine = engine;
}

/* Adds the file's decisions to memory; a file that is missing, not JSON, of another version
 * or key adds nothing, and values other than the two engines are skipped (the file is
 * rewritten when a class is next decided). */
static void cache_read(const char *path, const char *key)
{
    json_t *root = json_load_file(path, 0, NULL);
    json_t *file_key = json_object_get(root, "key"), *classes = json_object_get(root, "classes");
    json_t *version = json_object_get(root, "version");
    if (!json_is_integer(version) || json_integer_value(version) != CACHE_VERSION ||
        !json_is_string(file_key) || strcmp(json_string_value(file_key), key) != 0 ||
        !json_is_object(classes)) {
        json_decref(root);
        return;
    }
    const char *name;
    json_t *value;
    json_object_foreach (classes, name, value) {
        const char *engine = json_string_value(value);
        if (engine != NULL && strlen(name) < CLASS_NAME_MAX &&
            (strcmp(engine, "openblas") == 0 || strcmp(engine, "onednn") == 0))
            class_add(name, strcmp(engine, "onednn") == 0 ? SB_GEMM_ONEDNN : SB_GEMM_OPENBLAS);
    }
    json_decref(root);
}

/* Writes every decision held in memory, atomically: a temporary file renamed over the old. */
static void cache_write(const char *path, const char *key)
{
    json_t *root = json_object(), *classes = json_object();
    json_object_set_new(root, "version", json_integer(CACHE_VERSION));
    json_object_set_new(root, "key", json_string(key));
    for (int i = 0; i < engine_state.n_classes; i++)
        json_object_set_new(classes, engine_state.classes[i].name,
                            json_string(sb_gemm_kind_name(engine_state.classes[i].engine)));
    json_object_set_new(root, "classes", classes);
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    if (json_dump_file(root, tmp, JSON_INDENT(1) | JSON_SORT_KEYS) == 0)
        rename(tmp, path);
    else
        unlink(tmp);
    json_decref(root);
}

/* ---- measuring ---------------------------------------------------------------------------- */

static double time_engine(sb_gemm_kind engine, int blocked, int trans_a, int trans_b, int M, int N,
                          int K, const real *A, int lda, const real *B, int ldb, real *C)
{
    double best = 1e30;
    for (int r = 0; r <= CALIBRATE_TIMED; r++) {
        double t0 = sb_time_now();
        sb_gemm_run(engine, blocked, trans_a, trans_b, M, N, K, 1, A, lda, B, ldb, 0, C, N);
        double dt = sb_time_now() - t0;
        if (r > 0 && dt < best) /* the first call warms up */
            best = dt;
    }
    return best;
}

static sb_gemm_kind calibrate(int trans_a, int trans_b, int M, int N, int K, const real *A, int lda,
                              const real *B, int ldb)
{
    real *C = sb_malloc((size_t)M * (size_t)N * sizeof *C);
    if (C == NULL)
        return SB_GEMM_OPENBLAS;
    double openblas =
        time_engine(SB_GEMM_OPENBLAS, 1, trans_a, trans_b, M, N, K, A, lda, B, ldb, C);
    double onednn = time_engine(SB_GEMM_ONEDNN, 0, trans_a, trans_b, M, N, K, A, lda, B, ldb, C);
    sb_free(C);
    /* a margin: on a busy machine the two timings are noisy, and a near tie is not worth
     * leaving the path whose bits do not depend on the thread count */
    return onednn < CALIBRATE_MARGIN * openblas ? SB_GEMM_ONEDNN : SB_GEMM_OPENBLAS;
}

/* ceil(log2(n)) */
static int log2_ceil(int n)
{
    int l = 0;
    while ((1L << l) < (long)n)
        l++;
    return l;
}

/* The class of a shape: products whose sizes round up to the same powers of two. */
static void class_name(char *buf, size_t size, int trans_a, int trans_b, int M, int N, int K)
{
    snprintf(buf, size, "t%d %c%c m%d n%d k%d", omp_get_max_threads(), trans_a ? 'T' : 'N',
             trans_b ? 'T' : 'N', log2_ceil(M), log2_ceil(N), log2_ceil(K));
}

/* Decides a class not in memory: under the cache file's lock, the file's decision if it has
 * one, a measurement otherwise (then written). Without a usable cache folder the decision
 * is measured and held in memory only. */
static sb_gemm_kind decide(const char *name, int trans_a, int trans_b, int M, int N, int K,
                           const real *A, int lda, const real *B, int ldb)
{
    char path[1024], lock_path[1100], key[512];
    sb_gemm_cache_path(path, sizeof path);
    cache_key(key, sizeof key);
    int lock = -1;
    if (path[0] != '\0') {
        make_parents(path);
        snprintf(lock_path, sizeof lock_path, "%s.lock", path);
        lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (lock >= 0 && flock(lock, LOCK_EX) != 0) {
            close(lock);
            lock = -1;
        }
        if (lock >= 0)
            cache_read(path, key);
    }
    shape_class *known = class_find(name);
    sb_gemm_kind engine =
        known != NULL ? known->engine : calibrate(trans_a, trans_b, M, N, K, A, lda, B, ldb);
    if (known == NULL) {
        class_add(name, engine);
        if (lock >= 0)
            cache_write(path, key);
    }
    if (lock >= 0)
        close(lock); /* releases the lock */
    return engine;
}

sb_gemm_kind sb_gemm_engine_for(int trans_a, int trans_b, int M, int N, int K, const real *A,
                                int lda, const real *B, int ldb)
{
    if (!sb_gemm_onednn_available() || omp_get_level() > 0)
        return SB_GEMM_OPENBLAS;
    if (engine_state.requested != SB_GEMM_AUTO)
        return engine_state.requested;
    if (engine_state.deterministic || 2.0 * (double)M * (double)N * (double)K < CALIBRATE_MIN_FLOPS)
        return SB_GEMM_OPENBLAS;
    char name[CLASS_NAME_MAX];
    class_name(name, sizeof name, trans_a, trans_b, M, N, K);
    shape_class *known = class_find(name);
    if (known != NULL)
        return known->engine;
    return decide(name, trans_a, trans_b, M, N, K, A, lda, B, ldb);
}

void sb_gemm_decisions_forget(void)
{
    engine_state.n_classes = 0;
}
