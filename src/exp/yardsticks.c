/*
 * yardsticks.c - every run carries its yardsticks: the ideal observer of its task's test
 * split (its ceiling) and the effective memory of its test accuracy (ceiling.h), kept in
 * the results database (results.h).
 *
 * A task's ceiling is computed once and cached in the database under sb_ceiling_hash, so
 * the runs of one task (every model, width and seed of a sweep) share one computation.
 * Two workers that finish runs of the same new task at the same time may both compute it;
 * the second write replaces the first with the same numbers.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/run_config.h"
#include "core/json_writer.h"
#include "exp/results.h"
#include "task/ceiling.h"

/* What a cached ceiling was computed for, as a JSON text (train.py's flag names), for
 * people reading the database; the cache is keyed by the hash, not by this text. */
static char *ceiling_config_json(const sb_task_config *t, const sb_ceiling_options *opt)
{
    static const char *const protocol[] = {"reference", "clean"};
    static const char *const gap_rng[] = {"derived", "reference"};
    static const char *const dist[] = {"uniform", "lognormal"};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f == NULL)
        return NULL;
    sb_json j;
    sb_json_init(&j, f, 0);
    sb_json_object_begin(&j);
    sb_json_key(&j, "task_seed");
    sb_json_uint(&j, t->grammar.seed);
    const char *ik[] = {"vocab",
                        "amb",
                        "amb_depth",
                        "train_seqlen_min",
                        "train_seqlen_max",
                        "test_seqlen_min",
                        "test_seqlen_max",
                        "combined_seq_length",
                        "gap_start"};
    int iv[] = {t->grammar.vocab,    t->grammar.amb,         t->grammar.amb_depth,
                t->train_seqlen_min, t->train_seqlen_max,    t->test_seqlen_min,
                t->test_seqlen_max,  t->combined_seq_length, t->gap_start};
    for (size_t k = 0; k < sizeof iv / sizeof *iv; k++) {
        sb_json_key(&j, ik[k]);
        sb_json_int(&j, iv[k]);
    }
    sb_json_key(&j, "grammar_scale");
    sb_json_bool(&j, t->grammar.grammar_scale);
    sb_json_key(&j, "grammar_gap");
    sb_json_bool(&j, t->grammar_gap);
    const char *dk[] = {"transition_density", "train_gap_min", "train_gap_max", "train_noise",
                        "gap_prob"};
    double dv[] = {t->grammar.transition_density, t->train_gap_min, t->train_gap_max,
                   t->train_noise, t->gap_prob};
    for (size_t k = 0; k < sizeof dv / sizeof *dv; k++) {
        sb_json_key(&j, dk[k]);
        sb_json_double(&j, dv[k]);
    }
    sb_json_key(&j, "test_dur");
    if (t->test_dur < 0)
        sb_json_null(&j);
    else
        sb_json_double(&j, t->test_dur);
    sb_json_key(&j, "dist_dur");
    sb_json_string(&j, dist[t->dist_dur == SB_GAP_DIST_LOGNORMAL]);
    sb_json_key(&j, "dataset_size");
    sb_json_int(&j, t->dataset_size);
    sb_json_key(&j, "test_size");
    sb_json_int(&j, t->test_size);
    sb_json_key(&j, "protocol");
    sb_json_string(&j, protocol[t->protocol == SB_PROTOCOL_CLEAN]);
    sb_json_key(&j, "gap_rng");
    sb_json_string(&j, gap_rng[t->gap_rng == SB_GAP_RNG_REFERENCE]);
    /* the options the ceiling depends on */
    sb_json_key(&j, "split");
    sb_json_string(&j, sb_split_name(opt->split));
    sb_json_key(&j, "samples");
    sb_json_int(&j, opt->samples);
    sb_json_key(&j, "prior_samples");
    sb_json_int(&j, opt->prior_samples);
    sb_json_key(&j, "ceiling_version");
    sb_json_int(&j, SB_CEILING_VERSION);
    sb_json_object_end(&j);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

sb_status sb_results_task_ceiling(sb_results *db, const sb_task_config *task, int threads,
                                  sb_ceiling *out, int *computed, sb_error *err)
{
    SB_ASSERT(db != NULL && task != NULL && out != NULL);
    if (computed != NULL)
        *computed = 0;
    sb_ceiling_options opt = sb_ceiling_options_default();
    opt.threads = threads;
    char hash[17];
    sb_ceiling_hash(task, &opt, hash);
    int found = 0;
    sb_status st = sb_results_get_ceiling(db, hash, out, &found, err);
    if (st != SB_OK || found)
        return st;

    sb_task *t = NULL;
    if ((st = sb_task_create(task, &t, err)) != SB_OK)
        return st;
    st = sb_ceiling_compute_with(t, &opt, out, err);
    sb_task_free(t);
    if (st != SB_OK)
        return st;
    char *config = ceiling_config_json(task, &opt);
    if (config == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory caching ceiling %s", hash);
    st = sb_results_put_ceiling(db, hash, config, out, err);
    free(config);
    if (st == SB_OK && computed != NULL)
        *computed = 1;
    return st;
}

sb_status sb_results_record_yardsticks(sb_results *db, int64_t run_id, const sb_task_config *task,
                                       double test_acc, int threads, double *ceiling,
                                       double *effective_memory, sb_error *err)
{
    sb_ceiling c;
    sb_status st = sb_results_task_ceiling(db, task, threads, &c, NULL, err);
    if (st != SB_OK)
        return st;
    double mem = isnan(test_acc) ? (double)NAN : sb_ceiling_effective_memory(&c, test_acc);
    st = sb_results_set_yardsticks(db, run_id, c.expected_acc, mem, err);
    if (st != SB_OK)
        return st;
    if (ceiling != NULL)
        *ceiling = c.expected_acc;
    if (effective_memory != NULL)
        *effective_memory = mem;
    return SB_OK;
}

sb_status sb_results_fill_yardsticks(sb_results *db, sb_run_row *row, int threads, int *filled,
                                     sb_error *err)
{
    SB_ASSERT(db != NULL && row != NULL);
    if (filled != NULL)
        *filled = 0;
    if (row->r.status != SB_RUN_FINISHED)
        return SB_OK;
    int missing =
        isnan(row->r.ceiling) || (isnan(row->r.effective_memory) && !isnan(row->r.test_acc));
    if (!missing)
        return SB_OK;
    sb_run_config cfg;
    sb_error cerr = {0};
    if (row->config_json == NULL || sb_run_config_from_json(row->config_json, &cfg, &cerr) != SB_OK)
        return sb_error_set(err, SB_ERR_INVALID,
                            "run %s: its stored configuration does not read back (%s); its "
                            "yardsticks cannot be computed",
                            row->r.run_hash, row->config_json == NULL ? "none stored" : cerr.msg);
    sb_ceiling c;
    sb_status st = sb_results_task_ceiling(db, &cfg.task, threads, &c, NULL, err);
    if (st != SB_OK)
        return st;
    double mem =
        isnan(row->r.test_acc) ? (double)NAN : sb_ceiling_effective_memory(&c, row->r.test_acc);
    if (!sb_results_is_readonly(db) &&
        (st = sb_results_set_yardsticks(db, row->id, c.expected_acc, mem, err)) != SB_OK)
        return st;
    row->r.ceiling = c.expected_acc;
    row->r.effective_memory = mem;
    if (filled != NULL)
        *filled = 1;
    return SB_OK;
}
