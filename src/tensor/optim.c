/* optim.c - Adam/AdamW, clipping and schedules with PyTorch's formulas (see optim.h). */
#include "tensor/optim.h"

#include <omp.h>
#include <tgmath.h>

/* S4's parameter group 2 (log_A_real, A_imag, dt) trains at min(0.001, lr), as the
 * reference's S4 registers it */
#define GROUP2_LR_MAX 0.001

void sb_optimizer_init(sb_optimizer *opt, sb_optimizer_kind kind, double lr, double weight_decay)
{
    opt->kind = kind;
    opt->lr = lr;
    opt->weight_decay = weight_decay;
    opt->beta1 = 0.9;
    opt->beta2 = 0.999;
    opt->eps = kind == SB_OPT_ADAMW ? 1e-15 : 1e-8; /* train.py passes eps=1e-15 to AdamW */
    opt->group2_lr = lr < GROUP2_LR_MAX ? lr : GROUP2_LR_MAX;
    opt->step = 0;
}

void sb_optimizer_init_s4(sb_optimizer *opt, double lr)
{
    sb_optimizer_init(opt, SB_OPT_ADAMW, lr, 1e-4);
    opt->eps = 1e-8; /* setup_optimizer builds optim.AdamW(params, lr, weight_decay) */
}

void sb_optimizer_step(sb_optimizer *opt, sb_params *ps, double lr_scale)
{
    sb_optimizer_step_lr(opt, ps, opt->lr * lr_scale, opt->group2_lr * lr_scale);
}

void sb_optimizer_step_lr(sb_optimizer *opt, sb_params *ps, double lr_main, double lr_group2)
{
    opt->step++;
    const double t = (double)opt->step;
    const double bc1 = 1.0 - pow(opt->beta1, t);
    const double bc2_sqrt = sqrt(1.0 - pow(opt->beta2, t));
    const real b1 = (real)opt->beta1, b2 = (real)opt->beta2, eps = (real)opt->eps;
    for (int i = 0; i < ps->n; i++) {
        sb_param *p = &ps->p[i];
        if (p->flags & SB_PARAM_BUFFER)
            continue;
        int group2 = (p->flags & SB_PARAM_GROUP2) != 0;
        double lr = group2 ? lr_group2 : lr_main;
        double wd = (group2 || (p->flags & SB_PARAM_NO_DECAY)) ? 0.0 : opt->weight_decay;
        const real step_size = (real)(lr / bc1), inv_bc2 = (real)(1.0 / bc2_sqrt);
        const real decay = (real)(1.0 - lr * wd);
        const int adamw = opt->kind == SB_OPT_ADAMW;
        real *w = ps->data + p->offset, *gr = ps->grad + p->offset;
        real *m = ps->m + p->offset, *v = ps->v + p->offset;
        const size_t n = p->size;
#pragma omp parallel for schedule(static) if (n > 65536)
        for (size_t k = 0; k < n; k++) {
            real g = gr[k];
            if (adamw)
                w[k] *= decay;
            else if (wd != 0.0)
                g += (real)wd * w[k];
            m[k] = b1 * m[k] + (1 - b1) * g;
            v[k] = b2 * v[k] + (1 - b2) * g * g;
            real denom = sqrt(v[k]) * inv_bc2 + eps;
            w[k] -= step_size * m[k] / denom;
        }
    }
}

double sb_clip_grad_norm(sb_params *ps, double max_norm)
{
    /* per-tensor norms then the norm of the norms (as torch), each summed in order */
    double total = 0.0;
    for (int i = 0; i < ps->n; i++) {
        sb_param *p = &ps->p[i];
        if (p->flags & SB_PARAM_BUFFER)
            continue;
        const real *g = ps->grad + p->offset;
        double ss = 0.0;
        for (size_t k = 0; k < p->size; k++)
            ss += (double)g[k] * (double)g[k];
        total += ss;
    }
    double norm = sqrt(total);
    double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0) {
        const real c = (real)coef;
        real *g = ps->grad;
        const size_t n = ps->total;
#pragma omp parallel for schedule(static) if (n > 65536)
        for (size_t k = 0; k < n; k++)
            g[k] *= c;
    }
    return norm;
}

double sb_schedule_factor(sb_schedule_kind kind, double step, double warmup, double total)
{
    if (step < warmup)
        return step / warmup;
    if (total <= warmup)
        return 1.0; /* no decay phase (the reference would divide by zero here) */
    double cosine = 0.5 * (1.0 + cos(M_PI * (step - warmup) / (total - warmup)));
    if (kind == SB_SCHED_COSINE_WARMUP_LR_MIN)
        return 0.1 + (1.0 - 0.1) * cosine;
    return cosine;
}

double sb_cosine_annealing_lr(double base_lr, int64_t epochs, int64_t t_max)
{
    /* CosineAnnealingLR.get_lr (eta_min = 0), one scheduler step at a time */
    const double eta_min = 0.0, T = (double)t_max;
    double lr = base_lr;
    for (int64_t e = 1; e <= epochs && t_max > 0; e++) {
        if ((e - 1 - t_max) % (2 * t_max) == 0)
            lr = lr + (base_lr - eta_min) * (1 - cos(M_PI / T)) / 2;
        else
            lr = (1 + cos(M_PI * (double)e / T)) / (1 + cos(M_PI * (double)(e - 1) / T)) *
                     (lr - eta_min) +
                 eta_min;
    }
    return lr;
}
