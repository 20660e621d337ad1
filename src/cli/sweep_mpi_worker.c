/*
 * sweep_mpi_worker.c - the worker ranks of an MPI sweep (sweep_mpi.c is the coordinator and
 * says how the two talk): a lone worker trains each run it is given as `sweep --workers 1`
 * does; a team of --ranks_per_run ranks trains the runs it can share data-parallel inside
 * its processes, the others on its leader alone.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/mpi_comm.h"
#include "cli/run_options.h"
#include "cli/signals.h"
#include "cli/sweep_mpi_msg.h"
#include "cli/train_mpi.h"

#ifdef SB_HAVE_MPI

typedef struct worker_state {
    int64_t run;
    done_head done;
    double next_progress;
    FILE *log; /* a team run's logs/<hash>.log (its leader writes it), or NULL */
} worker_state;

/* Sends rank 0 where run w->run is, at most every 5 seconds. */
static void send_progress(worker_state *w, int64_t step, int64_t total_steps, double test_acc,
                          double tokens_per_s)
{
    if (sb_clock_seconds() < w->next_progress)
        return;
    w->next_progress = sb_clock_seconds() + 5.0;
    progress_msg p = {.run = w->run,
                      .step = step,
                      .total_steps = total_steps,
                      .test_acc = test_acc,
                      .tokens_per_s = tokens_per_s};
    MPI_Send(&p, (int)sizeof p, MPI_BYTE, 0, TAG_PROGRESS, MPI_COMM_WORLD);
}

/* sb_sweep_run's updates for the one run: progress to rank 0 now and then, the outcome
 * kept for the DONE message. */
static void worker_update(const sb_sweep_update *u, void *user)
{
    worker_state *w = user;
    if (u->kind == SB_SWEEP_UPDATE_PROGRESS) {
        send_progress(w, u->step, u->total_steps, u->last_test_acc, u->tokens_per_s);
    } else if (u->kind == SB_SWEEP_UPDATE_ENDED) {
        w->done.outcome = u->outcome;
        snprintf(w->done.reason, sizeof w->done.reason, "%s", u->reason != NULL ? u->reason : "");
        w->done.test_acc = u->test_acc;
    }
}

/* The threads of each run on this rank: --threads, else the cores this rank may use; when
 * those are the whole node's (mpirun bound the rank to nothing narrower), shared by the ranks
 * on it (Open MPI says how many). */
static int worker_threads(int threads)
{
    if (threads > 0)
        return threads;
    long cores = sb_default_threads();
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    long ranks = local != NULL ? strtol(local, NULL, 10) : 1;
    long t = ranks > 0 && cores >= sysconf(_SC_NPROCESSORS_ONLN) ? cores / ranks : cores;
    return t > 0 ? (int)t : 1;
}

/* The seed of run `run` on this rank: a file under $TMPDIR. */
static void seed_path(int64_t run, char *path, size_t n)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(path, n, "%s/selectivbench-rank%d-%ld-%lld.db", tmp != NULL ? tmp : "/tmp",
             sb_mpi_rank(), (long)getpid(), (long long)run);
}

/* Writes the seed that came with a RUN message (head and the bytes after it) to db. */
static sb_status write_seed(const char *msg, int len, const run_head *head, const char *db,
                            sb_error *err)
{
    sb_seed_remove(db);
    if (head->seed_len > 0 && (size_t)head->seed_len == (size_t)len - sizeof *head)
        return sb_seed_write(db, msg + sizeof *head, (size_t)head->seed_len, err);
    return SB_OK;
}

/* Sends run w->run's record (the seed db as the run left it) back to rank 0, with the
 * failure st/err when there was one, and removes the file. */
static void send_done(worker_state *w, const char *db, sb_status st, const sb_error *err)
{
    char *bytes = NULL;
    size_t n = 0;
    sb_error read_err = {0};
    if (st != SB_OK) {
        w->done.outcome = SB_SWEEP_FAILED;
        snprintf(w->done.reason, sizeof w->done.reason, "%s", err->msg);
    } else if (sb_file_exists(db) && sb_seed_read(db, &bytes, &n, &read_err) != SB_OK) {
        w->done.outcome = SB_SWEEP_FAILED;
        snprintf(w->done.reason, sizeof w->done.reason, "%s", read_err.msg);
    }
    sb_seed_remove(db);
    w->done.seed_len = (int64_t)n;
    if (sb_mpi_send_two(0, TAG_DONE, &w->done, sizeof w->done, bytes, n) != 0)
        fprintf(stderr, "selectivbench sweep: error: rank %d cannot send run %lld back\n",
                sb_mpi_rank(), (long long)w->run);
    free(bytes);
}

/* Trains one run handed out by rank 0 in a `train` process and sends its record back. */
static void work_one(const sb_mpi_sweep *job, const char *msg, int len, const char *host)
{
    run_head head;
    worker_state w = {.run = -1};
    w.done.test_acc = (double)NAN;
    snprintf(w.done.host, sizeof w.done.host, "%s", host);
    if ((size_t)len < sizeof head)
        return;
    memcpy(&head, msg, sizeof head);
    w.run = w.done.run = head.run;
    char db[4200];
    seed_path(head.run, db, sizeof db);
    sb_error err = {0};
    sb_status st = write_seed(msg, len, &head, db, &err);
    if (st == SB_OK) {
        /* the run alone, in a worker process of its own, into the seed database */
        sb_config *cfg = NULL;
        const sb_sweep_settings settings = {
            .on_update = worker_update, .user = &w, .cancel = sb_cli_stop_requested};
        int done = 0, failed = 0;
        if ((st = sb_config_create(&cfg, &err)) == SB_OK &&
            (st = sb_run_set(cfg, "threads", &err, "%d", worker_threads(job->threads))) == SB_OK &&
            (st = sb_run_set(cfg, "results", &err, "%s", job->results)) == SB_OK &&
            (st = sb_run_set(cfg, "db", &err, "%s", db)) == SB_OK &&
            (st = sb_run_set(cfg, "checkpoint_every", &err, "%.17g",
                             job->checkpoint_every_s / 60.0)) == SB_OK)
            st = sb_sweep_run(job->sweep, &head.run, 1, cfg, "/proc/self/exe", &settings, &done,
                              &failed, &err);
        sb_config_free(cfg);
        if (st == SB_ERR_RUNTIME && sb_cli_stop_signal() != 0)
            st = SB_OK; /* cancelled: the run's record says interrupted */
    }
    send_done(&w, db, st, &err);
}

static int run_worker(const sb_mpi_sweep *job)
{
    char host[HOST_MAX];
    sb_this_host(host);
    MPI_Send(host, (int)strlen(host), MPI_BYTE, 0, TAG_READY, MPI_COMM_WORLD);
    for (;;) {
        MPI_Status st;
        if (MPI_Probe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &st) != MPI_SUCCESS)
            return 1;
        char *msg = NULL;
        int len = 0;
        if (sb_mpi_receive(&st, &msg, &len) != 0) {
            free(msg);
            return 1;
        }
        if (st.MPI_TAG == TAG_STOP) {
            free(msg);
            return 0;
        }
        if (st.MPI_TAG == TAG_RUN)
            work_one(job, msg, len, host);
        free(msg);
    }
}

/* ---- a team of ranks (--ranks_per_run) --------------------------------------------------- */

typedef struct team {
    MPI_Comm comm;
    int rank, size; /* this process's place in the team */
} team;

/* The leader's message to its team. The other ranks poll for it with pauses: a blocking
 * MPI call spins, and would take a core from the run their leader trains alone. */
static int team_share(team *t, team_msg *m)
{
    MPI_Request req;
    if (MPI_Ibcast(m, (int)sizeof *m, MPI_BYTE, 0, t->comm, &req) != MPI_SUCCESS)
        return -1;
    if (t->rank == 0)
        return MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS ? 0 : -1;
    for (;;) {
        int flag = 0;
        if (MPI_Test(&req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return -1;
        if (flag)
            return 0;
        struct timespec pause = {0, 20 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
}

/* The configuration's grad_shards of run k (0 when the run cannot be built or checked:
 * its leader then hands it to a `train` process, which refuses it as a sweep does). */
static int run_grad_shards(const sb_sweep *s, int64_t k)
{
    sb_config *cfg = NULL;
    sb_error err = {0};
    char text[32] = "";
    int shards = 0;
    if (sb_sweep_check_run(s, k, &cfg, &err) == SB_OK &&
        sb_config_get_key(cfg, "grad_shards", text, sizeof text, &err) == SB_OK)
        shards = atoi(text);
    sb_config_free(cfg);
    return shards;
}

/* Whether the seed db holds run k as one to continue from its checkpoint (the sweep's own
 * rule, sb_result_row_resumable): the team resumes it. */
static int seed_resumable(const sb_sweep *s, int64_t k, const char *db)
{
    sb_config *cfg = NULL;
    sb_results *r = NULL;
    sb_error err = {0};
    int resume = 0;
    if (sb_file_exists(db) && sb_sweep_config(s, k, &cfg, &err) == SB_OK &&
        sb_results_open(db, &r, &err) == SB_OK) {
        char hash[17];
        sb_config_run_hash(cfg, hash);
        sb_result_row row;
        int found = 0;
        if (sb_results_find(r, hash, &row, &found, &err) == SB_OK && found)
            resume = sb_result_row_resumable(&row);
    }
    sb_results_close(r);
    sb_config_free(cfg);
    return resume;
}

/* The leader's progress lines to rank 0, and each evaluation to the run's log. */
static void team_progress(const sb_progress *p, void *user)
{
    worker_state *w = user;
    send_progress(w, p->step, p->total_steps, p->test_acc, p->tokens_per_s);
    if (w->log != NULL && p->is_evaluation) {
        fprintf(w->log,
                "update %lld/%lld: train loss %.4f acc %.4f, test loss %.4f acc %.4f, "
                "%.0f tokens/s\n",
                (long long)p->step, (long long)p->total_steps, p->loss, p->acc, p->test_loss,
                p->test_acc, p->tokens_per_s);
        fflush(w->log);
    }
}

/* Opens the log of a run the team trains (the train process of a lone worker's run writes
 * its own): where it ran and how, then team_progress's lines. NULL when it cannot. */
static FILE *team_log_open(const sb_mpi_sweep *job, const team *t, const team_msg *m,
                           const sb_config *cfg)
{
    char hash[17], path[4200], host[HOST_MAX];
    sb_error err = {0};
    sb_config_run_hash(cfg, hash);
    if (sb_results_log_path(job->results, hash, path, sizeof path, 1, &err) != SB_OK)
        return NULL;
    FILE *f = fopen(path, "a");
    if (f == NULL)
        return NULL;
    sb_this_host(host);
    fprintf(f,
            "selectivbench sweep: run %lld [%s] trained in-process by a team of %d ranks "
            "(data-parallel), its leader on %s%s\n",
            (long long)m->run, hash, t->size, host,
            m->resume ? ", continued from its checkpoint" : "");
    fflush(f);
    return f;
}

/* Trains run k in this process as rank t->rank of its team, data-parallel: the run's flags
 * parsed as its `train` process would parse them. The leader (db: the seed) records it and
 * fills w->done; the others only compute their gradient shards. */
static sb_status team_train(const sb_mpi_sweep *job, team *t, const team_msg *m, const char *db,
                            worker_state *w, sb_error *err)
{
    char **args = NULL;
    int n_args = 0;
    sb_status st = sb_sweep_run_args(job->sweep, m->run, &args, &n_args, err);
    char **argv = st == SB_OK ? calloc((size_t)n_args + 3, sizeof *argv) : NULL;
    if (st == SB_OK && argv == NULL)
        st = sb_error_set(err, SB_ERR_NOMEM, "out of memory");
    sb_run_flags rf = {0};
    sb_option opts[SB_RUN_MAX_OPTIONS];
    int n_opts = 0;
    if (st == SB_OK)
        st = sb_run_options_add(&rf, SB_KEYS_TRAIN, opts, &n_opts, err);
    if (st == SB_OK) {
        argv[0] = "selectivbench";
        argv[1] = "train";
        for (int i = 0; i < n_args; i++)
            argv[2 + i] = args[i];
        if (sb_cli_parse("train", "[train.py flags]", opts, n_opts, n_args + 2, argv, NULL, 0,
                         NULL) >= 0)
            st = sb_error_set(err, SB_ERR_INVALID, "run %lld: its flags do not parse",
                              (long long)m->run);
    }
    sb_train_outcome res;
    memset(&res, 0, sizeof res);
    if (st == SB_OK && w != NULL)
        w->log = team_log_open(job, t, m, rf.config);
    /* where the team's run goes, as the sweep says (a worker process gets these as flags) */
    if (st == SB_OK)
        st = sb_run_set(rf.config, "results", err, "%s", job->results);
    if (st == SB_OK && t->rank == 0)
        st = sb_run_set(rf.config, "db", err, "%s", db);
    if (st == SB_OK)
        st = sb_run_set(rf.config, "threads", err, "%d", worker_threads(job->threads));
    if (st == SB_OK)
        st = sb_run_set(rf.config, "resume", err, "%s", m->resume ? "True" : "False");
    if (st == SB_OK)
        st =
            sb_run_set(rf.config, "checkpoint_every", err, "%.17g", job->checkpoint_every_s / 60.0);
    if (st == SB_OK) {
        sb_train_settings settings = {
            .progress = t->rank == 0 ? team_progress : NULL,
            .user = w,
            .should_stop = sb_cli_stop_requested,
        };
        sb_train_mpi_settings_on(&settings, &t->comm, t->rank, t->size);
        st = sb_train_config(rf.config, &settings, &res, err);
    }
    if (w != NULL) {
        sb_sweep_outcome outcome = res.cached                         ? SB_SWEEP_SKIPPED
                                   : res.status == SB_RUN_FINISHED    ? SB_SWEEP_DONE
                                   : res.status == SB_RUN_DIVERGED    ? SB_SWEEP_DIVERGED
                                   : res.status == SB_RUN_INTERRUPTED ? SB_SWEEP_INTERRUPTED
                                                                      : SB_SWEEP_FAILED;
        w->done.outcome = outcome;
        snprintf(w->done.reason, sizeof w->done.reason, "%s",
                 res.locked_by != 0 ? "another process trains it (its lock is held)" : res.reason);
        w->done.test_acc = res.test_acc;
        if (w->log != NULL) {
            fprintf(w->log, "%s: test acc %.4f%s%s\n", sb_sweep_outcome_name(outcome), res.test_acc,
                    w->done.reason[0] != '\0' ? "; " : "", w->done.reason);
            if (st != SB_OK)
                fprintf(w->log, "error: %s\n", err->msg);
            fclose(w->log);
            w->log = NULL;
        }
    }
    sb_run_flags_free(&rf);
    free(argv);
    sb_sweep_args_free(args);
    return st;
}

/* A team's leader: asks rank 0 for runs like a lone worker, trains those that its team can
 * share with the team, the others alone. */
static int run_leader(const sb_mpi_sweep *job, team *t)
{
    char host[HOST_MAX];
    sb_this_host(host);
    MPI_Send(host, (int)strlen(host), MPI_BYTE, 0, TAG_READY, MPI_COMM_WORLD);
    for (;;) {
        MPI_Status st;
        char *msg = NULL;
        int len = 0;
        if (MPI_Probe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &st) != MPI_SUCCESS ||
            sb_mpi_receive(&st, &msg, &len) != 0) {
            free(msg);
            team_msg stop = {.what = TEAM_STOP};
            team_share(t, &stop);
            return 1;
        }
        run_head head;
        if (st.MPI_TAG != TAG_RUN || (size_t)len < sizeof head) {
            free(msg);
            if (st.MPI_TAG != TAG_STOP)
                continue;
            team_msg stop = {.what = TEAM_STOP};
            return team_share(t, &stop) == 0 ? 0 : 1;
        }
        memcpy(&head, msg, sizeof head);
        int shards = run_grad_shards(job->sweep, head.run);
        if (shards < t->size || shards % t->size != 0) {
            work_one(job, msg, len, host); /* not shared: this rank alone */
            free(msg);
            continue;
        }
        worker_state w = {.run = head.run};
        w.done.run = head.run;
        w.done.test_acc = (double)NAN;
        snprintf(w.done.host, sizeof w.done.host, "%s", host);
        char db[4200];
        seed_path(head.run, db, sizeof db);
        sb_error err = {0};
        sb_status s = write_seed(msg, len, &head, db, &err);
        free(msg);
        team_msg m = {.run = head.run,
                      .what = TEAM_RUN,
                      .resume = s == SB_OK && seed_resumable(job->sweep, head.run, db)};
        if (s == SB_OK && team_share(t, &m) != 0)
            s = sb_error_set(&err, SB_ERR_RUNTIME, "rank %d cannot reach its team", sb_mpi_rank());
        if (s == SB_OK)
            s = team_train(job, t, &m, db, &w, &err);
        send_done(&w, db, s, &err);
    }
}

/* A team's other ranks: train with the team what the leader says, until it says stop. */
static int run_follower(const sb_mpi_sweep *job, team *t)
{
    for (;;) {
        team_msg m;
        if (team_share(t, &m) != 0)
            return 1;
        if (m.what != TEAM_RUN)
            return 0;
        sb_error err = {0};
        if (team_train(job, t, &m, NULL, NULL, &err) != SB_OK && sb_cli_stop_signal() == 0)
            fprintf(stderr, "selectivbench sweep: rank %d, run %lld: %s\n", sb_mpi_rank(),
                    (long long)m.run, err.msg);
    }
}

int sb_sweep_mpi_work(const sb_mpi_sweep *job, MPI_Comm team_comm)
{
    if (team_comm == MPI_COMM_NULL)
        return run_worker(job);
    team t = {.comm = team_comm};
    MPI_Comm_rank(t.comm, &t.rank);
    MPI_Comm_size(t.comm, &t.size);
    return t.rank == 0 ? run_leader(job, &t) : run_follower(job, &t);
}

#endif
