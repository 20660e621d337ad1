/*
 * checkpoint.h - model checkpoints as safetensors.
 *
 * The checkpoint file holds exactly the reference RecNet's state_dict (same names and
 * shapes, float32), so `model.load_state_dict(safetensors.torch.load_file(path))` works on
 * the reference model, and a state_dict saved there loads here. The header metadata
 * records the format, the full run configuration (JSON), the model, the protocol, the
 * training progress, and what its bits depend on besides the configuration (the engine table
 * and the fingerprint, tensor/gemm_engine.h). The optimiser state (Adam moments and step) needed by
 * --resume goes to a sidecar file `<name>.optim.safetensors`, so the main file stays loadable as
 * is. The two are one unit: a kill at any instant of a save leaves either the previous pair or the
 * new one (the optimiser state is written to `<sidecar>.pending`, the model file replaced, then the
 * pending file renamed; a load for a resume finishes a save killed between the two renames). Every
 * file is written to a temporary name and renamed.
 */
#ifndef SELECTIVBENCH_CHECKPOINT_H
#define SELECTIVBENCH_CHECKPOINT_H

#include <stdint.h>

#include "config/run_config.h"
#include "core/status.h"
#include "model/model.h"
#include "tensor/optim.h"

#define SB_CHECKPOINT_FORMAT "selectivbench-checkpoint-1"

/* Saves the model (and, if opt is not NULL, the optimiser state to the sidecar).
 * samples_seen: training samples consumed so far. Errors: SB_ERR_DIVERGED, before either
 * file is touched, when a weight (or, with opt, an Adam moment) is NaN or infinite (the
 * message names the tensor and the count); SB_ERR_IO naming the path. */
sb_status sb_checkpoint_save(const char *path, const sb_model *m, const sb_run_config *cfg,
                             const sb_optimizer *opt, int64_t samples_seen, sb_error *err);

/* Reads the run configuration recorded in a checkpoint written here. Errors: missing or
 * corrupt file, or a recorded configuration that does not pass sb_run_config_check
 * (SB_ERR_IO: "damaged or not from this version", naming the file and the metadata key);
 * a file without our metadata (SB_ERR_INVALID). */
sb_status sb_checkpoint_read_config(const char *path, sb_run_config *cfg, sb_error *err);

/* The engine table and fingerprint digest a checkpoint of ours was written under
 * (sb_gemm_fingerprint): "" and "" for a file that records none (older versions, a
 * reference state_dict). Errors: the file's (SB_ERR_IO); a recorded value this version
 * cannot read (SB_ERR_IO naming the key). */
sb_status sb_checkpoint_read_engine(const char *path, char table[16], char digest[9],
                                    sb_error *err);

/* Loads the weights into m: every parameter must be present with the same shape and no
 * other tensor may be (else SB_ERR_INVALID: a different model or size), and every value
 * finite (else SB_ERR_INVALID naming the tensor and the count of NaN/inf values; the one
 * place every loader goes through). On failure m's weights are unchanged. With opt, also
 * the optimiser state from the sidecar (checked alike); *samples_seen receives the progress
 * (0 for a file without it, e.g. a reference state_dict; SB_ERR_IO naming the key when it
 * is not a count). */
sb_status sb_checkpoint_load(const char *path, sb_model *m, sb_optimizer *opt,
                             int64_t *samples_seen, sb_error *err);

/* The sidecar path for a checkpoint path (".safetensors" -> ".optim.safetensors"). */
void sb_checkpoint_optim_path(const char *path, char *out, size_t size);

#endif
