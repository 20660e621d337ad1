/* run_options.c - the flags of train, eval, probe and ceiling (see run_options.h). */
#include "cli/run_options.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

sb_status sb_run_options_add(sb_run_flags *rf, int group, sb_option *opts, int *n, sb_error *err)
{
    memset(rf, 0, sizeof *rf);
    sb_status st = sb_config_create(&rf->config, err);
    if (st != SB_OK)
        return st;
    sb_options_add_keys(rf->config, group, opts, n);
    return SB_OK;
}

sb_status sb_run_settings_new(sb_config **out, const char *const *presets, sb_error *err)
{
    sb_status st = sb_config_create(out, err);
    for (int i = 0; st == SB_OK && presets != NULL && presets[i] != NULL; i += 2)
        st = sb_config_set_key(*out, presets[i], presets[i + 1], err);
    if (st != SB_OK) {
        sb_config_free(*out);
        *out = NULL;
    }
    return st;
}

void sb_run_flags_free(sb_run_flags *rf)
{
    sb_config_free(rf->config);
    rf->config = NULL;
}

int sb_run_flag(const sb_config *cfg, const char *key)
{
    double v = sb_config_number(cfg, key);
    return v == v ? (int)v : 0;
}

const char *sb_run_path(const sb_config *cfg, const char *key)
{
    const char *path = sb_config_text(cfg, key);
    return path != NULL && path[0] != '\0' ? path : NULL;
}

sb_status sb_run_set(sb_config *cfg, const char *key, sb_error *err, const char *fmt, ...)
{
    char value[8192];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(value, sizeof value, fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= sizeof value)
        return sb_error_set(err, SB_ERR_INVALID, "--%s: the value is too long", key);
    return sb_config_set_key(cfg, key, value, err);
}
