/*
 * safetensors.c - safetensors checkpoints: a writer (temporary file + rename) and a
 * validating reader (see safetensors.h for the format).
 *
 * The reader loads the header, checks everything the Python library checks (and a little
 * more), then reads each tensor into its own 64-byte aligned slot of one buffer, so data
 * pointers are aligned even when our writer (which keeps the caller's order instead of
 * sorting by alignment) left an F64 tensor at an odd offset.
 */
#include "core/safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c copies tensor bytes as they are: it needs a little-endian host"
#endif

#define ST_HEADER_MAX 100000000u /* the Python library's limit on the header length */
#define ST_ALIGN 64              /* alignment of every tensor's data after reading */

static const struct {
    const char *name;
    size_t size;
} st_dtypes[SB_ST_N_DTYPES] = {
    [SB_ST_F32] = {"F32", 4},   [SB_ST_F64] = {"F64", 8},         [SB_ST_I64] = {"I64", 8},
    [SB_ST_I32] = {"I32", 4},   [SB_ST_I16] = {"I16", 2},         [SB_ST_I8] = {"I8", 1},
    [SB_ST_U64] = {"U64", 8},   [SB_ST_U32] = {"U32", 4},         [SB_ST_U16] = {"U16", 2},
    [SB_ST_U8] = {"U8", 1},     [SB_ST_BOOL] = {"BOOL", 1},       [SB_ST_F16] = {"F16", 2},
    [SB_ST_BF16] = {"BF16", 2}, [SB_ST_F8_E5M2] = {"F8_E5M2", 1}, [SB_ST_F8_E4M3] = {"F8_E4M3", 1},
};

size_t sb_st_dtype_size(sb_st_dtype dtype)
{
    SB_ASSERT((unsigned)dtype < SB_ST_N_DTYPES);
    return st_dtypes[dtype].size;
}

const char *sb_st_dtype_name(sb_st_dtype dtype)
{
    SB_ASSERT((unsigned)dtype < SB_ST_N_DTYPES);
    return st_dtypes[dtype].name;
}

size_t sb_st_tensor_numel(const sb_st_tensor *t)
{
    size_t numel = 1;
    for (int d = 0; d < t->ndim; d++)
        numel *= (size_t)t->shape[d];
    return numel;
}

/* numel * dtype size of a shape into *nbytes; 0 if a dimension is negative or the
 * product overflows (the Python library also rejects an overflow before a later 0). */
static int st_nbytes(const int64_t *shape, int ndim, size_t elem_size, size_t *nbytes)
{
    size_t n = elem_size;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return 0;
#if SIZE_MAX < INT64_MAX
        if (shape[d] > (int64_t)SIZE_MAX)
            return 0;
#endif
        size_t dim = (size_t)shape[d];
        if (dim != 0 && n > SIZE_MAX / dim)
            return 0;
        n *= dim;
    }
    *nbytes = n;
    return 1;
}

/* Whether s is well-formed UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF), which is what jansson accepts in strings and keys. */
static int st_utf8_valid(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p != 0) {
        unsigned c = *p;
        int extra;
        uint32_t cp;
        if (c < 0x80) {
            p++;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            extra = 1, cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            extra = 2, cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            extra = 3, cp = c & 0x07;
        } else {
            return 0;
        }
        for (int k = 1; k <= extra; k++) {
            if ((p[k] & 0xc0) != 0x80)
                return 0; /* also stops at the terminating NUL */
            cp = (cp << 6) | (p[k] & 0x3fu);
        }
        if ((extra == 2 && cp < 0x800) || (extra == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        p += extra + 1;
    }
    return 1;
}

/* ---- writer ------------------------------------------------------------------------- */

/* Checks the caller's tensors and metadata (everything but duplicates, which the header
 * builder finds) and sums the data size into *total. */
static sb_status st_write_check(const char *path, const sb_st_tensor *tensors, size_t n,
                                const sb_st_meta *meta, size_t n_meta, size_t *total, sb_error *err)
{
    size_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        const sb_st_tensor *t = &tensors[i];
        if (t->name == NULL)
            return sb_error_set(err, SB_ERR_INVALID,
                                "cannot write checkpoint '%s': tensor %zu has no name", path, i);
        if (strcmp(t->name, "__metadata__") == 0)
            return sb_error_set(err, SB_ERR_INVALID,
                                "cannot write checkpoint '%s': the tensor name '__metadata__' "
                                "is reserved for the metadata; rename the tensor",
                                path);
        if (!st_utf8_valid(t->name))
            return sb_error_set(err, SB_ERR_INVALID,
                                "cannot write checkpoint '%s': tensor %zu's name is not valid "
                                "UTF-8",
                                path, i);
        if ((unsigned)t->dtype >= SB_ST_N_DTYPES)
            return sb_error_set(err, SB_ERR_INVALID,
                                "cannot write checkpoint '%s': tensor '%s' has unknown dtype %d",
                                path, t->name, (int)t->dtype);
        if (t->ndim < 0 || t->ndim > SB_ST_MAX_DIMS)
            return sb_error_set(err, SB_ERR_INVALID,
                                "cannot write checkpoint '%s': tensor '%s' has %d dimensions; "
                                "0 to %d are supported",
                                path, t->name, t->ndim, SB_ST_MAX_DIMS);
        size_t nbytes;
        if (!st_nbytes(t->shape, t->ndim, st_dtypes[t->dtype].size, &nbytes) ||
            nbytes > (size_t)INT64_MAX - sum)
            return sb_error_set(err, SB_ERR_INVALID,
                                "cannot write checkpoint '%s': tensor '%s' has a negative "
                                "dimension or a size that overflows",
                                path, t->name);
        if (nbytes > 0 && t->data == NULL)
            return sb_error_set(err, SB_ERR_INVALID,
                                "cannot write checkpoint '%s': tensor '%s' has no data", path,
                                t->name);
        sum += nbytes;
    }
    for (size_t i = 0; i < n_meta; i++) {
        if (meta[i].key == NULL || meta[i].value == NULL)
            return sb_error_set(err, SB_ERR_INVALID,
                                "cannot write checkpoint '%s': metadata entry %zu has a NULL "
                                "key or value",
                                path, i);
        if (!st_utf8_valid(meta[i].key) || !st_utf8_valid(meta[i].value))
            return sb_error_set(err, SB_ERR_INVALID,
                                "cannot write checkpoint '%s': metadata entry '%s' is not "
                                "valid UTF-8",
                                path, meta[i].key);
    }
    *total = sum;
    return SB_OK;
}

/* Builds the header object: "__metadata__" first, then the tensors in the order given
 * with consecutive data_offsets. Input already passed st_write_check. */
static sb_status st_write_header(const char *path, const sb_st_tensor *tensors, size_t n,
                                 const sb_st_meta *meta, size_t n_meta, json_t **out, sb_error *err)
{
    json_t *root = json_object();
    if (root == NULL)
        goto nomem;
    if (n_meta > 0) {
        json_t *m = json_object();
        if (json_object_set_new(root, "__metadata__", m) != 0)
            goto nomem;
        for (size_t i = 0; i < n_meta; i++) {
            if (json_object_get(m, meta[i].key) != NULL) {
                json_decref(root);
                return sb_error_set(err, SB_ERR_INVALID,
                                    "cannot write checkpoint '%s': metadata key '%s' is given "
                                    "twice; keys must be unique",
                                    path, meta[i].key);
            }
            if (json_object_set_new(m, meta[i].key, json_string(meta[i].value)) != 0)
                goto nomem;
        }
    }
    size_t offset = 0;
    for (size_t i = 0; i < n; i++) {
        const sb_st_tensor *t = &tensors[i];
        if (json_object_get(root, t->name) != NULL) {
            json_decref(root);
            return sb_error_set(err, SB_ERR_INVALID,
                                "cannot write checkpoint '%s': tensor name '%s' is used twice; "
                                "names must be unique",
                                path, t->name);
        }
        size_t nbytes = 0;
        st_nbytes(t->shape, t->ndim, st_dtypes[t->dtype].size, &nbytes);
        json_t *info = json_object();
        if (json_object_set_new(root, t->name, info) != 0)
            goto nomem;
        /* set_new and append_new take (and on failure free) their value, NULL included:
         * each value is made right where it is handed over, so none is left behind when an
         * earlier one fails */
        json_t *shape = NULL, *offsets = NULL;
        if (json_object_set_new(info, "dtype", json_string(st_dtypes[t->dtype].name)) != 0 ||
            json_object_set_new(info, "shape", shape = json_array()) != 0 ||
            json_object_set_new(info, "data_offsets", offsets = json_array()) != 0)
            goto nomem;
        for (int d = 0; d < t->ndim; d++)
            if (json_array_append_new(shape, json_integer((json_int_t)t->shape[d])) != 0)
                goto nomem;
        if (json_array_append_new(offsets, json_integer((json_int_t)offset)) != 0 ||
            json_array_append_new(offsets, json_integer((json_int_t)(offset + nbytes))) != 0)
            goto nomem;
        offset += nbytes;
    }
    *out = root;
    return SB_OK;
nomem:
    json_decref(root);
    return sb_error_set(err, SB_ERR_NOMEM, "out of memory building the header of checkpoint '%s'",
                        path);
}

/* Writes length, header (padded with spaces to a multiple of 8) and tensor data to f;
 * write errors surface through ferror when the file is closed. */
static void st_write_body(FILE *f, const char *header, size_t header_len,
                          const sb_st_tensor *tensors, size_t n)
{
    size_t padded = (header_len + 7) / 8 * 8;
    unsigned char len[8];
    for (int k = 0; k < 8; k++)
        len[k] = (unsigned char)((uint64_t)padded >> (8 * k));
    fwrite(len, 1, sizeof len, f);
    fwrite(header, 1, header_len, f);
    fwrite("        ", 1, padded - header_len, f);
    for (size_t i = 0; i < n; i++) {
        size_t nbytes = 0;
        st_nbytes(tensors[i].shape, tensors[i].ndim, st_dtypes[tensors[i].dtype].size, &nbytes);
        if (nbytes > 0 && fwrite(tensors[i].data, 1, nbytes, f) != nbytes)
            return;
    }
}

sb_status sb_safetensors_write(const char *path, const sb_st_tensor *tensors, size_t n,
                               const sb_st_meta *meta, size_t n_meta, sb_error *err)
{
    SB_ASSERT(path != NULL && (tensors != NULL || n == 0) && (meta != NULL || n_meta == 0));
    size_t total;
    sb_status st = st_write_check(path, tensors, n, meta, n_meta, &total, err);
    if (st != SB_OK)
        return st;
    json_t *root = NULL;
    st = st_write_header(path, tensors, n, meta, n_meta, &root, err);
    if (st != SB_OK)
        return st;

    size_t header_len = json_dumpb(root, NULL, 0, JSON_COMPACT);
    char *header = header_len > 0 ? sb_malloc(header_len) : NULL;
    /* PATH.PID.tmp: unique per process, so two writers of one path never share a temporary
     * file (the run's lock already keeps two trainings of one run apart) */
    size_t tmp_size = strlen(path) + 24 + sizeof ".tmp";
    char *tmp = sb_malloc(tmp_size);
    if (header == NULL || tmp == NULL ||
        json_dumpb(root, header, header_len, JSON_COMPACT) != header_len) {
        json_decref(root);
        sb_free(header), sb_free(tmp);
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory writing checkpoint '%s'", path);
    }
    json_decref(root);
    snprintf(tmp, tmp_size, "%s.%ld.tmp", path, (long)getpid());

    FILE *f = fopen(tmp, "wb");
    if (f == NULL) {
        st = sb_error_set(err, SB_ERR_IO,
                          "cannot write checkpoint '%s': %s; check that the folder exists and "
                          "is writable",
                          tmp, strerror(errno));
    } else {
        st_write_body(f, header, header_len, tensors, n);
        int bad = ferror(f);
        int saved_errno = errno;
        if (fclose(f) != 0 && !bad)
            bad = 1, saved_errno = errno;
        if (bad)
            st = sb_error_set(err, SB_ERR_IO, "writing checkpoint '%s' failed: %s (disk full?)",
                              tmp, strerror(saved_errno));
        else if (rename(tmp, path) != 0)
            st = sb_error_set(err, SB_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, path,
                              strerror(errno));
        if (st != SB_OK)
            remove(tmp);
    }
    sb_free(header);
    sb_free(tmp);
    return st;
}

/* ---- reader ------------------------------------------------------------------------- */

struct sb_safetensors {
    size_t n;
    sb_st_tensor *tensors;        /* [n] in data order */
    const sb_st_tensor **by_name; /* [n] sorted by strcmp of the name */
    size_t n_meta;
    sb_st_meta *meta;    /* [n_meta] in header order */
    char *strings;       /* every name, key and value, each NUL-terminated */
    unsigned char *data; /* each tensor in its own ST_ALIGN-aligned slot */
};

/* A tensor as parsed from the header, before it is placed. */
typedef struct st_entry {
    sb_st_tensor t; /* name points into the JSON until copied */
    uint64_t begin, end;
    size_t nbytes;
    size_t index; /* position in the header, to keep the sort stable */
} st_entry;

/* Records "checkpoint '<path>' is corrupt: <detail>" as an SB_ERR_IO. */
static sb_status st_corrupt(sb_error *err, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static sb_status st_corrupt(sb_error *err, const char *path, const char *fmt, ...)
{
    char detail[SB_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return sb_error_set(err, SB_ERR_IO,
                        "checkpoint '%s' is corrupt: %s; write it again or restore a good copy",
                        path, detail);
}

/* A non-negative JSON integer into *v. */
static int st_json_u64(const json_t *j, uint64_t *v)
{
    if (!json_is_integer(j) || json_integer_value(j) < 0)
        return 0;
    *v = (uint64_t)json_integer_value(j);
    return 1;
}

/* Parses and checks one header entry (everything that concerns the tensor alone). */
static sb_status st_parse_tensor(const char *path, const char *name, const json_t *info,
                                 st_entry *e, sb_error *err)
{
    if (!json_is_object(info))
        return st_corrupt(err, path, "the header entry of tensor '%s' is not an object", name);
    e->t.name = name;

    const json_t *dtype = json_object_get(info, "dtype");
    if (!json_is_string(dtype))
        return st_corrupt(err, path, "tensor '%s' has no dtype string", name);
    int found = 0;
    for (int k = 0; k < SB_ST_N_DTYPES && !found; k++) {
        if (strcmp(json_string_value(dtype), st_dtypes[k].name) == 0) {
            e->t.dtype = (sb_st_dtype)k;
            found = 1;
        }
    }
    if (!found)
        return st_corrupt(err, path, "tensor '%s' has unknown dtype '%s'", name,
                          json_string_value(dtype));

    const json_t *shape = json_object_get(info, "shape");
    if (!json_is_array(shape))
        return st_corrupt(err, path, "tensor '%s' has no shape array", name);
    if (json_array_size(shape) > SB_ST_MAX_DIMS)
        return st_corrupt(err, path, "tensor '%s' has %zu dimensions, more than the %d supported",
                          name, json_array_size(shape), SB_ST_MAX_DIMS);
    e->t.ndim = (int)json_array_size(shape);
    for (int d = 0; d < e->t.ndim; d++) {
        uint64_t dim;
        if (!st_json_u64(json_array_get(shape, (size_t)d), &dim))
            return st_corrupt(err, path,
                              "tensor '%s' has shape entry %d that is not a "
                              "non-negative integer",
                              name, d);
        e->t.shape[d] = (int64_t)dim; /* json_int_t is signed, so dim <= INT64_MAX */
    }

    const json_t *offsets = json_object_get(info, "data_offsets");
    if (!json_is_array(offsets) || json_array_size(offsets) != 2 ||
        !st_json_u64(json_array_get(offsets, 0), &e->begin) ||
        !st_json_u64(json_array_get(offsets, 1), &e->end))
        return st_corrupt(err, path,
                          "tensor '%s' has no data_offsets pair of non-negative "
                          "integers",
                          name);
    if (e->end < e->begin)
        return st_corrupt(err, path,
                          "tensor '%s' data_offsets [%llu, %llu] end before they "
                          "begin",
                          name, (unsigned long long)e->begin, (unsigned long long)e->end);
    if (!st_nbytes(e->t.shape, e->t.ndim, st_dtypes[e->t.dtype].size, &e->nbytes))
        return st_corrupt(err, path, "tensor '%s' has a shape whose size overflows", name);
    if (e->end - e->begin != e->nbytes)
        return st_corrupt(err, path,
                          "tensor '%s' data_offsets [%llu, %llu] span %llu bytes, "
                          "but its shape and dtype %s need %zu",
                          name, (unsigned long long)e->begin, (unsigned long long)e->end,
                          (unsigned long long)(e->end - e->begin), st_dtypes[e->t.dtype].name,
                          e->nbytes);
    return SB_OK;
}

/* Bytes of the data buffer given to a tensor of nbytes bytes, so the next one stays aligned. */
static size_t st_slot_size(size_t nbytes)
{
    return (nbytes + ST_ALIGN - 1) / ST_ALIGN * ST_ALIGN;
}

static int st_entry_cmp(const void *a, const void *b)
{
    const st_entry *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static int st_name_cmp(const void *a, const void *b)
{
    const sb_st_tensor *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

static int st_name_key_cmp(const void *key, const void *elem)
{
    const sb_st_tensor *const *t = elem;
    return strcmp(key, (*t)->name);
}

/* Checks that the sorted entries tile the data buffer [0, data_len) exactly. */
static sb_status st_check_tiling(const char *path, const st_entry *e, size_t n, uint64_t data_len,
                                 sb_error *err)
{
    uint64_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned long long b = e[i].begin, en = e[i].end;
        if (e[i].end > data_len)
            return st_corrupt(err, path,
                              "tensor '%s' data_offsets [%llu, %llu] run past the "
                              "end of the %llu-byte data buffer (file truncated?)",
                              e[i].t.name, b, en, (unsigned long long)data_len);
        if (e[i].begin < pos)
            return st_corrupt(err, path,
                              "tensor '%s' data_offsets [%llu, %llu] overlap "
                              "tensor '%s', which ends at %llu",
                              e[i].t.name, b, en, e[i - 1].t.name, (unsigned long long)pos);
        if (e[i].begin > pos)
            return st_corrupt(err, path,
                              "tensor '%s' data_offsets [%llu, %llu] leave bytes "
                              "[%llu, %llu) of the data buffer unused",
                              e[i].t.name, b, en, (unsigned long long)pos, b);
        pos = e[i].end;
    }
    if (pos != data_len)
        return st_corrupt(err, path,
                          "the tensors cover %llu bytes but the data buffer holds "
                          "%llu",
                          (unsigned long long)pos, (unsigned long long)data_len);
    return SB_OK;
}

/* Parses and validates the header, then builds *out with its data buffer allocated but
 * not yet read. */
/* The header parsed: *root a new reference to a JSON object. */
static sb_status st_header_json(const char *path, const char *header, size_t header_len,
                                json_t **root, sb_error *err)
{
    json_error_t jerr;
    *root = json_loadb(header, header_len, JSON_REJECT_DUPLICATES, &jerr);
    /* jansson reports a syntax error with a message; it returns NULL without one (or with
     * the out-of-memory code) when an allocation failed */
    if (*root == NULL &&
        (jerr.text[0] == '\0' || json_error_code(&jerr) == json_error_out_of_memory))
        return sb_error_set(err, SB_ERR_NOMEM,
                            "out of memory reading the header of checkpoint "
                            "'%s'",
                            path);
    if (*root == NULL)
        return st_corrupt(err, path,
                          "the header is not valid JSON: %s (at byte %d of the "
                          "header)",
                          jerr.text, jerr.position);
    if (!json_is_object(*root)) {
        json_decref(*root);
        *root = NULL;
        return st_corrupt(err, path, "the header is not a JSON object");
    }
    return SB_OK;
}

/* Counts the header's tensors (*n), metadata entries (*n_meta) and the bytes of their
 * strings with terminators (*n_chars); *meta_obj is the metadata object (NULL: none). The
 * metadata must map names to strings. */
static sb_status st_count(const char *path, json_t *root, size_t *n, size_t *n_meta,
                          size_t *n_chars, const json_t **meta_obj, sb_error *err)
{
    *n = *n_meta = *n_chars = 0;
    *meta_obj = NULL;
    const char *key;
    json_t *value;
    json_object_foreach (root, key, value) {
        if (strcmp(key, "__metadata__") != 0) {
            (*n)++;
            *n_chars += strlen(key) + 1;
            continue;
        }
        if (json_is_null(value))
            continue;
        if (!json_is_object(value))
            return st_corrupt(err, path, "__metadata__ is not an object of strings");
        *meta_obj = value;
        const char *mkey;
        json_t *mvalue;
        json_object_foreach (value, mkey, mvalue) {
            if (!json_is_string(mvalue))
                return st_corrupt(err, path,
                                  "__metadata__ value of '%s' is not a "
                                  "string",
                                  mkey);
            (*n_meta)++;
            *n_chars += strlen(mkey) + 1 + json_string_length(mvalue) + 1;
        }
    }
    return SB_OK;
}

/* Copies the tensors (in data order, e[n]) and the metadata out of the JSON into s: names
 * and metadata into s->strings, each tensor's data slot in s->data, the name index sorted. */
static void st_copy_out(sb_safetensors *s, const st_entry *e, size_t n, const json_t *meta_obj)
{
    char *p = s->strings;
    unsigned char *slot = s->data;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(e[i].t.name) + 1;
        s->tensors[i] = e[i].t;
        s->tensors[i].name = memcpy(p, e[i].t.name, len);
        s->tensors[i].data = slot;
        p += len;
        slot += st_slot_size(e[i].nbytes);
        s->by_name[i] = &s->tensors[i];
    }
    if (meta_obj != NULL) {
        const char *mkey;
        json_t *mvalue;
        size_t m = 0;
        json_object_foreach ((json_t *)meta_obj, mkey, mvalue) {
            size_t klen = strlen(mkey) + 1, vlen = json_string_length(mvalue) + 1;
            s->meta[m].key = memcpy(p, mkey, klen);
            s->meta[m].value = memcpy(p + klen, json_string_value(mvalue), vlen);
            p += klen + vlen;
            m++;
        }
    }
    qsort(s->by_name, n, sizeof *s->by_name, st_name_cmp);
}

static sb_status st_build(const char *path, const char *header, size_t header_len,
                          uint64_t data_len, sb_safetensors **out, sb_error *err)
{
    json_t *root = NULL;
    sb_status st = st_header_json(path, header, header_len, &root, err);
    if (st != SB_OK)
        return st;
    size_t n = 0, n_meta = 0, n_chars = 0;
    const json_t *meta_obj = NULL;
    st = st_count(path, root, &n, &n_meta, &n_chars, &meta_obj, err);
    if (st != SB_OK) {
        json_decref(root);
        return st;
    }

    sb_safetensors *s = sb_calloc(1, sizeof *s);
    st_entry *e = sb_calloc(n + 1, sizeof *e);
    if (s != NULL) {
        s->n = n, s->n_meta = n_meta;
        s->tensors = sb_calloc(n + 1, sizeof *s->tensors);
        s->by_name = sb_calloc(n + 1, sizeof *s->by_name);
        s->meta = sb_calloc(n_meta + 1, sizeof *s->meta);
        s->strings = sb_malloc(n_chars + 1);
    }
    if (s == NULL || e == NULL || s->tensors == NULL || s->by_name == NULL || s->meta == NULL ||
        s->strings == NULL) {
        st = sb_error_set(err, SB_ERR_NOMEM, "out of memory reading checkpoint '%s'", path);
        goto done;
    }

    /* parse the tensors, then put them in data order and check the tiling */
    size_t i = 0;
    const char *key;
    json_t *value;
    json_object_foreach (root, key, value) {
        if (strcmp(key, "__metadata__") == 0)
            continue;
        e[i].index = i;
        st = st_parse_tensor(path, key, value, &e[i], err);
        if (st != SB_OK)
            goto done;
        i++;
    }
    qsort(e, n, sizeof *e, st_entry_cmp);
    st = st_check_tiling(path, e, n, data_len, err);
    if (st != SB_OK)
        goto done;

    /* one aligned slot per tensor (the sum is below file size + ST_ALIGN * n) */
    size_t slots = 0;
    for (i = 0; i < n; i++)
        slots += st_slot_size(e[i].nbytes);
    s->data = sb_aligned_alloc(ST_ALIGN, slots > 0 ? slots : ST_ALIGN);
    if (s->data == NULL) {
        st = sb_error_set(err, SB_ERR_NOMEM,
                          "out of memory reading checkpoint '%s' (%zu bytes "
                          "of tensor data)",
                          path, slots);
        goto done;
    }
    st_copy_out(s, e, n, meta_obj);

done:
    json_decref(root);
    sb_free(e);
    if (st != SB_OK) {
        sb_safetensors_close(s);
        s = NULL;
    }
    *out = s;
    return st;
}

sb_status sb_safetensors_open(const char *path, sb_safetensors **out, sb_error *err)
{
    SB_ASSERT(path != NULL && out != NULL);
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return sb_error_set(err, SB_ERR_IO, "cannot open checkpoint '%s': %s", path,
                            strerror(errno));
    struct stat sbuf;
    if (fstat(fileno(f), &sbuf) != 0 || !S_ISREG(sbuf.st_mode)) {
        fclose(f);
        return sb_error_set(err, SB_ERR_IO, "cannot read checkpoint '%s': not a regular file",
                            path);
    }
    uint64_t file_size = (uint64_t)sbuf.st_size;

    sb_status st = SB_OK;
    char *header = NULL;
    sb_safetensors *s = NULL;
    unsigned char len[8];
    if (file_size < 8) {
        st = st_corrupt(err, path,
                        "the file is %llu bytes long, too short for the 8-byte "
                        "header length (file truncated?)",
                        (unsigned long long)file_size);
        goto done;
    }
    if (fread(len, 1, 8, f) != 8)
        goto read_error;
    uint64_t header_len = 0;
    for (int k = 0; k < 8; k++)
        header_len |= (uint64_t)len[k] << (8 * k);
    if (header_len > ST_HEADER_MAX) {
        st = st_corrupt(err, path,
                        "the header length %llu is larger than the %u-byte limit "
                        "(damaged length field?)",
                        (unsigned long long)header_len, ST_HEADER_MAX);
        goto done;
    }
    if (header_len > file_size - 8) {
        st = st_corrupt(err, path,
                        "the header length %llu runs past the end of the %llu-byte "
                        "file (file truncated?)",
                        (unsigned long long)header_len, (unsigned long long)file_size);
        goto done;
    }
    header = sb_malloc(header_len > 0 ? header_len : 1);
    if (header == NULL) {
        st = sb_error_set(err, SB_ERR_NOMEM, "out of memory reading checkpoint '%s'", path);
        goto done;
    }
    if (fread(header, 1, header_len, f) != header_len)
        goto read_error;
    st = st_build(path, header, header_len, file_size - 8 - header_len, &s, err);
    if (st != SB_OK)
        goto done;
    /* the tensors tile the rest of the file in this order (st_check_tiling) */
    unsigned char *slot = s->data;
    for (size_t i = 0; i < s->n; i++) {
        size_t nbytes = sb_st_tensor_numel(&s->tensors[i]) * sb_st_dtype_size(s->tensors[i].dtype);
        if (fread(slot, 1, nbytes, f) != nbytes)
            goto read_error;
        slot += st_slot_size(nbytes);
    }
    goto done;

read_error:
    st = sb_error_set(err, SB_ERR_IO, "cannot read checkpoint '%s': %s", path,
                      ferror(f) ? strerror(errno) : "the file shrank while it was read");
done:
    fclose(f);
    sb_free(header);
    if (st != SB_OK) {
        sb_safetensors_close(s);
        s = NULL;
    }
    *out = s;
    return st;
}

size_t sb_safetensors_count(const sb_safetensors *st)
{
    return st->n;
}

const sb_st_tensor *sb_safetensors_get(const sb_safetensors *st, size_t i)
{
    SB_ASSERT(i < st->n);
    return &st->tensors[i];
}

const sb_st_tensor *sb_safetensors_find(const sb_safetensors *st, const char *name)
{
    const sb_st_tensor *const *hit =
        bsearch(name, st->by_name, st->n, sizeof *st->by_name, st_name_key_cmp);
    return hit != NULL ? *hit : NULL;
}

const char *sb_safetensors_meta(const sb_safetensors *st, const char *key)
{
    for (size_t i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta[i].key, key) == 0)
            return st->meta[i].value;
    return NULL;
}

size_t sb_safetensors_meta_count(const sb_safetensors *st)
{
    return st->n_meta;
}

const sb_st_meta *sb_safetensors_meta_get(const sb_safetensors *st, size_t i)
{
    SB_ASSERT(i < st->n_meta);
    return &st->meta[i];
}

void sb_safetensors_close(sb_safetensors *st)
{
    if (st == NULL)
        return;
    sb_free(st->tensors);
    sb_free(st->by_name);
    sb_free(st->meta);
    sb_free(st->strings);
    sb_free(st->data);
    sb_free(st);
}
