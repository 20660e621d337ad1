/*
 * json_writer.h - a small streaming JSON writer.
 *
 * Doubles are written with the shortest decimal form that reads back to the same bits
 * (what Python's repr prints), so numbers written here compare exactly with the
 * reference's JSON files. Non-finite doubles are written as null.
 */
#ifndef SELECTIVBENCH_JSON_WRITER_H
#define SELECTIVBENCH_JSON_WRITER_H

#include <stdint.h>
#include <stdio.h>

#define SB_JSON_MAX_DEPTH 32

typedef struct sb_json {
    FILE *f;
    int depth;
    int indent;                       /* spaces per level; 0 writes one line */
    int has_items[SB_JSON_MAX_DEPTH]; /* whether the open container has an item yet */
    int after_key;                    /* a key was written, its value comes next */
} sb_json;

/* Starts writing to f; indent 0 gives compact output. */
void sb_json_init(sb_json *j, FILE *f, int indent);

void sb_json_object_begin(sb_json *j);
void sb_json_object_end(sb_json *j);
void sb_json_array_begin(sb_json *j);
void sb_json_array_end(sb_json *j);
void sb_json_key(sb_json *j, const char *key);
void sb_json_string(sb_json *j, const char *s);
void sb_json_int(sb_json *j, int64_t v);
void sb_json_uint(sb_json *j, uint64_t v);
void sb_json_double(sb_json *j, double v);
void sb_json_bool(sb_json *j, int v);
void sb_json_null(sb_json *j);
/* A value given as JSON text (e.g. an object serialised elsewhere), written as is. */
void sb_json_raw(sb_json *j, const char *json_text);

/* Writes the shortest round-trip decimal form of v into buf (at least 32 bytes),
 * Python style ("1.0", "0.1", "1e-05"); "nan"/"inf"/"-inf" for non-finite values. */
void sb_format_double(char *buf, size_t size, double v);

#endif
