/*
 * replay_main.c - runs a fuzz target over committed inputs without libFuzzer: the test suite
 * builds each target with it (tests/CMakeLists.txt, test_fuzz_replay_*), so the corpus of
 * tests/fuzz/corpus/<target>/ is checked by every build, the ASan build included.
 *
 *   fuzz_replay_<target> DIR|FILE...
 *
 * Feeds every regular file of each folder (in name order, so runs repeat) and every file
 * named to LLVMFuzzerTestOneInput. Exits 1 when a folder or file cannot be read or when no
 * input was found (a moved corpus must not pass silently); a target that crashes fails the
 * test by itself.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"

/* Reads the whole file at path into *data (malloc'd) and *size. Returns 0 on success. */
static int read_file(const char *path, uint8_t **data, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    while (buf != NULL) {
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap)
            break;
        uint8_t *grown = realloc(buf, cap * 2);
        if (grown == NULL) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = grown;
        cap *= 2;
    }
    int failed = ferror(f) || buf == NULL;
    fclose(f);
    if (failed) {
        free(buf);
        return -1;
    }
    *data = buf;
    *size = len;
    return 0;
}

static int replay_file(const char *path)
{
    uint8_t *data = NULL;
    size_t size = 0;
    if (read_file(path, &data, &size) != 0) {
        fprintf(stderr, "replay: cannot read '%s'\n", path);
        return -1;
    }
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* Replays every regular file of dir; *count grows by their number. Returns 0 on success. */
static int replay_dir(const char *dir, int *count)
{
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, by_name);
    if (n < 0) {
        fprintf(stderr, "replay: cannot list folder '%s'\n", dir);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        struct stat sbuf;
        if (rc == 0 && stat(path, &sbuf) == 0 && S_ISREG(sbuf.st_mode)) {
            rc = replay_file(path);
            (*count)++;
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
        return 2;
    }
    int count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sbuf;
        if (stat(argv[i], &sbuf) != 0) {
            fprintf(stderr, "replay: '%s' does not exist\n", argv[i]);
            return 1;
        }
        int rc = S_ISDIR(sbuf.st_mode) ? replay_dir(argv[i], &count) : replay_file(argv[i]);
        if (!S_ISDIR(sbuf.st_mode))
            count++;
        if (rc != 0)
            return 1;
    }
    if (count == 0) {
        fprintf(stderr, "replay: no inputs in the folders given\n");
        return 1;
    }
    printf("replayed %d inputs\n", count);
    return 0;
}
