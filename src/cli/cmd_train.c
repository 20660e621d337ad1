/* cmd_train.c - `selectivbench train`: one run of the reference's train.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/mpi_comm.h"
#include "cli/run_options.h"
#include "cli/signals.h"
#include "cli/train_mpi.h"
#include "cli/train_output.h"
#include "selectivbench/selectivbench.h"

/* A results database write failed; the run goes on. */
static void warn_database(const char *msg, int at_end, void *user)
{
    (void)user;
    if (at_end)
        fprintf(stderr, "selectivbench train: warning: %s\n", msg);
    else
        fprintf(stderr, "selectivbench: warning: results database: %s (the run goes on)\n", msg);
}

/* The stored result of a finished run, as train would have printed it. */
static void print_stored(const sb_train_outcome *res, int json)
{
    if (json) {
        sb_jw *j = sb_jw_open(stdout, 0);
        if (j == NULL)
            return;
        sb_jw_object_begin(j);
        sb_train_output_json_result(j, res);
        sb_jw_key(j, "cached");
        sb_jw_bool(j, 1);
        sb_jw_object_end(j);
        sb_jw_close(j);
        printf("\n");
        return;
    }
    printf("run %s already finished on %s: test acc %.4f, test loss %.4f (use --force to train it "
           "again)\n",
           res->run_hash, res->finished_at[0] != '\0' ? res->finished_at : "?", res->test_acc,
           res->test_loss);
}

/* Prints s as one shell word: as it is when it is plain, else in single quotes. */
static void print_shell_word(FILE *f, const char *s)
{
    int plain = s[0] != '\0';
    for (const char *c = s; *c != '\0' && plain; c++)
        plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=+.,:/@%",
                       *c) != NULL;
    if (plain) {
        fputs(s, f);
        return;
    }
    fputc('\'', f);
    for (const char *c = s; *c != '\0'; c++)
        if (*c == '\'')
            fputs("'\\''", f);
        else
            fputc(*c, f);
    fputc('\'', f);
}

/* The one line of a run stopped by a signal: where it stopped and the command that
 * continues it (this command's flags, with --resume), or that it starts over without a
 * checkpoint. */
static void print_interrupted(const sb_train_outcome *res, int argc, char **argv)
{
    int has_resume = 0;
    for (int i = 2; i < argc; i++)
        has_resume |=
            strcmp(argv[i], "--resume") == 0 || strcmp(argv[i], "--continued_training") == 0;
    fprintf(stderr, "selectivbench train: run %s interrupted at update %lld", res->run_hash,
            (long long)res->steps);
    if (res->checkpoint[0] == '\0') {
        fprintf(stderr, " without a checkpoint (--save_model False); resume with the same "
                        "command: it trains again from the start\n");
        return;
    }
    fprintf(stderr, " (checkpoint %s); resume with: ", res->checkpoint);
    if (sb_mpi_size() > 1) /* (or any -np that divides --grad_shards: the same weights) */
        fprintf(stderr, "mpirun -np %d ", sb_mpi_size());
    print_shell_word(stderr, sb_cli_program());
    fprintf(stderr, " train");
    for (int i = 2; i < argc; i++) {
        fputc(' ', stderr);
        print_shell_word(stderr, argv[i]);
    }
    fprintf(stderr, "%s\n", has_resume ? "" : " --resume");
}

/* --only_createset: build the task and say so. */
static int only_createset(const sb_config *cfg)
{
    sb_error err = {0};
    sb_task *task = NULL;
    if (sb_task_from_config(cfg, &task, &err) != SB_OK)
        return sb_cli_fail("train", &err);
    sb_task_facts facts;
    sb_task_get_facts(task, &facts);
    printf("task built: %d states, TE %.4f (--only_createset: samples are generated on the "
           "fly, nothing to write)\n",
           facts.states, facts.topological_entropy);
    sb_task_free(task);
    return 0;
}

/* Under mpirun, ranks other than 0 train in silence: rank 0 prints (and records) the run.
 * Their failures are rank 0's too (the same configuration and the same numbers), or come
 * from MPI, which reports them itself. */
static int quiet_rank(void)
{
    return sb_mpi_rank() != 0;
}

static int fail(const sb_error *err)
{
    if (quiet_rank())
        return sb_status_exit_code(err->status);
    return sb_cli_fail("train", err);
}

/* The configuration's --grad_shards (1 when it cannot be read). */
static int grad_shards_of(const sb_config *cfg)
{
    char buf[32];
    sb_error err = {0};
    if (sb_config_get_key(cfg, "grad_shards", buf, sizeof buf, &err) != SB_OK)
        return 1;
    return atoi(buf);
}

/* Data-parallel runs: where the time went (stderr, so that --json stays one document). */
static void print_world(const sb_train_outcome *res, int grad_shards)
{
    if (quiet_rank() || sb_mpi_size() <= 1 || !(res->wall_s > 0))
        return;
    fprintf(stderr,
            "selectivbench train: data-parallel over %d processes, %d gradient shards per "
            "micro-batch: %.3f s of %.3f s in the all-gather (%.1f%%), %.0f tokens/s\n",
            sb_mpi_size(), grad_shards, res->gather_s, res->wall_s,
            100.0 * res->gather_s / res->wall_s, res->tokens_per_s);
}

static int train_with_flags(sb_run_flags *rf, int argc, char **argv)
{
    sb_option opts[SB_RUN_MAX_OPTIONS];
    int n = 0;
    sb_error err = {0};
    if (sb_run_options_add(rf, SB_KEYS_TRAIN, opts, &n, &err) != SB_OK)
        return sb_cli_fail("train", &err);
    int rc = sb_cli_parse("train", "[train.py flags]", opts, n, argc, argv, NULL, 0, NULL);
    if (rc >= 0)
        return rc;
    sb_config *cfg = rf->config;
    int threads = sb_cli_threads(sb_run_flag(cfg, "threads"));
    const int grad_shards = grad_shards_of(cfg);
    char world_msg[512];
    if (sb_train_mpi_check(grad_shards, world_msg, sizeof world_msg) != 0) {
        if (!quiet_rank())
            fprintf(stderr, "selectivbench train: error: %s\n", world_msg);
        return 2;
    }
    /* the configuration is checked once, by the library: here only for the two answers
     * that do not train */
    if ((sb_run_flag(cfg, "print_hashes") || sb_run_flag(cfg, "only_createset")) &&
        sb_config_check(cfg, &err) != SB_OK)
        return fail(&err);
    if (sb_run_flag(cfg, "print_hashes"))
        return sb_cli_print_config_hashes(cfg);
    if (sb_run_flag(cfg, "only_createset"))
        return only_createset(cfg);
    const int json = sb_run_flag(cfg, "json");

    sb_train_output out;
    sb_train_output_init(&out, cfg, sb_run_flag(cfg, "quiet") || quiet_rank(),
                         json && !quiet_rank(), threads);
    out.log_every = sb_config_number(cfg, "progress_every");
    /* from here on, SIGINT and SIGTERM stop the run at its next update (signals.h) */
    sb_cli_signals_install(quiet_rank() ? ""
                                        : "selectivbench train: stopping after the current "
                                          "update, with a checkpoint (a second signal quits "
                                          "at once)\n");
    /* the threads as resolved here (sb_default_threads: affinity, quota, Slurm) */
    if (sb_run_set(cfg, "threads", &err, "%d", threads) != SB_OK)
        return fail(&err);
    sb_train_settings settings = {
        .progress = sb_train_output_progress,
        .user = &out,
        .on_begin = sb_train_output_begin,
        .on_start = sb_train_output_start,
        .on_db_warning = warn_database,
        .should_stop = sb_cli_stop_requested,
    };
    sb_train_mpi_settings(&settings);
    sb_train_outcome res;
    sb_status st = sb_train_config(cfg, &settings, &res, &err);
    if (res.cached) {
        if (!quiet_rank())
            print_stored(&res, json);
        return 0;
    }
    if (res.locked_by != 0) { /* another process trains it: try again later */
        fail(&err);
        return SB_CLI_EXIT_TEMPFAIL;
    }
    /* refused before it began (the configuration's check, the results folder or database
     * could not be set up): the one error line */
    if (res.status == SB_RUN_NONE || (st != SB_OK && !out.begun))
        return fail(&err);
    sb_train_output_finish(&out, &res, res.checkpoint[0] != '\0' ? res.checkpoint : NULL);
    sb_train_output_close(&out);
    print_world(&res, grad_shards);
    if (st != SB_OK)
        return fail(&err);
    if (res.status == SB_RUN_INTERRUPTED) {
        if (quiet_rank()) /* stopped with rank 0, which may be the one the signal reached */
            return sb_cli_stop_signal() != 0 ? sb_cli_signal_exit_code(sb_cli_stop_signal())
                                             : SB_CLI_EXIT_TEMPFAIL;
        print_interrupted(&res, argc, argv);
        return sb_cli_signal_exit_code(sb_cli_stop_signal());
    }
    return 0;
}

int sb_cmd_train(int argc, char **argv)
{
    sb_run_flags rf = {0};
    int rc = train_with_flags(&rf, argc, argv);
    sb_run_flags_free(&rf);
    return rc;
}
