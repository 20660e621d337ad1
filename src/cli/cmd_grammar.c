/* cmd_grammar.c - `selectivbench grammar`: build a grammar and describe it. */
#include <errno.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "task/grammar.h"
#include "core/timer.h"
#include "cli/task_options.h"

/* Prints the summary block; lists the transitions of small grammars (or with --list). */
static void grammar_print_summary(const sb_grammar *g, double seconds, int list)
{
    const sb_grammar_config *c = &g->config;
    printf("grammar: vocab %d, amb %d, amb_depth %d, seed %llu%s\n", c->vocab, c->amb,
           c->amb_depth, (unsigned long long)c->seed,
           c->grammar_scale ? " (grammar_scale)" : "");
    printf("  states       %d (classifier outputs d_output = %d)\n", g->n_states, g->d_output);
    printf("  transitions  %d (mean out-degree %.2f)\n", g->n_transitions,
           (double)g->n_transitions / (double)(g->n_states - 1));
    printf("  start states");
    for (int k = 0; k < SB_START_STATES; k++)
        printf(" %s", g->state_name[g->start_states[k]]);
    printf("\n");
    printf("  TE           %.12f (ln of the Perron root of the corrected table)\n",
           g->topological_entropy);
    double te = 0.0, t0 = sb_time_now();
    sb_error err = {0};
    (void)sb_grammar_entropy(g, &te, &err); /* again, to time the TE alone */
    double te_seconds = sb_time_now() - t0;
    printf("  generated    in %.1f ms, of which TE %.1f ms (python seed %d, %d attempt%s)\n",
           seconds * 1e3, te_seconds * 1e3, g->python_seed, g->attempts,
           g->attempts == 1 ? "" : "s");
    if (!list)
        return;
    printf("transitions (state -> successors, each with probability 1/k):\n");
    for (int s = 0; s < g->n_states; s++) {
        int k = g->succ_offset[s + 1] - g->succ_offset[s];
        printf("  %-4s ->", g->state_name[s]);
        for (int e = g->succ_offset[s]; e < g->succ_offset[s + 1]; e++)
            printf(" %s", g->state_name[g->succ[e]]);
        if (k > 0)
            printf("   (p = %.6g)", g->out_prob[s]);
        else
            printf(" (end)");
        printf("\n");
    }
}

int sb_cmd_grammar(int argc, char **argv)
{
    sb_task_flags tf;
    sb_option opts[SB_TASK_MAX_OPTIONS + 8];
    int n = 0;
    sb_task_options_add(&tf, opts, &n, 1);
    int json = 0, list = 0, threads = 0;
    const char *dot = NULL;
    opts[n++] = (sb_option){"json", SB_OPT_SWITCH, &json, 0, 1, NULL, NULL,
                            "print the grammar as JSON (the reference vector schema)", 0};
    opts[n++] = (sb_option){"dot", SB_OPT_STRING, &dot, 0, 0, NULL, "FILE",
                            "write a Graphviz digraph to FILE ('-' for stdout)", 0};
    opts[n++] = (sb_option){"list", SB_OPT_SWITCH, &list, 0, 1, NULL, NULL,
                            "list every state's successors (default for <= 40 states)", 0};
    opts[n++] = (sb_option){"threads", SB_OPT_INT, &threads, 0, 1024, NULL, NULL,
                            "threads (default: all cores)", 0};
    int rc = sb_cli_parse("grammar", "[flags]", opts, n, argc, argv, NULL, 0, NULL);
    if (rc >= 0)
        return rc;
    sb_cli_threads(threads);

    sb_error err = {0};
    if (sb_task_options_finish(&tf, &err) != SB_OK)
        return sb_cli_fail("grammar", &err);
    sb_grammar *g = NULL;
    double t0 = sb_time_now();
    if (sb_grammar_generate(&tf.cfg.grammar, &g, &err) != SB_OK)
        return sb_cli_fail("grammar", &err);
    double seconds = sb_time_now() - t0;

    if (dot != NULL) {
        FILE *f = strcmp(dot, "-") == 0 ? stdout : fopen(dot, "w");
        if (f == NULL) {
            sb_error_set(&err, SB_ERR_IO, "cannot write --dot file '%s': %s", dot,
                         strerror(errno));
            sb_grammar_free(g);
            return sb_cli_fail("grammar", &err);
        }
        sb_grammar_write_dot(g, f);
        if (f != stdout && fclose(f) != 0) {
            sb_error_set(&err, SB_ERR_IO, "writing --dot file '%s' failed", dot);
            sb_grammar_free(g);
            return sb_cli_fail("grammar", &err);
        }
    }
    if (json)
        sb_grammar_write_json(g, stdout);
    else if (dot == NULL || strcmp(dot, "-") != 0)
        grammar_print_summary(g, seconds, list || g->n_states <= 40);
    sb_grammar_free(g);
    return 0;
}
