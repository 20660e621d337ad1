/* data_show.c - human-readable views of a task and its samples (see data_show.h). */
#include "cli/data_show.h"

#include <string.h>

#define SHOW_WIDTH 96

void sb_data_print_task(const sb_task *task, FILE *f)
{
    sb_grammar_facts g;
    sb_grammar_get_facts(sb_task_grammar(task), &g);
    sb_task_facts t;
    sb_task_get_facts(task, &t);
    sb_task_settings c;
    sb_task_get_settings(task, &c);
    fprintf(f,
            "task: vocab %d, amb %d, amb_depth %d, seed %llu -> %d states, %d transitions, "
            "TE %.4f\n",
            g.vocab, g.amb, g.amb_depth, (unsigned long long)g.seed, g.states, g.transitions,
            g.topological_entropy);
    const char *content = c.distractor_gaps ? "non-grammatical symbols" : "zero frames";
    fprintf(f, "  train: %lld samples of %d elements; gaps of %s, %s(%g, %g) s",
            (long long)t.train_size, t.train_elements, content,
            c.lognormal_gaps ? "lognormal" : "U", c.train_gap_min, c.train_gap_max);
    if (c.gap_start > 0 || c.gap_prob < 1.0)
        fprintf(f, " with probability %g from element %d", c.gap_prob, c.gap_start);
    if (c.train_noise > 0.0)
        fprintf(f, ", noise U[0, %g)", c.train_noise);
    fprintf(f, "\n  test:  %lld samples of %d elements; gaps of %g s; protocol %s\n",
            (long long)t.test_size, t.test_elements, c.test_gap_s,
            c.clean_protocol ? "clean (disjoint test sequences)"
                             : "reference (test = first training sequences)");
    if (c.walk_len > 0)
        fprintf(f,
                "  interleaved walks: one per %d elements (train %d, test %d walks a sample); "
                "each element shows its letter and its walk's tag, scored on its walk's state\n",
                c.walk_len, c.train_walks, c.test_walks);
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

sb_status sb_data_show(const sb_task *task, sb_split split, const int64_t *idx, int64_t n, FILE *f,
                       sb_error *err)
{
    sb_draw *d = NULL;
    sb_status st = sb_draw_create(task, &d, err);
    if (st != SB_OK)
        return st;
    const sb_grammar *g = sb_task_grammar(task);
    sb_task_settings settings;
    sb_task_get_settings(task, &settings);
    fprintf(f,
            "  (each state is one symbol frame showing its letter; _N: N zero gap frames; "
            "!XY: distractor symbols X, Y%s)\n",
            settings.walk_len > 0 ? "; @j: the element belongs to walk j" : "");
    for (int64_t r = 0; r < n; r++) {
        st = sb_draw_read(d, split, idx[r], err);
        if (st != SB_OK)
            break;
        const int elements = sb_draw_elements(d), frames = sb_draw_frames(d);
        fprintf(f, "sample %lld (%s, sequence %llu): %d elements, %d frames, %d of them gap\n",
                (long long)idx[r], sb_split_name(split),
                (unsigned long long)sb_draw_sequence_index(d), elements, frames, frames - elements);
        int col = 0, next_class = 0;
        char tok[64];
        for (int k = 0; k < elements; k++) {
            if (settings.walk_len > 0) {
                snprintf(tok, sizeof tok, "%s@%d", sb_grammar_state_name(g, sb_draw_state(d, k)),
                         sb_draw_walk(d, k));
                show_token(f, tok, &col);
            } else {
                show_token(f, sb_grammar_state_name(g, sb_draw_state(d, k)), &col);
            }
            const int gap = sb_draw_gap(d, k);
            if (gap == 0)
                continue;
            if (!settings.distractor_gaps) {
                snprintf(tok, sizeof tok, "_%d", gap);
            } else {
                int len = 0;
                tok[len++] = '!';
                for (int r2 = 0; r2 < gap; r2++) {
                    char letter = sb_class_letter(sb_draw_distractor(d, next_class++));
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
    sb_draw_free(d);
    return st;
}
