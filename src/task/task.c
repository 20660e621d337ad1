/* task.c - task configuration, creation and split bookkeeping (see task.h). */
#include "task/task.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

/* sb_task_config_default is generated from the key table (src/config/config.c). */

static sb_status check_seconds(const char *flag, double v, sb_error *err)
{
    if (!(v >= 0.0 && v <= SB_MAX_GAP_SECONDS))
        return sb_error_set(err, SB_ERR_INVALID,
                            "%s %g is out of range: gap durations are seconds in [0, %g] (one "
                            "frame per %g s)",
                            flag, v, SB_MAX_GAP_SECONDS, SB_TIMESTEP);
    return SB_OK;
}

sb_status sb_task_config_check(const sb_task_config *cfg, sb_error *err)
{
    sb_status st = sb_grammar_config_check(&cfg->grammar, err);
    if (st != SB_OK)
        return st;
    if (cfg->train_seqlen_max < 2)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--train_seqlen_max %d: a string holds at least a start state and "
                            "'#'; use 2 or more",
                            cfg->train_seqlen_max);
    if (cfg->test_seqlen_max < 2)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--test_seqlen_max %d: a string holds at least a start state and "
                            "'#'; use 2 or more",
                            cfg->test_seqlen_max);
    if (cfg->train_seqlen_min < 1 || cfg->train_seqlen_min > cfg->train_seqlen_max)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--train_seqlen_min %d must lie in [1, --train_seqlen_max %d]",
                            cfg->train_seqlen_min, cfg->train_seqlen_max);
    if (cfg->test_seqlen_min < 1 || cfg->test_seqlen_min > cfg->test_seqlen_max)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--test_seqlen_min %d must lie in [1, --test_seqlen_max %d]",
                            cfg->test_seqlen_min, cfg->test_seqlen_max);
    if (cfg->combined_seq_length < 0)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--combined_seq_length %d is negative (0 means --train_seqlen_max)",
                            cfg->combined_seq_length);
    if (cfg->dist_dur == SB_GAP_DIST_UNIFORM) {
        if ((st = check_seconds("--train_gap_min", cfg->train_gap_min, err)) != SB_OK)
            return st;
        if ((st = check_seconds("--train_gap_max", cfg->train_gap_max, err)) != SB_OK)
            return st;
        if (cfg->train_gap_min > cfg->train_gap_max)
            return sb_error_set(err, SB_ERR_INVALID,
                                "--train_gap_min %g is above --train_gap_max %g",
                                cfg->train_gap_min, cfg->train_gap_max);
    } else {
        if (!(fabs(cfg->train_gap_min) <= 10.0) ||
            !(cfg->train_gap_max >= 0.0 && cfg->train_gap_max <= 10.0))
            return sb_error_set(err, SB_ERR_INVALID,
                                "--dist_dur lognormal takes --train_gap_min as the mean (|m| <= "
                                "10) and --train_gap_max as the sigma (0..10) of the log; got "
                                "%g and %g",
                                cfg->train_gap_min, cfg->train_gap_max);
    }
    if (cfg->test_dur >= 0.0 || !(cfg->test_dur < 0.0)) {
        if ((st = check_seconds("--test_dur", cfg->test_dur, err)) != SB_OK)
            return st;
    } else if (cfg->dist_dur == SB_GAP_DIST_LOGNORMAL) {
        return sb_error_set(err, SB_ERR_INVALID,
                            "--dist_dur lognormal needs --test_dur: the test gap is fixed and "
                            "--train_gap_max is a sigma there");
    }
    if (!(cfg->train_noise >= 0.0 && cfg->train_noise <= 1e6))
        return sb_error_set(err, SB_ERR_INVALID, "--train_noise %g must be a finite amplitude >= 0",
                            cfg->train_noise);
    if (cfg->gap_start < 0)
        return sb_error_set(err, SB_ERR_INVALID, "--gap_start %d is negative", cfg->gap_start);
    if (!(cfg->gap_prob >= 0.0 && cfg->gap_prob <= 1.0))
        return sb_error_set(err, SB_ERR_INVALID, "--gap_prob %g must lie in [0, 1]", cfg->gap_prob);
    if (cfg->dataset_size < 1)
        return sb_error_set(err, SB_ERR_INVALID, "--dataset_size %lld must be at least 1",
                            (long long)cfg->dataset_size);
    if (cfg->test_size < 1)
        return sb_error_set(err, SB_ERR_INVALID, "--test_size %lld must be at least 1",
                            (long long)cfg->test_size);
    if (cfg->walk_len < 0)
        return sb_error_set(err, SB_ERR_INVALID, "--walk_len %d is negative (0: one walk)",
                            cfg->walk_len);
    if (cfg->walk_len > 0) {
        if (cfg->grammar_gap)
            return sb_error_set(err, SB_ERR_INVALID,
                                "--walk_len with --grammar_gap True: the ideal observer of "
                                "interleaved walks with distractor gaps is not built; use zero "
                                "or noisy gaps");
        int combined =
            cfg->combined_seq_length > 0 ? cfg->combined_seq_length : cfg->train_seqlen_max;
        int longest = combined > cfg->test_seqlen_max ? combined : cfg->test_seqlen_max;
        if ((longest + cfg->walk_len - 1) / cfg->walk_len > SB_MAX_WALKS)
            return sb_error_set(err, SB_ERR_INVALID,
                                "--walk_len %d: samples of %d elements would interleave %d "
                                "walks, more than %d; use --walk_len %d or more",
                                cfg->walk_len, longest,
                                (longest + cfg->walk_len - 1) / cfg->walk_len, SB_MAX_WALKS,
                                (longest + SB_MAX_WALKS - 1) / SB_MAX_WALKS);
    }
    if (cfg->protocol != SB_PROTOCOL_REFERENCE && cfg->protocol != SB_PROTOCOL_CLEAN)
        return sb_error_set(err, SB_ERR_INVALID, "unknown protocol %d", (int)cfg->protocol);
    return SB_OK;
}

sb_status sb_task_create(const sb_task_config *cfg, sb_task **out, sb_error *err)
{
    *out = NULL;
    sb_status st = sb_task_config_check(cfg, err);
    if (st != SB_OK)
        return st;
    sb_task *task = sb_calloc(1, sizeof *task);
    if (task == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory creating a task");
    task->cfg = *cfg;
    if (task->cfg.combined_seq_length == 0)
        task->cfg.combined_seq_length = cfg->train_seqlen_max;
    st = sb_grammar_generate(&cfg->grammar, &task->grammar, err);
    if (st != SB_OK) {
        sb_free(task);
        return st;
    }
    task->n_inputs = task->grammar->n_classes;
    /* train.py: the training set combines strings up to combined_seq_length (default
     * train_seqlen_max); the test set combines up to test_seqlen_max */
    task->n_elements[SB_SPLIT_TRAIN] = task->cfg.combined_seq_length;
    task->n_elements[SB_SPLIT_TEST] = cfg->test_seqlen_max;
    task->n_elements[SB_SPLIT_VALID] = cfg->test_seqlen_max;
    task->walk_stride = 1;
    for (int split = 0; split < SB_SPLIT_COUNT; split++) {
        int L = cfg->walk_len;
        task->n_walks[split] = L > 0 ? (task->n_elements[split] + L - 1) / L : 1;
        if (task->n_walks[split] > task->walk_stride)
            task->walk_stride = task->n_walks[split];
    }
    if (cfg->walk_len > 0)
        task->n_inputs += task->walk_stride;
    st = sb_sampler_init(&task->sampler[SB_SPLIT_TRAIN], task->grammar, cfg->grammar.seed,
                         cfg->train_seqlen_min, cfg->train_seqlen_max,
                         task->n_elements[SB_SPLIT_TRAIN], err);
    /* validation samples are drawn as the test's: the same lengths */
    for (int split = SB_SPLIT_TEST; split <= SB_SPLIT_VALID && st == SB_OK; split++)
        st = sb_sampler_init(&task->sampler[split], task->grammar, cfg->grammar.seed,
                             cfg->test_seqlen_min, cfg->test_seqlen_max, task->n_elements[split],
                             err);
    if (st != SB_OK) {
        sb_task_free(task);
        return st;
    }
    *out = task;
    return SB_OK;
}

void sb_task_free(sb_task *task)
{
    if (task == NULL)
        return;
    for (int split = 0; split < SB_SPLIT_COUNT; split++)
        sb_sampler_free(&task->sampler[split]);
    sb_grammar_free(task->grammar);
    sb_free(task);
}

const char *sb_split_name(sb_split split)
{
    switch (split) {
    case SB_SPLIT_TRAIN: return "train";
    case SB_SPLIT_TEST: return "test";
    case SB_SPLIT_VALID: return "valid";
    }
    return "?";
}

int sb_split_from_name(const char *name, sb_split *split)
{
    for (int s = 0; s < SB_SPLIT_COUNT; s++)
        if (strcmp(name, sb_split_name((sb_split)s)) == 0) {
            *split = (sb_split)s;
            return 0;
        }
    return -1;
}

int64_t sb_task_split_size(const sb_task *task, sb_split split)
{
    switch (split) {
    case SB_SPLIT_TRAIN: return task->cfg.dataset_size;
    case SB_SPLIT_TEST: return task->cfg.test_size;
    case SB_SPLIT_VALID:
        return task->cfg.valid_size < 0 ? task->cfg.test_size : task->cfg.valid_size;
    }
    return 0;
}

uint64_t sb_task_sequence_index(const sb_task *task, sb_split split, int64_t i)
{
    if (split == SB_SPLIT_VALID)
        return (uint64_t)task->cfg.dataset_size + (uint64_t)task->cfg.test_size + (uint64_t)i;
    if (split == SB_SPLIT_TEST && task->cfg.protocol == SB_PROTOCOL_CLEAN)
        return (uint64_t)task->cfg.dataset_size + (uint64_t)i;
    return (uint64_t)i;
}

double sb_task_test_duration(const sb_task *task)
{
    return task->cfg.test_dur >= 0.0 ? task->cfg.test_dur : task->cfg.train_gap_max;
}
