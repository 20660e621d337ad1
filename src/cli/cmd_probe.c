/*
 * cmd_probe.c - `selectivbench probe CKPT [task flags] [--section S] [--json] [--out DIR]`:
 * what a trained model keeps and where (linear readouts by depth and lag, gates on symbol
 * versus gap frames, state norms along a long gap; docs/probe.md).
 *
 * The run configuration comes from the checkpoint's metadata, as for eval; flags override
 * it. Flags that change the task's inputs or states against the recorded task are refused
 * (the readouts would be meaningless). Figures (readout, gates, retention .png/.svg/.pdf) and
 * probe.json go to --out (default: the checkpoint's path without .safetensors, plus _probe).
 */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/run_options.h"
#include "train/checkpoint.h"
#include "core/json_writer.h"
#include "train/probe.h"
#include "train/run_setup.h"

static const char *const section_names[] = {"all", "readout", "gates", "retention", NULL};
static const int section_bits[] = {SB_PROBE_ALL, SB_PROBE_READOUT, SB_PROBE_GATES,
                                   SB_PROBE_RETENTION};
static const char *const frame_names[] = {"symbol", "last", NULL};
static const char *const readout_names[] = {"lda", "ridge", NULL};

/* The grammar of the recorded configuration and of the flags must be the same (same inputs,
 * states and generator settings): else the checkpoint was trained on another task and its
 * readouts would be meaningless. */
static sb_status check_same_task(const char *ckpt, const sb_run_config *recorded,
                                 const sb_task *task, sb_error *err)
{
    const sb_grammar_config r = sb_grammar_config_effective(&recorded->task.grammar);
    const sb_grammar_config f = sb_grammar_config_effective(&task->cfg.grammar);
    sb_task *rt = NULL;
    sb_status st = sb_task_create(&recorded->task, &rt, err);
    if (st != SB_OK)
        return st;
    const int rv = rt->n_inputs, rc = rt->grammar->d_output;
    sb_task_free(rt);
    if (rv != task->n_inputs || rc != task->grammar->d_output || r.vocab != f.vocab ||
        r.amb != f.amb || r.amb_depth != f.amb_depth || r.seed != f.seed ||
        r.transition_density != f.transition_density)
        return sb_error_set(err, SB_ERR_INVALID,
                            "checkpoint '%s' was trained on another task: %d inputs, %d states "
                            "(vocab %d, amb %d, depth %d, task seed %llu), but the task flags "
                            "give %d inputs, %d states (vocab %d, amb %d, depth %d, task seed "
                            "%llu); drop the task flags that change the grammar",
                            ckpt, rv, rc, r.vocab, r.amb, r.amb_depth,
                            (unsigned long long)r.seed, task->n_inputs, task->grammar->d_output,
                            f.vocab, f.amb, f.amb_depth, (unsigned long long)f.seed);
    return SB_OK;
}

static sb_status make_dir(const char *dir, sb_error *err)
{
    struct stat sbuf;
    if (mkdir(dir, 0777) != 0 && !(errno == EEXIST && stat(dir, &sbuf) == 0 && S_ISDIR(sbuf.st_mode)))
        return sb_error_set(err, SB_ERR_IO, "cannot create the output folder '%s': %s", dir,
                            strerror(errno));
    return SB_OK;
}

/* probe.json, written under a temporary name and renamed into place. */
static sb_status write_json_file(const sb_probe_result *res, const char *ckpt, const char *dir,
                                 sb_error *err)
{
    char path[4200], tmp[4300];
    if (strlen(dir) > 4000)
        return sb_error_set(err, SB_ERR_INVALID, "--out: the folder name is too long");
    snprintf(path, sizeof path, "%s/probe.json", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return sb_error_set(err, SB_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    sb_json j;
    sb_json_init(&j, f, 2);
    sb_probe_write_json(res, ckpt, &j);
    fputc('\n', f);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        remove(tmp);
        return sb_error_set(err, SB_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    }
    return SB_OK;
}

static void print_summary(const sb_probe_result *res, const char *ckpt, const char *dir)
{
    printf("%s: %s, %d layers of width %d, %d classes; model test acc %.4f on %lld test samples\n",
           ckpt, res->model, res->L, res->D, res->C, res->model_test_acc,
           (long long)res->test_samples);
    if (res->sections & SB_PROBE_READOUT) {
        printf("\nlinear readout (%s, shrinkage %g, %s frames, fitted on %lld training "
               "samples): test accuracy of the state id j elements back\n",
               res->readout == SB_PROBE_LDA ? "LDA" : "ridge", res->ridge, res->frame == SB_PROBE_FRAME_LAST ? "last window" : "symbol",
               (long long)res->train_samples);
        printf("  %-10s", "depth");
        for (int k = 0; k < SB_PROBE_N_LAGS; k++)
            printf("   j=%-4d", sb_probe_lags[k]);
        printf("\n");
        for (int d = 0; d <= res->L; d++) {
            char name[32];
            if (d == 0)
                snprintf(name, sizeof name, "embedding");
            else
                snprintf(name, sizeof name, "block %d", d);
            printf("  %-10s", name);
            for (int k = 0; k < SB_PROBE_N_LAGS; k++) {
                const double a = res->readout_acc[(size_t)d * SB_PROBE_N_LAGS + k];
                if (isfinite(a))
                    printf("  %7.4f", a);
                else
                    printf("  %7s", "-");
            }
            printf("\n");
        }
    }
    if (res->gates != NULL) {
        printf("\ngates (gap selectivity = mean on gap frames - mean on symbol frames; %lld symbol, "
               "%lld gap frames)\n",
               (long long)res->gate_symbol_frames, (long long)res->gate_gap_frames);
        for (int l = 0; l < res->L; l++)
            for (int q = 0; q < res->gates[l].n_kinds; q++) {
                const sb_probe_gate_kind *k = &res->gates[l].kind[q];
                double ms = 0, mg = 0;
                const int G = res->gates[l].n_groups;
                for (int h = 0; h < G; h++) {
                    ms += k->mean_symbol[h] / G;
                    mg += k->mean_gap[h] / G;
                }
                printf("  layer %d %-34s symbol %.4f  gap %.4f  selectivity %+.4f (%d groups)\n",
                       l + 1, k->name, ms, mg, k->layer_selectivity, G);
            }
    } else {
        printf("\ngates: none (%s)\n", res->gates_reason);
    }
    if (res->output_norm != NULL) {
        const int n = res->gap_frames + 1;
        printf("\nretention along a gap of %d frames (%d samples): norm at the end / at the symbol "
               "frame\n",
               res->gap_frames, res->retention_samples);
        for (int l = 0; l < res->L; l++) {
            const double *on = res->output_norm + (size_t)l * n;
            printf("  layer %d: output %.4f", l + 1, on[0] > 0 ? on[n - 1] / on[0] : (double)NAN);
            if (res->state_norm != NULL) {
                const double *sn = res->state_norm + (size_t)l * n;
                printf(", state %.4f", sn[0] > 0 ? sn[n - 1] / sn[0] : (double)NAN);
            }
            printf("\n");
        }
        if (res->retention_reason[0] != '\0')
            printf("  (%s)\n", res->retention_reason);
    } else if (res->retention_reason[0] != '\0') {
        printf("\nretention: none (%s)\n", res->retention_reason);
    }
    printf("\nfigures and probe.json written to %s\n", dir);
}

int sb_cmd_probe(int argc, char **argv)
{
    const char *ckpt = NULL;
    int first = sb_cli_checkpoint_first("probe",
                                        "CKPT [train.py flags to override] [--section "
                                        "all|readout|gates|retention] [--json] [--out DIR]\n"
                                        "(selectivbench probe CKPT --help lists every flag)",
                                        argc, argv, &ckpt);
    if (first >= 0)
        return first;
    sb_run_flags rf;
    sb_option opts[SB_RUN_MAX_OPTIONS + 12];
    int n = 0;
    sb_run_options_add(&rf, opts, &n);
    sb_probe_options po = sb_probe_options_default();
    int section = 0, frame = 0;
    double retention_dur = 10.0;
    const char *out_dir = NULL;
    opts[n++] = (sb_option){"section", SB_OPT_CHOICE, &section, 0, 0, section_names,
                            "all|readout|gates|retention",
                            "what to probe (default all; gates asked alone is an error for a "
                            "model without input-dependent gates)", 0};
    opts[n++] = (sb_option){"probe_samples", SB_OPT_INT64, &po.train_samples, 1, 1e9, NULL, "N",
                            "training samples the readouts are fitted on (default 256)", 0};
    opts[n++] = (sb_option){"samples", SB_OPT_INT64, &po.test_samples, 0, 1e12, NULL, "N",
                            "test samples scored (default 0: the whole test split)", 0};
    int readout = (int)po.readout;
    opts[n++] = (sb_option){"readout", SB_OPT_CHOICE, &readout, 0, 0, readout_names, "lda|ridge",
                            "the linear readout: LDA (class means, pooled covariance) or ridge "
                            "regression onto one-hot targets (default lda)",
                            0};
    opts[n++] = (sb_option){"ridge", SB_OPT_DOUBLE, &po.ridge, 0, 1e6, NULL, "LAMBDA",
                            "shrinkage, relative to the mean diagonal of X^T X (ridge) or the "
                            "features' mean variance (LDA) (default 1e-3)",
                            0};
    opts[n++] = (sb_option){"probe_frame", SB_OPT_CHOICE, &frame, 0, 0, frame_names,
                            "symbol|last",
                            "an element's feature row: its symbol frame or its window's last "
                            "frame (default symbol)", 0};
    opts[n++] = (sb_option){"retention_dur", SB_OPT_DOUBLE, &retention_dur, 0.1,
                            SB_MAX_GAP_SECONDS, NULL, "SECONDS",
                            "the long test gap of the retention section (default 10: 100 frames)",
                            0};
    opts[n++] = (sb_option){"retention_samples", SB_OPT_INT, &po.retention_samples, 1, 1000000,
                            NULL, "N", "long-gap test samples averaged (default 4)", 0};
    opts[n++] = (sb_option){"retention_element", SB_OPT_INT, &po.retention_element, 0,
                            1000000, NULL, "E",
                            "the long gap after the first element at index E or later that has "
                            "one (default 4; the last one with a gap if none)", 0};
    opts[n++] = (sb_option){"probe_bs", SB_OPT_INT, &po.batch, 1, 100000, NULL, "N",
                            "samples per forward (default 16)", 0};
    opts[n++] = (sb_option){"out", SB_OPT_STRING, &out_dir, 0, 0, NULL, "DIR",
                            "folder of the figures and probe.json (default: CKPT without "
                            ".safetensors, plus _probe)", 0};
    sb_error err = {0};
    /* the recorded configuration, then the flags set its keys by name */
    sb_run_config recorded;
    sb_status st = sb_checkpoint_read_config(ckpt, &recorded, &err);
    const int have_recorded = st == SB_OK;
    if (st == SB_OK)
        rf.cfg = recorded;
    else if (st != SB_ERR_INVALID) /* missing or corrupt file */
        return sb_cli_fail("probe", &err);
    int rc = sb_cli_parse("probe", "CKPT [flags]", opts, n, argc - 1, argv + 1, NULL, 0, NULL);
    if (rc >= 0)
        return rc;
    sb_cli_threads(rf.threads);
    if (sb_run_config_check(&rf.cfg, &err) != SB_OK)
        return sb_cli_fail("probe", &err);
    if (rf.print_hashes)
        return sb_cli_print_hashes(&rf.cfg);
    po.sections = section_bits[section];
    po.gates_required = section_bits[section] == SB_PROBE_GATES;
    po.frame = (sb_probe_frame)frame;
    po.readout = (sb_probe_readout)readout;
    const sb_run_config *cfg = &rf.cfg;

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

    sb_task *task = NULL, *long_task = NULL;
    sb_model *m = NULL;
    sb_probe_result res = {0};
    if ((st = sb_task_create(&cfg->task, &task, &err)) != SB_OK)
        goto done;
    if (have_recorded && (st = check_same_task(ckpt, &recorded, task, &err)) != SB_OK)
        goto done;
    if (po.sections & SB_PROBE_RETENTION) {
        sb_task_config lc = cfg->task;
        lc.test_dur = retention_dur;
        if ((st = sb_task_create(&lc, &long_task, &err)) != SB_OK)
            goto done;
    }
    sb_model_config mc = sb_run_config_model(cfg, task->n_inputs, task->grammar->d_output);
    if ((st = sb_model_create(&mc, cfg->seed, &m, &err)) != SB_OK)
        goto done;
    if ((st = sb_checkpoint_load(ckpt, m, NULL, NULL, &err)) != SB_OK)
        goto done;
    if ((st = sb_probe_run(task, long_task, m, &po, &res, &err)) != SB_OK)
        goto done;
    if ((st = make_dir(dir, &err)) != SB_OK || (st = write_json_file(&res, ckpt, dir, &err)) != SB_OK ||
        (st = sb_probe_write_figures(&res, dir, &err)) != SB_OK)
        goto done;
    if (rf.json) {
        sb_json j;
        sb_json_init(&j, stdout, 0);
        sb_probe_write_json(&res, ckpt, &j);
        printf("\n");
    } else {
        print_summary(&res, ckpt, dir);
    }
done:
    sb_probe_result_free(&res);
    sb_model_free(m);
    sb_task_free(task);
    sb_task_free(long_task);
    if (st != SB_OK)
        return sb_cli_fail("probe", &err);
    return 0;
}
