/* json_api.c - the public API's JSON writer and clock (selectivbench.h): wrappers over
 * core/json_writer.h and core/timer.h. */
#include <stdlib.h>

#include "api/api.h"
#include "core/json_writer.h"
#include "core/timer.h"

/* The public writer is the core one behind an opaque handle. */
struct sb_jw {
    sb_json json;
};

sb_jw *sb_jw_open(FILE *f, int indent)
{
    if (f == NULL)
        return NULL;
    sb_jw *j = malloc(sizeof *j);
    if (j != NULL)
        sb_json_init(&j->json, f, indent);
    return j;
}

void sb_jw_close(sb_jw *j)
{
    free(j);
}

void sb_jw_object_begin(sb_jw *j)
{
    sb_json_object_begin(&j->json);
}
void sb_jw_object_end(sb_jw *j)
{
    sb_json_object_end(&j->json);
}
void sb_jw_array_begin(sb_jw *j)
{
    sb_json_array_begin(&j->json);
}
void sb_jw_array_end(sb_jw *j)
{
    sb_json_array_end(&j->json);
}
void sb_jw_key(sb_jw *j, const char *key)
{
    sb_json_key(&j->json, key);
}
void sb_jw_int(sb_jw *j, int64_t v)
{
    sb_json_int(&j->json, v);
}
void sb_jw_uint(sb_jw *j, uint64_t v)
{
    sb_json_uint(&j->json, v);
}
void sb_jw_double(sb_jw *j, double v)
{
    sb_json_double(&j->json, v);
}
void sb_jw_bool(sb_jw *j, int v)
{
    sb_json_bool(&j->json, v);
}
void sb_jw_null(sb_jw *j)
{
    sb_json_null(&j->json);
}
void sb_jw_raw(sb_jw *j, const char *json_text)
{
    sb_json_raw(&j->json, json_text);
}

void sb_jw_string(sb_jw *j, const char *s)
{
    if (s == NULL)
        sb_json_null(&j->json);
    else
        sb_json_string(&j->json, s);
}

void sb_jw_format_double(char *buf, size_t size, double v)
{
    sb_format_double(buf, size, v);
}

double sb_clock_seconds(void)
{
    return sb_time_now();
}

size_t sb_peak_memory_bytes(void)
{
    return (size_t)(sb_peak_rss_mib() * 1024.0 * 1024.0);
}
