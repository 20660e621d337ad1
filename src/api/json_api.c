/* json_api.c - the public API's JSON writer, clock and memory peak (selectivbench.h):
 * wrappers over core/json_writer.h and core/timer.h. */
#include "api/api.h"
#include "core/alloc.h"
#include "core/json_writer.h"
#include "core/timer.h"

/* The public sb_jw: the library's writer behind an opaque handle. */
struct sb_jw {
    sb_json json;
};

sb_jw *sb_jw_create(FILE *f, int indent)
{
    if (f == NULL)
        return NULL;
    sb_jw *j = sb_malloc(sizeof *j);
    if (j != NULL)
        sb_json_init(&j->json, f, indent);
    return j;
}

void sb_jw_free(sb_jw *j)
{
    sb_free(j);
}

void sb_jw_object_begin(sb_jw *j) { sb_json_object_begin(&j->json); }
void sb_jw_object_end(sb_jw *j) { sb_json_object_end(&j->json); }
void sb_jw_array_begin(sb_jw *j) { sb_json_array_begin(&j->json); }
void sb_jw_array_end(sb_jw *j) { sb_json_array_end(&j->json); }
void sb_jw_key(sb_jw *j, const char *key) { sb_json_key(&j->json, key); }
void sb_jw_string(sb_jw *j, const char *s) { sb_json_string(&j->json, s); }
void sb_jw_int(sb_jw *j, int64_t v) { sb_json_int(&j->json, v); }
void sb_jw_uint(sb_jw *j, uint64_t v) { sb_json_uint(&j->json, v); }
void sb_jw_double(sb_jw *j, double v) { sb_json_double(&j->json, v); }
void sb_jw_bool(sb_jw *j, int v) { sb_json_bool(&j->json, v); }
void sb_jw_null(sb_jw *j) { sb_json_null(&j->json); }

double sb_clock_seconds(void)
{
    return sb_time_now();
}

size_t sb_peak_memory_bytes(void)
{
    /* sb_peak_rss_mib is ru_maxrss (KiB) / 1024: whole KiB, so this is exact */
    return (size_t)(sb_peak_rss_mib() * 1048576.0);
}
