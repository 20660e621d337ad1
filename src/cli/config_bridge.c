/* config_bridge.c - between the flag helpers' sb_run_config and the public sb_config (see
 * config_bridge.h): the only ported file that sees the library's insides. */
#include "cli/config_bridge.h"

#include <stdarg.h>
#include <stdio.h>

#include "api/api.h"

sb_status sb_cli_config_new(const sb_run_config *run, sb_config **out, sb_error *err)
{
    return sb_api_config_new(run, out, err);
}

void sb_cli_config_to_run(const sb_config *cfg, sb_run_config *run)
{
    *run = cfg->run;
}

sb_status sb_cli_error(sb_error *err, sb_status status, const char *fmt, ...)
{
    err->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return status;
}
