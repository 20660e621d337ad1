/* run_options.c - the flags of train, eval, probe and ceiling (see run_options.h). */
#include "cli/run_options.h"

#include <string.h>

sb_status sb_run_options_add(sb_run_flags *rf, sb_option *opts, int *n, sb_error *err)
{
    memset(rf, 0, sizeof *rf);
    sb_status st = sb_config_create(&rf->config, err);
    if (st != SB_OK)
        return st;
    rf->save_model = 1;
    rf->results_dir = "results";
    rf->mem_budget = 4.0;
    sb_options_add_keys(rf->config, SB_KEYS_RUN, opts, n);
    sb_option run[] = {
        {"save_model", SB_OPT_BOOL, &rf->save_model, 0, 1, NULL, NULL,
         "save a checkpoint at every evaluation (default True)", 0},
        {"continued_training", SB_OPT_SWITCH, &rf->continued_training, 0, 1, NULL, NULL,
         "continue from this configuration's checkpoint (same as --resume)", 0},
        {"resume", SB_OPT_SWITCH, &rf->continued_training, 0, 1, NULL, NULL,
         "continue from the checkpoint and its optimiser state", 0},
        {"only_createset", SB_OPT_SWITCH, &rf->only_createset, 0, 1, NULL, NULL,
         "build the task and stop (data is generated on the fly here)", 0},
        {"threads", SB_OPT_INT, &rf->threads, 0, SB_THREADS_MAX, NULL, NULL,
         "threads (default: all cores)", 0},
        {"results", SB_OPT_STRING, &rf->results_dir, 0, 0, NULL, "DIR",
         "results folder: database and checkpoints (default ./results)", 0},
        {"ckpt", SB_OPT_STRING, &rf->ckpt, 0, 0, NULL, "PATH",
         "checkpoint path (default DIR/checkpoints/<training hash>.safetensors)", 0},
        {"mem_budget", SB_OPT_DOUBLE, &rf->mem_budget, 0.01, 1e6, NULL, "GB",
         "activation memory for a step and for evaluation (default 4)", 0},
        {"json", SB_OPT_SWITCH, &rf->json, 0, 1, NULL, NULL,
         "end with one JSON object of final metrics on stdout", 0},
        {"quiet", SB_OPT_SWITCH, &rf->quiet, 0, 1, NULL, NULL, "no progress output", 0},
        {"print_hashes", SB_OPT_SWITCH, &rf->print_hashes, 0, 1, NULL, NULL,
         "print the run hash and the training hash of the configuration and stop", 0},
    };
    for (size_t i = 0; i < sizeof run / sizeof *run; i++)
        opts[(*n)++] = run[i];
    return SB_OK;
}

void sb_run_flags_free(sb_run_flags *rf)
{
    sb_config_free(rf->config);
    rf->config = NULL;
}
