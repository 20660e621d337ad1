/*
 * selectivbench.h - the public API of libselectivbench: SelectivBench's grammar tasks, its
 * recurrent models, training, evaluation, results databases, sweeps and reports, on the CPU.
 *
 * The one header a program includes (docs/API.md). Build against the installed library with
 *   cc prog.c $(pkg-config --cflags --libs selectivbench)
 * or, in CMake, find_package(selectivbench) and target_link_libraries(prog
 * selectivbench::selectivbench).
 *
 * Conventions, true of every function below:
 *   - A function that can fail returns an sb_status and, when it fails, writes one line into
 *     the caller's sb_error (what went wrong, where, and what to do). err may be NULL.
 *   - The library never prints and never exits. A required pointer given as NULL is
 *     answered with SB_ERR_INVALID naming it; only the few functions that return no status
 *     (sb_config_run_hash, sb_config_training_hash, sb_task_get_facts, and the accessors of
 *     grammars, draws and settings) abort with a message on stderr when given NULL, as a
 *     programmer error. The sb_jw_ writing functions take a writer from sb_jw_open.
 *   - Handles (sb_config, sb_task, sb_results, sb_sweep, sb_grammar, sb_draw, sb_jw) are
 *     opaque: create them with the
 *     functions here, free them with their _free function (NULL is allowed there).
 *   - Strings the library returns as `const char *` are static (valid for the life of the
 *     process) unless the contract says otherwise; strings it allocates (`char **`) are
 *     freed with sb_string_free.
 *   - A handle is used by one thread at a time; different handles are independent.
 *   - Structs in this header belong to the caller and are filled by the library. Their
 *     layout and the functions' signatures change only with SB_VERSION_MAJOR (the shared
 *     library's soname); a minor version only adds functions.
 */
#ifndef SELECTIVBENCH_PUBLIC_H
#define SELECTIVBENCH_PUBLIC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- version ------------------------------------------------------------------------------- */

#define SB_VERSION_MAJOR 0
#define SB_VERSION_MINOR 1
#define SB_VERSION_PATCH 0
#define SB_VERSION_STRING "0.1.0"

/* The version of the library actually loaded ("MAJOR.MINOR.PATCH"); compare it with
 * SB_VERSION_STRING, the version the program was compiled against. */
const char *sb_version(void);

/* ---- status and errors --------------------------------------------------------------------- */
/* (The library's own code uses these same definitions: src/core/status.h includes them.) */

typedef enum sb_status {
    SB_OK = 0,
    SB_ERR_INVALID = 1,  /* a bad argument or configuration (a usage error) */
    SB_ERR_IO = 2,       /* a file could not be read or written */
    SB_ERR_NOMEM = 3,    /* an allocation failed */
    SB_ERR_RUNTIME = 4,  /* the computation could not finish */
    SB_ERR_DIVERGED = 5, /* training met a NaN or infinite loss, or a loss far above its start */
    SB_ERR_EXCLUDED = 6, /* a configuration the reference itself does not run (train.py skips
                            it): refused, but as the paper's grids expect, not as bad input */
} sb_status;

#define SB_ERROR_MSG_MAX 512

/* The message of the last failure. Zero-initialise it (sb_error err = {0};) and pass its
 * address; after a failure, status is the returned status and msg one line of text. */
typedef struct sb_error {
    sb_status status;
    char msg[SB_ERROR_MSG_MAX];
} sb_error;

/* A short name for a status ("ok", "invalid argument", "i/o error", "out of memory",
 * "runtime error", "diverged", "excluded"; "unknown status" otherwise). Never NULL. */
const char *sb_status_name(sb_status status);

/* How a run stands or ended, in the results database and in a training outcome. The names
 * (sb_run_status_name) are what the database stores and every command prints. */
typedef enum sb_run_status {
    SB_RUN_NONE = 0,    /* nothing trained: an outcome whose results could not be set up */
    SB_RUN_RUNNING,     /* a process is training it (or died doing so: see sb_results_read) */
    SB_RUN_FINISHED,    /* trained and tested */
    SB_RUN_FAILED,      /* stopped by an error (the reason says which) */
    SB_RUN_DIVERGED,    /* a NaN or infinite loss, or a loss far above its start */
    SB_RUN_INTERRUPTED, /* stopped by a signal or a dead process; its checkpoint resumes it */
} sb_run_status;

/* The status's name: "running", "finished", "failed", "diverged", "interrupted"; "" for
 * SB_RUN_NONE and any value out of range. Never NULL. */
const char *sb_run_status_name(sb_run_status status);

/* The status named `name` (one of sb_run_status_name's, not ""). Errors: SB_ERR_INVALID
 * naming the accepted names. */
sb_status sb_run_status_parse(const char *name, sb_run_status *out, sb_error *err);

/* The message in err ("" for NULL or an error never set). Owned by err. */
const char *sb_error_message(const sb_error *err);

/* "Did you mean": among names[0..n_names-1], the single one within two single-character
 * edits of word, else the only one that starts with word; NULL when none is (or several
 * tie). Returns one of names, not a copy. */
const char *sb_closest_name(const char *word, const char *const *names, int n_names);

/* Frees a string the library allocated (sb_config_to_json). NULL is allowed. */
void sb_string_free(char *s);

/* The default thread count of every call that takes threads 0: the cores this process may
 * use (its affinity mask, its cgroup's CPU quota and, in a Slurm job, SLURM_CPUS_PER_TASK;
 * never the machine's load, which must not change how a run computes). At least 1. */
int sb_default_threads(void);

/* The most threads any call takes, as the command line's --threads: every call that takes a
 * thread count refuses one below 0 or above this (SB_ERR_INVALID) rather than ask OpenMP for
 * a pool it cannot create. */
#define SB_THREADS_MAX 1024

/* sizeof the public structure named name ("sb_result_row", "sb_train_settings", ...), or 0
 * for a name it does not know: for bindings that mirror the structures (python/) to check
 * their layout against the library they loaded. */
size_t sb_api_struct_size(const char *name);

/* ---- JSON writer ---------------------------------------------------------------------------
 * A small streaming JSON writer for programs that print results as JSON (the command line's
 * --json). Doubles are written in the shortest decimal form that reads back to the same bits
 * (what Python's repr prints); non-finite doubles are written as null. */

typedef struct sb_jw sb_jw;

/* A new writer to f (not owned: the writer never closes it); indent 0 writes one line, else
 * that many spaces per level. NULL when f is NULL or out of memory. Freed with sb_jw_close. */
sb_jw *sb_jw_open(FILE *f, int indent);

/* Frees the writer (NULL is allowed); what was written stays in f, which is not flushed. */
void sb_jw_close(sb_jw *j);

/* Containers: begin and end are paired; inside an object every value follows sb_jw_key.
 * Nesting deeper than 32 levels is a programmer error. */
void sb_jw_object_begin(sb_jw *j);
void sb_jw_object_end(sb_jw *j);
void sb_jw_array_begin(sb_jw *j);
void sb_jw_array_end(sb_jw *j);

/* An object's key (escaped as a string); its value comes next. */
void sb_jw_key(sb_jw *j, const char *key);

/* Values: a string (escaped; NULL is written as null), integers, a double (shortest
 * round-trip form; null when not finite), a boolean (0 false, else true), null, and JSON
 * text written as it is (e.g. sb_config_to_json's). */
void sb_jw_string(sb_jw *j, const char *s);
void sb_jw_int(sb_jw *j, int64_t v);
void sb_jw_uint(sb_jw *j, uint64_t v);
void sb_jw_double(sb_jw *j, double v);
void sb_jw_bool(sb_jw *j, int v);
void sb_jw_null(sb_jw *j);
void sb_jw_raw(sb_jw *j, const char *json_text);

/* The shortest round-trip decimal form of v into buf[size] (size >= 32), Python style
 * ("1.0", "0.1", "1e-05"); "nan", "inf" or "-inf" when not finite. */
void sb_jw_format_double(char *buf, size_t size, double v);

/* Seconds from an arbitrary fixed point, on a monotonic clock (for durations and rates). */
double sb_clock_seconds(void);

/* The peak resident memory of the process so far, in bytes (0 when unknown). */
size_t sb_peak_memory_bytes(void);

/* ---- configurations -------------------------------------------------------------------------
 * A configuration is every key of one run: the reference train.py's flags (task, model,
 * optimisation, seeds, test settings), with its defaults. Keys are set and read by name as
 * text, exactly as the command line's flags (`selectivbench train --help` lists them). */

typedef struct sb_config sb_config;

/* A new configuration holding the defaults (the paper's main task, transformer, train.py's
 * training defaults). *out is freed with sb_config_free. Errors: SB_ERR_NOMEM. */
sb_status sb_config_create(sb_config **out, sb_error *err);

/* Frees cfg (NULL is allowed). */
void sb_config_free(sb_config *cfg);

/* A new configuration equal to cfg. Errors: SB_ERR_NOMEM. */
sb_status sb_config_copy(const sb_config *cfg, sb_config **out, sb_error *err);

/* Sets key `key` from text as the flag --key would: integers in decimal, finite numbers,
 * True/False (yes/no, 1/0, any case) for booleans, a choice's name, "none" for an optional
 * key's unset value; then applies the key's derived logic (e.g. with same_seed the task seed
 * follows seed). Errors (SB_ERR_INVALID, the key keeps its value): unknown key, malformed
 * value, out of range (the message gives the range), unknown choice (it lists them). Values
 * checked across keys (the model's name, sizes the model cannot build) are refused by
 * sb_config_check, not here. */
sb_status sb_config_set_key(sb_config *cfg, const char *key, const char *value, sb_error *err);

/* Writes the value of key `key` as sb_config_set_key reads it back into buf[size] (always
 * terminated when size > 0). Errors: SB_ERR_INVALID for an unknown key or a buffer too
 * small (the message gives the length needed). */
sb_status sb_config_get_key(const sb_config *cfg, const char *key, char *buf, size_t size,
                            sb_error *err);

/* The value of a numeric, boolean, switch or choice key as a number (booleans 0 or 1, a
 * choice's index in its list); NaN for an unknown key, a text key or an optional key left
 * unset. For a caller that reads
 * the runtime keys (threads, mem_budget, quiet, ...) without formatting them. */
double sb_config_number(const sb_config *cfg, const char *key);

/* The value of a text key (model, results, db, ckpt), pointing into cfg (valid until cfg
 * changes or is freed); NULL for an unknown key or one of another type. */
const char *sb_config_text(const sb_config *cfg, const char *key);

/* The full check of a configuration, as `train` makes before it starts: every key's range,
 * the checks across keys, the model registry (unknown model: the message lists the known
 * ones) and the model's own rules. Errors: SB_ERR_INVALID naming the key. */
sb_status sb_config_check(const sb_config *cfg, sb_error *err);

/* The canonical JSON of cfg (fixed key order, train.py's names), as stored in results
 * databases and checkpoints; with training_only, without the test settings and the mode
 * (what the training hash covers). *json is freed with sb_string_free. Errors: SB_ERR_NOMEM. */
sb_status sb_config_to_json(const sb_config *cfg, int training_only, char **json, sb_error *err);

/* A new configuration from a JSON object as sb_config_to_json writes it (every key optional,
 * defaults for the others). Errors: SB_ERR_INVALID for text that is not JSON, an unknown
 * key or a bad value (the message names it); *out is NULL then. */
sb_status sb_config_from_json(const char *json, sb_config **out, sb_error *err);

/* The command-line flags that give cfg from the defaults: "--key value" for every key whose
 * value differs from its default (not the runtime keys, SB_KEYS_RUNTIME and up: they say
 * where and how, never what), in the key table's order, shell-quoted where needed, so
 * that `selectivbench train FLAGS` has cfg's run hash (the command that reproduces a stored
 * run). *flags is freed with sb_string_free ("" for the defaults). Errors: SB_ERR_NOMEM. */
sb_status sb_config_flags(const sb_config *cfg, char **flags, sb_error *err);

/* The run hash (16 hex digits and a NUL in hash[17]): it covers every key in the JSON and
 * keys a run in the results database. */
void sb_config_run_hash(const sb_config *cfg, char hash[17]);

/* The training hash: it covers what determines the trained weights (not the test
 * settings); checkpoints are named by it. */
void sb_config_training_hash(const sb_config *cfg, char hash[17]);

/* ---- the key table: every key a configuration has, in its JSON order ----------------------- */

#define SB_KEY_IN_RUN_HASH 1      /* sb_config_key_hashes: the run hash covers the key */
#define SB_KEY_IN_TRAINING_HASH 2 /* the training hash covers it */

/* Number of keys (no-op keys included). */
int sb_config_key_count(void);

/* Key i (0 <= i < sb_config_key_count()) or NULL outside: its name (the flag and JSON key),
 * its type ("int", "int64", "uint64", "double", "bool", "switch", "choice", "string",
 * "optional int", "optional double"), its default as text, one line of help. */
const char *sb_config_key_name(int i);
const char *sb_config_key_type(int i);
const char *sb_config_key_default(int i);
const char *sb_config_key_help(int i);

/* The accepted range of a numeric, boolean or switch key i (inclusive) in *min and *max (either
 * may be NULL): 0, or -1 for a text or choice key or i outside the table. */
int sb_config_key_range(int i, double *min, double *max);

/* Which hashes cover key i: SB_KEY_IN_RUN_HASH | SB_KEY_IN_TRAINING_HASH bits; 0 for a key
 * outside the JSON (an input of derived logic, a no-op) or i out of range. */
int sb_config_key_hashes(int i);

/* 1 when key i is accepted for train.py compatibility and has no effect, else 0. */
int sb_config_key_is_noop(int i);

/* ---- tasks ----------------------------------------------------------------------------------
 * A task is the grammar and the sample generators of a configuration's task keys. Samples
 * are pure functions of (configuration, split, index): nothing is stored, any index can be
 * drawn in any order, on any number of threads, with the same result. */

typedef struct sb_task sb_task;

/* The splits of a task. Validation samples are drawn as test samples are (the test's
 * sequence lengths and gap duration) from sequences that neither training nor the test use
 * (docs/task.md, "Splits"); every choice a report makes reads them, never the test. */
typedef enum sb_split { SB_SPLIT_TRAIN = 0, SB_SPLIT_TEST = 1, SB_SPLIT_VALID = 2 } sb_split;
#define SB_SPLIT_COUNT 3

/* "train", "test" or "valid" (the names a results database stores); "?" for another value.
 * sb_split_from_name reads one of them into *split: 0, or -1 for another string. */
const char *sb_split_name(sb_split split);
int sb_split_from_name(const char *name, sb_split *split);

/* Builds the task of cfg (its grammar, from the task seed). *out is freed with sb_task_free.
 * Errors: SB_ERR_INVALID naming the task key that cannot be built, SB_ERR_RUNTIME when no
 * grammar exists for the parameters, SB_ERR_NOMEM. */
sb_status sb_task_from_config(const sb_config *cfg, sb_task **out, sb_error *err);

/* Frees a task (NULL is allowed). */
void sb_task_free(sb_task *task);

/* What a task is. */
typedef struct sb_task_facts {
    int letters;                     /* letters of the alphabet (vocab - 1) */
    int inputs;                      /* V: one-hot width of a frame (the letters and the end '#') */
    int states;                      /* grammar states, the end state included: the classes a model
                                        predicts (targets are state ids 0 .. states - 1) */
    int transitions;                 /* edges of the grammar */
    int ambiguous_letters;           /* letters shared by several states (amb) */
    int states_per_ambiguous_letter; /* amb_depth */
    double topological_entropy;      /* TE in nats: ln of the Perron root */
    int64_t train_size, test_size;   /* samples in each split */
    int train_elements, test_elements; /* elements (grammar symbols) per sample */
    int64_t valid_size;                /* validation samples (drawn as the test's) */
} sb_task_facts;

/* Fills *facts. */
void sb_task_get_facts(const sb_task *task, sb_task_facts *facts);

/* The size of a batch of `count` samples of a split, padded to its longest sample. */
typedef struct sb_batch_shape {
    int batch;    /* B: samples */
    int frames;   /* T: frames of the longest sample (symbol frames + gap frames) */
    int elements; /* E: elements of the longest sample */
    int inputs;   /* V: floats per frame */
} sb_batch_shape;

/* The shape of the batch of samples index[0 .. count-1] of split (it assembles them: the
 * cost of one sb_task_read_batch). Errors: SB_ERR_INVALID for count < 1 or an index outside
 * [0, split size), SB_ERR_NOMEM. */
sb_status sb_task_batch_shape(const sb_task *task, sb_split split, const int64_t *index, int count,
                              sb_batch_shape *shape, sb_error *err);

/* Writes the batch of samples index[0 .. count-1] of split into caller arrays laid out with
 * the strides of *shape (from sb_task_batch_shape, or any larger frames/elements: the rest
 * is padding), B = shape->batch = count, T = shape->frames, E = shape->elements,
 * V = shape->inputs:
 *   inputs[B][T][V]     one-hot frames (zero or distractor gap frames, plus the task's
 *                       noise), zero on padding
 *   targets[B][T]       the state id to predict at every frame, 0 on padding
 *   valid[B][T]         1 on a sample's frames, 0 on padding
 *   window_start[B][E]  first frame of each element's accuracy window (its symbol frame,
 *                       then its gap frames), 0 on padding
 *   window_len[B][E]    frames of that window, 0 on padding
 * This is what the trainer sees: the loss is the cross entropy over valid frames, an
 * element is correct when the model is right on its window's frames (docs/training.md).
 * Any array may be NULL (not written). Errors: those of sb_task_batch_shape, and
 * SB_ERR_INVALID when *shape is smaller than the batch or does not match the task. */
sb_status sb_task_read_batch(const sb_task *task, sb_split split, const int64_t *index, int count,
                             const sb_batch_shape *shape, float *inputs, int32_t *targets,
                             uint8_t *valid, int32_t *window_start, int32_t *window_len,
                             sb_error *err);

/* A batch assembled once and read where it lies (what bindings use: sb_task_batch_shape
 * followed by sb_task_read_batch assembles it twice and copies it). The arrays are those of
 * sb_task_read_batch, with the batch's own strides (T = shape.frames, E = shape.elements),
 * plus frames[B], each sample's real frames; they stay valid until sb_task_batch_free. */
typedef struct sb_task_batch sb_task_batch;

typedef struct sb_batch_arrays {
    const float *inputs;         /* [B][T][V] */
    const int32_t *targets;      /* [B][T] */
    const uint8_t *valid;        /* [B][T] */
    const int32_t *window_start; /* [B][E] */
    const int32_t *window_len;   /* [B][E] */
    const int32_t *frames;       /* [B] */
} sb_batch_arrays;

/* Assembles the batch of samples index[0 .. count-1] of split on `threads` threads (0: every
 * core; the batch does not depend on it). *out is freed with sb_task_batch_free. Errors:
 * those of sb_task_batch_shape, and SB_ERR_INVALID for threads outside 0..SB_THREADS_MAX. */
sb_status sb_task_batch_make(const sb_task *task, sb_split split, const int64_t *index, int count,
                             int threads, sb_task_batch **out, sb_error *err);

/* Assembles another batch into b, reusing its storage (it grows when needed): the arrays a
 * loop over a split reads come from memory already mapped, as the trainer's do. b must have
 * been made for this task (sb_task_batch_make); views of its previous arrays are
 * overwritten. Errors: those of sb_task_batch_make, and SB_ERR_INVALID for a batch of another
 * task. On failure b holds no batch worth reading but can be refilled or freed. */
sb_status sb_task_batch_refill(sb_task_batch *b, const sb_task *task, sb_split split,
                               const int64_t *index, int count, int threads, sb_error *err);

/* The batch's shape and arrays (either may be NULL). */
void sb_task_batch_view(const sb_task_batch *b, sb_batch_shape *shape, sb_batch_arrays *arrays);

/* Frees a batch (NULL is allowed). */
void sb_task_batch_free(sb_task_batch *b);

/* ---- models: the registry of layer types ------------------------------------------------- */

/* Number of registered models (layer types). */
int sb_models_count(void);

/* The name of model i (what the key `model` takes), or NULL outside [0, count). */
const char *sb_models_name(int i);

/* What a model is: a summary and its taxonomy (docs/models/README.md). Strings are static;
 * a field the model does not describe is NULL. */
typedef struct sb_model_desc {
    const char *name;
    const char *summary; /* one line */
    const char *gating;
    const char *transition;  /* state transition structure */
    const char *update_rank; /* rank of what is written per token */
    const char *normalisation;
    const char *negative_eigenvalues;
    const char *state;   /* state per head (or per layer) */
    int is_stack;        /* 1: an LM stack (the *_layered models), 0: a RecNet */
    int can_stream;      /* 1: evaluates chunk by chunk from a carried state */
    int has_probe_gates; /* 1: `probe` reports its input-dependent gates */
    /* The design axes (docs/models/taxonomy.md), each one of a fixed set of names:
     *   gate granularity: "none", "scalar per head", "vector per channel"
     *   forgetting:       "none", "fixed", "input-dependent"
     *   transition:       "attention", "attention + Householder positions", "diagonal",
     *                     "delta rank-1", "diagonal + rank-1", "Householder product",
     *                     "nonlinear dense"
     *   update per token: "appends k, v", "elementwise", "rank-1", "rank-n", "full"
     *   memory growth:    "constant", "log T", "linear in T"
     * Two models whose names agree on an axis agree on it. */
    const char *axes[5];       /* in the order above; sb_models_axis_name names them */
    const char *state_formula; /* the floats one layer carries, as a formula */
} sb_model_desc;

/* The name of axis a of sb_model_desc.axes ("gate granularity", ...), or NULL outside [0, 5). */
const char *sb_models_axis_name(int a);

/* Fills *desc for model i. Errors: SB_ERR_INVALID for i outside [0, count). */
sb_status sb_models_describe(int i, sb_model_desc *desc, sb_error *err);

/* The sizes a model is built with, independent of a task. */
typedef struct sb_model_shape {
    int inputs;  /* one-hot inputs per frame */
    int classes; /* outputs per frame */
    int width;   /* model width d_model (feat_size) */
    int layers;
    int d_state; /* state size of the SSM layers */
} sb_model_shape;

/* Trainable parameters of `model` at *shape, and the floats one layer carries from frame to
 * frame (0 for attention, whose cache grows with the sequence); either output may be NULL.
 * Nothing is allocated. Errors: SB_ERR_INVALID for an unknown model (the message lists
 * them) or sizes it cannot build. */
sb_status sb_models_size(const char *model, const sb_model_shape *shape, uint64_t *params,
                         double *state_per_layer, sb_error *err);

/* Trainable parameters of the model cfg trains on its task (the grammar is generated to
 * know the inputs and classes). Errors: those of sb_config_check and sb_task_from_config. */
sb_status sb_config_param_count(const sb_config *cfg, uint64_t *params, sb_error *err);

/* ---- training and evaluation ------------------------------------------------------------- */

/* Where a training run is, as sb_train_config reports it. */
typedef struct sb_progress {
    int is_evaluation;          /* 0: after an update; 1: after an evaluation of the test set
                                   (a learning-curve point, --curve_points, has no validation
                                   scores) */
    int64_t step;               /* updates done */
    int64_t total_steps;        /* updates of the whole run */
    int64_t samples;            /* training samples consumed */
    double loss, acc;           /* after an update: the last micro-batch's; after an evaluation:
                                   the training averages since the previous one */
    double test_loss, test_acc; /* after an evaluation; NaN otherwise */
    double lr;                  /* learning rate of the last update */
    double tokens_per_s;        /* training frames per second so far (evaluation excluded) */
    double elapsed_s, eta_s;
    uint64_t params;              /* trainable parameters of the model */
    int grad_acc;                 /* micro-batches per update (gradient accumulation) */
    double mean_loss, mean_acc;   /* after an update: the means over the updates since the
                                     previous evaluation or curve point (the running training
                                     loss and accuracy); after an evaluation: loss and acc */
    double valid_loss, valid_acc; /* after an evaluation: the validation split's (NaN without
                                     one, --valid_size 0); NaN otherwise */
} sb_progress;

/* Called on the training thread after every update and every evaluation; p is valid for the
 * call. It must not call back into the same run. */
typedef void (*sb_progress_fn)(const sb_progress *p, void *user);

/* What sb_train_config calls back, and the world of processes it trains in: callbacks,
 * user pointers and the world's rank and size, nothing else. Everything else about a run is
 * a key of its configuration (sb_config_set_key), the runtime ones included: `results` (a
 * folder, created if missing: the run is recorded in RESULTS/selectivbench.db, keyed by its
 * run hash, and with `save_model` its weights go to RESULTS/checkpoints/TRAINING_HASH
 * .safetensors at every evaluation; "": in memory, nothing written), `db` and `ckpt`
 * (instead of those paths), `force` (train a run the database has finished again, else its
 * stored result comes back with cached = 1), `threads` (0: the cores the process may use;
 * results do not depend on it), `mem_budget`, `resume` (continue from the checkpoint and
 * its optimiser state), `checkpoint_every` (minutes: also write the checkpoint after the
 * first update that ends that long after the last one, so that a process killed without
 * warning loses at most that much; `resume` continues from it with the bits of an
 * uninterrupted run) and `inject_nan_at` (testing aid). Zero-initialised: no callbacks,
 * one process. */
typedef struct sb_train_settings {
    sb_progress_fn progress;      /* may be NULL */
    void *user;                   /* passed to progress, on_begin, on_start, on_db_warning and
                                     should_stop */
    void (*on_begin)(void *user); /* called once when the run will train (not for a cached
                                     run), before its task and model are built; may be NULL */
    sb_progress_fn on_start;      /* called once before the first update (step 0, params,
                                     grad_acc, total_steps); may be NULL */
    /* A database write failed (at_end 0: during the run, reported once; 1: recording its
     * end) and the run went on: with this callback the call's status is training's alone;
     * without it (NULL) the failure is the call's error. */
    void (*on_db_warning)(const char *msg, int at_end, void *user);
    /* A stop request, polled once per update on the training thread (NULL: never stop).
     * When it returns nonzero the run ends after that update (unless it was the last):
     * the checkpoint that `resume` continues from is written (with save_model or ckpt),
     * the run is recorded as "interrupted" with the update in its reason, and
     * sb_train_config returns SB_OK with status SB_RUN_INTERRUPTED. It is called often: keep
     * it cheap (the command line returns a flag its signal handlers set; the library
     * installs no signal handlers). */
    int (*should_stop)(void *user);
    /* Data-parallel training (the configuration's grad_shards K > 1; docs/cluster.md): this
     * process is rank world_rank of world_size processes that train the run together (0 and
     * 0 or 1: one process). Each computes the gradient shards s with s % world_size ==
     * world_rank (K must be a multiple of world_size), all_gather gives every process every
     * process's block, and each sums the shards in order: the weights are bit-identical on
     * every rank, and to one process's with the same K. all_gather (required when
     * world_size > 1) sends `bytes` from mine, this process's block (it may lie inside all
     * at its place), to every process, and fills all with the blocks of ranks 0 .. world_size
     * - 1 one after the other (MPI_Allgather); it returns 0, nonzero on failure, and every
     * process calls it at the same points. Rank 0 alone opens the results database and
     * writes the checkpoint; the others follow its decision to train (a finished run comes
     * back cached on every rank) and read the checkpoint with resume. A stop request on any
     * rank stops every rank after the same update. all_to_all (optional; NULL: gather every
     * shard) exchanges blocks as MPI_Alltoall does: send holds world_size blocks of `bytes`,
     * block d for process d, and recv receives block r from process r. With it the shards
     * are reduce-scattered instead of gathered (each process sums its slice of the
     * parameters, the slices are then gathered): the same weights, a ring all-reduce's
     * volume instead of (K - K/W) gradients per micro-batch, and K/W times less memory. */
    int world_rank, world_size;
    int (*all_gather)(const void *mine, size_t bytes, void *all, void *world_user);
    void *world_user;
    int (*all_to_all)(const void *send, size_t bytes, void *recv, void *world_user);
} sb_train_settings;

/* What a training run gave. Unknown numbers are NaN. */
typedef struct sb_train_outcome {
    sb_run_status status;          /* finished, diverged, failed or interrupted
                                      (settings->should_stop); SB_RUN_NONE when nothing
                                      trained because the results could not be set up, or
                                      the run is locked (locked_by) */
    char reason[SB_ERROR_MSG_MAX]; /* why it failed, diverged or was interrupted, else "" */
    double test_acc, test_loss;    /* the final evaluation */
    double train_acc, train_loss;  /* training averages before it */
    double valid_acc, valid_loss;  /* the final evaluation's validation split (NaN: none) */
    uint64_t params;
    int64_t steps, samples;
    double tokens_per_s, wall_s;
    double ceiling;          /* the task's ideal-observer accuracy (recorded runs only) */
    double effective_memory; /* elements; INFINITY beyond 32 (recorded runs only) */
    int cached;              /* 1: the database had this run finished; nothing was trained */
    char run_hash[17], training_hash[17];
    char database[4096];   /* the results database, or "" in memory */
    char checkpoint[4096]; /* the checkpoint written (or read with resume or test_pretrained),
                              or "" */
    int grad_acc;          /* micro-batches per update */
    char finished_at[32];  /* cached: when the stored run finished (UTC ISO-8601), else "" */
    /* with a results folder: another process is training this run (it holds the run's lock,
     * RESULTS/locks/RUN_HASH.lock beside the database): its pid, or -1 when it cannot be
     * named; nothing was trained and the call failed with SB_ERR_RUNTIME. 0 otherwise. */
    long locked_by;
    double gather_s; /* seconds spent in settings->all_gather (data-parallel), else 0 */
    /* What the run's bits depend on besides its configuration (docs/training.md,
     * "Reproducibility"): the engine table of its products ("auto-1", "openblas", "onednn";
     * a resume keeps its checkpoint's when the configuration's gemm is the default), the
     * threads, and the fingerprint digest of both with the CPU and libraries. With resume,
     * checkpoint_fingerprint is the checkpoint's ("" when it records none): a different one
     * means the resumed run will not round as an uninterrupted one would. */
    char engine[16];
    int threads;
    char fingerprint[9];
    char checkpoint_fingerprint[9];
    double flops_per_token; /* the model's forward FLOPs per token (sb_result_row's) */
    int n_evals;            /* evaluations of the test split this call made (the final one
                               included; 0 when it stopped before any) */
} sb_train_outcome;

/* Trains the model of cfg on its task (train.py's run: one pass over the training set,
 * evaluations every epoch_size samples and at the end), reporting progress through
 * settings->progress (settings may be NULL: no callback, one process). Where and how it
 * runs are cfg's runtime keys (sb_train_settings lists them): by default it records the run
 * in ./results, as `selectivbench train` does; set `results` to "" to train in memory. *out
 * is filled even on failure (status and reason). With a results folder the run's rows and
 * yardsticks are recorded as `selectivbench train` records them, and the run is locked
 * while it trains: one process at a time trains a run hash in a database. With resume,
 * a run the database has as interrupted (or failed) keeps the evaluations of its earlier
 * attempt up to the checkpoint it continues from.
 * Errors: those of sb_config_check; SB_ERR_IO for the results folder or database;
 * SB_ERR_RUNTIME when another process trains the run (out->locked_by); SB_ERR_DIVERGED when
 * the run diverged (status "diverged", the reason in out: a NaN or infinite loss, gradient
 * norm or test loss, or an exploding training loss, see docs/training.md); SB_ERR_NOMEM. */
sb_status sb_train_config(const sb_config *cfg, const sb_train_settings *settings,
                          sb_train_outcome *out, sb_error *err);

typedef struct sb_eval_outcome {
    double test_acc, test_loss;
    int64_t test_size; /* test samples evaluated */
    double test_gap_s; /* the gap duration of the test (and validation) samples, seconds */
    double valid_acc, valid_loss; /* the validation split's, at the same gap (NaN: none) */
    int64_t valid_size;           /* validation samples evaluated */
} sb_eval_outcome;

/* Evaluates the checkpoint at `checkpoint` on the test and validation splits of cfg, or of
 * the configuration recorded in the checkpoint when cfg is NULL (override test keys such as
 * test_dur by passing a configuration from sb_checkpoint_config with keys changed). How is
 * cfg's runtime keys: `threads` (0: every core), `mem_budget`, `dump` (a file to write the
 * first test batch to, inputs, logits and mask as safetensors, for cross-checks against
 * the reference; "": none); a NULL cfg takes their defaults. Errors: SB_ERR_IO for a
 * missing or corrupt file, damaged metadata of ours or a dump that cannot be written;
 * SB_ERR_INVALID for a checkpoint whose tensors do not fit the model of the configuration
 * or hold a NaN or an infinity (the message names the tensor and the count), or without
 * our metadata when cfg is NULL; those of sb_config_check. */
sb_status sb_evaluate_checkpoint(const char *checkpoint, const sb_config *cfg, sb_eval_outcome *out,
                                 sb_error *err);

/* ---- checkpoints ------------------------------------------------------------------------- */

/* A new configuration read from the metadata of a checkpoint written by this library
 * (the safetensors file holds the reference model's state_dict). Errors: SB_ERR_IO for a
 * missing or corrupt file, or a recorded configuration that does not pass sb_config_check
 * (the message names the file and the metadata key: damaged, or from another version);
 * SB_ERR_INVALID for a file without our metadata. (Checkpoints are written by
 * sb_train_config with a results folder and save_checkpoint.) */
sb_status sb_checkpoint_config(const char *path, sb_config **out, sb_error *err);

/* ---- results databases ------------------------------------------------------------------- */

typedef struct sb_results sb_results;

/* The database path of a results folder, RESULTS/selectivbench.db, into out[size].
 * Errors: SB_ERR_INVALID when it does not fit. */
sb_status sb_results_path(const char *results_dir, char *out, size_t size, sb_error *err);

/* Opens (creating it, and its folder, when missing) the results database at path for
 * reading and writing; an older schema is upgraded in place. *out is closed with
 * sb_results_close. Errors: SB_ERR_INVALID for an empty path; SB_ERR_IO naming the path
 * when it cannot be created or written, is not a results database or is newer than this
 * library. *out is NULL on failure. */
sb_status sb_results_open(const char *path, sb_results **out, sb_error *err);

/* Opens an existing results database for reading only (nothing is created or written).
 * Errors: SB_ERR_IO naming the path when it is missing, unreadable or not a results
 * database. *out is NULL on failure. */
sb_status sb_results_open_readonly(const char *path, sb_results **out, sb_error *err);

/* Closes the database (NULL is allowed). */
void sb_results_close(sb_results *db);

/* One run as stored. Unknown numbers are NaN (params, state_size: -1), unknown strings "". */
typedef struct sb_result_row {
    char run_hash[17];
    char model[32];
    sb_run_status status; /* running, finished, failed, diverged or interrupted (stopped
                             by a signal; its checkpoint resumes it) */
    char protocol[16];    /* "reference" or "clean" */
    int64_t params;
    double test_acc, test_loss, train_acc, train_loss;
    double wall_s, tokens_per_s;
    double ceiling, effective_memory; /* the yardsticks, as stored */
    char finished_at[32];             /* UTC ISO-8601 */
    char reason[SB_ERROR_MSG_MAX];    /* why it failed, diverged or was interrupted, else "" */
    double flops_per_token;           /* the model's forward FLOPs per token */
    int64_t state_size;               /* floats the model carries from one frame to the next */
    int64_t attempts;                 /* times the run was started (a resume or a retry adds one) */
    char checkpoint[4096]; /* its weights (safetensors), or "" when it saved none; the file
                              is named by the training hash, which runs that differ only in
                              test settings share (task 4 evaluates task 2's weights) */
    char host[256];        /* the machine that trained it (its last attempt), or "" */
    int64_t rank;          /* the MPI rank that trained it in an MPI sweep, -1 otherwise */
    int64_t world_size;    /* ranks its training was spread over (data-parallel; 1: one) */
    int64_t threads;       /* threads per process; -1: not recorded (before schema 5) */
    char engine[16];       /* its engine table, "" when not recorded */
    char fingerprint[9];   /* its fingerprint digest (sb_train_outcome), "" when not recorded */
    double valid_acc, valid_loss; /* the validation split's (NaN: none, or before schema 6) */
} sb_result_row;

/* The names of the statuses a stored run can have (sb_run_status_name of SB_RUN_RUNNING to
 * SB_RUN_INTERRUPTED, in that order): a NULL-terminated list, the one the command line's
 * filters accept. Static; never NULL. */
const char *const *sb_results_statuses(void);

/* Number of runs stored, of every model (model NULL) or of one. Errors: SB_ERR_IO. */
sb_status sb_results_count(sb_results *db, const char *model, size_t *count, sb_error *err);

/* Reads up to `max` runs (of every model, or of one), from the first-th in insertion order,
 * into rows[]; *n receives how many were written (0 past the end). Iterate by advancing
 * first by *n until it is 0. A run stored as "running" whose lock no process holds (its
 * process died: kill -9, a crash) reads as "interrupted" with the reason "its process ended
 * without finishing (killed?) ..."; a connection opened for writing also records that in
 * the database, a read-only one does not (sb_results_find alike). Errors: SB_ERR_IO,
 * SB_ERR_NOMEM. */
sb_status sb_results_read(sb_results *db, const char *model, size_t first, sb_result_row *rows,
                          size_t max, size_t *n, sb_error *err);

/* The run with this run hash: *found is 1 and *row filled when it exists, else 0 (a dead
 * "running" run reads as "interrupted", as with sb_results_read). Errors: SB_ERR_IO,
 * SB_ERR_NOMEM. */
sb_status sb_results_find(sb_results *db, const char *run_hash, sb_result_row *row, int *found,
                          sb_error *err);

/* Whether the run continues from its checkpoint when it runs again (as a sweep does): it
 * was interrupted and row->checkpoint names a readable file. */
int sb_result_row_resumable(const sb_result_row *row);

/* Writes RESULTS/logs/HASH.log, where a sweep keeps the output of the run with this run hash,
 * into out[size]; with create, makes RESULTS and RESULTS/logs when missing. Errors:
 * SB_ERR_INVALID when the path does not fit; SB_ERR_IO when a folder cannot be made. */
sb_status sb_results_log_path(const char *results_dir, const char *run_hash, char *out, size_t size,
                              int create, sb_error *err);

/* A new configuration: the one stored for the run with this run hash. Errors: SB_ERR_INVALID
 * when no such run exists or its stored configuration does not read back; SB_ERR_IO. */
sb_status sb_results_run_config(sb_results *db, const char *run_hash, sb_config **out,
                                sb_error *err);

/* The configuration stored for the run with this run hash, as its JSON text (train.py's
 * names): *json is a copy of the stored text, freed with sb_string_free, or NULL when the
 * run has none stored. Errors: SB_ERR_INVALID when no such run exists; SB_ERR_IO,
 * SB_ERR_NOMEM. */
sb_status sb_results_config_json(sb_results *db, const char *run_hash, char **json, sb_error *err);

/* Backfills the yardsticks of row (from sb_results_read or sb_results_find): for a
 * finished run whose ceiling or effective memory is missing (recorded before they
 * existed), computes them from the run's stored configuration, writes them to the database
 * unless it is read-only, and updates row->ceiling and row->effective_memory. *ceiling_se
 * (may be NULL) receives the standard error of the task's ceiling (computed once per task
 * and cached; NaN on failure). Errors: SB_ERR_INVALID when no such run exists or its
 * configuration does not read back or builds no task; SB_ERR_IO, SB_ERR_NOMEM. */
sb_status sb_results_backfill(sb_results *db, sb_result_row *row, int threads, double *ceiling_se,
                              sb_error *err);

/* A run's id is its run hash (16 hex digits); commands take any unique prefix of it.
 * Resolves id (a full hash or a prefix of at least 4 hex digits) to the stored run's hash.
 * Errors: SB_ERR_INVALID when id is not hex, too short, matches no run or matches several
 * (the message names two of them); SB_ERR_IO, SB_ERR_NOMEM. */
sb_status sb_results_resolve_run(sb_results *db, const char *id, char run_hash[17], sb_error *err);

/* One point of a run's learning curve: an evaluation on one split. NaN: unknown. */
typedef struct sb_curve_point {
    int64_t step;    /* optimiser update */
    int64_t samples; /* training samples seen; < 0: unknown */
    sb_split split;  /* SB_SPLIT_TRAIN, SB_SPLIT_TEST or SB_SPLIT_VALID */
    double loss, acc;
    double lr;           /* learning rate at this step */
    double tokens_per_s; /* training throughput so far */
    double wall_s;       /* seconds since the run started */
} sb_curve_point;

/* The learning curve of the run with this run hash: its evaluations ordered by step, then
 * split (test, train, valid). *points is a new array of *n points (NULL when *n is 0), freed
 * with sb_results_curve_free. Errors: SB_ERR_INVALID when no such run exists; SB_ERR_IO,
 * SB_ERR_NOMEM. */
sb_status sb_results_curve(sb_results *db, const char *run_hash, sb_curve_point **points, size_t *n,
                           sb_error *err);

/* The live points of the run with this run hash, by step: what it wrote every --live_every
 * seconds while it trained (split SB_SPLIT_TRAIN: the means of the training loss and
 * accuracy since the previous curve point, the learning rate, tokens/s so far), for
 * dashboards. Not evaluations: no figure or verdict reads them. A database before schema 7
 * has none. Freed with sb_results_curve_free; errors as sb_results_curve. */
sb_status sb_results_live(sb_results *db, const char *run_hash, sb_curve_point **points, size_t *n,
                          sb_error *err);
void sb_results_curve_free(sb_curve_point *points);

/* SQLite's integrity check of the database: *ok is 1 when it passes. Errors: SB_ERR_IO
 * when it cannot run. */
sb_status sb_results_integrity_check(sb_results *db, int *ok, sb_error *err);

/* Merging databases (shards of a sweep run on several machines). Runs are matched by run
 * hash. A run the database lacks is added with its evaluations; a run further along in the
 * source replaces ours (an ended run, finished or diverged, over an interrupted one, over a
 * failed one, over a row left running); a run as far along in both, or further along here,
 * is left as it is. A run that ended in both with a different status or test metrics is a
 * conflict: ours is kept and on_conflict hears of it. The cached ceilings are copied.
 * Merging the same file twice changes nothing the second time. */
typedef struct sb_results_merge_tally {
    int64_t added;     /* runs the database did not have */
    int64_t replaced;  /* runs further along in the source */
    int64_t same;      /* as far along in both (ended ones with the same outcome) */
    int64_t kept;      /* further along here */
    int64_t conflicts; /* ended in both, differently: ours kept */
} sb_results_merge_tally;
typedef void (*sb_results_conflict_fn)(const char *run_hash, const char *model, const char *status,
                                       double test_acc, const char *source_path,
                                       const char *source_status, double source_test_acc,
                                       void *user);
/* Merges the results database at src_path into db (opened with sb_results_open), in one
 * transaction: on an error nothing changes and *tally is zero. on_conflict may be NULL.
 * Errors: SB_ERR_INVALID when src_path is db's own file or has an older schema (the
 * message says how to upgrade it); SB_ERR_IO when it is missing or not a results database,
 * or db cannot be written. */
sb_status sb_results_merge(sb_results *db, const char *src_path, sb_results_merge_tally *tally,
                           sb_results_conflict_fn on_conflict, void *user, sb_error *err);

/* For a sweep's coordinator, the one writer of its database while workers train elsewhere
 * (an MPI sweep, docs/cluster.md):
 * sb_results_extract_run writes a new database at dst_path holding only run `hash` of db
 * (row, evaluations, cached ceilings; *found: db had it): what a worker needs to continue
 * the run. sb_results_take_run copies run `hash` of the database at src_path into db,
 * replacing db's row whatever the two statuses (*found: the source had it).
 * sb_results_set_placement records where it ran: host (NULL keeps the stored one), the MPI
 * rank, and the attempts in all. Errors: SB_ERR_INVALID (dst_path exists; no such run for
 * set_placement), those of sb_results_open and sb_results_merge. */
sb_status sb_results_extract_run(sb_results *db, const char *hash, const char *dst_path, int *found,
                                 sb_error *err);
sb_status sb_results_take_run(sb_results *db, const char *src_path, const char *hash, int *found,
                              sb_error *err);
sb_status sb_results_set_placement(sb_results *db, const char *hash, const char *host, int64_t rank,
                                   int64_t attempts, sb_error *err);

/* Records in the database at db_path a run of cfg trained elsewhere (e.g. by
 * sb_train_config in memory), with outcome's status, reason and metrics, and its
 * yardsticks (the task's ceiling is computed once per task and cached in the database).
 * Errors: SB_ERR_INVALID when the database already has this run finished, or the status is
 * not finished, failed, diverged or interrupted; SB_ERR_RUNTIME when another
 * process is training the run; those of sb_results_open and sb_config_check. */
sb_status sb_results_record(const char *db_path, const sb_config *cfg,
                            const sb_train_outcome *outcome, sb_error *err);

/* A run trained outside this library, e.g. a PyTorch model trained on a task's batches
 * through the Python binding (python/selectivbench). Unknown numbers are NaN (params and
 * state_size: -1). */
typedef struct sb_external_run {
    sb_run_status status; /* finished, failed, diverged or interrupted */
    const char *reason;   /* why it failed, diverged or was interrupted, or NULL */
    int64_t params;       /* trainable parameters, as the caller counts them */
    int64_t state_size;   /* floats the model carries from one frame to the next */
    double test_acc, test_loss, train_acc, train_loss;
    double wall_s, tokens_per_s;
    const sb_curve_point *curve; /* its evaluations (the learning curve), in any order */
    size_t n_curve;
    const char *code_version; /* the caller's code ("torch 1.13.1, lstm.py"), or NULL */
} sb_external_run;

/* Records an external run in the database at db_path (created if missing) exactly as a
 * native run is stored: cfg holds the task keys it trained and was tested on and the
 * training keys it used (batch_size, lr, seed, ...); its `model` key is the external
 * model's name, which becomes the run's model column and legend (letters, digits, _ . - :,
 * at most 31 characters, not a registry name). The run hash is cfg's, as for a native run
 * (written to run_hash, may be NULL); the task's ceiling is computed once per task and
 * cached, and the effective memory of a finished run's test_acc recorded, so `results`,
 * `report` and the dashboard show it beside the native runs. Errors: SB_ERR_INVALID for a
 * bad model name or status, a bad curve point, a task or training key out of range, or a
 * run the database already has finished; SB_ERR_RUNTIME when another process is training
 * the run; SB_ERR_IO, SB_ERR_NOMEM. */
sb_status sb_results_record_external(const char *db_path, const sb_config *cfg,
                                     const sb_external_run *run, char run_hash[17], sb_error *err);

/* ---- sweeps: W&B grid files (configs/paper/NAME.yaml) --------------------------------------- */

typedef struct sb_sweep sb_sweep;

/* The largest sweep file read (bytes; the paper's are under 2 KiB) and its deepest nesting
 * (a grid file needs 4): a device, a stream or a pathological file is refused before it is
 * parsed. */
#define SB_SWEEP_FILE_MAX (1024 * 1024)
#define SB_SWEEP_DEPTH_MAX 64

/* Reads a sweep file. *out is freed with sb_sweep_free. Errors (SB_ERR_INVALID, or SB_ERR_IO
 * when unreadable) name the file and the line: malformed YAML, a file over SB_SWEEP_FILE_MAX
 * bytes, nested over SB_SWEEP_DEPTH_MAX levels or of more than one YAML document, a key given
 * twice in one mapping, an unknown key or metric, a parameter without values; a grid of more
 * than INT64_MAX runs. */
sb_status sb_sweep_load(const char *path, sb_sweep **out, sb_error *err);

/* The same from text in memory (len bytes, e.g. a built-in preset); `path` names it in
 * messages. */
sb_status sb_sweep_load_text(const char *path, const char *text, size_t len, sb_sweep **out,
                             sb_error *err);

/* Frees a sweep (NULL is allowed). */
void sb_sweep_free(sb_sweep *s);

/* Number of runs of the sweep's grid (the product of its parameters' value counts; never
 * listed in memory). */
int64_t sb_sweep_count(const sb_sweep *s);

/* A new configuration: run k of the grid (0 <= k < count), the sweep's fixed flags then the
 * run's values, set by name. Errors: SB_ERR_INVALID for k out of range, an unknown flag or a
 * bad value (the message names the file and the flag). */
sb_status sb_sweep_config(const sb_sweep *s, int64_t k, sb_config **out, sb_error *err);

/* Checks that every parameter of the grid is a train flag (a key or one of train's own
 * switches). Errors: SB_ERR_INVALID naming the file and the first parameter that is not. */
sb_status sb_sweep_check_params(const sb_sweep *s, sb_error *err);

/* Run k (0 <= k < count) checked exactly as sb_sweep_run checks it before it starts its
 * worker: its configuration built from the file (sb_sweep_config) and checked across keys
 * and against the model registry (sb_config_check). On success *out (when out is not NULL)
 * is that configuration, freed with sb_config_free. Errors: SB_ERR_INVALID with the reason
 * sb_sweep_run would refuse the run for (the message names the flag), or for k out of
 * range; SB_ERR_NOMEM. */
sb_status sb_sweep_check_run(const sb_sweep *s, int64_t k, sb_config **out, sb_error *err);

/* ---- selecting runs ---------------------------------------------------------------------- */

/* The most runs one sweep selects (sb_sweep_select, and sb_sweep_run without a selection):
 * every run is a process of its own and a selection to run is listed in memory, so more is
 * a grid to narrow with filters, shards or a limit. */
#define SB_SWEEP_MAX_RUNS 10000000

typedef struct sb_sweep_selection sb_sweep_selection;

typedef struct sb_sweep_select_options {
    /* n_filters texts "NAME=VALUE": only runs whose parameter NAME has the value VALUE, as
     * written in the file (several filters: every one holds) */
    const char *const *filters;
    int n_filters;
    /* only the filtered runs at positions shard_index, shard_index + shard_count, ... (one
     * shard per machine); shard_count 0: no sharding */
    int64_t shard_index, shard_count;
    int64_t limit; /* at most the first `limit` of those; 0: no limit */
} sb_sweep_select_options;

/* The runs of s that opts selects (NULL: every run), in grid order, without listing them:
 * sizes and runs are computed, so a grid of 10^18 runs takes no memory. *out is freed with
 * sb_sweep_selection_free and must not outlive s. Errors (SB_ERR_INVALID): a filter that is
 * not NAME=VALUE, names no parameter of the grid or a value the parameter does not take
 * (the message lists them); a shard outside 0 <= index < count; a negative limit; more than
 * SB_SWEEP_MAX_RUNS runs selected (the message gives the grid's and the selection's sizes).
 * SB_ERR_NOMEM. */
sb_status sb_sweep_select(const sb_sweep *s, const sb_sweep_select_options *opts,
                          sb_sweep_selection **out, sb_error *err);

/* How many runs the selection has (at most SB_SWEEP_MAX_RUNS). */
int64_t sb_sweep_selection_size(const sb_sweep_selection *sel);

/* The grid index k of run i of the selection (0 <= i < size); -1 for i out of range. */
int64_t sb_sweep_selection_run(const sb_sweep_selection *sel, int64_t i);

/* Frees a selection (NULL is allowed). */
void sb_sweep_selection_free(sb_sweep_selection *sel);

/* The grid's parameters (its axes), sorted by name: how many, and the name of parameter p
 * (NULL outside [0, count)). */
int sb_sweep_param_count(const sb_sweep *s);
const char *sb_sweep_param_name(const sb_sweep *s, int p);

/* The values of parameter p that the selection's filters keep, as written in the file: how
 * many (0 for p out of range), and value j (NULL out of range). A shard or a limit does not
 * narrow them. */
int sb_sweep_selection_value_count(const sb_sweep_selection *sel, int p);
const char *sb_sweep_selection_value(const sb_sweep_selection *sel, int p, int j);

/* What the runs of a selection cost, estimated without training (sb_sweep_estimate_cost). */
typedef struct sb_sweep_cost {
    int64_t runs;    /* the runs costed: those the sweep would train (not refused or
                        excluded) */
    int64_t samples; /* training samples of those runs together (one pass each) */
    int64_t samples_min, samples_max; /* of one run: the fewest, the most */
    double tokens;      /* frames they train on together: each run's samples x the mean
                           frames (symbols and gaps) of its task's first training samples */
    double train_flops; /* 3 x each model's forward FLOPs per frame x its frames, summed
                           (forward and backward; padding and evaluations not counted) */
    uint64_t params_min, params_max; /* trainable parameters of the smallest, largest model */
    /* the first costed run (-1: none) and its training step, to time it with
     * sb_bench_train_step: model, B, T (its task's mean frames), D, L, inputs, classes, N */
    int64_t first_run;
    char first_model[64];
    int first_batch, first_frames, first_width, first_layers, first_inputs, first_classes,
        first_d_state;
    double first_flops_per_token; /* its model's forward FLOPs per frame */
} sb_sweep_cost;

/* Estimates the cost of the runs of sel: every run is built and checked as the sweep does
 * (sb_sweep_check_run; refused and excluded runs are left out), each distinct task is built
 * once (grammar and the first training samples, not the data), models are sized without
 * being built. Nothing is trained or timed. Errors: those of building a task, SB_ERR_NOMEM. */
sb_status sb_sweep_estimate_cost(const sb_sweep *s, const sb_sweep_selection *sel,
                                 sb_sweep_cost *out, sb_error *err);

/* ---- plans: what a sweep's selection will cost on this machine (`selectivbench plan`) ---- */

/* Where a calibration's numbers come from. */
typedef enum sb_plan_source {
    SB_PLAN_MEASURED = 0,  /* measured now (a few real training updates and an evaluation) */
    SB_PLAN_CACHED = 1,    /* measured before on this machine, read from the cache file */
    SB_PLAN_FLOP_RATE = 2, /* not measured: the model's FLOPs at a FLOP rate (fallback) */
} sb_plan_source;

/* The measured cost of one shape of run: every run of the selection with the same model,
 * sizes (width, layers, d_state, heads), micro-batch, frames per sample within a factor of
 * two, test batch, precision and GEMM engine shares one (seeds, learning rates and the
 * like do not change the cost of a frame). A run that differs from the measured one in
 * what the shape leaves out (its one-hot inputs, its classes, its exact frames per
 * sample) takes the measured seconds per frame times the ratio of its forward FLOPs per
 * frame to the measured run's. */
typedef struct sb_plan_calibration {
    char key[256]; /* the shape as text (the cache's key, with the machine's) */
    char model[32];
    int width, layers, d_state, micro_batch, threads;
    double train_s_per_frame; /* a training frame: batch generation, forward, backward,
                                 clipping and Adam, padding included */
    double eval_s_per_frame;  /* a test frame (its batches generated and evaluated) */
    double setup_s;           /* building the task and the model once per run */
    double gemm_share;        /* the share of the training FLOPs done by matrix products */
    double gflops;            /* achieved in training: 3 x forward FLOPs / time */
    double train_flops_per_frame, eval_flops_per_frame; /* the measured run's forward FLOPs
                                  per training and per test frame (for the ratio) */
    double measured_s;      /* how long the measurement took (0 when cached) */
    int calibrated_layers;  /* layers measured (fewer than `layers` for a model too large
                               to measure whole; its time is scaled by layers) */
    int calibrated_threads; /* threads measured (fewer than `threads` when this machine
                               has fewer cores; see the key calibration_threads) */
    sb_plan_source source;
} sb_plan_calibration;

/* One run of the plan. */
typedef struct sb_plan_run {
    int64_t run;   /* its index in the grid */
    char hash[17]; /* its run hash */
    char model[32];
    int calibration;      /* index into sb_plan's calibrations */
    int64_t after;        /* the plan's run (index into runs) whose checkpoint it evaluates
                             (a --test_pretrained run of the same selection), -1: none */
    int64_t train_frames; /* frames it trains on (its samples x their mean frames) */
    int64_t eval_frames;  /* frames its evaluations process (each: the test and validation
                             splits; a learning-curve point: the test split) */
    int evaluations;      /* --epoch_size's, the last update's and the curve's points */
    double flops;         /* 3 x forward FLOPs per training frame + forward FLOPs per test frame */
    double peak_bytes;    /* a training step's activations (the model's estimate for its
                             longest micro-batch) + parameters, gradients and Adam's moments */
    double seconds;       /* setup + frames x the calibration's seconds per frame */
    double start_s;       /* when the schedule starts it, and on which rank */
    int rank;
} sb_plan_run;

/* Called once per calibration, after it is measured or found (index 0 .. total-1). */
typedef void (*sb_plan_progress_fn)(const sb_plan_calibration *c, int index, int total, void *user);

/* What a plan reports to as it goes: the callbacks (the numbers it reads are keys of its
 * configuration). */
typedef struct sb_plan_settings {
    sb_plan_progress_fn on_calibration; /* may be NULL */
    void *user;
} sb_plan_settings;

/* The FLOP rate per thread assumed when nothing was measured (a conservative CPU core). */
#define SB_PLAN_FALLBACK_GFLOPS 2.0

/* Seconds a run's process takes to start and stop around its work (exec, the libraries'
 * loading, the results database and the checkpoint's last write), counted in every run's
 * setup: measured 0.04-0.23 s on the 2-core development machine (`selectivbench --version`,
 * and a train of one update). */
#define SB_PLAN_PROCESS_S 0.2

/* The threads a calibration is measured at are at most this machine's cores; beyond, the
 * plan ASSUMES that the matrix products (gemm_share of the work) speed up linearly with the
 * threads up to SB_PLAN_THREAD_CAP and the rest not at all (Amdahl). */
#define SB_PLAN_THREAD_CAP 64

typedef struct sb_plan {
    int64_t n_runs;
    sb_plan_run *runs; /* in grid order */
    int n_calibrations;
    sb_plan_calibration *calibrations;
    int ranks, threads;
    double core_hours;            /* each run's seconds x its threads, summed */
    double wall_hours;            /* on `ranks` ranks, largest run first, each to the earliest free
                                     rank (dependent runs after their sources): an MPI sweep */
    double wall_hours_grid_order; /* the same in grid order (`sweep --workers ranks`) */
    int measured, cached, estimated; /* calibrations by source */
    int cache_damaged; /* the cache file was there but unreadable (it was rewritten) */
    int cache_written; /* the cache file was written */
    char cache[4096];  /* the calibration cache read and written ("": none) */
    char machine[256]; /* the CPU model, the library version */
    /* runs of the selection the sweep would refuse (left out of the plan), and why the
     * first of them is refused ("" when none) */
    int64_t n_refused;
    char first_refused[SB_ERROR_MSG_MAX];
} sb_plan;

/* Plans the runs of sel (those the sweep would train: refused and excluded runs are left
 * out, as sb_sweep_estimate_cost does): each run's frames, FLOPs, memory and time, the
 * calibrations behind the times and the totals. Early stopping is not foreseen: every run is
 * planned to its last update. The keys of cfg it reads (NULL: their defaults): ranks (runs at
 * a time; none: 1), threads (per run; 0: this process's cores / ranks, at least 1),
 * calibration_seconds, calibration_threads, recalibrate, cached_only, calibration_cache.
 * settings may be NULL. *out is freed with sb_plan_free. Errors: SB_ERR_INVALID for NULL
 * arguments, those of building a task or a model, SB_ERR_IO when the cache cannot be
 * written, SB_ERR_NOMEM. */
sb_status sb_plan_make(const sb_sweep *s, const sb_sweep_selection *sel, const sb_config *cfg,
                       const sb_plan_settings *settings, sb_plan **out, sb_error *err);

/* The seconds a sweep of plan p has left (its ETA). Per plan run: done_share[i], 0 before
 * it starts, the share of its updates done while it runs, 1 once it ended; spent_s[i], the
 * seconds this sweep has spent training it (0 for a run it did not train: already finished,
 * refused, failed). The planned seconds not yet done (seconds x (1 - share)) times the pace
 * so far (the runs' spent seconds over the planned seconds of their shares done; 1 before
 * any), over p's ranks. Runs that keep the pace of the first ones make it fall steadily. */
double sb_plan_time_left(const sb_plan *p, const double *done_share, const double *spent_s);

/* The plan of one run (what `train` prints before a run planned over ten minutes): as
 * sb_plan_make for a selection of that run alone (its index 0), the keys read from cfg too.
 * Errors: cfg's check (sb_config_check's), those of sb_plan_make. */
sb_status sb_plan_config(const sb_config *cfg, const sb_plan_settings *settings, sb_plan **out,
                         sb_error *err);

void sb_plan_free(sb_plan *p);

/* The plan as one line of JSON: {"runs", "core_hours", "wall_hours", "per_run": [{hash,
 * model, the selection's varied parameters, train_frames, eval_frames, flops, peak_bytes,
 * seconds}], then wall_hours_grid_order, ranks, threads, machine, early_stopping,
 * calibrations}. *json is freed with sb_string_free. */
sb_status sb_plan_to_json(const sb_plan *p, const sb_sweep *s, char **json, sb_error *err);

/* List scheduling, as sb_plan_make does it: n runs of seconds[i] on `ranks` ranks, each
 * run to the earliest free rank, largest first when largest_first (else in index order);
 * a run with after[i] >= 0 (after may be NULL) starts once run after[i] has ended (such
 * runs are placed after the others). start[i] and rank[i] (either may be NULL) receive
 * the schedule; returns the wall time (the last end), or -1 for bad arguments (ranks < 1,
 * an after[i] that is itself dependent or out of range). */
double sb_plan_schedule(const double *seconds, const int64_t *after, int64_t n, int ranks,
                        int largest_first, double *start, int *rank);

/* Each run's training FLOPs as sb_sweep_estimate_cost counts them: run_flops[i] for the
 * i-th run of sel (sb_sweep_selection_size entries; 0 for a refused or excluded run), to
 * order runs by cost. Errors: those of sb_sweep_estimate_cost. */
sb_status sb_sweep_run_flops(const sb_sweep *s, const sb_sweep_selection *sel, double *run_flops,
                             sb_error *err);

/* ---- a sweep's queue: the order a coordinator hands runs out in (the MPI sweep's) ---- */

typedef struct sb_sweep_queue sb_sweep_queue;

typedef enum sb_queue_state { SB_QUEUE_PENDING, SB_QUEUE_RUNNING, SB_QUEUE_SETTLED } sb_queue_state;

/* One run of a queue. */
typedef struct sb_queued_run {
    int64_t run;         /* its index in the grid */
    double flops;        /* its training FLOPs (sb_sweep_run_flops) */
    char hash[17];       /* its run hash ("" when its configuration does not build: a worker
                            refuses it) */
    char train_hash[17]; /* its weights' name: runs evaluating the same weights share it */
    char model[32];
    int pretrained; /* --test_pretrained: evaluates the weights of train_hash */
    sb_queue_state state;
} sb_queued_run;

/* The runs of sel that db does not hold as finished (*skipped: those it does; may be NULL),
 * largest training FLOPs first, the grid's order among equals, so that a long run does not
 * start last. A run that evaluates saved weights waits while their checkpoint
 * (RESULTS/checkpoints/TRAIN_HASH.safetensors of the folder `results`) is missing and a run
 * of the queue that trains them is not settled. *out is freed with sb_sweep_queue_free.
 * Errors: those of sb_sweep_run_flops, SB_ERR_NOMEM. */
sb_status sb_sweep_queue_make(const sb_sweep *s, const sb_sweep_selection *sel, sb_results *db,
                              const char *results, sb_sweep_queue **out, int *skipped,
                              sb_error *err);
int64_t sb_sweep_queue_size(const sb_sweep_queue *q);
/* Run i of the queue (0 <= i < size), or NULL. */
const sb_queued_run *sb_sweep_queue_run(const sb_sweep_queue *q, int64_t i);
/* The queue index of the grid's run k, -1 when it is not queued. */
int64_t sb_sweep_queue_find(const sb_sweep_queue *q, int64_t k);
/* The next run to hand out: the first pending run that need not wait; -1 when none can go now
 * (*blocked, when not NULL: 1 when some pending run waits for another still to train). */
int64_t sb_sweep_queue_next(const sb_sweep_queue *q, int *blocked);
/* Run i handed out (RUNNING), or ended whatever its outcome (SETTLED). */
void sb_sweep_queue_set(sb_sweep_queue *q, int64_t i, sb_queue_state state);
void sb_sweep_queue_free(sb_sweep_queue *q);

/* Whether the grid has a parameter of this name. */
int sb_sweep_has_param(const sb_sweep *s, const char *name);

/* Whether run k has parameter `name` equal to `value` (textually); 0 when the parameter is
 * not in the grid. */
int sb_sweep_run_matches(const sb_sweep *s, int64_t k, const char *name, const char *value);

/* The train flags of run k: the fixed flags of the file's command in order, the run's
 * parameters as "--name=value" where ${args} stands. *argv is a NULL-terminated array of
 * *argc strings, freed with sb_sweep_args_free. Errors: SB_ERR_INVALID, SB_ERR_NOMEM. */
sb_status sb_sweep_run_args(const sb_sweep *s, int64_t k, char ***argv, int *argc, sb_error *err);

/* Frees an array from sb_sweep_run_args (NULL is allowed). */
void sb_sweep_args_free(char **argv);

/* ---- running a sweep ----------------------------------------------------------------- */

/* How a run of a sweep ended. */
typedef enum sb_sweep_outcome {
    SB_SWEEP_NO_OUTCOME = 0, /* not ended (an update other than ENDED) */
    SB_SWEEP_DONE,           /* trained and recorded as finished */
    SB_SWEEP_FAILED,         /* recorded as failed, killed, or not recorded at all */
    SB_SWEEP_DIVERGED,       /* recorded as diverged */
    SB_SWEEP_SKIPPED,        /* finished in the database before: not run again */
    SB_SWEEP_REFUSED,        /* its configuration could not be built or is invalid: not run */
    SB_SWEEP_EXCLUDED,       /* the reference does not run it either (SB_ERR_EXCLUDED): not
                                run, and not an error of the sweep */
    SB_SWEEP_INTERRUPTED,    /* stopped by a signal with a checkpoint, recorded as
                                interrupted: the next sb_sweep_run continues it */
} sb_sweep_outcome;

/* The outcome's name: "done", "failed", "diverged", "skipped", "refused", "excluded",
 * "interrupted"; "" for SB_SWEEP_NO_OUTCOME and values out of range. Never NULL. */
const char *sb_sweep_outcome_name(sb_sweep_outcome outcome);

/* What a sweep's callback receives about one run or the whole sweep. Strings are valid
 * during the call only. */
typedef enum sb_sweep_update_kind {
    SB_SWEEP_UPDATE_STARTED = 0,  /* a worker process started run `run` */
    SB_SWEEP_UPDATE_PROGRESS = 1, /* run `run` reported progress (about twice a second) */
    SB_SWEEP_UPDATE_ENDED = 2,    /* run `run` is settled; `outcome` says how */
    SB_SWEEP_UPDATE_TICK = 3,     /* about twice a second while runs go: the counts only */
    SB_SWEEP_UPDATE_WAITING = 4,  /* another process is training run `run` (locked_by): it is
                                     put aside and taken again when that process lets go;
                                     slot: the worker that found it locked, or -1 */
} sb_sweep_update_kind;

typedef struct sb_sweep_update {
    sb_sweep_update_kind kind;
    int64_t run;               /* the run's index in the grid (not for TICK) */
    const char *hash;          /* its run hash ("" when its configuration could not be built) */
    int64_t step, total_steps; /* PROGRESS: the worker's last record */
    double loss, acc, tokens_per_s, eta_s;
    sb_sweep_outcome outcome; /* ENDED: how the run ended; SB_SWEEP_NO_OUTCOME otherwise */
    const char *reason;       /* ENDED: why it failed, was refused or excluded; NULL otherwise */
    double test_acc;          /* ENDED: the run's final test accuracy; NaN when unknown */
    int slot;                 /* the run's worker, 0..workers-1; -1 when no worker ran it */
    const sb_config *config;  /* the run's configuration; NULL when it was not built (TICK) */
    double run_elapsed_s;     /* seconds since its worker started (0 without one) */
    double last_test_acc;     /* PROGRESS: the last evaluation's test accuracy; NaN before one */
    int started;              /* ENDED: a worker process ran it */
    int recorded;             /* ENDED: the database has a row of it */
    int exit_code;            /* ENDED: the worker's exit code; -1 when it did not exit */
    int term_signal;          /* ENDED: the signal that killed the worker; 0 when none */
    /* the sweep so far, in every update */
    int done, failed, skipped, refused, running;
    int64_t n_runs;
    double sweep_elapsed_s; /* seconds since the sweep began */
    int interrupted;        /* runs interrupted so far (not in `failed`) */
    long locked_by;         /* WAITING: the pid of the process training the run (-1: unknown) */
    int excluded;           /* runs excluded so far (not in `refused`) */
} sb_sweep_update;

typedef void (*sb_sweep_update_fn)(const sb_sweep_update *u, void *user);

/* What a running sweep reports to and polls: the callbacks (the numbers it reads are keys of
 * its configuration). */
typedef struct sb_sweep_settings {
    sb_sweep_update_fn on_update; /* may be NULL */
    void *user;                   /* passed to on_update and cancel */
    /* Polled about twice a second (may be NULL). Nonzero stops the sweep: no new run starts
     * and the running workers are sent SIGINT when it returns SIGINT, SIGTERM for any other
     * nonzero value, once; each stops after its current update, writes its checkpoint and
     * records its run as "interrupted" (exit 130 or 75), and sb_sweep_run waits for them and
     * returns SB_ERR_RUNTIME. The command line returns the signal it caught. */
    int (*cancel)(void *user);
} sb_sweep_settings;

/* Runs the runs[0 .. n_runs-1] of the sweep's grid (indices, in order; runs NULL: every run of
 * the grid, at most SB_SWEEP_MAX_RUNS) that its results database does not hold as finished (an
 * interrupted sweep resumes; an interrupted run continues from its checkpoint), each in a
 * worker process `WORKER_EXE train ...` (every run a process of its own, so a crash loses one
 * run; worker_exe is required: the path of the installed `selectivbench`, for example from
 * `pkg-config --variable=bindir selectivbench`), recording every run in the database. The keys
 * of cfg it reads (NULL: their defaults): workers (runs at a time), threads (per run; 0: the
 * cores divided among the workers), results (the folder of the database, checkpoints and
 * logs), db (the database; "": RESULTS/selectivbench.db), checkpoint_every (passed to every
 * run). A run another process is training is put aside and taken when it is free
 * (SB_SWEEP_UPDATE_WAITING). Updates go to settings->on_update (settings may be NULL) from the
 * calling thread. The counts at the end are in the last update (and in *done_out etc. when not
 * NULL). A run is refused (outcome "refused", not started) when sb_sweep_check_run refuses it.
 * Returns SB_OK when every run was settled, whatever the runs' outcomes; SB_ERR_INVALID for bad
 * arguments (no worker_exe, a run outside the grid, more than SB_SWEEP_MAX_RUNS runs: select
 * them with sb_sweep_select), SB_ERR_IO when the results folder or database cannot be set up,
 * SB_ERR_NOMEM, SB_ERR_RUNTIME when cancelled. Nothing is printed. */
sb_status sb_sweep_run(const sb_sweep *s, const int64_t *runs, int64_t n_runs, const sb_config *cfg,
                       const char *worker_exe, const sb_sweep_settings *settings, int *done_out,
                       int *failed_out, sb_error *err);

/* ---- a sweep's coordinator over the caller's transport (the MPI sweep's rank 0) ---- */

typedef enum sb_coord_kind { SB_COORD_READY = 1, SB_COORD_PROGRESS, SB_COORD_DONE } sb_coord_kind;

/* A worker's message, as the transport received it. A worker says READY once, then DONE after
 * each run it was given; PROGRESS while one trains. */
typedef struct sb_coord_message {
    int worker; /* its id: 1 .. max_id - 1 */
    sb_coord_kind kind;
    char host[256];            /* READY, DONE: its machine */
    int64_t run;               /* PROGRESS, DONE: the grid's run */
    int64_t step, total_steps; /* PROGRESS */
    double test_acc;          /* PROGRESS: the last evaluation's; DONE: the final one (NaN: none) */
    sb_sweep_outcome outcome; /* DONE; SB_SWEEP_NO_OUTCOME reads as failed */
    char reason[512];         /* DONE: why it failed or was refused */
    const char *seed;         /* DONE: the run's database as it ended, its bytes (NULL: none) */
    size_t seed_len;
} sb_coord_message;

typedef enum sb_coord_event_kind {
    SB_COORD_BEGIN,   /* once, the queue made: queued and skipped say what is to run */
    SB_COORD_STARTED, /* a run was handed to a worker */
    SB_COORD_ENDED,   /* a run's outcome came back, and its record was taken in */
    SB_COORD_TICK     /* a minute without an event: the counts and the running runs */
} sb_coord_event_kind;

/* A coordinator's counts: so far (in every event), and at the end. */
typedef struct sb_coord_tally {
    int64_t queued;
    int done, failed, skipped, refused, excluded, interrupted;
    int signal; /* what cancel returned, 0: not cancelled */
} sb_coord_tally;

/* What the coordinator tells its caller (for its lines). */
typedef struct sb_coord_event {
    sb_coord_event_kind kind;
    int64_t run; /* STARTED, ENDED: the grid's run, its model and run hash */
    const char *model, *hash;
    int worker; /* STARTED, ENDED: who trains it, on which machine */
    const char *host;
    int continuing;           /* STARTED: the database had a record of it (it continues) */
    sb_sweep_outcome outcome; /* ENDED */
    double test_acc;          /* ENDED: NaN when none */
    const char *reason;       /* ENDED: the worker's reason, or why its record was not taken */
    double run_s;             /* ENDED: seconds since it was handed out */
    /* every event: the counts so far (queued: the selection less the runs finished before) */
    sb_coord_tally counts;
    int running;
    double elapsed_s;
    /* TICK: the running runs with a progress report: grid run, step, total steps */
    const int64_t *progress; /* [3 * n_progress] */
    int n_progress;
} sb_coord_event;

/* The coordinator's transport and its caller's hooks: callbacks only. */
typedef struct sb_coord_settings {
    /* Waits at most timeout_s for a worker's message: 1 with *m filled (m->seed stays valid
     * until the next call), 0 when none came, -1 when the transport failed. */
    int (*receive)(void *user, double timeout_s, sb_coord_message *m);
    /* Gives `worker` grid run `run` and its seed database's bytes (may be none); 0 or -1. */
    int (*send_run)(void *user, int worker, int64_t run, const char *seed, size_t seed_len);
    /* Tells `worker` there is nothing more; 0 or -1. */
    int (*send_stop)(void *user, int worker);
    /* Polled between messages (may be NULL): nonzero (the signal caught) stops handing out
     * runs; the running ones are awaited. */
    int (*cancel)(void *user);
    void (*on_event)(const sb_coord_event *ev, void *user); /* may be NULL */
    void *user;
} sb_coord_settings;

/* Coordinates the runs of sel over n_workers workers, the only writer of the database (keys
 * of cfg: results, db; NULL: their defaults): each READY or DONE worker gets the next run of
 * the queue (sb_sweep_queue) with a seed database holding what the database has of it
 * (sb_results_extract_run, through RESULTS/mpi), waits when the next runs wait for running
 * ones, or is told to stop; a DONE run's seed is taken back (sb_results_take_run) with its
 * host and worker id as its placement. Returns when every worker was told to stop and no run
 * is running: SB_OK (cancelled too: tally->signal), SB_ERR_IO or SB_ERR_NOMEM setting up
 * the database or the seed folder, SB_ERR_RUNTIME when the transport failed. */
sb_status sb_sweep_coordinate(const sb_sweep *s, const sb_sweep_selection *sel,
                              const sb_config *cfg, int n_workers, int max_id,
                              const sb_coord_settings *settings, sb_coord_tally *tally,
                              sb_error *err);

/* A run's seed database as bytes (what a transport carries), and back: reads the file at path
 * (at most 1 GiB) into *buf (malloc'd, freed with free), writes buf to path; removes a
 * database file and what SQLite may leave beside it. Errors: SB_ERR_IO naming the path. */
sb_status sb_seed_read(const char *path, char **buf, size_t *len, sb_error *err);
sb_status sb_seed_write(const char *path, const char *buf, size_t len, sb_error *err);
void sb_seed_remove(const char *path);

/* ---- the command line's needs (1): training output, results, sweeps ---- */
/* What the selectivbench command uses beyond the pieces above: flag parsing by the key table,
 * exit codes, the results folder's layout. */

/* The file name of a results folder's database (RESULTS/selectivbench.db). */
#define SB_RESULTS_DB_NAME "selectivbench.db"

/* Records status and a printf-style message in err (err may be NULL; the message is cut to
 * SB_ERROR_MSG_MAX - 1 bytes) and returns status: a function of a program built on the
 * library reports its own failures the library's way. */
sb_status sb_error_set(sb_error *err, sb_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* The exit code the command line gives a status: 0 ok, 2 invalid (usage), 3 diverged, 1
 * otherwise. */
int sb_status_exit_code(sb_status status);

/* How sb_config_set_key reads a value, for flags that are not keys: a boolean (True/False,
 * yes/no, 1/0, any case), a decimal integer, a finite number. Each returns 1 and sets *out
 * when s is one, else 0 (*out unchanged). */
int sb_config_parse_bool(const char *s, int *out);
int sb_config_parse_int(const char *s, long long *out);
int sb_config_parse_double(const char *s, double *out);

/* Sets every key of cfg back to its default (what sb_config_create gives). Errors:
 * SB_ERR_INVALID for a NULL handle. */
sb_status sb_config_reset(sb_config *cfg, sb_error *err);

/* Makes dst equal to src (every key), as sb_config_copy would without a new handle.
 * Errors: SB_ERR_INVALID for a NULL handle. */
sb_status sb_config_assign(sb_config *dst, const sb_config *src, sb_error *err);

/* The index of the key named `name` in the key table, or -1 for an unknown name. */
int sb_config_key_find(const char *name);

/* Which flags a key belongs to, smallest first: the grammar's keys (the `grammar` command),
 * then the rest of the task's (`data`, `bench data`), then the run's (`train`, `eval`), then
 * the runtime keys of `train`, `eval`, `probe` and `ceiling` (threads, mem_budget, results,
 * db, ckpt, save_model, resume, output), then those of `train` alone (force, inject_nan_at,
 * progress_every, checkpoint_every). Runtime keys say where and how a run is carried out:
 * they are in no JSON and no hash. */
#define SB_KEYS_GRAMMAR 0
#define SB_KEYS_TASK 1
#define SB_KEYS_RUN 2
#define SB_KEYS_RUNTIME 3
#define SB_KEYS_TRAIN 4
/* The other commands' settings (bench, models, probe, ceiling, data, grammar, plan, sweep,
 * demo, serve): each command takes the ones it names; never a train flag or a sweep file's
 * parameter. Also runtime keys: in no JSON and no hash. */
#define SB_KEYS_COMMAND 5

/* The group of key i (SB_KEYS_GRAMMAR ... SB_KEYS_COMMAND), -1 outside the table. */
int sb_config_key_group(int i);

/* Choice c of key i, a "choice" key (0 <= c), or NULL past its last choice, for another
 * type of key or i outside the table. */
const char *sb_config_key_choice(int i, int c);

/* The grammar sizes of cfg's task after grammar_scale: letters (vocab), ambiguous letters
 * (amb), states per ambiguous letter (amb_depth); any pointer may be NULL. Nothing is built.
 * Aborts with a message when cfg is NULL. */
void sb_config_grammar_sizes(const sb_config *cfg, int *vocab, int *amb, int *amb_depth);

/* A worker of a sweep (sb_sweep_run starts `selectivbench train` in worker processes) sends
 * its progress to the sweep through a pipe named in its environment. */
typedef struct sb_sweep_worker sb_sweep_worker;

/* The pipe this process was given by a sweep, or NULL when it is not a sweep's worker (or
 * out of memory); the environment variable is removed either way. Closed with
 * sb_sweep_worker_close. */
sb_sweep_worker *sb_sweep_worker_open(void);

/* Sends one progress record (the fields of p the sweep shows, and the last evaluation's test
 * accuracy, NaN before the first); w NULL does nothing. */
void sb_sweep_worker_report(sb_sweep_worker *w, const sb_progress *p, double last_test_acc);

/* Closes the pipe (NULL is allowed). */
void sb_sweep_worker_close(sb_sweep_worker *w);

/* ---- the command line's needs (2): grammar, data, ceiling, bench, probe ---- */

/* Accessors below that return no status (facts, names, counts) abort with a message on
 * stderr when given a NULL handle or an index out of range, as a programmer error. */

/* -- a task's configuration checked alone -- */

/* The check of cfg's task keys only (ranges and the rules between them), as the commands
 * that build a task without a model (`ceiling`) make it: a bad model or optimiser key is not
 * looked at. Errors: SB_ERR_INVALID naming the key. */
sb_status sb_config_check_task(const sb_config *cfg, sb_error *err);

/* -- grammars -- */

/* A grammar: its states (plain letters "B", copies of the ambiguous letters "C0".."C39" and
 * the end state "#", always last) and their successors, each equally likely. The same type
 * as a task's grammar (sb_task_grammar). */
typedef struct sb_grammar sb_grammar;

#define SB_GRAMMAR_START_STATES 4

/* What a grammar is, with the configuration it was built from (grammar_scale applied). */
typedef struct sb_grammar_facts {
    int vocab, amb, amb_depth; /* letters + 1, ambiguous letters, states per ambiguous letter */
    uint64_t seed;             /* the task seed the grammar was drawn from */
    int grammar_scale;         /* 1: vocab and amb_depth were derived from amb */
    int letters;               /* vocab - 1 */
    int states;                /* the end state included */
    int outputs;               /* classifier outputs (d_output = states) */
    int transitions;
    int start_states[SB_GRAMMAR_START_STATES]; /* state indices, the reference's order */
    double topological_entropy;                /* TE in nats */
    int python_seed; /* the draw that seeds the reference's CPython generator */
    int attempts;    /* grammars drawn, the accepted one included */
} sb_grammar_facts;

/* Generates the grammar of cfg's grammar keys (vocab, amb, amb_depth, transition density,
 * grammar_scale, the task seed), the reference generator's exact grammar. *out is freed with
 * sb_grammar_free. Errors: SB_ERR_INVALID for impossible parameters, SB_ERR_RUNTIME when no
 * valid grammar is found, SB_ERR_NOMEM. */
sb_status sb_grammar_from_config(const sb_config *cfg, sb_grammar **out, sb_error *err);

/* Frees a grammar made by sb_grammar_from_config (NULL is allowed); never a task's own. */
void sb_grammar_free(sb_grammar *g);

/* Fills *facts. */
void sb_grammar_get_facts(const sb_grammar *g, sb_grammar_facts *facts);

/* The name of state s (0 <= s < states): "B", "C12", "#". Owned by g. */
const char *sb_grammar_state_name(const sb_grammar *g, int s);

/* The input class of state s's letter: 0 for '#', 1.. for A.., 27.. for a.. */
int sb_grammar_state_class(const sb_grammar *g, int s);

/* The successors of state s: how many (0 for the end state), the k-th in ascending state
 * order (0 <= k < count), and the probability of each of them (1/count; 0 without any). */
int sb_grammar_successor_count(const sb_grammar *g, int s);
int sb_grammar_successor(const sb_grammar *g, int s, int k);
double sb_grammar_transition_prob(const sb_grammar *g, int s);

/* The letter of input class c: '#' for 0, 'A'.. for 1.., 'a'.. for 27.. */
char sb_class_letter(int c);

/* Computes the topological entropy again (the grammar already holds it: this is for timing
 * it): ln of the Perron root of the successor table with '#' -> start states added.
 * Errors: SB_ERR_INVALID for NULL arguments, SB_ERR_NOMEM, SB_ERR_RUNTIME. */
sb_status sb_grammar_entropy(const sb_grammar *g, double *te, sb_error *err);

/* Writes the grammar to f as one line of JSON in the schema of the reference's vector files
 * (config, states, start_states, successors, out_prob, topological_entropy, d_output,
 * state_ids, ...) and a newline; or as a Graphviz digraph (start states marked, '#' a
 * double circle). Errors: SB_ERR_INVALID for NULL arguments, SB_ERR_IO when f reports a
 * write error. */
sb_status sb_grammar_fprint_json(const sb_grammar *g, FILE *f, sb_error *err);
sb_status sb_grammar_fprint_dot(const sb_grammar *g, FILE *f, sb_error *err);

/* The same JSON as sb_grammar_fprint_json, as a new string without the newline (freed with
 * sb_string_free). Errors: SB_ERR_INVALID for NULL arguments, SB_ERR_NOMEM. */
sb_status sb_grammar_to_json(const sb_grammar *g, char **json, sb_error *err);

/* -- a task's grammar, settings and samples -- */

#define SB_MAX_GAP_SECONDS 1000.0 /* the longest gap a task key may ask for (10 000 frames) */

/* The grammar of a task, owned by the task (do not free it). */
const sb_grammar *sb_task_grammar(const sb_task *task);

/* How a task's gaps and test are set (its task keys, as the task uses them). */
typedef struct sb_task_settings {
    int distractor_gaps; /* 1: gaps show symbols the grammar forbids (grammar_gap);
                            0: zero frames */
    int lognormal_gaps;  /* training gap durations: 0 uniform(min, max) s, 1 lognormal
                            with min and max as its parameters (dist_dur) */
    double train_gap_min, train_gap_max;
    int gap_start;               /* elements before this one never get a gap */
    double gap_prob;             /* probability that an element gets a gap */
    double train_noise;          /* amplitude of the additive noise U[0, noise) */
    double test_gap_s;           /* the test samples' gap duration */
    int clean_protocol;          /* 1: disjoint test sequences; 0: the reference's (test = the
                                    first training sequences) */
    int walk_len;                /* interleaved walks: elements per walk (0: one walk, the
                                    reference task; docs/task.md "Interleaved walks") */
    int train_walks, test_walks; /* walks interleaved in a training / test sample (1 without
                                    walk_len); the walk tags are inputs letters+1 .. */
} sb_task_settings;

/* Fills *settings. */
void sb_task_get_settings(const sb_task *task, sb_task_settings *settings);

/* A sample of a task as elements: each element's state and the gap after it. One sb_draw
 * holds any sample of its task and is refilled by sb_draw_read; it keeps a pointer to the
 * task, which must outlive it. */
typedef struct sb_draw sb_draw;

/* Room for one sample of task. *out is freed with sb_draw_free. Errors: SB_ERR_NOMEM. */
sb_status sb_draw_create(const sb_task *task, sb_draw **out, sb_error *err);

/* Frees a draw (NULL is allowed). */
void sb_draw_free(sb_draw *d);

/* Assembles sample `index` of split into d (its state sequence, gap decisions, durations and
 * distractor symbols). Errors: SB_ERR_INVALID for an index outside the split, and the
 * sampler's errors (SB_ERR_RUNTIME). */
sb_status sb_draw_read(sb_draw *d, sb_split split, int64_t index, sb_error *err);

/* The sample read last: its sequence index (the reference's idx: the same as the sample's
 * index except for the clean protocol's test split), elements, frames (symbol frames plus
 * gap frames), the state of element k (0 <= k < elements; a state of the task's grammar),
 * the gap frames after element k, and the distractor classes of the gaps in frame order
 * (count, then the r-th; none for zero gaps). */
uint64_t sb_draw_sequence_index(const sb_draw *d);
int sb_draw_elements(const sb_draw *d);
int sb_draw_frames(const sb_draw *d);
int sb_draw_state(const sb_draw *d, int k);
int sb_draw_gap(const sb_draw *d, int k);
int sb_draw_distractor_count(const sb_draw *d);
/* The walk of element k (0 <= k < elements): 0 .. walks - 1 with walk_len, else 0. */
int sb_draw_walk(const sb_draw *d, int k);
int sb_draw_distractor(const sb_draw *d, int r);

/* A 64-bit hash of a whole split: every sample generated on `threads` threads (0: every
 * core), the per-sample hashes combined in index order, so it does not depend on the thread
 * count. symbols (may be NULL) receives the elements generated. Errors: SB_ERR_INVALID for
 * NULL arguments or an unknown split, the sampler's errors, SB_ERR_NOMEM. */
sb_status sb_task_checksum(const sb_task *task, sb_split split, int threads, uint64_t *hash,
                           int64_t *symbols, sb_error *err);

/* Writes the reference's dataset folder dir (created if missing): `train` and `test` (one
 * sample per line, "[classes]::['states']::length", index order), `transitions` and
 * `config.yaml`, so the original PyTorch code reads the same data. Files are written under
 * temporary names and renamed. threads 0: every core. Errors: SB_ERR_IO naming the path,
 * SB_ERR_INVALID for NULL arguments. */
sb_status sb_task_export(const sb_task *task, const char *dir, int threads, sb_error *err);

/* Which runs belong to one experiment (docs/ARCHITECTURE.md, "report"): config_json (a
 * stored configuration, grammar_scale resolved) without the keys drop[0..n_drop) and
 * also[0..n_also) (also may be NULL), keys sorted, compact: equal for runs of one experiment. NULL
 * for unreadable JSON or out of memory; freed with free(). */
char *sb_experiment_key(const char *config_json, const char *const *drop, int n_drop,
                        const char *const *also, int n_also);

/* config_json as its task was trained (grammar_scale resolved: vocab = amb + 1, amb_depth =
 * amb), keys in their stored order; NULL for unreadable JSON or out of memory; freed with
 * free(). What `results` and the dashboard show and group by. */
char *sb_experiment_effective_config(const char *config_json);

/* Which keys vary between the runs of stored configurations configs[0..n) (JSON texts as
 * stored, compared as trained: grammar_scale resolved, a key a text leaves out at its
 * default; a NULL or unreadable text has no say): varies[k] (sb_config_key_count() entries)
 * is 1 for key k of the run hash whose value differs, never for `model` (a column of its own)
 * nor for `task_seed` where it equals the seed in every run. Returns how many vary. The one
 * rule of `results`'s default columns and the dashboard's "varied". */
int sb_experiment_varied_keys(const char *const *configs, size_t n, unsigned char *varies);

/* For experiments keys[0..n) (sb_experiment_key texts), writes into labels[i] (size bytes
 * each) "key=value, ..." of the keys whose values differ between them (empty when n < 2).
 * Returns 0, or -1 out of memory. */
int sb_experiment_labels(const char *const *keys, int n, char *const *labels, size_t size);

/* -- runs as a table: columns and groups over seeds (`results`, the dashboard) -- */

/* A column of a run table: one of a run's own fields (run, status, model, protocol, params,
 * test_acc, ..., te: the topological entropy of its grammar) or a configuration key stored
 * with a run. Columns are numbered 0 .. sb_run_column_count() - 1. */
typedef struct sb_run_column_info {
    const char *name;  /* as --columns, --sort, --group and JSON name it */
    const char *csv;   /* its CSV header (the run id's is "hash") */
    const char *title; /* a table's header */
    int digits;        /* a table prints its number with these decimals; -1: the text as it is;
                          SB_RUN_COLUMN_G3: three significant digits */
    int numeric;
} sb_run_column_info;

#define SB_RUN_COLUMN_G3 99

int sb_run_column_count(void);

/* Columns 0 .. sb_run_column_fields() - 1 are a run's fields, the others configuration keys. */
int sb_run_column_fields(void);

/* The column called name ("hash" is the run's too), or -1. A key that is also a field (model,
 * protocol) is the field. */
int sb_run_column_find(const char *name);

/* What column c is; 0 when there is no such column. */
int sb_run_column_get(int column, sb_run_column_info *out);

/* Runs read from a results database with their stored configurations: what a column's value
 * is computed from, with the parsed configurations and grammars kept between calls. */
typedef struct sb_run_table sb_run_table;

/* A table over rows[n], configs[n] (the stored JSON texts, sb_results_config_json; NULL or a
 * NULL entry: unknown) and ceiling_se[n] (NULL: unknown), all borrowed while it lives.
 * Errors: SB_ERR_NOMEM. */
sb_status sb_run_table_new(const sb_result_row *rows, const char *const *configs,
                           const double *ceiling_se, size_t n, sb_run_table **out, sb_error *err);

void sb_run_table_free(sb_run_table *t);

/* Run i's value in column c: its exact text into buf ("" when unknown; numbers as JSON writes
 * them, an effective memory beyond the k = 32 observer ">32", a configuration key as the task
 * was trained (sb_experiment_effective_config) or at its default where the run was stored
 * without it) and its number (NaN when it is not one). */
double sb_run_table_value(sb_run_table *t, size_t i, int column, char *buf, size_t size);

/* The mean, sample standard deviation (n - 1; NaN under 2) and count of a column's finite
 * values over a group's finished runs. */
typedef struct sb_run_stat {
    double mean, std;
    size_t n;
} sb_run_stat;

/* Runs of equal values in the group columns whose configurations differ in their seeds
 * alone (seed, task_seed): one experiment's seeds. */
typedef struct sb_run_group {
    size_t first; /* its first run (the group columns' values are that run's) */
    size_t *runs; /* its runs (table indices), in the order given */
    size_t n_runs;
    size_t finished;    /* how many finished: the runs its statistics summarise */
    char apart[160];    /* what sets it apart from groups of equal column values ("key=value,
                           ..."), "" when none has them */
    sb_run_stat *stats; /* [n_stats] */
    char *experiment;   /* its configuration but the seeds (sb_experiment_key) */
} sb_run_group;

/* Groups the table's runs runs[0..n) by the columns by[0..n_by) and computes each group's
 * statistics of the columns stats[0..n_stats); the groups in the order of their group
 * columns' values (numbers by value, unknown values last), ties in order of appearance.
 * *out (freed with sb_run_groups_free) receives *n_groups groups. The one rule of `results
 * --group` and the dashboard's groups. Errors: SB_ERR_INVALID (no such column or run),
 * SB_ERR_NOMEM. */
sb_status sb_run_table_groups(sb_run_table *t, const size_t *runs, size_t n, const int *by,
                              int n_by, const int *stats, int n_stats, sb_run_group **out,
                              size_t *n_groups, sb_error *err);

void sb_run_groups_free(sb_run_group *groups, size_t n);

/* Creates folder dir and its missing parents, as `mkdir -p` (another process creating one
 * at the same moment is success). Errors: SB_ERR_IO "cannot create the WHAT 'dir': reason". */
sb_status sb_make_dirs(const char *dir, const char *what, sb_error *err);

/* -- the ideal observer: the accuracy a task allows (docs/reading-results.md) -- */

#define SB_CEILING_N_WINDOWS 14

/* The window sizes k of the window observers, w = 0 .. SB_CEILING_N_WINDOWS - 1: 0 1 2 4 8 16
 * 32 64 ... 4096 (the observer sees the symbols of the last k elements). A ceiling computes
 * the first n_windows of them: 0 .. 32 for the reference tasks, up to the first k that
 * covers a whole sample for interleaved walks (--walk_len). */
int sb_ceiling_window_size(int w);

typedef struct sb_ceiling {
    double expected_acc;    /* the Bayes accuracy: mean of the largest posterior */
    double realized_acc;    /* argmax == true state */
    double expected_acc_se; /* standard error of a realized accuracy on these samples around
                               the expected one (from the spread over samples) */
    /* the ideal model: a model that outputs, at every frame, the exact posterior of the
     * frame's owner state given every frame so far (what cross-entropy training converges
     * to with unlimited capacity and data), scored by the window metric; its expected
     * accuracy and its accuracy on these samples. Equal to expected_acc / realized_acc for
     * zero and noisy gaps; for distractor gaps it is not told which frames are distractors,
     * so bayes_model_acc <= expected_acc. */
    double bayes_model_acc, bayes_model_realized_acc;
    double window_acc[SB_CEILING_N_WINDOWS]; /* indexed like sb_ceiling_window_size */
    int n_windows;                           /* the windows computed (7: k <= 32; 0 reads as 7) */
    /* calibration: the mean posterior of the true state, and its expectation under the
     * observer's own posterior (mean of sum_s p(s)^2); equal up to noise when the filter
     * is exact (a Monte-Carlo check) */
    double p_true_mean, p_sq_mean;
    int64_t n_samples, n_elements;
    int64_t prior_samples; /* training samples behind the window observers' prior */
    int segmented;         /* 1 when the observer is told which frames are distractors (task 3) */
    double seconds;        /* wall time of the computation */
} sb_ceiling;

/* Computes the ideal observer and the window curve of task, reading the keys split, samples,
 * prior_samples and threads of cfg (NULL: their defaults: the whole test split, a prior from
 * min(dataset, 2000) training samples, every core); the task's own keys come from the task.
 * Errors: SB_ERR_INVALID for NULL task or out, samples beyond the split; SB_ERR_NOMEM; the
 * sampler's errors. */
sb_status sb_ceiling_compute(const sb_task *task, const sb_config *cfg, sb_ceiling *out,
                             sb_error *err);

/* The memory demand of the task: the window (in elements, interpolated as effective memory
 * is) at which the window observers come within 0.01 of expected_acc; INFINITY when even the
 * largest computed window stays further below. */
double sb_ceiling_memory_demand(const sb_ceiling *c);

/* *c as one line of JSON (no newline): expected_acc, realized_acc, expected_acc_se,
 * bayes_model_acc, bayes_model_realized_acc, window_acc {"0": .., "1": .., ...},
 * p_true_mean, p_sq_mean, n_samples, n_elements, prior_samples, segmented, seconds. *json is
 * freed with sb_string_free. Errors: SB_ERR_INVALID for NULL arguments, SB_ERR_NOMEM. */
sb_status sb_ceiling_to_json(const sb_ceiling *c, char **json, sb_error *err);

/* -- benchmarks -- */

/* The instruction sets behind a benchmark: what the compiler was allowed to use for this
 * library (SB_NATIVE=ON builds with -march=native), what this CPU offers (asked at run time),
 * and the OpenBLAS kernel set (chosen by OpenBLAS at run time; OPENBLAS_CORETYPE overrides
 * it). Feature lists are space-separated lower-case names (sse2 ... avx2 fma avx512f ...);
 * a level is the widest vector extension among them ("avx512", "avx2", "avx", "sse4.2",
 * "sse2"). Strings are static. */
typedef struct sb_bench_isa {
    int native; /* built with -march=native */
    const char *built_level;
    char built[160];
    const char *cpu_level; /* "unknown" off x86 */
    char cpu[160];
    const char *blas_core;     /* OpenBLAS's kernel set, e.g. "Haswell" */
    const char *blas_coretype; /* $OPENBLAS_CORETYPE, NULL when unset */
} sb_bench_isa;

/* Fills *isa. */
void sb_bench_isa_get(sb_bench_isa *isa);

/* The data benchmark (`selectivbench bench data`): three stages of data generation, each
 * validated (the same hash on one thread and on `threads`), warmed up and timed as the
 * median of SB_BENCH_DATA_REPEATS runs over the task's training split:
 *   0 "sequences"  the state sequences alone (the reference's exact draws)
 *   1 "samples"    sequences + gap decisions and durations (what sb_task_checksum hashes)
 *   2 "batches"    padded batches of frames (one-hot + noise, targets, windows), B = 64 */
#define SB_BENCH_DATA_STAGES 3
#define SB_BENCH_DATA_REPEATS 3

/* The name of stage s, or NULL outside [0, SB_BENCH_DATA_STAGES). */
const char *sb_bench_data_stage_name(int s);

/* Runs stage s on threads threads (>= 1) and gives the median seconds of one pass over the
 * training split. Errors: SB_ERR_INVALID for a bad stage or thread count, SB_ERR_RUNTIME when
 * the stage's hash differs between 1 and `threads` threads (the benchmark is invalid), the
 * sampler's errors, SB_ERR_NOMEM. */
sb_status sb_bench_data_stage(const sb_task *task, int s, int threads, double *seconds,
                              sb_error *err);

/* The size of a training-step benchmark (`selectivbench bench`). */
typedef struct sb_bench_config {
    const char *model;
    int batch;   /* B */
    int frames;  /* T */
    int width;   /* D (--feat_size) */
    int layers;  /* L */
    int inputs;  /* one-hot width */
    int classes; /* decoder outputs */
    int d_state;
    int steps;             /* timed steps (median reported) */
    int threads;           /* 0: all cores */
    const char *gemm;      /* GEMM engine: "openblas", "onednn" or "auto" (NULL: auto) */
    const char *precision; /* the large products' operands: "fp32" or "bf16" (NULL: fp32) */
} sb_bench_config;

typedef struct sb_bench_result {
    size_t params;
    double step_ms;      /* median of the timed steps */
    double tokens_per_s; /* B * T / step time */
    double gflops;       /* achieved: 3 x forward FLOPs per step / step time */
    double memory_mib;   /* what a step holds: activations (arena peak) + parameter,
                            gradient and Adam buffers + the batch */
    double first_loss, last_loss;
    double gemm_onednn_share; /* fraction of the GEMM FLOPs oneDNN computed (the rest: OpenBLAS) */
    double gemm_bf16_share;   /* fraction of the GEMM FLOPs with bf16 operands */
} sb_bench_result;

/* Builds the model on a random one-hot batch, validates a training step (finite loss,
 * every trainable tensor receives a gradient, the loss moves after updates), warms up, then
 * times cfg->steps full steps (forward, loss, backward, clipping, Adam). Errors:
 * SB_ERR_INVALID for NULL arguments, sizes that are not positive or an unknown model (the
 * message lists the known ones); SB_ERR_RUNTIME when the step fails its validation;
 * SB_ERR_NOMEM. */
sb_status sb_bench_train_step(const sb_bench_config *cfg, sb_bench_result *res, sb_error *err);

/* The machine's FP32 matrix-multiply rate in GFLOP/s on `threads` threads (0: all): the best
 * of a few 2048^3 products on each engine this build has (OpenBLAS, and oneDNN), the
 * roofline a float32 step's GFLOP/s is compared with. */
double sb_bench_sgemm_peak(int threads);

/* The same for bf16 operands (oneDNN's bf16 matmul on operands already rounded, float32
 * accumulation): the roofline of a --precision bf16 step; 0 when this build or CPU has no
 * bf16 products. */
double sb_bench_bf16_peak(int threads);

/* 1 when this build and CPU have bf16 products (--precision bf16 can run), else 0; measures
 * nothing. */
int sb_bench_bf16_available(void);

/* GFLOP/s of an M x K by K x N product as sb_bench_sgemm_rate, with the operands' precision
 * ("fp32" or "bf16"; NULL: fp32; bf16 counts the rounding of both operands, as training
 * pays it). Errors as sb_bench_sgemm_rate's, and SB_ERR_INVALID (with the reason) when bf16
 * cannot run here. */
sb_status sb_bench_gemm_rate(const char *gemm, const char *precision, int M, int N, int K,
                             int threads, double *gflops, sb_error *err);

/* GFLOP/s of an M x K by K x N sgemm (row-major, no transposes) on `threads` threads (0:
 * all) with the GEMM engine gemm ("openblas", "onednn", "auto"; NULL: auto): the best of
 * three runs after a warm-up. The engine stays set for later products of the process.
 * Errors: SB_ERR_INVALID for sizes below 1, an unknown engine or "onednn" in a build
 * without oneDNN (the message says so); SB_ERR_NOMEM. */
sb_status sb_bench_sgemm_rate(const char *gemm, int M, int N, int K, int threads, double *gflops,
                              sb_error *err);

/* oneDNN's version ("2.6.3") when this build can use it, NULL otherwise. */
const char *sb_bench_onednn_version(void);

/* -- the probe: what a trained model keeps, where, and for how long (docs/probe.md) -- */

/* Sections (bits; the probe's `section` key chooses all or one). */
enum {
    SB_PROBE_READOUT = 1,   /* linear readouts of the state ids by depth and lag */
    SB_PROBE_GATES = 2,     /* input-dependent gates on symbol versus gap frames */
    SB_PROBE_RETENTION = 4, /* state and output norms along one long gap */
    SB_PROBE_ALL = 7,
};

typedef enum sb_probe_readout {
    SB_PROBE_LDA = 0,   /* linear discriminant analysis: shared covariance, closed form */
    SB_PROBE_RIDGE = 1, /* ridge regression onto one-hot targets */
} sb_probe_readout;

typedef enum sb_probe_frame {
    SB_PROBE_FRAME_SYMBOL = 0, /* an element's feature row: its symbol frame */
    SB_PROBE_FRAME_LAST = 1,   /* the last frame of its window (its last gap frame) */
} sb_probe_frame;

/* Probes the checkpoint at `checkpoint`, trained with the configuration cfg (for example
 * from sb_checkpoint_config, with keys changed): builds cfg's task and model, loads the
 * weights, runs the sections cfg's probe keys ask for (section, probe_samples, samples,
 * readout, ridge, probe_frame, retention_dur, retention_samples, retention_element,
 * probe_bs: SB_KEYS_COMMAND) and writes out_dir/probe.json (indented) and the figures
 * readout, gates and retention (.png, .svg, .pdf) of the sections it has into out_dir
 * (created if missing). When the checkpoint records its own configuration, cfg's grammar
 * must be the same (the readouts would be meaningless otherwise). Optional outputs (NULL:
 * not made; freed with sb_string_free): *json, the same JSON object on one line, and
 * *summary, the human-readable report `selectivbench probe` prints (lines ending with '\n').
 * Errors: SB_ERR_IO for a missing or corrupt checkpoint or an output that cannot be
 * written; SB_ERR_INVALID for NULL arguments, a checkpoint trained on another task,
 * tensors that do not fit cfg's model, bad settings, or gates required of a model without
 * any; those of sb_config_check; SB_ERR_NOMEM; SB_ERR_RUNTIME. */
sb_status sb_probe_checkpoint(const char *checkpoint, const sb_config *cfg, const char *out_dir,
                              char **json, char **summary, sb_error *err);

/* ---- reports ----------------------------------------------------------------------------- */

typedef struct sb_report_outcome {
    int runs_read;          /* runs in the database */
    int runs_used;          /* finished runs used: in a figure or under "Other runs" */
    int figures;            /* figures written, each as PNG, SVG and PDF */
    int yardsticks_missing; /* runs drawn without their yardsticks */
    char yardsticks_error[SB_ERROR_MSG_MAX]; /* why, for the first of them */
    char table_path[4096];                   /* report.md */
    /* runs left out of every figure and mean (runs_read - runs_used): diverged, unfinished
     * (failed, stopped, running), or finished without a test accuracy; of them, diverged */
    int runs_left_out;
    int runs_diverged;
    /* of runs_used, those listed under "Other runs" in report.md rather than drawn: their
     * figure would have one x value (a single `train` run, the seeds of one setting) */
    int runs_other;
} sb_report_outcome;

/* Reads the results database at db_path and writes the paper's figures and report.md into
 * out_dir (created if missing). out may be NULL. Errors: SB_ERR_IO naming the database
 * (missing, unreadable) or the file that could not be written. */
sb_status sb_report_write(const char *db_path, const char *out_dir, sb_report_outcome *out,
                          sb_error *err);

/* sb_report_write of the runs matching every filter ("KEY=VALUE", as
 * sb_results_config_matches reads them; n_filters 0: every run), and with x_key (a
 * configuration key such as dataset_size or train_seqlen_max: a scale study; or
 * SB_REPORT_X_DEMAND, each run's task's memory demand, sb_ceiling_memory_demand) one figure of
 * every run against that key instead of the paper's figures (NULL: the paper's). Errors:
 * those of sb_report_write; SB_ERR_INVALID for an unknown x_key. */
#define SB_REPORT_X_DEMAND "memory_demand"
sb_status sb_report_write_by(const char *db_path, const char *out_dir, const char *x_key,
                             const char *const *filters, int n_filters, sb_report_outcome *out,
                             sb_error *err);

/* The same, but the database is only read, even when it is writable: yardsticks missing
 * from it are computed for the figures and not stored. For viewers that must never write a
 * database a sweep may be filling (`selectivbench serve`). Errors: those of sb_report_write. */
sb_status sb_report_write_readonly(const char *db_path, const char *out_dir, sb_report_outcome *out,
                                   sb_error *err);

/* The paper's three findings (gating, in-state channel mixing, attention; docs/claims.md)
 * tested on the runs of the results database at db_path, as the markdown section report.md
 * ends with: a verdict per finding and slice (holds, contradicted, not shown: why) with its
 * seeds, estimate, 95% interval, Holm-corrected p-value and the smallest effect it detects
 * at 80% power. *markdown is a new string (sb_string_free). The database is only read.
 * Errors: SB_ERR_IO naming the database; SB_ERR_NOMEM. */
sb_status sb_report_claims(const char *db_path, char **markdown, sb_error *err);

/* The same on the runs whose stored configuration matches every filter "KEY=VALUE"
 * (sb_results_config_matches): the findings of one slice of a database, such as one preset
 * of configs/claims/ inside a larger study (--filter of `report --claims`). Errors: those
 * of sb_report_claims, SB_ERR_INVALID for n_filters < 0 or filters NULL with n_filters > 0.
 * With as_json, *markdown is instead a JSON array of the verdicts, one object each (id,
 * slice, pairs, chosen_on, seeds, estimate, lo, hi, p, p_holm, detectable, seeds_needed,
 * verdict, reason, not_tested, ...; `report --claims --json`). */
sb_status sb_report_claims_as(const char *db_path, const char *const *filters, int n_filters,
                              int as_json, char **markdown, sb_error *err);
sb_status sb_report_claims_where(const char *db_path, const char *const *filters, int n_filters,
                                 char **markdown, sb_error *err);

/* 1 when the configuration JSON text (sb_results_config_json) has KEY = VALUE for filter
 * "KEY=VALUE": strings exactly, numbers as numbers (96000 = 96000.0), booleans as
 * True/False (true/false, 1/0), null as null/None; "KEY=A,B,C" when it has any of them
 * (seed=1,2,3); 0 otherwise (a missing key, bad JSON). */
int sb_results_config_matches(const char *config_json, const char *filter);

#ifdef __cplusplus
}
#endif

#endif
