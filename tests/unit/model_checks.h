/* model_checks.h - checks of whole models shared by the unit tests: streaming against the
 * whole sequence, and parameters and logits against a PyTorch mimic's JSON file.
 *
 * Compiled into every test executable, so `real` is float or double as the library the test
 * links; the comparisons are made in double either way. Every check fails the running cmocka
 * test (fail_msg / assert_*) with the label (the model's name) in the message. */
#ifndef SELECTIVBENCH_MODEL_CHECKS_H
#define SELECTIVBENCH_MODEL_CHECKS_H

#include <jansson.h>
#include <stdint.h>

#include "model/model.h"

/* ---- streaming ------------------------------------------------------------------------------ */

/* x[B, T, d_input] through sb_model_hidden in one piece, then the same frames in chunks
 * (chunks[0] + ... + chunks[n_chunks - 1] == T) through sb_model_hidden_stream with zeroed
 * per-layer states; every output of every chunk must be within tol (absolute) of the whole
 * sequence's. Also asserts that m can stream. */
void check_stream_matches_whole(const sb_model *m, const real *x, int B, int T, const int *chunks,
                                int n_chunks, double tol, const char *label);

/* ---- threads and streaming memory ------------------------------------------------------------ */

/* One training step of m with `threads` OpenMP threads: forward on a fixed one-hot input
 * [B, T, d_input] with dropout on (fixed seed), cross-entropy against fixed targets,
 * backward. Returns the logits followed by every parameter gradient (*count values; the
 * caller frees). */
real *model_train_step(sb_model *m, int threads, int B, int T, size_t *count);

/* The step above with 1 and with 2 threads: logits and gradients identical bit for bit.
 * Restores the thread count it found. */
void check_threads_identical(sb_model *m, int B, int T, const char *label);

/* Streams `chunks` chunks of Tc frames (B rows, one-hot input) through
 * sb_model_hidden_stream with zeroed states: every output finite, the arena's peak after the
 * last chunk equal to the peak after the first (nothing grows with the frames), and the
 * carried states finite at the end. */
void check_stream_memory_flat(const sb_model *m, int B, int Tc, int chunks, const char *label);

/* ---- the PyTorch mimic ---------------------------------------------------------------------- */

/* A mimic file (tests/data/<family>/<name>.json): "config", "input" [B, T, I] and "models" by
 * name. */
typedef struct mimic_file {
    json_t *root;
    const json_t *input; /* B * T * I values, row-major */
    int B, T;
    int I, O; /* input and output widths ("I", "O"; "F", "C" in the LM stacks' file) */
    int D, H; /* "d" and "H"; 0 where the file gives d per model and no H */
    int L;    /* layers */
    uint64_t seed;
} mimic_file;

/* Loads tests/data/<relpath>, reads its config and checks the input's size. */
void mimic_open(mimic_file *f, const char *relpath);
void mimic_close(mimic_file *f);
/* models.<name> of the file; fails the test if there is none. */
const json_t *mimic_model(const mimic_file *f, const char *name);

/* The state_dict's layout: the trainable count, then the number, names, shapes and order of
 * the parameters. */
void check_mimic_layout(const json_t *ref_model, const sb_model *m, const char *label);

/* Initial values as the RecNet mimics record them ("sum", "first" per parameter): every sum
 * within |s - r| <= sum_rtol (1 + |r|), the first values within |v - r| <= first_rtol |r|,
 * or bit for bit (v == r) when first_rtol is 0. */
void check_mimic_sum_and_first(const json_t *ref_model, const sb_model *m, double sum_rtol,
                               double first_rtol, const char *label);

/* Initial values as the LM stacks' mimic records them ("at", "values": sampled elements):
 * equal as float32, bit for bit. */
void check_mimic_sampled_values(const json_t *ref_model, const sb_model *m, const char *label);

/* The forward on the file's input against "logits": the largest relative error
 * e = |y - r| / (rel_floor + |r|) must stay below tol (a NaN fails). Returns that error. */
double check_mimic_logits(const json_t *ref_model, const sb_model *m, const mimic_file *f,
                          double rel_floor, double tol, const char *label);

/* What check_against_mimic allows; see the functions above. */
typedef struct mimic_tolerances {
    double sum_rtol;     /* per-parameter sums */
    double first_rtol;   /* first values; 0: bit for bit */
    double logits_floor; /* added to |r| in the logits' relative error */
    double logits_tol;   /* bound on the logits' relative error */
} mimic_tolerances;

/* Layout, sums and first values, then logits (the RecNet mimics). */
void check_against_mimic(const json_t *ref_model, const sb_model *m, const mimic_file *f,
                         const mimic_tolerances *tol, const char *label);

#endif
