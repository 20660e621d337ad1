/*
 * sweep_mpi.c - a sweep over an MPI world (sweep_mpi.h; docs/cluster.md, "MPI sweeps").
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
#include <limits.h>
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
#include "cli/train_mpi.h"

#ifdef SB_HAVE_MPI
#include <mpi.h>

enum { TAG_READY = 1, TAG_RUN, TAG_PROGRESS, TAG_DONE, TAG_STOP };

#define HOST_MAX 256
#define SEED_MAX ((size_t)1 << 30) /* a run's database is kilobytes; this is a bound */
#define STATUS_EVERY_S 60.0        /* the coordinator's sweep line, without a terminal */

typedef struct run_head {
    int64_t run;      /* index into the grid */
    int64_t seed_len; /* bytes of the seed that follow */
} run_head;

typedef struct done_head {
    int64_t run;
    int64_t seed_len;
    char outcome[16]; /* as sb_sweep_update gives it; "" when the sweep ended without one */
    char reason[512];
    double test_acc;
    char host[HOST_MAX];
} done_head;

typedef struct progress_msg {
    int64_t run, step, total_steps;
    double test_acc, tokens_per_s;
} progress_msg;

/* A leader to its team: train run `run` together (resume: from its checkpoint), or stop. */
enum { TEAM_STOP = 0, TEAM_RUN = 1 };
typedef struct team_msg {
    int64_t run;
    int32_t what;
    int32_t resume;
} team_msg;

/* ---- files and messages ------------------------------------------------------------- */

/* Reads the whole file at path into *buf (malloc'd), at most SEED_MAX bytes. */
static sb_status read_file(const char *path, char **buf, size_t *len, sb_error *err)
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

static sb_status write_file(const char *path, const char *buf, size_t len, sb_error *err)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return sb_error_set(err, SB_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    int ok = fwrite(buf, 1, len, f) == len;
    ok = fclose(f) == 0 && ok;
    return ok ? SB_OK : sb_error_set(err, SB_ERR_IO, "cannot write '%s'", path);
}

/* Removes a database file and what SQLite may leave beside it. */
static void remove_db(const char *path)
{
    char side[4400];
    remove(path);
    if (snprintf(side, sizeof side, "%s-wal", path) < (int)sizeof side)
        remove(side);
    if (snprintf(side, sizeof side, "%s-shm", path) < (int)sizeof side)
        remove(side);
}

/* Sends head (head_len bytes) and then body (body_len) as one message. */
static int send_two(int to, int tag, const void *head, size_t head_len, const char *body,
                    size_t body_len)
{
    size_t n = head_len + body_len;
    if (n > INT_MAX)
        return -1;
    char *msg = malloc(n);
    if (msg == NULL)
        return -1;
    memcpy(msg, head, head_len);
    if (body_len > 0)
        memcpy(msg + head_len, body, body_len);
    int rc = MPI_Send(msg, (int)n, MPI_BYTE, to, tag, MPI_COMM_WORLD);
    free(msg);
    return rc == MPI_SUCCESS ? 0 : -1;
}

/* Receives the message that MPI_Probe/Iprobe found (status st) into *buf (malloc'd). */
static int receive(const MPI_Status *st, char **buf, int *len)
{
    int n = 0;
    MPI_Get_count(st, MPI_BYTE, &n);
    *buf = malloc(n > 0 ? (size_t)n : 1);
    if (*buf == NULL)
        return -1;
    *len = n;
    return MPI_Recv(*buf, n, MPI_BYTE, st->MPI_SOURCE, st->MPI_TAG, MPI_COMM_WORLD,
                    MPI_STATUS_IGNORE) == MPI_SUCCESS ? 0 : -1;
}

static void this_host(char host[HOST_MAX])
{
    if (gethostname(host, HOST_MAX - 1) != 0)
        snprintf(host, HOST_MAX, "unknown");
    host[HOST_MAX - 1] = '\0';
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- the coordinator ---------------------------------------------------------------- */

typedef enum { RUN_PENDING, RUN_RUNNING, RUN_SETTLED } run_state;

typedef struct mpi_run {
    int64_t k;
    double flops;
    char hash[17];
    char train_hash[17]; /* its weights' file name: runs evaluating them share it */
    char model[32];
    int pretrained;      /* --test_pretrained: evaluates the weights of train_hash */
    run_state state;
    int rank;
    double started;
    progress_msg last;
} mpi_run;

typedef struct coordinator {
    const sb_mpi_sweep *job;
    sb_results *db;
    mpi_run *runs;
    int64_t n_runs;
    int n_workers;     /* ranks that ask for runs: every rank but 0, or each team's leader */
    int world;         /* the world's size: ranks 1..world-1 work */
    int team_size;     /* ranks per team (--ranks_per_run; 1: each rank alone) */
    char (*hosts)[HOST_MAX];
    int *parked;       /* ranks waiting for a run that depends on a running one */
    int n_parked;
    int stopped;       /* workers told STOP */
    int running;
    int done, failed, skipped, refused, excluded, interrupted;
    int sig;           /* the stop signal, once caught */
    char seed_dir[4096];
    double t0, next_status;
} coordinator;

/* Whether a file exists. */
static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Whether run i must wait: it evaluates weights (task 4) that are not there yet and that a
 * run of this sweep still has to train. */
static int must_wait(const coordinator *c, int64_t i)
{
    const mpi_run *r = &c->runs[i];
    if (!r->pretrained)
        return 0;
    char ckpt[4200];
    snprintf(ckpt, sizeof ckpt, "%s/checkpoints/%s.safetensors", c->job->results, r->train_hash);
    if (exists(ckpt))
        return 0;
    for (int64_t j = 0; j < c->n_runs; j++)
        if (!c->runs[j].pretrained && c->runs[j].state != RUN_SETTLED &&
            strcmp(c->runs[j].train_hash, r->train_hash) == 0)
            return 1;
    return 0;
}

/* The next run to hand out (runs[] is ordered largest first): -1 when none can go now;
 * *blocked: some wait for a running run. */
static int64_t next_pending(const coordinator *c, int *blocked)
{
    *blocked = 0;
    for (int64_t i = 0; i < c->n_runs; i++) {
        if (c->runs[i].state != RUN_PENDING)
            continue;
        if (must_wait(c, i)) {
            *blocked = 1;
            continue;
        }
        return i;
    }
    return -1;
}

static int cmp_flops_desc(const void *a, const void *b)
{
    const mpi_run *x = a, *y = b;
    if (x->flops != y->flops)
        return x->flops > y->flops ? -1 : 1;
    return x->k < y->k ? -1 : x->k > y->k; /* the grid's order among equals */
}

/* Lists the selected runs that are not finished, with their costs. */
static sb_status list_runs(coordinator *c, sb_error *err)
{
    const sb_mpi_sweep *job = c->job;
    int64_t n_sel = sb_sweep_selection_size(job->sel);
    double *flops = calloc((size_t)(n_sel > 0 ? n_sel : 1), sizeof *flops);
    c->runs = calloc((size_t)(n_sel > 0 ? n_sel : 1), sizeof *c->runs);
    if (flops == NULL || c->runs == NULL) {
        free(flops);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory listing %lld runs",
                            (long long)n_sel);
    }
    sb_status st = sb_sweep_run_flops(job->sweep, job->sel, flops, err);
    for (int64_t i = 0; st == SB_OK && i < n_sel; i++) {
        int64_t k = sb_sweep_selection_run(job->sel, i);
        sb_config *cfg = NULL;
        sb_error why = {0};
        mpi_run r = {.k = k, .flops = flops[i], .rank = -1};
        if (sb_sweep_config(job->sweep, k, &cfg, &why) == SB_OK) {
            char text[64] = "";
            sb_config_run_hash(cfg, r.hash);
            sb_config_training_hash(cfg, r.train_hash);
            if (sb_config_get_key(cfg, "model", text, sizeof text, &why) == SB_OK)
                snprintf(r.model, sizeof r.model, "%s", text);
            if (sb_config_get_key(cfg, "test_pretrained", text, sizeof text, &why) == SB_OK)
                (void)sb_config_parse_bool(text, &r.pretrained);
            sb_config_free(cfg);
            sb_result_row row;
            int found = 0;
            if (sb_results_find(c->db, r.hash, &row, &found, &why) == SB_OK && found &&
                strcmp(row.status, "finished") == 0) {
                c->skipped++;
                continue;
            }
        } /* a run whose configuration cannot be built goes to a worker, which refuses it */
        c->runs[c->n_runs++] = r;
    }
    free(flops);
    qsort(c->runs, (size_t)c->n_runs, sizeof *c->runs, cmp_flops_desc);
    return st;
}

/* Hands run i to `rank` with its seed; returns 0, or -1 when it could not be sent (the run
 * stays pending). */
static int hand_out(coordinator *c, int64_t i, int rank, sb_error *err)
{
    mpi_run *r = &c->runs[i];
    char seed[4200];
    snprintf(seed, sizeof seed, "%s/seed-%s-%d.db", c->seed_dir, r->hash[0] ? r->hash : "none",
             rank);
    remove_db(seed);
    int found = 0;
    char *bytes = NULL;
    size_t len = 0;
    sb_status st = r->hash[0] != '\0' ? sb_results_extract_run(c->db, r->hash, seed, &found, err)
                                      : SB_OK;
    if (st == SB_OK && r->hash[0] != '\0')
        st = read_file(seed, &bytes, &len, err);
    remove_db(seed);
    if (st != SB_OK)
        return -1;
    run_head head = {.run = r->k, .seed_len = (int64_t)len};
    int rc = send_two(rank, TAG_RUN, &head, sizeof head, bytes, len);
    free(bytes);
    if (rc != 0) {
        sb_error_set(err, SB_ERR_RUNTIME, "cannot send run %lld to rank %d", (long long)r->k,
                     rank);
        return -1;
    }
    r->state = RUN_RUNNING;
    r->rank = rank;
    r->started = now_s();
    r->last.step = -1;
    c->running++;
    if (!c->job->quiet)
        printf("#%lld %s %s: started on rank %d (%s)%s\n", (long long)r->k, r->model, r->hash,
               rank, c->hosts[rank], found ? ", continuing its record" : "");
    return 0;
}

/* Gives idle `rank` the next run, parks it when the next runs wait for running ones, or
 * tells it to stop. */
static void serve_idle(coordinator *c, int rank, sb_error *err)
{
    int blocked = 0;
    int64_t i = c->sig == 0 ? next_pending(c, &blocked) : -1;
    if (i >= 0 && hand_out(c, i, rank, err) == 0)
        return;
    if (i >= 0) { /* could not hand it out: report, and let the rank go */
        fprintf(stderr, "selectivbench sweep: error: %s\n", err->msg);
        c->runs[i].state = RUN_SETTLED;
        c->failed++;
    }
    if (blocked && c->sig == 0) {
        c->parked[c->n_parked++] = rank;
        return;
    }
    MPI_Send(NULL, 0, MPI_BYTE, rank, TAG_STOP, MPI_COMM_WORLD);
    c->stopped++;
}

/* Finds the run with grid index k among the listed ones (-1: none). */
static int64_t find_run(const coordinator *c, int64_t k)
{
    for (int64_t i = 0; i < c->n_runs; i++)
        if (c->runs[i].k == k)
            return i;
    return -1;
}

/* Counts an outcome string of sb_sweep_update. */
static void count_outcome(coordinator *c, const char *outcome)
{
    if (strcmp(outcome, "done") == 0)
        c->done++;
    else if (strcmp(outcome, "skipped") == 0)
        c->skipped++;
    else if (strcmp(outcome, "refused") == 0)
        c->refused++;
    else if (strcmp(outcome, "excluded") == 0)
        c->excluded++;
    else if (strcmp(outcome, "interrupted") == 0)
        c->interrupted++;
    else
        c->failed++;
}

/* A worker's run ended: takes its record into the database, prints the line. */
static void take_done(coordinator *c, int rank, const char *msg, int len)
{
    done_head head;
    if ((size_t)len < sizeof head)
        return;
    memcpy(&head, msg, sizeof head);
    head.outcome[sizeof head.outcome - 1] = '\0';
    head.reason[sizeof head.reason - 1] = '\0';
    head.host[sizeof head.host - 1] = '\0';
    int64_t i = find_run(c, head.run);
    if (i < 0 || head.seed_len < 0 || (size_t)head.seed_len != (size_t)len - sizeof head)
        return;
    mpi_run *r = &c->runs[i];
    r->state = RUN_SETTLED;
    c->running--;
    sb_error err = {0};
    char path[4200];
    snprintf(path, sizeof path, "%s/done-%s-%d.db", c->seed_dir, r->hash, rank);
    remove_db(path);
    int found = 0;
    sb_status st = SB_OK;
    if (head.seed_len > 0 && r->hash[0] != '\0') {
        st = write_file(path, msg + sizeof head, (size_t)head.seed_len, &err);
        if (st == SB_OK)
            st = sb_results_take_run(c->db, path, r->hash, &found, &err);
        sb_result_row row;
        int there = 0;
        if (st == SB_OK && found &&
            (st = sb_results_find(c->db, r->hash, &row, &there, &err)) == SB_OK && there)
            st = sb_results_set_placement(c->db, r->hash, head.host, rank, row.attempts, &err);
    }
    remove_db(path);
    const char *outcome = head.outcome[0] != '\0' ? head.outcome : "failed";
    if (st != SB_OK) {
        fprintf(stderr, "selectivbench sweep: error: run %lld from rank %d: %s\n",
                (long long)r->k, rank, err.msg);
        outcome = "failed";
    }
    count_outcome(c, outcome);
    if (!c->job->quiet) {
        printf("#%lld %s %s: %s", (long long)r->k, r->model, r->hash, outcome);
        if (!isnan(head.test_acc))
            printf(", test %.4f", head.test_acc);
        printf(" (rank %d on %s, %.0f s)", rank, head.host, now_s() - r->started);
        if (head.reason[0] != '\0' && strcmp(outcome, "done") != 0)
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
           c->job->label, settled, (long long)c->n_runs, c->done, c->failed, c->skipped,
           c->running, workers_text(c, workers, sizeof workers), now_s() - c->t0);
    for (int64_t i = 0; i < c->n_runs; i++)
        if (c->runs[i].state == RUN_RUNNING && c->runs[i].last.step >= 0)
            printf("; #%lld %lld/%lld", (long long)c->runs[i].k,
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
            if (now_s() >= c->next_status) {
                c->next_status = now_s() + STATUS_EVERY_S;
                print_status(c);
            }
            struct timespec pause = {0, 20 * 1000 * 1000};
            nanosleep(&pause, NULL);
            continue;
        }
        char *msg = NULL;
        int len = 0;
        if (receive(&st, &msg, &len) != 0) {
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
            int64_t i = find_run(c, p.run);
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
    coordinator c = {.job = job, .world = sb_mpi_size(), .team_size = team_size,
                     .n_workers = (sb_mpi_size() - 1) / team_size, .t0 = now_s()};
    c.next_status = c.t0 + STATUS_EVERY_S;
    sb_error err = {0};
    snprintf(c.seed_dir, sizeof c.seed_dir, "%s/mpi", job->results);
    if (mkdir(job->results, 0777) != 0 && errno != EEXIST)
        sb_error_set(&err, SB_ERR_IO, "cannot make '%s': %s", job->results, strerror(errno));
    else if (mkdir(c.seed_dir, 0777) != 0 && errno != EEXIST)
        sb_error_set(&err, SB_ERR_IO, "cannot make '%s': %s", c.seed_dir, strerror(errno));
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
           job->label, (long long)sb_sweep_selection_size(job->sel), c.done, c.failed,
           c.skipped, c.refused, c.excluded, c.interrupted, settled, (long long)c.n_runs,
           workers, now_s() - c.t0);
    sb_results_close(c.db);
    free(c.runs);
    free(c.hosts);
    free(c.parked);
    if (c.sig != 0) {
        fprintf(stderr, "selectivbench sweep: sweep interrupted: %d run%s interrupted; run the "
                        "same command to resume\n",
                c.interrupted, c.interrupted == 1 ? "" : "s");
        return sb_cli_signal_exit_code(c.sig);
    }
    if (rc != 0)
        return rc;
    return c.failed > 0 || c.refused > 0 || c.interrupted > 0 ? 1 : 0;
}

/* ---- a worker rank ------------------------------------------------------------------- */

typedef struct worker_state {
    int64_t run;
    done_head done;
    double next_progress;
} worker_state;

/* Sends rank 0 where run w->run is, at most every 5 seconds. */
static void send_progress(worker_state *w, int64_t step, int64_t total_steps, double test_acc,
                          double tokens_per_s)
{
    if (now_s() < w->next_progress)
        return;
    w->next_progress = now_s() + 5.0;
    progress_msg p = {.run = w->run, .step = step, .total_steps = total_steps,
                      .test_acc = test_acc, .tokens_per_s = tokens_per_s};
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
        snprintf(w->done.outcome, sizeof w->done.outcome, "%s", u->outcome);
        snprintf(w->done.reason, sizeof w->done.reason, "%s", u->reason != NULL ? u->reason : "");
        w->done.test_acc = u->test_acc;
    }
}

/* The threads of each run on this rank: --threads, else the node's cores shared by the
 * ranks on it (Open MPI says how many). */
static int worker_threads(int threads)
{
    if (threads > 0)
        return threads;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    long ranks = local != NULL ? strtol(local, NULL, 10) : 1;
    long t = ranks > 0 ? cores / ranks : cores;
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
    remove_db(db);
    if (head->seed_len > 0 && (size_t)head->seed_len == (size_t)len - sizeof *head)
        return write_file(db, msg + sizeof *head, (size_t)head->seed_len, err);
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
        snprintf(w->done.outcome, sizeof w->done.outcome, "failed");
        snprintf(w->done.reason, sizeof w->done.reason, "%s", err->msg);
    } else if (exists(db) && read_file(db, &bytes, &n, &read_err) != SB_OK) {
        snprintf(w->done.outcome, sizeof w->done.outcome, "failed");
        snprintf(w->done.reason, sizeof w->done.reason, "%s", read_err.msg);
    }
    remove_db(db);
    w->done.seed_len = (int64_t)n;
    if (send_two(0, TAG_DONE, &w->done, sizeof w->done, bytes, n) != 0)
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
        sb_sweep_run_options opts = {.workers = 1, .threads = worker_threads(job->threads),
                                     .results = job->results, .db = db,
                                     .worker_exe = "/proc/self/exe", .runs = &head.run,
                                     .n_runs = 1, .on_update = worker_update, .user = &w,
                                     .cancel = sb_cli_stop_requested,
                                     .checkpoint_every_s = job->checkpoint_every_s};
        int done = 0, failed = 0;
        st = sb_sweep_run(job->sweep, &opts, &done, &failed, &err);
        if (st == SB_ERR_RUNTIME && sb_cli_stop_signal() != 0)
            st = SB_OK; /* cancelled: the run's record says interrupted */
    }
    send_done(&w, db, st, &err);
}

static int run_worker(const sb_mpi_sweep *job)
{
    char host[HOST_MAX];
    this_host(host);
    MPI_Send(host, (int)strlen(host), MPI_BYTE, 0, TAG_READY, MPI_COMM_WORLD);
    for (;;) {
        MPI_Status st;
        if (MPI_Probe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &st) != MPI_SUCCESS)
            return 1;
        char *msg = NULL;
        int len = 0;
        if (receive(&st, &msg, &len) != 0) {
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
    if (exists(db) && sb_sweep_config(s, k, &cfg, &err) == SB_OK &&
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

/* The leader's progress lines to rank 0. */
static void team_progress(const sb_progress *p, void *user)
{
    send_progress(user, p->step, p->total_steps, p->test_acc, p->tokens_per_s);
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
        st = sb_run_options_add(&rf, opts, &n_opts, err);
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
    if (st == SB_OK) {
        sb_train_settings settings = {
            .results_dir = job->results,
            .db_path = t->rank == 0 ? db : NULL,
            .save_checkpoint = rf.save_model,
            .threads = worker_threads(job->threads),
            .mem_budget_gb = rf.mem_budget,
            .progress = t->rank == 0 ? team_progress : NULL,
            .user = w,
            .resume = m->resume,
            .should_stop = sb_cli_stop_requested,
            .checkpoint_every_s = job->checkpoint_every_s,
        };
        sb_train_mpi_settings_on(&settings, &t->comm, t->rank, t->size);
        st = sb_train_config(rf.config, &settings, &res, err);
    }
    if (w != NULL) {
        const char *status = res.status;
        const char *outcome = res.cached                              ? "skipped"
                              : strcmp(status, "finished") == 0       ? "done"
                              : strcmp(status, "diverged") == 0       ? "diverged"
                              : strcmp(status, "interrupted") == 0    ? "interrupted"
                                                                      : "failed";
        snprintf(w->done.outcome, sizeof w->done.outcome, "%s", outcome);
        snprintf(w->done.reason, sizeof w->done.reason, "%s",
                 res.locked_by != 0 ? "another process trains it (its lock is held)"
                                    : res.reason);
        w->done.test_acc = res.test_acc;
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
    this_host(host);
    MPI_Send(host, (int)strlen(host), MPI_BYTE, 0, TAG_READY, MPI_COMM_WORLD);
    for (;;) {
        MPI_Status st;
        char *msg = NULL;
        int len = 0;
        if (MPI_Probe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &st) != MPI_SUCCESS ||
            receive(&st, &msg, &len) != 0) {
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
        team_msg m = {.run = head.run, .what = TEAM_RUN,
                      .resume = s == SB_OK && seed_resumable(job->sweep, head.run, db)};
        if (s == SB_OK && team_share(t, &m) != 0)
            s = sb_error_set(&err, SB_ERR_RUNTIME, "rank %d cannot reach its team",
                             sb_mpi_rank());
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

int sb_cli_sweep_mpi(const sb_mpi_sweep *job)
{
    sb_cli_signals_install(sb_mpi_rank() == 0
                               ? "selectivbench sweep: stopping: the running runs stop after "
                                 "their current update, with a checkpoint\n"
                               : NULL);
    const int team_size = job->ranks_per_run > 1 ? job->ranks_per_run : 1;
    if (team_size == 1)
        return sb_mpi_rank() == 0 ? run_coordinator(job) : run_worker(job);
    const int rank = sb_mpi_rank();
    team t = {.comm = MPI_COMM_NULL};
    if (MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : (rank - 1) / team_size,
                       rank, &t.comm) != MPI_SUCCESS)
        return 1;
    int rc;
    if (rank == 0) {
        rc = run_coordinator(job);
    } else {
        MPI_Comm_rank(t.comm, &t.rank);
        MPI_Comm_size(t.comm, &t.size);
        rc = t.rank == 0 ? run_leader(job, &t) : run_follower(job, &t);
        MPI_Comm_free(&t.comm);
    }
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
