/* run_lock.c - a run's lock file (see run_lock.h). */
#include "exp/run_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#define TAKE_TRIES 50           /* tries while the holder cannot be named ... */
#define TAKE_PAUSE_NS 10000000L /* ... 10 ms apart: half a second in all */

/* The pid written in the lock file open at fd, or 0 when it holds none (empty, or not a
 * number). */
static long read_holder(int fd)
{
    char text[32];
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    if (n <= 0)
        return 0;
    text[n] = '\0';
    char *end = NULL;
    long pid = strtol(text, &end, 10);
    return end != text && pid > 0 ? pid : 0;
}

/* Whether process pid exists (EPERM: it does, under another user). */
static int process_alive(long pid)
{
    return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

/* Writes our pid as the file's whole content. A failure only costs the name in another
 * process's message, so it is not an error. */
static void write_holder(int fd)
{
    char text[32];
    int n = snprintf(text, sizeof text, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) == 0 && n > 0 && pwrite(fd, text, (size_t)n, 0) != n) {
        /* nothing to do: the lock is held all the same */
    }
}

sb_status sb_run_lock_take(const char *path, sb_run_lock *lock, long *holder, sb_error *err)
{
    lock->fd = -1;
    *holder = 0;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0)
        return sb_error_set(err, SB_ERR_IO, "cannot open the run's lock file '%s': %s", path,
                            strerror(errno));
    for (int attempt = 0;; attempt++) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            write_holder(fd);
            lock->fd = fd;
            return SB_OK;
        }
        if (errno == EINTR)
            continue;
        if (errno != EWOULDBLOCK) {
            int saved = errno;
            close(fd);
            return sb_error_set(err, SB_ERR_IO, "cannot lock the run's lock file '%s': %s", path,
                                strerror(saved));
        }
        /* A live holder named in the file is a real one. No name, or the name of a process
         * that is gone, is a holder between taking the lock and writing its pid, or another
         * process's sb_run_lock_holder: both let go within moments. */
        long pid = read_holder(fd);
        if (process_alive(pid) || attempt + 1 >= TAKE_TRIES) {
            close(fd);
            *holder = process_alive(pid) ? pid : -1;
            return SB_OK;
        }
        struct timespec pause = {0, TAKE_PAUSE_NS};
        nanosleep(&pause, NULL);
    }
}

sb_status sb_run_lock_holder(const char *path, long *holder, sb_error *err)
{
    *holder = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return SB_OK;
        return sb_error_set(err, SB_ERR_IO, "cannot open the run's lock file '%s': %s", path,
                            strerror(errno));
    }
    /* a shared lock: two processes looking at once do not see each other as holders */
    int rc;
    while ((rc = flock(fd, LOCK_SH | LOCK_NB)) != 0 && errno == EINTR)
        ;
    if (rc != 0) {
        long pid = read_holder(fd);
        *holder = process_alive(pid) ? pid : -1;
    }
    close(fd); /* releases the shared lock, if taken */
    return SB_OK;
}

void sb_run_lock_release(sb_run_lock *lock)
{
    if (lock->fd < 0)
        return;
    /* empty first: a pid left in the file would name a process that no longer holds it */
    if (ftruncate(lock->fd, 0) != 0) {
        /* nothing to do: the pid only names the holder in messages */
    }
    close(lock->fd); /* the last descriptor of the open file: the lock goes with it */
    lock->fd = -1;
}
