/*
 * export.c - writing a task in the reference's dataset folder format, so the original
 * PyTorch code (symseqbench SeqDataset with read_from_file) can train on our data.
 *
 * Files: `train` and `test` hold one sample per line as the reference writes them,
 *   [3, 1, 0]::['C', 'A1', '#']::3
 * (class ids, state names, length), `transitions` one "src, dst, prob" line per
 * transition, and `config.yaml` the task configuration. The reference only reads the
 * sequences: its gaps are drawn again when it loads them.
 */
#include <errno.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "core/cpus.h"
#include "core/fs.h"
#include "core/json_writer.h"
#include "task/task.h"

#define EXPORT_CHUNK 1024

typedef struct export_file {
    char path[4096];
    char tmp[4096];
    FILE *f;
} export_file;

static sb_status export_open(export_file *ef, const char *dir, const char *name, sb_error *err)
{
    int n1 = snprintf(ef->path, sizeof ef->path, "%s/%s", dir, name);
    int n2 = snprintf(ef->tmp, sizeof ef->tmp, "%s/.%s.tmp", dir, name);
    if (n1 < 0 || n2 < 0 || (size_t)n2 >= sizeof ef->tmp)
        return sb_error_set(err, SB_ERR_INVALID, "export path '%s' is too long", dir);
    ef->f = fopen(ef->tmp, "w");
    if (ef->f == NULL)
        return sb_error_set(err, SB_ERR_IO,
                            "cannot write '%s': %s; check that the folder is "
                            "writable",
                            ef->tmp, strerror(errno));
    return SB_OK;
}

static sb_status export_close(export_file *ef, sb_status st, sb_error *err)
{
    if (ef->f == NULL)
        return st;
    int bad = ferror(ef->f);
    if (fclose(ef->f) != 0)
        bad = 1;
    ef->f = NULL;
    if (st == SB_OK && bad)
        st = sb_error_set(err, SB_ERR_IO, "writing '%s' failed (disk full?)", ef->tmp);
    if (st == SB_OK && rename(ef->tmp, ef->path) != 0)
        st = sb_error_set(err, SB_ERR_IO, "cannot rename '%s' to '%s': %s", ef->tmp, ef->path,
                          strerror(errno));
    if (st != SB_OK)
        remove(ef->tmp);
    return st;
}

/* Formats one sample line into buf (size at least 16 * E + 32); returns its length. */
static size_t export_format_sample(const sb_task *task, const sb_sample *s, char *buf)
{
    const sb_grammar *g = task->grammar;
    char *p = buf;
    *p++ = '[';
    for (int k = 0; k < s->n_elements; k++) {
        if (k > 0) {
            *p++ = ',';
            *p++ = ' ';
        }
        p += sprintf(p, "%d", g->state_class[s->state[k]]);
    }
    memcpy(p, "]::[", 4);
    p += 4;
    for (int k = 0; k < s->n_elements; k++) {
        if (k > 0) {
            *p++ = ',';
            *p++ = ' ';
        }
        p += sprintf(p, "'%s'", g->state_name[s->state[k]]);
    }
    p += sprintf(p, "]::%d\n", s->n_elements);
    return (size_t)(p - buf);
}

static sb_status export_split(const sb_task *task, sb_split split, FILE *f, int threads,
                              sb_error *err)
{
    int64_t n = sb_task_split_size(task, split);
    size_t line_max = 16 * (size_t)task->n_elements[split] + 32;
    char *buf = sb_malloc(EXPORT_CHUNK * line_max);
    size_t *len = sb_malloc(EXPORT_CHUNK * sizeof *len);
    if (buf == NULL || len == NULL) {
        sb_free(buf), sb_free(len);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory exporting samples");
    }
    sb_status st = SB_OK;
    for (int64_t chunk = 0; chunk < n && st == SB_OK; chunk += EXPORT_CHUNK) {
        int count = (int)(n - chunk < EXPORT_CHUNK ? n - chunk : EXPORT_CHUNK);
        int fail_i = count;
        sb_error fail_err = {0};
        sb_status fail = SB_OK;
#pragma omp parallel num_threads(threads)
        {
            sb_sample sample;
            sb_error local = {0};
            sb_status ok = sb_sample_alloc(task, &sample, &local);
#pragma omp for schedule(dynamic, 16)
            for (int i = 0; i < count; i++) {
                sb_status s2 = ok;
                if (s2 == SB_OK)
                    s2 = sb_task_sample(task, split, chunk + i, &sample, &local);
                if (s2 != SB_OK) {
#pragma omp critical(sb_export_error)
                    if (i < fail_i) {
                        fail_i = i;
                        fail = s2;
                        fail_err = local;
                    }
                    continue;
                }
                len[i] = export_format_sample(task, &sample, buf + (size_t)i * line_max);
            }
            if (ok == SB_OK)
                sb_sample_free(&sample);
        }
        if (fail != SB_OK) {
            if (err != NULL)
                *err = fail_err;
            st = fail;
            break;
        }
        for (int i = 0; i < count; i++)
            fwrite(buf + (size_t)i * line_max, 1, len[i], f);
    }
    sb_free(buf);
    sb_free(len);
    return st;
}

static void export_config_yaml(const sb_task *task, FILE *f)
{
    const sb_task_config *c = &task->cfg;
    char num[40];
    fprintf(f, "# written by selectivbench %s\n", SB_VERSION);
    fprintf(f, "base_set: one_hot\n");
    fprintf(f, "seed: %llu\n", (unsigned long long)c->grammar.seed);
    fprintf(f, "vocab: %d\namb: %d\namb_depth: %d\n", task->grammar->config.vocab,
            task->grammar->config.amb, task->grammar->config.amb_depth);
    fprintf(f, "grammar_scale: %s\n", c->grammar.grammar_scale ? "true" : "false");
    sb_format_double(num, sizeof num, c->grammar.transition_density);
    fprintf(f, "transition_density: %s\n", num);
    fprintf(f, "train_seqlen_min: %d\ntrain_seqlen_max: %d\n", c->train_seqlen_min,
            c->train_seqlen_max);
    fprintf(f, "test_seqlen_min: %d\ntest_seqlen_max: %d\n", c->test_seqlen_min,
            c->test_seqlen_max);
    fprintf(f, "combined_seq_length: %d\n", task->n_elements[SB_SPLIT_TRAIN]);
    fprintf(f, "dataset_size: %lld\ntest_size: %lld\n", (long long)c->dataset_size,
            (long long)c->test_size);
    fprintf(f, "protocol: %s\n", c->protocol == SB_PROTOCOL_CLEAN ? "clean" : "reference");
    fprintf(f, "num_states: %d\ntopological_entropy: %.17g\n", task->grammar->n_states,
            task->grammar->topological_entropy);
}

static sb_status export_make_dir(const char *dir, sb_error *err)
{
    return sb_make_dirs(dir, "export folder", err);
}

sb_status sb_task_export(const sb_task *task, const char *dir, int threads, sb_error *err)
{
    if (task == NULL || dir == NULL) /* a public function (selectivbench.h) */
        return sb_error_set(err, SB_ERR_INVALID, "sb_task_export: %s is NULL",
                            task == NULL ? "task" : "dir");
    sb_status st_threads = sb_threads_check(threads, "sb_task_export", err);
    if (st_threads != SB_OK)
        return st_threads;
    if (task->cfg.walk_len > 0)
        return sb_error_set(err, SB_ERR_INVALID,
                            "--export with --walk_len: the reference's dataset files hold one "
                            "walk per sample and cannot show the walk tags");
    if (threads <= 0)
        threads = omp_get_max_threads();
    sb_status st = export_make_dir(dir, err);
    if (st != SB_OK)
        return st;
    static const char *split_name[2] = {"train", "test"};
    for (int split = 0; split < 2 && st == SB_OK; split++) {
        export_file ef = {0};
        st = export_open(&ef, dir, split_name[split], err);
        if (st == SB_OK)
            st = export_split(task, (sb_split)split, ef.f, threads, err);
        st = export_close(&ef, st, err);
    }
    if (st == SB_OK) {
        export_file ef = {0};
        st = export_open(&ef, dir, "transitions", err);
        if (st == SB_OK)
            sb_grammar_write_transitions(task->grammar, ef.f);
        st = export_close(&ef, st, err);
    }
    if (st == SB_OK) {
        export_file ef = {0};
        st = export_open(&ef, dir, "config.yaml", err);
        if (st == SB_OK)
            export_config_yaml(task, ef.f);
        st = export_close(&ef, st, err);
    }
    return st;
}
