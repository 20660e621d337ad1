/* train_output.c - progress and summaries of training runs (see train_output.h). */
#include "cli/train_output.h"

#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/json_writer.h"
#include "core/timer.h"
#include "exp/sweep_exec.h"

void sb_train_output_init(sb_train_output *o, const sb_run_config *cfg, int quiet, int json,
                          int threads)
{
    memset(o, 0, sizeof *o);
    o->f = json ? stderr : stdout;
    o->quiet = quiet;
    o->json = json;
    o->threads = threads;
    o->tty = isatty(fileno(o->f));
    o->test_acc = (double)NAN;
    const char *fd_text = getenv(SB_PROGRESS_FD_ENV);
    if (fd_text != NULL) {
        char *end;
        long fd = strtol(fd_text, &end, 10);
        /* a pipe the sweep gave us: anything else (a stale variable) is ignored */
        if (end != fd_text && *end == '\0' && fd > 2 && fd < 65536 && fcntl((int)fd, F_GETFD) >= 0)
            o->progress = fdopen((int)fd, "w");
        unsetenv(SB_PROGRESS_FD_ENV);
    }
    if (!quiet) {
        char hash[17];
        sb_run_config_hash(cfg, 0, hash);
        const sb_grammar_config gc = sb_grammar_config_effective(&cfg->task.grammar);
        fprintf(o->f, "run %s: %s, feat_size %d, layers %d, lr %g, seed %llu; task vocab %d amb "
                      "%d depth %d, %lld samples (protocol %s)\n",
                hash, cfg->model, cfg->feat_size, cfg->layers, cfg->lr,
                (unsigned long long)cfg->seed, gc.vocab, gc.amb, gc.amb_depth,
                (long long)cfg->task.dataset_size,
                cfg->task.protocol == SB_PROTOCOL_CLEAN ? "clean" : "reference");
    }
}

static void format_duration(double s, char *buf, size_t size)
{
    if (!(s >= 0) || s > 1e7) {
        snprintf(buf, size, "?");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, size, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, size, "%ld:%02ld", t / 60, t % 60);
}

void sb_train_output_event(const sb_train_event *ev, void *user)
{
    sb_train_output *o = user;
    if (o->quiet && o->progress == NULL)
        return;
    switch (ev->kind) {
    case SB_EVENT_START:
        if (o->quiet)
            break;
        fprintf(o->f, "  %.3fM parameters, %lld updates, gradient accumulation %d, %d thread%s\n",
                (double)ev->params / 1e6, (long long)ev->total_steps, ev->grad_acc, o->threads,
                o->threads == 1 ? "" : "s");
        break;
    case SB_EVENT_PROGRESS: {
        double t = sb_time_now();
        if (o->progress != NULL && (t - o->last_progress >= 0.5 || ev->step == ev->total_steps)) {
            o->last_progress = t;
            sb_sweep_progress rec = {.step = ev->step, .total_steps = ev->total_steps,
                                     .loss = ev->loss, .acc = ev->acc,
                                     .tokens_per_s = ev->tokens_per_s, .eta_s = ev->eta_s,
                                     .test_acc = o->test_acc};
            fprintf(o->progress, SB_PROGRESS_RECORD_FORMAT, rec.step, rec.total_steps, rec.loss,
                    rec.acc, rec.tokens_per_s, rec.eta_s, rec.test_acc);
            fflush(o->progress);
        }
        if (o->quiet || !o->tty)
            break; /* plain logs: one line per evaluation */
        double now = sb_time_now();
        if (now - o->last_live < 0.25 && ev->step != ev->total_steps)
            break;
        o->last_live = now;
        char eta[32];
        format_duration(ev->eta_s, eta, sizeof eta);
        fprintf(o->f, "\r  step %lld/%lld  loss %.4f  acc %.3f  lr %.2e  %.0f tok/s  ETA %s   ",
                (long long)ev->step, (long long)ev->total_steps, ev->loss, ev->acc, ev->lr,
                ev->tokens_per_s, eta);
        fflush(o->f);
        o->live_open = 1;
        break;
    }
    case SB_EVENT_EVAL: {
        o->test_acc = ev->test_acc;
        if (o->quiet)
            break;
        if (o->live_open) {
            fputc('\n', o->f);
            o->live_open = 0;
        }
        char elapsed[32];
        format_duration(ev->elapsed_s, elapsed, sizeof elapsed);
        if (isnan(ev->loss))
            fprintf(o->f, "  test loss %.4f acc %.4f (%s)\n", ev->test_loss, ev->test_acc, elapsed);
        else
            fprintf(o->f,
                    "  step %lld/%lld (%lld samples): train loss %.4f acc %.4f | test loss %.4f "
                    "acc %.4f | %.0f tok/s, %s\n",
                    (long long)ev->step, (long long)ev->total_steps, (long long)ev->samples,
                    ev->loss, ev->acc, ev->test_loss, ev->test_acc, ev->tokens_per_s, elapsed);
        fflush(o->f);
        break;
    }
    }
}

void sb_train_output_close(sb_train_output *o)
{
    if (o->progress != NULL)
        fclose(o->progress);
    o->progress = NULL;
}

void sb_train_output_finish(sb_train_output *o, const sb_run_config *cfg,
                            const sb_train_result *res, const char *ckpt, double ceiling,
                            double effective_memory)
{
    if (o->live_open) {
        fputc('\n', o->f);
        o->live_open = 0;
    }
    char hash[17];
    sb_run_config_hash(cfg, 0, hash);
    if (o->json) {
        sb_json j;
        sb_json_init(&j, stdout, 0);
        sb_json_object_begin(&j);
        sb_json_key(&j, "hash");
        sb_json_string(&j, hash);
        sb_json_key(&j, "status");
        sb_json_string(&j, res->status);
        if (res->reason[0] != '\0') {
            sb_json_key(&j, "reason");
            sb_json_string(&j, res->reason);
        }
        sb_json_key(&j, "test_acc");
        sb_json_double(&j, res->test_acc);
        sb_json_key(&j, "test_loss");
        sb_json_double(&j, res->test_loss);
        sb_json_key(&j, "train_acc");
        sb_json_double(&j, res->train_acc);
        sb_json_key(&j, "train_loss");
        sb_json_double(&j, res->train_loss);
        sb_json_key(&j, "params");
        sb_json_uint(&j, res->params);
        sb_json_key(&j, "tokens_per_s");
        sb_json_double(&j, res->tokens_per_s);
        sb_json_key(&j, "wall_s");
        sb_json_double(&j, res->wall_s);
        sb_json_key(&j, "steps");
        sb_json_int(&j, res->steps);
        sb_json_key(&j, "grad_acc");
        sb_json_int(&j, res->grad_acc);
        sb_json_key(&j, "checkpoint");
        if (ckpt != NULL)
            sb_json_string(&j, ckpt);
        else
            sb_json_null(&j);
        sb_json_key(&j, "ceiling");
        sb_json_double(&j, ceiling);
        sb_json_key(&j, "effective_memory");
        if (isinf(effective_memory))
            sb_json_string(&j, ">32");
        else
            sb_json_double(&j, effective_memory);
        sb_json_object_end(&j);
        fputc('\n', stdout);
        return;
    }
    if (o->quiet)
        return;
    fprintf(o->f, "%s: test acc %.4f, test loss %.4f, train acc %.4f, %.0f tokens/s, %.1f s\n",
            res->status, res->test_acc, res->test_loss, res->train_acc, res->tokens_per_s,
            res->wall_s);
    if (ckpt != NULL && strcmp(res->status, "finished") == 0 && !cfg->test_pretrained)
        fprintf(o->f, "checkpoint: %s\n", ckpt);
    if (!isnan(ceiling)) {
        char mem[32];
        if (isinf(effective_memory))
            snprintf(mem, sizeof mem, "beyond 32 elements");
        else
            snprintf(mem, sizeof mem, "%.1f elements", effective_memory);
        fprintf(o->f, "yardsticks: ceiling %.4f (the ideal observer), effective memory %s "
                      "(docs/reading-results.md)\n",
                ceiling, mem);
    }
}
