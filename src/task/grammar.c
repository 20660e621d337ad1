/*
 * grammar.c - generation of the random artificial grammar (docs/task.md, "Grammar") and
 * the tables derived from it (section 4: state ids, forbidden classes).
 *
 * The draw order is the reference's, call for call: one numpy Generator for every grammar
 * draw and CPython's MT19937 for the choice of ambiguous letters.
 */
#include "task/grammar.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "config/run_config.h"
#include "core/alloc.h"
#include "core/rng.h"

sb_grammar_config sb_grammar_config_default(void)
{
    return sb_run_config_default().task.grammar; /* the key table's defaults */
}

char sb_class_letter(int c)
{
    if (c <= 0)
        return '#';
    if (c <= 26)
        return (char)('A' + c - 1);
    return (char)('a' + c - 27);
}

/* Applies grammar_scale (see grammar.h). */
sb_grammar_config sb_grammar_config_effective(const sb_grammar_config *cfg)
{
    sb_grammar_config eff = *cfg;
    if (eff.grammar_scale) {
        eff.vocab = eff.amb + 1;
        eff.amb_depth = eff.amb;
    }
    return eff;
}

/* The chance that one attempt of the generator gives every state but '#' at least one
 * successor, for an effective configuration. Each (state, symbol) edge exists on its own
 * with probability min(1, states of the symbol x density / depth): a plain letter or '#'
 * (one state) density / depth, an ambiguous letter (depth states) the density. A state
 * without successors never reaches '#', so this bounds the chance that an attempt is valid
 * from above: when even it makes SB_GRAMMAR_MAX_ATTEMPTS attempts hopeless, no attempt
 * loop need run. The reference's rule (grammar_attempt_valid) is unchanged by this. */
static double grammar_no_dead_end_chance(int n_letters, int amb, int depth, double density)
{
    double td = density / (double)depth;
    double p_plain = td < 1.0 ? td : 1.0, p_amb = depth * td < 1.0 ? depth * td : 1.0;
    /* no successor: no edge to any of the n_letters - amb plain letters, '#', or the amb
     * ambiguous letters */
    double log_none = (double)(n_letters - amb + 1) * log1p(-p_plain);
    if (amb > 0)
        log_none += (double)amb * log1p(-p_amb);
    double p_none = exp(log_none);
    double sources = (double)(n_letters - amb) + (double)amb * depth;
    return p_none >= 1.0 ? 0.0 : exp(sources * log1p(-p_none));
}

/* An attempt more likely than this to have no dead end gives a grammar in a few thousand
 * attempts; the suggestions below aim for it. */
#define GRAMMAR_LIKELY_CHANCE 1e-3

/* The configuration can be generated: refuses, in no time, a grammar that the attempt loop
 * would look for in vain (for a minute, SB_GRAMMAR_MAX_ATTEMPTS times), e.g. --amb 4 with
 * the default --amb_depth 40: its 36 plain letters each get an edge with chance 0.4/40, so
 * a state has no successor with chance 0.09, and one of its 196 states almost surely has
 * none. The message names the flags that fix it, with values that work. */
static sb_status grammar_check_feasible(const sb_grammar_config *cfg, const char *scaled,
                                        sb_error *err)
{
    int n_letters = cfg->vocab - 1, amb = cfg->amb, depth = cfg->amb_depth;
    double density = cfg->transition_density;
    double chance = grammar_no_dead_end_chance(n_letters, amb, depth, density);
    /* below 1% within every attempt allowed, counting only the dead ends */
    if (chance * SB_GRAMMAR_MAX_ATTEMPTS >= 0.01)
        return SB_OK;
    int depth_ok = 0, amb_ok = 0;
    for (int d = depth - 1; d >= 1 && depth_ok == 0; d--)
        if (grammar_no_dead_end_chance(n_letters, amb, d, density) >= GRAMMAR_LIKELY_CHANCE)
            depth_ok = d;
    for (int a = amb + 1; a <= n_letters && amb_ok == 0; a++)
        if (grammar_no_dead_end_chance(n_letters, a, depth, density) >= GRAMMAR_LIKELY_CHANCE)
            amb_ok = a;
    char fix[160] = "raise --transition_density";
    if (depth_ok > 0 && amb_ok > 0)
        snprintf(fix, sizeof fix, "use --amb_depth %d or less, or --amb %d or more", depth_ok,
                 amb_ok);
    else if (depth_ok > 0)
        snprintf(fix, sizeof fix, "use --amb_depth %d or less", depth_ok);
    else if (amb_ok > 0)
        snprintf(fix, sizeof fix, "use --amb %d or more", amb_ok);
    return sb_error_set(err, SB_ERR_INVALID,
                        "no grammar of --vocab %d --amb %d --amb_depth %d%s can be generated "
                        "in practice: with transition density %g / %d, one of its %d states "
                        "has no successor in all but %.1e of the attempts; %s",
                        cfg->vocab, amb, depth, scaled, density, depth,
                        n_letters - amb + amb * depth, chance, fix);
}

sb_status sb_grammar_config_check(const sb_grammar_config *cfg_in, sb_error *err)
{
    sb_grammar_config cfg = sb_grammar_config_effective(cfg_in);
    const char *scaled = cfg_in->grammar_scale ? " (set by --grammar_scale from --amb)" : "";
    if (cfg.amb < 0)
        return sb_error_set(err, SB_ERR_INVALID, "--amb %d is negative; use 0 or more", cfg.amb);
    if (cfg.vocab < 2)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--vocab %d%s is too small: it counts the letters plus the end "
                            "symbol '#'; use at least 2",
                            cfg.vocab, scaled);
    if (cfg.vocab - 1 > SB_MAX_LETTERS)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--vocab %d%s needs %d letters but the alphabet A-Z a-z has %d; "
                            "use --vocab %d or less",
                            cfg.vocab, scaled, cfg.vocab - 1, SB_MAX_LETTERS, SB_MAX_LETTERS + 1);
    if (cfg.amb > cfg.vocab - 1)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--amb %d asks for more ambiguous letters than the %d letters of "
                            "--vocab %d; use --amb %d or less",
                            cfg.amb, cfg.vocab - 1, cfg.vocab, cfg.vocab - 1);
    if (cfg.amb_depth < 1) {
        if (cfg.amb > 0)
            return sb_error_set(err, SB_ERR_INVALID,
                                "--amb_depth %d%s with --amb %d: each ambiguous letter needs at "
                                "least one state; use --amb_depth 1 or more",
                                cfg.amb_depth, scaled, cfg.amb);
        return sb_error_set(err, SB_ERR_INVALID,
                            "--amb_depth %d%s: the transition density is divided by the depth; "
                            "use --amb_depth 1 or more",
                            cfg.amb_depth, scaled);
    }
    if (cfg.amb_depth > SB_MAX_AMB_DEPTH)
        return sb_error_set(err, SB_ERR_INVALID, "--amb_depth %d is above the supported %d",
                            cfg.amb_depth, SB_MAX_AMB_DEPTH);
    const sb_config_key *density = sb_config_find("transition_density"); /* its range */
    if (!(cfg.transition_density >= density->min && cfg.transition_density <= density->max))
        return sb_error_set(err, SB_ERR_INVALID, "--transition_density %g is out of range [%g, %g]",
                            cfg.transition_density, density->min, density->max);
    long n_states = (long)(cfg.vocab - 1) - cfg.amb + (long)cfg.amb * cfg.amb_depth + 1;
    if (n_states <= SB_START_STATES)
        return sb_error_set(err, SB_ERR_INVALID,
                            "the grammar of --vocab %d --amb %d --amb_depth %d has %ld states; "
                            "it needs more than %d so that '#' is not one of the %d start "
                            "states: raise --vocab or --amb_depth",
                            cfg.vocab, cfg.amb, cfg.amb_depth, n_states, SB_START_STATES,
                            SB_START_STATES);
    return grammar_check_feasible(&cfg, scaled, err);
}

void sb_grammar_free(sb_grammar *g)
{
    if (g == NULL)
        return;
    sb_free(g->state_name);
    sb_free(g->state_class);
    sb_free(g->state_id);
    sb_free(g->succ_offset);
    sb_free(g->succ);
    sb_free(g->out_prob);
    sb_free(g->forbidden_classes);
    sb_free(g);
}

/* Scratch space for the attempt loop, allocated once. */
typedef struct grammar_work {
    int *rep_letters;    /* [amb] sampled ambiguous letters (0-based letter index) */
    int *state_class;    /* [n] class of each state */
    int *state_index;    /* [n] 0 for plain letters, i for the i-th copy */
    int *class_first;    /* [n_classes] first state index of each class */
    int *class_count;    /* [n_classes] number of states of each class */
    int *perm;           /* [max(d, 1)] permutation buffer */
    int *edge_count;     /* [n] */
    int *edge_target;    /* [n * n_classes] at most one edge per (source, symbol) */
    int *rev_offset;     /* [n + 1] reverse adjacency for the validity check */
    int *rev_source;     /* [n * n_classes] */
    int *queue;          /* [n] */
    unsigned char *seen; /* [n] */
} grammar_work;

static void grammar_work_free(grammar_work *w)
{
    sb_free(w->rep_letters);
    sb_free(w->state_class);
    sb_free(w->state_index);
    sb_free(w->class_first);
    sb_free(w->class_count);
    sb_free(w->perm);
    sb_free(w->edge_count);
    sb_free(w->edge_target);
    sb_free(w->rev_offset);
    sb_free(w->rev_source);
    sb_free(w->queue);
    sb_free(w->seen);
}

/* Builds the state list of one attempt: plain letters in alphabet order, then each
 * ambiguous letter's copies in the order the letters were sampled, then '#'. */
static void grammar_build_states(grammar_work *w, int n_letters, int amb, int depth)
{
    unsigned char is_amb[SB_MAX_LETTERS] = {0};
    for (int r = 0; r < amb; r++)
        is_amb[w->rep_letters[r]] = 1;
    int s = 0;
    for (int l = 0; l < n_letters; l++) {
        if (!is_amb[l]) {
            w->state_class[s] = l + 1;
            w->state_index[s] = 0;
            w->class_first[l + 1] = s;
            w->class_count[l + 1] = 1;
            s++;
        }
    }
    for (int r = 0; r < amb; r++) {
        int c = w->rep_letters[r] + 1;
        w->class_first[c] = s;
        w->class_count[c] = depth;
        for (int i = 0; i < depth; i++) {
            w->state_class[s] = c;
            w->state_index[s] = i;
            s++;
        }
    }
    w->state_class[s] = 0;
    w->state_index[s] = 0;
    w->class_first[0] = s;
    w->class_count[0] = 1;
}

/* Draws the transitions of one attempt: for each source, for each symbol (letters in
 * alphabet order, '#' last), a permutation of the symbol's states whose first element is
 * the candidate target, and one uniform deciding whether the edge exists. */
static void grammar_draw_transitions(grammar_work *w, sb_pcg64 *rng, int n, int n_classes,
                                     double td)
{
    for (int i = 0; i < n; i++) {
        int count = 0;
        for (int a = 0; a < n_classes; a++) {
            int c = (a + 1) % n_classes; /* letters 1..L first, then '#' (class 0) */
            int len = w->class_count[c];
            sb_pcg64_permutation(rng, len, w->perm);
            int target = w->class_first[c] + w->perm[0];
            double u = sb_pcg64_random(rng);
            if (u < (double)len * td)
                w->edge_target[(size_t)i * (size_t)n_classes + (size_t)count++] = target;
        }
        w->edge_count[i] = count;
    }
    w->edge_count[n - 1] = 0; /* the end state has no successors */
}

/* The reference accepts an attempt iff every state has a path to '#' and '#' is not a
 * start state. Reverse breadth-first search from '#'. */
static int grammar_attempt_valid(grammar_work *w, int n, int n_classes, const int *starts)
{
    int end = n - 1;
    for (int k = 0; k < SB_START_STATES; k++)
        if (starts[k] == end)
            return 0;
    memset(w->rev_offset, 0, (size_t)(n + 1) * sizeof *w->rev_offset);
    for (int i = 0; i < n; i++)
        for (int e = 0; e < w->edge_count[i]; e++)
            w->rev_offset[w->edge_target[(size_t)i * (size_t)n_classes + (size_t)e] + 1]++;
    for (int i = 0; i < n; i++)
        w->rev_offset[i + 1] += w->rev_offset[i];
    /* fill, using queue[] as the running insert position */
    for (int i = 0; i < n; i++)
        w->queue[i] = w->rev_offset[i];
    for (int i = 0; i < n; i++)
        for (int e = 0; e < w->edge_count[i]; e++) {
            int t = w->edge_target[(size_t)i * (size_t)n_classes + (size_t)e];
            w->rev_source[w->queue[t]++] = i;
        }
    memset(w->seen, 0, (size_t)n);
    int head = 0, tail = 0;
    w->queue[tail++] = end;
    w->seen[end] = 1;
    while (head < tail) {
        int t = w->queue[head++];
        for (int r = w->rev_offset[t]; r < w->rev_offset[t + 1]; r++) {
            int s = w->rev_source[r];
            if (!w->seen[s]) {
                w->seen[s] = 1;
                w->queue[tail++] = s;
            }
        }
    }
    return tail == n;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Copies the accepted attempt into the grammar and derives its tables. */
static sb_status grammar_finish(sb_grammar *g, grammar_work *w, const int *starts, sb_error *err)
{
    int n = g->n_states, n_classes = g->n_classes;
    g->state_name = sb_calloc((size_t)n, sizeof *g->state_name);
    g->state_class = sb_calloc((size_t)n, sizeof *g->state_class);
    g->state_id = sb_calloc((size_t)n, sizeof *g->state_id);
    g->succ_offset = sb_calloc((size_t)n + 1, sizeof *g->succ_offset);
    g->out_prob = sb_calloc((size_t)n, sizeof *g->out_prob);
    g->forbidden_classes = sb_calloc((size_t)n, sizeof *g->forbidden_classes);
    int n_edges = 0;
    for (int i = 0; i < n; i++)
        n_edges += w->edge_count[i];
    g->succ = sb_calloc((size_t)(n_edges > 0 ? n_edges : 1), sizeof *g->succ);
    if (!g->state_name || !g->state_class || !g->state_id || !g->succ_offset || !g->out_prob ||
        !g->forbidden_classes || !g->succ)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory storing a grammar of %d states", n);

    /* names, classes and classifier ids: ids run over the letters in class order, a
     * plain letter taking one id and an ambiguous letter one id per copy */
    int next_id = 1;
    int class_base_id[SB_MAX_CLASSES] = {0};
    for (int c = 1; c < n_classes; c++) {
        class_base_id[c] = next_id;
        next_id += w->class_count[c];
    }
    for (int s = 0; s < n; s++) {
        int c = w->state_class[s];
        g->state_class[s] = (uint8_t)c;
        if (c == 0) {
            snprintf(g->state_name[s], SB_STATE_NAME_MAX, "#");
            g->state_id[s] = 0;
        } else if (s < g->n_letters - g->config.amb) { /* plain letters come first */
            snprintf(g->state_name[s], SB_STATE_NAME_MAX, "%c", sb_class_letter(c));
            g->state_id[s] = (uint16_t)class_base_id[c];
        } else {
            snprintf(g->state_name[s], SB_STATE_NAME_MAX, "%c%d", sb_class_letter(c),
                     w->state_index[s]);
            g->state_id[s] = (uint16_t)(class_base_id[c] + w->state_index[s]);
        }
    }
    g->d_output = n;

    /* transition list: row-major order of the source x target table */
    int pos = 0;
    for (int i = 0; i < n; i++) {
        int *row = &w->edge_target[(size_t)i * (size_t)n_classes];
        int k = w->edge_count[i];
        qsort(row, (size_t)k, sizeof *row, cmp_int);
        g->succ_offset[i] = pos;
        uint64_t allowed = 0;
        for (int e = 0; e < k; e++) {
            g->succ[pos++] = (uint16_t)row[e];
            allowed |= 1ull << w->state_class[row[e]];
        }
        g->out_prob[i] = k > 0 ? 1.0 / (double)k : 0.0;
        uint64_t all = n_classes >= 64 ? ~0ull : ((1ull << n_classes) - 1);
        g->forbidden_classes[i] = all & ~allowed;
    }
    g->succ_offset[n] = pos;
    g->n_transitions = pos;
    for (int k = 0; k < SB_START_STATES; k++)
        g->start_states[k] = starts[k];
    return SB_OK;
}

sb_status sb_grammar_generate(const sb_grammar_config *cfg_in, sb_grammar **out, sb_error *err)
{
    *out = NULL;
    sb_status st = sb_grammar_config_check(cfg_in, err);
    if (st != SB_OK)
        return st;
    sb_grammar_config cfg = sb_grammar_config_effective(cfg_in);
    int n_letters = cfg.vocab - 1;
    int n_classes = n_letters + 1;
    int amb = cfg.amb, depth = cfg.amb_depth;
    int n = n_letters - amb + amb * depth + 1;
    double td = cfg.transition_density / (double)depth;

    sb_grammar *g = sb_calloc(1, sizeof *g);
    grammar_work w = {0};
    if (g == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory allocating a grammar");
    g->config = cfg;
    g->n_letters = n_letters;
    g->n_classes = n_classes;
    g->n_states = n;
    g->end_state = n - 1;

    size_t table = (size_t)n * (size_t)n_classes;
    w.rep_letters = sb_calloc((size_t)(amb > 0 ? amb : 1), sizeof *w.rep_letters);
    w.state_class = sb_calloc((size_t)n, sizeof *w.state_class);
    w.state_index = sb_calloc((size_t)n, sizeof *w.state_index);
    w.class_first = sb_calloc((size_t)n_classes, sizeof *w.class_first);
    w.class_count = sb_calloc((size_t)n_classes, sizeof *w.class_count);
    w.perm = sb_calloc((size_t)(depth > 0 ? depth : 1), sizeof *w.perm);
    w.edge_count = sb_calloc((size_t)n, sizeof *w.edge_count);
    w.edge_target = sb_calloc(table, sizeof *w.edge_target);
    w.rev_offset = sb_calloc((size_t)n + 1, sizeof *w.rev_offset);
    w.rev_source = sb_calloc(table, sizeof *w.rev_source);
    w.queue = sb_calloc((size_t)n, sizeof *w.queue);
    w.seen = sb_calloc((size_t)n, 1);
    if (!w.rep_letters || !w.state_class || !w.state_index || !w.class_first || !w.class_count ||
        !w.perm || !w.edge_count || !w.edge_target || !w.rev_offset || !w.rev_source || !w.queue ||
        !w.seen) {
        st = sb_error_set(err, SB_ERR_NOMEM, "out of memory generating a grammar of %d states", n);
        goto done;
    }

    sb_pcg64 rng;
    sb_pcg64_init(&rng, cfg.seed);
    g->python_seed = (int)sb_pcg64_bounded(&rng, 99); /* integers(0, 100) */
    sb_mt19937 py;
    sb_pyrandom_seed(&py, (uint64_t)g->python_seed);

    if (amb == 0)
        grammar_build_states(&w, n_letters, 0, depth);
    int starts[SB_START_STATES];
    int accepted = 0;
    for (int attempt = 1; attempt <= SB_GRAMMAR_MAX_ATTEMPTS; attempt++) {
        if (amb > 0) {
            if (sb_pyrandom_sample(&py, n_letters, amb, w.rep_letters) != 0) {
                st = sb_error_set(err, SB_ERR_NOMEM,
                                  "out of memory generating a grammar of %d states", n);
                goto done;
            }
            grammar_build_states(&w, n_letters, amb, depth);
        }
        grammar_draw_transitions(&w, &rng, n, n_classes, td);
        sb_pcg64_choice_noreplace(&rng, n, SB_START_STATES, starts);
        if (grammar_attempt_valid(&w, n, n_classes, starts)) {
            g->attempts = attempt;
            accepted = 1;
            break;
        }
    }
    if (!accepted) {
        st = sb_error_set(err, SB_ERR_RUNTIME,
                          "no valid grammar for --vocab %d --amb %d --amb_depth %d --seed %llu "
                          "in %d attempts (some state never reaches '#'): lower --amb_depth, "
                          "raise --amb or --transition_density, or try another --seed",
                          cfg.vocab, amb, depth, (unsigned long long)cfg.seed,
                          SB_GRAMMAR_MAX_ATTEMPTS);
        goto done;
    }
    st = grammar_finish(g, &w, starts, err);
    if (st == SB_OK)
        st = sb_grammar_entropy(g, &g->topological_entropy, err);

done:
    grammar_work_free(&w);
    if (st != SB_OK) {
        sb_grammar_free(g);
        return st;
    }
    *out = g;
    return SB_OK;
}

int sb_grammar_find_state(const sb_grammar *g, const char *name)
{
    for (int s = 0; s < g->n_states; s++)
        if (strcmp(g->state_name[s], name) == 0)
            return s;
    /* "B0" is an alias of the plain letter "B" */
    if (name[0] != '\0' && strcmp(name + 1, "0") == 0) {
        char plain[2] = {name[0], '\0'};
        for (int s = 0; s < g->n_states; s++)
            if (strcmp(g->state_name[s], plain) == 0)
                return s;
    }
    return -1;
}
