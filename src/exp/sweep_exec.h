/*
 * sweep_exec.h - running the runs of a sweep (sweep.h) in worker processes, writing to one
 * results database, and telling the caller what happens through a callback.
 * (src/exp/sweep_exec.c)
 *
 * Every run is `selectivbench train <its flags> --results DIR --db DB --threads T` in a
 * process of its own: a crash or an out-of-memory kill loses one run, not the sweep. Its
 * output goes to DIR/logs/<run hash>.log (run_store.h). A worker dies with the process
 * that started it (PR_SET_PDEATHSIG), so a killed sweep leaves no orphan writing to the
 * database; a run a dead worker left `running` is settled as failed with the signal or
 * exit code (as interrupted when the worker was stopped by SIGINT or SIGTERM, or exited
 * with 130 or 75). Runs the database has as finished are skipped, so executing a sweep
 * again resumes it; a run it has as interrupted continues from its checkpoint (the worker
 * gets --resume when the checkpoint is there).
 *
 * Runs are locked (run_lock.h): a run another process is training (a second sweep over the
 * same grid, a `train` of the same configuration) is put aside and taken again once its lock
 * is free, in the same execution; a worker that finds its run locked (it exits 75) has its
 * run put aside the same way.
 *
 * The library prints nothing: a front end draws the sweep from the events (the CLI's
 * src/cli/sweep_view.c draws live lines on a terminal, plain lines otherwise).
 *
 * Linux only (pipe2, prctl). Not thread-safe: one sb_sweep_execute at a time per process.
 */
#ifndef SELECTIVBENCH_SWEEP_EXEC_H
#define SELECTIVBENCH_SWEEP_EXEC_H

#include <inttypes.h>
#include <stdint.h>

#include "config/run_config.h"
#include "core/status.h"
#include "exp/results.h"
#include "exp/sweep.h"
#include "selectivbench/selectivbench.h"

/* ---- a run's configuration ------------------------------------------------------------ */

/* The configuration of run k, as its `train` worker will read its flags: the defaults,
 * then the fixed flags of the file's `command` in order, the run's parameters where
 * ${args} stands (at the end without it), each set by name with sb_config_set. The
 * command macros ${env}, ${interpreter}, ${program} and the words python/python3 are
 * dropped; another ${...} is refused.
 *
 * Every flag is a key, the runtime ones included (--save_model, --mem_budget: checked here,
 * in no hash, and given to the worker among the run's flags); anything else is an unknown
 * flag. Errors (SB_ERR_INVALID)
 * name the file or the flag. The configuration is not checked across keys
 * (sb_run_config_check does that; sb_sweep_execute refuses the runs it rejects). */
sb_status sb_sweep_run_config(const sb_sweep *s, int64_t k, sb_run_config *cfg, sb_error *err);

/* Run k's configuration built and checked exactly as sb_sweep_execute does before it starts
 * a worker: sb_sweep_run_config, then sb_run_config_check. The one check of a sweep's run:
 * the dry run and --hashes call it too (sb_sweep_check_run). *built says whether *cfg holds
 * the built configuration, also when the check then refused it. Errors: those of the two. */
sb_status sb_sweep_run_validate(const sb_sweep *s, int64_t k, sb_run_config *cfg, int *built,
                                sb_error *err);

/* Run i of sel as the sweep would train it (sb_sweep_run_validate): SB_OK with its grid index
 * in *k and its configuration in *cfg. A run the sweep refuses or excludes returns that status
 * with why in *refused (it costs nothing); SB_ERR_NOMEM is the caller's error, in err. */
sb_status sb_sweep_selected_run(const sb_sweep *s, const sb_sweep_selection *sel, int64_t i,
                                int64_t *k, sb_run_config *cfg, sb_error *refused, sb_error *err);

/* Checks that every parameter of the grid is a train flag, a key of the table (runtime keys
 * included). SB_ERR_INVALID naming the file and the first parameter that is not. */
sb_status sb_sweep_check_params(const sb_sweep *s, sb_error *err);

/* ---- the progress pipe ------------------------------------------------------------------ */

/* A sweep gives each worker the write end of a pipe, its number in this environment
 * variable. The worker (src/cli/train_output.c, through the public sb_sweep_worker_report
 * in src/api/sweep_api.c) writes one line per record, about twice a
 * second and always at the last step:
 *   "P step total_steps loss acc tokens_per_s eta_s last_test_acc\n"
 * written with SB_PROGRESS_RECORD_FORMAT from the fields of sb_sweep_progress in that
 * order, and read back by sb_sweep_progress_parse. last_test_acc is NaN before the
 * first evaluation. */
#define SB_PROGRESS_FD_ENV "SELECTIVBENCH_PROGRESS_FD"
#define SB_PROGRESS_RECORD_FORMAT "P %" PRId64 " %" PRId64 " %.6g %.6g %.6g %.6g %.6g\n"

typedef struct sb_sweep_progress {
    int64_t step, total_steps;
    double loss, acc; /* training loss and accuracy of the last steps */
    double tokens_per_s;
    double eta_s;    /* seconds left, estimated by the worker */
    double test_acc; /* the last evaluation's test accuracy; NaN before the first */
} sb_sweep_progress;

/* Reads one record line (without its newline); returns 1 and fills p when it is one,
 * 0 otherwise (p unchanged). */
int sb_sweep_progress_parse(const char *line, sb_sweep_progress *p);

/* ---- executing a sweep ---------------------------------------------------------------- */

/* How a run of the selection ended: sb_sweep_outcome and sb_sweep_outcome_name are the
 * public header's. */

/* Counts of the selection's runs so far. `failed` includes diverged runs and runs whose
 * worker could not be started. */
typedef struct sb_sweep_tally {
    int done, failed, skipped, refused, excluded, interrupted;
} sb_sweep_tally;

/* The exit code of a `train` worker that found its run locked by another process (75,
 * EX_TEMPFAIL: try again later), also its code after SIGTERM (it stopped with a checkpoint);
 * 130 after SIGINT. */
#define SB_SWEEP_EXIT_TEMPFAIL 75
#define SB_SWEEP_EXIT_INTERRUPTED 130

/* The executor reports to the caller's callback with the public record, sb_sweep_update
 * (selectivbench.h): a run started, sent progress, ended (any outcome) or was put aside
 * because another process trains it (WAITING), and about twice a second the counts (TICK).
 * Pointers in it are valid during the call only. */

typedef struct sb_sweep_exec_opts {
    int workers;         /* runs at a time, >= 1 */
    int threads;         /* threads per run; 0: online cores / workers (at least 1) */
    const char *results; /* results folder: logs (made if missing), checkpoints */
    const char *db;      /* results database; NULL: RESULTS/selectivbench.db */
    /* The program each worker executes as `<worker_exe> train ...` (argv[0] is
     * "selectivbench"): the path of the selectivbench command. The CLI gives
     * "/proc/self/exe" (its own image); a library user must give the installed binary's
     * path. Required. */
    const char *worker_exe;
    sb_sweep_update_fn on_update; /* may be NULL */
    void *user;                   /* passed to on_update and cancel */
    /* Polled about twice a second, and at once when a signal wakes the wait; when it
     * returns nonzero, no new run starts and the running workers are sent that signal when
     * it is SIGINT, else SIGTERM, once. A worker stops after its current update, writes its
     * checkpoint and records its run as interrupted (the next execution continues it);
     * the execution waits for them. May be NULL. */
    int (*cancel)(void *user);
    double checkpoint_every_s; /* each worker's --checkpoint_every (in seconds); 0: off */
} sb_sweep_exec_opts;

/* Runs runs[0..n_runs-1] (indices into the grid of s) with opts->workers processes at a
 * time. For each run, in order: builds and checks its configuration
 * (sb_sweep_run_validate; refused when it cannot be built), skips it when the database has
 * it finished, refuses it (recording it as failed with the reason) when the check rejects
 * it, else starts its worker.
 * Updates go to opts->on_update from this thread only; *tally receives the final counts.
 *
 * Returns SB_OK when every run was settled, whatever their outcomes (look at the tally);
 * SB_ERR_INVALID for bad options, SB_ERR_IO/SB_ERR_INVALID when the results folder, its
 * logs or the database cannot be set up (nothing ran), SB_ERR_NOMEM, or SB_ERR_RUNTIME
 * when cancelled (the tally holds what was settled; runs put aside because they were
 * locked and runs never started are not in it). */
sb_status sb_sweep_execute(const sb_sweep *s, const int64_t *runs, int64_t n_runs,
                           const sb_sweep_exec_opts *opts, sb_sweep_tally *tally, sb_error *err);

#endif
