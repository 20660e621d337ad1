/*
 * fuzz_sweep.c - libFuzzer target for the sweep-file reader (sb_sweep_load_text,
 * src/exp/sweep.c) and what the sweep executor does with an accepted file: the grid's size,
 * the parameter check, and for runs 0..3 (only: a huge grid must not make one input slow)
 * the run's configuration, its hash and check, and its train flags. It checks that the flags
 * of a run hold each parameter's value as "--name=value" and that sb_sweep_run_matches
 * agrees with sb_sweep_value_index.
 */
#include <stdlib.h>
#include <string.h>

#include "config/run_config.h"
#include "exp/sweep.h"
#include "exp/sweep_exec.h"
#include "fuzz_common.h"
#include "train/run_setup.h"

#define RUNS_CHECKED 4

/* Whether argv[0..argc-1] has the word "--name=value". */
static int has_flag(char **argv, int argc, const char *name, const char *value)
{
    size_t n = strlen(name), v = strlen(value);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) == 0 && strncmp(a + 2, name, n) == 0 && a[2 + n] == '=' &&
            strlen(a + 3 + n) == v && strcmp(a + 3 + n, value) == 0)
            return 1;
    }
    return 0;
}

static void check_run(const sb_sweep *s, int64_t k)
{
    sb_error err = {0};
    sb_run_config cfg;
    if (sb_sweep_run_config(s, k, &cfg, &err) == SB_OK) {
        char hash[17];
        sb_run_config_hash(&cfg, 0, hash);
        fuzz_check(strlen(hash) == 16, "a run hash is not 16 digits");
        (void)sb_run_config_check(&cfg, &err);
    }
    char **argv = NULL;
    int argc = 0;
    if (sb_sweep_run_args(s, k, &argv, &argc, &err) != SB_OK)
        return;
    fuzz_check(argv[argc] == NULL, "the run's flags are not NULL-terminated");
    for (int p = 0; p < s->n_params; p++) {
        const sb_sweep_param *q = &s->params[p];
        int v = sb_sweep_value_index(s, k, p);
        fuzz_check(v >= 0 && v < q->n_values, "a value index is outside the parameter's values");
        fuzz_check(has_flag(argv, argc, q->name, q->values[v]),
                   "a run's flags lack one of its parameters");
        fuzz_check(sb_sweep_run_matches(s, k, q->name, q->values[v]),
                   "sb_sweep_run_matches disagrees with the run's value");
    }
    sb_sweep_args_free(argv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sb_sweep *s = NULL;
    sb_error err = {0};
    if (sb_sweep_load_text("fuzz.yaml", (const char *)data, size, &s, &err) != SB_OK)
        return 0;
    int64_t n_runs = sb_sweep_count(s);
    fuzz_check(n_runs >= 1, "an accepted grid has no runs");
    (void)sb_sweep_check_params(s, &err);
    for (int64_t k = 0; k < n_runs && k < RUNS_CHECKED; k++)
        check_run(s, k);
    sb_sweep_free(s);
    return 0;
}
