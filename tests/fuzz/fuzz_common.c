/* fuzz_common.c - temporary files and checks for the fuzz targets (see fuzz_common.h). */
#include "fuzz_common.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void fuzz_temp_path(const char *tag, const char *suffix, char *path, size_t cap)
{
    /* per process: libFuzzer's -fork/-jobs workers and parallel ctest runs never share one */
    snprintf(path, cap, "/tmp/sb-fuzz-%s-%ld%s", tag, (long)getpid(), suffix);
}

int fuzz_temp_write(const char *tag, const uint8_t *data, size_t size, char *path, size_t cap)
{
    fuzz_temp_path(tag, "", path, cap);
    fuzz_temp_remove(path);
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return -1;
    size_t wrote = size > 0 ? fwrite(data, 1, size, f) : 0;
    int closed = fclose(f);
    if (wrote != size || closed != 0) {
        fuzz_temp_remove(path);
        return -1;
    }
    return 0;
}

void fuzz_temp_remove(const char *path)
{
    static const char *const companions[] = {"", "-wal", "-shm", "-journal", ".tmp"};
    for (size_t i = 0; i < sizeof companions / sizeof *companions; i++) {
        char name[4200];
        snprintf(name, sizeof name, "%s%s", path, companions[i]);
        unlink(name);
    }
}

char *fuzz_text(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (text == NULL)
        return NULL;
    if (size > 0)
        memcpy(text, data, size);
    text[size] = '\0';
    return text;
}

void fuzz_check(int ok, const char *what)
{
    if (ok)
        return;
    fprintf(stderr, "fuzz target: invariant broken: %s\n", what);
    abort();
}

void fuzz_temp_dir_remove(const char *dir, const char *db)
{
    fuzz_temp_remove(db);
    char locks[300];
    snprintf(locks, sizeof locks, "%s/locks", dir);
    DIR *d = opendir(locks);
    if (d != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char path[600];
            snprintf(path, sizeof path, "%s/%s", locks, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(locks);
    rmdir(dir);
}
