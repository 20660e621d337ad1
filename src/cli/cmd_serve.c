/* cmd_serve.c - `selectivbench serve [DB|DIR] [--db FILE | --results DIR] [--port N]`: a
 * dashboard of a results database in the browser, on 127.0.0.1 only (docs/dashboard.md):
 * the runs table (sort, filter, group), learning curves, the report's figures, and a
 * running sweep's progress. The database is opened read-only at every request and never
 * written; SIGINT or SIGTERM stops the server (exit 0) and removes its temporary figures. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/run_options.h"
#include "cli/serve.h"
#include "cli/signals.h"
#include "selectivbench/selectivbench.h"

typedef struct serve_args {
    const char *db, *results;
    int port, threads;
    char db_buf[4096];
} serve_args;

/* Parses the flags into a (a->db: the database to serve); returns -1 to go on, else the
 * exit code. */
static int serve_parse(sb_config *cfg, int argc, char **argv, serve_args *a)
{
    sb_option opts[8] = {
        {"db", SB_OPT_STRING, &a->db, "PATH", SB_CLI_DB_HELP, 0},
        {"results", SB_OPT_STRING, &a->results, "DIR",
         "results folder: serve DIR/" SB_RESULTS_DB_NAME, 0},
    };
    int n_opts = sb_options_count(opts, 8);
    sb_options_add_key(cfg, "port", NULL, opts, &n_opts);
    sb_options_add_key(cfg, "threads", "threads for the figures (default 0: all cores)", opts,
                       &n_opts);
    const char *pos[1];
    int n_pos = 0;
    int rc = sb_cli_parse("serve", "[DB|DIR] [--db FILE | --results DIR] [--port N]", opts, n_opts,
                          argc, argv, pos, 1, &n_pos);
    if (rc >= 0)
        return rc;
    a->port = sb_run_flag(cfg, "port");
    a->threads = sb_run_flag(cfg, "threads");
    sb_error err = {0};
    if ((n_pos > 0) + (a->db != NULL) + (a->results != NULL) > 1) {
        sb_error_set(&err, SB_ERR_INVALID,
                     "give the database once: DB, --db FILE or --results DIR");
        return sb_cli_fail("serve", &err);
    }
    if (n_pos == 1)
        a->db = pos[0];
    if (a->results != NULL) {
        if (sb_results_path(a->results, a->db_buf, sizeof a->db_buf, &err) != SB_OK)
            return sb_cli_fail("serve", &err);
        a->db = a->db_buf;
    } else {
        a->db = sb_cli_results_db(a->db != NULL ? a->db : "results/" SB_RESULTS_DB_NAME, a->db_buf,
                                  sizeof a->db_buf);
    }
    sb_cli_threads(a->threads);
    return -1;
}

/* The database must exist and read as a results database before the server starts. */
static int check_database(const char *db_path)
{
    sb_error err = {0};
    int rc = sb_cli_db_exists("serve", db_path);
    if (rc >= 0)
        return rc;
    sb_results *db = NULL;
    if (sb_results_open_readonly(db_path, &db, &err) != SB_OK)
        return sb_cli_fail("serve", &err);
    sb_results_close(db);
    return -1;
}

/* Waits for SIGINT or SIGTERM. They are blocked in every thread (the server's thread was
 * started with them blocked) and taken here, atomically with the wait. */
static void wait_for_stop(const sigset_t *unblocked)
{
    while (sb_cli_stop_signal() == 0)
        sigsuspend(unblocked);
}

static int serve_with(sb_config *settings, int argc, char **argv)
{
    serve_args a = {0};
    int rc = serve_parse(settings, argc, argv, &a);
    if (rc < 0)
        rc = check_database(a.db);
    if (rc >= 0)
        return rc;
    sb_error err = {0};
    sb_serve s = {.db_path = a.db};
    if (sb_serve_figures_init(&s.figures, &err) != SB_OK)
        return sb_cli_fail("serve", &err);

    /* block the stop signals before the server's thread starts, so that it inherits the
     * mask and they always reach wait_for_stop */
    sb_cli_signals_install(NULL);
    sigset_t stop, before;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, &before);
    sigset_t unblocked = before;
    sigdelset(&unblocked, SIGINT);
    sigdelset(&unblocked, SIGTERM);

    sb_serve_http *http = NULL;
    int port = 0;
    if (sb_serve_http_start(&s, a.port, &http, &port, &err) != SB_OK) {
        sb_serve_figures_cleanup(&s.figures);
        return sb_cli_fail("serve", &err);
    }
    printf("serving %s at http://127.0.0.1:%d/ (Ctrl-C to stop)\n", a.db, port);
    fflush(stdout);
    wait_for_stop(&unblocked);
    sb_serve_http_stop(http);
    sb_serve_figures_cleanup(&s.figures);
    return 0;
}

int sb_cmd_serve(int argc, char **argv)
{
    return sb_run_with_settings("serve", NULL, serve_with, argc, argv);
}
