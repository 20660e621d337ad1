/* registry.c - every layer type the CLI, the tests and the benchmarks can build.
 * Adding a model: write src/nn/layers/<name>.c and add one line below. */
#include <string.h>

#include "selectivbench/model.h"

extern const sb_layer_type sb_layer_transformer;
extern const sb_layer_type sb_layer_gru;
extern const sb_layer_type sb_layer_mamba;
extern const sb_layer_type sb_layer_mamba2;
extern const sb_layer_type sb_layer_gla;
extern const sb_layer_type sb_layer_delta_net;
extern const sb_layer_type sb_layer_gated_delta_net;
extern const sb_layer_type sb_layer_gated_delta_product;
extern const sb_layer_type sb_layer_retnet;
extern const sb_layer_type sb_layer_mesa_net;
extern const sb_layer_type sb_layer_gla_layered;
extern const sb_layer_type sb_layer_delta_net_layered;
extern const sb_layer_type sb_layer_gated_delta_net_layered;
extern const sb_layer_type sb_layer_fox_layered;
extern const sb_layer_type sb_layer_s4;

static const sb_layer_type *const registry[] = {
    &sb_layer_transformer,
    &sb_layer_gru,
    &sb_layer_mamba,
    &sb_layer_mamba2,
    &sb_layer_gla,
    &sb_layer_delta_net,
    &sb_layer_gated_delta_net,
    &sb_layer_gated_delta_product,
    &sb_layer_retnet,
    &sb_layer_mesa_net,
    &sb_layer_gla_layered,
    &sb_layer_delta_net_layered,
    &sb_layer_gated_delta_net_layered,
    &sb_layer_fox_layered,
    &sb_layer_s4,
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
