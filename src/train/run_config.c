/* run_config.c - run configuration: defaults, checks, canonical JSON and hashes. */
#include "selectivbench/run_config.h"

#include <jansson.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

sb_run_config sb_run_config_default(void)
{
    sb_run_config c;
    memset(&c, 0, sizeof c);
    c.task = sb_task_config_default();
    snprintf(c.model, sizeof c.model, "transformer");
    c.feat_size = 256;
    c.layers = 4;
    c.d_state = 64;
    c.dropout = 0.2;
    c.rope_base = 1000;
    c.att_dropout = 0;
    c.batch_size = 64;
    c.test_bs = 50;
    c.grad_acc = 0;
    c.lr = 0.001;
    c.wd = 0.0;
    c.optimizer = SB_OPT_ADAM;
    c.scheduler = SB_SCHED_COSINE_WARMUP;
    c.warmup_steps = -1;
    c.seed = c.task.grammar.seed;
    c.epoch_size = 5000;
    c.test_pretrained = 0;
    c.early_stop = 0;
    c.patience = -1;
    return c;
}

int sb_run_config_effective_width(const sb_run_config *cfg)
{
    if (strcmp(cfg->model, "transformer") == 0) {
        if (cfg->feat_size == 648)
            return 768;
        if (cfg->feat_size == 1296)
            return 1280;
    }
    return cfg->feat_size;
}

sb_status sb_run_config_check(const sb_run_config *cfg, sb_error *err)
{
    sb_status st = sb_task_config_check(&cfg->task, err);
    if (st != SB_OK)
        return st;
    if (sb_layer_type_find(cfg->model) == NULL) {
        char list[512];
        sb_layer_type_list(list, sizeof list);
        return sb_error_set(err, SB_ERR_INVALID, "unknown --model '%s'; available: %s",
                            cfg->model, list);
    }
    if (strcmp(cfg->model, "transformer") == 0 && cfg->feat_size == 960)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--feat_size 960 with the transformer: train.py skips this run (its "
                            "positional code fails there); use another width");
    if (cfg->feat_size < 1 || cfg->feat_size > 65536)
        return sb_error_set(err, SB_ERR_INVALID, "--feat_size %d must lie in [1, 65536]",
                            cfg->feat_size);
    if (sb_num_heads(sb_run_config_effective_width(cfg)) == 0)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--feat_size %d has no head count (get_num_heads finds no power of "
                            "two >= 4 giving heads of at most 128)",
                            cfg->feat_size);
    if (cfg->layers < 1 || cfg->layers > 1024)
        return sb_error_set(err, SB_ERR_INVALID, "--layers %d must lie in [1, 1024]", cfg->layers);
    if (cfg->d_state < 1 || cfg->d_state > 65536)
        return sb_error_set(err, SB_ERR_INVALID, "--d_state %d must lie in [1, 65536]",
                            cfg->d_state);
    if (!(cfg->dropout >= 0.0 && cfg->dropout < 1.0))
        return sb_error_set(err, SB_ERR_INVALID, "--dropout %g must lie in [0, 1)", cfg->dropout);
    if (cfg->batch_size <= 2)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--batch_size %d: train.py requires more than 2 (a layer's output "
                            "pair check misfires at 2)",
                            cfg->batch_size);
    if (cfg->test_bs <= 2)
        return sb_error_set(err, SB_ERR_INVALID, "--test_bs %d: train.py requires more than 2",
                            cfg->test_bs);
    if (cfg->grad_acc < -1)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--grad_acc %d: use 0 (none), -1 (from the memory budget) or k > 0",
                            cfg->grad_acc);
    if (cfg->grad_acc > 0 && cfg->batch_size / cfg->grad_acc <= 2)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--grad_acc %d leaves micro-batches of %d samples; train.py requires "
                            "more than 2",
                            cfg->grad_acc, cfg->batch_size / cfg->grad_acc);
    if (!(cfg->lr > 0.0 && cfg->lr < 100.0))
        return sb_error_set(err, SB_ERR_INVALID, "--lr %g must be a positive learning rate",
                            cfg->lr);
    if (!(cfg->wd >= 0.0 && cfg->wd < 100.0))
        return sb_error_set(err, SB_ERR_INVALID, "--wd %g must be >= 0", cfg->wd);
    if (cfg->epoch_size < 1)
        return sb_error_set(err, SB_ERR_INVALID, "--epoch_size %lld must be at least 1",
                            (long long)cfg->epoch_size);
    if (cfg->task.dataset_size < cfg->batch_size)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--dataset_size %lld is smaller than --batch_size %d: no update "
                            "would happen",
                            (long long)cfg->task.dataset_size, cfg->batch_size);
    return SB_OK;
}

sb_model_config sb_run_config_model(const sb_run_config *cfg, int n_inputs, int n_classes)
{
    sb_model_config m;
    memset(&m, 0, sizeof m);
    snprintf(m.model, sizeof m.model, "%s", cfg->model);
    m.d_input = n_inputs;
    m.d_output = n_classes;
    m.d_model = sb_run_config_effective_width(cfg);
    m.n_layers = cfg->layers;
    m.d_state = cfg->d_state;
    m.n_head = sb_num_heads(m.d_model);
    m.dropout = cfg->dropout;
    m.rope_base = cfg->rope_base;
    m.att_dropout = cfg->att_dropout;
    return m;
}

double sb_run_config_total_updates(const sb_run_config *cfg)
{
    return (double)(cfg->task.dataset_size / cfg->batch_size);
}

double sb_run_config_warmup(const sb_run_config *cfg)
{
    if (cfg->warmup_steps >= 0)
        return (double)cfg->warmup_steps;
    return sb_run_config_total_updates(cfg) * 0.05; /* train.py: a float */
}

/* ---- the field table: one row per key of the canonical JSON ------------------------ */

typedef enum field_kind {
    F_INT,
    F_INT64,
    F_U64,
    F_DOUBLE,
    F_BOOL,
    F_STRING,
    F_ENUM,
    F_OPT_DOUBLE, /* negative = not set (null) */
    F_OPT_INT,    /* negative = not set (null) */
} field_kind;

typedef struct field {
    const char *key;
    field_kind kind;
    size_t offset;
    int training;              /* part of the training hash */
    const char *const *names;  /* F_ENUM */
} field;

static const char *const optimizer_names[] = {"adam", "adamw", NULL};
static const char *const scheduler_names[] = {"cosine_schedule_with_warmup",
                                              "cosine_schedule_with_warmup_lr_min", NULL};
static const char *const protocol_names[] = {"reference", "clean", NULL};
static const char *const gap_rng_names[] = {"derived", "reference", NULL};
static const char *const dist_names[] = {"uniform", "lognormal", NULL};

#define OFF(member) offsetof(sb_run_config, member)

static const field fields[] = {
    {"model", F_STRING, OFF(model), 1, NULL},
    {"feat_size", F_INT, OFF(feat_size), 1, NULL},
    {"layers", F_INT, OFF(layers), 1, NULL},
    {"d_state", F_INT, OFF(d_state), 1, NULL},
    {"dropout", F_DOUBLE, OFF(dropout), 1, NULL},
    {"rope_base", F_DOUBLE, OFF(rope_base), 1, NULL},
    {"att_dropout", F_BOOL, OFF(att_dropout), 1, NULL},
    {"batch_size", F_INT, OFF(batch_size), 1, NULL},
    {"grad_acc", F_INT, OFF(grad_acc), 1, NULL},
    {"lr", F_DOUBLE, OFF(lr), 1, NULL},
    {"wd", F_DOUBLE, OFF(wd), 1, NULL},
    {"optimizer", F_ENUM, OFF(optimizer), 1, optimizer_names},
    {"scheduler", F_ENUM, OFF(scheduler), 1, scheduler_names},
    {"warmup_steps", F_OPT_INT, OFF(warmup_steps), 1, NULL},
    {"seed", F_U64, OFF(seed), 1, NULL},
    {"epoch_size", F_INT64, OFF(epoch_size), 1, NULL},
    {"early_stop", F_BOOL, OFF(early_stop), 1, NULL},
    {"patience", F_OPT_INT, OFF(patience), 1, NULL},
    {"task_seed", F_U64, OFF(task.grammar.seed), 1, NULL},
    {"vocab", F_INT, OFF(task.grammar.vocab), 1, NULL},
    {"amb", F_INT, OFF(task.grammar.amb), 1, NULL},
    {"amb_depth", F_INT, OFF(task.grammar.amb_depth), 1, NULL},
    {"grammar_scale", F_BOOL, OFF(task.grammar.grammar_scale), 1, NULL},
    {"transition_density", F_DOUBLE, OFF(task.grammar.transition_density), 1, NULL},
    {"train_seqlen_min", F_INT, OFF(task.train_seqlen_min), 1, NULL},
    {"train_seqlen_max", F_INT, OFF(task.train_seqlen_max), 1, NULL},
    {"combined_seq_length", F_INT, OFF(task.combined_seq_length), 1, NULL},
    {"train_gap_min", F_DOUBLE, OFF(task.train_gap_min), 1, NULL},
    {"train_gap_max", F_DOUBLE, OFF(task.train_gap_max), 1, NULL},
    {"dist_dur", F_ENUM, OFF(task.dist_dur), 1, dist_names},
    {"train_noise", F_DOUBLE, OFF(task.train_noise), 1, NULL},
    {"grammar_gap", F_BOOL, OFF(task.grammar_gap), 1, NULL},
    {"gap_start", F_INT, OFF(task.gap_start), 1, NULL},
    {"gap_prob", F_DOUBLE, OFF(task.gap_prob), 1, NULL},
    {"dataset_size", F_INT64, OFF(task.dataset_size), 1, NULL},
    {"protocol", F_ENUM, OFF(task.protocol), 1, protocol_names},
    {"gap_rng", F_ENUM, OFF(task.gap_rng), 1, gap_rng_names},
    /* test settings: not part of the training hash */
    {"test_seqlen_min", F_INT, OFF(task.test_seqlen_min), 0, NULL},
    {"test_seqlen_max", F_INT, OFF(task.test_seqlen_max), 0, NULL},
    {"test_dur", F_OPT_DOUBLE, OFF(task.test_dur), 0, NULL},
    {"test_size", F_INT64, OFF(task.test_size), 0, NULL},
    {"test_bs", F_INT, OFF(test_bs), 0, NULL},
    {"test_pretrained", F_BOOL, OFF(test_pretrained), 0, NULL},
};

#undef OFF

#define N_FIELDS (sizeof fields / sizeof *fields)

static void write_field(const sb_run_config *cfg, const field *f, sb_json *j)
{
    const char *base = (const char *)cfg + f->offset;
    sb_json_key(j, f->key);
    switch (f->kind) {
    case F_INT: sb_json_int(j, *(const int *)base); break;
    case F_INT64: sb_json_int(j, *(const int64_t *)base); break;
    case F_U64: sb_json_uint(j, *(const uint64_t *)base); break;
    case F_DOUBLE: sb_json_double(j, *(const double *)base); break;
    case F_BOOL: sb_json_bool(j, *(const int *)base); break;
    case F_STRING: sb_json_string(j, base); break;
    case F_ENUM: sb_json_string(j, f->names[*(const int *)base]); break;
    case F_OPT_DOUBLE:
        if (*(const double *)base < 0)
            sb_json_null(j);
        else
            sb_json_double(j, *(const double *)base);
        break;
    case F_OPT_INT:
        if (*(const int *)base < 0)
            sb_json_null(j);
        else
            sb_json_int(j, *(const int *)base);
        break;
    }
}

void sb_run_config_write_json(const sb_run_config *cfg, sb_json *j, int training_only)
{
    sb_json_object_begin(j);
    for (size_t i = 0; i < N_FIELDS; i++)
        if (fields[i].training || !training_only)
            write_field(cfg, &fields[i], j);
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

static sb_status read_field(sb_run_config *cfg, const field *f, json_t *v, sb_error *err)
{
    char *base = (char *)cfg + f->offset;
    switch (f->kind) {
    case F_INT:
    case F_BOOL:
        if (f->kind == F_BOOL && json_is_boolean(v)) {
            *(int *)base = json_is_true(v);
            return SB_OK;
        }
        if (!json_is_integer(v))
            break;
        *(int *)base = (int)json_integer_value(v);
        return SB_OK;
    case F_INT64:
        if (!json_is_integer(v))
            break;
        *(int64_t *)base = (int64_t)json_integer_value(v);
        return SB_OK;
    case F_U64:
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            break;
        *(uint64_t *)base = (uint64_t)json_integer_value(v);
        return SB_OK;
    case F_DOUBLE:
        if (!json_is_number(v))
            break;
        *(double *)base = json_number_value(v);
        return SB_OK;
    case F_STRING:
        if (!json_is_string(v) || strlen(json_string_value(v)) >= SB_MODEL_NAME_MAX)
            break;
        snprintf(base, SB_MODEL_NAME_MAX, "%s", json_string_value(v));
        return SB_OK;
    case F_ENUM:
        if (!json_is_string(v))
            break;
        for (int k = 0; f->names[k] != NULL; k++)
            if (strcmp(f->names[k], json_string_value(v)) == 0) {
                *(int *)base = k;
                return SB_OK;
            }
        break;
    case F_OPT_DOUBLE:
        if (json_is_null(v)) {
            *(double *)base = -1.0;
            return SB_OK;
        }
        if (!json_is_number(v))
            break;
        *(double *)base = json_number_value(v);
        return SB_OK;
    case F_OPT_INT:
        if (json_is_null(v)) {
            *(int *)base = -1;
            return SB_OK;
        }
        if (!json_is_integer(v))
            break;
        *(int *)base = (int)json_integer_value(v);
        return SB_OK;
    }
    return sb_error_set(err, SB_ERR_INVALID, "configuration key '%s' has a value of the wrong type",
                        f->key);
}

sb_status sb_run_config_from_json(const char *text, sb_run_config *cfg, sb_error *err)
{
    json_error_t jerr;
    json_t *root = json_loads(text, 0, &jerr);
    if (root == NULL || !json_is_object(root)) {
        json_decref(root);
        return sb_error_set(err, SB_ERR_INVALID, "configuration is not a JSON object (%s)",
                            jerr.text);
    }
    *cfg = sb_run_config_default();
    const char *key;
    json_t *v;
    sb_status st = SB_OK;
    json_object_foreach(root, key, v) {
        const field *f = NULL;
        for (size_t i = 0; i < N_FIELDS; i++)
            if (strcmp(fields[i].key, key) == 0)
                f = &fields[i];
        if (f == NULL) {
            st = sb_error_set(err, SB_ERR_INVALID, "unknown configuration key '%s'", key);
            break;
        }
        if ((st = read_field(cfg, f, v, err)) != SB_OK)
            break;
    }
    json_decref(root);
    return st;
}
