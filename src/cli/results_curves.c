/*
 * results_curves.c - `selectivbench results --curves [RUN]`: every evaluation a run
 * recorded while it trained (step, training samples seen, split, loss, accuracy, learning
 * rate, throughput, wall time), as a table, CSV or JSON. RUN is a run id or a unique prefix
 * of it (sb_results_resolve_run); without RUN, every run's curve. Every line names its run.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/results_curves.h"
#include "selectivbench/selectivbench.h"

int sb_cli_results_wants_curves(int argc, char **argv)
{
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "--curves") == 0)
            return 1;
    return 0;
}

/* The command line of `results --curves`. */
typedef struct curves_args {
    const char *db_path, *run;
    char db_in_folder[4096];
    int json, csv, curves;
} curves_args;

/* Whether a path names an existing file or folder (then it is the database, not a run). */
static int path_exists(const char *path)
{
    struct stat sbuf;
    return stat(path, &sbuf) == 0;
}

/* Parses the flags into a; returns -1 to go on, else the exit code. A positional argument
 * that names an existing file or folder is the database, any other the run. */
static int curves_parse(int argc, char **argv, curves_args *a)
{
    sb_option opts[] = {
        {"db", SB_OPT_STRING, &a->db_path, "PATH", SB_CLI_DB_HELP, 0},
        {"curves", SB_OPT_SWITCH, &a->curves, NULL,
         "print the learning curves: every evaluation of RUN (an id or a unique prefix of it), "
         "or of every run",
         0},
        {"json", SB_OPT_SWITCH, &a->json, NULL, "print {\"curves\": [...]}", 0},
        {"csv", SB_OPT_SWITCH, &a->csv, NULL, "print CSV, one line per evaluation", 0},
    };
    const char *pos[2];
    int n_pos = 0;
    int rc = sb_cli_parse("results", "--curves [RUN] [DB|DIR] [--json|--csv]", opts,
                          (int)(sizeof opts / sizeof *opts), argc, argv, pos, 2, &n_pos);
    if (rc >= 0)
        return rc;
    sb_error err = {0};
    int db_given = opts[0].seen;
    for (int i = 0; i < n_pos; i++) {
        int is_db = path_exists(pos[i]);
        if ((is_db && db_given) || (!is_db && a->run != NULL)) {
            sb_error_set(&err, SB_ERR_INVALID,
                         "results --curves takes one run and one database; '%s' is one too "
                         "many",
                         pos[i]);
            return sb_cli_fail("results", &err);
        }
        if (is_db)
            a->db_path = pos[i], db_given = 1;
        else
            a->run = pos[i];
    }
    if (a->json && a->csv) {
        sb_error_set(&err, SB_ERR_INVALID, "choose one of --json and --csv");
        return sb_cli_fail("results", &err);
    }
    a->db_path = sb_cli_results_db(a->db_path, a->db_in_folder, sizeof a->db_in_folder);
    return -1;
}

/* A number for the table and the CSV: empty when unknown. */
static void format_number(char *buf, size_t size, double v)
{
    if (isfinite(v))
        sb_jw_format_double(buf, size, v);
    else
        buf[0] = '\0';
}

/* One run's points in the chosen format (the JSON array's object). */
static void print_curve(const char *run, const sb_curve_point *pts, size_t n, const curves_args *a,
                        sb_jw *j)
{
    if (a->json) {
        sb_jw_object_begin(j);
        sb_jw_key(j, "run");
        sb_jw_string(j, run);
        sb_jw_key(j, "points");
        sb_jw_array_begin(j);
    }
    for (size_t i = 0; i < n; i++) {
        const sb_curve_point *p = &pts[i];
        if (a->json) {
            sb_cli_json_curve_point(j, p);
            continue;
        }
        char samples[24] = "", loss[40], acc[40], lr[40], tps[40], wall[40];
        if (p->samples >= 0)
            snprintf(samples, sizeof samples, "%lld", (long long)p->samples);
        format_number(loss, sizeof loss, p->loss);
        format_number(acc, sizeof acc, p->acc);
        format_number(lr, sizeof lr, p->lr);
        format_number(tps, sizeof tps, p->tokens_per_s);
        format_number(wall, sizeof wall, p->wall_s);
        if (a->csv)
            printf("%s,%lld,%s,%s,%s,%s,%s,%s,%s\n", run, (long long)p->step, samples,
                   sb_split_name(p->split), loss, acc, lr, tps, wall);
        else
            printf("%-16s %7lld %9s %-5s %9.4f %7.4f %10.3g %8.1f\n", run, (long long)p->step,
                   samples, sb_split_name(p->split), p->loss, p->acc, p->lr, p->wall_s);
    }
    if (a->json) {
        sb_jw_array_end(j);
        sb_jw_object_end(j);
    }
}

/* The run hashes to print: RUN resolved, or every run in the database. *hashes is a new
 * array of *n entries. */
static sb_status curve_runs(sb_results *db, const char *run, char (**hashes)[17], size_t *n,
                            sb_error *err)
{
    *hashes = NULL;
    *n = 0;
    size_t count = 1;
    sb_status st = run != NULL ? SB_OK : sb_results_count(db, NULL, &count, err);
    if (st != SB_OK)
        return st;
    *hashes = calloc(count > 0 ? count : 1, sizeof **hashes);
    sb_result_row *rows = calloc(count > 0 ? count : 1, sizeof *rows);
    if (*hashes == NULL || rows == NULL) {
        free(rows);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory listing %zu runs", count);
    }
    if (run != NULL) {
        st = sb_results_resolve_run(db, run, (*hashes)[0], err);
        *n = st == SB_OK;
    } else {
        st = sb_results_read(db, NULL, 0, rows, count, n, err);
        for (size_t i = 0; st == SB_OK && i < *n; i++)
            memcpy((*hashes)[i], rows[i].run_hash, 17);
    }
    free(rows);
    return st;
}

/* Prints the curves of the runs listed. */
static sb_status print_curves(sb_results *db, char (*hashes)[17], size_t n, const curves_args *a,
                              sb_error *err)
{
    sb_jw *j = NULL;
    if (a->json) {
        if ((j = sb_jw_open(stdout, 0)) == NULL)
            return sb_error_set(err, SB_ERR_NOMEM, "out of memory");
        sb_jw_object_begin(j);
        sb_jw_key(j, "curves");
        sb_jw_array_begin(j);
    } else if (a->csv) {
        printf("run,step,samples,split,loss,acc,lr,tokens_per_s,wall_s\n");
    } else {
        printf("%-16s %7s %9s %-5s %9s %7s %10s %8s\n", "run", "step", "samples", "split", "loss",
               "acc", "lr", "wall s");
    }
    sb_status st = SB_OK;
    size_t n_points = 0;
    for (size_t i = 0; i < n && st == SB_OK; i++) {
        sb_curve_point *pts = NULL;
        size_t n_pts = 0;
        st = sb_results_curve(db, hashes[i], &pts, &n_pts, err);
        if (st == SB_OK)
            print_curve(hashes[i], pts, n_pts, a, j);
        n_points += n_pts;
        sb_results_curve_free(pts);
    }
    if (j != NULL) {
        sb_jw_array_end(j);
        sb_jw_object_end(j);
        sb_jw_close(j);
        printf("\n");
    } else if (!a->csv && st == SB_OK) {
        printf("%zu evaluations of %zu run%s\n", n_points, n, n == 1 ? "" : "s");
    }
    return st;
}

void sb_cli_json_curve_point(sb_jw *j, const sb_curve_point *p)
{
    sb_jw_object_begin(j);
    sb_jw_key(j, "step");
    sb_jw_int(j, p->step);
    sb_jw_key(j, "samples");
    if (p->samples >= 0)
        sb_jw_int(j, p->samples);
    else
        sb_jw_null(j);
    sb_jw_key(j, "split");
    sb_jw_string(j, sb_split_name(p->split));
    const char *keys[5] = {"loss", "acc", "lr", "tokens_per_s", "wall_s"};
    double values[5] = {p->loss, p->acc, p->lr, p->tokens_per_s, p->wall_s};
    for (int k = 0; k < 5; k++) {
        sb_jw_key(j, keys[k]);
        sb_jw_double(j, values[k]); /* NaN: null */
    }
    sb_jw_object_end(j);
}

int sb_cmd_results_curves(int argc, char **argv)
{
    curves_args a = {.db_path = NULL};
    int rc = curves_parse(argc, argv, &a);
    if (rc >= 0)
        return rc;
    if (a.db_path == NULL)
        a.db_path = "results/" SB_RESULTS_DB_NAME;
    sb_error err = {0};
    if (!path_exists(a.db_path)) {
        sb_error_set(&err, SB_ERR_IO,
                     "no results database at '%s' (train or sweep first, or "
                     "give --db PATH)",
                     a.db_path);
        return sb_cli_fail("results", &err);
    }
    sb_results *db = NULL;
    if (sb_results_open_readonly(a.db_path, &db, &err) != SB_OK)
        return sb_cli_fail("results", &err);
    char(*hashes)[17] = NULL;
    size_t n = 0;
    sb_status st = curve_runs(db, a.run, &hashes, &n, &err);
    if (st == SB_OK)
        st = print_curves(db, hashes, n, &a, &err);
    free(hashes);
    sb_results_close(db);
    return st == SB_OK ? 0 : sb_cli_fail("results", &err);
}
