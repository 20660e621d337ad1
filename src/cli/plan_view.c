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


void sb_cli_plan_print_total(const sb_sweep *s, const sb_sweep_selection *sel, int workers,
                             int threads)
{
    if (sb_sweep_selection_size(sel) > SWEEP_PLAN_MAX_RUNS) {
        printf("plan: not made for %lld runs here (selectivbench plan FILE makes it)\n",
               (long long)sb_sweep_selection_size(sel));
        return;
    }
    char cache[4096];
    sb_cli_plan_cache_path(cache, sizeof cache);
    sb_plan_options o = {.ranks = workers > 0 ? workers : 1, .threads = threads > 0 ? threads : 1,
                         .cache_path = cache[0] != '\0' ? cache : NULL, .cached_only = 1};
    sb_plan *p = NULL;
    sb_error err = {0};
    if (sb_plan_make(s, sel, &o, &p, &err) != SB_OK) {
        printf("plan: not made: %s\n", err.msg);
        return;
    }
    char wall[32];
    sb_cli_format_time(p->wall_hours_grid_order * 3600.0, wall, sizeof wall);
    printf("plan: %lld run%s, %.3g core-hours, about %s on %d worker%s of %d thread%s (%s)\n",
           (long long)p->n_runs, p->n_runs == 1 ? "" : "s", p->core_hours, wall, o.ranks,
           o.ranks == 1 ? "" : "s",
           o.threads, o.threads == 1 ? "" : "s",
           p->estimated == 0 ? "calibrated on this machine, selectivbench plan FILE for the details"
           : p->cached == 0  ? "FLOP-rate estimate, nothing calibrated yet: selectivbench plan "
                               "FILE measures it"
                             : "partly a FLOP-rate estimate: selectivbench plan FILE measures "
                               "the rest");
    fflush(stdout);
    sb_plan_free(p);
}
