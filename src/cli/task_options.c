/* task_options.c - CLI options generated from the key table (see task_options.h). */
#include "cli/task_options.h"

#include <string.h>

#include "cli/run_options.h" /* sb_cli_config_view */

void sb_key_options_add(sb_run_config *cfg, sb_key_group group, sb_option *opts, int *n)
{
    sb_options_add_keys(sb_cli_config_view(cfg), (int)group, opts, n);
}

void sb_task_options_add(sb_task_flags *tf, sb_option *opts, int *n, int grammar_only)
{
    memset(tf, 0, sizeof *tf);
    tf->run = sb_run_config_default();
    tf->cfg = tf->run.task;
    sb_key_options_add(&tf->run, grammar_only ? SB_KEY_GROUP_GRAMMAR : SB_KEY_GROUP_TASK, opts,
                       n);
}

sb_status sb_task_options_finish(sb_task_flags *tf, sb_error *err)
{
    (void)err;
    tf->cfg = tf->run.task;
    return SB_OK;
}
