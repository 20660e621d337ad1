/*
 * fuzz_ceiling_json.c - libFuzzer target for sb_ceiling_from_json (src/task/ceiling.c): the
 * results database's ceiling cache is read back through it. An accepted text gives a
 * defined effective memory, and writing it (sb_ceiling_write_json) reads back the same.
 * Built and run with the others (docs/fuzzing.md): `./run.sh fuzz`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_writer.h"
#include "fuzz_common.h"
#include "task/ceiling.h"

/* c written as JSON (malloc'd), or NULL when out of memory. */
static char *ceiling_json(const sb_ceiling *c)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f == NULL)
        return NULL;
    sb_json j;
    sb_json_init(&j, f, 0);
    sb_ceiling_write_json(c, &j);
    fclose(f);
    return buf;
}

/* What is accepted writes a text that reads back and writes the same text again. */
static void check_write_back(const sb_ceiling *c)
{
    char *first = ceiling_json(c);
    if (first == NULL)
        return;
    sb_ceiling back;
    sb_error err = {0};
    sb_status st = sb_ceiling_from_json(first, &back, &err);
    if (st != SB_OK)
        fprintf(stderr, "%s\n%s\n", first, err.msg);
    fuzz_check(st == SB_OK, "a ceiling's own JSON does not read back");
    char *second = ceiling_json(&back);
    fuzz_check(second != NULL && strcmp(first, second) == 0,
               "a ceiling's JSON read back writes another text");
    free(first);
    free(second);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    if (text == NULL)
        return 0;
    sb_ceiling c;
    sb_error err = {0};
    if (sb_ceiling_from_json(text, &c, &err) == SB_OK) {
        /* whatever was accepted gives a defined effective memory */
        (void)sb_ceiling_effective_memory(&c, 0.5);
        check_write_back(&c);
    }
    free(text);
    return 0;
}
