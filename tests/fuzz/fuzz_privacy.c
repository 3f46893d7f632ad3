/*
 * fuzz_privacy.c — libFuzzer target for the privacy gate: rule scan of arbitrary bytes (invalid
 * UTF-8, pathological repetitions), span invariants, mask -> unmask round trip, and streamed
 * unmasking split at an input-chosen point equal to whole-text unmasking.
 *   make fuzz && build-fuzz/fuzz_privacy -max_total_time=60
 * or, needing only the privacy sources (make fuzz also compiles quant_x86.c, which this clang
 * rejects: "invalid cpu feature string" for f16c):
 *   clang -std=c11 -D_GNU_SOURCE -g -O1 -Isrc -fsanitize=fuzzer,address,undefined \
 *     -o build-fuzz/fuzz_privacy tests/fuzz/fuzz_privacy.c src/privacy/rules.c \
 *     src/privacy/validators.c src/privacy/mask.c src/base/base.c -lpcre2-8 -lm -lpthread
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "privacy/mask.h"
#include "privacy/privacy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    pii_spans s = {0};
    if (pii_rules_scan(text, size, &s) != LL_OK) abort(); /* only OOM may fail, and it must not here */
    int64_t ncp = pii_cp_count(text, size);
    for (size_t i = 0; i < s.n; i++) {
        const pii_span *p = &s.v[i];
        if (p->bstart < 0 || p->bend > (int64_t)size || p->bstart >= p->bend) abort();
        if (p->start < 0 || p->end > ncp || p->start >= p->end) abort();
        if (p->label < 0 || p->label >= PII_N_CAT || !(p->score > 0 && p->score <= 1)) abort();
        if (i && p->bstart < s.v[i - 1].bend) abort(); /* resolved: sorted, no overlap */
    }
    pii_masker mk;
    pii_masker_init(&mk);
    pii_buf masked = {0}, back = {0}, streamed = {0};
    if (pii_mask_text(&mk, text, size, s.v, s.n, ~0u, &masked) != LL_OK) abort();
    if (pii_unmask_text(&mk, masked.s, masked.n, &back) != LL_OK) abort();
    /* exact round trip unless the input itself contains bracketed text a placeholder could equal */
    if (!memchr(data, '[', size) && (back.n != size || memcmp(back.s, data, size))) abort();
    size_t cut = size ? data[0] % (masked.n + 1) : 0;
    pii_unmask_stream us;
    pii_unmask_stream_init(&us, &mk);
    if (pii_unmask_stream_feed(&us, masked.s, cut, &streamed) || pii_unmask_stream_feed(&us, masked.s + cut, masked.n - cut, &streamed) ||
        pii_unmask_stream_finish(&us, &streamed))
        abort();
    if (streamed.n != back.n || memcmp(streamed.s, back.s, back.n)) abort();
    pii_buf_free(&masked);
    pii_buf_free(&back);
    pii_buf_free(&streamed);
    pii_masker_free(&mk);
    pii_spans_free(&s);
    return 0;
}
