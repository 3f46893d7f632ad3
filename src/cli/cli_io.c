/* cli_io.c — reading whole inputs and token-id lists for the CLI subcommands. See cli_io.h. */
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

int cli_parse_ids(const char *flag, const char *s, int32_t **out) {
    int cap = 0, n = 0;
    int32_t *ids = NULL;
    *out = NULL;
    for (const char *p = s; *p;) {
        /* digits only: strtol would also take signs and leading blanks */
        int64_t v = 0;
        const char *d = p;
        while (*d >= '0' && *d <= '9' && v <= INT32_MAX) v = v * 10 + (*d++ - '0');
        if (d == p || v > INT32_MAX || (*d && *d != ',')) {
            long at = (long)((d == p || v > INT32_MAX ? p : d) - s); /* the id, or what follows it */
            ll_free(ids);
            ll_err(LL_ERR_INVALID, "%s: bad token id at byte %ld", flag, at);
            return -1;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            int32_t *nn = ll_realloc(ids, sizeof(int32_t) * (size_t)cap);
            if (!nn) {
                ll_free(ids);
                ll_err(LL_ERR_OOM, "%s: out of memory for %d token ids", flag, cap);
                return -1;
            }
            ids = nn;
        }
        ids[n++] = (int32_t)v;
        p = *d ? d + 1 : d;
    }
    *out = ids;
    return n;
}
