/* fs.c - folders (see fs.h). */
#include "core/fs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* One folder whose parent exists: made, or found made by someone else. */
static sb_status make_one(const char *path, const char *dir, const char *what, sb_error *err)
{
    struct stat sbuf;
    if (stat(path, &sbuf) == 0)
        return S_ISDIR(sbuf.st_mode) ? SB_OK
                                     : sb_error_set(err, SB_ERR_IO,
                                                    "cannot create the %s '%s': '%s' exists and is "
                                                    "not a folder",
                                                    what, dir, path);
    if (mkdir(path, 0777) != 0 &&
        !(errno == EEXIST && stat(path, &sbuf) == 0 && S_ISDIR(sbuf.st_mode)))
        return sb_error_set(err, SB_ERR_IO, "cannot create the %s '%s': %s", what, dir,
                            strerror(errno));
    return SB_OK;
}

sb_status sb_make_dirs(const char *dir, const char *what, sb_error *err)
{
    char path[4096];
    if (dir == NULL || dir[0] == '\0')
        return sb_error_set(err, SB_ERR_INVALID, "the %s is an empty path", what);
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return sb_error_set(err, SB_ERR_INVALID, "the %s path is over %zu characters", what,
                            sizeof path - 1);
    /* every parent from the top, then the folder itself */
    for (char *p = path + 1; *p != '\0'; p++) {
        if (*p != '/' || p[-1] == '/')
            continue;
        *p = '\0';
        sb_status st = make_one(path, dir, what, err);
        *p = '/';
        if (st != SB_OK)
            return st;
    }
    return make_one(path, dir, what, err);
}
