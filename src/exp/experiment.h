/*
 * experiment.h - which runs belong to one experiment (issue 38): runs may share a figure
 * point, a table row or a verdict only when their stored configurations are equal but for
 * the keys a comparison varies (the model, the seed, the settings chosen among, the axis
 * drawn). The identity is the configuration without those keys; a set of experiments is
 * told apart by the keys whose values differ between them.
 */
#ifndef SELECTIVBENCH_EXPERIMENT_H
#define SELECTIVBENCH_EXPERIMENT_H

#include <jansson.h>
#include <stddef.h>

/* The keys every comparison varies: the model, the seeds, the lr and warm-up chosen among. */
extern const char *const sb_experiment_varied[];
#define SB_EXPERIMENT_VARIED 5

/* The three lengths a length study sets together: train_seqlen_max, test_seqlen_max,
 * combined_seq_length. */
extern const char *const sb_experiment_lengths[];
#define SB_EXPERIMENT_LENGTHS 3

/* The task as trained: with grammar_scale true, vocab := amb + 1 and amb_depth := amb in cfg
 * (a configuration object), as the grammar generator applies them. */
void sb_experiment_resolve(json_t *cfg);

/* config_json with sb_experiment_resolve applied, keys in their stored order, compact; NULL
 * for unreadable JSON or out of memory; freed with free(). What `results` and the dashboard
 * show. */
char *sb_experiment_effective_config(const char *config_json);

/* config_json (resolved as above) without the keys drop[0..n_drop) and without the key in `also`
 * (may be NULL), keys sorted, compact: equal for runs of one experiment. NULL for unreadable JSON
 * or out of memory; freed with free(). */
char *sb_experiment_key(const char *config_json, const char *const *drop, int n_drop,
                        const char *const *also, int n_also);

/* For experiments keys[0..n) (texts of sb_experiment_key), writes into labels[i] (size
 * bytes each) "key=value, ..." of the keys whose values differ between them (empty when
 * n < 2). Reals as %g. Returns 0, or -1 out of memory. */
int sb_experiment_labels(const char *const *keys, int n, char *const *labels, size_t size);

/* Which keys vary between the runs of stored configurations configs[0..n) (JSON texts as
 * stored, compared as trained: grammar_scale resolved, a key a text leaves out at its
 * default; a NULL or unreadable text has no say): varies[k] (sb_config_key_count() entries)
 * is 1 for key k of the run hash whose value differs, never for `model` (a column of its own)
 * nor for `task_seed` where it equals the seed in every run. Returns how many vary. The one
 * rule of `results`'s default columns and the dashboard's "varied". */
int sb_experiment_varied_keys(const char *const *configs, size_t n, unsigned char *varies);

/* A JSON value as text: "null" when missing, a real as %g (0.1, not 0.10000000000000001),
 * anything else as compact JSON. */
void sb_experiment_value_text(const json_t *v, char *buf, size_t size);

#endif
