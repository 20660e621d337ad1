/*
 * plan.h - the pieces of `selectivbench plan` (the public header's sb_plan_make) that its
 * files share: one calibration measured (plan_calibrate.c) and the calibration cache file
 * (plan_cache.c). plan.c puts them together: the runs, their frames and the schedule.
 */
#ifndef SELECTIVBENCH_PLAN_H
#define SELECTIVBENCH_PLAN_H

#include "config/run_config.h"
#include "core/status.h"
#include "task/task.h"

/* What a plan reads: the public functions fill it from a configuration's keys
 * (sb_plan_options_from); the library's tests fill it by hand. */
typedef struct sb_plan_options {
    int ranks;              /* runs at a time (>= 1) */
    int threads;            /* threads per run (>= 1) */
    const char *cache_path; /* the calibration cache file (created when missing); NULL: none */
    int recalibrate;        /* measure every calibration again, even when cached */
    int cached_only;        /* measure nothing (a shape the cache lacks is costed at a FLOP rate) */
    double seconds_per_calibration;     /* the measurement's target length (0: the key's default) */
    int calibration_threads;            /* 0: min(threads, this machine's cores) */
    sb_plan_progress_fn on_calibration; /* may be NULL */
    void *user;
} sb_plan_options;

/* *o from the keys of rt (ranks, threads, calibration_seconds, calibration_threads,
 * recalibrate, cached_only, calibration_cache) and the callbacks of settings (may be
 * NULL); the cache's path is written to path[size] (o->cache_path points there, or is
 * NULL for calibration_cache none). */
void sb_plan_options_from(const sb_runtime *rt, const sb_plan_settings *settings, char *path,
                          size_t size, sb_plan_options *o);

/* Plans the runs of sel (the public sb_plan_make, its keys in opts). */
sb_status sb_plan_make_with(const sb_sweep *s, const sb_sweep_selection *sel,
                            const sb_plan_options *opts, sb_plan **out, sb_error *err);

/* The plan of one run (`train`, before it starts): as sb_plan_make for a selection of one
 * run, index 0, checked by sb_run_config_check. Errors: that check's, sb_plan_make's. */
sb_status sb_plan_run_config(const sb_run_config *cfg, const sb_plan_options *opts, sb_plan **out,
                             sb_error *err);

/* ---- a calibration measured (plan_calibrate.c) ------------------------------------------ */

/* Measures c (its key, model, sizes and FLOPs per frame already filled) on run cfg's configuration:
 * the model is built (seed 1) and trained for about target_s seconds on real micro-batches of
 * `micro` samples of task's training split (generated as the trainer generates them, an
 * optimiser step every acc of them), the first not timed, then evaluated on a test split
 * of a few batches of the same task. A model too large to measure whole in that time is
 * measured on fewer samples per micro-batch and, past one sample, on fewer layers (its
 * time scaled by layers / calibrated_layers). task_s: the seconds building the task took,
 * added to setup_s. Runs on `threads` threads with cfg's GEMM engine and precision.
 * Errors: building the model or a batch, a training step's, SB_ERR_NOMEM. */
sb_status sb_plan_calibrate(const sb_run_config *cfg, const sb_task *task, int micro, int acc,
                            int threads, double target_s, double task_s, sb_plan_calibration *c,
                            sb_error *err);

/* ---- the cache file (plan_cache.c) -------------------------------------------------------- *
 * A JSON file written only by us, one calibration a line:
 *   {"version": 3, "calibrations": [
 *   {"machine": "...", "threads": 1, "key": "...", "train_s_per_frame": ..., ...},
 *   ...
 *   ]}
 * A calibration is found by (machine, threads, key). Another version reads as damaged, and
 * none of its calibrations are used. */

typedef struct sb_plan_cache_entry {
    char machine[256];
    sb_plan_calibration c; /* key, threads and the numbers (source: SB_PLAN_CACHED) */
} sb_plan_cache_entry;

typedef struct sb_plan_cache {
    int n, cap;
    sb_plan_cache_entry *entries;
} sb_plan_cache;

/* Reads path into *cache (empty when the file does not exist). A file that is there but is
 * not such a cache, or a cache of another version, sets *damaged and reads as empty; one
 * with a damaged line sets *damaged and keeps the lines that read.
 * Errors: SB_ERR_IO when the file exists but cannot be read, SB_ERR_NOMEM. */
sb_status sb_plan_cache_load(const char *path, sb_plan_cache *cache, int *damaged, sb_error *err);

/* The cached calibration of (machine, threads, key), or NULL. */
const sb_plan_calibration *sb_plan_cache_find(const sb_plan_cache *cache, const char *machine,
                                              int threads, const char *key);

/* Adds c (or replaces the entry of the same machine, threads and key). */
sb_status sb_plan_cache_put(sb_plan_cache *cache, const char *machine, const sb_plan_calibration *c,
                            sb_error *err);

/* Writes the cache to path atomically (a temporary file renamed), creating its folder.
 * Errors: SB_ERR_IO naming the path. */
sb_status sb_plan_cache_save(const char *path, const sb_plan_cache *cache, sb_error *err);

void sb_plan_cache_free(sb_plan_cache *cache);

/* The user's cache file into buf[size]: plan-calibration.json in $SB_CACHE_DIR, else in
 * $XDG_CACHE_HOME/selectivbench (an absolute path), else in ~/.cache/selectivbench; "" when
 * none of them is set. */
void sb_plan_cache_default_path(char *buf, size_t size);

/* This machine as the cache knows it: the CPU model (/proc/cpuinfo's "model name") and
 * the library version, into out[size]. */
void sb_plan_machine(char *out, size_t size);

#endif
