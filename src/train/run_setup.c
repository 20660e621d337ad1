/* run_setup.c - run configuration: the checks across keys, the model it builds, the
 * schedule's horizon. The defaults, ranges, JSON and hashes come from the key table
 * (src/config/keys.def, config.c). */
#include "train/run_setup.h"

#include <string.h>

#include "config/config.h"

/* train.py remaps some widths for some layers (the layer type's model_width: the
 * transformer's 648 -> 768 and 1296 -> 1280); --feat_size stores the requested width. */
int sb_run_config_effective_width(const sb_run_config *cfg)
{
    const sb_layer_type *type = sb_layer_type_find(cfg->model);
    if (type != NULL && type->model_width != NULL)
        return type->model_width(cfg->feat_size);
    return cfg->feat_size;
}

sb_status sb_run_config_check(const sb_run_config *cfg, sb_error *err)
{
    sb_status st = sb_task_config_check(&cfg->task, err);
    if (st != SB_OK)
        return st;
    if (sb_layer_type_find(cfg->model) == NULL)
        return sb_layer_type_unknown(cfg->model, err); /* did you mean, or the list */
    const sb_layer_type *type = sb_layer_type_find(cfg->model);
    if (type->check_feat_size != NULL && (st = type->check_feat_size(cfg->feat_size, err)) != SB_OK)
        return st;
    if (cfg->feat_size < 1 || cfg->feat_size > 65536)
        return sb_error_set(err, SB_ERR_INVALID, "--feat_size %d must lie in [1, 65536]",
                            cfg->feat_size);
    if (sb_num_heads(sb_run_config_effective_width(cfg)) == 0)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--feat_size %d has no head count (get_num_heads finds no power of "
                            "two >= 4 giving heads of at most 128)",
                            cfg->feat_size);
    if (cfg->layers < 1 || cfg->layers > 1024)
        return sb_error_set(err, SB_ERR_INVALID, "--layers %d must lie in [1, 1024]", cfg->layers);
    if (cfg->d_state < 1 || cfg->d_state > 65536)
        return sb_error_set(err, SB_ERR_INVALID, "--d_state %d must lie in [1, 65536]",
                            cfg->d_state);
    if (!(cfg->dropout >= 0.0 && cfg->dropout < 1.0))
        return sb_error_set(err, SB_ERR_INVALID, "--dropout %g must lie in [0, 1)", cfg->dropout);
    if (cfg->batch_size <= 2)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--batch_size %d: train.py requires more than 2 (a layer's output "
                            "pair check misfires at 2)",
                            cfg->batch_size);
    if (cfg->test_bs <= 2)
        return sb_error_set(err, SB_ERR_INVALID, "--test_bs %d: train.py requires more than 2",
                            cfg->test_bs);
    if (cfg->grad_acc < -1)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--grad_acc %d: use 0 (none), -1 (from the memory budget) or k > 0",
                            cfg->grad_acc);
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
    /* --lr and --wd: the key table's ranges (checked last, with the range in the message) are
     * the one rule; a second, stricter check here used to refuse --lr 100 with a message that
     * named no range */
    if (cfg->epoch_size < 1)
        return sb_error_set(err, SB_ERR_INVALID, "--epoch_size %lld must be at least 1",
                            (long long)cfg->epoch_size);
    if (cfg->task.dataset_size < cfg->batch_size)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--dataset_size %lld is smaller than --batch_size %d: no update "
                            "would happen",
                            (long long)cfg->task.dataset_size, cfg->batch_size);
    return sb_config_check_ranges(cfg, err);
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
