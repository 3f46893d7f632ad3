/* fuzz_gguf.c — libFuzzer target for the GGUF reader (gguf_parse) and its metadata getters. */
#include <stddef.h>
#include <stdint.h>

#include "format/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file *g;
    if (gguf_parse(&g, data, size, "fuzz.gguf") != LL_OK) return 0;
    volatile uint8_t sink = 0;
    for (int64_t i = 0; i < g->n_kv; i++) {
        const char *key = g->kv[i].key;
        uint32_t u;
        int64_t i64;
        float f;
        int b;
        const char *s;
        const char *const *strs;
        const int32_t *iv;
        const float *fv;
        uint64_t n;
        (void)gguf_get_u32(g, key, &u);
        (void)gguf_get_i64(g, key, &i64);
        (void)gguf_get_f32(g, key, &f);
        (void)gguf_get_bool(g, key, &b);
        if (gguf_get_str(g, key, &s) == LL_OK) sink ^= (uint8_t)s[0];
        if (gguf_get_arr_str(g, key, &strs, &n) == LL_OK && n) sink ^= (uint8_t)strs[n - 1][0];
        if (gguf_get_arr_i32(g, key, &iv, &n) == LL_OK && n) sink ^= (uint8_t)iv[n - 1];
        if (gguf_get_arr_f32(g, key, &fv, &n) == LL_OK && n) sink ^= (uint8_t)(int)fv[n - 1];
    }
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const ll_tensor *t = &g->tensors[i];
        if (t->nbytes) sink ^= ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[t->nbytes - 1];
        (void)gguf_find_tensor(g, t->name);
    }
    (void)sink;
    gguf_close(g);
    return 0;
}
