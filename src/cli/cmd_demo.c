/*
 * cmd_demo.c - `selectivbench demo`: what the project does today, in a few seconds.
 *
 * Builds the paper's grammar (vocab 41, 40 ambiguous letters of 40 states each), prints
 * its size and topological entropy, shows two training samples of task 2 (noisy gaps of
 * 1 to 10 frames), measures how fast training sets are generated, then trains a small
 * transformer and a GRU on a small task and prints their test accuracy.
 * TODO(#6): more models, a results table from the database and a figure.
 */
#include <stdlib.h>

#include "cli.h"
#include "data_show.h"
#include "selectivbench/task.h"
#include "selectivbench/timer.h"
#include "selectivbench/trainer.h"
#include "task_options.h"

int sb_cmd_demo(int argc, char **argv)
{
    sb_task_flags tf;
    sb_option opts[SB_TASK_MAX_OPTIONS + 2];
    int n = 0;
    sb_task_options_add(&tf, opts, &n, 0);
    tf.cfg.train_gap_max = 1.0; /* task 2: noisy gaps */
    tf.cfg.train_noise = 0.2;
    tf.cfg.dataset_size = 20000;
    int threads = 0;
    opts[n++] = (sb_option){"threads", SB_OPT_INT, &threads, 0, 1024, NULL, NULL,
                            "threads (default: all cores)", 0};
    int rc = sb_cli_parse("demo", "[task flags] (default: the paper's task 2, 20000 samples)",
                          opts, n, argc, argv, NULL, 0, NULL);
    if (rc >= 0)
        return rc;
    threads = sb_cli_threads(threads);
    sb_error err = {0};
    if (sb_task_options_finish(&tf, &err) != SB_OK)
        return sb_cli_fail("demo", &err);

    printf("== SelectivBench demo ==\n\n");
    printf("1. The grammar. Hidden states emit letters; 40 letters are ambiguous (40 states\n"
           "   each), so a model must track the state, not just the letter.\n");
    double t0 = sb_time_now();
    sb_task *task = NULL;
    if (sb_task_create(&tf.cfg, &task, &err) != SB_OK)
        return sb_cli_fail("demo", &err);
    double t_grammar = sb_time_now() - t0;
    const sb_grammar *g = task->grammar;
    printf("   %d states (= classifier outputs), %d transitions, topological entropy %.4f\n",
           g->n_states, g->n_transitions, g->topological_entropy);
    printf("   generated with its TE in %.1f ms (the reference needs ~10 s, plus ~200 s for "
           "the TE)\n\n",
           t_grammar * 1e3);

    printf("2. Two training samples (task 2: after each symbol a gap of 1-10 noisy frames):\n");
    sb_data_print_task(task, stdout);
    int64_t idx[2] = {0, 1};
    if (sb_data_show(task, SB_SPLIT_TRAIN, idx, 2, stdout, &err) != SB_OK) {
        sb_task_free(task);
        return sb_cli_fail("demo", &err);
    }

    printf("\n3. Generation speed (sequences + gaps of %lld training samples, %d thread%s):\n",
           (long long)task->cfg.dataset_size, threads, threads == 1 ? "" : "s");
    uint64_t hash = 0;
    int64_t symbols = 0;
    t0 = sb_time_now();
    if (sb_task_split_checksum(task, SB_SPLIT_TRAIN, threads, &hash, &symbols, &err) != SB_OK) {
        sb_task_free(task);
        return sb_cli_fail("demo", &err);
    }
    double dt = sb_time_now() - t0;
    double rate = (double)task->cfg.dataset_size / dt;
    printf("   %.3f s: %.0f samples/s, %.3g symbols/s (checksum %016llx)\n", dt, rate,
           (double)symbols / dt, (unsigned long long)hash);
    printf("   the paper's 200000-sample training set: %.1f s here; the reference needs 3-5 s "
           "per sample (~230 core-hours)\n",
           200000.0 / rate);
    sb_task_free(task);

    /* 4. training: the tiny task of the test suite, smaller */
    int64_t demo_samples = tf.cfg.dataset_size < 6000 ? tf.cfg.dataset_size : 6000;
    printf("\n4. Training (task: vocab 9, 8 ambiguous letters x 8 states, 50 elements, 0.1 s gaps;\n"
           "   %lld training samples in one pass, 500 test samples; width 64, 2 layers):\n",
           (long long)demo_samples);
    printf("   %-12s %10s %10s %10s %12s %8s\n", "model", "params", "test acc", "test loss",
           "tokens/s", "seconds");
    const char *models[2] = {"transformer", "gru"};
    for (int k = 0; k < 2; k++) {
        sb_run_config run = sb_run_config_default();
        snprintf(run.model, sizeof run.model, "%s", models[k]);
        run.task.grammar.vocab = 9;
        run.task.grammar.amb = 8;
        run.task.grammar.grammar_scale = 1;
        run.task.train_seqlen_max = run.task.test_seqlen_max = 50;
        run.task.dataset_size = demo_samples;
        run.task.test_size = 500;
        run.batch_size = 32;
        run.feat_size = 64;
        run.layers = 2;
        run.dropout = 0.0;
        run.lr = 2e-3;
        run.seed = run.task.grammar.seed = 1;
        sb_train_options opt = {.threads = threads, .mem_budget_gb = 2.0};
        sb_train_result res;
        if (sb_train(&run, &opt, &res, &err) != SB_OK)
            return sb_cli_fail("demo", &err);
        printf("   %-12s %10zu %10.4f %10.4f %12.0f %8.1f\n", models[k], res.params, res.test_acc,
               res.test_loss, res.tokens_per_s, res.wall_s);
        fflush(stdout);
    }
    printf("   (chance level is about 1/65; the paper's task has 1601 states and 200 elements)\n");
    printf("\nNext: selectivbench train --help, selectivbench models, selectivbench bench\n");
    return 0;
}
