/* mpi_comm.c - starting and stopping MPI for the command line (mpi_comm.h). */
#include <stdio.h>
#include <stdlib.h>

#include "cli/mpi_comm.h"

#ifdef SB_HAVE_MPI
#include <mpi.h>
#endif

static int started; /* MPI_Init was called and MPI_Finalize not yet */
static int world_rank, world_size = 1;

int sb_mpi_built(void)
{
#ifdef SB_HAVE_MPI
    return 1;
#else
    return 0;
#endif
}

int sb_mpi_launched(void)
{
    const char *no = getenv("SB_NO_MPI");
    if (no != NULL && no[0] != '\0' && no[0] != '0')
        return 0;
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i]) != NULL)
            return 1;
    return 0;
}

int sb_mpi_start(char *msg, size_t n)
{
    if (started || !sb_mpi_launched())
        return 0;
#ifdef SB_HAVE_MPI
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
        snprintf(msg, n,
                 "MPI_Init failed: this program was started by mpirun but cannot "
                 "join its world");
        return -1;
    }
    started = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    /* MPI errors come back as codes, reported by the caller, instead of aborting in MPI */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    setenv("SB_NO_MPI", "1", 1);
    return 0;
#else
    snprintf(msg, n,
             "this selectivbench was built without MPI but runs under mpirun: "
             "install libopenmpi-dev and build again (docs/cluster.md), or run it without "
             "mpirun");
    return -1;
#endif
}

int sb_mpi_rank(void)
{
    return world_rank;
}
int sb_mpi_size(void)
{
    return world_size;
}

void sb_mpi_stop(void)
{
#ifdef SB_HAVE_MPI
    if (started)
        MPI_Finalize();
#endif
    started = 0;
}

void sb_mpi_abort(int code)
{
#ifdef SB_HAVE_MPI
    if (started)
        MPI_Abort(MPI_COMM_WORLD, code);
#endif
    exit(code);
}
