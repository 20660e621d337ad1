/*
 * fuzz_record.c - libFuzzer target for sb_results_record_external (src/api/results_api.c),
 * the path that stores a run trained elsewhere (the Python binding's record_run). The input
 * is decoded into an sb_external_run (layout below): a status among the five a row can
 * have, none, or any int; a reason; params and state_size as raw
 * int64; the six metrics as raw doubles (NaN, infinities, negatives and huge values all
 * occur); 0..16 curve points of raw int64 steps and samples, a raw int split and raw
 * doubles. It is recorded for a fixed tiny task and the external model "torch_lstm" in a
 * fresh database of this process in /tmp, after, when the input's first byte asks for it,
 * a fixed run of the same configuration recorded "interrupted" or "finished".
 *
 * Checked: the call succeeds exactly when the documented rules accept the run (a status
 * of finished, failed, diverged or interrupted; counts >= -1; accuracies in [0, 1], losses,
 * wall_s, tokens_per_s, lr finite and >= 0, each or NaN; steps >= 0, samples >= -1, split
 * train, test or valid, each (step, split) once; no finished run there before). On success
 * the database holds exactly one run, read back with what was given (hash, model, status,
 * reason, counts, metrics, the validation accuracy and loss of the valid point at the
 * latest step; a finished run's ceiling in [0, 1]) and its curve: the points given, each
 * (step, split) once, ordered by step, then test, train, valid. On an error, the
 * message is one non-empty line and the database is as it was: no file or no run, or the
 * earlier run unchanged (its status, metrics, attempts and curve).
 *
 * Input layout (bytes past the end read as zero):
 *   flags u8        bit 0: an earlier run "interrupted"; bit 1: an earlier run "finished"
 *   status u8       % 8: 0..4 finished, failed, diverged, interrupted, running; 5 none
 *                   (SB_RUN_NONE); 6, 7: a raw i64, cut to an int
 *   reason u8       0: NULL, else a string of (reason - 1) raw bytes
 *   params i64, state_size i64
 *   test_acc, test_loss, train_acc, train_loss, wall_s, tokens_per_s: f64
 *   n_curve u8 % 17, then each point: step i64, samples i64, split i32, loss, acc, lr,
 *                   tokens_per_s, wall_s f64 (little-endian, as in memory)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "selectivbench/selectivbench.h"

#define MAX_CURVE 16

/* ---- the input ---- */

typedef struct reader {
    const uint8_t *p;
    size_t left;
} reader;

/* The next size bytes into out; zeros past the end of the input. */
static void take(reader *r, void *out, size_t size)
{
    size_t n = size < r->left ? size : r->left;
    memset(out, 0, size);
    if (n > 0)
        memcpy(out, r->p, n);
    r->p += n;
    r->left -= n;
}

static uint8_t take_u8(reader *r)
{
    uint8_t v;
    take(r, &v, sizeof v);
    return v;
}

static int64_t take_i64(reader *r)
{
    int64_t v;
    take(r, &v, sizeof v);
    return v;
}

static double take_f64(reader *r)
{
    double v;
    take(r, &v, sizeof v);
    return v;
}

/* A string of len raw bytes into buf[cap] (cut at an embedded NUL, as C reads it). */
static void take_string(reader *r, size_t len, char *buf, size_t cap)
{
    if (len >= cap)
        len = cap - 1;
    take(r, buf, len);
    buf[len] = '\0';
}

typedef struct decoded {
    sb_external_run run;
    int earlier; /* 0: none, 1: interrupted, 2: finished */
    char reason[256];
    sb_curve_point curve[MAX_CURVE];
} decoded;

static void decode(const uint8_t *data, size_t size, decoded *d)
{
    static const sb_run_status named[] = {SB_RUN_FINISHED, SB_RUN_FAILED, SB_RUN_DIVERGED,
                                          SB_RUN_INTERRUPTED, SB_RUN_RUNNING};
    reader r = {data, size};
    memset(d, 0, sizeof *d);
    uint8_t flags = take_u8(&r);
    d->earlier = (flags & 2) ? 2 : (flags & 1) ? 1 : 0;
    uint8_t status = take_u8(&r) % 8;
    if (status < 5)
        d->run.status = named[status];
    else if (status == 5)
        d->run.status = SB_RUN_NONE;
    else
        d->run.status = (sb_run_status)(int32_t)take_i64(&r);
    uint8_t reason = take_u8(&r);
    if (reason > 0) {
        take_string(&r, (size_t)reason - 1, d->reason, sizeof d->reason);
        d->run.reason = d->reason;
    }
    d->run.params = take_i64(&r);
    d->run.state_size = take_i64(&r);
    d->run.test_acc = take_f64(&r);
    d->run.test_loss = take_f64(&r);
    d->run.train_acc = take_f64(&r);
    d->run.train_loss = take_f64(&r);
    d->run.wall_s = take_f64(&r);
    d->run.tokens_per_s = take_f64(&r);
    d->run.n_curve = take_u8(&r) % (MAX_CURVE + 1);
    for (size_t i = 0; i < d->run.n_curve; i++) {
        sb_curve_point *p = &d->curve[i];
        p->step = take_i64(&r);
        p->samples = take_i64(&r);
        int32_t split;
        take(&r, &split, sizeof split);
        p->split = (sb_split)split;
        p->loss = take_f64(&r);
        p->acc = take_f64(&r);
        p->lr = take_f64(&r);
        p->tokens_per_s = take_f64(&r);
        p->wall_s = take_f64(&r);
    }
    d->run.curve = d->run.n_curve > 0 ? d->curve : NULL;
    d->run.code_version = "fuzz_record";
}

/* ---- the rules, as the header states them ---- */

static int acc_ok(double v)
{
    return isnan(v) || (v >= 0.0 && v <= 1.0);
}

static int amount_ok(double v)
{
    return isnan(v) || (isfinite(v) && v >= 0.0);
}

/* Whether the documented rules accept the run (the database aside). */
static int acceptable(const sb_external_run *run)
{
    sb_run_status s = run->status;
    if (s != SB_RUN_FINISHED && s != SB_RUN_FAILED && s != SB_RUN_DIVERGED &&
        s != SB_RUN_INTERRUPTED)
        return 0;
    if (run->params < -1 || run->state_size < -1)
        return 0;
    if (!acc_ok(run->test_acc) || !acc_ok(run->train_acc) || !amount_ok(run->test_loss) ||
        !amount_ok(run->train_loss) || !amount_ok(run->wall_s) || !amount_ok(run->tokens_per_s))
        return 0;
    for (size_t i = 0; i < run->n_curve; i++) {
        const sb_curve_point *p = &run->curve[i];
        if (p->step < 0 || p->samples < -1 ||
            (p->split != SB_SPLIT_TRAIN && p->split != SB_SPLIT_TEST &&
             p->split != SB_SPLIT_VALID) ||
            !amount_ok(p->loss) || !acc_ok(p->acc) || !amount_ok(p->lr) ||
            !amount_ok(p->tokens_per_s) || !amount_ok(p->wall_s))
            return 0;
        for (size_t k = 0; k < i; k++)
            if (run->curve[k].step == p->step && run->curve[k].split == p->split)
                return 0;
    }
    return 1;
}

/* ---- the database ---- */

static int same_number(double a, double b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

static int same_point(const sb_curve_point *a, const sb_curve_point *b)
{
    return a->step == b->step && a->samples == b->samples && a->split == b->split &&
           same_number(a->loss, b->loss) && same_number(a->acc, b->acc) &&
           same_number(a->lr, b->lr) && same_number(a->tokens_per_s, b->tokens_per_s) &&
           same_number(a->wall_s, b->wall_s);
}

/* What is stored: the runs (at most 2 read) and the first one's curve. */
typedef struct stored {
    int exists;    /* the database file exists */
    size_t n_runs; /* runs it holds */
    sb_result_row row;
    sb_curve_point *curve;
    size_t n_curve;
} stored;

static void stored_free(stored *s)
{
    sb_results_curve_free(s->curve);
    s->curve = NULL;
}

static void read_stored(const char *db_path, stored *out)
{
    memset(out, 0, sizeof *out);
    struct stat st;
    out->exists = stat(db_path, &st) == 0;
    if (!out->exists)
        return;
    sb_results *db = NULL;
    sb_error err = {0};
    fuzz_check(sb_results_open_readonly(db_path, &db, &err) == SB_OK,
               "the database the call left does not open read-only");
    size_t count = 0;
    fuzz_check(sb_results_count(db, NULL, &count, &err) == SB_OK, "the runs cannot be counted");
    sb_result_row rows[2];
    size_t n = 0;
    fuzz_check(sb_results_read(db, NULL, 0, rows, 2, &n, &err) == SB_OK, "the runs cannot be read");
    fuzz_check(n == count && n <= 1, "the database holds more runs than one, or miscounts them");
    out->n_runs = n;
    if (n == 1) {
        out->row = rows[0];
        fuzz_check(sb_results_curve(db, rows[0].run_hash, &out->curve, &out->n_curve, &err) ==
                       SB_OK,
                   "the curve of the stored run cannot be read");
    }
    sb_results_close(db);
}

/* The order of splits within a step: by their stored names, test, train, valid. */
static int split_rank(sb_split s)
{
    return s == SB_SPLIT_TEST ? 0 : s == SB_SPLIT_TRAIN ? 1 : 2;
}

/* The curve as a reader sees it: each (step, split) once, ordered by step, test first. */
static void check_curve_order(const stored *s)
{
    for (size_t i = 0; i < s->n_curve; i++) {
        const sb_curve_point *p = &s->curve[i];
        fuzz_check(p->step >= 0 && p->samples >= -1 &&
                       (p->split == SB_SPLIT_TRAIN || p->split == SB_SPLIT_TEST ||
                        p->split == SB_SPLIT_VALID) &&
                       acc_ok(p->acc) && amount_ok(p->loss) && amount_ok(p->lr) &&
                       amount_ok(p->tokens_per_s) && amount_ok(p->wall_s),
                   "a stored curve point is out of range");
        if (i == 0)
            continue;
        const sb_curve_point *q = &s->curve[i - 1];
        fuzz_check(q->step < p->step ||
                       (q->step == p->step && split_rank(q->split) < split_rank(p->split)),
                   "the curve is not ordered by step (test, train, valid) or repeats a point");
    }
}

/* A stored row is what was recorded: run (its status, reason, counts, metrics, curve). */
static void check_recorded(const stored *s, const sb_external_run *run, const char *hash)
{
    const sb_result_row *row = &s->row;
    fuzz_check(s->n_runs == 1, "an accepted record does not leave exactly one run");
    fuzz_check(strcmp(row->run_hash, hash) == 0, "the stored run has another hash");
    fuzz_check(strcmp(row->model, "torch_lstm") == 0, "the stored run has another model");
    fuzz_check(row->status == run->status, "the stored status is not the one given");
    fuzz_check(strcmp(row->reason, run->reason != NULL ? run->reason : "") == 0,
               "the stored reason is not the one given");
    fuzz_check(row->params == run->params && row->state_size == run->state_size,
               "the stored params or state_size are not the ones given");
    fuzz_check(row->params >= -1 && row->state_size >= -1, "a stored count is below -1");
    fuzz_check(acc_ok(row->test_acc) && acc_ok(row->train_acc) && amount_ok(row->test_loss) &&
                   amount_ok(row->train_loss) && amount_ok(row->wall_s) &&
                   amount_ok(row->tokens_per_s),
               "a stored metric is out of range");
    fuzz_check(same_number(row->test_acc, run->test_acc) &&
                   same_number(row->test_loss, run->test_loss) &&
                   same_number(row->train_acc, run->train_acc) &&
                   same_number(row->train_loss, run->train_loss) &&
                   same_number(row->wall_s, run->wall_s) &&
                   same_number(row->tokens_per_s, run->tokens_per_s),
               "a stored metric is not the one given");
    /* the validation metrics: the valid point at the latest step, else unknown */
    double valid_acc = (double)NAN, valid_loss = (double)NAN;
    int64_t valid_step = -1;
    for (size_t i = 0; i < run->n_curve; i++)
        if (run->curve[i].split == SB_SPLIT_VALID && run->curve[i].step > valid_step) {
            valid_step = run->curve[i].step;
            valid_acc = run->curve[i].acc;
            valid_loss = run->curve[i].loss;
        }
    fuzz_check(same_number(row->valid_acc, valid_acc) && same_number(row->valid_loss, valid_loss),
               "the stored validation metrics are not the latest valid point's");
    if (run->status == SB_RUN_FINISHED)
        fuzz_check(row->ceiling >= 0.0 && row->ceiling <= 1.0 &&
                       (isnan(row->effective_memory) || row->effective_memory >= 0.0) &&
                       isnan(row->effective_memory) == isnan(run->test_acc),
                   "a finished run's yardsticks are missing or out of range");
    else
        fuzz_check(isnan(row->ceiling) && isnan(row->effective_memory),
                   "an unfinished run has yardsticks");
    check_curve_order(s);
    fuzz_check(s->n_curve == run->n_curve, "the stored curve has another number of points");
    for (size_t i = 0; i < run->n_curve; i++) {
        int found = 0;
        for (size_t k = 0; k < s->n_curve && !found; k++)
            found = same_point(&run->curve[i], &s->curve[k]);
        fuzz_check(found, "a curve point given is not stored as given");
    }
}

/* A refused record changed nothing: the database is as before (b). */
static void check_unchanged(const stored *b, const stored *a)
{
    if (!b->exists) {
        fuzz_check(a->n_runs == 0, "a refused record left a run in a new database");
        return;
    }
    fuzz_check(a->exists && a->n_runs == b->n_runs, "a refused record changed the runs");
    if (b->n_runs == 0)
        return;
    const sb_result_row *x = &b->row, *y = &a->row;
    fuzz_check(strcmp(x->run_hash, y->run_hash) == 0 && x->status == y->status &&
                   strcmp(x->reason, y->reason) == 0 && x->attempts == y->attempts &&
                   x->params == y->params && x->state_size == y->state_size &&
                   same_number(x->test_acc, y->test_acc) &&
                   same_number(x->test_loss, y->test_loss) && same_number(x->ceiling, y->ceiling) &&
                   strcmp(x->finished_at, y->finished_at) == 0,
               "a refused record changed the stored run");
    fuzz_check(a->n_curve == b->n_curve, "a refused record changed the stored curve");
    for (size_t i = 0; i < a->n_curve; i++)
        fuzz_check(same_point(&a->curve[i], &b->curve[i]),
                   "a refused record changed a stored curve point");
}

/* ---- files ---- */

/* The folder of this process's database: /tmp/sb-fuzz-record-PID.d (its lock files go to
 * FOLDER/locks/). */
static void paths(char *dir, size_t dir_cap, char *db, size_t db_cap)
{
    fuzz_temp_path("record", ".d", dir, dir_cap);
    snprintf(db, db_cap, "%s/results.db", dir);
}

/* ---- the target ---- */

/* The fixed configuration: an external model on a tiny task (its ceiling is quick). */
static sb_config *make_config(void)
{
    static const char *const keys[][2] = {
        {"model", "torch_lstm"},
        {"vocab", "9"},
        {"amb", "8"},
        {"grammar_scale", "True"},
        {"train_seqlen_max", "12"},
        {"test_seqlen_max", "12"},
        {"dataset_size", "200"},
        {"test_size", "50"},
    };
    sb_config *cfg = NULL;
    sb_error err = {0};
    fuzz_check(sb_config_create(&cfg, &err) == SB_OK, "sb_config_create failed");
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        fuzz_check(sb_config_set_key(cfg, keys[i][0], keys[i][1], &err) == SB_OK,
                   "the fixed configuration does not set");
    return cfg;
}

/* The earlier run of the same configuration: a fixed outcome and a curve of two points. */
static void record_earlier(const char *db, const sb_config *cfg, sb_run_status status)
{
    /* step, samples, split, loss, acc, lr, tokens/s, wall s */
    static const sb_curve_point curve[2] = {
        {5, 160, SB_SPLIT_TEST, 1.5, 0.25, 1e-3, 500.0, 0.5},
        {5, 160, SB_SPLIT_TRAIN, 1.4, 0.3, 1e-3, 500.0, 0.5},
    };
    sb_external_run run = {.status = status,
                           .reason = "earlier",
                           .params = 100,
                           .state_size = 8,
                           .test_acc = 0.25,
                           .test_loss = 1.5,
                           .train_acc = 0.3,
                           .train_loss = 1.4,
                           .wall_s = 0.5,
                           .tokens_per_s = 500.0,
                           .curve = curve,
                           .n_curve = 2};
    sb_error err = {0};
    fuzz_check(sb_results_record_external(db, cfg, &run, NULL, &err) == SB_OK,
               "the earlier run cannot be recorded");
}

static sb_config *cfg; /* made at the first input, the same for every input */

static void free_config(void)
{
    sb_config_free(cfg);
    cfg = NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char hash[17];
    if (cfg == NULL) {
        cfg = make_config();
        sb_config_run_hash(cfg, hash);
        atexit(free_config);
    }
    decoded *d = malloc(sizeof *d);
    if (d == NULL)
        return 0;
    decode(data, size, d);

    char dir[256], db[300];
    paths(dir, sizeof dir, db, sizeof db);
    fuzz_temp_dir_remove(dir, db);
    if (d->earlier > 0)
        record_earlier(db, cfg, d->earlier == 2 ? SB_RUN_FINISHED : SB_RUN_INTERRUPTED);
    stored before, after;
    read_stored(db, &before);

    char got_hash[17] = "";
    sb_error err = {0};
    sb_status st = sb_results_record_external(db, cfg, &d->run, got_hash, &err);
    int expected = acceptable(&d->run) && d->earlier != 2;
    if ((st == SB_OK) != expected)
        fprintf(stderr, "fuzz_record: %s: %s\n", sb_status_name(st), err.msg);
    fuzz_check((st == SB_OK) == expected, expected ? "a run the rules accept is refused"
                                                   : "a run the rules refuse is recorded");
    read_stored(db, &after);
    if (st == SB_OK) {
        fuzz_check(strcmp(got_hash, hash) == 0, "the run hash returned is not the config's");
        check_recorded(&after, &d->run, hash);
    } else {
        fuzz_check(err.status == st, "the error's status is not the one returned");
        fuzz_check(err.msg[0] != '\0', "a refused record has no message");
        fuzz_check(strchr(err.msg, '\n') == NULL, "a refused record's message is not one line");
        check_unchanged(&before, &after);
    }
    stored_free(&before);
    stored_free(&after);
    fuzz_temp_dir_remove(dir, db);
    free(d);
    return 0;
}
