/* path_plain.h - the plain form of PaTH attention that test_path_attn.c checks the kernel
 * against in both its builds (static). */
#ifndef SELECTIVBENCH_TEST_PATH_PLAIN_H
#define SELECTIVBENCH_TEST_PATH_PLAIN_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/nn.h"

/* ---- the plain form: explicit Householder products ------------------------------------------ */

/* o[B, T, H, Dh] from q, k, v, w [B, T, H, Dh] and beta [B, T, H]: for each query i the
 * matrix M = H_i H_{i-1} ... H_{j+1} is built as a Dh x Dh product (M <- M H_j after key j),
 * Z_ij = q_i^T M k_j / sqrt(Dh), then a causal softmax times V, all in double. */
static void path_plain(const real *q, const real *k, const real *v, const real *w, const real *beta,
                       int B, int T, int H, int Dh, double *o)
{
    const int ld = H * Dh;
    double *M = malloc((size_t)Dh * Dh * sizeof *M), *Hs = malloc((size_t)Dh * Dh * sizeof *Hs);
    double *tmp = malloc((size_t)Dh * Dh * sizeof *tmp), *z = malloc((size_t)T * sizeof *z);
    if (!(M && Hs && tmp && z))
        abort();
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                const size_t qi = ((size_t)b * T + i) * ld + (size_t)h * Dh;
                for (int r = 0; r < Dh * Dh; r++)
                    M[r] = r / Dh == r % Dh;
                double mx = -(double)INFINITY;
                for (int j = i; j >= 0; j--) {
                    const size_t kj = ((size_t)b * T + j) * ld + (size_t)h * Dh;
                    double s = 0;
                    for (int r = 0; r < Dh; r++)
                        for (int c = 0; c < Dh; c++)
                            s += (double)q[qi + r] * M[r * Dh + c] * (double)k[kj + c];
                    z[j] = s / sqrt((double)Dh);
                    mx = fmax(mx, z[j]);
                    /* M <- M (I - beta_j w_j w_j^T) */
                    const double bj = (double)beta[((size_t)b * T + j) * H + h];
                    for (int r = 0; r < Dh; r++)
                        for (int c = 0; c < Dh; c++)
                            Hs[r * Dh + c] = (r == c) - bj * (double)w[kj + r] * (double)w[kj + c];
                    for (int r = 0; r < Dh; r++)
                        for (int c = 0; c < Dh; c++) {
                            double acc = 0;
                            for (int e = 0; e < Dh; e++)
                                acc += M[r * Dh + e] * Hs[e * Dh + c];
                            tmp[r * Dh + c] = acc;
                        }
                    memcpy(M, tmp, (size_t)Dh * Dh * sizeof *M);
                }
                double sum = 0;
                for (int j = 0; j <= i; j++)
                    sum += exp(z[j] - mx);
                for (int e = 0; e < Dh; e++) {
                    double acc = 0;
                    for (int j = 0; j <= i; j++)
                        acc += exp(z[j] - mx) / sum *
                               (double)v[((size_t)b * T + j) * ld + (size_t)h * Dh + e];
                    o[qi + e] = acc;
                }
            }
    free(M), free(Hs), free(tmp), free(z);
}

#endif
