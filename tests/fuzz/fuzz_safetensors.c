/* fuzz_safetensors.c — libFuzzer target for the safetensors header parser (st_parse). Every
 * accepted tensor must lie inside the buffer; touching its first and last byte lets ASan check. */
#include <stddef.h>
#include <stdint.h>

#include "format/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    st_file f;
    if (st_parse(&f, data, size, "fuzz.safetensors") != LL_OK) return 0;
    volatile uint8_t sink = 0;
    for (int64_t i = 0; i < f.n_tensors; i++) {
        const ll_tensor *t = &f.tensors[i];
        if (t->nbytes) sink ^= ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[t->nbytes - 1];
        (void)st_find(&f, t->name);
    }
    (void)sink;
    st_close(&f);
    return 0;
}
