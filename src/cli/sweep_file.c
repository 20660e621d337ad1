/* sweep_file.c - what `sweep` and `plan` share (sweep_file.h). */
#include "cli/sweep_file.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/presets.h"

/* Reads --shard I/N; returns 0 when it is not two integers with 0 <= I < N. */
int sb_cli_parse_shard(const char *text, int64_t *index, int64_t *count)
{
    char *end;
    errno = 0;
    long long i = strtoll(text, &end, 10);
    if (end == text || *end != '/' || errno != 0)
        return 0;
    const char *n_text = end + 1;
    long long n = strtoll(n_text, &end, 10);
    if (end == n_text || *end != '\0' || errno != 0 || n < 1 || i < 0 || i >= n)
        return 0;
    *index = i;
    *count = n;
    return 1;
}

/* A name that is neither a file nor a preset but close to a preset (a typo such as
 * tiny/tsk2): SB_ERR_INVALID with the suggestion; SB_ERR_IO when no preset is close. */
static sb_status unknown_preset(const char *name, sb_error *err)
{
    const char *names[64];
    int n_names = 0;
    for (int i = 0; sb_presets[i].name != NULL && n_names < 64; i++)
        names[n_names++] = sb_presets[i].name;
    const char *hint = sb_closest_name(name, names, n_names);
    if (hint == NULL)
        return SB_ERR_IO;
    return sb_error_set(err, SB_ERR_INVALID,
                        "no sweep file or preset '%s'; did you mean the preset '%s'?", name, hint);
}

/* The sweep file, or a built-in preset such as tiny/task2, with its parameters checked. */
sb_status sb_cli_sweep_open(const char *name, sb_sweep **out, sb_error *err)
{
    sb_sweep *s = NULL;
    sb_status load = SB_ERR_IO;
    FILE *probe = fopen(name, "rb");
    if (probe != NULL) {
        fclose(probe);
        load = sb_sweep_load(name, &s, err);
    } else {
        for (int i = 0; sb_presets[i].name != NULL; i++)
            if (strcmp(sb_presets[i].name, name) == 0)
                load = sb_sweep_load_text(name, sb_presets[i].text, sb_presets[i].len, &s, err);
        if (load == SB_ERR_IO && (load = unknown_preset(name, err)) == SB_ERR_IO)
            load = sb_sweep_load(name, &s, err); /* for its error message */
    }
    if (load != SB_OK)
        return load;
    /* every parameter must be a train flag: a key of the table or one of train's switches */
    sb_status st = sb_sweep_check_params(s, err);
    if (st != SB_OK) {
        sb_sweep_free(s);
        return st;
    }
    *out = s;
    return SB_OK;
}

/* A count in words a person reads at a glance: 1234567 -> "1.23M". */
void sb_cli_format_count(double x, char *buf, size_t size)
{
    const char *units[] = {"", "k", "M", "G", "T", "P", "E"};
    int u = 0;
    while (x >= 1000.0 && u < 6) {
        x /= 1000.0;
        u++;
    }
    snprintf(buf, size, u == 0 ? "%.0f%s" : "%.3g%s", x, units[u]);
}

/* Seconds as "3 h 20 min", "4.2 days". */
void sb_cli_format_time(double s, char *buf, size_t size)
{
    if (!(s >= 0) || isinf(s))
        snprintf(buf, size, "?");
    else if (s < 120)
        snprintf(buf, size, "%.0f s", s);
    else if (s < 7200)
        snprintf(buf, size, "%.0f min", s / 60);
    else if (s < 2 * 86400)
        snprintf(buf, size, "%.1f h", s / 3600);
    else if (s < 730 * 86400)
        snprintf(buf, size, "%.1f days", s / 86400);
    else
        snprintf(buf, size, "%.0f years", s / (365.25 * 86400));
}

sb_status sb_cli_sweep_select(const char *file, const char *const *filters, int n_filters,
                              const char *shard, int limit, sb_sweep **s, sb_sweep_selection **sel,
                              sb_error *err)
{
    *s = NULL;
    *sel = NULL;
    sb_sweep_select_options pick = {.filters = filters, .n_filters = n_filters, .limit = limit};
    if (shard != NULL && !sb_cli_parse_shard(shard, &pick.shard_index, &pick.shard_count))
        return sb_error_set(err, SB_ERR_INVALID, "--shard '%s': write I/N with 0 <= I < N", shard);
    sb_status st = sb_cli_sweep_open(file, s, err);
    if (st == SB_OK && (st = sb_sweep_select(*s, &pick, sel, err)) != SB_OK) {
        sb_sweep_free(*s);
        *s = NULL;
    }
    return st;
}
