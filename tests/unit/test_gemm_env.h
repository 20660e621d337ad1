/* test_gemm_env.h - the GEMM engine a test binary runs under (docs/performance.md).
 *
 * $SB_TEST_GEMM ("openblas" or "onednn") sets the engine of the whole process before main,
 * in deterministic mode (1 and 2 threads must still agree); tests/CMakeLists.txt registers
 * the float correctness tests a second time with SB_TEST_GEMM=onednn. Unset, the process
 * keeps the library's default (OpenBLAS). In the double build oneDNN does not apply and the
 * variable is ignored. */
#ifndef SELECTIVBENCH_TEST_GEMM_ENV_H
#define SELECTIVBENCH_TEST_GEMM_ENV_H

#include "config/run_config.h"

/* The engine $SB_TEST_GEMM names; SB_GEMM_AUTO (the run configuration's default) when it is
 * unset. For tests that train through sb_train, which sets the engine from the config. */
sb_gemm_kind test_gemm_engine(void);

#endif
