/*
 * run_lock.h - one process at a time trains a run: an exclusive lock on a file named after
 * the run's hash (run_store.h puts it at <folder of the database>/locks/<run hash>.lock),
 * held from before the run is marked running until its end is recorded.
 * (src/exp/run_lock.c)
 *
 * The lock is flock(2) on the file, not the file's existence: the kernel releases it when
 * the process dies, however it dies, so a file left behind by a killed run is no obstacle
 * (the next run takes it over) and the files are never removed (removing one while another
 * process waits on it would let two processes hold "the" lock). The holder writes its pid
 * into the file, for the message of whoever finds the run locked, and empties the file when
 * it lets go. Descriptors are close-on-exec: a child process never inherits a lock.
 * Linux (and any system with flock); not for network file systems without lock support.
 */
#ifndef SELECTIVBENCH_RUN_LOCK_H
#define SELECTIVBENCH_RUN_LOCK_H

#include "core/status.h"

/* A lock this process holds; fd -1 when none. */
typedef struct sb_run_lock {
    int fd;
} sb_run_lock;

/* Takes the lock at path without waiting, creating the file (not its folder) if needed.
 * *holder is 0 when this process now holds it (in *lock; release with sb_run_lock_release),
 * else the pid of the process that holds it (-1 when that process cannot be named) and
 * *lock is empty. A holder that is just starting or just ending, or another process
 * looking (sb_run_lock_holder), is waited for up to half a second before the lock counts
 * as taken by someone else. Errors: SB_ERR_IO naming path when the file cannot be opened. */
sb_status sb_run_lock_take(const char *path, sb_run_lock *lock, long *holder, sb_error *err);

/* Who holds the lock at path, without taking it: *holder is 0 when nobody does (or the file
 * does not exist; it is not created), else the holder's pid (-1 when unknown).
 * Errors: SB_ERR_IO naming path when the file exists but cannot be opened. */
sb_status sb_run_lock_holder(const char *path, long *holder, sb_error *err);

/* Empties the file and releases the lock (an empty lock, fd -1, is allowed). */
void sb_run_lock_release(sb_run_lock *lock);

#endif
