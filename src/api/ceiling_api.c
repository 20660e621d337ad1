/* ceiling_api.c - the public API's ideal observer (selectivbench.h): wrappers over
 * task/ceiling.h, the options read from the configuration's keys. */
#include <stdlib.h>

#include "api/api.h"
#include "core/json_writer.h"
#include "task/ceiling.h"

int sb_ceiling_window_size(int w)
{
    SB_ASSERT(w >= 0 && w < SB_CEILING_N_WINDOWS);
    return sb_ceiling_window_k[w];
}

sb_status sb_ceiling_compute(const sb_task *task, const sb_config *cfg, sb_ceiling *out,
                             sb_error *err)
{
    SB_API_REQUIRE(task, err);
    SB_API_REQUIRE(out, err);
    sb_ceiling_options o = sb_ceiling_options_default();
    if (cfg != NULL) {
        const sb_runtime *rt = &cfg->run.rt;
        o.split = (sb_split)rt->split;
        o.samples = rt->samples;
        o.prior_samples = rt->prior_samples;
        o.threads = rt->threads;
    }
    return sb_ceiling_compute_with(task, &o, out, err);
}

sb_status sb_ceiling_to_json(const sb_ceiling *c, char **json, sb_error *err)
{
    SB_API_REQUIRE(json, err);
    *json = NULL;
    SB_API_REQUIRE(c, err);
    size_t len = 0;
    FILE *f = open_memstream(json, &len);
    if (f == NULL)
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for the ceiling's JSON");
    sb_json j;
    sb_json_init(&j, f, 0);
    sb_ceiling_write_json(c, &j);
    if (fclose(f) != 0 || *json == NULL) {
        free(*json);
        *json = NULL;
        return sb_error_set(err, SB_ERR_NOMEM, "out of memory for the ceiling's JSON");
    }
    return SB_OK;
}
