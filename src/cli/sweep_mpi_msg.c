/* sweep_mpi_msg.c - the files and MPI messages of an MPI sweep (sweep_mpi_msg.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/sweep_mpi_msg.h"

#ifdef SB_HAVE_MPI

/* Sends head (head_len bytes) and then body (body_len) as one message. */
int sb_mpi_send_two(int to, int tag, const void *head, size_t head_len, const char *body,
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
int sb_mpi_receive(const MPI_Status *st, char **buf, int *len)
{
    int n = 0;
    MPI_Get_count(st, MPI_BYTE, &n);
    *buf = malloc(n > 0 ? (size_t)n : 1);
    if (*buf == NULL)
        return -1;
    *len = n;
    return MPI_Recv(*buf, n, MPI_BYTE, st->MPI_SOURCE, st->MPI_TAG, MPI_COMM_WORLD,
                    MPI_STATUS_IGNORE) == MPI_SUCCESS
               ? 0
               : -1;
}

void sb_this_host(char host[HOST_MAX])
{
    if (gethostname(host, HOST_MAX - 1) != 0)
        snprintf(host, HOST_MAX, "unknown");
    host[HOST_MAX - 1] = '\0';
}

/* Whether a file exists. */
int sb_file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

#endif
