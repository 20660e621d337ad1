/* sweep_slurm.h - `selectivbench sweep FILE --slurm DIR`: a ready sbatch script that runs the
 * sweep as a Slurm job array of shards (src/cli/sweep_slurm.c; docs/cluster.md). */
#ifndef SELECTIVBENCH_CLI_SWEEP_SLURM_H
#define SELECTIVBENCH_CLI_SWEEP_SLURM_H

#include <stdint.h>

typedef struct sb_slurm_job {
    const char *dir;       /* where the script, the logs and the shards' folders go */
    const char *file;      /* the sweep file (or built-in preset) as given */
    int64_t runs;          /* runs after the filters */
    int array;             /* array tasks (shards); 0: min(runs, 16) */
    const char *time;      /* --time HH:MM:SS (or D-HH:MM:SS) */
    const char *partition; /* or NULL */
    int cpus_per_task;
    int workers, threads;    /* per task; threads 0: cpus_per_task / workers */
    double checkpoint_every; /* minutes */
    const char *const *filters;
    int n_filters;
    int mpi;           /* one MPI job (`mpirun selectivbench sweep`) instead of an array */
    int ranks;         /* with mpi: MPI ranks, the coordinator included; 0: min(runs, 16) + 1 */
    int ranks_per_run; /* with mpi: teams of this many worker ranks (sweep_mpi.h); 0, 1: none */
} sb_slurm_job;

/* Writes DIR/sweep.sbatch (with mpi: one MPI job whose rank 0 coordinates, see
 * sweep_mpi.h) (and makes DIR/logs), prints what it wrote and the sbatch line;
 * returns the exit code (one error line on failure). */
int sb_cli_sweep_slurm(const sb_slurm_job *job);

#endif
