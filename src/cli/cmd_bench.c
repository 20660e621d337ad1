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

#include "cli.h"
#include "selectivbench/batch.h"
#include "selectivbench/task.h"
#include "selectivbench/timer.h"
#include "task_options.h"

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
    tf.cfg.train_gap_max = 1.0;
    tf.cfg.train_noise = 0.2;
    tf.cfg.dataset_size = 20000;
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

int sb_cmd_bench(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[2], "data") == 0)
        return bench_data(argc, argv);
    if (argc >= 3 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
        printf("usage: selectivbench bench data [flags]   data generation speed\n");
        return 0;
    }
    fprintf(stderr, "selectivbench bench: error: name a benchmark: 'selectivbench bench data' "
                    "(model benchmarks come with training)\n");
    return 2;
}
