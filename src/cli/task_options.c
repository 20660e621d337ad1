/* task_options.c - CLI options for the task keys (see task_options.h). */
#include "cli/task_options.h"

sb_status sb_task_options_add(sb_task_flags *tf, sb_option *opts, int *n, int grammar_only,
                              sb_error *err)
{
    sb_status st = sb_config_create(&tf->config, err);
    if (st != SB_OK)
        return st;
    sb_options_add_keys(tf->config, grammar_only ? SB_KEYS_GRAMMAR : SB_KEYS_TASK, opts, n);
    return SB_OK;
}

void sb_task_flags_free(sb_task_flags *tf)
{
    sb_config_free(tf->config);
    tf->config = NULL;
}
