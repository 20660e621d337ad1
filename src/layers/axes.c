/* axes.c - the names of the taxonomy's design axes and their values (layer.h, sb_axes), and
 * the findings' reading of the transition axis. docs/models/taxonomy.md explains each. */
#include <stddef.h>

#include "layers/layer.h"

static const char *const axis_names[SB_AXES] = {"gate granularity", "forgetting", "transition",
                                                "update per token", "memory growth"};

/* indexed by the enums' values; [0] is "not set" */
static const char *const gate_names[] = {NULL, "none", "scalar per head", "vector per channel"};
static const char *const forgetting_names[] = {NULL, "none", "fixed", "input-dependent"};
static const char *const transition_names[] = {NULL,
                                               "attention",
                                               "attention + Householder positions",
                                               "diagonal",
                                               "delta rank-1",
                                               "diagonal + rank-1",
                                               "Householder product",
                                               "nonlinear dense"};
static const char *const update_names[] = {NULL,     "appends k, v", "elementwise",
                                           "rank-1", "rank-n",       "full"};
static const char *const memory_names[] = {NULL, "constant", "log T", "linear in T"};

#define COUNT(a) (int)(sizeof(a) / sizeof *(a))

const char *sb_axis_name(int axis)
{
    return axis >= 0 && axis < SB_AXES ? axis_names[axis] : NULL;
}

const char *sb_axis_value_name(int axis, int value)
{
    const char *const *names[SB_AXES] = {gate_names, forgetting_names, transition_names,
                                         update_names, memory_names};
    const int counts[SB_AXES] = {COUNT(gate_names), COUNT(forgetting_names),
                                 COUNT(transition_names), COUNT(update_names), COUNT(memory_names)};
    if (axis < 0 || axis >= SB_AXES || value <= 0 || value >= counts[axis])
        return NULL;
    return names[axis][value];
}

sb_state_mixing sb_layer_state_mixing(const sb_layer_type *type)
{
    switch (type->axes.transition) {
    case SB_TRANSITION_ATTENTION:
    case SB_TRANSITION_ATTENTION_HOUSEHOLDER: return SB_MIXING_ATTENTION;
    case SB_TRANSITION_DIAGONAL: return SB_MIXING_DIAGONAL;
    case SB_TRANSITION_DELTA:
    case SB_TRANSITION_DIAGONAL_RANK1:
    case SB_TRANSITION_HOUSEHOLDER_PRODUCT:
    case SB_TRANSITION_NONLINEAR: return SB_MIXING_CHANNELS;
    default: return SB_MIXING_UNCLASSIFIED;
    }
}
