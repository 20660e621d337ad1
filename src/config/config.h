/*
 * config.h - the key table: every key of a run (train.py's flags, the canonical JSON of
 * sb_run_config) described once, in src/config/keys.def, and what is built from it:
 * defaults (sb_run_config_default), range checks, setting a key by name from text (the
 * CLI's flags and the sweep files' values both go through sb_config_set), the canonical
 * JSON writer and reader and so the hashes (run_config.h).
 *
 * Derived logic lives in one place, config.c's apply_derived: the task seed follows
 * --seed with --same_seed True and --task_seed otherwise; --continued_training sets
 * --resume (train.py's name of it); --att_dropout True and any --base_set but one_hot are
 * refused. The transformer's width remap and the 5% warm-up
 * default are computed from the stored values (sb_run_config_effective_width,
 * sb_run_config_warmup).
 */
#ifndef SELECTIVBENCH_CONFIG_H
#define SELECTIVBENCH_CONFIG_H

#include <stddef.h>

#include "config/run_config.h"
#include "core/status.h"

typedef enum sb_key_kind {
    SB_KEY_INT,        /* int */
    SB_KEY_INT64,      /* int64_t */
    SB_KEY_U64,        /* uint64_t (seeds) */
    SB_KEY_DOUBLE,     /* double */
    SB_KEY_BOOL,       /* int 0/1, written True/False (train.py's str2bool) */
    SB_KEY_SWITCH,     /* int 0/1, a bare flag (argparse store_true) */
    SB_KEY_CHOICE,     /* int (an enum), an index into choices */
    SB_KEY_STRING,     /* char[size] */
    SB_KEY_OPT_INT,    /* int, negative = not set (JSON null) */
    SB_KEY_OPT_DOUBLE, /* double, negative = not set (JSON null) */
} sb_key_kind;

typedef enum sb_key_hash {
    SB_KEY_HASH_NONE,         /* not in the JSON */
    SB_KEY_HASH_RUN,          /* in the run hash only (test settings, mode) */
    SB_KEY_HASH_TRAINING,     /* in both hashes */
    SB_KEY_HASH_TRAINING_SET, /* in both hashes when not the default (a key added later:
                               * runs that leave it at its default keep their hashes) */
    SB_KEY_HASH_RUN_SET,      /* in the run hash only, when not the default (as TRAINING_SET) */
} sb_key_hash;

/* Which subcommands take a key (each takes its group and every group before it): grammar
 * takes GRAMMAR keys, data and bench GRAMMAR and TASK keys, eval, probe and ceiling up to
 * RUNTIME (threads, memory, files, output), train up to TRAIN (its own runtime keys); no
 * command takes the COMMAND group whole: each takes the keys of it that it reads by name.
 * RUNTIME, TRAIN and COMMAND keys are never in the JSON or a hash (sb_runtime). */
typedef enum sb_key_group {
    SB_KEY_GROUP_GRAMMAR = 0,
    SB_KEY_GROUP_TASK = 1,
    SB_KEY_GROUP_RUN = 2,
    SB_KEY_GROUP_RUNTIME = 3,
    SB_KEY_GROUP_TRAIN = 4,
    SB_KEY_GROUP_COMMAND = 5, /* the other commands' settings, each taken by name */
} sb_key_group;

typedef struct sb_config_key {
    const char *name; /* train.py's flag name and the JSON key */
    sb_key_kind kind;
    int noop;                   /* accepted and ignored: no field */
    size_t offset, size;        /* the field in sb_run_config */
    const char *def;            /* default, as text ("none": not set) */
    double min, max;            /* accepted range of a value (numeric kinds) */
    const char *const *choices; /* SB_KEY_CHOICE: NULL-terminated names */
    sb_key_hash hash;
    sb_key_group group;
    const char *help;
} sb_config_key;

/* The table, in keys.def's order (the JSON order). */
int sb_config_key_count(void);
const sb_config_key *sb_config_key_at(int i);

/* The key of that name, or NULL. */
const sb_config_key *sb_config_find(const char *name);

/* Sets key `name` of cfg from text as a flag value is read: integers in decimal only,
 * finite numbers, True/False (yes/no, 1/0, any case) for BOOL and SWITCH, a choice's
 * name, "none" (any case) for an OPT_ key's unset value. Then applies the key's derived logic.
 * Errors (SB_ERR_INVALID, cfg unchanged in that key) name the flag: unknown key, malformed value,
 * out of range (with the range), a bad choice (with the choices). */
sb_status sb_config_set(sb_run_config *cfg, const char *name, const char *value, sb_error *err);

/* Checks every field against its key's range (one error line naming the flag and the
 * range); sb_run_config_check calls it first. */
sb_status sb_config_check_ranges(const sb_run_config *cfg, sb_error *err);

/* The value of key k in cfg as sb_config_set reads it back ("none" for an unset OPT_
 * key; "" for a no-op). Returns the length snprintf would write. */
int sb_config_format(const sb_run_config *cfg, const sb_config_key *k, char *buf, size_t size);

/* train.py's str2bool and Python's int() and float() as argparse applies them; 1 when
 * the text is valid. Shared with the CLI's own flags. */
int sb_config_parse_bool(const char *s, int *out);
int sb_config_parse_int(const char *s, long long *out);
int sb_config_parse_double(const char *s, double *out);

#endif
