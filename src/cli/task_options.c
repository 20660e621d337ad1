/* task_options.c - the task flags of train.py (see task_options.h). */
#include "task_options.h"

#include <string.h>

static const char *const dist_dur_names[] = {"uniform", "lognormal", NULL};
static const char *const protocol_names[] = {"reference", "clean", NULL};
static const char *const gap_rng_names[] = {"derived", "reference", NULL};

#define BIG 1e9

void sb_task_options_add(sb_task_flags *tf, sb_option *opts, int *n, int grammar_only)
{
    memset(tf, 0, sizeof *tf);
    tf->cfg = sb_task_config_default();
    tf->seed = (int64_t)tf->cfg.grammar.seed;
    tf->protocol = (int)tf->cfg.protocol;
    tf->gap_rng = (int)tf->cfg.gap_rng;
    tf->dist_dur = (int)tf->cfg.dist_dur;
    tf->base_set = "one_hot";
    sb_task_config *c = &tf->cfg;
    sb_option grammar[] = {
        {"vocab", SB_OPT_INT, &c->grammar.vocab, 0, BIG, NULL, NULL,
         "letters + 1 (the end symbol '#') (default 41)", 0},
        {"amb", SB_OPT_INT, &c->grammar.amb, 0, BIG, NULL, NULL,
         "number of ambiguous letters (default 40)", 0},
        {"amb_depth", SB_OPT_INT, &c->grammar.amb_depth, 0, BIG, NULL, NULL,
         "grammar states per ambiguous letter (default 40)", 0},
        {"grammar_scale", SB_OPT_BOOL, &c->grammar.grammar_scale, 0, 1, NULL, NULL,
         "set vocab = amb + 1 and amb_depth = amb (task 1 complexity) (default False)", 0},
        {"seed", SB_OPT_INT64, &tf->seed, 0, 4294967295.0, NULL, NULL,
         "task seed; the reference uses the same seed for model and task (default 1)", 0},
        {"transition_density", SB_OPT_DOUBLE, &c->grammar.transition_density, 0, 1e6, NULL,
         NULL, "edge probability before division by amb_depth (default 0.4, as train.py)", 0},
    };
    sb_option data[] = {
        {"train_seqlen_min", SB_OPT_INT, &c->train_seqlen_min, -BIG, BIG, NULL, NULL,
         "shortest accepted string (default 1)", 0},
        {"train_seqlen_max", SB_OPT_INT, &c->train_seqlen_max, -BIG, BIG, NULL, NULL,
         "longest accepted string, and the sample length (default 200)", 0},
        {"test_seqlen_min", SB_OPT_INT, &c->test_seqlen_min, -BIG, BIG, NULL, NULL,
         "shortest accepted test string (default 1)", 0},
        {"test_seqlen_max", SB_OPT_INT, &c->test_seqlen_max, -BIG, BIG, NULL, NULL,
         "longest accepted test string, and the test sample length (default 200)", 0},
        {"combined_seq_length", SB_OPT_INT, &c->combined_seq_length, -BIG, BIG, NULL, NULL,
         "training sample length in elements (default: --train_seqlen_max)", 0},
        {"train_gap_min", SB_OPT_DOUBLE, &c->train_gap_min, -BIG, BIG, NULL, "SECONDS",
         "shortest training gap, 0.1 s per frame (default 0.1)", 0},
        {"train_gap_max", SB_OPT_DOUBLE, &c->train_gap_max, -BIG, BIG, NULL, "SECONDS",
         "longest training gap; also the test gap without --test_dur (default 0.1)", 0},
        {"dist_dur", SB_OPT_CHOICE, &tf->dist_dur, 0, 0, dist_dur_names, "uniform|lognormal",
         "training gap distribution (default uniform)", 0},
        {"test_dur", SB_OPT_DOUBLE, &c->test_dur, 0, BIG, NULL, "SECONDS",
         "fixed test gap (default: --train_gap_max)", 0},
        {"train_noise", SB_OPT_DOUBLE, &c->train_noise, -BIG, BIG, NULL, NULL,
         "amplitude of U[0, noise) added to every frame, train and test (default 0)", 0},
        {"test_noise", SB_OPT_DOUBLE, &tf->test_noise, -BIG, BIG, NULL, NULL,
         "accepted for train.py compatibility and ignored, as there", 0},
        {"grammar_gap", SB_OPT_BOOL, &c->grammar_gap, 0, 1, NULL, NULL,
         "fill gaps with symbols the grammar forbids there (task 3) (default False)", 0},
        {"gap_start", SB_OPT_INT, &c->gap_start, -BIG, BIG, NULL, NULL,
         "elements before this one never get a gap (default 0)", 0},
        {"gap_prob", SB_OPT_DOUBLE, &c->gap_prob, -BIG, BIG, NULL, NULL,
         "probability that an element gets a gap (default 1)", 0},
        {"dataset_size", SB_OPT_INT64, &c->dataset_size, -BIG, 1e12, NULL, NULL,
         "training samples (default 200000)", 0},
        {"test_size", SB_OPT_INT64, &c->test_size, -BIG, 1e12, NULL, NULL,
         "test samples (default 1000)", 0},
        {"protocol", SB_OPT_CHOICE, &tf->protocol, 0, 0, protocol_names, "reference|clean",
         "reference: test = first training sequences (as the reference); clean: disjoint", 0},
        {"gap_rng", SB_OPT_CHOICE, &tf->gap_rng, 0, 0, gap_rng_names, "derived|reference",
         "gap randomness: per (seed, split, index) streams, or the reference's on-the-fly ones",
         0},
        {"classify", SB_OPT_SWITCH, &tf->classify, 0, 1, NULL, NULL,
         "accepted for train.py compatibility (classification is the only mode)", 0},
        {"base_set", SB_OPT_STRING, &tf->base_set, 0, 0, NULL, "one_hot",
         "input encoding; only one_hot is supported", 0},
    };
    for (size_t i = 0; i < sizeof grammar / sizeof *grammar; i++)
        opts[(*n)++] = grammar[i];
    if (!grammar_only)
        for (size_t i = 0; i < sizeof data / sizeof *data; i++)
            opts[(*n)++] = data[i];
}

sb_status sb_task_options_finish(sb_task_flags *tf, sb_error *err)
{
    tf->cfg.grammar.seed = (uint64_t)tf->seed;
    tf->cfg.dist_dur = (sb_gap_dist)tf->dist_dur;
    tf->cfg.protocol = (sb_protocol)tf->protocol;
    tf->cfg.gap_rng = (sb_gap_rng)tf->gap_rng;
    if (strcmp(tf->base_set, "one_hot") != 0)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--base_set %s is not supported: only one_hot (the paper's input) is",
                            tf->base_set);
    return SB_OK;
}
