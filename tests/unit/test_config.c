/*
 * test_config.c - the key table (src/config/keys.def): every key round-trips through the
 * canonical JSON (write, then read, gives the same value) and through sb_config_set (its
 * value as text sets the same value), no-ops change nothing, bad values give one error
 * naming the flag, the seed logic, `train --help` lists every key up to train's group and
 * another command's --help each of the others, and no source outside src/config/ writes a
 * key's default or range again beside its name.
 *
 * usage: test_config PATH/TO/selectivbench SOURCE_DIR
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <ctype.h>
#include <dirent.h>
#include <sys/stat.h>

#include "config/config.h"
#include "train/run_setup.h"

static const char *binary;

/* A valid value of key k that differs from its default. */
static void other_value(const sb_config_key *k, char *buf, size_t size)
{
    switch (k->kind) {
    case SB_KEY_INT:
    case SB_KEY_INT64:
    case SB_KEY_U64:
    case SB_KEY_OPT_INT: {
        /* a value in range other than the default (a narrow range: its other end) */
        const long long lo = (long long)k->min, hi = (long long)k->max;
        const long long def = strcmp(k->def, "none") != 0 ? atoll(k->def) : lo - 1;
        long long v = lo + 3 <= hi ? lo + 3 : lo;
        if (v == def)
            v = v + 1 <= hi ? v + 1 : hi;
        snprintf(buf, size, "%lld", v);
        break;
    }
    case SB_KEY_DOUBLE:
    case SB_KEY_OPT_DOUBLE: {
        double v = k->min + 0.375 * (k->max - k->min > 1 ? 1 : k->max - k->min);
        snprintf(buf, size, "%.17g", v);
        break;
    }
    case SB_KEY_BOOL:
    case SB_KEY_SWITCH:
        snprintf(buf, size, "%s", strcmp(k->def, "True") == 0 ? "False" : "True");
        break;
    case SB_KEY_CHOICE: snprintf(buf, size, "%s", k->choices[1]); break;
    case SB_KEY_STRING: snprintf(buf, size, "%s", "gru"); break;
    }
}

static void test_every_key_round_trips(void **state)
{
    (void)state;
    assert_true(sb_config_key_count() > 40);
    int n_json = 0, n_runtime = 0;
    for (int i = 0; i < sb_config_key_count(); i++) {
        const sb_config_key *k = sb_config_key_at(i);
        if (k->noop || strcmp(k->name, "att_dropout") == 0)
            continue; /* att_dropout True is refused: tested below */
        sb_run_config c = sb_run_config_default();
        sb_error err = {0};
        char want[128], got[128];
        other_value(k, want, sizeof want);
        if (sb_config_set(&c, k->name, want, &err) != SB_OK)
            fail_msg("--%s %s: %s", k->name, want, err.msg);
        /* set-by-name: the value as text reads back as the same value */
        sb_config_format(&c, k, got, sizeof got);
        sb_run_config again = sb_run_config_default();
        assert_int_equal(sb_config_set(&again, k->name, got, &err), SB_OK);
        char got2[128];
        sb_config_format(&again, k, got2, sizeof got2);
        if (strcmp(got, got2) != 0)
            fail_msg("--%s: set '%s' reads back '%s'", k->name, got, got2);
        /* JSON: write then read gives the same value of every key, and the same text */
        char *text = sb_run_config_json_string(&c, 0);
        assert_non_null(text);
        sb_run_config back;
        if (sb_run_config_from_json(text, &back, &err) != SB_OK)
            fail_msg("--%s: %s", k->name, err.msg);
        for (int j = 0; j < sb_config_key_count(); j++) {
            const sb_config_key *q = sb_config_key_at(j);
            if (q->noop || q->hash == SB_KEY_HASH_NONE)
                continue;
            char a[128], b[128];
            sb_config_format(&c, q, a, sizeof a);
            sb_config_format(&back, q, b, sizeof b);
            if (strcmp(a, b) != 0)
                fail_msg("after --%s %s: JSON key %s wrote %s, read %s", k->name, want, q->name, a,
                         b);
        }
        char *text2 = sb_run_config_json_string(&back, 0);
        assert_string_equal(text, text2);
        if (k->hash != SB_KEY_HASH_NONE) {
            n_json++;
            assert_non_null(strstr(text, k->name));
            /* a non-default value changes the hash of its kind */
            char h0[17], h1[17];
            sb_run_config d = sb_run_config_default();
            sb_run_config_hash(&d, k->hash == SB_KEY_HASH_TRAINING, h0);
            sb_run_config_hash(&c, k->hash == SB_KEY_HASH_TRAINING, h1);
            /* --task_seed counts only with --same_seed False (test_seeds) */
            if (strcmp(h0, h1) == 0 && strcmp(k->name, "task_seed") != 0)
                fail_msg("--%s %s leaves the hash unchanged", k->name, want);
            char t0[17], t1[17];
            sb_run_config_hash(&d, 1, t0);
            sb_run_config_hash(&c, 1, t1);
            if (k->hash == SB_KEY_HASH_RUN && strcmp(t0, t1) != 0)
                fail_msg("--%s is a test setting but changes the training hash", k->name);
        }
        if (k->group >= SB_KEY_GROUP_RUNTIME) {
            /* a runtime key (threads, files, output) says where and how, never what: in no
             * JSON and no hash */
            assert_int_equal(k->hash, SB_KEY_HASH_NONE);
            char quoted[80];
            snprintf(quoted, sizeof quoted, "\"%s\":", k->name);
            assert_null(strstr(text, quoted));
            for (int training = 0; training <= 1; training++) {
                char h0[17], h1[17];
                sb_run_config d = sb_run_config_default();
                sb_run_config_hash(&d, training, h0);
                sb_run_config_hash(&c, training, h1);
                if (strcmp(h0, h1) != 0)
                    fail_msg("runtime key --%s %s changes a hash", k->name, want);
            }
            n_runtime++;
        }
        free(text);
        free(text2);
    }
    assert_true(n_json >= 40);
    assert_true(n_runtime >= 16);
}

static void test_noops_change_nothing(void **state)
{
    (void)state;
    sb_run_config d = sb_run_config_default();
    char *want = sb_run_config_json_string(&d, 0);
    for (int i = 0; i < sb_config_key_count(); i++) {
        const sb_config_key *k = sb_config_key_at(i);
        if (!k->noop)
            continue;
        char v[128];
        other_value(k, v, sizeof v);
        if (strcmp(k->name, "base_set") == 0)
            snprintf(v, sizeof v, "one_hot");
        sb_run_config c = sb_run_config_default();
        sb_error err = {0};
        if (sb_config_set(&c, k->name, v, &err) != SB_OK)
            fail_msg("no-op --%s %s: %s", k->name, v, err.msg);
        char *got = sb_run_config_json_string(&c, 0);
        assert_string_equal(want, got);
        free(got);
    }
    free(want);
}

static void expect_error(const char *name, const char *value, const char *needle)
{
    sb_run_config c = sb_run_config_default();
    sb_error err = {0};
    assert_int_equal(sb_config_set(&c, name, value, &err), SB_ERR_INVALID);
    if (strstr(err.msg, needle) == NULL || strchr(err.msg, '\n') != NULL)
        fail_msg("--%s %s: '%s' does not say '%s'", name, value, err.msg, needle);
}

static void test_bad_values(void **state)
{
    (void)state;
    expect_error("nosuch", "1", "unknown flag --nosuch");
    expect_error("layers", "1.5", "--layers: '1.5' is not an integer");
    expect_error("layers", "0", "--layers 0 is out of range [1, 1024]");
    expect_error("dropout", "1.5", "--dropout 1.5 is out of range [0, 0.999]");
    expect_error("lr", "nan", "not a finite number");
    expect_error("grammar_gap", "maybe", "not a boolean");
    expect_error("early_stop", "maybe", "is a switch");
    expect_error("optimizer", "sgd", "--optimizer: 'sgd' is not one of: adam, adamw");
    expect_error("seed", "4294967296", "out of range");
    expect_error("att_dropout", "True", "--att_dropout True is not supported");
    expect_error("base_set", "gsc", "--base_set gsc is not supported");
    expect_error("gpu_device", "x", "--gpu_device: 'x' is not an integer");
    char long_name[200];
    memset(long_name, 'm', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    expect_error("model", long_name, "is too long");
}

static void test_seeds(void **state)
{
    (void)state;
    sb_error err = {0};
    sb_run_config a = sb_run_config_default(), b = sb_run_config_default();
    assert_int_equal(a.task.grammar.seed, 1);
    assert_int_equal(a.seed, 1);
    /* train.py: task_seed = seed if same_seed else task_seed, in any flag order */
    assert_int_equal(sb_config_set(&a, "task_seed", "7", &err), SB_OK);
    assert_int_equal(a.task.grammar.seed, 1);
    assert_int_equal(sb_config_set(&a, "seed", "3", &err), SB_OK);
    assert_int_equal(a.task.grammar.seed, 3);
    assert_int_equal(sb_config_set(&a, "same_seed", "False", &err), SB_OK);
    assert_int_equal(a.task.grammar.seed, 7);
    assert_int_equal(sb_config_set(&b, "same_seed", "False", &err), SB_OK);
    assert_int_equal(b.task.grammar.seed, 42); /* --task_seed's default */
    assert_int_equal(sb_config_set(&b, "seed", "3", &err), SB_OK);
    assert_int_equal(sb_config_set(&b, "task_seed", "7", &err), SB_OK);
    char ha[17], hb[17];
    sb_run_config_hash(&a, 0, ha);
    sb_run_config_hash(&b, 0, hb);
    assert_string_equal(ha, hb);
    /* read back from JSON, the seed inputs follow the recorded seeds */
    char *text = sb_run_config_json_string(&a, 0);
    sb_run_config r;
    assert_int_equal(sb_run_config_from_json(text, &r, &err), SB_OK);
    free(text);
    assert_int_equal(r.same_seed, 0);
    assert_int_equal(r.task.grammar.seed, 7);
    assert_int_equal(sb_config_set(&r, "seed", "5", &err), SB_OK);
    assert_int_equal(r.task.grammar.seed, 7);
}

static void test_defaults_match_the_table(void **state)
{
    (void)state;
    sb_run_config d = sb_run_config_default();
    for (int i = 0; i < sb_config_key_count(); i++) {
        const sb_config_key *k = sb_config_key_at(i);
        if (k->noop)
            continue;
        char got[128];
        sb_config_format(&d, k, got, sizeof got);
        sb_run_config c = sb_run_config_default();
        sb_error err = {0};
        if (strcmp(k->def, "none") != 0 && strcmp(k->name, "task_seed") != 0) {
            assert_int_equal(sb_config_set(&c, k->name, k->def, &err), SB_OK);
            char again[128];
            sb_config_format(&c, k, again, sizeof again);
            assert_string_equal(got, again);
        }
    }
    sb_error err = {0};
    assert_int_equal(sb_config_check_ranges(&d, &err), SB_OK);
    assert_int_equal(sb_run_config_check(&d, &err), SB_OK);
}

/* The --help of `selectivbench COMMAND` in help[size]. */
static void command_help(const char *command, char *help, size_t size)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s --help", binary, command);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t len = fread(help, 1, size - 1, p);
    help[len] = '\0';
    assert_int_equal(pclose(p), 0);
}

/* train --help lists every key up to train's group and none of the other commands'
 * settings; each of those is listed by the --help of a command that reads it (a row
 * nobody reads is a defect). */
static void test_help_lists_every_key(void **state)
{
    (void)state;
    static char help[1 << 16], other[1 << 16];
    command_help("train", help, sizeof help);
    static const char *const commands[] = {"eval",  "probe",   "ceiling", "bench", "models",
                                           "data",  "grammar", "plan",    "sweep", "demo",
                                           "serve", "results", "report"};
    int n_command_keys = 0;
    for (int i = 0; i < sb_config_key_count(); i++) {
        const sb_config_key *k = sb_config_key_at(i);
        char needle[160];
        snprintf(needle, sizeof needle, "\n  --%s ", k->name);
        if (k->group <= SB_KEY_GROUP_TRAIN) {
            if (strstr(help, needle) == NULL)
                fail_msg("train --help does not list --%s", k->name);
            continue;
        }
        n_command_keys++;
        if (strstr(help, needle) != NULL) /* another command's setting is not a train flag */
            fail_msg("train --help lists --%s, a setting of another command", k->name);
        int listed = 0;
        for (size_t c = 0; c < sizeof commands / sizeof *commands && !listed; c++) {
            command_help(commands[c], other, sizeof other);
            listed = strstr(other, needle) != NULL;
        }
        if (!listed)
            fail_msg("no command's --help lists --%s (group COMMAND)", k->name);
    }
    assert_true(n_command_keys >= 25);
}

/* ---- a key's default and range are written once, in keys.def ----------------------------- */

static int is_word_char(int c)
{
    return isalnum(c) || c == '_';
}

/* Whether a line of code (comments removed) names key k as a word and holds one of its
 * distinctive numbers (its default, min or max, other than 0 and +-1) anywhere on the line:
 * a default or a range written again beside the name, as `{"feat_size", ..., 1, 65536}` or
 * `.vocab = 41` did. */
static int repeats_key(const char *code, const sb_config_key *k)
{
    if (k->noop || k->kind == SB_KEY_STRING || k->kind == SB_KEY_CHOICE || k->kind == SB_KEY_BOOL ||
        k->kind == SB_KEY_SWITCH)
        return 0;
    const size_t n = strlen(k->name);
    int named = 0;
    for (const char *p = strstr(code, k->name); p != NULL && !named; p = strstr(p + 1, k->name))
        named = (p == code || !is_word_char((unsigned char)p[-1])) &&
                !is_word_char((unsigned char)p[n]);
    if (!named)
        return 0;
    double values[3];
    int n_values = 0;
    if (strcmp(k->def, "none") != 0)
        values[n_values++] = strtod(k->def, NULL);
    values[n_values++] = k->min;
    values[n_values++] = k->max;
    for (const char *p = code; *p != '\0'; p++) {
        if (!isdigit((unsigned char)*p) ||
            (p > code && (is_word_char((unsigned char)p[-1]) || p[-1] == '.')))
            continue;
        char *end;
        const double v = strtod(p, &end);
        if (is_word_char((unsigned char)*end) || *end == '.')
            continue;
        for (int i = 0; i < n_values; i++)
            if (v == values[i] && v != 0 && v != 1)
                return 1;
        p = end - 1;
    }
    return 0;
}

/* The code of one line: C comments (a block comment may span lines: *in_block) or a Python
 * comment and docstring lines removed, into code[size]. */
static void code_of(const char *line, int python, int *in_block, char *code, size_t size)
{
    size_t o = 0;
    if (python) {
        const char *doc = strstr(line, "\"\"\"");
        if (doc != NULL && strstr(doc + 3, "\"\"\"") == NULL)
            *in_block = !*in_block; /* a docstring opens or closes here */
        if (*in_block || doc != NULL) {
            code[0] = '\0';
            return;
        }
    }
    for (const char *p = line; *p != '\0' && o + 1 < size; p++) {
        if (!python && *in_block) {
            if (p[0] == '*' && p[1] == '/') {
                *in_block = 0;
                p++;
            }
            continue;
        }
        if ((python && *p == '#') || (!python && p[0] == '/' && p[1] == '/'))
            break;
        if (!python && p[0] == '/' && p[1] == '*') {
            *in_block = 1;
            p++;
            continue;
        }
        code[o++] = *p;
    }
    code[o] = '\0';
}

/* Scans one file; returns the lines found (printed). */
static int scan_file(const char *path)
{
    const size_t len = strlen(path);
    const int python = len > 3 && strcmp(path + len - 3, ".py") == 0;
    if (!python &&
        !(len > 2 && (strcmp(path + len - 2, ".c") == 0 || strcmp(path + len - 2, ".h") == 0)))
        return 0;
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096], code[4096];
    int in_block = 0, found = 0, number = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        number++;
        code_of(line, python, &in_block, code, sizeof code);
        for (int i = 0; i < sb_config_key_count(); i++)
            if (repeats_key(code, sb_config_key_at(i))) {
                fprintf(stderr,
                        "%s:%d: --%s's default or range written beside its name "
                        "(read it from the key table): %s",
                        path, number, sb_config_key_at(i)->name, line);
                found++;
            }
    }
    fclose(f);
    return found;
}

/* Scans a folder's files and folders, src/config/ (where the table is) left out. */
static int scan_tree(const char *dir)
{
    if (strstr(dir, "src/config") != NULL)
        return 0;
    DIR *d = opendir(dir);
    assert_non_null(d);
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "__pycache__") == 0)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        found += S_ISDIR(st.st_mode) ? scan_tree(path) : scan_file(path);
    }
    closedir(d);
    return found;
}

static const char *source_dir;

static void test_no_default_or_range_outside_the_table(void **state)
{
    (void)state;
    /* the check finds what it is for */
    const sb_config_key *feat = sb_config_find("feat_size"), *mem = sb_config_find("mem_budget");
    assert_true(repeats_key("    {\"feat_size\", SB_OPT_INT, &D, 1, 65536, NULL},", feat));
    assert_true(repeats_key("double budget = cfg->mem_budget > 0 ? cfg->mem_budget : 4.0;", mem));
    assert_false(repeats_key("    int d128 = feat_size * 65536x;", feat));
    int in_block = 0;
    char code[256];
    code_of("x = 1; /* feat_size 65536 */ y = 2;", 0, &in_block, code, sizeof code);
    assert_false(repeats_key(code, feat));
    /* and finds nothing in the sources: src/ (but src/config/), include/, the binding */
    static const char *const trees[] = {"src", "include", "python/selectivbench"};
    int found = 0;
    for (size_t t = 0; t < sizeof trees / sizeof *trees; t++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", source_dir, trees[t]);
        found += scan_tree(dir);
    }
    if (found > 0)
        fail_msg("%d lines write a key's default or range again (listed above)", found);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_config PATH/TO/selectivbench SOURCE_DIR\n");
        return 2;
    }
    binary = argv[1];
    source_dir = argv[2];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_key_round_trips),
        cmocka_unit_test(test_noops_change_nothing),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_seeds),
        cmocka_unit_test(test_defaults_match_the_table),
        cmocka_unit_test(test_help_lists_every_key),
        cmocka_unit_test(test_no_default_or_range_outside_the_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
