/* config.c - the key table and what is generated from it (see config.h, keys.def). */
#include "config/config.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/json_writer.h"
#include "core/suggest.h"

static const char *const optimizer_names[] = {"adam", "adamw", NULL};
static const char *const scheduler_names[] = {"cosine_schedule_with_warmup",
                                              "cosine_schedule_with_warmup_lr_min", NULL};
static const char *const dist_dur_names[] = {"uniform", "lognormal", NULL};
static const char *const protocol_names[] = {"reference", "clean", NULL};
static const char *const gap_rng_names[] = {"derived", "reference", NULL};
static const char *const gemm_names[] = {"auto", "openblas", "onednn", NULL}; /* sb_gemm_kind */
static const char *const precision_names[] = {"fp32", "bf16", NULL};       /* sb_precision_kind */
static const char *const split_names[] = {"train", "test", "valid", NULL}; /* sb_split */
/* the probe's sections (all, then one each), readouts and feature frames, in the order of
 * the public header's SB_PROBE_* values */
static const char *const probe_section_names[] = {"all", "readout", "gates", "retention", NULL};
static const char *const probe_readout_names[] = {"lda", "ridge", NULL};
static const char *const probe_frame_names[] = {"symbol", "last", NULL};

/* --task_seed's default, used when --same_seed False (train.py) */
#define DEFAULT_TASK_SEED 42

/* ---- the table, from keys.def ------------------------------------------------------ */

#define FIELD_SIZE(field) sizeof(((sb_run_config *)0)->field)
static const sb_config_key keys[] = {
#define SB_KEY(name, kind, field, def, min, max, choices, hash, group, help)                       \
    {#name,                                                                                        \
     SB_KEY_##kind,                                                                                \
     0,                                                                                            \
     offsetof(sb_run_config, field),                                                               \
     FIELD_SIZE(field),                                                                            \
     def,                                                                                          \
     min,                                                                                          \
     max,                                                                                          \
     choices,                                                                                      \
     SB_KEY_HASH_##hash,                                                                           \
     SB_KEY_GROUP_##group,                                                                         \
     help},
#define SB_NOOP(name, kind, min, max, group, help)                                                 \
    {#name, SB_KEY_##kind, 1, 0, 0, "", min, max, NULL, SB_KEY_HASH_NONE, SB_KEY_GROUP_##group,    \
     help},
#include "config/keys.def"
#undef SB_KEY
#undef SB_NOOP
};
#undef FIELD_SIZE

#define N_KEYS ((int)(sizeof keys / sizeof *keys))

int sb_config_key_count(void)
{
    return N_KEYS;
}

const sb_config_key *sb_config_key_at(int i)
{
    return i >= 0 && i < N_KEYS ? &keys[i] : NULL;
}

const sb_config_key *sb_config_find(const char *name)
{
    for (int i = 0; i < N_KEYS; i++)
        if (strcmp(keys[i].name, name) == 0)
            return &keys[i];
    return NULL;
}

/* ---- reading values ---------------------------------------------------------------- */

int sb_config_parse_bool(const char *s, int *out)
{
    static const char *yes[] = {"yes", "true", "t", "y", "1"};
    static const char *no[] = {"no", "false", "f", "n", "0"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = 1;
            return 1;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = 0;
            return 1;
        }
    }
    return 0;
}

/* Python's int() as argparse applies it: optional sign and decimal digits ("64.0" is
 * rejected there, so it is here). */
int sb_config_parse_int(const char *s, long long *out)
{
    if (*s == '\0')
        return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return 0;
    *out = v;
    return 1;
}

int sb_config_parse_double(const char *s, double *out)
{
    if (*s == '\0')
        return 0;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno == ERANGE || *end != '\0' || !isfinite(v))
        return 0;
    *out = v;
    return 1;
}

static int is_none(const char *s)
{
    return strcasecmp(s, "none") == 0;
}

/* Parses value for key k and, unless k is a no-op, stores it in cfg. check_range 0 is for
 * the defaults. */
static sb_status store(sb_run_config *cfg, const sb_config_key *k, const char *value,
                       int check_range, sb_error *err)
{
    char *base = k->noop ? NULL : (char *)cfg + k->offset;
    switch (k->kind) {
    case SB_KEY_INT:
    case SB_KEY_INT64:
    case SB_KEY_U64:
    case SB_KEY_OPT_INT: {
        long long v;
        if (k->kind == SB_KEY_OPT_INT && is_none(value)) {
            *(int *)base = -1;
            return SB_OK;
        }
        if (!sb_config_parse_int(value, &v))
            return sb_error_set(err, SB_ERR_INVALID, "--%s: '%s' is not an integer", k->name,
                                value);
        if (check_range && ((double)v < k->min || (double)v > k->max))
            return sb_error_set(err, SB_ERR_INVALID, "--%s %s is out of range [%.0f, %.0f]",
                                k->name, value, k->min, k->max);
        if (base == NULL)
            return SB_OK;
        if (k->kind == SB_KEY_INT64)
            *(int64_t *)base = (int64_t)v;
        else if (k->kind == SB_KEY_U64)
            *(uint64_t *)base = (uint64_t)v;
        else
            *(int *)base = (int)v;
        return SB_OK;
    }
    case SB_KEY_DOUBLE:
    case SB_KEY_OPT_DOUBLE: {
        double v;
        if (k->kind == SB_KEY_OPT_DOUBLE && is_none(value)) {
            *(double *)base = -1.0;
            return SB_OK;
        }
        if (!sb_config_parse_double(value, &v))
            return sb_error_set(err, SB_ERR_INVALID, "--%s: '%s' is not a finite number", k->name,
                                value);
        if (check_range && (v < k->min || v > k->max))
            return sb_error_set(err, SB_ERR_INVALID, "--%s %s is out of range [%g, %g]", k->name,
                                value, k->min, k->max);
        if (base != NULL)
            *(double *)base = v;
        return SB_OK;
    }
    case SB_KEY_BOOL:
    case SB_KEY_SWITCH: {
        int v;
        if (!sb_config_parse_bool(value, &v)) {
            if (k->kind == SB_KEY_SWITCH)
                return sb_error_set(err, SB_ERR_INVALID,
                                    "--%s is a switch; write it alone or as --%s=True", k->name,
                                    k->name);
            return sb_error_set(err, SB_ERR_INVALID,
                                "--%s: '%s' is not a boolean; use True or False", k->name, value);
        }
        if (base != NULL)
            *(int *)base = v;
        return SB_OK;
    }
    case SB_KEY_CHOICE: {
        for (int c = 0; k->choices[c] != NULL; c++) {
            if (strcmp(k->choices[c], value) == 0) {
                if (base != NULL)
                    *(int *)base = c;
                return SB_OK;
            }
        }
        char list[256] = "";
        for (int c = 0; k->choices[c] != NULL; c++) {
            if (c > 0)
                strncat(list, ", ", sizeof list - strlen(list) - 1);
            strncat(list, k->choices[c], sizeof list - strlen(list) - 1);
        }
        sb_suggest near;
        sb_suggest_init(&near, value);
        for (int c = 0; k->choices[c] != NULL; c++)
            sb_suggest_offer(&near, k->choices[c]);
        const char *hint = sb_suggest_result(&near);
        if (hint != NULL)
            return sb_error_set(err, SB_ERR_INVALID,
                                "--%s: '%s' is not one of: %s; did you mean '%s'?", k->name, value,
                                list, hint);
        return sb_error_set(err, SB_ERR_INVALID, "--%s: '%s' is not one of: %s", k->name, value,
                            list);
    }
    case SB_KEY_STRING:
        if (base == NULL)
            return SB_OK;
        if (strlen(value) >= k->size)
            return sb_error_set(err, SB_ERR_INVALID, "--%s '%s' is too long", k->name, value);
        snprintf(base, k->size, "%s", value);
        return SB_OK;
    }
    return SB_OK;
}

/* ---- derived logic: every key whose value is more than a field ---------------------- */

/* train.py: task_seed = seed if args.same_seed else args.task_seed */
static void resolve_task_seed(sb_run_config *cfg)
{
    cfg->task.grammar.seed = cfg->same_seed ? cfg->seed : cfg->requested_task_seed;
}

/* Called after key k was set to value. */
static sb_status apply_derived(sb_run_config *cfg, const sb_config_key *k, const char *value,
                               sb_error *err)
{
    if (strcmp(k->name, "task_seed") == 0)
        cfg->requested_task_seed = cfg->task.grammar.seed;
    if (strcmp(k->name, "continued_training") == 0) /* train.py's name of --resume */
        cfg->rt.resume = cfg->rt.continued_training;
    if (strcmp(k->name, "seed") == 0 || strcmp(k->name, "same_seed") == 0 ||
        strcmp(k->name, "task_seed") == 0)
        resolve_task_seed(cfg);
    if (strcmp(k->name, "att_dropout") == 0 && cfg->att_dropout)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--att_dropout True is not supported (the paper's runs use False)");
    if (strcmp(k->name, "base_set") == 0 && strcmp(value, "one_hot") != 0)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--base_set %s is not supported: only one_hot (the paper's input) is",
                            value);
    return SB_OK;
}

/* The seed inputs of a configuration read from JSON, which records only their result. */
static void derive_seed_inputs(sb_run_config *cfg)
{
    cfg->same_seed = cfg->task.grammar.seed == cfg->seed;
    cfg->requested_task_seed = cfg->same_seed ? DEFAULT_TASK_SEED : cfg->task.grammar.seed;
}

/* The error for a flag no key has: the closest key when one is near (a typo). */
static sb_status unknown_flag(const char *name, sb_error *err)
{
    sb_suggest near;
    sb_suggest_init(&near, name);
    for (int i = 0; i < N_KEYS; i++)
        sb_suggest_offer(&near, keys[i].name);
    const char *hint = sb_suggest_result(&near);
    if (hint != NULL)
        return sb_error_set(err, SB_ERR_INVALID, "unknown flag --%s; did you mean --%s?", name,
                            hint);
    return sb_error_set(err, SB_ERR_INVALID, "unknown flag --%s; see --help for the list", name);
}

sb_status sb_config_set(sb_run_config *cfg, const char *name, const char *value, sb_error *err)
{
    const sb_config_key *k = sb_config_find(name);
    if (k == NULL)
        return unknown_flag(name, err);
    sb_status st = store(cfg, k, value, 1, err);
    if (st != SB_OK)
        return st;
    return apply_derived(cfg, k, value, err);
}

/* ---- defaults ------------------------------------------------------------------------ */

sb_run_config sb_run_config_default(void)
{
    sb_run_config c;
    memset(&c, 0, sizeof c);
    sb_error err = {0};
    for (int i = 0; i < N_KEYS; i++) {
        sb_status st = keys[i].noop ? SB_OK : store(&c, &keys[i], keys[i].def, 0, &err);
        SB_ASSERT(st == SB_OK); /* keys.def's defaults are valid */
    }
    c.requested_task_seed = DEFAULT_TASK_SEED;
    resolve_task_seed(&c);
    return c;
}

sb_task_config sb_task_config_default(void)
{
    return sb_run_config_default().task;
}

/* ---- checks and text ----------------------------------------------------------------- */

/* The shortest text that reads back as v (0.003, not 0.0030000000000000001). */
static int format_real(double v, char *buf, size_t size)
{
    char text[40];
    sb_format_double(text, sizeof text, v);
    return snprintf(buf, size, "%s", text);
}

int sb_config_format(const sb_run_config *cfg, const sb_config_key *k, char *buf, size_t size)
{
    if (k->noop)
        return snprintf(buf, size, "%s", "");
    const char *base = (const char *)cfg + k->offset;
    switch (k->kind) {
    case SB_KEY_INT: return snprintf(buf, size, "%d", *(const int *)base);
    case SB_KEY_INT64: return snprintf(buf, size, "%lld", (long long)*(const int64_t *)base);
    case SB_KEY_U64:
        return snprintf(buf, size, "%llu", (unsigned long long)*(const uint64_t *)base);
    case SB_KEY_DOUBLE: return format_real(*(const double *)base, buf, size);
    case SB_KEY_BOOL:
    case SB_KEY_SWITCH: return snprintf(buf, size, "%s", *(const int *)base ? "True" : "False");
    case SB_KEY_CHOICE: return snprintf(buf, size, "%s", k->choices[*(const int *)base]);
    case SB_KEY_STRING: return snprintf(buf, size, "%s", base);
    case SB_KEY_OPT_INT:
        if (*(const int *)base < 0)
            return snprintf(buf, size, "none");
        return snprintf(buf, size, "%d", *(const int *)base);
    case SB_KEY_OPT_DOUBLE:
        if (*(const double *)base < 0)
            return snprintf(buf, size, "none");
        return format_real(*(const double *)base, buf, size);
    }
    return 0;
}

sb_status sb_config_check_ranges(const sb_run_config *cfg, sb_error *err)
{
    for (int i = 0; i < N_KEYS; i++) {
        const sb_config_key *k = &keys[i];
        if (k->noop)
            continue;
        const char *base = (const char *)cfg + k->offset;
        double v;
        switch (k->kind) {
        case SB_KEY_INT: v = *(const int *)base; break;
        case SB_KEY_INT64: v = (double)*(const int64_t *)base; break;
        case SB_KEY_U64: v = (double)*(const uint64_t *)base; break;
        case SB_KEY_DOUBLE: v = *(const double *)base; break;
        case SB_KEY_OPT_INT:
            if (*(const int *)base < 0)
                continue;
            v = *(const int *)base;
            break;
        case SB_KEY_OPT_DOUBLE:
            if (*(const double *)base < 0)
                continue;
            v = *(const double *)base;
            break;
        case SB_KEY_BOOL:
        case SB_KEY_SWITCH: {
            int b = *(const int *)base;
            if (b != 0 && b != 1)
                return sb_error_set(err, SB_ERR_INVALID, "--%s %d is not a boolean", k->name, b);
            continue;
        }
        case SB_KEY_CHOICE: {
            int c = *(const int *)base, n = 0;
            while (k->choices[n] != NULL)
                n++;
            if (c < 0 || c >= n)
                return sb_error_set(err, SB_ERR_INVALID, "--%s: choice %d is not one of the %d",
                                    k->name, c, n);
            continue;
        }
        default: continue;
        }
        if (!(v >= k->min && v <= k->max)) {
            char text[64];
            sb_config_format(cfg, k, text, sizeof text);
            return sb_error_set(err, SB_ERR_INVALID, "--%s %s is out of range [%g, %g]", k->name,
                                text, k->min, k->max);
        }
    }
    return SB_OK;
}

/* ---- canonical JSON and hashes ------------------------------------------------------- */

static void write_key(const sb_run_config *cfg, const sb_config_key *k, sb_json *j)
{
    const char *base = (const char *)cfg + k->offset;
    sb_json_key(j, k->name);
    switch (k->kind) {
    case SB_KEY_INT: sb_json_int(j, *(const int *)base); break;
    case SB_KEY_INT64: sb_json_int(j, *(const int64_t *)base); break;
    case SB_KEY_U64: sb_json_uint(j, *(const uint64_t *)base); break;
    case SB_KEY_DOUBLE: sb_json_double(j, *(const double *)base); break;
    case SB_KEY_BOOL:
    case SB_KEY_SWITCH: sb_json_bool(j, *(const int *)base); break;
    case SB_KEY_STRING: sb_json_string(j, base); break;
    case SB_KEY_CHOICE: sb_json_string(j, k->choices[*(const int *)base]); break;
    case SB_KEY_OPT_DOUBLE:
        if (*(const double *)base < 0)
            sb_json_null(j);
        else
            sb_json_double(j, *(const double *)base);
        break;
    case SB_KEY_OPT_INT:
        if (*(const int *)base < 0)
            sb_json_null(j);
        else
            sb_json_int(j, *(const int *)base);
        break;
    }
}

/* Whether a key holds its default (the TRAINING_SET and RUN_SET keys: CHOICE, INT and
 * OPT_INT ones; an OPT_INT key's default is "none", any negative value). */
static int is_default(const sb_run_config *cfg, const sb_config_key *k)
{
    const int value = *(const int *)((const char *)cfg + k->offset);
    if (k->kind == SB_KEY_INT)
        return value == atoi(k->def);
    if (k->kind == SB_KEY_OPT_INT)
        return strcmp(k->def, "none") == 0 ? value < 0 : value == atoi(k->def);
    return k->kind == SB_KEY_CHOICE && strcmp(k->choices[value], k->def) == 0;
}

void sb_run_config_write_json(const sb_run_config *cfg, sb_json *j, int training_only)
{
    sb_json_object_begin(j);
    for (int i = 0; i < N_KEYS; i++) {
        sb_key_hash h = keys[i].hash;
        if ((h == SB_KEY_HASH_TRAINING_SET || h == SB_KEY_HASH_RUN_SET) &&
            is_default(cfg, &keys[i]))
            continue;
        if (h == SB_KEY_HASH_TRAINING || h == SB_KEY_HASH_TRAINING_SET ||
            ((h == SB_KEY_HASH_RUN || h == SB_KEY_HASH_RUN_SET) && !training_only))
            write_key(cfg, &keys[i], j);
    }
    sb_json_object_end(j);
}

char *sb_run_config_json_string(const sb_run_config *cfg, int training_only)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f == NULL)
        return NULL;
    sb_json j;
    sb_json_init(&j, f, 0);
    sb_run_config_write_json(cfg, &j, training_only);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

void sb_run_config_hash(const sb_run_config *cfg, int training_only, char out[17])
{
    char *text = sb_run_config_json_string(cfg, training_only);
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = text != NULL ? text : ""; *p != '\0'; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    free(text);
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

/* Whether text can stand in a shell command unquoted. */
static int shell_plain(const char *text)
{
    if (*text == '\0')
        return 0;
    for (const char *p = text; *p != '\0'; p++)
        if (!isalnum((unsigned char)*p) && strchr("_.,:/+-=@%", *p) == NULL)
            return 0;
    return 1;
}

/* Appends text to f, in single quotes unless it is plain. */
static void put_shell_word(FILE *f, const char *text)
{
    if (shell_plain(text)) {
        fputs(text, f);
        return;
    }
    fputc('\'', f);
    for (const char *p = text; *p != '\0'; p++)
        fputs(*p == '\'' ? "'\\''" : (char[2]){*p, '\0'}, f);
    fputc('\'', f);
}

char *sb_run_config_flags(const sb_run_config *cfg)
{
    const sb_run_config def = sb_run_config_default();
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f == NULL)
        return NULL;
    int first = 1;
    for (int i = 0; i < N_KEYS; i++) {
        const sb_config_key *k = &keys[i];
        char value[512], base[512];
        /* with same_seed (the default) the task seed follows --seed: no flag of its own;
         * the model is always named (the one flag every reader looks for) */
        if (k->noop || k->group >= SB_KEY_GROUP_RUNTIME || /* where, not what */
            (cfg->same_seed && strcmp(k->name, "task_seed") == 0) ||
            sb_config_format(cfg, k, value, sizeof value) >= (int)sizeof value ||
            sb_config_format(&def, k, base, sizeof base) >= (int)sizeof base ||
            (strcmp(value, base) == 0 && strcmp(k->name, "model") != 0))
            continue;
        fprintf(f, "%s--%s", first ? "" : " ", k->name);
        first = 0;
        if (k->kind == SB_KEY_SWITCH && strcmp(value, "True") == 0) /* a bare flag */
            continue;
        fputc(' ', f);
        put_shell_word(f, value);
    }
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* An integer of the JSON text for an int field: one that does not fit would wrap around
 * into a plausible-looking wrong value (10^12 read as -727379968), so it is refused with the
 * key's range, which lies inside an int's. */
static sb_status read_int(const sb_config_key *k, json_t *v, int *out, sb_error *err)
{
    json_int_t x = json_integer_value(v);
    if (x < INT_MIN || x > INT_MAX)
        return sb_error_set(err, SB_ERR_INVALID, "%s %lld is out of range [%.0f, %.0f]", k->name,
                            (long long)x, k->min, k->max);
    *out = (int)x;
    return SB_OK;
}

static sb_status read_key(sb_run_config *cfg, const sb_config_key *k, json_t *v, sb_error *err)
{
    char *base = (char *)cfg + k->offset;
    switch (k->kind) {
    case SB_KEY_INT:
    case SB_KEY_BOOL:
    case SB_KEY_SWITCH:
        if (k->kind != SB_KEY_INT && json_is_boolean(v)) {
            *(int *)base = json_is_true(v);
            return SB_OK;
        }
        if (!json_is_integer(v))
            break;
        return read_int(k, v, (int *)base, err);
    case SB_KEY_INT64:
        if (!json_is_integer(v))
            break;
        *(int64_t *)base = (int64_t)json_integer_value(v);
        return SB_OK;
    case SB_KEY_U64:
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            break;
        *(uint64_t *)base = (uint64_t)json_integer_value(v);
        return SB_OK;
    case SB_KEY_DOUBLE:
        if (!json_is_number(v))
            break;
        *(double *)base = json_number_value(v);
        return SB_OK;
    case SB_KEY_STRING:
        if (!json_is_string(v) || strlen(json_string_value(v)) >= k->size)
            break;
        snprintf(base, k->size, "%s", json_string_value(v));
        return SB_OK;
    case SB_KEY_CHOICE:
        if (!json_is_string(v))
            break;
        for (int c = 0; k->choices[c] != NULL; c++)
            if (strcmp(k->choices[c], json_string_value(v)) == 0) {
                *(int *)base = c;
                return SB_OK;
            }
        break;
    case SB_KEY_OPT_DOUBLE:
        if (json_is_null(v)) {
            *(double *)base = -1.0;
            return SB_OK;
        }
        if (!json_is_number(v))
            break;
        *(double *)base = json_number_value(v);
        return SB_OK;
    case SB_KEY_OPT_INT:
        if (json_is_null(v)) {
            *(int *)base = -1;
            return SB_OK;
        }
        if (!json_is_integer(v))
            break;
        return read_int(k, v, (int *)base, err);
    }
    return sb_error_set(err, SB_ERR_INVALID, "configuration key '%s' has a value of the wrong type",
                        k->name);
}

sb_status sb_run_config_from_json(const char *text, sb_run_config *cfg, sb_error *err)
{
    json_error_t jerr;
    json_t *root = json_loads(text, 0, &jerr);
    if (root == NULL)
        return sb_error_set(err, SB_ERR_INVALID, "configuration is not a JSON object (%s)",
                            jerr.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return sb_error_set(err, SB_ERR_INVALID,
                            "configuration is not a JSON object (it is JSON of another type)");
    }
    *cfg = sb_run_config_default();
    const char *name;
    json_t *v;
    sb_status st = SB_OK;
    json_object_foreach (root, name, v) {
        const sb_config_key *k = sb_config_find(name);
        if (k == NULL || k->hash == SB_KEY_HASH_NONE) {
            st = sb_error_set(err, SB_ERR_INVALID, "unknown configuration key '%s'", name);
            break;
        }
        if ((st = read_key(cfg, k, v, err)) != SB_OK)
            break;
    }
    json_decref(root);
    derive_seed_inputs(cfg);
    return st;
}
