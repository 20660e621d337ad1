/* train_output.c - progress and summaries of training runs (see train_output.h). */
#include "cli/train_output.h"

#include "cli/plan_view.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void sb_train_output_init(sb_train_output *o, const sb_config *cfg, int quiet, int json,
                          int threads)
{
    memset(o, 0, sizeof *o);
    o->f = json ? stderr : stdout;
    o->cfg = cfg;
    o->quiet = quiet;
    o->json = json;
    o->threads = threads;
    o->tty = isatty(fileno(o->f));
    o->test_acc = (double)NAN;
    o->log_every = SB_TRAIN_LOG_EVERY_S;
    o->last_log = sb_clock_seconds();
}

/* The text of key `key` of cfg ("?" when it cannot be read). */
static const char *key_text(const sb_config *cfg, const char *key, char *buf, size_t size)
{
    if (sb_config_get_key(cfg, key, buf, size, NULL) != SB_OK)
        snprintf(buf, size, "?");
    return buf;
}

void sb_train_output_begin(void *user)
{
    sb_train_output *o = user;
    o->begun = 1;
    o->progress = sb_sweep_worker_open();
    if (o->quiet)
        return;
    char hash[17], model[64], width[32], layers[32], lr[64], seed[32], size[32], protocol[32];
    double lr_value = 0;
    sb_config_run_hash(o->cfg, hash);
    sb_config_parse_double(key_text(o->cfg, "lr", lr, sizeof lr), &lr_value);
    int vocab, amb, depth;
    sb_config_grammar_sizes(o->cfg, &vocab, &amb, &depth);
    fprintf(o->f,
            "run %s: %s, feat_size %s, layers %s, lr %g, seed %s; task vocab %d amb "
            "%d depth %d, %s samples (protocol %s)\n",
            hash, key_text(o->cfg, "model", model, sizeof model),
            key_text(o->cfg, "feat_size", width, sizeof width),
            key_text(o->cfg, "layers", layers, sizeof layers), lr_value,
            key_text(o->cfg, "seed", seed, sizeof seed), vocab, amb, depth,
            key_text(o->cfg, "dataset_size", size, sizeof size),
            key_text(o->cfg, "protocol", protocol, sizeof protocol));
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

void sb_train_output_start(const sb_progress *p, void *user)
{
    sb_train_output *o = user;
    if (o->quiet)
        return;
    const double millions = (double)p->params / 1e6;
    fprintf(o->f, "  %.3fM parameters, %lld updates, gradient accumulation %d, %d thread%s",
            millions, (long long)p->total_steps, p->grad_acc, o->threads,
            o->threads == 1 ? "" : "s");
    if (p->step > 0)
        fprintf(o->f, "; resuming at update %lld", (long long)p->step);
    fprintf(o->f, "\n");
    fflush(o->f);
    if (p->step == 0)
        sb_cli_plan_print_run(o->f, o->cfg, o->threads);
    o->last_log = sb_clock_seconds();
}

/* The progress of an update in one line: where the run is, the running training loss and
 * accuracy (means since the last evaluation), speed and time left. */
static void format_progress(const sb_progress *p, char *buf, size_t size)
{
    char eta[32];
    format_duration(p->eta_s, eta, sizeof eta);
    snprintf(buf, size,
             "progress: step %lld/%lld (%lld samples): loss %.4f acc %.3f lr %.2e | %.0f tok/s, "
             "ETA %s",
             (long long)p->step, (long long)p->total_steps, (long long)p->samples, p->mean_loss,
             p->mean_acc, p->lr, p->tokens_per_s, eta);
}

/* After an update: the sweep's record (about twice a second); on a terminal the live line,
 * rewritten in place; elsewhere (a log file, a pipe) a plain line every log_every seconds. */
static void output_update(sb_train_output *o, const sb_progress *p)
{
    double now = sb_clock_seconds();
    if (o->progress != NULL && (now - o->last_progress >= 0.5 || p->step == p->total_steps)) {
        o->last_progress = now;
        sb_sweep_worker_report(o->progress, p, o->test_acc);
    }
    if (o->quiet)
        return;
    char line[256];
    if (!o->tty) {
        /* the last update is followed by the final evaluation's line: no line for it */
        if (now - o->last_log < o->log_every || p->step == p->total_steps)
            return;
        o->last_log = now;
        format_progress(p, line, sizeof line);
        fprintf(o->f, "  %s\n", line);
        fflush(o->f);
        return;
    }
    if (now - o->last_live < SB_TRAIN_LIVE_EVERY_S && p->step != p->total_steps)
        return;
    o->last_live = now;
    format_progress(p, line, sizeof line);
    fprintf(o->f, "\r  %s   ", line);
    fflush(o->f);
    o->live_open = 1;
}

/* After an evaluation: one line. */
static void output_evaluation(sb_train_output *o, const sb_progress *p)
{
    o->test_acc = p->test_acc;
    if (o->quiet)
        return;
    if (o->live_open) {
        fputc('\n', o->f);
        o->live_open = 0;
    }
    o->last_log = sb_clock_seconds();
    char elapsed[32];
    format_duration(p->elapsed_s, elapsed, sizeof elapsed);
    if (isnan(p->loss))
        fprintf(o->f, "  test loss %.4f acc %.4f (%s)\n", p->test_loss, p->test_acc, elapsed);
    else
        fprintf(o->f,
                "  step %lld/%lld (%lld samples): train loss %.4f acc %.4f | test loss %.4f "
                "acc %.4f | %.0f tok/s, %s\n",
                (long long)p->step, (long long)p->total_steps, (long long)p->samples, p->loss,
                p->acc, p->test_loss, p->test_acc, p->tokens_per_s, elapsed);
    fflush(o->f);
}

void sb_train_output_progress(const sb_progress *p, void *user)
{
    sb_train_output *o = user;
    if (o->quiet && o->progress == NULL)
        return;
    if (p->is_evaluation)
        output_evaluation(o, p);
    else
        output_update(o, p);
}

void sb_train_output_close(sb_train_output *o)
{
    sb_sweep_worker_close(o->progress);
    o->progress = NULL;
}

void sb_train_output_json_result(sb_jw *j, const sb_train_outcome *res)
{
    sb_jw_key(j, "hash");
    sb_jw_string(j, res->run_hash);
    sb_jw_key(j, "status");
    sb_jw_string(j, sb_run_status_name(res->status));
    if (res->reason[0] != '\0') {
        sb_jw_key(j, "reason");
        sb_jw_string(j, res->reason);
    }
    sb_jw_key(j, "test_acc");
    sb_jw_double(j, res->test_acc);
    sb_jw_key(j, "test_loss");
    sb_jw_double(j, res->test_loss);
    sb_jw_key(j, "train_acc");
    sb_jw_double(j, res->train_acc);
    sb_jw_key(j, "train_loss");
    sb_jw_double(j, res->train_loss);
    sb_jw_key(j, "valid_acc");
    sb_jw_double(j, res->valid_acc);
    sb_jw_key(j, "valid_loss");
    sb_jw_double(j, res->valid_loss);
    sb_jw_key(j, "params");
    sb_jw_uint(j, res->params);
    sb_jw_key(j, "tokens_per_s");
    sb_jw_double(j, res->tokens_per_s);
    sb_jw_key(j, "wall_s");
    sb_jw_double(j, res->wall_s);
}

void sb_train_output_finish(sb_train_output *o, const sb_train_outcome *res, const char *ckpt)
{
    if (o->live_open) {
        fputc('\n', o->f);
        o->live_open = 0;
    }
    if (o->json) {
        sb_jw *j = sb_jw_open(stdout, 0);
        if (j == NULL)
            return;
        sb_jw_object_begin(j);
        sb_train_output_json_result(j, res);
        sb_jw_key(j, "steps");
        sb_jw_int(j, res->steps);
        sb_jw_key(j, "grad_acc");
        sb_jw_int(j, res->grad_acc);
        sb_jw_key(j, "checkpoint");
        /* null when none: a run that diverged before its first evaluation saved nothing */
        sb_jw_string(j, ckpt != NULL && access(ckpt, F_OK) == 0 ? ckpt : NULL);
        sb_jw_key(j, "ceiling");
        sb_jw_double(j, res->ceiling);
        sb_jw_key(j, "effective_memory");
        if (isinf(res->effective_memory))
            sb_jw_string(j, ">32");
        else
            sb_jw_double(j, res->effective_memory);
        if (res->fingerprint[0] != '\0') {
            sb_jw_key(j, "engine");
            sb_jw_string(j, res->engine);
            sb_jw_key(j, "threads");
            sb_jw_int(j, res->threads);
            sb_jw_key(j, "fingerprint");
            sb_jw_string(j, res->fingerprint);
        }
        sb_jw_object_end(j);
        sb_jw_close(j);
        fputc('\n', stdout);
        return;
    }
    /* an interrupted run gets its one line from the caller: how to resume it */
    if (o->quiet || res->status == SB_RUN_INTERRUPTED)
        return;
    fprintf(o->f,
            "run %s %s: test acc %.4f, test loss %.4f, train acc %.4f, %.0f tokens/s, "
            "%.1f s\n",
            res->run_hash, sb_run_status_name(res->status), res->test_acc, res->test_loss,
            res->train_acc, res->tokens_per_s, res->wall_s);
    if (!isnan(res->valid_acc))
        fprintf(o->f,
                "  validation acc %.4f, loss %.4f (the split choices read; test is only "
                "reported)\n",
                res->valid_acc, res->valid_loss);
    char pretrained[16] = "";
    sb_config_get_key(o->cfg, "test_pretrained", pretrained, sizeof pretrained, NULL);
    int test_pretrained = 0;
    sb_config_parse_bool(pretrained, &test_pretrained);
    if (ckpt != NULL && res->status == SB_RUN_FINISHED && !test_pretrained)
        fprintf(o->f, "checkpoint: %s\n", ckpt);
    if (res->fingerprint[0] != '\0' && !res->cached)
        fprintf(o->f,
                "arithmetic: engine table %s, %d thread%s, fingerprint %s (the same command "
                "with this fingerprint gives the same bits; docs/training.md)\n",
                res->engine, res->threads, res->threads == 1 ? "" : "s", res->fingerprint);
    if (res->checkpoint_fingerprint[0] != '\0' &&
        strcmp(res->checkpoint_fingerprint, res->fingerprint) != 0)
        fprintf(o->f,
                "note: resumed from a checkpoint written under fingerprint %s, this process "
                "computes under %s (another thread count, machine or library): the result "
                "is not bit-identical to an uninterrupted run\n",
                res->checkpoint_fingerprint, res->fingerprint);
    if (!isnan(res->ceiling)) {
        char mem[32];
        if (isinf(res->effective_memory))
            snprintf(mem, sizeof mem, "beyond 32 elements");
        else
            snprintf(mem, sizeof mem, "%.1f elements", res->effective_memory);
        fprintf(o->f,
                "yardsticks: ceiling %.4f (the ideal observer), effective memory %s "
                "(docs/reading-results.md)\n",
                res->ceiling, mem);
    }
}
