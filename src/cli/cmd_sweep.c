/*
 * cmd_sweep.c - `selectivbench sweep FILE.yaml`: run a W&B grid offline.
 *
 * Every run of the grid is `selectivbench train <the file's command flags> --name=value...`
 * in a worker process of its own (so a crash loses one run, not the sweep), writing to one
 * results database. Runs the database has as finished are skipped, so running a sweep
 * again resumes it. A run that cannot start (invalid configuration) or dies is recorded
 * with its reason. --shard i/N splits the grid across machines with no coordinator:
 * machine i takes runs k with k % N == i.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "presets.h"
#include "run_options.h"
#include "selectivbench/results.h"
#include "selectivbench/sweep.h"
#include "selectivbench/timer.h"
#include "train_output.h"


/* The configuration of run k, parsed exactly as `train` would parse its flags. */
static sb_status sweep_run_config(const sb_sweep *s, int64_t k, sb_run_config *cfg, char ***argv_out,
                                  int *argc_out, sb_error *err)
{
    char **args = NULL;
    int n_args = 0;
    sb_status st = sb_sweep_run_args(s, k, &args, &n_args, err);
    if (st != SB_OK)
        return st;
    /* sb_options_parse reads argv[2..]: put two placeholders in front */
    char **argv = calloc((size_t)n_args + 3, sizeof *argv);
    if (argv == NULL) {
        sb_sweep_args_free(args);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory");
    }
    argv[0] = "selectivbench";
    argv[1] = "train";
    for (int i = 0; i < n_args; i++)
        argv[2 + i] = args[i];
    sb_run_flags rf;
    sb_option opts[SB_RUN_MAX_OPTIONS];
    int n = 0, help = 0, n_pos = 0;
    sb_run_options_add(&rf, opts, &n);
    const char *pos[1];
    st = sb_options_parse(opts, n, n_args + 2, argv, 2, pos, 0, &n_pos, &help, err);
    if (st == SB_OK)
        st = sb_run_options_finish(&rf, err);
    if (st == SB_OK)
        *cfg = rf.cfg;
    free(argv);
    if (st != SB_OK || argv_out == NULL) {
        sb_sweep_args_free(args);
        return st;
    }
    *argv_out = args;
    *argc_out = n_args;
    return SB_OK;
}

/* Records a run that never started (its configuration is refused) as failed. */
static void record_refused(sb_results *db, const sb_run_config *cfg, const char *reason)
{
    char hash[17];
    sb_run_config_hash(cfg, 0, hash);
    char *config = sb_run_config_json_string(cfg, 0);
    sb_run_info info = {.hash = hash, .config_json = config, .model = cfg->model,
                        .protocol = cfg->task.protocol == SB_PROTOCOL_CLEAN ? "clean" : "reference",
                        .params = -1, .state_size = -1, .flops_per_token = NAN,
                        .code_version = SB_VERSION};
    sb_error err = {0};
    int64_t id;
    sb_run_metrics m = sb_results_metrics_unknown();
    if (config != NULL && sb_results_run_begin(db, &info, &id, &err) == SB_OK)
        (void)sb_results_run_end(db, id, "failed", reason, &m, &err);
    free(config);
}

typedef struct worker {
    pid_t pid;
    int64_t run;
    char hash[17];
    double started;
} worker;

/* Starts `selectivbench train ARGS --results DIR --db DB --threads T --quiet` with its
 * output in DIR/logs/<hash>.log. The child dies with the sweep (PR_SET_PDEATHSIG), so a
 * killed sweep leaves no orphan writing to the database. */
static pid_t spawn_run(char **args, int n_args, const sb_sweep_opts *o, int threads, const char *hash)
{
    char log[4096], threads_s[16];
    snprintf(log, sizeof log, "%s/logs/%s.log", o->results, hash);
    snprintf(threads_s, sizeof threads_s, "%d", threads);
    const char *extra[] = {"--results", o->results, "--db", o->db, "--threads", threads_s, NULL};
    char **argv = calloc((size_t)n_args + 16, sizeof *argv);
    if (argv == NULL)
        return -1;
    int n = 0;
    argv[n++] = "selectivbench";
    argv[n++] = "train";
    for (int i = 0; i < n_args; i++)
        argv[n++] = args[i];
    for (int i = 0; extra[i] != NULL; i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    free(argv);
    return pid;
}

/* After a worker ends: a run its process left 'running' (killed, crashed) is failed. */
static void settle_run(sb_results *db, const worker *w, int wstatus, int *n_failed, int *n_done)
{
    sb_run_row row;
    int found = 0;
    sb_error err = {0};
    if (sb_results_get_run(db, w->hash, &row, &found, &err) != SB_OK)
        found = 0;
    if (found && strcmp(row.status, "running") == 0) {
        char reason[128];
        if (WIFSIGNALED(wstatus))
            snprintf(reason, sizeof reason, "the run's process was killed by signal %d",
                     WTERMSIG(wstatus));
        else
            snprintf(reason, sizeof reason, "the run's process exited with code %d without "
                                            "recording an end", WEXITSTATUS(wstatus));
        sb_run_metrics m = sb_results_metrics_unknown();
        (void)sb_results_run_end(db, row.id, "failed", reason, &m, &err);
        (*n_failed)++;
    } else if (found && strcmp(row.status, "finished") == 0) {
        (*n_done)++;
    } else {
        (*n_failed)++;
    }
    if (found)
        sb_results_run_row_clear(&row);
}

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

int sb_cli_sweep_execute(const sb_sweep *s, const char *label, const int64_t *runs, int64_t n_runs,
                         sb_sweep_opts *o_in, sb_sweep_tally *tally, sb_error *err)
{
    sb_sweep_opts o = *o_in;
    memset(tally, 0, sizeof *tally);
    int64_t total = sb_sweep_count(s);
    /* the results folder, its logs and its database */
    char db_path[4096], logs[4096];
    if (o.db == NULL) {
        snprintf(db_path, sizeof db_path, "%s/selectivbench.db", o.results);
        o.db = db_path;
    }
    snprintf(logs, sizeof logs, "%s/logs", o.results);
    sb_results *db = NULL;
    sb_status st = sb_cli_make_dir(o.results, err);
    if (st == SB_OK)
        st = sb_cli_make_dir(logs, err);
    if (st == SB_OK)
        st = sb_results_open(o.db, &db, err);
    if (st != SB_OK)
        return (int)st;
    int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    int threads = o.threads > 0 ? o.threads : (cores / o.workers > 0 ? cores / o.workers : 1);
    worker *w = calloc((size_t)o.workers, sizeof *w);
    int n_done = 0, n_failed = 0, n_skipped = 0, n_refused = 0, active = 0;
    int64_t next = 0;
    double t0 = sb_time_now();
    int tty = isatty(STDOUT_FILENO);
    while (w != NULL && (next < n_runs || active > 0)) {
        /* fill free workers */
        for (int i = 0; i < o.workers && next < n_runs; i++) {
            if (w[i].pid > 0)
                continue;
            int64_t k = runs[next++];
            sb_run_config cfg;
            char **args = NULL;
            int n_args = 0;
            sb_error rerr = {0};
            if (sweep_run_config(s, k, &cfg, &args, &n_args, &rerr) != SB_OK) {
                fprintf(stderr, "selectivbench sweep: run %lld: %s\n", (long long)k, rerr.msg);
                n_refused++;
                i--;
                continue;
            }
            char hash[17];
            sb_run_config_hash(&cfg, 0, hash);
            sb_run_row row;
            int found = 0;
            if (sb_results_get_run(db, hash, &row, &found, &rerr) == SB_OK && found) {
                int finished = strcmp(row.status, "finished") == 0;
                sb_results_run_row_clear(&row);
                if (finished) {
                    n_skipped++;
                    sb_sweep_args_free(args);
                    i--; /* this worker is still free */
                    continue;
                }
            }
            if (sb_run_config_check(&cfg, &rerr) != SB_OK) {
                record_refused(db, &cfg, rerr.msg);
                n_refused++;
                sb_sweep_args_free(args);
                i--;
                continue;
            }
            pid_t pid = spawn_run(args, n_args, &o, threads, hash);
            sb_sweep_args_free(args);
            if (pid < 0) {
                fprintf(stderr, "selectivbench sweep: error: cannot start a worker: %s\n",
                        strerror(errno));
                n_failed++;
                continue;
            }
            w[i].pid = pid;
            w[i].run = k;
            w[i].started = sb_time_now();
            memcpy(w[i].hash, hash, sizeof hash);
            active++;
        }
        if (active == 0)
            break;
        int wstatus = 0;
        pid_t pid = waitpid(-1, &wstatus, 0);
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (int i = 0; i < o.workers; i++)
            if (w[i].pid == pid) {
                settle_run(db, &w[i], wstatus, &n_failed, &n_done);
                w[i].pid = 0;
                active--;
            }
        if (!o.quiet) {
            int64_t finished = n_done + n_failed + n_skipped + n_refused;
            double el = sb_time_now() - t0;
            int ran = n_done + n_failed;
            double eta = ran > 0 ? el / ran * (double)(n_runs - finished) : 0.0;
            fprintf(stdout, "%ssweep: %lld/%lld runs (%d done, %d failed, %d skipped as finished, "
                            "%d refused), %d running, %.0f s, ETA %.0f s%s",
                    tty ? "\r" : "", (long long)finished, (long long)n_runs, n_done, n_failed,
                    n_skipped, n_refused, active, el, eta, tty ? "   " : "\n");
            fflush(stdout);
        }
    }
    if (!o.quiet && tty)
        printf("\n");
    printf("sweep %s: %lld runs selected of %lld: %d trained, %d failed, %d already finished, "
           "%d refused; database %s\n",
           label, (long long)n_runs, (long long)total, n_done, n_failed, n_skipped, n_refused,
           o.db);
    tally->done = n_done, tally->failed = n_failed, tally->skipped = n_skipped;
    tally->refused = n_refused;
    free(w);
    sb_results_close(db);
    return 0;
}

int sb_cmd_sweep(int argc, char **argv)
{
    sb_sweep_opts o = {.workers = 1, .results = "results"};
    const char *filter = NULL;
    sb_option opts[] = {
        {"dry_run", SB_OPT_SWITCH, &o.dry_run, 0, 1, NULL, NULL,
         "print one line per run (its train flags) and the count; run nothing", 0},
        {"workers", SB_OPT_INT, &o.workers, 1, 1024, NULL, "N", "runs at a time (default 1)", 0},
        {"threads", SB_OPT_INT, &o.threads, 0, 1024, NULL, "T",
         "threads per run (default: cores / workers)", 0},
        {"results", SB_OPT_STRING, &o.results, 0, 0, NULL, "DIR",
         "results folder (default ./results)", 0},
        {"db", SB_OPT_STRING, &o.db, 0, 0, NULL, "PATH",
         "results database (default DIR/selectivbench.db)", 0},
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
        if (strcmp(a, "--filter") == 0 && i + 1 < argc && o.n_filters < SB_SWEEP_MAX_FILTERS)
            o.filters[o.n_filters++] = argv[i + 1];
        else if (strncmp(a, "--filter=", 9) == 0 && o.n_filters < SB_SWEEP_MAX_FILTERS)
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
    for (int f = 0; f < o.n_filters; f++) {
        const char *eq = strchr(o.filters[f], '=');
        int known = 0;
        for (int p = 0; eq != NULL && p < s->n_params; p++)
            known |= strncmp(s->params[p].name, o.filters[f], (size_t)(eq - o.filters[f])) == 0 &&
                     strlen(s->params[p].name) == (size_t)(eq - o.filters[f]);
        if (!known) {
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
    for (int64_t k = 0; runs != NULL && k < total; k++) {
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

    sb_sweep_tally tally;
    int status = sb_cli_sweep_execute(s, pos[0], runs, n_runs, &o, &tally, &err);
    free(runs);
    sb_sweep_free(s);
    if (status == SB_ERR_INVALID || status == SB_ERR_IO || status == SB_ERR_NOMEM)
        return sb_cli_fail("sweep", &err);
    return tally.failed > 0 ? 1 : 0;
}
