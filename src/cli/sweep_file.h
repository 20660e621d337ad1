/* sweep_file.h - what `sweep` and `plan` share: opening a sweep file or a built-in preset,
 * reading --shard I/N, and the counts and times they print (src/cli/sweep_file.c). */
#ifndef SELECTIVBENCH_CLI_SWEEP_FILE_H
#define SELECTIVBENCH_CLI_SWEEP_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "selectivbench/selectivbench.h"

/* The sweep file, or a built-in preset such as tiny/task2 (a typo of one gets a
 * did-you-mean), with its parameters checked. */
sb_status sb_cli_sweep_open(const char *name, sb_sweep **out, sb_error *err);

/* The runs a command line selects: the file or preset opened (sb_cli_sweep_open), --shard
 * (NULL: none) read, the filters and limit applied. On failure *s and *sel are NULL and err
 * says why. */
sb_status sb_cli_sweep_select(const char *file, const char *const *filters, int n_filters,
                              const char *shard, int limit, sb_sweep **s, sb_sweep_selection **sel,
                              sb_error *err);

/* Reads --shard I/N; returns 0 when it is not two integers with 0 <= I < N. */
int sb_cli_parse_shard(const char *text, int64_t *index, int64_t *count);

/* A count as "1.23M"; seconds as "42 s", "3.2 h", "4.1 days". */
void sb_cli_format_count(double x, char *buf, size_t size);
void sb_cli_format_time(double s, char *buf, size_t size);

#endif
