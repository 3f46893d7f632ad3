/* st_write.c — safetensors writer: 8-byte little-endian header length, JSON header (padded
 * with spaces to a multiple of 8 so data stays aligned), then the raw tensor bytes. */
#include "st_write.h"

#include <errno.h>
#include <stdio.h>

static const char *st_dtype(ll_type t) {
    switch (t) {
    case LL_TYPE_F32: return "F32";
    case LL_TYPE_I32: return "I32";
    case LL_TYPE_BF16: return "BF16";
    case LL_TYPE_F16: return "F16";
    default: return NULL;
    }
}

static size_t tensor_bytes(const st_out_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->n_dims; i++) n *= t->shape[i];
    return (size_t)n * quant_block_bytes(t->type);
}

ll_status st_write_file(const char *path, const st_out_tensor *t, int n) {
    size_t cap = 256 + (size_t)n * 256, len = 0, off = 0;
    char *hdr = ll_malloc(cap);
    if (!hdr) return ll_err(LL_ERR_OOM, "%s: out of memory", path);
    len += (size_t)snprintf(hdr + len, cap - len, "{");
    for (int i = 0; i < n; i++) {
        const char *dt = st_dtype(t[i].type);
        LL_ASSERT(dt && strlen(t[i].name) < 128);
        size_t nb = tensor_bytes(&t[i]);
        len += (size_t)snprintf(hdr + len, cap - len, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "", t[i].name, dt);
        for (int d = 0; d < t[i].n_dims; d++)
            len += (size_t)snprintf(hdr + len, cap - len, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
        len += (size_t)snprintf(hdr + len, cap - len, "],\"data_offsets\":[%zu,%zu]}", off, off + nb);
        off += nb;
    }
    len += (size_t)snprintf(hdr + len, cap - len, "}");
    while (len % 8) hdr[len++] = ' ';
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) { ll_free(hdr); return ll_err(LL_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno)); }
    uint64_t hl = len;
    int ok = fwrite(&hl, 8, 1, f) == 1 && fwrite(hdr, 1, len, f) == len;
    for (int i = 0; i < n && ok; i++) ok = fwrite(t[i].data, 1, tensor_bytes(&t[i]), f) == tensor_bytes(&t[i]);
    ok = (fclose(f) == 0) && ok;
    ll_free(hdr);
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        return ll_err(LL_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    }
    return LL_OK;
}
