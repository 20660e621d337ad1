/*
 * cli.c - what every subcommand shares: flag parsing, one error line, thread counts.
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"

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
    fprintf(stderr, "selectivbench %s: error: name the checkpoint first: %s %s CKPT [flags]\n",
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
    int n = requested > 0 ? requested : omp_get_num_procs();
    omp_set_num_threads(n);
    return n;
}

int sb_cli_stdout_is_tty(void)
{
    return isatty(STDOUT_FILENO);
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
