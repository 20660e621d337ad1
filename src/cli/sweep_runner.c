/*
 * sweep_runner.c - the worker pool behind `sweep` and `demo` (see cli.h).
 *
 * Every selected run is `selectivbench train <flags>` in a process of its own (a crash
 * loses one run, not the sweep), its output in RESULTS/logs/<hash>.log. Each worker also
 * gets a pipe (SB_PROGRESS_FD_ENV) on which it reports step, loss, accuracy, speed and
 * ETA about twice a second; the sweep shows them as one live line per running run on a
 * terminal, or as plain lines once a minute otherwise, under a sweep-level line.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/run_options.h"
#include "exp/results.h"
#include "exp/run_store.h"
#include "exp/sweep.h"
#include "core/timer.h"
#include "cli/train_output.h"
#include "train/run_setup.h"

#define PLAIN_PROGRESS_EVERY_S 60.0 /* progress lines when stdout is not a terminal */
#define REFRESH_S 0.5               /* live display refresh */

/* Sets one train flag of a sweep (a fixed command flag or a parameter) by name: a key of
 * the table sets cfg; a CLI switch of train (--save_model, --mem_budget...) is checked and
 * left to the worker; anything else is an unknown flag. value NULL: the bare flag. */
static sb_status sweep_set(sb_option *opts, int n_opts, const char *name, const char *value,
                           sb_error *err)
{
    sb_option *o = sb_options_find(opts, n_opts, name);
    if (o == NULL)
        return sb_error_set(err, SB_ERR_INVALID, "unknown flag --%s; see --help for the list",
                            name);
    return sb_option_set(o, value, err);
}

/* Whether the sweep's train flag `name` is written alone. */
static int sweep_is_switch(sb_option *opts, int n_opts, const char *name)
{
    sb_option *o = sb_options_find(opts, n_opts, name);
    return o != NULL && sb_option_is_switch(o);
}

/* Sets the run's parameters (the values of run k) by name. */
static sb_status sweep_set_params(const sb_sweep *s, int64_t k, sb_option *opts, int n_opts,
                                  sb_error *err)
{
    for (int p = 0; p < s->n_params; p++) {
        const char *value = s->params[p].values[sb_sweep_value_index(s, k, p)];
        sb_status st = sweep_set(opts, n_opts, s->params[p].name, value, err);
        if (st != SB_OK)
            return st;
    }
    return SB_OK;
}

/* The configuration of run k, built from the sweep file's values by name in the order
 * `train` will read its flags: the fixed flags of `command`, the run's parameters where
 * ${args} stands (at the end without it). With argv_out, also the worker's flags. */
static sb_status sweep_run_config(const sb_sweep *s, int64_t k, sb_run_config *cfg, char ***argv_out,
                                  int *argc_out, sb_error *err)
{
    sb_run_flags rf;
    sb_option opts[SB_RUN_MAX_OPTIONS];
    int n = 0, has_args = 0;
    sb_run_options_add(&rf, opts, &n);
    sb_status st = SB_OK;
    for (int i = 0; i < s->n_command && st == SB_OK; i++) {
        const char *c = s->command[i];
        if (strcmp(c, "${args}") == 0) {
            has_args = 1;
            st = sweep_set_params(s, k, opts, n, err);
            continue;
        }
        if (strcmp(c, "${env}") == 0 || strcmp(c, "${interpreter}") == 0 ||
            strcmp(c, "${program}") == 0 || strcmp(c, "python") == 0 || strcmp(c, "python3") == 0)
            continue; /* the program here is `selectivbench train` */
        if (strncmp(c, "${", 2) == 0)
            return sb_error_set(err, SB_ERR_INVALID,
                                "sweep file '%s': command macro %s is not supported (use ${args})",
                                s->path, c);
        if (strncmp(c, "--", 2) != 0 || c[2] == '\0')
            return sb_error_set(err, SB_ERR_INVALID,
                                "sweep file '%s': command item '%s' is not a --flag", s->path, c);
        char name[128];
        const char *eq = strchr(c + 2, '=');
        size_t len = eq != NULL ? (size_t)(eq - (c + 2)) : strlen(c + 2);
        snprintf(name, sizeof name, "%.*s", (int)len, c + 2);
        const char *value = eq != NULL ? eq + 1 : NULL;
        if (value == NULL && !sweep_is_switch(opts, n, name) && i + 1 < s->n_command)
            value = s->command[++i];
        st = sweep_set(opts, n, name, value, err);
    }
    if (st == SB_OK && !has_args)
        st = sweep_set_params(s, k, opts, n, err);
    if (st != SB_OK)
        return st;
    *cfg = rf.cfg;
    if (argv_out != NULL)
        return sb_sweep_run_args(s, k, argv_out, argc_out, err);
    return SB_OK;
}

sb_status sb_cli_sweep_run_config(const sb_sweep *s, int64_t k, sb_run_config *cfg, sb_error *err)
{
    return sweep_run_config(s, k, cfg, NULL, NULL, err);
}

/* Records a run that never started (its configuration is refused) as failed. */
static void record_refused(sb_results *db, const sb_run_config *cfg, const char *reason)
{
    char hash[17];
    sb_run_config_hash(cfg, 0, hash);
    char *config = sb_run_config_json_string(cfg, 0);
    sb_run_info info = {.hash = hash, .config_json = config, .model = cfg->model,
                        .protocol = cfg->task.protocol == SB_PROTOCOL_CLEAN ? "clean" : "reference",
                        .params = -1, .state_size = -1, .flops_per_token = (double)NAN,
                        .code_version = SB_VERSION};
    sb_error err = {0};
    int64_t id;
    sb_run_metrics m = sb_results_metrics_unknown();
    if (config != NULL && sb_results_run_begin(db, &info, &id, &err) == SB_OK)
        (void)sb_results_run_end(db, id, "failed", reason, &m, &err);
    free(config);
}

typedef struct worker {
    pid_t pid; /* 0: free */
    int fd;    /* read end of the progress pipe, -1 when closed */
    int64_t run;
    char hash[17];
    char desc[96]; /* model, width, depth, lr, seed */
    double started, last_plain;
    char buf[512];
    size_t buf_len;
    /* the last progress record */
    int have;
    long long step, total;
    double loss, acc, tokens_per_s, eta_s, test_acc;
} worker;

typedef struct display {
    int tty, quiet, lines_drawn, columns;
    double last_draw;
} display;

static void worker_describe(worker *w, const sb_run_config *cfg)
{
    snprintf(w->desc, sizeof w->desc, "%s d%d L%d lr %g s%llu", cfg->model, cfg->feat_size,
             cfg->layers, cfg->lr, (unsigned long long)cfg->seed);
}

/* Starts `selectivbench train ARGS --results DIR --db DB --threads T` with its output in
 * DIR/logs/<hash>.log and the write end of a progress pipe. The child dies with the sweep
 * (PR_SET_PDEATHSIG), so a killed sweep leaves no orphan writing to the database. */
static pid_t spawn_run(char **args, int n_args, const sb_sweep_opts *o, int threads,
                       const char *hash, int *progress_fd)
{
    char log[4096], threads_s[16];
    sb_error log_err = {0};
    if (sb_run_store_log_path(o->results, hash, log, sizeof log, &log_err) != SB_OK) {
        errno = ENAMETOOLONG;
        return -1;
    }
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
    /* both ends close on exec: no other worker inherits them; the child reopens its own */
    int pipe_fds[2] = {-1, -1};
    if (pipe2(pipe_fds, O_CLOEXEC) != 0)
        pipe_fds[0] = pipe_fds[1] = -1; /* run without live progress */
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
        if (pipe_fds[1] >= 0 && fcntl(pipe_fds[1], F_SETFD, 0) == 0) {
            char fd_s[16];
            snprintf(fd_s, sizeof fd_s, "%d", pipe_fds[1]);
            setenv(SB_PROGRESS_FD_ENV, fd_s, 1);
        }
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    free(argv);
    if (pipe_fds[1] >= 0)
        close(pipe_fds[1]);
    if (pid < 0) {
        if (pipe_fds[0] >= 0)
            close(pipe_fds[0]);
        return -1;
    }
    if (pipe_fds[0] >= 0)
        fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
    *progress_fd = pipe_fds[0];
    return pid;
}

/* Reads what a worker wrote on its pipe and keeps the last complete record. At end of
 * file (the worker is exiting) the pipe is closed. */
static void worker_read(worker *w)
{
    while (w->fd >= 0) {
        ssize_t got = read(w->fd, w->buf + w->buf_len, sizeof w->buf - 1 - w->buf_len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
                close(w->fd);
                w->fd = -1;
            }
            return;
        }
        w->buf_len += (size_t)got;
        w->buf[w->buf_len] = '\0';
        char *line = w->buf, *nl;
        while ((nl = strchr(line, '\n')) != NULL) {
            *nl = '\0';
            long long step, total;
            double loss, acc, tps, eta, test_acc;
            if (sscanf(line, "P %lld %lld %lf %lf %lf %lf %lf", &step, &total, &loss, &acc, &tps,
                       &eta, &test_acc) == 7) {
                w->have = 1;
                w->step = step, w->total = total, w->loss = loss, w->acc = acc;
                w->tokens_per_s = tps, w->eta_s = eta, w->test_acc = test_acc;
            }
            line = nl + 1;
        }
        size_t left = w->buf_len - (size_t)(line - w->buf);
        memmove(w->buf, line, left);
        w->buf_len = left;
        if (w->buf_len >= sizeof w->buf - 1)
            w->buf_len = 0; /* a line too long to be a record: drop it */
    }
}

static void format_eta(double s, char *buf, size_t size)
{
    if (!(s >= 0) || s > 1e7)
        snprintf(buf, size, "?");
    else if (s >= 3600)
        snprintf(buf, size, "%d:%02d:%02d", (int)s / 3600, (int)s / 60 % 60, (int)s % 60);
    else
        snprintf(buf, size, "%d:%02d", (int)s / 60, (int)s % 60);
}

static void worker_line(const worker *w, char *out, size_t size)
{
    int n = snprintf(out, size, "  #%lld %s: ", (long long)w->run, w->desc);
    if (n < 0 || (size_t)n >= size)
        return;
    if (!w->have) {
        snprintf(out + n, size - (size_t)n, "starting");
        return;
    }
    char eta[32], test[32] = "";
    format_eta(w->eta_s, eta, sizeof eta);
    if (!isnan(w->test_acc))
        snprintf(test, sizeof test, " test %.3f", w->test_acc);
    char speed[32];
    if (w->tokens_per_s >= 1e4)
        snprintf(speed, sizeof speed, "%.0fk", w->tokens_per_s / 1e3);
    else
        snprintf(speed, sizeof speed, "%.0f", w->tokens_per_s);
    snprintf(out + n, size - (size_t)n, "step %lld/%lld loss %.3f acc %.3f%s %s tok/s ETA %s",
             w->step, w->total, w->loss, w->acc, test, speed, eta);
}

/* Erases the live block (the lines drawn below the last plain output). */
static void display_clear(display *d)
{
    if (d->lines_drawn > 0) {
        printf("\033[%dA\r\033[J", d->lines_drawn);
        d->lines_drawn = 0;
    }
}

/* Prints a line above the live block. */
static void display_message(display *d, const char *line)
{
    if (d->quiet)
        return;
    if (d->tty)
        display_clear(d);
    printf("%s\n", line);
    fflush(stdout);
    d->last_draw = 0; /* redraw at once */
}

static void sweep_line(char *out, size_t size, int64_t n_runs, int n_done, int n_failed,
                       int n_skipped, int n_refused, int active, double t0)
{
    int64_t finished = n_done + n_failed + n_skipped + n_refused;
    double el = sb_time_now() - t0;
    int ran = n_done + n_failed;
    char eta[32], elapsed[32];
    format_eta(ran > 0 ? el / ran * (double)(n_runs - finished) : -1.0, eta, sizeof eta);
    format_eta(el, elapsed, sizeof elapsed);
    snprintf(out, size,
             "sweep: %lld/%lld runs (%d done, %d failed, %d skipped, %d refused), %d running, "
             "%s, ETA %s",
             (long long)finished, (long long)n_runs, n_done, n_failed, n_skipped, n_refused,
             active, elapsed, eta);
}

/* The live block on a terminal: one line per running run, then the sweep line. Lines are
 * cut to the terminal's width so that moving the cursor up over them stays exact. */
static void display_draw(display *d, const worker *w, int n_workers, const char *sweep)
{
    if (d->quiet || !d->tty)
        return;
    double now = sb_time_now();
    if (now - d->last_draw < REFRESH_S)
        return;
    d->last_draw = now;
    display_clear(d);
    char line[512];
    int width = d->columns > 1 ? d->columns - 1 : 79;
    for (int i = 0; i < n_workers; i++) {
        if (w[i].pid <= 0)
            continue;
        worker_line(&w[i], line, sizeof line);
        printf("%.*s\n", width, line);
        d->lines_drawn++;
    }
    printf("%.*s\n", width, sweep);
    d->lines_drawn++;
    fflush(stdout);
}

/* After a worker ends: a run its process left 'running' (killed, crashed) is failed.
 * Writes a one-line account of the run into `msg`. */
static void settle_run(sb_results *db, const worker *w, int wstatus, int *n_failed, int *n_done,
                       char *msg, size_t msg_size)
{
    sb_run_row row;
    int found = 0;
    sb_error err = {0};
    double took = sb_time_now() - w->started;
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
        snprintf(msg, msg_size, "#%lld [%s] %s: failed: %s (%.0f s)", (long long)w->run,
                 w->hash, w->desc, reason, took);
    } else if (found && strcmp(row.status, "finished") == 0) {
        (*n_done)++;
        snprintf(msg, msg_size, "#%lld [%s] %s: finished, test acc %.4f (%.0f s)",
                 (long long)w->run, w->hash, w->desc, row.metrics.test_acc, took);
    } else {
        (*n_failed)++;
        snprintf(msg, msg_size, "#%lld [%s] %s: %s%s%s (%.0f s)", (long long)w->run, w->hash,
                 w->desc, found ? row.status : "not recorded (see its log)",
                 found && row.reason != NULL ? ": " : "",
                 found && row.reason != NULL ? row.reason : "", took);
    }
    if (found)
        sb_results_run_row_clear(&row);
}

/* Reaps the worker in slot i and prints how its run ended. */
static void finish_worker(sb_results *db, worker *w, int wstatus, display *d, int *n_failed,
                          int *n_done)
{
    char msg[1024];
    worker_read(w); /* the last records, and close the pipe */
    if (w->fd >= 0)
        close(w->fd);
    settle_run(db, w, wstatus, n_failed, n_done, msg, sizeof msg);
    display_message(d, msg);
    w->pid = 0;
    w->fd = -1;
}

int sb_cli_sweep_execute(const sb_sweep *s, const char *label, const int64_t *runs, int64_t n_runs,
                         sb_sweep_opts *o_in, sb_sweep_tally *tally, sb_error *err)
{
    sb_sweep_opts o = *o_in;
    memset(tally, 0, sizeof *tally);
    int64_t total = sb_sweep_count(s);
    /* the results folder, its logs and its database */
    char db_path[4096], logs[4096];
    sb_status st = SB_OK;
    if (o.db == NULL) {
        st = sb_run_store_db_path(o.results, db_path, sizeof db_path, err);
        o.db = db_path;
    }
    sb_results *db = NULL;
    if (st == SB_OK)
        st = sb_run_store_log_dir(o.results, logs, sizeof logs, 1, err);
    if (st == SB_OK)
        st = sb_results_open(o.db, &db, err);
    if (st != SB_OK)
        return (int)st;
    int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    int threads = o.threads > 0 ? o.threads : (cores / o.workers > 0 ? cores / o.workers : 1);
    worker *w = calloc((size_t)o.workers, sizeof *w);
    struct pollfd *pfd = calloc((size_t)o.workers, sizeof *pfd);
    int *slot_of = calloc((size_t)o.workers, sizeof *slot_of);
    display d = {.tty = isatty(STDOUT_FILENO), .quiet = o.quiet, .columns = 80};
    struct winsize ws;
    if (d.tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20)
        d.columns = ws.ws_col;
    int n_done = 0, n_failed = 0, n_skipped = 0, n_refused = 0, active = 0;
    int64_t next = 0;
    double t0 = sb_time_now(), last_sweep_plain = 0;
    char line[1024];
    int ok = w != NULL && pfd != NULL && slot_of != NULL;
    while (ok && (next < n_runs || active > 0)) {
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
                if (d.tty)
                    display_clear(&d);
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
            int fd = -1;
            pid_t pid = spawn_run(args, n_args, &o, threads, hash, &fd);
            sb_sweep_args_free(args);
            if (pid < 0) {
                if (d.tty)
                    display_clear(&d);
                fprintf(stderr, "selectivbench sweep: error: cannot start a worker: %s\n",
                        strerror(errno));
                n_failed++;
                continue;
            }
            memset(&w[i], 0, sizeof w[i]);
            w[i].pid = pid;
            w[i].fd = fd;
            w[i].run = k;
            w[i].started = w[i].last_plain = sb_time_now();
            w[i].test_acc = (double)NAN;
            memcpy(w[i].hash, hash, sizeof hash);
            worker_describe(&w[i], &cfg);
            active++;
        }
        if (active == 0)
            break;

        /* wait for progress records or the refresh period */
        int n_fds = 0;
        for (int i = 0; i < o.workers; i++)
            if (w[i].pid > 0 && w[i].fd >= 0) {
                pfd[n_fds].fd = w[i].fd;
                pfd[n_fds].events = POLLIN;
                slot_of[n_fds++] = i;
            }
        if (poll(pfd, (nfds_t)n_fds, (int)(REFRESH_S * 1000)) > 0)
            for (int f = 0; f < n_fds; f++)
                if (pfd[f].revents != 0)
                    worker_read(&w[slot_of[f]]);

        /* reap ended workers */
        for (;;) {
            int wstatus = 0;
            pid_t pid = waitpid(-1, &wstatus, WNOHANG);
            if (pid <= 0)
                break;
            for (int i = 0; i < o.workers; i++)
                if (w[i].pid == pid) {
                    finish_worker(db, &w[i], wstatus, &d, &n_failed, &n_done);
                    active--;
                    if (!d.tty && !d.quiet) {
                        sweep_line(line, sizeof line, n_runs, n_done, n_failed, n_skipped,
                                   n_refused, active, t0);
                        printf("%s\n", line);
                        fflush(stdout);
                        last_sweep_plain = sb_time_now();
                    }
                }
        }

        /* progress: the live block, or plain lines now and then */
        sweep_line(line, sizeof line, n_runs, n_done, n_failed, n_skipped, n_refused, active, t0);
        if (d.tty) {
            display_draw(&d, w, o.workers, line);
        } else if (!d.quiet) {
            double now = sb_time_now();
            for (int i = 0; i < o.workers; i++) {
                if (w[i].pid <= 0 || !w[i].have || now - w[i].last_plain < PLAIN_PROGRESS_EVERY_S)
                    continue;
                char wl[1024];
                worker_line(&w[i], wl, sizeof wl);
                printf("%s\n", wl + 2);
                w[i].last_plain = now;
            }
            if (now - last_sweep_plain >= PLAIN_PROGRESS_EVERY_S) {
                printf("%s\n", line);
                last_sweep_plain = now;
            }
            fflush(stdout);
        }
    }
    if (d.tty)
        display_clear(&d);
    if (!ok)
        fprintf(stderr, "selectivbench sweep: error: out of memory\n");
    printf("sweep %s: %lld runs selected of %lld: %d trained, %d failed, %d already finished, "
           "%d refused; database %s\n",
           label, (long long)n_runs, (long long)total, n_done, n_failed, n_skipped, n_refused,
           o.db);
    tally->done = n_done, tally->failed = n_failed, tally->skipped = n_skipped;
    tally->refused = n_refused;
    free(w);
    free(pfd);
    free(slot_of);
    sb_results_close(db);
    return ok ? 0 : SB_ERR_NOMEM;
}
