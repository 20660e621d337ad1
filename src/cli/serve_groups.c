/* serve_groups.c - GET /api/groups of `selectivbench serve` (serve.h): the groups over seeds
 * of the runs the dashboard shows, computed by the library exactly as `results --group
 * --json` computes them (results_view_groups_json). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/results_view.h"
#include "cli/serve.h"

/* The runs a mask names: hex digit k holds runs 4k .. 4k+3 (bit j: run 4k + j), in the
 * database's order (/api/runs's); NULL or "" names every run. idx receives them, *n how
 * many. 0 with the reason in why when the mask is malformed or names a run past n_rows. */
static int mask_runs(const char *mask, size_t n_rows, size_t *idx, size_t *n, char *why,
                     size_t why_size)
{
    *n = 0;
    if (mask == NULL || mask[0] == '\0') {
        for (size_t i = 0; i < n_rows; i++)
            idx[(*n)++] = i;
        return 1;
    }
    for (size_t k = 0; mask[k] != '\0'; k++) {
        if (!isxdigit((unsigned char)mask[k])) {
            snprintf(why, why_size,
                     "runs: byte %zu (0x%02x) is not a hex digit (a mask of the runs)", k,
                     (unsigned)(unsigned char)mask[k]);
            return 0;
        }
        int bits = isdigit((unsigned char)mask[k]) ? mask[k] - '0'
                                                   : tolower((unsigned char)mask[k]) - 'a' + 10;
        for (int j = 0; j < 4; j++) {
            if (!(bits & (1 << j)))
                continue;
            size_t i = 4 * k + (size_t)j;
            if (i >= n_rows) {
                snprintf(why, why_size,
                         "runs: the mask names run %zu, the database has %zu: reload the page", i,
                         n_rows);
                return 0;
            }
            idx[(*n)++] = i;
        }
    }
    return 1;
}

void sb_serve_groups(const char *db_path, const char *group, const char *mask, sb_serve_reply *r)
{
    if (group == NULL || group[0] == '\0') {
        sb_serve_reply_error(r, 400, "group: name the columns to group by (group=model,lr)");
        return;
    }
    /* column names are letters, digits and _: anything else is refused before it is quoted
     * in an error (a byte that is not UTF-8 would break the JSON reply) */
    for (const char *c = group; *c != '\0'; c++)
        if (!isalnum((unsigned char)*c) && *c != '_' && *c != ',') {
            sb_serve_reply_error(r, 400,
                                 "group: column names are letters, digits and _, separated by "
                                 "commas (group=model,lr)");
            return;
        }
    sb_error err = {0};
    sb_results *db = NULL;
    sb_result_row *rows = NULL;
    size_t n_rows = 0, n = 0;
    sb_status st = sb_serve_open_and_read(db_path, &db, &rows, &n_rows, &err);
    char **configs = st == SB_OK ? calloc(n_rows > 0 ? n_rows : 1, sizeof *configs) : NULL;
    size_t *idx = st == SB_OK ? malloc((n_rows > 0 ? n_rows : 1) * sizeof *idx) : NULL;
    if (st == SB_OK && (configs == NULL || idx == NULL))
        st = sb_error_set(&err, SB_ERR_NOMEM, "out of memory grouping %zu runs", n_rows);
    for (size_t i = 0; st == SB_OK && i < n_rows; i++)
        st = sb_results_config_json(db, rows[i].run_hash, &configs[i], &err);
    sb_results_close(db);
    char why[160];
    if (st == SB_OK && !mask_runs(mask, n_rows, idx, &n, why, sizeof why))
        st = sb_error_set(&err, SB_ERR_INVALID, "%s", why);
    sb_serve_json b;
    if (st == SB_OK && !sb_serve_json_begin(&b))
        st = sb_error_set(&err, SB_ERR_NOMEM, "out of memory");
    else if (st == SB_OK) {
        results_view_options o = {.group = group, .json = 1};
        st = results_view_groups_json(b.j, rows, (const char *const *)configs, n_rows, idx, n, &o,
                                      &err);
        sb_serve_json_finish(&b, r);
        if (st != SB_OK) {
            free(r->body);
            r->body = NULL;
        }
    }
    if (st != SB_OK) /* what the request named (a column, the mask), else the server */
        sb_serve_reply_error(r, st == SB_ERR_INVALID ? 400 : 500, err.msg);
    for (size_t i = 0; configs != NULL && i < n_rows; i++)
        sb_string_free(configs[i]);
    free(configs);
    free(idx);
    free(rows);
}
