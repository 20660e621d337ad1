/*
 * api.h - what the public API's files share (src/api/, the floor above exp): the public
 * configuration handle and the check of required arguments. The public header
 * (include/selectivbench/selectivbench.h) is the contract; these files are thin wrappers
 * over the floors below. The public sb_config is config/run_config.h's struct sb_config.
 */
#ifndef SELECTIVBENCH_API_H
#define SELECTIVBENCH_API_H

#include "config/run_config.h"
#include "core/cpus.h"
#include "core/status.h"

/* A new handle holding *run (malloc'd; freed with sb_config_free). */
sb_status sb_api_config_new(const sb_run_config *run, sb_config **out, sb_error *err);

/* Returns SB_ERR_INVALID from the calling function when a required pointer is NULL: a
 * public function answers a bad call with a status rather than a crash. */
#define SB_API_REQUIRE(ptr, err)                                                                   \
    do {                                                                                           \
        if ((ptr) == NULL)                                                                         \
            return sb_error_set((err), SB_ERR_INVALID, "%s: %s is NULL", __func__, #ptr);          \
    } while (0)

#endif
