/*
 * cmd_demo.c - `selectivbench demo`: the main job on a small default, in a few minutes.
 *
 *   1. the paper's grammar (1601 states) and its topological entropy, and how fast the
 *      paper's training set is generated;
 *   2. two task 2 samples, gaps visible;
 *   3. the tiny presets of tasks 1 (complexity) and 2 (noisy gaps) with five models
 *      (transformer, mamba, gla, gated_delta_net, delta_net: the last two differ in
 *      forgetting alone, a pair finding 1 compares), as sweeps in worker processes;
 *   4. a results table and the figures, written with the database into
 *      ./selectivbench-demo/, and what to run next.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/data_show.h"
#include "cli/presets.h"
#include "cli/run_options.h"
#include "cli/sweep_view.h"
#include "selectivbench/selectivbench.h"

#define DEMO_MAX_MODELS 16

static const sb_preset *find_preset(const char *name)
{
    for (int i = 0; sb_presets[i].name != NULL; i++)
        if (strcmp(sb_presets[i].name, name) == 0)
            return &sb_presets[i];
    return NULL;
}

/* Whether the registry has a model of this name. */
static int model_known(const char *name)
{
    for (int i = 0; i < sb_models_count(); i++) {
        sb_model_desc desc;
        if (sb_models_describe(i, &desc, NULL) == SB_OK && strcmp(desc.name, name) == 0)
            return 1;
    }
    return 0;
}

/* Runs one tiny preset with the chosen models and seeds. */
static int demo_sweep(const char *preset, char *const *models, int n_models, int max_seed,
                      const sb_config *cfg, sb_error *err)
{
    const sb_preset *p = find_preset(preset);
    if (p == NULL)
        return sb_error_set(err, SB_ERR_RUNTIME, "preset %s is not built in", preset);
    sb_sweep *s = NULL;
    sb_status st = sb_sweep_load_text(preset, p->text, p->len, &s, err);
    if (st != SB_OK)
        return st;
    int64_t total = sb_sweep_count(s);
    int64_t *runs = malloc((size_t)(total > 0 ? total : 1) * sizeof *runs), n_runs = 0;
    if (runs == NULL) {
        sb_sweep_free(s);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory listing %lld runs", (long long)total);
    }
    for (int64_t k = 0; k < total; k++) {
        int take = 0;
        for (int m = 0; m < n_models; m++)
            take |= sb_sweep_run_matches(s, k, "model", models[m]);
        char seed[16];
        int seed_ok = 0;
        for (int v = 1; v <= max_seed; v++) {
            snprintf(seed, sizeof seed, "%d", v);
            seed_ok |= sb_sweep_run_matches(s, k, "seed", seed);
        }
        if (take && seed_ok)
            runs[n_runs++] = k;
    }
    sb_cli_sweep_tally tally;
    sb_status status = sb_cli_sweep_run(s, preset, runs, n_runs, cfg, NULL, 0, &tally, err);
    free(runs);
    sb_sweep_free(s);
    if (status != SB_OK)
        return status;
    if (tally.failed > 0)
        return sb_error_set(err, SB_ERR_RUNTIME, "%d run%s of %s failed: see the logs in %s/logs",
                            tally.failed, tally.failed == 1 ? "" : "s", preset,
                            sb_config_text(cfg, "results"));
    return SB_OK;
}

/* Prints the tables of report.md (without the image lines). */
static void print_tables(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    char line[1024];
    int skip_header = 1;
    while (fgets(line, sizeof line, f) != NULL) {
        if (skip_header) { /* the first paragraph repeats what the demo already said */
            if (strncmp(line, "## ", 3) != 0)
                continue;
            skip_header = 0;
        }
        if (strncmp(line, "![", 2) == 0)
            continue;
        printf("   %s", line);
        if (strncmp(line, "## The paper's findings", 23) == 0)
            printf("\n   A demo's scale tests nothing: a few seeds of tiny models on little data. "
                   "The verdicts\n   below show the form; docs/claims.md has runs that test the "
                   "findings.\n");
    }
    fclose(f);
}

/* Parts 1 and 2: the paper's task (task 2's gaps) built and timed, two samples shown. */
static sb_status demo_task(int threads, sb_error *err)
{
    printf("1. The paper's task. Hidden states emit letters; 40 letters are ambiguous (40 states\n"
           "   each), so a model must track the state, not just the letter.\n");
    /* task 2: noisy gaps of 1 to 10 frames */
    const char *task2[][2] = {
        {"train_gap_max", "1.0"}, {"train_noise", "0.2"}, {"dataset_size", "20000"}};
    const double dataset_size = 20000;
    sb_config *tc = NULL;
    sb_status st = sb_config_create(&tc, err);
    for (size_t i = 0; st == SB_OK && i < sizeof task2 / sizeof *task2; i++)
        st = sb_config_set_key(tc, task2[i][0], task2[i][1], err);
    double t0 = sb_clock_seconds();
    sb_task *task = NULL;
    if (st == SB_OK)
        st = sb_task_from_config(tc, &task, err);
    sb_config_free(tc);
    if (st != SB_OK)
        return st;
    double t_grammar = sb_clock_seconds() - t0;
    sb_grammar_facts g;
    sb_grammar_get_facts(sb_task_grammar(task), &g);
    printf(
        "   %d states (= classifier outputs), %d transitions, topological entropy %.4f,\n"
        "   built with its TE in %.1f ms (the reference needs about 10 s plus 200 s for the TE)\n",
        g.states, g.transitions, g.topological_entropy, t_grammar * 1e3);
    uint64_t hash = 0;
    t0 = sb_clock_seconds();
    if ((st = sb_task_checksum(task, SB_SPLIT_TRAIN, threads, &hash, NULL, err)) != SB_OK) {
        sb_task_free(task);
        return st;
    }
    double rate = dataset_size / (sb_clock_seconds() - t0);
    printf("   training samples: %.0f per second here (the paper's 200 000-sample set in %.1f s;\n"
           "   the reference needs 3 to 5 s per sample)\n\n",
           rate, 200000.0 / rate);
    printf(
        "2. Two training samples of task 2 (after each symbol a gap of 1 to 10 noisy frames):\n");
    int64_t idx[2] = {0, 1};
    st = sb_data_show(task, SB_SPLIT_TRAIN, idx, 2, stdout, err);
    sb_task_free(task);
    return st;
}

static int demo_with(sb_config *cfg, int argc, char **argv)
{
    const char *out = "selectivbench-demo",
               *model_list = "transformer,mamba,gla,gated_delta_net,delta_net";
    int quick = 0;
    sb_option opts[16] = {
        {"out", SB_OPT_STRING, &out, "DIR",
         "where the database, logs and figures go (default ./selectivbench-demo)", 0},
        {"models", SB_OPT_STRING, &model_list, "LIST",
         "comma-separated models (default transformer,mamba,gla,gated_delta_net,delta_net)", 0},
        {"quick", SB_OPT_SWITCH, &quick, NULL, "task 1 only (for tests)", 0},
    };
    int n_opts = sb_options_count(opts, 16);
    sb_options_add_key(cfg, "seeds", NULL, opts, &n_opts);
    sb_options_add_key(cfg, "workers", NULL, opts, &n_opts);
    sb_options_add_key(cfg, "threads", NULL, opts, &n_opts);
    int rc = sb_cli_parse("demo", "[--out DIR] [--models LIST] [--seeds N] [--workers N]", opts,
                          n_opts, argc, argv, NULL, 0, NULL);
    if (rc >= 0)
        return rc;
    const int threads = sb_cli_threads(sb_run_flag(cfg, "threads"));
    const int seeds = sb_run_flag(cfg, "seeds"), workers = sb_run_flag(cfg, "workers");
    sb_error err = {0};
    char list_buf[512];
    snprintf(list_buf, sizeof list_buf, "%s", model_list);
    char *models[DEMO_MAX_MODELS];
    int n_models = 0;
    for (char *tok = strtok(list_buf, ","); tok != NULL && n_models < DEMO_MAX_MODELS;
         tok = strtok(NULL, ","))
        models[n_models++] = tok;
    for (int m = 0; m < n_models; m++)
        if (!model_known(models[m])) {
            const char *hint = sb_cli_closest_model(models[m]);
            if (hint != NULL)
                sb_error_set(&err, SB_ERR_INVALID,
                             "--models: unknown model '%s'; did you mean "
                             "'%s'? (%s models lists them)",
                             models[m], hint, sb_cli_program());
            else
                sb_error_set(&err, SB_ERR_INVALID,
                             "--models: unknown model '%s' (%s models lists "
                             "them)",
                             models[m], sb_cli_program());
            return sb_cli_fail("demo", &err);
        }
    double t_start = sb_clock_seconds();

    printf("== SelectivBench demo ==\n\n");
    if (demo_task(threads, &err) != SB_OK)
        return sb_cli_fail("demo", &err);
    printf("\n3. Training: the tiny presets of task 1 (grammar complexity) and task 2 (noisy\n"
           "   gaps), %d model%s x %d seed%s, %d runs at a time, results in %s/\n",
           n_models, n_models == 1 ? "" : "s", seeds, seeds == 1 ? "" : "s", workers, out);
    fflush(stdout);
    char db[4096];
    if (sb_results_path(out, db, sizeof db, &err) != SB_OK)
        return sb_cli_fail("demo", &err);
    char per_run[16];
    snprintf(per_run, sizeof per_run, "%d", threads / workers > 0 ? threads / workers : 1);
    if (sb_config_set_key(cfg, "results", out, &err) != SB_OK ||
        sb_config_set_key(cfg, "db", db, &err) != SB_OK ||
        sb_config_set_key(cfg, "threads", per_run, &err) != SB_OK)
        return sb_cli_fail("demo", &err);
    const char *presets[2] = {"tiny/task1_complexity", "tiny/task2"};
    for (int p = 0; p < (quick ? 1 : 2); p++)
        if (demo_sweep(presets[p], models, n_models, seeds, cfg, &err) != SB_OK)
            return sb_cli_fail("demo", &err);

    printf("\n4. Results (from %s):\n\n", db);
    char report_dir[4096];
    snprintf(report_dir, sizeof report_dir, "%s/report", out);
    sb_report_outcome sum;
    if (sb_report_write(db, report_dir, &sum, &err) != SB_OK)
        return sb_cli_fail("demo", &err);
    print_tables(sum.table_path);
    /* each Next line pastes whole into the shell the demo ran in: the program as it was run,
     * the description after a shell comment sign */
    const char *prog = sb_cli_program();
    printf("\nDone in %.0f s. Written:\n"
           "   %s                 the results database\n"
           "   %s/  %d figures as PNG, SVG and PDF, and report.md\n"
           "Next:\n"
           "   %s results --db %s   # these runs again\n"
           "   %s sweep configs/lite/task2.yaml --workers 2   # the paper's grid, scaled down\n"
           "   %s sweep configs/paper/task2.yaml --dry_run    # the paper's grid itself\n"
           "   %s train --help   # one run's flags; also: models, bench\n",
           sb_clock_seconds() - t_start, db, report_dir, sum.figures, prog, db, prog, prog, prog);
    return 0;
}

int sb_cmd_demo(int argc, char **argv)
{
    static const char *const demo_settings[] = {"workers", "2", NULL}; /* two runs at a time */
    return sb_run_with_settings("demo", demo_settings, demo_with, argc, argv);
}
