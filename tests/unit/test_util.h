/* test_util.h - helpers shared by the unit tests: reference files and comparisons. */
#ifndef SELECTIVBENCH_TEST_UTIL_H
#define SELECTIVBENCH_TEST_UTIL_H

#include <jansson.h>
#include <stdint.h>

#include "core/rng.h"
#include "tensor/nn.h"

/* Loads tests/data/<relpath> as JSON; fails the test if it cannot. */
json_t *test_load_json(const char *relpath);

/* Parses a decimal string into an unsigned 128-bit value. */
sb_u128 test_parse_u128(const char *s);

/* The integer value of a JSON integer or decimal string. */
uint64_t test_json_u64(const json_t *v);

/* The largest |a_i - b_i| over the largest |b_i| (the absolute difference when b is all
 * zero); a NaN difference makes the result NaN-safe large (it wins the maximum). */
double test_max_rel_diff(const real *a, const real *b, size_t n);

/* A new array of n values uniform in [-0.5, 0.5) from an LCG seeded with seed (free()). */
real *test_random_matrix(size_t n, uint64_t seed);

/* Frames [t0, t0 + len) of x [B, T, W] as a new tensor of g. */
sb_tensor *test_time_slice(sb_graph *g, const sb_tensor *x, int t0, int len);

/* Removes the temporary folder dir and everything in it (rm -rf); 0 on success. */
int test_remove_dir(const char *dir);

#endif
