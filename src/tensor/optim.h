/*
 * optim.h - Adam / AdamW, global-norm clipping and the learning-rate schedules of the
 * reference's train.py, with PyTorch's update formulas.
 */
#ifndef SELECTIVBENCH_OPTIM_H
#define SELECTIVBENCH_OPTIM_H

#include <stdint.h>

#include "config/run_config.h" /* sb_optimizer_kind, sb_schedule_kind */
#include "tensor/params.h"

typedef struct sb_optimizer {
    sb_optimizer_kind kind;
    double lr;           /* base learning rate */
    double weight_decay; /* coupled L2 (Adam) or decoupled (AdamW) */
    double beta1, beta2, eps;
    double group2_lr; /* learning rate of SB_PARAM_GROUP2 parameters (S4 kernels) */
    int64_t step;     /* updates done (the bias-correction step is step + 1) */
} sb_optimizer;

/* torch.optim.Adam(lr, weight_decay) or AdamW(lr, eps=1e-15, weight_decay) as train.py
 * builds them. */
void sb_optimizer_init(sb_optimizer *opt, sb_optimizer_kind kind, double lr, double weight_decay);

/* train.py's setup_optimizer for the S4 model (whatever --optimizer and --wd say):
 * torch.optim.AdamW with its defaults (eps 1e-8) and weight_decay 1e-4 for the general
 * parameters, and a second group for the SB_PARAM_GROUP2 parameters (the kernel's log_dt,
 * log_A_real, A_imag) at lr min(0.001, lr) without weight decay. */
void sb_optimizer_init_s4(sb_optimizer *opt, double lr);

/* One update of every trainable parameter with learning-rate factor lr_scale (from the
 * schedule): m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
 * p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps). */
void sb_optimizer_step(sb_optimizer *opt, sb_params *ps, double lr_scale);

/* The same with the two groups' learning rates given (the general parameters', the
 * SB_PARAM_GROUP2 ones'), for schedules that step each group's rate on its own. */
void sb_optimizer_step_lr(sb_optimizer *opt, sb_params *ps, double lr, double lr_group2);

/* Global L2 norm of all gradients; scales them by min(1, max_norm / (norm + 1e-6)) as
 * torch.nn.utils.clip_grad_norm_. Returns the norm before clipping (NaN/Inf propagate). */
double sb_clip_grad_norm(sb_params *ps, double max_norm);

/* The schedule's learning-rate factor at update `step` (LambdaLR: 0 at step 0):
 * step / warmup during the warm-up, then 0.5 (1 + cos(pi (step - w) / (total - w))),
 * or 0.1 + 0.9 of that for the lr_min variant. */
double sb_schedule_factor(sb_schedule_kind kind, double step, double warmup, double total);

/* torch.optim.lr_scheduler.CosineAnnealingLR(T_max = t_max, eta_min = 0), as torch 1.13
 * computes it: the learning rate of a group with initial rate base_lr after `epochs`
 * scheduler steps, by the same recursion and in the same floating-point order (the closed
 * form can differ in the last bits), including the rise after epoch t_max. t_max 0
 * (the reference would divide by zero on its first step) leaves base_lr. The S4 run steps
 * it after every evaluation (train.py). */
double sb_cosine_annealing_lr(double base_lr, int64_t epochs, int64_t t_max);

#endif
