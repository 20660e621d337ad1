/* plan_view.c - see plan_view.h. */
#include "cli/plan_view.h"
#include "cli/sweep_file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Plans of more runs are left to `selectivbench plan` (a sweep must start fast). */
#define SWEEP_PLAN_MAX_RUNS 100000

void sb_cli_plan_cache_path(char *buf, size_t size)
{
    const char *dir = getenv("SB_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"),
               *home = getenv("HOME");
    if (dir != NULL && dir[0] != '\0')
        snprintf(buf, size, "%s/plan-calibration.json", dir);
    else if (xdg != NULL && xdg[0] == '/')
        snprintf(buf, size, "%s/selectivbench/plan-calibration.json", xdg);
    else if (home != NULL && home[0] != '\0')
        snprintf(buf, size, "%s/.cache/selectivbench/plan-calibration.json", home);
    else if (size > 0)
        buf[0] = '\0';
}

sb_plan *sb_cli_plan_print_total(const sb_sweep *s, const sb_sweep_selection *sel, int workers,
                                 int threads)
{
    if (sb_sweep_selection_size(sel) > SWEEP_PLAN_MAX_RUNS) {
        printf("plan: not made for %lld runs here (selectivbench plan FILE makes it)\n",
               (long long)sb_sweep_selection_size(sel));
        return NULL;
    }
    char cache[4096];
    sb_cli_plan_cache_path(cache, sizeof cache);
    sb_plan_options o = {.ranks = workers > 0 ? workers : 1,
                         .threads = threads > 0 ? threads : 1,
                         .cache_path = cache[0] != '\0' ? cache : NULL,
                         .cached_only = 1};
    sb_plan *p = NULL;
    sb_error err = {0};
    if (sb_plan_make(s, sel, &o, &p, &err) != SB_OK) {
        printf("plan: not made: %s\n", err.msg);
        return NULL;
    }
    char wall[32];
    sb_cli_format_time(p->wall_hours_grid_order * 3600.0, wall, sizeof wall);
    double peak = 0;
    for (int64_t i = 0; i < p->n_runs; i++)
        peak = p->runs[i].peak_bytes > peak ? p->runs[i].peak_bytes : peak;
    printf("plan: %lld run%s, %.3g core-hours, about %s on %d worker%s of %d thread%s, %.2g GiB "
           "at most per run (%s)\n",
           (long long)p->n_runs, p->n_runs == 1 ? "" : "s", p->core_hours, wall, o.ranks,
           o.ranks == 1 ? "" : "s", o.threads, o.threads == 1 ? "" : "s",
           peak / (1024.0 * 1024.0 * 1024.0),
           p->estimated == 0 ? "calibrated on this machine, selectivbench plan FILE for the details"
           : p->cached == 0  ? "FLOP-rate estimate, nothing calibrated yet: selectivbench plan "
                               "FILE measures it"
                             : "partly a FLOP-rate estimate: selectivbench plan FILE measures "
                               "the rest");
    fflush(stdout);
    return p;
}

void sb_cli_plan_print_run(FILE *f, const sb_config *cfg, int threads)
{
    char cache[4096];
    sb_cli_plan_cache_path(cache, sizeof cache);
    sb_plan_options o = {.ranks = 1,
                         .threads = threads > 0 ? threads : 1,
                         .cache_path = cache[0] != '\0' ? cache : NULL,
                         .cached_only = 1};
    sb_plan *p = NULL;
    sb_error err = {0};
    if (sb_plan_config(cfg, &o, &p, &err) != SB_OK)
        return; /* the run itself reports what is wrong with its configuration */
    if (p->n_runs == 1 && p->runs[0].seconds > SB_CLI_PLAN_NOTICE_S) {
        char time[32];
        sb_cli_format_time(p->runs[0].seconds, time, sizeof time);
        fprintf(f,
                "  plan: about %s on %d thread%s and %.2g GiB at most (%s); smaller: "
                "--dataset_size, --feat_size, --layers (configs/lite runs take about a minute "
                "each); Ctrl-C stops with a checkpoint that --resume continues\n",
                time, o.threads, o.threads == 1 ? "" : "s",
                p->runs[0].peak_bytes / (1024.0 * 1024.0 * 1024.0),
                p->estimated == 0
                    ? "calibrated on this machine"
                    : "a FLOP-rate estimate: no run of this shape is calibrated here yet");
        fflush(f);
    }
    sb_plan_free(p);
}
