/*
 * sweep_mpi_msg.h - what the two sides of an MPI sweep share (sweep_mpi.c, the coordinator;
 * sweep_mpi_worker.c, the worker ranks and teams): the messages, and the file and MPI
 * helpers behind them (sweep_mpi_msg.c). Only with MPI (SB_HAVE_MPI).
 */
#ifndef SB_CLI_SWEEP_MPI_MSG_H
#define SB_CLI_SWEEP_MPI_MSG_H

#ifdef SB_HAVE_MPI
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/sweep_mpi.h"

enum { TAG_READY = 1, TAG_RUN, TAG_PROGRESS, TAG_DONE, TAG_STOP };

#define HOST_MAX 256

typedef struct run_head {
    int64_t run;      /* index into the grid */
    int64_t seed_len; /* bytes of the seed that follow */
} run_head;

typedef struct done_head {
    int64_t run;
    int64_t seed_len;
    int32_t outcome; /* an sb_sweep_outcome; SB_SWEEP_NO_OUTCOME when the sweep ended without
                        one */
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

/* A seed database as bytes: sb_seed_read, sb_seed_write, sb_seed_remove (the library's). */
/* Whether a file exists. */
int sb_file_exists(const char *path);

/* Sends head (head_len bytes) and then body (body_len) as one message; 0 or -1. */
int sb_mpi_send_two(int to, int tag, const void *head, size_t head_len, const char *body,
                    size_t body_len);
/* Receives the message that MPI_Probe/Iprobe found (status st) into *buf (malloc'd). */
int sb_mpi_receive(const MPI_Status *st, char **buf, int *len);
void sb_this_host(char host[HOST_MAX]);

/* A worker rank's whole part in the sweep: alone (team_comm MPI_COMM_NULL) or as a member of
 * a team of --ranks_per_run ranks (team_comm: the team's communicator). Returns its exit
 * code. */
int sb_sweep_mpi_work(const sb_mpi_sweep *job, MPI_Comm team_comm);

#endif
#endif
