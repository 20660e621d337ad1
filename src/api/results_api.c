/* results_api.c - the public API's results databases and reports (selectivbench.h):
 * wrappers over exp/results.h, exp/run_store.h and exp/report.h. sb_results_open,
 * sb_results_open_readonly, sb_results_close and sb_results_integrity_check are results.c's
 * own functions. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "config/config.h"
#include "core/alloc.h"
#include "exp/claims.h"
#include "exp/report.h"
#include "exp/results.h"
#include "exp/run_store.h"
#include "layers/layer.h"
#include "task/task.h"
#include "train/trainer.h"

sb_status sb_results_path(const char *results_dir, char *out, size_t size, sb_error *err)
{
    SB_API_REQUIRE(results_dir, err);
    SB_API_REQUIRE(out, err);
    return sb_run_store_db_path(results_dir, out, size, err);
}

/* Every status of a stored run, in the order of a run's life: the one list the command
 * line's --status filters take (src/core/status.c names them). */
const char *const *sb_results_statuses(void)
{
    return sb_run_status_names();
}

/* The stored row of the run with this hash (cleared with sb_results_run_row_clear);
 * SB_ERR_INVALID when there is none. */
static sb_status stored_run(sb_results *db, const char *run_hash, sb_run_row *stored, sb_error *err)
{
    int found = 0;
    sb_status st = sb_results_get_run(db, run_hash, stored, &found, err);
    if (st == SB_OK && !found)
        return sb_error_set(err, SB_ERR_INVALID, "no run with hash '%s' in the results database",
                            run_hash);
    return st;
}

sb_status sb_results_count(sb_results *db, const char *model, size_t *count, sb_error *err)
{
    SB_API_REQUIRE(db, err);
    SB_API_REQUIRE(count, err);
    *count = 0;
    sb_run_row *rows = NULL;
    sb_status st = sb_results_list_runs(db, model, &rows, count, err);
    sb_results_run_rows_free(rows, *count);
    return st;
}

sb_status sb_results_read(sb_results *db, const char *model, size_t first, sb_result_row *rows,
                          size_t max, size_t *n, sb_error *err)
{
    SB_API_REQUIRE(db, err);
    SB_API_REQUIRE(n, err);
    *n = 0;
    if (max > 0)
        SB_API_REQUIRE(rows, err);
    sb_run_row *stored = NULL;
    size_t n_stored = 0;
    sb_status st = sb_results_list_runs(db, model, &stored, &n_stored, err);
    if (st != SB_OK)
        return st;
    /* a run left 'running' by a process that is gone reads as interrupted */
    size_t end = first + max < n_stored ? first + max : n_stored;
    if (first < end)
        st = sb_run_store_settle_dead(db, stored + first, end - first, err);
    for (size_t i = first; st == SB_OK && i < end; i++)
        rows[(*n)++] = stored[i].r; /* the stored row holds the public record */
    sb_results_run_rows_free(stored, n_stored);
    return st;
}

sb_status sb_results_find(sb_results *db, const char *run_hash, sb_result_row *row, int *found,
                          sb_error *err)
{
    SB_API_REQUIRE(db, err);
    SB_API_REQUIRE(run_hash, err);
    SB_API_REQUIRE(row, err);
    SB_API_REQUIRE(found, err);
    memset(row, 0, sizeof *row);
    sb_run_row stored;
    sb_status st = sb_results_get_run(db, run_hash, &stored, found, err);
    if (st != SB_OK || !*found)
        return st;
    st = sb_run_store_settle_dead(db, &stored, 1, err);
    if (st == SB_OK)
        *row = stored.r;
    sb_results_run_row_clear(&stored);
    return st;
}

int sb_result_row_resumable(const sb_result_row *row)
{
    return row != NULL && sb_run_resumable(row->status, row->checkpoint);
}

sb_status sb_results_log_path(const char *results_dir, const char *run_hash, char *out, size_t size,
                              int create, sb_error *err)
{
    SB_API_REQUIRE(results_dir, err);
    SB_API_REQUIRE(run_hash, err);
    SB_API_REQUIRE(out, err);
    char dir[4096];
    sb_status st = sb_run_store_log_dir(results_dir, dir, sizeof dir, create, err);
    return st == SB_OK ? sb_run_store_log_path(results_dir, run_hash, out, size, err) : st;
}

sb_status sb_results_run_config(sb_results *db, const char *run_hash, sb_config **out,
                                sb_error *err)
{
    SB_API_REQUIRE(out, err);
    *out = NULL;
    char *json = NULL;
    sb_status st = sb_results_config_json(db, run_hash, &json, err);
    if (st != SB_OK)
        return st;
    sb_run_config run;
    st = sb_run_config_from_json(json != NULL ? json : "", &run, err);
    sb_string_free(json);
    if (st != SB_OK)
        return sb_error_set(err, SB_ERR_INVALID, "run %s: its stored configuration: %s", run_hash,
                            err != NULL ? err->msg : "does not read back");
    return sb_api_config_new(&run, out, err);
}

sb_status sb_results_config_json(sb_results *db, const char *run_hash, char **json, sb_error *err)
{
    SB_API_REQUIRE(json, err);
    *json = NULL;
    SB_API_REQUIRE(db, err);
    SB_API_REQUIRE(run_hash, err);
    sb_run_row stored;
    sb_status st = stored_run(db, run_hash, &stored, err);
    if (st != SB_OK)
        return st;
    /* the row's own copy changes hands */
    *json = stored.config_json;
    stored.config_json = NULL;
    sb_results_run_row_clear(&stored);
    return SB_OK;
}

sb_status sb_results_backfill(sb_results *db, sb_result_row *row, int threads, double *ceiling_se,
                              sb_error *err)
{
    if (ceiling_se != NULL)
        *ceiling_se = (double)NAN;
    SB_API_REQUIRE(db, err);
    SB_API_REQUIRE(row, err);
    sb_status st = sb_threads_check(threads, "sb_results_backfill", err);
    if (st != SB_OK)
        return st;
    sb_run_row stored;
    st = stored_run(db, row->run_hash, &stored, err);
    if (st != SB_OK)
        return st;
    st = sb_results_fill_yardsticks(db, &stored, threads, NULL, err);
    if (st == SB_OK) {
        row->ceiling = stored.r.ceiling;
        row->effective_memory = stored.r.effective_memory;
    }
    sb_run_config run;
    sb_ceiling c;
    if (st == SB_OK)
        st = sb_run_config_from_json(stored.config_json, &run, err);
    if (st == SB_OK)
        st = sb_results_task_ceiling(db, &run.task, threads, &c, NULL, err);
    if (st == SB_OK && ceiling_se != NULL)
        *ceiling_se = c.expected_acc_se;
    sb_results_run_row_clear(&stored);
    return st;
}

/* The statuses a recorded run may end with (a run is never recorded as still running). */
static sb_status check_record_status(sb_run_status status, sb_error *err)
{
    if (!sb_run_status_ended(status))
        return sb_error_set(err, SB_ERR_INVALID,
                            "a run is recorded as finished, failed, diverged or interrupted, "
                            "not %s",
                            status == SB_RUN_RUNNING ? "running" : "an unknown status");
    return SB_OK;
}

/* After sb_run_record_begin*: a run the database has finished is refused (rec closed). */
static sb_status refuse_finished(sb_run_record *rec, sb_run_row *stored, const char *db_path,
                                 const sb_config *cfg, sb_error *err)
{
    sb_results_run_row_clear(stored);
    sb_run_record_close(rec);
    char hash[17];
    sb_run_config_hash(&cfg->run, 0, hash);
    return sb_error_set(err, SB_ERR_INVALID,
                        "the results database '%s' already has run %s finished", db_path, hash);
}

/* The validation split's accuracy and loss of an external run: its curve's point of split
 * valid at the latest step, NaN when it has none (sb_external_run has no fields of its own
 * for them, so that callers written before the split record as before). */
static void external_valid(const sb_external_run *m, double *acc, double *loss)
{
    *acc = *loss = (double)NAN;
    int64_t step = -1;
    for (size_t i = 0; i < m->n_curve; i++)
        if (m->curve[i].split == SB_SPLIT_VALID && m->curve[i].step > step) {
            step = m->curve[i].step;
            *acc = m->curve[i].acc;
            *loss = m->curve[i].loss;
        }
}

/* Records the end of a begun run with status, reason and the metrics of m (the validation
 * split's: valid_acc, valid_loss). */
static sb_status record_end(sb_run_record *rec, sb_run_status status, const char *reason,
                            const sb_external_run *m, double valid_acc, double valid_loss,
                            sb_error *err)
{
    sb_train_outcome res;
    memset(&res, 0, sizeof res);
    res.valid_acc = valid_acc;
    res.valid_loss = valid_loss;
    res.status = status;
    snprintf(res.reason, sizeof res.reason, "%s", reason != NULL ? reason : "");
    res.test_acc = m->test_acc;
    res.test_loss = m->test_loss;
    res.train_acc = m->train_acc;
    res.train_loss = m->train_loss;
    res.wall_s = m->wall_s;
    res.tokens_per_s = m->tokens_per_s;
    return sb_run_record_end(rec, &res, err);
}

sb_status sb_results_record(const char *db_path, const sb_config *cfg,
                            const sb_train_outcome *outcome, sb_error *err)
{
    SB_API_REQUIRE(db_path, err);
    SB_API_REQUIRE(cfg, err);
    SB_API_REQUIRE(outcome, err);
    sb_status st;
    if ((st = check_record_status(outcome->status, err)) != SB_OK ||
        (st = sb_run_config_check(&cfg->run, err)) != SB_OK)
        return st;
    sb_run_record rec;
    sb_run_row stored;
    memset(&stored, 0, sizeof stored);
    int finished = 0;
    long locked_by = 0;
    st = sb_run_record_begin(&rec, db_path, &cfg->run,
                             outcome->checkpoint[0] != '\0' ? outcome->checkpoint : NULL, 0, 0, 1,
                             0, &finished, &locked_by, &stored, err);
    if (st != SB_OK)
        return st;
    if (finished)
        return refuse_finished(&rec, &stored, db_path, cfg, err);
    sb_external_run m = {.test_acc = outcome->test_acc,
                         .test_loss = outcome->test_loss,
                         .train_acc = outcome->train_acc,
                         .train_loss = outcome->train_loss,
                         .wall_s = outcome->wall_s,
                         .tokens_per_s = outcome->tokens_per_s};
    return record_end(&rec, outcome->status, outcome->reason, &m, outcome->valid_acc,
                      outcome->valid_loss, err);
}

/* An external model's name: a word of letters, digits and _ . - : (it is the model column
 * of the database and a figure's legend), never one of the registry's layer types (whose
 * parameter counts and FLOPs the library computes itself). */
static sb_status check_external_model(const char *model, sb_error *err)
{
    size_t n = strlen(model);
    if (n == 0 || n >= sizeof((sb_result_row *)0)->model)
        return sb_error_set(err, SB_ERR_INVALID,
                            "an external run's model name must have 1 to %zu characters, not "
                            "%zu",
                            sizeof((sb_result_row *)0)->model - 1, n);
    for (size_t i = 0; i < n; i++) {
        char c = model[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-' || c == ':'))
            return sb_error_set(err, SB_ERR_INVALID,
                                "model name '%s': use letters, digits and _ . - : only", model);
    }
    if (sb_layer_type_find(model) != NULL)
        return sb_error_set(err, SB_ERR_INVALID,
                            "model '%s' is one of selectivbench's own models: train it with "
                            "sb_train_config, or give your model a name of its own "
                            "(e.g. 'torch_%s')",
                            model, model);
    return SB_OK;
}

static sb_eval_row curve_row(const sb_curve_point *p)
{
    return (sb_eval_row){.step = p->step,
                         .samples = p->samples,
                         .split = p->split,
                         .loss = p->loss,
                         .acc = p->acc,
                         .lr = p->lr,
                         .tokens_per_s = p->tokens_per_s,
                         .wall_s = p->wall_s};
}

static int point_order(const void *a, const void *b)
{
    const sb_curve_point *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    return (x->split > y->split) - (x->split < y->split);
}

/* What a run trained elsewhere may store: counts >= 0 (or -1: unknown), every metric finite
 * and in its range (sb_results_check_metrics, no infinite loss), each curve point checked
 * and given once per (step, split). Checked before anything is written, so a refused record
 * changes nothing. */
static sb_status check_external_metrics(const sb_external_run *run, sb_error *err)
{
    if (run->params < -1 || run->state_size < -1)
        return sb_error_set(err, SB_ERR_INVALID,
                            "params %lld, state_size %lld: give counts >= 0, or -1 when unknown",
                            (long long)run->params, (long long)run->state_size);
    sb_run_metrics m = {.test_acc = run->test_acc,
                        .test_loss = run->test_loss,
                        .train_acc = run->train_acc,
                        .train_loss = run->train_loss,
                        .wall_s = run->wall_s,
                        .tokens_per_s = run->tokens_per_s,
                        .valid_acc = (double)NAN,
                        .valid_loss = (double)NAN};
    sb_status st = sb_results_check_metrics(&m, 0, "the run's metrics", err);
    if (st != SB_OK)
        return st;
    if (run->n_curve > 0 && run->curve == NULL)
        return sb_error_set(err, SB_ERR_INVALID, "%zu curve points given without the array",
                            run->n_curve);
    for (size_t i = 0; i < run->n_curve; i++) {
        char what[48];
        snprintf(what, sizeof what, "curve point %zu", i);
        sb_eval_row row = curve_row(&run->curve[i]);
        if ((st = sb_results_check_eval(&row, 0, what, err)) != SB_OK)
            return st;
    }
    if (run->n_curve < 2)
        return SB_OK;
    sb_curve_point *sorted = sb_calloc(run->n_curve, sizeof *sorted);
    if (sorted == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "no memory to check %zu curve points", run->n_curve);
    memcpy(sorted, run->curve, run->n_curve * sizeof *sorted);
    qsort(sorted, run->n_curve, sizeof *sorted, point_order);
    for (size_t i = 1; i < run->n_curve && st == SB_OK; i++)
        if (point_order(&sorted[i - 1], &sorted[i]) == 0)
            st = sb_error_set(err, SB_ERR_INVALID,
                              "the curve gives step %lld of the %s split twice: give each "
                              "evaluation once",
                              (long long)sorted[i].step, sb_split_name(sorted[i].split));
    sb_free(sorted);
    return st;
}

sb_status sb_results_record_external(const char *db_path, const sb_config *cfg,
                                     const sb_external_run *run, char run_hash[17], sb_error *err)
{
    SB_API_REQUIRE(db_path, err);
    SB_API_REQUIRE(cfg, err);
    SB_API_REQUIRE(run, err);
    sb_run_status status = run->status;
    sb_status st;
    if ((st = check_record_status(status, err)) != SB_OK)
        return st;
    if ((st = check_external_metrics(run, err)) != SB_OK ||
        (st = check_external_model(cfg->run.model, err)) != SB_OK ||
        (st = sb_task_config_check(&cfg->run.task, err)) != SB_OK ||
        (st = sb_config_check_ranges(&cfg->run, err)) != SB_OK)
        return st;
    if (run_hash != NULL)
        sb_run_config_hash(&cfg->run, 0, run_hash);
    sb_run_record rec;
    sb_run_row stored;
    memset(&stored, 0, sizeof stored);
    int finished = 0;
    long locked_by = 0;
    st = sb_run_record_begin_external(&rec, db_path, &cfg->run, run->params, run->state_size,
                                      run->code_version, &finished, &locked_by, &stored, err);
    if (st != SB_OK)
        return st;
    if (finished)
        return refuse_finished(&rec, &stored, db_path, cfg, err);
    double valid_acc, valid_loss;
    external_valid(run, &valid_acc, &valid_loss);
    for (size_t i = 0; i < run->n_curve && st == SB_OK; i++) {
        sb_eval_row row = curve_row(&run->curve[i]);
        st = sb_results_add_eval(rec.db, rec.run_id, &row, err);
    }
    if (st != SB_OK) { /* the run is recorded failed, with why, rather than left running */
        char reason[SB_ERROR_MSG_MAX];
        snprintf(reason, sizeof reason, "recording its curve: %.480s", err->msg);
        sb_error end_err = {0};
        record_end(&rec, SB_RUN_FAILED, reason, run, valid_acc, valid_loss, &end_err);
        return st;
    }
    return record_end(&rec, status, run->reason, run, valid_acc, valid_loss, err);
}

/* sb_report_write and sb_report_write_readonly: the report, the database opened for
 * writing (to store backfilled yardsticks) unless read_only or not writable. */
static sb_status report_write(const char *db_path, int read_only, const char *out_dir,
                              const char *x_key, const char *const *filters, int n_filters,
                              sb_report_outcome *out, sb_error *err)
{
    SB_API_REQUIRE(db_path, err);
    SB_API_REQUIRE(out_dir, err);
    if (out != NULL)
        memset(out, 0, sizeof *out);
    /* a missing database is the caller's mistake: say so rather than create an empty one */
    FILE *probe = fopen(db_path, "rb");
    if (probe == NULL)
        return sb_error_set(err, SB_ERR_IO, "no results database at '%s'", db_path);
    fclose(probe);
    sb_report_summary sum;
    memset(&sum, 0, sizeof sum);
    sb_report_options opts = {
        .read_only = read_only, .x_key = x_key, .filters = filters, .n_filters = n_filters};
    sb_status st = sb_report_generate_with(db_path, out_dir, &opts, &sum, err);
    if (st == SB_OK && out != NULL)
        *out = sum.out; /* the report fills the public record */
    return st;
}

sb_status sb_report_write(const char *db_path, const char *out_dir, sb_report_outcome *out,
                          sb_error *err)
{
    return report_write(db_path, 0, out_dir, NULL, NULL, 0, out, err);
}

sb_status sb_report_write_by(const char *db_path, const char *out_dir, const char *x_key,
                             const char *const *filters, int n_filters, sb_report_outcome *out,
                             sb_error *err)
{
    if (n_filters < 0 || (n_filters > 0 && filters == NULL))
        return sb_error_set(err, SB_ERR_INVALID,
                            "sb_report_write_by: %d filters without the "
                            "array",
                            n_filters);
    return report_write(db_path, 0, out_dir, x_key, filters, n_filters, out, err);
}

sb_status sb_report_write_readonly(const char *db_path, const char *out_dir, sb_report_outcome *out,
                                   sb_error *err)
{
    return report_write(db_path, 1, out_dir, NULL, NULL, 0, out, err);
}

sb_status sb_report_claims(const char *db_path, char **markdown, sb_error *err)
{
    return sb_report_claims_where(db_path, NULL, 0, markdown, err);
}

sb_status sb_report_claims_where(const char *db_path, const char *const *filters, int n_filters,
                                 char **markdown, sb_error *err)
{
    return sb_report_claims_as(db_path, filters, n_filters, 0, markdown, err);
}

sb_status sb_report_claims_as(const char *db_path, const char *const *filters, int n_filters,
                              int as_json, char **markdown, sb_error *err)
{
    SB_API_REQUIRE(db_path, err);
    SB_API_REQUIRE(markdown, err);
    *markdown = NULL;
    if (n_filters < 0 || (n_filters > 0 && filters == NULL))
        return sb_error_set(err, SB_ERR_INVALID,
                            "sb_report_claims_where: %d filters without "
                            "the array",
                            n_filters);
    sb_results *db = NULL;
    sb_status st = sb_results_open_readonly(db_path, &db, err);
    if (st != SB_OK)
        return st;
    sb_run_row *rows = NULL;
    size_t n = 0;
    st = sb_results_list_runs(db, NULL, &rows, &n, err);
    /* the runs every filter matches come first; the claims read those */
    size_t kept = 0;
    for (size_t i = 0; st == SB_OK && i < n; i++) {
        int keep = 1;
        for (int f = 0; keep && f < n_filters; f++)
            keep = sb_results_config_matches(rows[i].config_json, filters[f]);
        if (keep && kept != i) {
            sb_run_row t = rows[kept];
            rows[kept] = rows[i];
            rows[i] = t;
        }
        kept += keep;
    }
    /* the ideal observer of each run's task: the verdicts' scale and task checks */
    sb_claim_task *tasks = st == SB_OK ? sb_calloc(kept > 0 ? kept : 1, sizeof *tasks) : NULL;
    if (st == SB_OK && tasks == NULL)
        st = sb_error_set(err, SB_ERR_NOMEM, "out of memory reading %zu runs", kept);
    if (st == SB_OK)
        st = sb_claims_tasks(db, rows, kept, tasks, err);
    sb_results_close(db);
    sb_claim *claims = NULL;
    int n_claims = 0;
    if (st == SB_OK)
        st = sb_claims_evaluate(rows, tasks, kept, &claims, &n_claims, err);
    sb_free(tasks);
    sb_results_run_rows_free(rows, n);
    if (st != SB_OK)
        return st;
    size_t size = 0;
    FILE *f = open_memstream(markdown, &size);
    if (f == NULL) {
        free(claims);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory writing the findings");
    }
    if (as_json)
        sb_claims_write_json(f, claims, n_claims);
    else
        sb_claims_write_markdown(f, claims, n_claims);
    free(claims);
    if (fclose(f) != 0) {
        free(*markdown);
        *markdown = NULL;
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory writing the findings");
    }
    return SB_OK;
}

/* ---- run ids and learning curves ------------------------------------------------------ */

/* Fewer hex digits than this would match many runs of a sweep by chance. */
#define RUN_ID_MIN_PREFIX 4

sb_status sb_results_resolve_run(sb_results *db, const char *id, char run_hash[17], sb_error *err)
{
    SB_API_REQUIRE(db, err);
    SB_API_REQUIRE(id, err);
    SB_API_REQUIRE(run_hash, err);
    run_hash[0] = '\0';
    size_t len = strlen(id);
    if (len < RUN_ID_MIN_PREFIX || len > 16 || strspn(id, "0123456789abcdef") != len)
        return sb_error_set(err, SB_ERR_INVALID,
                            "run id '%.40s' is not a run hash: give 4 to 16 of its lowercase hex "
                            "digits (the `run` column of the results command)",
                            id);
    sb_run_row *rows = NULL;
    size_t n_rows = 0;
    sb_status st = sb_results_list_runs(db, NULL, &rows, &n_rows, err);
    if (st != SB_OK)
        return st;
    const char *first = NULL, *second = NULL;
    for (size_t i = 0; i < n_rows && second == NULL; i++) {
        if (strncmp(rows[i].r.run_hash, id, len) != 0)
            continue;
        if (first == NULL)
            first = rows[i].r.run_hash;
        else
            second = rows[i].r.run_hash;
    }
    if (first == NULL)
        st = sb_error_set(err, SB_ERR_INVALID,
                          "no run in the results database has an id starting with '%s'; list "
                          "the runs with the results command",
                          id);
    else if (second != NULL)
        st = sb_error_set(err, SB_ERR_INVALID,
                          "run id '%s' matches several runs (%s, %s, ...); give more of its "
                          "digits",
                          id, first, second);
    else
        snprintf(run_hash, 17, "%s", first);
    sb_results_run_rows_free(rows, n_rows);
    return st;
}

/* The rows `list` reads for the run with this hash, as curve points. */
static sb_status curve_points(sb_results *db, const char *run_hash,
                              sb_status (*list)(sb_results *, int64_t, sb_eval_row **, size_t *,
                                                sb_error *),
                              sb_curve_point **points, size_t *n, sb_error *err)
{
    SB_API_REQUIRE(points, err);
    SB_API_REQUIRE(n, err);
    *points = NULL;
    *n = 0;
    SB_API_REQUIRE(db, err);
    SB_API_REQUIRE(run_hash, err);
    sb_run_row stored;
    sb_status st = stored_run(db, run_hash, &stored, err);
    if (st != SB_OK)
        return st;
    sb_eval_row *evals = NULL;
    size_t n_evals = 0;
    st = list(db, stored.id, &evals, &n_evals, err);
    sb_results_run_row_clear(&stored);
    if (st != SB_OK || n_evals == 0)
        return st;
    sb_curve_point *out = malloc(n_evals * sizeof *out);
    if (out == NULL) {
        free(evals);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory reading the curve of run %s",
                            run_hash);
    }
    for (size_t i = 0; i < n_evals; i++)
        out[i] = (sb_curve_point){.step = evals[i].step,
                                  .samples = evals[i].samples,
                                  .split = evals[i].split,
                                  .loss = evals[i].loss,
                                  .acc = evals[i].acc,
                                  .lr = evals[i].lr,
                                  .tokens_per_s = evals[i].tokens_per_s,
                                  .wall_s = evals[i].wall_s};
    free(evals);
    *points = out;
    *n = n_evals;
    return SB_OK;
}

sb_status sb_results_curve(sb_results *db, const char *run_hash, sb_curve_point **points, size_t *n,
                           sb_error *err)
{
    return curve_points(db, run_hash, sb_results_list_evals, points, n, err);
}

sb_status sb_results_live(sb_results *db, const char *run_hash, sb_curve_point **points, size_t *n,
                          sb_error *err)
{
    return curve_points(db, run_hash, sb_results_list_live, points, n, err);
}

void sb_results_curve_free(sb_curve_point *points)
{
    free(points);
}
