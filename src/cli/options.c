/* options.c - argparse-style flag parsing for the CLI (see options.h). */
#include "cli/options.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *program = "selectivbench";

void sb_cli_set_program(const char *argv0)
{
    if (argv0 != NULL && argv0[0] != '\0')
        program = argv0;
}

const char *sb_cli_program(void)
{
    return program;
}

sb_option *sb_options_find(sb_option *opts, int n_opts, const char *name)
{
    for (int i = 0; i < n_opts; i++)
        if (strcmp(opts[i].name, name) == 0)
            return &opts[i];
    return NULL;
}

int sb_options_count(const sb_option *opts, int cap)
{
    int n = 0;
    while (n < cap && opts[n].name != NULL)
        n++;
    return n;
}

int sb_option_is_switch(const sb_option *o)
{
    if (o->type == SB_OPT_SWITCH)
        return 1;
    if (o->type == SB_OPT_KEY) {
        const char *type = sb_config_key_type(sb_config_key_find(o->name));
        return type != NULL && strcmp(type, "switch") == 0;
    }
    return 0;
}

const char *sb_cli_closest_model(const char *model)
{
    const char *names[64];
    int n_names = 0;
    for (int i = 0; i < sb_models_count() && n_names < 64; i++) {
        names[n_names++] = sb_models_name(i);
        if (strcmp(names[n_names - 1], model) == 0)
            return NULL;
    }
    return sb_closest_name(model, names, n_names);
}

sb_status sb_option_set(sb_option *o, const char *value, sb_error *err)
{
    if (value == NULL && !sb_option_is_switch(o))
        return sb_error_set(err, SB_ERR_INVALID, "--%s needs a value", o->name);
    switch (o->type) {
    case SB_OPT_KEY: {
        /* a mistyped --model is refused where it is read, with the name it was meant to be;
         * a name close to none is left to the configuration check (which lists them all) */
        const char *model_hint =
            strcmp(o->name, "model") == 0 && value != NULL ? sb_cli_closest_model(value) : NULL;
        if (model_hint != NULL)
            return sb_error_set(err, SB_ERR_INVALID,
                                "unknown --model '%s'; did you mean '%s'? (%s models lists them)",
                                value, model_hint, sb_cli_program());
        sb_status st = sb_config_set_key(o->dest, o->name, value != NULL ? value : "True", err);
        if (st == SB_OK)
            o->seen = 1;
        return st;
    }
    case SB_OPT_STRING: *(const char **)o->dest = value; break;
    case SB_OPT_SWITCH: {
        int v = 1;
        if (value != NULL && !sb_config_parse_bool(value, &v))
            return sb_error_set(err, SB_ERR_INVALID,
                                "--%s is a switch; write it alone or as --%s=True", o->name,
                                o->name);
        *(int *)o->dest = v;
        break;
    }
    }
    o->seen = 1;
    return SB_OK;
}

/* The error for a flag no option has: the closest option when one is near (a typo). */
static sb_status unknown_flag(const sb_option *opts, int n_opts, const char *name, sb_error *err)
{
    const char *names[256];
    int n_names = 0;
    for (int i = 0; i < n_opts && n_names < (int)(sizeof names / sizeof *names); i++)
        names[n_names++] = opts[i].name;
    const char *hint = sb_closest_name(name, names, n_names);
    if (hint != NULL)
        return sb_error_set(err, SB_ERR_INVALID, "unknown flag --%s; did you mean --%s?", name,
                            hint);
    return sb_error_set(err, SB_ERR_INVALID, "unknown flag --%s; see --help for the list", name);
}

sb_status sb_options_parse(sb_option *opts, int n_opts, int argc, char **argv, int first,
                           const char **positional, int max_positional, int *n_positional,
                           int *help, sb_error *err)
{
    *n_positional = 0;
    *help = 0;
    for (int i = first; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            *help = 1;
            continue;
        }
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
            if (*n_positional >= max_positional)
                return sb_error_set(err, SB_ERR_INVALID,
                                    "unexpected argument '%s' (flags take one value each)", arg);
            positional[(*n_positional)++] = arg;
            continue;
        }
        char name[128];
        const char *value = NULL;
        const char *eq = strchr(arg + 2, '=');
        size_t len = eq != NULL ? (size_t)(eq - (arg + 2)) : strlen(arg + 2);
        if (len >= sizeof name)
            return sb_error_set(err, SB_ERR_INVALID, "unknown flag '%.40s...'", arg);
        memcpy(name, arg + 2, len);
        name[len] = '\0';
        /* accept --flag-name for --flag_name */
        for (char *p = name; *p != '\0'; p++)
            if (*p == '-')
                *p = '_';
        sb_option *o = sb_options_find(opts, n_opts, name);
        if (o == NULL)
            return unknown_flag(opts, n_opts, name, err);
        if (eq != NULL)
            value = eq + 1;
        else if (!sb_option_is_switch(o) && i + 1 < argc)
            value = argv[++i];
        sb_status st = sb_option_set(o, value, err);
        if (st != SB_OK)
            return st;
    }
    return SB_OK;
}

void sb_options_print_help(FILE *f, const sb_option *opts, int n_opts)
{
    for (int i = 0; i < n_opts; i++) {
        const sb_option *o = &opts[i];
        char left[64];
        const char *meta = o->metavar;
        if (meta == NULL) {
            switch (o->type) {
            case SB_OPT_STRING: meta = "S"; break;
            case SB_OPT_SWITCH: meta = ""; break;
            case SB_OPT_KEY: meta = ""; break;
            }
        }
        snprintf(left, sizeof left, "--%s%s%s", o->name, meta[0] ? " " : "", meta);
        fprintf(f, "  %-30s %s\n", left, o->help);
    }
}

/* A value's shape in --help: N, X, True|False, the choices, NAME or nothing (a switch). */
static const char *key_metavar(int i, char *buf, size_t size)
{
    const char *type = sb_config_key_type(i);
    if (strcmp(type, "int") == 0 || strcmp(type, "int64") == 0 || strcmp(type, "uint64") == 0 ||
        strcmp(type, "optional int") == 0)
        return "N";
    if (strcmp(type, "double") == 0 || strcmp(type, "optional double") == 0)
        return "X";
    if (strcmp(type, "bool") == 0)
        return "True|False";
    if (strcmp(type, "string") == 0) /* the model's name, or a file of the runtime keys */
        return sb_config_key_group(i) >= SB_KEYS_RUNTIME ? "PATH" : "NAME";
    if (strcmp(type, "choice") == 0) {
        buf[0] = '\0';
        for (int c = 0; sb_config_key_choice(i, c) != NULL; c++) {
            if (c > 0)
                strncat(buf, "|", size - strlen(buf) - 1);
            strncat(buf, sb_config_key_choice(i, c), size - strlen(buf) - 1);
        }
        return strlen(buf) <= 20 ? buf : "NAME";
    }
    return ""; /* a switch */
}

/* Key i's help line: `text` (the table's when NULL), with the default appended when the
 * text does not give it already (no-ops have none to give, a switch is off unless given):
 * the table's, or with cfg the value cfg holds (a command that starts from other values). */
static const char *key_help(int i, const sb_config *cfg, const char *text, char *buf, size_t size)
{
    const char *help = text != NULL ? text : sb_config_key_help(i);
    char value[128];
    const char *def = sb_config_key_default(i);
    if (cfg != NULL &&
        sb_config_get_key(cfg, sb_config_key_name(i), value, sizeof value, NULL) == SB_OK)
        def = value;
    if (sb_config_key_is_noop(i) || strstr(help, "default") != NULL || def == NULL ||
        def[0] == '\0' || strcmp(def, "none") == 0 || strcmp(sb_config_key_type(i), "switch") == 0)
        return help;
    snprintf(buf, size, "%s (default %s)", help, def);
    return buf;
}

/* One metavar and one help buffer per key: the table is fixed, an option points at them. */
#define MAX_KEYS 256
static char key_meta[MAX_KEYS][32], key_help_text[MAX_KEYS][400];

static sb_option key_option(sb_config *cfg, int i, const sb_config *help_cfg, const char *text)
{
    const char *meta = key_metavar(i, key_meta[i], sizeof key_meta[0]);
    return (sb_option){sb_config_key_name(i),
                       SB_OPT_KEY,
                       cfg,
                       meta,
                       key_help(i, help_cfg, text, key_help_text[i], sizeof key_help_text[0]),
                       0};
}

void sb_options_add_keys(sb_config *cfg, int group, sb_option *opts, int *n)
{
    for (int i = 0; i < sb_config_key_count() && i < MAX_KEYS; i++)
        if (sb_config_key_group(i) <= group)
            opts[(*n)++] = key_option(cfg, i, NULL, NULL);
}

void sb_options_add_key(sb_config *cfg, const char *name, const char *help, sb_option *opts, int *n)
{
    int i = sb_config_key_find(name);
    if (i >= 0 && i < MAX_KEYS) /* a name of the table, written in the command's source */
        opts[(*n)++] = key_option(cfg, i, cfg, help);
}

sb_status sb_parse_index_list(const char *text, int64_t limit, int64_t **out, int64_t *n,
                              sb_error *err)
{
    *out = NULL;
    *n = 0;
    int64_t cap = 16, count = 0;
    int64_t *list = malloc((size_t)cap * sizeof *list);
    if (list == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory");
    const char *p = text;
    while (*p != '\0') {
        char *end;
        errno = 0;
        long long a = strtoll(p, &end, 10);
        if (end == p || errno != 0 || a < 0)
            goto bad;
        long long b = a;
        p = end;
        if (*p == '-') {
            p++;
            b = strtoll(p, &end, 10);
            if (end == p || errno != 0 || b < a)
                goto bad;
            p = end;
        }
        if (*p == ',')
            p++;
        else if (*p != '\0')
            goto bad;
        if (b >= limit) {
            free(list);
            return sb_error_set(err, SB_ERR_INVALID,
                                "--samples: index %lld is outside the split (0 to %lld)", b,
                                (long long)limit - 1);
        }
        for (long long v = a; v <= b; v++) {
            if (count == cap) {
                cap *= 2;
                int64_t *grown = realloc(list, (size_t)cap * sizeof *list);
                if (grown == NULL) {
                    free(list);
                    return sb_error_set(err, SB_ERR_NOMEM, "out of memory");
                }
                list = grown;
            }
            list[count++] = v;
        }
    }
    if (count == 0)
        goto bad;
    *out = list;
    *n = count;
    return SB_OK;
bad:
    free(list);
    return sb_error_set(err, SB_ERR_INVALID,
                        "--samples: cannot read '%s'; write indices and ranges like 0-4,57,999",
                        text);
}
