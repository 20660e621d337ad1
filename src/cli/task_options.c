/* task_options.c - CLI options generated from the key table (see task_options.h). */
#include "cli/task_options.h"

#include <string.h>

/* A value's shape in --help: N, X, True|False, the choices, NAME or nothing (a switch). */
static const char *key_metavar(const sb_config_key *k, char *buf, size_t size)
{
    switch (k->kind) {
    case SB_KEY_INT:
    case SB_KEY_INT64:
    case SB_KEY_U64:
    case SB_KEY_OPT_INT: return "N";
    case SB_KEY_DOUBLE:
    case SB_KEY_OPT_DOUBLE: return "X";
    case SB_KEY_BOOL: return "True|False";
    case SB_KEY_SWITCH: return "";
    case SB_KEY_STRING: return "NAME";
    case SB_KEY_CHOICE:
        buf[0] = '\0';
        for (int c = 0; k->choices[c] != NULL; c++) {
            if (c > 0)
                strncat(buf, "|", size - strlen(buf) - 1);
            strncat(buf, k->choices[c], size - strlen(buf) - 1);
        }
        return strlen(buf) <= 20 ? buf : "NAME";
    }
    return "";
}

void sb_key_options_add(sb_run_config *cfg, sb_key_group group, sb_option *opts, int *n)
{
    /* one metavar buffer per key, for the choices; the table is fixed */
    static char choice_meta[128][32];
    for (int i = 0; i < sb_config_key_count(); i++) {
        const sb_config_key *k = sb_config_key_at(i);
        if (k->group > group)
            continue;
        const char *meta = key_metavar(k, choice_meta[i % 128], sizeof choice_meta[0]);
        opts[(*n)++] = (sb_option){k->name, SB_OPT_KEY, cfg, k->min, k->max, k->choices, meta,
                                   k->help, 0};
    }
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
