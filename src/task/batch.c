/* batch.c - padded batches assembled on the fly (see batch.h). */
#include "task/batch.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

sb_status sb_batch_init(sb_batch *batch, const sb_task *task, int max_B, sb_error *err)
{
    memset(batch, 0, sizeof *batch);
    if (max_B < 1)
        return sb_error_set(err, SB_ERR_INVALID, "batch size %d must be at least 1", max_B);
    batch->samples = sb_calloc((size_t)max_B, sizeof *batch->samples);
    batch->n_frames = sb_calloc((size_t)max_B, sizeof *batch->n_frames);
    batch->index = sb_calloc((size_t)max_B, sizeof *batch->index);
    if (!batch->samples || !batch->n_frames || !batch->index) {
        sb_batch_free(batch);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for a batch of %d", max_B);
    }
    batch->capacity_B = max_B;
    batch->V = task->n_inputs;
    for (int b = 0; b < max_B; b++) {
        sb_status st = sb_sample_alloc(task, &batch->samples[b], err);
        if (st != SB_OK) {
            sb_batch_free(batch);
            return st;
        }
    }
    return SB_OK;
}

void sb_batch_free(sb_batch *batch)
{
    if (batch->samples != NULL)
        for (int b = 0; b < batch->capacity_B; b++)
            sb_sample_free(&batch->samples[b]);
    sb_free(batch->samples);
    sb_free(batch->data);
    sb_free(batch->target);
    sb_free(batch->valid);
    sb_free(batch->elem_start);
    sb_free(batch->elem_len);
    sb_free(batch->n_frames);
    sb_free(batch->index);
    memset(batch, 0, sizeof *batch);
}

/* Grows the per-frame arrays to hold `frames` (B x T) frames. */
static sb_status batch_reserve_frames(sb_batch *batch, size_t frames, sb_error *err)
{
    if (frames <= batch->capacity_frames)
        return SB_OK;
    float *data = sb_realloc(batch->data, frames * (size_t)batch->V * sizeof *data);
    if (data != NULL)
        batch->data = data;
    int32_t *target = sb_realloc(batch->target, frames * sizeof *target);
    if (target != NULL)
        batch->target = target;
    uint8_t *valid = sb_realloc(batch->valid, frames);
    if (valid != NULL)
        batch->valid = valid;
    if (data == NULL || target == NULL || valid == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for a batch of %zu frames", frames);
    batch->capacity_frames = frames;
    return SB_OK;
}

/* Grows the per-element arrays to hold `elems` (B x E) elements. */
static sb_status batch_reserve_elems(sb_batch *batch, size_t elems, sb_error *err)
{
    if (elems <= batch->capacity_elems)
        return SB_OK;
    int32_t *start = sb_realloc(batch->elem_start, elems * sizeof *start);
    if (start != NULL)
        batch->elem_start = start;
    int32_t *len = sb_realloc(batch->elem_len, elems * sizeof *len);
    if (len != NULL)
        batch->elem_len = len;
    if (start == NULL || len == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for a batch of %zu elements", elems);
    batch->capacity_elems = elems;
    return SB_OK;
}

sb_status sb_batch_assemble(sb_batch *batch, const sb_task *task, sb_split split,
                            const int64_t *index, int B, int threads, sb_error *err)
{
    if (B < 1 || B > batch->capacity_B)
        return sb_error_set(err, SB_ERR_INVALID, "batch of %d samples exceeds its capacity %d", B,
                            batch->capacity_B);
    if (threads <= 0)
        threads = omp_get_max_threads();
    int64_t n = sb_task_split_size(task, split);
    for (int b = 0; b < B; b++)
        if (index[b] < 0 || index[b] >= n)
            return sb_error_set(err, SB_ERR_INVALID, "sample index %lld is outside [0, %lld)",
                                (long long)index[b], (long long)n);

    /* 1. assemble the samples (sequences and gaps), a group of them per thread */
    sb_status fail = SB_OK;
    int fail_b = B;
    sb_error fail_err = {0};
    int group = (B + threads - 1) / threads;
    if (group > 16)
        group = 16;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int first = 0; first < B; first += group) {
        sb_error local = {0};
        int count = B - first < group ? B - first : group;
        sb_status st =
            sb_task_sample_many(task, split, index + first, count, batch->samples + first, &local);
        if (st != SB_OK) {
#pragma omp critical(sb_batch_error)
            if (first < fail_b) {
                fail_b = first;
                fail = st;
                fail_err = local;
            }
        }
    }
    if (fail != SB_OK) {
        if (err != NULL)
            *err = fail_err;
        return fail;
    }

    /* 2. pad to the longest sample */
    int T = 0, E = 0;
    for (int b = 0; b < B; b++) {
        if (batch->samples[b].n_frames > T)
            T = batch->samples[b].n_frames;
        if (batch->samples[b].n_elements > E)
            E = batch->samples[b].n_elements;
    }
    sb_status st = batch_reserve_elems(batch, (size_t)B * (size_t)E, err);
    if (st != SB_OK)
        return st;
    batch->B = B;
    batch->T = T;
    batch->E = E;

    /* 3. each element's window */
    for (int b = 0; b < B; b++) {
        const sb_sample *s = &batch->samples[b];
        int32_t *start = batch->elem_start + (size_t)b * (size_t)E;
        int32_t *len = batch->elem_len + (size_t)b * (size_t)E;
        for (int k = 0; k < s->n_elements; k++) {
            start[k] = s->frame_start[k];
            len[k] = 1 + s->gap[k];
        }
        for (int k = s->n_elements; k < E; k++) {
            start[k] = 0;
            len[k] = 0;
        }
        batch->n_frames[b] = s->n_frames;
        batch->index[b] = index[b];
    }
    return SB_OK;
}

void sb_batch_frames(const sb_batch *batch, const sb_task *task, sb_split split, int t0, int len,
                     int threads, float *data, int32_t *target)
{
    if (threads <= 0)
        threads = omp_get_max_threads();
    const size_t V = (size_t)batch->V;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int b = 0; b < batch->B; b++)
        sb_task_sample_frames_range(task, split, batch->index[b], &batch->samples[b], t0, len,
                                    data + (size_t)b * (size_t)len * V,
                                    target + (size_t)b * (size_t)len);
}

sb_status sb_batch_fill(sb_batch *batch, const sb_task *task, sb_split split, const int64_t *index,
                        int B, int threads, sb_error *err)
{
    sb_status st = sb_batch_assemble(batch, task, split, index, B, threads, err);
    if (st != SB_OK)
        return st;
    const int T = batch->T;
    if ((st = batch_reserve_frames(batch, (size_t)B * (size_t)T, err)) != SB_OK)
        return st;
    /* frames, targets and masks */
    sb_batch_frames(batch, task, split, 0, T, threads, batch->data, batch->target);
    for (int b = 0; b < B; b++) {
        size_t frame0 = (size_t)b * (size_t)T;
        memset(batch->valid + frame0, 1, (size_t)batch->n_frames[b]);
        memset(batch->valid + frame0 + batch->n_frames[b], 0, (size_t)(T - batch->n_frames[b]));
    }
    return SB_OK;
}
