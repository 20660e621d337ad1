/* train_mpi.c - MPI's all-gather and all-to-all for data-parallel training (train_mpi.h). */
#include "cli/train_mpi.h"

#include <limits.h>
#include <stdio.h>

#include "cli/mpi_comm.h"

#ifdef SB_HAVE_MPI
#include <mpi.h>
#endif

int sb_train_mpi_check(int grad_shards, char *msg, size_t n)
{
    const int world = sb_mpi_size();
    if (world <= 1 || (grad_shards >= world && grad_shards % world == 0))
        return 0;
    snprintf(msg, n,
             "--grad_shards %d cannot be shared by the %d processes of mpirun -np %d: give a "
             "multiple of %d (each process computes K / %d of the shards; the weights do not "
             "depend on the process count)",
             grad_shards, world, world, world, world);
    return -1;
}

#ifdef SB_HAVE_MPI
/* An MPI type of `unit` contiguous bytes such that bytes / unit fits an int count (MPI
 * counts are ints: a block over INT_MAX bytes goes as a count of larger units; blocks of
 * reals always divide into 4 bytes). *type is MPI_BYTE or a committed type to free. */
static int block_type(size_t bytes, MPI_Datatype *type, int *count)
{
    size_t unit = 1;
    while (bytes / unit > (size_t)INT_MAX && bytes % (unit * 2) == 0)
        unit *= 2;
    if (bytes / unit > (size_t)INT_MAX)
        return -1;
    *type = MPI_BYTE;
    if (unit > 1 && (MPI_Type_contiguous((int)unit, MPI_BYTE, type) != MPI_SUCCESS ||
                     MPI_Type_commit(type) != MPI_SUCCESS))
        return -1;
    *count = (int)(bytes / unit);
    return 0;
}

static void block_type_free(MPI_Datatype *type)
{
    if (*type != MPI_BYTE)
        MPI_Type_free(type);
}

/* The communicator at user (MPI_COMM_WORLD when NULL). */
static MPI_Comm comm_of(void *user)
{
    return user != NULL ? *(MPI_Comm *)user : MPI_COMM_WORLD;
}

/* MPI_Allgather of `bytes` per process over the communicator at user. */
static int mpi_all_gather(const void *mine, size_t bytes, void *all, void *user)
{
    MPI_Comm comm = comm_of(user);
    int rank = 0, count = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Datatype type;
    if (block_type(bytes, &type, &count) != 0)
        return -1;
    /* this process's block already in place in all: send from there */
    const char *in_place = (const char *)all + (size_t)rank * bytes;
    const void *send = mine == (const void *)in_place ? MPI_IN_PLACE : mine;
    int rc = MPI_Allgather(send, count, type, all, count, type, comm);
    block_type_free(&type);
    return rc == MPI_SUCCESS ? 0 : -1;
}

/* MPI_Alltoall of `bytes` per pair of processes over the communicator at user. */
static int mpi_all_to_all(const void *send, size_t bytes, void *recv, void *user)
{
    int count = 0;
    MPI_Datatype type;
    if (block_type(bytes, &type, &count) != 0)
        return -1;
    int rc = MPI_Alltoall(send, count, type, recv, count, type, comm_of(user));
    block_type_free(&type);
    return rc == MPI_SUCCESS ? 0 : -1;
}
#endif

void sb_train_mpi_settings(sb_train_settings *settings)
{
    sb_train_mpi_settings_on(settings, NULL, sb_mpi_rank(), sb_mpi_size());
}

void sb_train_mpi_settings_on(sb_train_settings *settings, void *comm, int rank, int size)
{
    if (size <= 1 || settings == NULL)
        return;
#ifdef SB_HAVE_MPI
    settings->world_rank = rank;
    settings->world_size = size;
    settings->all_gather = mpi_all_gather;
    settings->all_to_all = mpi_all_to_all;
    settings->world_user = comm;
#else
    (void)comm;
    (void)rank;
#endif
}
