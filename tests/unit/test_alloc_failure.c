/*
 * test_alloc_failure.c - fault simulation in the manner of SQLite's: a short training run
 * (task, model, steps, evaluations, checkpoints) is counted for its N allocations, then run
 * again N times with allocation i made to fail (once, then from i on). Every run must end
 * with SB_OK (the failure was absorbed) or SB_ERR_NOMEM with a message, never another
 * status and never a crash, and leave as many live blocks as it found (no leak). The same
 * loop runs over the creation and one training step of every registered model.
 *
 * jansson is given the hook's functions (json_set_alloc_funcs), so its allocations fail in
 * turn as well. Memory allocated by OpenBLAS, FFTW and libc (open_memstream, stdio) is
 * outside the hook and is not failed here.
 */
#include <dirent.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "core/alloc.h"
#include "model/model.h"
#include "ops/ops.h"
#include "task/task.h"
#include "test_util.h"
#include "train/run_setup.h"
#include "train/trainer.h"

static char tmpdir[256];

/* what the loop is doing, printed if an assertion aborts the process */
static char current_case[256];

static void on_assert(const char *file, int line, const char *cond)
{
    (void)file, (void)line, (void)cond;
    fprintf(stderr, "assertion failed during: %s\n", current_case);
}

/* jansson's parser reports some failed allocations as syntax errors ("string expected"),
 * which the reader can only pass on as a corrupt checkpoint (SB_ERR_IO). Set when the failed
 * allocation was jansson's; counts the runs where that was the outcome. */
static int jansson_failed;
static long jansson_misreported;

static void *jansson_malloc(size_t bytes)
{
    long failures = sb_alloc_failures();
    void *p = sb_malloc(bytes);
    if (sb_alloc_failures() != failures)
        jansson_failed = 1;
    return p;
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sb_test_alloc_XXXXXX");
    if (mkdtemp(tmpdir) == NULL)
        return -1;
    sb_set_assert_hook(on_assert);
    /* jansson (the checkpoints' headers) allocates through the hook too, in this test */
    json_set_alloc_funcs(jansson_malloc, sb_free);
    omp_set_num_threads(1); /* the same allocations in the same order on every run */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return test_remove_dir(tmpdir);
}

/* The status of one run under an injected failure: SB_OK, or SB_ERR_NOMEM with a message;
 * no block left behind. */
static void check_outcome(const char *what, long i, const char *mode, sb_status st,
                          const sb_error *err, long live_before)
{
    long failed = sb_alloc_failures();
    sb_alloc_fail_after(-1, SB_ALLOC_FAIL_ONCE);
    if (st == SB_ERR_IO && jansson_failed && strstr(err->msg, "header is not valid JSON") != NULL)
        jansson_misreported++;
    else if (st != SB_OK && st != SB_ERR_NOMEM)
        fail_msg("%s, allocation %ld failing (%s): status '%s' (%s), expected out of memory", what,
                 i, mode, sb_status_name(st), err->msg);
    if (st == SB_ERR_NOMEM && err->msg[0] == '\0')
        fail_msg("%s, allocation %ld failing (%s): out of memory without a message", what, i, mode);
    if (st == SB_ERR_NOMEM && failed == 0)
        fail_msg("%s, allocation %ld (%s): out of memory with no allocation failed: %s", what, i,
                 mode, err->msg);
    long live = sb_alloc_live();
    if (live != live_before)
        fail_msg("%s, allocation %ld failing (%s): %ld blocks leaked", what, i, mode,
                 live - live_before);
}

/* ---- a short training run -------------------------------------------------------------- */

/* A 1-layer width-8 model on a tiny task: 4 updates of 4 samples, an evaluation (and a
 * checkpoint) after every 2, on a test split of 6 samples in batches of 4. */
static sb_run_config tiny_run(const char *model)
{
    sb_run_config c = sb_run_config_default();
    snprintf(c.model, sizeof c.model, "%s", model);
    c.task.grammar.vocab = 6, c.task.grammar.amb = 3, c.task.grammar.grammar_scale = 1;
    c.task.train_seqlen_max = c.task.test_seqlen_max = 6;
    c.task.train_gap_max = 0.3;
    c.task.dataset_size = 16;
    c.task.test_size = 6;
    c.feat_size = 8;
    c.layers = 1;
    c.batch_size = 4;
    c.test_bs = 4;
    c.epoch_size = 8;
    c.dropout = 0.1;
    c.lr = 3e-3;
    c.seed = c.task.grammar.seed = 3;
    return c;
}

/* 1 if a checkpoint's temporary file (*.tmp) was left in the folder. */
static int temp_file_left(void)
{
    DIR *d = opendir(tmpdir);
    assert_non_null(d);
    int found = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (len > 4 && strcmp(e->d_name + len - 4, ".tmp") == 0)
            found = 1;
    }
    closedir(d);
    return found;
}

/* One run of the tiny training into <tmpdir>/<model>.safetensors; resume: continue from
 * the checkpoint there; stop_after: stop at the first checkpoint after that many updates. */
static sb_status train_once(const sb_run_config *c, int resume, int64_t stop_after,
                            sb_train_outcome *res, sb_error *err)
{
    char ckpt[512];
    snprintf(ckpt, sizeof ckpt, "%s/%s.safetensors", tmpdir, c->model);
    sb_train_options opt = {.threads = 1,
                            .ckpt_path = ckpt,
                            .mem_budget_gb = 1.0,
                            .resume = resume,
                            .stop_after = stop_after,
                            .arena_block_bytes = 4096};
    memset(err, 0, sizeof *err);
    return sb_train(c, &opt, res, err);
}

/* A file's bytes, kept to put a checkpoint back before every resumed run. */
typedef struct saved_file {
    char path[512];
    unsigned char *bytes;
    long size;
} saved_file;

static void save_file(saved_file *f, const char *path)
{
    snprintf(f->path, sizeof f->path, "%s", path);
    FILE *in = fopen(path, "rb");
    assert_non_null(in);
    fseek(in, 0, SEEK_END);
    f->size = ftell(in);
    fseek(in, 0, SEEK_SET);
    f->bytes = malloc((size_t)f->size);
    assert_non_null(f->bytes);
    assert_int_equal(fread(f->bytes, 1, (size_t)f->size, in), (size_t)f->size);
    fclose(in);
}

static void restore_file(const saved_file *f)
{
    FILE *out = fopen(f->path, "wb");
    assert_non_null(out);
    assert_int_equal(fwrite(f->bytes, 1, (size_t)f->size, out), (size_t)f->size);
    assert_int_equal(fclose(out), 0);
}

/* Runs `model`'s tiny training (resume 0: from scratch; 1: continued from the checkpoint of
 * its first two updates, weights and optimiser state) once to count its allocations, then
 * once per allocation with that one failing, in both modes. Returns the count. */
static long fail_every_allocation_of_training(const char *model, int resume)
{
    sb_run_config c = tiny_run(model);
    sb_train_outcome res;
    sb_error err;
    saved_file saved[2] = {{{0}, NULL, 0}, {{0}, NULL, 0}};
    const char *what = resume ? "resumed training" : "training";
    if (resume) {
        if (train_once(&c, 0, 2, &res, &err) != SB_OK)
            fail_msg("%s: the interrupted run failed: %s", model, err.msg);
        assert_int_equal(res.status, SB_RUN_INTERRUPTED);
        char path[512];
        snprintf(path, sizeof path, "%s/%s.safetensors", tmpdir, model);
        save_file(&saved[0], path);
        snprintf(path, sizeof path, "%s/%s.optim.safetensors", tmpdir, model);
        save_file(&saved[1], path);
    }
    long live0 = sb_alloc_live(), count0 = sb_alloc_count();
    snprintf(current_case, sizeof current_case, "%s %s, no failure", model, what);
    if (train_once(&c, resume, 0, &res, &err) != SB_OK)
        fail_msg("%s: the %s without failures failed: %s", model, what, err.msg);
    const long n = sb_alloc_count() - count0;
    assert_int_equal(sb_alloc_live(), live0);
    assert_true(n > 0);
    assert_int_equal(res.n_evals, resume ? 1 : 2);
    assert_int_equal(res.steps, 4);
    const sb_alloc_fail_mode modes[2] = {SB_ALLOC_FAIL_ONCE, SB_ALLOC_FAIL_ALWAYS};
    const char *mode_names[2] = {"once", "always"};
    for (int k = 0; k < 2; k++)
        for (long i = 0; i < n; i++) {
            snprintf(current_case, sizeof current_case, "%s %s, allocation %ld of %ld (%s)", model,
                     what, i, n, mode_names[k]);
            if (resume) {
                restore_file(&saved[0]);
                restore_file(&saved[1]);
            }
            jansson_failed = 0;
            sb_alloc_fail_after(i, modes[k]);
            sb_status st = train_once(&c, resume, 0, &res, &err);
            if (getenv("SB_ALLOC_VERBOSE") != NULL)
                print_message("%s: allocation %ld (%s): %s\n", current_case, i, mode_names[k],
                              st == SB_OK ? "absorbed" : err.msg);
            check_outcome(current_case, i, mode_names[k], st, &err, live0);
            if (st != SB_OK)
                assert_int_equal(res.status, SB_RUN_FAILED);
            assert_false(temp_file_left());
        }
    free(saved[0].bytes);
    free(saved[1].bytes);
    return n;
}

static void test_training_under_failures(void **state)
{
    (void)state;
    /* gru evaluates streamed, the transformer on whole sequences; resuming (the checkpoint
     * reader) is the same code for both, run once */
    const char *models[2] = {"gru", "transformer"};
    for (int k = 0; k < 2; k++)
        for (int resume = 0; resume < (k == 0 ? 2 : 1); resume++) {
            long n = fail_every_allocation_of_training(models[k], resume);
            print_message("%s%s: %ld allocations in the run, each failed in turn\n", models[k],
                          resume ? " (resumed)" : "", n);
        }
    print_message("%ld runs: a failure inside jansson's parser reported as a corrupt header\n",
                  jansson_misreported);
    current_case[0] = '\0';
}

/* ---- every registered model: creation, a training step, a streamed chunk ------------- */

enum { I = 5, O = 7, B = 2, T = 6 };

typedef struct step_args {
    const sb_model *m;
    const real *x;
    const int32_t *target;
    const uint8_t *valid;
} step_args;

static void train_step(sb_graph *g, void *arg)
{
    step_args *a = arg;
    int shape[3] = {B, T, I};
    sb_tensor *x = sb_tensor_new(g, 3, shape);
    memcpy(x->data, a->x, x->size * sizeof *x->data);
    sb_tensor *logits = sb_model_forward(g, a->m, x);
    sb_tensor *loss = sb_cross_entropy(g, logits, a->target, a->valid, 1, NULL);
    sb_tensor_grad(g, loss)[0] = 1;
    sb_graph_backward(g);
}

typedef struct stream_args {
    const sb_model *m;
    const real *x;
    real *const *states;
} stream_args;

static void stream_chunk(sb_graph *g, void *arg)
{
    stream_args *a = arg;
    int shape[3] = {B, T, I};
    sb_tensor *x = sb_tensor_new(g, 3, shape);
    memcpy(x->data, a->x, x->size * sizeof *x->data);
    sb_model_hidden_stream(g, a->m, x, a->states);
}

/* Creates a model of `type`, runs one training step and (if it streams) one streamed chunk.
 * Any failure is returned with its message; everything is freed either way. */
static sb_status model_round(const sb_layer_type *type, sb_error *err)
{
    const int D = type->test_width > 0 ? type->test_width : 8;
    sb_model_config cfg = {.d_input = I,
                           .d_output = O,
                           .d_model = D,
                           .n_layers = 1,
                           .d_state = 4,
                           .n_head = 2,
                           .dropout = 0.1,
                           .rope_base = 1000};
    snprintf(cfg.model, sizeof cfg.model, "%s", type->name);
    real x[B * T * I];
    int32_t target[B * T];
    uint8_t valid[B * T];
    for (int i = 0; i < B * T * I; i++)
        x[i] = (real)((i * 7) % 5 == 0);
    for (int i = 0; i < B * T; i++) {
        target[i] = (i * 3) % O;
        valid[i] = 1;
    }
    sb_model *m = NULL;
    sb_status st = sb_model_create_type(type, &cfg, 5, &m, err);
    if (st != SB_OK)
        return st;
    sb_graph g;
    sb_graph_init(&g, 4096); /* small blocks: more of the arena's allocations to fail */
    g.record = 1;
    g.training = 1;
    step_args sa = {m, x, target, valid};
    st = sb_graph_run(&g, train_step, &sa, err);
    real *state_buf = NULL, *states[1] = {NULL};
    if (st == SB_OK && sb_model_can_stream(m)) {
        size_t floats = (size_t)B * type->stream_state_floats(&cfg);
        state_buf = sb_calloc(floats > 0 ? floats : 1, sizeof *state_buf);
        if (state_buf == NULL) {
            st = sb_error_set(err, SB_ERR_NOMEM, "out of memory for the stream state");
        } else {
            states[0] = state_buf;
            sb_graph_reset(&g);
            g.record = 0;
            g.training = 0;
            stream_args ca = {m, x, states};
            st = sb_graph_run(&g, stream_chunk, &ca, err);
        }
    }
    sb_free(state_buf);
    sb_graph_free(&g);
    sb_model_free(m);
    return st;
}

static void test_every_model_under_failures(void **state)
{
    (void)state;
    long total = 0;
    int models = 0;
    for (const sb_layer_type *const *t = sb_layer_types(); *t != NULL; t++, models++) {
        const sb_layer_type *type = *t;
        sb_error err = {0};
        long live0 = sb_alloc_live(), count0 = sb_alloc_count();
        snprintf(current_case, sizeof current_case, "%s model, no failure", type->name);
        if (model_round(type, &err) != SB_OK)
            fail_msg("%s: the round without failures failed: %s", type->name, err.msg);
        const long n = sb_alloc_count() - count0;
        assert_int_equal(sb_alloc_live(), live0);
        total += n;
        for (int k = 0; k < 2; k++)
            for (long i = 0; i < n; i++) {
                const char *mode = k == 0 ? "once" : "always";
                snprintf(current_case, sizeof current_case, "%s model, allocation %ld of %ld (%s)",
                         type->name, i, n, mode);
                memset(&err, 0, sizeof err);
                sb_alloc_fail_after(i, k == 0 ? SB_ALLOC_FAIL_ONCE : SB_ALLOC_FAIL_ALWAYS);
                sb_status st = model_round(type, &err);
                check_outcome(type->name, i, mode, st, &err, live0);
            }
    }
    print_message("%d models: %ld allocations, each failed in turn\n", models, total);
    current_case[0] = '\0';
}

/* ---- a task with a larger grammar (random.sample's heap pool: more than 64 letters) ---- */

static void test_large_task_under_failures(void **state)
{
    (void)state;
    sb_run_config c = tiny_run("gru");
    c.task.grammar.vocab = 80, c.task.grammar.amb = 20;
    sb_error err = {0};
    sb_task *task = NULL;
    long live0 = sb_alloc_live(), count0 = sb_alloc_count();
    snprintf(current_case, sizeof current_case, "task of vocab 80, no failure");
    if (sb_task_create(&c.task, &task, &err) != SB_OK)
        fail_msg("the task without failures failed: %s", err.msg);
    sb_task_free(task);
    const long n = sb_alloc_count() - count0;
    assert_int_equal(sb_alloc_live(), live0);
    for (int k = 0; k < 2; k++)
        for (long i = 0; i < n; i++) {
            const char *mode = k == 0 ? "once" : "always";
            snprintf(current_case, sizeof current_case,
                     "task of vocab 80, allocation %ld of %ld (%s)", i, n, mode);
            memset(&err, 0, sizeof err);
            task = NULL;
            sb_alloc_fail_after(i, k == 0 ? SB_ALLOC_FAIL_ONCE : SB_ALLOC_FAIL_ALWAYS);
            sb_status st = sb_task_create(&c.task, &task, &err);
            sb_task_free(task);
            check_outcome(current_case, i, mode, st, &err, live0);
        }
    print_message("task of vocab 80: %ld allocations, each failed in turn\n", n);
    current_case[0] = '\0';
}

/* ---- the hook itself --------------------------------------------------------------------- */

static void test_hook_modes(void **state)
{
    (void)state;
    long live0 = sb_alloc_live();
    void *p[4];
    sb_alloc_fail_after(1, SB_ALLOC_FAIL_ONCE);
    for (int i = 0; i < 4; i++)
        p[i] = sb_malloc(16);
    assert_non_null(p[0]);
    assert_null(p[1]);
    assert_non_null(p[2]);
    assert_non_null(p[3]);
    assert_int_equal(sb_alloc_failures(), 1);
    assert_int_equal(sb_alloc_live(), live0 + 3);
    for (int i = 0; i < 4; i++)
        sb_free(p[i]);
    sb_alloc_fail_after(1, SB_ALLOC_FAIL_ALWAYS);
    p[0] = sb_calloc(2, 8);
    p[1] = sb_aligned_alloc(64, 100);
    p[2] = sb_realloc(p[0], 64); /* fails: p[0] stays allocated */
    assert_non_null(p[0]);
    assert_null(p[1]);
    assert_null(p[2]);
    assert_int_equal(sb_alloc_failures(), 2);
    sb_alloc_fail_after(-1, SB_ALLOC_FAIL_ONCE);
    p[1] = sb_aligned_alloc(64, 100);
    assert_non_null(p[1]);
    assert_int_equal((uintptr_t)p[1] % 64, 0);
    sb_free(p[0]);
    sb_free(p[1]);
    assert_int_equal(sb_alloc_live(), live0);
}

/* After each test: a test that ended early (a failed check, a crash cmocka caught) names
 * the run it was in; one that finished cleared the name. */
static int name_unfinished_case(void **state)
{
    (void)state;
    if (current_case[0] != '\0')
        fprintf(stderr, "the test stopped during: %s\n", current_case);
    current_case[0] = '\0';
    sb_alloc_fail_after(-1, SB_ALLOC_FAIL_ONCE);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_hook_modes, name_unfinished_case),
        cmocka_unit_test_teardown(test_training_under_failures, name_unfinished_case),
        cmocka_unit_test_teardown(test_every_model_under_failures, name_unfinished_case),
        cmocka_unit_test_teardown(test_large_task_under_failures, name_unfinished_case),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
