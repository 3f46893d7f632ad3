/* fuzz_tokenizer.c — libFuzzer target for the tokenizer.json loader and for encode/decode.
 * The first byte picks the mode:
 *   even: the rest is a tokenizer.json text (+ "\n@@CONFIG@@\n" + tokenizer_config.json); a loaded
 *         tokenizer must then encode and decode a fixed text without trouble;
 *   odd:  the rest is text for a small built-in byte-level tokenizer (merges, added tokens, the
 *         Qwen3.5 regex): ASCII text must come back exactly from the raw decode, the lossy decode
 *         must be valid UTF-8, and streaming must equal decode. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tokenizer/tokenizer.h"

static tok_tokenizer *small_tokenizer(void) {
    static tok_tokenizer *t;
    if (t) return t;
    static char names[300][8];
    static const char *toks[300];
    int n = 0, k = 0;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        unsigned cp = keep ? (unsigned)b : 256u + (unsigned)k++;
        if (cp < 0x80) { names[n][0] = (char)cp; names[n][1] = 0; }
        else { names[n][0] = (char)(0xC0 | cp >> 6); names[n][1] = (char)(0x80 | (cp & 63)); names[n][2] = 0; }
        toks[n] = names[n];
        n++;
    }
    static const char *extra[] = {"th", "the", "Ġthe", "in", "ing", "Ġt", "<|im_start|>", "<think>"};
    int32_t types[300];
    for (int i = 0; i < 300; i++) types[i] = TOK_TYPE_NORMAL;
    for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++) toks[n++] = extra[i];
    types[n - 2] = TOK_TYPE_CONTROL;
    types[n - 1] = TOK_TYPE_USER;
    static const char *merges[] = {"t h", "th e", "Ġ t", "i n", "in g"};
    tok_spec sp = {.tokens = toks, .types = types, .n_tokens = n, .merges = merges, .n_merges = 5,
                   .split_regex = tok_pre_regex("qwen35"), .nfc = 1};
    if (tok_build(&sp, &t) != LL_OK) abort();
    return t;
}

static int valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        int k = tok_utf8_seq_len((const uint8_t *)s + i, n - i);
        if (!k) return 0;
        i += (size_t)k;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!size) return 0;
    const char *p = (const char *)data + 1;
    size_t n = size - 1;
    if (!(data[0] & 1)) {
        static const char sep[] = "\n@@CONFIG@@\n";
        const char *cfg = NULL;
        size_t cfg_len = 0, json_len = n;
        for (size_t i = 0; i + sizeof(sep) - 1 <= n; i++)
            if (!memcmp(p + i, sep, sizeof(sep) - 1)) {
                json_len = i;
                cfg = p + i + sizeof(sep) - 1;
                cfg_len = n - i - (sizeof(sep) - 1);
                break;
            }
        tok_tokenizer *t;
        if (tok_load_json(p, json_len, cfg, cfg_len, "fuzz.json", &t) != LL_OK) return 0;
        tok_ids ids = {0};
        tok_str s = {0};
        static const char txt[] = "Hello, wörld! <|im_start|> 123 \xF0\x9F\x98\x80 \xE4";
        if (tok_encode(t, txt, sizeof(txt) - 1, 0, &ids) == LL_OK) tok_decode(t, ids.ids, ids.n, 0, &s);
        tok_ids_free(&ids);
        tok_str_free(&s);
        tok_free(t);
        return 0;
    }
    tok_tokenizer *t = small_tokenizer();
    tok_ids ids = {0};
    tok_str raw = {0}, lossy = {0}, streamed = {0};
    if (tok_encode(t, p, n, 0, &ids) != LL_OK) abort();
    if (tok_decode(t, ids.ids, ids.n, TOK_DEC_RAW, &raw) != LL_OK) abort();
    if (tok_decode(t, ids.ids, ids.n, 0, &lossy) != LL_OK) abort();
    if (!valid_utf8(lossy.s, lossy.n)) abort();
    /* without NFC changes (pure ASCII input), the raw decode is the input itself */
    int ascii = 1;
    for (size_t i = 0; i < n; i++) ascii &= (uint8_t)p[i] < 0x80;
    if (ascii && (raw.n != n || (n && memcmp(raw.s, p, n)))) abort();
    tok_stream st;
    tok_stream_init(&st, t, 0);
    for (size_t i = 0; i < ids.n; i++)
        if (tok_stream_push(&st, ids.ids[i], &streamed) != LL_OK) abort();
    if (tok_stream_flush(&st, &streamed) != LL_OK) abort();
    if (streamed.n != lossy.n || (lossy.n && memcmp(streamed.s, lossy.s, lossy.n))) abort();
    tok_ids_free(&ids);
    tok_str_free(&raw);
    tok_str_free(&lossy);
    tok_str_free(&streamed);
    return 0;
}
