/* test_sweep_queue.c - the MPI sweep's policy in the library, public API only: the order a
 * coordinator hands a sweep's runs out in (sb_sweep_queue_*: finished runs left out, the
 * largest first, a run that evaluates saved weights held back while the run that trains
 * them is unsettled and their checkpoint is missing), and the coordinator itself
 * (sb_sweep_coordinate) driven over an in-process transport whose workers "train" a run by
 * recording it finished in the seed they were given. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "selectivbench/selectivbench.h"

/* A tiny task; widths 8 and 32, each trained (test_pretrained False) and evaluated from its
 * saved weights (True). */
static const char *grid =
    "method: grid\nparameters:\n  feat_size:\n    values: [8, 32]\n"
    "  test_pretrained:\n    values: [False, True]\n"
    "command:\n  - ${program}\n  - \"--model\"\n  - gru\n  - \"--vocab\"\n  - 5\n"
    "  - \"--amb\"\n  - 3\n  - \"--grammar_scale\"\n  - True\n  - \"--train_seqlen_max\"\n  - 8\n"
    "  - \"--test_seqlen_max\"\n  - 8\n  - \"--dataset_size\"\n  - 32\n  - \"--test_size\"\n"
    "  - 20\n  - \"--layers\"\n  - 1\n  - \"--batch_size\"\n  - 16\n  - ${args}\n";

/* The grid index of the run with this width and test_pretrained. */
static int64_t run_of(const sb_sweep *s, const char *width, const char *pretrained)
{
    for (int64_t k = 0; k < sb_sweep_count(s); k++)
        if (sb_sweep_run_matches(s, k, "feat_size", width) &&
            sb_sweep_run_matches(s, k, "test_pretrained", pretrained))
            return k;
    fail_msg("no run of width %s, test_pretrained %s", width, pretrained);
    return -1;
}

static void record_finished(const char *db_path, const sb_sweep *s, int64_t k)
{
    sb_error err = {0};
    sb_config *cfg = NULL;
    assert_int_equal(sb_sweep_config(s, k, &cfg, &err), SB_OK);
    sb_train_outcome out;
    memset(&out, 0, sizeof out);
    out.status = SB_RUN_FINISHED;
    out.test_acc = 0.5;
    out.test_loss = 1.0;
    out.train_acc = out.train_loss = out.wall_s = out.tokens_per_s = (double)NAN;
    out.valid_acc = out.valid_loss = (double)NAN;
    if (sb_results_record(db_path, cfg, &out, &err) != SB_OK)
        fail_msg("recording run %lld: %s", (long long)k, err.msg);
    sb_config_free(cfg);
}

static void test_queue_order_and_waits(void **state)
{
    (void)state;
    char dir[] = "/tmp/sb_test_queue_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char db_path[128], ckpt_dir[128], ckpt[256];
    snprintf(db_path, sizeof db_path, "%s/selectivbench.db", dir);
    snprintf(ckpt_dir, sizeof ckpt_dir, "%s/checkpoints", dir);
    sb_error err = {0};
    sb_sweep *s = NULL;
    assert_int_equal(sb_sweep_load_text("queue", grid, strlen(grid), &s, &err), SB_OK);
    sb_sweep_selection *sel = NULL;
    assert_int_equal(sb_sweep_select(s, NULL, &sel, &err), SB_OK);
    const int64_t train8 = run_of(s, "8", "False"), eval8 = run_of(s, "8", "True");
    const int64_t train32 = run_of(s, "32", "False"), eval32 = run_of(s, "32", "True");

    /* width 8's training is finished: left out of the queue, counted as skipped */
    record_finished(db_path, s, train8);
    sb_results *db = NULL;
    assert_int_equal(sb_results_open(db_path, &db, &err), SB_OK);
    sb_sweep_queue *q = NULL;
    int skipped = -1;
    assert_int_equal(sb_sweep_queue_make(s, sel, db, dir, &q, &skipped, &err), SB_OK);
    assert_int_equal(skipped, 1);
    assert_int_equal(sb_sweep_queue_size(q), 3);
    assert_int_equal(sb_sweep_queue_find(q, train8), -1);
    assert_null(sb_sweep_queue_run(q, 3));

    /* largest first: the width-32 training before any width-8 run */
    for (int64_t i = 1; i < sb_sweep_queue_size(q); i++)
        assert_true(sb_sweep_queue_run(q, i - 1)->flops >= sb_sweep_queue_run(q, i)->flops);
    const int64_t t32 = sb_sweep_queue_find(q, train32), e32 = sb_sweep_queue_find(q, eval32),
                  e8 = sb_sweep_queue_find(q, eval8);
    assert_true(t32 >= 0 && e32 >= 0 && e8 >= 0);
    assert_true(sb_sweep_queue_run(q, t32)->flops > sb_sweep_queue_run(q, e8)->flops);
    /* the evaluation shares its training's weights, and says it evaluates them */
    assert_string_equal(sb_sweep_queue_run(q, e32)->train_hash,
                        sb_sweep_queue_run(q, t32)->train_hash);
    assert_int_equal(sb_sweep_queue_run(q, e32)->pretrained, 1);
    assert_int_equal(sb_sweep_queue_run(q, t32)->pretrained, 0);
    assert_string_not_equal(sb_sweep_queue_run(q, e32)->hash, sb_sweep_queue_run(q, t32)->hash);

    /* hand out what may go: eval32 never while train32 is unsettled; eval8 goes (its
     * training is not in the queue: a worker finds the weights or says why not) */
    int blocked = -1;
    int64_t handed[3];
    int n = 0;
    for (int64_t i; (i = sb_sweep_queue_next(q, &blocked)) >= 0;) {
        assert_int_not_equal(i, e32);
        sb_sweep_queue_set(q, i, SB_QUEUE_RUNNING);
        handed[n++] = i;
    }
    assert_int_equal(n, 2);
    assert_int_equal(handed[0], t32 < e8 ? t32 : e8);
    assert_int_equal(blocked, 1); /* eval32 waits for a running run */
    /* train32 ends: eval32 may go */
    sb_sweep_queue_set(q, t32, SB_QUEUE_SETTLED);
    assert_int_equal(sb_sweep_queue_next(q, &blocked), e32);
    assert_int_equal(blocked, 0);

    /* a queue made again while train32 is pending: its weights on disk free eval32 at once */
    sb_sweep_queue_free(q);
    assert_int_equal(sb_sweep_queue_make(s, sel, db, dir, &q, NULL, &err), SB_OK);
    const sb_queued_run *r32 = sb_sweep_queue_run(q, sb_sweep_queue_find(q, eval32));
    sb_sweep_queue_set(q, sb_sweep_queue_find(q, train32), SB_QUEUE_RUNNING);
    sb_sweep_queue_set(q, sb_sweep_queue_find(q, eval8), SB_QUEUE_SETTLED);
    assert_int_equal(sb_sweep_queue_next(q, &blocked), -1);
    assert_int_equal(blocked, 1);
    assert_int_equal(mkdir(ckpt_dir, 0755), 0);
    snprintf(ckpt, sizeof ckpt, "%s/%s.safetensors", ckpt_dir, r32->train_hash);
    FILE *f = fopen(ckpt, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(sb_sweep_queue_next(q, &blocked), sb_sweep_queue_find(q, eval32));
    assert_int_equal(blocked, 0);
    /* settled runs are not handed out again */
    sb_sweep_queue_set(q, sb_sweep_queue_find(q, eval32), SB_QUEUE_SETTLED);
    assert_int_equal(sb_sweep_queue_next(q, NULL), -1);

    /* bad calls */
    assert_int_equal(sb_sweep_queue_make(NULL, sel, db, dir, &q, NULL, &err), SB_ERR_INVALID);
    assert_int_equal(sb_sweep_queue_size(NULL), 0);
    assert_int_equal(sb_sweep_queue_next(NULL, NULL), -1);
    assert_null(sb_sweep_queue_run(NULL, 0));
    sb_sweep_queue_set(NULL, 0, SB_QUEUE_SETTLED);

    sb_sweep_queue_free(q);
    sb_results_close(db);
    sb_sweep_selection_free(sel);
    sb_sweep_free(s);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- the coordinator over an in-process transport ------------------------------------ */

enum { WORKERS = 2, MAX_HANDED = 16 };

typedef struct fake {
    const sb_sweep *s;
    char dir[64];
    int ready[WORKERS + 1];   /* said READY */
    int64_t run[WORKERS + 1]; /* the run it trains, -1: idle */
    char *seed[WORKERS + 1];  /* the seed it was given */
    size_t seed_len[WORKERS + 1];
    int stops[WORKERS + 1];     /* STOPs received */
    int64_t handed[MAX_HANDED]; /* grid runs in the order they were handed out */
    int n_handed;
    int64_t done_before[MAX_HANDED]; /* for each hand-out, the DONE messages delivered before it */
    int n_done;
    char *reply;              /* the DONE's seed bytes, alive until the next receive */
    int cancel_after;         /* cancel (SIGTERM) once this many runs were handed out; 0: never */
    int fail_receive;         /* the transport breaks at the first receive */
    sb_sweep_outcome outcome; /* what a worker reports */
} fake;

/* A worker "trains" its run: the seed it was given, with the run recorded in it, goes back. */
static void train_in_seed(fake *f, int w, sb_coord_message *m)
{
    char path[128];
    snprintf(path, sizeof path, "%s/worker-%d.db", f->dir, w);
    sb_seed_remove(path);
    sb_error err = {0};
    if (f->seed_len[w] > 0)
        assert_int_equal(sb_seed_write(path, f->seed[w], f->seed_len[w], &err), SB_OK);
    if (f->outcome == SB_SWEEP_DONE)
        record_finished(path, f->s, f->run[w]);
    else { /* a failure: nothing recorded, the reason says why */
        FILE *touch = fopen(path, "ab");
        assert_non_null(touch);
        fclose(touch);
        snprintf(m->reason, sizeof m->reason, "worker %d: out of luck", w);
    }
    free(f->reply);
    f->reply = NULL;
    assert_int_equal(sb_seed_read(path, &f->reply, &m->seed_len, &err), SB_OK);
    m->seed = m->seed_len > 0 ? f->reply : NULL;
    sb_seed_remove(path);
}

static int fake_receive(void *user, double timeout_s, sb_coord_message *m)
{
    fake *f = user;
    (void)timeout_s;
    if (f->fail_receive)
        return -1;
    for (int w = 1; w <= WORKERS; w++)
        if (!f->ready[w]) {
            f->ready[w] = 1;
            m->worker = w;
            m->kind = SB_COORD_READY;
            snprintf(m->host, sizeof m->host, "host-%d", w);
            return 1;
        }
    for (int w = 1; w <= WORKERS; w++)
        if (f->run[w] >= 0) {
            m->worker = w;
            m->kind = SB_COORD_DONE;
            m->run = f->run[w];
            m->outcome = f->outcome;
            m->test_acc = 0.5;
            snprintf(m->host, sizeof m->host, "host-%d", w);
            train_in_seed(f, w, m);
            f->run[w] = -1;
            f->n_done++;
            return 1;
        }
    return 0;
}

static int fake_send_run(void *user, int worker, int64_t run, const char *seed, size_t len)
{
    fake *f = user;
    assert_true(worker >= 1 && worker <= WORKERS);
    assert_int_equal(f->run[worker], -1); /* only an idle worker gets a run */
    assert_int_equal(f->stops[worker], 0);
    assert_true(f->n_handed < MAX_HANDED);
    f->run[worker] = run;
    free(f->seed[worker]);
    f->seed[worker] = malloc(len > 0 ? len : 1);
    assert_non_null(f->seed[worker]);
    if (len > 0)
        memcpy(f->seed[worker], seed, len);
    f->seed_len[worker] = len;
    f->done_before[f->n_handed] = f->n_done;
    f->handed[f->n_handed++] = run;
    return 0;
}

static int fake_send_stop(void *user, int worker)
{
    fake *f = user;
    assert_true(worker >= 1 && worker <= WORKERS);
    assert_int_equal(f->run[worker], -1); /* never while it trains */
    f->stops[worker]++;
    return 0;
}

static int fake_cancel(void *user)
{
    const fake *f = user;
    return f->cancel_after > 0 && f->n_handed >= f->cancel_after ? 15 : 0;
}

static sb_status coordinate(fake *f, sb_sweep_selection *sel, sb_coord_tally *tally, sb_error *err)
{
    for (int w = 0; w <= WORKERS; w++) {
        f->ready[w] = 0, f->run[w] = -1, f->stops[w] = 0;
        free(f->seed[w]);
        f->seed[w] = NULL;
        f->seed_len[w] = 0;
    }
    f->n_handed = f->n_done = 0;
    sb_config *cfg = NULL;
    assert_int_equal(sb_config_create(&cfg, err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "results", f->dir, err), SB_OK);
    const sb_coord_settings io = {.receive = fake_receive,
                                  .send_run = fake_send_run,
                                  .send_stop = fake_send_stop,
                                  .cancel = fake_cancel,
                                  .user = f};
    sb_status st = sb_sweep_coordinate(f->s, sel, cfg, WORKERS, WORKERS + 1, &io, tally, err);
    sb_config_free(cfg);
    return st;
}

static void test_coordinator(void **state)
{
    (void)state;
    fake f = {.outcome = SB_SWEEP_DONE};
    snprintf(f.dir, sizeof f.dir, "/tmp/sb_test_coord_XXXXXX");
    assert_non_null(mkdtemp(f.dir));
    char db_path[128];
    snprintf(db_path, sizeof db_path, "%s/selectivbench.db", f.dir);
    sb_error err = {0};
    sb_sweep *s = NULL;
    assert_int_equal(sb_sweep_load_text("coord", grid, strlen(grid), &s, &err), SB_OK);
    f.s = s;
    sb_sweep_selection *sel = NULL;
    assert_int_equal(sb_sweep_select(s, NULL, &sel, &err), SB_OK);
    const int64_t train8 = run_of(s, "8", "False"), train32 = run_of(s, "32", "False"),
                  eval32 = run_of(s, "32", "True");
    record_finished(db_path, s, train8);

    /* a worker's transport that breaks: the coordinator says so */
    f.fail_receive = 1;
    sb_coord_tally tally;
    assert_int_equal(coordinate(&f, sel, &tally, &err), SB_ERR_RUNTIME);
    f.fail_receive = 0;

    /* cancelled after the first hand-out: nothing more goes out, the running run is awaited,
     * every worker is told to stop once */
    f.cancel_after = 1;
    assert_int_equal(coordinate(&f, sel, &tally, &err), SB_OK);
    assert_int_equal(tally.signal, 15);
    assert_int_equal(f.n_handed, 1);
    assert_int_equal(tally.done, 1);
    assert_int_equal(f.stops[1] + f.stops[2], 2);
    assert_int_equal(f.stops[1], 1);
    f.cancel_after = 0;

    /* the rest: every queued run finished in the database, placed on the worker that
     * trained it; the evaluation of width 32 only after its training came back */
    assert_int_equal(coordinate(&f, sel, &tally, &err), SB_OK);
    assert_int_equal(tally.signal, 0);
    assert_int_equal(tally.skipped, 2); /* train8 before, and the cancelled sweep's run */
    assert_int_equal(tally.queued, 2);
    assert_int_equal(tally.done, 2);
    assert_int_equal(tally.failed, 0);
    assert_int_equal(f.stops[1], 1);
    assert_int_equal(f.stops[2], 1);
    sb_results *db = NULL;
    assert_int_equal(sb_results_open_readonly(db_path, &db, &err), SB_OK);
    for (int64_t k = 0; k < sb_sweep_count(s); k++) {
        sb_config *cfg = NULL;
        char hash[17];
        assert_int_equal(sb_sweep_config(s, k, &cfg, &err), SB_OK);
        sb_config_run_hash(cfg, hash);
        sb_config_free(cfg);
        sb_result_row row;
        int found = 0;
        assert_int_equal(sb_results_find(db, hash, &row, &found, &err), SB_OK);
        assert_int_equal(found, 1);
        assert_int_equal(row.status, SB_RUN_FINISHED);
        if (k != train8) { /* trained here: where */
            assert_true(row.rank == 1 || row.rank == 2);
            char host[16];
            snprintf(host, sizeof host, "host-%d", (int)row.rank);
            assert_string_equal(row.host, host);
        }
    }
    sb_results_close(db);

    /* a fresh database: all four runs; eval32 waits for train32's DONE */
    sb_seed_remove(db_path);
    assert_int_equal(coordinate(&f, sel, &tally, &err), SB_OK);
    assert_int_equal(tally.done, 4);
    int t32 = -1, e32 = -1;
    for (int i = 0; i < f.n_handed; i++) {
        t32 = f.handed[i] == train32 ? i : t32;
        e32 = f.handed[i] == eval32 ? i : e32;
    }
    assert_true(t32 >= 0 && e32 > t32);
    assert_true(f.done_before[e32] > f.done_before[t32]);
    assert_int_equal(f.handed[0], train32); /* the largest first */

    /* workers that fail every run: counted, reasons kept, nothing recorded as finished */
    sb_seed_remove(db_path);
    f.outcome = SB_SWEEP_FAILED;
    assert_int_equal(coordinate(&f, sel, &tally, &err), SB_OK);
    assert_int_equal(tally.failed, f.n_handed);
    assert_int_equal(tally.done, 0);

    /* bad calls */
    const sb_coord_settings none = {0};
    assert_int_equal(sb_sweep_coordinate(s, sel, NULL, WORKERS, WORKERS + 1, &none, &tally, &err),
                     SB_ERR_INVALID);
    free(f.reply);
    for (int w = 0; w <= WORKERS; w++)
        free(f.seed[w]);
    sb_sweep_selection_free(sel);
    sb_sweep_free(s);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f.dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_order_and_waits),
        cmocka_unit_test(test_coordinator),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
