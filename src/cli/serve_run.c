/* serve_run.c - the run page of `selectivbench serve` (serve.h): GET /api/run?run=ID, one
 * run as stored with what a researcher opens it for (its configuration as stored and as
 * trained, the command that trains it again, its checkpoint, its log, its probe figures),
 * and GET /api/probe?run=ID&figure=NAME, one of those figures. */
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/serve.h"

#define PROBE_FIGURES_MAX 32

/* The folder `probe` writes a checkpoint's figures into (docs/probe.md): the checkpoint's
 * path without ".safetensors", plus "_probe". 0 when the run has no checkpoint path. */
static int probe_dir(const sb_result_row *run, char *out, size_t size)
{
    const char *ckpt = run->checkpoint;
    size_t len = strlen(ckpt);
    if (len == 0)
        return 0;
    const char *ext = ".safetensors";
    if (len > strlen(ext) && strcmp(ckpt + len - strlen(ext), ext) == 0)
        len -= strlen(ext);
    int n = snprintf(out, size, "%.*s_probe", (int)len, ckpt);
    return n > 0 && (size_t)n < size;
}

/* Whether name (without ".svg") is one a figure may have: letters, digits, '_' and '-'. */
static int figure_name_ok(const char *name, size_t len)
{
    if (len == 0 || len >= 64)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!(name[i] >= 'a' && name[i] <= 'z') && !(name[i] >= 'A' && name[i] <= 'Z') &&
            !(name[i] >= '0' && name[i] <= '9') && name[i] != '_' && name[i] != '-')
            return 0;
    return 1;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

/* The SVG figures in dir (names without ".svg", sorted): at most PROBE_FIGURES_MAX. */
static int list_probe_figures(const char *dir, char names[][64])
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    int n = 0;
    struct dirent *e;
    while (n < PROBE_FIGURES_MAX && (e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len > 4 && strcmp(e->d_name + len - 4, ".svg") == 0 &&
            figure_name_ok(e->d_name, len - 4))
            snprintf(names[n++], 64, "%.*s", (int)(len - 4), e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, 64, compare_names);
    return n;
}

static void write_file_facts(sb_jw *j, const char *key, const char *path)
{
    struct stat st;
    int there = path[0] != '\0' && stat(path, &st) == 0 && S_ISREG(st.st_mode);
    sb_jw_key(j, key);
    sb_jw_object_begin(j);
    sb_jw_key(j, "path");
    sb_jw_string(j, path);
    sb_jw_key(j, "exists");
    sb_jw_bool(j, there);
    sb_jw_key(j, "bytes");
    if (there)
        sb_jw_int(j, (int64_t)st.st_size);
    else
        sb_jw_null(j);
    sb_jw_object_end(j);
}

static void write_number(sb_jw *j, const char *key, double v)
{
    sb_jw_key(j, key);
    sb_jw_double(j, v); /* not finite: null */
}

/* The flags that train the run again (sb_config_flags of its stored configuration) and
 * whether they give its run hash back. */
static void write_command(sb_jw *j, sb_results *db, const sb_result_row *run)
{
    sb_error err = {0};
    sb_config *cfg = NULL;
    char *flags = NULL;
    int same = 0;
    if (sb_results_run_config(db, run->run_hash, &cfg, &err) == SB_OK &&
        sb_config_flags(cfg, &flags, &err) == SB_OK) {
        char hash[17];
        sb_config_run_hash(cfg, hash);
        same = strcmp(hash, run->run_hash) == 0;
    }
    sb_jw_key(j, "command");
    if (flags != NULL) {
        size_t size = strlen(flags) + 64;
        char *line = malloc(size);
        if (line != NULL) {
            snprintf(line, size, "selectivbench train%s%s", flags[0] != '\0' ? " " : "", flags);
            sb_jw_string(j, line);
        } else {
            sb_jw_null(j);
        }
        free(line);
    } else {
        sb_jw_null(j);
    }
    /* false when the stored configuration does not give the run's hash back (a row written
     * by another version, or damaged): the command trains something else */
    sb_jw_key(j, "command_has_run_hash");
    sb_jw_bool(j, same);
    sb_jw_key(j, "command_error");
    sb_jw_string(j, flags != NULL ? "" : err.msg);
    sb_string_free(flags);
    sb_config_free(cfg);
}

/* The configuration as stored (a JSON object; {} when it is not one) and as trained. */
static void write_configs(sb_jw *j, sb_results *db, const sb_result_row *run)
{
    sb_error err = {0};
    char *text = NULL;
    if (sb_results_config_json(db, run->run_hash, &text, &err) != SB_OK)
        text = NULL;
    json_t *parsed = text != NULL ? json_loads(text, 0, NULL) : NULL;
    sb_jw_key(j, "config");
    sb_jw_raw(j, json_is_object(parsed) ? text : "{}");
    char *effective =
        text != NULL && json_is_object(parsed) ? sb_experiment_effective_config(text) : NULL;
    json_t *eff_parsed = effective != NULL ? json_loads(effective, 0, NULL) : NULL;
    sb_jw_key(j, "effective_config"); /* grammar_scale resolved: the task as trained */
    if (json_is_object(eff_parsed))
        sb_jw_raw(j, effective);
    else
        sb_jw_null(j);
    json_decref(eff_parsed);
    json_decref(parsed);
    sb_string_free(effective);
    sb_string_free(text);
}

static void write_run_page(sb_jw *j, sb_results *db, const char *db_path, const sb_result_row *run)
{
    sb_jw_object_begin(j);
    sb_serve_write_run_fields(j, run);
    sb_jw_key(j, "state_size");
    sb_jw_int(j, run->state_size);
    write_number(j, "flops_per_token", run->flops_per_token);
    sb_jw_key(j, "host");
    sb_jw_string(j, run->host);
    sb_jw_key(j, "threads");
    sb_jw_int(j, run->threads);
    sb_jw_key(j, "world_size");
    sb_jw_int(j, run->world_size);
    sb_jw_key(j, "engine");
    sb_jw_string(j, run->engine);
    sb_jw_key(j, "fingerprint");
    sb_jw_string(j, run->fingerprint);
    write_configs(j, db, run);
    write_command(j, db, run);
    write_file_facts(j, "checkpoint_file", run->checkpoint);
    /* a sweep's log of the run, beside the database */
    char results_dir[4096], log[4400] = "";
    snprintf(results_dir, sizeof results_dir, "%s", db_path);
    char *slash = strrchr(results_dir, '/');
    if (slash == NULL)
        snprintf(results_dir, sizeof results_dir, ".");
    else
        slash[slash == results_dir ? 1 : 0] = '\0'; /* "/x.db": the root */
    sb_error err = {0};
    if (sb_results_log_path(results_dir, run->run_hash, log, sizeof log, 0, &err) != SB_OK)
        log[0] = '\0';
    write_file_facts(j, "log_file", log);
    char dir[4200];
    char names[PROBE_FIGURES_MAX][64];
    int n = probe_dir(run, dir, sizeof dir) ? list_probe_figures(dir, names) : 0;
    sb_jw_key(j, "probe_dir");
    sb_jw_string(j, n > 0 ? dir : "");
    sb_jw_key(j, "probe_figures");
    sb_jw_array_begin(j);
    for (int i = 0; i < n; i++)
        sb_jw_string(j, names[i]);
    sb_jw_array_end(j);
    sb_jw_object_end(j);
}

/* Opens the database and resolves id: 200 with *db open and *run filled, else the error
 * already in r (and nothing open). */
static unsigned open_run(const char *db_path, const char *id, sb_results **db, sb_result_row *run,
                         sb_serve_reply *r)
{
    *db = NULL;
    if (id == NULL || !sb_serve_id_well_formed(id)) {
        sb_serve_reply_error(r, 400,
                             "give the run as ?run=ID: its id or a prefix of at least 4 "
                             "lowercase hex digits");
        return 400;
    }
    sb_error err = {0};
    sb_result_row *rows = NULL;
    size_t n = 0;
    unsigned status = sb_serve_open_and_read(db_path, db, &rows, &n, &err) == SB_OK ? 200 : 500;
    if (status == 200)
        status = sb_serve_resolve(*db, rows, n, id, run, &err);
    free(rows);
    if (status != 200) {
        sb_results_close(*db);
        *db = NULL;
        sb_serve_reply_error(r, status, err.msg);
    }
    return status;
}

void sb_serve_run(const char *db_path, const char *id, sb_serve_reply *r)
{
    sb_results *db = NULL;
    sb_result_row run;
    if (open_run(db_path, id, &db, &run, r) != 200)
        return;
    sb_serve_json b;
    if (!sb_serve_json_begin(&b)) {
        sb_serve_reply_error(r, 500, "out of memory");
    } else {
        write_run_page(b.j, db, db_path, &run);
        sb_serve_json_finish(&b, r);
    }
    sb_results_close(db);
}

void sb_serve_probe_figure(const char *db_path, const char *id, const char *figure,
                           sb_serve_reply *r)
{
    if (figure == NULL || !figure_name_ok(figure, strlen(figure))) {
        sb_serve_reply_error(r, 400, "give the figure as &figure=NAME (letters, digits, _ and -)");
        return;
    }
    sb_results *db = NULL;
    sb_result_row run;
    if (open_run(db_path, id, &db, &run, r) != 200)
        return;
    sb_results_close(db);
    /* only a name the folder's listing holds is opened (no path is built from the request) */
    char dir[4200], names[PROBE_FIGURES_MAX][64], path[4400];
    int n = probe_dir(&run, dir, sizeof dir) ? list_probe_figures(dir, names) : 0;
    int fd = -1;
    for (int i = 0; i < n && fd < 0; i++)
        if (strcmp(names[i], figure) == 0) {
            int len = snprintf(path, sizeof path, "%s/%.63s.svg", dir, names[i]);
            if (len > 0 && (size_t)len < sizeof path)
                fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        }
    if (fd < 0) {
        sb_serve_reply_error(r, 404,
                             "no such probe figure of this run (run `selectivbench "
                             "probe RUN` to make them)");
        return;
    }
    r->status = 200;
    r->type = "image/svg+xml";
    r->fd = fd;
}
