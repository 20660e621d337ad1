/*
 * run_setup.h - what a run configuration means once the models exist: the checks across
 * keys that need the registry (the model, its width rules), the model it builds and the
 * schedule's horizon. The configuration itself (defaults, JSON, hashes) is config/.
 */
#ifndef SELECTIVBENCH_RUN_SETUP_H
#define SELECTIVBENCH_RUN_SETUP_H

#include "config/run_config.h"
#include "core/status.h"
#include "model/model.h"
#include "task/task.h"

/* The model width actually built: train.py maps the transformer's 648 -> 768 and
 * 1296 -> 1280 (and refuses 960, see sb_run_config_check). */
int sb_run_config_effective_width(const sb_run_config *cfg);

/* Checks every field (one error line naming the flag). A run's configuration is checked
 * once, where it enters the library (sb_train_config, sb_evaluate_checkpoint, ...); the
 * floors below take it as checked. */
sb_status sb_run_config_check(const sb_run_config *cfg, sb_error *err);

/* The checks this process has made (for the test that one training checks once). */
long sb_run_config_checks_made(void);

/* The model configuration for a task with n_inputs inputs and n_classes outputs. */
sb_model_config sb_run_config_model(const sb_run_config *cfg, int n_inputs, int n_classes);

/* Estimated peak bytes of one training step on `samples` samples of `frames` frames. */
double sb_train_step_bytes(const sb_model_config *mc, int samples, int frames);

/* Number of optimiser updates of the whole run: dataset_size // batch_size (the
 * schedule's horizon), and the warm-up length in updates (may be fractional). */
double sb_run_config_total_updates(const sb_run_config *cfg);
double sb_run_config_warmup(const sb_run_config *cfg);

#endif
