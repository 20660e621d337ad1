/* plan_cache.c - the calibration cache of `selectivbench plan` (see plan.h): a JSON file we
 * write one calibration a line, and read back line by line (it is not a general JSON
 * reader: a file edited by hand into another layout reads as damaged and is rewritten). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/cpus.h"
#include "core/fs.h"
#include "core/json_writer.h"
#include "exp/plan.h"

/* 3: calibrations time the micro-batches after a warm-up, always (version 2 timed the first
 * one of large shapes, 5-10 times too slow); 4: setup_s counts the ideal observer and the
 * process start-up, and the default engine table measures nothing: a file of another version
 * is measured again */
#define CACHE_HEAD "{\"version\": 4, \"calibrations\": ["
#define CACHE_TAIL "]}"

/* Copies the text of "name": "..." in line into out[size]; 0 when it is not there. Our
 * strings never hold quotes or backslashes (sanitised when written). */
static int field_string(const char *line, const char *name, char *out, size_t size)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": \"", name);
    const char *p = strstr(line, pat);
    if (p == NULL)
        return 0;
    p += strlen(pat);
    const char *end = strchr(p, '"');
    if (end == NULL || (size_t)(end - p) >= size)
        return 0;
    memcpy(out, p, (size_t)(end - p));
    out[end - p] = '\0';
    return 1;
}

/* The number of "name": x in line; 0 when it is not there or not a finite number. */
static int field_number(const char *line, const char *name, double *out)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", name);
    const char *p = strstr(line, pat);
    if (p == NULL)
        return 0;
    p += strlen(pat);
    char *end;
    errno = 0;
    double v = strtod(p, &end);
    if (end == p || errno != 0 || !(v == v) || v > 1e300 || v < -1e300)
        return 0;
    *out = v;
    return 1;
}

/* One entry line; 0 when it does not read or its numbers are out of range. */
static int parse_entry(const char *line, sb_plan_cache_entry *e)
{
    memset(e, 0, sizeof *e);
    sb_plan_calibration *c = &e->c;
    double threads, train, eval, setup, gemm, gflops, layers, train_fpf, eval_fpf;
    if (!field_string(line, "machine", e->machine, sizeof e->machine) ||
        !field_string(line, "key", c->key, sizeof c->key) ||
        !field_number(line, "threads", &threads) ||
        !field_number(line, "train_s_per_frame", &train) ||
        !field_number(line, "eval_s_per_frame", &eval) || !field_number(line, "setup_s", &setup) ||
        !field_number(line, "gemm_share", &gemm) || !field_number(line, "gflops", &gflops) ||
        !field_number(line, "calibrated_layers", &layers) ||
        !field_number(line, "train_flops_per_frame", &train_fpf) ||
        !field_number(line, "eval_flops_per_frame", &eval_fpf))
        return 0;
    if (threads < 1 || threads > 1e6 || !(train > 0) || !(eval >= 0) || !(setup >= 0) || gemm < 0 ||
        gemm > 1 || gflops < 0 || layers < 1 || layers > 1e6 || !(train_fpf > 0) || !(eval_fpf > 0))
        return 0;
    c->calibrated_threads = (int)threads;
    c->train_s_per_frame = train;
    c->eval_s_per_frame = eval;
    c->setup_s = setup;
    c->gemm_share = gemm;
    c->gflops = gflops;
    c->calibrated_layers = (int)layers;
    c->train_flops_per_frame = train_fpf;
    c->eval_flops_per_frame = eval_fpf;
    c->source = SB_PLAN_CACHED;
    return 1;
}

sb_status sb_plan_cache_load(const char *path, sb_plan_cache *cache, int *damaged, sb_error *err)
{
    memset(cache, 0, sizeof *cache);
    *damaged = 0;
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        if (errno == ENOENT)
            return SB_OK;
        return sb_error_set(err, SB_ERR_IO, "cannot read the calibration cache %s: %s", path,
                            strerror(errno));
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int n_line = 0, tail = 0;
    sb_status st = SB_OK;
    while (st == SB_OK && (len = getline(&line, &cap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (n_line++ == 0) {
            if (strcmp(line, CACHE_HEAD) != 0) {
                *damaged = 1; /* not a cache, or another version's: none of its lines count */
                break;
            }
            continue;
        }
        if (strcmp(line, CACHE_TAIL) == 0) {
            tail = 1;
            continue;
        }
        sb_plan_cache_entry e;
        if (tail || !parse_entry(line, &e)) {
            *damaged = 1;
            continue;
        }
        st = sb_plan_cache_put(cache, e.machine, &e.c, err);
    }
    if (!tail)
        *damaged = 1;
    free(line);
    fclose(f);
    if (st != SB_OK)
        sb_plan_cache_free(cache);
    return st;
}

const sb_plan_calibration *sb_plan_cache_find(const sb_plan_cache *cache, const char *machine,
                                              int threads, const char *key)
{
    for (int i = 0; i < cache->n; i++) {
        const sb_plan_cache_entry *e = &cache->entries[i];
        if (e->c.calibrated_threads == threads && strcmp(e->machine, machine) == 0 &&
            strcmp(e->c.key, key) == 0)
            return &e->c;
    }
    return NULL;
}

sb_status sb_plan_cache_put(sb_plan_cache *cache, const char *machine, const sb_plan_calibration *c,
                            sb_error *err)
{
    for (int i = 0; i < cache->n; i++) {
        sb_plan_cache_entry *e = &cache->entries[i];
        if (e->c.calibrated_threads == c->calibrated_threads && strcmp(e->machine, machine) == 0 &&
            strcmp(e->c.key, c->key) == 0) {
            e->c = *c;
            return SB_OK;
        }
    }
    if (cache->n == cache->cap) {
        int cap = cache->cap > 0 ? 2 * cache->cap : 16;
        sb_plan_cache_entry *grown = realloc(cache->entries, (size_t)cap * sizeof *grown);
        if (grown == NULL)
            return sb_error_set(err, SB_ERR_NOMEM, "out of memory for the calibration cache");
        cache->entries = grown;
        cache->cap = cap;
    }
    sb_plan_cache_entry *e = &cache->entries[cache->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->machine, sizeof e->machine, "%s", machine);
    e->c = *c;
    return SB_OK;
}

/* mkdir -p of the folder that holds path (a failure shows when the file is written). */
static void make_parent(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL || slash == dir)
        return;
    *slash = '\0';
    sb_error ignored = {0};
    (void)sb_make_dirs(dir, "calibration cache folder", &ignored);
}

static void write_number(FILE *f, const char *name, double v)
{
    char buf[40];
    sb_format_double(buf, sizeof buf, v);
    fprintf(f, ", \"%s\": %s", name, buf);
}

sb_status sb_plan_cache_save(const char *path, const sb_plan_cache *cache, sb_error *err)
{
    make_parent(path);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return sb_error_set(err, SB_ERR_IO, "cannot write the calibration cache %s: %s", path,
                            strerror(errno));
    fprintf(f, "%s\n", CACHE_HEAD);
    for (int i = 0; i < cache->n; i++) {
        const sb_plan_cache_entry *e = &cache->entries[i];
        const sb_plan_calibration *c = &e->c;
        fprintf(f, "{\"machine\": \"%s\", \"threads\": %d, \"key\": \"%s\"", e->machine,
                c->calibrated_threads, c->key);
        write_number(f, "train_s_per_frame", c->train_s_per_frame);
        write_number(f, "eval_s_per_frame", c->eval_s_per_frame);
        write_number(f, "setup_s", c->setup_s);
        write_number(f, "gemm_share", c->gemm_share);
        write_number(f, "gflops", c->gflops);
        write_number(f, "train_flops_per_frame", c->train_flops_per_frame);
        write_number(f, "eval_flops_per_frame", c->eval_flops_per_frame);
        fprintf(f, ", \"calibrated_layers\": %d}%s\n", c->calibrated_layers,
                i + 1 < cache->n ? "," : "");
    }
    fprintf(f, "%s\n", CACHE_TAIL);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return sb_error_set(err, SB_ERR_IO, "cannot write the calibration cache %s: %s", path,
                            strerror(e));
    }
    return SB_OK;
}

void sb_plan_cache_free(sb_plan_cache *cache)
{
    free(cache->entries);
    memset(cache, 0, sizeof *cache);
}

/* Quotes and backslashes become '_' (the cache's strings are read back without escapes). */
static void sanitise(char *s)
{
    for (; *s != '\0'; s++)
        if (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20)
            *s = '_';
}

void sb_plan_machine(char *out, size_t size)
{
    char cpu[200] = "unknown CPU";
    sb_cpu_model(cpu, sizeof cpu);
    snprintf(out, size, "%s, selectivbench %s", cpu, SB_VERSION);
    sanitise(out);
}

void sb_plan_cache_default_path(char *buf, size_t size)
{
    const char *dir = getenv("SB_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"),
               *home = getenv("HOME");
    if (size == 0)
        return;
    if (dir != NULL && dir[0] != '\0')
        snprintf(buf, size, "%s/plan-calibration.json", dir);
    else if (xdg != NULL && xdg[0] == '/')
        snprintf(buf, size, "%s/selectivbench/plan-calibration.json", xdg);
    else if (home != NULL && home[0] != '\0')
        snprintf(buf, size, "%s/.cache/selectivbench/plan-calibration.json", home);
    else
        buf[0] = '\0';
}
