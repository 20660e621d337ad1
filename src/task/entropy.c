/*
 * entropy.c - topological entropy of a grammar by the direct method (docs/task.md, "Grammar").
 *
 * TE = ln(rho), rho the Perron root (spectral radius) of the binary table of the
 * grammar's transitions with the closing edges '#' -> start state added. The reference
 * builds the dense n x n table and calls a dense eigensolver (212 s at amb 40). Here:
 *
 *   1. Split the graph into strongly connected components (iterative Tarjan). The
 *      Perron root of a non-negative matrix is the largest Perron root of its
 *      irreducible diagonal blocks, i.e. of its components.
 *   2. For each component, power iteration on A + I (primitive, so it converges to the
 *      Perron vector) with Collatz-Wielandt bounds min_i (Ax)_i/x_i <= rho <=
 *      max_i (Ax)_i/x_i, stopping when the bounds agree to 1e-13 relative: the result
 *      carries its own error certificate.
 *   3. A component on which the iteration converges too slowly (eigenvalues close to the
 *      circle |z| = rho, e.g. a long plain cycle) goes to LAPACK's dgeev instead.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "task/grammar.h"

#define TE_REL_TOL 1e-13
#define TE_MAX_ITER 20000
#define TE_DENSE_MAX 2000 /* largest component handed to dgeev */

/* LAPACK (from OpenBLAS) */
extern void dgeev_(const char *jobvl, const char *jobvr, const int *n, double *a, const int *lda,
                   double *wr, double *wi, double *vl, const int *ldvl, double *vr, const int *ldvr,
                   double *work, const int *lwork, int *info);

/* Adjacency of the corrected table in CSR form. */
typedef struct te_graph {
    int n;
    int *offset; /* [n + 1] */
    int *target; /* [n_edges] */
} te_graph;

static int te_graph_build(const sb_grammar *g, te_graph *G)
{
    int n = g->n_states;
    int n_edges = g->n_transitions + SB_START_STATES;
    G->n = n;
    G->offset = sb_malloc((size_t)(n + 1) * sizeof *G->offset);
    G->target = sb_malloc((size_t)n_edges * sizeof *G->target);
    if (!G->offset || !G->target)
        return 0;
    int pos = 0;
    for (int s = 0; s < n; s++) {
        G->offset[s] = pos;
        for (int e = g->succ_offset[s]; e < g->succ_offset[s + 1]; e++)
            G->target[pos++] = g->succ[e];
        if (s == g->end_state) {
            /* the correction closes strings into a cycle; the start states are distinct */
            for (int k = 0; k < SB_START_STATES; k++)
                G->target[pos++] = g->start_states[k];
        }
    }
    G->offset[n] = pos;
    return 1;
}

/* Tarjan's algorithm without recursion. comp[v] receives the component number of v;
 * returns the number of components. */
static int te_components(const te_graph *G, int *comp)
{
    int n = G->n;
    int *index = sb_malloc((size_t)n * sizeof *index);
    int *low = sb_malloc((size_t)n * sizeof *low);
    int *stack = sb_malloc((size_t)n * sizeof *stack);
    int *call_v = sb_malloc((size_t)n * sizeof *call_v);
    int *call_e = sb_malloc((size_t)n * sizeof *call_e);
    unsigned char *on_stack = sb_calloc((size_t)n, 1);
    if (!index || !low || !stack || !call_v || !call_e || !on_stack) {
        sb_free(index), sb_free(low), sb_free(stack), sb_free(call_v), sb_free(call_e),
            sb_free(on_stack);
        return -1;
    }
    for (int v = 0; v < n; v++)
        index[v] = -1;
    int next_index = 0, sp = 0, n_comp = 0;
    for (int root = 0; root < n; root++) {
        if (index[root] >= 0)
            continue;
        int depth = 0;
        call_v[0] = root;
        call_e[0] = G->offset[root];
        index[root] = low[root] = next_index++;
        stack[sp++] = root;
        on_stack[root] = 1;
        while (depth >= 0) {
            int v = call_v[depth];
            if (call_e[depth] < G->offset[v + 1]) {
                int w = G->target[call_e[depth]++];
                if (index[w] < 0) {
                    index[w] = low[w] = next_index++;
                    stack[sp++] = w;
                    on_stack[w] = 1;
                    depth++;
                    call_v[depth] = w;
                    call_e[depth] = G->offset[w];
                } else if (on_stack[w] && index[w] < low[v]) {
                    low[v] = index[w];
                }
                continue;
            }
            if (low[v] == index[v]) {
                int w;
                do {
                    w = stack[--sp];
                    on_stack[w] = 0;
                    comp[w] = n_comp;
                } while (w != v);
                n_comp++;
            }
            depth--;
            if (depth >= 0) {
                int parent = call_v[depth];
                if (low[v] < low[parent])
                    low[parent] = low[v];
            }
        }
    }
    sb_free(index), sb_free(low), sb_free(stack), sb_free(call_v), sb_free(call_e),
        sb_free(on_stack);
    return n_comp;
}

/* Perron root of one component by dense LAPACK (largest real part of the eigenvalues,
 * as the reference takes it). Returns a negative value on failure. */
static double te_component_dense(const te_graph *G, const int *members, int m, const int *local)
{
    double *a = sb_calloc((size_t)m * (size_t)m, sizeof *a);
    double *wr = sb_malloc((size_t)m * sizeof *wr);
    double *wi = sb_malloc((size_t)m * sizeof *wi);
    double rho = -1.0;
    if (a && wr && wi) {
        for (int i = 0; i < m; i++) {
            int v = members[i];
            for (int e = G->offset[v]; e < G->offset[v + 1]; e++) {
                int j = local[G->target[e]];
                if (j >= 0)
                    a[(size_t)j * (size_t)m + (size_t)i] += 1.0; /* column major A[i][j] */
            }
        }
        int lwork = -1, info = 0, one = 1;
        double query = 0.0, dummy = 0.0;
        dgeev_("N", "N", &m, a, &m, wr, wi, &dummy, &one, &dummy, &one, &query, &lwork, &info);
        lwork = (int)query;
        double *work = sb_malloc((size_t)(lwork > 1 ? lwork : 1) * sizeof *work);
        if (work != NULL && info == 0) {
            dgeev_("N", "N", &m, a, &m, wr, wi, &dummy, &one, &dummy, &one, work, &lwork, &info);
            if (info == 0) {
                rho = wr[0];
                for (int i = 1; i < m; i++)
                    if (wr[i] > rho)
                        rho = wr[i];
            }
        }
        sb_free(work);
    }
    sb_free(a), sb_free(wr), sb_free(wi);
    return rho;
}

/* Perron root of one component (m >= 2 members) by power iteration on A + I with
 * Collatz-Wielandt bounds. Sets *converged. */
static double te_component_power(const te_graph *G, const int *members, int m, const int *local,
                                 double *x, double *y, int *converged)
{
    for (int i = 0; i < m; i++)
        x[i] = 1.0;
    double lower = 0.0, upper = HUGE_VAL;
    *converged = 0;
    for (int iter = 0; iter < TE_MAX_ITER; iter++) {
        /* y = A x on the component (edges leaving it are ignored) */
        lower = HUGE_VAL;
        upper = 0.0;
        double norm = 0.0;
        for (int i = 0; i < m; i++) {
            int v = members[i];
            double sum = 0.0;
            for (int e = G->offset[v]; e < G->offset[v + 1]; e++) {
                int j = local[G->target[e]];
                if (j >= 0)
                    sum += x[j];
            }
            double ratio = sum / x[i];
            if (ratio < lower)
                lower = ratio;
            if (ratio > upper)
                upper = ratio;
            y[i] = sum + x[i];
            if (y[i] > norm)
                norm = y[i];
        }
        if (upper - lower <= TE_REL_TOL * upper) {
            *converged = 1;
            break;
        }
        for (int i = 0; i < m; i++)
            x[i] = y[i] / norm;
    }
    return 0.5 * (lower + upper);
}

sb_status sb_grammar_entropy(const sb_grammar *g, double *te, sb_error *err)
{
    if (g == NULL || te == NULL) /* a public function (selectivbench.h) */
        return sb_error_set(err, SB_ERR_INVALID, "sb_grammar_entropy: %s is NULL",
                            g == NULL ? "g" : "te");
    te_graph G = {0};
    int n = g->n_states;
    int *comp = sb_malloc((size_t)n * sizeof *comp);
    int *order = sb_malloc((size_t)n * sizeof *order);
    int *start = NULL;
    int *local = sb_malloc((size_t)n * sizeof *local);
    double *x = sb_malloc((size_t)n * sizeof *x);
    double *y = sb_malloc((size_t)n * sizeof *y);
    sb_status st = SB_OK;
    if (!comp || !order || !local || !x || !y || !te_graph_build(g, &G)) {
        st = sb_error_set(err, SB_ERR_NOMEM, "out of memory computing the topological entropy");
        goto done;
    }
    int n_comp = te_components(&G, comp);
    start = sb_calloc((size_t)(n_comp > 0 ? n_comp : 0) + 1, sizeof *start);
    if (n_comp < 0 || start == NULL) {
        st = sb_error_set(err, SB_ERR_NOMEM, "out of memory computing the topological entropy");
        goto done;
    }
    /* bucket the states by component */
    for (int v = 0; v < n; v++)
        start[comp[v] + 1]++;
    for (int c = 0; c < n_comp; c++)
        start[c + 1] += start[c];
    for (int v = 0; v < n; v++)
        order[start[comp[v]]++] = v;
    for (int c = n_comp; c > 0; c--)
        start[c] = start[c - 1];
    start[0] = 0;
    for (int v = 0; v < n; v++)
        local[v] = -1;

    double rho = 0.0;
    for (int c = 0; c < n_comp; c++) {
        const int *members = &order[start[c]];
        int m = start[c + 1] - start[c];
        double r;
        if (m == 1) {
            int v = members[0];
            r = 0.0;
            for (int e = G.offset[v]; e < G.offset[v + 1]; e++)
                if (G.target[e] == v)
                    r = 1.0; /* a self-loop */
        } else {
            for (int i = 0; i < m; i++)
                local[members[i]] = i;
            int converged = 0;
            r = te_component_power(&G, members, m, local, x, y, &converged);
            if (!converged && m <= TE_DENSE_MAX) {
                double dense = te_component_dense(&G, members, m, local);
                if (dense >= 0.0)
                    r = dense;
            }
            for (int i = 0; i < m; i++)
                local[members[i]] = -1;
        }
        if (r > rho)
            rho = r;
    }
    *te = log(rho);

done:
    sb_free(G.offset), sb_free(G.target);
    sb_free(comp), sb_free(order), sb_free(start), sb_free(local), sb_free(x), sb_free(y);
    return st;
}
