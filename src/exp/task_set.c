/* task_set.c - see task_set.h. */
#include "exp/task_set.h"

#include <stdlib.h>
#include <string.h>

#include "core/timer.h"
#include "task/ceiling.h"

/* The mean frames per sample of the first SB_TASK_SET_SAMPLES samples of a split, and the
 * longest of them (longest may be NULL). */
static sb_status mean_frames(const sb_task *task, sb_split split, double *mean, int *longest,
                             sb_error *err)
{
    int64_t n = sb_task_split_size(task, split);
    if (n > SB_TASK_SET_SAMPLES)
        n = SB_TASK_SET_SAMPLES;
    sb_sample sample;
    memset(&sample, 0, sizeof sample);
    sb_status st = sb_sample_alloc(task, &sample, err);
    double frames = 0.0;
    int most = 0;
    for (int64_t i = 0; st == SB_OK && i < n; i++) {
        st = sb_task_sample(task, split, i, &sample, err);
        frames += sample.n_frames;
        if (sample.n_frames > most)
            most = sample.n_frames;
    }
    sb_sample_free(&sample);
    *mean = n > 0 ? frames / (double)n : 0.0;
    if (longest != NULL)
        *longest = most;
    return st;
}

sb_status sb_task_set_find(sb_task_set *set, const sb_task_config *tc, int *index, sb_error *err)
{
    sb_ceiling_options opt = sb_ceiling_options_default();
    char key[17];
    sb_ceiling_hash(tc, &opt, key);
    for (int i = 0; i < set->n; i++)
        if (strcmp(set->list[i].key, key) == 0) {
            *index = i;
            return SB_OK;
        }
    if (set->n == set->cap) {
        int cap = set->cap > 0 ? 2 * set->cap : 8;
        sb_set_task *grown = realloc(set->list, (size_t)cap * sizeof *grown);
        if (grown == NULL)
            return sb_error_set(err, SB_ERR_NOMEM, "out of memory building a sweep's tasks");
        set->list = grown;
        set->cap = cap;
    }
    sb_set_task *t = &set->list[set->n];
    memset(t, 0, sizeof *t);
    memcpy(t->key, key, sizeof key);
    double t0 = sb_time_now();
    sb_status st = sb_task_create(tc, &t->task, err);
    if (st != SB_OK)
        return st;
    t->build_s = sb_time_now() - t0;
    t->train_samples = sb_task_split_size(t->task, SB_SPLIT_TRAIN);
    /* every evaluation reads the test and the validation split, drawn alike (the test's
     * lengths and gap): their frames are counted together */
    t->test_split_samples = sb_task_split_size(t->task, SB_SPLIT_TEST);
    t->test_samples = t->test_split_samples + sb_task_split_size(t->task, SB_SPLIT_VALID);
    st = mean_frames(t->task, SB_SPLIT_TRAIN, &t->train_frames, &t->train_max_frames, err);
    if (st == SB_OK)
        st = mean_frames(t->task, SB_SPLIT_TEST, &t->test_frames, NULL, err);
    if (st != SB_OK) {
        sb_task_free(t->task);
        return st;
    }
    *index = set->n++;
    return SB_OK;
}

void sb_task_set_free(sb_task_set *set)
{
    for (int i = 0; set != NULL && i < set->n; i++)
        sb_task_free(set->list[i].task);
    if (set != NULL) {
        free(set->list);
        memset(set, 0, sizeof *set);
    }
}
