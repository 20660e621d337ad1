/* ssm_math.h - scalar helpers shared by the state-space kernels (private to src/nn/ops).
 *
 * ssm_exp is the exponential the scans call E*N times per frame. In the float build it is
 * a branch-free Cephes-style expf (range reduction by ln 2 in two parts, a degree-6
 * polynomial, 2^k by exponent bits; about 2 ulp) that the compiler vectorises inside
 * `omp simd` loops; libm's expf would be called once per element. Arguments below -87
 * give 0 (every decay exponent in these kernels is <= 0). In the double build (gradient
 * checks) it is libm's exp. */
#ifndef SB_SSM_MATH_H
#define SB_SSM_MATH_H

#include <stdint.h>
#include <string.h>
#include <tgmath.h>

#include "selectivbench/nn.h"

#ifdef SB_REAL_DOUBLE
static inline real ssm_exp(real x)
{
    return exp(x);
}
#else
static inline float ssm_exp(float x)
{
    float xc = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    /* k = round(x / ln 2) by the 1.5 * 2^23 trick (exact in round-to-nearest) */
    float k = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - k * 0.693359375f;
    r = r - k * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)k + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x < -87.0f ? 0.0f : p * scale;
}
#endif

static inline real ssm_sigmoid(real x)
{
    return 1 / (1 + exp(-x));
}

/* softplus with PyTorch's threshold: x above 20 passes through */
static inline real ssm_softplus(real x)
{
    return x > 20 ? x : log1p(exp(x));
}

/* d softplus / dx */
static inline real ssm_softplus_grad(real x)
{
    return x > 20 ? 1 : ssm_sigmoid(x);
}

#endif
