/*
 * test_safetensors.c - safetensors checkpoints: round trips, byte-exact agreement with the
 * Python library's layout, and rejection of every kind of corrupt file and bad write.
 */
#include <ftw.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "core/safetensors.h"

static char g_dir[64]; /* a fresh temporary folder for the whole group */

/* <g_dir>/<name> into buf (512 bytes). */
static char *tpath(char *buf, const char *name)
{
    snprintf(buf, 512, "%s/%s", g_dir, name);
    return buf;
}

static int exists(const char *path)
{
    struct stat sbuf;
    return stat(path, &sbuf) == 0;
}

static int tmp_exists(const char *path)
{
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid()); /* PATH.PID.tmp */
    return exists(tmp);
}

static unsigned char *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *size = (size_t)n;
    return buf;
}

static void write_all(const char *path, const void *bytes, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        fail_msg("cannot create %s", path);
    if (size > 0)
        assert_int_equal(fwrite(bytes, 1, size, f), size);
    assert_int_equal(fclose(f), 0);
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int k = 0; k < 8; k++)
        v |= (uint64_t)p[k] << (8 * k);
    return v;
}

static void put_le64(unsigned char *p, uint64_t v)
{
    for (int k = 0; k < 8; k++)
        p[k] = (unsigned char)(v >> (8 * k));
}

/* Writes a file the way the Python library lays one out: the length, the header padded
 * with spaces to a multiple of 8, then data_len bytes of data (zeros if data is NULL). */
static void make_file(const char *path, const char *header, const void *data, size_t data_len)
{
    size_t hlen = strlen(header), padded = (hlen + 7) / 8 * 8;
    size_t size = 8 + padded + data_len;
    unsigned char *buf = calloc(size, 1);
    assert_non_null(buf);
    put_le64(buf, padded);
    memcpy(buf + 8, header, hlen);
    memset(buf + 8 + hlen, ' ', padded - hlen);
    if (data != NULL)
        memcpy(buf + 8 + padded, data, data_len);
    write_all(path, buf, size);
    free(buf);
}

/* Opening path must fail with SB_ERR_IO, a message naming the file and containing want. */
static void expect_corrupt(const char *path, const char *want, const char *what)
{
    sb_safetensors *st = (sb_safetensors *)&st; /* junk: must be reset to NULL */
    sb_error err = {0};
    sb_status s = sb_safetensors_open(path, &st, &err);
    if (s != SB_ERR_IO)
        fail_msg("%s: status %d ('%s'), expected SB_ERR_IO", what, (int)s, err.msg);
    assert_null(st);
    if (strstr(err.msg, path) == NULL || strstr(err.msg, want) == NULL)
        fail_msg("%s: message '%s' should name '%s' and say '%s'", what, err.msg, path, want);
}

static void assert_same_file(const char *path, const unsigned char *bytes, size_t size)
{
    size_t n;
    unsigned char *now = read_all(path, &n);
    assert_int_equal(n, size);
    assert_memory_equal(now, bytes, size);
    free(now);
}

/* ---- a checkpoint with every kind of tensor ------------------------------------------ */

enum { N_FIXTURE = 9, N_FIXTURE_META = 3, FIXTURE_DATA_BYTES = 160 };

static float f_w1[5], f_w2[6], f_w3[6], f_w4[8], f_scale[1];
static double f_dbl[3] = {0.1, -2.5e300, 4.9e-324};
static int64_t f_steps[4] = {INT64_MIN, -1, (int64_t)1 << 40, INT64_MAX};

/* Order matters: "dbl" lands at byte 20 of the data buffer, misaligned for an F64, and
 * two empty tensors share offset 128 (the reader keeps their header order). */
static void fixture(sb_st_tensor t[N_FIXTURE], sb_st_meta m[N_FIXTURE_META])
{
    for (int i = 0; i < 5; i++)
        f_w1[i] = (float)i * 0.5f - 1.0f;
    for (int i = 0; i < 6; i++)
        f_w2[i] = (float)i + 0.25f, f_w3[i] = -(float)i / 3.0f;
    for (int i = 0; i < 8; i++)
        f_w4[i] = (float)(i * i) * 1e-3f;
    f_scale[0] = 3.25f;
    sb_st_tensor tt[N_FIXTURE] = {
        {.name = "enc.w1", .dtype = SB_ST_F32, .ndim = 1, .shape = {5}, .data = f_w1},
        {.name = "dbl", .dtype = SB_ST_F64, .ndim = 1, .shape = {3}, .data = f_dbl},
        {.name = "enc.w2", .dtype = SB_ST_F32, .ndim = 2, .shape = {2, 3}, .data = f_w2},
        {.name = "enc.w3", .dtype = SB_ST_F32, .ndim = 3, .shape = {2, 1, 3}, .data = f_w3},
        {.name = "dec.w4", .dtype = SB_ST_F32, .ndim = 4, .shape = {1, 2, 2, 2}, .data = f_w4},
        {.name = "scale", .dtype = SB_ST_F32, .ndim = 0, .data = f_scale},
        {.name = "empty", .dtype = SB_ST_F32, .ndim = 2, .shape = {3, 0}, .data = NULL},
        {.name = "another_empty", .dtype = SB_ST_I64, .ndim = 1, .shape = {0}, .data = f_w1},
        {.name = "steps", .dtype = SB_ST_I64, .ndim = 1, .shape = {4}, .data = f_steps},
    };
    memcpy(t, tt, sizeof tt);
    sb_st_meta mm[N_FIXTURE_META] = {
        {"format", "pt"}, {"sb_version", "0.1.0"}, {"note", "\xce\xb2=0.9, \"quoted\"\n"}};
    memcpy(m, mm, sizeof mm);
}

static void write_fixture(const char *path)
{
    sb_st_tensor t[N_FIXTURE];
    sb_st_meta m[N_FIXTURE_META];
    fixture(t, m);
    sb_error err = {0};
    if (sb_safetensors_write(path, t, N_FIXTURE, m, N_FIXTURE_META, &err) != SB_OK)
        fail_msg("%s", err.msg);
}

static void test_round_trip(void **state)
{
    (void)state;
    char path[512];
    tpath(path, "round.safetensors");
    sb_st_tensor t[N_FIXTURE];
    sb_st_meta m[N_FIXTURE_META];
    fixture(t, m);
    write_fixture(path);
    assert_false(tmp_exists(path));

    sb_safetensors *st = NULL;
    sb_error err = {0};
    if (sb_safetensors_open(path, &st, &err) != SB_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(sb_safetensors_count(st), N_FIXTURE);
    for (size_t i = 0; i < N_FIXTURE; i++) {
        const sb_st_tensor *r = sb_safetensors_get(st, i);
        /* data order is the order given, empty tensors at one offset included */
        assert_string_equal(r->name, t[i].name);
        assert_ptr_equal(sb_safetensors_find(st, t[i].name), r);
        assert_int_equal(r->dtype, t[i].dtype);
        assert_int_equal(r->ndim, t[i].ndim);
        for (int d = 0; d < r->ndim; d++)
            assert_int_equal(r->shape[d], t[i].shape[d]);
        assert_non_null(r->data);
        assert_int_equal((uintptr_t)r->data % 64, 0);
        size_t nbytes = sb_st_tensor_numel(r) * sb_st_dtype_size(r->dtype);
        if (nbytes > 0)
            assert_memory_equal(r->data, t[i].data, nbytes);
    }
    assert_int_equal(sb_st_tensor_numel(sb_safetensors_find(st, "scale")), 1);
    assert_int_equal(sb_st_tensor_numel(sb_safetensors_find(st, "empty")), 0);
    const sb_st_tensor *dbl = sb_safetensors_find(st, "dbl");
    assert_true(((const double *)dbl->data)[1] == -2.5e300);
    assert_true(((const int64_t *)sb_safetensors_find(st, "steps")->data)[0] == INT64_MIN);
    assert_null(sb_safetensors_find(st, "enc"));
    assert_null(sb_safetensors_find(st, "zzz"));
    assert_null(sb_safetensors_find(st, ""));

    assert_int_equal(sb_safetensors_meta_count(st), N_FIXTURE_META);
    for (size_t i = 0; i < N_FIXTURE_META; i++) {
        assert_string_equal(sb_safetensors_meta(st, m[i].key), m[i].value);
        assert_string_equal(sb_safetensors_meta_get(st, i)->key, m[i].key);
    }
    assert_null(sb_safetensors_meta(st, "absent"));
    sb_safetensors_close(st);
    sb_safetensors_close(NULL);
    remove(path);
}

/* The file's layout: length, padded header with "__metadata__" first and the tensors in
 * the order given with consecutive offsets, data start 8-byte aligned, then the bytes. */
static void test_header_layout(void **state)
{
    (void)state;
    char path[512];
    tpath(path, "layout.safetensors");
    sb_st_tensor t[N_FIXTURE];
    sb_st_meta m[N_FIXTURE_META];
    fixture(t, m);
    write_fixture(path);
    size_t size;
    unsigned char *buf = read_all(path, &size);
    uint64_t n = le64(buf);
    assert_int_equal(n % 8, 0);
    assert_int_equal(size, 8 + n + FIXTURE_DATA_BYTES);

    const char *h = (const char *)buf + 8;
    size_t hlen = (size_t)n;
    while (hlen > 0 && h[hlen - 1] == ' ')
        hlen--;
    assert_true(n - hlen < 8);
    assert_int_equal(h[hlen - 1], '}');
    const char *want_start = "{\"__metadata__\":{\"format\":\"pt\",\"sb_version\":\"0.1.0\"";
    assert_memory_equal(h, want_start, strlen(want_start));
    assert_non_null(strstr(h, "\"enc.w1\":{\"dtype\":\"F32\",\"shape\":[5],"
                              "\"data_offsets\":[0,20]}"));
    assert_non_null(strstr(h, "\"scale\":{\"dtype\":\"F32\",\"shape\":[],"
                              "\"data_offsets\":[124,128]}"));
    assert_non_null(strstr(h, "\"empty\":{\"dtype\":\"F32\",\"shape\":[3,0],"
                              "\"data_offsets\":[128,128]}"));

    json_error_t jerr;
    json_t *root = json_loadb(h, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL)
        fail_msg("header: %s", jerr.text);
    assert_int_equal(json_object_size(root), N_FIXTURE + 1);
    const char *key;
    json_t *value;
    size_t i = 0, offset = 0;
    json_object_foreach (root, key, value) {
        if (i++ == 0) {
            assert_string_equal(key, "__metadata__");
            assert_string_equal(json_string_value(json_object_get(value, "note")), m[2].value);
            continue;
        }
        const sb_st_tensor *ti = &t[i - 2];
        assert_string_equal(key, ti->name);
        assert_string_equal(json_string_value(json_object_get(value, "dtype")),
                            sb_st_dtype_name(ti->dtype));
        json_t *off = json_object_get(value, "data_offsets");
        size_t nbytes = sb_st_tensor_numel(ti) * sb_st_dtype_size(ti->dtype);
        assert_int_equal(json_integer_value(json_array_get(off, 0)), offset);
        assert_int_equal(json_integer_value(json_array_get(off, 1)), offset + nbytes);
        if (nbytes > 0)
            assert_memory_equal(buf + 8 + n + offset, ti->data, nbytes);
        offset += nbytes;
    }
    assert_int_equal(offset, FIXTURE_DATA_BYTES);
    json_decref(root);
    free(buf);
    remove(path);
}

/* ---- the Python library's own bytes ---------------------------------------------------- */

/* From the safetensors test suite (huggingface/safetensors, safetensors/src/tensor.rs,
 * test_serialization_forced_alignement): {"attn0": F32 [1,1,2,3] = 0..5}, no metadata;
 * the 65-byte header is padded with 7 spaces. */
static const unsigned char py_attn0[] = {
    72,  0,   0,   0,   0,   0,   0,   0,   123, 34, 97, 116, 116, 110, 48,  34,  58,  123,
    34,  100, 116, 121, 112, 101, 34,  58,  34,  70, 51, 50,  34,  44,  34,  115, 104, 97,
    112, 101, 34,  58,  91,  49,  44,  49,  44,  50, 44, 51,  93,  44,  34,  100, 97,  116,
    97,  95,  111, 102, 102, 115, 101, 116, 115, 34, 58, 91,  48,  44,  50,  52,  93,  125,
    125, 32,  32,  32,  32,  32,  32,  32,  0,   0,  0,  0,   0,   0,   128, 63,  0,   0,
    0,   64,  0,   0,   64,  64,  0,   0,   128, 64, 0,  0,   160, 64};

/* Same suite, test_empty: no tensors, metadata {"framework": "pt"}. */
static const unsigned char py_meta_only[] = {
    40,  0,   0,   0,  0,  0,  0,   0,   123, 34,  95,  95,  109, 101, 116, 97,
    100, 97,  116, 97, 95, 95, 34,  58,  123, 34,  102, 114, 97,  109, 101, 119,
    111, 114, 107, 34, 58, 34, 112, 116, 34,  125, 125, 32,  32,  32,  32,  32};

/* Same suite, test_empty: nothing at all. */
static const unsigned char py_nothing[] = {8,   0,   0,  0,  0,  0,  0,  0,
                                           123, 125, 32, 32, 32, 32, 32, 32};

static void test_python_bytes_written(void **state)
{
    (void)state;
    char path[512];
    tpath(path, "py.safetensors");
    sb_error err = {0};
    const float v[6] = {0, 1, 2, 3, 4, 5};
    sb_st_tensor t = {
        .name = "attn0", .dtype = SB_ST_F32, .ndim = 4, .shape = {1, 1, 2, 3}, .data = v};
    assert_int_equal(sb_safetensors_write(path, &t, 1, NULL, 0, &err), SB_OK);
    assert_same_file(path, py_attn0, sizeof py_attn0);

    sb_st_meta m = {"framework", "pt"};
    assert_int_equal(sb_safetensors_write(path, NULL, 0, &m, 1, &err), SB_OK);
    assert_same_file(path, py_meta_only, sizeof py_meta_only);

    assert_int_equal(sb_safetensors_write(path, NULL, 0, NULL, 0, &err), SB_OK);
    assert_same_file(path, py_nothing, sizeof py_nothing);
    remove(path);
}

static void test_python_bytes_read(void **state)
{
    (void)state;
    char path[512];
    tpath(path, "py.safetensors");
    sb_error err = {0};
    sb_safetensors *st = NULL;

    write_all(path, py_attn0, sizeof py_attn0);
    assert_int_equal(sb_safetensors_open(path, &st, &err), SB_OK);
    assert_int_equal(sb_safetensors_count(st), 1);
    const sb_st_tensor *t = sb_safetensors_find(st, "attn0");
    assert_non_null(t);
    assert_int_equal(t->dtype, SB_ST_F32);
    assert_int_equal(t->ndim, 4);
    assert_int_equal(t->shape[2], 2);
    assert_int_equal(t->shape[3], 3);
    for (int i = 0; i < 6; i++)
        assert_true(((const float *)t->data)[i] == (float)i);
    assert_int_equal(sb_safetensors_meta_count(st), 0);
    sb_safetensors_close(st);

    write_all(path, py_meta_only, sizeof py_meta_only);
    assert_int_equal(sb_safetensors_open(path, &st, &err), SB_OK);
    assert_int_equal(sb_safetensors_count(st), 0);
    assert_null(sb_safetensors_find(st, "attn0"));
    assert_string_equal(sb_safetensors_meta(st, "framework"), "pt");
    sb_safetensors_close(st);

    write_all(path, py_nothing, sizeof py_nothing);
    assert_int_equal(sb_safetensors_open(path, &st, &err), SB_OK);
    assert_int_equal(sb_safetensors_count(st), 0);
    assert_int_equal(sb_safetensors_meta_count(st), 0);
    sb_safetensors_close(st);
    remove(path);
}

/* What torch's save_file writes for a small model: tensors sorted by dtype (largest
 * enum first: I64 > F32 > BOOL) then name, "__metadata__" first, data right after the
 * padded header. Built byte by byte. */
static void test_python_layout_by_hand(void **state)
{
    (void)state;
    char path[512];
    tpath(path, "torch.safetensors");
    const char *header = "{\"__metadata__\":{\"format\":\"pt\"},"
                         "\"step\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]},"
                         "\"bias\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[8,20]},"
                         "\"weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[20,36]},"
                         "\"mask\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[36,38]}}";
    size_t hlen = strlen(header);
    assert_int_equal(hlen % 8, 1); /* so the padding is exercised: 7 spaces */
    unsigned char buf[512];
    size_t pos = 0;
    put_le64(buf, hlen + 7);
    pos = 8;
    memcpy(buf + pos, header, hlen);
    pos += hlen;
    memcpy(buf + pos, "       ", 7);
    pos += 7;
    /* step = 1234567 (I64 LE) */
    const unsigned char step[8] = {0x87, 0xd6, 0x12, 0, 0, 0, 0, 0};
    memcpy(buf + pos, step, 8);
    pos += 8;
    /* bias = [1.0, -2.0, 0.5], weight = [[1, 2], [3, 4]] as F32 LE */
    const unsigned char f32[7][4] = {{0, 0, 0x80, 0x3f}, {0, 0, 0, 0xc0}, {0, 0, 0, 0x3f},
                                     {0, 0, 0x80, 0x3f}, {0, 0, 0, 0x40}, {0, 0, 0x40, 0x40},
                                     {0, 0, 0x80, 0x40}};
    memcpy(buf + pos, f32, sizeof f32);
    pos += sizeof f32;
    buf[pos++] = 1, buf[pos++] = 0; /* mask = [True, False] */
    assert_int_equal(pos, 8 + hlen + 7 + 38);
    write_all(path, buf, pos);

    sb_safetensors *st = NULL;
    sb_error err = {0};
    if (sb_safetensors_open(path, &st, &err) != SB_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(sb_safetensors_count(st), 4);
    const char *order[4] = {"step", "bias", "weight", "mask"};
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(sb_safetensors_get(st, i)->name, order[i]);
    const sb_st_tensor *t = sb_safetensors_find(st, "step");
    assert_int_equal(t->dtype, SB_ST_I64);
    assert_int_equal(t->ndim, 0);
    assert_int_equal(*(const int64_t *)t->data, 1234567);
    t = sb_safetensors_find(st, "bias");
    assert_int_equal(t->ndim, 1);
    assert_int_equal(t->shape[0], 3);
    const float *b = t->data;
    assert_true(b[0] == 1.0f && b[1] == -2.0f && b[2] == 0.5f);
    t = sb_safetensors_find(st, "weight");
    assert_int_equal(t->ndim, 2);
    const float *w = t->data;
    assert_true(w[0] == 1.0f && w[1] == 2.0f && w[2] == 3.0f && w[3] == 4.0f);
    t = sb_safetensors_find(st, "mask");
    assert_int_equal(t->dtype, SB_ST_BOOL);
    assert_int_equal(((const unsigned char *)t->data)[0], 1);
    assert_int_equal(((const unsigned char *)t->data)[1], 0);
    assert_string_equal(sb_safetensors_meta(st, "format"), "pt");
    sb_safetensors_close(st);
    remove(path);
}

/* ---- corrupt files -------------------------------------------------------------------- */

static void test_corrupt_truncated(void **state)
{
    (void)state;
    char good[512], path[512];
    tpath(good, "good.safetensors");
    tpath(path, "trunc.safetensors");
    write_fixture(good);
    size_t size;
    unsigned char *buf = read_all(good, &size);
    size_t n = (size_t)le64(buf);
    const size_t cut[] = {0,         1,     7,         8,        9,       8 + n / 2,
                          8 + n - 1, 8 + n, 8 + n + 1, size - 8, size - 1};
    for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "file cut at %zu of %zu bytes", cut[i], size);
        write_all(path, buf, cut[i]);
        expect_corrupt(path, cut[i] < 8 ? "too short" : "truncated", what);
    }
    /* one byte too many is just as wrong */
    unsigned char *longer = malloc(size + 1);
    assert_non_null(longer);
    memcpy(longer, buf, size);
    longer[size] = 0;
    write_all(path, longer, size + 1);
    expect_corrupt(path, "cover", "one trailing byte");
    free(longer);
    free(buf);
    remove(good);
    remove(path);
}

static void test_corrupt_header_length(void **state)
{
    (void)state;
    char good[512], path[512];
    tpath(good, "good.safetensors");
    tpath(path, "length.safetensors");
    write_fixture(good);
    size_t size;
    unsigned char *buf = read_all(good, &size);
    uint64_t n = le64(buf);
    const struct {
        uint64_t n;
        const char *want;
    } cases[] = {
        {(uint64_t)size, "runs past the end"},
        {n + FIXTURE_DATA_BYTES + 1, "runs past the end"},
        {(uint64_t)1 << 63, "limit"},
        {~(uint64_t)0, "limit"},
        {100000001, "limit"},
        {n ^ ((uint64_t)1 << 56), "limit"}, /* a flipped high byte */
        {n - 8, "JSON"},                    /* the header's end cut off */
        {n + 8, "JSON"},                    /* data bytes after the header */
        {0, "JSON"},
        {1, "JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "header length %llu", (unsigned long long)cases[i].n);
        put_le64(buf, cases[i].n);
        write_all(path, buf, size);
        expect_corrupt(path, cases[i].want, what);
    }
    free(buf);
    remove(good);
    remove(path);
}

#define T_(name, dtype, shape, offs)                                                               \
    "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":" offs "}"

static void test_corrupt_header(void **state)
{
    (void)state;
    char path[512];
    tpath(path, "bad.safetensors");
    const struct {
        const char *header;
        size_t data_len;
        const char *want;
    } cases[] = {
        {"{not json", 0, "not valid JSON"},
        {"", 0, "not valid JSON"},
        {"[1, 2]", 0, "not a JSON object"},
        {"\"just a string\"", 0, "not valid JSON"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 4, "not valid JSON"},
        {"{" T_("a", "F32", "[1]", "[0,4]") "," T_("a", "F32", "[1]", "[4,8]") "}", 8,
         "not valid JSON"}, /* duplicate name */
        {"{\"\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
         "not valid JSON"}, /* not UTF-8 */
        {"{" T_("w", "F33", "[1]", "[0,4]") "}", 4, "unknown dtype 'F33'"},
        {"{" T_("w", "F4", "[2]", "[0,1]") "}", 1, "unknown dtype 'F4'"},
        {"{\"w\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype"},
        {"{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype"},
        {"{\"w\":5}", 0, "not an object"},
        {"{" T_("w", "F32", "7", "[0,4]") "}", 4, "shape"},
        {"{" T_("w", "F32", "[-1]", "[0,4]") "}", 4, "shape"},
        {"{" T_("w", "F32", "[1.5]", "[0,4]") "}", 4, "shape"},
        {"{" T_("w", "F32", "[1,1,1,1,1,1,1,1,1]", "[0,4]") "}", 4, "dimensions"},
        {"{" T_("w", "F32", "[4294967296,4294967296,4294967296]", "[0,4]") "}", 4, "overflow"},
        {"{" T_("w", "F32", "[2,3]", "[0,20]") "}", 20, "need 24"},
        {"{" T_("w", "F32", "[2]", "[0,4]") "}", 4, "need 8"},
        {"{" T_("decoder.bias", "F32", "[1]", "[10,4]") "}", 10,
         "tensor 'decoder.bias' data_offsets [10, 4] end before they begin"},
        {"{" T_("w", "F32", "[1]", "[-4,0]") "}", 4, "data_offsets"},
        {"{" T_("w", "F32", "[1]", "[0,4,8]") "}", 4, "data_offsets"},
        {"{" T_("w", "F32", "[1]", "[0.0,4.0]") "}", 4, "data_offsets"},
        {"{" T_("w", "F32", "[1]", "{}") "}", 4, "data_offsets"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "data_offsets"},
        {"{" T_("w", "F32", "[2]", "[0,8]") "}", 4, "run past the end"},
        {"{" T_("a", "F32", "[2]", "[0,8]") "," T_("b", "F32", "[2]", "[4,12]") "}", 12, "overlap"},
        {"{" T_("a", "F32", "[1]", "[0,4]") "," T_("b", "F32", "[1]", "[8,12]") "}", 12, "unused"},
        {"{" T_("b", "F32", "[1]", "[4,8]") "}", 8, "unused"},
        {"{" T_("a", "F32", "[1]", "[0,4]") "}", 8, "cover"},
        {"{}", 4, "cover"},
        {"{\"__metadata__\":{\"k\":1}}", 0, "__metadata__"},
        {"{\"__metadata__\":{\"k\":\"v\",\"j\":[\"v\"]}}", 0, "__metadata__"},
        {"{\"__metadata__\":\"pt\"}", 0, "__metadata__"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "header case %zu", i);
        make_file(path, cases[i].header, NULL, cases[i].data_len);
        expect_corrupt(path, cases[i].want, what);
    }

    /* the same builder makes files that are valid: extra keys are ignored (as in Python),
     * empty tensors may share an offset, __metadata__ may be null, space may lead */
    const struct {
        const char *header;
        size_t data_len;
        size_t count;
    } good[] = {
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":[1]}}", 8, 1},
        {"{" T_("e", "F64", "[0]", "[0,0]") "," T_("a", "F32", "[1]", "[0,4]") "," T_(
             "f", "I64", "[2,0]", "[4,4]") "}",
         4, 3},
        {"{\"__metadata__\":null}", 0, 0},
        {"  {}", 0, 0},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        make_file(path, good[i].header, NULL, good[i].data_len);
        sb_safetensors *st = NULL;
        sb_error err = {0};
        if (sb_safetensors_open(path, &st, &err) != SB_OK)
            fail_msg("good case %zu: %s", i, err.msg);
        assert_int_equal(sb_safetensors_count(st), good[i].count);
        sb_safetensors_close(st);
    }
    remove(path);
}

static void test_open_not_a_file(void **state)
{
    (void)state;
    char path[512];
    sb_safetensors *st = NULL;
    sb_error err = {0};
    assert_int_equal(sb_safetensors_open(tpath(path, "missing.safetensors"), &st, &err), SB_ERR_IO);
    assert_null(st);
    assert_non_null(strstr(err.msg, path));
    assert_int_equal(sb_safetensors_open(g_dir, &st, &err), SB_ERR_IO);
    assert_null(st);
    assert_non_null(strstr(err.msg, g_dir));
}

/* ---- failed writes -------------------------------------------------------------------- */

static void test_write_invalid(void **state)
{
    (void)state;
    char path[512];
    tpath(path, "invalid.safetensors");
    const float v[4] = {1, 2, 3, 4};
    const sb_st_tensor ok = {.name = "w", .dtype = SB_ST_F32, .ndim = 1, .shape = {4}, .data = v};
    sb_st_tensor t[2] = {ok, ok};
    sb_st_meta m[2] = {{"k", "v"}, {"j", "u"}};
    sb_error err = {0};
    for (int c = 0; c < 13; c++) {
        t[0] = ok, t[1] = ok;
        t[1].name = "b";
        m[1].key = "j", m[1].value = "u";
        const char *want = NULL;
        switch (c) {
        case 0: t[1].name = "w", want = "used twice"; break;
        case 1: t[1].name = "__metadata__", want = "reserved"; break;
        case 2: t[1].name = NULL, want = "no name"; break;
        case 3: t[1].name = "bad\xc3(", want = "UTF-8"; break;
        case 4: t[1].dtype = (sb_st_dtype)99, want = "dtype"; break;
        case 5: t[1].dtype = SB_ST_N_DTYPES, want = "dtype"; break;
        case 6: t[1].ndim = SB_ST_MAX_DIMS + 1, want = "dimensions"; break;
        case 7: t[1].ndim = -1, want = "dimensions"; break;
        case 8: t[1].shape[0] = -4, want = "negative"; break;
        case 9:
            t[1].ndim = 3, t[1].shape[0] = t[1].shape[1] = t[1].shape[2] = (int64_t)1 << 32;
            want = "overflow";
            break;
        case 10: t[1].data = NULL, want = "no data"; break;
        case 11: m[1].key = "k", want = "twice"; break;
        case 12: m[1].value = NULL, want = "NULL"; break;
        }
        sb_status s = sb_safetensors_write(path, t, 2, m, 2, &err);
        if (s != SB_ERR_INVALID || strstr(err.msg, want) == NULL || strstr(err.msg, path) == NULL)
            fail_msg("case %d: status %d, message '%s' (wanted '%s')", c, (int)s, err.msg, want);
        assert_false(exists(path));
        assert_false(tmp_exists(path));
    }
    /* the control: the same arguments untouched write fine */
    t[0] = ok, t[1] = ok, t[1].name = "b";
    m[1].key = "j", m[1].value = "u";
    assert_int_equal(sb_safetensors_write(path, t, 2, m, 2, &err), SB_OK);
    assert_true(exists(path));
    remove(path);
}

static void test_write_unwritable(void **state)
{
    (void)state;
    const char *paths[2] = {"/dev/null/x.safetensors", NULL};
    char nodir[512];
    paths[1] = tpath(nodir, "no/such/folder/x.safetensors");
    const float v = 1.0f;
    sb_st_tensor t = {.name = "w", .dtype = SB_ST_F32, .ndim = 0, .data = &v};
    for (int i = 0; i < 2; i++) {
        sb_error err = {0};
        assert_int_equal(sb_safetensors_write(paths[i], &t, 1, NULL, 0, &err), SB_ERR_IO);
        if (strstr(err.msg, paths[i]) == NULL)
            fail_msg("message '%s' does not name '%s'", err.msg, paths[i]);
        assert_false(tmp_exists(paths[i]));
        assert_false(exists(paths[i]));
    }
}

static void test_failed_write_keeps_old_file(void **state)
{
    (void)state;
    char path[512];
    tpath(path, "keep.safetensors");
    write_fixture(path);
    size_t size;
    unsigned char *before = read_all(path, &size);

    /* bad arguments: nothing is touched */
    sb_error err = {0};
    const float v[4] = {1, 2, 3, 4};
    sb_st_tensor dup[2] = {{.name = "w", .dtype = SB_ST_F32, .ndim = 1, .shape = {4}, .data = v},
                           {.name = "w", .dtype = SB_ST_F32, .ndim = 1, .shape = {4}, .data = v}};
    assert_int_equal(sb_safetensors_write(path, dup, 2, NULL, 0, &err), SB_ERR_INVALID);
    assert_same_file(path, before, size);

    /* a write that fails half-way (file size limit: writes fail with EFBIG) */
    size_t big_n = 1 << 16;
    float *big = calloc(big_n, sizeof *big);
    assert_non_null(big);
    sb_st_tensor bt = {
        .name = "big", .dtype = SB_ST_F32, .ndim = 1, .shape = {(int64_t)big_n}, .data = big};
    struct rlimit old_lim, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old_lim), 0);
    lim = old_lim;
    lim.rlim_cur = 4096;
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    sb_status s = sb_safetensors_write(path, &bt, 1, NULL, 0, &err);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old_lim), 0);
    signal(SIGXFSZ, old_handler);
    assert_int_equal(s, SB_ERR_IO);
    assert_non_null(strstr(err.msg, path));
    assert_false(tmp_exists(path));
    assert_same_file(path, before, size);

    /* the rename fails (the target is a folder): the temporary file goes */
    char dir[512];
    tpath(dir, "a_folder");
    assert_int_equal(mkdir(dir, 0777), 0);
    assert_int_equal(sb_safetensors_write(dir, dup, 1, NULL, 0, &err), SB_ERR_IO);
    assert_non_null(strstr(err.msg, dir));
    assert_false(tmp_exists(dir));
    struct stat sbuf;
    assert_int_equal(stat(dir, &sbuf), 0);
    assert_true(S_ISDIR(sbuf.st_mode));
    rmdir(dir);

    /* and a good write still replaces the file */
    assert_int_equal(sb_safetensors_write(path, &bt, 1, NULL, 0, &err), SB_OK);
    size_t new_size;
    unsigned char *now = read_all(path, &new_size);
    assert_int_equal(new_size, 8 + le64(now) + big_n * sizeof(float));
    free(now);
    assert_false(tmp_exists(path));

    free(big);
    free(before);
    remove(path);
}

/* ---- setup ---------------------------------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *sbuf, int flag, struct FTW *ftw)
{
    (void)sbuf, (void)flag, (void)ftw;
    return remove(path);
}

static int group_setup(void **state)
{
    (void)state;
    const char *base = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/sb_safetensors_XXXXXX",
             base != NULL && strlen(base) < 32 ? base : "/tmp");
    return mkdtemp(g_dir) == NULL ? -1 : 0;
}

static int group_teardown(void **state)
{
    (void)state;
    return nftw(g_dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_header_layout),
        cmocka_unit_test(test_python_bytes_written),
        cmocka_unit_test(test_python_bytes_read),
        cmocka_unit_test(test_python_layout_by_hand),
        cmocka_unit_test(test_corrupt_truncated),
        cmocka_unit_test(test_corrupt_header_length),
        cmocka_unit_test(test_corrupt_header),
        cmocka_unit_test(test_open_not_a_file),
        cmocka_unit_test(test_write_invalid),
        cmocka_unit_test(test_write_unwritable),
        cmocka_unit_test(test_failed_write_keeps_old_file),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
