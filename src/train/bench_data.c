/*
 * bench_data.c - the data benchmark (`selectivbench bench data`; the stages and their
 * contract are the public header's sb_bench_data_stage): data generation timed stage by
 * stage, each first validated (the same hash on one thread and on all threads), warmed up,
 * then measured as the median of SB_BENCH_DATA_REPEATS runs.
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/timer.h"
#include "task/batch.h"
#include "task/task.h"
#include "train/bench.h"

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
        uint16_t *states = sb_malloc((size_t)E * BENCH_GROUP * sizeof *states);
        uint16_t *rows[BENCH_GROUP];
        for (int r = 0; r < BENCH_GROUP; r++)
            rows[r] = states != NULL ? states + (size_t)r * (size_t)E : NULL;
        sb_error local = {0};
#pragma omp for schedule(dynamic, 1)
        for (int64_t grp = 0; grp < n_groups; grp++) {
            uint64_t idx[BENCH_GROUP];
            int count =
                (int)(n - grp * BENCH_GROUP < BENCH_GROUP ? n - grp * BENCH_GROUP : BENCH_GROUP);
            for (int r = 0; r < count; r++)
                idx[r] = (uint64_t)(grp * BENCH_GROUP + r);
            if (states == NULL || sb_sampler_generate_many(sp, idx, count, rows, &local) != SB_OK) {
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
        sb_free(states);
    }
    double dt = sb_time_now() - t0;
    if (failed)
        sb_error_set(err, SB_ERR_RUNTIME, "sequence generation failed during the benchmark");
    *hash = total;
    return failed ? -1.0 : dt;
}

/* The whole split's checksum: n is the split size of the task given. */
static double bench_samples(const sb_task *task, int64_t n, int threads, uint64_t *hash,
                            sb_error *err)
{
    (void)n;
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

static const struct {
    const char *name;
    bench_fn fn;
} stages[SB_BENCH_DATA_STAGES] = {
    {"sequences", bench_sequences},
    {"samples", bench_samples},
    {"batches", bench_batches},
};

const char *sb_bench_data_stage_name(int s)
{
    return s >= 0 && s < SB_BENCH_DATA_STAGES ? stages[s].name : NULL;
}

sb_status sb_bench_data_stage(const sb_task *task, int s, int threads, double *seconds,
                              sb_error *err)
{
    if (task == NULL || seconds == NULL)
        return sb_error_set(err, SB_ERR_INVALID, "sb_bench_data_stage: %s is NULL",
                            task == NULL ? "task" : "seconds");
    *seconds = -1.0;
    if (s < 0 || s >= SB_BENCH_DATA_STAGES || threads < 1 || threads > SB_THREADS_MAX)
        return sb_error_set(err, SB_ERR_INVALID,
                            "data benchmark: stage %d (0..%d) on %d threads (at least 1)", s,
                            SB_BENCH_DATA_STAGES - 1, threads);
    const char *name = stages[s].name;
    bench_fn fn = stages[s].fn;
    int64_t n = task->cfg.dataset_size;
    /* validation on the first samples: the same hash on 1 and on `threads` threads */
    uint64_t h1 = 0, hn = 0;
    int64_t check_n = n < 2000 ? n : 2000;
    sb_task small = *task;
    small.cfg.dataset_size = check_n;
    if (fn(&small, check_n, 1, &h1, err) < 0 || fn(&small, check_n, threads, &hn, err) < 0)
        return err != NULL ? err->status : SB_ERR_RUNTIME;
    if (h1 != hn)
        return sb_error_set(err, SB_ERR_RUNTIME,
                            "%s differ between 1 and %d threads: the benchmark is invalid", name,
                            threads);
    double times[SB_BENCH_DATA_REPEATS];
    uint64_t h;
    for (int r = 0; r < SB_BENCH_DATA_REPEATS; r++) {
        times[r] = fn(task, n, threads, &h, err);
        if (times[r] < 0)
            return err != NULL ? err->status : SB_ERR_RUNTIME;
    }
    qsort(times, SB_BENCH_DATA_REPEATS, sizeof *times, cmp_double);
    *seconds = times[SB_BENCH_DATA_REPEATS / 2];
    return SB_OK;
}
