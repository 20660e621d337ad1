/* gemm_onednn.c - oneDNN matmul primitives for sb_gemm's products, float32 or bf16
 * operands, float32 output (gemm_engine.h).
 *
 * A matmul primitive is created for one shape, layout, alpha and beta, and its creation costs
 * a fraction of a millisecond, so primitives are kept in a small table and reused: a training
 * step repeats the same few dozen products. Measured here (2 threads, AVX-512), the float32
 * primitive (oneDNN's "brg:avx512_core" kernels) runs these shapes about twice as fast as
 * dnnl_sgemm and as OpenBLAS pinned to its AVX2 kernels, and the bf16 one (on CPUs with
 * AVX512_BF16) half as fast again; docs/performance.md has the table.
 *
 * Scratch memory is passed in by us (oneDNN's "user" scratchpad mode) from a per-thread
 * buffer, so one primitive may run on several threads at once (the blocks of a
 * deterministic product). At the top level a primitive uses all threads; inside a parallel
 * region oneDNN runs it on the calling thread alone.
 */
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "tensor/gemm_engine.h"

#if defined(SB_HAVE_ONEDNN) && !defined(SB_REAL_DOUBLE)
#include <oneapi/dnnl/dnnl.h>

#include "core/alloc.h"

#define MATMUL_TABLE 256 /* primitives kept; when full (at the top level) all are dropped */

typedef struct matmul_key {
    int64_t dims[3];    /* M, N, K */
    int64_t strides[6]; /* op(A) [M,K], op(B) [K,N], C [M,N]: row and column strides */
    float alpha, beta;
    int bf16;
    int threads; /* oneDNN sizes its work split for the team it sees at creation */
} matmul_key;

typedef struct matmul_entry {
    matmul_key key;
    dnnl_primitive_t primitive;
    dnnl_memory_desc_t a, b, c, scratch;
    size_t scratch_bytes;
} matmul_entry;

static struct {
    int ready; /* 1: engine made, -1: oneDNN refused it */
    dnnl_engine_t engine;
    matmul_entry table[MATMUL_TABLE];
    int n_entries;
} dnn;

/* One per thread: the stream it runs primitives on (a stream is not shared between threads)
 * and the scratch of the primitive it runs. */
static _Thread_local struct {
    dnnl_stream_t stream;
    void *data;
    size_t size;
} per_thread;

static int dnn_ready(void)
{
    int ok;
#pragma omp critical(sb_onednn_table)
    {
        if (dnn.ready == 0) {
            dnn.ready = dnnl_engine_create(&dnn.engine, dnnl_cpu, 0) == dnnl_success ? 1 : -1;
        }
        ok = dnn.ready == 1;
    }
    if (ok && per_thread.stream == NULL &&
        dnnl_stream_create(&per_thread.stream, dnn.engine, dnnl_stream_default_flags) !=
            dnnl_success)
        per_thread.stream = NULL;
    return ok && per_thread.stream != NULL;
}

static void entry_destroy(matmul_entry *e)
{
    if (e->primitive != NULL)
        dnnl_primitive_destroy(e->primitive);
    e->primitive = NULL;
}

/* Creates the primitive of a key into e (its primitive stays NULL when oneDNN has none). */
static void entry_create(const matmul_key *k, matmul_entry *e)
{
    memset(e, 0, sizeof *e);
    e->key = *k;
    const dnnl_data_type_t in_type = k->bf16 ? dnnl_bf16 : dnnl_f32;
    const dnnl_dims_t a_dims = {k->dims[0], k->dims[2]}, b_dims = {k->dims[2], k->dims[1]},
                      c_dims = {k->dims[0], k->dims[1]};
    const dnnl_dims_t a_strides = {k->strides[0], k->strides[1]},
                      b_strides = {k->strides[2], k->strides[3]},
                      c_strides = {k->strides[4], k->strides[5]};
    if (dnnl_memory_desc_init_by_strides(&e->a, 2, a_dims, in_type, a_strides) != dnnl_success ||
        dnnl_memory_desc_init_by_strides(&e->b, 2, b_dims, in_type, b_strides) != dnnl_success ||
        dnnl_memory_desc_init_by_strides(&e->c, 2, c_dims, dnnl_f32, c_strides) != dnnl_success)
        return;
    dnnl_matmul_desc_t desc;
    if (dnnl_matmul_desc_init(&desc, &e->a, &e->b, NULL, &e->c) != dnnl_success)
        return;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t post_ops = NULL;
    dnnl_primitive_desc_t pd = NULL;
    int ok =
        dnnl_primitive_attr_create(&attr) == dnnl_success &&
        dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success;
    /* C = alpha op(A) op(B) + beta C: an output scale, then an accumulation post-op */
    if (ok && k->alpha != 1.0f)
        ok = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &k->alpha) == dnnl_success;
    if (ok && k->beta != 0.0f)
        ok = dnnl_post_ops_create(&post_ops) == dnnl_success &&
             dnnl_post_ops_append_sum(post_ops, k->beta) == dnnl_success &&
             dnnl_primitive_attr_set_post_ops(attr, post_ops) == dnnl_success;
    if (ok && dnnl_primitive_desc_create(&pd, &desc, attr, dnn.engine, NULL) == dnnl_success) {
        const dnnl_memory_desc_t *s = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        if (s != NULL) {
            e->scratch = *s;
            e->scratch_bytes = dnnl_memory_desc_get_size(s);
        }
        if (dnnl_primitive_create(&e->primitive, pd) != dnnl_success)
            e->primitive = NULL;
        dnnl_primitive_desc_destroy(pd);
    }
    if (post_ops != NULL)
        dnnl_post_ops_destroy(post_ops);
    if (attr != NULL)
        dnnl_primitive_attr_destroy(attr);
}

/* The table's entry for a key, created on first use. Inside a parallel region a full table
 * is not emptied (another thread may be running one of its primitives): the entry is then
 * made in *spare and the caller destroys it after use. NULL when oneDNN has no primitive. */
static const matmul_entry *entry_get(const matmul_key *k, matmul_entry *spare, int *is_spare)
{
    const matmul_entry *found = NULL;
    *is_spare = 0;
#pragma omp critical(sb_onednn_table)
    {
        for (int i = 0; i < dnn.n_entries && found == NULL; i++)
            if (memcmp(&dnn.table[i].key, k, sizeof *k) == 0)
                found = &dnn.table[i];
        if (found == NULL && dnn.n_entries == MATMUL_TABLE && omp_get_level() == 0) {
            for (int i = 0; i < dnn.n_entries; i++)
                entry_destroy(&dnn.table[i]);
            dnn.n_entries = 0;
        }
        if (found == NULL && dnn.n_entries < MATMUL_TABLE) {
            entry_create(k, &dnn.table[dnn.n_entries]);
            found = &dnn.table[dnn.n_entries++];
        }
    }
    if (found == NULL) {
        entry_create(k, spare);
        found = spare;
        *is_spare = 1;
    }
    return found->primitive != NULL ? found : NULL;
}

static void *scratch_get(size_t bytes)
{
    if (bytes > per_thread.size) {
        sb_free(per_thread.data);
        per_thread.data = sb_malloc(bytes);
        per_thread.size = per_thread.data != NULL ? bytes : 0;
    }
    return per_thread.data;
}

static int execute(const matmul_entry *e, const void *A, const void *B, float *C)
{
    void *scratch_data = e->scratch_bytes > 0 ? scratch_get(e->scratch_bytes) : NULL;
    if (e->scratch_bytes > 0 && scratch_data == NULL)
        return -1;
    dnnl_memory_t a = NULL, b = NULL, c = NULL, s = NULL;
    int ok = dnnl_memory_create(&a, &e->a, dnn.engine, (void *)A) == dnnl_success &&
             dnnl_memory_create(&b, &e->b, dnn.engine, (void *)B) == dnnl_success &&
             dnnl_memory_create(&c, &e->c, dnn.engine, C) == dnnl_success &&
             (e->scratch_bytes == 0 ||
              dnnl_memory_create(&s, &e->scratch, dnn.engine, scratch_data) == dnnl_success);
    if (ok) {
        dnnl_exec_arg_t args[4] = {
            {DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}, {DNNL_ARG_SCRATCHPAD, s}};
        ok = dnnl_primitive_execute(e->primitive, per_thread.stream, s != NULL ? 4 : 3, args) ==
                 dnnl_success &&
             dnnl_stream_wait(per_thread.stream) == dnnl_success;
    }
    dnnl_memory_t all[4] = {a, b, c, s};
    for (int i = 0; i < 4; i++)
        if (all[i] != NULL)
            dnnl_memory_destroy(all[i]);
    return ok ? 0 : -1;
}

int sb_onednn_matmul(int bf16, int trans_a, int trans_b, int M, int N, int K, float alpha,
                     const void *A, int lda, const void *B, int ldb, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0 || K <= 0 || !dnn_ready())
        return -1;
    matmul_key k;
    memset(&k, 0, sizeof k); /* the key is compared bytewise, padding included */
    k.dims[0] = M;
    k.dims[1] = N;
    k.dims[2] = K;
    /* op(A)[i][p] = A[i lda + p] or A[p lda + i]; op(B)[p][j] likewise */
    k.strides[0] = trans_a ? 1 : lda;
    k.strides[1] = trans_a ? lda : 1;
    k.strides[2] = trans_b ? 1 : ldb;
    k.strides[3] = trans_b ? ldb : 1;
    k.strides[4] = ldc;
    k.strides[5] = 1;
    k.alpha = alpha;
    k.beta = beta;
    k.bf16 = bf16 != 0;
    k.threads = omp_get_max_threads();
    matmul_entry spare;
    int is_spare;
    const matmul_entry *e = entry_get(&k, &spare, &is_spare);
    int rc = e != NULL ? execute(e, A, B, C) : -1;
    if (is_spare)
        entry_destroy(&spare);
    return rc;
}

int sb_onednn_bf16_supported(void)
{
    /* a small product must have a bf16 primitive (oneDNN 2.6 has them from AVX-512 on) */
    static int known = -1;
    if (known < 0) {
        uint16_t one[16 * 16];
        float out[16 * 16];
        for (int i = 0; i < 16 * 16; i++)
            one[i] = 0x3f80; /* 1.0 */
        known = sb_onednn_matmul(1, 0, 0, 16, 16, 16, 1, one, 16, one, 16, 0, out, 16) == 0 &&
                out[0] == 16.0f;
    }
    return known;
}

#else

int sb_onednn_matmul(int bf16, int trans_a, int trans_b, int M, int N, int K, float alpha,
                     const void *A, int lda, const void *B, int ldb, float beta, float *C, int ldc)
{
    (void)bf16, (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)alpha, (void)A;
    (void)lda, (void)B, (void)ldb, (void)beta, (void)C, (void)ldc;
    return -1;
}

int sb_onednn_bf16_supported(void)
{
    return 0;
}

#endif

/* Round to nearest even; NaNs stay NaNs (quiet). A loop the compiler vectorises. */
void sb_bf16_from_float(int rows, int cols, const float *src, int ld, uint16_t *dst)
{
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)cols > 65536 &&               \
                                              omp_get_level() == 0)
    for (int r = 0; r < rows; r++) {
        const float *s = src + (size_t)r * (size_t)ld;
        uint16_t *d = dst + (size_t)r * (size_t)cols;
        for (int c = 0; c < cols; c++) {
            uint32_t u;
            memcpy(&u, &s[c], sizeof u);
            uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
            d[c] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : rounded);
        }
    }
}
