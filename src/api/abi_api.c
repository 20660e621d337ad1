/* abi_api.c - the sizes of the public structures, so a binding that mirrors them (the
 * Python package's ctypes declarations, python/selectivbench/_lib.py) can check its copy of
 * the layout against the library it loaded before it passes one. */
#include <string.h>

#include "api/api.h"

/* One X-macro list: every structure a binding fills or reads. */
#define SB_ABI_STRUCTS(X)                                                                          \
    X(sb_error)                                                                                    \
    X(sb_task_facts)                                                                               \
    X(sb_batch_shape)                                                                              \
    X(sb_batch_arrays)                                                                             \
    X(sb_grammar_facts)                                                                            \
    X(sb_progress)                                                                                 \
    X(sb_train_settings)                                                                           \
    X(sb_train_outcome)                                                                            \
    X(sb_eval_outcome)                                                                             \
    X(sb_result_row)                                                                               \
    X(sb_curve_point)                                                                              \
    X(sb_external_run)                                                                             \
    X(sb_ceiling)                                                                                  \
    X(sb_report_outcome)

size_t sb_api_struct_size(const char *name)
{
    if (name == NULL)
        return 0;
#define SB_ABI_SIZE(s)                                                                             \
    if (strcmp(name, #s) == 0)                                                                     \
        return sizeof(s);
    SB_ABI_STRUCTS(SB_ABI_SIZE)
#undef SB_ABI_SIZE
    return 0;
}
