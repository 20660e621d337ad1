/* sweep_cost.c - what the runs of a sweep's selection cost, estimated without training
 * (sb_sweep_estimate_cost, the public header's): samples, frames, parameters and FLOPs of
 * every run the sweep would train. Each distinct task is built once (exp/task_set.h, as the
 * planner's). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exp/sweep.h"
#include "exp/sweep_exec.h"
#include "exp/task_set.h"
#include "model/model.h"
#include "task/ceiling.h"
#include "task/task.h"
#include "train/run_setup.h"

/* Adds run cfg (of task t) to the cost; the first run also gives its training step.
 * *run_flops: the run's training FLOPs. */
static sb_status cost_add(sb_sweep_cost *c, int64_t k, const sb_run_config *cfg,
                          const sb_set_task *t, double *run_flops, sb_error *err)
{
    const int inputs = t->task->n_inputs, classes = t->task->grammar->d_output;
    sb_model_config mc = sb_run_config_model(cfg, inputs, classes);
    size_t params = 0;
    sb_status st = sb_model_param_count(&mc, &params, err);
    if (st != SB_OK)
        return st;
    int frames = (int)lround(t->train_frames);
    double flops = sb_model_config_flops_per_token(&mc, frames > 0 ? frames : 1);
    double tokens = (double)t->train_samples * t->train_frames;
    if (c->runs == 0) {
        c->params_min = c->params_max = params;
        c->samples_min = c->samples_max = t->train_samples;
        c->first_run = k;
        snprintf(c->first_model, sizeof c->first_model, "%s", cfg->model);
        c->first_batch = cfg->batch_size;
        c->first_frames = frames > 0 ? frames : 1;
        c->first_width = cfg->feat_size;
        c->first_layers = cfg->layers;
        c->first_inputs = inputs;
        c->first_classes = classes;
        c->first_d_state = cfg->d_state;
        c->first_flops_per_token = flops;
    }
    c->runs++;
    c->samples += t->train_samples;
    c->tokens += tokens;
    *run_flops = 3.0 * flops * tokens;
    c->train_flops += *run_flops;
    if (params < c->params_min)
        c->params_min = params;
    if (params > c->params_max)
        c->params_max = params;
    if (t->train_samples < c->samples_min)
        c->samples_min = t->train_samples;
    if (t->train_samples > c->samples_max)
        c->samples_max = t->train_samples;
    return SB_OK;
}

/* The cost of sel's runs in *out, and each run's training FLOPs in run_flops[i] (0 for a
 * refused or excluded run) when run_flops is not NULL. */
static sb_status estimate(const sb_sweep *s, const sb_sweep_selection *sel, sb_sweep_cost *out,
                          double *run_flops, sb_error *err)
{
    memset(out, 0, sizeof *out);
    out->first_run = -1;
    sb_task_set tasks = {0};
    sb_status st = SB_OK;
    int64_t n_runs = sb_sweep_selection_size(sel);
    for (int64_t i = 0; st == SB_OK && i < n_runs; i++) {
        int64_t k = 0;
        double flops = 0.0;
        sb_run_config cfg;
        sb_error refused;
        sb_status rs = sb_sweep_selected_run(s, sel, i, &k, &cfg, &refused, err);
        if (rs == SB_ERR_NOMEM)
            st = rs;
        if (rs != SB_OK)
            continue; /* a refused or excluded run costs nothing */
        int t = 0;
        st = sb_task_set_find(&tasks, &cfg.task, &t, err);
        if (st == SB_OK)
            st = cost_add(out, k, &cfg, &tasks.list[t], &flops, err);
        if (run_flops != NULL)
            run_flops[i] = flops;
    }
    sb_task_set_free(&tasks);
    return st;
}

sb_status sb_sweep_estimate_cost(const sb_sweep *s, const sb_sweep_selection *sel,
                                 sb_sweep_cost *out, sb_error *err)
{
    if (out == NULL || s == NULL || sel == NULL)
        return sb_error_set(err, SB_ERR_INVALID, "sb_sweep_estimate_cost: NULL argument");
    return estimate(s, sel, out, NULL, err);
}

sb_status sb_sweep_run_flops(const sb_sweep *s, const sb_sweep_selection *sel, double *run_flops,
                             sb_error *err)
{
    if (run_flops == NULL || s == NULL || sel == NULL)
        return sb_error_set(err, SB_ERR_INVALID, "sb_sweep_run_flops: NULL argument");
    sb_sweep_cost total;
    return estimate(s, sel, &total, run_flops, err);
}
