/* sweep.c - W&B grid sweep files (see sweep.h), read with libyaml. */
#include "exp/sweep.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "core/suggest.h"
#include "layers/layer.h"

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

void sb_sweep_free(sb_sweep *s)
{
    if (s == NULL)
        return;
    for (int i = 0; i < s->n_params; i++) {
        free(s->params[i].name);
        for (int v = 0; v < s->params[i].n_values; v++)
            free(s->params[i].values[v]);
        free(s->params[i].values);
    }
    free(s->params);
    for (int i = 0; i < s->n_command; i++)
        free(s->command[i]);
    free(s->command);
    free(s->path);
    free(s->program);
    free(s->method);
    free(s->metric_name);
    free(s->metric_goal);
    free(s);
}

/* ---- document walking helpers ----------------------------------------------------- */

typedef struct loader {
    yaml_document_t doc;
    const char *path;
    sb_error *err;
} loader;

static sb_status bad(loader *ld, const yaml_node_t *node, const char *what)
{
    return sb_error_set(ld->err, SB_ERR_INVALID, "sweep file '%s', line %zu: %s", ld->path,
                        node != NULL ? (size_t)node->start_mark.line + 1 : (size_t)0, what);
}

static const char *scalar(const yaml_node_t *node)
{
    return node != NULL && node->type == YAML_SCALAR_NODE ? (const char *)node->data.scalar.value
                                                          : NULL;
}

/* The value node of `key` in a mapping node, or NULL. */
static yaml_node_t *map_get(loader *ld, yaml_node_t *map, const char *key)
{
    if (map == NULL || map->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        const char *k = scalar(yaml_document_get_node(&ld->doc, p->key));
        if (k != NULL && strcmp(k, key) == 0)
            return yaml_document_get_node(&ld->doc, p->value);
    }
    return NULL;
}

/* A key of a mapping and its line, for the duplicate check. */
typedef struct map_key {
    const char *text;
    size_t line; /* 1-based */
} map_key;

static int cmp_map_key(const void *a, const void *b)
{
    const map_key *x = a, *y = b;
    int c = strcmp(x->text, y->text);
    return c != 0 ? c : (x->line > y->line) - (x->line < y->line);
}

/* The first (by line) key that mapping `map` gives twice: *line_out its second line,
 * *first_out the line of its first. Returns the key or NULL; *nomem on a failed
 * allocation. */
static const char *mapping_duplicate(loader *ld, const yaml_node_t *map, size_t *line_out,
                                     size_t *first_out, int *nomem)
{
    size_t n = (size_t)(map->data.mapping.pairs.top - map->data.mapping.pairs.start);
    if (n < 2)
        return NULL;
    map_key *keys = malloc(n * sizeof *keys);
    if (keys == NULL) {
        *nomem = 1;
        return NULL;
    }
    size_t m = 0;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *key = yaml_document_get_node(&ld->doc, p->key);
        if (scalar(key) != NULL)
            keys[m++] = (map_key){scalar(key), (size_t)key->start_mark.line + 1};
    }
    /* sorted by text, then line: a repeated key sits next to its first occurrence */
    qsort(keys, m, sizeof *keys, cmp_map_key);
    const char *dup = NULL;
    for (size_t i = 1; i < m; i++)
        if (strcmp(keys[i - 1].text, keys[i].text) == 0 &&
            (dup == NULL || keys[i].line < *line_out)) {
            dup = keys[i].text;
            *line_out = keys[i].line;
            *first_out = keys[i - 1].line;
        }
    free(keys);
    return dup;
}

/* Refuses a key given twice in one mapping, at any level of the file (top level, under
 * parameters, inside a parameter): a YAML loader keeps one of the two silently, and W&B gives
 * the repetition no meaning. Every mapping node of the document is looked at once. */
static sb_status check_duplicate_keys(loader *ld)
{
    const char *dup = NULL;
    size_t line = 0, first = 0;
    for (yaml_node_t *node = ld->doc.nodes.start; node < ld->doc.nodes.top; node++) {
        if (node->type != YAML_MAPPING_NODE)
            continue;
        size_t node_line = 0, node_first = 0;
        int nomem = 0;
        const char *d = mapping_duplicate(ld, node, &node_line, &node_first, &nomem);
        if (nomem)
            return sb_error_set(ld->err, SB_ERR_NOMEM, "out of memory reading sweep file '%s'",
                                ld->path);
        if (d != NULL && (dup == NULL || node_line < line)) {
            dup = d;
            line = node_line;
            first = node_first;
        }
    }
    if (dup == NULL)
        return SB_OK;
    return sb_error_set(ld->err, SB_ERR_INVALID,
                        "sweep file '%s', line %zu: key '%.80s' is given twice in one mapping "
                        "(first on line %zu); keep one",
                        ld->path, line, dup, first);
}

static int cmp_param(const void *a, const void *b)
{
    return strcmp(((const sb_sweep_param *)a)->name, ((const sb_sweep_param *)b)->name);
}

/* Reads one parameter definition: {values: [...]} or {value: x}. */
static sb_status load_param(loader *ld, sb_sweep_param *p, yaml_node_t *def)
{
    if (def == NULL || def->type != YAML_MAPPING_NODE)
        return bad(ld, def, "a parameter needs {values: [...]} or {value: x}");
    for (yaml_node_pair_t *q = def->data.mapping.pairs.start; q < def->data.mapping.pairs.top;
         q++) {
        const char *k = scalar(yaml_document_get_node(&ld->doc, q->key));
        if (k == NULL ||
            (strcmp(k, "values") != 0 && strcmp(k, "value") != 0 && strcmp(k, "distribution") != 0))
            return bad(ld, yaml_document_get_node(&ld->doc, q->key),
                       "unknown key in a parameter (expected values or value)");
        if (strcmp(k, "distribution") == 0)
            return bad(ld, yaml_document_get_node(&ld->doc, q->key),
                       "distributions need method random or bayes; only grid sweeps run here");
    }
    yaml_node_t *values = map_get(ld, def, "values");
    yaml_node_t *value = map_get(ld, def, "value");
    if (values != NULL) {
        if (values->type != YAML_SEQUENCE_NODE)
            return bad(ld, values, "values must be a list");
        int n = (int)(values->data.sequence.items.top - values->data.sequence.items.start);
        if (n == 0)
            return bad(ld, values, "values is empty");
        p->values = calloc((size_t)n, sizeof *p->values);
        if (p->values == NULL)
            return sb_error_set(ld->err, SB_ERR_NOMEM, "out of memory");
        for (int i = 0; i < n; i++) {
            yaml_node_t *item =
                yaml_document_get_node(&ld->doc, values->data.sequence.items.start[i]);
            const char *text = scalar(item);
            if (text == NULL)
                return bad(ld, item, "a value must be a scalar (a number, a word or True/False)");
            p->values[i] = dup_str(text);
            p->n_values++;
            if (p->values[i] == NULL)
                return sb_error_set(ld->err, SB_ERR_NOMEM, "out of memory");
        }
    } else if (value != NULL) {
        const char *text = scalar(value);
        if (text == NULL)
            return bad(ld, value, "value must be a scalar");
        p->values = calloc(1, sizeof *p->values);
        if (p->values == NULL || (p->values[0] = dup_str(text)) == NULL)
            return sb_error_set(ld->err, SB_ERR_NOMEM, "out of memory");
        p->n_values = 1;
    } else {
        return bad(ld, def, "a parameter needs values: [...] or value: x");
    }
    return SB_OK;
}

/* `model: {values: [all]}` stands for every registered model, in the registry's order: a
 * check over the whole zoo (configs/checks/learning.yaml) needs no list to keep. A W&B
 * file never says it (no model is called "all"). */
static sb_status expand_all_models(sb_sweep_param *p, sb_error *err)
{
    if (strcmp(p->name, "model") != 0 || p->n_values != 1 || strcmp(p->values[0], "all") != 0)
        return SB_OK;
    const sb_layer_type *const *types = sb_layer_types();
    int n = 0;
    while (types[n] != NULL)
        n++;
    char **values = calloc((size_t)n, sizeof *values);
    if (values == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        values[i] = dup_str(types[i]->name);
        if (values[i] == NULL) {
            for (int j = 0; j < i; j++)
                free(values[j]);
            free(values);
            return sb_error_set(err, SB_ERR_NOMEM, "out of memory");
        }
    }
    free(p->values[0]);
    free(p->values);
    p->values = values;
    p->n_values = n;
    return SB_OK;
}

/* Streams the file's events before it is loaded: one YAML document at most, nested at most
 * SB_SWEEP_DEPTH_MAX levels. libyaml's loader takes time that grows with the square of the
 * depth (100,000 levels: most of a minute), so a deep file is refused here, as soon as the
 * event stream passes the limit. */
static sb_status check_yaml_shape(const char *path, const char *text, size_t len, sb_error *err)
{
    yaml_parser_t parser;
    yaml_event_t event;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    sb_status st = SB_OK;
    int depth = 0, documents = 0, done = 0;
    while (!done && st == SB_OK) {
        if (!yaml_parser_parse(&parser, &event))
            break; /* the loader reports the syntax error, with its line */
        size_t line = (size_t)event.start_mark.line + 1;
        switch (event.type) {
        case YAML_MAPPING_START_EVENT:
        case YAML_SEQUENCE_START_EVENT:
            if (++depth > SB_SWEEP_DEPTH_MAX)
                st = sb_error_set(err, SB_ERR_INVALID,
                                  "sweep file '%s', line %zu: nested deeper than %d levels (a "
                                  "grid file needs 4)",
                                  path, line, SB_SWEEP_DEPTH_MAX);
            break;
        case YAML_MAPPING_END_EVENT:
        case YAML_SEQUENCE_END_EVENT: depth--; break;
        case YAML_DOCUMENT_START_EVENT:
            if (++documents > 1)
                st = sb_error_set(err, SB_ERR_INVALID,
                                  "sweep file '%s', line %zu: a second YAML document ('---'); "
                                  "give one grid per file",
                                  path, line);
            break;
        case YAML_STREAM_END_EVENT: done = 1; break;
        default: break;
        }
        yaml_event_delete(&event);
    }
    yaml_parser_delete(&parser);
    return st;
}

/* The metric W&B's grid names: one of the results' metrics, to maximise or minimise. The
 * grid runs every point whatever it is, but a name the results never hold would be read by
 * W&B as a metric that is never logged. */
static sb_status check_metric(loader *ld, yaml_node_t *metric, const char *name, const char *goal)
{
    static const char *names[] = {"test_acc", "test_loss", "train_acc", "train_loss", NULL};
    if (metric != NULL && metric->type != YAML_MAPPING_NODE)
        return bad(ld, metric, "metric must be a mapping (name: test_acc, goal: maximize)");
    int known = name == NULL;
    for (int i = 0; !known && names[i] != NULL; i++)
        known = strcmp(name, names[i]) == 0;
    if (!known) {
        char msg[200];
        snprintf(msg, sizeof msg,
                 "unknown metric '%.60s' (the results hold test_acc, test_loss, train_acc, "
                 "train_loss)",
                 name);
        return bad(ld, map_get(ld, metric, "name"), msg);
    }
    if (goal != NULL && strcmp(goal, "maximize") != 0 && strcmp(goal, "minimize") != 0)
        return bad(ld, map_get(ld, metric, "goal"), "metric goal must be maximize or minimize");
    return SB_OK;
}

sb_status sb_sweep_load(const char *path, sb_sweep **out, sb_error *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return sb_error_set(err, SB_ERR_IO, "cannot read sweep file '%s': %s", path,
                            strerror(errno));
    /* read at most SB_SWEEP_FILE_MAX + 1 bytes: a device or a stream (/dev/zero, a pipe)
     * is refused once it passes the limit instead of read without end */
    size_t cap = 4096, len = 0;
    char *text = malloc(cap);
    while (text != NULL) {
        size_t got = fread(text + len, 1, cap - len, f);
        len += got;
        if (len < cap)
            break;
        if (len > SB_SWEEP_FILE_MAX) {
            free(text);
            fclose(f);
            return sb_error_set(err, SB_ERR_INVALID,
                                "sweep file '%s' is larger than %d KiB: a grid file is a few "
                                "lines (is it the right file?)",
                                path, SB_SWEEP_FILE_MAX / 1024);
        }
        char *grown = realloc(text, cap * 2);
        if (grown == NULL) {
            free(text);
            text = NULL;
            break;
        }
        text = grown;
        cap *= 2;
    }
    int bad_read = ferror(f);
    fclose(f);
    if (text == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory reading '%s'", path);
    if (bad_read) {
        free(text);
        return sb_error_set(err, SB_ERR_IO, "cannot read sweep file '%s'", path);
    }
    sb_status st = sb_sweep_load_text(path, text, len, out, err);
    free(text);
    return st;
}

/* The top-level keys are those of a W&B sweep file. */
static sb_status check_top_keys(loader *ld, yaml_node_t *root)
{
    static const char *known[] = {"project", "program", "method",      "metric", "parameters",
                                  "command", "name",    "description", "entity", NULL};
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        yaml_node_t *key = yaml_document_get_node(&ld->doc, p->key);
        const char *k = scalar(key);
        int ok = 0;
        for (int i = 0; k != NULL && known[i] != NULL; i++)
            ok |= strcmp(k, known[i]) == 0;
        if (!ok) {
            char msg[160];
            snprintf(msg, sizeof msg,
                     "unknown key '%s' (expected program, method, metric, "
                     "parameters, command)",
                     k != NULL ? k : "?");
            return bad(ld, key, msg);
        }
    }
    return SB_OK;
}

/* The file's parameters into s, sorted by name (each a value list, `all` models expanded). */
static sb_status load_params(loader *ld, yaml_node_t *root, sb_sweep *s)
{
    yaml_node_t *params = map_get(ld, root, "parameters");
    if (params == NULL || params->type != YAML_MAPPING_NODE ||
        params->data.mapping.pairs.top == params->data.mapping.pairs.start)
        return bad(ld, params != NULL ? params : root, "parameters must be a non-empty mapping");
    int n = (int)(params->data.mapping.pairs.top - params->data.mapping.pairs.start);
    s->params = calloc((size_t)n, sizeof *s->params);
    if (s->params == NULL)
        return sb_error_set(ld->err, SB_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        yaml_node_pair_t *p = &params->data.mapping.pairs.start[i];
        const char *name = scalar(yaml_document_get_node(&ld->doc, p->key));
        if (name == NULL)
            return bad(ld, yaml_document_get_node(&ld->doc, p->key),
                       "a parameter name must be a word");
        s->params[i].name = dup_str(name);
        s->n_params++;
        sb_status st = load_param(ld, &s->params[i], yaml_document_get_node(&ld->doc, p->value));
        if (st == SB_OK)
            st = expand_all_models(&s->params[i], ld->err);
        if (st != SB_OK)
            return st;
    }
    qsort(s->params, (size_t)s->n_params, sizeof *s->params, cmp_param);
    return SB_OK;
}

/* The file's command list (optional) into s. */
static sb_status load_command(loader *ld, yaml_node_t *root, sb_sweep *s)
{
    yaml_node_t *command = map_get(ld, root, "command");
    if (command == NULL)
        return SB_OK;
    if (command->type != YAML_SEQUENCE_NODE)
        return bad(ld, command, "command must be a list");
    int m = (int)(command->data.sequence.items.top - command->data.sequence.items.start);
    s->command = calloc((size_t)(m > 0 ? m : 1), sizeof *s->command);
    for (int i = 0; s->command != NULL && i < m; i++) {
        yaml_node_t *item = yaml_document_get_node(&ld->doc, command->data.sequence.items.start[i]);
        const char *word = scalar(item);
        if (word == NULL)
            return bad(ld, item, "a command item must be a scalar");
        s->command[s->n_command++] = dup_str(word);
    }
    return SB_OK;
}

sb_status sb_sweep_load_text(const char *path, const char *text, size_t len, sb_sweep **out,
                             sb_error *err)
{
    *out = NULL;
    if (len > SB_SWEEP_FILE_MAX)
        return sb_error_set(err, SB_ERR_INVALID, "sweep file '%s' is larger than %d KiB", path,
                            SB_SWEEP_FILE_MAX / 1024);
    sb_status shape = check_yaml_shape(path, text, len, err);
    if (shape != SB_OK)
        return shape;
    yaml_parser_t parser;
    loader ld = {.path = path, .err = err};
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &ld.doc)) {
        sb_status st = sb_error_set(err, SB_ERR_INVALID, "sweep file '%s', line %zu: %s", path,
                                    (size_t)parser.problem_mark.line + 1,
                                    parser.problem != NULL ? parser.problem : "malformed YAML");
        yaml_parser_delete(&parser);
        return st;
    }
    yaml_parser_delete(&parser);

    sb_status st = SB_OK;
    sb_sweep *s = calloc(1, sizeof *s);
    yaml_node_t *root = yaml_document_get_root_node(&ld.doc);
    if (s == NULL) {
        st = sb_error_set(err, SB_ERR_NOMEM, "out of memory");
        goto done;
    }
    s->path = dup_str(path);
    if ((st = check_duplicate_keys(&ld)) != SB_OK)
        goto done;
    if (root == NULL || root->type != YAML_MAPPING_NODE) {
        st = bad(&ld, root, "the file must be a mapping (program, method, parameters, command)");
        goto done;
    }
    if ((st = check_top_keys(&ld, root)) != SB_OK)
        goto done;
    const char *method = scalar(map_get(&ld, root, "method"));
    if (method == NULL || strcmp(method, "grid") != 0) {
        st = bad(&ld, map_get(&ld, root, "method") != NULL ? map_get(&ld, root, "method") : root,
                 "only method: grid sweeps run here (random and bayes need W&B's service)");
        goto done;
    }
    s->method = dup_str(method);
    const char *program = scalar(map_get(&ld, root, "program"));
    s->program = dup_str(program != NULL ? program : "train.py");
    yaml_node_t *metric = map_get(&ld, root, "metric");
    const char *mname = scalar(map_get(&ld, metric, "name"));
    const char *mgoal = scalar(map_get(&ld, metric, "goal"));
    if ((st = check_metric(&ld, metric, mname, mgoal)) != SB_OK)
        goto done;
    s->metric_name = dup_str(mname != NULL ? mname : "test_acc");
    s->metric_goal = dup_str(mgoal != NULL ? mgoal : "maximize");

    if ((st = load_params(&ld, root, s)) != SB_OK)
        goto done;
    if (sb_sweep_count(s) < 0) {
        st = sb_error_set(err, SB_ERR_INVALID,
                          "sweep file '%s': its grid has more than %lld runs (the product of its "
                          "%d parameters' value counts); split it into several files",
                          path, (long long)INT64_MAX, s->n_params);
        goto done;
    }

    st = load_command(&ld, root, s);
done:
    yaml_document_delete(&ld.doc);
    if (st != SB_OK) {
        sb_sweep_free(s);
        return st;
    }
    *out = s;
    return SB_OK;
}

int64_t sb_sweep_count(const sb_sweep *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->n_params; i++) {
        int64_t values = s->params[i].n_values;
        if (values <= 0)
            return 0;
        if (n > INT64_MAX / values)
            return -1; /* the product would overflow */
        n *= values;
    }
    return n;
}

int sb_sweep_value_index(const sb_sweep *s, int64_t k, int p)
{
    /* the last parameter varies fastest */
    for (int i = s->n_params - 1; i > p; i--)
        k /= s->params[i].n_values;
    return (int)(k % s->params[p].n_values);
}

int sb_sweep_run_matches(const sb_sweep *s, int64_t k, const char *name, const char *value)
{
    for (int p = 0; p < s->n_params; p++)
        if (strcmp(s->params[p].name, name) == 0)
            return strcmp(s->params[p].values[sb_sweep_value_index(s, k, p)], value) == 0;
    return 0;
}

void sb_sweep_args_free(char **argv)
{
    if (argv == NULL)
        return;
    for (char **a = argv; *a != NULL; a++)
        free(*a);
    free(argv);
}

/* Appends run k's parameters as "--name=value" at argv[*n]; -1 when out of memory. */
static int add_params(const sb_sweep *s, int64_t k, char **argv, int *n)
{
    for (int p = 0; p < s->n_params; p++) {
        const sb_sweep_param *q = &s->params[p];
        const char *v = q->values[sb_sweep_value_index(s, k, p)];
        size_t len = strlen(q->name) + strlen(v) + 4;
        if ((argv[*n] = malloc(len)) == NULL)
            return -1;
        snprintf(argv[(*n)++], len, "--%s=%s", q->name, v);
    }
    return 0;
}

sb_status sb_sweep_run_args(const sb_sweep *s, int64_t k, char ***out, int *argc, sb_error *err)
{
    /* room for the command's items and the parameters at each ${args} (W&B repeats them
     * there), or once at the end when there is none */
    size_t n_args_macros = 0;
    for (int i = 0; i < s->n_command; i++)
        n_args_macros += strcmp(s->command[i], "${args}") == 0;
    size_t cap =
        (size_t)s->n_command + (size_t)s->n_params * (n_args_macros > 0 ? n_args_macros : 1) + 1;
    char **argv = calloc(cap, sizeof *argv);
    int n = 0, has_args = 0;
    if (argv == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory");
    for (int i = 0; i < s->n_command; i++) {
        const char *c = s->command[i];
        if (strcmp(c, "${env}") == 0 || strcmp(c, "${interpreter}") == 0 ||
            strcmp(c, "${program}") == 0 || strcmp(c, "python") == 0 || strcmp(c, "python3") == 0)
            continue;
        if (strcmp(c, "${args}") == 0) {
            has_args = 1;
            if (add_params(s, k, argv, &n) != 0)
                goto nomem;
            continue;
        }
        if (strncmp(c, "${", 2) == 0) {
            sb_sweep_args_free(argv);
            return sb_error_set(err, SB_ERR_INVALID,
                                "sweep file '%s': command macro %s is not supported (use ${args})",
                                s->path, c);
        }
        if ((argv[n++] = dup_str(c)) == NULL)
            goto nomem;
    }
    /* W&B's default command is ${env} ${interpreter} ${program} ${args} */
    if (!has_args && add_params(s, k, argv, &n) != 0)
        goto nomem;
    argv[n] = NULL;
    *out = argv;
    *argc = n;
    return SB_OK;
nomem:
    sb_sweep_args_free(argv);
    return sb_error_set(err, SB_ERR_NOMEM, "out of memory");
}

/* ---- selections ------------------------------------------------------------------------ */

struct sb_sweep_selection {
    const sb_sweep *sweep;
    int *n_kept;     /* [n_params] values of parameter p the filters keep */
    int **kept;      /* [n_params] their indices in the parameter's values, in order */
    int64_t *stride; /* [n_params] grid runs between two consecutive values of p */
    int64_t shard_index, shard_count;
    int64_t size; /* runs selected */
};

void sb_sweep_selection_free(sb_sweep_selection *sel)
{
    if (sel == NULL)
        return;
    if (sel->kept != NULL)
        free(sel->kept[0]); /* one block for every parameter */
    free(sel->kept);
    free(sel->n_kept);
    free(sel->stride);
    free(sel);
}

/* Writes the words, comma-separated, into buf[size]; a list too long ends with "...". */
static void join_words(char *buf, size_t size, char *const *words, int n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        size_t need = strlen(words[i]) + (i > 0 ? 2 : 0);
        if (len + need + 4 >= size) {
            snprintf(buf + len, size - len, "%s...", i > 0 ? ", " : "");
            return;
        }
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i > 0 ? ", " : "", words[i]);
    }
}

/* The parameter name closest to the first len characters of filter (a typo), or NULL. */
static const char *closest_param(const sb_sweep *s, const char *filter, size_t len)
{
    char typed[128];
    snprintf(typed, sizeof typed, "%.*s", (int)(len < sizeof typed ? len : sizeof typed - 1),
             filter);
    sb_suggest near;
    sb_suggest_init(&near, typed);
    for (int p = 0; p < s->n_params; p++)
        sb_suggest_offer(&near, s->params[p].name);
    return sb_suggest_result(&near);
}

/* The value of param closest to a filter's value (a typo), or NULL. */
static const char *closest_value(const sb_sweep_param *param, const char *value)
{
    sb_suggest near;
    sb_suggest_init(&near, value);
    for (int v = 0; v < param->n_values; v++)
        sb_suggest_offer(&near, param->values[v]);
    return sb_suggest_result(&near);
}

/* The parameter a filter "NAME=VALUE" names, and its value; -1 (with the error) when the
 * filter is malformed or names no parameter. */
static int filter_param(const sb_sweep *s, const char *filter, const char **value, sb_error *err)
{
    const char *eq = strchr(filter, '=');
    for (int p = 0; eq != NULL && p < s->n_params; p++) {
        const char *name = s->params[p].name;
        if (strlen(name) == (size_t)(eq - filter) &&
            strncmp(name, filter, (size_t)(eq - filter)) == 0) {
            *value = eq + 1;
            return p;
        }
    }
    char names[256];
    char **words = malloc((size_t)(s->n_params > 0 ? s->n_params : 1) * sizeof *words);
    if (words == NULL) {
        sb_error_set(err, SB_ERR_NOMEM, "out of memory");
        return -1;
    }
    for (int p = 0; p < s->n_params; p++)
        words[p] = s->params[p].name;
    join_words(names, sizeof names, words, s->n_params);
    free(words);
    const char *hint = eq != NULL ? closest_param(s, filter, (size_t)(eq - filter)) : NULL;
    if (hint != NULL) {
        sb_error_set(err, SB_ERR_INVALID,
                     "--filter '%.80s': write NAME=VALUE with NAME one of the parameters of "
                     "sweep file '%s' (%s); did you mean '%s'?",
                     filter, s->path, names, hint);
        return -1;
    }
    sb_error_set(err, SB_ERR_INVALID,
                 "--filter '%.80s': write NAME=VALUE with NAME one of the parameters of sweep "
                 "file '%s' (%s)",
                 filter, s->path, names);
    return -1;
}

/* Narrows the kept values of each parameter to those every filter on it allows. A filter's
 * value must be one of its parameter's values (textually, as written in the file). */
static sb_status apply_filters(sb_sweep_selection *sel, const sb_sweep_select_options *o,
                               sb_error *err)
{
    const sb_sweep *s = sel->sweep;
    for (int f = 0; f < o->n_filters; f++) {
        if (o->filters == NULL || o->filters[f] == NULL)
            return sb_error_set(err, SB_ERR_INVALID, "sb_sweep_select: filter %d is NULL", f);
        const char *value = NULL;
        int p = filter_param(s, o->filters[f], &value, err);
        if (p < 0)
            return err != NULL ? err->status : SB_ERR_INVALID;
        const sb_sweep_param *param = &s->params[p];
        int taken = 0;
        for (int v = 0; v < param->n_values; v++)
            taken |= strcmp(param->values[v], value) == 0;
        if (!taken) {
            char values[256];
            join_words(values, sizeof values, param->values, param->n_values);
            const char *hint = closest_value(param, value);
            if (hint != NULL)
                return sb_error_set(err, SB_ERR_INVALID,
                                    "--filter '%.80s': %s takes %s in sweep file '%s'; did "
                                    "you mean %s=%s?",
                                    o->filters[f], param->name, values, s->path, param->name, hint);
            return sb_error_set(err, SB_ERR_INVALID,
                                "--filter '%.80s': %s takes %s in sweep file '%s'", o->filters[f],
                                param->name, values, s->path);
        }
        /* keep, of the values kept so far, those equal to this filter's */
        int n = 0;
        for (int i = 0; i < sel->n_kept[p]; i++)
            if (strcmp(param->values[sel->kept[p][i]], value) == 0)
                sel->kept[p][n++] = sel->kept[p][i];
        sel->n_kept[p] = n;
    }
    return SB_OK;
}

/* The selection's arrays: every value of every parameter kept, the grid's strides. */
static sb_status selection_alloc(sb_sweep_selection *sel, sb_error *err)
{
    const sb_sweep *s = sel->sweep;
    size_t n_params = (size_t)(s->n_params > 0 ? s->n_params : 1), n_values = 1;
    for (int p = 0; p < s->n_params; p++)
        n_values += (size_t)s->params[p].n_values;
    sel->n_kept = calloc(n_params, sizeof *sel->n_kept);
    sel->kept = calloc(n_params, sizeof *sel->kept);
    sel->stride = calloc(n_params, sizeof *sel->stride);
    int *block = sel->kept != NULL ? malloc(n_values * sizeof *block) : NULL;
    if (sel->n_kept == NULL || sel->kept == NULL || sel->stride == NULL || block == NULL) {
        free(block);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory selecting runs of sweep file '%s'",
                            s->path);
    }
    sel->kept[0] = block;
    int64_t stride = 1;
    for (int p = s->n_params - 1; p >= 0; p--) {
        sel->stride[p] = stride;         /* the last parameter varies fastest */
        stride *= s->params[p].n_values; /* at most the grid's size: no overflow */
    }
    for (int p = 0; p < s->n_params; p++) {
        if (p > 0)
            sel->kept[p] = sel->kept[p - 1] + s->params[p - 1].n_values;
        sel->n_kept[p] = s->params[p].n_values;
        for (int v = 0; v < s->params[p].n_values; v++)
            sel->kept[p][v] = v;
    }
    return SB_OK;
}

/* The number of runs the filters keep: the product of the kept value counts (at most the
 * grid's size, so it fits). */
static int64_t sub_grid_size(const sb_sweep_selection *sel)
{
    int64_t n = 1;
    for (int p = 0; p < sel->sweep->n_params; p++)
        n *= sel->n_kept[p];
    return n;
}

sb_status sb_sweep_select(const sb_sweep *s, const sb_sweep_select_options *opts,
                          sb_sweep_selection **out, sb_error *err)
{
    if (out == NULL || s == NULL)
        return sb_error_set(err, SB_ERR_INVALID, "sb_sweep_select: NULL %s",
                            out == NULL ? "out" : "sweep");
    *out = NULL;
    if (sb_sweep_count(s) < 0)
        return sb_error_set(err, SB_ERR_INVALID,
                            "sweep file '%s': its grid has more than %lld runs", s->path,
                            (long long)INT64_MAX);
    sb_sweep_select_options all = {0};
    const sb_sweep_select_options *o = opts != NULL ? opts : &all;
    int64_t shards = o->shard_count > 0 ? o->shard_count : 1;
    if (o->shard_count < 0 || o->shard_index < 0 || o->shard_index >= shards)
        return sb_error_set(err, SB_ERR_INVALID, "shard %lld/%lld: write I/N with 0 <= I < N",
                            (long long)o->shard_index, (long long)o->shard_count);
    if (o->limit < 0 || o->n_filters < 0)
        return sb_error_set(err, SB_ERR_INVALID,
                            "sb_sweep_select: limit %lld and n_filters %d must not be negative",
                            (long long)o->limit, o->n_filters);
    sb_sweep_selection *sel = calloc(1, sizeof *sel);
    if (sel == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory selecting runs");
    sel->sweep = s;
    sel->shard_index = o->shard_index;
    sel->shard_count = shards;
    sb_status st = selection_alloc(sel, err);
    if (st == SB_OK)
        st = apply_filters(sel, o, err);
    if (st != SB_OK) {
        sb_sweep_selection_free(sel);
        return st;
    }
    /* shard I/N keeps sub-grid runs I, I + N, ...; the limit the first of them */
    int64_t filtered = sub_grid_size(sel);
    int64_t sharded =
        filtered > sel->shard_index ? (filtered - 1 - sel->shard_index) / shards + 1 : 0;
    sel->size = o->limit > 0 && o->limit < sharded ? o->limit : sharded;
    if (sel->size > SB_SWEEP_MAX_RUNS) {
        st = sb_error_set(err, SB_ERR_INVALID,
                          "sweep file '%s': %lld runs selected of a grid of %lld, more than the "
                          "%d one sweep takes; select fewer with --limit, --shard or --filter",
                          s->path, (long long)sel->size, (long long)sb_sweep_count(s),
                          SB_SWEEP_MAX_RUNS);
        sb_sweep_selection_free(sel);
        return st;
    }
    *out = sel;
    return SB_OK;
}

int64_t sb_sweep_selection_size(const sb_sweep_selection *sel)
{
    return sel != NULL ? sel->size : 0;
}

int sb_sweep_param_count(const sb_sweep *s)
{
    return s != NULL ? s->n_params : 0;
}

const char *sb_sweep_param_name(const sb_sweep *s, int p)
{
    return s != NULL && p >= 0 && p < s->n_params ? s->params[p].name : NULL;
}

int sb_sweep_selection_value_count(const sb_sweep_selection *sel, int p)
{
    return sel != NULL && p >= 0 && p < sel->sweep->n_params ? sel->n_kept[p] : 0;
}

const char *sb_sweep_selection_value(const sb_sweep_selection *sel, int p, int j)
{
    if (j < 0 || j >= sb_sweep_selection_value_count(sel, p))
        return NULL;
    return sel->sweep->params[p].values[sel->kept[p][j]];
}

int64_t sb_sweep_selection_run(const sb_sweep_selection *sel, int64_t i)
{
    if (sel == NULL || i < 0 || i >= sel->size)
        return -1;
    /* position j in the sub-grid, then its digits (one kept value per parameter, the last
     * varying fastest) mapped to the grid's */
    int64_t j = sel->shard_index + i * sel->shard_count, k = 0;
    for (int p = sel->sweep->n_params - 1; p >= 0; p--) {
        int digit = (int)(j % sel->n_kept[p]);
        j /= sel->n_kept[p];
        k += sel->kept[p][digit] * sel->stride[p];
    }
    return k;
}
