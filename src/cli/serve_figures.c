/* serve_figures.c - the report's figures for `selectivbench serve` (serve.h). They are
 * rendered with the public report API (sb_report_write_readonly: the database is only read)
 * into a private temporary folder, again whenever the runs changed, and removed on exit. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/serve.h"

sb_status sb_serve_figures_init(sb_serve_figures *f, sb_error *err)
{
    memset(f, 0, sizeof *f);
    const char *tmp = getenv("TMPDIR");
    snprintf(f->root, sizeof f->root, "%s/selectivbench-serve-XXXXXX",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    if (mkdtemp(f->root) == NULL) {
        sb_error_set(err, SB_ERR_IO,
                     "cannot make a temporary folder for the figures ('%s'): %s "
                     "(set TMPDIR to a writable folder)",
                     f->root, strerror(errno));
        f->root[0] = '\0';
        return SB_ERR_IO;
    }
    return SB_OK;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    remove(path); /* a file, or a folder already emptied (FTW_DEPTH) */
    return 0;
}

/* Removes a folder and everything in it (never following links). */
static void remove_tree(const char *dir)
{
    if (dir[0] != '\0')
        nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void sb_serve_figures_cleanup(sb_serve_figures *f)
{
    remove_tree(f->root);
    f->root[0] = '\0';
    f->dir[0] = '\0';
}

static int compare_names(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

/* The SVG files of dir, by name without ".svg", into f->names (sorted). */
static void list_svgs(sb_serve_figures *f, const char *dir)
{
    f->n = 0;
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && f->n < (int)(sizeof f->names / sizeof *f->names)) {
        size_t len = strlen(e->d_name);
        if (len > 4 && len - 4 < sizeof f->names[0] && strcmp(e->d_name + len - 4, ".svg") == 0)
            snprintf(f->names[f->n++], sizeof f->names[0], "%.*s", (int)(len - 4), e->d_name);
    }
    closedir(d);
    qsort(f->names, (size_t)f->n, sizeof f->names[0], compare_names);
}

/* Renders the figures into a new folder root/N when the runs changed since the last
 * rendering; the previous folder is removed once the new one is complete. A rendering that
 * failed is tried again only when the runs change (its error is listed meanwhile, with the
 * figures of the last rendering that worked). */
static void figures_refresh(sb_serve *s)
{
    sb_serve_figures *f = &s->figures;
    sb_error err = {0};
    uint64_t key = 0;
    if (sb_serve_runs_key(s->db_path, &key, &err) != SB_OK) {
        snprintf(f->error, sizeof f->error, "%s", err.msg);
        f->tried = 0; /* render at the next request that reads the runs */
        return;
    }
    if (f->tried && key == f->key)
        return;
    f->tried = 1;
    f->key = key;
    char dir[sizeof f->dir];
    snprintf(dir, sizeof dir, "%s/%d", f->root, ++f->generation);
    sb_report_outcome out;
    if (sb_report_write_readonly(s->db_path, dir, &out, &err) != SB_OK) {
        remove_tree(dir);
        snprintf(f->error, sizeof f->error, "%s", err.msg);
        return;
    }
    remove_tree(f->dir);
    snprintf(f->dir, sizeof f->dir, "%s", dir);
    f->error[0] = '\0';
    f->runs_read = out.runs_read;
    f->runs_used = out.runs_used;
    list_svgs(f, dir);
}

/* Writes {"figures": [names], "runs_read", "runs_used", "error"} into r. */
static void write_list(const sb_serve_figures *f, sb_serve_reply *r)
{
    char *data = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&data, &len);
    sb_jw *j = mem != NULL ? sb_jw_open(mem, 0) : NULL;
    if (j == NULL) {
        if (mem != NULL)
            fclose(mem);
        free(data);
        sb_serve_reply_error(r, 500, "out of memory");
        return;
    }
    sb_jw_object_begin(j);
    sb_jw_key(j, "figures");
    sb_jw_array_begin(j);
    for (int i = 0; i < f->n; i++)
        sb_jw_string(j, f->names[i]);
    sb_jw_array_end(j);
    sb_jw_key(j, "runs_read");
    sb_jw_int(j, f->runs_read);
    sb_jw_key(j, "runs_used");
    sb_jw_int(j, f->runs_used);
    sb_jw_key(j, "error");
    sb_jw_string(j, f->error);
    sb_jw_object_end(j);
    sb_jw_close(j);
    fclose(mem);
    r->status = 200;
    r->type = "application/json";
    r->body = data;
    r->len = len;
}

void sb_serve_figures_list(sb_serve *s, sb_serve_reply *r)
{
    figures_refresh(s);
    write_list(&s->figures, r);
}

void sb_serve_figure(sb_serve *s, const char *name, sb_serve_reply *r)
{
    figures_refresh(s);
    const sb_serve_figures *f = &s->figures;
    /* only a name of the list: never a path built from what the request says */
    for (int i = 0; i < f->n; i++) {
        if (strcmp(f->names[i], name) != 0)
            continue;
        char path[sizeof f->dir + 80];
        snprintf(path, sizeof path, "%s/%s.svg", f->dir, f->names[i]);
        r->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (r->fd < 0) {
            sb_serve_reply_error(r, 500, "the figure's file is gone");
            return;
        }
        r->status = 200;
        r->type = "image/svg+xml";
        return;
    }
    sb_serve_reply_error(r, 404, "no such figure (GET /api/figures lists them)");
}
