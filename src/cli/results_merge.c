/* results_merge.c - `selectivbench results merge SRC... --db DST` (see results_merge.h). Each
 * source (a database file, or a results folder holding one) is merged in turn, in one
 * transaction each; a line per source says what happened, a line per conflict names the run.
 * A source that cannot be merged stops the command with its error (the sources before it
 * stay merged: merging is idempotent, so the same command can simply be run again). */
#include "cli/results_merge.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "selectivbench/selectivbench.h"

#define MERGE_MAX_SOURCES 4096

int sb_cli_results_wants_merge(int argc, char **argv)
{
    return argc > 2 && strcmp(argv[2], "merge") == 0;
}

static void print_acc(double acc)
{
    if (isnan(acc))
        fprintf(stderr, "no test accuracy");
    else
        fprintf(stderr, "test acc %.4f", acc);
}

static void on_conflict(const char *run_hash, const char *model, const char *status,
                        double test_acc, const char *source_path, const char *source_status,
                        double source_test_acc, void *user)
{
    const char *db_path = user;
    fprintf(stderr, "selectivbench results merge: conflict: run %s (%s) %s with ", run_hash,
            model != NULL ? model : "?", status);
    print_acc(test_acc);
    fprintf(stderr, " in %s, %s with ", db_path, source_status);
    print_acc(source_test_acc);
    fprintf(stderr, " in %s; kept %s's\n", source_path, db_path);
}

int sb_cmd_results_merge(int argc, char **argv)
{
    const char *db_path = NULL;
    sb_option opts[] = {
        {"db", SB_OPT_STRING, &db_path, "PATH",
         "the database merged into (created if missing); required", 0},
    };
    static const char *sources[MERGE_MAX_SOURCES];
    int n_sources = 0;
    /* `results merge ...`: parse from "merge" on, as if it were the command */
    int rc = sb_cli_parse("results merge", "SRC.db|DIR ... --db ALL.db", opts, 1, argc - 1,
                          argv + 1, sources, MERGE_MAX_SOURCES, &n_sources);
    if (rc >= 0)
        return rc;
    sb_error err = {0};
    if (db_path == NULL || n_sources == 0) {
        sb_error_set(&err, SB_ERR_INVALID,
                     "give the databases to merge and where: results merge A.db B.db ... --db "
                     "ALL.db");
        return sb_cli_fail("results merge", &err);
    }
    sb_results *db = NULL;
    if (sb_results_open(db_path, &db, &err) != SB_OK)
        return sb_cli_fail("results merge", &err);
    int64_t conflicts = 0;
    for (int i = 0; i < n_sources; i++) {
        /* a results folder stands for its database */
        char in_folder[4096];
        const char *src = sources[i];
        struct stat st;
        if (stat(src, &st) == 0 && S_ISDIR(st.st_mode)) {
            if (sb_results_path(src, in_folder, sizeof in_folder, &err) != SB_OK)
                break;
            src = in_folder;
        }
        sb_results_merge_tally t;
        if (sb_results_merge(db, src, &t, on_conflict, (void *)db_path, &err) != SB_OK)
            break;
        conflicts += t.conflicts;
        printf("merged %s into %s: %lld added, %lld replaced (further along there), %lld "
               "already there, %lld kept (further along here), %lld conflicting\n",
               src, db_path, (long long)t.added, (long long)t.replaced, (long long)t.same,
               (long long)t.kept, (long long)t.conflicts);
    }
    sb_results_close(db);
    if (err.msg[0] != '\0')
        return sb_cli_fail("results merge", &err);
    if (conflicts > 0) {
        fprintf(stderr,
                "selectivbench results merge: %lld runs ended differently in two databases "
                "(listed above); each kept the first database's result\n",
                (long long)conflicts);
        return 1;
    }
    return 0;
}
