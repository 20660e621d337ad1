/*
 * test_sweep_exec.c - the library's sweep executor (src/exp/sweep_exec.c) without the CLI's
 * view: a run's configuration from a sweep file's values, the worker switches (checked, and
 * all listed by `train --help`), the progress record read back as written, a two-run sweep
 * through sb_sweep_execute (every run started and ended once, progress monotone and
 * complete, the tally, nothing printed by the library), its resume, a cancel (the workers
 * stop with a checkpoint: interrupted, then continued from it), and runs another process
 * holds locked (put aside, taken again when free).
 *
 * usage: test_sweep_exec PATH/TO/selectivbench
 */
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "exp/run_store.h"
#include "exp/sweep.h"
#include "exp/sweep_exec.h"
#include "test_util.h"

static const char *binary;

/* tests/data/sweeps/tiny.yaml's grid: 2 models x 2 seeds, runs of about a second; DATASET
 * is replaced by the training set size. */
static const char *tiny_yaml =
    "method: grid\n"
    "parameters:\n"
    "  model:\n    values: [transformer, gru]\n"
    "  seed:\n    values: [1, 2]\n"
    "  feat_size:\n    values: [16]\n"
    "  lr:\n    values: [0.002]\n"
    "command:\n"
    "  - ${env}\n  - python\n  - ${program}\n"
    "  - \"--vocab\"\n  - 9\n  - \"--amb\"\n  - 8\n  - \"--grammar_scale\"\n  - True\n"
    "  - \"--train_seqlen_max\"\n  - 20\n  - \"--test_seqlen_max\"\n  - 20\n"
    "  - \"--dataset_size\"\n  - DATASET\n  - \"--test_size\"\n  - 40\n"
    "  - \"--batch_size\"\n  - 32\n  - \"--layers\"\n  - 1\n"
    "  - \"--mem_budget\"\n  - 2\n"
    "  - ${args}\n";

static sb_sweep *load_tiny(int dataset_size)
{
    char text[2048], size[16];
    snprintf(size, sizeof size, "%d", dataset_size);
    const char *at = strstr(tiny_yaml, "DATASET");
    snprintf(text, sizeof text, "%.*s%s%s", (int)(at - tiny_yaml), tiny_yaml, size,
             at + strlen("DATASET"));
    sb_sweep *s = NULL;
    sb_error err = {0};
    if (sb_sweep_load_text("tiny", text, strlen(text), &s, &err) != SB_OK)
        fail_msg("tiny sweep: %s", err.msg);
    return s;
}

static void test_run_config(void **state)
{
    (void)state;
    sb_sweep *s = load_tiny(640);
    sb_error err = {0};
    sb_run_config cfg;
    assert_int_equal(sb_sweep_run_config(s, 3, &cfg, &err), SB_OK);
    assert_string_equal(cfg.model, "gru");
    assert_int_equal(cfg.seed, 2);
    assert_int_equal(cfg.feat_size, 16);
    assert_int_equal(cfg.layers, 1);
    assert_int_equal(cfg.task.dataset_size, 640);
    assert_int_equal(sb_sweep_check_params(s, &err), SB_OK);
    sb_sweep_free(s);

    /* a worker switch's value is checked; an unknown flag or parameter is refused */
    const char *bad[] = {"--mem_budget=0", "--save_model=maybe", "--threads=x", "--nosuch=1"};
    const char *says[] = {"--mem_budget 0 is out of range", "is not a boolean",
                          "is not an integer", "unknown flag --nosuch"};
    for (int i = 0; i < 4; i++) {
        char text[256];
        snprintf(text, sizeof text,
                 "method: grid\nparameters:\n  seed:\n    values: [1]\ncommand:\n  - \"%s\"\n"
                 "  - ${args}\n", bad[i]);
        assert_int_equal(sb_sweep_load_text("bad", text, strlen(text), &s, &err), SB_OK);
        assert_int_equal(sb_sweep_run_config(s, 0, &cfg, &err), SB_ERR_INVALID);
        if (strstr(err.msg, says[i]) == NULL)
            fail_msg("%s: '%s'", bad[i], err.msg);
        sb_sweep_free(s);
    }
    const char *params = "method: grid\nparameters:\n  bogus:\n    values: [1]\n";
    assert_int_equal(sb_sweep_load_text("params", params, strlen(params), &s, &err), SB_OK);
    assert_int_equal(sb_sweep_check_params(s, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "parameter 'bogus' is not a train flag"));
    sb_sweep_free(s);
}

static void test_worker_switches_are_train_flags(void **state)
{
    (void)state;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "%s train --help", binary);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    static char help[1 << 16];
    size_t len = fread(help, 1, sizeof help - 1, p);
    help[len] = '\0';
    assert_int_equal(pclose(p), 0);
    assert_true(sb_sweep_worker_switch_count() > 0);
    for (int i = 0; i < sb_sweep_worker_switch_count(); i++) {
        char needle[128];
        snprintf(needle, sizeof needle, "--%s ", sb_sweep_worker_switch_at(i)->name);
        if (strstr(help, needle) == NULL)
            fail_msg("train --help does not list %s", needle);
    }
}

static void test_progress_record(void **state)
{
    (void)state;
    char line[256];
    sb_sweep_progress in = {.step = 12, .total_steps = 40, .loss = 2.5, .acc = 0.25,
                            .tokens_per_s = 12345, .eta_s = 7.5, .test_acc = (double)NAN};
    snprintf(line, sizeof line, SB_PROGRESS_RECORD_FORMAT, in.step, in.total_steps, in.loss,
             in.acc, in.tokens_per_s, in.eta_s, in.test_acc);
    assert_non_null(strchr(line, '\n'));
    *strchr(line, '\n') = '\0';
    sb_sweep_progress out;
    assert_int_equal(sb_sweep_progress_parse(line, &out), 1);
    assert_int_equal(out.step, 12);
    assert_int_equal(out.total_steps, 40);
    assert_true(out.loss == 2.5 && out.acc == 0.25 && out.eta_s == 7.5);
    assert_true(isnan(out.test_acc));
    assert_int_equal(sb_sweep_progress_parse("P 1 2 3", &out), 0);
}

/* ---- executing ------------------------------------------------------------------------ */

#define MAX_RUNS 4

typedef struct seen {
    int started[MAX_RUNS], ended[MAX_RUNS], progress[MAX_RUNS], waiting[MAX_RUNS];
    int64_t last_step[MAX_RUNS], total[MAX_RUNS];
    sb_sweep_outcome outcome[MAX_RUNS];
    int term_signal[MAX_RUNS], exit_code[MAX_RUNS];
    long locked_by[MAX_RUNS];
    int waiting_slot[MAX_RUNS];
    int ticks, bad; /* bad: an event out of order (counted, checked after) */
    int cancel_when_training; /* cancel (SIGTERM) once every run has sent progress */
    int n_runs;
    /* a lock the test holds for run lock_run: taken when that run starts (lock_on_start,
     * path lock_path), released when the executor puts the run aside */
    int lock_run, lock_on_start;
    char lock_path[4200];
    sb_run_lock lock;
} seen;

static void on_event(const sb_sweep_event *ev, void *user)
{
    seen *s = user;
    if (ev->kind == SB_SWEEP_TICK) {
        s->ticks++;
        return;
    }
    if (ev->run < 0 || ev->run >= MAX_RUNS) {
        s->bad++;
        return;
    }
    int k = (int)ev->run;
    switch (ev->kind) {
    case SB_SWEEP_RUN_STARTED:
        s->started[k]++;
        if (s->ended[k] || ev->slot < 0 || ev->cfg == NULL || strlen(ev->hash) != 16)
            s->bad++;
        if (s->lock_on_start && k == s->lock_run && s->started[k] == 1) {
            long holder = 0;
            sb_error err = {0};
            if (sb_run_lock_take(s->lock_path, &s->lock, &holder, &err) != SB_OK || holder != 0)
                s->bad++;
        }
        break;
    case SB_SWEEP_RUN_WAITING:
        s->waiting[k]++;
        s->locked_by[k] = ev->locked_by;
        s->waiting_slot[k] = ev->slot;
        if (s->ended[k] || ev->cfg == NULL || strlen(ev->hash) != 16)
            s->bad++;
        if (s->lock_path[0] != '\0')
            sb_run_lock_release(&s->lock); /* the run can go now */
        break;
    case SB_SWEEP_RUN_PROGRESS:
        s->progress[k]++;
        if (!s->started[k] || s->ended[k] || ev->progress.step < s->last_step[k] ||
            ev->progress.step > ev->progress.total_steps)
            s->bad++;
        s->last_step[k] = ev->progress.step;
        s->total[k] = ev->progress.total_steps;
        break;
    case SB_SWEEP_RUN_ENDED:
        s->ended[k]++;
        s->outcome[k] = ev->outcome;
        s->term_signal[k] = ev->term_signal;
        s->exit_code[k] = ev->exit_code;
        if (ev->started != (s->started[k] > 0))
            s->bad++;
        break;
    case SB_SWEEP_TICK:
        break;
    }
}

/* Cancels with SIGTERM once every run is training (has sent progress: its worker has its
 * signal handlers). */
static int cancel_when_training(void *user)
{
    seen *s = user;
    if (!s->cancel_when_training)
        return 0;
    for (int k = 0; k < s->n_runs; k++)
        if (s->progress[k] == 0)
            return 0;
    return SIGTERM;
}

/* Runs runs[] of s with our stdout and stderr sent to a file, which must stay empty; the
 * workers are `worker_exe train ...` (NULL: the selectivbench command under test). */
static sb_status execute_with(const char *worker_exe, const sb_sweep *s, const int64_t *runs,
                              int64_t n_runs, const char *dir, seen *seen_events,
                              sb_sweep_tally *tally, sb_error *err)
{
    char out_path[4200];
    snprintf(out_path, sizeof out_path, "%s/printed.txt", dir);
    fflush(stdout);
    fflush(stderr);
    int saved_out = dup(STDOUT_FILENO), saved_err = dup(STDERR_FILENO);
    int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(saved_out >= 0 && saved_err >= 0 && fd >= 0);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
    sb_sweep_exec_opts opts = {.workers = 2, .threads = 1, .results = dir,
                               .worker_exe = worker_exe != NULL ? worker_exe : binary,
                               .on_event = on_event, .user = seen_events,
                               .cancel = cancel_when_training};
    sb_status st = sb_sweep_execute(s, runs, n_runs, &opts, tally, err);
    dup2(saved_out, STDOUT_FILENO);
    dup2(saved_err, STDERR_FILENO);
    close(saved_out);
    close(saved_err);
    struct stat info;
    assert_int_equal(stat(out_path, &info), 0);
    if (info.st_size != 0)
        fail_msg("the library printed %lld bytes (%s)", (long long)info.st_size, out_path);
    return st;
}

static sb_status execute_quietly(const sb_sweep *s, const int64_t *runs, int64_t n_runs,
                                 const char *dir, seen *seen_events, sb_sweep_tally *tally,
                                 sb_error *err)
{
    return execute_with(NULL, s, runs, n_runs, dir, seen_events, tally, err);
}

static void test_execute_and_resume(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_sweep_exec_XXXXXX";
    assert_non_null(mkdtemp(dir));
    sb_sweep *s = load_tiny(640);
    int64_t runs[2] = {0, 3};
    seen ev = {0};
    sb_sweep_tally tally;
    sb_error err = {0};
    if (execute_quietly(s, runs, 2, dir, &ev, &tally, &err) != SB_OK)
        fail_msg("execute: %s", err.msg);
    assert_int_equal(ev.bad, 0);
    assert_true(ev.ticks > 0);
    for (int i = 0; i < 2; i++) {
        int k = (int)runs[i];
        assert_int_equal(ev.started[k], 1);
        assert_int_equal(ev.ended[k], 1);
        assert_int_equal(ev.outcome[k], SB_SWEEP_DONE);
        assert_true(ev.progress[k] > 0);
        assert_true(ev.total[k] > 0);
        assert_int_equal(ev.last_step[k], ev.total[k]); /* the last step always arrives */
    }
    assert_int_equal(ev.started[1] + ev.started[2] + ev.ended[1] + ev.ended[2], 0);
    assert_int_equal(tally.done, 2);
    assert_int_equal(tally.failed + tally.skipped + tally.refused, 0);
    /* the workers' logs */
    sb_run_config cfg;
    char hash[17], log[4200];
    assert_int_equal(sb_sweep_run_config(s, 3, &cfg, &err), SB_OK);
    sb_run_config_hash(&cfg, 0, hash);
    assert_int_equal(sb_run_store_log_path(dir, hash, log, sizeof log, &err), SB_OK);
    assert_int_equal(access(log, R_OK), 0);

    /* again: both skipped, no worker started */
    seen again = {0};
    assert_int_equal(execute_quietly(s, runs, 2, dir, &again, &tally, &err), SB_OK);
    assert_int_equal(tally.skipped, 2);
    assert_int_equal(tally.done, 0);
    assert_int_equal(again.started[0] + again.started[3], 0);
    assert_int_equal(again.ended[0] + again.ended[3], 2);
    assert_int_equal(again.outcome[3], SB_SWEEP_SKIPPED);
    assert_int_equal(again.bad, 0);
    sb_sweep_free(s);
    assert_int_equal(test_remove_dir(dir), 0);
}

/* A stored run's row (found). */
static sb_run_row stored_row(const char *dir, const sb_sweep *s, int64_t k)
{
    char db_path[4200];
    sb_error err = {0};
    sb_results *db = NULL;
    assert_int_equal(sb_run_store_db_path(dir, db_path, sizeof db_path, &err), SB_OK);
    if (sb_results_open(db_path, &db, &err) != SB_OK)
        fail_msg("open %s: %s", db_path, err.msg);
    sb_run_config cfg;
    char hash[17];
    assert_int_equal(sb_sweep_run_config(s, k, &cfg, &err), SB_OK);
    sb_run_config_hash(&cfg, 0, hash);
    sb_run_row row;
    int found = 0;
    assert_int_equal(sb_results_get_run(db, hash, &row, &found, &err), SB_OK);
    assert_int_equal(found, 1);
    sb_results_close(db);
    return row;
}

/* Cancelled while both runs train: each worker gets SIGTERM once, stops after its update
 * with a checkpoint and records its run as interrupted (exit 75, not killed); executed
 * again, each continues from its checkpoint (attempt 2) and finishes. */
static void test_cancel(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_sweep_exec_XXXXXX";
    assert_non_null(mkdtemp(dir));
    sb_sweep *s = load_tiny(40000); /* long enough to be cancelled while it trains */
    int64_t runs[2] = {0, 1};
    seen ev = {.cancel_when_training = 1, .n_runs = 2, .lock = {-1}};
    sb_sweep_tally tally;
    sb_error err = {0};
    assert_int_equal(execute_quietly(s, runs, 2, dir, &ev, &tally, &err), SB_ERR_RUNTIME);
    assert_non_null(strstr(err.msg, "cancelled"));
    assert_int_equal(ev.bad, 0);
    assert_int_equal(tally.interrupted, 2);
    assert_int_equal(tally.failed + tally.done, 0);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(ev.ended[k], 1);
        assert_int_equal(ev.outcome[k], SB_SWEEP_INTERRUPTED);
        assert_int_equal(ev.term_signal[k], 0);
        assert_int_equal(ev.exit_code[k], SB_SWEEP_EXIT_TEMPFAIL);
        sb_run_row row = stored_row(dir, s, k);
        assert_string_equal(row.status, "interrupted");
        assert_non_null(strstr(row.reason, "interrupted at update"));
        assert_non_null(row.checkpoint);
        assert_int_equal(access(row.checkpoint, R_OK), 0);
        sb_results_run_row_clear(&row);
    }

    seen again = {.n_runs = 2, .lock = {-1}};
    if (execute_quietly(s, runs, 2, dir, &again, &tally, &err) != SB_OK)
        fail_msg("execute again: %s", err.msg);
    assert_int_equal(again.bad, 0);
    assert_int_equal(tally.done, 2);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(again.outcome[k], SB_SWEEP_DONE);
        sb_run_row row = stored_row(dir, s, k);
        assert_string_equal(row.status, "finished");
        assert_int_equal(row.attempts, 2);
        /* the worker was told to resume: its log says where it picked up */
        char log[4200], text[8192] = "";
        assert_int_equal(sb_run_store_log_path(dir, row.hash, log, sizeof log, &err), SB_OK);
        FILE *f = fopen(log, "r");
        assert_non_null(f);
        text[fread(text, 1, sizeof text - 1, f)] = '\0';
        fclose(f);
        if (strstr(text, "resuming at update") == NULL)
            fail_msg("run %d's log does not say it resumed: %s", k, text);
        sb_results_run_row_clear(&row);
    }
    sb_sweep_free(s);
    assert_int_equal(test_remove_dir(dir), 0);
}

/* The lock file path of run k of s in results folder dir. */
static void lock_path_of(const char *dir, const sb_sweep *s, int64_t k, char *out, size_t size)
{
    char db_path[4200], hash[17];
    sb_run_config cfg;
    sb_error err = {0};
    assert_int_equal(sb_sweep_run_config(s, k, &cfg, &err), SB_OK);
    sb_run_config_hash(&cfg, 0, hash);
    assert_int_equal(sb_run_store_db_path(dir, db_path, sizeof db_path, &err), SB_OK);
    assert_int_equal(sb_run_store_lock_path(db_path, hash, out, size, 1, &err), SB_OK);
}

/* A run another process holds locked is put aside without a worker, the others go on, and
 * it is taken (and trained) once the lock is free; a worker that finds its run locked
 * (exits 75 while the lock is held) frees its slot and the run is taken again the same
 * way. */
static void test_locked_run_put_aside(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_sweep_exec_XXXXXX";
    assert_non_null(mkdtemp(dir));
    sb_sweep *s = load_tiny(640);
    int64_t runs[2] = {0, 1};
    sb_sweep_tally tally;
    sb_error err = {0};

    /* held before the sweep: the executor sees it and starts no worker for it */
    seen ev = {.n_runs = 2, .lock_run = 0, .lock = {-1}};
    lock_path_of(dir, s, 0, ev.lock_path, sizeof ev.lock_path);
    long holder = 1;
    assert_int_equal(sb_run_lock_take(ev.lock_path, &ev.lock, &holder, &err), SB_OK);
    assert_int_equal(holder, 0);
    if (execute_quietly(s, runs, 2, dir, &ev, &tally, &err) != SB_OK)
        fail_msg("execute: %s", err.msg);
    assert_int_equal(ev.bad, 0);
    assert_int_equal(ev.waiting[0], 1);
    assert_int_equal(ev.locked_by[0], (long)getpid());
    assert_int_equal(ev.waiting_slot[0], -1);
    assert_int_equal(ev.started[0], 1);
    assert_int_equal(ev.outcome[0], SB_SWEEP_DONE);
    assert_int_equal(ev.outcome[1], SB_SWEEP_DONE);
    assert_int_equal(tally.done, 2);

    /* taken between the executor's look and the worker's: a worker (a script standing in
     * for train, exiting 75 as train does for a locked run, then train itself) finds it
     * locked; its run waits for the lock and is trained after */
    char script[4200], marker[4200];
    snprintf(script, sizeof script, "%s/worker.sh", dir);
    snprintf(marker, sizeof marker, "%s/worker_ran_once", dir);
    FILE *f = fopen(script, "w");
    assert_non_null(f);
    fprintf(f, "#!/bin/sh\nif [ ! -e '%s' ]; then touch '%s'; exit 75; fi\nexec '%s' \"$@\"\n",
            marker, marker, binary);
    fclose(f);
    assert_int_equal(chmod(script, 0755), 0);
    int64_t third[1] = {2};
    seen ev2 = {.n_runs = 1, .lock_run = 2, .lock_on_start = 1, .lock = {-1}};
    lock_path_of(dir, s, 2, ev2.lock_path, sizeof ev2.lock_path);
    if (execute_with(script, s, third, 1, dir, &ev2, &tally, &err) != SB_OK)
        fail_msg("execute with the script: %s", err.msg);
    assert_int_equal(ev2.bad, 0);
    assert_int_equal(ev2.waiting[2], 1);
    assert_int_equal(ev2.locked_by[2], (long)getpid());
    assert_true(ev2.waiting_slot[2] >= 0);
    assert_int_equal(ev2.started[2], 2);
    assert_int_equal(ev2.ended[2], 1);
    assert_int_equal(ev2.outcome[2], SB_SWEEP_DONE);
    assert_int_equal(tally.done, 1);
    sb_sweep_free(s);
    assert_int_equal(test_remove_dir(dir), 0);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_sweep_exec PATH/TO/selectivbench\n");
        return 2;
    }
    binary = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_config),
        cmocka_unit_test(test_worker_switches_are_train_flags),
        cmocka_unit_test(test_progress_record),
        cmocka_unit_test(test_execute_and_resume),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_locked_run_put_aside),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
