/* registry.c - every layer type the CLI, the tests and the benchmarks can build.
 * Adding a model: write src/nn/layers/<name>.c and add one SB_LAYER(<name>) line to
 * src/nn/layers/layers.def (the build compiles every file of src/nn/layers/). */
#include <string.h>

#include "selectivbench/model.h"

/* one SB_LAYER(x) line per type in layers/layers.def: first the declarations of the
 * records, then the table */
#define SB_LAYER(x) extern const sb_layer_type sb_layer_##x;
#include "layers/layers.def"
#undef SB_LAYER

static const sb_layer_type *const registry[] = {
#define SB_LAYER(x) &sb_layer_##x,
#include "layers/layers.def"
#undef SB_LAYER
    NULL,
};

const sb_layer_type *const *sb_layer_types(void)
{
    return registry;
}

const sb_layer_type *sb_layer_type_find(const char *name)
{
    for (int i = 0; registry[i] != NULL; i++)
        if (strcmp(registry[i]->name, name) == 0)
            return registry[i];
    return NULL;
}

void sb_layer_type_list(char *buf, size_t size)
{
    buf[0] = '\0';
    for (int i = 0; registry[i] != NULL; i++) {
        if (i > 0)
            strncat(buf, ", ", size - strlen(buf) - 1);
        strncat(buf, registry[i]->name, size - strlen(buf) - 1);
    }
}
