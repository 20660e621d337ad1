/* serve.h - `selectivbench serve`: a dashboard over a results database in the browser
 * (docs/dashboard.md). cmd_serve.c parses the flags and runs the server until a signal;
 * serve_http.c answers the requests (libmicrohttpd, 127.0.0.1 only); serve_data.c writes the
 * JSON of /api/runs, /api/curve and /api/status; serve_run.c the run page's (/api/run) and
 * its probe figures; serve_figures.c renders the report's figures into a private temporary
 * folder and serves them.
 *
 * The database is only read: every request opens it read-only and closes it again, so the
 * rows a running sweep adds appear at the next request and the server holds no lock. */
#ifndef SELECTIVBENCH_CLI_SERVE_H
#define SELECTIVBENCH_CLI_SERVE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "selectivbench/selectivbench.h"

/* An answer to one request: a status and a body in memory or a file. */
typedef struct sb_serve_reply {
    unsigned status;  /* HTTP status code */
    const char *type; /* Content-Type (a static string) */
    char *body;       /* malloc'd (freed by whoever sends it), or NULL with fd */
    size_t len;
    int fd; /* an open file to send instead of body, else -1 */
} sb_serve_reply;

/* The figures of the report, rendered when the runs they are drawn from changed. */
typedef struct sb_serve_figures {
    char root[4096];    /* the private temporary folder (mkdtemp), "" before init */
    char dir[4200];     /* the folder of the latest rendering inside root, "" before one */
    int generation;     /* renderings so far (each in root/N) */
    int tried;          /* 1 once a rendering was tried (key is then set) */
    uint64_t key;       /* sb_serve_runs_key of the runs last tried, drawn unless error */
    int n;              /* figures in dir (their SVG files) */
    char names[64][64]; /* their names, without ".svg", sorted */
    int runs_read, runs_used;
    char error[SB_ERROR_MSG_MAX]; /* why the latest rendering failed, else "" */
} sb_serve_figures;

/* What the server needs: the database and the figures. */
typedef struct sb_serve {
    const char *db_path;
    sb_serve_figures figures;
} sb_serve;

/* ---- serve_data.c ---- */

/* A JSON document written into memory with the public writer: begin (0 when out of
 * memory), write into j, finish hands it to a reply as its body (status 200, or a 500). */
typedef struct sb_serve_json {
    FILE *f;
    char *data;
    size_t len;
    sb_jw *j;
} sb_serve_json;
int sb_serve_json_begin(sb_serve_json *b);
void sb_serve_json_finish(sb_serve_json *b, sb_serve_reply *r);

/* Opens the database read-only and reads its runs (*rows malloc'd); on failure nothing is
 * left open. */
sb_status sb_serve_open_and_read(const char *db_path, sb_results **db, sb_result_row **rows,
                                 size_t *n, sb_error *err);

/* The fields of a run that /api/runs and /api/run both write (id, status, model, protocol,
 * reason, params, the metrics of each split, wall_s, tokens_per_s, ceiling,
 * effective_memory, finished_at, attempts, checkpoint), into an open object. */
void sb_serve_write_run_fields(sb_jw *j, const sb_result_row *r);

/* Whether id can be a run id: 4 to 16 lowercase hex digits (sb_results_resolve_run's rule). */
int sb_serve_id_well_formed(const char *id);

/* Resolves id to a run of db (rows: its n runs): 200 with *run filled, else the reply's
 * error status (400 for an ambiguous id, 404 for one no run has) with err set. */
unsigned sb_serve_resolve(sb_results *db, const sb_result_row *rows, size_t n, const char *id,
                          sb_result_row *run, sb_error *err);

/* A reply with a JSON body {"error": message} and this status. */
void sb_serve_reply_error(sb_serve_reply *r, unsigned status, const char *message);

/* GET /api/runs: every run with its status, metrics and configuration, and the configuration
 * keys whose value differs between runs ("varied"). */
void sb_serve_runs(const char *db_path, sb_serve_reply *r);

/* GET /api/curve?run=ID: the learning curve of the run with this id (a unique prefix of at
 * least 4 hex digits), its evaluations ("points") and its live points ("live"): 400 for a
 * malformed or ambiguous id, 404 for one no run has. */
void sb_serve_curve(const char *db_path, const char *id, sb_serve_reply *r);

/* GET /api/status: the runs per status, the latest evaluation of every running run, and a
 * key that changes whenever a run is added or changes (the page reloads then). */
void sb_serve_status(const char *db_path, sb_serve_reply *r);

/* A fingerprint of the runs of the database (their ids, statuses, attempts and test
 * accuracies): the figures are rendered again when it changes. Errors: those of opening and
 * reading the database. */
sb_status sb_serve_runs_key(const char *db_path, uint64_t *key, sb_error *err);

/* ---- serve_groups.c ---- */

/* GET /api/groups?group=A,B&runs=MASK: the groups over seeds of the runs MASK names (hex
 * digit k: runs 4k .. 4k+3 of /api/runs's order, bit j run 4k + j; absent: every run), as
 * `results --group A,B --json` prints them: 400 for an unknown column or a malformed mask. */
void sb_serve_groups(const char *db_path, const char *group, const char *mask, sb_serve_reply *r);

/* ---- serve_run.c ---- */

/* GET /api/run?run=ID: the run page's data: the run as stored, its configuration as stored
 * and as trained, the command that trains it again (and whether it gives the run's hash),
 * its checkpoint and log (path, whether they exist, size), its probe figures. Errors as
 * /api/curve. */
void sb_serve_run(const char *db_path, const char *id, sb_serve_reply *r);

/* GET /api/probe?run=ID&figure=NAME: one SVG figure `probe` wrote beside the run's checkpoint
 * (NAME one that /api/run lists); 404 otherwise. */
void sb_serve_probe_figure(const char *db_path, const char *id, const char *figure,
                           sb_serve_reply *r);

/* ---- serve_figures.c ---- */

/* Makes the private temporary folder of the figures. Errors: SB_ERR_IO. */
sb_status sb_serve_figures_init(sb_serve_figures *f, sb_error *err);

/* Removes the folder and everything in it (nothing when init did not run). */
void sb_serve_figures_cleanup(sb_serve_figures *f);

/* GET /api/figures: renders the figures when the runs changed, then lists them. */
void sb_serve_figures_list(sb_serve *s, sb_serve_reply *r);

/* GET /figures/NAME.svg: one figure of the latest rendering (rendered first when the runs
 * changed); 404 for a name that is not one. */
void sb_serve_figure(sb_serve *s, const char *name, sb_serve_reply *r);

/* ---- serve_http.c ---- */

typedef struct sb_serve_http sb_serve_http;

/* Starts serving s on 127.0.0.1:port (0: any free port) in a thread of its own; *bound
 * receives the port. Errors: SB_ERR_IO when the port cannot be bound. */
sb_status sb_serve_http_start(sb_serve *s, int port, sb_serve_http **out, int *bound,
                              sb_error *err);

/* Stops the server (finishing the request in progress) and frees it. NULL is allowed. */
void sb_serve_http_stop(sb_serve_http *h);

#endif
