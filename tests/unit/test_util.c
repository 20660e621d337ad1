/* test_util.c - helpers shared by the unit tests (see test_util.h). */
#include "test_util.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

json_t *test_load_json(const char *relpath)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", SB_TEST_DATA_DIR, relpath);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (root == NULL)
        fail_msg("cannot load %s: %s (line %d)", path, jerr.text, jerr.line);
    return root;
}

sb_u128 test_parse_u128(const char *s)
{
    sb_u128 v = 0;
    for (const char *p = s; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            fail_msg("'%s' is not a decimal integer", s);
        v = v * 10u + (sb_u128)(*p - '0');
    }
    return v;
}

uint64_t test_json_u64(const json_t *v)
{
    if (json_is_string(v))
        return (uint64_t)test_parse_u128(json_string_value(v));
    if (json_is_integer(v))
        return (uint64_t)json_integer_value(v);
    fail_msg("expected an integer");
    return 0;
}

real *test_random_matrix(size_t n, uint64_t seed)
{
    real *m = malloc(n * sizeof *m);
    for (size_t i = 0; m != NULL && i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        m[i] = (real)((double)(seed >> 40) / (double)(1ULL << 24) - 0.5);
    }
    return m;
}

double test_max_rel_diff(const real *a, const real *b, size_t n)
{
    double scale = 0, worst = 0;
    for (size_t i = 0; i < n; i++)
        scale = fmax(scale, fabs((double)b[i]));
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= worst))
            worst = d; /* NaN-safe: a NaN difference becomes the worst */
    }
    return scale > 0 ? worst / scale : worst;
}

sb_tensor *test_time_slice(sb_graph *g, const sb_tensor *x, int t0, int len)
{
    const int B = x->shape[0], T = x->shape[1], W = x->shape[2];
    int shape[3] = {B, len, W};
    sb_tensor *y = sb_tensor_new(g, 3, shape);
    for (int b = 0; b < B; b++)
        memcpy(y->data + (size_t)b * len * W, x->data + ((size_t)b * T + t0) * W,
               (size_t)len * W * sizeof(real));
    return y;
}

int test_remove_dir(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}
