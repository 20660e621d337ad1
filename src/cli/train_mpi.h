/*
 * train_mpi.h - `train` under mpirun: the MPI side of data-parallel training
 * (docs/cluster.md, "Data-parallel training"; src/cli/train_mpi.c).
 *
 * The library trains a world of processes through sb_train_settings' world_rank,
 * world_size, all_gather and all_to_all; this file gives them MPI's (MPI_COMM_WORLD or a
 * sweep team's communicator, MPI_Allgather, MPI_Alltoall). Built without MPI, the world is
 * one process.
 */
#ifndef SB_CLI_TRAIN_MPI_H
#define SB_CLI_TRAIN_MPI_H

#include <stddef.h>

#include "selectivbench/selectivbench.h"

/* Checks that grad_shards can be shared by the world (sb_mpi_size() processes): with more
 * than one, grad_shards must be a multiple of the process count. Returns 0, or -1 with the
 * reason in msg[0..n). */
int sb_train_mpi_check(int grad_shards, char *msg, size_t n);

/* Sets settings' world fields to this process's place in the MPI world (nothing with one
 * process). */
void sb_train_mpi_settings(sb_train_settings *settings);

/* The same over a part of the world (a sweep's team, sweep --ranks_per_run): comm points
 * to its MPI_Comm (NULL: MPI_COMM_WORLD) and stays valid while the run trains; this process
 * is rank `rank` of its `size` processes (nothing when size is 1). */
void sb_train_mpi_settings_on(sb_train_settings *settings, void *comm, int rank, int size);

#endif
