/* cpus.c - the cores this process may use (cpus.h). */
#include "core/cpus.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* CPUs of the affinity mask; the online CPUs when it cannot be read. */
static int affinity_count(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (int)online : 1;
}

/* ceil(quota / period) of a cgroup v2 cpu.max file ("max 100000" or "200000 100000"), or 0
 * when it sets no limit or cannot be read. */
static int quota_v2(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    char quota[32] = "";
    long long period = 0;
    int n = fscanf(f, "%31s %lld", quota, &period);
    fclose(f);
    if (n != 2 || period <= 0 || strcmp(quota, "max") == 0)
        return 0;
    long long q = atoll(quota);
    return q > 0 ? (int)((q + period - 1) / period) : 0;
}

/* The smallest cgroup v2 quota along the process's cgroup path (its own group and every
 * group above it, up to the root), or the cgroup v1 CFS quota; 0: none. */
static int cgroup_quota(void)
{
    int best = 0;
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[1024], group[1024] = "";
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "0::", 3) == 0) { /* the v2 hierarchy */
            snprintf(group, sizeof group, "%s", line + 3);
            group[strcspn(group, "\n")] = '\0';
        }
    if (f != NULL)
        fclose(f);
    for (int depth = 0; depth < 64; depth++) {
        char path[1200];
        snprintf(path, sizeof path, "/sys/fs/cgroup%s/cpu.max", group);
        int q = quota_v2(path);
        if (q > 0 && (best == 0 || q < best))
            best = q;
        char *slash = strrchr(group, '/');
        if (slash == NULL || group[0] == '\0')
            break;
        *slash = '\0';
    }
    FILE *qf = fopen("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "r");
    FILE *pf = fopen("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "r");
    long long quota = -1, period = 0;
    if (qf != NULL && pf != NULL && fscanf(qf, "%lld", &quota) == 1 &&
        fscanf(pf, "%lld", &period) == 1 && quota > 0 && period > 0) {
        int q = (int)((quota + period - 1) / period);
        if (best == 0 || q < best)
            best = q;
    }
    if (qf != NULL)
        fclose(qf);
    if (pf != NULL)
        fclose(pf);
    return best;
}

/* SLURM_CPUS_PER_TASK inside a Slurm job, else 0. */
static int slurm_cpus(void)
{
    const char *job = getenv("SLURM_JOB_ID"), *cpus = getenv("SLURM_CPUS_PER_TASK");
    if (job == NULL || cpus == NULL)
        return 0;
    char *end = NULL;
    long n = strtol(cpus, &end, 10);
    return end != cpus && *end == '\0' && n > 0 && n < 1 << 20 ? (int)n : 0;
}

static int smallest(int affinity, int quota, int slurm)
{
    int n = affinity;
    if (quota > 0 && quota < n)
        n = quota;
    if (slurm > 0 && slurm < n)
        n = slurm;
    return n > 0 ? n : 1;
}

int sb_cpu_model(char *buf, unsigned long size)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL)
        return 0;
    char line[512];
    int found = 0;
    while (!found && fgets(line, sizeof line, f) != NULL) {
        const char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || colon == NULL)
            continue;
        colon++;
        while (*colon == ' ' || *colon == '\t')
            colon++;
        snprintf(buf, size, "%s", colon);
        buf[strcspn(buf, "\n")] = '\0';
        found = 1;
    }
    fclose(f);
    return found;
}

int sb_cpu_count(void)
{
    return smallest(affinity_count(), cgroup_quota(), slurm_cpus());
}

double sb_machine_memory_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (double)pages * (double)page : 0.0;
}

sb_status sb_threads_check(int threads, const char *where, sb_error *err)
{
    if (threads >= 0 && threads <= SB_THREADS_MAX)
        return SB_OK;
    return sb_error_set(err, SB_ERR_INVALID, "%s: threads %d: give 0 (every core) to %d", where,
                        threads, SB_THREADS_MAX);
}

void sb_cpu_count_describe(char *buf, unsigned long size)
{
    int affinity = affinity_count(), quota = cgroup_quota(), slurm = slurm_cpus();
    char q[16] = "none", s[16] = "none";
    if (quota > 0)
        snprintf(q, sizeof q, "%d", quota);
    if (slurm > 0)
        snprintf(s, sizeof s, "%d", slurm);
    snprintf(buf, size, "%d (affinity %d, cgroup quota %s, Slurm %s)",
             smallest(affinity, quota, slurm), affinity, q, s);
}
