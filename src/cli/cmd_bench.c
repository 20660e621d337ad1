/*
 * cmd_bench.c - `selectivbench bench data`: data generation speed at the paper's
 * configuration (vocab 41, amb 40, depth 40, 200 elements, task 2 gaps and noise).
 *
 * Three stages are timed separately, each first validated (the same hash on one thread
 * and on all threads), warmed up, then measured as the median of repeats:
 *   sequences  the state sequences alone (the reference's exact draws)
 *   samples    sequences + gap decisions and durations (what --checksum hashes)
 *   batches    padded batches of frames (one-hot + noise, targets, windows), B = 64
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "task/batch.h"
#include "train/bench.h"
#include "core/json_writer.h"
#include "model/model.h"
#include "task/task.h"
#include "core/timer.h"
#include "cli/task_options.h"

#define BENCH_REPEATS 3

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Generates the sequences of samples [0, n) on `threads` threads; returns seconds and a
 * hash of the sequences (order independent: summed per-sample hashes). */
#define BENCH_GROUP 32
static double bench_sequences(const sb_task *task, int64_t n, int threads, uint64_t *hash,
                              sb_error *err)
{
    const sb_sampler *sp = &task->sampler[SB_SPLIT_TRAIN];
    int E = sp->combined_seq_length;
    uint64_t total = 0;
    int failed = 0;
    int64_t n_groups = (n + BENCH_GROUP - 1) / BENCH_GROUP;
    double t0 = sb_time_now();
#pragma omp parallel num_threads(threads) reduction(+ : total) reduction(| : failed)
    {
        uint16_t *states = malloc((size_t)E * BENCH_GROUP * sizeof *states);
        uint16_t *rows[BENCH_GROUP];
        for (int r = 0; r < BENCH_GROUP; r++)
            rows[r] = states != NULL ? states + (size_t)r * (size_t)E : NULL;
        sb_error local = {0};
#pragma omp for schedule(dynamic, 1)
        for (int64_t grp = 0; grp < n_groups; grp++) {
            uint64_t idx[BENCH_GROUP];
            int count = (int)(n - grp * BENCH_GROUP < BENCH_GROUP ? n - grp * BENCH_GROUP
                                                                  : BENCH_GROUP);
            for (int r = 0; r < count; r++)
                idx[r] = (uint64_t)(grp * BENCH_GROUP + r);
            if (states == NULL ||
                sb_sampler_generate_many(sp, idx, count, rows, &local) != SB_OK) {
                failed = 1;
                continue;
            }
            for (int r = 0; r < count; r++) {
                uint64_t h = 0xcbf29ce484222325ull;
                for (int k = 0; k < E; k++)
                    h = (h ^ rows[r][k]) * 0x100000001b3ull;
                total += h;
            }
        }
        free(states);
    }
    double dt = sb_time_now() - t0;
    if (failed)
        sb_error_set(err, SB_ERR_RUNTIME, "sequence generation failed during the benchmark");
    *hash = total;
    return failed ? -1.0 : dt;
}

static double bench_samples(const sb_task *task, int threads, uint64_t *hash, sb_error *err)
{
    double t0 = sb_time_now();
    if (sb_task_split_checksum(task, SB_SPLIT_TRAIN, threads, hash, NULL, err) != SB_OK)
        return -1.0;
    return sb_time_now() - t0;
}

static double bench_batches(const sb_task *task, int64_t n, int threads, uint64_t *hash,
                            sb_error *err)
{
    const int B = 64;
    sb_batch batch;
    if (sb_batch_init(&batch, task, B, err) != SB_OK)
        return -1.0;
    int64_t index[64];
    double sum = 0.0;
    double t0 = sb_time_now();
    for (int64_t start = 0; start < n; start += B) {
        int count = (int)(n - start < B ? n - start : B);
        for (int b = 0; b < count; b++)
            index[b] = start + b;
        if (sb_batch_fill(&batch, task, SB_SPLIT_TRAIN, index, count, threads, err) != SB_OK) {
            sb_batch_free(&batch);
            return -1.0;
        }
        sum += (double)batch.data[(size_t)batch.T * (size_t)batch.V / 2] + batch.T;
    }
    double dt = sb_time_now() - t0;
    sb_batch_free(&batch);
    memcpy(hash, &sum, sizeof *hash);
    return dt;
}

typedef double (*bench_fn)(const sb_task *, int64_t, int, uint64_t *, sb_error *);

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

static void bench_json_isa(sb_json *j)
{
    sb_bench_isa isa;
    sb_bench_isa_get(&isa);
    sb_json_key(j, "isa");
    sb_json_object_begin(j);
    sb_json_key(j, "built_level");
    sb_json_string(j, isa.built_level);
    sb_json_key(j, "built");
    sb_json_string(j, isa.built);
    sb_json_key(j, "native");
    sb_json_bool(j, isa.native);
    sb_json_key(j, "cpu_level");
    sb_json_string(j, isa.cpu_level);
    sb_json_key(j, "cpu");
    sb_json_string(j, isa.cpu);
    sb_json_key(j, "blas_core");
    sb_json_string(j, isa.blas_core);
    sb_json_object_end(j);
}

static double bench_samples_adapter(const sb_task *task, int64_t n, int threads, uint64_t *hash,
                                    sb_error *err)
{
    (void)n;
    return bench_samples(task, threads, hash, err);
}

/* Median seconds over BENCH_REPEATS runs after a warm-up; checks that the hash is the
 * same for 1 thread and for `threads`. Returns a negative value on failure. */
static double bench_stage(const char *name, bench_fn fn, const sb_task *task, int64_t n,
                          int threads, sb_error *err)
{
    uint64_t h1 = 0, hn = 0;
    int64_t check_n = n < 2000 ? n : 2000;
    sb_task small = *task;
    small.cfg.dataset_size = check_n;
    if (fn(&small, check_n, 1, &h1, err) < 0 || fn(&small, check_n, threads, &hn, err) < 0)
        return -1.0;
    if (h1 != hn) {
        sb_error_set(err, SB_ERR_RUNTIME,
                     "%s differ between 1 and %d threads: the benchmark is invalid", name,
                     threads);
        return -1.0;
    }
    double times[BENCH_REPEATS];
    uint64_t h;
    for (int r = 0; r < BENCH_REPEATS; r++) {
        times[r] = fn(task, n, threads, &h, err);
        if (times[r] < 0)
            return -1.0;
    }
    qsort(times, BENCH_REPEATS, sizeof *times, cmp_double);
    return times[BENCH_REPEATS / 2];
}

static int bench_data(int argc, char **argv)
{
    sb_task_flags tf;
    sb_option opts[SB_TASK_MAX_OPTIONS + 4];
    int n_opts = 0;
    sb_task_options_add(&tf, opts, &n_opts, 0);
    /* the paper's task 2 configuration: noisy gaps U(0.1, 1.0) s */
    tf.run.task.train_gap_max = 1.0;
    tf.run.task.train_noise = 0.2;
    tf.run.task.dataset_size = 20000;
    int threads = 0;
    opts[n_opts++] = (sb_option){"threads", SB_OPT_INT, &threads, 0, 1024, NULL, NULL,
                                 "threads for the parallel runs (default: all cores)", 0};
    /* argv[1] is "bench", argv[2] is "data": shift by one */
    int rc = sb_cli_parse("bench data", "[task flags] (defaults: task 2, 20000 samples)", opts,
                          n_opts, argc - 1, argv + 1, NULL, 0, NULL);
    if (rc >= 0)
        return rc;
    threads = sb_cli_threads(threads);
    sb_error err = {0};
    sb_task *task = NULL;
    if (sb_task_options_finish(&tf, &err) != SB_OK || sb_task_create(&tf.cfg, &task, &err) != SB_OK)
        return sb_cli_fail("bench", &err);
    int64_t n = task->cfg.dataset_size;
    int E = task->n_elements[SB_SPLIT_TRAIN];
    bench_print_isa();
    printf("bench data: vocab %d, amb %d, amb_depth %d, %d elements, gaps U(%g, %g) s, noise "
           "%g; %lld samples, median of %d\n",
           task->grammar->config.vocab, task->grammar->config.amb,
           task->grammar->config.amb_depth, E, task->cfg.train_gap_min, task->cfg.train_gap_max,
           task->cfg.train_noise, (long long)n, BENCH_REPEATS);
    printf("%-10s %7s %12s %14s %14s %16s\n", "stage", "threads", "seconds", "samples/s",
           "symbols/s", "200k set (s)");
    struct {
        const char *name;
        bench_fn fn;
    } stages[] = {{"sequences", bench_sequences},
                  {"samples", bench_samples_adapter},
                  {"batches", bench_batches}};
    int thread_counts[2] = {1, threads};
    for (size_t s = 0; s < sizeof stages / sizeof *stages; s++) {
        for (int t = 0; t < (threads > 1 ? 2 : 1); t++) {
            double sec = bench_stage(stages[s].name, stages[s].fn, task, n, thread_counts[t], &err);
            if (sec < 0) {
                sb_task_free(task);
                return sb_cli_fail("bench", &err);
            }
            double rate = (double)n / sec;
            printf("%-10s %7d %12.3f %14.0f %14.3g %16.2f\n", stages[s].name, thread_counts[t],
                   sec, rate, rate * E, 200000.0 / rate);
            fflush(stdout);
        }
    }
    printf("peak memory %.1f MiB\n", sb_peak_rss_mib());
    sb_task_free(task);
    return 0;
}

/* ---- models ---------------------------------------------------------------------------- */

/* The two standard configurations of the issues: small (B16 T256 d64 L2, inp 9, 65 classes)
 * and large (B16 T400 d128 L4, inp 41, 1601 classes). */
static const sb_bench_config standard_configs[2] = {
    {NULL, 16, 256, 64, 2, 9, 65, 128, 5, 0},
    {NULL, 16, 400, 128, 4, 41, 1601, 128, 5, 0},
};

static void bench_json_row(sb_json *j, const sb_bench_config *c, const sb_bench_result *r,
                           double peak, int threads)
{
    sb_json_object_begin(j);
    sb_json_key(j, "model");
    sb_json_string(j, c->model);
    sb_json_key(j, "batch_size");
    sb_json_int(j, c->batch);
    sb_json_key(j, "frames");
    sb_json_int(j, c->frames);
    sb_json_key(j, "feat_size");
    sb_json_int(j, c->width);
    sb_json_key(j, "layers");
    sb_json_int(j, c->layers);
    sb_json_key(j, "inp");
    sb_json_int(j, c->inputs);
    sb_json_key(j, "classes");
    sb_json_int(j, c->classes);
    sb_json_key(j, "params");
    sb_json_uint(j, r->params);
    sb_json_key(j, "step_ms");
    sb_json_double(j, r->step_ms);
    sb_json_key(j, "tokens_per_s");
    sb_json_double(j, r->tokens_per_s);
    sb_json_key(j, "gflops");
    sb_json_double(j, r->gflops);
    sb_json_key(j, "peak_gflops");
    sb_json_double(j, peak);
    sb_json_key(j, "blas_core");
    sb_json_string(j, sb_blas_core_name());
    sb_json_key(j, "peak_fraction");
    sb_json_double(j, peak > 0 ? r->gflops / peak : 0.0);
    sb_json_key(j, "memory_mib");
    sb_json_double(j, r->memory_mib);
    sb_json_key(j, "threads");
    sb_json_int(j, threads);
    sb_json_object_end(j);
}

static void bench_print_header(double peak, int threads)
{
    bench_print_isa();
    /* the kernel set matters: OPENBLAS_CORETYPE can force a slower one */
    printf("FP32 peak (sgemm 2048^3, %d thread%s, OpenBLAS %s kernels): %.1f GFLOP/s\n", threads,
           threads == 1 ? "" : "s", sb_blas_core_name(), peak);
    printf("%-24s %-24s %9s %9s %11s %8s %7s %9s\n", "model", "config", "params", "step ms",
           "tokens/s", "GFLOP/s", "% peak", "mem MiB");
}

static void bench_print_row(const sb_bench_config *c, const sb_bench_result *r, double peak)
{
    char conf[64];
    snprintf(conf, sizeof conf, "B%d T%d d%d L%d %d/%d", c->batch, c->frames, c->width, c->layers,
             c->inputs, c->classes);
    printf("%-24s %-24s %9zu %9.1f %11.0f %8.1f %6.1f%% %9.1f\n", c->model, conf, r->params,
           r->step_ms, r->tokens_per_s, r->gflops, peak > 0 ? 100.0 * r->gflops / peak : 0.0,
           r->memory_mib);
    fflush(stdout);
}

static int bench_models(int argc, char **argv)
{
    const char *model = NULL;
    int B = 16, T = 256, D = 64, L = 2, I = 9, C = 65, N = 128, steps = 5, threads = 0, json = 0;
    sb_option opts[] = {
        {"model", SB_OPT_STRING, &model, 0, 0, NULL, "NAME",
         "one model (default: every model at the two standard configurations)", 0},
        {"batch_size", SB_OPT_INT, &B, 1, 1e5, NULL, "B", "batch (default 16)", 0},
        {"frames", SB_OPT_INT, &T, 1, 1e7, NULL, "T", "frames per sample (default 256)", 0},
        {"feat_size", SB_OPT_INT, &D, 1, 65536, NULL, "D", "model width (default 64)", 0},
        {"layers", SB_OPT_INT, &L, 1, 1024, NULL, "L", "blocks (default 2)", 0},
        {"inp", SB_OPT_INT, &I, 1, 1e6, NULL, "I", "one-hot inputs (default 9)", 0},
        {"classes", SB_OPT_INT, &C, 1, 1e6, NULL, "C", "classes (default 65)", 0},
        {"d_state", SB_OPT_INT, &N, 1, 65536, NULL, "N", "SSM state size (default 128)", 0},
        {"steps", SB_OPT_INT, &steps, 1, 10000, NULL, NULL, "timed steps, median (default 5)", 0},
        {"threads", SB_OPT_INT, &threads, 0, 1024, NULL, NULL, "threads (default: all cores)", 0},
        {"json", SB_OPT_SWITCH, &json, 0, 1, NULL, NULL, "print JSON instead of a table", 0},
    };
    int n_opts = (int)(sizeof opts / sizeof *opts);
    int rc = sb_cli_parse("bench", "[--model M --batch_size B --frames T --feat_size D --layers L "
                                   "--inp I --classes C] [--steps N] [--json]",
                          opts, n_opts, argc, argv, NULL, 0, NULL);
    if (rc >= 0)
        return rc;
    threads = sb_cli_threads(threads);
    sb_error err = {0};
    double peak = sb_bench_sgemm_peak(threads);
    sb_json j;
    sb_json_init(&j, stdout, 0);
    if (json) {
        sb_json_object_begin(&j);
        bench_json_isa(&j);
        sb_json_key(&j, "results");
        sb_json_array_begin(&j);
    } else {
        bench_print_header(peak, threads);
    }
    int status = 0;
    if (model != NULL) {
        sb_bench_config c = {model, B, T, D, L, I, C, N, steps, threads};
        sb_bench_result r;
        if (sb_bench_train_step(&c, &r, &err) != SB_OK)
            return sb_cli_fail("bench", &err);
        if (json)
            bench_json_row(&j, &c, &r, peak, threads);
        else
            bench_print_row(&c, &r, peak);
    } else {
        const sb_layer_type *const *types = sb_layer_types();
        for (int k = 0; k < 2; k++)
            for (int t = 0; types[t] != NULL; t++) {
                sb_bench_config c = standard_configs[k];
                c.model = types[t]->name;
                c.steps = steps;
                c.threads = threads;
                sb_bench_result r;
                if (sb_bench_train_step(&c, &r, &err) != SB_OK) {
                    fprintf(stderr, "selectivbench bench: error: %s\n", err.msg);
                    status = sb_status_exit_code(err.status);
                    continue;
                }
                if (json)
                    bench_json_row(&j, &c, &r, peak, threads);
                else
                    bench_print_row(&c, &r, peak);
            }
    }
    if (json) {
        sb_json_array_end(&j);
        sb_json_object_end(&j);
        printf("\n");
    }
    return status;
}

int sb_cmd_bench(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[2], "data") == 0)
        return bench_data(argc, argv);
    if (argc >= 3 && strcmp(argv[2], "models") == 0)
        return bench_models(argc - 1, argv + 1);
    return bench_models(argc, argv);
}
