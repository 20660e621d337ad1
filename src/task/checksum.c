/* checksum.c - hashing a whole split in parallel, identically for any thread count. */
#include <omp.h>
#include <stdlib.h>

#include "core/alloc.h"
#include "task/task.h"

#define CHECKSUM_CHUNK 32 /* samples assembled together by one thread */

sb_status sb_task_split_checksum(const sb_task *task, sb_split split, int threads, uint64_t *hash,
                                 int64_t *n_symbols, sb_error *err)
{
    int64_t n = sb_task_split_size(task, split);
    int64_t n_chunks = (n + CHECKSUM_CHUNK - 1) / CHECKSUM_CHUNK;
    uint64_t *sample_hash = sb_malloc((size_t)n * sizeof *sample_hash);
    if (sample_hash == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for %lld sample hashes",
                            (long long)n);
    if (threads <= 0)
        threads = omp_get_max_threads();

    /* The first failing chunk wins, so the reported error does not depend on timing. */
    int64_t fail_chunk = n_chunks;
    sb_error fail_err = {0};
    sb_status fail_status = SB_OK;

#pragma omp parallel num_threads(threads)
    {
        sb_sample samples[CHECKSUM_CHUNK];
        sb_error local_err = {0};
        sb_status alloc_status = SB_OK;
        int n_alloc = 0;
        for (; n_alloc < CHECKSUM_CHUNK && alloc_status == SB_OK; n_alloc++)
            alloc_status = sb_sample_alloc(task, &samples[n_alloc], &local_err);
        if (alloc_status != SB_OK)
            n_alloc--;
#pragma omp for schedule(dynamic, 1)
        for (int64_t c = 0; c < n_chunks; c++) {
            int64_t first = c * CHECKSUM_CHUNK;
            int count = (int)(n - first < CHECKSUM_CHUNK ? n - first : CHECKSUM_CHUNK);
            int64_t idx[CHECKSUM_CHUNK];
            for (int r = 0; r < count; r++)
                idx[r] = first + r;
            sb_status st = alloc_status;
            if (st == SB_OK)
                st = sb_task_sample_many(task, split, idx, count, samples, &local_err);
            if (st != SB_OK) {
#pragma omp critical(sb_checksum_error)
                if (c < fail_chunk) {
                    fail_chunk = c;
                    fail_err = local_err;
                    fail_status = st;
                }
                continue;
            }
            for (int r = 0; r < count; r++)
                sample_hash[first + r] =
                    sb_sample_hash(task, &samples[r], sb_task_sequence_index(task, split, idx[r]));
        }
        for (int r = 0; r < n_alloc; r++)
            sb_sample_free(&samples[r]);
    }

    if (fail_status != SB_OK) {
        sb_free(sample_hash);
        if (err != NULL)
            *err = fail_err;
        return fail_status;
    }
    uint64_t h = 0xcbf29ce484222325ull;
    for (int64_t i = 0; i < n; i++)
        h = (h ^ sample_hash[i]) * 0x100000001b3ull;
    sb_free(sample_hash);
    *hash = h;
    if (n_symbols != NULL)
        *n_symbols = n * task->n_elements[split];
    return SB_OK;
}
