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

/* Reads the whole file at path into *buf (malloc'd), at most SEED_MAX bytes. */
sb_status sb_seed_read(const char *path, char **buf, size_t *len, sb_error *err)
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

sb_status sb_seed_write(const char *path, const char *buf, size_t len, sb_error *err)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return sb_error_set(err, SB_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    int ok = fwrite(buf, 1, len, f) == len;
    ok = fclose(f) == 0 && ok;
    return ok ? SB_OK : sb_error_set(err, SB_ERR_IO, "cannot write '%s'", path);
}

/* Removes a database file and what SQLite may leave beside it. */
void sb_seed_remove(const char *path)
{
    char side[4400];
    remove(path);
    if (snprintf(side, sizeof side, "%s-wal", path) < (int)sizeof side)
        remove(side);
    if (snprintf(side, sizeof side, "%s-shm", path) < (int)sizeof side)
        remove(side);
}

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
