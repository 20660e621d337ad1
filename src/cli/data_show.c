/* data_show.c - human-readable views of a task and its samples (see data_show.h). */
#include "cli/data_show.h"

#include <string.h>

#define SHOW_WIDTH 96

void sb_data_print_task(const sb_task *task, FILE *f)
{
    const sb_grammar *g = task->grammar;
    const sb_task_config *c = &task->cfg;
    fprintf(f, "task: vocab %d, amb %d, amb_depth %d, seed %llu -> %d states, %d transitions, "
               "TE %.4f\n",
            g->config.vocab, g->config.amb, g->config.amb_depth,
            (unsigned long long)c->grammar.seed, g->n_states, g->n_transitions,
            g->topological_entropy);
    const char *content = c->grammar_gap ? "non-grammatical symbols" : "zero frames";
    if (c->dist_dur == SB_GAP_DIST_UNIFORM)
        fprintf(f, "  train: %lld samples of %d elements; gaps of %s, U(%g, %g) s",
                (long long)c->dataset_size, task->n_elements[SB_SPLIT_TRAIN], content,
                c->train_gap_min, c->train_gap_max);
    else
        fprintf(f, "  train: %lld samples of %d elements; gaps of %s, lognormal(%g, %g) s",
                (long long)c->dataset_size, task->n_elements[SB_SPLIT_TRAIN], content,
                c->train_gap_min, c->train_gap_max);
    if (c->gap_start > 0 || c->gap_prob < 1.0)
        fprintf(f, " with probability %g from element %d", c->gap_prob, c->gap_start);
    if (c->train_noise > 0.0)
        fprintf(f, ", noise U[0, %g)", c->train_noise);
    fprintf(f, "\n  test:  %lld samples of %d elements; gaps of %g s; protocol %s\n",
            (long long)c->test_size, task->n_elements[SB_SPLIT_TEST], sb_task_test_duration(task),
            c->protocol == SB_PROTOCOL_CLEAN ? "clean (disjoint test sequences)"
                                             : "reference (test = first training sequences)");
}

/* Appends a token to the current line, wrapping at SHOW_WIDTH. */
static void show_token(FILE *f, const char *tok, int *col)
{
    int len = (int)strlen(tok);
    if (*col + 1 + len > SHOW_WIDTH) {
        fputc('\n', f);
        *col = 0;
    }
    if (*col == 0) {
        fputs("   ", f);
        *col = 3;
    }
    fputc(' ', f);
    fputs(tok, f);
    *col += 1 + len;
}

sb_status sb_data_show(const sb_task *task, sb_split split, const int64_t *idx, int64_t n,
                       FILE *f, sb_error *err)
{
    sb_sample s;
    sb_status st = sb_sample_alloc(task, &s, err);
    if (st != SB_OK)
        return st;
    const sb_grammar *g = task->grammar;
    fprintf(f, "  (each state is one symbol frame showing its letter; _N: N zero gap frames; "
               "!XY: distractor symbols X, Y)\n");
    for (int64_t r = 0; r < n; r++) {
        st = sb_task_sample(task, split, idx[r], &s, err);
        if (st != SB_OK)
            break;
        fprintf(f, "sample %lld (%s, sequence %llu): %d elements, %d frames, %d of them gap\n",
                (long long)idx[r], split == SB_SPLIT_TRAIN ? "train" : "test",
                (unsigned long long)sb_task_sequence_index(task, split, idx[r]), s.n_elements,
                s.n_frames, s.n_frames - s.n_elements);
        int col = 0, next_class = 0;
        char tok[64];
        for (int k = 0; k < s.n_elements; k++) {
            show_token(f, g->state_name[s.state[k]], &col);
            if (s.gap[k] == 0)
                continue;
            if (!task->cfg.grammar_gap) {
                snprintf(tok, sizeof tok, "_%d", s.gap[k]);
            } else {
                int len = 0;
                tok[len++] = '!';
                for (int r2 = 0; r2 < s.gap[k]; r2++) {
                    char letter = sb_class_letter(s.gap_class[next_class++]);
                    if (len < (int)sizeof tok - 4)
                        tok[len++] = letter;
                    else if (len == (int)sizeof tok - 4)
                        tok[len++] = '+';
                }
                tok[len] = '\0';
            }
            show_token(f, tok, &col);
        }
        fputc('\n', f);
    }
    sb_sample_free(&s);
    return st;
}
