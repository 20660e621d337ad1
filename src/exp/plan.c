/* plan.c - what the runs of a sweep's selection will cost on this machine (the public
 * header's sb_plan_make, `selectivbench plan`): every run's frames (training and
 * evaluation), FLOPs, peak memory and seconds, and the totals on N ranks.
 *
 * A run's seconds are its setup (building its task and model) plus its training frames
 * times the seconds of a training frame plus its test frames times the seconds of a test
 * frame. The seconds per frame come from a calibration: a few real updates and an
 * evaluation of one run of each shape (plan_calibrate.c), cached per machine
 * (plan_cache.c). Every run is planned to its last update (early stopping is not
 * foreseen). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpus.h"
#include "core/json_writer.h"
#include "core/timer.h"
#include "exp/plan.h"
#include "exp/sweep.h"
#include "exp/sweep_exec.h"
#include "exp/task_set.h"
#include "model/model.h"
#include "task/ceiling.h"
#include "tensor/gemm_engine.h"
#include "train/run_setup.h"
#include "train/trainer.h"

/* What a calibration needs to be measured: one run of its shape. */
typedef struct plan_shape {
    sb_run_config cfg;
    int task; /* index into the task set */
    int micro, acc;
} plan_shape;

typedef struct plan_build {
    sb_task_set tasks;  /* the selection's distinct tasks, each built once */
    plan_shape *shapes; /* parallel to the plan's calibrations */
    int cap_shapes;
    int64_t cap_runs;
    char (*train_hash)[17]; /* each planned run's training hash, for the dependencies */
    double (*fpf)[2];       /* each planned run's forward FLOPs per training, test frame */
} plan_build;

/* ---- scheduling ----------------------------------------------------------------------- */

/* rank heap: free time, then rank index */
static int rank_before(const double *free_at, int a, int b)
{
    return free_at[a] < free_at[b] || (free_at[a] == free_at[b] && a < b);
}

static void heap_down(int *heap, int n, const double *free_at, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && rank_before(free_at, heap[l], heap[m]))
            m = l;
        if (r < n && rank_before(free_at, heap[r], heap[m]))
            m = r;
        if (m == i)
            return;
        int t = heap[i];
        heap[i] = heap[m];
        heap[m] = t;
        i = m;
    }
}

static const double *sort_seconds, *sort_ready;

/* larger first, then grid order */
static int cmp_largest(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    double sx = sort_seconds[x], sy = sort_seconds[y];
    if (sx != sy)
        return sx > sy ? -1 : 1;
    return (x > y) - (x < y);
}

/* dependent runs: the earliest ready first (its source ends first), then as cmp_largest
 * (or grid order when sort_seconds is NULL) */
static int cmp_ready(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    if (sort_ready[x] != sort_ready[y])
        return sort_ready[x] < sort_ready[y] ? -1 : 1;
    if (sort_seconds != NULL)
        return cmp_largest(a, b);
    return (x > y) - (x < y);
}

/* Gives runs order[0..n-1] in turn to the earliest free rank, each starting once it is
 * ready (ready NULL: at once). */
static void place(const int64_t *order, int64_t n, const double *seconds, const double *ready,
                  int *heap, double *free_at, int ranks, double *end, double *start, int *rank)
{
    for (int64_t j = 0; j < n; j++) {
        int64_t i = order[j];
        int r = heap[0];
        double t = free_at[r];
        if (ready != NULL && ready[i] > t)
            t = ready[i];
        end[i] = t + seconds[i];
        free_at[r] = end[i];
        heap_down(heap, ranks, free_at, 0);
        if (start != NULL)
            start[i] = t;
        if (rank != NULL)
            rank[i] = r;
    }
}

double sb_plan_schedule(const double *seconds, const int64_t *after, int64_t n, int ranks,
                        int largest_first, double *start, int *rank)
{
    if (ranks < 1 || n < 0 || (n > 0 && seconds == NULL))
        return -1.0;
    for (int64_t i = 0; after != NULL && i < n; i++)
        if (after[i] >= n || after[i] == i || (after[i] >= 0 && after[after[i]] >= 0))
            return -1.0;
    size_t m = (size_t)(n > 0 ? n : 1);
    int64_t *order = malloc(m * sizeof *order);
    double *end = malloc(m * sizeof *end), *ready = malloc(m * sizeof *ready);
    double *free_at = calloc((size_t)ranks, sizeof *free_at);
    int *heap = malloc((size_t)ranks * sizeof *heap);
    double wall = -1.0;
    if (order == NULL || end == NULL || ready == NULL || free_at == NULL || heap == NULL)
        goto done;
    for (int r = 0; r < ranks; r++)
        heap[r] = r;
    /* the runs that depend on nothing, largest first (or in grid order) */
    int64_t n_free = 0;
    for (int64_t i = 0; i < n; i++)
        if (after == NULL || after[i] < 0)
            order[n_free++] = i;
    sort_seconds = seconds;
    if (largest_first)
        qsort(order, (size_t)n_free, sizeof *order, cmp_largest);
    place(order, n_free, seconds, NULL, heap, free_at, ranks, end, start, rank);
    /* then the runs that evaluate another's weights, each once its source has ended */
    int64_t n_dep = 0;
    for (int64_t i = 0; after != NULL && i < n; i++)
        if (after[i] >= 0) {
            ready[i] = end[after[i]];
            order[n_dep++] = i;
        }
    sort_ready = ready;
    sort_seconds = largest_first ? seconds : NULL;
    qsort(order, (size_t)n_dep, sizeof *order, cmp_ready);
    place(order, n_dep, seconds, ready, heap, free_at, ranks, end, start, rank);
    wall = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (end[i] > wall)
            wall = end[i];
done:
    free(order);
    free(end);
    free(ready);
    free(free_at);
    free(heap);
    return wall;
}

/* ---- tasks and shapes ------------------------------------------------------------------- */

/* Forward FLOPs per frame of a model on samples of `frames` frames (mean). */
static double frame_flops(const sb_model_config *mc, double frames)
{
    int T = (int)lround(frames);
    return sb_model_config_flops_per_token(mc, T > 0 ? T : 1);
}

/* The calibration of run cfg's shape (index in *out), added when new. */
static sb_status shape_find(sb_plan *p, plan_build *b, const sb_run_config *cfg, int task,
                            int threads, int *out, sb_error *err)
{
    const sb_set_task *t = &b->tasks.list[task];
    int acc = sb_train_grad_acc(cfg, t->task, cfg->rt.mem_budget); /* as its train would */
    int micro = cfg->batch_size / acc > 0 ? cfg->batch_size / acc : 1;
    sb_model_config mc = sb_run_config_model(cfg, t->task->n_inputs, t->task->grammar->d_output);
    /* the shape leaves out the inputs, the classes and the exact frames per sample (a
     * factor-of-two bucket): runs that differ only there share a calibration, each
     * corrected by its FLOPs per frame (run_seconds) */
    int bucket = t->train_frames >= 1.0 ? (int)lround(log2(t->train_frames)) : 0;
    char key[256];
    snprintf(key, sizeof key,
             "%s d %d layers %d d_state %d heads %d micro %d x %d frames ~2^%d test_bs %d %s %s",
             mc.model, mc.d_model, mc.n_layers, mc.d_state, mc.n_head, micro, acc, bucket,
             cfg->test_bs, sb_precision_name(cfg->precision), sb_gemm_kind_name(cfg->gemm));
    for (int i = 0; i < p->n_calibrations; i++)
        if (strcmp(p->calibrations[i].key, key) == 0) {
            *out = i;
            return SB_OK;
        }
    if (p->n_calibrations == b->cap_shapes) {
        int cap = b->cap_shapes > 0 ? 2 * b->cap_shapes : 16;
        sb_plan_calibration *cals = realloc(p->calibrations, (size_t)cap * sizeof *cals);
        if (cals != NULL)
            p->calibrations = cals;
        plan_shape *shapes = realloc(b->shapes, (size_t)cap * sizeof *shapes);
        if (shapes != NULL)
            b->shapes = shapes;
        if (cals == NULL || shapes == NULL)
            return sb_error_set(err, SB_ERR_NOMEM, "out of memory planning a sweep");
        b->cap_shapes = cap;
    }
    sb_plan_calibration *c = &p->calibrations[p->n_calibrations];
    memset(c, 0, sizeof *c);
    snprintf(c->key, sizeof c->key, "%s", key);
    snprintf(c->model, sizeof c->model, "%s", cfg->model);
    c->width = cfg->feat_size;
    c->layers = cfg->layers;
    c->d_state = cfg->d_state;
    c->micro_batch = micro;
    c->threads = threads;
    c->train_flops_per_frame = frame_flops(&mc, t->train_frames);
    c->eval_flops_per_frame = frame_flops(&mc, t->test_frames);
    plan_shape *sh = &b->shapes[p->n_calibrations];
    sh->cfg = *cfg;
    sh->task = task;
    sh->micro = micro;
    sh->acc = acc;
    *out = p->n_calibrations++;
    return SB_OK;
}

/* Run cfg's frames, evaluations, FLOPs and memory (its seconds come later). */
static sb_status run_fill(sb_plan_run *r, const sb_run_config *cfg, const sb_set_task *t,
                          const plan_shape *sh, double *train_fpf, double *eval_fpf, sb_error *err)
{
    sb_model_config mc = sb_run_config_model(cfg, t->task->n_inputs, t->task->grammar->d_output);
    size_t params = 0;
    sb_status st = sb_model_param_count(&mc, &params, err);
    if (st != SB_OK)
        return st;
    int64_t updates = 0, curve_points = 0;
    if (cfg->test_pretrained) {
        r->evaluations = 1;
    } else {
        /* the trainer's loop (trainer.c train_plan): every micro-batch of one pass, an
         * evaluation every epoch_size samples' updates and at the last update, and the
         * learning curve's points between them (the test split only) */
        int64_t n_micro = (t->train_samples + sh->micro - 1) / sh->micro;
        updates = n_micro / sh->acc;
        int64_t every = cfg->epoch_size / ((int64_t)sh->micro * sh->acc);
        if (every < 1)
            every = 1;
        r->evaluations = (int)(updates / every + (updates % every != 0 ? 1 : 0));
        if (r->evaluations < 1)
            r->evaluations = 1;
        curve_points = sb_train_curve_extra(updates, every, cfg->curve_points);
        r->evaluations += (int)curve_points;
        r->train_frames = (int64_t)llround((double)t->train_samples * t->train_frames);
    }
    const double full = (double)(r->evaluations - curve_points);
    r->eval_frames = (int64_t)llround(
        (full * (double)t->test_samples + (double)curve_points * (double)t->test_split_samples) *
        t->test_frames);
    double fwd_train = frame_flops(&mc, t->train_frames);
    double fwd_test = frame_flops(&mc, t->test_frames);
    *train_fpf = fwd_train;
    *eval_fpf = fwd_test;
    r->flops = 3.0 * fwd_train * (double)r->train_frames + fwd_test * (double)r->eval_frames;
    /* activations of the longest micro-batch (the model's own estimate, as --grad_acc -1
     * uses it) and the parameters, their gradients and Adam's two moments */
    double act =
        cfg->test_pretrained ? 0.0 : sb_train_step_bytes(&mc, sh->micro, t->train_max_frames);
    r->peak_bytes = act + (cfg->test_pretrained ? 1.0 : 4.0) * (double)params * sizeof(real);
    return SB_OK;
}

/* ---- calibrations ------------------------------------------------------------------------ */

/* The seconds per frame of a shape not measured: its FLOPs at `gflops`; when the cache has
 * a calibration of the same model, width and layers (another micro-batch, frames or
 * d_state), at that calibration's rates instead, scaled by the FLOPs per frame. Nothing is
 * timed here (the setup too comes from the cache or is the fixed process start), so a plan
 * from the cache prints the same figures on every call. */
static void flop_rate(sb_plan_calibration *c, const sb_plan_cache *cache, const char *machine,
                      int threads, double gflops)
{
    /* the key up to its d_state: "MODEL d D layers L " */
    char prefix[128];
    const char *cut = strstr(c->key, "d_state ");
    int len = cut != NULL ? (int)(cut - c->key) : (int)strlen(c->key);
    snprintf(prefix, sizeof prefix, "%.*s", len, c->key);
    const sb_plan_calibration *near = NULL;
    for (int i = 0; i < cache->n && near == NULL; i++) {
        const sb_plan_cache_entry *e = &cache->entries[i];
        if (e->c.calibrated_threads == threads && strcmp(e->machine, machine) == 0 &&
            strncmp(e->c.key, prefix, strlen(prefix)) == 0)
            near = &e->c;
    }
    if (near != NULL) {
        c->train_s_per_frame =
            near->train_s_per_frame * c->train_flops_per_frame / near->train_flops_per_frame;
        c->eval_s_per_frame =
            near->eval_s_per_frame * c->eval_flops_per_frame / near->eval_flops_per_frame;
        c->gflops = near->gflops;
        c->gemm_share = near->gemm_share;
        c->setup_s = near->setup_s;
    } else {
        c->train_s_per_frame = 3.0 * c->train_flops_per_frame / (gflops * 1e9);
        c->eval_s_per_frame = c->eval_flops_per_frame / (gflops * 1e9);
        c->gflops = gflops;
        c->gemm_share = 0.0;
        c->setup_s = SB_PLAN_PROCESS_S;
    }
    c->calibrated_layers = c->layers;
    c->source = SB_PLAN_FLOP_RATE;
}

/* Every calibration: from the cache, measured, or at the FLOP rate. */
static sb_status calibrate_all(sb_plan *p, plan_build *b, const sb_plan_options *o, int cal_threads,
                               sb_error *err)
{
    sb_plan_cache cache = {0};
    sb_status st = SB_OK;
    if (o->cache_path != NULL &&
        (st = sb_plan_cache_load(o->cache_path, &cache, &p->cache_damaged, err)) != SB_OK)
        return st;
    /* the FLOP rate of what is not measured: the mean of this machine's cached rates */
    double rate_sum = 0.0;
    int rate_n = 0;
    for (int i = 0; i < cache.n; i++)
        if (cache.entries[i].c.calibrated_threads == cal_threads &&
            strcmp(cache.entries[i].machine, p->machine) == 0 && cache.entries[i].c.gflops > 0) {
            rate_sum += cache.entries[i].c.gflops;
            rate_n++;
        }
    double fallback = rate_n > 0 ? rate_sum / rate_n : SB_PLAN_FALLBACK_GFLOPS * cal_threads;
    int changed = p->cache_damaged;
    double target = o->seconds_per_calibration > 0 ? o->seconds_per_calibration
                                                   : sb_run_config_default().rt.calibration_seconds;
    int saved_threads = omp_get_max_threads();
    for (int i = 0; st == SB_OK && i < p->n_calibrations; i++) {
        sb_plan_calibration *c = &p->calibrations[i];
        const plan_shape *sh = &b->shapes[i];
        const sb_set_task *t = &b->tasks.list[sh->task];
        const sb_plan_calibration *hit =
            o->recalibrate ? NULL : sb_plan_cache_find(&cache, p->machine, cal_threads, c->key);
        if (hit != NULL) {
            sb_plan_calibration keep = *c;
            *c = *hit;
            snprintf(c->model, sizeof c->model, "%s", keep.model);
            c->width = keep.width;
            c->layers = keep.layers;
            c->d_state = keep.d_state;
            c->micro_batch = keep.micro_batch;
            c->threads = keep.threads;
            c->measured_s = 0.0;
            c->source = SB_PLAN_CACHED;
            p->cached++;
        } else if (o->cached_only) {
            flop_rate(c, &cache, p->machine, cal_threads, fallback);
            c->calibrated_threads = cal_threads;
            p->estimated++;
        } else {
            st = sb_plan_calibrate(&sh->cfg, t->task, sh->micro, sh->acc, cal_threads, target,
                                   t->build_s, c, err);
            if (st == SB_OK)
                st = sb_plan_cache_put(&cache, p->machine, c, err);
            changed = 1;
            p->measured++;
        }
        if (st == SB_OK && o->on_calibration != NULL)
            o->on_calibration(c, i, p->n_calibrations, o->user);
    }
    omp_set_num_threads(saved_threads);
    sb_gemm_flops_reset();
    if (st == SB_OK && o->cache_path != NULL && changed && !o->cached_only) {
        st = sb_plan_cache_save(o->cache_path, &cache, err);
        p->cache_written = st == SB_OK;
    }
    sb_plan_cache_free(&cache);
    return st;
}

/* A calibration's seconds per frame at the plan's threads: measured at cal_threads; beyond,
 * the matrix products' share speeds up linearly up to SB_PLAN_THREAD_CAP (an assumption). */
static double thread_factor(const sb_plan_calibration *c, int threads)
{
    int measured = c->calibrated_threads > 0 ? c->calibrated_threads : 1;
    if (threads <= measured)
        return 1.0;
    int t = threads < SB_PLAN_THREAD_CAP ? threads : SB_PLAN_THREAD_CAP;
    if (t < measured)
        t = measured;
    return (1.0 - c->gemm_share) + c->gemm_share * (double)measured / (double)t;
}

/* ---- the plan --------------------------------------------------------------------------- */

static sb_status runs_grow(sb_plan *p, plan_build *b, sb_error *err)
{
    if (p->n_runs < b->cap_runs)
        return SB_OK;
    int64_t cap = b->cap_runs > 0 ? 2 * b->cap_runs : 64;
    sb_plan_run *runs = realloc(p->runs, (size_t)cap * sizeof *runs);
    if (runs != NULL)
        p->runs = runs;
    char(*hashes)[17] = realloc(b->train_hash, (size_t)cap * sizeof *hashes);
    if (hashes != NULL)
        b->train_hash = hashes;
    double(*fpf)[2] = realloc(b->fpf, (size_t)cap * sizeof *fpf);
    if (fpf != NULL)
        b->fpf = fpf;
    if (runs == NULL || hashes == NULL || fpf == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory planning a sweep");
    b->cap_runs = cap;
    return SB_OK;
}

/* after: for each evaluation-only run, the training run of the plan with its training hash */
static void link_dependencies(sb_plan *p, const plan_build *b, const sb_run_config *unused)
{
    (void)unused;
    for (int64_t i = 0; i < p->n_runs; i++) {
        p->runs[i].after = -1;
        if (p->runs[i].train_frames > 0)
            continue;
        for (int64_t j = 0; j < p->n_runs; j++)
            if (j != i && p->runs[j].train_frames > 0 &&
                strcmp(b->train_hash[i], b->train_hash[j]) == 0) {
                p->runs[i].after = j;
                break;
            }
    }
}

static sb_status plan_schedule_runs(sb_plan *p, sb_error *err)
{
    int64_t n = p->n_runs;
    double *sec = malloc((size_t)(n > 0 ? n : 1) * sizeof *sec);
    int64_t *after = malloc((size_t)(n > 0 ? n : 1) * sizeof *after);
    double *start = malloc((size_t)(n > 0 ? n : 1) * sizeof *start);
    int *rank = malloc((size_t)(n > 0 ? n : 1) * sizeof *rank);
    sb_status st = SB_OK;
    if (sec == NULL || after == NULL || start == NULL || rank == NULL) {
        st = sb_error_set(err, SB_ERR_NOMEM, "out of memory planning a sweep");
        goto done;
    }
    double core_s = 0.0;
    for (int64_t i = 0; i < n; i++) {
        sec[i] = p->runs[i].seconds;
        after[i] = p->runs[i].after;
        core_s += sec[i] * p->threads;
    }
    double grid = sb_plan_schedule(sec, after, n, p->ranks, 0, NULL, NULL);
    double wall = sb_plan_schedule(sec, after, n, p->ranks, 1, start, rank);
    for (int64_t i = 0; i < n; i++) {
        p->runs[i].start_s = start[i];
        p->runs[i].rank = rank[i];
    }
    p->core_hours = core_s / 3600.0;
    p->wall_hours = wall / 3600.0;
    p->wall_hours_grid_order = grid / 3600.0;
done:
    free(sec);
    free(after);
    free(start);
    free(rank);
    return st;
}

/* A new plan for opts (checked), its machine and calibration threads filled. */
static sb_status plan_new(const sb_plan_options *opts, sb_plan **out, int *cal_threads,
                          sb_error *err)
{
    if (opts->ranks < 1)
        return sb_error_set(err, SB_ERR_INVALID, "--ranks %d: give at least 1 rank", opts->ranks);
    if (opts->threads < 1 || opts->threads > SB_THREADS_MAX)
        return sb_error_set(err, SB_ERR_INVALID, "--threads %d: give 1 to %d threads",
                            opts->threads, SB_THREADS_MAX);
    sb_plan *p = calloc(1, sizeof *p);
    if (p == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory planning a sweep");
    p->ranks = opts->ranks;
    p->threads = opts->threads;
    snprintf(p->cache, sizeof p->cache, "%s", opts->cache_path != NULL ? opts->cache_path : "");
    sb_plan_machine(p->machine, sizeof p->machine);
    int cores = sb_cpu_count();
    int t = opts->threads < cores ? opts->threads : cores;
    if (opts->calibration_threads > 0 && opts->calibration_threads < t)
        t = opts->calibration_threads;
    *cal_threads = t < 1 ? 1 : t;
    *out = p;
    return SB_OK;
}

/* Adds run k of configuration cfg (checked) to the plan: its task and shape found or
 * added, its frames, evaluations, FLOPs and memory. */
static sb_status plan_add_run(sb_plan *p, plan_build *b, const sb_run_config *cfg, int64_t k,
                              int threads, sb_error *err)
{
    int task = 0, cal = 0;
    sb_status st;
    if ((st = sb_task_set_find(&b->tasks, &cfg->task, &task, err)) != SB_OK ||
        (st = shape_find(p, b, cfg, task, threads, &cal, err)) != SB_OK ||
        (st = runs_grow(p, b, err)) != SB_OK)
        return st;
    sb_plan_run *r = &p->runs[p->n_runs];
    memset(r, 0, sizeof *r);
    r->run = k;
    sb_run_config_hash(cfg, 0, r->hash);
    sb_run_config_hash(cfg, 1, b->train_hash[p->n_runs]);
    snprintf(r->model, sizeof r->model, "%s", cfg->model);
    r->calibration = cal;
    if ((st = run_fill(r, cfg, &b->tasks.list[task], &b->shapes[cal], &b->fpf[p->n_runs][0],
                       &b->fpf[p->n_runs][1], err)) != SB_OK)
        return st;
    p->n_runs++;
    return SB_OK;
}

/* The calibrations, each run's seconds and the schedule; then frees what b built. On an
 * error (st_in's or its own) the plan is freed. */
static sb_status plan_finish(sb_plan *p, plan_build *b, const sb_plan_options *opts,
                             int cal_threads, sb_status st, sb_plan **out, sb_error *err)
{
    if (st == SB_OK)
        st = calibrate_all(p, b, opts, cal_threads, err);
    if (st == SB_OK) {
        for (int64_t i = 0; i < p->n_runs; i++) {
            sb_plan_run *r = &p->runs[i];
            const sb_plan_calibration *c = &p->calibrations[r->calibration];
            double f = thread_factor(c, opts->threads);
            double tr = c->train_flops_per_frame > 0 ? b->fpf[i][0] / c->train_flops_per_frame : 1;
            double ev = c->eval_flops_per_frame > 0 ? b->fpf[i][1] / c->eval_flops_per_frame : 1;
            r->seconds = c->setup_s + f * ((double)r->train_frames * c->train_s_per_frame * tr +
                                           (double)r->eval_frames * c->eval_s_per_frame * ev);
        }
        link_dependencies(p, b, NULL);
        st = plan_schedule_runs(p, err);
    }
    sb_task_set_free(&b->tasks);
    free(b->shapes);
    free(b->train_hash);
    free(b->fpf);
    if (st != SB_OK) {
        sb_plan_free(p);
        return st;
    }
    *out = p;
    return SB_OK;
}

void sb_plan_options_from(const sb_runtime *rt, const sb_plan_settings *settings, char *path,
                          size_t size, sb_plan_options *o)
{
    memset(o, 0, sizeof *o);
    o->ranks = rt->ranks > 0 ? rt->ranks : 1; /* none */
    /* threads 0: what `sweep --workers RANKS` gives each run */
    o->threads = rt->threads > 0 ? rt->threads : sb_cpu_count() / o->ranks;
    if (o->threads < 1)
        o->threads = 1;
    o->seconds_per_calibration = rt->calibration_seconds;
    o->calibration_threads = rt->calibration_threads;
    o->recalibrate = rt->recalibrate;
    o->cached_only = rt->cached_only;
    if (strcmp(rt->calibration_cache, "none") == 0)
        snprintf(path, size, "%s", "");
    else if (rt->calibration_cache[0] != '\0')
        snprintf(path, size, "%s", rt->calibration_cache);
    else
        sb_plan_cache_default_path(path, size);
    o->cache_path = path[0] != '\0' ? path : NULL;
    if (settings != NULL) {
        o->on_calibration = settings->on_calibration;
        o->user = settings->user;
    }
}

sb_status sb_plan_make_with(const sb_sweep *s, const sb_sweep_selection *sel,
                            const sb_plan_options *opts, sb_plan **out, sb_error *err)
{
    if (out == NULL || s == NULL || sel == NULL || opts == NULL)
        return sb_error_set(err, SB_ERR_INVALID, "sb_plan_make: NULL argument");
    *out = NULL;
    sb_plan *p = NULL;
    int cal_threads = 1;
    sb_status st = plan_new(opts, &p, &cal_threads, err);
    if (st != SB_OK)
        return st;
    plan_build b = {0};
    int64_t n_sel = sb_sweep_selection_size(sel);
    for (int64_t i = 0; st == SB_OK && i < n_sel; i++) {
        int64_t k = 0;
        sb_run_config cfg;
        sb_error refused;
        sb_status rs = sb_sweep_selected_run(s, sel, i, &k, &cfg, &refused, err);
        if (rs == SB_ERR_NOMEM)
            st = rs;
        if (rs != SB_OK) { /* a refused or excluded run costs nothing, as in the dry run */
            if (rs != SB_ERR_NOMEM && rs != SB_ERR_EXCLUDED && p->n_refused++ == 0)
                snprintf(p->first_refused, sizeof p->first_refused, "run %lld: %.480s",
                         (long long)k, refused.msg);
            continue;
        }
        st = plan_add_run(p, &b, &cfg, k, opts->threads, err);
    }
    return plan_finish(p, &b, opts, cal_threads, st, out, err);
}

sb_status sb_plan_run_config(const sb_run_config *cfg, const sb_plan_options *opts, sb_plan **out,
                             sb_error *err)
{
    if (out == NULL || cfg == NULL || opts == NULL)
        return sb_error_set(err, SB_ERR_INVALID, "sb_plan_run_config: NULL argument");
    *out = NULL;
    sb_status st = sb_run_config_check(cfg, err);
    if (st != SB_OK)
        return st;
    sb_plan *p = NULL;
    int cal_threads = 1;
    if ((st = plan_new(opts, &p, &cal_threads, err)) != SB_OK)
        return st;
    plan_build b = {0};
    st = plan_add_run(p, &b, cfg, 0, opts->threads, err);
    return plan_finish(p, &b, opts, cal_threads, st, out, err);
}

double sb_plan_time_left(const sb_plan *p, const double *done_share, const double *spent_s)
{
    if (p == NULL || done_share == NULL || spent_s == NULL)
        return (double)NAN;
    double left = 0, spent = 0, planned_done = 0;
    for (int64_t i = 0; i < p->n_runs; i++) {
        double share = done_share[i] < 0 ? 0 : done_share[i] > 1 ? 1 : done_share[i];
        left += p->runs[i].seconds * (1.0 - share);
        if (spent_s[i] > 0 && share > 0) {
            spent += spent_s[i];
            planned_done += p->runs[i].seconds * share;
        }
    }
    double pace = planned_done > 0 ? spent / planned_done : 1.0;
    return pace * left / (p->ranks > 0 ? p->ranks : 1);
}

void sb_plan_free(sb_plan *p)
{
    if (p == NULL)
        return;
    free(p->runs);
    free(p->calibrations);
    free(p);
}

/* ---- JSON ----------------------------------------------------------------------------- */

static const char *source_name(sb_plan_source s)
{
    return s == SB_PLAN_MEASURED ? "measured" : s == SB_PLAN_CACHED ? "cached" : "flop_rate";
}

/* One run of the plan as a JSON object: its hash, model, the parameters that vary among the
 * plan's runs (varied[q]; NULL: none), its frames, FLOPs, memory, time and place. */
static void write_plan_run(sb_json *j, const sb_plan *p, const sb_sweep *s, const int *varied,
                           const sb_plan_run *r)
{
    sb_json_object_begin(j);
    sb_json_key(j, "hash");
    sb_json_string(j, r->hash);
    sb_json_key(j, "model");
    sb_json_string(j, r->model);
    for (int q = 0; varied != NULL && q < s->n_params; q++) {
        if (!varied[q] || strcmp(s->params[q].name, "model") == 0)
            continue;
        sb_json_key(j, s->params[q].name);
        sb_json_string(j, s->params[q].values[sb_sweep_value_index(s, r->run, q)]);
    }
    sb_json_key(j, "train_frames");
    sb_json_int(j, r->train_frames);
    sb_json_key(j, "eval_frames");
    sb_json_int(j, r->eval_frames);
    sb_json_key(j, "evaluations");
    sb_json_int(j, r->evaluations);
    sb_json_key(j, "flops");
    sb_json_double(j, r->flops);
    sb_json_key(j, "peak_bytes");
    sb_json_double(j, r->peak_bytes);
    sb_json_key(j, "seconds");
    sb_json_double(j, r->seconds);
    sb_json_key(j, "after");
    if (r->after >= 0)
        sb_json_string(j, p->runs[r->after].hash);
    else
        sb_json_null(j);
    sb_json_key(j, "rank");
    sb_json_int(j, r->rank);
    sb_json_key(j, "start_s");
    sb_json_double(j, r->start_s);
    sb_json_object_end(j);
}

/* One calibration of the plan as a JSON object. */
static void write_plan_calibration(sb_json *j, const sb_plan_calibration *c)
{
    sb_json_object_begin(j);
    sb_json_key(j, "key");
    sb_json_string(j, c->key);
    sb_json_key(j, "source");
    sb_json_string(j, source_name(c->source));
    sb_json_key(j, "train_s_per_frame");
    sb_json_double(j, c->train_s_per_frame);
    sb_json_key(j, "eval_s_per_frame");
    sb_json_double(j, c->eval_s_per_frame);
    sb_json_key(j, "setup_s");
    sb_json_double(j, c->setup_s);
    sb_json_key(j, "gemm_share");
    sb_json_double(j, c->gemm_share);
    sb_json_key(j, "gflops");
    sb_json_double(j, c->gflops);
    sb_json_key(j, "calibrated_threads");
    sb_json_int(j, c->calibrated_threads);
    sb_json_key(j, "calibrated_layers");
    sb_json_int(j, c->calibrated_layers);
    sb_json_object_end(j);
}

sb_status sb_plan_to_json(const sb_plan *p, const sb_sweep *s, char **json, sb_error *err)
{
    if (p == NULL || s == NULL || json == NULL)
        return sb_error_set(err, SB_ERR_INVALID, "sb_plan_to_json: NULL argument");
    *json = NULL;
    size_t len = 0;
    FILE *f = open_memstream(json, &len);
    if (f == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory writing a plan");
    /* the parameters the plan's runs vary: those with more than one value among them */
    int *varied = calloc((size_t)(s->n_params > 0 ? s->n_params : 1), sizeof *varied);
    for (int q = 0; varied != NULL && q < s->n_params && p->n_runs > 0; q++) {
        int first = sb_sweep_value_index(s, p->runs[0].run, q);
        for (int64_t i = 1; i < p->n_runs && !varied[q]; i++)
            varied[q] = sb_sweep_value_index(s, p->runs[i].run, q) != first;
    }
    sb_json j;
    sb_json_init(&j, f, 0);
    sb_json_object_begin(&j);
    sb_json_key(&j, "runs");
    sb_json_int(&j, p->n_runs);
    sb_json_key(&j, "core_hours");
    sb_json_double(&j, p->core_hours);
    sb_json_key(&j, "wall_hours");
    sb_json_double(&j, p->wall_hours);
    sb_json_key(&j, "per_run");
    sb_json_array_begin(&j);
    for (int64_t i = 0; i < p->n_runs; i++)
        write_plan_run(&j, p, s, varied, &p->runs[i]);
    sb_json_array_end(&j);
    sb_json_key(&j, "wall_hours_grid_order");
    sb_json_double(&j, p->wall_hours_grid_order);
    sb_json_key(&j, "ranks");
    sb_json_int(&j, p->ranks);
    sb_json_key(&j, "threads");
    sb_json_int(&j, p->threads);
    sb_json_key(&j, "machine");
    sb_json_string(&j, p->machine);
    sb_json_key(&j, "early_stopping");
    sb_json_string(&j, "not foreseen: every run is planned to its last update");
    sb_json_key(&j, "calibrations");
    sb_json_array_begin(&j);
    for (int i = 0; i < p->n_calibrations; i++)
        write_plan_calibration(&j, &p->calibrations[i]);
    sb_json_array_end(&j);
    sb_json_object_end(&j);
    free(varied);
    if (fclose(f) != 0 || varied == NULL) {
        free(*json);
        *json = NULL;
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory writing a plan");
    }
    return SB_OK;
}
