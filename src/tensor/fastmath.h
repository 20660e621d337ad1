/*
 * fastmath.h - exp, sigmoid and tanh for the hot loops (softmax, gates, activations).
 *
 * In the float build these are branch-free polynomial versions that the compiler turns
 * into vector code (glibc's expf is a function call per element and dominated the
 * attention and cross-entropy loops). Accuracy: relative error below 2 ulp of float over
 * the range; inputs below -87.3 give 0 (below float's smallest normal), above 88 give
 * +inf (exp(88) = 1.7e38: the top half-octave of float is given up so that 2^n stays a
 * normal number), NaN gives NaN; no input (NaN, infinities, huge or denormal values)
 * reaches undefined behaviour. In the double build (gradient checks) they are libm's exact
 * functions, so the checks measure the derivatives, not the approximation.
 */
#ifndef SELECTIVBENCH_FASTMATH_H
#define SELECTIVBENCH_FASTMATH_H

#include <stdint.h>
#include <string.h>
#include <tgmath.h>

#include "tensor/nn.h"

#ifdef SB_REAL_DOUBLE

static inline real sb_fexp(real x)
{
    return exp(x);
}

#else

/* exp(x) = 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 in [-ln2/2, ln2/2], with
 * ln 2 split in two parts so that r is exact, and exp(r) a degree-6 minimax polynomial
 * (Cephes expf). 2^n is built directly in the exponent bits. */
static inline float sb_fexp(float x)
{
    const float hi = 88.0f, lo = -87.3365f;
    /* Clamp into [lo, hi] with comparisons that are false for NaN, so NaN becomes hi and n
     * stays in [-126, 127] for every input: converting NaN to an integer, or shifting a
     * negative one, would be undefined behaviour. The same min/max as before for every
     * other input, so results are unchanged. */
    float xc = x < hi ? x : hi;
    xc = xc > lo ? xc : lo;
    float n = __builtin_rintf(xc * 1.44269504088896341f);
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float r2 = r * r;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r2 + r + 1.0f;
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23; /* the biased exponent, 1..254 */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float y = p * scale;
    /* the clamps above keep n in range; restore the limits and NaN */
    y = x > hi ? __builtin_inff() : y;
    y = x < lo ? 0.0f : y;
    return x != x ? x : y;
}

#endif

/* Reductions with 8 running partial results combined in a fixed order: the compiler can
 * vectorise them (no reassociation needed) and the result does not depend on threads. */
static inline real sb_vmax(const real *x, int n)
{
    real acc[8];
    int i = 0;
    for (int k = 0; k < 8; k++)
        acc[k] = n > 0 ? x[0] : 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            acc[k] = x[i + k] > acc[k] ? x[i + k] : acc[k];
    real m = acc[0];
    for (int k = 1; k < 8; k++)
        m = acc[k] > m ? acc[k] : m;
    for (; i < n; i++)
        m = x[i] > m ? x[i] : m;
    return m;
}

static inline real sb_vsum(const real *x, int n)
{
    real acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            acc[k] += x[i + k];
    real s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; i++)
        s += x[i];
    return s;
}

/* x[i] = exp(x[i] - shift) for i < n; returns the sum of the results. */
static inline real sb_vexp_shift(real *x, int n, real shift)
{
    for (int i = 0; i < n; i++)
        x[i] = sb_fexp(x[i] - shift);
    return sb_vsum(x, n);
}

/* 1 / (1 + exp(-x)) */
static inline real sb_fsigmoid(real x)
{
    return 1 / (1 + sb_fexp(-x));
}

/* tanh(x) = 1 - 2 / (exp(2x) + 1) */
static inline real sb_ftanh(real x)
{
    return 1 - 2 / (sb_fexp(2 * x) + 1);
}

#endif
