/*
 * cmd_sweep.c - `selectivbench sweep FILE.yaml`: run a W&B grid offline.
 *
 * Every run of the grid is `selectivbench train <the file's command flags> --name=value...`
 * in a worker process of its own (the library's sb_sweep_run; sweep_view.c prints its
 * progress), writing to one results database. Runs the database has as finished are
 * skipped, so running a sweep again resumes it. A run that cannot start (invalid configuration) or dies is recorded
 * with its reason. --shard i/N splits the grid across machines with no coordinator:
 * machine i takes runs k with k % N == i.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/presets.h"
#include "cli/signals.h"
#include "cli/sweep_view.h"
#include "selectivbench/selectivbench.h"

#define SWEEP_MAX_FILTERS 16

/* The flags of `sweep`. */
typedef struct sweep_flags {
    int dry_run, hashes, workers, threads, limit, quiet;
    const char *db, *results;
    const char *shard;
    const char *filters[SWEEP_MAX_FILTERS];
    int n_filters;
} sweep_flags;

static int parse_shard(const char *text, int *index, int *count)
{
    char *end;
    long i = strtol(text, &end, 10);
    if (end == text || *end != '/')
        return 0;
    long n = strtol(end + 1, &end, 10);
    if (*end != '\0' || n < 1 || i < 0 || i >= n)
        return 0;
    *index = (int)i;
    *count = (int)n;
    return 1;
}

int sb_cmd_sweep(int argc, char **argv)
{
    sweep_flags o = {.workers = 1, .results = "results"};
    const char *filter = NULL;
    sb_option opts[] = {
        {"dry_run", SB_OPT_SWITCH, &o.dry_run, 0, 1, NULL, NULL,
         "print one line per run (its train flags) and the count; run nothing", 0},
        {"hashes", SB_OPT_SWITCH, &o.hashes, 0, 1, NULL, NULL,
         "print each selected run's run hash and training hash and the count; run nothing", 0},
        {"workers", SB_OPT_INT, &o.workers, 1, 1024, NULL, "N", "runs at a time (default 1)", 0},
        {"threads", SB_OPT_INT, &o.threads, 0, 1024, NULL, "T",
         "threads per run (default: cores / workers)", 0},
        {"results", SB_OPT_STRING, &o.results, 0, 0, NULL, "DIR",
         "results folder (default ./results)", 0},
        {"db", SB_OPT_STRING, &o.db, 0, 0, NULL, "PATH",
         "results database (default DIR/" SB_RESULTS_DB_NAME ")", 0},
        {"limit", SB_OPT_INT, &o.limit, 0, 1e9, NULL, "K", "only the first K selected runs", 0},
        {"filter", SB_OPT_STRING, &filter, 0, 0, NULL, "KEY=VALUE",
         "only runs with this parameter value (repeat the flag for several)", 0},
        {"shard", SB_OPT_STRING, &o.shard, 0, 0, NULL, "I/N",
         "only runs k with k % N == I (one shard per machine)", 0},
        {"quiet", SB_OPT_SWITCH, &o.quiet, 0, 1, NULL, NULL, "no progress line", 0},
    };
    int n_opts = (int)(sizeof opts / sizeof *opts);
    /* --filter may repeat: collect every occurrence before the table parser sees them */
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--filter") == 0 && i + 1 < argc && o.n_filters < SWEEP_MAX_FILTERS)
            o.filters[o.n_filters++] = argv[i + 1];
        else if (strncmp(a, "--filter=", 9) == 0 && o.n_filters < SWEEP_MAX_FILTERS)
            o.filters[o.n_filters++] = a + 9;
    }
    const char *pos[1];
    int n_pos = 0;
    int rc = sb_cli_parse("sweep", "FILE.yaml [--dry_run] [--workers N] [--filter K=V] "
                                   "[--shard I/N] [--limit K] [--db PATH]",
                          opts, n_opts, argc, argv, pos, 1, &n_pos);
    if (rc >= 0)
        return rc;
    sb_error err = {0};
    if (n_pos != 1) {
        sb_error_set(&err, SB_ERR_INVALID, "name one sweep file: selectivbench sweep FILE.yaml");
        return sb_cli_fail("sweep", &err);
    }
    int shard_i = 0, shard_n = 1;
    if (o.shard != NULL && !parse_shard(o.shard, &shard_i, &shard_n)) {
        sb_error_set(&err, SB_ERR_INVALID, "--shard '%s': write I/N with 0 <= I < N", o.shard);
        return sb_cli_fail("sweep", &err);
    }
    /* a file, or a built-in preset such as tiny/task2 */
    sb_sweep *s = NULL;
    sb_status load = SB_ERR_IO;
    FILE *probe = fopen(pos[0], "rb");
    if (probe != NULL) {
        fclose(probe);
        load = sb_sweep_load(pos[0], &s, &err);
    } else {
        for (int i = 0; sb_presets[i].name != NULL; i++)
            if (strcmp(sb_presets[i].name, pos[0]) == 0)
                load = sb_sweep_load_text(pos[0], sb_presets[i].text, sb_presets[i].len, &s, &err);
        if (load == SB_ERR_IO)
            load = sb_sweep_load(pos[0], &s, &err); /* for its error message */
    }
    if (load != SB_OK)
        return sb_cli_fail("sweep", &err);
    /* every parameter must be a train flag: a key of the table or one of train's switches */
    if (sb_sweep_check_params(s, &err) != SB_OK) {
        sb_sweep_free(s);
        return sb_cli_fail("sweep", &err);
    }
    for (int f = 0; f < o.n_filters; f++) {
        const char *eq = strchr(o.filters[f], '=');
        char key[128] = "";
        if (eq != NULL)
            snprintf(key, sizeof key, "%.*s", (int)(eq - o.filters[f]), o.filters[f]);
        if (eq == NULL || !sb_sweep_has_param(s, key)) {
            sb_error_set(&err, SB_ERR_INVALID,
                         "--filter '%s': write KEY=VALUE with KEY one of the sweep's parameters",
                         o.filters[f]);
            sb_sweep_free(s);
            return sb_cli_fail("sweep", &err);
        }
    }

    /* the selected runs */
    int64_t total = sb_sweep_count(s);
    int64_t *runs = malloc((size_t)total * sizeof *runs);
    int64_t n_runs = 0;
    if (runs == NULL && total > 0) {
        sb_error_set(&err, SB_ERR_NOMEM, "out of memory listing %lld runs", (long long)total);
        sb_sweep_free(s);
        return sb_cli_fail("sweep", &err);
    }
    for (int64_t k = 0; k < total; k++) {
        if (k % shard_n != shard_i)
            continue;
        int ok = 1;
        for (int f = 0; f < o.n_filters && ok; f++) {
            char key[128];
            const char *eq = strchr(o.filters[f], '=');
            snprintf(key, sizeof key, "%.*s", (int)(eq - o.filters[f]), o.filters[f]);
            ok = sb_sweep_run_matches(s, k, key, eq + 1);
        }
        if (!ok)
            continue;
        if (o.limit > 0 && n_runs >= o.limit)
            break;
        runs[n_runs++] = k;
    }

    if (o.hashes) {
        for (int64_t r = 0; r < n_runs; r++) {
            sb_config *cfg = NULL;
            char run_hash[17], training_hash[17];
            if (sb_sweep_config(s, runs[r], &cfg, &err) != SB_OK) {
                printf("%lld refused: %s\n", (long long)runs[r], err.msg);
                continue;
            }
            sb_config_run_hash(cfg, run_hash);
            sb_config_training_hash(cfg, training_hash);
            sb_config_free(cfg);
            printf("%lld %s %s\n", (long long)runs[r], run_hash, training_hash);
        }
        printf("%lld runs\n", (long long)n_runs);
        free(runs);
        sb_sweep_free(s);
        return 0;
    }

    if (o.dry_run) {
        for (int64_t r = 0; r < n_runs; r++) {
            char **args = NULL;
            int n_args = 0;
            if (sb_sweep_run_args(s, runs[r], &args, &n_args, &err) != SB_OK) {
                free(runs);
                sb_sweep_free(s);
                return sb_cli_fail("sweep", &err);
            }
            printf("selectivbench train");
            for (int i = 0; i < n_args; i++)
                printf(" %s", args[i]);
            printf("\n");
            sb_sweep_args_free(args);
        }
        printf("%lld runs\n", (long long)n_runs);
        free(runs);
        sb_sweep_free(s);
        return 0;
    }

    char db[4096];
    if (o.db == NULL && sb_results_path(o.results, db, sizeof db, &err) != SB_OK) {
        free(runs);
        sb_sweep_free(s);
        return sb_cli_fail("sweep", &err);
    }
    /* a worker is this very program: /proc/self/exe is its image even if the file was
     * rebuilt or moved since it started */
    sb_sweep_run_options run = {.workers = o.workers, .threads = o.threads,
                                .results = o.results, .db = o.db != NULL ? o.db : db,
                                .worker_exe = "/proc/self/exe", .runs = runs,
                                .n_runs = n_runs, .cancel = sb_cli_stop_requested};
    /* SIGINT or SIGTERM: the workers checkpoint and stop, the sweep waits for them */
    sb_cli_signals_install("selectivbench sweep: stopping: the running runs stop after their "
                           "current update, with a checkpoint (a second signal quits at "
                           "once)\n");
    sb_cli_sweep_tally tally;
    sb_status st = sb_cli_sweep_run(s, pos[0], &run, o.quiet, &tally, &err);
    free(runs);
    sb_sweep_free(s);
    int sig = sb_cli_stop_signal();
    if (st == SB_ERR_RUNTIME && sig != 0) {
        fprintf(stderr, "selectivbench sweep: sweep interrupted: %d run%s interrupted; run the "
                        "same command to resume\n",
                tally.interrupted, tally.interrupted == 1 ? "" : "s");
        return sb_cli_signal_exit_code(sig);
    }
    if (st != SB_OK)
        return sb_cli_fail("sweep", &err);
    return tally.failed > 0 || tally.interrupted > 0 ? 1 : 0;
}
