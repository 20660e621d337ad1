/* probe_api.c - the public API's probe of a checkpoint (selectivbench.h): builds the task and
 * the model of a configuration, loads the checkpoint, runs train/probe.h's sections, and
 * writes probe.json and the figures into a folder. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api/api.h"
#include "core/fs.h"
#include "core/json_writer.h"
#include "task/task.h"
#include "train/checkpoint.h"
#include "train/probe.h"
#include "train/run_setup.h"

/* The grammar of the recorded configuration and of cfg must be the same (same inputs,
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
                            ckpt, rv, rc, r.vocab, r.amb, r.amb_depth, (unsigned long long)r.seed,
                            task->n_inputs, task->grammar->d_output, f.vocab, f.amb, f.amb_depth,
                            (unsigned long long)f.seed);
    return SB_OK;
}

static sb_status make_dir(const char *dir, sb_error *err)
{
    return sb_make_dirs(dir, "output folder", err);
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

/* The report `selectivbench probe` prints. */
static void write_summary(FILE *out, const sb_probe_result *res, const char *ckpt, const char *dir)
{
    fprintf(out,
            "%s: %s, %d layers of width %d, %d classes; model test acc %.4f on %lld test "
            "samples\n",
            ckpt, res->model, res->L, res->D, res->C, res->model_test_acc,
            (long long)res->test_samples);
    if (res->sections & SB_PROBE_READOUT) {
        fprintf(out,
                "\nlinear readout (%s, shrinkage %g, %s frames, fitted on %lld training "
                "samples): test accuracy of the state id j elements back\n",
                res->readout == SB_PROBE_LDA ? "LDA" : "ridge", res->ridge,
                res->frame == SB_PROBE_FRAME_LAST ? "last window" : "symbol",
                (long long)res->train_samples);
        fprintf(out, "  %-10s", "depth");
        for (int k = 0; k < SB_PROBE_N_LAGS; k++)
            fprintf(out, "   j=%-4d", sb_probe_lags[k]);
        fprintf(out, "\n");
        for (int d = 0; d <= res->L; d++) {
            char name[32];
            if (d == 0)
                snprintf(name, sizeof name, "embedding");
            else
                snprintf(name, sizeof name, "block %d", d);
            fprintf(out, "  %-10s", name);
            for (int k = 0; k < SB_PROBE_N_LAGS; k++) {
                const double a = res->readout_acc[(size_t)d * SB_PROBE_N_LAGS + k];
                if (isfinite(a))
                    fprintf(out, "  %7.4f", a);
                else
                    fprintf(out, "  %7s", "-");
            }
            fprintf(out, "\n");
        }
    }
    if (res->gates != NULL) {
        fprintf(out,
                "\ngates (gap selectivity = mean on gap frames - mean on symbol frames; "
                "%lld symbol, %lld gap frames)\n",
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
                fprintf(out,
                        "  layer %d %-34s symbol %.4f  gap %.4f  selectivity %+.4f (%d "
                        "groups)\n",
                        l + 1, k->name, ms, mg, k->layer_selectivity, G);
            }
    } else {
        fprintf(out, "\ngates: none (%s)\n", res->gates_reason);
    }
    if (res->output_norm != NULL) {
        const int n = res->gap_frames + 1;
        fprintf(out,
                "\nretention along a gap of %d frames (%d samples): norm at the end / at "
                "the symbol frame\n",
                res->gap_frames, res->retention_samples);
        for (int l = 0; l < res->L; l++) {
            const double *on = res->output_norm + (size_t)l * n;
            fprintf(out, "  layer %d: output %.4f", l + 1,
                    on[0] > 0 ? on[n - 1] / on[0] : (double)NAN);
            if (res->state_norm != NULL) {
                const double *sn = res->state_norm + (size_t)l * n;
                fprintf(out, ", state %.4f", sn[0] > 0 ? sn[n - 1] / sn[0] : (double)NAN);
            }
            fprintf(out, "\n");
        }
        if (res->retention_reason[0] != '\0')
            fprintf(out, "  (%s)\n", res->retention_reason);
    } else if (res->retention_reason[0] != '\0') {
        fprintf(out, "\nretention: none (%s)\n", res->retention_reason);
    }
    fprintf(out, "\nfigures and probe.json written to %s\n", dir);
}

/* Writes what write_one writes into a new string *out. */
static sb_status to_string(char **out, const sb_probe_result *res, const char *ckpt,
                           const char *dir, int summary, sb_error *err)
{
    size_t len = 0;
    FILE *f = open_memstream(out, &len);
    if (f == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for the probe's text");
    if (summary) {
        write_summary(f, res, ckpt, dir);
    } else {
        sb_json j;
        sb_json_init(&j, f, 0);
        sb_probe_write_json(res, ckpt, &j);
    }
    if (fclose(f) != 0 || *out == NULL) {
        free(*out);
        *out = NULL;
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for the probe's text");
    }
    return SB_OK;
}

sb_status sb_probe_checkpoint(const char *checkpoint, const sb_config *cfg, const char *out_dir,
                              char **json, char **summary, sb_error *err)
{
    if (json != NULL)
        *json = NULL;
    if (summary != NULL)
        *summary = NULL;
    SB_API_REQUIRE(checkpoint, err);
    SB_API_REQUIRE(cfg, err);
    SB_API_REQUIRE(out_dir, err);
    sb_status st = sb_run_config_check(&cfg->run, err);
    if (st != SB_OK)
        return st;
    /* the configuration the checkpoint records, if any: its task must be cfg's */
    sb_run_config recorded;
    sb_status rst = sb_checkpoint_read_config(checkpoint, &recorded, err);
    if (rst != SB_OK && rst != SB_ERR_INVALID) /* missing or corrupt file */
        return rst;
    const sb_probe_options po = sb_probe_options_from(&cfg->run.rt);

    sb_task *task = NULL, *long_task = NULL;
    sb_model *m = NULL;
    sb_probe_result res = {0};
    if ((st = sb_task_create(&cfg->run.task, &task, err)) != SB_OK)
        goto done;
    if (rst == SB_OK && (st = check_same_task(checkpoint, &recorded, task, err)) != SB_OK)
        goto done;
    if (po.sections & SB_PROBE_RETENTION) {
        sb_task_config lc = cfg->run.task;
        lc.test_dur = cfg->run.rt.retention_dur;
        if ((st = sb_task_create(&lc, &long_task, err)) != SB_OK)
            goto done;
    }
    sb_model_config mc = sb_run_config_model(&cfg->run, task->n_inputs, task->grammar->d_output);
    if ((st = sb_model_create(&mc, cfg->run.seed, &m, err)) != SB_OK)
        goto done;
    if ((st = sb_checkpoint_load(checkpoint, m, NULL, NULL, err)) != SB_OK)
        goto done;
    if ((st = sb_probe_run(task, long_task, m, &po, &res, err)) != SB_OK)
        goto done;
    if ((st = make_dir(out_dir, err)) != SB_OK ||
        (st = write_json_file(&res, checkpoint, out_dir, err)) != SB_OK ||
        (st = sb_probe_write_figures(&res, out_dir, err)) != SB_OK)
        goto done;
    if (json != NULL && (st = to_string(json, &res, checkpoint, out_dir, 0, err)) != SB_OK)
        goto done;
    if (summary != NULL)
        st = to_string(summary, &res, checkpoint, out_dir, 1, err);
done:
    if (st != SB_OK && json != NULL) {
        free(*json);
        *json = NULL;
    }
    sb_probe_result_free(&res);
    sb_model_free(m);
    sb_task_free(task);
    sb_task_free(long_task);
    return st;
}
