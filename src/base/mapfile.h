/* mapfile.h — read-only memory-mapped files (model weights are used in place). */
#ifndef LILAC_MAPFILE_H
#define LILAC_MAPFILE_H

#include "base.h"

typedef struct ll_mapfile {
    char *path;            /* owned copy, for error messages */
    const uint8_t *data;   /* NULL for an empty file */
    size_t size;
} ll_mapfile;

/* Maps `path` read-only. On error returns LL_ERR_IO naming the path. */
ll_status ll_mapfile_open(ll_mapfile *m, const char *path);
void ll_mapfile_close(ll_mapfile *m);

/* Reads a whole (small) file into a NUL-terminated buffer owned by the caller (ll_free). */
ll_status ll_read_file(const char *path, char **out, size_t *len);

#endif
