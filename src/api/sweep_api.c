/* sweep_api.c - the public API's sweeps (selectivbench.h): the configuration of one run of a
 * sweep file's grid, its check, and running a selection of the grid, over
 * src/exp/sweep_exec.c. sb_sweep_load, sb_sweep_load_text, sb_sweep_free, sb_sweep_count,
 * sb_sweep_run_matches, sb_sweep_run_args, sb_sweep_args_free and the selections
 * (sb_sweep_select, sb_sweep_selection_*) are sweep.c's own, sb_sweep_check_params
 * sweep_exec.c's. */
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "exp/plan.h"
#include "exp/sweep.h"
#include "exp/sweep_coord.h"
#include "exp/sweep_exec.h"

/* Run k is not a run of the grid. */
static sb_status outside_grid(const sb_sweep *s, int64_t k, sb_error *err)
{
    return sb_error_set(err, SB_ERR_INVALID, "sweep file '%s': run %lld is outside [0, %lld)",
                        s->path, (long long)k, (long long)sb_sweep_count(s));
}

sb_status sb_sweep_config(const sb_sweep *s, int64_t k, sb_config **out, sb_error *err)
{
    SB_API_REQUIRE(out, err);
    *out = NULL;
    SB_API_REQUIRE(s, err);
    if (k < 0 || k >= sb_sweep_count(s))
        return outside_grid(s, k, err);
    sb_run_config run;
    sb_status st = sb_sweep_run_config(s, k, &run, err);
    if (st != SB_OK)
        return st;
    return sb_api_config_new(&run, out, err);
}

sb_status sb_sweep_check_run(const sb_sweep *s, int64_t k, sb_config **out, sb_error *err)
{
    if (out != NULL)
        *out = NULL;
    SB_API_REQUIRE(s, err);
    if (k < 0 || k >= sb_sweep_count(s))
        return outside_grid(s, k, err);
    sb_run_config run;
    int built = 0;
    sb_status st = sb_sweep_run_validate(s, k, &run, &built, err);
    if (st != SB_OK || out == NULL)
        return st;
    return sb_api_config_new(&run, out, err);
}

int sb_sweep_has_param(const sb_sweep *s, const char *name)
{
    if (s == NULL || name == NULL)
        return 0;
    for (int p = 0; p < s->n_params; p++)
        if (strcmp(s->params[p].name, name) == 0)
            return 1;
    return 0;
}

/* The runs given (or the whole grid) must be at most SB_SWEEP_MAX_RUNS runs of the grid: a
 * grid is never listed beyond that. */
static sb_status check_runs(const sb_sweep *s, const int64_t *runs, int64_t n_runs, sb_error *err)
{
    int64_t grid = sb_sweep_count(s);
    if (runs == NULL && n_runs != 0)
        return sb_error_set(err, SB_ERR_INVALID, "sb_sweep_run: n_runs %lld without runs",
                            (long long)n_runs);
    if (runs == NULL && grid > SB_SWEEP_MAX_RUNS)
        return sb_error_set(err, SB_ERR_INVALID,
                            "sb_sweep_run: sweep file '%s' has %lld runs, more than the %d one "
                            "sweep takes; pass a selection in runs (sb_sweep_select)",
                            s->path, (long long)grid, SB_SWEEP_MAX_RUNS);
    if (n_runs < 0 || n_runs > SB_SWEEP_MAX_RUNS)
        return sb_error_set(err, SB_ERR_INVALID,
                            "sb_sweep_run: n_runs %lld is outside [0, %d] (the most runs "
                            "one sweep takes)",
                            (long long)n_runs, SB_SWEEP_MAX_RUNS);
    for (int64_t i = 0; runs != NULL && i < n_runs; i++)
        if (runs[i] < 0 || runs[i] >= grid)
            return sb_error_set(err, SB_ERR_INVALID,
                                "sb_sweep_run: runs[%lld] = %lld is outside the grid of "
                                "sweep file '%s' [0, %lld)",
                                (long long)i, (long long)runs[i], s->path, (long long)grid);
    return SB_OK;
}

/* Every run of the grid (at most SB_SWEEP_MAX_RUNS, check_runs saw to it) as a list. */
static sb_status list_grid(const sb_sweep *s, int64_t **out, sb_error *err)
{
    int64_t n_runs = sb_sweep_count(s);
    int64_t *all = malloc((size_t)(n_runs > 0 ? n_runs : 1) * sizeof *all);
    if (all == NULL)
        return sb_error_set(err, SB_ERR_NOMEM,
                            "out of memory listing the %lld runs of sweep "
                            "file '%s'",
                            (long long)n_runs, s->path);
    for (int64_t k = 0; k < n_runs; k++)
        all[k] = k;
    *out = all;
    return SB_OK;
}

/* The keys a sweep reads: cfg's, or the table's defaults (kept in *defaults) for NULL. */
static const sb_runtime *sweep_keys(const sb_config *cfg, sb_run_config *defaults)
{
    if (cfg != NULL)
        return &cfg->run.rt;
    *defaults = sb_run_config_default();
    return &defaults->rt;
}

static sb_status no_results_folder(const char *fn, sb_error *err)
{
    return sb_error_set(err, SB_ERR_INVALID,
                        "%s: the key results is \"\": a sweep records its runs in a results "
                        "folder; give one",
                        fn);
}

sb_status sb_sweep_run(const sb_sweep *s, const int64_t *runs, int64_t n_runs, const sb_config *cfg,
                       const char *worker_exe, const sb_sweep_settings *settings, int *done_out,
                       int *failed_out, sb_error *err)
{
    SB_API_REQUIRE(s, err);
    if (worker_exe == NULL || worker_exe[0] == '\0')
        return sb_error_set(err, SB_ERR_INVALID,
                            "sb_sweep_run: worker_exe is required (the path of the "
                            "selectivbench command that runs each run)");
    sb_run_config defaults;
    const sb_runtime *rt = sweep_keys(cfg, &defaults);
    if (rt->results[0] == '\0')
        return no_results_folder("sb_sweep_run", err);
    int64_t *all = NULL;
    sb_status st = check_runs(s, runs, n_runs, err);
    if (st == SB_OK && runs == NULL)
        st = list_grid(s, &all, err);
    if (st != SB_OK)
        return st;
    /* the selection, or every run of the grid */
    if (runs == NULL) {
        n_runs = sb_sweep_count(s);
        runs = all;
    }
    const sb_sweep_settings none = {0};
    const sb_sweep_settings *set = settings != NULL ? settings : &none;
    sb_sweep_exec_opts eo = {
        .workers = rt->workers,
        .threads = rt->threads,
        .results = rt->results,
        .db = rt->db[0] != '\0' ? rt->db : NULL,
        .worker_exe = worker_exe,
        .on_update = set->on_update, /* the executor reports with the public record */
        .user = set->user,
        .cancel = set->cancel,
        .checkpoint_every_s = 60.0 * rt->checkpoint_every,
    };
    sb_sweep_tally tally = {0};
    st = sb_sweep_execute(s, runs, n_runs, &eo, &tally, err);
    free(all);
    if (done_out != NULL)
        *done_out = tally.done;
    if (failed_out != NULL)
        *failed_out = tally.failed;
    return st;
}

sb_status sb_sweep_coordinate(const sb_sweep *s, const sb_sweep_selection *sel,
                              const sb_config *cfg, int n_workers, int max_id,
                              const sb_coord_settings *settings, sb_coord_tally *tally,
                              sb_error *err)
{
    sb_run_config defaults;
    const sb_runtime *rt = sweep_keys(cfg, &defaults);
    if (rt->results[0] == '\0')
        return no_results_folder("sb_sweep_coordinate", err);
    return sb_sweep_coordinate_with(s, sel, rt->results, rt->db[0] != '\0' ? rt->db : NULL,
                                    n_workers, max_id, settings, tally, err);
}

/* ---- a sweep's worker: the progress pipe (exp/sweep_exec.h defines the record) ---------- */

struct sb_sweep_worker {
    FILE *pipe;
};

sb_sweep_worker *sb_sweep_worker_open(void)
{
    const char *fd_text = getenv(SB_PROGRESS_FD_ENV);
    if (fd_text == NULL)
        return NULL;
    FILE *pipe = NULL;
    char *end;
    long fd = strtol(fd_text, &end, 10);
    /* a pipe the sweep gave us: anything else (a stale variable) is ignored */
    if (end != fd_text && *end == '\0' && fd > 2 && fd < 65536 && fcntl((int)fd, F_GETFD) >= 0)
        pipe = fdopen((int)fd, "w");
    unsetenv(SB_PROGRESS_FD_ENV);
    if (pipe == NULL)
        return NULL;
    sb_sweep_worker *w = malloc(sizeof *w);
    if (w == NULL) {
        fclose(pipe);
        return NULL;
    }
    w->pipe = pipe;
    return w;
}

void sb_sweep_worker_report(sb_sweep_worker *w, const sb_progress *p, double last_test_acc)
{
    if (w == NULL || p == NULL)
        return;
    fprintf(w->pipe, SB_PROGRESS_RECORD_FORMAT, p->step, p->total_steps, p->mean_loss, p->mean_acc,
            p->tokens_per_s, p->eta_s, last_test_acc);
    fflush(w->pipe);
}

void sb_sweep_worker_close(sb_sweep_worker *w)
{
    if (w == NULL)
        return;
    fclose(w->pipe);
    free(w);
}

sb_status sb_plan_make(const sb_sweep *s, const sb_sweep_selection *sel, const sb_config *cfg,
                       const sb_plan_settings *settings, sb_plan **out, sb_error *err)
{
    SB_API_REQUIRE(out, err);
    *out = NULL;
    const sb_run_config defaults = sb_run_config_default();
    char cache[SB_PATH_MAX];
    sb_plan_options o;
    sb_plan_options_from(cfg != NULL ? &cfg->run.rt : &defaults.rt, settings, cache, sizeof cache,
                         &o);
    return sb_plan_make_with(s, sel, &o, out, err);
}

sb_status sb_plan_config(const sb_config *cfg, const sb_plan_settings *settings, sb_plan **out,
                         sb_error *err)
{
    SB_API_REQUIRE(out, err);
    *out = NULL;
    SB_API_REQUIRE(cfg, err);
    char cache[SB_PATH_MAX];
    sb_plan_options o;
    sb_plan_options_from(&cfg->run.rt, settings, cache, sizeof cache, &o);
    return sb_plan_run_config(&cfg->run, &o, out, err);
}
