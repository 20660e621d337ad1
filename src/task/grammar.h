/*
 * grammar.h - the random artificial grammar of SelectivBench (docs/task.md, "Grammar").
 *
 * A grammar has `n_states` states: plain letters ("B"), indexed copies of the ambiguous
 * letters ("C0".."C39") and the end state "#" (always last). Each state has a list of
 * successors, all equally likely. sb_grammar_generate reproduces the reference generator
 * exactly: the same states in the same order, the same start states and the same
 * transition list (with bit-identical probabilities) for the same configuration and seed.
 */
#ifndef SELECTIVBENCH_GRAMMAR_H
#define SELECTIVBENCH_GRAMMAR_H

#include <stdint.h>
#include <stdio.h>

#include "config/task_config.h"
#include "core/status.h"

#define SB_MAX_LETTERS 52    /* A..Z a..z */
#define SB_MAX_CLASSES 53    /* letters + '#' */
#define SB_MAX_AMB_DEPTH 999 /* state names up to 4 characters ("z998") */
#define SB_START_STATES 4
#define SB_STATE_NAME_MAX 8
#define SB_GRAMMAR_MAX_ATTEMPTS 100000

/* The paper's main configuration: V 41, amb 40, depth 40, density 0.4, seed 1. */
sb_grammar_config sb_grammar_config_default(void);

/* Checks a configuration (after applying grammar_scale) without generating anything.
 * Returns SB_ERR_INVALID with a message naming the offending flag. */
sb_status sb_grammar_config_check(const sb_grammar_config *cfg, sb_error *err);
/* The configuration actually built: with grammar_scale, vocab = amb + 1 and amb_depth = amb
 * (the reference's rule); otherwise cfg itself. */
sb_grammar_config sb_grammar_config_effective(const sb_grammar_config *cfg);

typedef struct sb_grammar {
    sb_grammar_config config; /* effective configuration (grammar_scale applied) */
    int n_letters;            /* L = vocab - 1 */
    int n_classes;            /* input classes = L + 1: '#' is 0, A..Z 1..26, a..z 27..52 */
    int n_states;             /* n, '#' is the last state */
    int end_state;            /* index of '#' (= n_states - 1) */
    char (*state_name)[SB_STATE_NAME_MAX]; /* [n_states] names in reference order */
    uint8_t *state_class;                  /* [n_states] class of the state's letter (0 for '#') */
    uint16_t *state_id;                    /* [n_states] classifier target id ('#' is 0) */
    int start_states[SB_START_STATES];     /* state indices, reference order */

    /* successors, ascending state index: succ[succ_offset[i] .. succ_offset[i+1]) */
    int *succ_offset; /* [n_states + 1] */
    uint16_t *succ;   /* [n_transitions] */
    double *out_prob; /* [n_states] probability of each transition out of i (1/k) */
    int n_transitions;

    /* per state, bit c set iff no transition leads to a state of class c: the classes a
     * non-grammatical gap may show after this state */
    uint64_t *forbidden_classes; /* [n_states] */

    int d_output;               /* classifier outputs = n_states */
    double topological_entropy; /* ln of the Perron root of the corrected table */
    int python_seed;            /* first draw integers(0,100): seeds CPython's random */
    int attempts;               /* grammar attempts including the accepted one */
} sb_grammar;

/* Generates the grammar of cfg (the reference's generate_grammar + ArtificialGrammar),
 * including its state ids and topological entropy. On success *out owns a new grammar
 * (free with sb_grammar_free). Errors: SB_ERR_INVALID for impossible parameters,
 * SB_ERR_RUNTIME when no valid grammar is found in 100000 attempts. */
sb_status sb_grammar_generate(const sb_grammar_config *cfg, sb_grammar **out, sb_error *err);

void sb_grammar_free(sb_grammar *g);

/* Index of the state called `name` (also accepts the alias "B0" of a plain letter "B"),
 * or -1. */
int sb_grammar_find_state(const sb_grammar *g, const char *name);

/* Letter of class c: '#' for 0, 'A'.. for 1.., 'a'.. for 27.. */
char sb_class_letter(int c);

/* Topological entropy by the direct method (docs/task.md, "Grammar"): ln of the Perron root of
 * the binary successor table with the edges '#' -> start added. Sparse power iteration on
 * each strongly connected component with Collatz-Wielandt bounds (converged to 1e-14
 * relative), falling back to LAPACK dgeev for components where that is slow. */
sb_status sb_grammar_entropy(const sb_grammar *g, double *te, sb_error *err);

/* Writes the grammar as JSON in the schema of the reference vector files (config,
 * states, start_states, successors, out_prob, topological_entropy, d_output,
 * state_ids, ...). */
void sb_grammar_write_json(const sb_grammar *g, FILE *f);

/* Writes a Graphviz digraph of the grammar (start states marked, '#' double circle). */
void sb_grammar_write_dot(const sb_grammar *g, FILE *f);

/* Writes the reference's `transitions` file: one "src, dst, prob" line per transition. */
void sb_grammar_write_transitions(const sb_grammar *g, FILE *f);

#endif
