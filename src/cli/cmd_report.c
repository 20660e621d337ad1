/* cmd_report.c - `selectivbench report [DB]`: the paper's figures (PNG, SVG, PDF) and a
 * markdown table from a results database, through the public API (selectivbench.h);
 * `--claims`: the paper's findings alone (sb_report_claims). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/run_options.h"
#include "selectivbench/selectivbench.h"

#define MAX_FILTERS 16

/* Whether name is a key of a run's configuration (not a setting of where or how it ran,
 * which no stored configuration holds). */
static int configuration_key(const char *name)
{
    int i = sb_config_key_find(name);
    return i >= 0 && sb_config_key_group(i) <= SB_KEYS_RUN;
}

/* --x and every --filter name configuration keys (--x may also be the memory demand). */
static void check_keys(const char *x_key, const char *const *filters, int n_filters, sb_error *err)
{
    if (x_key != NULL && !configuration_key(x_key) && strcmp(x_key, SB_REPORT_X_DEMAND) != 0) {
        sb_error_set(err, SB_ERR_INVALID,
                     "--x '%s' is not a configuration key (%s train --help lists them) nor %s",
                     x_key, sb_cli_program(), SB_REPORT_X_DEMAND);
        return;
    }
    for (int f = 0; f < n_filters; f++) {
        const char *eq = strchr(filters[f], '=');
        char key[128] = "";
        if (eq != NULL && eq - filters[f] < (long)sizeof key)
            snprintf(key, sizeof key, "%.*s", (int)(eq - filters[f]), filters[f]);
        if (eq == NULL || !configuration_key(key)) {
            sb_error_set(err, SB_ERR_INVALID,
                         "--filter '%s': write KEY=VALUE with KEY a configuration key (%s train "
                         "--help lists them)",
                         filters[f], sb_cli_program());
            return;
        }
    }
}

/* --claims: the verdicts, as text or JSON, of the runs the filters keep. */
static int report_claims(const char *db_path, const char *const *filters, int n_filters, int json,
                         int exploratory)
{
    char *md = NULL;
    sb_error err = {0};
    if (sb_report_claims_as(db_path, filters, n_filters, json, &md, &err) != SB_OK)
        return sb_cli_fail("report", &err);
    if (n_filters > 0 && !json) { /* say which slice the verdicts are of */
        printf("Runs whose configuration has");
        for (int f = 0; f < n_filters; f++)
            printf("%s %s", f > 0 ? "," : "", filters[f]);
        printf(exploratory ? ": exploratory, a slice chosen after looking at the data; "
                             "its verdicts can suggest, never confirm.\n"
                           : ".\n");
    }
    fputs(md + (md[0] == '\n'), stdout);
    sb_string_free(md);
    return 0;
}

static void print_outcome(const sb_report_outcome *s);

static int report_with(sb_config *cfg, int argc, char **argv)
{
    const char *db_path = "results/" SB_RESULTS_DB_NAME, *out = NULL, *x_key = NULL;
    int claims = 0, json = 0, exploratory = 0;
    const char *filter_dummy = NULL;
    sb_option opts[16] = {
        {"db", SB_OPT_STRING, &db_path, "PATH", SB_CLI_DB_HELP, 0},
        {"results", SB_OPT_STRING, &db_path, "DIR",
         "the results folder, as train and sweep take it: the same as --db DIR (default "
         "results)",
         0},
        {"out", SB_OPT_STRING, &out, "DIR",
         "where the figures and report.md go (default: report/ beside the database)", 0},
        {"claims", SB_OPT_SWITCH, &claims, NULL,
         "print only the paper's findings with their statistics and verdicts (docs/claims.md; "
         "read only, no figures)",
         0},
        {"json", SB_OPT_SWITCH, &json, NULL,
         "with --claims: the verdicts as a JSON array, one object per finding and slice", 0},
        {"exploratory", SB_OPT_SWITCH, &exploratory, NULL,
         "with --claims and --filter: say that the slice was chosen after looking at the data "
         "(its verdicts can suggest, never confirm)",
         0},
        {"filter", SB_OPT_STRING, &filter_dummy, "KEY=VALUE",
         "only the runs whose configuration has KEY = VALUE (or any of KEY=A,B,C), for the "
         "figures and the findings (repeatable, as results --filter; e.g. one preset's slice "
         "of a larger study, seed=4,5,6; default: every run)",
         0},
        {"x", SB_OPT_STRING, &x_key, "KEY",
         "one figure of every run against configuration key KEY (a scale study: dataset_size, "
         "train_seqlen_max, feat_size, ...), or memory_demand (the window its task's ideal "
         "observer needs; interleaved walks), instead of the paper's figures (default: the "
         "paper's figures)",
         0},
    };
    int n_opts = sb_options_count(opts, 16);
    sb_options_add_key(cfg, "threads", NULL, opts, &n_opts);
    const char *filters[MAX_FILTERS];
    int n_filters = sb_cli_repeated(argc, argv, "--filter", filters, MAX_FILTERS);
    const char *pos[1];
    int n_pos = 0;
    int rc =
        sb_cli_parse("report", "[DB|DIR] [--out DIR] [--x KEY] [--filter K=V] [--claims [--json]]",
                     opts, n_opts, argc, argv, pos, 1, &n_pos);
    const int threads = sb_run_flag(cfg, "threads");
    if (rc >= 0)
        return rc;
    sb_cli_threads(threads);
    if (n_pos == 1)
        db_path = pos[0];
    char db_in_folder[4096];
    db_path = sb_cli_results_db(db_path, db_in_folder, sizeof db_in_folder);
    sb_error err = {0};
    if (n_filters > MAX_FILTERS)
        sb_error_set(&err, SB_ERR_INVALID, "--filter is given %d times; at most %d", n_filters,
                     MAX_FILTERS);
    else
        check_keys(x_key, filters, n_filters, &err);
    if (err.msg[0] == '\0' && (json || exploratory) && !claims)
        sb_error_set(&err, SB_ERR_INVALID, "--%s goes with --claims: add --claims",
                     json ? "json" : "exploratory");
    if (err.msg[0] != '\0')
        return sb_cli_fail("report", &err);
    FILE *probe = fopen(db_path, "rb");
    if (probe == NULL) {
        sb_error_set(&err, SB_ERR_IO, "no results database at '%s' (run a sweep or train first)",
                     db_path);
        return sb_cli_fail("report", &err);
    }
    fclose(probe);
    if (claims)
        return report_claims(db_path, filters, n_filters, json, exploratory);
    char dir[4096];
    if (out == NULL) {
        const char *slash = strrchr(db_path, '/');
        if (slash == NULL)
            snprintf(dir, sizeof dir, "report");
        else
            snprintf(dir, sizeof dir, "%.*s/report", (int)(slash - db_path), db_path);
        out = dir;
    }
    sb_report_outcome sum;
    if (sb_report_write_by(db_path, out, x_key, filters, n_filters, &sum, &err) != SB_OK)
        return sb_cli_fail("report", &err);
    print_outcome(&sum);
    return 0;
}

int sb_cmd_report(int argc, char **argv)
{
    return sb_run_with_settings("report", NULL, report_with, argc, argv);
}

/* What a report wrote, and what it left out. */
static void print_outcome(const sb_report_outcome *s)
{
    const sb_report_outcome sum = *s;
    printf("%d runs read, %d used", sum.runs_read, sum.runs_used);
    if (sum.runs_left_out > 0) /* out of every mean; report.md says which kinds */
        printf(", %d left out (%d diverged)", sum.runs_left_out, sum.runs_diverged);
    printf(": %d figure%s (PNG, SVG, PDF) and %s", sum.figures, sum.figures == 1 ? "" : "s",
           sum.table_path);
    if (sum.runs_other > 0) /* their figure would have one x value: report.md lists them */
        printf("; %d run%s under \"Other runs\" (no figure of their own)", sum.runs_other,
               sum.runs_other == 1 ? "" : "s");
    printf("\n");
    if (sum.yardsticks_missing > 0)
        fprintf(stderr,
                "selectivbench report: warning: %d run%s drawn without yardsticks (ceiling, "
                "effective memory): %s\n",
                sum.yardsticks_missing, sum.yardsticks_missing == 1 ? "" : "s",
                sum.yardsticks_error);
}
