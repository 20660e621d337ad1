/* test_gemm_env.c - $SB_TEST_GEMM selects the GEMM engine (test_gemm_env.h). */
#include "test_gemm_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/gemm_engine.h"

sb_gemm_kind test_gemm_engine(void)
{
    const char *name = getenv("SB_TEST_GEMM");
    if (name == NULL)
        return SB_GEMM_AUTO;
    if (strcmp(name, "onednn") == 0)
        return sb_gemm_onednn_available() ? SB_GEMM_ONEDNN : SB_GEMM_OPENBLAS;
    return SB_GEMM_OPENBLAS;
}

/* Runs before main: a test cannot forget it. A name other than the two engines stops the
 * test (a typo in CMakeLists.txt must not pass silently as OpenBLAS). */
__attribute__((constructor)) static void test_gemm_from_env(void)
{
    const char *name = getenv("SB_TEST_GEMM");
    if (name == NULL)
        return;
    if (strcmp(name, "onednn") != 0 && strcmp(name, "openblas") != 0) {
        fprintf(stderr, "SB_TEST_GEMM=%s: use openblas or onednn\n", name);
        exit(2);
    }
    sb_error err = {0};
    if (sb_gemm_engine_set(test_gemm_engine(), 1, &err) != SB_OK) {
        fprintf(stderr, "SB_TEST_GEMM=%s: %s\n", name, err.msg);
        exit(2);
    }
}
