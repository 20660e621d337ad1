/* run_setup.c - run configuration: the checks across keys, the model it builds, the
 * schedule's horizon. The defaults, ranges, JSON and hashes come from the key table
 * (src/config/keys.def, config.c). */
#include "train/run_setup.h"

#include <string.h>

#include "config/config.h"
#include "core/cpus.h"

/* train.py remaps some widths for some layers (the layer type's model_width: the
 * transformer's 648 -> 768 and 1296 -> 1280); --feat_size stores the requested width. */
int sb_run_config_effective_width(const sb_run_config *cfg)
{
    const sb_layer_type *type = sb_layer_type_find(cfg->model);
    if (type != NULL && type->model_width != NULL)
        return type->model_width(cfg->feat_size);
    return cfg->feat_size;
}

double sb_train_step_bytes(const sb_model_config *mc, int samples, int frames)
{
    /* floats kept per token: each layer's activations and their gradients (about 30 D for
     * the transformer's block, less for recurrent layers: 30 D is the safe side), the
     * logits, probabilities and their gradient (3 C), the input. The fused head
     * (sb_model_loss) no longer keeps the 3 C; they stay in the estimate so that
     * --grad_acc -1 keeps choosing what it chose before (and the estimate stays on the
     * safe side). */
    double per_token =
        (double)mc->n_layers * 2.0 * 30.0 * mc->d_model + 3.0 * mc->d_output + (double)mc->d_input;
    return (double)samples * (double)frames * per_token * sizeof(real);
}

/* Sizes that cannot fit: a lower bound of what the run must hold at once, refused when it
 * exceeds this machine's memory, before anything is generated or allocated (a sequence
 * length of 10^8 would otherwise generate for minutes and grow without bound before failing).
 * Each bound is below what the run really needs, so nothing that fits is refused:
 *   the model: every block of the zoo holds at least one d x d matrix, kept with its
 *     gradient and Adam's two moments (4 floats a parameter);
 *   a training sample: one sample of combined_seq_length elements, at least one frame each,
 *     through sb_train_step_bytes (no gradient accumulation splits a sample);
 *   a test sample: its frames' inputs and logits, at least vocab floats each. */
static sb_status run_size_check(const sb_run_config *cfg, double machine_bytes, sb_error *err)
{
    if (machine_bytes <= 0)
        return SB_OK; /* unknown: nothing to compare with */
    const sb_task_config *t = &cfg->task;
    const int vocab = t->grammar.vocab > 1 ? t->grammar.vocab : 2;
    const double d = sb_run_config_effective_width(cfg), gb = 1073741824.0;
    const double per_block = 4.0 * d * d * sizeof(float); /* about four d x d matrices */
    const double model = (double)cfg->layers * per_block;
    const int train_elements =
        t->combined_seq_length > 0 ? t->combined_seq_length : t->train_seqlen_max;
    sb_model_config mc = sb_run_config_model(cfg, vocab, vocab);
    const double train = sb_train_step_bytes(&mc, 1, train_elements);
    const double test = (double)t->test_seqlen_max * 2.0 * vocab * sizeof(float);
    const char *what = "the model (--feat_size, --layers)";
    double need = model;
    if (train > need) {
        need = train;
        what = "one training sample (--train_seqlen_max, --combined_seq_length)";
    }
    if (test > need) {
        need = test;
        what = "one test sample (--test_seqlen_max)";
    }
    if (need <= machine_bytes)
        return SB_OK;
    return sb_error_set(err, SB_ERR_INVALID,
                        "the run cannot fit in memory: %s needs at least %.3g GB and this "
                        "machine has %.1f GB; shorten the sequences or narrow the model",
                        what, need / gb, machine_bytes / gb);
}

static _Atomic long checks_made;

long sb_run_config_checks_made(void)
{
    return checks_made;
}

sb_status sb_run_config_check(const sb_run_config *cfg, sb_error *err)
{
    checks_made++;
    /* every key's range, from the key table (the one place a range is written) */
    sb_status st = sb_config_check_ranges(cfg, err);
    if (st != SB_OK)
        return st;
    if ((st = sb_task_config_check(&cfg->task, err)) != SB_OK)
        return st;
    if (sb_layer_type_find(cfg->model) == NULL)
        return sb_layer_type_unknown(cfg->model, err); /* did you mean, or the list */
    const sb_layer_type *type = sb_layer_type_find(cfg->model);
    if (type->check_feat_size != NULL && (st = type->check_feat_size(cfg->feat_size, err)) != SB_OK)
        return st;
    if (sb_num_heads(sb_run_config_effective_width(cfg)) == 0)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--feat_size %d has no head count (get_num_heads finds no power of "
                            "two >= 4 giving heads of at most 128)",
                            cfg->feat_size);
    if (cfg->batch_size <= 2)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--batch_size %d: train.py requires more than 2 (a layer's output "
                            "pair check misfires at 2)",
                            cfg->batch_size);
    if (cfg->test_bs <= 2)
        return sb_error_set(err, SB_ERR_INVALID, "--test_bs %d: train.py requires more than 2",
                            cfg->test_bs);
    if (cfg->grad_acc > 0 && cfg->batch_size / cfg->grad_acc <= 2)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--grad_acc %d leaves micro-batches of %d samples; train.py requires "
                            "more than 2",
                            cfg->grad_acc, cfg->batch_size / cfg->grad_acc);
    const int micro = cfg->grad_acc > 0 ? cfg->batch_size / cfg->grad_acc : cfg->batch_size;
    if (cfg->grad_shards > micro && cfg->grad_acc >= 0)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--grad_shards %d is more than the %d samples of a micro-batch "
                            "(--batch_size %d, --grad_acc %d): every shard needs a sample",
                            cfg->grad_shards, micro, cfg->batch_size, cfg->grad_acc);
    if (cfg->task.dataset_size < cfg->batch_size)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--dataset_size %lld is smaller than --batch_size %d: no update "
                            "would happen",
                            (long long)cfg->task.dataset_size, cfg->batch_size);
    return run_size_check(cfg, sb_machine_memory_bytes(), err);
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
