/* sweep_slurm.c - the sbatch script of `sweep FILE --slurm DIR` (see sweep_slurm.h).
 *
 * One array task per shard: task i runs `sweep FILE --shard i/N` into its own results folder
 * DIR/shard-i (one SQLite writer per file, never several machines on one database), and
 * `results merge` joins the folders at the end. Time limits: Slurm signals the batch shell
 * with SIGUSR1 ahead of --time (--signal=B:USR1@120, less for a limit under ten minutes); the
 * script asks the sweep to stop with one SIGTERM, its runs checkpoint and stop (exit 75), and
 * the script requeues its own task, which resumes them. The sweep runs with SIGUSR1 ignored:
 * Slurm may signal every process of the job (scancel --full), and a second stop request
 * would make the sweep quit without its checkpoints. At the limit itself Slurm sends SIGTERM
 * to every process, by then stopped. Checked on a real Slurm by
 * tests/cluster/test_slurm_real.sh. */
#include "cli/sweep_slurm.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "selectivbench/selectivbench.h"

/* s in single quotes for a POSIX shell ('\'' for each quote inside). */
static void put_quoted(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s != '\0'; s++)
        if (*s == '\'')
            fputs("'\\''", f);
        else
            fputc(*s, f);
    fputc('\'', f);
}

/* Slurm's --time in seconds, in its own forms: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or
 * D-HH:MM:SS, or D- (0 for no limit); -1 for anything else, which sbatch would refuse only at
 * submission ("Invalid --time specification"). */
static long long time_seconds(const char *t)
{
    long long days = 0, field[3];
    int n = 0;
    const char *c = t;
    const char *dash = strchr(t, '-');
    if (dash != NULL) {
        if (dash == t)
            return -1;
        for (; c < dash; c++) {
            if (*c < '0' || *c > '9' || days > 100000)
                return -1;
            days = 10 * days + (*c - '0');
        }
        c = dash + 1;
        if (*c == '\0') /* "D-": D days */
            return 86400 * days;
    }
    for (;;) {
        if (*c < '0' || *c > '9' || n == 3)
            return -1;
        field[n] = 0;
        for (; *c >= '0' && *c <= '9'; c++) {
            if (field[n] > 1000000)
                return -1;
            field[n] = 10 * field[n] + (*c - '0');
        }
        n++;
        if (*c == '\0')
            break;
        if (*c != ':')
            return -1;
        c++;
    }
    if (dash != NULL) /* D-HH[:MM[:SS]] */
        return 86400 * days + 3600 * field[0] + (n > 1 ? 60 * field[1] : 0) +
               (n > 2 ? field[2] : 0);
    if (n == 1) /* minutes */
        return 60 * field[0];
    if (n == 2) /* MM:SS */
        return 60 * field[0] + field[1];
    return 3600 * field[0] + 60 * field[1] + field[2];
}

/* How long before the time limit Slurm warns the script: two minutes, time enough for every
 * run to finish its update and write its checkpoint; a fifth of a limit under ten minutes,
 * else the warning would come with the start (Slurm looks at time limits about every 30 s,
 * and may warn up to a minute early). */
static long long warning_seconds(long long limit)
{
    if (limit == 0 || limit >= 600)
        return 120;
    return limit / 5 > 10 ? limit / 5 : 10;
}

/* One error line naming the flag and its value. */
static int fail_flag(const char *flag, const char *value, const char *what)
{
    sb_error err = {0};
    sb_error_set(&err, SB_ERR_INVALID, "%s '%s': %s", flag, value, what);
    return sb_cli_fail("sweep", &err);
}

/* The #SBATCH lines both forms share: cores, time limit, partition, the log DIR/logs/NAME
 * (appended to across requeues), the warning signal and --requeue. */
static void write_sbatch_limits(FILE *f, const sb_slurm_job *job, const char *dir,
                                const char *log_name, long long warning)
{
    fprintf(f, "#SBATCH --cpus-per-task=%d\n", job->cpus_per_task);
    fprintf(f, "#SBATCH --time=%s\n", job->time);
    if (job->partition != NULL)
        fprintf(f, "#SBATCH --partition=%s\n", job->partition);
    fprintf(f, "#SBATCH --output=%s/logs/%s\n", dir, log_name);
    fprintf(f, "#SBATCH --open-mode=append\n");
    fprintf(f, "#SBATCH --signal=B:USR1@%lld\n", warning);
    fprintf(f, "#SBATCH --requeue\n");
}

/* The body of the MPI form: one job of `ranks` tasks; mpirun (which reads Slurm's
 * allocation) starts the sweep on every rank, rank 0 coordinating into DIR/results. */
static void write_mpi_body(FILE *f, const sb_slurm_job *job, const char *exe, const char *file,
                           const char *dir, const char *script, int ranks, int threads,
                           long long warning)
{
    fprintf(f, "#SBATCH --ntasks=%d\n", ranks);
    write_sbatch_limits(f, job, dir, "slurm-%j.out", warning);
    fprintf(f, "set -u\n");
    fprintf(f, "# mpirun passes SIGUSR1 on to every rank: each run stops at its next update "
               "with its\n# checkpoint, rank 0 records them and the sweep exits 75. (Signal "
               "the batch shell\n# only: `scancel --batch --signal=USR1`; --full would signal "
               "the runs twice.)\n");
    /* unbound ranks see the node's cores and share them (the sweep's worker_threads): bound
     * to one core each, as Open MPI binds small jobs, a rank could use one of its cores */
    fprintf(f, "( exec mpirun --bind-to none -np \"${SLURM_NTASKS:-%d}\" ", ranks);
    put_quoted(f, exe);
    fprintf(f, " sweep ");
    put_quoted(f, file);
    if (threads > 0)
        fprintf(f, " --threads %d", threads);
    if (job->ranks_per_run > 1)
        fprintf(f, " --ranks_per_run %d", job->ranks_per_run);
    if (job->checkpoint_every > 0)
        fprintf(f, " --checkpoint_every %.17g", job->checkpoint_every);
    for (int i = 0; i < job->n_filters; i++) {
        fprintf(f, " --filter ");
        put_quoted(f, job->filters[i]);
    }
    fprintf(f, " \\\n  --results ");
    put_quoted(f, dir);
    fprintf(f, "/results ) &\n");
    fprintf(f, "pid=$!\n");
    fprintf(f, "trap 'kill -USR1 \"$pid\" 2>/dev/null' USR1\n");
    fprintf(f, "while kill -0 \"$pid\" 2>/dev/null; do\n  wait \"$pid\"\ndone\n");
    fprintf(f, "wait \"$pid\"\nrc=$?\n");
    fprintf(f, "if [ \"$rc\" -eq 75 ] && [ -n \"${SLURM_JOB_ID:-}\" ]; then\n");
    fprintf(f, "  echo \"selectivbench: the sweep stopped with its checkpoints; requeueing the "
               "job\"\n");
    fprintf(f, "  scontrol requeue \"${SLURM_JOB_ID}\" ||\n");
    fprintf(f, "    echo \"selectivbench: scontrol requeue failed; resume with: sbatch\" ");
    put_quoted(f, script);
    fprintf(f, "\n");
    fprintf(f, "fi\n");
    fprintf(f, "exit \"$rc\"\n");
}

/* What the script asks for: array tasks (shards), workers and threads per task, MPI ranks. */
typedef struct slurm_shape {
    int64_t array;
    int workers, threads, ranks;
} slurm_shape;

/* Checks the job's flags against each other and fills sh; -1 to go on, else the exit code. */
static int slurm_job_shape(const sb_slurm_job *job, slurm_shape *sh)
{
    if (job->partition != NULL &&
        (job->partition[0] == '\0' || strpbrk(job->partition, " \t\n'\"\\$`") != NULL))
        return fail_flag("--partition", job->partition,
                         "give a partition name (no spaces or quotes)");
    if (job->runs < 1) {
        sb_error err = {0};
        sb_error_set(&err, SB_ERR_INVALID, "the selection has no runs: nothing to submit");
        return sb_cli_fail("sweep", &err);
    }
    if (job->mpi && job->array > 0)
        return fail_flag("--array", "", "is for a job array; with --mpi give --ranks");
    if (job->ranks_per_run > 1 && !job->mpi)
        return fail_flag("--ranks_per_run", "", "needs --mpi (teams of MPI ranks)");
    sh->array = job->array > 0 ? job->array : (job->runs < 16 ? job->runs : 16);
    if (sh->array > job->runs)
        sh->array = job->runs; /* a shard with no run would only use a slot */
    sh->workers = job->workers > 0 ? job->workers : 1;
    sh->threads =
        job->threads > 0 ? job->threads : job->cpus_per_task / (job->mpi ? 1 : sh->workers);
    const int team = job->ranks_per_run > 1 ? job->ranks_per_run : 1;
    sh->ranks = job->ranks > 0 ? job->ranks : (int)sh->array * team + 1;
    if (sh->threads < 1)
        sh->threads = 1;
    if ((sh->ranks - 1) % team != 0) {
        char ranks_text[32];
        snprintf(ranks_text, sizeof ranks_text, "%d", sh->ranks);
        return fail_flag("--ranks", ranks_text,
                         "the worker ranks (all but the coordinator) must form teams of "
                         "--ranks_per_run: give 1 + a multiple of it");
    }
    return -1;
}

/* The body of the job-array form: shard i of `array` runs in its own results folder; Slurm's
 * time-limit warning stops it with its checkpoints and requeues it. */
static void write_array_body(FILE *f, const sb_slurm_job *job, const char *exe, const char *file,
                             const char *dir, const char *script, int64_t array, int workers,
                             long long warning, const char *today)
{
    fprintf(f, "# %s as a Slurm job array, written by `selectivbench sweep --slurm` (%s).\n", file,
            today);
    fprintf(f,
            "# %lld runs in %lld shards: array task i trains the runs at positions i, i+%lld, "
            "...\n# into its own results folder %s/shard-i (never two machines on one "
            "database).\n",
            (long long)job->runs, (long long)array, (long long)array, dir);
    fprintf(f, "# Submit:           sbatch %s\n", script);
    fprintf(f, "# When it is done:  %s results merge %s/shard-* --db %s/all/selectivbench.db\n",
            exe, dir, dir);
    fprintf(f, "#                   %s report --results %s/all\n", exe, dir);
    fprintf(f,
            "# Time limits: Slurm sends SIGUSR1 to this script %lld s before --time; it "
            "asks the\n# sweep to stop, every run writes its checkpoint, the sweep exits 75 "
            "and the task\n# requeues itself: the next start resumes the runs where they "
            "stopped.\n# --checkpoint_every bounds what a lost node costs. A task that ends "
            "for good\n# (exit 0, or 1 with failed runs) is not requeued.\n",
            warning);
    const char *base = strrchr(file, '/') != NULL ? strrchr(file, '/') + 1 : file;
    fprintf(f, "#SBATCH --job-name=sb-%.40s\n", base);
    fprintf(f, "#SBATCH --array=0-%lld\n", (long long)array - 1);
    fprintf(f, "#SBATCH --ntasks=1\n");
    write_sbatch_limits(f, job, dir, "slurm-%A_%a.out", warning);
    fprintf(f, "set -u\n");
    fprintf(f, "shard=${SLURM_ARRAY_TASK_ID:?submit this script with sbatch (or set "
               "SLURM_ARRAY_TASK_ID to run one shard by hand)}\n");
    /* Why USR1 is ignored: `scancel --full --signal=USR1` (or a --signal without B:) sends
     * it to every process of the job, and with the script's own message the sweep would get
     * two stop requests, the second of which quits at once, without the checkpoints. */
    fprintf(f, "# The sweep (and its workers) ignore SIGUSR1: Slurm's warning reaches them "
               "once, as\n# the SIGTERM the trap below sends, even when Slurm signals every "
               "process of the job\n# (a second stop request would make the sweep quit "
               "without its checkpoints).\n");
    fprintf(f, "trap '' USR1\n");
    fprintf(f, "( exec ");
    put_quoted(f, exe);
    fprintf(f, " sweep ");
    put_quoted(f, file);
    fprintf(f, " --shard \"$shard/%lld\" --workers %d", (long long)array, workers);
    if (job->threads > 0)
        fprintf(f, " --threads %d", job->threads);
    if (job->checkpoint_every > 0)
        fprintf(f, " --checkpoint_every %.17g", job->checkpoint_every);
    for (int i = 0; i < job->n_filters; i++) {
        fprintf(f, " --filter ");
        put_quoted(f, job->filters[i]);
    }
    fprintf(f, " \\\n  --results ");
    put_quoted(f, dir);
    fprintf(f, "/shard-\"$shard\" ) &\n");
    fprintf(f, "pid=$!\n");
    fprintf(f, "trap 'kill -TERM \"$pid\" 2>/dev/null' USR1\n");
    /* the loop alone would keep the 138 of a wait that the trap cut short just as the
     * sweep ended */
    fprintf(f, "# a signal cuts `wait` short (status 128+n): wait until the sweep has ended, "
               "then once\n# more for its own exit status (bash keeps it)\n");
    fprintf(f, "while kill -0 \"$pid\" 2>/dev/null; do\n  wait \"$pid\"\ndone\n");
    fprintf(f, "wait \"$pid\"\nrc=$?\n");
    fprintf(f, "if [ \"$rc\" -eq 75 ] && [ -n \"${SLURM_ARRAY_JOB_ID:-}\" ]; then\n");
    fprintf(f, "  echo \"selectivbench: shard $shard stopped with its checkpoints; requeueing "
               "it\"\n");
    fprintf(f, "  scontrol requeue \"${SLURM_ARRAY_JOB_ID}_${shard}\" ||\n");
    fprintf(f, "    echo \"selectivbench: scontrol requeue failed; resume the shard with: "
               "sbatch --array=$shard\" ");
    put_quoted(f, script);
    fprintf(f, "\n");
    fprintf(f, "fi\n");
    fprintf(f, "exit \"$rc\"\n");
}

int sb_cli_sweep_slurm(const sb_slurm_job *job)
{
    sb_error err = {0};
    const long long limit = time_seconds(job->time);
    if (limit < 0)
        return fail_flag("--time", job->time,
                         "give HH:MM:SS (or MM:SS, minutes, D-HH, D-HH:MM, D-HH:MM:SS)");
    const long long warning = warning_seconds(limit);
    slurm_shape sh = {0, 0, 0, 0};
    int rc = slurm_job_shape(job, &sh);
    if (rc >= 0)
        return rc;
    const int64_t array = sh.array;
    const int workers = sh.workers, threads = sh.threads, ranks = sh.ranks;

    /* absolute paths: the job runs wherever Slurm starts it */
    char exe[PATH_MAX], dir[PATH_MAX], file[PATH_MAX], logs[PATH_MAX + 8], script[PATH_MAX + 16];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        sb_error_set(&err, SB_ERR_IO, "cannot find the selectivbench binary (/proc/self/exe): %s",
                     strerror(errno));
        return sb_cli_fail("sweep", &err);
    }
    exe[n] = '\0';
    if (sb_make_dirs(job->dir, "--slurm folder", &err) != SB_OK)
        return sb_cli_fail("sweep", &err);
    if (realpath(job->dir, dir) == NULL) {
        sb_error_set(&err, SB_ERR_IO, "--slurm %s: %s", job->dir, strerror(errno));
        return sb_cli_fail("sweep", &err);
    }
    /* a file by its absolute path; a built-in preset (tiny/task2) by its name */
    if (access(job->file, R_OK) != 0 || realpath(job->file, file) == NULL)
        snprintf(file, sizeof file, "%s", job->file);
    snprintf(logs, sizeof logs, "%s/logs", dir);
    if (mkdir(logs, 0777) != 0 && errno != EEXIST) {
        sb_error_set(&err, SB_ERR_IO, "cannot create %s: %s", logs, strerror(errno));
        return sb_cli_fail("sweep", &err);
    }
    snprintf(script, sizeof script, "%s/sweep.sbatch", dir);
    FILE *f = fopen(script, "w");
    if (f == NULL) {
        sb_error_set(&err, SB_ERR_IO, "cannot write %s: %s", script, strerror(errno));
        return sb_cli_fail("sweep", &err);
    }
    char today[32] = "";
    time_t now = time(NULL);
    struct tm tm_now;
    if (gmtime_r(&now, &tm_now) != NULL)
        strftime(today, sizeof today, "%Y-%m-%d %H:%M UTC", &tm_now);
    const char *base = strrchr(file, '/') != NULL ? strrchr(file, '/') + 1 : file;

    fprintf(f, "#!/bin/bash\n");
    if (job->mpi) {
        fprintf(f,
                "# %s as one MPI job, written by `selectivbench sweep --slurm --mpi` (%s).\n"
                "# %lld runs on %d ranks: rank 0 hands them out, largest first, and is the "
                "one writer of\n# %s/results/selectivbench.db; ranks 1..%d train one run at "
                "a time, %d threads each.\n# Submit: sbatch %s (docs/cluster.md)\n",
                file, today, (long long)job->runs, ranks, dir, ranks - 1, threads, script);
        fprintf(f, "#SBATCH --job-name=sb-%.40s\n", base);
        write_mpi_body(f, job, exe, file, dir, script, ranks, job->threads, warning);
    } else {
        write_array_body(f, job, exe, file, dir, script, array, workers, warning, today);
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        sb_error_set(&err, SB_ERR_IO, "cannot write %s", script);
        return sb_cli_fail("sweep", &err);
    }
    chmod(script, 0755);
    if (job->mpi) {
        printf("wrote %s: %lld runs on %d MPI ranks of %d cpus (rank 0 coordinating, %d "
               "threads per run when Slurm gives the cores asked), --time %s\nsubmit it with:\n  "
               "sbatch %s\nthe results: %s/results\n",
               script, (long long)job->runs, ranks, job->cpus_per_task, threads, job->time, script,
               dir);
        return 0;
    }
    printf("wrote %s: %lld runs in %lld array tasks of %d cpus (%d workers x %d threads when "
           "Slurm gives the cores asked), "
           "--time %s, warned %lld s before\n",
           script, (long long)job->runs, (long long)array, job->cpus_per_task, workers, threads,
           job->time, warning);
    printf("submit it with:\n  sbatch %s\nthen merge the shards:\n  %s results merge "
           "%s/shard-* --db %s/all/selectivbench.db\n",
           script, exe, dir, dir);
    return 0;
}
