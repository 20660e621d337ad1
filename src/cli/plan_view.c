/* plan_view.c - see plan_view.h. */
#include "cli/plan_view.h"
#include "cli/sweep_file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Plans of more runs are left to `selectivbench plan` (a sweep must start fast). */
#define SWEEP_PLAN_MAX_RUNS 100000

/* A plan that measures nothing (a sweep or a run must start at once) of `ranks` runs at a
 * time of `threads` threads each (0: as the key's default), its keys set on a copy of base
 * (NULL: the defaults). */
static sb_status plan_cached(const sb_sweep *s, const sb_sweep_selection *sel,
                             const sb_config *base, int ranks, int threads, sb_plan **p,
                             sb_error *err)
{
    sb_config *cfg = NULL;
    char text[32];
    sb_status st = base != NULL ? sb_config_copy(base, &cfg, err) : sb_config_create(&cfg, err);
    if (st == SB_OK)
        st = sb_config_set_key(cfg, "cached_only", "True", err);
    snprintf(text, sizeof text, "%d", ranks);
    if (st == SB_OK && ranks > 0)
        st = sb_config_set_key(cfg, "ranks", text, err);
    snprintf(text, sizeof text, "%d", threads);
    if (st == SB_OK && threads > 0)
        st = sb_config_set_key(cfg, "threads", text, err);
    if (st == SB_OK)
        st =
            s != NULL ? sb_plan_make(s, sel, cfg, NULL, p, err) : sb_plan_config(cfg, NULL, p, err);
    sb_config_free(cfg);
    return st;
}

sb_plan *sb_cli_plan_print_total(const sb_sweep *s, const sb_sweep_selection *sel, int workers,
                                 int threads)
{
    if (sb_sweep_selection_size(sel) > SWEEP_PLAN_MAX_RUNS) {
        printf("plan: not made for %lld runs here (selectivbench plan FILE makes it)\n",
               (long long)sb_sweep_selection_size(sel));
        return NULL;
    }
    sb_plan *p = NULL;
    sb_error err = {0};
    if (plan_cached(s, sel, NULL, workers > 0 ? workers : 1, threads, &p, &err) != SB_OK) {
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
           (long long)p->n_runs, p->n_runs == 1 ? "" : "s", p->core_hours, wall, p->ranks,
           p->ranks == 1 ? "" : "s", p->threads, p->threads == 1 ? "" : "s",
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
    sb_plan *p = NULL;
    sb_error err = {0};
    if (plan_cached(NULL, NULL, cfg, 1, threads, &p, &err) != SB_OK)
        return; /* the run itself reports what is wrong with its configuration */
    if (p->n_runs == 1 && p->runs[0].seconds > SB_CLI_PLAN_NOTICE_S) {
        char time[32];
        sb_cli_format_time(p->runs[0].seconds, time, sizeof time);
        fprintf(f,
                "  plan: about %s on %d thread%s and %.2g GiB at most (%s); smaller: "
                "--dataset_size, --feat_size, --layers (configs/lite runs take about a minute "
                "each); Ctrl-C stops with a checkpoint that --resume continues\n",
                time, p->threads, p->threads == 1 ? "" : "s",
                p->runs[0].peak_bytes / (1024.0 * 1024.0 * 1024.0),
                p->estimated == 0
                    ? "calibrated on this machine"
                    : "a FLOP-rate estimate: no run of this shape is calibrated here yet");
        fflush(f);
    }
    sb_plan_free(p);
}
