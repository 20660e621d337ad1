/*
 * cmd_probe.c - `selectivbench probe CKPT [task flags] [--section S] [--json] [--out DIR]`:
 * what a trained model keeps and where (linear readouts by depth and lag, gates on symbol
 * versus gap frames, state norms along a long gap; docs/probe.md).
 *
 * RUN is a run id (a unique prefix of the `run` column of `results`, looked up in the
 * database of --results DIR or --db PATH): its checkpoint and stored configuration. CKPT is
 * a checkpoint file: the configuration comes from its metadata, as for eval. Flags override
 * it. Flags that change the task's inputs or states against the recorded task are refused
 * (the readouts would be meaningless). Figures (readout, gates, retention .png/.svg/.pdf) and
 * probe.json go to --out (default: the checkpoint's path without .safetensors, plus _probe).
 */
#include <string.h>

#include "selectivbench/selectivbench.h"

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/run_options.h"

static int probe_with_flags(sb_run_flags *rf, int argc, char **argv)
{
    const char *arg = NULL;
    const char *usage = "RUN|CKPT [train.py flags to override] [--section "
                        "all|readout|gates|retention] [--json] [--out DIR]";
    int first = sb_cli_checkpoint_first("probe", argc, argv, &arg);
    if (first >= 0)
        return first;
    sb_option opts[SB_RUN_MAX_OPTIONS + 13];
    int n = 0;
    sb_error err = {0};
    if (sb_run_options_add(rf, SB_KEYS_RUNTIME, opts, &n, &err) != SB_OK)
        return sb_cli_fail("probe", &err);
    const char *out_dir = NULL;
    static const char *const keys[] = {
        "section",       "probe_samples",     "readout",           "ridge",   "probe_frame",
        "retention_dur", "retention_samples", "retention_element", "probe_bs"};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
        sb_options_add_key(rf->config, keys[k], NULL, opts, &n);
    sb_options_add_key(rf->config, "samples", "test samples scored (0: the whole test split)", opts,
                       &n);
    opts[n++] = (sb_option){"out",
                            SB_OPT_STRING,
                            &out_dir,
                            "DIR",
                            "folder of the figures and probe.json (default: CKPT without "
                            ".safetensors, plus _probe)",
                            0};
    /* --db and --results (keys) are read from argv before the flags are parsed, to find a RUN
     * id's checkpoint (sb_cli_run_or_checkpoint) */
    if (arg == NULL)
        return sb_cli_checkpoint_help("probe", usage, opts, n, argc, argv);
    /* a run id names a run of the results database: its checkpoint and configuration */
    char ckpt[4096], run_id[17];
    int rc = sb_cli_checkpoint_flags("probe", arg, opts, n, argc, argv, rf->config, ckpt,
                                     sizeof ckpt, run_id);
    if (rc >= 0)
        return rc;
    sb_cli_threads(sb_run_flag(rf->config, "threads"));
    const sb_config *cfg = rf->config;
    if (sb_config_check(cfg, &err) != SB_OK)
        return sb_cli_fail("probe", &err);
    if (sb_run_flag(rf->config, "print_hashes"))
        return sb_cli_print_config_hashes(cfg);

    char dir[4096];
    if (out_dir != NULL) {
        snprintf(dir, sizeof dir, "%s", out_dir);
    } else {
        size_t len = strlen(ckpt);
        const char *ext = ".safetensors";
        if (len > strlen(ext) && strcmp(ckpt + len - strlen(ext), ext) == 0)
            len -= strlen(ext);
        snprintf(dir, sizeof dir, "%.*s_probe", (int)len, ckpt);
    }

    char *json = NULL, *summary = NULL;
    sb_status st =
        sb_probe_checkpoint(ckpt, cfg, dir, sb_run_flag(rf->config, "json") ? &json : NULL,
                            sb_run_flag(rf->config, "json") ? NULL : &summary, &err);
    if (st == SB_OK && json != NULL)
        printf("%s\n", json);
    if (st == SB_OK && summary != NULL)
        fputs(summary, stdout);
    sb_string_free(json);
    sb_string_free(summary);
    if (st != SB_OK)
        return sb_cli_fail("probe", &err);
    return 0;
}

int sb_cmd_probe(int argc, char **argv)
{
    sb_run_flags rf = {0};
    int rc = probe_with_flags(&rf, argc, argv);
    sb_run_flags_free(&rf);
    return rc;
}
