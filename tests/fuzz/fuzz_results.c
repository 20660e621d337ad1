/*
 * fuzz_results.c - libFuzzer target for the results-database reader (src/exp/results.c and
 * its public wrappers in src/api/results_api.c). The input is the database file: it is
 * written to a file of this process in /tmp, opened read-only (nothing is created, upgraded
 * or written; the `results` command opens a file it may not write the same way), checked
 * (PRAGMA integrity_check), and read as `results` and `report` read it: every run, the
 * evaluations of each, each run found again by its hash through the public API (fixed-size
 * fields filled from stored strings of any length), its stored configuration read back, and
 * the cached ceiling of its task looked up. Work is capped at MAX_RUNS runs per input.
 */
#include <stdlib.h>
#include <string.h>

#include "config/run_config.h"
#include "exp/results.h"
#include "fuzz_common.h"
#include "selectivbench/selectivbench.h"
#include "task/ceiling.h"

#define MAX_RUNS 16

/* The run read back by its hash through the public API, and its configuration. */
static void read_run_public(sb_results *db, const sb_result_row *row)
{
    sb_error err = {0};
    sb_result_row again;
    int found = 0;
    if (sb_results_find(db, row->run_hash, &again, &found, &err) == SB_OK && found)
        fuzz_check(memchr(again.model, '\0', sizeof again.model) != NULL &&
                       again.status >= SB_RUN_NONE && again.status <= SB_RUN_INTERRUPTED,
                   "a found row's model is not terminated or its status is out of range");
    char *json = NULL;
    if (sb_results_config_json(db, row->run_hash, &json, &err) == SB_OK)
        sb_string_free(json);
    sb_config *cfg = NULL;
    if (sb_results_run_config(db, row->run_hash, &cfg, &err) == SB_OK)
        sb_config_free(cfg);
}

/* The evaluations of a stored run and the cached ceiling of its task. */
static void read_run_internal(sb_results *db, const sb_run_row *row)
{
    sb_error err = {0};
    sb_eval_row *evals = NULL;
    size_t n_evals = 0;
    if (sb_results_list_evals(db, row->id, &evals, &n_evals, &err) == SB_OK) {
        for (size_t i = 0; i < n_evals; i++)
            fuzz_check(evals[i].split == SB_SPLIT_TRAIN || evals[i].split == SB_SPLIT_TEST ||
                           evals[i].split == SB_SPLIT_VALID,
                       "an evaluation has an unknown split");
        free(evals);
    }
    sb_run_config cfg;
    if (row->config_json == NULL || sb_run_config_from_json(row->config_json, &cfg, &err) != SB_OK)
        return;
    sb_ceiling_options opt = sb_ceiling_options_default();
    char hash[17];
    sb_ceiling_hash(&cfg.task, &opt, hash);
    sb_ceiling c;
    int found = 0;
    if (sb_results_get_ceiling(db, hash, &c, &found, &err) == SB_OK && found)
        (void)sb_ceiling_effective_memory(&c, row->r.test_acc);
}

static void read_database(sb_results *db)
{
    sb_error err = {0};
    int ok = 0;
    (void)sb_results_integrity_check(db, &ok, &err);
    sb_run_row *rows = NULL;
    size_t n = 0;
    if (sb_results_list_runs(db, NULL, &rows, &n, &err) != SB_OK)
        return;
    for (size_t i = 0; i < n && i < MAX_RUNS; i++) {
        fuzz_check(memchr(rows[i].r.run_hash, '\0', sizeof rows[i].r.run_hash) != NULL &&
                       rows[i].r.status >= SB_RUN_NONE && rows[i].r.status <= SB_RUN_INTERRUPTED,
                   "a listed run's hash is not a string or its status is out of range");
        read_run_internal(db, &rows[i]);
    }
    /* the runs of the first run's model, as `results --model` lists them */
    if (n > 0) {
        sb_run_row *of_model = NULL;
        size_t n_model = 0;
        if (sb_results_list_runs(db, rows[0].r.model, &of_model, &n_model, &err) == SB_OK)
            sb_results_run_rows_free(of_model, n_model);
    }
    sb_results_run_rows_free(rows, n);

    sb_result_row page[MAX_RUNS];
    size_t got = 0;
    if (sb_results_read(db, NULL, 0, page, MAX_RUNS, &got, &err) != SB_OK)
        return;
    for (size_t i = 0; i < got; i++) {
        fuzz_check(memchr(page[i].run_hash, '\0', sizeof page[i].run_hash) != NULL &&
                       memchr(page[i].reason, '\0', sizeof page[i].reason) != NULL &&
                       memchr(page[i].checkpoint, '\0', sizeof page[i].checkpoint) != NULL,
                   "a read row's strings are not terminated");
        read_run_public(db, &page[i]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[256];
    if (fuzz_temp_write("results", data, size, path, sizeof path) != 0)
        return 0;
    sb_results *db = NULL;
    sb_error err = {0};
    if (sb_results_open_readonly(path, &db, &err) == SB_OK) {
        fuzz_check(sb_results_is_readonly(db), "a read-only connection says it is writable");
        read_database(db);
        sb_results_close(db);
    }
    fuzz_temp_remove(path);
    return 0;
}
