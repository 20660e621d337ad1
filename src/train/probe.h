/*
 * probe.h - what a trained model keeps, where, and for how long (`selectivbench probe`;
 * definitions and how to read the figures: docs/probe.md).
 *
 * Three sections, each optional:
 *   readout    linear decodability: for the encoder's output and every block's, a linear
 *              readout of the state ids (LDA, or ridge regression onto one-hot targets),
 *              fitted on training samples and scored on test samples, for the current
 *              element and the elements j = 1, 2, 4, 8 back;
 *   gates      every input-dependent gate (the layer type's probe_gates) on symbol frames
 *              versus gap frames, per layer and head, with a gap selectivity;
 *   retention  along one long gap (task 4's test gaps), frame by frame, the norm of every
 *              layer's recurrent state (streaming models) and of its output.
 * The library computes the numbers (sb_probe_run), writes them as JSON and draws one figure
 * per section; it prints nothing.
 */
#ifndef SELECTIVBENCH_PROBE_H
#define SELECTIVBENCH_PROBE_H

#include <stdint.h>

#include "config/run_config.h"
#include "core/json_writer.h"
#include "core/status.h"
#include "model/model.h"
#include "task/task.h"

/* The sections (SB_PROBE_READOUT, SB_PROBE_GATES, SB_PROBE_RETENTION, SB_PROBE_ALL),
 * sb_probe_readout and sb_probe_frame are the public header's (one definition). */

#define SB_PROBE_N_LAGS 5 /* j = 0, 1, 2, 4, 8 */
#define SB_PROBE_HIST_BINS 20

/* The lags j of the readouts: the target of element e is the state id of element e - j. */
extern const int sb_probe_lags[SB_PROBE_N_LAGS];

typedef struct sb_probe_options {
    int sections;             /* SB_PROBE_* bits */
    int gates_required;       /* 1: a model without gates is an error, else reported absent */
    int64_t train_samples;    /* training samples the readouts are fitted on */
    int64_t test_samples;     /* test samples scored (0: the whole test split) */
    sb_probe_readout readout; /* the linear readout fitted (default LDA) */
    double ridge;             /* shrinkage lambda: ridge, relative to the mean diagonal of X^T X;
                                 LDA, relative to the features' mean variance */
    sb_probe_frame frame;
    int retention_samples; /* long-gap test samples averaged */
    int retention_element; /* the gap after the first element at this index or later (the
                              last element with a gap if none) */
    int batch;             /* samples per forward */
} sb_probe_options;

/* The options the probe keys of rt give (section, probe_samples, samples, readout, ridge,
 * probe_frame, retention_samples, retention_element, probe_bs: keys.def has their defaults);
 * a section asked alone is required: gates asked of a model without any is an error. */
sb_probe_options sb_probe_options_from(const sb_runtime *rt);

typedef struct sb_probe_gate_kind {
    char name[48];
    double hi; /* the gate lies in [0, hi]: the histograms' range */
    /* [n_groups] per head (or channel group); NAN where no frame of that kind was seen */
    double *mean_symbol, *mean_gap, *selectivity;
    double hist_symbol[SB_PROBE_HIST_BINS], hist_gap[SB_PROBE_HIST_BINS]; /* fractions */
    double layer_selectivity;                                             /* mean over groups */
} sb_probe_gate_kind;

typedef struct sb_probe_gate_layer {
    int n_kinds, n_groups;
    sb_probe_gate_kind kind[SB_GATE_KINDS_MAX];
} sb_probe_gate_layer;

typedef struct sb_probe_result {
    char model[SB_MODEL_NAME_MAX];
    int L, D, C, V;
    int sections;
    /* the model's own windowed accuracy on the scored test samples (as sb_evaluate) */
    double model_test_acc;
    int64_t test_samples, test_elements;
    /* readout */
    int64_t train_samples, train_elements;
    sb_probe_frame frame;
    sb_probe_readout readout;
    double ridge;
    double *readout_acc; /* [L + 1][SB_PROBE_N_LAGS]; NAN: no element that far back */
    int64_t *readout_n;  /* [L + 1][SB_PROBE_N_LAGS] test elements scored */
    /* gates: NULL with a reason when the model has none or the section was not run */
    sb_probe_gate_layer *gates; /* [L], n_kinds 0 for a layer without gates */
    int64_t gate_symbol_frames, gate_gap_frames;
    char gates_reason[256];
    /* retention along one long gap of gap_frames frames: index 0 is the element's symbol
     * frame, 1..gap_frames its gap frames; means over retention_samples samples */
    int gap_frames, retention_samples, retention_element;
    double *output_norm;        /* [L][gap_frames + 1] ||layer output|| */
    double *state_norm;         /* [L][gap_frames + 1] ||recurrent state||, NULL if the
                                   model does not stream */
    char retention_reason[256]; /* why retention is absent (empty when present) */
} sb_probe_result;

/* Runs the sections of opt on model m (trained on task). long_task is the same task with the
 * long test gaps of the retention section (its test samples are used; NULL when retention is
 * not asked; without any gap the section is absent, with a reason). res is filled (free it
 * with sb_probe_result_free, also on failure). Errors: SB_ERR_INVALID when
 * opt->gates_required and the model has no input-dependent gates (the message names it) or
 * for bad options; SB_ERR_NOMEM; SB_ERR_RUNTIME when a ridge system is not positive
 * definite. */
sb_status sb_probe_run(const sb_task *task, const sb_task *long_task, const sb_model *m,
                       const sb_probe_options *opt, sb_probe_result *res, sb_error *err);
void sb_probe_result_free(sb_probe_result *res);

/* Writes res as one JSON object (docs/probe.md lists the keys); checkpoint may be NULL. */
void sb_probe_write_json(const sb_probe_result *res, const char *checkpoint, sb_json *j);

/* Writes dir/readout.{png,svg,pdf}, dir/gates.* and dir/retention.* for the sections res
 * holds (dir must exist). Errors: SB_ERR_IO naming the file. */
sb_status sb_probe_write_figures(const sb_probe_result *res, const char *dir, sb_error *err);

/* ---- the readouts (exposed for the tests) ----------------------------------------------- */

/* Solves A W = B in place for a symmetric positive definite A [n x n] (row-major; only its
 * lower triangle is read and it is overwritten by the Cholesky factor) and B [n x c]
 * (overwritten by W). Deterministic (a plain Cholesky, no threads). Errors: SB_ERR_RUNTIME
 * when A is not positive definite. */
sb_status sb_probe_cholesky_solve(double *A, int n, double *B, int c, sb_error *err);

/* Ridge regression onto one-hot targets: W [(d + 1) x C] minimising
 * sum_r ||[x_r, 1] W - onehot(y_r)||^2 + lambda' ||W without its bias row||^2, with
 * lambda' = lambda * mean_i (X^T X)_ii; X [rows x d] (rows >= 1), y [rows] in [0, C). */
sb_status sb_probe_ridge_fit(const double *X, const int32_t *y, int64_t rows, int d, int C,
                             double lambda, double *W, sb_error *err);

/* Linear discriminant analysis: class means mu_c, the pooled within-class covariance S
 * shrunk by lambda times the features' mean variance; W [(d + 1) x C] holds S^-1 mu_c and,
 * in its last row, -mu_c . S^-1 mu_c / 2 + log(n_c / N) (-1e30 for a class without rows),
 * so that argmax_c [x, 1] W is the LDA decision. Least squares onto one-hot targets does
 * poorly with many classes (hundreds of states); LDA from the same sums does not. */
sb_status sb_probe_lda_fit(const double *X, const int32_t *y, int64_t rows, int d, int C,
                           double lambda, double *W, sb_error *err);

#endif
