/* train_tiny.c - the public API in one page: a tiny task and model set by name, one batch,
 * a few seconds of training with progress, the final accuracy read back from the result and
 * from the results database. Build: cc train_tiny.c $(pkg-config --cflags --libs selectivbench)
 * Run: ./a.out [RESULTS_DIR] (default ./train_tiny_results). */
#include <selectivbench/selectivbench.h>
#include <stdio.h>
#include <stdlib.h>

static int fail(const char *what, const sb_error *err)
{
    fprintf(stderr, "train_tiny: %s: %s\n", what, sb_error_message(err));
    return 1;
}

static void progress(const sb_progress *p, void *user)
{
    (void)user;
    if (p->is_evaluation || p->step % 8 == 0)
        printf("step %lld/%lld loss %.4f acc %.4f %.0f tokens/s%s\n", (long long)p->step,
               (long long)p->total_steps, p->loss, p->acc, p->tokens_per_s,
               p->is_evaluation ? " (evaluation)" : "");
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "train_tiny_results";
    const char *keys[][2] = {{"model", "gru"},
                             {"feat_size", "16"},
                             {"layers", "1"},
                             {"amb", "4"},
                             {"grammar_scale", "True"},
                             {"train_seqlen_max", "20"},
                             {"test_seqlen_max", "20"},
                             {"dataset_size", "512"},
                             {"test_size", "64"},
                             {"batch_size", "16"},
                             {"lr", "0.003"}};
    sb_error err = {0};
    sb_config *cfg = NULL;
    if (sb_config_create(&cfg, &err) != SB_OK)
        return fail("config", &err);
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (sb_config_set_key(cfg, keys[i][0], keys[i][1], &err) != SB_OK)
            return fail("config", &err);

    sb_task *task = NULL;
    sb_task_facts facts;
    sb_batch_shape shape;
    int64_t index[4] = {0, 1, 2, 3};
    if (sb_task_from_config(cfg, &task, &err) != SB_OK ||
        sb_task_batch_shape(task, SB_SPLIT_TRAIN, index, 4, &shape, &err) != SB_OK)
        return fail("task", &err);
    sb_task_get_facts(task, &facts);
    float *inputs = malloc(sizeof(float) * (size_t)shape.batch * shape.frames * shape.inputs);
    int32_t *targets = malloc(sizeof(int32_t) * (size_t)shape.batch * shape.frames);
    if (sb_task_read_batch(task, SB_SPLIT_TRAIN, index, 4, &shape, inputs, targets, NULL, NULL,
                           NULL, &err) != SB_OK)
        return fail("batch", &err);
    printf("task: %d states, TE %.3f; batch inputs [%d][%d][%d], first target %d\n", facts.states,
           facts.topological_entropy, shape.batch, shape.frames, shape.inputs, (int)targets[0]);
    free(inputs);
    free(targets);
    sb_task_free(task);

    /* where the run goes and on how many threads are keys like the rest */
    if (sb_config_set_key(cfg, "results", dir, &err) != SB_OK ||
        sb_config_set_key(cfg, "threads", "1", &err) != SB_OK)
        return fail("config", &err);
    sb_train_settings settings = {.progress = progress};
    sb_train_outcome out;
    if (sb_train_config(cfg, &settings, &out, &err) != SB_OK)
        return fail("train", &err);
    printf("trained %s: %llu parameters, test acc %.4f (%s)\n", out.run_hash,
           (unsigned long long)out.params, out.test_acc, sb_run_status_name(out.status));

    sb_results *db = NULL;
    sb_result_row row;
    int found = 0;
    if (sb_results_open_readonly(out.database, &db, &err) != SB_OK ||
        sb_results_find(db, out.run_hash, &row, &found, &err) != SB_OK)
        return fail("results", &err);
    printf("database %s: run %s %s, test acc %.4f\n", out.database, row.run_hash,
           found ? sb_run_status_name(row.status) : "missing", row.test_acc);
    sb_results_close(db);
    sb_config_free(cfg);
    return found && row.test_acc == out.test_acc ? 0 : 1;
}
