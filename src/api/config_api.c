/* config_api.c - the public API's version, errors and configurations (selectivbench.h):
 * wrappers over config/config.h and train/run_setup.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "config/config.h"
#include "core/cpus.h"
#include "core/suggest.h"
#include "task/grammar.h"
#include "train/run_setup.h"

const char *sb_version(void)
{
    return SB_VERSION_STRING;
}

const char *sb_error_message(const sb_error *err)
{
    return err != NULL ? err->msg : "";
}

const char *sb_closest_name(const char *word, const char *const *names, int n_names)
{
    if (word == NULL || names == NULL)
        return NULL;
    sb_suggest near;
    sb_suggest_init(&near, word);
    for (int i = 0; i < n_names; i++)
        if (names[i] != NULL)
            sb_suggest_offer(&near, names[i]);
    return sb_suggest_result(&near);
}

void sb_string_free(char *s)
{
    free(s);
}

sb_status sb_api_config_new(const sb_run_config *run, sb_config **out, sb_error *err)
{
    SB_API_REQUIRE(out, err);
    *out = malloc(sizeof **out);
    if (*out == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for a configuration");
    (*out)->run = *run;
    return SB_OK;
}

sb_status sb_config_create(sb_config **out, sb_error *err)
{
    sb_run_config run = sb_run_config_default();
    return sb_api_config_new(&run, out, err);
}

void sb_config_free(sb_config *cfg)
{
    free(cfg);
}

sb_status sb_config_copy(const sb_config *cfg, sb_config **out, sb_error *err)
{
    SB_API_REQUIRE(cfg, err);
    return sb_api_config_new(&cfg->run, out, err);
}

sb_status sb_config_set_key(sb_config *cfg, const char *key, const char *value, sb_error *err)
{
    SB_API_REQUIRE(cfg, err);
    SB_API_REQUIRE(key, err);
    SB_API_REQUIRE(value, err);
    return sb_config_set(&cfg->run, key, value, err);
}

sb_status sb_config_get_key(const sb_config *cfg, const char *key, char *buf, size_t size,
                            sb_error *err)
{
    SB_API_REQUIRE(cfg, err);
    SB_API_REQUIRE(key, err);
    SB_API_REQUIRE(buf, err);
    const sb_config_key *k = sb_config_find(key);
    if (k == NULL)
        return sb_error_set(err, SB_ERR_INVALID,
                            "unknown key '%s' (sb_config_key_name lists the keys)", key);
    int len = sb_config_format(&cfg->run, k, buf, size);
    if (len < 0 || (size_t)len >= size)
        return sb_error_set(err, SB_ERR_INVALID,
                            "the value of key '%s' needs %d bytes, the buffer has %zu", key,
                            len + 1, size);
    return SB_OK;
}

double sb_config_number(const sb_config *cfg, const char *key)
{
    const sb_config_key *k = cfg != NULL && key != NULL ? sb_config_find(key) : NULL;
    if (k == NULL || k->noop)
        return (double)NAN;
    const char *base = (const char *)&cfg->run + k->offset;
    switch (k->kind) {
    case SB_KEY_INT:
    case SB_KEY_BOOL:
    case SB_KEY_SWITCH: return *(const int *)base;
    case SB_KEY_INT64: return (double)*(const int64_t *)base;
    case SB_KEY_U64: return (double)*(const uint64_t *)base;
    case SB_KEY_DOUBLE: return *(const double *)base;
    case SB_KEY_OPT_INT: return *(const int *)base < 0 ? (double)NAN : *(const int *)base;
    case SB_KEY_OPT_DOUBLE: return *(const double *)base < 0 ? (double)NAN : *(const double *)base;
    case SB_KEY_CHOICE: return *(const int *)base; /* the choice's index */
    case SB_KEY_STRING: return (double)NAN;
    }
    return (double)NAN;
}

const char *sb_config_text(const sb_config *cfg, const char *key)
{
    const sb_config_key *k = cfg != NULL && key != NULL ? sb_config_find(key) : NULL;
    if (k == NULL || k->noop || k->kind != SB_KEY_STRING)
        return NULL;
    return (const char *)&cfg->run + k->offset;
}

sb_status sb_config_check(const sb_config *cfg, sb_error *err)
{
    SB_API_REQUIRE(cfg, err);
    return sb_run_config_check(&cfg->run, err);
}

sb_status sb_config_to_json(const sb_config *cfg, int training_only, char **json, sb_error *err)
{
    SB_API_REQUIRE(cfg, err);
    SB_API_REQUIRE(json, err);
    *json = sb_run_config_json_string(&cfg->run, training_only);
    if (*json == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for a configuration's JSON");
    return SB_OK;
}

sb_status sb_config_from_json(const char *json, sb_config **out, sb_error *err)
{
    SB_API_REQUIRE(out, err);
    *out = NULL;
    SB_API_REQUIRE(json, err);
    sb_run_config run;
    sb_status st = sb_run_config_from_json(json, &run, err);
    if (st != SB_OK)
        return st;
    return sb_api_config_new(&run, out, err);
}

sb_status sb_config_flags(const sb_config *cfg, char **flags, sb_error *err)
{
    SB_API_REQUIRE(flags, err);
    *flags = NULL;
    SB_API_REQUIRE(cfg, err);
    *flags = sb_run_config_flags(&cfg->run);
    if (*flags == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for a configuration's flags");
    return SB_OK;
}

void sb_config_run_hash(const sb_config *cfg, char hash[17])
{
    SB_ASSERT(cfg != NULL && hash != NULL);
    sb_run_config_hash(&cfg->run, 0, hash);
}

void sb_config_training_hash(const sb_config *cfg, char hash[17])
{
    SB_ASSERT(cfg != NULL && hash != NULL);
    sb_run_config_hash(&cfg->run, 1, hash);
}

/* ---- the key table ---------------------------------------------------------------------- */

/* sb_config_key_count is config.c's own (the same function). */

const char *sb_config_key_name(int i)
{
    const sb_config_key *k = sb_config_key_at(i);
    return k != NULL ? k->name : NULL;
}

const char *sb_config_key_type(int i)
{
    const sb_config_key *k = sb_config_key_at(i);
    if (k == NULL)
        return NULL;
    switch (k->kind) {
    case SB_KEY_INT: return "int";
    case SB_KEY_INT64: return "int64";
    case SB_KEY_U64: return "uint64";
    case SB_KEY_DOUBLE: return "double";
    case SB_KEY_BOOL: return "bool";
    case SB_KEY_SWITCH: return "switch";
    case SB_KEY_CHOICE: return "choice";
    case SB_KEY_STRING: return "string";
    case SB_KEY_OPT_INT: return "optional int";
    case SB_KEY_OPT_DOUBLE: return "optional double";
    }
    return "unknown";
}

const char *sb_config_key_default(int i)
{
    const sb_config_key *k = sb_config_key_at(i);
    if (k == NULL)
        return NULL;
    return k->def != NULL ? k->def : "";
}

const char *sb_config_key_help(int i)
{
    const sb_config_key *k = sb_config_key_at(i);
    if (k == NULL)
        return NULL;
    return k->help != NULL ? k->help : "";
}

int sb_config_key_range(int i, double *min, double *max)
{
    const sb_config_key *k = sb_config_key_at(i);
    if (k == NULL || k->kind == SB_KEY_STRING || k->kind == SB_KEY_CHOICE)
        return -1;
    if (min != NULL)
        *min = k->min;
    if (max != NULL)
        *max = k->max;
    return 0;
}

int sb_config_key_hashes(int i)
{
    const sb_config_key *k = sb_config_key_at(i);
    if (k == NULL || k->noop)
        return 0;
    switch (k->hash) {
    case SB_KEY_HASH_NONE: return 0;
    case SB_KEY_HASH_RUN:
    case SB_KEY_HASH_RUN_SET: return SB_KEY_IN_RUN_HASH;
    case SB_KEY_HASH_TRAINING:
    case SB_KEY_HASH_TRAINING_SET: return SB_KEY_IN_RUN_HASH | SB_KEY_IN_TRAINING_HASH;
    }
    return 0;
}

int sb_config_key_is_noop(int i)
{
    const sb_config_key *k = sb_config_key_at(i);
    return k != NULL && k->noop;
}

/* ---- the command line's needs: the key table by name, groups and choices --------------- */

/* sb_status_exit_code is status.c's own; sb_config_parse_bool, _int and _double are
 * config.c's own (the same functions). */

int sb_config_key_find(const char *name)
{
    if (name == NULL)
        return -1;
    for (int i = 0; i < sb_config_key_count(); i++)
        if (strcmp(sb_config_key_at(i)->name, name) == 0)
            return i;
    return -1;
}

int sb_config_key_group(int i)
{
    const sb_config_key *k = sb_config_key_at(i);
    if (k == NULL)
        return -1;
    switch (k->group) {
    case SB_KEY_GROUP_GRAMMAR: return SB_KEYS_GRAMMAR;
    case SB_KEY_GROUP_TASK: return SB_KEYS_TASK;
    case SB_KEY_GROUP_RUN: return SB_KEYS_RUN;
    case SB_KEY_GROUP_RUNTIME: return SB_KEYS_RUNTIME;
    case SB_KEY_GROUP_TRAIN: return SB_KEYS_TRAIN;
    case SB_KEY_GROUP_COMMAND: return SB_KEYS_COMMAND;
    }
    return -1;
}

const char *sb_config_key_choice(int i, int c)
{
    const sb_config_key *k = sb_config_key_at(i);
    if (k == NULL || k->kind != SB_KEY_CHOICE || k->choices == NULL || c < 0)
        return NULL;
    for (int j = 0; j < c; j++)
        if (k->choices[j] == NULL)
            return NULL;
    return k->choices[c];
}

sb_status sb_config_assign(sb_config *dst, const sb_config *src, sb_error *err)
{
    SB_API_REQUIRE(dst, err);
    SB_API_REQUIRE(src, err);
    dst->run = src->run;
    return SB_OK;
}

sb_status sb_config_reset(sb_config *cfg, sb_error *err)
{
    SB_API_REQUIRE(cfg, err);
    cfg->run = sb_run_config_default();
    return SB_OK;
}

void sb_config_grammar_sizes(const sb_config *cfg, int *vocab, int *amb, int *amb_depth)
{
    SB_ASSERT(cfg != NULL);
    const sb_grammar_config g = sb_grammar_config_effective(&cfg->run.task.grammar);
    if (vocab != NULL)
        *vocab = g.vocab;
    if (amb != NULL)
        *amb = g.amb;
    if (amb_depth != NULL)
        *amb_depth = g.amb_depth;
}

int sb_default_threads(void)
{
    return sb_cpu_count();
}
