/* run_options.c - train.py's flags (see run_options.h). */
#include "run_options.h"

#include <string.h>

static const char *const optimizer_names[] = {"adam", "adamw", NULL};
static const char *const scheduler_names[] = {"cosine_schedule_with_warmup",
                                              "cosine_schedule_with_warmup_lr_min", NULL};

#define BIG 1e9

void sb_run_options_add(sb_run_flags *rf, sb_option *opts, int *n)
{
    memset(rf, 0, sizeof *rf);
    sb_task_options_add(&rf->task, opts, n, 0);
    sb_run_config *c = &rf->cfg;
    *c = sb_run_config_default();
    rf->model = "transformer";
    rf->task_seed = 42;
    rf->same_seed = 1;
    rf->save_model = 1;
    rf->warmup_steps = -1;
    rf->n_head = 4;
    rf->results_dir = "results";
    rf->mem_budget = 4.0;
    sb_option run[] = {
        {"model", SB_OPT_STRING, &rf->model, 0, 0, NULL, "NAME",
         "layer type (selectivbench models lists them) (default transformer)", 0},
        {"layers", SB_OPT_INT, &c->layers, 1, 1024, NULL, NULL, "blocks (default 4)", 0},
        {"feat_size", SB_OPT_INT, &c->feat_size, 1, 65536, NULL, NULL,
         "model width d_model (default 256)", 0},
        {"d_state", SB_OPT_INT, &c->d_state, 1, 65536, NULL, NULL,
         "state size of the SSM layers (default 64)", 0},
        {"dropout", SB_OPT_DOUBLE, &c->dropout, 0, 0.999, NULL, NULL, "dropout (default 0.2)", 0},
        {"lr", SB_OPT_DOUBLE, &c->lr, 1e-12, 100, NULL, NULL, "learning rate (default 0.001)", 0},
        {"wd", SB_OPT_DOUBLE, &c->wd, 0, 100, NULL, NULL, "weight decay (default 0)", 0},
        {"optimizer", SB_OPT_CHOICE, &rf->optimizer, 0, 0, optimizer_names, "adam|adamw",
         "optimiser (default adam)", 0},
        {"scheduler", SB_OPT_CHOICE, &rf->scheduler, 0, 0, scheduler_names, "NAME",
         "cosine_schedule_with_warmup (default) or cosine_schedule_with_warmup_lr_min", 0},
        {"warmup_steps", SB_OPT_INT, &rf->warmup_steps, 0, BIG, NULL, NULL,
         "warm-up updates (default: 5% of the updates)", 0},
        {"batch_size", SB_OPT_INT, &c->batch_size, 1, 1e6, NULL, NULL, "batch (default 64)", 0},
        {"test_bs", SB_OPT_INT, &c->test_bs, 1, 1e6, NULL, NULL, "test batch (default 50)", 0},
        {"grad_acc", SB_OPT_INT, &c->grad_acc, -1, 1e6, NULL, NULL,
         "micro-batches per update: 0 none, -1 from --mem_budget (default 0)", 0},
        {"task_seed", SB_OPT_INT64, &rf->task_seed, 0, 4294967295.0, NULL, NULL,
         "task seed when --same_seed False (default 42)", 0},
        {"same_seed", SB_OPT_BOOL, &rf->same_seed, 0, 1, NULL, NULL,
         "task seed = --seed (default True)", 0},
        {"att_dropout", SB_OPT_BOOL, &c->att_dropout, 0, 1, NULL, NULL,
         "attention dropout (default False; not implemented: must stay False)", 0},
        {"rope_base", SB_OPT_DOUBLE, &c->rope_base, 1.000001, 1e12, NULL, NULL,
         "rotary base (default 1000 as train.py)", 0},
        {"n_head", SB_OPT_INT, &rf->n_head, 1, 4096, NULL, NULL,
         "ignored, as in train.py (heads come from get_num_heads(feat_size, 128))", 0},
        {"save_model", SB_OPT_BOOL, &rf->save_model, 0, 1, NULL, NULL,
         "save a checkpoint at every evaluation (default True)", 0},
        {"test_pretrained", SB_OPT_SWITCH, &rf->test_pretrained, 0, 1, NULL, NULL,
         "only evaluate the checkpoint of this training configuration (task 4)", 0},
        {"continued_training", SB_OPT_SWITCH, &rf->continued_training, 0, 1, NULL, NULL,
         "continue from this configuration's checkpoint (same as --resume)", 0},
        {"resume", SB_OPT_SWITCH, &rf->continued_training, 0, 1, NULL, NULL,
         "continue from the checkpoint and its optimiser state", 0},
        {"only_createset", SB_OPT_SWITCH, &rf->only_createset, 0, 1, NULL, NULL,
         "build the task and stop (data is generated on the fly here)", 0},
        {"early_stop", SB_OPT_SWITCH, &c->early_stop, 0, 1, NULL, NULL,
         "stop when the update loss has not improved for --patience updates", 0},
        {"patience", SB_OPT_INT, &c->patience, -1, BIG, NULL, NULL,
         "updates without improvement (default: 10% of the updates)", 0},
        {"epoch_size", SB_OPT_INT64, &c->epoch_size, 1, 1e12, NULL, NULL,
         "training samples between evaluations (default 5000 as train.py)", 0},
        {"threads", SB_OPT_INT, &rf->threads, 0, 1024, NULL, NULL, "threads (default: all cores)",
         0},
        {"results", SB_OPT_STRING, &rf->results_dir, 0, 0, NULL, "DIR",
         "results folder: database and checkpoints (default ./results)", 0},
        {"ckpt", SB_OPT_STRING, &rf->ckpt, 0, 0, NULL, "PATH",
         "checkpoint path (default DIR/checkpoints/<training hash>.safetensors)", 0},
        {"mem_budget", SB_OPT_DOUBLE, &rf->mem_budget, 0.01, 1e6, NULL, "GB",
         "activation memory for a step and for evaluation (default 4)", 0},
        {"json", SB_OPT_SWITCH, &rf->json, 0, 1, NULL, NULL,
         "end with one JSON object of final metrics on stdout", 0},
        {"quiet", SB_OPT_SWITCH, &rf->quiet, 0, 1, NULL, NULL, "no progress output", 0},
        {"print_hashes", SB_OPT_SWITCH, &rf->print_hashes, 0, 1, NULL, NULL,
         "print the run hash and the training hash of the configuration and stop", 0},
        /* train.py flags without effect here */
        {"gpu_device", SB_OPT_INT, &rf->noop_int, -1, BIG, NULL, NULL, "no-op (CPU)", 0},
        {"hash_save", SB_OPT_SWITCH, &rf->noop_flag, 0, 1, NULL, NULL,
         "no-op: checkpoints are always named by the configuration hash", 0},
        {"save_plots", SB_OPT_SWITCH, &rf->noop_flag, 0, 1, NULL, NULL, "no-op (W&B plots)", 0},
        {"visualize_layers", SB_OPT_SWITCH, &rf->noop_flag, 0, 1, NULL, NULL, "no-op", 0},
        {"debug", SB_OPT_SWITCH, &rf->noop_flag, 0, 1, NULL, NULL, "no-op (W&B)", 0},
        {"run_main", SB_OPT_SWITCH, &rf->noop_flag, 0, 1, NULL, NULL, "no-op (W&B)", 0},
        {"only_createsweep", SB_OPT_SWITCH, &rf->noop_flag, 0, 1, NULL, NULL, "no-op (W&B)", 0},
        {"sweep_id", SB_OPT_STRING, &rf->noop_str, 0, 0, NULL, NULL, "no-op (W&B)", 0},
        {"sweep_name", SB_OPT_STRING, &rf->noop_str, 0, 0, NULL, NULL, "no-op (W&B)", 0},
        {"pt_epochs", SB_OPT_INT, &rf->noop_int, -BIG, BIG, NULL, NULL, "no-op (unused there)", 0},
        {"load_model", SB_OPT_STRING, &rf->noop_str, 0, 0, NULL, NULL, "no-op (unused there)", 0},
        {"read_from_file", SB_OPT_BOOL, &rf->noop_bool, 0, 1, NULL, NULL,
         "no-op: samples are generated on the fly, identically", 0},
        {"gap_kldiv", SB_OPT_BOOL, &rf->noop_bool, 0, 1, NULL, NULL,
         "no-op (prediction mode only)", 0},
        {"dt_rank", SB_OPT_INT, &rf->noop_int, -BIG, BIG, NULL, NULL,
         "no-op: RecNet never passes it to Mamba", 0},
        {"dt_relu", SB_OPT_STRING, &rf->noop_str, 0, 0, NULL, NULL, "no-op", 0},
        {"taylor_order", SB_OPT_STRING, &rf->noop_str, 0, 0, NULL, NULL, "no-op", 0},
        {"pos_encoding", SB_OPT_BOOL, &rf->noop_bool, 0, 1, NULL, NULL,
         "no-op: the transformer ignores it", 0},
        {"slide_window", SB_OPT_INT, &rf->noop_int, -BIG, BIG, NULL, NULL,
         "no-op: the transformer ignores its mask", 0},
        {"act_function", SB_OPT_STRING, &rf->noop_str, 0, 0, NULL, NULL,
         "S4 activation ('none' = GELU)", 0},
    };
    for (size_t i = 0; i < sizeof run / sizeof *run; i++)
        opts[(*n)++] = run[i];
}

/* Puts a configuration into the flags' storage so that parsing overrides it field by field.
 * model_buf keeps the model name (the flag points at it). */
void sb_run_flags_from_config(sb_run_flags *rf, const sb_run_config *cfg, char *model_buf,
                              size_t size)
{
    rf->cfg = *cfg;
    rf->task.cfg = cfg->task;
    rf->task.seed = (int64_t)cfg->seed;
    rf->task.protocol = (int)cfg->task.protocol;
    rf->task.gap_rng = (int)cfg->task.gap_rng;
    rf->task.dist_dur = (int)cfg->task.dist_dur;
    rf->same_seed = cfg->task.grammar.seed == cfg->seed;
    rf->task_seed = (int64_t)cfg->task.grammar.seed;
    rf->optimizer = (int)cfg->optimizer;
    rf->scheduler = (int)cfg->scheduler;
    rf->warmup_steps = cfg->warmup_steps;
    snprintf(model_buf, size, "%s", cfg->model);
    rf->model = model_buf;
}

sb_status sb_run_options_finish(sb_run_flags *rf, sb_error *err)
{
    sb_status st = sb_task_options_finish(&rf->task, err);
    if (st != SB_OK)
        return st;
    sb_run_config *c = &rf->cfg;
    c->task = rf->task.cfg;
    if (strlen(rf->model) >= sizeof c->model)
        return sb_error_set(err, SB_ERR_INVALID, "--model '%s' is too long", rf->model);
    snprintf(c->model, sizeof c->model, "%s", rf->model);
    c->seed = (uint64_t)rf->task.seed;
    c->task.grammar.seed = rf->same_seed ? c->seed : (uint64_t)rf->task_seed;
    c->optimizer = (sb_optimizer_kind)rf->optimizer;
    c->scheduler = (sb_schedule_kind)rf->scheduler;
    c->warmup_steps = rf->warmup_steps;
    c->test_pretrained = rf->test_pretrained;
    if (c->att_dropout)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--att_dropout True is not supported (the paper's runs use False)");
    return SB_OK;
}
