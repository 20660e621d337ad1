/* sweep_cost.c - what the runs of a sweep's selection cost, estimated without training
 * (sb_sweep_estimate_cost, the public header's): samples, frames, parameters and FLOPs of
 * every run the sweep would train. A sweep has thousands of runs but few tasks, so each
 * distinct task is built once (its grammar and its first training samples). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exp/sweep.h"
#include "exp/sweep_exec.h"
#include "model/model.h"
#include "task/ceiling.h"
#include "task/task.h"
#include "train/run_setup.h"

/* Training samples whose frames are counted to get a task's mean frames per sample. */
#define COST_SAMPLES 64

/* What the cost needs of one task. */
typedef struct cost_task {
    char key[17]; /* the task's hash (sb_ceiling_hash with the default options) */
    int inputs, classes;
    int64_t samples;          /* training samples */
    double frames_per_sample; /* mean over the first COST_SAMPLES */
} cost_task;

typedef struct cost_tasks {
    cost_task *list;
    int n, cap;
} cost_tasks;

/* Builds the task of tc and fills *out (key aside). */
static sb_status task_measure(const sb_task_config *tc, cost_task *out, sb_error *err)
{
    sb_task *task = NULL;
    sb_status st = sb_task_create(tc, &task, err);
    if (st != SB_OK)
        return st;
    out->inputs = task->n_inputs;
    out->classes = task->grammar->d_output;
    out->samples = sb_task_split_size(task, SB_SPLIT_TRAIN);
    int64_t n = out->samples < COST_SAMPLES ? out->samples : COST_SAMPLES;
    sb_sample sample;
    memset(&sample, 0, sizeof sample);
    st = sb_sample_alloc(task, &sample, err);
    double frames = 0.0;
    for (int64_t i = 0; st == SB_OK && i < n; i++) {
        st = sb_task_sample(task, SB_SPLIT_TRAIN, i, &sample, err);
        frames += sample.n_frames;
    }
    sb_sample_free(&sample);
    out->frames_per_sample = n > 0 ? frames / (double)n : 0.0;
    sb_task_free(task);
    return st;
}

/* The task of tc, measured now or found among those measured before. */
static sb_status task_find(cost_tasks *tasks, const sb_task_config *tc, const cost_task **out,
                           sb_error *err)
{
    sb_ceiling_options opt = sb_ceiling_options_default();
    char key[17];
    sb_ceiling_hash(tc, &opt, key);
    for (int i = 0; i < tasks->n; i++)
        if (strcmp(tasks->list[i].key, key) == 0) {
            *out = &tasks->list[i];
            return SB_OK;
        }
    if (tasks->n == tasks->cap) {
        int cap = tasks->cap > 0 ? 2 * tasks->cap : 8;
        cost_task *grown = realloc(tasks->list, (size_t)cap * sizeof *grown);
        if (grown == NULL)
            return sb_error_set(err, SB_ERR_NOMEM, "out of memory estimating a sweep's cost");
        tasks->list = grown;
        tasks->cap = cap;
    }
    cost_task *t = &tasks->list[tasks->n];
    memcpy(t->key, key, sizeof key);
    sb_status st = task_measure(tc, t, err);
    if (st != SB_OK)
        return st;
    tasks->n++;
    *out = t;
    return SB_OK;
}

/* Adds run cfg (of task t) to the cost; the first run also gives its training step.
 * *run_flops: the run's training FLOPs. */
static sb_status cost_add(sb_sweep_cost *c, int64_t k, const sb_run_config *cfg, const cost_task *t,
                          double *run_flops, sb_error *err)
{
    sb_model_config mc = sb_run_config_model(cfg, t->inputs, t->classes);
    size_t params = 0;
    sb_status st = sb_model_param_count(&mc, &params, err);
    if (st != SB_OK)
        return st;
    int frames = (int)lround(t->frames_per_sample);
    double flops = sb_model_config_flops_per_token(&mc, frames > 0 ? frames : 1);
    double tokens = (double)t->samples * t->frames_per_sample;
    if (c->runs == 0) {
        c->params_min = c->params_max = params;
        c->samples_min = c->samples_max = t->samples;
        c->first_run = k;
        snprintf(c->first_model, sizeof c->first_model, "%s", cfg->model);
        c->first_batch = cfg->batch_size;
        c->first_frames = frames > 0 ? frames : 1;
        c->first_width = cfg->feat_size;
        c->first_layers = cfg->layers;
        c->first_inputs = t->inputs;
        c->first_classes = t->classes;
        c->first_d_state = cfg->d_state;
        c->first_flops_per_token = flops;
    }
    c->runs++;
    c->samples += t->samples;
    c->tokens += tokens;
    *run_flops = 3.0 * flops * tokens;
    c->train_flops += *run_flops;
    if (params < c->params_min)
        c->params_min = params;
    if (params > c->params_max)
        c->params_max = params;
    if (t->samples < c->samples_min)
        c->samples_min = t->samples;
    if (t->samples > c->samples_max)
        c->samples_max = t->samples;
    return SB_OK;
}

/* The cost of sel's runs in *out, and each run's training FLOPs in run_flops[i] (0 for a
 * refused or excluded run) when run_flops is not NULL. */
static sb_status estimate(const sb_sweep *s, const sb_sweep_selection *sel, sb_sweep_cost *out,
                          double *run_flops, sb_error *err)
{
    memset(out, 0, sizeof *out);
    out->first_run = -1;
    cost_tasks tasks = {0};
    sb_status st = SB_OK;
    int64_t n_runs = sb_sweep_selection_size(sel);
    for (int64_t i = 0; st == SB_OK && i < n_runs; i++) {
        int64_t k = sb_sweep_selection_run(sel, i);
        double flops = 0.0;
        sb_run_config cfg;
        sb_error refused = {0};
        int built = 0;
        if (sb_sweep_run_validate(s, k, &cfg, &built, &refused) != SB_OK) {
            if (refused.status == SB_ERR_NOMEM)
                st = sb_error_set(err, SB_ERR_NOMEM, "%s", refused.msg);
            continue; /* a refused or excluded run costs nothing */
        }
        const cost_task *t = NULL;
        st = task_find(&tasks, &cfg.task, &t, err);
        if (st == SB_OK)
            st = cost_add(out, k, &cfg, t, &flops, err);
        if (run_flops != NULL)
            run_flops[i] = flops;
    }
    free(tasks.list);
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
