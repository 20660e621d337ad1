/* gemm_survey.c - each engine's GFLOP/s at the product shapes the models make (projections
 * x W^T, their input gradients dY W, weight gradients dY^T X, the decoder, attention's
 * blocks), the numbers behind the default engine table (docs/performance.md, "Which engine
 * computes a product"). Three ways per shape: OpenBLAS through the blocked path, oneDNN
 * through the same blocks, oneDNN in one call on all threads (what the default table runs);
 * the best of REPS calls, three rounds interleaved. Built and run by bench/gemm_survey.sh. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/timer.h"
#include "tensor/gemm_engine.h"

static double best_time(sb_gemm_kind engine, int blocked, int ta, int tb, int M, int N, int K,
                        const float *A, const float *B, float *C, int reps)
{
    double best = 1e30;
    for (int r = 0; r <= reps; r++) { /* the first call warms up */
        double t0 = sb_time_now();
        sb_gemm_run(engine, blocked, ta, tb, M, N, K, 1, A, ta ? M : K, B, tb ? K : N, 0, C, N);
        double dt = sb_time_now() - t0;
        if (r > 0 && dt < best)
            best = dt;
    }
    return best;
}

int main(int argc, char **argv)
{
    const int threads = argc > 1 ? atoi(argv[1]) : 2;
    omp_set_num_threads(threads > 0 ? threads : 1);
    static const int shapes[][5] = {
        /* trans_a, trans_b, M, N, K; the first nine under 2 MFLOP (one serial OpenBLAS call
         * in the blocked path); the default table's threshold is 16 MFLOP */
        {0, 1, 1600, 4, 32},     {0, 1, 1600, 13, 32},    {0, 1, 512, 37, 64},
        {0, 0, 1600, 32, 13},    {1, 0, 32, 13, 1600},    {0, 1, 1600, 16, 32},
        {0, 1, 800, 32, 32},     {1, 0, 32, 32, 800},     {1, 0, 37, 64, 512},
        {0, 1, 1600, 32, 32},    {0, 1, 1600, 128, 128},  {0, 1, 4800, 64, 64},
        {0, 1, 4800, 128, 128},  {0, 1, 4800, 384, 128},  {0, 1, 6400, 128, 128},
        {0, 1, 6400, 256, 256},  {0, 1, 6400, 1024, 256}, {0, 1, 6400, 1601, 128},
        {0, 1, 6400, 1601, 256}, {0, 0, 4800, 32, 32},    {0, 0, 4800, 64, 64},
        {0, 0, 4800, 128, 384},  {0, 0, 6400, 128, 128},  {0, 0, 6400, 256, 256},
        {0, 0, 6400, 128, 1601}, {0, 0, 6400, 256, 1601}, {1, 0, 32, 32, 4800},
        {1, 0, 64, 64, 4800},    {1, 0, 128, 128, 4800},  {1, 0, 128, 128, 6400},
        {1, 0, 256, 256, 6400},  {1, 0, 1601, 128, 6400}, {1, 0, 1601, 256, 6400},
        {0, 0, 400, 400, 64},    {0, 1, 400, 400, 64},    {0, 0, 2048, 2048, 2048},
    };
    const size_t n_elems = 20u << 20;
    float *A = malloc(n_elems * sizeof *A), *B = malloc(n_elems * sizeof *B);
    float *C = malloc(n_elems * sizeof *C);
    if (A == NULL || B == NULL || C == NULL)
        return 1;
    for (size_t i = 0; i < n_elems; i++) {
        A[i] = (float)(i % 7) * 0.1f;
        B[i] = (float)(i % 5) * 0.1f;
    }
    printf("GFLOP/s, %d thread%s, OpenBLAS %s kernels, oneDNN %s\n", threads,
           threads == 1 ? "" : "s", sb_blas_core_name(),
           sb_gemm_onednn_version() != NULL ? sb_gemm_onednn_version() : "none");
    printf("%-22s %8s %14s %13s %13s  %-9s %s\n", "shape", "MFLOP", "openblas-block",
           "onednn-block", "onednn-whole", "fastest", "default table");
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int ta = shapes[s][0], tb = shapes[s][1];
        const int M = shapes[s][2], N = shapes[s][3], K = shapes[s][4];
        const double flops = 2.0 * M * N * K;
        const int reps = flops < 1e8 ? 30 : 8;
        double t[3] = {1e30, 1e30, 1e30};
        for (int round = 0; round < 3; round++) {
            const double x[3] = {best_time(SB_GEMM_OPENBLAS, 1, ta, tb, M, N, K, A, B, C, reps),
                                 best_time(SB_GEMM_ONEDNN, 1, ta, tb, M, N, K, A, B, C, reps),
                                 best_time(SB_GEMM_ONEDNN, 0, ta, tb, M, N, K, A, B, C, reps)};
            for (int k = 0; k < 3; k++)
                t[k] = x[k] < t[k] ? x[k] : t[k];
        }
        static const char *const names[3] = {"openblas", "onednn-b", "onednn"};
        const int fastest = t[0] <= t[1] && t[0] <= t[2] ? 0 : t[1] <= t[2] ? 1 : 2;
        char shape[32];
        snprintf(shape, sizeof shape, "%c%c %dx%dx%d", ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K);
        sb_gemm_engine_set(SB_GEMM_AUTO, 0, NULL);
        printf("%-22s %8.1f %14.1f %13.1f %13.1f  %-9s %s\n", shape, flops / 1e6,
               flops / t[0] / 1e9, flops / t[1] / 1e9, flops / t[2] / 1e9, names[fastest],
               sb_gemm_kind_name(sb_gemm_engine_for(M, N, K)));
    }
    free(A);
    free(B);
    free(C);
    return 0;
}
