/* cmd_grammar.c - `selectivbench grammar`: build a grammar and describe it. */
#include <errno.h>
#include <string.h>

#include "selectivbench/selectivbench.h"

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/run_options.h"
#include "cli/task_options.h"

/* Prints the summary block; lists the transitions of small grammars (or with --list). */
static void grammar_print_summary(const sb_grammar *g, double seconds, int list)
{
    sb_grammar_facts f;
    sb_grammar_get_facts(g, &f);
    printf("grammar: vocab %d, amb %d, amb_depth %d, seed %llu%s\n", f.vocab, f.amb, f.amb_depth,
           (unsigned long long)f.seed, f.grammar_scale ? " (grammar_scale)" : "");
    printf("  states       %d (classifier outputs d_output = %d)\n", f.states, f.outputs);
    printf("  transitions  %d (mean out-degree %.2f)\n", f.transitions,
           (double)f.transitions / (double)(f.states - 1));
    printf("  start states");
    for (int k = 0; k < SB_GRAMMAR_START_STATES; k++)
        printf(" %s", sb_grammar_state_name(g, f.start_states[k]));
    printf("\n");
    printf("  TE           %.12f (ln of the Perron root of the corrected table)\n",
           f.topological_entropy);
    double te = 0.0, t0 = sb_clock_seconds();
    sb_error err = {0};
    (void)sb_grammar_entropy(g, &te, &err); /* again, to time the TE alone */
    double te_seconds = sb_clock_seconds() - t0;
    printf("  generated    in %.1f ms, of which TE %.1f ms (python seed %d, %d attempt%s)\n",
           seconds * 1e3, te_seconds * 1e3, f.python_seed, f.attempts, f.attempts == 1 ? "" : "s");
    if (!list)
        return;
    printf("transitions (state -> successors, each with probability 1/k):\n");
    for (int s = 0; s < f.states; s++) {
        int k = sb_grammar_successor_count(g, s);
        printf("  %-4s ->", sb_grammar_state_name(g, s));
        for (int e = 0; e < k; e++)
            printf(" %s", sb_grammar_state_name(g, sb_grammar_successor(g, s, e)));
        if (k > 0)
            printf("   (p = %.6g)", sb_grammar_transition_prob(g, s));
        else
            printf(" (end)");
        printf("\n");
    }
}

/* Writes the --dot file ('-': stdout). */
static sb_status write_dot(const sb_grammar *g, const char *dot, sb_error *err)
{
    FILE *f = strcmp(dot, "-") == 0 ? stdout : fopen(dot, "w");
    if (f == NULL)
        return sb_error_set(err, SB_ERR_IO, "cannot write --dot file '%s': %s", dot,
                            strerror(errno));
    sb_status st = sb_grammar_fprint_dot(g, f, err);
    if (f != stdout && fclose(f) != 0 && st == SB_OK)
        st = sb_error_set(err, SB_ERR_IO, "writing --dot file '%s' failed", dot);
    return st;
}

static int grammar_with_flags(sb_task_flags *tf, int argc, char **argv)
{
    sb_option opts[SB_TASK_MAX_OPTIONS + 8];
    int n = 0;
    sb_error err = {0};
    if (sb_task_options_add(tf, opts, &n, 1, &err) != SB_OK)
        return sb_cli_fail("grammar", &err);
    int json = 0, list = 0;
    const char *dot = NULL;
    opts[n++] = (sb_option){"json",
                            SB_OPT_SWITCH,
                            &json,
                            NULL,
                            "print the grammar as JSON (the reference vector schema)",
                            0};
    opts[n++] = (sb_option){"dot",
                            SB_OPT_STRING,
                            &dot,
                            "FILE",
                            "write a Graphviz digraph to FILE ('-' for stdout; default: none)",
                            0};
    opts[n++] = (sb_option){"list",
                            SB_OPT_SWITCH,
                            &list,
                            NULL,
                            "list every state's successors (default for <= 40 states)",
                            0};
    sb_options_add_key(tf->config, "threads", NULL, opts, &n);
    int rc = sb_cli_parse("grammar", "[flags]", opts, n, argc, argv, NULL, 0, NULL);
    if (rc >= 0)
        return rc;
    sb_cli_threads(sb_run_flag(tf->config, "threads"));

    sb_grammar *g = NULL;
    double t0 = sb_clock_seconds();
    sb_status st = sb_grammar_from_config(tf->config, &g, &err);
    double seconds = sb_clock_seconds() - t0;
    if (st == SB_OK && dot != NULL)
        st = write_dot(g, dot, &err);
    if (st == SB_OK) {
        sb_grammar_facts f;
        sb_grammar_get_facts(g, &f);
        if (json)
            st = sb_grammar_fprint_json(g, stdout, &err);
        else if (strcmp(dot != NULL ? dot : "", "-") != 0)
            grammar_print_summary(g, seconds, list || f.states <= 40);
    }
    sb_grammar_free(g);
    if (st != SB_OK)
        return sb_cli_fail("grammar", &err);
    return 0;
}

int sb_cmd_grammar(int argc, char **argv)
{
    sb_task_flags tf = {0};
    int rc = grammar_with_flags(&tf, argc, argv);
    sb_task_flags_free(&tf);
    return rc;
}
