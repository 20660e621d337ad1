/* experiment.c - which runs belong to one experiment (see experiment.h). */
#include "exp/experiment.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const sb_experiment_varied[SB_EXPERIMENT_VARIED] = {"model", "seed", "task_seed", "lr",
                                                                "warmup_steps"};
const char *const sb_experiment_lengths[SB_EXPERIMENT_LENGTHS] = {
    "train_seqlen_max", "test_seqlen_max", "combined_seq_length"};

void sb_experiment_resolve(json_t *cfg)
{
    json_t *amb = json_object_get(cfg, "amb");
    if (!json_is_true(json_object_get(cfg, "grammar_scale")) || !json_is_integer(amb))
        return;
    json_int_t a = json_integer_value(amb);
    if (a < 0 || a > 1000000) /* not a configuration this program wrote: left as stored */
        return;
    json_object_set_new(cfg, "vocab", json_integer(a + 1));
    json_object_set_new(cfg, "amb_depth", json_integer(a));
}

char *sb_experiment_effective_config(const char *config_json)
{
    json_t *cfg = config_json != NULL ? json_loads(config_json, 0, NULL) : NULL;
    if (cfg == NULL || !json_is_object(cfg)) {
        json_decref(cfg);
        return NULL;
    }
    sb_experiment_resolve(cfg);
    char *s = json_dumps(cfg, JSON_PRESERVE_ORDER | JSON_COMPACT);
    json_decref(cfg);
    return s;
}

char *sb_experiment_key(const char *config_json, const char *const *drop, int n_drop,
                        const char *const *also, int n_also)
{
    json_t *cfg = config_json != NULL ? json_loads(config_json, 0, NULL) : NULL;
    if (cfg == NULL || !json_is_object(cfg)) {
        json_decref(cfg);
        return NULL;
    }
    sb_experiment_resolve(cfg); /* the grammar as trained, not as spelled */
    for (int i = 0; i < n_drop; i++)
        json_object_del(cfg, drop[i]);
    for (int i = 0; i < n_also; i++)
        json_object_del(cfg, also[i]);
    char *s = json_dumps(cfg, JSON_SORT_KEYS | JSON_COMPACT);
    json_decref(cfg);
    return s;
}

void sb_experiment_value_text(const json_t *v, char *buf, size_t size)
{
    if (json_is_real(v)) {
        snprintf(buf, size, "%g", json_real_value(v));
        return;
    }
    char *s = v != NULL ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    snprintf(buf, size, "%s", s != NULL ? s : "null");
    free(s);
}

static void append(char *buf, size_t size, const char *key, const char *value)
{
    size_t len = strlen(buf);
    if (len < size)
        snprintf(buf + len, size - len, "%s%s=%s", len > 0 ? ", " : "", key, value);
}

int sb_experiment_labels(const char *const *keys, int n, char *const *labels, size_t size)
{
    for (int i = 0; i < n; i++)
        labels[i][0] = '\0';
    if (n < 2)
        return 0;
    json_t **cfg = calloc((size_t)n, sizeof *cfg);
    if (cfg == NULL)
        return -1;
    for (int i = 0; i < n; i++)
        cfg[i] = keys[i] != NULL ? json_loads(keys[i], 0, NULL) : NULL;
    /* every key of any experiment, in the order of the first that has it */
    for (int i = 0; i < n; i++) {
        const char *key;
        json_t *value;
        json_object_foreach (cfg[i], key, value) {
            int seen = 0, differs = 0;
            for (int j = 0; j < i && !seen; j++)
                seen = json_object_get(cfg[j], key) != NULL;
            if (seen)
                continue;
            for (int j = 0; j < n && !differs; j++)
                differs = !json_equal(value, json_object_get(cfg[j], key));
            if (!differs)
                continue;
            for (int j = 0; j < n; j++) {
                char v[64];
                sb_experiment_value_text(json_object_get(cfg[j], key), v, sizeof v);
                append(labels[j], size, key, v);
            }
        }
    }
    for (int i = 0; i < n; i++)
        json_decref(cfg[i]);
    free(cfg);
    return 0;
}
