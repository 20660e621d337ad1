/* bench.c - training-step benchmarks (see bench.h). */
#include "train/bench.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/cpus.h"
#include "core/timer.h"
#include "model/model.h"
#include "ops/ops.h"
#include "tensor/gemm_engine.h"
#include "tensor/nn.h"
#include "tensor/optim.h"

typedef struct bench_step {
    const sb_model *m;
    sb_tensor *input; /* data owned by the caller */
    const int32_t *target;
    const uint8_t *valid;
    real *input_data;
    int B, T, I;
    double loss;
} bench_step;

static void bench_step_fn(sb_graph *g, void *arg)
{
    bench_step *s = arg;
    int shape[3] = {s->B, s->T, s->I};
    sb_tensor *x = sb_tensor_wrap(g, s->input_data, 3, shape);
    sb_head_loss h = {.target = s->target, .valid = s->valid, .loss_scale = 1};
    sb_tensor *loss = sb_model_loss(g, s->m, x, &h);
    s->loss = (double)loss->data[0];
    sb_tensor_grad(g, loss)[0] = 1;
    sb_graph_backward(g);
}

/* Sets the engine (not deterministic) and the precision ("fp32", "bf16", NULL: fp32). */
static sb_status bench_gemm_set(const char *gemm, const char *precision, sb_error *err)
{
    sb_gemm_kind engine;
    sb_status st = sb_bench_gemm_parse(gemm, &engine, err);
    if (st == SB_OK)
        st = sb_gemm_engine_set(engine, 0, err);
    if (st != SB_OK)
        return st;
    if (precision != NULL && strcmp(precision, "fp32") != 0 && strcmp(precision, "bf16") != 0)
        return sb_error_set(err, SB_ERR_INVALID, "--precision %s: use fp32 or bf16", precision);
    return sb_gemm_precision_set(
        precision != NULL && strcmp(precision, "bf16") == 0 ? SB_PRECISION_BF16 : SB_PRECISION_FP32,
        err);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The model a benchmark times: cfg's type and sizes, the reference's dropout and rotary base,
 * seed 1. */
static sb_status bench_model(const sb_bench_config *cfg, sb_model **m, sb_error *err)
{
    sb_model_config mc;
    memset(&mc, 0, sizeof mc);
    snprintf(mc.model, sizeof mc.model, "%s", cfg->model);
    mc.d_input = cfg->inputs;
    mc.d_output = cfg->classes;
    mc.d_model = cfg->width;
    mc.n_layers = cfg->layers;
    mc.d_state = cfg->d_state;
    mc.n_head = sb_num_heads(cfg->width);
    const sb_run_config d = sb_run_config_default(); /* train's dropout and rotary base */
    mc.dropout = d.dropout;
    mc.rope_base = d.rope_base;
    return sb_model_create(&mc, 1, m, err);
}

/* A fixed random one-hot sequence of n_frames frames of I inputs, its targets among `classes`,
 * every frame scored. input must be zeroed. */
static void bench_batch(real *input, int32_t *target, uint8_t *valid, size_t n_frames, int I,
                        int classes)
{
    uint64_t rs = 12345;
    for (size_t f = 0; f < n_frames; f++) {
        rs = rs * 6364136223846793005ull + 1442695040888963407ull;
        input[f * (size_t)I + (size_t)((rs >> 33) % (uint64_t)I)] = 1;
        target[f] = (int32_t)((rs >> 17) % (uint64_t)classes);
        valid[f] = 1;
    }
}

/* After step k (0, 1, 2): marks the trainable tensors whose gradient is not zero; after step 2
 * every one must have had one (a layer whose init zeroes a projection, as RWKV-7's o_proj
 * and LoRA first matrices in fla, sends no gradient to the tensors behind it on the first
 * step): else the backward is broken. */
static sb_status check_gradients(const sb_model *m, int k, uint8_t *had_grad, sb_error *err)
{
    for (int i = 0; i < m->params.n; i++) {
        const sb_param *p = &m->params.p[i];
        if (k == 0)
            had_grad[i] = 0;
        if (p->flags & SB_PARAM_BUFFER)
            continue;
        double mx = 0;
        for (size_t j = 0; j < p->size; j++)
            mx = fmax(mx, fabs((double)m->params.grad[p->offset + j]));
        if (mx > 0)
            had_grad[i] = 1;
        if (k == 2 && !had_grad[i])
            return sb_error_set(err, SB_ERR_RUNTIME,
                                "bench: parameter %s of %s received no gradient: the backward is "
                                "broken",
                                p->name, m->cfg.model);
    }
    return SB_OK;
}

/* The result's figures from the timed steps (times[steps], sorted here: the median is the
 * step time), the engines' FLOP counters, the model and the graph's peak arena of a B x T
 * batch of I inputs. */
static void bench_figures(sb_bench_result *res, const sb_model *m, const sb_graph *g, double *times,
                          int steps, int B, int T, int I)
{
    const size_t n_frames = (size_t)B * (size_t)T;
    qsort(times, (size_t)steps, sizeof *times, cmp_double);
    double openblas_flops, onednn_flops;
    sb_gemm_flops_get(&openblas_flops, &onednn_flops);
    res->gemm_onednn_share =
        openblas_flops + onednn_flops > 0 ? onednn_flops / (openblas_flops + onednn_flops) : 0.0;
    res->gemm_bf16_share = openblas_flops + onednn_flops > 0
                               ? sb_gemm_flops_bf16() / (openblas_flops + onednn_flops)
                               : 0.0;
    double sec = times[steps / 2];
    res->step_ms = sec * 1e3;
    res->tokens_per_s = (double)n_frames / sec;
    res->gflops = 3.0 * sb_model_flops_per_token(m, T) * (double)n_frames / sec / 1e9;
    res->memory_mib = ((double)g->arena.peak + 4.0 * (double)m->params.total * sizeof(real) +
                       (double)n_frames * ((double)I * sizeof(real) + 5.0)) /
                      1048576.0;
}

sb_status sb_bench_train_step(const sb_bench_config *cfg, sb_bench_result *res, sb_error *err)
{
    if (cfg == NULL || res == NULL || cfg->model == NULL) /* a public function (selectivbench.h) */
        return sb_error_set(err, SB_ERR_INVALID, "sb_bench_train_step: %s is NULL",
                            cfg == NULL   ? "cfg"
                            : res == NULL ? "res"
                                          : "cfg->model");
    memset(res, 0, sizeof *res);
    if (cfg->batch < 1 || cfg->frames < 1 || cfg->inputs < 1 || cfg->classes < 1)
        return sb_error_set(err, SB_ERR_INVALID, "bench sizes must be positive");
    sb_status st_threads = sb_threads_check(cfg->threads, "sb_bench_train_step", err);
    if (st_threads != SB_OK)
        return st_threads;
    if (cfg->threads > 0)
        omp_set_num_threads(cfg->threads);
    sb_status st_engine = bench_gemm_set(cfg->gemm, cfg->precision, err);
    if (st_engine != SB_OK)
        return st_engine;
    sb_gemm_flops_reset();
    sb_model *m = NULL;
    sb_status st = bench_model(cfg, &m, err);
    if (st != SB_OK)
        return st;
    res->params = m->params.count;

    const int B = cfg->batch, T = cfg->frames, I = cfg->inputs;
    size_t n_frames = (size_t)B * (size_t)T;
    real *input = sb_calloc(n_frames * (size_t)I, sizeof *input);
    int32_t *target = sb_malloc(n_frames * sizeof *target);
    uint8_t *valid = sb_malloc(n_frames);
    int steps = cfg->steps > 0 ? cfg->steps : sb_run_config_default().rt.steps;
    double *times = sb_malloc((size_t)steps * sizeof *times);
    /* which trainable tensors have had a non-zero gradient (check_gradients) */
    uint8_t *had_grad = sb_malloc((size_t)(m->params.n > 0 ? m->params.n : 1));
    sb_graph g;
    sb_graph_init(&g, (size_t)64 << 20);
    if (!input || !target || !valid || !times || !had_grad) {
        st = sb_error_set(err, SB_ERR_NOMEM, "out of memory for the benchmark batch");
        goto done;
    }
    bench_batch(input, target, valid, n_frames, I, cfg->classes);
    sb_optimizer opt;
    sb_optimizer_init(&opt, SB_OPT_ADAM, 1e-3, 0.0);
    bench_step s = {
        .m = m, .target = target, .valid = valid, .input_data = input, .B = B, .T = T, .I = I};
    int total = 2 + steps;
    for (int k = 0; k < total; k++) {
        double t0 = sb_time_now();
        sb_graph_reset(&g);
        g.record = 1;
        g.training = 1;
        g.step = (uint64_t)k;
        if ((st = sb_graph_run(&g, bench_step_fn, &s, err)) != SB_OK)
            goto done;
        if (!isfinite(s.loss)) {
            st = sb_error_set(err, SB_ERR_DIVERGED, "bench: the loss of %s is not finite",
                              cfg->model);
            goto done;
        }
        if (k == 0)
            res->first_loss = s.loss;
        if (k <= 2 && (st = check_gradients(m, k, had_grad, err)) != SB_OK)
            goto done;
        sb_clip_grad_norm(&m->params, 1.0);
        sb_optimizer_step(&opt, &m->params, 1.0);
        sb_params_zero_grad(&m->params);
        if (k >= 2)
            times[k - 2] = sb_time_now() - t0;
        res->last_loss = s.loss;
    }
    if (!(res->last_loss != res->first_loss)) {
        st = sb_error_set(err, SB_ERR_RUNTIME,
                          "bench: the loss of %s did not change after %d updates", cfg->model,
                          total);
        goto done;
    }
    bench_figures(res, m, &g, times, steps, B, T, I);
done:
    sb_graph_free(&g);
    sb_free(input);
    sb_free(target);
    sb_free(valid);
    sb_free(times);
    sb_free(had_grad);
    sb_model_free(m);
    return st;
}

sb_status sb_bench_gemm_parse(const char *name, sb_gemm_kind *engine, sb_error *err)
{
    *engine = SB_GEMM_AUTO;
    if (name == NULL)
        return SB_OK;
    for (int e = SB_GEMM_AUTO; e <= SB_GEMM_ONEDNN; e++)
        if (strcmp(name, sb_gemm_kind_name((sb_gemm_kind)e)) == 0) {
            *engine = (sb_gemm_kind)e;
            return SB_OK;
        }
    return sb_error_set(err, SB_ERR_INVALID,
                        "--gemm %s: unknown engine; use openblas, onednn or auto", name);
}

sb_status sb_bench_sgemm_rate(const char *gemm, int M, int N, int K, int threads, double *gflops,
                              sb_error *err)
{
    return sb_bench_gemm_rate(gemm, "fp32", M, N, K, threads, gflops, err);
}

sb_status sb_bench_gemm_rate(const char *gemm, const char *precision, int M, int N, int K,
                             int threads, double *gflops, sb_error *err)
{
    *gflops = 0;
    if (M < 1 || N < 1 || K < 1)
        return sb_error_set(err, SB_ERR_INVALID, "sb_bench_gemm_rate: sizes must be positive");
    sb_status st = sb_threads_check(threads, "sb_bench_gemm_rate", err);
    if (st == SB_OK)
        st = bench_gemm_set(gemm, precision, err);
    if (st != SB_OK)
        return st;
    if (threads > 0)
        omp_set_num_threads(threads);
    real *a = sb_malloc((size_t)M * (size_t)K * sizeof *a);
    real *b = sb_malloc((size_t)K * (size_t)N * sizeof *b);
    real *c = sb_malloc((size_t)M * (size_t)N * sizeof *c);
    if (a == NULL || b == NULL || c == NULL) {
        st = sb_error_set(err, SB_ERR_NOMEM, "out of memory for a %dx%dx%d product", M, N, K);
        goto done;
    }
    for (size_t i = 0; i < (size_t)M * (size_t)K; i++)
        a[i] = (real)((double)(i % 17) * 0.01);
    for (size_t i = 0; i < (size_t)K * (size_t)N; i++)
        b[i] = (real)((double)(i % 13) * 0.01);
    for (int r = 0; r < 4; r++) {
        double t0 = sb_time_now();
        sb_gemm(0, 0, M, N, K, 1, a, K, b, N, 0, c, N);
        double rate = 2.0 * (double)M * (double)N * (double)K / (sb_time_now() - t0) / 1e9;
        if (r > 0 && rate > *gflops) /* the first run warms up (and calibrates under auto) */
            *gflops = rate;
    }
done:
    sb_free(a);
    sb_free(b);
    sb_free(c);
    sb_gemm_precision_set(SB_PRECISION_FP32, NULL);
    return st;
}

const char *sb_bench_onednn_version(void)
{
    return sb_gemm_onednn_version();
}

/* The best of a few n^3 products on one engine, operands (float32 or already bf16) filled
 * once: the hardware's rate, without the rounding. */
static double peak_of(sb_gemm_kind engine, int bf16, int threads)
{
    if (threads > 0)
        omp_set_num_threads(threads);
    const int n = 2048;
    const size_t bytes = (size_t)n * n * (bf16 ? sizeof(uint16_t) : sizeof(real));
    real *a = sb_malloc(bytes), *b = sb_malloc(bytes), *c = sb_malloc((size_t)n * n * sizeof *c);
    double best = 0.0;
    if (a != NULL && b != NULL && c != NULL) {
        for (size_t i = 0; i < (size_t)n * n; i++) {
            float x = (float)(i % 17) * 0.01f, y = (float)(i % 13) * 0.01f;
            if (bf16) {
                sb_bf16_from_float(1, 1, &x, 1, (uint16_t *)a + i);
                sb_bf16_from_float(1, 1, &y, 1, (uint16_t *)b + i);
            } else {
                a[i] = (real)x;
                b[i] = (real)y;
            }
        }
        for (int r = 0; r < 4; r++) {
            double t0 = sb_time_now();
#ifndef SB_REAL_DOUBLE
            if (bf16 && sb_onednn_matmul(1, 0, 0, n, n, n, 1, a, n, b, n, 0, c, n) != 0)
                break;
#endif
            if (!bf16)
                sb_gemm_run(engine, engine == SB_GEMM_OPENBLAS, 0, 0, n, n, n, 1, a, n, b, n, 0, c,
                            n);
            double rate = 2.0 * n * (double)n * n / (sb_time_now() - t0) / 1e9;
            if (r > 0 && rate > best) /* the first run warms up */
                best = rate;
        }
    }
    sb_free(a);
    sb_free(b);
    sb_free(c);
    return best;
}

double sb_bench_sgemm_peak(int threads)
{
    double openblas = peak_of(SB_GEMM_OPENBLAS, 0, threads);
    double onednn = sb_gemm_onednn_available() ? peak_of(SB_GEMM_ONEDNN, 0, threads) : 0.0;
    return openblas > onednn ? openblas : onednn;
}

int sb_bench_bf16_available(void)
{
    return sb_onednn_bf16_supported();
}

double sb_bench_bf16_peak(int threads)
{
    return sb_onednn_bf16_supported() ? peak_of(SB_GEMM_ONEDNN, 1, threads) : 0.0;
}

/* ---- instruction sets ----------------------------------------------------------------- */

/* The x86 features that matter to our kernels or OpenBLAS's: the SSE levels, AVX/AVX2, FMA
 * (fma() in a kernel is one instruction instead of a libm call), AVX-512 and its BF16 dot
 * products. This file is compiled with the same flags as the rest of the library, so its
 * predefined macros are what the compiler could use everywhere. */
static const char *const isa_built_names[] = {
#ifdef __SSE2__
    "sse2",
#endif
#ifdef __SSE3__
    "sse3",
#endif
#ifdef __SSSE3__
    "ssse3",
#endif
#ifdef __SSE4_1__
    "sse4.1",
#endif
#ifdef __SSE4_2__
    "sse4.2",
#endif
#ifdef __AVX__
    "avx",
#endif
#ifdef __AVX2__
    "avx2",
#endif
#ifdef __FMA__
    "fma",
#endif
#ifdef __AVX512F__
    "avx512f",
#endif
#ifdef __AVX512BW__
    "avx512bw",
#endif
#ifdef __AVX512VL__
    "avx512vl",
#endif
#ifdef __AVX512BF16__
    "avx512bf16",
#endif
    NULL};

#if defined(__AVX512F__)
#define ISA_BUILT_LEVEL "avx512"
#elif defined(__AVX2__)
#define ISA_BUILT_LEVEL "avx2"
#elif defined(__AVX__)
#define ISA_BUILT_LEVEL "avx"
#elif defined(__SSE4_2__)
#define ISA_BUILT_LEVEL "sse4.2"
#elif defined(__SSE2__)
#define ISA_BUILT_LEVEL "sse2"
#else
#define ISA_BUILT_LEVEL "unknown"
#endif

/* appends " name" (the first without the space) if it fits */
static void isa_append(char *buf, size_t cap, const char *name)
{
    size_t len = strlen(buf);
    snprintf(buf + len, cap - len, "%s%s", len > 0 ? " " : "", name);
}

void sb_bench_isa_get(sb_bench_isa *isa)
{
    SB_ASSERT(isa != NULL);
    memset(isa, 0, sizeof *isa);
#ifdef SB_MARCH_NATIVE
    isa->native = 1;
#endif
    isa->built_level = ISA_BUILT_LEVEL;
    for (int i = 0; isa_built_names[i] != NULL; i++)
        isa_append(isa->built, sizeof isa->built, isa_built_names[i]);
    isa->cpu_level = "unknown";
#if defined(__x86_64__) || defined(__i386__)
    /* __builtin_cpu_supports takes a string literal: one call per feature */
    __builtin_cpu_init();
    const struct {
        const char *name;
        int on;
        const char *level; /* the level this feature starts, NULL for the others */
    } cpu[] = {
        {"sse2", __builtin_cpu_supports("sse2"), "sse2"},
        {"sse3", __builtin_cpu_supports("sse3"), NULL},
        {"ssse3", __builtin_cpu_supports("ssse3"), NULL},
        {"sse4.1", __builtin_cpu_supports("sse4.1"), NULL},
        {"sse4.2", __builtin_cpu_supports("sse4.2"), "sse4.2"},
        {"avx", __builtin_cpu_supports("avx"), "avx"},
        {"avx2", __builtin_cpu_supports("avx2"), "avx2"},
        {"fma", __builtin_cpu_supports("fma"), NULL},
        {"avx512f", __builtin_cpu_supports("avx512f"), "avx512"},
        {"avx512bw", __builtin_cpu_supports("avx512bw"), NULL},
        {"avx512vl", __builtin_cpu_supports("avx512vl"), NULL},
        {"avx512bf16", __builtin_cpu_supports("avx512bf16"), NULL},
    };
    for (size_t i = 0; i < sizeof cpu / sizeof *cpu; i++) {
        if (!cpu[i].on)
            continue;
        isa_append(isa->cpu, sizeof isa->cpu, cpu[i].name);
        if (cpu[i].level != NULL)
            isa->cpu_level = cpu[i].level;
    }
#endif
    isa->blas_core = sb_blas_core_name();
    isa->blas_coretype = getenv("OPENBLAS_CORETYPE");
}
