/*
 * cmd_eval.c - `selectivbench eval RUN|CKPT [flags]`: evaluate a run's checkpoint on the
 * test set.
 *
 * RUN is a run id (a unique prefix of the `run` column of `results`), looked up in the
 * results database of --results DIR or --db PATH (default results/): the run's checkpoint
 * and its stored configuration are used. CKPT is a checkpoint file: the configuration comes
 * from its metadata. Every flag given on the command line overrides the configuration
 * (typically the test settings: --test_dur for task 4's longer gaps, --test_size,
 * --test_bs). A checkpoint without our metadata (a state_dict saved by the reference) needs
 * the run's flags given explicitly. --dump FILE writes the first test batch (inputs,
 * logits, mask) as safetensors for cross-checks.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/run_options.h"
#include "selectivbench/selectivbench.h"

static int eval_with_flags(sb_run_flags *rf, int argc, char **argv)
{
    const char *usage = "RUN|CKPT [train.py flags to override] [--dump FILE] [--json]";
    const char *arg = NULL;
    int first = sb_cli_checkpoint_first("eval", argc, argv, &arg);
    if (first >= 0)
        return first;
    sb_option opts[SB_RUN_MAX_OPTIONS + 1];
    int n = 0;
    sb_error err = {0};
    if (sb_run_options_add(rf, SB_KEYS_RUNTIME, opts, &n, &err) != SB_OK)
        return sb_cli_fail("eval", &err);
    sb_options_add_key(rf->config, "dump", NULL, opts, &n);
    if (arg == NULL)
        return sb_cli_checkpoint_help("eval", usage, opts, n, argc, argv);
    /* a run id names a run of the results database: its checkpoint and configuration */
    char ckpt[4096], run_id[17];
    int rc = sb_cli_checkpoint_flags("eval", arg, opts, n, argc, argv, rf->config, ckpt,
                                     sizeof ckpt, run_id);
    if (rc >= 0)
        return rc;
    /* --db and --results were read from argv before the flags were parsed, to find a RUN
     * id's checkpoint (sb_cli_run_or_checkpoint) */
    int threads = sb_cli_threads(sb_run_flag(rf->config, "threads"));
    if (sb_config_check(rf->config, &err) != SB_OK)
        return sb_cli_fail("eval", &err);
    if (sb_run_flag(rf->config, "print_hashes"))
        return sb_cli_print_config_hashes(rf->config);

    sb_eval_outcome res; /* the threads as resolved here (affinity, quota, Slurm) */
    if (sb_run_set(rf->config, "threads", &err, "%d", threads) != SB_OK ||
        sb_evaluate_checkpoint(ckpt, rf->config, &res, &err) != SB_OK)
        return sb_cli_fail("eval", &err);
    const char *dump = sb_run_path(rf->config, "dump");
    if (sb_run_flag(rf->config, "json")) {
        sb_jw *j = sb_jw_open(stdout, 0);
        if (j == NULL) {
            sb_error_set(&err, SB_ERR_NOMEM, "out of memory");
            return sb_cli_fail("eval", &err);
        }
        sb_jw_object_begin(j);
        if (run_id[0] != '\0') {
            sb_jw_key(j, "run");
            sb_jw_string(j, run_id);
        }
        sb_jw_key(j, "checkpoint");
        sb_jw_string(j, ckpt);
        sb_jw_key(j, "test_acc");
        sb_jw_double(j, res.test_acc);
        sb_jw_key(j, "test_loss");
        sb_jw_double(j, res.test_loss);
        sb_jw_key(j, "test_size");
        sb_jw_int(j, res.test_size);
        sb_jw_key(j, "test_dur");
        sb_jw_double(j, res.test_gap_s);
        sb_jw_key(j, "valid_acc");
        sb_jw_double(j, res.valid_acc);
        sb_jw_key(j, "valid_loss");
        sb_jw_double(j, res.valid_loss);
        sb_jw_key(j, "valid_size");
        sb_jw_int(j, res.valid_size);
        sb_jw_object_end(j);
        sb_jw_close(j);
        printf("\n");
    } else {
        if (run_id[0] != '\0')
            printf("run %s, ", run_id);
        printf("%s: test acc %.4f, test loss %.4f (%lld test samples, gaps of %g s, %d "
               "thread%s)\n",
               ckpt, res.test_acc, res.test_loss, (long long)res.test_size, res.test_gap_s, threads,
               threads == 1 ? "" : "s");
        if (res.valid_size > 0)
            printf("validation acc %.4f, loss %.4f (%lld samples at the same gaps)\n",
                   res.valid_acc, res.valid_loss, (long long)res.valid_size);
        if (dump != NULL)
            printf("first test batch written to %s\n", dump);
    }
    return 0;
}

int sb_cmd_eval(int argc, char **argv)
{
    sb_run_flags rf = {0};
    int rc = eval_with_flags(&rf, argc, argv);
    sb_run_flags_free(&rf);
    return rc;
}
