/* cmd_models.c - `selectivbench models`: every registered model, its size and taxonomy,
 * generated from the registry. */
#include <string.h>

#include "cli.h"
#include "selectivbench/json_writer.h"
#include "selectivbench/model.h"

static const char *or_dash(const char *s)
{
    return s != NULL ? s : "-";
}

int sb_cmd_models(int argc, char **argv)
{
    int D = 256, N = 128, I = 41, C = 1601, L = 8, json = 0;
    sb_option opts[] = {
        {"feat_size", SB_OPT_INT, &D, 1, 65536, NULL, "D", "model width (default 256)", 0},
        {"d_state", SB_OPT_INT, &N, 1, 65536, NULL, "N", "SSM state size (default 128)", 0},
        {"inp", SB_OPT_INT, &I, 1, 1e6, NULL, "I", "one-hot inputs (default 41)", 0},
        {"classes", SB_OPT_INT, &C, 1, 1e6, NULL, "C", "classes (default 1601)", 0},
        {"layers", SB_OPT_INT, &L, 1, 1024, NULL, "L", "blocks (default 8)", 0},
        {"json", SB_OPT_SWITCH, &json, 0, 1, NULL, NULL, "print JSON", 0},
    };
    int rc = sb_cli_parse("models", "[--feat_size D --d_state N --inp I --classes C --layers L]",
                          opts, (int)(sizeof opts / sizeof *opts), argc, argv, NULL, 0, NULL);
    if (rc >= 0)
        return rc;
    const sb_layer_type *const *types = sb_layer_types();
    sb_json j;
    sb_json_init(&j, stdout, 0);
    if (json) {
        sb_json_object_begin(&j);
        sb_json_key(&j, "models");
        sb_json_array_begin(&j);
    } else {
        printf("RecNet sizes at feat_size %d, d_state %d, %d layers, %d inputs, %d classes:\n", D,
               N, L, I, C);
        printf("  %-22s %14s %14s  %s\n", "model", "parameters", "state/layer", "summary");
    }
    for (int t = 0; types[t] != NULL; t++) {
        const sb_layer_type *type = types[t];
        sb_model_config mc = {.d_input = I, .d_output = C, .d_model = D, .n_layers = L,
                              .d_state = N, .n_head = sb_num_heads(D), .dropout = 0.2,
                              .rope_base = 1000};
        snprintf(mc.model, sizeof mc.model, "%s", type->name);
        size_t params = 0;
        sb_error err = {0};
        int ok = sb_model_param_count(&mc, &params, &err) == SB_OK;
        double state = type->state_size != NULL ? type->state_size(&mc) : 0.0;
        if (json) {
            sb_json_object_begin(&j);
            sb_json_key(&j, "model");
            sb_json_string(&j, type->name);
            sb_json_key(&j, "params");
            if (ok)
                sb_json_uint(&j, params);
            else
                sb_json_null(&j);
            sb_json_key(&j, "state_per_layer");
            sb_json_double(&j, state);
            sb_json_key(&j, "summary");
            sb_json_string(&j, or_dash(type->summary));
            const char *keys[6] = {"gating", "transition", "update_rank", "normalisation",
                                   "negative_eigenvalues", "state"};
            const char *vals[6] = {type->taxonomy.gating, type->taxonomy.transition,
                                   type->taxonomy.update_rank, type->taxonomy.normalisation,
                                   type->taxonomy.negative_eigenvalues, type->taxonomy.state};
            for (int k = 0; k < 6; k++) {
                sb_json_key(&j, keys[k]);
                sb_json_string(&j, or_dash(vals[k]));
            }
            sb_json_object_end(&j);
        } else if (ok) {
            printf("  %-22s %14zu %14.0f  %s\n", type->name, params, state, or_dash(type->summary));
        } else {
            printf("  %-22s %14s %14s  (%s)\n", type->name, "-", "-", err.msg);
        }
    }
    if (json) {
        sb_json_array_end(&j);
        sb_json_object_end(&j);
        printf("\n");
        return 0;
    }
    printf("\nTaxonomy (spec/models-fla.md section 16):\n");
    for (int t = 0; types[t] != NULL; t++) {
        const sb_taxonomy *x = &types[t]->taxonomy;
        printf("  %s\n", types[t]->name);
        printf("    gating               %s\n", or_dash(x->gating));
        printf("    transition           %s\n", or_dash(x->transition));
        printf("    update rank / token  %s\n", or_dash(x->update_rank));
        printf("    state per head       %s\n", or_dash(x->state));
        printf("    normalisation        %s\n", or_dash(x->normalisation));
        printf("    negative eigenvalues %s\n", or_dash(x->negative_eigenvalues));
    }
    return 0;
}
