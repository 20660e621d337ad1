/*
 * optim.h - Adam / AdamW, global-norm clipping and the learning-rate schedules of the
 * reference's train.py, with PyTorch's update formulas.
 */
#ifndef SELECTIVBENCH_OPTIM_H
#define SELECTIVBENCH_OPTIM_H

#include <stdint.h>

#include "selectivbench/params.h"

typedef enum sb_optimizer_kind { SB_OPT_ADAM = 0, SB_OPT_ADAMW = 1 } sb_optimizer_kind;

typedef enum sb_schedule_kind {
    SB_SCHED_COSINE_WARMUP = 0,        /* cosine_schedule_with_warmup */
    SB_SCHED_COSINE_WARMUP_LR_MIN = 1, /* cosine_schedule_with_warmup_lr_min (floor 0.1 lr) */
} sb_schedule_kind;

typedef struct sb_optimizer {
    sb_optimizer_kind kind;
    double lr;           /* base learning rate */
    double weight_decay; /* coupled L2 (Adam) or decoupled (AdamW) */
    double beta1, beta2, eps;
    double group2_lr;    /* learning rate of SB_PARAM_GROUP2 parameters (S4 kernels) */
    int64_t step;        /* updates done (the bias-correction step is step + 1) */
} sb_optimizer;

/* torch.optim.Adam(lr, weight_decay) or AdamW(lr, eps=1e-15, weight_decay) as train.py
 * builds them. */
void sb_optimizer_init(sb_optimizer *opt, sb_optimizer_kind kind, double lr, double weight_decay);

/* One update of every trainable parameter with learning-rate factor lr_scale (from the
 * schedule): m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
 * p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps). */
void sb_optimizer_step(sb_optimizer *opt, sb_params *ps, double lr_scale);

/* Global L2 norm of all gradients; scales them by min(1, max_norm / (norm + 1e-6)) as
 * torch.nn.utils.clip_grad_norm_. Returns the norm before clipping (NaN/Inf propagate). */
double sb_clip_grad_norm(sb_params *ps, double max_norm);

/* The schedule's learning-rate factor at update `step` (LambdaLR: 0 at step 0):
 * step / warmup during the warm-up, then 0.5 (1 + cos(pi (step - w) / (total - w))),
 * or 0.1 + 0.9 of that for the lr_min variant. */
double sb_schedule_factor(sb_schedule_kind kind, double step, double warmup, double total);

#endif
