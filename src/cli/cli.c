/*
 * cli.c - what every subcommand shares: flag parsing, one error line, thread counts.
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/run_options.h"

int sb_cli_fail(const char *cmd, const sb_error *err)
{
    fprintf(stderr, "selectivbench %s: error: %s\n", cmd,
            err->msg[0] ? err->msg : sb_status_name(err->status));
    return sb_status_exit_code(err->status);
}

int sb_cli_parse(const char *cmd, const char *usage, sb_option *opts, int n_opts, int argc,
                 char **argv, const char **positional, int max_positional, int *n_positional)
{
    sb_error err = {0};
    int help = 0;
    int dummy_n = 0;
    const char *dummy[1];
    if (positional == NULL) {
        positional = dummy;
        max_positional = 0;
        n_positional = &dummy_n;
    }
    sb_status st = sb_options_parse(opts, n_opts, argc, argv, 2, positional, max_positional,
                                    n_positional, &help, &err);
    if (help) {
        printf("usage: selectivbench %s %s\n\nflags:\n", cmd, usage);
        sb_options_print_help(stdout, opts, n_opts);
        return 0;
    }
    if (st != SB_OK)
        return sb_cli_fail(cmd, &err);
    return -1;
}

int sb_cli_checkpoint_first(const char *cmd, int argc, char **argv, const char **ckpt)
{
    if (argc >= 3 && strncmp(argv[2], "--", 2) != 0) {
        *ckpt = argv[2];
        return -1;
    }
    if (argc >= 3 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
        *ckpt = NULL; /* the caller prints its flags (sb_cli_checkpoint_help) */
        return -1;
    }
    fprintf(stderr,
            "selectivbench %s: error: name the checkpoint first, a run id or a file: "
            "%s %s RUN|CKPT [flags]\n",
            cmd, sb_cli_program(), cmd);
    return 2;
}

int sb_cli_checkpoint_help(const char *cmd, const char *usage, sb_option *opts, int n_opts,
                           int argc, char **argv)
{
    int rc = sb_cli_parse(cmd, usage, opts, n_opts, argc, argv, NULL, 0, NULL);
    if (rc == 0)
        printf("\nThe defaults shown are train's: a checkpoint's recorded configuration replaces "
               "them, and a flag given overrides that.\n");
    return rc;
}

/* The value of flag --name in argv[first..] ("--name V" or "--name=V"; the last one
 * given), or NULL. */
static const char *flag_value(int argc, char **argv, int first, const char *name)
{
    const char *value = NULL;
    size_t len = strlen(name);
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0 || strncmp(a + 2, name, len) != 0)
            continue;
        if (a[2 + len] == '=')
            value = a + 3 + len;
        else if (a[2 + len] == '\0' && i + 1 < argc)
            value = argv[++i];
    }
    return value;
}

static int is_regular_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Whether text is meant as a run id: 1 to 16 lowercase hex digits (sb_results_resolve_run
 * says when there are too few). */
static int looks_like_run_id(const char *text)
{
    size_t len = strlen(text);
    return len >= 1 && len <= 16 && strspn(text, "0123456789abcdef") == len;
}

/* The checkpoint a run recorded: the stored path when the file is there, else the file of
 * that name in the database's folder (a run trained from another working directory, or a
 * results folder moved), else the stored path (loading it says it is missing). */
static void locate_checkpoint(const char *stored, const char *db_path, char *out, size_t size)
{
    snprintf(out, size, "%s", stored);
    if (is_regular_file(stored))
        return;
    const char *name = strrchr(stored, '/');
    name = name != NULL ? name + 1 : stored;
    const char *slash = strrchr(db_path, '/');
    char moved[8192];
    int len = slash != NULL ? snprintf(moved, sizeof moved, "%.*s/checkpoints/%s",
                                       (int)(slash - db_path), db_path, name)
                            : snprintf(moved, sizeof moved, "checkpoints/%s", name);
    if (len > 0 && (size_t)len < size && is_regular_file(moved))
        snprintf(out, size, "%s", moved);
}

/* The run with id `id` in the database at db_path: its hash, checkpoint and configuration. */
static sb_status find_run(const char *id, const char *db_path, char *ckpt, size_t size,
                          char run_id[17], sb_config **run_config, sb_error *err)
{
    sb_results *db = NULL;
    sb_status st = sb_results_open_readonly(db_path, &db, err);
    if (st == SB_OK && (st = sb_results_resolve_run(db, id, run_id, err)) != SB_OK) {
        char msg[SB_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err->msg);
        sb_error_set(err, st, "%s (results database %s)", msg, db_path);
    }
    sb_result_row row;
    int found = 0;
    if (st == SB_OK && (st = sb_results_find(db, run_id, &row, &found, err)) == SB_OK &&
        row.checkpoint[0] == '\0')
        st = sb_error_set(err, SB_ERR_INVALID,
                          "run %s has no checkpoint (trained with --save_model False); train it "
                          "again with --force to get one",
                          run_id);
    if (st == SB_OK)
        locate_checkpoint(row.checkpoint, db_path, ckpt, size);
    if (st == SB_OK)
        st = sb_results_run_config(db, run_id, run_config, err);
    sb_results_close(db);
    return st;
}

int sb_cli_run_or_checkpoint(const char *cmd, const char *arg, int argc, char **argv, char *ckpt,
                             size_t size, char run_id[17], sb_config **run_config)
{
    run_id[0] = '\0';
    *run_config = NULL;
    snprintf(ckpt, size, "%s", arg);
    if (is_regular_file(arg) || !looks_like_run_id(arg))
        return -1;
    /* a run id: in the database of --db, else of --results (default results/) */
    char db_buf[4096], folder_db[4096];
    const char *db_path = flag_value(argc, argv, 3, "db");
    sb_error err = {0};
    if (db_path != NULL) {
        db_path = sb_cli_results_db(db_path, folder_db, sizeof folder_db);
    } else {
        const char *dir = flag_value(argc, argv, 3, "results");
        if (sb_results_path(dir != NULL ? dir : "results", db_buf, sizeof db_buf, &err) != SB_OK)
            return sb_cli_fail(cmd, &err);
        db_path = db_buf;
    }
    if (!is_regular_file(db_path)) {
        sb_error_set(&err, SB_ERR_IO,
                     "'%s' is neither a checkpoint file nor a run id of a results database: "
                     "there is no database at '%s' (give --results DIR or --db PATH)",
                     arg, db_path);
        return sb_cli_fail(cmd, &err);
    }
    if (find_run(arg, db_path, ckpt, size, run_id, run_config, &err) != SB_OK)
        return sb_cli_fail(cmd, &err);
    return -1;
}

int sb_cli_print_config_hashes(const sb_config *cfg)
{
    char run_hash[17], training_hash[17];
    sb_config_run_hash(cfg, run_hash);
    sb_config_training_hash(cfg, training_hash);
    printf("%s %s\n", run_hash, training_hash);
    return 0;
}

int sb_cli_threads(int requested)
{
    int n = requested > 0 ? requested : sb_default_threads();
    omp_set_num_threads(n);
    return n;
}

int sb_cli_stdout_is_tty(void)
{
    return isatty(STDOUT_FILENO);
}

int sb_cli_repeated(int argc, char **argv, const char *flag, const char **out, int max)
{
    const size_t len = strlen(flag);
    int n = 0;
    for (int i = 2; i < argc; i++) {
        const char *v = strcmp(argv[i], flag) == 0 && i + 1 < argc ? argv[i + 1]
                        : strncmp(argv[i], flag, len) == 0 && argv[i][len] == '='
                            ? argv[i] + len + 1
                            : NULL;
        if (v != NULL && n++ < max)
            out[n - 1] = v;
    }
    return n;
}

const char *sb_cli_results_db(const char *path, char *buf, size_t size)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return path;
    size_t len = strlen(path);
    int has_slash = len > 0 && path[len - 1] == '/';
    snprintf(buf, size, "%s%s" SB_RESULTS_DB_NAME, path, has_slash ? "" : "/");
    return buf;
}

int sb_run_with_settings(const char *cmd, const char *const *presets,
                         int (*body)(sb_config *cfg, int argc, char **argv), int argc, char **argv)
{
    sb_config *cfg = NULL;
    sb_error err = {0};
    if (sb_run_settings_new(&cfg, presets, &err) != SB_OK)
        return sb_cli_fail(cmd, &err);
    int rc = body(cfg, argc, argv);
    sb_config_free(cfg);
    return rc;
}

int sb_cli_checkpoint_flags(const char *cmd, const char *arg, sb_option *opts, int n_opts, int argc,
                            char **argv, sb_config *cfg, char *ckpt, size_t size, char run_id[17])
{
    sb_config *recorded = NULL;
    sb_error err = {0};
    int rc = sb_cli_run_or_checkpoint(cmd, arg, argc, argv, ckpt, size, run_id, &recorded);
    if (rc >= 0)
        return rc;
    /* the recorded configuration, then the flags set its keys by name */
    sb_status st = recorded != NULL ? SB_OK : sb_checkpoint_config(ckpt, &recorded, &err);
    if (st == SB_OK)
        st = sb_config_assign(cfg, recorded, &err);
    sb_config_free(recorded);
    if (st != SB_OK && st != SB_ERR_INVALID) /* missing or corrupt file */
        return sb_cli_fail(cmd, &err);
    /* parse from argv[3]: shift so that sb_cli_parse's first argument is argv[3] */
    return sb_cli_parse(cmd, "RUN|CKPT [flags]", opts, n_opts, argc - 1, argv + 1, NULL, 0, NULL);
}

int sb_cli_db_exists(const char *cmd, const char *db_path)
{
    FILE *probe = fopen(db_path, "rb");
    if (probe != NULL) {
        fclose(probe);
        return -1;
    }
    sb_error err = {0};
    sb_error_set(&err, SB_ERR_IO,
                 "no results database at '%s' (train or sweep first, or give --db PATH)", db_path);
    return sb_cli_fail(cmd, &err);
}

void sb_cli_json_count(sb_jw *j, const char *key, int64_t v)
{
    sb_jw_key(j, key);
    if (v >= 0)
        sb_jw_int(j, v);
    else
        sb_jw_null(j);
}
