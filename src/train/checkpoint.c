/* checkpoint.c - model and optimiser state as safetensors (see checkpoint.h). */
#include "train/checkpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/safetensors.h"
#include "tensor/gemm_engine.h"
#include "train/run_setup.h"

void sb_checkpoint_optim_path(const char *path, char *out, size_t size)
{
    const char *suffix = ".safetensors";
    size_t len = strlen(path), slen = strlen(suffix);
    if (len >= slen && strcmp(path + len - slen, suffix) == 0)
        snprintf(out, size, "%.*s.optim%s", (int)(len - slen), path, suffix);
    else
        snprintf(out, size, "%s.optim", path);
}

/* float32 copies of a set of buffers, one per parameter */
static float *to_f32(const real *src, size_t n)
{
    float *out = sb_malloc((n > 0 ? n : 1) * sizeof *out);
    if (out != NULL)
        for (size_t i = 0; i < n; i++)
            out[i] = (float)src[i];
    return out;
}

/* Writes `which` (0 = weights, 1 = exp_avg, 2 = exp_avg_sq) of every parameter. */
static sb_status save_tensors(const char *path, const sb_model *m, int which,
                              const sb_st_meta *meta, size_t n_meta, sb_error *err)
{
    const sb_params *ps = &m->params;
    sb_st_tensor *t = sb_calloc((size_t)ps->n * 2, sizeof *t);
    float **bufs = sb_calloc((size_t)ps->n * 2, sizeof *bufs);
    char(*names)[SB_PARAM_NAME_MAX + 16] = sb_calloc((size_t)ps->n * 2, sizeof *names);
    size_t n = 0;
    sb_status st = SB_OK;
    if (t == NULL || bufs == NULL || names == NULL) {
        st = sb_error_set(err, SB_ERR_NOMEM, "out of memory writing '%s'", path);
        goto done;
    }
    for (int i = 0; i < ps->n; i++) {
        const sb_param *p = &ps->p[i];
        int moments[2] = {1, 2};
        int n_parts = which == 0 ? 1 : 2;
        for (int part = 0; part < n_parts; part++) {
            int kind = which == 0 ? 0 : moments[part];
            if (kind != 0 && (p->flags & SB_PARAM_BUFFER))
                continue;
            const real *src = kind == 0 ? ps->data : kind == 1 ? ps->m : ps->v;
            bufs[n] = to_f32(src + p->offset, p->size);
            if (bufs[n] == NULL) {
                st = sb_error_set(err, SB_ERR_NOMEM, "out of memory writing '%s'", path);
                goto done;
            }
            if (kind == 0)
                snprintf(names[n], sizeof names[n], "%s", p->name);
            else
                snprintf(names[n], sizeof names[n], "%s.%s", kind == 1 ? "exp_avg" : "exp_avg_sq",
                         p->name);
            t[n].name = names[n];
            t[n].dtype = SB_ST_F32;
            t[n].ndim = p->ndim;
            for (int d = 0; d < p->ndim; d++)
                t[n].shape[d] = p->shape[d];
            t[n].data = bufs[n];
            n++;
        }
    }
    st = sb_safetensors_write(path, t, n, meta, n_meta, err);
done:
    if (bufs != NULL)
        for (size_t i = 0; i < n; i++)
            sb_free(bufs[i]);
    sb_free(bufs);
    sb_free(t);
    sb_free(names);
    return st;
}

/* Values of src[0..n) that are NaN or infinite once stored as float32. */
static size_t count_non_finite(const real *src, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += !isfinite((float)src[i]);
    return bad;
}

/* Refuses a model (and with moments, its optimiser state) holding a NaN or an infinity:
 * such a checkpoint could only spread a diverged run. Checked before any file is written,
 * so the checkpoint and its sidecar are never left out of step. */
static sb_status check_finite(const char *path, const sb_model *m, int moments, sb_error *err)
{
    const sb_params *ps = &m->params;
    for (int i = 0; i < ps->n; i++) {
        const sb_param *p = &ps->p[i];
        const real *bufs[3] = {ps->data, ps->m, ps->v};
        const char *what[3] = {"", "exp_avg.", "exp_avg_sq."};
        int n_bufs = moments && !(p->flags & SB_PARAM_BUFFER) ? 3 : 1;
        for (int b = 0; b < n_bufs; b++) {
            size_t bad = count_non_finite(bufs[b] + p->offset, p->size);
            if (bad > 0)
                return sb_error_set(err, SB_ERR_DIVERGED,
                                    "not writing checkpoint '%s': tensor '%s%s' has %zu "
                                    "non-finite value%s (NaN/inf): the run diverged",
                                    path, what[b], p->name, bad, bad == 1 ? "" : "s");
        }
    }
    return SB_OK;
}

/* The optimiser state written but not yet renamed into place (see sb_checkpoint_save). */
#define PENDING_SUFFIX ".pending"

/* Testing aid: with SB_TEST_SAVE_CRASH=N:S in the environment the process kills itself
 * (SIGKILL) at stage S (1: the pending optimiser file written; 2: the model file replaced;
 * 3: the pair complete) of its N-th checkpoint save, so that tests can stop a save at every
 * instant between its renames (tests/cli/test_checkpoint_kill.sh). */
static void test_crash_point(int stage)
{
    static int saves;
    const char *spec = getenv("SB_TEST_SAVE_CRASH");
    if (spec == NULL)
        return;
    if (stage == 1)
        saves++;
    int n = 0, at = 0;
    if (sscanf(spec, "%d:%d", &n, &at) == 2 && n == saves && at == stage)
        raise(SIGKILL);
}

sb_status sb_checkpoint_save(const char *path, const sb_model *m, const sb_run_config *cfg,
                             const sb_optimizer *opt, int64_t samples_seen, sb_error *err)
{
    sb_status finite = check_finite(path, m, opt != NULL, err);
    if (finite != SB_OK)
        return finite;
    char *config = sb_run_config_json_string(cfg, 0);
    if (config == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory writing '%s'", path);
    char hash[17], samples[32], step[32], count[32];
    sb_run_config_hash(cfg, 1, hash);
    /* what the bits depend on besides the configuration: a resume or an evaluation takes the
     * engine table from here, and says when the rest differs */
    sb_fingerprint fp;
    sb_gemm_fingerprint(cfg, omp_get_max_threads(), &fp);
    snprintf(samples, sizeof samples, "%" PRId64, samples_seen);
    snprintf(step, sizeof step, "%" PRId64, opt != NULL ? opt->step : (int64_t)0);
    snprintf(count, sizeof count, "%zu", m->params.count);
    sb_st_meta meta[] = {
        {"format", SB_CHECKPOINT_FORMAT},
        {"config", config},
        {"training_hash", hash},
        {"model", m->cfg.model},
        {"protocol", cfg->task.protocol == SB_PROTOCOL_CLEAN ? "clean" : "reference"},
        {"samples_seen", samples},
        {"step", step},
        {"params", count},
        {"code_version", SB_VERSION},
        {"engine", fp.table},
        {"fingerprint", fp.digest},
    };
    size_t n_meta = sizeof meta / sizeof *meta;
    /* The pair is one unit (checkpoint.h): the optimiser state goes to a pending file first,
     * then the model file is replaced, then the pending file is renamed over the optimiser
     * file. A kill before the model's rename leaves the previous pair; a kill after it
     * leaves the new model and its complete pending optimiser state, which the next load
     * renames into place (settle_pending). Each file is itself written to a temporary name
     * and renamed (sb_safetensors_write). */
    sb_status st = SB_OK;
    char optim_path[4096], pending[4200];
    if (opt != NULL) {
        sb_checkpoint_optim_path(path, optim_path, sizeof optim_path);
        snprintf(pending, sizeof pending, "%s" PENDING_SUFFIX, optim_path);
        st = save_tensors(pending, m, 1, meta, n_meta, err);
        test_crash_point(1);
    }
    if (st == SB_OK)
        st = save_tensors(path, m, 0, meta, n_meta, err);
    if (st == SB_OK && opt != NULL) {
        test_crash_point(2);
        if (rename(pending, optim_path) != 0)
            st = sb_error_set(err, SB_ERR_IO, "cannot rename '%s' to '%s': %s", pending, optim_path,
                              strerror(errno));
        test_crash_point(3);
    }
    free(config); /* open_memstream's buffer (libc), not sb_malloc's */
    return st;
}

/* A checkpoint of ours whose metadata value `key` cannot be used (why: what is wrong with
 * it). SB_ERR_IO, as for any other damage, so that callers do not take the file for a
 * foreign one and fall back to defaults. The checks' messages name flags ("--vocab -5 is
 * out of range"): the user gave no such flag, so the dashes go. */
static sb_status damaged_metadata(const char *path, const char *key, const char *why, sb_error *err)
{
    if (strncmp(why, "--", 2) == 0)
        why += 2;
    return sb_error_set(err, SB_ERR_IO,
                        "checkpoint '%s' is damaged or not from this version of selectivbench: "
                        "its metadata '%s' is unusable (%s)",
                        path, key, why);
}

/* The metadata value `key` of f as a count (a non-negative integer), 0 when absent. */
static sb_status read_count_metadata(const char *path, const sb_safetensors *f, const char *key,
                                     int64_t *out, sb_error *err)
{
    *out = 0;
    const char *text = sb_safetensors_meta(f, key);
    if (text == NULL)
        return SB_OK;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || errno != 0 || v < 0) {
        char why[96];
        snprintf(why, sizeof why, "'%.40s' is not a count", text);
        return damaged_metadata(path, key, why, err);
    }
    *out = (int64_t)v;
    return SB_OK;
}

sb_status sb_checkpoint_read_config(const char *path, sb_run_config *cfg, sb_error *err)
{
    sb_safetensors *f = NULL;
    sb_status st = sb_safetensors_open(path, &f, err);
    if (st != SB_OK)
        return st;
    const char *format = sb_safetensors_meta(f, "format");
    const char *config = sb_safetensors_meta(f, "config");
    if (format == NULL || strcmp(format, SB_CHECKPOINT_FORMAT) != 0 || config == NULL) {
        st = sb_error_set(err, SB_ERR_INVALID,
                          "'%s' was not written by selectivbench (no run configuration in its "
                          "metadata); give the flags of its run explicitly",
                          path);
    } else {
        sb_error inner = {0};
        if (sb_run_config_from_json(config, cfg, &inner) != SB_OK ||
            sb_run_config_check(cfg, &inner) != SB_OK)
            st = damaged_metadata(path, "config", inner.msg, err);
    }
    sb_safetensors_close(f);
    return st;
}

sb_status sb_checkpoint_read_engine(const char *path, char table[16], char digest[9], sb_error *err)
{
    table[0] = digest[0] = '\0';
    sb_safetensors *f = NULL;
    sb_status st = sb_safetensors_open(path, &f, err);
    if (st != SB_OK)
        return st;
    const char *t = sb_safetensors_meta(f, "engine"), *d = sb_safetensors_meta(f, "fingerprint");
    sb_gemm_kind engine;
    sb_error inner = {0};
    if (t != NULL && sb_gemm_table_parse(t, &engine, &inner) != SB_OK)
        st = damaged_metadata(path, "engine", inner.msg, err);
    else if (d != NULL && (strlen(d) != 8 || strspn(d, "0123456789abcdef") != 8))
        st = damaged_metadata(path, "fingerprint", "not 8 hex digits", err);
    if (st == SB_OK) {
        snprintf(table, 16, "%s", t != NULL ? t : "");
        snprintf(digest, 9, "%s", d != NULL ? d : "");
    }
    sb_safetensors_close(f);
    return st;
}

/* A save killed between the model's rename and the optimiser's (sb_checkpoint_save) left the
 * optimiser state of the model file's progress in the pending file: rename it into place.
 * A pending file of other progress (a save killed before the model's rename) is left; the
 * next save overwrites it. */
static void settle_pending(const char *optim_path, int64_t seen)
{
    char pending[4200];
    snprintf(pending, sizeof pending, "%s" PENDING_SUFFIX, optim_path);
    sb_safetensors *f = NULL;
    sb_error ignored = {0};
    if (access(pending, F_OK) != 0 || sb_safetensors_open(pending, &f, &ignored) != SB_OK)
        return;
    int64_t pending_seen = -1;
    const int matches =
        read_count_metadata(pending, f, "samples_seen", &pending_seen, &ignored) == SB_OK &&
        sb_safetensors_meta(f, "samples_seen") != NULL && pending_seen == seen;
    sb_safetensors_close(f);
    if (matches)
        rename(pending, optim_path);
}

/* Copies tensor `name` of f into dst (p->size values), checking its shape. */
static sb_status load_one(const char *path, sb_safetensors *f, const char *name, const sb_param *p,
                          real *dst, sb_error *err)
{
    const sb_st_tensor *t = sb_safetensors_find(f, name);
    if (t == NULL)
        return sb_error_set(err, SB_ERR_INVALID,
                            "'%s' has no tensor '%s': it belongs to another model or size", path,
                            name);
    int same = t->ndim == p->ndim;
    for (int d = 0; same && d < p->ndim; d++)
        same = t->shape[d] == p->shape[d];
    if (!same) {
        char want[64] = "", got[64] = "";
        for (int d = 0; d < p->ndim; d++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%d", d ? ", " : "",
                     p->shape[d]);
        for (int d = 0; d < t->ndim; d++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? ", " : "",
                     (long long)t->shape[d]);
        return sb_error_set(err, SB_ERR_INVALID,
                            "'%s': tensor '%s' has shape [%s], this model needs [%s]: the "
                            "checkpoint is of another size",
                            path, name, got, want);
    }
    if (t->dtype == SB_ST_F32) {
        const float *src = t->data;
        for (size_t k = 0; k < p->size; k++)
            dst[k] = (real)src[k];
    } else if (t->dtype == SB_ST_F64) {
        const double *src = t->data;
        for (size_t k = 0; k < p->size; k++)
            dst[k] = (real)src[k];
    } else {
        return sb_error_set(err, SB_ERR_INVALID, "'%s': tensor '%s' is %s; expected F32 or F64",
                            path, name, sb_st_dtype_name(t->dtype));
    }
    /* every load comes here: no NaN or infinity gets into a model (an evaluation of one
     * gives plausible-looking numbers, and training from one goes nowhere) */
    size_t bad = count_non_finite(dst, p->size);
    if (bad > 0)
        return sb_error_set(err, SB_ERR_INVALID,
                            "checkpoint '%s': tensor '%s' has %zu non-finite value%s (NaN/inf); "
                            "the file is damaged or from a diverged run",
                            path, name, bad, bad == 1 ? "" : "s");
    return SB_OK;
}

sb_status sb_checkpoint_load(const char *path, sb_model *m, sb_optimizer *opt,
                             int64_t *samples_seen, sb_error *err)
{
    sb_safetensors *f = NULL;
    sb_status st = sb_safetensors_open(path, &f, err);
    if (st != SB_OK)
        return st;
    sb_params *ps = &m->params;
    int64_t seen = 0;
    if ((st = read_count_metadata(path, f, "samples_seen", &seen, err)) != SB_OK)
        goto done;
    /* every tensor of the file must be one of ours: no silent partial loads */
    for (size_t i = 0; i < sb_safetensors_count(f); i++) {
        const char *name = sb_safetensors_get(f, i)->name;
        if (sb_params_find(ps, name) == NULL) {
            st = sb_error_set(err, SB_ERR_INVALID,
                              "'%s' has a tensor '%s' that a %s model does not have: it was "
                              "written for another model",
                              path, name, m->cfg.model);
            goto done;
        }
    }
    /* load into a copy first, so a failure leaves the model untouched */
    real *staged = sb_malloc(ps->total * sizeof *staged);
    if (staged == NULL) {
        st = sb_error_set(err, SB_ERR_NOMEM, "out of memory loading '%s'", path);
        goto done;
    }
    memcpy(staged, ps->data, ps->total * sizeof *staged);
    for (int i = 0; i < ps->n && st == SB_OK; i++)
        st = load_one(path, f, ps->p[i].name, &ps->p[i], staged + ps->p[i].offset, err);
    if (st == SB_OK)
        memcpy(ps->data, staged, ps->total * sizeof *staged);
    sb_free(staged);
    if (st != SB_OK)
        goto done;
    if (samples_seen != NULL)
        *samples_seen = seen;
    if (opt != NULL) {
        char optim_path[4096];
        sb_checkpoint_optim_path(path, optim_path, sizeof optim_path);
        settle_pending(optim_path, seen);
        sb_safetensors *o = NULL;
        st = sb_safetensors_open(optim_path, &o, err);
        if (st != SB_OK)
            goto done;
        int64_t step = 0, o_seen = 0;
        st = read_count_metadata(optim_path, o, "step", &step, err);
        if (st == SB_OK)
            st = read_count_metadata(optim_path, o, "samples_seen", &o_seen, err);
        if (st == SB_OK && (sb_safetensors_meta(o, "step") == NULL ||
                            sb_safetensors_meta(o, "samples_seen") == NULL || o_seen != seen)) {
            st = sb_error_set(err, SB_ERR_INVALID,
                              "'%s' does not match '%s' (different progress): the run was "
                              "interrupted while saving; start it again without --resume",
                              optim_path, path);
        }
        char name[SB_PARAM_NAME_MAX + 16];
        for (int i = 0; i < ps->n && st == SB_OK; i++) {
            sb_param *p = &ps->p[i];
            if (p->flags & SB_PARAM_BUFFER)
                continue;
            snprintf(name, sizeof name, "exp_avg.%s", p->name);
            st = load_one(optim_path, o, name, p, ps->m + p->offset, err);
            snprintf(name, sizeof name, "exp_avg_sq.%s", p->name);
            if (st == SB_OK)
                st = load_one(optim_path, o, name, p, ps->v + p->offset, err);
        }
        if (st == SB_OK)
            opt->step = step;
        sb_safetensors_close(o);
    }
done:
    sb_safetensors_close(f);
    return st;
}
