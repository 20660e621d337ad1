/*
 * fuzz_safetensors.c - libFuzzer target for the safetensors reader (src/core/safetensors.c)
 * and the checkpoint loader on top of it (src/train/checkpoint.c). The input is the whole
 * file. For a file the reader accepts it checks:
 *   - every tensor's bytes can be read (ASan checks the slots), its data is 64-byte
 *     aligned, sb_safetensors_find finds it by name, every metadata key finds its value;
 *   - writing the tensors and metadata back (sb_safetensors_write) succeeds and reads back
 *     equal: what the reader accepts, the writer can write.
 * Then it reads the recorded run configuration and loads the weights into a small GRU (the
 * shapes of the committed checkpoint corpus/safetensors/gru_tiny.safetensors), as `eval`
 * and --resume do.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"
#include "fuzz_common.h"
#include "model/model.h"
#include "train/checkpoint.h"
#include "train/run_setup.h"

/* The model checkpoints are loaded into: `train --model gru --feat_size 4 --layers 1
 * --vocab 9 --amb 8 --grammar_scale True` (9 inputs, 65 classes). Built once; a load
 * either replaces all its weights or none, so inputs do not depend on each other. */
static sb_model *tiny_model(void)
{
    static sb_model *model = NULL;
    if (model != NULL)
        return model;
    sb_run_config cfg = sb_run_config_default();
    strcpy(cfg.model, "gru");
    cfg.feat_size = 4;
    cfg.layers = 1;
    sb_model_config mc = sb_run_config_model(&cfg, 9, 65);
    sb_error err = {0};
    fuzz_check(sb_model_create(&mc, 1, &model, &err) == SB_OK, "the tiny GRU cannot be built");
    return model;
}

/* Reads every byte of every tensor and checks the lookups by name and key. */
static void check_contents(const sb_safetensors *st)
{
    unsigned sum = 0;
    for (size_t i = 0; i < sb_safetensors_count(st); i++) {
        const sb_st_tensor *t = sb_safetensors_get(st, i);
        fuzz_check(t->name != NULL && sb_safetensors_find(st, t->name) == t,
                   "a tensor is not found by its name");
        size_t nbytes = sb_st_tensor_numel(t) * sb_st_dtype_size(t->dtype);
        fuzz_check(nbytes == 0 || ((uintptr_t)t->data % 64) == 0, "tensor data not aligned");
        const unsigned char *bytes = t->data;
        for (size_t b = 0; b < nbytes; b++)
            sum += bytes[b];
    }
    for (size_t i = 0; i < sb_safetensors_meta_count(st); i++) {
        const sb_st_meta *m = sb_safetensors_meta_get(st, i);
        const char *value = sb_safetensors_meta(st, m->key);
        fuzz_check(value != NULL && strcmp(value, m->value) == 0,
                   "a metadata key does not find its value");
    }
    (void)sum;
}

/* Whether two tensors have the same name, type, shape and bytes. */
static int same_tensor(const sb_st_tensor *a, const sb_st_tensor *b)
{
    if (strcmp(a->name, b->name) != 0 || a->dtype != b->dtype || a->ndim != b->ndim)
        return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return 0;
    size_t nbytes = sb_st_tensor_numel(a) * sb_st_dtype_size(a->dtype);
    return nbytes == 0 || memcmp(a->data, b->data, nbytes) == 0;
}

/* Writes st's tensors and metadata to a second file and checks it reads back equal. */
static void check_write_back(const sb_safetensors *st)
{
    size_t n = sb_safetensors_count(st), n_meta = sb_safetensors_meta_count(st);
    sb_st_tensor *tensors = calloc(n > 0 ? n : 1, sizeof *tensors);
    sb_st_meta *meta = calloc(n_meta > 0 ? n_meta : 1, sizeof *meta);
    if (tensors == NULL || meta == NULL) {
        free(tensors);
        free(meta);
        return;
    }
    for (size_t i = 0; i < n; i++)
        tensors[i] = *sb_safetensors_get(st, i);
    for (size_t i = 0; i < n_meta; i++)
        meta[i] = *sb_safetensors_meta_get(st, i);
    char path[256];
    fuzz_temp_path("safetensors", ".copy", path, sizeof path);
    sb_error err = {0};
    sb_status wrote = sb_safetensors_write(path, tensors, n, meta, n_meta, &err);
    if (wrote != SB_OK)
        fprintf(stderr, "%s\n", err.msg);
    fuzz_check(wrote == SB_OK, "a file the reader accepts cannot be written back");
    sb_safetensors *copy = NULL;
    fuzz_check(sb_safetensors_open(path, &copy, &err) == SB_OK, "the written copy does not read");
    fuzz_check(sb_safetensors_count(copy) == n && sb_safetensors_meta_count(copy) == n_meta,
               "the written copy has other counts");
    for (size_t i = 0; i < n; i++)
        fuzz_check(same_tensor(&tensors[i], sb_safetensors_get(copy, i)),
                   "the written copy has another tensor");
    for (size_t i = 0; i < n_meta; i++) {
        const char *value = sb_safetensors_meta(copy, meta[i].key);
        fuzz_check(value != NULL && strcmp(value, meta[i].value) == 0,
                   "the written copy has other metadata");
    }
    sb_safetensors_close(copy);
    fuzz_temp_remove(path);
    free(tensors);
    free(meta);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[256];
    if (fuzz_temp_write("safetensors", data, size, path, sizeof path) != 0)
        return 0;
    sb_error err = {0};
    sb_safetensors *st = NULL;
    if (sb_safetensors_open(path, &st, &err) == SB_OK) {
        check_contents(st);
        check_write_back(st);
        sb_safetensors_close(st);
    }
    sb_run_config cfg;
    (void)sb_checkpoint_read_config(path, &cfg, &err);
    int64_t samples_seen = 0;
    (void)sb_checkpoint_load(path, tiny_model(), NULL, &samples_seen, &err);
    fuzz_temp_remove(path);
    return 0;
}
