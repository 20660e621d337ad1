/* registry.c - every layer type the CLI, the tests and the benchmarks can build.
 * Adding a model: write src/layers/<name>.c and add one SB_LAYER(<name>) line to
 * src/layers/layers.def (the build compiles every file of src/layers/). */
#include <string.h>

#include "core/suggest.h"
#include "layers/layer.h"

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

int sb_num_heads(int d_model)
{
    /* utils.get_num_heads(h, max_head_size=128) */
    if ((double)d_model / 128.0 <= 4.0)
        return 4;
    for (int n = 4; n <= d_model; n *= 2)
        if (d_model % n == 0 && d_model / n <= 128)
            return n;
    return 0;
}

sb_status sb_layer_check_heads(const char *model, const char *what, int width, int n_head,
                               sb_error *err)
{
    if (n_head < 1 || width % n_head != 0)
        return sb_error_set(err, SB_ERR_INVALID, "%s: %s %d is not divisible by %d heads", model,
                            what, width, n_head);
    return SB_OK;
}

sb_status sb_layer_type_unknown(const char *name, sb_error *err)
{
    sb_suggest near;
    sb_suggest_init(&near, name);
    for (int i = 0; registry[i] != NULL; i++)
        sb_suggest_offer(&near, registry[i]->name);
    const char *hint = sb_suggest_result(&near);
    if (hint != NULL)
        return sb_error_set(err, SB_ERR_INVALID,
                            "unknown --model '%s'; did you mean '%s'? (the models command "
                            "lists them)",
                            name, hint);
    char list[512];
    sb_layer_type_list(list, sizeof list);
    return sb_error_set(err, SB_ERR_INVALID, "unknown --model '%s'; available: %s", name, list);
}
