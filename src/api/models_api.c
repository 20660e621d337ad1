/* models_api.c - the public API's model registry and sizes (selectivbench.h): wrappers over
 * layers/layer.h (the registry) and model/model.h. */
#include <string.h>

#include "api/api.h"
#include "layers/layer.h"
#include "model/model.h"
#include "task/grammar.h"
#include "train/run_setup.h"

int sb_models_count(void)
{
    const sb_layer_type *const *types = sb_layer_types();
    int n = 0;
    while (types[n] != NULL)
        n++;
    return n;
}

const char *sb_models_name(int i)
{
    if (i < 0 || i >= sb_models_count())
        return NULL;
    return sb_layer_types()[i]->name;
}

sb_status sb_models_describe(int i, sb_model_desc *desc, sb_error *err)
{
    SB_API_REQUIRE(desc, err);
    memset(desc, 0, sizeof *desc);
    int n = sb_models_count();
    if (i < 0 || i >= n)
        return sb_error_set(err, SB_ERR_INVALID, "model index %d is outside [0, %d)", i, n);
    const sb_layer_type *t = sb_layer_types()[i];
    *desc = (sb_model_desc){
        .name = t->name,
        .summary = t->summary,
        .gating = t->taxonomy.gating,
        .transition = t->taxonomy.transition,
        .update_rank = t->taxonomy.update_rank,
        .normalisation = t->taxonomy.normalisation,
        .negative_eigenvalues = t->taxonomy.negative_eigenvalues,
        .state = t->taxonomy.state,
        .is_stack = t->stack != NULL,
        .can_stream = t->forward_stream != NULL && t->stream_state_floats != NULL,
        .has_probe_gates = t->probe_gates != NULL,
        .state_formula = t->axes.state_formula,
    };
    const int values[SB_AXES] = {t->axes.gate, t->axes.forgetting, t->axes.transition,
                                 t->axes.update, t->axes.memory};
    for (int a = 0; a < SB_AXES; a++)
        desc->axes[a] = sb_axis_value_name(a, values[a]);
    return SB_OK;
}

_Static_assert(SB_AXES == sizeof((sb_model_desc){0}.axes) / sizeof(const char *),
               "sb_model_desc.axes has one name per axis of layer.h");

const char *sb_models_axis_name(int a)
{
    return sb_axis_name(a);
}

sb_status sb_models_size(const char *model, const sb_model_shape *shape, uint64_t *params,
                         double *state_per_layer, sb_error *err)
{
    SB_API_REQUIRE(model, err);
    SB_API_REQUIRE(shape, err);
    const sb_layer_type *type = sb_layer_type_find(model);
    if (type == NULL)
        return sb_layer_type_unknown(model, err);
    if (shape->inputs < 1 || shape->classes < 1 || shape->width < 1 || shape->layers < 1 ||
        shape->d_state < 1)
        return sb_error_set(err, SB_ERR_INVALID,
                            "model shape: inputs %d, classes %d, width %d, layers %d and d_state "
                            "%d must all be at least 1",
                            shape->inputs, shape->classes, shape->width, shape->layers,
                            shape->d_state);
    /* the dropout and rotary base of the defaults: they do not change the sizes */
    const sb_run_config d = sb_run_config_default();
    sb_model_config mc = {.d_input = shape->inputs,
                          .d_output = shape->classes,
                          .d_model = shape->width,
                          .n_layers = shape->layers,
                          .d_state = shape->d_state,
                          .n_head = sb_num_heads(shape->width),
                          .dropout = d.dropout,
                          .rope_base = d.rope_base};
    snprintf(mc.model, sizeof mc.model, "%s", type->name);
    if (params != NULL) {
        size_t count = 0;
        sb_status st = sb_model_param_count(&mc, &count, err);
        if (st != SB_OK)
            return st;
        *params = count;
    }
    if (state_per_layer != NULL)
        *state_per_layer = type->state_size != NULL ? type->state_size(&mc) : 0.0;
    return SB_OK;
}

sb_status sb_config_param_count(const sb_config *cfg, uint64_t *params, sb_error *err)
{
    SB_API_REQUIRE(cfg, err);
    SB_API_REQUIRE(params, err);
    sb_status st = sb_run_config_check(&cfg->run, err);
    if (st != SB_OK)
        return st;
    sb_grammar *g = NULL;
    if ((st = sb_grammar_generate(&cfg->run.task.grammar, &g, err)) != SB_OK)
        return st;
    sb_model_config mc = sb_run_config_model(&cfg->run, g->n_classes, g->d_output);
    sb_grammar_free(g);
    size_t count = 0;
    if ((st = sb_model_param_count(&mc, &count, err)) == SB_OK)
        *params = count;
    return st;
}
