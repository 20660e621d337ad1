/*
 * run_config.h - everything that defines one run (the reference's train.py arguments),
 * its canonical JSON form and its hashes.
 *
 * Two hashes identify a run:
 *   - the training hash covers what determines the trained weights (task, model,
 *     optimisation, seeds, protocol): checkpoints are named by it, so an evaluation-only
 *     run (task 4's --test_pretrained) finds the weights its training configuration made;
 *   - the run hash covers everything, including the test settings and the mode: the
 *     results database keys runs by it.
 */
#ifndef SELECTIVBENCH_RUN_CONFIG_H
#define SELECTIVBENCH_RUN_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "config/task_config.h"
#include "core/json_writer.h"
#include "core/status.h"

#define SB_MODEL_NAME_MAX 32 /* a layer type's name ("transformer", "gated_delta_product") */

typedef enum sb_optimizer_kind { SB_OPT_ADAM = 0, SB_OPT_ADAMW = 1 } sb_optimizer_kind;

typedef enum sb_schedule_kind {
    SB_SCHED_COSINE_WARMUP = 0,        /* cosine_schedule_with_warmup */
    SB_SCHED_COSINE_WARMUP_LR_MIN = 1, /* cosine_schedule_with_warmup_lr_min (floor 0.1 lr) */
} sb_schedule_kind;

/* Which library computes the matrix products (--gemm; src/tensor/gemm_engine.h). */
typedef enum sb_gemm_kind {
    SB_GEMM_AUTO = 0,     /* the default table: by product size (gemm_engine.h) */
    SB_GEMM_OPENBLAS = 1, /* OpenBLAS through our deterministic blocked path */
    SB_GEMM_ONEDNN = 2,   /* oneDNN's dnnl_sgemm (float builds with oneDNN only) */
} sb_gemm_kind;

/* The operands of the large matrix products (--precision; src/tensor/gemm_engine.h). */
typedef enum sb_precision_kind {
    SB_PRECISION_FP32 = 0,
    SB_PRECISION_BF16 = 1, /* bf16 operands, float32 accumulation and everything else */
} sb_precision_kind;

/* Where and how a run is carried out, never what it computes: one member per RUNTIME or
 * TRAIN key of keys.def, generated from its rows (a new runtime key is its row and its
 * reader), in no JSON and no hash; a checkpoint's configuration reads back with their
 * defaults. Text keys are paths, "" when unset. */
#define SB_PATH_MAX 4096
#define SB_RT_TYPE_INT int
#define SB_RT_TYPE_INT64 int64_t
#define SB_RT_TYPE_DOUBLE double
#define SB_RT_TYPE_BOOL int
#define SB_RT_TYPE_SWITCH int
#define SB_RT_TYPE_STRING char
#define SB_RT_TYPE_CHOICE int
#define SB_RT_TYPE_OPT_INT int
#define SB_RT_SIZE_INT
#define SB_RT_SIZE_INT64
#define SB_RT_SIZE_DOUBLE
#define SB_RT_SIZE_BOOL
#define SB_RT_SIZE_SWITCH
#define SB_RT_SIZE_STRING [SB_PATH_MAX]
#define SB_RT_SIZE_CHOICE
#define SB_RT_SIZE_OPT_INT
#define SB_RT_MEMBER(kind, name) SB_RT_TYPE_##kind name SB_RT_SIZE_##kind;
#define SB_RT_MEMBER_GRAMMAR(kind, name)
#define SB_RT_MEMBER_TASK(kind, name)
#define SB_RT_MEMBER_RUN(kind, name)
#define SB_RT_MEMBER_RUNTIME SB_RT_MEMBER
#define SB_RT_MEMBER_TRAIN SB_RT_MEMBER
#define SB_RT_MEMBER_COMMAND SB_RT_MEMBER
typedef struct sb_runtime {
#define SB_KEY(name, kind, field, def, min, max, choices, hash, group, help)                       \
    SB_RT_MEMBER_##group(kind, name)
#define SB_NOOP(name, kind, min, max, group, help)
#include "config/keys.def"
#undef SB_KEY
#undef SB_NOOP
} sb_runtime;

typedef struct sb_run_config {
    sb_task_config task; /* task.grammar.seed is the task seed */
    char model[SB_MODEL_NAME_MAX];
    int feat_size; /* as requested (--feat_size) */
    int layers;
    int d_state;
    double dropout;
    double rope_base;
    int att_dropout;
    int batch_size;
    int test_bs;
    int grad_acc; /* 0: none, -1: from the memory budget, k: k micro-batches */
    double lr;
    double wd;
    sb_optimizer_kind optimizer;
    sb_schedule_kind scheduler;
    int warmup_steps;   /* < 0: 5% of the updates (train.py's default) */
    uint64_t seed;      /* model seed (= task seed with same_seed) */
    int64_t epoch_size; /* training samples between evaluations (5000) */
    /* at least this many points on the learning curve: extra evaluations of the test split
     * between epoch_size's (not in the JSON: they change neither weights nor metrics) */
    int curve_points;
    /* seconds between the live training points written to the results database (0: none;
     * not in the JSON: what is recorded, not what is computed) */
    double live_every;
    int test_pretrained; /* evaluation-only run of a trained configuration */
    int early_stop;      /* stop when the update loss stops improving */
    int patience;        /* updates without improvement; < 0: 10% of the updates */
    /* inputs of the seed logic (not in the JSON; see config.h): with same_seed the task
     * seed is the model seed, otherwise requested_task_seed (--task_seed, default 42) */
    int same_seed;
    uint64_t requested_task_seed;
    /* how the products are computed (not in the JSON: the same weights up to rounding) */
    sb_gemm_kind gemm;
    int deterministic;           /* 1 and 2 threads give identical weights (OpenBLAS under auto) */
    sb_precision_kind precision; /* in the JSON (and hashes) only when bf16 */
    /* gradient shards per micro-batch (--grad_shards; data-parallel training, trainer.h):
     * in the JSON (and hashes) only when not 1, so earlier runs keep their hashes */
    int grad_shards;
    sb_runtime rt; /* the runtime keys: how and where, never what (not in the JSON) */
} sb_run_config;

/* train.py's defaults for training flags, the paper's main task as the task. */
sb_run_config sb_run_config_default(void);

/* Canonical JSON (fixed key order, train.py names). training_only leaves out the test
 * settings and the mode. */
void sb_run_config_write_json(const sb_run_config *cfg, sb_json *j, int training_only);
/* The same as a malloc'd string. */
char *sb_run_config_json_string(const sb_run_config *cfg, int training_only);

/* Reads a configuration written by sb_run_config_write_json (every key optional,
 * defaults otherwise; unknown keys are errors). */
sb_status sb_run_config_from_json(const char *text, sb_run_config *cfg, sb_error *err);

/* The flags that set cfg from the defaults, as `train` reads them: "--key value" for every
 * key whose value differs from its default (the runtime keys left out: where, not what),
 * in the table's order, values shell-quoted where
 * needed (a switch bare). `train` with them has cfg's run hash. malloc'd; NULL when out of
 * memory. */
char *sb_run_config_flags(const sb_run_config *cfg);

/* 64-bit FNV-1a of the canonical JSON, as 16 hex digits in out[17]. */
void sb_run_config_hash(const sb_run_config *cfg, int training_only, char out[17]);

/* The public sb_config (selectivbench.h): a run configuration behind an opaque handle. Here,
 * so that a floor that hands a configuration to a caller's callback (the sweep executor's
 * updates) hands the public one. */
struct sb_config {
    sb_run_config run;
};

#endif
