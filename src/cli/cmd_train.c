/* cmd_train.c - `selectivbench train`: one run of the reference's train.py. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "run_options.h"
#include "selectivbench/json_writer.h"
#include "selectivbench/timer.h"
#include "selectivbench/trainer.h"
#include "train_output.h"

/* Creates dir (one level) if missing; SB_ERR_IO naming it when that fails. */
sb_status sb_cli_make_dir(const char *dir, sb_error *err)
{
    struct stat sbuf;
    if (stat(dir, &sbuf) == 0) {
        if (!S_ISDIR(sbuf.st_mode))
            return sb_error_set(err, SB_ERR_IO, "'%s' exists and is not a folder", dir);
        return SB_OK;
    }
    if (mkdir(dir, 0777) != 0)
        return sb_error_set(err, SB_ERR_IO, "cannot create the results folder '%s': %s", dir,
                            strerror(errno));
    return SB_OK;
}

sb_status sb_cli_default_ckpt(const char *results_dir, const sb_run_config *cfg, char *out,
                              size_t size, int create, sb_error *err)
{
    char dir[3072];
    if (snprintf(dir, sizeof dir, "%s/checkpoints", results_dir) >= (int)sizeof dir)
        return sb_error_set(err, SB_ERR_INVALID, "results path '%s' is too long", results_dir);
    if (create) {
        sb_status st = sb_cli_make_dir(results_dir, err);
        if (st == SB_OK)
            st = sb_cli_make_dir(dir, err);
        if (st != SB_OK)
            return st;
    }
    char hash[17];
    sb_run_config_hash(cfg, 1, hash);
    int len = snprintf(out, size, "%s/%s.safetensors", dir, hash);
    if (len < 0 || (size_t)len >= size)
        return sb_error_set(err, SB_ERR_INVALID, "results path '%s' is too long", results_dir);
    return SB_OK;
}

int sb_cmd_train(int argc, char **argv)
{
    sb_run_flags rf;
    sb_option opts[SB_RUN_MAX_OPTIONS];
    int n = 0;
    sb_run_options_add(&rf, opts, &n);
    int rc = sb_cli_parse("train", "[train.py flags]", opts, n, argc, argv, NULL, 0, NULL);
    if (rc >= 0)
        return rc;
    int threads = sb_cli_threads(rf.threads);
    sb_error err = {0};
    if (sb_run_options_finish(&rf, &err) != SB_OK ||
        sb_run_config_check(&rf.cfg, &err) != SB_OK)
        return sb_cli_fail("train", &err);
    const sb_run_config *cfg = &rf.cfg;

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

    char ckpt[4096];
    if (rf.ckpt != NULL) {
        snprintf(ckpt, sizeof ckpt, "%s", rf.ckpt);
    } else if (sb_cli_default_ckpt(rf.results_dir, cfg, ckpt, sizeof ckpt, rf.save_model, &err) !=
               SB_OK) {
        return sb_cli_fail("train", &err);
    }

    sb_train_output out;
    sb_train_output_init(&out, cfg, rf.quiet, rf.json, threads);
    sb_train_options topt = {
        .threads = threads,
        .ckpt_path = (rf.save_model || cfg->test_pretrained || rf.continued_training) ? ckpt : NULL,
        .resume = rf.continued_training,
        .mem_budget_gb = rf.mem_budget,
        .callback = sb_train_output_event,
        .user = &out,
    };
    sb_train_result res;
    sb_status st = sb_train(cfg, &topt, &res, &err);
    sb_train_output_finish(&out, cfg, &res, topt.ckpt_path);
    if (st != SB_OK)
        return sb_cli_fail("train", &err);
    return 0;
}
