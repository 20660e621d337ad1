/* cmd_data.c - `selectivbench data`: generate samples, show them, hash or export a split. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "selectivbench/selectivbench.h"

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/data_show.h"
#include "cli/run_options.h"
#include "cli/task_options.h"

/* "batch": the samples as one padded batch, exactly what the trainer (and the Python
 * binding's Task.batch) gets from sb_task_read_batch: its shape [B, T, E, V] and the arrays
 * flattened in row-major order (inputs as float32 values printed so they read back exactly). */
static sb_status data_print_batch(sb_jw *j, const sb_task *task, sb_split split, const int64_t *idx,
                                  int64_t n, sb_error *err)
{
    if (n > 1 << 20)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--batch: %lld samples is too many for one "
                            "batch; give at most 1048576",
                            (long long)n);
    sb_batch_shape shape;
    sb_status st = sb_task_batch_shape(task, split, idx, (int)n, &shape, err);
    if (st != SB_OK)
        return st;
    const size_t bt = (size_t)shape.batch * (size_t)shape.frames;
    const size_t be = (size_t)shape.batch * (size_t)shape.elements;
    float *inputs = malloc(bt * (size_t)shape.inputs * sizeof *inputs);
    int32_t *targets = malloc(bt * sizeof *targets);
    uint8_t *valid = malloc(bt);
    int32_t *start = malloc(be * sizeof *start), *len = malloc(be * sizeof *len);
    if (inputs == NULL || targets == NULL || valid == NULL || start == NULL || len == NULL)
        st = sb_error_set(err, SB_ERR_NOMEM, "--batch: out of memory for %zu frames", bt);
    else
        st = sb_task_read_batch(task, split, idx, (int)n, &shape, inputs, targets, valid, start,
                                len, err);
    if (st == SB_OK) {
        sb_jw_key(j, "batch");
        sb_jw_object_begin(j);
        sb_jw_key(j, "shape");
        sb_jw_array_begin(j);
        sb_jw_int(j, shape.batch);
        sb_jw_int(j, shape.frames);
        sb_jw_int(j, shape.elements);
        sb_jw_int(j, shape.inputs);
        sb_jw_array_end(j);
        sb_jw_key(j, "inputs");
        sb_jw_array_begin(j);
        for (size_t i = 0; i < bt * (size_t)shape.inputs; i++)
            sb_jw_double(j, inputs[i]);
        sb_jw_array_end(j);
        const char *names[4] = {"targets", "valid", "window_start", "window_len"};
        for (int a = 0; a < 4; a++) {
            sb_jw_key(j, names[a]);
            sb_jw_array_begin(j);
            size_t count = a < 2 ? bt : be;
            for (size_t i = 0; i < count; i++)
                sb_jw_int(j, a == 0 ? targets[i] : a == 1 ? valid[i] : a == 2 ? start[i] : len[i]);
            sb_jw_array_end(j);
        }
        sb_jw_object_end(j);
    }
    free(inputs);
    free(targets);
    free(valid);
    free(start);
    free(len);
    return st;
}

/* {"samples": [{"idx", "class_seq", "state_seq"}, ...]} as in the reference files, and with
 * batch the samples as one batch (data_print_batch). */
static sb_status data_print_json(const sb_task *task, sb_split split, const int64_t *idx, int64_t n,
                                 int batch, sb_error *err)
{
    sb_draw *d = NULL;
    sb_status st = sb_draw_create(task, &d, err);
    if (st != SB_OK)
        return st;
    sb_jw *j = sb_jw_open(stdout, 0);
    if (j == NULL) {
        sb_draw_free(d);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory");
    }
    const sb_grammar *g = sb_task_grammar(task);
    sb_jw_object_begin(j);
    sb_jw_key(j, "samples");
    sb_jw_array_begin(j);
    for (int64_t r = 0; r < n && st == SB_OK; r++) {
        st = sb_draw_read(d, split, idx[r], err);
        if (st != SB_OK)
            break;
        const int elements = sb_draw_elements(d);
        sb_jw_object_begin(j);
        sb_jw_key(j, "idx");
        sb_jw_int(j, idx[r]);
        sb_jw_key(j, "class_seq");
        sb_jw_array_begin(j);
        for (int k = 0; k < elements; k++)
            sb_jw_int(j, sb_grammar_state_class(g, sb_draw_state(d, k)));
        sb_jw_array_end(j);
        sb_jw_key(j, "state_seq");
        sb_jw_array_begin(j);
        for (int k = 0; k < elements; k++)
            sb_jw_string(j, sb_grammar_state_name(g, sb_draw_state(d, k)));
        sb_jw_array_end(j);
        sb_jw_object_end(j);
    }
    sb_jw_array_end(j);
    if (st == SB_OK && batch)
        st = data_print_batch(j, task, split, idx, n, err);
    sb_jw_object_end(j);
    printf("\n");
    sb_jw_close(j);
    sb_draw_free(d);
    return st;
}

/* --show K (or the --samples): the samples drawn with their gaps, after the task's facts
 * (with_task); without --samples, the first K of the split (*idx is allocated then). */
static sb_status data_show(const sb_task *task, sb_split split, int64_t **idx, int64_t *n_idx,
                           int64_t show, int64_t split_size, int with_task, sb_error *err)
{
    if (*idx == NULL) {
        *n_idx = show < split_size ? show : split_size;
        *idx = malloc((size_t)(*n_idx > 0 ? *n_idx : 1) * sizeof **idx);
        for (int64_t i = 0; *idx != NULL && i < *n_idx; i++)
            (*idx)[i] = i;
    }
    if (with_task)
        sb_data_print_task(task, stdout);
    if (*idx == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory");
    return sb_data_show(task, split, *idx, *n_idx, stdout, err);
}

/* --checksum: the whole split generated and hashed, with its speed. */
static sb_status data_checksum(const sb_task *task, sb_split split, int64_t count, int threads,
                               sb_error *err)
{
    uint64_t hash = 0;
    int64_t symbols = 0;
    double t0 = sb_clock_seconds();
    sb_status st = sb_task_checksum(task, split, threads, &hash, &symbols, err);
    double dt = sb_clock_seconds() - t0;
    if (st == SB_OK)
        printf("checksum %016" PRIx64 "  split %s: %lld samples, %lld symbols in %.3f s "
               "(%.0f samples/s, %.3g symbols/s, %d thread%s)\n",
               hash, sb_split_name(split), (long long)count, (long long)symbols, dt,
               (double)count / dt, (double)symbols / dt, threads, threads == 1 ? "" : "s");
    return st;
}

/* --export DIR: the reference's dataset files. */
static sb_status data_export(const sb_task *task, const sb_task_facts *facts, const char *dir,
                             int threads, sb_error *err)
{
    double t0 = sb_clock_seconds();
    sb_status st = sb_task_export(task, dir, threads, err);
    if (st == SB_OK)
        printf("exported %lld training and %lld test samples, transitions and config.yaml "
               "to %s in %.2f s\n",
               (long long)facts->train_size, (long long)facts->test_size, dir,
               sb_clock_seconds() - t0);
    return st;
}

static int data_with_flags(sb_task_flags *tf, int argc, char **argv)
{
    sb_option opts[SB_TASK_MAX_OPTIONS + 13];
    int n = 0;
    sb_error err = {0};
    if (sb_task_options_add(tf, opts, &n, 0, &err) != SB_OK)
        return sb_cli_fail("data", &err);
    int json = 0, batch = 0, checksum = 0;
    const char *samples = NULL, *export_dir = NULL;
    /* data reads the training split unless told (ceiling, the test split) */
    if (sb_config_set_key(tf->config, "split", "train", &err) != SB_OK)
        return sb_cli_fail("data", &err);
    sb_options_add_key(tf->config, "split", "which split --samples, --show and --checksum read",
                       opts, &n);
    sb_options_add_key(tf->config, "show", NULL, opts, &n);
    sb_options_add_key(tf->config, "threads", NULL, opts, &n);
    opts[n++] = (sb_option){"samples",
                            SB_OPT_STRING,
                            &samples,
                            "LIST",
                            "sample indices, e.g. 0-4,57,999 (for --json and --show; default: "
                            "the first --show)",
                            0};
    opts[n++] = (sb_option){"json",
                            SB_OPT_SWITCH,
                            &json,
                            NULL,
                            "print the --samples as JSON: idx, class_seq, state_seq",
                            0};
    opts[n++] = (sb_option){"batch",
                            SB_OPT_SWITCH,
                            &batch,
                            NULL,
                            "with --json, also the --samples as one padded batch as training "
                            "sees it: shape [B, T, E, V], inputs, targets, valid, "
                            "window_start, window_len (flattened)",
                            0};
    opts[n++] = (sb_option){"checksum",
                            SB_OPT_SWITCH,
                            &checksum,
                            NULL,
                            "generate the whole split; print a 64-bit hash and the time",
                            0};
    opts[n++] = (sb_option){"export",
                            SB_OPT_STRING,
                            &export_dir,
                            "DIR",
                            "write the reference's dataset files train, test, transitions "
                            "(default: none)",
                            0};
    int rc = sb_cli_parse("data",
                          "[task flags] [--json --samples LIST | --show K | --checksum | "
                          "--export DIR]",
                          opts, n, argc, argv, NULL, 0, NULL);
    if (rc >= 0)
        return rc;
    const int threads = sb_cli_threads(sb_run_flag(tf->config, "threads"));
    const int split = sb_run_flag(tf->config, "split");
    const double show_key = sb_config_number(tf->config, "show"); /* NaN: not given */
    const int show = show_key == show_key ? (int)show_key : -1;

    if (batch && !json) {
        sb_error_set(&err, SB_ERR_INVALID,
                     "--batch is a part of --json: give --json --samples "
                     "LIST --batch");
        return sb_cli_fail("data", &err);
    }
    if (json && samples == NULL) {
        sb_error_set(&err, SB_ERR_INVALID, "--json prints the samples chosen by --samples LIST");
        return sb_cli_fail("data", &err);
    }
    sb_task *task = NULL;
    sb_status st = sb_task_from_config(tf->config, &task, &err);
    if (st != SB_OK)
        return sb_cli_fail("data", &err);
    sb_task_facts facts;
    sb_task_get_facts(task, &facts);

    int64_t *idx = NULL, n_idx = 0;
    sb_split sp = (sb_split)split;
    const int64_t split_size = sp == SB_SPLIT_TRAIN ? facts.train_size : facts.test_size;
    if (samples != NULL)
        st = sb_parse_index_list(samples, split_size, &idx, &n_idx, &err);
    int did = 0;
    if (st == SB_OK && json) {
        st = data_print_json(task, sp, idx, n_idx, batch, &err);
        did = 1;
    }
    if (st == SB_OK && (show >= 0 || (!did && !checksum && export_dir == NULL)))
        st = data_show(task, sp, &idx, &n_idx, show >= 0 ? show : 2, split_size, !did, &err);
    if (st == SB_OK && checksum)
        st = data_checksum(task, sp, split_size, threads, &err);
    if (st == SB_OK && export_dir != NULL)
        st = data_export(task, &facts, export_dir, threads, &err);
    free(idx);
    sb_task_free(task);
    if (st != SB_OK)
        return sb_cli_fail("data", &err);
    return 0;
}

int sb_cmd_data(int argc, char **argv)
{
    sb_task_flags tf = {0};
    int rc = data_with_flags(&tf, argc, argv);
    sb_task_flags_free(&tf);
    return rc;
}
