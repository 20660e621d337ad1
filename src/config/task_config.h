/*
 * task_config.h - the options of a task (the reference's task flags): plain data, set by the
 * key table (config/keys.def) and read by the task floor (task/task.h, task/grammar.h).
 */
#ifndef SELECTIVBENCH_TASK_CONFIG_H
#define SELECTIVBENCH_TASK_CONFIG_H

#include <stdint.h>

/* What the reference's task flags give the grammar generator. */
typedef struct sb_grammar_config {
    int vocab;                 /* V = number of letters + 1 (the end symbol) */
    int amb;                   /* number of ambiguous letters */
    int amb_depth;             /* states per ambiguous letter */
    int grammar_scale;         /* if nonzero: vocab := amb + 1, amb_depth := amb */
    uint64_t seed;             /* task seed */
    double transition_density; /* before division by amb_depth; the reference uses 0.4 */
} sb_grammar_config;

typedef enum sb_protocol {
    SB_PROTOCOL_REFERENCE = 0, /* the reference's behaviour, quirks included */
    SB_PROTOCOL_CLEAN = 1,     /* same experiment without the flaws (disjoint test set...) */
} sb_protocol;

typedef enum sb_gap_rng { SB_GAP_RNG_DERIVED = 0, SB_GAP_RNG_REFERENCE = 1 } sb_gap_rng;

typedef enum sb_gap_dist { SB_GAP_DIST_UNIFORM = 0, SB_GAP_DIST_LOGNORMAL = 1 } sb_gap_dist;

typedef struct sb_task_config {
    sb_grammar_config grammar;
    int train_seqlen_min, train_seqlen_max;
    int test_seqlen_min, test_seqlen_max;
    int combined_seq_length; /* training sample length in elements; 0: train_seqlen_max */
    double train_gap_min, train_gap_max; /* seconds (uniform) or mean/sigma (lognormal) */
    sb_gap_dist dist_dur;
    double test_dur;      /* fixed test gap in seconds; < 0: use train_gap_max */
    double train_noise;   /* amplitude of U[0, noise) added to every frame (train+test) */
    int grammar_gap;      /* gaps show non-grammatical symbols instead of zero frames */
    int gap_start;        /* elements before this index never get a gap */
    double gap_prob;      /* probability that an element gets a gap */
    int64_t dataset_size; /* training samples */
    int64_t test_size;    /* test samples */
    int valid_size;       /* validation samples; < 0: as many as the test (0: none) */
    sb_protocol protocol;
    sb_gap_rng gap_rng;
    int walk_len; /* elements per interleaved walk; 0: one walk (the reference) */
} sb_task_config;

/* The paper's main configuration with task 1 gaps (0.1 s, no noise), 200 elements. */
sb_task_config sb_task_config_default(void);

#endif
