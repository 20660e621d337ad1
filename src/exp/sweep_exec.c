/*
 * sweep_exec.c - the worker pool behind `sweep` and `demo` (see sweep_exec.h).
 *
 * One loop: start runs on free workers, wait up to half a second for progress records on
 * the workers' pipes, reap the workers that ended and settle their runs from the
 * database, tell the caller. Nothing here writes to the terminal; a worker's output goes
 * to its log file.
 */
#include "exp/sweep_exec.h"
#include "core/cpus.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h> /* sscanf */
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/config.h"
#include "core/suggest.h"
#include "core/timer.h"
#include "exp/run_store.h"
#include "train/run_setup.h"

#define POLL_MS 500      /* the longest wait for progress before the next tick */
#define LOCK_RETRY_S 1.0 /* how often the locks of the runs put aside are looked at */

/* ---- a run's configuration ------------------------------------------------------------ */

/* The key of train flag `name`: a key up to train's group (another command's setting is
 * not one), or NULL. */
static const sb_config_key *train_key(const char *name)
{
    const sb_config_key *key = sb_config_find(name);
    return key != NULL && key->group <= SB_KEY_GROUP_TRAIN ? key : NULL;
}

/* Whether the train flag `name` is written alone (a switch key). */
static int flag_is_switch(const char *name)
{
    const sb_config_key *key = train_key(name);
    return key != NULL && key->kind == SB_KEY_SWITCH;
}

/* The train flag (a key) closest to name, a typo; NULL when none is. */
static const char *closest_train_flag(const char *name)
{
    sb_suggest near;
    sb_suggest_init(&near, name);
    for (int i = 0; i < sb_config_key_count(); i++)
        if (sb_config_key_at(i)->group <= SB_KEY_GROUP_TRAIN)
            sb_suggest_offer(&near, sb_config_key_at(i)->name);
    return sb_suggest_result(&near);
}

/* The error for a flag that is not a key: the closest key when one is near (a typo), else
 * where the list is. */
static sb_status unknown_train_flag(const char *name, sb_error *err)
{
    const char *hint = closest_train_flag(name);
    if (hint != NULL)
        return sb_error_set(err, SB_ERR_INVALID, "unknown flag --%s; did you mean --%s?", name,
                            hint);
    return sb_error_set(err, SB_ERR_INVALID,
                        "unknown flag --%s; the train command's --help lists them", name);
}

/* Sets one train flag of a sweep by name: every flag is a key up to train's own (a runtime
 * key, such as --save_model, is checked here and reaches the worker with the run's flags);
 * anything else, another command's setting included, is an unknown flag. value NULL: the
 * bare flag. */
static sb_status set_flag(sb_run_config *cfg, const char *name, const char *value, sb_error *err)
{
    const sb_config_key *key = train_key(name);
    if (key == NULL)
        return unknown_train_flag(name, err);
    if (value == NULL && key->kind != SB_KEY_SWITCH)
        return sb_error_set(err, SB_ERR_INVALID, "--%s needs a value", name);
    return sb_config_set(cfg, name, value != NULL ? value : "True", err);
}

/* Sets the parameters of run k (its values in the grid) by name. */
static sb_status set_params(const sb_sweep *s, int64_t k, sb_run_config *cfg, sb_error *err)
{
    for (int p = 0; p < s->n_params; p++) {
        const char *value = s->params[p].values[sb_sweep_value_index(s, k, p)];
        sb_status st = set_flag(cfg, s->params[p].name, value, err);
        if (st != SB_OK)
            return st;
    }
    return SB_OK;
}

sb_status sb_sweep_run_config(const sb_sweep *s, int64_t k, sb_run_config *cfg_out, sb_error *err)
{
    sb_run_config cfg = sb_run_config_default();
    int has_args = 0;
    sb_status st = SB_OK;
    for (int i = 0; i < s->n_command && st == SB_OK; i++) {
        const char *item = s->command[i];
        if (strcmp(item, "${args}") == 0) {
            has_args = 1;
            st = set_params(s, k, &cfg, err);
            continue;
        }
        if (strcmp(item, "${env}") == 0 || strcmp(item, "${interpreter}") == 0 ||
            strcmp(item, "${program}") == 0 || strcmp(item, "python") == 0 ||
            strcmp(item, "python3") == 0)
            continue; /* the program here is `selectivbench train` */
        if (strncmp(item, "${", 2) == 0)
            return sb_error_set(err, SB_ERR_INVALID,
                                "sweep file '%s': command macro %s is not supported (use ${args})",
                                s->path, item);
        if (strncmp(item, "--", 2) != 0 || item[2] == '\0')
            return sb_error_set(err, SB_ERR_INVALID,
                                "sweep file '%s': command item '%s' is not a --flag", s->path,
                                item);
        /* --name=value, or --name followed by its value unless it is a switch */
        char name[128];
        const char *eq = strchr(item + 2, '=');
        size_t len = eq != NULL ? (size_t)(eq - (item + 2)) : strlen(item + 2);
        if (len >= sizeof name)
            return sb_error_set(err, SB_ERR_INVALID, "unknown flag '%.40s...'", item);
        memcpy(name, item + 2, len);
        name[len] = '\0';
        const char *value = eq != NULL ? eq + 1 : NULL;
        if (value == NULL && !flag_is_switch(name) && i + 1 < s->n_command)
            value = s->command[++i];
        st = set_flag(&cfg, name, value, err);
    }
    if (st == SB_OK && !has_args)
        st = set_params(s, k, &cfg, err);
    if (st == SB_OK)
        *cfg_out = cfg;
    return st;
}

sb_status sb_sweep_run_validate(const sb_sweep *s, int64_t k, sb_run_config *cfg, int *built,
                                sb_error *err)
{
    *built = 0;
    sb_status st = sb_sweep_run_config(s, k, cfg, err);
    if (st != SB_OK)
        return st;
    *built = 1;
    return sb_run_config_check(cfg, err);
}

sb_status sb_sweep_selected_run(const sb_sweep *s, const sb_sweep_selection *sel, int64_t i,
                                int64_t *k, sb_run_config *cfg, sb_error *refused, sb_error *err)
{
    *k = sb_sweep_selection_run(sel, i);
    memset(refused, 0, sizeof *refused);
    int built = 0;
    if (sb_sweep_run_validate(s, *k, cfg, &built, refused) == SB_OK)
        return SB_OK;
    if (refused->status == SB_ERR_NOMEM)
        return sb_error_set(err, SB_ERR_NOMEM, "%s", refused->msg);
    return refused->status;
}

sb_status sb_sweep_check_params(const sb_sweep *s, sb_error *err)
{
    for (int p = 0; p < s->n_params; p++) {
        const char *name = s->params[p].name;
        if (train_key(name) != NULL)
            continue;
        const char *hint = closest_train_flag(name);
        if (hint != NULL)
            return sb_error_set(err, SB_ERR_INVALID,
                                "sweep file '%s': parameter '%s' is not a train flag; did you "
                                "mean '%s'?",
                                s->path, name, hint);
        return sb_error_set(err, SB_ERR_INVALID,
                            "sweep file '%s': parameter '%s' is not a train flag "
                            "(the train command's --help lists them)",
                            s->path, name);
    }
    return SB_OK;
}

/* ---- the progress pipe ------------------------------------------------------------------ */

int sb_sweep_progress_parse(const char *line, sb_sweep_progress *p)
{
    sb_sweep_progress r;
    if (sscanf(line, "P %" SCNd64 " %" SCNd64 " %lf %lf %lf %lf %lf", &r.step, &r.total_steps,
               &r.loss, &r.acc, &r.tokens_per_s, &r.eta_s, &r.test_acc) != 7)
        return 0;
    *p = r;
    return 1;
}

/* ---- the pool ------------------------------------------------------------------------- */

/* The one name table of the outcomes (a new outcome: a value in the public enum, a line here). */
static const char *const outcome_names[] = {
    [SB_SWEEP_NO_OUTCOME] = "",       [SB_SWEEP_DONE] = "done",
    [SB_SWEEP_FAILED] = "failed",     [SB_SWEEP_DIVERGED] = "diverged",
    [SB_SWEEP_SKIPPED] = "skipped",   [SB_SWEEP_REFUSED] = "refused",
    [SB_SWEEP_EXCLUDED] = "excluded", [SB_SWEEP_INTERRUPTED] = "interrupted",
};

const char *sb_sweep_outcome_name(sb_sweep_outcome outcome)
{
    return outcome > SB_SWEEP_NO_OUTCOME && outcome <= SB_SWEEP_INTERRUPTED ? outcome_names[outcome]
                                                                            : "";
}

typedef struct worker {
    pid_t pid; /* 0: the slot is free */
    int fd;    /* read end of the progress pipe; -1 when closed or never opened */
    int64_t run;
    char hash[17];
    sb_run_config cfg;
    double started;
    char buf[512]; /* bytes read from the pipe, up to an incomplete line */
    size_t buf_len;
    sb_sweep_progress last;
} worker;

typedef struct pool {
    const sb_sweep_exec_opts *opts;
    const char *db_path;
    sb_results *db;
    int threads;   /* per worker */
    worker *slots; /* opts->workers of them */
    sb_sweep_tally tally;
    int running;
    int64_t n_runs;
    double t0;
    int cancelled;    /* opts->cancel said stop: the signal sent to the workers */
    int64_t *waiting; /* [n_runs] runs another process was training, to take again */
    int64_t n_waiting;
    double next_lock_look; /* when to look at their locks again */
} pool;

/* Sends u (about its run, of configuration cfg when not NULL) with the sweep-level fields
 * filled in; an update other than ENDED carries no outcome. */
static void emit(pool *p, sb_sweep_update *u, const sb_run_config *cfg)
{
    if (p->opts->on_update == NULL)
        return;
    if (u->kind != SB_SWEEP_UPDATE_ENDED) {
        u->outcome = SB_SWEEP_NO_OUTCOME;
        u->reason = NULL;
        u->test_acc = (double)NAN;
        u->started = u->recorded = u->exit_code = u->term_signal = 0;
    }
    sb_config config; /* the public handle, for the duration of the call */
    if (cfg != NULL) {
        config.run = *cfg;
        u->config = &config;
    }
    u->done = p->tally.done;
    u->failed = p->tally.failed;
    u->skipped = p->tally.skipped;
    u->refused = p->tally.refused;
    u->excluded = p->tally.excluded;
    u->interrupted = p->tally.interrupted;
    u->running = p->running;
    u->n_runs = p->n_runs;
    u->sweep_elapsed_s = sb_time_now() - p->t0;
    p->opts->on_update(u, p->opts->user);
}

/* An update about run k (no worker yet; TICK: k is -1). */
static sb_sweep_update run_update(sb_sweep_update_kind kind, int64_t k)
{
    sb_sweep_update u;
    memset(&u, 0, sizeof u);
    u.kind = kind;
    u.run = k;
    u.slot = -1;
    u.hash = "";
    u.exit_code = -1;
    u.test_acc = (double)NAN;
    u.last_test_acc = (double)NAN;
    return u;
}

/* An update about the run of worker slot i: its last progress record. */
static sb_sweep_update worker_update(const pool *p, sb_sweep_update_kind kind, int i)
{
    const worker *w = &p->slots[i];
    sb_sweep_update u = run_update(kind, w->run);
    u.slot = i;
    u.hash = w->hash;
    u.started = 1;
    u.run_elapsed_s = sb_time_now() - w->started;
    u.step = w->last.step;
    u.total_steps = w->last.total_steps;
    u.loss = w->last.loss;
    u.acc = w->last.acc;
    u.tokens_per_s = w->last.tokens_per_s;
    u.eta_s = w->last.eta_s;
    u.last_test_acc = w->last.test_acc;
    return u;
}

/* Writes v in decimal into out (at least 24 bytes). */
static void format_int(long long v, char *out)
{
    char digits[24];
    int n = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        digits[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u > 0);
    if (v < 0)
        *out++ = '-';
    while (n > 0)
        *out++ = digits[--n];
    *out = '\0';
}

/* Records a run that never started (its configuration is refused) as failed with the
 * reason. Returns whether it was recorded. */
static int record_refused(sb_results *db, const sb_run_config *cfg, const char *hash,
                          const char *reason)
{
    char *config = sb_run_config_json_string(cfg, 0);
    sb_run_info info = {.hash = hash,
                        .config_json = config,
                        .model = cfg->model,
                        .protocol = cfg->task.protocol == SB_PROTOCOL_CLEAN ? "clean" : "reference",
                        .params = -1,
                        .state_size = -1,
                        .flops_per_token = (double)NAN,
                        .code_version = SB_VERSION};
    sb_error err = {0};
    int64_t id;
    sb_run_metrics m = sb_results_metrics_unknown();
    int recorded = config != NULL && sb_results_run_begin(db, &info, &id, &err) == SB_OK &&
                   sb_results_run_end(db, id, SB_RUN_FAILED, reason, &m, &err) == SB_OK;
    free(config);
    return recorded;
}

extern char **environ;

/* The environment of a worker: ours without a stale progress variable, plus
 * SB_PROGRESS_FD_ENV=fd when fd >= 0. Built before fork, so that the child only calls
 * async-signal-safe functions. *text holds the added entry (free both). */
static char **worker_environment(int fd, char **text)
{
    size_t n = 0;
    while (environ[n] != NULL)
        n++;
    char **env = calloc(n + 2, sizeof *env);
    const char *prefix = SB_PROGRESS_FD_ENV "=";
    size_t prefix_len = strlen(prefix);
    *text = NULL;
    if (env == NULL)
        return NULL;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], prefix, prefix_len) != 0)
            env[m++] = environ[i];
    if (fd >= 0) {
        *text = malloc(prefix_len + 24);
        if (*text == NULL) {
            free(env);
            return NULL;
        }
        memcpy(*text, prefix, prefix_len);
        format_int(fd, *text + prefix_len);
        env[m++] = *text;
    }
    env[m] = NULL;
    return env;
}

/* Starts `<worker_exe> train ARGS --results DIR --db DB --threads T [--checkpoint_every M]
 * [--resume]` with its output in DIR/logs/<hash>.log and the write end of a progress pipe. The
 * child dies with us (PR_SET_PDEATHSIG). Returns the pid, or -1 with errno set. */
static pid_t spawn_run(const pool *p, char **args, int n_args, const char *hash, int resume,
                       int *progress_fd)
{
    char log[4096], threads_text[24];
    sb_error path_err = {0};
    if (sb_run_store_log_path(p->opts->results, hash, log, sizeof log, &path_err) != SB_OK) {
        errno = ENAMETOOLONG;
        return -1;
    }
    format_int(p->threads, threads_text);
    char every_text[64]; /* --checkpoint_every in minutes, exactly */
    snprintf(every_text, sizeof every_text, "--checkpoint_every=%.17g",
             p->opts->checkpoint_every_s / 60.0);
    const char *extra[9] = {"--results", p->opts->results, "--db",
                            p->db_path,  "--threads",      threads_text};
    int n_extra = 6;
    if (p->opts->checkpoint_every_s > 0)
        extra[n_extra++] = every_text;
    if (resume)
        extra[n_extra++] = "--resume";
    extra[n_extra] = NULL;
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
    /* both ends close on exec: no other worker inherits them; the child keeps its own */
    int pipe_fds[2] = {-1, -1};
    if (pipe2(pipe_fds, O_CLOEXEC) != 0)
        pipe_fds[0] = pipe_fds[1] = -1; /* run without live progress */
    char *env_text = NULL;
    char **env = worker_environment(pipe_fds[1], &env_text);
    if (env == NULL) {
        free(argv);
        for (int e = 0; e < 2; e++)
            if (pipe_fds[e] >= 0)
                close(pipe_fds[e]);
        errno = ENOMEM;
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) /* the sweep died before prctl */
            _exit(127);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        if (fd < 0) /* never write to the sweep's terminal */
            fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
        if (pipe_fds[1] >= 0)
            fcntl(pipe_fds[1], F_SETFD, 0);
        execve(p->opts->worker_exe, argv, env);
        _exit(127);
    }
    int fork_errno = errno;
    free(argv);
    free(env);
    free(env_text);
    if (pipe_fds[1] >= 0)
        close(pipe_fds[1]);
    if (pid < 0) {
        if (pipe_fds[0] >= 0)
            close(pipe_fds[0]);
        errno = fork_errno;
        return -1;
    }
    if (pipe_fds[0] >= 0)
        fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
    *progress_fd = pipe_fds[0];
    return pid;
}

/* Reads what worker i wrote on its pipe and keeps the last complete record; tells the
 * caller when there was one. At end of file (the worker is exiting) the pipe is closed. */
static void worker_read(pool *p, int i)
{
    worker *w = &p->slots[i];
    int fresh = 0;
    while (w->fd >= 0) {
        ssize_t got = read(w->fd, w->buf + w->buf_len, sizeof w->buf - 1 - w->buf_len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
                close(w->fd);
                w->fd = -1;
            }
            break;
        }
        w->buf_len += (size_t)got;
        w->buf[w->buf_len] = '\0';
        char *line = w->buf, *nl;
        while ((nl = strchr(line, '\n')) != NULL) {
            *nl = '\0';
            fresh |= sb_sweep_progress_parse(line, &w->last);
            line = nl + 1;
        }
        size_t left = w->buf_len - (size_t)(line - w->buf);
        memmove(w->buf, line, left);
        w->buf_len = left;
        if (w->buf_len >= sizeof w->buf - 1)
            w->buf_len = 0; /* a line too long to be a record: drop it */
    }
    if (fresh) {
        sb_sweep_update u = worker_update(p, SB_SWEEP_UPDATE_PROGRESS, i);
        emit(p, &u, &p->slots[i].cfg);
    }
}

/* Who holds the lock of run hash (0: nobody; -1: a process that cannot be named). A lock
 * file that cannot be read counts as free: the worker then finds out for itself. */
static long lock_holder(const pool *p, const char *hash)
{
    char path[4096];
    sb_error err = {0};
    long holder = 0;
    if (sb_run_store_lock_path(p->db_path, hash, path, sizeof path, 0, &err) != SB_OK ||
        sb_run_lock_holder(path, &holder, &err) != SB_OK)
        return 0;
    return holder;
}

/* Puts run k aside because process `holder` trains it, to be taken again when its lock is
 * free; tells the caller (slot: the worker that found it locked, or -1). */
static void wait_for_lock(pool *p, int64_t k, int slot, const char *hash, const sb_run_config *cfg,
                          long holder)
{
    p->waiting[p->n_waiting++] = k;
    sb_sweep_update u = slot >= 0 ? worker_update(p, SB_SWEEP_UPDATE_WAITING, slot)
                                  : run_update(SB_SWEEP_UPDATE_WAITING, k);
    u.hash = hash;
    u.locked_by = holder;
    emit(p, &u, cfg);
}

/* Whether a worker that ended without recording its end was stopped by a signal to stop (it
 * was interrupted) rather than by a crash: killed by SIGINT or SIGTERM (a second signal
 * exits at once), or exited with the codes of a stop. */
static int worker_was_stopped(int wstatus)
{
    if (WIFSIGNALED(wstatus))
        return WTERMSIG(wstatus) == SIGINT || WTERMSIG(wstatus) == SIGTERM;
    return WIFEXITED(wstatus) && (WEXITSTATUS(wstatus) == SB_SWEEP_EXIT_INTERRUPTED ||
                                  WEXITSTATUS(wstatus) == SB_SWEEP_EXIT_TEMPFAIL);
}

/* Settles a run that a dead worker left `running` (its lock is free, so no process trains
 * it): interrupted when the worker was stopped, failed otherwise, with the reason in
 * *reason. Returns the outcome. */
static sb_sweep_outcome settle_running(pool *p, int64_t run_id, int wstatus, sb_error *reason)
{
    int stopped = worker_was_stopped(wstatus);
    if (WIFSIGNALED(wstatus))
        sb_error_set(reason, SB_ERR_RUNTIME, "the run's process was %s by signal %d%s",
                     stopped ? "stopped" : "killed", WTERMSIG(wstatus),
                     stopped ? " before it recorded its end; it continues from its last "
                               "checkpoint"
                             : "");
    else
        sb_error_set(reason, SB_ERR_RUNTIME,
                     "the run's process exited with code %d without recording an end%s",
                     WEXITSTATUS(wstatus),
                     stopped ? "; it continues from its last checkpoint" : "");
    sb_run_metrics unknown = sb_results_metrics_unknown();
    sb_error err = {0};
    (void)sb_results_run_end(p->db, run_id, stopped ? SB_RUN_INTERRUPTED : SB_RUN_FAILED,
                             reason->msg, &unknown, &err);
    return stopped ? SB_SWEEP_INTERRUPTED : SB_SWEEP_FAILED;
}

/* The outcome of a run as its row records it. exit_code: the worker's (-1: killed); a run
 * found finished after its worker exited with another code than 0 was finished by another
 * process (the worker found it locked). */
static sb_sweep_outcome outcome_of_row(const sb_run_row *row, int exit_code)
{
    switch (row->r.status) {
    case SB_RUN_FINISHED: return exit_code == 0 ? SB_SWEEP_DONE : SB_SWEEP_SKIPPED;
    case SB_RUN_DIVERGED: return SB_SWEEP_DIVERGED;
    case SB_RUN_INTERRUPTED: return SB_SWEEP_INTERRUPTED;
    default: return SB_SWEEP_FAILED;
    }
}

/* Counts outcome o in the tally. */
static void tally_add(pool *p, sb_sweep_outcome o)
{
    switch (o) {
    case SB_SWEEP_DONE: p->tally.done++; break;
    case SB_SWEEP_SKIPPED: p->tally.skipped++; break;
    case SB_SWEEP_REFUSED: p->tally.refused++; break;
    case SB_SWEEP_EXCLUDED: p->tally.excluded++; break;
    case SB_SWEEP_INTERRUPTED: p->tally.interrupted++; break;
    case SB_SWEEP_NO_OUTCOME: /* not an ended run's: counted as failed, never silently */
    case SB_SWEEP_FAILED:
    case SB_SWEEP_DIVERGED: p->tally.failed++; break;
    }
}

/* After worker i's process ended (wait status wstatus): when another process holds the
 * run's lock now (the worker found it locked), puts the run aside; otherwise settles it
 * from the database (a run left `running` is recorded as interrupted or failed), counts
 * it and tells the caller. Frees the slot. */
static void finish_worker(pool *p, int i, int wstatus)
{
    worker *w = &p->slots[i];
    worker_read(p, i); /* the last records, and close the pipe */
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
    w->pid = 0;
    p->running--;
    long holder = lock_holder(p, w->hash);
    if (holder != 0) {
        wait_for_lock(p, w->run, i, w->hash, &w->cfg, holder);
        return;
    }
    sb_sweep_update ev = worker_update(p, SB_SWEEP_UPDATE_ENDED, i);
    if (WIFEXITED(wstatus))
        ev.exit_code = WEXITSTATUS(wstatus);
    if (WIFSIGNALED(wstatus))
        ev.term_signal = WTERMSIG(wstatus);

    sb_run_row row;
    int found = 0;
    sb_error err = {0}, reason = {0};
    if (sb_results_get_run(p->db, w->hash, &row, &found, &err) != SB_OK)
        found = 0;
    ev.recorded = found;
    /* a worker stopped before it recorded anything: nothing to continue, nothing failed */
    ev.outcome = worker_was_stopped(wstatus) ? SB_SWEEP_INTERRUPTED : SB_SWEEP_FAILED;
    if (found && row.r.status == SB_RUN_RUNNING) {
        ev.outcome = settle_running(p, row.id, wstatus, &reason);
        ev.reason = reason.msg;
    } else if (found) {
        ev.outcome = outcome_of_row(&row, ev.exit_code);
        ev.reason = row.r.reason[0] != '\0' ? row.r.reason : NULL;
        ev.test_acc = row.r.test_acc;
    }
    tally_add(p, ev.outcome);
    emit(p, &ev, &p->slots[i].cfg);
    if (found)
        sb_results_run_row_clear(&row);
}

/* A run whose check failed is excluded when the reference does not run it either, else
 * refused. */
static sb_sweep_outcome refusal_outcome(const sb_error *check)
{
    return check->status == SB_ERR_EXCLUDED ? SB_SWEEP_EXCLUDED : SB_SWEEP_REFUSED;
}

/* Takes run k: refuses, skips, puts aside (locked by another process) or starts it on free
 * slot i. Returns whether slot i is now busy. */
static int take_run(pool *p, const sb_sweep *s, int64_t k, int i)
{
    sb_sweep_update ev = run_update(SB_SWEEP_UPDATE_ENDED, k);
    sb_run_config cfg;
    sb_error rerr = {0}, check = {0};
    int built = 0;
    sb_status valid = sb_sweep_run_validate(s, k, &cfg, &built, &check);
    if (!built) {
        ev.outcome = refusal_outcome(&check);
        ev.reason = check.msg;
        tally_add(p, ev.outcome);
        emit(p, &ev, NULL);
        return 0;
    }
    char hash[17];
    sb_run_config_hash(&cfg, 0, hash);
    ev.hash = hash;
    sb_run_row row;
    int found = 0, resume = 0;
    if (sb_results_get_run(p->db, hash, &row, &found, &rerr) == SB_OK && found) {
        /* left running by a process that is gone: interrupted, continued from its checkpoint */
        (void)sb_run_store_settle_dead(p->db, &row, 1, &rerr);
        int finished = row.r.status == SB_RUN_FINISHED;
        resume = sb_run_resumable(row.r.status, row.r.checkpoint);
        if (finished) {
            p->tally.skipped++;
            ev.outcome = SB_SWEEP_SKIPPED;
            ev.recorded = 1;
            ev.test_acc = row.r.test_acc;
            emit(p, &ev, &cfg);
        }
        sb_results_run_row_clear(&row);
        if (finished)
            return 0;
    } else if (valid == SB_OK && found == 0 && !cfg.test_pretrained) {
        /* no row, but the run's checkpoint pair is complete: its MPI rank (or the
         * coordinator, the one writer of an MPI sweep's database) was killed before the row
         * was written. It continues from the checkpoint instead of starting again. */
        resume = sb_run_store_checkpoint_complete(p->opts->results, &cfg);
    }
    long holder = lock_holder(p, hash);
    if (holder != 0) {
        wait_for_lock(p, k, -1, hash, &cfg, holder);
        return 0;
    }
    if (valid != SB_OK) {
        ev.outcome = refusal_outcome(&check);
        tally_add(p, ev.outcome);
        ev.reason = check.msg;
        ev.recorded = record_refused(p->db, &cfg, hash, check.msg);
        emit(p, &ev, &cfg);
        return 0;
    }
    char **args = NULL;
    int n_args = 0;
    int fd = -1;
    pid_t pid = -1;
    if (sb_sweep_run_args(s, k, &args, &n_args, &rerr) == SB_OK) {
        pid = spawn_run(p, args, n_args, hash, resume, &fd);
        if (pid < 0)
            sb_error_set(&rerr, SB_ERR_RUNTIME, "cannot start a worker: %s", strerror(errno));
        sb_sweep_args_free(args);
    }
    if (pid < 0) {
        p->tally.failed++;
        ev.outcome = SB_SWEEP_FAILED;
        ev.reason = rerr.msg;
        emit(p, &ev, &cfg);
        return 0;
    }
    worker *w = &p->slots[i];
    memset(w, 0, sizeof *w);
    w->pid = pid;
    w->fd = fd;
    w->run = k;
    w->cfg = cfg;
    w->started = sb_time_now();
    w->last.test_acc = (double)NAN;
    memcpy(w->hash, hash, sizeof hash);
    p->running++;
    sb_sweep_update started = worker_update(p, SB_SWEEP_UPDATE_STARTED, i);
    emit(p, &started, &w->cfg);
    return 1;
}

/* The next run for a free slot: a run put aside whose lock is free now (looked at once a
 * second at most), else the next run of the selection; -1 when there is none now. */
static int64_t next_run(pool *p, const sb_sweep *s, const int64_t *runs, int64_t *next)
{
    double now = sb_time_now();
    if (p->n_waiting > 0 && now >= p->next_lock_look) {
        p->next_lock_look = now + LOCK_RETRY_S;
        for (int64_t w = 0; w < p->n_waiting; w++) {
            sb_run_config cfg;
            sb_error err = {0};
            char hash[17] = "";
            int64_t k = p->waiting[w];
            if (sb_sweep_run_config(s, k, &cfg, &err) == SB_OK)
                sb_run_config_hash(&cfg, 0, hash);
            if (hash[0] != '\0' && lock_holder(p, hash) != 0)
                continue;
            memmove(p->waiting + w, p->waiting + w + 1,
                    (size_t)(p->n_waiting - w - 1) * sizeof *p->waiting);
            p->n_waiting--;
            return k;
        }
    }
    return *next < p->n_runs ? runs[(*next)++] : -1;
}

/* Sends sig to every running worker. */
static void signal_workers(const pool *p, int sig)
{
    for (int i = 0; i < p->opts->workers; i++)
        if (p->slots[i].pid > 0)
            kill(p->slots[i].pid, sig);
}

/* One wait of the loop: progress records read from the running workers until the refresh
 * period ends (a signal ends it early; with no worker running, this is the pause before the
 * locks are looked at again), then the workers that ended reaped and settled (only ours: a
 * host program's other children are not touched). pfd and slot_of have room for a slot each. */
static void wait_for_workers(pool *p, struct pollfd *pfd, int *slot_of)
{
    const int workers = p->opts->workers;
    int n_fds = 0;
    for (int i = 0; i < workers; i++)
        if (p->slots[i].pid > 0 && p->slots[i].fd >= 0) {
            pfd[n_fds].fd = p->slots[i].fd;
            pfd[n_fds].events = POLLIN;
            slot_of[n_fds++] = i;
        }
    if (poll(pfd, (nfds_t)n_fds, POLL_MS) > 0)
        for (int f = 0; f < n_fds; f++)
            if (pfd[f].revents != 0)
                worker_read(p, slot_of[f]);
    for (int i = 0; i < workers; i++) {
        int wstatus = 0;
        if (p->slots[i].pid > 0 && waitpid(p->slots[i].pid, &wstatus, WNOHANG) == p->slots[i].pid)
            finish_worker(p, i, wstatus);
    }
}

sb_status sb_sweep_execute(const sb_sweep *s, const int64_t *runs, int64_t n_runs,
                           const sb_sweep_exec_opts *opts, sb_sweep_tally *tally, sb_error *err)
{
    memset(tally, 0, sizeof *tally);
    if (opts->workers < 1 || opts->threads < 0 || opts->results == NULL ||
        opts->worker_exe == NULL || (n_runs > 0 && runs == NULL))
        return sb_error_set(err, SB_ERR_INVALID,
                            "sweep: give workers >= 1, threads >= 0, a results folder and the "
                            "worker executable (the selectivbench command)");
    pool p = {.opts = opts, .db_path = opts->db, .n_runs = n_runs, .t0 = sb_time_now()};
    /* the results folder, its logs and its database */
    char db_path[4096], logs[4096];
    sb_status st = SB_OK;
    if (p.db_path == NULL) {
        st = sb_run_store_db_path(opts->results, db_path, sizeof db_path, err);
        p.db_path = db_path;
    }
    if (st == SB_OK)
        st = sb_run_store_log_dir(opts->results, logs, sizeof logs, 1, err);
    if (st == SB_OK)
        st = sb_results_open(p.db_path, &p.db, err);
    if (st != SB_OK)
        return st;
    int cores = sb_cpu_count();
    p.threads =
        opts->threads > 0 ? opts->threads : (cores / opts->workers > 0 ? cores / opts->workers : 1);
    p.slots = calloc((size_t)opts->workers, sizeof *p.slots);
    p.waiting = calloc((size_t)(n_runs > 0 ? n_runs : 1), sizeof *p.waiting);
    struct pollfd *pfd = calloc((size_t)opts->workers, sizeof *pfd);
    int *slot_of = calloc((size_t)opts->workers, sizeof *slot_of); /* pfd index -> slot */
    if (p.slots == NULL || p.waiting == NULL || pfd == NULL || slot_of == NULL) {
        free(p.slots);
        free(p.waiting);
        free(pfd);
        free(slot_of);
        sb_results_close(p.db);
        return sb_error_set(err, SB_ERR_NOMEM, "sweep: out of memory for %d workers",
                            opts->workers);
    }
    int64_t next = 0;
    while (next < n_runs || p.running > 0 || p.n_waiting > 0) {
        if (!p.cancelled && opts->cancel != NULL) {
            int sig = opts->cancel(opts->user);
            if (sig != 0) {
                /* once: a worker takes a second signal as "quit at once" */
                p.cancelled = sig == SIGINT ? SIGINT : SIGTERM;
                signal_workers(&p, p.cancelled);
            }
        }
        /* fill free workers (none once cancelled) */
        for (int i = 0; i < opts->workers && !p.cancelled; i++)
            while (p.slots[i].pid <= 0) {
                int64_t k = next_run(&p, s, runs, &next);
                if (k < 0 || take_run(&p, s, k, i))
                    break;
            }
        if (p.running == 0 && (p.cancelled || (next >= n_runs && p.n_waiting == 0)))
            break;

        wait_for_workers(&p, pfd, slot_of);
        sb_sweep_update tick = run_update(SB_SWEEP_UPDATE_TICK, -1);
        emit(&p, &tick, NULL);
    }
    /* a stop request that came while the last workers ended (a terminal's Ctrl-C reaches
     * them too, and they may all stop before this loop looks again) still cancels the sweep */
    if (!p.cancelled && opts->cancel != NULL) {
        int sig = opts->cancel(opts->user);
        if (sig != 0)
            p.cancelled = sig == SIGINT ? SIGINT : SIGTERM;
    }
    *tally = p.tally;
    free(p.slots);
    free(p.waiting);
    free(pfd);
    free(slot_of);
    sb_results_close(p.db);
    if (p.cancelled)
        return sb_error_set(err, SB_ERR_RUNTIME,
                            "sweep cancelled: %d of %lld runs settled, %d interrupted (run it "
                            "again to resume)",
                            tally->done + tally->failed + tally->skipped + tally->refused +
                                tally->excluded + tally->interrupted,
                            (long long)n_runs, tally->interrupted);
    return SB_OK;
}
