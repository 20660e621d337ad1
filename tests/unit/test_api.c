/*
 * test_api.c - the public API (include/selectivbench/selectivbench.h) as a program sees it:
 * this file includes nothing of src/. The version; every error path returns its status and a
 * message naming the problem, never crashes (bad key, bad value, bad JSON, unknown model,
 * missing files, NULL arguments, indices out of range); the key table round-trips; a batch's
 * layout; a sweep's run; the results API on an empty database.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "selectivbench/selectivbench.h"

_Static_assert(SB_OK == 0 && SB_ERR_DIVERGED == 5, "the public status values");

/* The call failed with `status` and its message contains `needle`. */
static void assert_error(sb_status got, const sb_error *err, sb_status status, const char *needle)
{
    if (got != status || err->status != status || strstr(err->msg, needle) == NULL)
        fail_msg("expected %s with '%s' in the message; got %s: '%s'", sb_status_name(status),
                 needle, sb_status_name(got), err->msg);
}

static void test_version(void **state)
{
    (void)state;
    char expected[32];
    snprintf(expected, sizeof expected, "%d.%d.%d", SB_VERSION_MAJOR, SB_VERSION_MINOR,
             SB_VERSION_PATCH);
    assert_string_equal(SB_VERSION_STRING, expected);
    assert_string_equal(sb_version(), SB_VERSION_STRING);
    assert_string_equal(sb_version(), SB_VERSION); /* the project's version (CMakeLists.txt) */
    /* the structure sizes a binding checks its mirrors against */
    assert_int_equal(sb_api_struct_size("sb_error"), sizeof(sb_error));
    assert_int_equal(sb_api_struct_size("sb_result_row"), sizeof(sb_result_row));
    assert_int_equal(sb_api_struct_size("sb_train_settings"), sizeof(sb_train_settings));
    /* the settings hold callbacks, user pointers and the world's two ints, nothing else:
     * every other setting is a key (any new field breaks this sum) */
    typedef void (*any_fn)(void);
    assert_int_equal(sizeof(sb_train_settings),
                     7 * sizeof(any_fn) + 2 * sizeof(void *) + 2 * sizeof(int));
    assert_int_equal(offsetof(sb_train_settings, progress), 0);
    assert_int_equal(offsetof(sb_train_settings, world_rank), 5 * sizeof(any_fn) + sizeof(void *));
    assert_int_equal(sizeof(sb_plan_settings), sizeof(any_fn) + sizeof(void *));
    assert_int_equal(sizeof(sb_sweep_settings), 2 * sizeof(any_fn) + sizeof(void *));
    assert_int_equal(sb_api_struct_size("sb_external_run"), sizeof(sb_external_run));
    assert_int_equal(sb_api_struct_size("sb_report_outcome"), sizeof(sb_report_outcome));
    assert_int_equal(sb_api_struct_size("sb_no_such_struct"), 0);
    assert_int_equal(sb_api_struct_size(NULL), 0);
    assert_string_equal(sb_status_name(SB_ERR_IO), "i/o error");
    assert_string_equal(sb_status_name((sb_status)99), "unknown status");
    assert_string_equal(sb_error_message(NULL), "");
}

/* The run statuses and sweep outcomes: one name table each, names that parse back, the
 * list `results --status` takes in the enum's order, nothing named outside the range. */
static void test_status_names(void **state)
{
    (void)state;
    const char *const *listed = sb_results_statuses();
    int n = 0;
    for (int s = SB_RUN_RUNNING; s <= SB_RUN_INTERRUPTED; s++, n++) {
        const char *name = sb_run_status_name((sb_run_status)s);
        assert_true(name[0] != '\0');
        assert_non_null(listed[n]);
        assert_string_equal(listed[n], name);
        sb_run_status back = SB_RUN_NONE;
        sb_error err = {0};
        assert_int_equal(sb_run_status_parse(name, &back, &err), SB_OK);
        assert_int_equal(back, s);
    }
    assert_null(listed[n]);
    assert_int_equal(n, 5);
    assert_string_equal(sb_run_status_name(SB_RUN_FINISHED), "finished");
    assert_string_equal(sb_run_status_name(SB_RUN_NONE), "");
    assert_string_equal(sb_run_status_name((sb_run_status)6), "");
    assert_string_equal(sb_run_status_name((sb_run_status)-1), "");
    sb_run_status out = SB_RUN_FINISHED;
    sb_error err = {0};
    assert_error(sb_run_status_parse("done", &out, &err), &err, SB_ERR_INVALID,
                 "unknown run status 'done'");
    assert_error(sb_run_status_parse("", &out, &err), &err, SB_ERR_INVALID, "give running");
    assert_error(sb_run_status_parse(NULL, &out, &err), &err, SB_ERR_INVALID, "(null)");
    assert_int_equal(out, SB_RUN_FINISHED); /* unchanged by a refusal */

    const char *seen[8] = {0};
    for (int o = SB_SWEEP_DONE; o <= SB_SWEEP_INTERRUPTED; o++) {
        seen[o] = sb_sweep_outcome_name((sb_sweep_outcome)o);
        assert_true(seen[o][0] != '\0');
        for (int p = SB_SWEEP_DONE; p < o; p++)
            assert_string_not_equal(seen[p], seen[o]);
    }
    assert_string_equal(sb_sweep_outcome_name(SB_SWEEP_DONE), "done");
    assert_string_equal(sb_sweep_outcome_name(SB_SWEEP_INTERRUPTED), "interrupted");
    assert_string_equal(sb_sweep_outcome_name(SB_SWEEP_NO_OUTCOME), "");
    assert_string_equal(sb_sweep_outcome_name((sb_sweep_outcome)99), "");
}

static void test_config_errors(void **state)
{
    (void)state;
    sb_error err = {0};
    sb_config *cfg = NULL;
    assert_int_equal(sb_config_create(&cfg, &err), SB_OK);
    assert_error(sb_config_set_key(cfg, "no_such_key", "1", &err), &err, SB_ERR_INVALID,
                 "no_such_key");
    assert_error(sb_config_set_key(cfg, "layers", "two", &err), &err, SB_ERR_INVALID, "layers");
    assert_error(sb_config_set_key(cfg, "layers", "0", &err), &err, SB_ERR_INVALID, "layers");
    assert_error(sb_config_set_key(cfg, "optimizer", "sgd", &err), &err, SB_ERR_INVALID, "adam");
    assert_error(sb_config_set_key(cfg, "layers", NULL, &err), &err, SB_ERR_INVALID, "value");
    assert_error(sb_config_set_key(NULL, "layers", "2", &err), &err, SB_ERR_INVALID, "cfg");
    char buf[64];
    assert_error(sb_config_get_key(cfg, "no_such_key", buf, sizeof buf, &err), &err, SB_ERR_INVALID,
                 "no_such_key");
    assert_error(sb_config_get_key(cfg, "model", buf, 3, &err), &err, SB_ERR_INVALID, "model");
    /* an unknown model passes set (a string) and is refused by the full check */
    assert_int_equal(sb_config_set_key(cfg, "model", "no_such_model", &err), SB_OK);
    assert_error(sb_config_check(cfg, &err), &err, SB_ERR_INVALID, "no_such_model");
    uint64_t params = 0;
    assert_error(sb_config_param_count(cfg, &params, &err), &err, SB_ERR_INVALID, "no_such_model");
    sb_train_outcome out;
    assert_error(sb_train_config(cfg, NULL, &out, &err), &err, SB_ERR_INVALID, "no_such_model");
    assert_int_equal(out.status, SB_RUN_FAILED);
    assert_non_null(strstr(out.reason, "no_such_model"));
    /* without err the calls still answer */
    assert_int_equal(sb_config_set_key(cfg, "no_such_key", "1", NULL), SB_ERR_INVALID);
    sb_config_free(cfg);
    sb_config_free(NULL);

    sb_config *parsed = (sb_config *)&err; /* must be reset to NULL on failure */
    assert_error(sb_config_from_json("{\"layers\": ", &parsed, &err), &err, SB_ERR_INVALID, "JSON");
    assert_null(parsed);
    assert_error(sb_config_from_json("{\"no_such_key\": 1}", &parsed, &err), &err, SB_ERR_INVALID,
                 "no_such_key");
    assert_error(sb_config_from_json("{\"layers\": \"two\"}", &parsed, &err), &err, SB_ERR_INVALID,
                 "layers");
    assert_error(sb_config_from_json(NULL, &parsed, &err), &err, SB_ERR_INVALID, "json");
}

/* Every key: its value read back sets the same configuration (and hashes). */
static void test_config_keys(void **state)
{
    (void)state;
    sb_error err = {0};
    sb_config *cfg = NULL, *copy = NULL;
    assert_int_equal(sb_config_create(&cfg, &err), SB_OK);
    int n = sb_config_key_count();
    assert_true(n > 40);
    assert_null(sb_config_key_name(-1));
    assert_null(sb_config_key_name(n));
    assert_null(sb_config_key_type(n));
    assert_int_equal(sb_config_key_hashes(n), 0);
    int in_training = 0, noops = 0;
    for (int i = 0; i < n; i++) {
        const char *name = sb_config_key_name(i);
        assert_non_null(name);
        assert_non_null(sb_config_key_type(i));
        assert_non_null(sb_config_key_default(i));
        assert_non_null(sb_config_key_help(i));
        in_training += (sb_config_key_hashes(i) & SB_KEY_IN_TRAINING_HASH) != 0;
        noops += sb_config_key_is_noop(i);
        if (sb_config_key_is_noop(i))
            continue;
        char value[256];
        assert_int_equal(sb_config_get_key(cfg, name, value, sizeof value, &err), SB_OK);
        assert_int_equal(sb_config_set_key(cfg, name, value, &err), SB_OK);
    }
    assert_true(in_training > 20);
    assert_true(noops > 5);
    char model[64];
    assert_int_equal(sb_config_get_key(cfg, "model", model, sizeof model, &err), SB_OK);
    assert_string_equal(model, "transformer");

    /* JSON round trip and hashes */
    assert_int_equal(sb_config_set_key(cfg, "layers", "3", &err), SB_OK);
    char *json = NULL;
    assert_int_equal(sb_config_to_json(cfg, 0, &json, &err), SB_OK);
    assert_int_equal(sb_config_from_json(json, &copy, &err), SB_OK);
    sb_string_free(json);
    char h1[17], h2[17], t1[17], t2[17];
    sb_config_run_hash(cfg, h1);
    sb_config_run_hash(copy, h2);
    sb_config_training_hash(cfg, t1);
    sb_config_training_hash(copy, t2);
    assert_string_equal(h1, h2);
    assert_string_equal(t1, t2);
    assert_string_not_equal(h1, t1);
    /* the test settings change the run hash only */
    assert_int_equal(sb_config_set_key(copy, "test_size", "77", &err), SB_OK);
    sb_config_run_hash(copy, h2);
    sb_config_training_hash(copy, t2);
    assert_string_not_equal(h1, h2);
    assert_string_equal(t1, t2);
    sb_config_free(copy);
    assert_int_equal(sb_config_copy(cfg, &copy, &err), SB_OK);
    sb_config_run_hash(copy, h2);
    assert_string_equal(h1, h2);
    sb_config_free(copy);
    sb_config_free(cfg);
}

/* A configuration read back from sb_config_flags's text as `train` reads its flags:
 * "--key value", or a bare switch. */
static sb_config *from_flags(const char *flags)
{
    sb_error err = {0};
    sb_config *cfg = NULL;
    assert_int_equal(sb_config_create(&cfg, &err), SB_OK);
    char *text = strdup(flags), *save = NULL;
    assert_non_null(text);
    char *word = strtok_r(text, " ", &save);
    while (word != NULL) {
        assert_true(strncmp(word, "--", 2) == 0);
        const char *key = word + 2;
        char *value = strtok_r(NULL, " ", &save);
        if (value == NULL || strncmp(value, "--", 2) == 0) { /* a switch */
            if (sb_config_set_key(cfg, key, "True", &err) != SB_OK)
                fail_msg("%s: %s", key, err.msg);
            word = value;
            continue;
        }
        if (value[0] == '\'') { /* quoted: no quote inside in these cases */
            value++;
            value[strlen(value) - 1] = '\0';
        }
        if (sb_config_set_key(cfg, key, value, &err) != SB_OK)
            fail_msg("--%s %s: %s", key, value, err.msg);
        word = strtok_r(NULL, " ", &save);
    }
    free(text);
    return cfg;
}

/* sb_config_flags: the model and the keys off their defaults, read back to the same run hash */
static void test_config_flags(void **state)
{
    (void)state;
    sb_error err = {0};
    sb_config *cfg = NULL;
    assert_int_equal(sb_config_create(&cfg, &err), SB_OK);
    char *flags = NULL;
    assert_int_equal(sb_config_flags(cfg, &flags, &err), SB_OK);
    assert_string_equal(flags, "--model transformer");
    sb_string_free(flags);
    static const char *const settings[][2] = {
        {"model", "gla"},          {"feat_size", "32"},       {"seed", "7"},
        {"early_stop", "True"},    {"warmup_steps", "12"},    {"optimizer", "adamw"},
        {"lr", "0.003"},           {"grammar_scale", "True"}, {"test_dur", "2.5"},
        {"dist_dur", "lognormal"}, {"same_seed", "False"},    {"task_seed", "11"},
    };
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++)
        if (sb_config_set_key(cfg, settings[i][0], settings[i][1], &err) != SB_OK)
            fail_msg("%s: %s", settings[i][0], err.msg);
    assert_int_equal(sb_config_flags(cfg, &flags, &err), SB_OK);
    assert_non_null(strstr(flags, "--model gla "));
    assert_non_null(strstr(flags, " --early_stop ")); /* bare */
    assert_non_null(strstr(flags, " --same_seed False"));
    assert_non_null(strstr(flags, " --task_seed 11"));
    assert_null(strstr(flags, "--dropout")); /* at its default */
    sb_config *back = from_flags(flags);
    char h1[17], h2[17];
    sb_config_run_hash(cfg, h1);
    sb_config_run_hash(back, h2);
    assert_string_equal(h1, h2);
    sb_string_free(flags);
    sb_config_free(back);
    /* with same_seed, the task seed follows the seed: no flag of its own */
    assert_int_equal(sb_config_set_key(cfg, "same_seed", "True", &err), SB_OK);
    assert_int_equal(sb_config_flags(cfg, &flags, &err), SB_OK);
    assert_null(strstr(flags, "--task_seed"));
    back = from_flags(flags);
    sb_config_run_hash(cfg, h1);
    sb_config_run_hash(back, h2);
    assert_string_equal(h1, h2);
    sb_string_free(flags);
    sb_config_free(back);
    assert_int_equal(sb_config_flags(NULL, &flags, &err), SB_ERR_INVALID);
    sb_config_free(cfg);
}

/* sb_experiment_varied_keys: the one "which keys vary" rule of `results` and `serve` */
static void test_varied_keys(void **state)
{
    (void)state;
    const int n_keys = sb_config_key_count();
    unsigned char *varies = calloc((size_t)n_keys, 1);
    assert_non_null(varies);
    /* a key left out is at its default: lr 0.001 written or not is no variation; the model
     * is a column of its own; the task seed follows the seed */
    const char *same[] = {"{\"model\": \"gru\", \"lr\": 0.001, \"seed\": 1, \"task_seed\": 1}",
                          "{\"model\": \"gla\", \"seed\": 2, \"task_seed\": 2}", NULL, "not json"};
    assert_int_equal(sb_experiment_varied_keys(same, 4, varies), 1);
    assert_true(varies[sb_config_key_find("seed")]);
    assert_false(varies[sb_config_key_find("lr")]);
    assert_false(varies[sb_config_key_find("model")]);
    assert_false(varies[sb_config_key_find("task_seed")]);
    /* a task seed of its own varies; grammar_scale's vocab is compared as trained */
    const char *other[] = {"{\"seed\": 1, \"task_seed\": 7, \"lr\": 0.01}",
                           "{\"seed\": 1, \"task_seed\": 1, \"grammar_scale\": true, \"amb\": 4}"};
    assert_int_equal(sb_experiment_varied_keys(other, 2, varies), 6);
    const char *want[] = {"task_seed", "lr", "grammar_scale", "vocab", "amb", "amb_depth"};
    for (int i = 0; i < 6; i++)
        if (!varies[sb_config_key_find(want[i])])
            fail_msg("%s does not vary", want[i]);
    assert_int_equal(sb_experiment_varied_keys(other, 0, varies), 0);
    free(varies);
}

/* did you mean: the one name within two edits, else a unique prefix, else nothing */
static void test_closest_name(void **state)
{
    (void)state;
    const char *const names[] = {"gla", "gru", "mamba", "mamba2", "transformer", "sweep"};
    int n = (int)(sizeof names / sizeof *names);
    assert_string_equal(sb_closest_name("glaa", names, n), "gla"); /* one insertion */
    assert_string_equal(sb_closest_name("tarnsformer", names, n), "transformer"); /* 2 edits */
    assert_string_equal(sb_closest_name("mamb", names, n), "mamba");        /* 1 edit beats 2 */
    assert_string_equal(sb_closest_name("trans", names, n), "transformer"); /* unique prefix */
    assert_string_equal(sb_closest_name("sweeep", names, n), "sweep");
    assert_null(sb_closest_name("gxa", (const char *const[]){"gla", "gra"}, 2)); /* a tie */
    assert_null(sb_closest_name("xyzzy", names, n));                             /* nothing near */
    assert_null(sb_closest_name("mamba", names, n)); /* an exact name needs no suggestion */
    assert_null(sb_closest_name("", names, n));
    assert_null(sb_closest_name(NULL, names, n));
    assert_null(sb_closest_name("gla", NULL, 0));
    /* the library's own errors: a key of the table, a choice of a key */
    sb_config *cfg = NULL;
    sb_error err = {0};
    assert_int_equal(sb_config_create(&cfg, &err), SB_OK);
    assert_error(sb_config_set_key(cfg, "lrr", "1", &err), &err, SB_ERR_INVALID,
                 "unknown flag --lrr; did you mean --lr?");
    assert_error(sb_config_set_key(cfg, "optimizer", "adan", &err), &err, SB_ERR_INVALID,
                 "did you mean 'adam'?");
    sb_config_free(cfg);
}

static void test_models(void **state)
{
    (void)state;
    sb_error err = {0};
    int n = sb_models_count();
    assert_true(n >= 15);
    assert_null(sb_models_name(n));
    sb_model_desc desc;
    assert_error(sb_models_describe(n, &desc, &err), &err, SB_ERR_INVALID, "model index");
    int found_gru = 0;
    for (int i = 0; i < n; i++) {
        assert_int_equal(sb_models_describe(i, &desc, &err), SB_OK);
        assert_string_equal(desc.name, sb_models_name(i));
        assert_non_null(desc.summary);
        for (int a = 0; a < 5; a++)
            assert_non_null(desc.axes[a]);
        assert_non_null(desc.state_formula);
        if (strcmp(desc.name, "gru") == 0) {
            found_gru = 1;
            assert_string_equal(desc.axes[2], "nonlinear dense");
            assert_string_equal(desc.axes[4], "constant");
        }
        if (strcmp(desc.name, "transformer") == 0)
            assert_string_equal(desc.axes[4], "linear in T");
    }
    assert_true(found_gru);
    assert_string_equal(sb_models_axis_name(0), "gate granularity");
    assert_string_equal(sb_models_axis_name(4), "memory growth");
    assert_null(sb_models_axis_name(5));
    assert_null(sb_models_axis_name(-1));
    sb_model_shape shape = {
        .inputs = 41, .classes = 1601, .width = 256, .layers = 8, .d_state = 128};
    uint64_t params = 0;
    double state_floats = -1;
    assert_int_equal(sb_models_size("gru", &shape, &params, &state_floats, &err), SB_OK);
    assert_int_equal(params, 3584321); /* docs/models/README.md */
    assert_true(state_floats == 256);
    assert_error(sb_models_size("no_such_model", &shape, &params, NULL, &err), &err, SB_ERR_INVALID,
                 "no_such_model");
    assert_non_null(strstr(err.msg, "gru")); /* the known models are listed */
    /* a typo names the model it is closest to */
    assert_error(sb_models_size("glaa", &shape, &params, NULL, &err), &err, SB_ERR_INVALID,
                 "unknown --model 'glaa'; did you mean 'gla'? (the models command lists them)");
    shape.width = 0;
    assert_error(sb_models_size("gru", &shape, &params, NULL, &err), &err, SB_ERR_INVALID,
                 "width 0");
}

/* A tiny task's facts and one batch in the documented layout. */
static void test_task_batch(void **state)
{
    (void)state;
    sb_error err = {0};
    sb_config *cfg = NULL;
    assert_int_equal(sb_config_create(&cfg, &err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "amb", "4", &err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "grammar_scale", "True", &err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "train_seqlen_max", "12", &err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "train_gap_max", "0.3", &err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "dataset_size", "100", &err), SB_OK);
    sb_task *task = NULL;
    assert_int_equal(sb_task_from_config(cfg, &task, &err), SB_OK);
    sb_task_facts f;
    sb_task_get_facts(task, &f);
    assert_int_equal(f.inputs, 5); /* vocab = amb + 1 with grammar_scale */
    assert_int_equal(f.ambiguous_letters, 4);
    assert_int_equal(f.states_per_ambiguous_letter, 4);
    assert_true(f.states > f.letters && f.topological_entropy > 0);
    assert_int_equal(f.train_size, 100);
    assert_int_equal(f.train_elements, 12);

    int64_t index[3] = {5, 0, 99};
    sb_batch_shape shape;
    assert_int_equal(sb_task_batch_shape(task, SB_SPLIT_TRAIN, index, 3, &shape, &err), SB_OK);
    assert_int_equal(shape.batch, 3);
    assert_int_equal(shape.inputs, 5);
    assert_int_equal(shape.elements, 12);
    assert_true(shape.frames >= 12);
    /* larger strides than needed: the rest is padding */
    sb_batch_shape big = shape;
    big.frames += 2;
    big.elements += 1;
    size_t BT = (size_t)big.batch * (size_t)big.frames,
           BE = (size_t)big.batch * (size_t)big.elements;
    float *inputs = malloc(BT * (size_t)big.inputs * sizeof *inputs);
    int32_t *targets = malloc(BT * sizeof *targets), *start = malloc(BE * sizeof *start),
            *len = malloc(BE * sizeof *len);
    uint8_t *valid = malloc(BT);
    assert_int_equal(sb_task_read_batch(task, SB_SPLIT_TRAIN, index, 3, &big, inputs, targets,
                                        valid, start, len, &err),
                     SB_OK);
    for (int b = 0; b < big.batch; b++) {
        int frames = 0;
        for (int t = 0; t < big.frames; t++) {
            const float *x = inputs + ((size_t)b * big.frames + t) * big.inputs;
            float sum = 0;
            for (int v = 0; v < big.inputs; v++)
                sum += x[v];
            int on = valid[(size_t)b * big.frames + t];
            frames += on;
            if (!on) /* padding: zero frames, target 0 */
                assert_true(sum == 0 && targets[(size_t)b * big.frames + t] == 0);
            else
                assert_true(targets[(size_t)b * big.frames + t] < f.states);
        }
        /* the windows tile the sample's frames: symbol frame then gap frames */
        int covered = 0;
        for (int e = 0; e < big.elements; e++) {
            if (len[(size_t)b * big.elements + e] == 0)
                continue;
            assert_int_equal(start[(size_t)b * big.elements + e], covered);
            covered += len[(size_t)b * big.elements + e];
        }
        assert_int_equal(covered, frames);
    }
    /* the batch object: assembled once, read in place, equal to sb_task_read_batch's arrays
     * on 1 and 2 threads */
    for (int threads = 1; threads <= 2; threads++) {
        sb_task_batch *tb = NULL;
        assert_int_equal(sb_task_batch_make(task, SB_SPLIT_TRAIN, index, 3, threads, &tb, &err),
                         SB_OK);
        sb_batch_shape own;
        sb_batch_arrays a;
        sb_task_batch_view(tb, &own, &a);
        assert_memory_equal(&own, &shape, sizeof own);
        for (int b = 0; b < own.batch; b++) {
            int frames = 0;
            for (int t = 0; t < own.frames; t++) {
                size_t mine = (size_t)b * own.frames + t, theirs = (size_t)b * big.frames + t;
                assert_memory_equal(a.inputs + mine * own.inputs, inputs + theirs * big.inputs,
                                    (size_t)own.inputs * sizeof *inputs);
                assert_int_equal(a.targets[mine], targets[theirs]);
                assert_int_equal(a.valid[mine], valid[theirs]);
                frames += a.valid[mine];
            }
            assert_int_equal(a.frames[b], frames);
            for (int e = 0; e < own.elements; e++) {
                assert_int_equal(a.window_start[(size_t)b * own.elements + e],
                                 start[(size_t)b * big.elements + e]);
                assert_int_equal(a.window_len[(size_t)b * own.elements + e],
                                 len[(size_t)b * big.elements + e]);
            }
        }
        /* refilled with other samples, then with these again: the same arrays */
        int64_t other[4] = {1, 2, 3, 4};
        assert_int_equal(sb_task_batch_refill(tb, task, SB_SPLIT_TEST, other, 4, threads, &err),
                         SB_OK);
        sb_batch_shape shape4;
        sb_task_batch_view(tb, &shape4, NULL);
        assert_int_equal(shape4.batch, 4);
        assert_int_equal(sb_task_batch_refill(tb, task, SB_SPLIT_TRAIN, index, 3, threads, &err),
                         SB_OK);
        sb_batch_arrays again;
        sb_task_batch_view(tb, &own, &again);
        assert_int_equal(own.batch, 3);
        for (int b = 0; b < own.batch; b++)
            for (int t = 0; t < own.frames; t++)
                assert_memory_equal(again.inputs + ((size_t)b * own.frames + t) * own.inputs,
                                    inputs + ((size_t)b * big.frames + t) * big.inputs,
                                    (size_t)own.inputs * sizeof *inputs);
        assert_error(sb_task_batch_refill(tb, (sb_task *)&err, SB_SPLIT_TRAIN, index, 3, 0, &err),
                     &err, SB_ERR_INVALID, "another task");
        sb_task_batch_free(tb);
    }
    sb_task_batch *none = (sb_task_batch *)&err; /* set to NULL on failure */
    int64_t past[2] = {0, 100};
    assert_error(sb_task_batch_make(task, SB_SPLIT_TRAIN, past, 2, 0, &none, &err), &err,
                 SB_ERR_INVALID, "sample index 100 (batch row 1)");
    assert_null(none);
    assert_error(sb_task_batch_make(task, SB_SPLIT_TRAIN, index, 3, -1, &none, &err), &err,
                 SB_ERR_INVALID, "threads -1");
    sb_task_batch_free(NULL);
    free(inputs);
    free(targets);
    free(valid);
    free(start);
    free(len);

    int64_t bad[1] = {100};
    assert_error(sb_task_batch_shape(task, SB_SPLIT_TRAIN, bad, 1, &shape, &err), &err,
                 SB_ERR_INVALID, "100");
    assert_error(sb_task_batch_shape(task, SB_SPLIT_TRAIN, index, 0, &shape, &err), &err,
                 SB_ERR_INVALID, "count 0");
    sb_batch_shape small = shape;
    small.frames = 1;
    assert_error(sb_task_read_batch(task, SB_SPLIT_TRAIN, index, 3, &small, NULL, NULL, NULL, NULL,
                                    NULL, &err),
                 &err, SB_ERR_INVALID, "sb_task_batch_shape");
    sb_task_free(task);
    sb_task_free(NULL);

    /* a task that cannot be built names its key */
    assert_int_equal(sb_config_set_key(cfg, "grammar_scale", "False", &err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "amb", "60", &err), SB_OK);
    assert_int_equal(sb_task_from_config(cfg, &task, &err), SB_ERR_INVALID);
    assert_null(task);
    assert_true(err.msg[0] != '\0');
    sb_config_free(cfg);
}

static void test_missing_files(void **state)
{
    (void)state;
    sb_error err = {0};
    const char *missing = "/nonexistent-selectivbench-dir/none.db";
    sb_results *db = (sb_results *)&err;
    assert_error(sb_results_open_readonly(missing, &db, &err), &err, SB_ERR_IO, missing);
    assert_null(db);
    assert_error(sb_report_write(missing, "/tmp", NULL, &err), &err, SB_ERR_IO, missing);
    assert_error(sb_report_write_readonly(missing, "/tmp", NULL, &err), &err, SB_ERR_IO, missing);
    sb_config *cfg = NULL;
    assert_error(sb_checkpoint_config("/nonexistent-selectivbench.safetensors", &cfg, &err), &err,
                 SB_ERR_IO, "nonexistent-selectivbench.safetensors");
    assert_null(cfg);
    sb_eval_outcome eval;
    assert_error(
        sb_evaluate_checkpoint("/nonexistent-selectivbench.safetensors", NULL, &eval, &err), &err,
        SB_ERR_IO, "nonexistent-selectivbench.safetensors");
    sb_sweep *sweep = NULL;
    assert_error(sb_sweep_load("/nonexistent-sweep.yaml", &sweep, &err), &err, SB_ERR_IO,
                 "nonexistent-sweep.yaml");
    sb_results_close(NULL);
    sb_sweep_free(NULL);
}

/* A new database: empty, queries answer, a run recorded by hand reads back. */
static void test_results(void **state)
{
    (void)state;
    sb_error err = {0};
    char dir[] = "/tmp/sb_test_api_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    assert_int_equal(sb_results_path(dir, path, sizeof path, &err), SB_OK);
    char tiny[4];
    assert_error(sb_results_path(dir, tiny, sizeof tiny, &err), &err, SB_ERR_INVALID, "");
    sb_results *db = NULL;
    assert_int_equal(sb_results_open(path, &db, &err), SB_OK);
    size_t count = 99, n = 99;
    assert_int_equal(sb_results_count(db, NULL, &count, &err), SB_OK);
    assert_int_equal(count, 0);
    sb_result_row rows[2];
    assert_int_equal(sb_results_read(db, NULL, 0, rows, 2, &n, &err), SB_OK);
    assert_int_equal(n, 0);
    int found = 1;
    assert_int_equal(sb_results_find(db, "0123456789abcdef", rows, &found, &err), SB_OK);
    assert_int_equal(found, 0);
    sb_config *cfg = NULL;
    assert_error(sb_results_run_config(db, "0123456789abcdef", &cfg, &err), &err, SB_ERR_INVALID,
                 "0123456789abcdef");
    sb_results_close(db);

    /* record a run by hand (a tiny task: its ceiling is computed and cached) */
    assert_int_equal(sb_config_create(&cfg, &err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "amb", "3", &err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "grammar_scale", "True", &err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "train_seqlen_max", "8", &err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "test_seqlen_max", "8", &err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "test_size", "20", &err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "model", "gru", &err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "feat_size", "8", &err), SB_OK);
    sb_train_outcome out;
    memset(&out, 0, sizeof out);
    out.status = SB_RUN_RUNNING; /* a recorded run has ended */
    assert_error(sb_results_record(path, cfg, &out, &err), &err, SB_ERR_INVALID, "not running");
    out.status = (sb_run_status)42;
    assert_error(sb_results_record(path, cfg, &out, &err), &err, SB_ERR_INVALID,
                 "an unknown status");
    out.status = SB_RUN_FINISHED;
    out.test_acc = 0.5;
    out.test_loss = 1.5;
    out.train_acc = out.train_loss = out.wall_s = out.tokens_per_s = (double)NAN;
    snprintf(out.checkpoint, sizeof out.checkpoint, "elsewhere/weights.safetensors");
    assert_int_equal(sb_results_record(path, cfg, &out, &err), SB_OK);
    assert_error(sb_results_record(path, cfg, &out, &err), &err, SB_ERR_INVALID, "finished");
    char hash[17];
    sb_config_run_hash(cfg, hash);
    assert_int_equal(sb_results_open_readonly(path, &db, &err), SB_OK);
    assert_int_equal(sb_results_count(db, "gru", &count, &err), SB_OK);
    assert_int_equal(count, 1);
    assert_int_equal(sb_results_count(db, "mamba", &count, &err), SB_OK);
    assert_int_equal(count, 0);
    assert_int_equal(sb_results_find(db, hash, rows, &found, &err), SB_OK);
    assert_int_equal(found, 1);
    assert_int_equal(rows[0].status, SB_RUN_FINISHED);
    assert_string_equal(rows[0].model, "gru");
    assert_true(rows[0].test_acc == 0.5);
    assert_true(rows[0].ceiling > 0 && rows[0].ceiling <= 1);
    assert_true(isnan(rows[0].train_acc));
    assert_string_equal(rows[0].reason, "");
    assert_string_equal(rows[0].checkpoint, "elsewhere/weights.safetensors");
    /* the stored configuration's text, the yardsticks' backfill (nothing missing: the
     * ceiling's standard error only), the integrity check */
    char *json = NULL;
    assert_int_equal(sb_results_config_json(db, hash, &json, &err), SB_OK);
    assert_non_null(json);
    assert_non_null(strstr(json, "\"model\":\"gru\""));
    sb_string_free(json);
    assert_error(sb_results_config_json(db, "0123456789abcdef", &json, &err), &err, SB_ERR_INVALID,
                 "0123456789abcdef");
    assert_null(json);
    double ceiling = rows[0].ceiling, se = (double)NAN;
    assert_int_equal(sb_results_backfill(db, &rows[0], 1, &se, &err), SB_OK);
    assert_true(rows[0].ceiling == ceiling);
    assert_true(se >= 0);
    int ok = 0;
    assert_int_equal(sb_results_integrity_check(db, &ok, &err), SB_OK);
    assert_int_equal(ok, 1);
    sb_config *stored = NULL;
    assert_int_equal(sb_results_run_config(db, hash, &stored, &err), SB_OK);
    char h2[17];
    sb_config_run_hash(stored, h2);
    assert_string_equal(hash, h2);
    sb_config_free(stored);
    assert_int_equal(sb_results_read(db, NULL, 1, rows, 2, &n, &err), SB_OK);
    assert_int_equal(n, 0);
    sb_results_close(db);
    sb_config_free(cfg);

    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* A run trained elsewhere (the Python binding's record_run): stored with its model name,
 * parameter count, curve and yardsticks, refused with a registry name, a bad name, a bad
 * status or curve point, or twice finished; report reads it beside a native run. */
static void test_results_external(void **state)
{
    (void)state;
    sb_error err = {0};
    char dir[] = "/tmp/sb_test_api_ext_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    assert_int_equal(sb_results_path(dir, path, sizeof path, &err), SB_OK);
    sb_config *cfg = NULL;
    assert_int_equal(sb_config_create(&cfg, &err), SB_OK);
    const char *keys[][2] = {{"amb", "3"},
                             {"grammar_scale", "True"},
                             {"train_seqlen_max", "8"},
                             {"test_seqlen_max", "8"},
                             {"test_size", "20"},
                             {"dataset_size", "100"},
                             {"feat_size", "8"}};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
        assert_int_equal(sb_config_set_key(cfg, keys[k][0], keys[k][1], &err), SB_OK);
    sb_curve_point curve[3] = {
        {.step = 10,
         .samples = 640,
         .split = SB_SPLIT_TEST,
         .loss = 1.2,
         .acc = 0.4,
         .lr = 1e-3,
         .tokens_per_s = NAN,
         .wall_s = 1.0},
        {.step = 10,
         .samples = 640,
         .split = SB_SPLIT_TRAIN,
         .loss = 1.1,
         .acc = 0.45,
         .lr = 1e-3,
         .tokens_per_s = NAN,
         .wall_s = 1.0},
        {.step = 20,
         .samples = 1280,
         .split = SB_SPLIT_TEST,
         .loss = 0.9,
         .acc = 0.6,
         .lr = 5e-4,
         .tokens_per_s = 1000,
         .wall_s = 2.0},
    };
    sb_external_run run = {.status = SB_RUN_FINISHED,
                           .params = 1234,
                           .state_size = 16,
                           .test_acc = 0.6,
                           .test_loss = 0.9,
                           .train_acc = NAN,
                           .train_loss = NAN,
                           .wall_s = 2.5,
                           .tokens_per_s = 1000,
                           .curve = curve,
                           .n_curve = 3,
                           .code_version = "torch test"};
    char hash[17] = "";
    /* a registry model's name is refused (its size is the library's to count) */
    assert_int_equal(sb_config_set_key(cfg, "model", "gru", &err), SB_OK);
    assert_error(sb_results_record_external(path, cfg, &run, hash, &err), &err, SB_ERR_INVALID,
                 "torch_gru");
    assert_int_equal(sb_config_set_key(cfg, "model", "my lstm", &err), SB_OK);
    assert_error(sb_results_record_external(path, cfg, &run, hash, &err), &err, SB_ERR_INVALID,
                 "letters, digits");
    assert_int_equal(sb_config_set_key(cfg, "model", "torch_lstm", &err), SB_OK);
    run.status = SB_RUN_NONE;
    assert_error(sb_results_record_external(path, cfg, &run, hash, &err), &err, SB_ERR_INVALID,
                 "finished, failed, diverged or interrupted");
    run.status = SB_RUN_FINISHED;
    curve[1].step = -1;
    assert_error(sb_results_record_external(path, cfg, &run, hash, &err), &err, SB_ERR_INVALID,
                 "curve point 1");
    curve[1].step = 10;
    assert_int_equal(sb_results_record_external(path, cfg, &run, hash, &err), SB_OK);
    char expected[17];
    sb_config_run_hash(cfg, expected);
    assert_string_equal(hash, expected);
    assert_error(sb_results_record_external(path, cfg, &run, hash, &err), &err, SB_ERR_INVALID,
                 "already has run");

    sb_results *db = NULL;
    assert_int_equal(sb_results_open_readonly(path, &db, &err), SB_OK);
    sb_result_row row;
    int found = 0;
    assert_int_equal(sb_results_find(db, hash, &row, &found, &err), SB_OK);
    assert_int_equal(found, 1);
    assert_string_equal(row.model, "torch_lstm");
    assert_int_equal(row.status, SB_RUN_FINISHED);
    assert_int_equal(row.params, 1234);
    assert_int_equal(row.state_size, 16);
    assert_true(row.test_acc == 0.6);
    assert_true(isnan(row.flops_per_token));
    assert_true(row.ceiling > 0 && row.ceiling <= 1); /* the yardsticks, as for a native run */
    assert_false(isnan(row.effective_memory));
    sb_curve_point *points = NULL;
    size_t n = 0;
    assert_int_equal(sb_results_curve(db, hash, &points, &n, &err), SB_OK);
    assert_int_equal(n, 3);
    assert_int_equal(points[0].step, 10);
    assert_int_equal(points[0].split, SB_SPLIT_TEST); /* test before train at a step */
    assert_true(points[1].acc == 0.45);
    assert_true(points[2].acc == 0.6 && points[2].samples == 1280);
    sb_results_curve_free(points);
    sb_results_close(db);

    /* a native run of the same task beside it, then the report reads both */
    assert_int_equal(sb_config_set_key(cfg, "model", "gru", &err), SB_OK);
    sb_train_outcome out;
    memset(&out, 0, sizeof out);
    out.status = SB_RUN_FINISHED;
    out.test_acc = 0.5;
    out.test_loss = 1.5;
    out.train_acc = out.train_loss = out.wall_s = out.tokens_per_s = (double)NAN;
    assert_int_equal(sb_results_record(path, cfg, &out, &err), SB_OK);
    char report_dir[300];
    snprintf(report_dir, sizeof report_dir, "%s/report", dir);
    sb_report_outcome rep;
    assert_int_equal(sb_report_write(path, report_dir, &rep, &err), SB_OK);
    assert_int_equal(rep.runs_read, 2);
    assert_int_equal(rep.runs_used, 2);
    char md_path[400];
    snprintf(md_path, sizeof md_path, "%s/report.md", report_dir);
    FILE *f = fopen(md_path, "r");
    assert_non_null(f);
    static char md[1 << 16];
    size_t len = fread(md, 1, sizeof md - 1, f);
    md[len] = '\0';
    fclose(f);
    assert_non_null(strstr(md, "torch_lstm"));
    sb_config_free(cfg);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* sb_results_config_matches on each JSON kind; sb_report_claims_where on a database where
 * the gating finding holds in one slice (dataset_size 100), fails in the other (200) and
 * cannot be told on both together. */
static void test_claims_where(void **state)
{
    (void)state;
    const char *json = "{\"model\":\"gla\",\"dataset_size\":96000,\"lr\":0.001,"
                       "\"grammar_scale\":true,\"warmup_steps\":null}";
    assert_true(sb_results_config_matches(json, "model=gla"));
    assert_false(sb_results_config_matches(json, "model=gl"));
    assert_true(sb_results_config_matches(json, "dataset_size=96000"));
    assert_true(sb_results_config_matches(json, "dataset_size=96000.0"));
    assert_false(sb_results_config_matches(json, "dataset_size=9600x"));
    assert_true(sb_results_config_matches(json, "lr=1e-3"));
    assert_true(sb_results_config_matches(json, "grammar_scale=True"));
    assert_false(sb_results_config_matches(json, "grammar_scale=False"));
    assert_true(sb_results_config_matches(json, "warmup_steps=None"));
    /* a list: any of its values */
    assert_true(sb_results_config_matches(json, "model=gru,gla"));
    assert_true(sb_results_config_matches(json, "dataset_size=6000,96000,200000"));
    assert_false(sb_results_config_matches(json, "dataset_size=6000,24000"));
    assert_false(sb_results_config_matches(json, "model=gru,"));
    assert_true(sb_results_config_matches(json, "grammar_scale=False,True"));
    assert_false(sb_results_config_matches(json, "nokey=1"));
    assert_false(sb_results_config_matches(json, "model"));
    assert_false(sb_results_config_matches("not json", "model=gla"));
    assert_false(sb_results_config_matches(NULL, "model=gla"));

    sb_error err = {0};
    char dir[] = "/tmp/sb_test_api_claims_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    assert_int_equal(sb_results_path(dir, path, sizeof path, &err), SB_OK);
    sb_config *cfg = NULL;
    assert_int_equal(sb_config_create(&cfg, &err), SB_OK);
    const char *keys[][2] = {{"amb", "3"},
                             {"grammar_scale", "True"},
                             {"train_seqlen_max", "8"},
                             {"test_seqlen_max", "8"},
                             {"test_size", "20"},
                             {"feat_size", "8"}};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
        assert_int_equal(sb_config_set_key(cfg, keys[k][0], keys[k][1], &err), SB_OK);
    /* gated minus ungated: +0.105 and +0.110 at 100 samples, their negatives at 200 */
    const char *sizes[2] = {"100", "200"};
    for (int z = 0; z < 2; z++)
        for (int seed = 1; seed <= 2; seed++) {
            char seed_text[4];
            snprintf(seed_text, sizeof seed_text, "%d", seed);
            assert_int_equal(sb_config_set_key(cfg, "dataset_size", sizes[z], &err), SB_OK);
            assert_int_equal(sb_config_set_key(cfg, "seed", seed_text, &err), SB_OK);
            double margin = (z == 0 ? 1 : -1) * (0.1 + 0.005 * seed);
            for (int twin = 0; twin < 2; twin++) {
                assert_int_equal(
                    sb_config_set_key(cfg, "model", twin ? "delta_net" : "gated_delta_net", &err),
                    SB_OK);
                sb_train_outcome out;
                memset(&out, 0, sizeof out);
                out.status = SB_RUN_FINISHED;
                out.test_acc = 0.85 + (twin ? 0.0 : margin);
                out.test_loss = 1.0;
                out.train_acc = out.train_loss = out.wall_s = out.tokens_per_s = (double)NAN;
                out.valid_acc = out.valid_loss = (double)NAN;
                assert_int_equal(sb_results_record(path, cfg, &out, &err), SB_OK);
            }
        }
    sb_config_free(cfg);
    struct {
        const char *filter;
        const char *verdict;
    } cases[] = {{NULL, "- gating [dataset_size=100], holds: +0.1075"},
                 {NULL, "- gating [dataset_size=200], contradicted: -0.1075"},
                 {"dataset_size=100", "- gating, holds: +0.1075"},
                 {"dataset_size=200", "- gating, contradicted: -0.1075"}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char *md = NULL;
        const char *filters[1] = {cases[c].filter};
        assert_int_equal(sb_report_claims_where(path, filters, cases[c].filter != NULL, &md, &err),
                         SB_OK);
        const char *row = strstr(md, cases[c].verdict);
        if (row == NULL)
            fail_msg("filter %s: expected '%s' in '%s'", cases[c].filter ? cases[c].filter : "-",
                     cases[c].verdict, md);
        assert_non_null(row);
        const char *end = strchr(row, '\n');
        assert_non_null(end);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(end - row), row);
        if (strstr(line, cases[c].verdict) == NULL)
            fail_msg("filter %s: expected '%s' in '%s'", cases[c].filter ? cases[c].filter : "-",
                     cases[c].verdict, line);
        sb_string_free(md);
    }
    char *md = NULL;
    assert_error(sb_report_claims_where(path, NULL, 1, &md, &err), &err, SB_ERR_INVALID,
                 "without the array");
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* settings->should_stop: polled once per update; the third poll stops the run. */
static int stop_at_third_poll(void *user)
{
    int *polls = user;
    return ++*polls >= 3;
}

/* A stop request ends a recorded run after its update with a checkpoint: status
 * "interrupted" in the outcome and the database; resume finishes it as a second attempt. */
static void test_train_stop_request(void **state)
{
    (void)state;
    sb_error err = {0};
    char dir[] = "/tmp/sb_test_api_XXXXXX";
    assert_non_null(mkdtemp(dir));
    sb_config *cfg = NULL;
    assert_int_equal(sb_config_create(&cfg, &err), SB_OK);
    const char *keys[][2] = {{"amb", "3"},
                             {"grammar_scale", "True"},
                             {"train_seqlen_max", "8"},
                             {"test_seqlen_max", "8"},
                             {"test_size", "20"},
                             {"dataset_size", "160"},
                             {"batch_size", "16"},
                             {"epoch_size", "64"},
                             {"model", "gru"},
                             {"feat_size", "8"}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        assert_int_equal(sb_config_set_key(cfg, keys[i][0], keys[i][1], &err), SB_OK);
    /* where and how are keys too (the runtime ones): the settings hold callbacks only */
    assert_int_equal(sb_config_set_key(cfg, "results", dir, &err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "save_model", "True", &err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "threads", "1", &err), SB_OK);
    int polls = 0;
    sb_train_settings set = {.user = &polls, .should_stop = stop_at_third_poll};
    sb_train_outcome out;
    if (sb_train_config(cfg, &set, &out, &err) != SB_OK)
        fail_msg("train: %s", err.msg);
    assert_int_equal(out.status, SB_RUN_INTERRUPTED);
    assert_int_equal(out.steps, 3);
    assert_int_equal(out.locked_by, 0);
    assert_non_null(strstr(out.reason, "interrupted at update 3 of 10"));
    assert_int_equal(access(out.checkpoint, R_OK), 0);
    sb_results *db = NULL;
    sb_result_row row;
    int found = 0;
    assert_int_equal(sb_results_open_readonly(out.database, &db, &err), SB_OK);
    assert_int_equal(sb_results_find(db, out.run_hash, &row, &found, &err), SB_OK);
    assert_int_equal(found, 1);
    assert_int_equal(row.status, SB_RUN_INTERRUPTED);
    assert_int_equal(row.attempts, 1);
    /* the sweeps' rule: interrupted with a readable checkpoint, and nothing else */
    assert_true(sb_result_row_resumable(&row));
    sb_result_row other = row;
    other.status = SB_RUN_FAILED;
    assert_false(sb_result_row_resumable(&other));
    other = row;
    other.checkpoint[0] = '\0';
    assert_false(sb_result_row_resumable(&other));
    snprintf(other.checkpoint, sizeof other.checkpoint, "%s/no_such.safetensors", dir);
    assert_false(sb_result_row_resumable(&other));
    assert_false(sb_result_row_resumable(NULL));
    sb_results_close(db);
    /* where a sweep keeps a run's output: RESULTS/logs/HASH.log, the folder made on request */
    char log[600], want[600], small[8];
    snprintf(want, sizeof want, "%s/fresh/logs/%s.log", dir, out.run_hash);
    char fresh[520];
    snprintf(fresh, sizeof fresh, "%s/fresh", dir);
    assert_int_equal(sb_results_log_path(fresh, out.run_hash, log, sizeof log, 1, &err), SB_OK);
    assert_string_equal(log, want);
    struct stat st;
    snprintf(want, sizeof want, "%s/fresh/logs", dir);
    assert_int_equal(stat(want, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_error(sb_results_log_path(fresh, out.run_hash, small, sizeof small, 0, &err), &err,
                 SB_ERR_INVALID, "too long");

    set.should_stop = NULL;
    assert_int_equal(sb_config_set_key(cfg, "resume", "True", &err), SB_OK);
    if (sb_train_config(cfg, &set, &out, &err) != SB_OK)
        fail_msg("resume: %s", err.msg);
    assert_int_equal(out.status, SB_RUN_FINISHED);
    assert_int_equal(out.steps, 10);
    assert_int_equal(out.n_evals, 3); /* the resume's: at 64 and 128 samples and the final one */
    assert_int_equal(sb_results_open_readonly(out.database, &db, &err), SB_OK);
    assert_int_equal(sb_results_find(db, out.run_hash, &row, &found, &err), SB_OK);
    assert_int_equal(row.status, SB_RUN_FINISHED);
    assert_int_equal(row.attempts, 2);
    /* the trainer's outcome and the stored row are one record: the same numbers */
    assert_true(out.flops_per_token > 0);
    assert_true(out.flops_per_token == row.flops_per_token);
    assert_true(out.test_acc == row.test_acc && out.valid_acc == row.valid_acc);
    assert_true((int64_t)out.params == row.params);
    sb_results_close(db);
    /* a finished run again: read from its row, nothing trained */
    sb_train_outcome again;
    assert_int_equal(sb_train_config(cfg, &set, &again, &err), SB_OK);
    assert_int_equal(again.cached, 1);
    assert_int_equal(again.n_evals, 0);
    assert_true(again.flops_per_token == out.flops_per_token);
    assert_true(again.test_acc == out.test_acc);
    sb_config_free(cfg);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* A sweep file's run k as a configuration; bad runs and flags are errors. */
static void test_sweep(void **state)
{
    (void)state;
    sb_error err = {0};
    char path[] = "/tmp/sb_test_api_sweep_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "method: grid\n"
                       "parameters:\n"
                       "  layers:\n    values: [1, 2, 3]\n"
                       "  model:\n    values: [gru, mamba]\n"
                       "command:\n  - ${program}\n  - \"--save_model\"\n  - True\n"
                       "  - \"--classify\"\n  - \"--batch_size\"\n  - 8\n  - ${args}\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    sb_sweep *s = NULL;
    assert_int_equal(sb_sweep_load(path, &s, &err), SB_OK);
    assert_int_equal(sb_sweep_count(s), 6);
    sb_config *cfg = NULL;
    assert_int_equal(sb_sweep_config(s, 5, &cfg, &err), SB_OK);
    char v[64];
    assert_int_equal(sb_config_get_key(cfg, "layers", v, sizeof v, &err), SB_OK);
    assert_string_equal(v, "3");
    assert_int_equal(sb_config_get_key(cfg, "model", v, sizeof v, &err), SB_OK);
    assert_string_equal(v, "mamba");
    assert_int_equal(sb_config_get_key(cfg, "batch_size", v, sizeof v, &err), SB_OK);
    assert_string_equal(v, "8");
    sb_config_free(cfg);
    assert_error(sb_sweep_config(s, 6, &cfg, &err), &err, SB_ERR_INVALID, "run 6");
    assert_null(cfg);
    /* its parameters, a run's values and train flags */
    assert_int_equal(sb_sweep_check_params(s, &err), SB_OK);
    assert_int_equal(sb_sweep_has_param(s, "layers"), 1);
    assert_int_equal(sb_sweep_has_param(s, "lr"), 0);
    assert_int_equal(sb_sweep_run_matches(s, 5, "model", "mamba"), 1);
    assert_int_equal(sb_sweep_run_matches(s, 5, "model", "gru"), 0);
    char **args = NULL;
    int n_args = 0, layers_flag = 0;
    assert_int_equal(sb_sweep_run_args(s, 5, &args, &n_args, &err), SB_OK);
    for (int i = 0; i < n_args; i++)
        layers_flag |= strcmp(args[i], "--layers=3") == 0;
    assert_true(layers_flag);
    sb_sweep_args_free(args);
    sb_sweep_free(s);
    /* the same from text */
    assert_int_equal(sb_sweep_load_text("in memory", text, strlen(text), &s, &err), SB_OK);
    assert_int_equal(sb_sweep_count(s), 6);
    sb_sweep_free(s);

    /* an unknown flag */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("method: grid\nparameters:\n  no_such_flag:\n    values: [1]\n", f);
    fclose(f);
    assert_int_equal(sb_sweep_load(path, &s, &err), SB_OK);
    assert_error(sb_sweep_config(s, 0, &cfg, &err), &err, SB_ERR_INVALID, "no_such_flag");
    assert_error(sb_sweep_check_params(s, &err), &err, SB_ERR_INVALID, "no_such_flag");
    sb_sweep_free(s);
    unlink(path);
}

/* The mean frames of the first n training samples of cfg's task, through the public draws. */
static double mean_train_frames(const sb_config *cfg, int64_t n, int64_t *samples)
{
    sb_error err = {0};
    sb_task *task = NULL;
    assert_int_equal(sb_task_from_config(cfg, &task, &err), SB_OK);
    sb_task_facts tf;
    sb_task_get_facts(task, &tf);
    *samples = tf.train_size;
    sb_draw *d = NULL;
    assert_int_equal(sb_draw_create(task, &d, &err), SB_OK);
    double frames = 0;
    for (int64_t i = 0; i < n; i++) {
        assert_int_equal(sb_draw_read(d, SB_SPLIT_TRAIN, i, &err), SB_OK);
        frames += sb_draw_frames(d);
    }
    sb_draw_free(d);
    sb_task_free(task);
    return frames / (double)n;
}

/* The axes of a selection and the cost of its runs, against a hand computation: samples and
 * frames from the tasks' own draws (the mean over the first 64 training samples), parameters
 * from sb_config_param_count; a run the sweep refuses costs nothing. */
static void test_sweep_axes_cost(void **state)
{
    (void)state;
    sb_error err = {0};
    const char *text = "method: grid\n"
                       "parameters:\n"
                       "  amb:\n    values: [2, 3]\n"
                       "  model:\n    values: [gru, glaa, gla]\n"
                       "  seed:\n    values: [1]\n"
                       "command:\n  - ${program}\n  - \"--vocab\"\n  - 5\n  - \"--amb_depth\"\n"
                       "  - 2\n  - \"--train_seqlen_max\"\n  - 12\n  - \"--dataset_size\"\n"
                       "  - 100\n  - \"--train_gap_max\"\n  - 0.3\n  - \"--feat_size\"\n  - 8\n"
                       "  - \"--layers\"\n  - 1\n  - ${args}\n";
    sb_sweep *s = NULL;
    assert_int_equal(sb_sweep_load_text("in memory", text, strlen(text), &s, &err), SB_OK);
    sb_sweep_selection *sel = NULL;
    assert_int_equal(sb_sweep_select(s, NULL, &sel, &err), SB_OK);
    assert_int_equal(sb_sweep_param_count(s), 3);
    assert_string_equal(sb_sweep_param_name(s, 0), "amb");
    assert_string_equal(sb_sweep_param_name(s, 1), "model");
    assert_null(sb_sweep_param_name(s, 3));
    assert_int_equal(sb_sweep_selection_value_count(sel, 1), 3);
    assert_string_equal(sb_sweep_selection_value(sel, 1, 2), "gla");
    assert_int_equal(sb_sweep_selection_value_count(sel, 2), 1);
    assert_null(sb_sweep_selection_value(sel, 1, 3));

    sb_sweep_cost c;
    assert_int_equal(sb_sweep_estimate_cost(s, sel, &c, &err), SB_OK);
    /* runs: amb 2 x (gru, gla) and amb 3 x (gru, gla); glaa is refused */
    assert_int_equal(c.runs, 4);
    assert_int_equal(c.first_run, 0);
    assert_string_equal(c.first_model, "gru");
    double tokens = 0;
    int64_t samples = 0;
    uint64_t pmin = UINT64_MAX, pmax = 0;
    for (int64_t k = 0; k < sb_sweep_count(s); k++) {
        sb_config *cfg = NULL;
        if (sb_sweep_check_run(s, k, &cfg, &err) != SB_OK)
            continue;
        int64_t n = 0;
        tokens += (double)100 * mean_train_frames(cfg, 64, &n);
        samples += n;
        uint64_t p = 0;
        assert_int_equal(sb_config_param_count(cfg, &p, &err), SB_OK);
        pmin = p < pmin ? p : pmin;
        pmax = p > pmax ? p : pmax;
        sb_config_free(cfg);
    }
    assert_int_equal(c.samples, samples);
    assert_int_equal(c.samples, 400);
    assert_int_equal(c.samples_min, 100);
    assert_int_equal(c.samples_max, 100);
    assert_true(fabs(c.tokens - tokens) <= 1e-9 * tokens);
    assert_true(c.params_min == pmin && c.params_max == pmax);
    assert_true(c.train_flops > 3.0 * tokens); /* at least 1 FLOP per frame and pass */
    sb_sweep_selection_free(sel);

    /* a filter narrows the values, and the cost follows */
    sb_sweep_select_options pick = {.filters = (const char *const[]){"model=gla"}, .n_filters = 1};
    assert_int_equal(sb_sweep_select(s, &pick, &sel, &err), SB_OK);
    assert_int_equal(sb_sweep_selection_value_count(sel, 1), 1);
    assert_string_equal(sb_sweep_selection_value(sel, 1, 0), "gla");
    assert_int_equal(sb_sweep_estimate_cost(s, sel, &c, &err), SB_OK);
    assert_int_equal(c.runs, 2);
    assert_string_equal(c.first_model, "gla");
    sb_sweep_selection_free(sel);
    sb_sweep_free(s);
}

/* sb_sweep_run: options are checked; a two-run grid runs through the worker command given
 * on the command line (the built CLI), every run started and ended once, and a second call
 * skips both (the database holds them). */
typedef struct sweep_seen {
    int started, ended, done, last_done;
    int unplaced; /* started runs without a worker slot or a configuration */
} sweep_seen;

static void on_update(const sb_sweep_update *u, void *user)
{
    sweep_seen *seen = user;
    if (u->kind == SB_SWEEP_UPDATE_STARTED) {
        seen->started++;
        seen->unplaced += u->slot < 0 || u->config == NULL;
    }
    if (u->kind == SB_SWEEP_UPDATE_ENDED) {
        seen->ended++;
        if (u->outcome == SB_SWEEP_DONE)
            seen->done++;
    }
    seen->last_done = u->done;
}

static const char *worker_exe;

static void test_sweep_run(void **state)
{
    (void)state;
    sb_error err = {0};
    char dir[] = "/tmp/sb_test_api_run_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[600], results[600];
    snprintf(path, sizeof path, "%s/tiny.yaml", dir);
    snprintf(results, sizeof results, "%s/results", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("method: grid\nparameters:\n  seed:\n    values: [1, 2]\n"
          "command:\n  - ${program}\n  - \"--model\"\n  - gru\n  - \"--feat_size\"\n  - 8\n"
          "  - \"--vocab\"\n  - 5\n  - \"--amb\"\n  - 4\n  - \"--grammar_scale\"\n  - True\n"
          "  - \"--train_seqlen_max\"\n  - 10\n  - \"--test_seqlen_max\"\n  - 10\n"
          "  - \"--dataset_size\"\n  - 64\n  - \"--test_size\"\n  - 16\n"
          "  - \"--batch_size\"\n  - 16\n  - \"--layers\"\n  - 1\n  - ${args}\n",
          f);
    fclose(f);
    sb_sweep *s = NULL;
    assert_int_equal(sb_sweep_load(path, &s, &err), SB_OK);

    /* the sweep reads its keys from a configuration; the callbacks are the settings */
    sb_config *cfg = NULL;
    assert_int_equal(sb_config_create(&cfg, &err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "workers", "2", &err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "threads", "1", &err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "results", results, &err), SB_OK);
    assert_error(sb_sweep_run(s, NULL, 0, cfg, NULL, NULL, NULL, NULL, &err), &err, SB_ERR_INVALID,
                 "worker_exe");
    assert_error(sb_config_set_key(cfg, "workers", "-1", &err), &err, SB_ERR_INVALID, "workers");
    assert_int_equal(sb_config_set_key(cfg, "results", "", &err), SB_OK);
    assert_error(sb_sweep_run(s, NULL, 0, cfg, "/bin/true", NULL, NULL, NULL, &err), &err,
                 SB_ERR_INVALID, "results folder");
    assert_int_equal(sb_config_set_key(cfg, "results", results, &err), SB_OK);
    if (worker_exe == NULL) { /* run without the CLI's path: only the checks above */
        sb_config_free(cfg);
        sb_sweep_free(s);
        return;
    }
    sweep_seen seen = {0};
    const sb_sweep_settings settings = {.on_update = on_update, .user = &seen};
    int done = -1, failed = -1;
    assert_int_equal(sb_sweep_run(s, NULL, 0, cfg, worker_exe, &settings, &done, &failed, &err),
                     SB_OK);
    assert_int_equal(done, 2);
    assert_int_equal(failed, 0);
    assert_int_equal(seen.started, 2);
    assert_int_equal(seen.ended, 2);
    assert_int_equal(seen.done, 2);
    assert_int_equal(seen.last_done, 2);
    assert_int_equal(seen.unplaced, 0);
    /* again: both finished in the database, nothing starts */
    memset(&seen, 0, sizeof seen);
    assert_int_equal(sb_sweep_run(s, NULL, 0, cfg, worker_exe, &settings, &done, &failed, &err),
                     SB_OK);
    assert_int_equal(seen.started, 0);
    assert_int_equal(seen.ended, 2);
    assert_int_equal(done, 0);
    /* a selection: run 1 alone, into a database named by path */
    memset(&seen, 0, sizeof seen);
    int64_t one[1] = {1};
    char db[700];
    snprintf(db, sizeof db, "%s/other.db", dir);
    assert_int_equal(sb_config_set_key(cfg, "db", db, &err), SB_OK);
    assert_int_equal(sb_sweep_run(s, one, 1, cfg, worker_exe, &settings, &done, &failed, &err),
                     SB_OK);
    assert_int_equal(seen.started, 1);
    assert_int_equal(seen.ended, 1);
    assert_int_equal(done, 1);
    struct stat st_db;
    assert_int_equal(stat(db, &st_db), 0);
    sb_config_free(cfg);
    sb_sweep_free(s);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* The command line's needs (2): a grammar and a task's samples, the ideal observer, the JSON
 * writer; NULL arguments answered with SB_ERR_INVALID. */
static void test_grammar_data_ceiling(void **state)
{
    (void)state;
    sb_error err = {0};
    sb_config *cfg = NULL;
    assert_int_equal(sb_config_create(&cfg, &err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "vocab", "5", &err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "amb", "2", &err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "amb_depth", "3", &err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "dataset_size", "40", &err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "test_size", "8", &err), SB_OK);
    assert_int_equal(sb_config_check_task(cfg, &err), SB_OK);

    sb_grammar *g = NULL;
    assert_int_equal(sb_grammar_from_config(cfg, &g, &err), SB_OK);
    sb_grammar_facts f;
    sb_grammar_get_facts(g, &f);
    assert_int_equal(f.vocab, 5);
    assert_int_equal(f.states,
                     9); /* the grammar `grammar --vocab 5 --amb 2 --amb_depth 3` prints */
    assert_string_equal(sb_grammar_state_name(g, f.states - 1), "#");
    assert_int_equal(sb_grammar_successor_count(g, f.states - 1), 0);
    int edges = 0;
    for (int s = 0; s < f.states; s++)
        edges += sb_grammar_successor_count(g, s);
    assert_int_equal(edges, f.transitions);
    double te = 0.0;
    assert_int_equal(sb_grammar_entropy(g, &te, &err), SB_OK);
    assert_true(te == f.topological_entropy);
    assert_int_equal(sb_grammar_fprint_json(NULL, stdout, &err), SB_ERR_INVALID);
    /* the JSON as a string: what sb_grammar_fprint_json writes, without its newline */
    char *grammar_json = NULL;
    assert_int_equal(sb_grammar_to_json(g, &grammar_json, &err), SB_OK);
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    assert_int_equal(sb_grammar_fprint_json(g, tmp, &err), SB_OK);
    long size = ftell(tmp);
    rewind(tmp);
    char *written = calloc(1, (size_t)size + 1);
    assert_int_equal(fread(written, 1, (size_t)size, tmp), (size_t)size);
    fclose(tmp);
    assert_true(size > 2 && written[size - 1] == '\n');
    written[size - 1] = '\0';
    assert_string_equal(grammar_json, written);
    assert_non_null(strstr(grammar_json, "\"state_ids\":"));
    free(written);
    sb_string_free(grammar_json);
    assert_int_equal(sb_grammar_to_json(NULL, &grammar_json, &err), SB_ERR_INVALID);
    assert_null(grammar_json);
    sb_grammar_free(g);

    sb_task *task = NULL;
    assert_int_equal(sb_task_from_config(cfg, &task, &err), SB_OK);
    sb_task_facts tf;
    sb_task_get_facts(task, &tf);
    sb_draw *d = NULL;
    assert_int_equal(sb_draw_create(task, &d, &err), SB_OK);
    assert_int_equal(sb_draw_read(d, SB_SPLIT_TRAIN, 3, &err), SB_OK);
    assert_int_equal(sb_draw_elements(d), tf.train_elements);
    int frames = sb_draw_elements(d);
    for (int k = 0; k < sb_draw_elements(d); k++) {
        frames += sb_draw_gap(d, k);
        assert_int_equal(sb_draw_walk(d, k), 0); /* one walk without walk_len */
    }
    assert_int_equal(frames, sb_draw_frames(d));
    assert_int_equal(sb_draw_read(d, SB_SPLIT_TRAIN, 40, &err), SB_ERR_INVALID);
    sb_task_settings ts;
    sb_task_get_settings(task, &ts);
    assert_int_equal(ts.walk_len, 0);
    assert_int_equal(ts.train_walks, 1);
    sb_draw_free(d);
    uint64_t h1 = 0, h2 = 0;
    assert_int_equal(sb_task_checksum(task, SB_SPLIT_TRAIN, 1, &h1, NULL, &err), SB_OK);
    assert_int_equal(sb_task_checksum(task, SB_SPLIT_TRAIN, 2, &h2, NULL, &err), SB_OK);
    assert_true(h1 == h2);

    /* the observer reads its keys from a configuration (NULL: their defaults) */
    assert_int_equal(sb_config_set_key(cfg, "threads", "1", &err), SB_OK);
    sb_ceiling c;
    assert_int_equal(sb_ceiling_compute(task, cfg, &c, &err), SB_OK);
    const int64_t whole_split = c.n_samples;
    assert_int_equal(sb_config_set_key(cfg, "samples", "3", &err), SB_OK);
    assert_int_equal(sb_config_set_key(cfg, "split", "train", &err), SB_OK);
    assert_int_equal(sb_ceiling_compute(task, cfg, &c, &err), SB_OK);
    assert_int_equal(c.n_samples, 3);
    assert_true(whole_split > 3);
    assert_int_equal(sb_ceiling_compute(task, NULL, &c, &err), SB_OK);
    assert_int_equal(c.n_samples, whole_split);
    assert_true(c.expected_acc > 0.0 && c.expected_acc <= 1.0);
    assert_int_equal(sb_ceiling_window_size(SB_CEILING_N_WINDOWS - 1), 4096);
    assert_int_equal(c.n_windows, 7); /* the reference task: windows up to 32 */
    assert_int_equal(sb_ceiling_window_size(c.n_windows - 1), 32);
    assert_true(isfinite(sb_ceiling_memory_demand(&c)));
    char *json = NULL;
    assert_int_equal(sb_ceiling_to_json(&c, &json, &err), SB_OK);
    assert_non_null(strstr(json, "\"expected_acc\":"));
    sb_string_free(json);
    assert_int_equal(sb_ceiling_compute(NULL, cfg, &c, &err), SB_ERR_INVALID);
    sb_task_free(task);
    sb_config_free(cfg);

    char buf[256] = {0};
    FILE *mem = fmemopen(buf, sizeof buf, "w");
    sb_jw *j = sb_jw_open(mem, 0);
    sb_jw_object_begin(j);
    sb_jw_key(j, "x");
    sb_jw_double(j, 0.1);
    sb_jw_key(j, "n");
    sb_jw_array_begin(j);
    sb_jw_int(j, -1);
    sb_jw_uint(j, 2);
    sb_jw_bool(j, 1);
    sb_jw_null(j);
    sb_jw_string(j, "a\"b");
    sb_jw_array_end(j);
    sb_jw_object_end(j);
    sb_jw_close(j);
    fclose(mem);
    assert_string_equal(buf, "{\"x\":0.1,\"n\":[-1,2,true,null,\"a\\\"b\"]}");
    assert_null(sb_jw_open(NULL, 0));
    assert_true(sb_clock_seconds() > 0.0);
    assert_true(sb_peak_memory_bytes() > 0);
}

int main(int argc, char **argv)
{
    worker_exe = argc > 1 ? argv[1] : NULL; /* the selectivbench command, for sb_sweep_run */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),       cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_config_errors), cmocka_unit_test(test_config_keys),
        cmocka_unit_test(test_models),        cmocka_unit_test(test_closest_name),
        cmocka_unit_test(test_config_flags),  cmocka_unit_test(test_varied_keys),
        cmocka_unit_test(test_task_batch),    cmocka_unit_test(test_missing_files),
        cmocka_unit_test(test_results),       cmocka_unit_test(test_results_external),
        cmocka_unit_test(test_claims_where),  cmocka_unit_test(test_train_stop_request),
        cmocka_unit_test(test_sweep),         cmocka_unit_test(test_sweep_axes_cost),
        cmocka_unit_test(test_sweep_run),     cmocka_unit_test(test_grammar_data_ceiling),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
