/*
 * sweep_coord.c - a sweep's coordinator (the public header's sb_sweep_coordinate; the MPI
 * sweep's rank 0). It is the only process that writes the results database (SQLite on a
 * network file system must not have several writers): every run goes to a worker with a seed,
 * a small database holding what the database has of the run (sb_results_extract_run), and
 * comes back as that seed after the run (sb_results_take_run). Which run goes next is the
 * queue's rule (sweep_queue.c). The transport (MPI in the command line, a function call in
 * the tests) is the caller's: it delivers the workers' messages and carries runs and stops.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fs.h"
#include "core/timer.h"
#include "exp/results.h"
#include "exp/run_store.h"
#include "exp/sweep_coord.h"

#define SEED_MAX ((size_t)1 << 30) /* a run's database is kilobytes; this is a bound */
#define TICK_S 60.0                /* a TICK event after this long without one */
#define WAIT_S 0.02                /* the transport's wait between cancel polls */

/* ---- seeds as bytes ---------------------------------------------------------------------- */

sb_status sb_seed_read(const char *path, char **buf, size_t *len, sb_error *err)
{
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return sb_error_set(err, SB_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || sb.st_size < 0 || (size_t)sb.st_size > SEED_MAX) {
        fclose(f);
        return sb_error_set(err, SB_ERR_IO, "'%s' is not a run's database (size)", path);
    }
    size_t n = (size_t)sb.st_size;
    char *data = malloc(n > 0 ? n : 1);
    if (data == NULL || fread(data, 1, n, f) != n) {
        free(data);
        fclose(f);
        return sb_error_set(err, SB_ERR_IO, "cannot read '%s'", path);
    }
    fclose(f);
    *buf = data;
    *len = n;
    return SB_OK;
}

sb_status sb_seed_write(const char *path, const char *buf, size_t len, sb_error *err)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return sb_error_set(err, SB_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    int ok = fwrite(buf, 1, len, f) == len;
    ok = fclose(f) == 0 && ok;
    return ok ? SB_OK : sb_error_set(err, SB_ERR_IO, "cannot write '%s'", path);
}

void sb_seed_remove(const char *path)
{
    char side[SB_PATH_MAX + 16];
    remove(path);
    if (snprintf(side, sizeof side, "%s-wal", path) < (int)sizeof side)
        remove(side);
    if (snprintf(side, sizeof side, "%s-shm", path) < (int)sizeof side)
        remove(side);
}

/* ---- the coordinator ------------------------------------------------------------------- */

/* What the coordinator keeps of a queued run beside the queue, by the queue's index. */
typedef struct run_place {
    int worker;
    double started;
    int64_t step, total_steps; /* the last progress report; step -1: none yet */
} run_place;

typedef struct coordinator {
    const sb_coord_settings *io;
    sb_results *db;
    sb_sweep_queue *queue;
    run_place *place; /* [queued] */
    int64_t queued;
    char (*hosts)[256]; /* [max_id] */
    int max_id, n_workers;
    int *parked; /* workers waiting for a run that depends on a running one */
    int n_parked;
    int stopped; /* workers told to stop */
    int running;
    sb_coord_tally tally;
    char seed_dir[SB_PATH_MAX];
    double t0, next_tick;
    int64_t *progress; /* [3 * queued], a TICK's */
} coordinator;

static void emit(coordinator *c, sb_coord_event *ev)
{
    ev->counts = c->tally;
    ev->running = c->running;
    ev->elapsed_s = sb_time_now() - c->t0;
    if (c->io->on_event != NULL)
        c->io->on_event(ev, c->io->user);
    c->next_tick = sb_time_now() + TICK_S;
}

/* Hands queued run i to worker w with its seed; SB_OK, or an error (the run stays pending). */
static sb_status hand_out(coordinator *c, int64_t i, int w, sb_error *err)
{
    const sb_queued_run *r = sb_sweep_queue_run(c->queue, i);
    char seed[SB_PATH_MAX + 64];
    snprintf(seed, sizeof seed, "%s/seed-%s-%d.db", c->seed_dir, r->hash[0] ? r->hash : "none", w);
    sb_seed_remove(seed);
    int found = 0;
    char *bytes = NULL;
    size_t len = 0;
    sb_status st =
        r->hash[0] != '\0' ? sb_results_extract_run(c->db, r->hash, seed, &found, err) : SB_OK;
    if (st == SB_OK && r->hash[0] != '\0')
        st = sb_seed_read(seed, &bytes, &len, err);
    sb_seed_remove(seed);
    if (st == SB_OK && c->io->send_run(c->io->user, w, r->run, bytes, len) != 0)
        st = sb_error_set(err, SB_ERR_RUNTIME, "cannot send run %lld to worker %d",
                          (long long)r->run, w);
    free(bytes);
    if (st != SB_OK)
        return st;
    sb_sweep_queue_set(c->queue, i, SB_QUEUE_RUNNING);
    c->place[i] = (run_place){.worker = w, .started = sb_time_now(), .step = -1};
    c->running++;
    sb_coord_event ev = {.kind = SB_COORD_STARTED,
                         .run = r->run,
                         .model = r->model,
                         .hash = r->hash,
                         .worker = w,
                         .host = c->hosts[w],
                         .continuing = found};
    emit(c, &ev);
    return SB_OK;
}

static void count_outcome(sb_coord_tally *t, sb_sweep_outcome outcome)
{
    switch (outcome) {
    case SB_SWEEP_DONE: t->done++; break;
    case SB_SWEEP_SKIPPED: t->skipped++; break;
    case SB_SWEEP_REFUSED: t->refused++; break;
    case SB_SWEEP_EXCLUDED: t->excluded++; break;
    case SB_SWEEP_INTERRUPTED: t->interrupted++; break;
    default: t->failed++; break;
    }
}

static int stop_worker(coordinator *c, int w)
{
    c->stopped++;
    return c->io->send_stop(c->io->user, w);
}

/* Gives idle worker w the next run, parks it when the next runs wait for running ones, or
 * tells it to stop. -1 when the transport failed. */
static int serve_idle(coordinator *c, int w)
{
    for (;;) {
        int blocked = 0;
        int64_t i = c->tally.signal == 0 ? sb_sweep_queue_next(c->queue, &blocked) : -1;
        if (i < 0) {
            if (blocked && c->tally.signal == 0) {
                c->parked[c->n_parked++] = w;
                return 0;
            }
            return stop_worker(c, w);
        }
        sb_error err = {0};
        if (hand_out(c, i, w, &err) == SB_OK)
            return 0;
        if (err.status == SB_ERR_RUNTIME) /* the transport */
            return -1;
        /* the run's seed could not be made: it fails, and the worker takes the next */
        const sb_queued_run *r = sb_sweep_queue_run(c->queue, i);
        sb_sweep_queue_set(c->queue, i, SB_QUEUE_SETTLED);
        c->tally.failed++;
        sb_coord_event ev = {.kind = SB_COORD_ENDED,
                             .run = r->run,
                             .model = r->model,
                             .hash = r->hash,
                             .worker = w,
                             .host = c->hosts[w],
                             .outcome = SB_SWEEP_FAILED,
                             .test_acc = (double)NAN,
                             .reason = err.msg};
        emit(c, &ev);
    }
}

/* The record of a DONE run taken into the database, with its placement. */
static sb_status take_record(coordinator *c, const sb_queued_run *r, const sb_coord_message *m,
                             sb_error *err)
{
    if (m->seed == NULL || m->seed_len == 0 || r->hash[0] == '\0')
        return SB_OK;
    char path[SB_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/done-%s-%d.db", c->seed_dir, r->hash, m->worker);
    sb_seed_remove(path);
    int found = 0;
    sb_status st = sb_seed_write(path, m->seed, m->seed_len, err);
    if (st == SB_OK)
        st = sb_results_take_run(c->db, path, r->hash, &found, err);
    sb_run_row row;
    int there = 0;
    if (st == SB_OK && found &&
        (st = sb_results_get_run(c->db, r->hash, &row, &there, err)) == SB_OK && there) {
        st = sb_results_set_placement(c->db, r->hash, m->host, m->worker, row.r.attempts, err);
        sb_results_run_row_clear(&row);
    }
    sb_seed_remove(path);
    return st;
}

/* A worker's run ended: its record taken in, counted, told. */
static void take_done(coordinator *c, const sb_coord_message *m)
{
    int64_t i = sb_sweep_queue_find(c->queue, m->run);
    if (i < 0 || sb_sweep_queue_run(c->queue, i)->state != SB_QUEUE_RUNNING ||
        c->place[i].worker != m->worker)
        return; /* not a run this worker was given */
    const sb_queued_run *r = sb_sweep_queue_run(c->queue, i);
    sb_sweep_queue_set(c->queue, i, SB_QUEUE_SETTLED);
    c->running--;
    sb_error err = {0};
    sb_status st = take_record(c, r, m, &err);
    sb_sweep_outcome outcome =
        m->outcome > SB_SWEEP_NO_OUTCOME && m->outcome <= SB_SWEEP_INTERRUPTED ? m->outcome
                                                                               : SB_SWEEP_FAILED;
    if (st != SB_OK)
        outcome = SB_SWEEP_FAILED;
    count_outcome(&c->tally, outcome);
    sb_coord_event ev = {.kind = SB_COORD_ENDED,
                         .run = r->run,
                         .model = r->model,
                         .hash = r->hash,
                         .worker = m->worker,
                         .host = m->host,
                         .outcome = outcome,
                         .test_acc = m->test_acc,
                         .reason = st != SB_OK ? err.msg : m->reason,
                         .run_s = sb_time_now() - c->place[i].started};
    emit(c, &ev);
}

static void tick(coordinator *c)
{
    int n = 0;
    for (int64_t i = 0; i < c->queued; i++)
        if (sb_sweep_queue_run(c->queue, i)->state == SB_QUEUE_RUNNING && c->place[i].step >= 0) {
            c->progress[3 * n] = sb_sweep_queue_run(c->queue, i)->run;
            c->progress[3 * n + 1] = c->place[i].step;
            c->progress[3 * n + 2] = c->place[i].total_steps;
            n++;
        }
    sb_coord_event ev = {.kind = SB_COORD_TICK, .progress = c->progress, .n_progress = n};
    emit(c, &ev);
}

/* One message, or a tick; -1 when the transport failed. */
static int step(coordinator *c)
{
    if (c->tally.signal == 0 && c->io->cancel != NULL &&
        (c->tally.signal = c->io->cancel(c->io->user)) != 0) {
        /* parked workers get nothing more */
        for (int p = 0; p < c->n_parked; p++)
            if (stop_worker(c, c->parked[p]) != 0)
                return -1;
        c->n_parked = 0;
    }
    sb_coord_message m;
    memset(&m, 0, sizeof m);
    int got = c->io->receive(c->io->user, WAIT_S, &m);
    if (got < 0)
        return -1;
    if (got == 0) {
        if (sb_time_now() >= c->next_tick)
            tick(c);
        return 0;
    }
    if (m.worker < 1 || m.worker >= c->max_id)
        return 0; /* not one of ours */
    m.host[sizeof m.host - 1] = '\0';
    m.reason[sizeof m.reason - 1] = '\0';
    if (m.kind == SB_COORD_READY) {
        snprintf(c->hosts[m.worker], sizeof c->hosts[m.worker], "%s", m.host);
        return serve_idle(c, m.worker);
    }
    if (m.kind == SB_COORD_PROGRESS) {
        int64_t i = sb_sweep_queue_find(c->queue, m.run);
        if (i >= 0) {
            c->place[i].step = m.step;
            c->place[i].total_steps = m.total_steps;
        }
        return 0;
    }
    if (m.kind != SB_COORD_DONE)
        return 0;
    take_done(c, &m);
    if (serve_idle(c, m.worker) != 0)
        return -1;
    /* a settled run may free the runs that waited for its weights (serve_idle parks at
     * index n_parked <= p: the list is read before it is written) */
    int n = c->n_parked;
    c->n_parked = 0;
    for (int p = 0; p < n; p++)
        if (serve_idle(c, c->parked[p]) != 0)
            return -1;
    return 0;
}

static void coordinator_free(coordinator *c)
{
    sb_results_close(c->db);
    sb_sweep_queue_free(c->queue);
    free(c->place);
    free(c->hosts);
    free(c->parked);
    free(c->progress);
}

sb_status sb_sweep_coordinate_with(const sb_sweep *s, const sb_sweep_selection *sel,
                                   const char *results, const char *db_path, int n_workers,
                                   int max_id, const sb_coord_settings *settings,
                                   sb_coord_tally *tally, sb_error *err)
{
    if (s == NULL || sel == NULL || settings == NULL || settings->receive == NULL ||
        settings->send_run == NULL || settings->send_stop == NULL || results == NULL)
        return sb_error_set(err, SB_ERR_INVALID, "sb_sweep_coordinate: NULL argument");
    if (n_workers < 1 || max_id <= n_workers)
        return sb_error_set(err, SB_ERR_INVALID,
                            "sb_sweep_coordinate: %d workers with ids below %d: give at least "
                            "one worker, ids 1 .. max_id - 1",
                            n_workers, max_id);
    coordinator c = {.io = settings, .max_id = max_id, .n_workers = n_workers, .t0 = sb_time_now()};
    c.next_tick = c.t0 + TICK_S;
    char db_default[SB_PATH_MAX];
    sb_status st = SB_OK;
    if (db_path == NULL &&
        (st = sb_run_store_db_path(results, db_default, sizeof db_default, err)) == SB_OK)
        db_path = db_default;
    if (st == SB_OK &&
        snprintf(c.seed_dir, sizeof c.seed_dir, "%s/mpi", results) >= (int)sizeof c.seed_dir)
        st =
            sb_error_set(err, SB_ERR_INVALID, "results folder '%s': the path is too long", results);
    if (st == SB_OK)
        st = sb_make_dirs(c.seed_dir, "results folder", err);
    c.hosts = calloc((size_t)max_id, sizeof *c.hosts);
    c.parked = calloc((size_t)n_workers + 1, sizeof *c.parked);
    if (st == SB_OK && (c.hosts == NULL || c.parked == NULL))
        st = sb_error_set(err, SB_ERR_NOMEM, "out of memory");
    if (st == SB_OK)
        st = sb_results_open(db_path, &c.db, err);
    if (st == SB_OK)
        st = sb_sweep_queue_make(s, sel, c.db, results, &c.queue, &c.tally.skipped, err);
    if (st == SB_OK) {
        c.queued = c.tally.queued = sb_sweep_queue_size(c.queue);
        c.place = calloc((size_t)(c.queued > 0 ? c.queued : 1), sizeof *c.place);
        c.progress = calloc((size_t)(3 * (c.queued > 0 ? c.queued : 1)), sizeof *c.progress);
        if (c.place == NULL || c.progress == NULL)
            st = sb_error_set(err, SB_ERR_NOMEM, "out of memory listing %lld runs",
                              (long long)c.queued);
    }
    if (st == SB_OK) {
        sb_coord_event ev = {.kind = SB_COORD_BEGIN};
        emit(&c, &ev);
    }
    while (st == SB_OK && (c.stopped < n_workers || c.running > 0))
        if (step(&c) != 0)
            st = sb_error_set(err, SB_ERR_RUNTIME, "the sweep's transport failed");
    if (tally != NULL)
        *tally = c.tally;
    coordinator_free(&c);
    return st;
}
