/* ceiling_api.c - the public API's ideal observer (selectivbench.h): wrappers over
 * task/ceiling.h, whose sb_ceiling_options_default and sb_ceiling_compute are the public
 * functions themselves. */
#include <stdlib.h>

#include "api/api.h"
#include "core/json_writer.h"
#include "task/ceiling.h"

int sb_ceiling_window_size(int w)
{
    SB_ASSERT(w >= 0 && w < SB_CEILING_N_WINDOWS);
    return sb_ceiling_window_k[w];
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
