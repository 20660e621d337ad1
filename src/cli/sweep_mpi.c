/*
 * sweep_mpi.c - a sweep over an MPI world (sweep_mpi.h; docs/cluster.md, "MPI sweeps"): rank
 * 0 runs the library's coordinator (sb_sweep_coordinate: the queue, the seeds, the database)
 * over the MPI transport here, which also prints its lines; the worker ranks and teams are
 * in sweep_mpi_worker.c; their messages in sweep_mpi_msg.h.
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
#include "cli/run_options.h"
#include "cli/signals.h"
#include "cli/sweep_mpi.h"
#include "cli/sweep_mpi_msg.h"

#ifdef SB_HAVE_MPI

/* ---- the coordinator: the library's (sb_sweep_coordinate) over MPI ------------------- */

/* The MPI transport: messages from the worker ranks (or each team's leader) decoded for the
 * library, runs and stops sent to them. */
typedef struct mpi_transport {
    const sb_mpi_sweep *job;
    char *msg; /* the last message's bytes (a DONE's seed points into them) */
    int team_size, n_workers;
} mpi_transport;

/* The message that MPI_Iprobe found, decoded; 0 when it is not one the coordinator reads. */
static int decode(mpi_transport *t, const MPI_Status *st, int len, sb_coord_message *m)
{
    m->worker = st->MPI_SOURCE;
    if (st->MPI_TAG == TAG_READY) {
        m->kind = SB_COORD_READY;
        snprintf(m->host, sizeof m->host, "%.*s", len < HOST_MAX ? len : HOST_MAX - 1, t->msg);
        return 1;
    }
    if (st->MPI_TAG == TAG_PROGRESS && (size_t)len == sizeof(progress_msg)) {
        progress_msg p;
        memcpy(&p, t->msg, sizeof p);
        m->kind = SB_COORD_PROGRESS;
        m->run = p.run;
        m->step = p.step;
        m->total_steps = p.total_steps;
        m->test_acc = p.test_acc;
        return 1;
    }
    done_head h;
    if (st->MPI_TAG != TAG_DONE || (size_t)len < sizeof h)
        return 0;
    memcpy(&h, t->msg, sizeof h);
    if (h.seed_len < 0 || (size_t)h.seed_len != (size_t)len - sizeof h)
        return 0;
    m->kind = SB_COORD_DONE;
    m->run = h.run;
    m->outcome = (sb_sweep_outcome)h.outcome;
    m->test_acc = h.test_acc;
    snprintf(m->reason, sizeof m->reason, "%.*s", (int)sizeof h.reason - 1, h.reason);
    snprintf(m->host, sizeof m->host, "%.*s", (int)sizeof h.host - 1, h.host);
    m->seed = h.seed_len > 0 ? t->msg + sizeof h : NULL;
    m->seed_len = (size_t)h.seed_len;
    return 1;
}

static int mpi_receive(void *user, double timeout_s, sb_coord_message *m)
{
    mpi_transport *t = user;
    free(t->msg);
    t->msg = NULL;
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
    if (!flag) {
        struct timespec pause = {0, (long)(timeout_s * 1e9)};
        nanosleep(&pause, NULL);
        return 0;
    }
    int len = 0;
    if (sb_mpi_receive(&st, &t->msg, &len) != 0) {
        fprintf(stderr, "selectivbench sweep: error: a message from rank %d was lost\n",
                st.MPI_SOURCE);
        return -1;
    }
    return decode(t, &st, len, m);
}

static int mpi_send_run(void *user, int worker, int64_t run, const char *seed, size_t seed_len)
{
    (void)user;
    run_head head = {.run = run, .seed_len = (int64_t)seed_len};
    return sb_mpi_send_two(worker, TAG_RUN, &head, sizeof head, seed, seed_len);
}

static int mpi_send_stop(void *user, int worker)
{
    (void)user;
    return MPI_Send(NULL, 0, MPI_BYTE, worker, TAG_STOP, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
}

static int mpi_cancel(void *user)
{
    (void)user;
    return sb_cli_stop_signal();
}

/* "3 worker ranks", or "2 teams of 4 ranks" */
static const char *workers_text(const mpi_transport *t, char *buf, size_t n)
{
    if (t->team_size > 1)
        snprintf(buf, n, "%d team%s of %d ranks", t->n_workers, t->n_workers == 1 ? "" : "s",
                 t->team_size);
    else
        snprintf(buf, n, "%d worker ranks", t->n_workers);
    return buf;
}

/* The coordinator's lines: a run started or ended, and the sweep's line once a minute. */
static void on_event(const sb_coord_event *ev, void *user)
{
    const mpi_transport *t = user;
    if (t->job->quiet)
        return;
    if (ev->kind == SB_COORD_BEGIN) {
        char workers[64];
        printf("sweep %s: %lld runs selected, %d finished before, %lld to run on %s (largest "
               "first)\n",
               t->job->label, (long long)sb_sweep_selection_size(t->job->sel), ev->counts.skipped,
               (long long)ev->counts.queued, workers_text(t, workers, sizeof workers));
    } else if (ev->kind == SB_COORD_STARTED) {
        printf("#%lld %s %s: started on rank %d (%s)%s\n", (long long)ev->run, ev->model, ev->hash,
               ev->worker, ev->host, ev->continuing ? ", continuing its record" : "");
    } else if (ev->kind == SB_COORD_ENDED) {
        printf("#%lld %s %s: %s", (long long)ev->run, ev->model, ev->hash,
               sb_sweep_outcome_name(ev->outcome));
        if (!isnan(ev->test_acc))
            printf(", test %.4f", ev->test_acc);
        printf(" (rank %d on %s, %.0f s)", ev->worker, ev->host, ev->run_s);
        if (ev->reason != NULL && ev->reason[0] != '\0' && ev->outcome != SB_SWEEP_DONE)
            printf(": %s", ev->reason);
        printf("\n");
    } else {
        const sb_coord_tally *n = &ev->counts;
        int settled = n->done + n->failed + n->refused + n->excluded + n->interrupted;
        char workers[64];
        printf("sweep %s: %d/%lld settled (%d done, %d failed, %d skipped), %d running on "
               "%s, %.0f s",
               t->job->label, settled, (long long)n->queued, n->done, n->failed, n->skipped,
               ev->running, workers_text(t, workers, sizeof workers), ev->elapsed_s);
        for (int i = 0; i < ev->n_progress; i++)
            printf("; #%lld %lld/%lld", (long long)ev->progress[3 * i],
                   (long long)ev->progress[3 * i + 1], (long long)ev->progress[3 * i + 2]);
        printf("\n");
    }
    fflush(stdout);
}

/* Rank 0: the library coordinates, this file carries its messages and prints. */
static int run_coordinator(const sb_mpi_sweep *job)
{
    const int team_size = job->ranks_per_run > 1 ? job->ranks_per_run : 1;
    mpi_transport t = {
        .job = job, .team_size = team_size, .n_workers = (sb_mpi_size() - 1) / team_size};
    const sb_coord_settings io = {.receive = mpi_receive,
                                  .send_run = mpi_send_run,
                                  .send_stop = mpi_send_stop,
                                  .cancel = mpi_cancel,
                                  .on_event = on_event,
                                  .user = &t};
    char workers[64];
    workers_text(&t, workers, sizeof workers);
    sb_error err = {0};
    sb_config *cfg = NULL;
    sb_coord_tally tally = {0};
    double t0 = sb_clock_seconds();
    sb_status st = sb_config_create(&cfg, &err);
    if (st == SB_OK && (st = sb_run_set(cfg, "results", &err, "%s", job->results)) == SB_OK &&
        (st = sb_run_set(cfg, "db", &err, "%s", job->db)) == SB_OK)
        st = sb_sweep_coordinate(job->sweep, job->sel, cfg, t.n_workers, sb_mpi_size(), &io, &tally,
                                 &err);
    sb_config_free(cfg);
    free(t.msg);
    if (st != SB_OK) {
        fprintf(stderr, "selectivbench sweep: error: %s\n", err.msg);
        sb_mpi_abort(sb_status_exit_code(err.status));
        return 1;
    }
    int settled = tally.done + tally.failed + tally.refused + tally.excluded + tally.interrupted;
    printf("sweep %s: %lld runs selected: %d done, %d failed, %d skipped, %d refused, "
           "%d excluded, %d interrupted; %d of %lld settled on %s in %.0f s\n",
           job->label, (long long)sb_sweep_selection_size(job->sel), tally.done, tally.failed,
           tally.skipped, tally.refused, tally.excluded, tally.interrupted, settled,
           (long long)tally.queued, workers, sb_clock_seconds() - t0);
    if (tally.signal != 0) {
        fprintf(stderr,
                "selectivbench sweep: sweep interrupted: %d run%s interrupted; run the "
                "same command to resume\n",
                tally.interrupted, tally.interrupted == 1 ? "" : "s");
        return sb_cli_signal_exit_code(tally.signal);
    }
    return tally.failed > 0 || tally.refused > 0 || tally.interrupted > 0 ? 1 : 0;
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
