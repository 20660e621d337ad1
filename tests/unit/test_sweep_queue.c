/* test_sweep_queue.c - the order a coordinator hands a sweep's runs out in (sb_sweep_queue_*,
 * the MPI sweep's policy in the library): finished runs left out, the largest first, and a
 * run that evaluates saved weights held back while the run that trains them is unsettled
 * and their checkpoint is missing. Public API only. */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_order_and_waits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
