/* cli_io.c — reading whole inputs for the CLI subcommands. See cli_io.h. */
#include "cli/cli_io.h"

#include "base/base.h"

char *cli_read_stream(FILE *f, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *b = ll_malloc(cap);
    while (b) {
        n += fread(b + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        cap *= 2;
        char *nb = ll_realloc(b, cap);
        if (!nb) ll_free(b);
        b = nb;
    }
    if (!b) return NULL;
    if (ferror(f)) { ll_free(b); return NULL; }
    b[n] = 0;
    *len = n;
    return b;
}

char *cli_read_path(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *b = cli_read_stream(f, len);
    fclose(f);
    return b;
}
