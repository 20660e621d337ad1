/* presets.h - the sweep files of configs/tiny/, built into the program (generated). */
#ifndef SELECTIVBENCH_CLI_PRESETS_H
#define SELECTIVBENCH_CLI_PRESETS_H

#include <stddef.h>

typedef struct sb_preset {
    const char *name; /* "tiny/task2" */
    const char *text; /* the YAML */
    size_t len;
} sb_preset;

/* NULL-terminated */
extern const sb_preset sb_presets[];

#endif
