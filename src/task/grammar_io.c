/* grammar_io.c - writing a grammar as JSON, Graphviz and the reference's text format. */
#include <string.h>

#include "core/json_writer.h"
#include "task/grammar.h"

/* The state ids map of the reference: per letter in class order, "B" and its alias "B0"
 * for a plain letter, "C0".."C{d-1}" for an ambiguous one; '#' last. */
static void grammar_json_state_ids(const sb_grammar *g, sb_json *j)
{
    sb_json_object_begin(j);
    for (int c = 1; c < g->n_classes; c++) {
        for (int s = 0; s < g->n_states; s++) {
            if (g->state_class[s] != c)
                continue;
            const char *name = g->state_name[s];
            sb_json_key(j, name);
            sb_json_int(j, g->state_id[s]);
            if (name[1] == '\0') {
                char alias[3] = {name[0], '0', '\0'};
                sb_json_key(j, alias);
                sb_json_int(j, g->state_id[s]);
            }
        }
    }
    sb_json_key(j, "#");
    sb_json_int(j, 0);
    sb_json_object_end(j);
}

void sb_grammar_write_json(const sb_grammar *g, FILE *f)
{
    sb_json j;
    sb_json_init(&j, f, 0);
    const sb_grammar_config *c = &g->config;
    sb_json_object_begin(&j);
    sb_json_key(&j, "config");
    sb_json_object_begin(&j);
    sb_json_key(&j, "alphabet_size");
    sb_json_int(&j, c->vocab);
    sb_json_key(&j, "ambiguities");
    sb_json_int(&j, c->amb);
    sb_json_key(&j, "ambiguity_depth");
    sb_json_int(&j, c->amb_depth);
    sb_json_key(&j, "grammar_scale");
    sb_json_bool(&j, c->grammar_scale);
    sb_json_key(&j, "initial_states");
    sb_json_int(&j, SB_START_STATES);
    sb_json_key(&j, "transition_density_param");
    sb_json_double(&j, c->transition_density);
    sb_json_key(&j, "transition_density_effective");
    sb_json_double(&j, c->transition_density / (double)c->amb_depth);
    sb_json_key(&j, "seed");
    sb_json_uint(&j, c->seed);
    sb_json_object_end(&j);

    sb_json_key(&j, "python_seed");
    sb_json_int(&j, g->python_seed);
    sb_json_key(&j, "grammar_attempts");
    sb_json_int(&j, g->attempts);
    sb_json_key(&j, "num_states");
    sb_json_int(&j, g->n_states);
    sb_json_key(&j, "states");
    sb_json_array_begin(&j);
    for (int s = 0; s < g->n_states; s++)
        sb_json_string(&j, g->state_name[s]);
    sb_json_array_end(&j);
    sb_json_key(&j, "start_states");
    sb_json_array_begin(&j);
    for (int k = 0; k < SB_START_STATES; k++)
        sb_json_string(&j, g->state_name[g->start_states[k]]);
    sb_json_array_end(&j);
    sb_json_key(&j, "num_transitions");
    sb_json_int(&j, g->n_transitions);
    sb_json_key(&j, "successors");
    sb_json_array_begin(&j);
    for (int s = 0; s < g->n_states; s++) {
        sb_json_array_begin(&j);
        for (int e = g->succ_offset[s]; e < g->succ_offset[s + 1]; e++)
            sb_json_int(&j, g->succ[e]);
        sb_json_array_end(&j);
    }
    sb_json_array_end(&j);
    sb_json_key(&j, "out_prob");
    sb_json_array_begin(&j);
    for (int s = 0; s < g->n_states; s++)
        sb_json_double(&j, g->out_prob[s]);
    sb_json_array_end(&j);
    sb_json_key(&j, "topological_entropy");
    sb_json_double(&j, g->topological_entropy);
    sb_json_key(&j, "d_output");
    sb_json_int(&j, g->d_output);
    sb_json_key(&j, "state_ids");
    grammar_json_state_ids(g, &j);
    sb_json_object_end(&j);
    fputc('\n', f);
}

void sb_grammar_write_transitions(const sb_grammar *g, FILE *f)
{
    char prob[40];
    for (int s = 0; s < g->n_states; s++) {
        sb_format_double(prob, sizeof prob, g->out_prob[s]);
        for (int e = g->succ_offset[s]; e < g->succ_offset[s + 1]; e++)
            fprintf(f, "%s, %s, %s\n", g->state_name[s], g->state_name[g->succ[e]], prob);
    }
}

void sb_grammar_write_dot(const sb_grammar *g, FILE *f)
{
    fprintf(f, "digraph grammar {\n");
    fprintf(f,
            "  // vocab %d, amb %d, amb_depth %d, seed %llu: %d states, %d transitions, "
            "TE %.6f\n",
            g->config.vocab, g->config.amb, g->config.amb_depth, (unsigned long long)g->config.seed,
            g->n_states, g->n_transitions, g->topological_entropy);
    fprintf(f, "  rankdir=LR;\n  node [shape=circle];\n");
    fprintf(f, "  \"#\" [shape=doublecircle];\n");
    for (int k = 0; k < SB_START_STATES; k++) {
        fprintf(f, "  start%d [shape=point];\n", k);
        fprintf(f, "  start%d -> \"%s\";\n", k, g->state_name[g->start_states[k]]);
    }
    char prob[40];
    for (int s = 0; s < g->n_states; s++) {
        snprintf(prob, sizeof prob, "%.3g", g->out_prob[s]);
        for (int e = g->succ_offset[s]; e < g->succ_offset[s + 1]; e++)
            fprintf(f, "  \"%s\" -> \"%s\" [label=\"%s\"];\n", g->state_name[s],
                    g->state_name[g->succ[e]], prob);
    }
    fprintf(f, "}\n");
}
