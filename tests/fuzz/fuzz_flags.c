/*
 * fuzz_flags.c - libFuzzer target for the train command's flags: the input, split on NUL
 * or newline, is the argument list after `selectivbench train`. It goes through what
 * `train` does before it trains (src/cli/cmd_train.c): the flag table of run_options.c and
 * train's own flags, sb_options_parse (src/cli/options.c: the key table's sb_config_set_key
 * for every key) and sb_config_check (ranges, the checks across keys, the model registry).
 * For a configuration train would start, it checks the round trips the results database
 * and the sweeps rely on: the canonical JSON reads back with the same run and training
 * hashes, and every key's value as sb_config_get_key writes it sets a copy to the same
 * configuration (a flag written back is the same flag).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/options.h"
#include "cli/run_options.h"
#include "fuzz_common.h"
#include "selectivbench/selectivbench.h"

#define MAX_ARGS 256

/* Splits text[0..size-1] in place at NUL and newline into argv[first..]; returns argc. */
static int split_args(char *text, size_t size, char **argv, int first)
{
    int argc = first;
    char *start = text;
    for (size_t i = 0; i <= size && argc < MAX_ARGS; i++) {
        if (i == size || text[i] == '\0' || text[i] == '\n') {
            text[i] = '\0';
            argv[argc++] = start;
            start = text + i + 1;
        }
    }
    return argc;
}

static int same_hashes(const sb_config *a, const sb_config *b)
{
    char ha[17], hb[17], ta[17], tb[17];
    sb_config_run_hash(a, ha);
    sb_config_run_hash(b, hb);
    sb_config_training_hash(a, ta);
    sb_config_training_hash(b, tb);
    return strcmp(ha, hb) == 0 && strcmp(ta, tb) == 0;
}

/* The JSON of cfg reads back as the same configuration. */
static void check_json_round_trip(const sb_config *cfg)
{
    sb_error err = {0};
    char *json = NULL;
    if (sb_config_to_json(cfg, 0, &json, &err) != SB_OK)
        return;
    sb_config *back = NULL;
    sb_status st = sb_config_from_json(json, &back, &err);
    if (st != SB_OK)
        fprintf(stderr, "%s\n%s\n", json, err.msg);
    fuzz_check(st == SB_OK, "a checked configuration's JSON does not read back");
    fuzz_check(same_hashes(cfg, back), "a configuration's JSON reads back with other hashes");
    sb_config_free(back);
    sb_string_free(json);
}

/* Every key's value, written and set again in table order, gives the same configuration.
 * The no-op keys (train.py's flags without effect here) hold no value: they write "". */
static void check_keys_round_trip(const sb_config *cfg)
{
    sb_error err = {0};
    sb_config *copy = NULL;
    if (sb_config_create(&copy, &err) != SB_OK)
        return;
    for (int i = 0; i < sb_config_key_count(); i++) {
        const char *name = sb_config_key_name(i);
        char value[8192];
        fuzz_check(sb_config_get_key(cfg, name, value, sizeof value, &err) == SB_OK,
                   "a key's value cannot be written");
        if (value[0] == '\0')
            continue;
        sb_status st = sb_config_set_key(copy, name, value, &err);
        if (st != SB_OK)
            fprintf(stderr, "--%s %s: %s\n", name, value, err.msg);
        fuzz_check(st == SB_OK, "a key's written value does not set it again");
    }
    fuzz_check(same_hashes(cfg, copy), "the keys written and set again give other hashes");
    sb_config_free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    char **argv = calloc(MAX_ARGS + 1, sizeof *argv);
    if (text == NULL || argv == NULL) {
        free(text);
        free(argv);
        return 0;
    }
    argv[0] = "selectivbench";
    argv[1] = "train";
    int argc = size > 0 ? split_args(text, size, argv, 2) : 2;

    /* the flags of cmd_train.c's train_with_flags */
    sb_run_flags rf;
    sb_option opts[SB_RUN_MAX_OPTIONS];
    int n = 0;
    sb_error err = {0};
    if (sb_run_options_add(&rf, SB_KEYS_TRAIN, opts, &n, &err) == SB_OK) {
        int help = 0, n_positional = 0;
        sb_status st =
            sb_options_parse(opts, n, argc, argv, 2, NULL, 0, &n_positional, &help, &err);
        if (st == SB_OK && !help && sb_config_check(rf.config, &err) == SB_OK) {
            check_json_round_trip(rf.config);
            check_keys_round_trip(rf.config);
        }
    }
    sb_run_flags_free(&rf);
    free(argv);
    free(text);
    return 0;
}
