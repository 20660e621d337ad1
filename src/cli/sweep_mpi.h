/* sweep_mpi.h - `mpirun -np N selectivbench sweep FILE`: rank 0 coordinates, ranks 1..N-1
 * train (src/cli/sweep_mpi.c; docs/cluster.md, "MPI sweeps"). */
#ifndef SELECTIVBENCH_CLI_SWEEP_MPI_H
#define SELECTIVBENCH_CLI_SWEEP_MPI_H

#include "selectivbench/selectivbench.h"

typedef struct sb_mpi_sweep {
    const sb_sweep *sweep;
    const sb_sweep_selection *sel;
    const char *label;   /* the sweep file as given, for the lines printed */
    const char *results; /* the shared results folder (checkpoints, logs, locks) */
    const char *db;      /* its database (rank 0 alone writes it) */
    int threads;         /* per worker rank; 0: the node's cores over its ranks */
    int ranks_per_run;   /* ranks per team (ranks 1..N-1 in teams of this many; N - 1
                            a multiple of it): runs whose grad_shards are a multiple of
                            it train data-parallel over a team; 0 or 1: no teams */
    double checkpoint_every_s;
    int quiet;
} sb_mpi_sweep;

/* Runs the sweep over the MPI world (sb_mpi_size() >= 2): rank 0 hands the selected runs
 * that its database does not hold as finished to the other ranks on demand, largest first
 * (task 4's runs after the runs that train the weights they evaluate), and merges each
 * run's record into the database; every other rank trains what it is given. Returns the
 * exit code, as `sweep` does (0: every run settled and none failed). */
int sb_cli_sweep_mpi(const sb_mpi_sweep *job);

#endif
