/*
 * sweep_view.c - the terminal side of a sweep (see sweep_view.h): an update handler for
 * sb_sweep_run that keeps one line per worker slot and draws them.
 */
#include "cli/sweep_view.h"
#include "cli/run_options.h"
#include "cli/signals.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define PLAIN_PROGRESS_EVERY_S 60.0 /* progress lines when stdout is not a terminal */
#define REFRESH_S 0.5               /* live block refresh */
#define MAX_SCANNED_RUNS 20000      /* runs compared to find the flags a sweep varies */
#define DESC_SIZE 160

/* What the view knows of the run on one worker slot. */
typedef struct slot_line {
    int busy;
    int64_t run;
    char desc[DESC_SIZE];     /* model and the values the sweep varies (describe) */
    int have;                 /* a progress record arrived */
    sb_sweep_update progress; /* the last one (its strings are not kept) */
    double last_plain;        /* when its last plain line was printed */
} slot_line;

typedef struct view {
    const sb_sweep *sweep;
    /* [n_args]: 1 where a run's flag (sb_sweep_run_args) differs between the selected
     * runs, the parameters the sweep varies; NULL when none does (one run) */
    unsigned char *varied;
    int n_args;
    int tty, quiet, columns;
    int lines_drawn; /* lines of the live block on screen */
    double last_draw, last_sweep_plain;
    slot_line *slots;
    int n_slots;
    sb_cli_sweep_tally tally;  /* the counts of the last update */
    int64_t first_refused_run; /* -1 until a run is refused */
    char first_refused[SB_ERROR_MSG_MAX];
    int64_t first_failed_run; /* -1 until a run fails or diverges */
    char first_failed[SB_ERROR_MSG_MAX];
    /* the ETA from the plan (NULL: none): per plan run the share done (0 to 1) and the
     * seconds spent training it (sb_plan_time_left) */
    const sb_plan *plan;
    double *plan_share, *plan_spent;
} view;

static void format_eta(double s, char *buf, size_t size)
{
    if (!(s >= 0) || s > 1e7)
        snprintf(buf, size, "?");
    else if (s >= 3600)
        snprintf(buf, size, "%d:%02d:%02d", (int)s / 3600, (int)s / 60 % 60, (int)s % 60);
    else
        snprintf(buf, size, "%d:%02d", (int)s / 60, (int)s % 60);
}

static void run_line(const slot_line *l, char *out, size_t size)
{
    int n = snprintf(out, size, "  #%lld %s: ", (long long)l->run, l->desc);
    if (n < 0 || (size_t)n >= size)
        return;
    if (!l->have) {
        snprintf(out + n, size - (size_t)n, "starting");
        return;
    }
    const sb_sweep_update *p = &l->progress;
    char eta[32], test[32] = "", speed[32];
    format_eta(p->eta_s, eta, sizeof eta);
    if (!isnan(p->last_test_acc))
        snprintf(test, sizeof test, " test %.3f", p->last_test_acc);
    if (p->tokens_per_s >= 1e4)
        snprintf(speed, sizeof speed, "%.0fk", p->tokens_per_s / 1e3);
    else
        snprintf(speed, sizeof speed, "%.0f", p->tokens_per_s);
    snprintf(out + n, size - (size_t)n, "step %lld/%lld loss %.3f acc %.3f%s %s tok/s ETA %s",
             (long long)p->step, (long long)p->total_steps, p->loss, p->acc, test, speed, eta);
}

/* Run `run`'s index in the plan (its runs are in grid order), -1 when not there. */
static int64_t plan_index(const view *v, int64_t run)
{
    int64_t lo = 0, n = v->plan_share != NULL ? v->plan->n_runs : 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (v->plan->runs[mid].run < run)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v->plan->runs[lo].run == run ? lo : -1;
}

/* Run `run`'s share done and seconds spent, for the ETA (sb_plan_time_left). */
static void plan_mark(view *v, int64_t run, double share, double spent_s)
{
    int64_t i = plan_index(v, run);
    if (i >= 0) {
        v->plan_share[i] = share;
        v->plan_spent[i] = spent_s;
    }
}

static void sweep_line(const view *v, const sb_sweep_update *t, char *out, size_t size)
{
    int64_t settled = t->done + t->failed + t->skipped + t->refused + t->excluded + t->interrupted;
    double elapsed_s = t->sweep_elapsed_s;
    int ran = t->done + t->failed;
    char eta[32], elapsed[32];
    format_eta(v->plan_share != NULL ? sb_plan_time_left(v->plan, v->plan_share, v->plan_spent)
               : ran > 0             ? elapsed_s / ran * (double)(t->n_runs - settled)
                                     : -1.0,
               eta, sizeof eta);
    format_eta(elapsed_s, elapsed, sizeof elapsed);
    char more[64] = "";
    if (t->excluded > 0)
        snprintf(more, sizeof more, ", %d excluded", t->excluded);
    if (t->interrupted > 0)
        snprintf(more + strlen(more), sizeof more - strlen(more), ", %d interrupted",
                 t->interrupted);
    snprintf(out, size,
             "sweep: %lld/%lld runs (%d done, %d failed, %d skipped, %d refused%s), %d running, "
             "%s, ETA %s",
             (long long)settled, (long long)t->n_runs, t->done, t->failed, t->skipped, t->refused,
             more, t->running, elapsed, eta);
}

/* Erases the live block (the lines drawn below the last plain output). */
static void view_clear(view *v)
{
    if (v->lines_drawn > 0) {
        printf("\033[%dA\r\033[J", v->lines_drawn);
        v->lines_drawn = 0;
    }
}

/* Prints a line above the live block. */
static void view_message(view *v, const char *line)
{
    if (v->quiet)
        return;
    if (v->tty)
        view_clear(v);
    printf("%s\n", line);
    fflush(stdout);
    v->last_draw = 0; /* redraw at once */
}

/* The live block on a terminal: one line per running run, then the sweep line. Lines are
 * cut to the terminal's width so that moving the cursor up over them stays exact. */
static void view_draw(view *v, const char *sweep)
{
    double now = sb_clock_seconds();
    if (now - v->last_draw < REFRESH_S)
        return;
    v->last_draw = now;
    view_clear(v);
    char line[512];
    int width = v->columns > 1 ? v->columns - 1 : 79;
    for (int i = 0; i < v->n_slots; i++) {
        if (!v->slots[i].busy)
            continue;
        run_line(&v->slots[i], line, sizeof line);
        printf("%.*s\n", width, line);
        v->lines_drawn++;
    }
    printf("%.*s\n", width, sweep);
    v->lines_drawn++;
    fflush(stdout);
}

/* A run that ended without a worker: a refused or excluded run gets a line like an ended
 * run's (the first refused one is kept for the sweep's last line); a worker that could not start
 * goes to stderr; skipped runs are quiet. */
static void view_unstarted(view *v, const sb_sweep_update *ev)
{
    if (ev->outcome == SB_SWEEP_REFUSED) {
        const char *reason = ev->reason != NULL ? ev->reason : "?";
        if (v->first_refused_run < 0) {
            v->first_refused_run = ev->run;
            snprintf(v->first_refused, sizeof v->first_refused, "%s", reason);
        }
        char msg[1024];
        snprintf(msg, sizeof msg, "#%lld refused: %s", (long long)ev->run, reason);
        view_message(v, msg);
        return;
    }
    if (ev->outcome == SB_SWEEP_EXCLUDED) {
        char msg[1024];
        snprintf(msg, sizeof msg, "#%lld excluded: %s", (long long)ev->run,
                 ev->reason != NULL ? ev->reason : "?");
        view_message(v, msg);
        return;
    }
    if (ev->outcome != SB_SWEEP_FAILED)
        return;
    if (v->tty)
        view_clear(v);
    fprintf(stderr, "selectivbench sweep: error: %s\n", ev->reason);
}

/* One line for an ended run: how it ended and how long it took. */
static void view_ended(view *v, const sb_sweep_update *ev)
{
    slot_line *l = &v->slots[ev->slot];
    char msg[1024];
    if (ev->outcome == SB_SWEEP_DONE) {
        snprintf(msg, sizeof msg, "#%lld [%s] %s: finished, test acc %.4f (%.0f s)",
                 (long long)ev->run, ev->hash, l->desc, ev->test_acc, ev->run_elapsed_s);
    } else {
        const char *status = !ev->recorded                         ? "not recorded (see its log)"
                             : ev->outcome == SB_SWEEP_DIVERGED    ? "diverged"
                             : ev->outcome == SB_SWEEP_INTERRUPTED ? "interrupted"
                             : ev->outcome == SB_SWEEP_SKIPPED     ? "finished by another process"
                                                                   : "failed";
        snprintf(msg, sizeof msg, "#%lld [%s] %s: %s%s%s (%.0f s)", (long long)ev->run, ev->hash,
                 l->desc, status, ev->recorded && ev->reason != NULL ? ": " : "",
                 ev->recorded && ev->reason != NULL ? ev->reason : "", ev->run_elapsed_s);
    }
    view_message(v, msg);
    l->busy = 0;
    if (v->first_failed_run < 0 &&
        (ev->outcome == SB_SWEEP_FAILED || ev->outcome == SB_SWEEP_DIVERGED || !ev->recorded)) {
        v->first_failed_run = ev->run;
        snprintf(v->first_failed, sizeof v->first_failed, "%s",
                 !ev->recorded        ? "not recorded (see its log)"
                 : ev->reason != NULL ? ev->reason
                                      : sb_sweep_outcome_name(ev->outcome));
    }
    if (!v->tty && !v->quiet) {
        sweep_line(v, ev, msg, sizeof msg);
        printf("%s\n", msg);
        fflush(stdout);
        v->last_sweep_plain = sb_clock_seconds();
    }
}

/* Not on a terminal: a line per running run and a sweep line, each once a minute. */
static void view_plain(view *v, const sb_sweep_update *ev)
{
    double now = sb_clock_seconds();
    char line[1024];
    for (int i = 0; i < v->n_slots; i++) {
        slot_line *l = &v->slots[i];
        if (!l->busy || !l->have || now - l->last_plain < PLAIN_PROGRESS_EVERY_S)
            continue;
        run_line(l, line, sizeof line);
        printf("%s\n", line + 2);
        l->last_plain = now;
    }
    if (now - v->last_sweep_plain >= PLAIN_PROGRESS_EVERY_S) {
        sweep_line(v, ev, line, sizeof line);
        printf("%s\n", line);
        v->last_sweep_plain = now;
    }
    fflush(stdout);
}

/* "model dD LL lr LR sSEED" of a run's configuration. */
static void describe_fixed(const sb_config *cfg, char *out, size_t size)
{
    char model[64] = "", width[32] = "", layers[32] = "", lr[64] = "", seed[32] = "";
    sb_config_get_key(cfg, "model", model, sizeof model, NULL);
    sb_config_get_key(cfg, "feat_size", width, sizeof width, NULL);
    sb_config_get_key(cfg, "layers", layers, sizeof layers, NULL);
    sb_config_get_key(cfg, "lr", lr, sizeof lr, NULL);
    sb_config_get_key(cfg, "seed", seed, sizeof seed, NULL);
    snprintf(out, size, "%s d%d L%d lr %g s%llu", model, atoi(width), atoi(layers),
             strtod(lr, NULL), strtoull(seed, NULL, 10));
}

/* A run's label: its model and "name=value" for each parameter the sweep varies (amb=4
 * seed=1), so that two different runs never read the same; without varied parameters,
 * model, width, depth, learning rate and seed. */
static void describe(const view *v, int64_t run, const sb_config *cfg, char *out, size_t size)
{
    out[0] = '\0';
    if (cfg == NULL)
        return;
    char **args = NULL;
    int n_args = 0;
    sb_error ignored = {0};
    if (v->varied == NULL || sb_sweep_run_args(v->sweep, run, &args, &n_args, &ignored) != SB_OK) {
        describe_fixed(cfg, out, size);
        return;
    }
    sb_config_get_key(cfg, "model", out, size, NULL);
    for (int a = 0; a < n_args && a < v->n_args; a++) {
        const char *flag = args[a] + (strncmp(args[a], "--", 2) == 0 ? 2 : 0);
        if (!v->varied[a] || strncmp(flag, "model=", 6) == 0)
            continue;
        size_t len = strlen(out);
        snprintf(out + len, size - len, "%s%s", len > 0 ? " " : "", flag);
    }
    sb_sweep_args_free(args);
}

/* Which of the runs' flags differ between the selected runs (at most MAX_SCANNED_RUNS of
 * them, evenly spaced, are compared: a parameter a selection varies shows in those). */
static void find_varied(view *v, const int64_t *runs, int64_t n_runs)
{
    int64_t n = runs != NULL ? n_runs : sb_sweep_count(v->sweep);
    int64_t stride = n > MAX_SCANNED_RUNS ? n / MAX_SCANNED_RUNS : 1;
    char **first = NULL;
    int any = 0;
    sb_error ignored = {0};
    for (int64_t i = 0; i < n; i += stride) {
        char **args = NULL;
        int n_args = 0;
        int64_t k = runs != NULL ? runs[i] : i;
        if (sb_sweep_run_args(v->sweep, k, &args, &n_args, &ignored) != SB_OK)
            continue;
        if (first == NULL) {
            first = args;
            v->varied = calloc((size_t)(n_args > 0 ? n_args : 1), 1);
            v->n_args = v->varied != NULL ? n_args : 0;
            continue;
        }
        for (int a = 0; a < n_args && a < v->n_args; a++)
            if (strcmp(args[a], first[a]) != 0)
                any = v->varied[a] = 1;
        sb_sweep_args_free(args);
    }
    sb_sweep_args_free(first);
    if (!any) { /* nothing varies: the fixed description */
        free(v->varied);
        v->varied = NULL;
        v->n_args = 0;
    }
}

/* A run another process is training: put aside until it lets go (its worker's slot, if it
 * had one, is free again). */
static void view_waiting(view *v, const sb_sweep_update *ev)
{
    char who[48] = "another process";
    if (ev->locked_by > 0)
        snprintf(who, sizeof who, "pid %ld", ev->locked_by);
    char desc[DESC_SIZE] = "";
    describe(v, ev->run, ev->config, desc, sizeof desc);
    char msg[512];
    snprintf(msg, sizeof msg, "#%lld [%s] %s: locked, %s is training it; coming back to it later",
             (long long)ev->run, ev->hash, desc, who);
    view_message(v, msg);
    if (ev->slot >= 0 && ev->slot < v->n_slots)
        v->slots[ev->slot].busy = 0;
}

static void view_event(const sb_sweep_update *ev, void *user)
{
    view *v = user;
    v->tally.done = ev->done;
    v->tally.failed = ev->failed;
    v->tally.skipped = ev->skipped;
    v->tally.refused = ev->refused;
    v->tally.interrupted = ev->interrupted;
    v->tally.excluded = ev->excluded;
    slot_line *l = ev->slot >= 0 && ev->slot < v->n_slots ? &v->slots[ev->slot] : NULL;
    switch (ev->kind) {
    case SB_SWEEP_UPDATE_STARTED:
        if (l == NULL)
            break;
        memset(l, 0, sizeof *l);
        l->busy = 1;
        l->run = ev->run;
        l->last_plain = sb_clock_seconds();
        describe(v, ev->run, ev->config, l->desc, sizeof l->desc);
        plan_mark(v, ev->run, 0.0, 0.0);
        break;
    case SB_SWEEP_UPDATE_PROGRESS:
        if (l == NULL)
            break;
        l->have = 1;
        l->progress = *ev;
        if (ev->total_steps > 0)
            plan_mark(v, ev->run, (double)ev->step / (double)ev->total_steps, ev->run_elapsed_s);
        break;
    case SB_SWEEP_UPDATE_ENDED: {
        /* only a run trained to its end sets the pace */
        plan_mark(v, ev->run, 1.0, ev->outcome == SB_SWEEP_DONE ? ev->run_elapsed_s : 0.0);
        /* the ENDED line first: it prints the sweep line with this run counted */
        if (l == NULL)
            view_unstarted(v, ev);
        else
            view_ended(v, ev);
        break;
    }
    case SB_SWEEP_UPDATE_WAITING:
        plan_mark(v, ev->run, 0.0, 0.0);
        view_waiting(v, ev);
        break;
    case SB_SWEEP_UPDATE_TICK: {
        if (v->quiet)
            break;
        if (v->tty) {
            char line[1024];
            sweep_line(v, ev, line, sizeof line);
            view_draw(v, line);
        } else {
            view_plain(v, ev);
        }
        break;
    }
    }
}

sb_status sb_cli_sweep_run(const sb_sweep *s, const char *label, const int64_t *runs,
                           int64_t n_runs, const sb_config *cfg, const sb_plan *plan, int quiet,
                           sb_cli_sweep_tally *tally, sb_error *err)
{
    const int workers = sb_run_flag(cfg, "workers");
    view v = {.sweep = s,
              .tty = isatty(STDOUT_FILENO),
              .quiet = quiet,
              .columns = 80,
              .n_slots = workers,
              .first_refused_run = -1,
              .first_failed_run = -1,
              .plan = plan};
    /* every run's share 0 (calloc'd zeros); without memory, the ETA without the plan */
    if (plan != NULL && plan->n_runs > 0) {
        v.plan_share = calloc((size_t)plan->n_runs, sizeof *v.plan_share);
        v.plan_spent = calloc((size_t)plan->n_runs, sizeof *v.plan_spent);
        if (v.plan_share == NULL || v.plan_spent == NULL) {
            free(v.plan_share);
            free(v.plan_spent);
            v.plan_share = v.plan_spent = NULL;
        }
    }
    find_varied(&v, runs, n_runs);
    struct winsize ws;
    if (v.tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20)
        v.columns = ws.ws_col;
    v.slots = calloc((size_t)(workers > 0 ? workers : 1), sizeof *v.slots);
    if (v.slots == NULL) {
        free(v.varied);
        free(v.plan_share);
        free(v.plan_spent);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory");
    }
    /* a worker is this very program: /proc/self/exe is its image even if the file was
     * rebuilt or moved since it started; SIGINT or SIGTERM stop the sweep (when the command
     * installed its handlers) */
    const sb_sweep_settings settings = {
        .on_update = view_event, .user = &v, .cancel = sb_cli_stop_requested};
    sb_status st = sb_sweep_run(s, runs, n_runs, cfg, "/proc/self/exe", &settings, NULL, NULL, err);
    if (v.tty)
        view_clear(&v);
    free(v.slots);
    free(v.varied);
    free(v.plan_share);
    free(v.plan_spent);
    *tally = v.tally;
    tally->first_refused_run = v.first_refused_run;
    snprintf(tally->first_refused, sizeof tally->first_refused, "%s", v.first_refused);
    tally->first_failed_run = v.first_failed_run;
    snprintf(tally->first_failed, sizeof tally->first_failed, "%s", v.first_failed);
    if (st != SB_OK)
        return st;
    if (runs == NULL)
        n_runs = sb_sweep_count(s);
    const char *db = sb_config_text(cfg, "db");
    char interrupted[160] = "";
    if (tally->excluded > 0)
        snprintf(interrupted, sizeof interrupted,
                 ", %d excluded (the reference does not run "
                 "them either)",
                 tally->excluded);
    if (tally->interrupted > 0)
        snprintf(interrupted + strlen(interrupted), sizeof interrupted - strlen(interrupted),
                 ", %d interrupted (run the sweep again to resume them)", tally->interrupted);
    printf("sweep %s: %lld runs selected of %lld: %d trained, %d failed, %d already finished, "
           "%d refused%s; database %s\n",
           label, (long long)n_runs, (long long)sb_sweep_count(s), tally->done, tally->failed,
           tally->skipped, tally->refused, interrupted,
           db != NULL && db[0] != '\0' ? db : "(default)");
    return SB_OK;
}
