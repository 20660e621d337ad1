/*
 * cmd_ceiling.c - `selectivbench ceiling [train flags]`: the ideal observer of a task and
 * the window observers (sb_ceiling_compute in the public header, docs/reading-results.md).
 *
 * Takes every flag `train` takes, so a train command line becomes a ceiling command line
 * by changing the word; only the task flags matter.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "selectivbench/selectivbench.h"

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/data_show.h"
#include "cli/run_options.h"

static void print_table(const sb_task *task, const sb_ceiling *c, int split, int threads)
{
    sb_data_print_task(task, stdout);
    printf("\nideal observer of the %s split: %lld samples, %lld elements\n",
           sb_split_name((sb_split)split), (long long)c->n_samples, (long long)c->n_elements);
    printf("  expected_acc  %.4f   (the Bayes accuracy: mean of the largest posterior)\n",
           c->expected_acc);
    printf("  realized_acc  %.4f   (argmax == true state; a model's test accuracy on these "
           "samples\n                         scatters around its own expectation by about "
           "%.4f)\n",
           c->realized_acc, c->expected_acc_se);
    if (c->segmented)
        printf("  Distractor gaps: the observer is told which frames are distractors and sees "
               "each\n  element's own ones, an upper bound for any model scored by the window "
               "metric.\n"
               "  bayes_model_acc %.4f (realized %.4f): a model that outputs the exact "
               "posterior at\n  every frame without being told which frames are distractors "
               "(what training\n  converges to with unlimited capacity and data).\n",
               c->bayes_model_acc, c->bayes_model_realized_acc);
    else
        printf("  Zero and noisy gaps carry no information about the state: no model can "
               "beat this\n  on these samples.\n");
    printf("\nwindow observers (only the symbols of the last k elements; the prior from %lld "
           "training samples):\n       k   accuracy\n",
           (long long)c->prior_samples);
    for (int w = 0; w < c->n_windows; w++)
        printf("  %6d   %.4f%s\n", sb_ceiling_window_size(w), c->window_acc[w],
               w == 0 ? "   (the prior alone: the floor)" : "");
    double demand = sb_ceiling_memory_demand(c);
    if (isfinite(demand))
        printf("\nmemory demand: %.1f elements (the window that comes within 0.01 of the "
               "ceiling)\n",
               demand);
    else
        printf("\nmemory demand: beyond %d elements (no window computed comes within 0.01 of "
               "the ceiling)\n",
               sb_ceiling_window_size(c->n_windows - 1));
    printf("\nA model at accuracy a behaves like the observer whose curve reaches a: its "
           "effective\nmemory in elements. Computed in %.2f s on %d thread%s.\n",
           c->seconds, threads, threads == 1 ? "" : "s");
}

#define MAX_LENGTHS 16

/* "50,100,200" into lengths[]; one error line for anything else. */
static int parse_lengths(const char *text, int *lengths, int *n)
{
    *n = 0;
    const char *p = text;
    while (*p != '\0') {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno != 0 || v < 2 || v > 100000 || *n == MAX_LENGTHS ||
            (*end != ',' && *end != '\0')) {
            fprintf(stderr,
                    "selectivbench ceiling: --lengths '%s': give up to %d sample lengths of 2 "
                    "to 100000 elements separated by commas, e.g. --lengths 25,100,400\n",
                    text, MAX_LENGTHS);
            return -1;
        }
        lengths[(*n)++] = (int)v;
        p = *end == ',' ? end + 1 : end;
    }
    if (*n == 0) {
        fprintf(stderr, "selectivbench ceiling: --lengths is empty; e.g. --lengths 25,100,400\n");
        return -1;
    }
    return 0;
}

/* The ceiling of the task at each length (train and test samples of L elements, strings up
 * to L): the memory demand as the length grows, one row per length. */
static sb_status by_length(const sb_config *base, const int *lengths, int n_lengths, int json,
                           sb_error *err)
{
    sb_config *cfg = NULL;
    sb_status st = sb_config_copy(base, &cfg, err);
    if (!json)
        printf("the ideal observer by sample length (strings up to the length; memory demand: "
               "the window\nthat comes within 0.01 of the ceiling):\n\n"
               "  length  walks  ceiling   k=8     k=32    k=128   k=512   demand\n");
    else
        printf("[");
    for (int i = 0; st == SB_OK && i < n_lengths; i++) {
        char text[16];
        snprintf(text, sizeof text, "%d", lengths[i]);
        sb_task *task = NULL;
        sb_ceiling c;
        if ((st = sb_config_set_key(cfg, "train_seqlen_max", text, err)) != SB_OK ||
            (st = sb_config_set_key(cfg, "test_seqlen_max", text, err)) != SB_OK ||
            (st = sb_config_set_key(cfg, "combined_seq_length", "0", err)) != SB_OK ||
            (st = sb_config_check_task(cfg, err)) != SB_OK ||
            (st = sb_task_from_config(cfg, &task, err)) != SB_OK ||
            (st = sb_ceiling_compute(task, cfg, &c, err)) != SB_OK) {
            sb_task_free(task);
            break;
        }
        sb_task_settings ts;
        sb_task_get_settings(task, &ts);
        sb_task_free(task);
        if (json) {
            char *one = NULL;
            if ((st = sb_ceiling_to_json(&c, &one, err)) != SB_OK)
                break;
            printf("%s{\"length\":%d,\"walks\":%d,\"ceiling\":%s}", i > 0 ? "," : "", lengths[i],
                   ts.test_walks, one);
            sb_string_free(one);
            continue;
        }
        printf("  %6d  %5d  %.4f ", lengths[i], ts.test_walks, c.expected_acc);
        for (int w = 4; w <= 10; w += 2) {
            if (w < c.n_windows)
                printf("  %.4f", c.window_acc[w]);
            else
                printf("  %6s", "-");
        }
        double demand = sb_ceiling_memory_demand(&c);
        if (isfinite(demand))
            printf("  %7.1f\n", demand);
        else
            printf("  >%d\n", sb_ceiling_window_size(c.n_windows - 1));
        fflush(stdout);
    }
    if (json && st == SB_OK)
        printf("]\n");
    sb_config_free(cfg);
    return st;
}

static int ceiling_with_flags(sb_run_flags *rf, int argc, char **argv)
{
    sb_option opts[SB_RUN_MAX_OPTIONS + 4];
    int n = 0;
    sb_error err = {0};
    if (sb_run_options_add(rf, SB_KEYS_RUNTIME, opts, &n, &err) != SB_OK)
        return sb_cli_fail("ceiling", &err);
    const char *lengths_text = NULL;
    sb_options_add_key(rf->config, "split",
                       "the samples scored (test: the ones models are tested on)", opts, &n);
    sb_options_add_key(rf->config, "samples", NULL, opts, &n);
    sb_options_add_key(rf->config, "prior_samples", NULL, opts, &n);
    opts[n++] = (sb_option){"lengths",
                            SB_OPT_STRING,
                            &lengths_text,
                            "L1,L2,...",
                            "the ceiling at each sample length (train and test samples of L "
                            "elements): the memory demand as the length grows (default: the "
                            "task's own lengths)",
                            0};
    int rc = sb_cli_parse("ceiling",
                          "[task flags as for train] [--split test|train|valid] "
                          "[--samples N] [--lengths L1,L2,...] [--json]",
                          opts, n, argc, argv, NULL, 0, NULL);
    if (rc >= 0)
        return rc;
    int threads = sb_cli_threads(sb_run_flag(rf->config, "threads"));
    const sb_config *cfg = rf->config;
    sb_task *task = NULL;
    sb_status st = sb_config_check_task(cfg, &err);
    if (st == SB_OK && sb_run_flag(rf->config, "print_hashes"))
        return sb_cli_print_config_hashes(cfg);
    if (st == SB_OK)
        st = sb_task_from_config(cfg, &task, &err);
    const int split = sb_run_flag(cfg, "split");
    if (st == SB_OK && lengths_text != NULL) {
        int lengths[MAX_LENGTHS], n_lengths = 0;
        sb_task_free(task);
        if (parse_lengths(lengths_text, lengths, &n_lengths) != 0)
            return 2;
        if (by_length(cfg, lengths, n_lengths, sb_run_flag(rf->config, "json"), &err) != SB_OK)
            return sb_cli_fail("ceiling", &err);
        return 0;
    }
    sb_ceiling c;
    if (st == SB_OK)
        st = sb_ceiling_compute(task, cfg, &c, &err);
    if (st == SB_OK) {
        if (sb_run_flag(rf->config, "json")) {
            char *json = NULL;
            st = sb_ceiling_to_json(&c, &json, &err);
            if (st == SB_OK)
                printf("%s\n", json);
            sb_string_free(json);
        } else {
            print_table(task, &c, split, threads);
        }
    }
    sb_task_free(task);
    if (st != SB_OK)
        return sb_cli_fail("ceiling", &err);
    return 0;
}

int sb_cmd_ceiling(int argc, char **argv)
{
    sb_run_flags rf = {0};
    int rc = ceiling_with_flags(&rf, argc, argv);
    sb_run_flags_free(&rf);
    return rc;
}
