/*
 * cmd_plan.c - `selectivbench plan FILE.yaml`: what a sweep will cost before it runs.
 *
 * For every run of the selection (the same selection `sweep FILE --dry_run` makes): the
 * frames it trains and evaluates, its FLOPs, its peak memory and its seconds, from a short
 * calibration of each shape of run on this machine (a few real updates and an evaluation,
 * cached, so a second plan of the same file measures nothing); then the core-hours and the
 * wall time on --ranks ranks of --threads threads (largest run first, each to the earliest
 * free rank). The library (sb_plan_make) measures and schedules; this file prints.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/plan_view.h"
#include "cli/run_options.h"
#include "cli/sweep_file.h"
#include "selectivbench/selectivbench.h"

#define PLAN_MAX_FILTERS 16

typedef struct plan_flags {
    int json, limit;
    const char *shard;
    const char *filters[PLAN_MAX_FILTERS];
    int n_filters;
    const char *file;
} plan_flags;

static int plan_parse(sb_config *cfg, int argc, char **argv, plan_flags *o)
{
    const char *filter = NULL;
    sb_option opts[24] = {
        {"json", SB_OPT_SWITCH, &o->json, NULL,
         "print the plan as one JSON object (default: a table)", 0},
        {"filter", SB_OPT_STRING, &filter, "KEY=VALUE",
         "only runs with this parameter value (repeat the flag for several; default: none)", 0},
        {"shard", SB_OPT_STRING, &o->shard, "I/N",
         "only the filtered runs at positions I, I+N, I+2N, ... (default 0/1: all)", 0},
    };
    int n_opts = sb_options_count(opts, 24);
    sb_options_add_key(cfg, "ranks",
                       "runs at a time: MPI ranks, sweep workers or machines (default 1)", opts,
                       &n_opts);
    sb_options_add_key(cfg, "threads",
                       "threads per run (default 0: this machine's cores / --ranks, at least 1, as "
                       "a sweep with --workers N gives its runs; beyond this machine's cores the "
                       "matrix products are assumed to speed up linearly, see docs/cluster.md)",
                       opts, &n_opts);
    sb_options_add_key(cfg, "recalibrate", NULL, opts, &n_opts);
    sb_options_add_key(cfg, "cached_only", NULL, opts, &n_opts);
    sb_options_add_key(cfg, "calibration_cache", NULL, opts, &n_opts);
    sb_options_add_key(cfg, "calibration_seconds", NULL, opts, &n_opts);
    sb_options_add_key(cfg, "calibration_threads", NULL, opts, &n_opts);
    sb_options_add_key(cfg, "limit", NULL, opts, &n_opts);
    int n_filters = sb_cli_repeated(argc, argv, "--filter", o->filters, PLAN_MAX_FILTERS);
    o->n_filters = n_filters < PLAN_MAX_FILTERS ? n_filters : PLAN_MAX_FILTERS;
    const char *pos[1];
    int n_pos = 0;
    int rc = sb_cli_parse("plan",
                          "FILE.yaml [--filter K=V] [--shard I/N] [--limit K] [--ranks N] "
                          "[--threads T] [--json] [--recalibrate]",
                          opts, n_opts, argc, argv, pos, 1, &n_pos);
    if (rc >= 0)
        return rc;
    o->limit = sb_run_flag(cfg, "limit");
    sb_error err = {0};
    if (n_filters > PLAN_MAX_FILTERS) {
        sb_error_set(&err, SB_ERR_INVALID, "--filter is given %d times; at most %d", n_filters,
                     PLAN_MAX_FILTERS);
        return sb_cli_fail("plan", &err);
    }
    if (n_pos != 1) {
        sb_error_set(&err, SB_ERR_INVALID, "name one sweep file: selectivbench plan FILE.yaml");
        return sb_cli_fail("plan", &err);
    }
    o->file = pos[0];
    return -1;
}

/* --shard I/N; 0 when it is not two integers with 0 <= I < N. */
static const char *source_words(sb_plan_source s)
{
    return s == SB_PLAN_MEASURED ? "measured" : s == SB_PLAN_CACHED ? "cached" : "FLOP rate";
}

/* One progress line per calibration, on stderr. */
static void on_calibration(const sb_plan_calibration *c, int index, int total, void *user)
{
    (void)user;
    char how[96];
    if (c->source == SB_PLAN_MEASURED)
        snprintf(how, sizeof how, "measured in %.1f s", c->measured_s);
    else
        snprintf(how, sizeof how, "%s", source_words(c->source));
    fprintf(stderr,
            "plan: calibration %d/%d: %s d %d, %d layers, micro-batch %d: %.3g us per training "
            "frame, %.3g us per test frame, %.1f GFLOP/s (%s%s)\n",
            index + 1, total, c->model, c->width, c->layers, c->micro_batch,
            c->train_s_per_frame * 1e6, c->eval_s_per_frame * 1e6, c->gflops, how,
            c->calibrated_layers < c->layers ? ", measured on fewer layers and scaled" : "");
}

static void format_bytes(double b, char *buf, size_t size)
{
    if (b >= 1073741824.0)
        snprintf(buf, size, "%.1f GiB", b / 1073741824.0);
    else
        snprintf(buf, size, "%.0f MiB", b / 1048576.0);
}

/* The text output: one row per (model, width), then the totals. */
static void print_table(const sb_plan *p, const char *file)
{
    printf("plan of %s: %lld runs, %d rank%s of %d thread%s, on %s\n", file, (long long)p->n_runs,
           p->ranks, p->ranks == 1 ? "" : "s", p->threads, p->threads == 1 ? "" : "s", p->machine);
    printf("%-22s %5s %5s %10s %10s %10s %10s %10s %10s\n", "model", "width", "runs", "train fr.",
           "test fr.", "FLOPs", "peak mem", "per run", "core-h");
    /* groups in order of first appearance */
    char *done = calloc((size_t)(p->n_runs > 0 ? p->n_runs : 1), 1);
    for (int64_t i = 0; done != NULL && i < p->n_runs; i++) {
        if (done[i])
            continue;
        const sb_plan_run *a = &p->runs[i];
        int width = p->calibrations[a->calibration].width;
        int64_t n = 0;
        double train = 0, test = 0, flops = 0, peak = 0, sec = 0;
        for (int64_t j = i; j < p->n_runs; j++) {
            const sb_plan_run *r = &p->runs[j];
            if (done[j] || strcmp(r->model, a->model) != 0 ||
                p->calibrations[r->calibration].width != width)
                continue;
            done[j] = 1;
            n++;
            train += (double)r->train_frames;
            test += (double)r->eval_frames;
            flops += r->flops;
            sec += r->seconds;
            if (r->peak_bytes > peak)
                peak = r->peak_bytes;
        }
        char tr[32], te[32], fl[32], pk[32], per[32];
        sb_cli_format_count(train / n, tr, sizeof tr);
        sb_cli_format_count(test / n, te, sizeof te);
        sb_cli_format_count(flops / n, fl, sizeof fl);
        format_bytes(peak, pk, sizeof pk);
        sb_cli_format_time(sec / n, per, sizeof per);
        printf("%-22s %5d %5lld %10s %10s %10s %10s %10s %10.3g\n", a->model, width, (long long)n,
               tr, te, fl, pk, per, sec * p->threads / 3600.0);
    }
    free(done);
    char wall[32], grid[32];
    sb_cli_format_time(p->wall_hours * 3600.0, wall, sizeof wall);
    sb_cli_format_time(p->wall_hours_grid_order * 3600.0, grid, sizeof grid);
    printf("total: %.3g core-hours; wall time on %d rank%s of %d thread%s: %s (largest run "
           "first, as an MPI sweep hands them out), %s in grid order (sweep --workers %d)\n",
           p->core_hours, p->ranks, p->ranks == 1 ? "" : "s", p->threads,
           p->threads == 1 ? "" : "s", wall, grid, p->ranks);
    printf("early stopping: not foreseen; every run is planned to its last update (the "
           "most it can cost)\n");
    printf("calibrations: %d (%d measured, %d cached, %d at a FLOP rate)%s\n", p->n_calibrations,
           p->measured, p->cached, p->estimated,
           p->calibrations != NULL && p->n_calibrations > 0 &&
                   p->threads > p->calibrations[0].calibrated_threads
               ? "; threads beyond this machine's cores: the matrix products' share is "
                 "assumed to speed up linearly"
               : "");
}

static int plan_with(sb_config *settings, int argc, char **argv)
{
    plan_flags o = {0};
    int rc = plan_parse(settings, argc, argv, &o);
    if (rc >= 0)
        return rc;
    sb_error err = {0};
    sb_sweep *s = NULL;
    sb_sweep_selection *sel = NULL;
    if (sb_cli_sweep_select(o.file, o.filters, o.n_filters, o.shard, o.limit, &s, &sel, &err) !=
        SB_OK)
        return sb_cli_fail("plan", &err);
    const sb_plan_settings ps = {.on_calibration = on_calibration};
    sb_plan *p = NULL;
    sb_status st = sb_plan_make(s, sel, settings, &ps, &p, &err);
    if (st == SB_OK && p->n_runs == 0 && p->n_refused > 0)
        st = sb_error_set(&err, SB_ERR_INVALID, "all %lld runs are refused; the first, %.400s",
                          (long long)p->n_refused, p->first_refused);
    else if (st == SB_OK && p->n_refused > 0)
        fprintf(stderr,
                "plan: %lld run%s left out, refused as the sweep would refuse them; "
                "the first, %.400s\n",
                (long long)p->n_refused, p->n_refused == 1 ? "" : "s", p->first_refused);
    if (st == SB_OK) {
        if (p->cache_damaged)
            fprintf(stderr,
                    "plan: the calibration cache %s was damaged or of an older version: "
                    "measured again and rewritten\n",
                    p->cache);
        fprintf(stderr, "plan: %d calibration%s: %d measured, %d from the cache%s%s\n",
                p->n_calibrations, p->n_calibrations == 1 ? "" : "s", p->measured, p->cached,
                p->cache[0] != '\0' ? " " : "", p->cache);
        if (o.json) {
            char *json = NULL;
            if ((st = sb_plan_to_json(p, s, &json, &err)) == SB_OK)
                printf("%s\n", json);
            sb_string_free(json);
        } else {
            print_table(p, o.file);
        }
    }
    sb_plan_free(p);
    sb_sweep_selection_free(sel);
    sb_sweep_free(s);
    return st == SB_OK ? 0 : sb_cli_fail("plan", &err);
}

int sb_cmd_plan(int argc, char **argv)
{
    return sb_run_with_settings("plan", NULL, plan_with, argc, argv);
}
