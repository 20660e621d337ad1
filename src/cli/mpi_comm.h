/*
 * mpi_comm.h - the command line's use of MPI (Open MPI, libopenmpi-dev), in one place.
 *
 * The library knows nothing of MPI: the CLI starts it when the program runs under mpirun
 * (docs/cluster.md) and passes the library what it needs (a sweep's coordinator loop, a
 * gradient reduction callback). Built without MPI (SB_HAVE_MPI unset), every function says
 * so and the world is one process.
 */
#ifndef SB_CLI_MPI_COMM_H
#define SB_CLI_MPI_COMM_H

#include <stddef.h>

/* Whether this binary was built with MPI. */
int sb_mpi_built(void);

/* Whether the environment says this process was started by mpirun (Open MPI's or a PMI
 * launcher's variables), and SB_NO_MPI is not set. */
int sb_mpi_launched(void);

/* Starts MPI when sb_mpi_launched(): afterwards sb_mpi_size() gives the world's size.
 * Sets SB_NO_MPI=1 in this process's environment so that the programs it starts (a sweep's
 * `train` workers) do not try to join the world. Returns 0, or -1 with a message in
 * msg[0..n) when MPI cannot start. */
int sb_mpi_start(char *msg, size_t n);

/* This process's rank and the world's size (0 and 1 when MPI did not start). */
int sb_mpi_rank(void);
int sb_mpi_size(void);

/* Ends MPI if it was started (once; later calls do nothing). */
void sb_mpi_stop(void);

/* Ends every rank's process with exit code `code` (MPI_Abort), or exit(code) without MPI. */
void sb_mpi_abort(int code);

#endif
