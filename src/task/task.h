/*
 * task.h - a SelectivBench task: grammar + sequences + gaps, as the model sees them
 * (docs/task.md, "Samples", docs/training.md "Runs and datasets").
 *
 * A task is created once from its configuration (the reference's task flags). Samples
 * are assembled on demand and are pure functions of (configuration, split, index): no
 * dataset is materialised, the result does not depend on threads or on the order in
 * which samples are requested.
 *
 * Randomness of the gaps (whether an element gets a gap, its duration, the distractor
 * symbols) and of the additive noise:
 *   - SB_GAP_RNG_DERIVED (default): every draw comes from a PCG64 stream seeded from
 *     (task seed, split, sample index); train and test draws are independent.
 *   - SB_GAP_RNG_REFERENCE: the streams of the reference's on-the-fly mode, exactly:
 *     gap decisions from default_rng(seed) shared by the samples in index order (jumped
 *     ahead to sample i with PCG64 advance), durations and distractors from the legacy
 *     MT19937 seeded with seed * idx. Used to check the assembly against the reference.
 *   Additive noise has no reproducible reference stream; it always uses the derived one.
 */
#ifndef SELECTIVBENCH_TASK_H
#define SELECTIVBENCH_TASK_H

#include <stdint.h>

#include "config/task_config.h"
#include "core/status.h"
#include "task/grammar.h"
#include "task/sequence.h"

#define SB_TIMESTEP 0.1 /* seconds per frame */
/* SB_MAX_GAP_SECONDS (10 000 frames per gap at most) is the public header's */

/* sb_split (SB_SPLIT_TRAIN, SB_SPLIT_TEST, SB_SPLIT_VALID) and SB_SPLIT_COUNT are the public
 * header's (via core/status.h). The validation split is drawn as the test is: its sampler
 * and element count are the test's. */

/* Checks every field; one error line naming the flag. */
sb_status sb_task_config_check(const sb_task_config *cfg, sb_error *err);

/* Interleaved walks (--walk_len N, docs/task.md "Interleaved walks"): a sample of E elements
 * interleaves K = ceil(E / N) walks, each a sample of the reference task of its own (walk j
 * of the sample on sequence s is the prefix of sequence s * walk_stride + j, so the splits
 * stay disjoint as their sequences are); each element belongs to a walk drawn uniformly from
 * the sample's own stream, shows its symbol and its walk's tag (inputs vocab + j) and is
 * scored on its walk's state. */
#define SB_MAX_WALKS 64

typedef struct sb_task {
    sb_task_config cfg;
    sb_grammar *grammar;
    sb_sampler sampler[SB_SPLIT_COUNT]; /* per split */
    int n_elements[SB_SPLIT_COUNT];     /* elements per sample, per split */
    int n_walks[SB_SPLIT_COUNT];        /* interleaved walks per sample (1 without walk_len) */
    int walk_stride; /* the most walks of any split: tags, and the sequence stride */
    int n_inputs;    /* one-hot width: vocab, plus walk_stride tags with walk_len */
} sb_task;

/* Builds the grammar and the samplers. *out is freed with sb_task_free. */
sb_status sb_task_create(const sb_task_config *cfg, sb_task **out, sb_error *err);
void sb_task_free(sb_task *task);

/* Number of samples of a split, and the sequence index behind sample i of the split:
 * the reference protocol uses idx i for training and test (its test sequences are the first
 * training sequences), the clean protocol moves the test set to dataset_size + i. Under
 * both, validation sample i is sequence dataset_size + test_size + i: past every training
 * sequence and past the clean protocol's test. */
int64_t sb_task_split_size(const sb_task *task, sb_split split);
uint64_t sb_task_sequence_index(const sb_task *task, sb_split split, int64_t i);

/* Gap duration of a test sample (seconds). */
double sb_task_test_duration(const sb_task *task);

/* One assembled sample before it becomes frames: per element its state and its gap. */
typedef struct sb_sample {
    int n_elements;       /* E */
    int n_frames;         /* T = E + sum of gaps */
    uint16_t *state;      /* [E] state index (class and target id follow from it) */
    int32_t *gap;         /* [E] gap frames after the element's symbol frame */
    int32_t *frame_start; /* [E] frame of the element's symbol */
    uint8_t *gap_class;   /* [n_gap_classes] distractor classes, in frame order */
    int n_gap_classes;
    int capacity_gap_classes;
    uint8_t *walk;        /* [E] the walk of each element (all 0 without walk_len) */
    uint16_t *walk_state; /* [walk_stride * E] scratch: the walks before interleaving */
} sb_sample;

/* Allocates a sample able to hold any sample of the task. */
sb_status sb_sample_alloc(const sb_task *task, sb_sample *s, sb_error *err);
void sb_sample_free(sb_sample *s);

/* Assembles sample i of a split: state sequence, gap decisions, durations and
 * distractor symbols. Errors: SB_ERR_RUNTIME from the sampler; SB_ERR_INVALID when the
 * reference gap stream is asked for seed * idx >= 2^32 (numpy's legacy seed limit). */
sb_status sb_task_sample(const sb_task *task, sb_split split, int64_t i, sb_sample *s,
                         sb_error *err);

/* Assembles samples i[0..n-1] of a split into samples[0..n-1]: the same result as n calls
 * of sb_task_sample, faster (their sequences are walked together). */
sb_status sb_task_sample_many(const sb_task *task, sb_split split, const int64_t *i, int n,
                              sb_sample *samples, sb_error *err);

/* Writes the frames of an assembled sample: data[T][V] one-hot rows (zero or
 * distractor gap frames, plus noise when configured), target[T] state ids.
 * data must hold n_frames * n_inputs floats, target n_frames ints. */
void sb_task_sample_frames(const sb_task *task, sb_split split, int64_t i, const sb_sample *s,
                           float *data, int32_t *target);

/* Frames [t0, t0 + len) of an assembled sample, exactly as sb_task_sample_frames writes
 * them (the same noise floats): data[len][V], target[len]. Frames at or past n_frames are
 * padding (zero rows, target 0). Streaming evaluation builds a batch a chunk at a time. */
void sb_task_sample_frames_range(const sb_task *task, sb_split split, int64_t i, const sb_sample *s,
                                 int t0, int len, float *data, int32_t *target);

/* A 64-bit FNV-1a hash of an assembled sample: sequence index, states, class ids, state
 * ids, gaps and distractors (not the noise). */
uint64_t sb_sample_hash(const sb_task *task, const sb_sample *s, uint64_t seq_idx);

/* Hash of a whole split: generates every sample on `threads` threads (0: all) and
 * combines the per-sample hashes in index order, so the result is the same for any
 * thread count. *n_symbols receives the number of elements generated. */
sb_status sb_task_split_checksum(const sb_task *task, sb_split split, int threads, uint64_t *hash,
                                 int64_t *n_symbols, sb_error *err);

/* Writes the reference's dataset folder: `train` and `test` (one sample per line,
 * "[classes]::['states']::length", index order), `transitions` and `config.yaml`, so
 * the original PyTorch code reads our data. Files are written under a temporary name
 * and renamed. Errors: SB_ERR_IO naming the path. */
sb_status sb_task_export(const sb_task *task, const char *dir, int threads, sb_error *err);

#endif
