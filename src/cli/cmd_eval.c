/*
 * cmd_eval.c - `selectivbench eval CKPT [flags]`: evaluate a checkpoint on the test set.
 *
 * The run configuration comes from the checkpoint's metadata; every flag given on the
 * command line overrides it (typically the test settings: --test_dur for task 4's longer
 * gaps, --test_size, --test_bs). A checkpoint without our metadata (a state_dict saved by
 * the reference) needs the run's flags given explicitly. --dump FILE writes the first test
 * batch (inputs, logits, mask) as safetensors for cross-checks.
 */
#include <string.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/run_options.h"
#include "train/checkpoint.h"
#include "core/json_writer.h"
#include "train/trainer.h"
#include "train/run_setup.h"

int sb_cmd_eval(int argc, char **argv)
{
    const char *ckpt = NULL;
    int first = sb_cli_checkpoint_first(
        "eval", "CKPT [train.py flags to override] [--dump FILE] [--json]", argc, argv, &ckpt);
    if (first >= 0)
        return first;
    sb_run_flags rf;
    sb_option opts[SB_RUN_MAX_OPTIONS + 2];
    int n = 0;
    sb_run_options_add(&rf, opts, &n);
    const char *dump = NULL;
    opts[n++] = (sb_option){"dump", SB_OPT_STRING, &dump, 0, 0, NULL, "FILE",
                            "write the first test batch (inputs, logits, mask) as safetensors", 0};
    sb_error err = {0};
    /* the recorded configuration, then the flags set its keys by name */
    sb_run_config recorded;
    sb_status st = sb_checkpoint_read_config(ckpt, &recorded, &err);
    if (st == SB_OK)
        rf.cfg = recorded;
    else if (st != SB_ERR_INVALID) /* missing or corrupt file */
        return sb_cli_fail("eval", &err);
    /* parse from argv[3]: shift so that sb_cli_parse's first argument is argv[3] */
    int rc = sb_cli_parse("eval", "CKPT [flags]", opts, n, argc - 1, argv + 1, NULL, 0, NULL);
    if (rc >= 0)
        return rc;
    int threads = sb_cli_threads(rf.threads);
    if (sb_run_config_check(&rf.cfg, &err) != SB_OK)
        return sb_cli_fail("eval", &err);
    if (rf.print_hashes)
        return sb_cli_print_hashes(&rf.cfg);
    const sb_run_config *cfg = &rf.cfg;

    sb_task *task = NULL;
    sb_model *m = NULL;
    if ((st = sb_task_create(&cfg->task, &task, &err)) != SB_OK)
        return sb_cli_fail("eval", &err);
    sb_model_config mc = sb_run_config_model(cfg, task->n_inputs, task->grammar->d_output);
    if ((st = sb_model_create(&mc, cfg->seed, &m, &err)) == SB_OK)
        st = sb_checkpoint_load(ckpt, m, NULL, NULL, &err);
    double loss = 0, acc = 0;
    if (st == SB_OK && dump != NULL)
        st = sb_dump_first_batch(dump, task, m, cfg->test_bs, &err);
    if (st == SB_OK)
        st = sb_evaluate(task, m, cfg->test_bs, rf.mem_budget, &loss, &acc, &err);
    if (st == SB_OK) {
        if (rf.json) {
            sb_json j;
            sb_json_init(&j, stdout, 0);
            sb_json_object_begin(&j);
            sb_json_key(&j, "checkpoint");
            sb_json_string(&j, ckpt);
            sb_json_key(&j, "test_acc");
            sb_json_double(&j, acc);
            sb_json_key(&j, "test_loss");
            sb_json_double(&j, loss);
            sb_json_key(&j, "test_size");
            sb_json_int(&j, cfg->task.test_size);
            sb_json_key(&j, "test_dur");
            sb_json_double(&j, sb_task_test_duration(task));
            sb_json_object_end(&j);
            printf("\n");
        } else {
            printf("%s: test acc %.4f, test loss %.4f (%lld test samples, gaps of %g s, %d "
                   "thread%s)\n",
                   ckpt, acc, loss, (long long)cfg->task.test_size, sb_task_test_duration(task),
                   threads, threads == 1 ? "" : "s");
            if (dump != NULL)
                printf("first test batch written to %s\n", dump);
        }
    }
    sb_model_free(m);
    sb_task_free(task);
    if (st != SB_OK)
        return sb_cli_fail("eval", &err);
    return 0;
}
