/* web_assets.h - the dashboard's page (src/cli/web/), embedded into the program at build
 * time by cmake/embed_web.cmake (generated/web_assets.c). */
#ifndef SELECTIVBENCH_CLI_WEB_ASSETS_H
#define SELECTIVBENCH_CLI_WEB_ASSETS_H

#include <stddef.h>

typedef struct sb_web_asset {
    const char *path;          /* "/index.html", "/app.js", ... */
    const unsigned char *data; /* size bytes, then a terminating zero */
    size_t size;
} sb_web_asset;

/* Every file of src/cli/web/, then {NULL, NULL, 0}. */
extern const sb_web_asset sb_web_assets[];

#endif
