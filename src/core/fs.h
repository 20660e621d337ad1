/* fs.h - folders: a path and every missing parent, created as `mkdir -p` does. */
#ifndef SELECTIVBENCH_FS_H
#define SELECTIVBENCH_FS_H

#include "core/status.h"

/* Creates folder `dir` and its missing parents (mode 0777 less the umask). Another process
 * may create any of them at the same moment (parallel sweep workers): that is success.
 * Errors: SB_ERR_IO "cannot create the WHAT 'dir': reason" (WHAT: "results folder", ...),
 * or "'p' exists and is not a folder" for dir or a parent. */
sb_status sb_make_dirs(const char *dir, const char *what, sb_error *err);

#endif
