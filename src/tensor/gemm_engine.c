/* gemm_engine.c - which library computes each product, and the fingerprint of a run's
 * arithmetic (gemm_engine.h).
 *
 * The default engine table is a rule of the product's size, fixed in the code: nothing is
 * timed while a run trains, so the same command gives the same bits whatever runs beside
 * it (an earlier version timed each shape class at its first use and cached the winner;
 * under load, or with the cache full, that made reruns round differently and ran up to 12x
 * slower). Why the rule: docs/performance.md, "Which engine computes a product".
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#if defined(SB_HAVE_ONEDNN) && !defined(SB_REAL_DOUBLE)
#include <oneapi/dnnl/dnnl.h>
#define SB_USE_ONEDNN 1
#endif

#include "core/cpus.h"
#include "tensor/gemm_engine.h"

static struct {
    sb_gemm_kind requested;
    int deterministic;
    sb_precision_kind precision;
    int bf16_suspended; /* sb_gemm_bf16_suspend: products in float32 for now */
    double flops[3];    /* by sb_gemm_kind */
    double flops_bf16;
} engine_state = {.requested = SB_GEMM_OPENBLAS};

/* ---- settings ----------------------------------------------------------------------------- */

int sb_gemm_onednn_available(void)
{
#ifdef SB_USE_ONEDNN
    return 1;
#else
    return 0;
#endif
}

const char *sb_gemm_onednn_version(void)
{
#ifdef SB_USE_ONEDNN
    static char version[32];
    const dnnl_version_t *v = dnnl_version();
    snprintf(version, sizeof version, "%d.%d.%d", v->major, v->minor, v->patch);
    return version;
#else
    return NULL;
#endif
}

const char *sb_gemm_kind_name(sb_gemm_kind engine)
{
    switch (engine) {
    case SB_GEMM_OPENBLAS: return "openblas";
    case SB_GEMM_ONEDNN: return "onednn";
    default: return "auto";
    }
}

sb_status sb_gemm_engine_set(sb_gemm_kind engine, int deterministic, sb_error *err)
{
    if (engine == SB_GEMM_ONEDNN && !sb_gemm_onednn_available())
        return sb_error_set(err, SB_ERR_INVALID,
                            "--gemm onednn: this build has no oneDNN (install libdnnl-dev "
                            "and rebuild, or use --gemm openblas or auto)");
    engine_state.requested = engine;
    engine_state.deterministic = deterministic != 0;
    return SB_OK;
}

int sb_gemm_deterministic(void)
{
    return engine_state.deterministic;
}

const char *sb_precision_name(sb_precision_kind precision)
{
    return precision == SB_PRECISION_BF16 ? "bf16" : "fp32";
}

sb_status sb_gemm_precision_set(sb_precision_kind precision, sb_error *err)
{
    if (precision == SB_PRECISION_BF16) {
        if (!sb_gemm_onednn_available())
            return sb_error_set(err, SB_ERR_INVALID,
                                "--precision bf16: this build has no oneDNN (install libdnnl-dev "
                                "and rebuild, or use --precision fp32)");
        if (engine_state.requested == SB_GEMM_OPENBLAS)
            return sb_error_set(err, SB_ERR_INVALID,
                                "--precision bf16 multiplies with oneDNN, and --gemm openblas "
                                "forbids it: use --gemm auto or onednn");
        if (!sb_onednn_bf16_supported())
            return sb_error_set(err, SB_ERR_INVALID,
                                "--precision bf16: oneDNN has no bf16 products on this CPU (it "
                                "needs AVX-512); use --precision fp32");
    }
    engine_state.precision = precision;
    return SB_OK;
}

sb_status sb_gemm_configure(const sb_run_config *cfg, sb_error *err)
{
    sb_status st = sb_gemm_engine_set(cfg->gemm, cfg->deterministic, err);
    return st != SB_OK ? st : sb_gemm_precision_set(cfg->precision, err);
}

sb_precision_kind sb_gemm_precision(void)
{
    return engine_state.bf16_suspended ? SB_PRECISION_FP32 : engine_state.precision;
}

int sb_gemm_bf16_suspend(int suspend)
{
    int previous = engine_state.bf16_suspended;
    engine_state.bf16_suspended = suspend != 0;
    return previous;
}

int sb_gemm_bf16_suspended(void)
{
    return engine_state.bf16_suspended;
}

/* ---- FLOP counts -------------------------------------------------------------------------- */

void sb_gemm_flops_add(sb_gemm_kind engine, double flops)
{
    double *slot = &engine_state.flops[engine == SB_GEMM_ONEDNN ? 2 : 1];
#pragma omp atomic
    *slot += flops;
}

void sb_gemm_flops_get(double *openblas, double *onednn)
{
    *openblas = engine_state.flops[1];
    *onednn = engine_state.flops[2];
}

void sb_gemm_flops_add_bf16(double flops)
{
#pragma omp atomic
    engine_state.flops_bf16 += flops;
}

double sb_gemm_flops_bf16(void)
{
    return engine_state.flops_bf16;
}

void sb_gemm_flops_reset(void)
{
    engine_state.flops[1] = engine_state.flops[2] = engine_state.flops_bf16 = 0;
}

/* ---- the engine table ---------------------------------------------------------------------- */

sb_gemm_kind sb_gemm_engine_for(int M, int N, int K)
{
    if (!sb_gemm_onednn_available() || omp_get_level() > 0)
        return SB_GEMM_OPENBLAS;
    if (engine_state.requested != SB_GEMM_AUTO)
        return engine_state.requested;
    return 2.0 * (double)M * (double)N * (double)K >= SB_GEMM_ONEDNN_MIN_FLOPS ? SB_GEMM_ONEDNN
                                                                               : SB_GEMM_OPENBLAS;
}

/* The table's name for a setting, in a build with or without oneDNN. */
static const char *table_name(sb_gemm_kind engine)
{
    if (!sb_gemm_onednn_available())
        return "openblas";
    switch (engine) {
    case SB_GEMM_OPENBLAS: return "openblas";
    case SB_GEMM_ONEDNN: return "onednn";
    default: return SB_GEMM_TABLE_AUTO;
    }
}

const char *sb_gemm_table_name(void)
{
    return table_name(engine_state.requested);
}

sb_status sb_gemm_table_parse(const char *name, sb_gemm_kind *engine, sb_error *err)
{
    if (strcmp(name, "openblas") == 0)
        *engine = SB_GEMM_OPENBLAS;
    else if (strcmp(name, "onednn") == 0)
        *engine = SB_GEMM_ONEDNN;
    else if (strcmp(name, SB_GEMM_TABLE_AUTO) == 0)
        *engine = SB_GEMM_AUTO;
    else
        return sb_error_set(
            err, SB_ERR_INVALID,
            "engine table '%s' is not one this version knows (openblas, onednn, " SB_GEMM_TABLE_AUTO
            ")",
            name);
    return SB_OK;
}

void sb_gemm_fingerprint(const sb_run_config *cfg, int threads, sb_fingerprint *fp)
{
    char cpu[128] = "unknown";
    sb_cpu_model(cpu, sizeof cpu);
    const char *dnnl = sb_gemm_onednn_version();
    snprintf(fp->table, sizeof fp->table, "%s", table_name(cfg->gemm));
    /* in deterministic mode the bits do not depend on the thread count */
    char thread_text[16] = "any";
    if (!cfg->deterministic)
        snprintf(thread_text, sizeof thread_text, "%d", threads);
    /* oneDNN's version only where it computes something: an OpenBLAS-only run of a build
     * without oneDNN computes the bits of one with it */
    const int uses_onednn =
        strcmp(fp->table, "openblas") != 0 || cfg->precision == SB_PRECISION_BF16;
    snprintf(fp->text, sizeof fp->text,
             "table=%s; threads=%s; deterministic=%d; precision=%s; cpu=%s; openblas=%s (%s); "
             "onednn=%s",
             fp->table, thread_text, cfg->deterministic != 0, sb_precision_name(cfg->precision),
             cpu, openblas_get_config(), openblas_get_corename(),
             !uses_onednn   ? "unused"
             : dnnl != NULL ? dnnl
                            : "none");
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *c = fp->text; *c != '\0'; c++)
        h = (h ^ (uint8_t)*c) * 1099511628211ull;
    snprintf(fp->digest, sizeof fp->digest, "%08x", (unsigned)(h ^ (h >> 32)));
}
