/* sweep_queue.c - the order a coordinator hands a sweep's runs out in (the public header's
 * sb_sweep_queue_*; the MPI sweep's coordinator is its user): the unfinished runs of a
 * selection, largest first, and the rule that a run evaluating saved weights waits for the
 * run that trains them. The coordinator keeps what is its own (ranks, hosts, progress)
 * beside the queue, by the queue's index. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config/run_config.h"
#include "exp/results.h"
#include "exp/sweep.h"
#include "exp/sweep_exec.h"

struct sb_sweep_queue {
    sb_queued_run *runs;
    int64_t n;
    char *results; /* the shared results folder: where trained weights appear */
};

static int cmp_flops_desc(const void *a, const void *b)
{
    const sb_queued_run *x = a, *y = b;
    if (x->flops != y->flops)
        return x->flops > y->flops ? -1 : 1;
    return x->run < y->run ? -1 : x->run > y->run; /* the grid's order among equals */
}

/* Run k as the queue needs it; 0 when the database holds it as finished. */
static int queue_entry(const sb_sweep *s, int64_t k, double flops, sb_results *db,
                       sb_queued_run *out)
{
    memset(out, 0, sizeof *out);
    out->run = k;
    out->flops = flops;
    out->state = SB_QUEUE_PENDING;
    sb_run_config cfg;
    sb_error why = {0};
    if (sb_sweep_run_config(s, k, &cfg, &why) != SB_OK)
        return 1; /* a run whose configuration cannot be built goes to a worker, which refuses it */
    sb_run_config_hash(&cfg, 0, out->hash);
    sb_run_config_hash(&cfg, 1, out->train_hash);
    snprintf(out->model, sizeof out->model, "%s", cfg.model);
    out->pretrained = cfg.test_pretrained;
    sb_run_row row;
    int found = 0;
    int finished = 0;
    if (db != NULL && sb_results_get_run(db, out->hash, &row, &found, &why) == SB_OK && found) {
        finished = row.r.status == SB_RUN_FINISHED;
        sb_results_run_row_clear(&row);
    }
    return !finished;
}

sb_status sb_sweep_queue_make(const sb_sweep *s, const sb_sweep_selection *sel, sb_results *db,
                              const char *results, sb_sweep_queue **out, int *skipped,
                              sb_error *err)
{
    if (out == NULL || s == NULL || sel == NULL)
        return sb_error_set(err, SB_ERR_INVALID, "sb_sweep_queue_make: NULL argument");
    *out = NULL;
    if (skipped != NULL)
        *skipped = 0;
    int64_t n_sel = sb_sweep_selection_size(sel);
    double *flops = calloc((size_t)(n_sel > 0 ? n_sel : 1), sizeof *flops);
    sb_sweep_queue *q = calloc(1, sizeof *q);
    if (q != NULL) {
        q->runs = calloc((size_t)(n_sel > 0 ? n_sel : 1), sizeof *q->runs);
        q->results = strdup(results != NULL ? results : "results");
    }
    if (flops == NULL || q == NULL || q->runs == NULL || q->results == NULL) {
        free(flops);
        sb_sweep_queue_free(q);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory listing %lld runs", (long long)n_sel);
    }
    sb_status st = sb_sweep_run_flops(s, sel, flops, err);
    for (int64_t i = 0; st == SB_OK && i < n_sel; i++) {
        if (queue_entry(s, sb_sweep_selection_run(sel, i), flops[i], db, &q->runs[q->n]))
            q->n++;
        else if (skipped != NULL)
            (*skipped)++;
    }
    free(flops);
    if (st != SB_OK) {
        sb_sweep_queue_free(q);
        return st;
    }
    qsort(q->runs, (size_t)q->n, sizeof *q->runs, cmp_flops_desc);
    *out = q;
    return SB_OK;
}

int64_t sb_sweep_queue_size(const sb_sweep_queue *q)
{
    return q != NULL ? q->n : 0;
}

const sb_queued_run *sb_sweep_queue_run(const sb_sweep_queue *q, int64_t i)
{
    return q != NULL && i >= 0 && i < q->n ? &q->runs[i] : NULL;
}

int64_t sb_sweep_queue_find(const sb_sweep_queue *q, int64_t k)
{
    for (int64_t i = 0; q != NULL && i < q->n; i++)
        if (q->runs[i].run == k)
            return i;
    return -1;
}

/* Whether run i must wait: it evaluates weights that are not there yet and that a run of the
 * queue still has to train. */
static int must_wait(const sb_sweep_queue *q, int64_t i)
{
    const sb_queued_run *r = &q->runs[i];
    if (!r->pretrained)
        return 0;
    char ckpt[SB_PATH_MAX + 64];
    snprintf(ckpt, sizeof ckpt, "%s/checkpoints/%s.safetensors", q->results, r->train_hash);
    struct stat st;
    if (stat(ckpt, &st) == 0)
        return 0;
    for (int64_t j = 0; j < q->n; j++)
        if (!q->runs[j].pretrained && q->runs[j].state != SB_QUEUE_SETTLED &&
            strcmp(q->runs[j].train_hash, r->train_hash) == 0)
            return 1;
    return 0;
}

int64_t sb_sweep_queue_next(const sb_sweep_queue *q, int *blocked)
{
    if (blocked != NULL)
        *blocked = 0;
    for (int64_t i = 0; q != NULL && i < q->n; i++) {
        if (q->runs[i].state != SB_QUEUE_PENDING)
            continue;
        if (must_wait(q, i)) {
            if (blocked != NULL)
                *blocked = 1;
            continue;
        }
        return i;
    }
    return -1;
}

void sb_sweep_queue_set(sb_sweep_queue *q, int64_t i, sb_queue_state state)
{
    if (q != NULL && i >= 0 && i < q->n)
        q->runs[i].state = state;
}

void sb_sweep_queue_free(sb_sweep_queue *q)
{
    if (q == NULL)
        return;
    free(q->runs);
    free(q->results);
    free(q);
}
