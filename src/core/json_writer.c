/* json_writer.c - streaming JSON output (see json_writer.h). */
#include "core/json_writer.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"

void sb_format_double(char *buf, size_t size, double v)
{
    if (isnan(v)) {
        snprintf(buf, size, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, size, v > 0 ? "inf" : "-inf");
        return;
    }
    /* The shortest of %.15g, %.16g, %.17g that reads back exactly (17 always does). */
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v);
        if (prec == 17 || strtod(buf, NULL) == v)
            break;
    }
    /* %g drops the trailing zeros, so a value with a short form prints short; like
     * Python, an integral value keeps a ".0" to read as a float. */
    if (strpbrk(buf, ".eEn") == NULL) {
        size_t len = strlen(buf);
        if (len + 2 < size)
            memcpy(buf + len, ".0", 3);
    }
}

void sb_json_init(sb_json *j, FILE *f, int indent)
{
    memset(j, 0, sizeof *j);
    j->f = f;
    j->indent = indent;
}

static void json_newline(sb_json *j)
{
    if (j->indent <= 0)
        return;
    fputc('\n', j->f);
    for (int i = 0; i < j->depth * j->indent; i++)
        fputc(' ', j->f);
}

/* Writes the separator that precedes a value (or a key) in the open container. */
static void json_before_item(sb_json *j)
{
    if (j->after_key) {
        j->after_key = 0;
        return;
    }
    if (j->depth > 0) {
        if (j->has_items[j->depth - 1])
            fputc(',', j->f);
        j->has_items[j->depth - 1] = 1;
        json_newline(j);
    }
}

static void json_open(sb_json *j, char c)
{
    json_before_item(j);
    fputc(c, j->f);
    SB_ASSERT(j->depth < SB_JSON_MAX_DEPTH);
    j->has_items[j->depth++] = 0;
}

static void json_close(sb_json *j, char c)
{
    SB_ASSERT(j->depth > 0);
    int had_items = j->has_items[--j->depth];
    if (had_items)
        json_newline(j);
    fputc(c, j->f);
    if (j->depth == 0 && j->indent > 0)
        fputc('\n', j->f);
}

void sb_json_object_begin(sb_json *j)
{
    json_open(j, '{');
}
void sb_json_object_end(sb_json *j)
{
    json_close(j, '}');
}
void sb_json_array_begin(sb_json *j)
{
    json_open(j, '[');
}
void sb_json_array_end(sb_json *j)
{
    json_close(j, ']');
}

static void json_write_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

void sb_json_key(sb_json *j, const char *key)
{
    json_before_item(j);
    json_write_string(j->f, key);
    fputs(j->indent > 0 ? ": " : ":", j->f);
    j->after_key = 1;
}

void sb_json_string(sb_json *j, const char *s)
{
    json_before_item(j);
    json_write_string(j->f, s);
}

void sb_json_int(sb_json *j, int64_t v)
{
    json_before_item(j);
    fprintf(j->f, "%" PRId64, v);
}

void sb_json_uint(sb_json *j, uint64_t v)
{
    json_before_item(j);
    fprintf(j->f, "%" PRIu64, v);
}

void sb_json_double(sb_json *j, double v)
{
    json_before_item(j);
    if (!isfinite(v)) {
        fputs("null", j->f);
        return;
    }
    char buf[40];
    sb_format_double(buf, sizeof buf, v);
    fputs(buf, j->f);
}

void sb_json_bool(sb_json *j, int v)
{
    json_before_item(j);
    fputs(v ? "true" : "false", j->f);
}

void sb_json_null(sb_json *j)
{
    json_before_item(j);
    fputs("null", j->f);
}

void sb_json_raw(sb_json *j, const char *json_text)
{
    json_before_item(j);
    fputs(json_text, j->f);
}
