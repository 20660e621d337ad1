/*
 * sweep_mpi.c - a sweep over an MPI world (sweep_mpi.h; docs/cluster.md, "MPI sweeps"): the
 * coordinator, rank 0, here; the worker ranks and teams in sweep_mpi_worker.c; their
 * messages in sweep_mpi_msg.h.
 *
 * Rank 0 is the coordinator and the only process that writes the results database: SQLite
 * on a network file system must not have several writers. It lists the selected runs that
 * the database does not hold as finished, orders them by their training FLOPs (largest
 * first, so that a long run does not start last), and answers each idle rank with the next
 * run. With the run goes a seed: a small database holding the run's row and evaluations,
 * if it has any, and the cached ceilings, written by sb_results_extract_run. The worker
 * rank trains the run the way `sweep --workers 1` does (sb_sweep_run: a `train` process
 * recording into the seed, which continues an interrupted run from its checkpoint in the
 * shared results folder), then sends the seed back; rank 0 takes the run from it into the
 * database (sb_results_take_run) and records the host, the rank and the attempts.
 *
 * A rank that dies takes its run with it: rerunning the same command trains that run again
 * (or continues it from its checkpoint when it was recorded as interrupted); runs already
 * taken into the database are skipped. SIGUSR1 or SIGTERM (mpirun passes them on) stops
 * every rank's run at its next update with a checkpoint; the coordinator waits for their
 * records, then the sweep exits 75.
 *
 * Messages (MPI_BYTE): READY (worker -> 0, its host name), RUN (0 -> worker: run_head and
 * the seed), PROGRESS (worker -> 0: progress_msg), DONE (worker -> 0: done_head and the
 * seed as it ended), STOP (0 -> worker: no more runs).
 *
 * Teams (--ranks_per_run K > 1): ranks 1..N-1 form teams of K consecutive ranks, and only a
 * team's first rank (its leader) talks to rank 0, which sees one worker per team. A run whose
 * grad_shards is a multiple of K is trained by the whole team inside its processes,
 * data-parallel over the team's communicator (sb_train_config's world fields: the weights
 * are those of `train` with the same grad_shards on one process); the leader records it in
 * the seed and sends it back. Any other run the leader trains alone, as above, while the
 * rest of its team waits. The leader tells its team what to do with team_msg (a broadcast
 * that the waiting ranks poll with pauses, so that they leave the cores to the training).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/mpi_comm.h"
#include "cli/signals.h"
#include "cli/sweep_mpi.h"
#include "cli/sweep_mpi_msg.h"

#ifdef SB_HAVE_MPI

#define STATUS_EVERY_S 60.0 /* the coordinator's sweep line, without a terminal */

/* ---- the coordinator ---------------------------------------------------------------- */

/* What the coordinator keeps of a queued run beside the queue (sb_sweep_queue: which run
 * goes next), by the queue's index. */
typedef struct mpi_run {
    int rank;
    double started;
    progress_msg last;
} mpi_run;

typedef struct coordinator {
    const sb_mpi_sweep *job;
    sb_results *db;
    sb_sweep_queue *queue; /* the runs to hand out, largest first (the library's policy) */
    mpi_run *runs;         /* [n_runs], by queue index */
    int64_t n_runs;
    int n_workers; /* ranks that ask for runs: every rank but 0, or each team's leader */
    int world;     /* the world's size: ranks 1..world-1 work */
    int team_size; /* ranks per team (--ranks_per_run; 1: each rank alone) */
    char (*hosts)[HOST_MAX];
    int *parked; /* ranks waiting for a run that depends on a running one */
    int n_parked;
    int stopped; /* workers told STOP */
    int running;
    int done, failed, skipped, refused, excluded, interrupted;
    int sig; /* the stop signal, once caught */
    char seed_dir[4096];
    double t0, next_status;
} coordinator;

/* The selected runs that are not finished, largest first (sb_sweep_queue_make). */
static sb_status list_runs(coordinator *c, sb_error *err)
{
    sb_status st = sb_sweep_queue_make(c->job->sweep, c->job->sel, c->db, c->job->results,
                                       &c->queue, &c->skipped, err);
    if (st != SB_OK)
        return st;
    c->n_runs = sb_sweep_queue_size(c->queue);
    c->runs = calloc((size_t)(c->n_runs > 0 ? c->n_runs : 1), sizeof *c->runs);
    if (c->runs == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory listing %lld runs",
                            (long long)c->n_runs);
    for (int64_t i = 0; i < c->n_runs; i++)
        c->runs[i].rank = -1;
    return SB_OK;
}

/* Hands run i to `rank` with its seed; returns 0, or -1 when it could not be sent (the run
 * stays pending). */
static int hand_out(coordinator *c, int64_t i, int rank, sb_error *err)
{
    const sb_queued_run *r = sb_sweep_queue_run(c->queue, i);
    char seed[4200];
    snprintf(seed, sizeof seed, "%s/seed-%s-%d.db", c->seed_dir, r->hash[0] ? r->hash : "none",
             rank);
    sb_seed_remove(seed);
    int found = 0;
    char *bytes = NULL;
    size_t len = 0;
    sb_status st =
        r->hash[0] != '\0' ? sb_results_extract_run(c->db, r->hash, seed, &found, err) : SB_OK;
    if (st == SB_OK && r->hash[0] != '\0')
        st = sb_seed_read(seed, &bytes, &len, err);
    sb_seed_remove(seed);
    if (st != SB_OK)
        return -1;
    run_head head = {.run = r->run, .seed_len = (int64_t)len};
    int rc = sb_mpi_send_two(rank, TAG_RUN, &head, sizeof head, bytes, len);
    free(bytes);
    if (rc != 0) {
        sb_error_set(err, SB_ERR_RUNTIME, "cannot send run %lld to rank %d", (long long)r->run,
                     rank);
        return -1;
    }
    sb_sweep_queue_set(c->queue, i, SB_QUEUE_RUNNING);
    c->runs[i].rank = rank;
    c->runs[i].started = sb_clock_seconds();
    c->runs[i].last.step = -1;
    c->running++;
    if (!c->job->quiet)
        printf("#%lld %s %s: started on rank %d (%s)%s\n", (long long)r->run, r->model, r->hash,
               rank, c->hosts[rank], found ? ", continuing its record" : "");
    return 0;
}

/* Gives idle `rank` the next run, parks it when the next runs wait for running ones, or
 * tells it to stop. */
static void serve_idle(coordinator *c, int rank, sb_error *err)
{
    int blocked = 0;
    int64_t i = c->sig == 0 ? sb_sweep_queue_next(c->queue, &blocked) : -1;
    if (i >= 0 && hand_out(c, i, rank, err) == 0)
        return;
    if (i >= 0) { /* could not hand it out: report, and let the rank go */
        fprintf(stderr, "selectivbench sweep: error: %s\n", err->msg);
        sb_sweep_queue_set(c->queue, i, SB_QUEUE_SETTLED);
        c->failed++;
    }
    if (blocked && c->sig == 0) {
        c->parked[c->n_parked++] = rank;
        return;
    }
    MPI_Send(NULL, 0, MPI_BYTE, rank, TAG_STOP, MPI_COMM_WORLD);
    c->stopped++;
}

/* Counts an outcome of a run. */
static void count_outcome(coordinator *c, sb_sweep_outcome outcome)
{
    switch (outcome) {
    case SB_SWEEP_DONE: c->done++; break;
    case SB_SWEEP_SKIPPED: c->skipped++; break;
    case SB_SWEEP_REFUSED: c->refused++; break;
    case SB_SWEEP_EXCLUDED: c->excluded++; break;
    case SB_SWEEP_INTERRUPTED: c->interrupted++; break;
    default: c->failed++; break;
    }
}

/* A worker's run ended: takes its record into the database, prints the line. */
static void take_done(coordinator *c, int rank, const char *msg, int len)
{
    done_head head;
    if ((size_t)len < sizeof head)
        return;
    memcpy(&head, msg, sizeof head);
    head.reason[sizeof head.reason - 1] = '\0';
    head.host[sizeof head.host - 1] = '\0';
    int64_t i = sb_sweep_queue_find(c->queue, head.run);
    if (i < 0 || head.seed_len < 0 || (size_t)head.seed_len != (size_t)len - sizeof head)
        return;
    const sb_queued_run *r = sb_sweep_queue_run(c->queue, i);
    sb_sweep_queue_set(c->queue, i, SB_QUEUE_SETTLED);
    c->running--;
    sb_error err = {0};
    char path[4200];
    snprintf(path, sizeof path, "%s/done-%s-%d.db", c->seed_dir, r->hash, rank);
    sb_seed_remove(path);
    int found = 0;
    sb_status st = SB_OK;
    if (head.seed_len > 0 && r->hash[0] != '\0') {
        st = sb_seed_write(path, msg + sizeof head, (size_t)head.seed_len, &err);
        if (st == SB_OK)
            st = sb_results_take_run(c->db, path, r->hash, &found, &err);
        sb_result_row row;
        int there = 0;
        if (st == SB_OK && found &&
            (st = sb_results_find(c->db, r->hash, &row, &there, &err)) == SB_OK && there)
            st = sb_results_set_placement(c->db, r->hash, head.host, rank, row.attempts, &err);
    }
    sb_seed_remove(path);
    sb_sweep_outcome outcome =
        head.outcome > SB_SWEEP_NO_OUTCOME && head.outcome <= SB_SWEEP_INTERRUPTED
            ? (sb_sweep_outcome)head.outcome
            : SB_SWEEP_FAILED;
    if (st != SB_OK) {
        fprintf(stderr, "selectivbench sweep: error: run %lld from rank %d: %s\n",
                (long long)r->run, rank, err.msg);
        outcome = SB_SWEEP_FAILED;
    }
    count_outcome(c, outcome);
    if (!c->job->quiet) {
        printf("#%lld %s %s: %s", (long long)r->run, r->model, r->hash,
               sb_sweep_outcome_name(outcome));
        if (!isnan(head.test_acc))
            printf(", test %.4f", head.test_acc);
        printf(" (rank %d on %s, %.0f s)", rank, head.host,
               sb_clock_seconds() - c->runs[i].started);
        if (head.reason[0] != '\0' && outcome != SB_SWEEP_DONE)
            printf(": %s", head.reason);
        printf("\n");
    }
}

/* "3 worker ranks", or "2 teams of 4 ranks" */
static const char *workers_text(const coordinator *c, char *buf, size_t n)
{
    if (c->team_size > 1)
        snprintf(buf, n, "%d team%s of %d ranks", c->n_workers, c->n_workers == 1 ? "" : "s",
                 c->team_size);
    else
        snprintf(buf, n, "%d worker ranks", c->n_workers);
    return buf;
}

static void print_status(coordinator *c)
{
    if (c->job->quiet)
        return;
    int settled = c->done + c->failed + c->refused + c->excluded + c->interrupted;
    char workers[64];
    printf("sweep %s: %d/%lld settled (%d done, %d failed, %d skipped), %d running on "
           "%s, %.0f s",
           c->job->label, settled, (long long)c->n_runs, c->done, c->failed, c->skipped, c->running,
           workers_text(c, workers, sizeof workers), sb_clock_seconds() - c->t0);
    for (int64_t i = 0; i < c->n_runs; i++)
        if (sb_sweep_queue_run(c->queue, i)->state == SB_QUEUE_RUNNING && c->runs[i].last.step >= 0)
            printf("; #%lld %lld/%lld", (long long)sb_sweep_queue_run(c->queue, i)->run,
                   (long long)c->runs[i].last.step, (long long)c->runs[i].last.total_steps);
    printf("\n");
    fflush(stdout);
}

/* The coordinator's loop: until every worker is told to stop and no run is running. */
static int coordinate(coordinator *c)
{
    sb_error err = {0};
    while (c->stopped < c->n_workers || c->running > 0) {
        if (c->sig == 0 && sb_cli_stop_signal() != 0) {
            c->sig = sb_cli_stop_signal();
            /* parked ranks get nothing more */
            for (int p = 0; p < c->n_parked; p++) {
                MPI_Send(NULL, 0, MPI_BYTE, c->parked[p], TAG_STOP, MPI_COMM_WORLD);
                c->stopped++;
            }
            c->n_parked = 0;
        }
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
        if (!flag) {
            if (sb_clock_seconds() >= c->next_status) {
                c->next_status = sb_clock_seconds() + STATUS_EVERY_S;
                print_status(c);
            }
            struct timespec pause = {0, 20 * 1000 * 1000};
            nanosleep(&pause, NULL);
            continue;
        }
        char *msg = NULL;
        int len = 0;
        if (sb_mpi_receive(&st, &msg, &len) != 0) {
            free(msg);
            fprintf(stderr, "selectivbench sweep: error: a message from rank %d was lost\n",
                    st.MPI_SOURCE);
            return 1;
        }
        int rank = st.MPI_SOURCE;
        if (rank < 1 || rank >= c->world) {
            free(msg);
            continue;
        }
        if (st.MPI_TAG == TAG_READY) {
            snprintf(c->hosts[rank], HOST_MAX, "%.*s", len < HOST_MAX ? len : HOST_MAX - 1, msg);
            serve_idle(c, rank, &err);
        } else if (st.MPI_TAG == TAG_PROGRESS && (size_t)len == sizeof(progress_msg)) {
            progress_msg p;
            memcpy(&p, msg, sizeof p);
            int64_t i = sb_sweep_queue_find(c->queue, p.run);
            if (i >= 0)
                c->runs[i].last = p;
        } else if (st.MPI_TAG == TAG_DONE) {
            take_done(c, rank, msg, len);
            serve_idle(c, rank, &err);
            /* a settled run may free the runs that waited for its weights */
            /* (serve_idle parks at index n_parked <= p: the list is read before written) */
            int n = c->n_parked;
            c->n_parked = 0;
            for (int p = 0; p < n; p++) {
                int waiting = c->parked[p];
                serve_idle(c, waiting, &err);
            }
        }
        free(msg);
        fflush(stdout);
    }
    return 0;
}

static int run_coordinator(const sb_mpi_sweep *job)
{
    const int team_size = job->ranks_per_run > 1 ? job->ranks_per_run : 1;
    coordinator c = {.job = job,
                     .world = sb_mpi_size(),
                     .team_size = team_size,
                     .n_workers = (sb_mpi_size() - 1) / team_size,
                     .t0 = sb_clock_seconds()};
    c.next_status = c.t0 + STATUS_EVERY_S;
    sb_error err = {0};
    snprintf(c.seed_dir, sizeof c.seed_dir, "%s/mpi", job->results);
    (void)sb_make_dirs(c.seed_dir, "results folder", &err); /* its failure is err's message */
    c.hosts = calloc((size_t)c.world, sizeof *c.hosts);
    c.parked = calloc((size_t)c.n_workers + 1, sizeof *c.parked);
    if (err.msg[0] == '\0' && (c.hosts == NULL || c.parked == NULL))
        sb_error_set(&err, SB_ERR_NOMEM, "out of memory");
    if (err.msg[0] == '\0' && sb_results_open(job->db, &c.db, &err) == SB_OK)
        (void)list_runs(&c, &err);
    int rc = 0;
    if (err.msg[0] != '\0') {
        fprintf(stderr, "selectivbench sweep: error: %s\n", err.msg);
        sb_results_close(c.db);
        sb_sweep_queue_free(c.queue);
        free(c.runs);
        free(c.hosts);
        free(c.parked);
        sb_mpi_abort(sb_status_exit_code(err.status));
        return 1;
    }
    char workers[64];
    workers_text(&c, workers, sizeof workers);
    if (!job->quiet) {
        printf("sweep %s: %lld runs selected, %d finished before, %lld to run on %s (largest "
               "first)\n",
               job->label, (long long)sb_sweep_selection_size(job->sel), c.skipped,
               (long long)c.n_runs, workers);
        fflush(stdout);
    }
    rc = coordinate(&c);
    int settled = c.done + c.failed + c.refused + c.excluded + c.interrupted;
    printf("sweep %s: %lld runs selected: %d done, %d failed, %d skipped, %d refused, "
           "%d excluded, %d interrupted; %d of %lld settled on %s in %.0f s\n",
           job->label, (long long)sb_sweep_selection_size(job->sel), c.done, c.failed, c.skipped,
           c.refused, c.excluded, c.interrupted, settled, (long long)c.n_runs, workers,
           sb_clock_seconds() - c.t0);
    sb_results_close(c.db);
    sb_sweep_queue_free(c.queue);
    free(c.runs);
    free(c.hosts);
    free(c.parked);
    if (c.sig != 0) {
        fprintf(stderr,
                "selectivbench sweep: sweep interrupted: %d run%s interrupted; run the "
                "same command to resume\n",
                c.interrupted, c.interrupted == 1 ? "" : "s");
        return sb_cli_signal_exit_code(c.sig);
    }
    if (rc != 0)
        return rc;
    return c.failed > 0 || c.refused > 0 || c.interrupted > 0 ? 1 : 0;
}

int sb_cli_sweep_mpi(const sb_mpi_sweep *job)
{
    sb_cli_signals_install(sb_mpi_rank() == 0
                               ? "selectivbench sweep: stopping: the running runs stop after "
                                 "their current update, with a checkpoint\n"
                               : NULL);
    const int team_size = job->ranks_per_run > 1 ? job->ranks_per_run : 1;
    if (team_size == 1)
        return sb_mpi_rank() == 0 ? run_coordinator(job) : sb_sweep_mpi_work(job, MPI_COMM_NULL);
    const int rank = sb_mpi_rank();
    MPI_Comm team_comm = MPI_COMM_NULL;
    if (MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : (rank - 1) / team_size, rank,
                       &team_comm) != MPI_SUCCESS)
        return 1;
    if (rank == 0)
        return run_coordinator(job);
    int rc = sb_sweep_mpi_work(job, team_comm);
    MPI_Comm_free(&team_comm);
    return rc;
}

#else /* without MPI */

int sb_cli_sweep_mpi(const sb_mpi_sweep *job)
{
    (void)job;
    fprintf(stderr, "selectivbench sweep: error: this selectivbench was built without MPI; "
                    "install libopenmpi-dev and build again (docs/cluster.md)\n");
    return 1;
}

#endif
