/* grammar_api.c - the public API's grammars (selectivbench.h): wrappers over task/grammar.h.
 * The public sb_grammar is the library's own (task/grammar.h); sb_grammar_free,
 * sb_grammar_entropy and sb_class_letter are the library's functions themselves. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "task/grammar.h"

sb_status sb_grammar_from_config(const sb_config *cfg, sb_grammar **out, sb_error *err)
{
    SB_API_REQUIRE(out, err);
    *out = NULL;
    SB_API_REQUIRE(cfg, err);
    return sb_grammar_generate(&cfg->run.task.grammar, out, err);
}

void sb_grammar_get_facts(const sb_grammar *g, sb_grammar_facts *facts)
{
    SB_ASSERT(g != NULL && facts != NULL);
    memset(facts, 0, sizeof *facts);
    facts->vocab = g->config.vocab;
    facts->amb = g->config.amb;
    facts->amb_depth = g->config.amb_depth;
    facts->seed = g->config.seed;
    facts->grammar_scale = g->config.grammar_scale;
    facts->letters = g->n_letters;
    facts->states = g->n_states;
    facts->outputs = g->d_output;
    facts->transitions = g->n_transitions;
    for (int k = 0; k < SB_GRAMMAR_START_STATES; k++)
        facts->start_states[k] = g->start_states[k];
    facts->topological_entropy = g->topological_entropy;
    facts->python_seed = g->python_seed;
    facts->attempts = g->attempts;
}

/* A state index the caller gives must be one of g's states. */
static void check_state(const sb_grammar *g, int s)
{
    SB_ASSERT(g != NULL && s >= 0 && s < g->n_states);
}

const char *sb_grammar_state_name(const sb_grammar *g, int s)
{
    check_state(g, s);
    return g->state_name[s];
}

int sb_grammar_state_class(const sb_grammar *g, int s)
{
    check_state(g, s);
    return g->state_class[s];
}

int sb_grammar_successor_count(const sb_grammar *g, int s)
{
    check_state(g, s);
    return g->succ_offset[s + 1] - g->succ_offset[s];
}

int sb_grammar_successor(const sb_grammar *g, int s, int k)
{
    SB_ASSERT(k >= 0 && k < sb_grammar_successor_count(g, s));
    return g->succ[g->succ_offset[s] + k];
}

double sb_grammar_transition_prob(const sb_grammar *g, int s)
{
    check_state(g, s);
    return g->out_prob[s];
}

/* The writers write into f; its error flag tells whether every write reached it. */
static sb_status check_stream(FILE *f, const char *what, sb_error *err)
{
    if (ferror(f))
        return sb_error_set(err, SB_ERR_IO, "writing the grammar's %s failed", what);
    return SB_OK;
}

sb_status sb_grammar_fprint_json(const sb_grammar *g, FILE *f, sb_error *err)
{
    SB_API_REQUIRE(g, err);
    SB_API_REQUIRE(f, err);
    sb_grammar_write_json(g, f);
    return check_stream(f, "JSON", err);
}

sb_status sb_grammar_to_json(const sb_grammar *g, char **json, sb_error *err)
{
    SB_API_REQUIRE(json, err);
    *json = NULL;
    SB_API_REQUIRE(g, err);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for the grammar's JSON");
    sb_grammar_write_json(g, f);
    int failed = ferror(f);
    if (fclose(f) != 0 || failed || text == NULL) {
        free(text);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for the grammar's JSON");
    }
    while (len > 0 && text[len - 1] == '\n')
        text[--len] = '\0';
    *json = text; /* malloc'd, as sb_string_free expects */
    return SB_OK;
}

sb_status sb_grammar_fprint_dot(const sb_grammar *g, FILE *f, sb_error *err)
{
    SB_API_REQUIRE(g, err);
    SB_API_REQUIRE(f, err);
    sb_grammar_write_dot(g, f);
    return check_stream(f, "digraph", err);
}
