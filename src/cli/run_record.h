/* run_record.h - a training run's rows in the results database: begin, evaluations, end.
 * Used by `train` (and by sweeps). */
#ifndef SELECTIVBENCH_CLI_RUN_RECORD_H
#define SELECTIVBENCH_CLI_RUN_RECORD_H

#include "selectivbench/results.h"
#include "selectivbench/run_config.h"
#include "selectivbench/trainer.h"

typedef struct sb_run_record {
    sb_results *db;
    int64_t run_id;
    int warned;          /* a write failed during the run (reported once) */
    sb_task_config task; /* the run's task, for its yardsticks at the end */
    int threads;         /* threads for the yardsticks' computation (0: all cores) */
    double ceiling, effective_memory; /* recorded at the end of a finished run; NaN: none */
} sb_run_record;

/* Opens db_path and records the start of the run. When the run already finished:
 * with force, its rows are deleted and it starts again; otherwise *finished = 1,
 * *stored holds its row (clear with sb_results_run_row_clear) and nothing is begun. */
sb_status sb_run_record_begin(sb_run_record *rec, const char *db_path, const sb_run_config *cfg,
                              const char *ckpt, int force, int *finished, sb_run_row *stored,
                              sb_error *err);

/* Records an evaluation event (train and test rows). Failures print one warning. */
void sb_run_record_event(sb_run_record *rec, const sb_train_event *ev);

/* Records the end of the run and, for a finished run, its yardsticks (the ceiling of its
 * task's test split, from the database's cache or computed, and the effective memory of
 * its test accuracy: sb_results_record_yardsticks), then closes the database. A failure
 * to record the yardsticks is returned after the end is recorded. */
sb_status sb_run_record_end(sb_run_record *rec, const sb_train_result *res, sb_error *err);

/* Closes without recording an end (after begin failed or was skipped). */
void sb_run_record_close(sb_run_record *rec);

#endif
