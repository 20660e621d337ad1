/* experiment.c - which runs belong to one experiment (see experiment.h). */
#include "exp/experiment.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

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

/* Run config_json's configuration as trained (grammar_scale resolved; a key it leaves out
 * at its default) into *out: 0 when it reads, 1 when it does not. */
static int effective_run(const char *config_json, sb_run_config *out)
{
    if (config_json == NULL)
        return 1;
    char *text = sb_experiment_effective_config(config_json);
    if (text == NULL)
        return 1; /* unreadable JSON (or, rarely, no memory: the run then has no say) */
    sb_error err = {0};
    int readable = sb_run_config_from_json(text, out, &err) == SB_OK;
    free(text);
    return readable ? 0 : 1;
}

int sb_experiment_varied_keys(const char *const *configs, size_t n, unsigned char *varies)
{
    const int n_keys = sb_config_key_count();
    memset(varies, 0, (size_t)n_keys);
    int seed = -1, task_seed = -1, model = -1;
    for (int k = 0; k < n_keys; k++) {
        const char *name = sb_config_key_at(k)->name;
        seed = strcmp(name, "seed") == 0 ? k : seed;
        task_seed = strcmp(name, "task_seed") == 0 ? k : task_seed;
        model = strcmp(name, "model") == 0 ? k : model;
    }
    SB_ASSERT(seed >= 0 && task_seed >= 0 && model >= 0);
    sb_run_config first, run;
    int have_first = 0, follows = 1, count = 0;
    for (size_t i = 0; i < n; i++) {
        if (effective_run(configs[i], have_first ? &run : &first) != 0)
            continue; /* unreadable (damaged, or another version's key): no say */
        const sb_run_config *r = have_first ? &run : &first;
        char a[512], b[512];
        sb_config_format(r, sb_config_key_at(seed), a, sizeof a);
        sb_config_format(r, sb_config_key_at(task_seed), b, sizeof b);
        follows &= strcmp(a, b) == 0;
        if (!have_first) {
            have_first = 1;
            continue;
        }
        for (int k = 0; k < n_keys; k++) {
            const sb_config_key *key = sb_config_key_at(k);
            if (varies[k] || key->noop || key->hash == SB_KEY_HASH_NONE)
                continue;
            sb_config_format(&first, key, a, sizeof a);
            sb_config_format(&run, key, b, sizeof b);
            varies[k] = strcmp(a, b) != 0;
        }
    }
    varies[model] = 0; /* a column of its own everywhere */
    if (follows)
        varies[task_seed] = 0; /* --same_seed True: the task seed is the seed */
    for (int k = 0; k < n_keys; k++)
        count += varies[k];
    return count;
}
