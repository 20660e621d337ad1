/*
 * safetensors.h - reading and writing checkpoints in the safetensors format, the format
 * PyTorch users load with `safetensors.torch.load_file` (https://huggingface.co/docs/safetensors).
 *
 * Layout: an 8-byte little-endian u64 N, then N bytes of UTF-8 JSON header, then the data
 * buffer. The header maps each tensor name to
 *   {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
 * (byte offsets into the data buffer, end exclusive; little-endian, C order), plus an
 * optional "__metadata__" object of string -> string. The tensors' byte ranges are
 * contiguous, do not overlap and cover the data buffer exactly. Like the Python library we
 * pad the header with spaces so that the data buffer starts 8-byte aligned.
 */
#ifndef SELECTIVBENCH_SAFETENSORS_H
#define SELECTIVBENCH_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#define SB_ST_MAX_DIMS 8

/* Element types, named in files as the enumerator without "SB_ST_" ("F32", "BF16", ...).
 * Sub-byte types of newer safetensors versions (F4, F6_*) are not supported. */
typedef enum sb_st_dtype {
    SB_ST_F32 = 0,
    SB_ST_F64,
    SB_ST_I64,
    SB_ST_I32,
    SB_ST_I16,
    SB_ST_I8,
    SB_ST_U64,
    SB_ST_U32,
    SB_ST_U16,
    SB_ST_U8,
    SB_ST_BOOL,
    SB_ST_F16,
    SB_ST_BF16,
    SB_ST_F8_E5M2,
    SB_ST_F8_E4M3,
    SB_ST_N_DTYPES
} sb_st_dtype;

/* One tensor: ndim dimensions shape[0..ndim-1] (ndim 0 is a scalar of one element, a 0
 * anywhere makes an empty tensor), elements in C order at data. */
typedef struct sb_st_tensor {
    const char *name;
    sb_st_dtype dtype;
    int ndim;                      /* 0..SB_ST_MAX_DIMS */
    int64_t shape[SB_ST_MAX_DIMS]; /* [ndim], each >= 0 */
    const void *data;              /* [numel] elements of dtype; may be NULL if numel is 0 */
} sb_st_tensor;

/* One "__metadata__" entry. */
typedef struct sb_st_meta {
    const char *key;
    const char *value;
} sb_st_meta;

/* An open checkpoint (see sb_safetensors_open). */
typedef struct sb_safetensors sb_safetensors;

/* Bytes per element of dtype (1, 2, 4 or 8); dtype must be < SB_ST_N_DTYPES. */
size_t sb_st_dtype_size(sb_st_dtype dtype);

/* The dtype's name as written in files ("F32"); dtype must be < SB_ST_N_DTYPES. */
const char *sb_st_dtype_name(sb_st_dtype dtype);

/* Number of elements of t: the product of its shape (1 for a scalar). For a tensor read by
 * sb_safetensors_open this cannot overflow; for one of the caller's, check the shape first. */
size_t sb_st_tensor_numel(const sb_st_tensor *t);

/*
 * Writes tensors[0..n-1] and the metadata entries meta[0..n_meta-1] (meta may be NULL when
 * n_meta is 0; no "__metadata__" object is written then) to path as one safetensors file.
 * The header lists "__metadata__" first and then the tensors in the order given, and the
 * data buffer holds them in that order too (unlike the Python library, which sorts by
 * alignment; readers do not care). The header is padded with spaces to a multiple of 8.
 *
 * The file is written to "<path>.<pid>.tmp" (one per process) and renamed onto path, so a
 * reader never sees a partial file; on any failure the temporary file is removed and a file
 * already at path is left as it was. Nothing is borrowed past the call.
 *
 * Errors: SB_ERR_INVALID for a bad argument, before any file is touched: a NULL or
 * duplicate name, the name "__metadata__", a name, key or value that is not UTF-8, an
 * unknown dtype, ndim outside 0..SB_ST_MAX_DIMS, a negative dimension, a size that
 * overflows, NULL data for a non-empty tensor, a NULL or duplicate metadata key or a NULL
 * value. SB_ERR_IO when the file cannot be created, written or renamed. SB_ERR_NOMEM.
 */
sb_status sb_safetensors_write(const char *path, const sb_st_tensor *tensors, size_t n,
                               const sb_st_meta *meta, size_t n_meta, sb_error *err);

/*
 * Reads the whole safetensors file at path into memory and validates it: the header
 * length (at most 100 MB and inside the file), the header (a UTF-8 JSON object without
 * duplicate keys), each tensor (a known dtype, at most SB_ST_MAX_DIMS non-negative
 * dimensions, data_offsets [begin, end] spanning exactly numel * dtype size bytes), that
 * the tensors tile the data buffer exactly (no gap, no overlap, nothing after the last),
 * and that "__metadata__", if present, maps strings to strings. Keys of a tensor entry
 * other than dtype, shape and data_offsets are ignored, as the Python library does.
 *
 * On success *out owns everything (close it with sb_safetensors_close); every tensor's
 * data is 64-byte aligned, whatever its offset in the file. Tensors are numbered in the
 * order of their data in the file. On failure *out is NULL.
 *
 * Errors: SB_ERR_IO if the file cannot be opened or read, or if any check fails (the
 * message names the file and the problem); SB_ERR_NOMEM.
 */
sb_status sb_safetensors_open(const char *path, sb_safetensors **out, sb_error *err);

/* Number of tensors in st. */
size_t sb_safetensors_count(const sb_safetensors *st);

/* Tensor i (0 <= i < count) in file data order; owned by st, valid until it is closed. */
const sb_st_tensor *sb_safetensors_get(const sb_safetensors *st, size_t i);

/* The tensor called name, or NULL if there is none; owned by st (O(log count)). */
const sb_st_tensor *sb_safetensors_find(const sb_safetensors *st, const char *name);

/* The "__metadata__" value for key, or NULL if there is none; owned by st. */
const char *sb_safetensors_meta(const sb_safetensors *st, const char *key);

/* Number of "__metadata__" entries in st, and entry i of them (in header order). */
size_t sb_safetensors_meta_count(const sb_safetensors *st);
const sb_st_meta *sb_safetensors_meta_get(const sb_safetensors *st, size_t i);

/* Frees st and everything it returned; st may be NULL. */
void sb_safetensors_close(sb_safetensors *st);

#endif
