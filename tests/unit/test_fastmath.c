/* test_fastmath.c - the vectorisable exp against libm, over float's whole useful range. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exp_accuracy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
