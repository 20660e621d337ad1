/* data_api.c - the public API's task settings, samples, checksums (selectivbench.h):
 * wrappers over task/task.h. sb_task_export is task/export.c's own function. */
#include <string.h>

#include "api/api.h"
#include "core/alloc.h"
#include "task/task.h"

sb_status sb_config_check_task(const sb_config *cfg, sb_error *err)
{
    SB_API_REQUIRE(cfg, err);
    return sb_task_config_check(&cfg->run.task, err);
}

const sb_grammar *sb_task_grammar(const sb_task *task)
{
    SB_ASSERT(task != NULL);
    return task->grammar;
}

void sb_task_get_settings(const sb_task *task, sb_task_settings *settings)
{
    SB_ASSERT(task != NULL && settings != NULL);
    const sb_task_config *c = &task->cfg;
    memset(settings, 0, sizeof *settings);
    settings->distractor_gaps = c->grammar_gap;
    settings->lognormal_gaps = c->dist_dur != SB_GAP_DIST_UNIFORM;
    settings->train_gap_min = c->train_gap_min;
    settings->train_gap_max = c->train_gap_max;
    settings->gap_start = c->gap_start;
    settings->gap_prob = c->gap_prob;
    settings->train_noise = c->train_noise;
    settings->test_gap_s = sb_task_test_duration(task);
    settings->clean_protocol = c->protocol == SB_PROTOCOL_CLEAN;
    settings->walk_len = c->walk_len;
    settings->train_walks = task->n_walks[SB_SPLIT_TRAIN];
    settings->test_walks = task->n_walks[SB_SPLIT_TEST];
}

sb_status sb_task_checksum(const sb_task *task, sb_split split, int threads, uint64_t *hash,
                           int64_t *symbols, sb_error *err)
{
    SB_API_REQUIRE(task, err);
    SB_API_REQUIRE(hash, err);
    if (split != SB_SPLIT_TRAIN && split != SB_SPLIT_TEST && split != SB_SPLIT_VALID)
        return sb_error_set(err, SB_ERR_INVALID,
                            "unknown split %d (SB_SPLIT_TRAIN, SB_SPLIT_TEST or SB_SPLIT_VALID)",
                            (int)split);
    sb_status st = sb_threads_check(threads, "sb_task_checksum", err);
    if (st != SB_OK)
        return st;
    return sb_task_split_checksum(task, split, threads, hash, symbols, err);
}

/* ---- draws: one sample at a time ----------------------------------------------------- */

/* The public sb_draw: an assembled sample of a task (task/task.h's sb_sample). */
struct sb_draw {
    const sb_task *task;
    sb_sample sample;
    uint64_t sequence_index;
};

sb_status sb_draw_create(const sb_task *task, sb_draw **out, sb_error *err)
{
    SB_API_REQUIRE(out, err);
    *out = NULL;
    SB_API_REQUIRE(task, err);
    sb_draw *d = sb_malloc(sizeof *d);
    if (d == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for a sample");
    memset(d, 0, sizeof *d);
    d->task = task;
    sb_status st = sb_sample_alloc(task, &d->sample, err);
    if (st != SB_OK) {
        sb_free(d);
        return st;
    }
    *out = d;
    return SB_OK;
}

void sb_draw_free(sb_draw *d)
{
    if (d == NULL)
        return;
    sb_sample_free(&d->sample);
    sb_free(d);
}

sb_status sb_draw_read(sb_draw *d, sb_split split, int64_t index, sb_error *err)
{
    SB_API_REQUIRE(d, err);
    if (split != SB_SPLIT_TRAIN && split != SB_SPLIT_TEST && split != SB_SPLIT_VALID)
        return sb_error_set(err, SB_ERR_INVALID,
                            "unknown split %d (SB_SPLIT_TRAIN, SB_SPLIT_TEST or SB_SPLIT_VALID)",
                            (int)split);
    int64_t size = sb_task_split_size(d->task, split);
    if (index < 0 || index >= size)
        return sb_error_set(err, SB_ERR_INVALID,
                            "sample index %lld is outside the %s split's [0, %lld)",
                            (long long)index, sb_split_name(split), (long long)size);
    d->sequence_index = sb_task_sequence_index(d->task, split, index);
    return sb_task_sample(d->task, split, index, &d->sample, err);
}

uint64_t sb_draw_sequence_index(const sb_draw *d)
{
    SB_ASSERT(d != NULL);
    return d->sequence_index;
}

int sb_draw_elements(const sb_draw *d)
{
    SB_ASSERT(d != NULL);
    return d->sample.n_elements;
}

int sb_draw_frames(const sb_draw *d)
{
    SB_ASSERT(d != NULL);
    return d->sample.n_frames;
}

int sb_draw_state(const sb_draw *d, int k)
{
    SB_ASSERT(d != NULL && k >= 0 && k < d->sample.n_elements);
    return d->sample.state[k];
}

int sb_draw_gap(const sb_draw *d, int k)
{
    SB_ASSERT(d != NULL && k >= 0 && k < d->sample.n_elements);
    return d->sample.gap[k];
}

int sb_draw_walk(const sb_draw *d, int k)
{
    SB_ASSERT(d != NULL && k >= 0 && k < d->sample.n_elements);
    return d->sample.walk[k];
}

int sb_draw_distractor_count(const sb_draw *d)
{
    SB_ASSERT(d != NULL);
    return d->sample.n_gap_classes;
}

int sb_draw_distractor(const sb_draw *d, int r)
{
    SB_ASSERT(d != NULL && r >= 0 && r < d->sample.n_gap_classes);
    return d->sample.gap_class[r];
}
