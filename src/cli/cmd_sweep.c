/*
 * cmd_sweep.c - `selectivbench sweep FILE.yaml`: run a W&B grid offline.
 *
 * Every run of the grid is `selectivbench train <the file's command flags> --name=value...`
 * in a worker process of its own (the library's sb_sweep_run; sweep_view.c prints its
 * progress), writing to one results database. Runs the database has as finished are
 * skipped, so running a sweep again resumes it. A run that cannot start (invalid
 * configuration) or dies is recorded with its reason; a sweep with refused or failed runs
 * exits 1.
 *
 * The grid is never listed: the library's selection (sb_sweep_select) narrows each
 * parameter to the --filter values, and --shard i/N (machines with no coordinator: machine i
 * takes the filtered runs at positions i, i + N, ...) and --limit pick from it by index. A
 * selection over SB_SWEEP_MAX_RUNS is refused. --dry_run and --hashes check every selected
 * run exactly as the real sweep does (sb_sweep_check_run) and print one line per run.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/mpi_comm.h"
#include "cli/plan_view.h"
#include "cli/presets.h"
#include "cli/run_options.h"
#include "cli/signals.h"
#include "cli/sweep_file.h"
#include "cli/sweep_mpi.h"
#include "cli/sweep_slurm.h"
#include "cli/sweep_view.h"
#include "selectivbench/selectivbench.h"

#define SWEEP_MAX_FILTERS 16

/* The flags of `sweep`. */
typedef struct sweep_flags {
    int dry_run, hashes, list, workers, threads, limit, quiet;
    double checkpoint_every;                    /* minutes */
    const char *slurm, *slurm_time, *partition; /* --slurm DIR: write an sbatch script */
    int array, cpus_per_task, mpi, ranks;
    int ranks_per_run; /* under mpirun: ranks per team (data-parallel runs) */
    const char *db, *results;
    const char *shard;
    const char *filters[SWEEP_MAX_FILTERS];
    int n_filters;
    const char *file; /* the sweep file or built-in preset */
} sweep_flags;

/* Parses the flags into o; returns -1 to go on, else the exit code. */
/* The keys sweep takes (the others of its options are its own switches and texts). */
static void sweep_add_keys(sb_config *cfg, sb_option *opts, int *n_opts)
{
    sb_options_add_key(cfg, "results", "results folder: the database, checkpoints and logs", opts,
                       n_opts);
    sb_options_add_key(cfg, "db", "results database (default RESULTS/" SB_RESULTS_DB_NAME ")", opts,
                       n_opts);
    sb_options_add_key(cfg, "workers", NULL, opts, n_opts);
    sb_options_add_key(cfg, "threads", "threads per run (default 0: cores / workers)", opts,
                       n_opts);
    sb_options_add_key(cfg, "limit", NULL, opts, n_opts);
    sb_options_add_key(cfg, "checkpoint_every",
                       "every run also writes its checkpoint every X minutes (train "
                       "--checkpoint_every; default 0: at evaluations only)",
                       opts, n_opts);
    sb_options_add_key(cfg, "array", NULL, opts, n_opts);
    sb_options_add_key(cfg, "ranks",
                       "with --slurm --mpi: MPI ranks, the coordinator included, at least 2 "
                       "(default min(runs, 16) + 1)",
                       opts, n_opts);
    sb_options_add_key(cfg, "ranks_per_run", NULL, opts, n_opts);
    sb_options_add_key(cfg, "cpus_per_task", NULL, opts, n_opts);
}

/* The keys' values after parsing. */
static void sweep_read_keys(const sb_config *cfg, sweep_flags *o)
{
    o->results = sb_config_text(cfg, "results");
    o->db = sb_config_text(cfg, "db")[0] != '\0' ? sb_config_text(cfg, "db") : NULL;
    o->workers = sb_run_flag(cfg, "workers");
    o->threads = sb_run_flag(cfg, "threads");
    o->limit = sb_run_flag(cfg, "limit");
    o->checkpoint_every = sb_config_number(cfg, "checkpoint_every");
    o->array = sb_run_flag(cfg, "array"); /* 0: not given */
    o->ranks = sb_run_flag(cfg, "ranks");
    o->ranks_per_run = sb_run_flag(cfg, "ranks_per_run");
    o->cpus_per_task = sb_run_flag(cfg, "cpus_per_task");
}

static int sweep_parse(sb_config *cfg, int argc, char **argv, sweep_flags *o)
{
    const char *filter = NULL;
    sb_option opts[40] = {
        {"dry_run", SB_OPT_SWITCH, &o->dry_run, NULL,
         "check each selected run as the sweep would and print why any is refused, the train "
         "flags of the first 20 (--list: of every run), the axes, an estimate of the "
         "cost (the plan's time from cached calibrations: nothing is timed) and the count; run "
         "nothing",
         0},
        {"list", SB_OPT_SWITCH, &o->list, NULL,
         "with --dry_run: print the train flags of every selected run (default: the first 20)", 0},
        {"hashes", SB_OPT_SWITCH, &o->hashes, NULL,
         "print each selected run's run hash and training hash (or why it is refused) and the "
         "count; run nothing",
         0},
        {"filter", SB_OPT_STRING, &filter, "KEY=VALUE",
         "only runs with this parameter value (repeat the flag for several; default: none)", 0},
        {"shard", SB_OPT_STRING, &o->shard, "I/N",
         "only the filtered runs at positions I, I+N, I+2N, ... (one shard per machine; "
         "default 0/1: all)",
         0},
        {"quiet", SB_OPT_SWITCH, &o->quiet, NULL, "no progress line", 0},
        {"slurm", SB_OPT_STRING, &o->slurm, "DIR",
         "write DIR/sweep.sbatch, a Slurm job array over shards of the selected runs (each "
         "with its own results folder DIR/shard-i, requeued after Slurm's time-limit warning), "
         "print the sbatch line and run nothing (docs/cluster.md; default: none, the sweep runs "
         "here)",
         0},
        {"time", SB_OPT_STRING, &o->slurm_time, "HH:MM:SS",
         "with --slurm: each task's time limit (default 24:00:00)", 0},
        {"partition", SB_OPT_STRING, &o->partition, "P",
         "with --slurm: the partition (default: the cluster's)", 0},
        {"mpi", SB_OPT_SWITCH, &o->mpi, NULL,
         "with --slurm: one MPI job (mpirun; rank 0 coordinates, the others train) instead of "
         "a job array (default: an array)",
         0},
    };
    int n_opts = sb_options_count(opts, 40);
    sweep_add_keys(cfg, opts, &n_opts);
    /* --filter may repeat: collect every occurrence before the table parser sees them */
    int n_filters = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *f = strcmp(a, "--filter") == 0 && i + 1 < argc ? argv[i + 1]
                        : strncmp(a, "--filter=", 9) == 0          ? a + 9
                                                                   : NULL;
        if (f != NULL && n_filters++ < SWEEP_MAX_FILTERS)
            o->filters[o->n_filters++] = f;
    }
    const char *pos[1];
    int n_pos = 0;
    int rc = sb_cli_parse("sweep",
                          "FILE.yaml [--dry_run] [--workers N] [--filter K=V] "
                          "[--shard I/N] [--limit K] [--db PATH]",
                          opts, n_opts, argc, argv, pos, 1, &n_pos);
    if (rc >= 0)
        return rc;
    sweep_read_keys(cfg, o);
    sb_error err = {0};
    if (o->ranks == 1) {
        sb_error_set(&err, SB_ERR_INVALID,
                     "--ranks 1: an MPI sweep needs the coordinator and at least one worker; "
                     "give --ranks 2 or more");
        return sb_cli_fail("sweep", &err);
    }
    if (n_filters > SWEEP_MAX_FILTERS) {
        sb_error_set(&err, SB_ERR_INVALID, "--filter is given %d times; at most %d", n_filters,
                     SWEEP_MAX_FILTERS);
        return sb_cli_fail("sweep", &err);
    }
    if (n_pos != 1) {
        sb_error_set(&err, SB_ERR_INVALID, "name one sweep file: selectivbench sweep FILE.yaml");
        return sb_cli_fail("sweep", &err);
    }
    o->file = pos[0];
    return -1;
}

/* The refused runs of a sweep: how many, and the first with its reason; and how many are
 * excluded (runs the reference does not run either: listed, but not an error). */
typedef struct refusals {
    int64_t count, first_run, excluded;
    sb_error first;
} refusals;

static void refusals_add(refusals *r, int64_t run, const sb_error *why)
{
    if (why->status == SB_ERR_EXCLUDED) {
        r->excluded++;
        return;
    }
    if (r->count++ == 0) {
        r->first_run = run;
        r->first = *why;
    }
}

/* The line that ends a sweep with refused runs (exit 1). */
static int refusals_fail(const refusals *r, int64_t n_runs)
{
    sb_error err = {0};
    fflush(stdout); /* the runs' lines and the summary before the error line */
    sb_error_set(&err, SB_ERR_RUNTIME, "%lld of %lld runs refused; the first, run %lld: %s",
                 (long long)r->count, (long long)n_runs, (long long)r->first_run, r->first.msg);
    return sb_cli_fail("sweep", &err);
}

/* --hashes: "K RUN_HASH TRAINING_HASH" of a run; a refused run whose configuration could
 * be built (its hashes key its refusal in the database) gets "refused: REASON" after them,
 * one that could not "K refused: REASON". */
static void print_hashes(const sb_sweep *s, int64_t k, const sb_config *checked,
                         const sb_error *why)
{
    sb_config *built = NULL;
    sb_error ignored = {0};
    const sb_config *cfg = checked;
    if (cfg == NULL && sb_sweep_config(s, k, &built, &ignored) == SB_OK)
        cfg = built;
    const char *verdict = why->status == SB_ERR_EXCLUDED ? "excluded" : "refused";
    if (cfg == NULL) {
        printf("%lld %s: %s\n", (long long)k, verdict, why->msg);
        return;
    }
    char run_hash[17], training_hash[17];
    sb_config_run_hash(cfg, run_hash);
    sb_config_training_hash(cfg, training_hash);
    if (checked != NULL)
        printf("%lld %s %s\n", (long long)k, run_hash, training_hash);
    else
        printf("%lld %s %s %s: %s\n", (long long)k, run_hash, training_hash, verdict, why->msg);
    sb_config_free(built);
}

/* One selected run, checked: its train command line (--hashes: its two hashes), or why it
 * is refused. Returns SB_OK, or the error that stops the listing (out of memory). */
static sb_status print_run(const sb_sweep *s, int64_t k, int hashes, int show, refusals *refused,
                           sb_error *err)
{
    sb_config *cfg = NULL;
    sb_error why = {0};
    if (sb_sweep_check_run(s, k, hashes ? &cfg : NULL, &why) != SB_OK) {
        if (why.status == SB_ERR_NOMEM) {
            *err = why;
            return why.status;
        }
        if (hashes)
            print_hashes(s, k, NULL, &why);
        else
            printf("run %lld %s: %s\n", (long long)k,
                   why.status == SB_ERR_EXCLUDED ? "excluded" : "refused", why.msg);
        refusals_add(refused, k, &why);
        return SB_OK;
    }
    if (hashes) {
        print_hashes(s, k, cfg, &why);
        sb_config_free(cfg);
        return SB_OK;
    }
    if (!show)
        return SB_OK;
    char **args = NULL;
    int n_args = 0;
    sb_status st = sb_sweep_run_args(s, k, &args, &n_args, err);
    if (st != SB_OK)
        return st;
    printf("%s train", sb_cli_program()); /* each line pastes: this program, as it was run */
    for (int i = 0; i < n_args; i++)
        printf(" %s", args[i]);
    printf("\n");
    sb_sweep_args_free(args);
    return SB_OK;
}

/* --dry_run's axes: each parameter the selection varies, with its values, then the fixed
 * ones as NAME=VALUE. */
static void print_axes(const sb_sweep *s, const sb_sweep_selection *sel)
{
    int n_params = sb_sweep_param_count(s), n_varied = 0;
    for (int p = 0; p < n_params; p++)
        n_varied += sb_sweep_selection_value_count(sel, p) > 1;
    printf("axes: %d of %d parameters vary (%lld runs selected of a grid of %lld)\n", n_varied,
           n_params, (long long)sb_sweep_selection_size(sel), (long long)sb_sweep_count(s));
    for (int p = 0; p < n_params; p++) {
        int n_values = sb_sweep_selection_value_count(sel, p);
        if (n_values < 2)
            continue;
        printf("  %-20s %3d values: ", sb_sweep_param_name(s, p), n_values);
        for (int j = 0; j < n_values; j++)
            printf("%s%s", j > 0 ? ", " : "", sb_sweep_selection_value(sel, p, j));
        printf("\n");
    }
    int first = 1;
    for (int p = 0; p < n_params; p++) {
        if (sb_sweep_selection_value_count(sel, p) != 1)
            continue;
        printf("%s%s=%s", first ? "fixed: " : ", ", sb_sweep_param_name(s, p),
               sb_sweep_selection_value(sel, p, 0));
        first = 0;
    }
    if (!first)
        printf("\n");
}

/* --dry_run's cost: samples, frames, parameters and FLOPs of the runs it would train
 * (sb_sweep_estimate_cost), then the plan's time on these workers from the calibrations
 * cached by `plan` (sb_cli_plan_print_total): nothing is timed here, so the estimate is the
 * same from call to call and does not move with the machine's load. */
static void print_cost(const sb_sweep *s, const sb_sweep_selection *sel, const sweep_flags *o)
{
    sb_sweep_cost c;
    sb_error err = {0};
    if (sb_sweep_estimate_cost(s, sel, &c, &err) != SB_OK) {
        printf("cost (estimate): not estimated: %s\n", err.msg);
        return;
    }
    if (c.runs == 0) {
        printf("cost (estimate): no run to train\n");
        return;
    }
    char samples[32], tokens[32], flops[32], pmin[32], pmax[32];
    sb_cli_format_count((double)c.samples, samples, sizeof samples);
    sb_cli_format_count(c.tokens, tokens, sizeof tokens);
    sb_cli_format_count(c.train_flops, flops, sizeof flops);
    sb_cli_format_count((double)c.params_min, pmin, sizeof pmin);
    sb_cli_format_count((double)c.params_max, pmax, sizeof pmax);
    char per_run[64];
    if (c.samples_min == c.samples_max)
        snprintf(per_run, sizeof per_run, "%lld", (long long)c.samples_min);
    else
        snprintf(per_run, sizeof per_run, "%lld to %lld", (long long)c.samples_min,
                 (long long)c.samples_max);
    printf("cost (estimate): %lld runs x %s samples = %s samples, %s frames; %s%s%s "
           "parameters per run; %s training FLOPs (3 x forward FLOPs per frame x frames)\n",
           (long long)c.runs, per_run, samples, tokens, pmin,
           c.params_min != c.params_max ? " to " : "", c.params_min != c.params_max ? pmax : "",
           flops);
    sb_plan_free(sb_cli_plan_print_total(s, sel, o->workers, o->threads));
}

#define DRY_RUN_SHOWN 20 /* command lines --dry_run prints before the summary */

/* --dry_run and --hashes: every selected run checked and printed as it comes (nothing is
 * kept, so memory does not grow with the selection); --dry_run then summarises the axes and
 * estimates the cost; last "N runs" (", M refused", ", E excluded ..."). Exit 1 when a run
 * is refused; excluded runs are not an error. */
static int sweep_list(const sb_sweep *s, const sb_sweep_selection *sel, const sweep_flags *o)
{
    int hashes = o->hashes;
    int64_t n_runs = sb_sweep_selection_size(sel);
    refusals refused = {0};
    sb_error err = {0};
    int64_t shown = 0;
    for (int64_t i = 0; i < n_runs; i++) {
        int show = o->list || shown < DRY_RUN_SHOWN;
        int64_t before = refused.count + refused.excluded;
        if (print_run(s, sb_sweep_selection_run(sel, i), hashes, show, &refused, &err) != SB_OK)
            return sb_cli_fail("sweep", &err);
        shown += show && refused.count + refused.excluded == before; /* a command line */
    }
    int64_t accepted = n_runs - refused.count - refused.excluded;
    if (!hashes && accepted > shown)
        printf("... the train flags of %lld more runs (--list prints every one)\n",
               (long long)(accepted - shown));
    if (!hashes) {
        print_axes(s, sel);
        fflush(stdout); /* the axes while the cost is measured */
        print_cost(s, sel, o);
    }
    printf("%lld runs", (long long)n_runs);
    if (refused.count > 0)
        printf(", %lld refused", (long long)refused.count);
    if (refused.excluded > 0)
        printf(", %lld excluded (the reference does not run them either)",
               (long long)refused.excluded);
    printf("\n");
    return refused.count > 0 ? refusals_fail(&refused, n_runs) : 0;
}

/* Runs the selection in worker processes; exit 1 when a run is refused or fails. */
static int sweep_execute(const sb_sweep *s, const sb_sweep_selection *sel, const sweep_flags *o,
                         sb_config *settings)
{
    sb_error err = {0};
    char db[4096];
    /* the database named in the summary line */
    if (o->db == NULL && (sb_results_path(o->results, db, sizeof db, &err) != SB_OK ||
                          sb_config_set_key(settings, "db", db, &err) != SB_OK))
        return sb_cli_fail("sweep", &err);
    /* the executor takes a list: at most SB_SWEEP_MAX_RUNS entries */
    int64_t n_runs = sb_sweep_selection_size(sel);
    int64_t *runs = malloc((size_t)(n_runs > 0 ? n_runs : 1) * sizeof *runs);
    if (runs == NULL) {
        sb_error_set(&err, SB_ERR_NOMEM, "out of memory listing the %lld selected runs",
                     (long long)n_runs);
        return sb_cli_fail("sweep", &err);
    }
    for (int64_t i = 0; i < n_runs; i++)
        runs[i] = sb_sweep_selection_run(sel, i);
    /* SIGINT or SIGTERM: the workers checkpoint and stop, the sweep waits for them */
    sb_cli_signals_install("selectivbench sweep: stopping: the running runs stop after their "
                           "current update, with a checkpoint (a second signal quits at "
                           "once)\n");
    /* the plan's total (core-hours, wall time on these workers) from cached calibrations */
    sb_plan *plan = sb_cli_plan_print_total(s, sel, o->workers, o->threads);
    sb_cli_sweep_tally tally;
    sb_status st =
        sb_cli_sweep_run(s, o->file, runs, n_runs, settings, plan, o->quiet, &tally, &err);
    sb_plan_free(plan);
    free(runs);
    int sig = sb_cli_stop_signal();
    if (st == SB_ERR_RUNTIME && sig != 0) {
        fprintf(stderr,
                "selectivbench sweep: sweep interrupted: %d run%s interrupted; run the "
                "same command to resume\n",
                tally.interrupted, tally.interrupted == 1 ? "" : "s");
        return sb_cli_signal_exit_code(sig);
    }
    if (st != SB_OK)
        return sb_cli_fail("sweep", &err);
    if (tally.refused > 0) {
        refusals refused = {.count = tally.refused, .first_run = tally.first_refused_run};
        snprintf(refused.first.msg, sizeof refused.first.msg, "%s", tally.first_refused);
        return refusals_fail(&refused, n_runs);
    }
    if (tally.failed > 0) { /* one line on stderr, whatever --quiet hid */
        if (tally.first_failed_run >= 0)
            fprintf(stderr,
                    "selectivbench sweep: error: %d of %lld runs failed; the first, run "
                    "%lld: %.300s\n",
                    tally.failed, (long long)n_runs, (long long)tally.first_failed_run,
                    tally.first_failed);
        else
            fprintf(stderr,
                    "selectivbench sweep: error: %d of %lld runs failed (results "
                    "lists them with why)\n",
                    tally.failed, (long long)n_runs);
    }
    return tally.failed > 0 || tally.interrupted > 0 ? 1 : 0;
}

static int sweep_with(sb_config *settings, int argc, char **argv)
{
    sweep_flags o = {0};
    int rc = sweep_parse(settings, argc, argv, &o);
    if (rc >= 0)
        return rc;
    sb_error err = {0};
    sb_sweep *s = NULL;
    sb_sweep_selection *sel = NULL;
    if (sb_cli_sweep_select(o.file, o.filters, o.n_filters, o.shard, o.limit, &s, &sel, &err) !=
        SB_OK)
        return sb_cli_fail("sweep", &err);
    if (o.slurm != NULL) {
        sb_slurm_job job = {.dir = o.slurm,
                            .file = o.file,
                            .runs = sb_sweep_selection_size(sel),
                            .array = o.array,
                            .time = o.slurm_time != NULL ? o.slurm_time : "24:00:00",
                            .partition = o.partition,
                            .cpus_per_task = o.cpus_per_task,
                            .workers = o.workers,
                            .threads = o.threads,
                            .checkpoint_every = o.checkpoint_every,
                            .filters = o.filters,
                            .n_filters = o.n_filters,
                            .mpi = o.mpi,
                            .ranks = o.ranks,
                            .ranks_per_run = o.ranks_per_run};
        rc = sb_cli_sweep_slurm(&job);
    } else if (o.hashes || o.dry_run) {
        rc = sb_mpi_rank() == 0 ? sweep_list(s, sel, &o) : 0;
    } else if (o.ranks_per_run > 1 &&
               (sb_mpi_size() <= 1 || (sb_mpi_size() - 1) % o.ranks_per_run != 0)) {
        /* every rank comes here alike; rank 0 says why */
        if (sb_mpi_size() <= 1)
            fprintf(stderr,
                    "selectivbench sweep: error: --ranks_per_run %d: teams of ranks need "
                    "mpirun: mpirun -np N %s sweep ..., with N - 1 a multiple of %d\n",
                    o.ranks_per_run, sb_cli_program(), o.ranks_per_run);
        else if (sb_mpi_rank() == 0)
            fprintf(stderr,
                    "selectivbench sweep: error: --ranks_per_run %d: the %d worker ranks of "
                    "mpirun -np %d do not form teams of %d: give -np 1 + a multiple of %d\n",
                    o.ranks_per_run, sb_mpi_size() - 1, sb_mpi_size(), o.ranks_per_run,
                    o.ranks_per_run);
        rc = 2;
    } else if (sb_mpi_size() > 1) {
        /* under mpirun: rank 0 coordinates and writes the database, the others train */
        char db[4096];
        if (o.db == NULL && sb_results_path(o.results, db, sizeof db, &err) != SB_OK)
            rc = sb_cli_fail("sweep", &err);
        else {
            sb_mpi_sweep job = {.sweep = s,
                                .sel = sel,
                                .label = o.file,
                                .results = o.results,
                                .db = o.db != NULL ? o.db : db,
                                .threads = o.threads,
                                .ranks_per_run = o.ranks_per_run,
                                .checkpoint_every_s = 60.0 * o.checkpoint_every,
                                .quiet = o.quiet};
            if (sb_mpi_rank() == 0 && !o.quiet) /* the plan on the worker ranks */
                sb_plan_free(sb_cli_plan_print_total(s, sel, sb_mpi_size() - 1,
                                                     o.threads > 0 ? o.threads : 1));
            rc = sb_cli_sweep_mpi(&job);
        }
    } else
        rc = sweep_execute(s, sel, &o, settings);
    sb_sweep_selection_free(sel);
    sb_sweep_free(s);
    return rc;
}

int sb_cmd_sweep(int argc, char **argv)
{
    return sb_run_with_settings("sweep", NULL, sweep_with, argc, argv);
}
