/* cpus.h - how many cores this process may use: the default thread count everywhere. */
#ifndef SELECTIVBENCH_CPUS_H
#define SELECTIVBENCH_CPUS_H

#include "core/status.h"

/* The cores this process may run on, the smallest of: the CPUs of its affinity mask
 * (sched_getaffinity: taskset, numactl, Slurm's binding), its cgroup's CPU quota rounded up
 * (cgroup v2 cpu.max along the process's cgroup path, or v1 cpu.cfs_quota_us: containers,
 * systemd limits), and SLURM_CPUS_PER_TASK inside a Slurm job. At least 1. The machine's
 * load does not enter: a thread count decides how products are split, and so the bits of
 * oneDNN's products, and must not change with what else runs (docs/training.md). */
int sb_cpu_count(void);

/* SB_OK for a thread count every call takes: 0 (every core) to SB_THREADS_MAX (the public
 * header); else SB_ERR_INVALID naming `where` (the function or flag) in one line. */
sb_status sb_threads_check(int threads, const char *where, sb_error *err);

/* This machine's physical memory in bytes (0 when it cannot be read). */
double sb_machine_memory_bytes(void);

/* The CPU's model name from /proc/cpuinfo ("AMD EPYC ..."), in buf: 1, or 0 (buf untouched)
 * when there is none. */
int sb_cpu_model(char *buf, unsigned long size);

/* What sb_cpu_count found, one line for humans ("2 (affinity 2, cgroup quota none, Slurm
 * none)"), in buf. */
void sb_cpu_count_describe(char *buf, unsigned long size);

#endif
