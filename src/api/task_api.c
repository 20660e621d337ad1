/* task_api.c - the public API's tasks and batches (selectivbench.h): wrappers over
 * task/task.h and task/batch.h. */
#include <string.h>

#include "api/api.h"
#include "core/alloc.h"
#include "task/batch.h"
#include "task/task.h"

sb_status sb_task_from_config(const sb_config *cfg, sb_task **out, sb_error *err)
{
    SB_API_REQUIRE(out, err);
    *out = NULL;
    SB_API_REQUIRE(cfg, err);
    return sb_task_create(&cfg->run.task, out, err);
}

/* sb_task_free is task.c's own (the same function). */

void sb_task_get_facts(const sb_task *task, sb_task_facts *facts)
{
    SB_ASSERT(task != NULL && facts != NULL);
    const sb_grammar *g = task->grammar;
    memset(facts, 0, sizeof *facts);
    facts->letters = g->n_letters;
    facts->inputs = task->n_inputs;
    facts->states = g->n_states;
    facts->transitions = g->n_transitions;
    facts->ambiguous_letters = g->config.amb;
    facts->states_per_ambiguous_letter = g->config.amb_depth;
    facts->topological_entropy = g->topological_entropy;
    facts->train_size = sb_task_split_size(task, SB_SPLIT_TRAIN);
    facts->test_size = sb_task_split_size(task, SB_SPLIT_TEST);
    facts->train_elements = task->n_elements[SB_SPLIT_TRAIN];
    facts->test_elements = task->n_elements[SB_SPLIT_TEST];
    facts->valid_size = sb_task_split_size(task, SB_SPLIT_VALID);
}

/* Checks the arguments of a batch request. */
static sb_status check_batch_request(const sb_task *task, sb_split split, const int64_t *index,
                                     int count, int threads, sb_error *err)
{
    SB_API_REQUIRE(task, err);
    sb_status st_threads = sb_threads_check(threads, "the batch", err);
    if (st_threads != SB_OK)
        return st_threads;
    SB_API_REQUIRE(index, err);
    if (split != SB_SPLIT_TRAIN && split != SB_SPLIT_TEST && split != SB_SPLIT_VALID)
        return sb_error_set(err, SB_ERR_INVALID,
                            "unknown split %d (SB_SPLIT_TRAIN, SB_SPLIT_TEST or SB_SPLIT_VALID)",
                            (int)split);
    if (count < 1)
        return sb_error_set(err, SB_ERR_INVALID, "a batch needs at least one sample (count %d)",
                            count);
    int64_t size = sb_task_split_size(task, split);
    for (int b = 0; b < count; b++)
        if (index[b] < 0 || index[b] >= size)
            return sb_error_set(err, SB_ERR_INVALID,
                                "sample index %lld (batch row %d) is outside the %s split's "
                                "[0, %lld)",
                                (long long)index[b], b, sb_split_name(split), (long long)size);
    return SB_OK;
}

/* Checks a batch request and assembles it into batch (initialised here; the caller frees
 * it). */
static sb_status fill_batch(const sb_task *task, sb_split split, const int64_t *index, int count,
                            int threads, sb_batch *batch, sb_error *err)
{
    memset(batch, 0, sizeof *batch);
    sb_status st = check_batch_request(task, split, index, count, threads, err);
    if (st == SB_OK)
        st = sb_batch_init(batch, task, count, err);
    if (st == SB_OK)
        st = sb_batch_fill(batch, task, split, index, count, threads, err);
    return st;
}

sb_status sb_task_batch_shape(const sb_task *task, sb_split split, const int64_t *index, int count,
                              sb_batch_shape *shape, sb_error *err)
{
    SB_API_REQUIRE(shape, err);
    memset(shape, 0, sizeof *shape);
    sb_batch batch;
    sb_status st = fill_batch(task, split, index, count, 0, &batch, err);
    if (st == SB_OK)
        *shape = (sb_batch_shape){
            .batch = batch.B, .frames = batch.T, .elements = batch.E, .inputs = batch.V};
    sb_batch_free(&batch);
    return st;
}

sb_status sb_task_read_batch(const sb_task *task, sb_split split, const int64_t *index, int count,
                             const sb_batch_shape *shape, float *inputs, int32_t *targets,
                             uint8_t *valid, int32_t *window_start, int32_t *window_len,
                             sb_error *err)
{
    SB_API_REQUIRE(shape, err);
    sb_batch batch;
    sb_status st = fill_batch(task, split, index, count, 0, &batch, err);
    if (st == SB_OK && (shape->batch != batch.B || shape->inputs != batch.V ||
                        shape->frames < batch.T || shape->elements < batch.E))
        st = sb_error_set(err, SB_ERR_INVALID,
                          "the arrays' shape [%d][%d][%d] with %d elements does not hold this "
                          "batch: [%d][%d][%d] with %d elements (see sb_task_batch_shape)",
                          shape->batch, shape->frames, shape->inputs, shape->elements, batch.B,
                          batch.T, batch.V, batch.E);
    if (st != SB_OK) {
        sb_batch_free(&batch);
        return st;
    }
    /* row by row: the caller's strides (shape) may be larger than the batch's own */
    size_t T = (size_t)shape->frames, E = (size_t)shape->elements, V = (size_t)shape->inputs;
    size_t bT = (size_t)batch.T, bE = (size_t)batch.E;
    for (size_t b = 0; b < (size_t)batch.B; b++) {
        if (inputs != NULL) {
            memset(inputs + b * T * V, 0, T * V * sizeof *inputs);
            memcpy(inputs + b * T * V, batch.data + b * bT * V, bT * V * sizeof *inputs);
        }
        if (targets != NULL) {
            memset(targets + b * T, 0, T * sizeof *targets);
            memcpy(targets + b * T, batch.target + b * bT, bT * sizeof *targets);
        }
        if (valid != NULL) {
            memset(valid + b * T, 0, T * sizeof *valid);
            memcpy(valid + b * T, batch.valid + b * bT, bT * sizeof *valid);
        }
        if (window_start != NULL) {
            memset(window_start + b * E, 0, E * sizeof *window_start);
            memcpy(window_start + b * E, batch.elem_start + b * bE, bE * sizeof *window_start);
        }
        if (window_len != NULL) {
            memset(window_len + b * E, 0, E * sizeof *window_len);
            memcpy(window_len + b * E, batch.elem_len + b * bE, bE * sizeof *window_len);
        }
    }
    sb_batch_free(&batch);
    return SB_OK;
}

/* The batch object: the library's own padded batch, assembled once and read in place. */
struct sb_task_batch {
    sb_batch batch;
    const sb_task *task; /* the task it was made for: its storage fits that task's frames */
};

sb_status sb_task_batch_make(const sb_task *task, sb_split split, const int64_t *index, int count,
                             int threads, sb_task_batch **out, sb_error *err)
{
    SB_API_REQUIRE(out, err);
    *out = NULL;
    sb_task_batch *b = sb_calloc(1, sizeof *b);
    if (b == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory");
    sb_status st = fill_batch(task, split, index, count, threads, &b->batch, err);
    if (st != SB_OK) {
        sb_batch_free(&b->batch);
        sb_free(b);
        return st;
    }
    b->task = task;
    *out = b;
    return SB_OK;
}

sb_status sb_task_batch_refill(sb_task_batch *b, const sb_task *task, sb_split split,
                               const int64_t *index, int count, int threads, sb_error *err)
{
    SB_API_REQUIRE(b, err);
    if (task != b->task)
        return sb_error_set(err, SB_ERR_INVALID,
                            "sb_task_batch_refill: the batch was made for another task");
    sb_status st = check_batch_request(task, split, index, count, threads, err);
    if (st != SB_OK)
        return st;
    if (count > b->batch.capacity_B) { /* more rows than it was made for: new storage */
        sb_batch bigger;
        if ((st = sb_batch_init(&bigger, task, count, err)) != SB_OK)
            return st;
        sb_batch_free(&b->batch);
        b->batch = bigger;
    }
    return sb_batch_fill(&b->batch, task, split, index, count, threads, err);
}

void sb_task_batch_view(const sb_task_batch *b, sb_batch_shape *shape, sb_batch_arrays *arrays)
{
    if (shape != NULL)
        *shape = (sb_batch_shape){.batch = b->batch.B,
                                  .frames = b->batch.T,
                                  .elements = b->batch.E,
                                  .inputs = b->batch.V};
    if (arrays != NULL)
        *arrays = (sb_batch_arrays){.inputs = b->batch.data,
                                    .targets = b->batch.target,
                                    .valid = b->batch.valid,
                                    .window_start = b->batch.elem_start,
                                    .window_len = b->batch.elem_len,
                                    .frames = b->batch.n_frames};
}

void sb_task_batch_free(sb_task_batch *b)
{
    if (b == NULL)
        return;
    sb_batch_free(&b->batch);
    sb_free(b);
}
