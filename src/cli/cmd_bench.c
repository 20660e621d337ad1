/*
 * cmd_bench.c - `selectivbench bench data`: data generation speed at the paper's
 * configuration (vocab 41, amb 40, depth 40, 200 elements, task 2 gaps and noise), the three
 * stages of sb_bench_data_stage (sequences, samples, batches); `selectivbench bench
 * [models]`: training steps of every model (sb_bench_train_step) against the FP32 peak.
 */
#include <stdlib.h>
#include <string.h>

#include "selectivbench/selectivbench.h"

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/run_options.h"
#include "cli/sweep_file.h"
#include "cli/task_options.h"

/* Which instruction sets ran: the build's (SB_NATIVE: -march=native or the portable
 * baseline), the CPU's, and OpenBLAS's kernel set, chosen at run time whatever the build. */
static void bench_print_isa(void)
{
    sb_bench_isa isa;
    sb_bench_isa_get(&isa);
    printf("instruction set: built for %s (%s): %s\n", isa.built_level,
           isa.native ? "SB_NATIVE=ON, -march=native" : "SB_NATIVE=OFF, portable", isa.built);
    printf("instruction set: this CPU has %s: %s; OpenBLAS %s kernels%s%s%s\n", isa.cpu_level,
           isa.cpu, isa.blas_core, isa.blas_coretype != NULL ? " (OPENBLAS_CORETYPE=" : "",
           isa.blas_coretype != NULL ? isa.blas_coretype : "",
           isa.blas_coretype != NULL ? ")" : "");
}

static void bench_json_isa(sb_jw *j)
{
    sb_bench_isa isa;
    sb_bench_isa_get(&isa);
    sb_jw_key(j, "isa");
    sb_jw_object_begin(j);
    sb_jw_key(j, "built_level");
    sb_jw_string(j, isa.built_level);
    sb_jw_key(j, "built");
    sb_jw_string(j, isa.built);
    sb_jw_key(j, "native");
    sb_jw_bool(j, isa.native);
    sb_jw_key(j, "cpu_level");
    sb_jw_string(j, isa.cpu_level);
    sb_jw_key(j, "cpu");
    sb_jw_string(j, isa.cpu);
    sb_jw_key(j, "blas_core");
    sb_jw_string(j, isa.blas_core);
    sb_jw_object_end(j);
}

/* The paper's task 2 configuration, the defaults of `bench data`: noisy gaps U(0.1, 1.0) s,
 * 20000 samples. Flags given on the command line keep their values. */
static sb_status bench_data_defaults(sb_config *cfg, sb_option *opts, int n_opts, sb_error *err)
{
    static const char *const defaults[][2] = {
        {"train_gap_max", "1.0"}, {"train_noise", "0.2"}, {"dataset_size", "20000"}};
    for (size_t k = 0; k < sizeof defaults / sizeof *defaults; k++) {
        const sb_option *o = sb_options_find(opts, n_opts, defaults[k][0]);
        if (o != NULL && o->seen)
            continue;
        sb_status st = sb_config_set_key(cfg, defaults[k][0], defaults[k][1], err);
        if (st != SB_OK)
            return st;
    }
    return SB_OK;
}

static int bench_data_with_flags(sb_task_flags *tf, int argc, char **argv)
{
    sb_option opts[SB_TASK_MAX_OPTIONS + 4];
    int n_opts = 0;
    sb_error err = {0};
    if (sb_task_options_add(tf, opts, &n_opts, 0, &err) != SB_OK)
        return sb_cli_fail("bench", &err);
    sb_options_add_key(tf->config, "threads", "threads for the parallel runs", opts, &n_opts);
    /* argv[1] is "bench", argv[2] is "data": shift by one */
    int rc = sb_cli_parse("bench data", "[task flags] (defaults: task 2, 20000 samples)", opts,
                          n_opts, argc - 1, argv + 1, NULL, 0, NULL);
    if (rc >= 0)
        return rc;
    int threads = sb_cli_threads(sb_run_flag(tf->config, "threads"));
    sb_task *task = NULL;
    sb_status st = bench_data_defaults(tf->config, opts, n_opts, &err);
    if (st == SB_OK)
        st = sb_task_from_config(tf->config, &task, &err);
    if (st != SB_OK)
        return sb_cli_fail("bench", &err);
    sb_task_facts facts;
    sb_task_get_facts(task, &facts);
    sb_grammar_facts g;
    sb_grammar_get_facts(sb_task_grammar(task), &g);
    sb_task_settings settings;
    sb_task_get_settings(task, &settings);
    int64_t n = facts.train_size;
    int E = facts.train_elements;
    bench_print_isa();
    printf("bench data: vocab %d, amb %d, amb_depth %d, %d elements, gaps U(%g, %g) s, noise "
           "%g; %lld samples, median of %d\n",
           g.vocab, g.amb, g.amb_depth, E, settings.train_gap_min, settings.train_gap_max,
           settings.train_noise, (long long)n, SB_BENCH_DATA_REPEATS);
    printf("%-10s %7s %12s %14s %14s %16s\n", "stage", "threads", "seconds", "samples/s",
           "symbols/s", "200k set (s)");
    int thread_counts[2] = {1, threads};
    for (int s = 0; s < SB_BENCH_DATA_STAGES; s++) {
        for (int t = 0; t < (threads > 1 ? 2 : 1); t++) {
            double sec = 0.0;
            if (sb_bench_data_stage(task, s, thread_counts[t], &sec, &err) != SB_OK) {
                sb_task_free(task);
                return sb_cli_fail("bench", &err);
            }
            double rate = (double)n / sec;
            printf("%-10s %7d %12.3f %14.0f %14.3g %16.2f\n", sb_bench_data_stage_name(s),
                   thread_counts[t], sec, rate, rate * E, 200000.0 / rate);
            fflush(stdout);
        }
    }
    printf("peak memory %.1f MiB\n", (double)sb_peak_memory_bytes() / 1048576.0);
    sb_task_free(task);
    return 0;
}

static int bench_data(int argc, char **argv)
{
    sb_task_flags tf = {0};
    int rc = bench_data_with_flags(&tf, argc, argv);
    sb_task_flags_free(&tf);
    return rc;
}

/* ---- models ---------------------------------------------------------------------------- */

/* OpenBLAS's kernel set, e.g. "SkylakeX". */
static const char *blas_core(void)
{
    sb_bench_isa isa;
    sb_bench_isa_get(&isa);
    return isa.blas_core;
}

/* The two standard configurations of the issues: small (B16 T256 d64 L2, inp 9, 65 classes)
 * and large (B16 T400 d128 L4, inp 41, 1601 classes). */
static const sb_bench_config standard_configs[2] = {
    {NULL, 16, 256, 64, 2, 9, 65, 128, 5, 0, NULL, NULL},
    {NULL, 16, 400, 128, 4, 41, 1601, 128, 5, 0, NULL, NULL},
};

static void bench_json_row(sb_jw *j, const sb_bench_config *c, const sb_bench_result *r,
                           double peak, int threads)
{
    sb_jw_object_begin(j);
    sb_jw_key(j, "model");
    sb_jw_string(j, c->model);
    sb_jw_key(j, "batch_size");
    sb_jw_int(j, c->batch);
    sb_jw_key(j, "frames");
    sb_jw_int(j, c->frames);
    sb_jw_key(j, "feat_size");
    sb_jw_int(j, c->width);
    sb_jw_key(j, "layers");
    sb_jw_int(j, c->layers);
    sb_jw_key(j, "inp");
    sb_jw_int(j, c->inputs);
    sb_jw_key(j, "classes");
    sb_jw_int(j, c->classes);
    sb_jw_key(j, "params");
    sb_jw_uint(j, r->params);
    sb_jw_key(j, "step_ms");
    sb_jw_double(j, r->step_ms);
    sb_jw_key(j, "tokens_per_s");
    sb_jw_double(j, r->tokens_per_s);
    sb_jw_key(j, "gflops");
    sb_jw_double(j, r->gflops);
    sb_jw_key(j, "peak_gflops");
    sb_jw_double(j, peak);
    sb_jw_key(j, "blas_core");
    sb_jw_string(j, blas_core());
    sb_jw_key(j, "peak_fraction");
    sb_jw_double(j, peak > 0 ? r->gflops / peak : 0.0);
    sb_jw_key(j, "memory_mib");
    sb_jw_double(j, r->memory_mib);
    sb_jw_key(j, "threads");
    sb_jw_int(j, threads);
    sb_jw_key(j, "gemm");
    sb_jw_string(j, c->gemm != NULL ? c->gemm : "auto");
    sb_jw_key(j, "gemm_onednn_share");
    sb_jw_double(j, r->gemm_onednn_share);
    sb_jw_key(j, "precision");
    sb_jw_string(j, c->precision != NULL ? c->precision : "fp32");
    sb_jw_key(j, "gemm_bf16_share");
    sb_jw_double(j, r->gemm_bf16_share);
    sb_jw_object_end(j);
}

/* The rooflines: float32 (the best engine) and bf16 (0: none here). */
typedef struct bench_peaks {
    double fp32, bf16;
} bench_peaks;

static double peak_for(const bench_peaks *p, const sb_bench_config *c)
{
    return c->precision != NULL && strcmp(c->precision, "bf16") == 0 ? p->bf16 : p->fp32;
}

static void bench_print_header(const bench_peaks *peaks, int threads)
{
    bench_print_isa();
    /* the kernel set matters: OPENBLAS_CORETYPE can force a slower one */
    const char *dnnl = sb_bench_onednn_version();
    if (peaks->fp32 <= 0) {
        printf("peaks not measured (--no_peak): %% peak reads -\n");
        return;
    }
    printf("FP32 peak (2048^3, %d thread%s, best of OpenBLAS %s kernels%s): %.1f GFLOP/s\n",
           threads, threads == 1 ? "" : "s", blas_core(), dnnl != NULL ? " and oneDNN" : "",
           peaks->fp32);
    if (peaks->bf16 > 0)
        printf("BF16 peak (2048^3, oneDNN %s, bf16 operands, fp32 accumulation): %.1f GFLOP/s\n",
               dnnl, peaks->bf16);
}

static void bench_print_columns(void)
{
    printf("%-24s %-24s %5s %9s %9s %11s %8s %7s %9s  %s\n", "model", "config", "prec", "params",
           "step ms", "tokens/s", "GFLOP/s", "% peak", "mem MiB",
           "gemm (oneDNN share of GEMM FLOPs)");
}

static void bench_print_row(const sb_bench_config *c, const sb_bench_result *r, double peak)
{
    char conf[64];
    snprintf(conf, sizeof conf, "B%d T%d d%d L%d %d/%d", c->batch, c->frames, c->width, c->layers,
             c->inputs, c->classes);
    char share[16] = "-";
    if (peak > 0)
        snprintf(share, sizeof share, "%.1f%%", 100.0 * r->gflops / peak);
    printf("%-24s %-24s %5s %9zu %9.1f %11.0f %8.1f %7s %9.1f  %s (%.0f%%)\n", c->model, conf,
           c->precision != NULL ? c->precision : "fp32", r->params, r->step_ms, r->tokens_per_s,
           r->gflops, share, r->memory_mib, c->gemm != NULL ? c->gemm : "auto",
           100.0 * r->gemm_onednn_share);
    fflush(stdout);
}

/* GFLOP/s of each engine (and of bf16 operands, rounding included) at 2048^3 and at the
 * configured model's own shapes (rows = batch x frames): the decoder (rows x classes x d),
 * a square projection (rows x d x d) and its weight gradient (d x d x rows). These bound
 * what a GEMM-bound step at this width can reach. */
static int bench_print_gemm_rates(int threads, int rows, int width, int classes)
{
    const int shapes[4][3] = {
        {2048, 2048, 2048}, {rows, classes, width}, {rows, width, width}, {width, width, rows}};
    static const char *const engines[3] = {"openblas", "onednn", "onednn"};
    static const char *const precisions[3] = {"fp32", "fp32", "bf16"};
    const char *dnnl = sb_bench_onednn_version();
    const int n = dnnl == NULL ? 1 : sb_bench_bf16_peak(threads) > 0 ? 3 : 2;
    printf("GEMM GFLOP/s, %d thread%s (oneDNN %s):\n", threads, threads == 1 ? "" : "s",
           dnnl != NULL ? dnnl : "not in this build");
    for (int s = 0; s < 4; s++) {
        printf("  %dx%dx%d:", shapes[s][0], shapes[s][1], shapes[s][2]);
        for (int e = 0; e < n; e++) {
            double rate = 0;
            sb_error err = {0};
            if (sb_bench_gemm_rate(engines[e], precisions[e], shapes[s][0], shapes[s][1],
                                   shapes[s][2], threads, &rate, &err) != SB_OK) {
                printf("\n");
                return sb_cli_fail("bench", &err);
            }
            printf(" %s%s %.1f", engines[e], e == 2 ? " bf16" : "", rate);
        }
        printf("\n");
    }
    fflush(stdout);
    return 0;
}

/* In a list of engines and precisions, OpenBLAS with bf16 is left out (it has no bf16
 * products); asked for alone, it gets the error line. */
static int skip_run(const sb_bench_config *c, int n_runs)
{
    return n_runs > 1 && strcmp(c->gemm, "openblas") == 0 && strcmp(c->precision, "bf16") == 0;
}

/* What bench will measure, before it starts (stderr: --json stays one document). */
static void bench_announce(int n_configs, int steps, int threads, int peaks, const char *what)
{
    fprintf(stderr,
            "bench: %s%d training configuration%s (%s), a warm-up step then %d timed step%s "
            "each (median), on %d thread%s%s\n",
            peaks ? "the FP32 and BF16 peaks (--no_peak skips them), then " : "", n_configs,
            n_configs == 1 ? "" : "s", what, steps, steps == 1 ? "" : "s", threads,
            threads == 1 ? "" : "s",
            n_configs > 1 ? "; the time it takes follows the first configuration" : "");
}

/* After the first configuration of a group of n: how long the group will take at its pace. */
static void bench_pace(double first_s, int n, const char *group)
{
    if (n <= 1)
        return;
    char left[32];
    sb_cli_format_time(first_s * (double)(n - 1), left, sizeof left);
    fprintf(stderr,
            "bench: the first of %d configurations %s took %.1f s: about %s more for "
            "them\n",
            n, group, first_s, left);
}

/* Splits "openblas,auto" into at most max names (pointing into buf). */
static int split_list(char *buf, const char **names, int max)
{
    int n = 0;
    for (char *tok = strtok(buf, ","); tok != NULL && n < max; tok = strtok(NULL, ","))
        names[n++] = tok;
    return n;
}

/* bench's model: smaller than train's default, as the timed configuration of --model M
 * (one key and its value a line) */
static const char *const bench_presets[] = {"batch_size", "16",  /* B16 */
                                            "feat_size",  "64",  /* d64 */
                                            "layers",     "2",   /* L2 */
                                            "d_state",    "128", /* the SSMs' state */
                                            NULL};

/* What `bench` times: each model under each engine and precision asked for. */
typedef struct bench_grid {
    char gemm_buf[64], precision_buf[64];
    const char *engines[3], *precisions[2];
    int n_engines, n_precisions;
    bench_peaks peaks;
    int steps, threads;
    sb_jw *j; /* --json, else NULL */
} bench_grid;

/* The lists of --gemm and --precision, each name checked against this build and CPU before
 * anything is printed (one error line, nothing else); the peaks unless no_peak. Returns -1
 * to go on, else the exit code. */
static int bench_grid_lists(bench_grid *g, const char *gemm, const char *precision, int no_peak)
{
    sb_error err = {0};
    snprintf(g->gemm_buf, sizeof g->gemm_buf, "%s", gemm);
    g->n_engines = split_list(g->gemm_buf, g->engines, 3);
    if (g->n_engines == 0)
        sb_error_set(&err, SB_ERR_INVALID, "--gemm: give openblas, onednn or auto");
    for (int e = 0; e < g->n_engines && err.msg[0] == '\0'; e++) {
        const char *name = g->engines[e];
        if (strcmp(name, "openblas") != 0 && strcmp(name, "onednn") != 0 &&
            strcmp(name, "auto") != 0)
            sb_error_set(&err, SB_ERR_INVALID,
                         "--gemm %s: unknown engine; use openblas, onednn or auto", name);
        else if (strcmp(name, "onednn") == 0 && sb_bench_onednn_version() == NULL)
            sb_error_set(&err, SB_ERR_INVALID,
                         "--gemm onednn: this build has no oneDNN (install libdnnl-dev and "
                         "rebuild, or use --gemm openblas or auto)");
    }
    if (err.msg[0] != '\0')
        return sb_cli_fail("bench", &err);
    snprintf(g->precision_buf, sizeof g->precision_buf, "%s", precision);
    g->n_precisions = split_list(g->precision_buf, g->precisions, 2);
    if (g->n_precisions == 0)
        sb_error_set(&err, SB_ERR_INVALID, "--precision: give fp32, bf16 or fp32,bf16");
    for (int p = 0; p < g->n_precisions && err.msg[0] == '\0'; p++)
        if (strcmp(g->precisions[p], "fp32") != 0 && strcmp(g->precisions[p], "bf16") != 0)
            sb_error_set(&err, SB_ERR_INVALID, "--precision %s: use fp32 or bf16",
                         g->precisions[p]);
    g->peaks = (bench_peaks){0, 0};
    if (!no_peak)
        g->peaks = (bench_peaks){sb_bench_sgemm_peak(g->threads), sb_bench_bf16_peak(g->threads)};
    for (int p = 0; p < g->n_precisions && err.msg[0] == '\0'; p++)
        if (strcmp(g->precisions[p], "bf16") == 0 && !sb_bench_bf16_available())
            sb_error_set(&err, SB_ERR_INVALID, "--precision bf16: %s; use --precision fp32",
                         sb_bench_onednn_version() == NULL
                             ? "this build has no oneDNN (install libdnnl-dev and rebuild)"
                             : "oneDNN has no bf16 products on this CPU (it needs AVX-512)");
    if (err.msg[0] != '\0')
        return sb_cli_fail("bench", &err);
    return -1;
}

/* Times one configuration and prints its row; 0, or the exit code of its error. */
static int bench_one(const bench_grid *g, const sb_bench_config *c)
{
    sb_bench_result r;
    sb_error err = {0};
    if (sb_bench_train_step(c, &r, &err) != SB_OK)
        return sb_cli_fail("bench", &err);
    if (g->j != NULL)
        bench_json_row(g->j, c, &r, peak_for(&g->peaks, c), g->threads);
    else
        bench_print_row(c, &r, peak_for(&g->peaks, c));
    return 0;
}

/* --model M: the configuration of the flags under each engine and precision; stops at the
 * first error. */
static int bench_model(const bench_grid *g, sb_bench_config c)
{
    const int n_runs = g->n_engines * g->n_precisions;
    for (int e = 0; e < n_runs; e++) {
        c.gemm = g->engines[e % g->n_engines];
        c.precision = g->precisions[e / g->n_engines];
        int rc = skip_run(&c, n_runs) ? 0 : bench_one(g, &c);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Every model at the two standard configurations, under each engine and precision; a model
 * that fails gets its error line and the others go on. */
static int bench_every_model(const bench_grid *g)
{
    const int n_runs = g->n_engines * g->n_precisions, n_standard = sb_models_count() * n_runs;
    int status = 0;
    for (int k = 0; k < 2; k++)
        for (int t = 0; t < n_standard; t++) {
            double t0 = sb_clock_seconds();
            sb_bench_config c = standard_configs[k];
            c.model = sb_models_name(t / n_runs);
            c.gemm = g->engines[t % n_runs % g->n_engines];
            c.precision = g->precisions[t % n_runs / g->n_engines];
            c.steps = g->steps;
            c.threads = g->threads;
            if (skip_run(&c, n_runs))
                continue;
            int rc = bench_one(g, &c);
            if (rc != 0) {
                status = rc;
                continue;
            }
            if (t == 0)
                bench_pace(sb_clock_seconds() - t0, n_standard,
                           k == 0 ? "at B16 T256 d64 L2" : "at B16 T400 d128 L4");
        }
    return status;
}

static int bench_models_with(sb_config *cfg, int argc, char **argv)
{
    const char *model = NULL;
    int json = 0, gemm_rates = 0, no_peak = 0;
    const char *gemm = "auto", *precision = "fp32";
    sb_option opts[32] = {
        {"model", SB_OPT_STRING, &model, "NAME",
         "one model (default: every model at the two standard configurations)", 0},
        {"json", SB_OPT_SWITCH, &json, NULL, "print JSON instead of a table", 0},
        {"gemm", SB_OPT_STRING, &gemm, "E[,E]",
         "GEMM engines, each model runs under each: openblas, onednn, auto (default auto)", 0},
        {"precision", SB_OPT_STRING, &precision, "P[,P]",
         "operands of the large products, each model runs in each: fp32, bf16 (default fp32)", 0},
        {"gemm_rates", SB_OPT_SWITCH, &gemm_rates, NULL,
         "first print each engine's GEMM GFLOP/s at 2048^3 and at the configuration's decoder, "
         "projection and weight-gradient shapes (table only)",
         0},
        {"no_peak", SB_OPT_SWITCH, &no_peak, NULL,
         "skip measuring the FP32 and BF16 peaks (% peak reads -): a clean window for a "
         "profiler",
         0},
    };
    int n_opts = sb_options_count(opts, 32);
    static const char *const keys[] = {"batch_size", "frames",  "feat_size", "layers", "inp",
                                       "classes",    "d_state", "steps",     "threads"};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
        sb_options_add_key(cfg, keys[k], NULL, opts, &n_opts);
    int rc = sb_cli_parse("bench",
                          "[--model M --batch_size B --frames T --feat_size D --layers L "
                          "--inp I --classes C] [--steps N] [--json]",
                          opts, n_opts, argc, argv, NULL, 0, NULL);
    if (rc >= 0)
        return rc;
    const sb_bench_config flags = {model,
                                   sb_run_flag(cfg, "batch_size"),
                                   sb_run_flag(cfg, "frames"),
                                   sb_run_flag(cfg, "feat_size"),
                                   sb_run_flag(cfg, "layers"),
                                   sb_run_flag(cfg, "inp"),
                                   sb_run_flag(cfg, "classes"),
                                   sb_run_flag(cfg, "d_state"),
                                   sb_run_flag(cfg, "steps"),
                                   sb_cli_threads(sb_run_flag(cfg, "threads")),
                                   NULL,
                                   NULL};
    bench_grid g = {.steps = flags.steps, .threads = flags.threads};
    if ((rc = bench_grid_lists(&g, gemm, precision, no_peak)) >= 0)
        return rc;
    const int n_runs = g.n_engines * g.n_precisions; /* each model under each engine, precision */
    if (json && (g.j = sb_jw_open(stdout, 0)) == NULL) {
        sb_error err = {0};
        sb_error_set(&err, SB_ERR_NOMEM, "out of memory");
        return sb_cli_fail("bench", &err);
    }
    if (json) {
        sb_jw_object_begin(g.j);
        bench_json_isa(g.j);
        sb_jw_key(g.j, "results");
        sb_jw_array_begin(g.j);
    } else {
        bench_print_header(&g.peaks, g.threads);
        if (gemm_rates && (rc = bench_print_gemm_rates(g.threads, flags.batch * flags.frames,
                                                       flags.width, flags.classes)) != 0)
            return rc;
        bench_print_columns();
    }
    int known = 0;
    for (int i = 0; model != NULL && i < sb_models_count(); i++)
        known |= strcmp(sb_models_name(i), model) == 0;
    if (model != NULL && known) /* an unknown model gets its one error line below */
        bench_announce(n_runs, g.steps, g.threads, !no_peak, model);
    else if (model == NULL)
        bench_announce(2 * sb_models_count() * n_runs, g.steps, g.threads, !no_peak,
                       "every model at B16 T256 d64 L2 and at B16 T400 d128 L4; --model M "
                       "times one");
    int status = model != NULL ? bench_model(&g, flags) : bench_every_model(&g);
    if (json && (model == NULL || status == 0)) {
        sb_jw_array_end(g.j);
        sb_jw_object_end(g.j);
        printf("\n");
    }
    sb_jw_close(g.j);
    return status;
}

static int bench_models(int argc, char **argv)
{
    return sb_run_with_settings("bench", bench_presets, bench_models_with, argc, argv);
}

int sb_cmd_bench(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[2], "data") == 0)
        return bench_data(argc, argv);
    if (argc >= 3 && strcmp(argv[2], "models") == 0)
        return bench_models(argc - 1, argv + 1);
    return bench_models(argc, argv);
}
