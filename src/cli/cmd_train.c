/* cmd_train.c - `selectivbench train`: one run of the reference's train.py. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/run_options.h"
#include "core/json_writer.h"
#include "exp/results.h"
#include "exp/run_store.h"
#include "core/timer.h"
#include "train/trainer.h"
#include "cli/train_output.h"
#include "train/run_setup.h"

/* Progress printing and database recording share the trainer's callback. */
typedef struct train_sinks {
    sb_train_output out;
    sb_run_record rec;
    int warned; /* a database write failed during the run (reported once) */
} train_sinks;

static void train_event(const sb_train_event *ev, void *user)
{
    train_sinks *s = user;
    sb_train_output_event(ev, &s->out);
    sb_error err = {0};
    if (sb_run_record_event(&s->rec, ev, &err) != SB_OK && !s->warned) {
        fprintf(stderr, "selectivbench: warning: results database: %s (the run goes on)\n",
                err.msg);
        s->warned = 1;
    }
}

/* The stored result of a finished run, as train would have printed it. */
static void print_stored(const sb_run_row *row, int json)
{
    if (json) {
        sb_json j;
        sb_json_init(&j, stdout, 0);
        sb_json_object_begin(&j);
        sb_json_key(&j, "hash");
        sb_json_string(&j, row->hash);
        sb_json_key(&j, "status");
        sb_json_string(&j, row->status);
        sb_json_key(&j, "test_acc");
        sb_json_double(&j, row->metrics.test_acc);
        sb_json_key(&j, "test_loss");
        sb_json_double(&j, row->metrics.test_loss);
        sb_json_key(&j, "train_acc");
        sb_json_double(&j, row->metrics.train_acc);
        sb_json_key(&j, "train_loss");
        sb_json_double(&j, row->metrics.train_loss);
        sb_json_key(&j, "params");
        sb_json_int(&j, row->params);
        sb_json_key(&j, "tokens_per_s");
        sb_json_double(&j, row->metrics.tokens_per_s);
        sb_json_key(&j, "wall_s");
        sb_json_double(&j, row->metrics.wall_s);
        sb_json_key(&j, "cached");
        sb_json_bool(&j, 1);
        sb_json_object_end(&j);
        printf("\n");
        return;
    }
    printf("run %s already finished on %s: test acc %.4f, test loss %.4f (use --force to train it "
           "again)\n",
           row->hash, row->finished_at != NULL ? row->finished_at : "?", row->metrics.test_acc,
           row->metrics.test_loss);
}

int sb_cmd_train(int argc, char **argv)
{
    sb_run_flags rf;
    sb_option opts[SB_RUN_MAX_OPTIONS + 4];
    int n = 0;
    sb_run_options_add(&rf, opts, &n);
    int force = 0;
    int64_t inject_nan_at = 0;
    const char *db_path = NULL;
    opts[n++] = (sb_option){"force", SB_OPT_SWITCH, &force, 0, 1, NULL, NULL,
                            "train again even if the results database has this run finished", 0};
    opts[n++] = (sb_option){"db", SB_OPT_STRING, &db_path, 0, 0, NULL, "PATH",
                            "results database (default DIR/" SB_RUN_STORE_DB_NAME ")", 0};
    opts[n++] = (sb_option){"inject_nan_at", SB_OPT_INT64, &inject_nan_at, 0, 1e15, NULL, "K",
                            "testing aid: treat micro-batch K's loss as NaN (default 0: off)", 0};
    int rc = sb_cli_parse("train", "[train.py flags]", opts, n, argc, argv, NULL, 0, NULL);
    if (rc >= 0)
        return rc;
    int threads = sb_cli_threads(rf.threads);
    sb_error err = {0};
    if (sb_run_config_check(&rf.cfg, &err) != SB_OK)
        return sb_cli_fail("train", &err);
    const sb_run_config *cfg = &rf.cfg;

    if (rf.print_hashes)
        return sb_cli_print_hashes(cfg);

    if (rf.only_createset) {
        sb_task *task = NULL;
        if (sb_task_create(&cfg->task, &task, &err) != SB_OK)
            return sb_cli_fail("train", &err);
        printf("task built: %d states, TE %.4f (--only_createset: samples are generated on the "
               "fly, nothing to write)\n",
               task->grammar->n_states, task->grammar->topological_entropy);
        sb_task_free(task);
        return 0;
    }

    /* the results folder, its checkpoint and its database */
    char ckpt[4096], db[4096];
    if (sb_run_store_make_dir(rf.results_dir, &err) != SB_OK)
        return sb_cli_fail("train", &err);
    if (rf.ckpt != NULL)
        snprintf(ckpt, sizeof ckpt, "%s", rf.ckpt);
    else if (sb_run_store_ckpt_path(rf.results_dir, cfg, ckpt, sizeof ckpt, rf.save_model, &err) !=
             SB_OK)
        return sb_cli_fail("train", &err);
    if (db_path != NULL)
        snprintf(db, sizeof db, "%s", db_path);
    else if (sb_run_store_db_path(rf.results_dir, db, sizeof db, &err) != SB_OK)
        return sb_cli_fail("train", &err);

    train_sinks sinks;
    memset(&sinks, 0, sizeof sinks);
    int finished = 0;
    sb_run_row stored;
    memset(&stored, 0, sizeof stored);
    if (sb_run_record_begin(&sinks.rec, db, cfg, ckpt, force, &finished, &stored, &err) != SB_OK)
        return sb_cli_fail("train", &err);
    if (finished) {
        print_stored(&stored, rf.json);
        sb_results_run_row_clear(&stored);
        sb_run_record_close(&sinks.rec);
        return 0;
    }

    sinks.rec.threads = threads;
    sb_train_output_init(&sinks.out, cfg, rf.quiet, rf.json, threads);
    sb_train_options topt = {
        .threads = threads,
        .ckpt_path = (rf.save_model || cfg->test_pretrained || rf.continued_training) ? ckpt : NULL,
        .resume = rf.continued_training,
        .mem_budget_gb = rf.mem_budget,
        .callback = train_event,
        .user = &sinks,
        .inject_nan_at = inject_nan_at,
    };
    sb_train_result res;
    sb_status st = sb_train(cfg, &topt, &res, &err);
    sb_error db_err = {0};
    if (sb_run_record_end(&sinks.rec, &res, &db_err) != SB_OK)
        fprintf(stderr, "selectivbench train: warning: %s\n", db_err.msg);
    sb_train_output_finish(&sinks.out, cfg, &res, topt.ckpt_path, sinks.rec.ceiling,
                           sinks.rec.effective_memory);
    sb_train_output_close(&sinks.out);
    if (st != SB_OK)
        return sb_cli_fail("train", &err);
    return 0;
}
