/*
 * batch.h - padded batches of assembled samples, built on the fly (docs/task.md, "Samples").
 *
 * A batch holds B samples padded to the longest one: one-hot (plus noise) frames, the
 * target state id per frame, a validity mask, and each element's accuracy window
 * (its symbol frame and its gap frames, which are contiguous: stored as start and
 * length instead of the reference's dense [B][E][T] mask).
 */
#ifndef SELECTIVBENCH_BATCH_H
#define SELECTIVBENCH_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "task/task.h"

typedef struct sb_batch {
    int B;               /* samples in the batch */
    int T;               /* padded frames (longest sample) */
    int E;               /* padded elements */
    int V;               /* inputs per frame */
    float *data;         /* [B][T][V] */
    int32_t *target;     /* [B][T] state id, 0 on padding */
    uint8_t *valid;      /* [B][T] 1 on real frames */
    int32_t *elem_start; /* [B][E] first frame of each element's window */
    int32_t *elem_len;   /* [B][E] window length, 0 on padding rows */
    int32_t *n_frames;   /* [B] real frames of each sample */
    int64_t *index;      /* [B] sample index within the split */

    /* storage (grows as needed; never shrinks) */
    int capacity_B;
    size_t capacity_frames; /* B * T capacity */
    size_t capacity_elems;  /* B * E capacity */
    sb_sample *samples;     /* [capacity_B] assembly workspace */
} sb_batch;

/* Prepares an empty batch for up to max_B samples of task. */
sb_status sb_batch_init(sb_batch *batch, const sb_task *task, int max_B, sb_error *err);
void sb_batch_free(sb_batch *batch);

/* Assembles samples index[0..B-1] of a split into the batch, on `threads` threads
 * (0: all); the result does not depend on the thread count. */
sb_status sb_batch_fill(sb_batch *batch, const sb_task *task, sb_split split, const int64_t *index,
                        int B, int threads, sb_error *err);

/* The first half of sb_batch_fill: assembles samples index[0..B-1] (sequences, gaps) and
 * sets B, T, E, the element windows, n_frames and index, without the per-frame arrays
 * (data, target and valid are left as they were). Errors: those of sb_batch_fill. */
sb_status sb_batch_assemble(sb_batch *batch, const sb_task *task, sb_split split,
                            const int64_t *index, int B, int threads, sb_error *err);

/* Frames [t0, t0 + len) of every sample of an assembled batch, bit-identical to those
 * sb_batch_fill writes (noise included): data[B][len][V], target[B][len] (frames past a
 * sample's end: zero rows, target 0). Evaluation streams a batch through this, so its
 * memory does not grow with the frames. */
void sb_batch_frames(const sb_batch *batch, const sb_task *task, sb_split split, int t0, int len,
                     int threads, float *data, int32_t *target);

#endif
