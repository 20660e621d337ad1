/*
 * test_sweep_exec.c - the library's sweep executor (src/exp/sweep_exec.c) without the CLI's
 * view: a run's configuration from a sweep file's values, the worker switches (checked, and
 * all listed by `train --help`), the progress record read back as written, a two-run sweep
 * through sb_sweep_execute (every run started and ended once, progress monotone and
 * complete, the tally, nothing printed by the library), its resume, a cancel (the workers
 * stop with a checkpoint: interrupted, then continued from it), and runs another process
 * holds locked (put aside, taken again when free). And the grid (src/exp/sweep.c):
 * selections (filters, shards, limits) against a plain enumeration, their errors, grids of
 * 10^9 and 10^18 runs counted and capped, grids over INT64_MAX refused (2^64 would wrap to
 * 0), keys given twice refused with their lines, the executor's refusals equal to
 * sb_sweep_check_run's, and sb_sweep_run's cap without a selection.
 *
 * usage: test_sweep_exec PATH/TO/selectivbench
 */
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    const char *says[] = {"--mem_budget 0 is out of range", "is not a boolean", "is not an integer",
                          "unknown flag --nosuch"};
    for (int i = 0; i < 4; i++) {
        char text[256];
        snprintf(text, sizeof text,
                 "method: grid\nparameters:\n  seed:\n    values: [1]\ncommand:\n  - \"%s\"\n"
                 "  - ${args}\n",
                 bad[i]);
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

/* `train --help` lists every key of the table, and a sweep file takes exactly the keys as
 * parameters: each one, and nothing else. */
static void test_every_key_is_a_train_flag(void **state)
{
    (void)state;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "%s train --help", binary);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    static char help[1 << 17];
    size_t len = fread(help, 1, sizeof help - 1, p);
    help[len] = '\0';
    assert_int_equal(pclose(p), 0);
    assert_true(sb_config_key_count() > 80);
    for (int i = 0; i < sb_config_key_count(); i++) {
        const char *name = sb_config_key_name(i);
        /* another command's setting (bench's --frames) is neither a train flag nor a sweep
         * parameter */
        const int train_flag = sb_config_key_group(i) <= SB_KEYS_TRAIN;
        char needle[128];
        snprintf(needle, sizeof needle, "\n  --%s ", name);
        if ((strstr(help, needle) != NULL) != train_flag)
            fail_msg("train --help %s %s", train_flag ? "does not list" : "lists", needle);
        char text[256];
        snprintf(text, sizeof text, "method: grid\nparameters:\n  %s:\n    values: [1]\n", name);
        sb_sweep *s = NULL;
        sb_error err = {0};
        assert_int_equal(sb_sweep_load_text("keys", text, strlen(text), &s, &err), SB_OK);
        sb_status st = sb_sweep_check_params(s, &err);
        if (train_flag && st != SB_OK)
            fail_msg("a sweep refuses the key %s as a parameter: %s", name, err.msg);
        if (!train_flag && (st != SB_ERR_INVALID || strstr(err.msg, "not a train flag") == NULL))
            fail_msg("a sweep takes %s, another command's setting, as a parameter", name);
        sb_sweep_free(s);
    }
}

static void test_progress_record(void **state)
{
    (void)state;
    char line[256];
    sb_sweep_progress in = {.step = 12,
                            .total_steps = 40,
                            .loss = 2.5,
                            .acc = 0.25,
                            .tokens_per_s = 12345,
                            .eta_s = 7.5,
                            .test_acc = (double)NAN};
    snprintf(line, sizeof line, SB_PROGRESS_RECORD_FORMAT, in.step, in.total_steps, in.loss, in.acc,
             in.tokens_per_s, in.eta_s, in.test_acc);
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

/* ---- the grid: counts and selections ---------------------------------------------------- */

static sb_sweep *load_text(const char *text)
{
    sb_sweep *s = NULL;
    sb_error err = {0};
    if (sb_sweep_load_text("grid", text, strlen(text), &s, &err) != SB_OK)
        fail_msg("sweep text: %s", err.msg);
    return s;
}

/* A grid of n parameters p00, p01, ... of `values` values 0, 1, ... each. */
static void grid_text(char *text, size_t size, int n, int values)
{
    int len = snprintf(text, size, "method: grid\nparameters:\n");
    for (int p = 0; p < n; p++) {
        len += snprintf(text + len, size - (size_t)len, "  p%02d:\n    values: [", p);
        for (int v = 0; v < values; v++)
            len += snprintf(text + len, size - (size_t)len, "%s%d", v > 0 ? ", " : "", v);
        len += snprintf(text + len, size - (size_t)len, "]\n");
    }
}

/* The runs a selection must have, by plain enumeration of the grid: the runs matching every
 * filter, at positions shard_index + m * shard_count among them, the first `limit`. */
static int64_t naive_select(const sb_sweep *s, const sb_sweep_select_options *o, int64_t *runs)
{
    int64_t matched = 0, n = 0;
    int64_t shards = o->shard_count > 0 ? o->shard_count : 1;
    for (int64_t k = 0; k < sb_sweep_count(s); k++) {
        int ok = 1;
        for (int f = 0; f < o->n_filters && ok; f++) {
            char name[64];
            const char *eq = strchr(o->filters[f], '=');
            snprintf(name, sizeof name, "%.*s", (int)(eq - o->filters[f]), o->filters[f]);
            ok = sb_sweep_run_matches(s, k, name, eq + 1);
        }
        if (!ok)
            continue;
        if (matched++ % shards != o->shard_index)
            continue;
        if (o->limit > 0 && n >= o->limit)
            break;
        runs[n++] = k;
    }
    return n;
}

static void test_select_matches_enumeration(void **state)
{
    (void)state;
    sb_sweep *s = load_text("method: grid\nparameters:\n"
                            "  a:\n    values: [x, y, z]\n"
                            "  b:\n    values: [1, 2]\n"
                            "  c:\n    values: [p, q, r, s]\n");
    assert_int_equal(sb_sweep_count(s), 24);
    const char *f_b2[] = {"b=2"}, *f_ya[] = {"a=y", "c=r"}, *f_twice[] = {"a=x", "a=y"};
    sb_sweep_select_options cases[] = {
        {0},
        {.filters = f_b2, .n_filters = 1},
        {.filters = f_b2, .n_filters = 1, .shard_index = 1, .shard_count = 3},
        {.filters = f_ya, .n_filters = 2},
        {.shard_index = 4, .shard_count = 5, .limit = 3},
        {.shard_index = 0, .shard_count = 7},
        {.limit = 30},
        {.filters = f_b2, .n_filters = 1, .shard_index = 11, .shard_count = 12},
        {.filters = f_twice, .n_filters = 2}, /* every filter holds: none */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int64_t want[24];
        int64_t n_want = naive_select(s, &cases[c], want);
        sb_sweep_selection *sel = NULL;
        sb_error err = {0};
        if (sb_sweep_select(s, &cases[c], &sel, &err) != SB_OK)
            fail_msg("case %zu: %s", c, err.msg);
        if (sb_sweep_selection_size(sel) != n_want)
            fail_msg("case %zu: %lld runs selected, the enumeration has %lld", c,
                     (long long)sb_sweep_selection_size(sel), (long long)n_want);
        for (int64_t i = 0; i < n_want; i++)
            if (sb_sweep_selection_run(sel, i) != want[i])
                fail_msg("case %zu: run %lld is %lld, expected %lld", c, (long long)i,
                         (long long)sb_sweep_selection_run(sel, i), (long long)want[i]);
        assert_int_equal(sb_sweep_selection_run(sel, n_want), -1);
        assert_int_equal(sb_sweep_selection_run(sel, -1), -1);
        sb_sweep_selection_free(sel);
    }
    sb_sweep_free(s);
}

static void test_select_errors(void **state)
{
    (void)state;
    sb_sweep *s = load_text("method: grid\nparameters:\n  a:\n    values: [x, y]\n"
                            "  b:\n    values: [1, 2]\n");
    const char *bad[][1] = {{"a"}, {"nosuch=1"}, {"a=w"}, {"b=1.0"}};
    const char *says[] = {"--filter 'a': write NAME=VALUE",
                          "one of the parameters of sweep file 'grid' (a, b)",
                          "--filter 'a=w': a takes x, y in sweep file 'grid'",
                          "--filter 'b=1.0': b takes 1, 2 in sweep file 'grid'; did you mean b=1?"};
    for (int i = 0; i < 4; i++) {
        sb_sweep_select_options o = {.filters = bad[i], .n_filters = 1};
        sb_sweep_selection *sel = NULL;
        sb_error err = {0};
        assert_int_equal(sb_sweep_select(s, &o, &sel, &err), SB_ERR_INVALID);
        assert_null(sel);
        if (strstr(err.msg, says[i]) == NULL)
            fail_msg("%s: '%s'", bad[i][0], err.msg);
    }
    sb_sweep_select_options shard = {.shard_index = 3, .shard_count = 3};
    sb_sweep_select_options limit = {.limit = -1};
    sb_sweep_selection *sel = NULL;
    sb_error err = {0};
    assert_int_equal(sb_sweep_select(s, &shard, &sel, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "shard 3/3"));
    assert_int_equal(sb_sweep_select(s, &limit, &sel, &err), SB_ERR_INVALID);
    sb_sweep_free(s);
}

static void test_big_grids(void **state)
{
    (void)state;
    static char text[1 << 14];
    sb_error err = {0};
    sb_sweep_selection *sel = NULL;

    /* 10^9 runs: counted, refused whole, listed lazily under a limit, filter and shard */
    grid_text(text, sizeof text, 9, 10);
    sb_sweep *s = load_text(text);
    assert_int_equal(sb_sweep_count(s), 1000000000);
    assert_int_equal(sb_sweep_select(s, NULL, &sel, &err), SB_ERR_INVALID);
    assert_null(sel);
    if (strstr(err.msg, "1000000000 runs selected of a grid of 1000000000, more than the "
                        "10000000 one sweep takes; select fewer with --limit, --shard or "
                        "--filter") == NULL)
        fail_msg("the cap: '%s'", err.msg);
    sb_sweep_select_options limit = {.limit = SB_SWEEP_MAX_RUNS};
    assert_int_equal(sb_sweep_select(s, &limit, &sel, &err), SB_OK);
    assert_int_equal(sb_sweep_selection_size(sel), SB_SWEEP_MAX_RUNS);
    assert_int_equal(sb_sweep_selection_run(sel, SB_SWEEP_MAX_RUNS - 1), SB_SWEEP_MAX_RUNS - 1);
    sb_sweep_selection_free(sel);
    /* p00 = 7 and p08 = 3 leave 10^7 runs; shard 2/3 of them: 3333333, at positions 2, 5, ... */
    const char *filters[] = {"p00=7", "p08=3"};
    sb_sweep_select_options narrow = {
        .filters = filters, .n_filters = 2, .shard_index = 2, .shard_count = 3};
    assert_int_equal(sb_sweep_select(s, &narrow, &sel, &err), SB_OK);
    assert_int_equal(sb_sweep_selection_size(sel), 3333333);
    /* sub-grid position j = 2 + 3i: p01..p07 are j's digits, p00 = 7, p08 = 3 */
    int64_t positions[] = {0, 1, 1234567, 3333332};
    for (int t = 0; t < 4; t++) {
        int64_t j = 2 + 3 * positions[t];
        int64_t want = 700000000 + j * 10 + 3;
        assert_int_equal(sb_sweep_selection_run(sel, positions[t]), want);
    }
    sb_sweep_selection_free(sel);

    /* sb_sweep_run without a selection takes the same cap, before anything is allocated */
    assert_int_equal(sb_sweep_run(s, NULL, 0, NULL, binary, NULL, NULL, NULL, &err),
                     SB_ERR_INVALID);
    if (strstr(err.msg, "has 1000000000 runs, more than the 10000000 one sweep takes") == NULL ||
        strstr(err.msg, "pass a selection in runs") == NULL)
        fail_msg("sb_sweep_run's cap: '%s'", err.msg);
    int64_t outside[] = {0, 1000000000};
    assert_int_equal(sb_sweep_run(s, outside, 2, NULL, binary, NULL, NULL, NULL, &err),
                     SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "runs[1] = 1000000000 is outside the grid"));
    assert_int_equal(
        sb_sweep_run(s, outside, SB_SWEEP_MAX_RUNS + 1, NULL, binary, NULL, NULL, NULL, &err),
        SB_ERR_INVALID);
    sb_sweep_free(s);

    /* 10^18 runs: counted exactly, refused with both sizes */
    grid_text(text, sizeof text, 18, 10);
    s = load_text(text);
    assert_int_equal(sb_sweep_count(s), 1000000000000000000LL);
    assert_int_equal(sb_sweep_select(s, NULL, &sel, &err), SB_ERR_INVALID);
    assert_non_null(strstr(err.msg, "1000000000000000000 runs selected of a grid of "
                                    "1000000000000000000"));
    sb_sweep_free(s);

    /* over INT64_MAX: 10^19, 2^63 and 2^64 (which an unchecked product wraps to 0) */
    int shapes[][2] = {{19, 10}, {63, 2}, {64, 2}};
    for (int i = 0; i < 3; i++) {
        grid_text(text, sizeof text, shapes[i][0], shapes[i][1]);
        s = NULL;
        assert_int_equal(sb_sweep_load_text("huge", text, strlen(text), &s, &err), SB_ERR_INVALID);
        assert_null(s);
        if (strstr(err.msg, "sweep file 'huge': its grid has more than 9223372036854775807 runs") ==
            NULL)
            fail_msg("%d x %d values: '%s'", shapes[i][0], shapes[i][1], err.msg);
    }
    grid_text(text, sizeof text, 62, 2);
    s = load_text(text);
    assert_int_equal(sb_sweep_count(s), 4611686018427387904LL);
    sb_sweep_free(s);
}

static void test_duplicate_keys(void **state)
{
    (void)state;
    const char *files[] = {
        "method: grid\nparameters:\n  lr:\n    values: [1]\nmethod: grid\n",
        "method: grid\nparameters:\n  lr:\n    values: [1]\n  seed:\n    values: [1]\n"
        "  lr:\n    values: [2]\n",
        "method: grid\nparameters:\n  lr:\n    values: [1]\n    values: [2]\n",
        "method: grid\nmetric:\n  name: a\n  goal: maximize\n  name: b\nparameters:\n"
        "  lr:\n    values: [1]\n",
    };
    const char *says[] = {
        "sweep file 'dup', line 5: key 'method' is given twice in one mapping (first on line 1)",
        "sweep file 'dup', line 7: key 'lr' is given twice in one mapping (first on line 3)",
        "sweep file 'dup', line 5: key 'values' is given twice in one mapping (first on line 4)",
        "sweep file 'dup', line 5: key 'name' is given twice in one mapping (first on line 3)",
    };
    for (int i = 0; i < 4; i++) {
        sb_sweep *s = NULL;
        sb_error err = {0};
        assert_int_equal(sb_sweep_load_text("dup", files[i], strlen(files[i]), &s, &err),
                         SB_ERR_INVALID);
        assert_null(s);
        if (strstr(err.msg, says[i]) == NULL)
            fail_msg("file %d: '%s'", i, err.msg);
    }
}

/* ---- executing ------------------------------------------------------------------------ */

#define MAX_RUNS 4

typedef struct seen {
    int started[MAX_RUNS], ended[MAX_RUNS], progress[MAX_RUNS], waiting[MAX_RUNS];
    int64_t last_step[MAX_RUNS], total[MAX_RUNS];
    sb_sweep_outcome outcome[MAX_RUNS];
    int term_signal[MAX_RUNS], exit_code[MAX_RUNS];
    char reason[MAX_RUNS][SB_ERROR_MSG_MAX]; /* why each run was refused */
    long locked_by[MAX_RUNS];
    int waiting_slot[MAX_RUNS];
    int ticks, bad;           /* bad: an event out of order (counted, checked after) */
    int cancel_when_training; /* cancel (SIGTERM) once every run has sent progress */
    int n_runs;
    /* a lock the test holds for run lock_run: taken when that run starts (lock_on_start,
     * path lock_path), released when the executor puts the run aside */
    int lock_run, lock_on_start;
    char lock_path[4200];
    sb_run_lock lock;
} seen;

static void on_event(const sb_sweep_update *ev, void *user)
{
    seen *s = user;
    if (ev->kind == SB_SWEEP_UPDATE_TICK) {
        s->ticks++;
        return;
    }
    if (ev->run < 0 || ev->run >= MAX_RUNS) {
        s->bad++;
        return;
    }
    int k = (int)ev->run;
    switch (ev->kind) {
    case SB_SWEEP_UPDATE_STARTED:
        s->started[k]++;
        if (s->ended[k] || ev->slot < 0 || ev->config == NULL || strlen(ev->hash) != 16)
            s->bad++;
        if (s->lock_on_start && k == s->lock_run && s->started[k] == 1) {
            long holder = 0;
            sb_error err = {0};
            if (sb_run_lock_take(s->lock_path, &s->lock, &holder, &err) != SB_OK || holder != 0)
                s->bad++;
        }
        break;
    case SB_SWEEP_UPDATE_WAITING:
        s->waiting[k]++;
        s->locked_by[k] = ev->locked_by;
        s->waiting_slot[k] = ev->slot;
        if (s->ended[k] || ev->config == NULL || strlen(ev->hash) != 16)
            s->bad++;
        if (s->lock_path[0] != '\0')
            sb_run_lock_release(&s->lock); /* the run can go now */
        break;
    case SB_SWEEP_UPDATE_PROGRESS:
        s->progress[k]++;
        if (!s->started[k] || s->ended[k] || ev->step < s->last_step[k] ||
            ev->step > ev->total_steps)
            s->bad++;
        s->last_step[k] = ev->step;
        s->total[k] = ev->total_steps;
        break;
    case SB_SWEEP_UPDATE_ENDED:
        s->ended[k]++;
        s->outcome[k] = ev->outcome;
        if (ev->reason != NULL)
            snprintf(s->reason[k], sizeof s->reason[k], "%s", ev->reason);
        s->term_signal[k] = ev->term_signal;
        s->exit_code[k] = ev->exit_code;
        if (ev->started != (s->started[k] > 0))
            s->bad++;
        break;
    case SB_SWEEP_UPDATE_TICK: break;
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
    sb_sweep_exec_opts opts = {.workers = 2,
                               .threads = 1,
                               .results = dir,
                               .worker_exe = worker_exe != NULL ? worker_exe : binary,
                               .on_update = on_event,
                               .user = seen_events,
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
        assert_int_equal(row.r.status, SB_RUN_INTERRUPTED);
        assert_non_null(strstr(row.r.reason, "interrupted at update"));
        assert_true(row.r.checkpoint[0] != '\0');
        assert_int_equal(access(row.r.checkpoint, R_OK), 0);
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
        assert_int_equal(row.r.status, SB_RUN_FINISHED);
        assert_int_equal(row.r.attempts, 2);
        /* the worker was told to resume: its log says where it picked up */
        char log[4200], text[8192] = "";
        assert_int_equal(sb_run_store_log_path(dir, row.r.run_hash, log, sizeof log, &err), SB_OK);
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

/* The executor refuses a run for exactly the reason sb_sweep_check_run gives (what the dry
 * run prints): a value its key refuses (no configuration) and a model the registry lacks
 * (a configuration, refused by the check and recorded). */
static void test_refusals_match_the_check(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_sweep_exec_XXXXXX";
    assert_non_null(mkdtemp(dir));
    sb_sweep *s = load_text("method: grid\nparameters:\n  model:\n    values: [gru, bogus]\n"
                            "  lr:\n    values: [0.002, abc]\n");
    /* parameters in name order, the last fastest: run 0 gru at lr 0.002 (good), 1 bogus at
     * 0.002, 2 gru at abc, 3 bogus at abc */
    int64_t runs[3] = {1, 2, 3};
    seen ev = {0};
    sb_sweep_tally tally;
    sb_error err = {0};
    if (execute_quietly(s, runs, 3, dir, &ev, &tally, &err) != SB_OK)
        fail_msg("execute: %s", err.msg);
    assert_int_equal(tally.refused, 3);
    assert_int_equal(tally.done + tally.failed + tally.skipped, 0);
    for (int i = 0; i < 3; i++) {
        int k = (int)runs[i];
        sb_error why = {0};
        assert_int_equal(sb_sweep_check_run(s, k, NULL, &why), SB_ERR_INVALID);
        assert_int_equal(ev.started[k], 0);
        assert_int_equal(ev.outcome[k], SB_SWEEP_REFUSED);
        assert_string_equal(ev.reason[k], why.msg);
    }
    assert_non_null(strstr(ev.reason[1], "unknown --model 'bogus'"));
    assert_non_null(strstr(ev.reason[2], "--lr: 'abc' is not a finite number"));
    /* the good run passes the same check, with its configuration */
    sb_config *cfg = NULL;
    assert_int_equal(sb_sweep_check_run(s, 0, &cfg, &err), SB_OK);
    assert_non_null(cfg);
    sb_config_free(cfg);
    assert_int_equal(sb_sweep_check_run(s, 4, NULL, &err), SB_ERR_INVALID);
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
        cmocka_unit_test(test_every_key_is_a_train_flag),
        cmocka_unit_test(test_progress_record),
        cmocka_unit_test(test_select_matches_enumeration),
        cmocka_unit_test(test_select_errors),
        cmocka_unit_test(test_big_grids),
        cmocka_unit_test(test_duplicate_keys),
        cmocka_unit_test(test_refusals_match_the_check),
        cmocka_unit_test(test_execute_and_resume),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_locked_run_put_aside),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
