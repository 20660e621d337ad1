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

static const char *const section_names[] = {"all", "readout", "gates", "retention", NULL};
static const int section_bits[] = {SB_PROBE_ALL, SB_PROBE_READOUT, SB_PROBE_GATES,
                                   SB_PROBE_RETENTION};
static const char *const frame_names[] = {"symbol", "last", NULL};
static const char *const readout_names[] = {"lda", "ridge", NULL};

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
    sb_probe_settings po;
    sb_probe_settings_default(&po);
    int section = 0, frame = 0;
    const char *out_dir = NULL;
    opts[n++] = (sb_option){"section",
                            SB_OPT_CHOICE,
                            &section,
                            0,
                            0,
                            section_names,
                            "all|readout|gates|retention",
                            "what to probe (default all; gates asked alone is an error for a "
                            "model without input-dependent gates)",
                            0};
    opts[n++] = (sb_option){"probe_samples",
                            SB_OPT_INT64,
                            &po.train_samples,
                            1,
                            1e9,
                            NULL,
                            "N",
                            "training samples the readouts are fitted on (default 256)",
                            0};
    opts[n++] = (sb_option){"samples",
                            SB_OPT_INT64,
                            &po.test_samples,
                            0,
                            1e12,
                            NULL,
                            "N",
                            "test samples scored (default 0: the whole test split)",
                            0};
    int readout = (int)po.readout;
    opts[n++] = (sb_option){"readout",
                            SB_OPT_CHOICE,
                            &readout,
                            0,
                            0,
                            readout_names,
                            "lda|ridge",
                            "the linear readout: LDA (class means, pooled covariance) or ridge "
                            "regression onto one-hot targets (default lda)",
                            0};
    opts[n++] = (sb_option){"ridge",
                            SB_OPT_DOUBLE,
                            &po.ridge,
                            0,
                            1e6,
                            NULL,
                            "LAMBDA",
                            "shrinkage, relative to the mean diagonal of X^T X (ridge) or the "
                            "features' mean variance (LDA) (default 1e-3)",
                            0};
    opts[n++] = (sb_option){"probe_frame",
                            SB_OPT_CHOICE,
                            &frame,
                            0,
                            0,
                            frame_names,
                            "symbol|last",
                            "an element's feature row: its symbol frame or its window's last "
                            "frame (default symbol)",
                            0};
    opts[n++] = (sb_option){"retention_dur",
                            SB_OPT_DOUBLE,
                            &po.retention_dur,
                            0.1,
                            SB_MAX_GAP_SECONDS,
                            NULL,
                            "SECONDS",
                            "the long test gap of the retention section (default 10: 100 frames)",
                            0};
    opts[n++] = (sb_option){"retention_samples",
                            SB_OPT_INT,
                            &po.retention_samples,
                            1,
                            1000000,
                            NULL,
                            "N",
                            "long-gap test samples averaged (default 4)",
                            0};
    opts[n++] = (sb_option){"retention_element",
                            SB_OPT_INT,
                            &po.retention_element,
                            0,
                            1000000,
                            NULL,
                            "E",
                            "the long gap after the first element at index E or later that has "
                            "one (default 4; the last one with a gap if none)",
                            0};
    opts[n++] = (sb_option){"probe_bs", SB_OPT_INT, &po.batch, 1,
                            100000,     NULL,       "N",       "samples per forward (default 16)",
                            0};
    opts[n++] = (sb_option){"out",
                            SB_OPT_STRING,
                            &out_dir,
                            0,
                            0,
                            NULL,
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
    sb_config *recorded = NULL;
    int rc =
        sb_cli_run_or_checkpoint("probe", arg, argc, argv, ckpt, sizeof ckpt, run_id, &recorded);
    if (rc >= 0)
        return rc;
    /* the recorded configuration, then the flags set its keys by name */
    sb_status st = recorded != NULL ? SB_OK : sb_checkpoint_config(ckpt, &recorded, &err);
    if (st == SB_OK)
        st = sb_config_assign(rf->config, recorded, &err);
    sb_config_free(recorded);
    if (st != SB_OK && st != SB_ERR_INVALID) /* missing or corrupt file */
        return sb_cli_fail("probe", &err);
    rc = sb_cli_parse("probe", "RUN|CKPT [flags]", opts, n, argc - 1, argv + 1, NULL, 0, NULL);
    if (rc >= 0)
        return rc;
    sb_cli_threads(sb_run_flag(rf->config, "threads"));
    const sb_config *cfg = rf->config;
    if (sb_config_check(cfg, &err) != SB_OK)
        return sb_cli_fail("probe", &err);
    if (sb_run_flag(rf->config, "print_hashes"))
        return sb_cli_print_config_hashes(cfg);
    po.sections = section_bits[section];
    po.gates_required = section_bits[section] == SB_PROBE_GATES;
    po.frame = (sb_probe_frame)frame;
    po.readout = (sb_probe_readout)readout;

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
    st = sb_probe_checkpoint(ckpt, cfg, &po, dir, sb_run_flag(rf->config, "json") ? &json : NULL,
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
