/* test_fastmath.c - the vectorisable exps (tensor/fastmath.h, and the kernels' own in
 * ops/ssm_math.h and ops/fla_kernels.h) against libm, over float's whole useful range, and
 * their limits for every kind of input: NaN, infinities, huge and denormal values (these
 * run under the sanitizer build too, where any undefined behaviour aborts). */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ops/fla_kernels.h"
#include "ops/ssm_math.h"
#include "tensor/fastmath.h"

/* distance in units in the last place between two positive floats */
static int64_t ulp_distance(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, sizeof ia);
    memcpy(&ib, &b, sizeof ib);
    return ia > ib ? (int64_t)ia - ib : (int64_t)ib - ia;
}

static void test_exp_accuracy(void **state)
{
    (void)state;
    int64_t worst = 0;
    float worst_x = 0;
    for (float x = -87.0f; x <= 88.0f; x += 0.000731f) {
        float want = (float)exp((double)x);
        float got = sb_fexp(x);
        int64_t d = ulp_distance(got, want);
        if (d > worst) {
            worst = d;
            worst_x = x;
        }
    }
    print_message("sb_fexp: worst error %lld ulp at %g\n", (long long)worst, (double)worst_x);
    assert_true(worst <= 2);
    /* limits */
    assert_true(sb_fexp(0.0f) == 1.0f);
    assert_true(sb_fexp(-100.0f) == 0.0f);
    assert_true(isinf(sb_fexp(100.0f)));
    assert_true(isnan(sb_fexp(NAN)));
    assert_true(sb_fexp(-INFINITY) == 0.0f);
    assert_true(fabsf(sb_fsigmoid(0.0f) - 0.5f) < 1e-7f);
    assert_true(fabsf(sb_ftanh(0.5f) - tanhf(0.5f)) < 2e-7f);
    assert_true(sb_ftanh(50.0f) == 1.0f && sb_ftanh(-50.0f) == -1.0f);
}

/* The limits, one input at a time: what exp gives and what it must give. */
static void test_exp_special_inputs(void **state)
{
    (void)state;
    const float denormal = 1e-40f, above_hi = nextafterf(88.0f, INFINITY);
    const float below_lo = nextafterf(-87.3365f, -INFINITY);
    /* NaN in, NaN out (either sign; the sign of the NaN is not promised) */
    assert_true(isnan(sb_fexp(NAN)));
    assert_true(isnan(sb_fexp(-NAN)));
    /* +inf and everything above 88 (huge values included): +inf */
    const float overflow[] = {INFINITY, FLT_MAX, 1e30f, 1e10f, 1000.0f, 89.0f, above_hi};
    for (size_t i = 0; i < sizeof overflow / sizeof *overflow; i++) {
        float y = sb_fexp(overflow[i]);
        if (!(isinf(y) && y > 0))
            fail_msg("exp(%g) = %g, expected +inf", (double)overflow[i], (double)y);
    }
    /* -inf and everything below -87.3365: 0 */
    const float underflow[] = {-INFINITY, -FLT_MAX, -1e30f, -1e10f, -1000.0f, -104.0f, below_lo};
    for (size_t i = 0; i < sizeof underflow / sizeof *underflow; i++) {
        float y = sb_fexp(underflow[i]);
        if (!(y == 0.0f))
            fail_msg("exp(%g) = %g, expected 0", (double)underflow[i], (double)y);
    }
    /* the clamp edges themselves are finite and accurate */
    assert_true(isfinite(sb_fexp(88.0f)) && sb_fexp(88.0f) > 1e38f);
    assert_true(ulp_distance(sb_fexp(88.0f), (float)exp(88.0)) <= 2);
    assert_true(sb_fexp(-87.3365f) > 0.0f && sb_fexp(-87.3365f) < 1.2e-38f);
    /* zeros, denormals and the smallest normal: exactly 1 */
    const float tiny[] = {0.0f,         -0.0f,         denormal, -denormal,
                          FLT_TRUE_MIN, -FLT_TRUE_MIN, FLT_MIN,  -FLT_MIN};
    for (size_t i = 0; i < sizeof tiny / sizeof *tiny; i++)
        if (!(sb_fexp(tiny[i]) == 1.0f))
            fail_msg("exp(%g) = %.9g, expected 1", (double)tiny[i], (double)sb_fexp(tiny[i]));
    /* sigmoid and tanh through exp */
    assert_true(isnan(sb_fsigmoid(NAN)) && isnan(sb_ftanh(NAN)));
    assert_true(sb_fsigmoid(INFINITY) == 1.0f && sb_fsigmoid(-INFINITY) == 0.0f);
    assert_true(sb_fsigmoid(FLT_MAX) == 1.0f && sb_fsigmoid(-FLT_MAX) == 0.0f);
    assert_true(sb_ftanh(INFINITY) == 1.0f && sb_ftanh(-INFINITY) == -1.0f);
    assert_true(sb_ftanh(FLT_MAX) == 1.0f && sb_ftanh(-FLT_MAX) == -1.0f);
    assert_true(sb_ftanh(denormal) == 0.0f || fabsf(sb_ftanh(denormal)) < 1e-30f);
}

/* The vectorised softmax loop (what attention and the loss run) over a row that mixes NaN,
 * infinities, huge and ordinary values, longer than a vector so every lane sees one. */
static void test_exp_shift_mixed_row(void **state)
{
    (void)state;
    enum { N = 37 };
    const float kinds[] = {NAN,    INFINITY, -INFINITY, FLT_MAX, -FLT_MAX, 1e30f,
                           -1e30f, 1e-40f,   0.5f,      -3.0f,   88.5f,    -90.0f};
    const int n_kinds = (int)(sizeof kinds / sizeof *kinds);
    float x[N], in[N];
    for (int i = 0; i < N; i++)
        in[i] = x[i] = kinds[i % n_kinds];
    float sum = sb_vexp_shift(x, N, 0.0f);
    assert_true(isnan(sum)); /* a NaN in the row makes the sum NaN */
    for (int i = 0; i < N; i++) {
        float want = isnan(in[i])        ? NAN
                     : in[i] > 88.0f     ? INFINITY
                     : in[i] < -87.3365f ? 0.0f
                                         : (float)exp((double)in[i]);
        int ok = isnan(want)   ? isnan(x[i])
                 : isinf(want) ? x[i] == want
                               : ulp_distance(x[i], want) <= 2;
        if (!ok)
            fail_msg("row[%d]: exp(%g) = %g, expected %g", i, (double)in[i], (double)x[i],
                     (double)want);
    }
    /* a shift that is itself NaN or infinite (a row of -inf has max -inf: -inf - -inf) */
    for (int i = 0; i < N; i++)
        x[i] = -INFINITY;
    sum = sb_vexp_shift(x, N, -INFINITY);
    assert_true(isnan(sum));
    for (int i = 0; i < N; i++)
        x[i] = 1.0f;
    assert_true(isnan(sb_vexp_shift(x, N, NAN)));
    assert_true(isnan(sb_vmax((const float[]){NAN, NAN, NAN}, 3)));
}

/* The kernels' own exps (the scans' ssm_exp, the chunked recurrences' and attention's
 * fla_exp): accurate over the range, NaN in NaN out, the clamps' values for infinities and
 * huge values, 1 for denormals; and none of it undefined behaviour (sanitizer build). */
static void test_kernel_exps_special_inputs(void **state)
{
    (void)state;
    int64_t worst = 0;
    for (float x = -86.5f; x <= 88.0f; x += 0.00731f) {
        float want = (float)exp((double)x);
        int64_t ds = ulp_distance(ssm_exp(x), want), df = ulp_distance(fla_exp(x), want);
        worst = ds > worst ? ds : worst;
        worst = df > worst ? df : worst;
    }
    assert_true(worst <= 2);
    const float exp88 = ssm_exp(88.0f), exp_m87 = ssm_exp(-87.0f);
    assert_true(isfinite(exp88) && exp88 > 1e38f && exp_m87 > 0 && exp_m87 < 1.7e-38f);
    assert_true(isnan(ssm_exp(NAN)) && isnan(ssm_exp(-NAN)));
    assert_true(isnan(fla_exp(NAN)) && isnan(fla_exp(-NAN)));
    assert_true(isnan(ssm_sigmoid(NAN)));
    const float high[] = {INFINITY, FLT_MAX, 1e30f, 89.0f};
    for (size_t i = 0; i < sizeof high / sizeof *high; i++) {
        assert_true(ssm_exp(high[i]) == exp88); /* clamped at 88 */
        assert_true(fla_exp(high[i]) == fla_exp(88.0f));
        assert_true(ssm_sigmoid(high[i]) == 1.0f);
    }
    const float low[] = {-INFINITY, -FLT_MAX, -1e30f, -88.0f};
    for (size_t i = 0; i < sizeof low / sizeof *low; i++) {
        assert_true(ssm_exp(low[i]) == exp_m87); /* clamped at -87, still normal */
        assert_true(fla_exp(low[i]) == 0.0f);
        assert_true(ssm_sigmoid(low[i]) >= 0.0f && ssm_sigmoid(low[i]) < 1e-34f);
    }
    const float tiny[] = {0.0f, -0.0f, 1e-40f, -1e-40f, FLT_MIN};
    for (size_t i = 0; i < sizeof tiny / sizeof *tiny; i++)
        assert_true(ssm_exp(tiny[i]) == 1.0f && fla_exp(tiny[i]) == 1.0f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exp_accuracy),
        cmocka_unit_test(test_exp_special_inputs),
        cmocka_unit_test(test_exp_shift_mixed_row),
        cmocka_unit_test(test_kernel_exps_special_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
