/*
 * tok_gguf.c — a tokenizer from a GGUF file's tokenizer.ggml.* arrays (llama.cpp's layout, as
 * convert_hf_to_gguf.py writes it for the Qwen family): model "gpt2" (byte-level BPE), tokens
 * (byte-level spellings; added tokens in plain text), token_type (llama_token_type), merges
 * ("left right", rank = index), pre (the split regex by name: tok_pre_regex), special ids and
 * tokenizer.chat_template. Tokens of type UNUSED (the "[PAD{i}]" fillers up to the embedding's
 * size) become holes, as they do not exist in the HF tokenizer. Qwen's tokenizer.json NFC-
 * normalises its input; GGUF does not record a normalizer, so NFC is applied for the Qwen
 * pre-tokenizers, which keeps encodings identical to the HF files.
 */
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

static const char *id_text(const char *const *toks, uint64_t n, const gguf_file *g, const char *key) {
    uint32_t id;
    if (!gguf_has(g, key) || gguf_get_u32(g, key, &id) != LL_OK || id >= n) return NULL;
    return toks[id];
}

ll_status tok_load_gguf_file(const gguf_file *g, tok_tokenizer **out) {
    *out = NULL;
    const char *model = NULL, *pre = NULL;
    if (!gguf_has(g, "tokenizer.ggml.model")) return ll_err(LL_ERR_FORMAT, "%s: no tokenizer (tokenizer.ggml.model is missing)", g->path);
    LL_TRY(gguf_get_str(g, "tokenizer.ggml.model", &model));
    if (strcmp(model, "gpt2") != 0)
        return ll_err(LL_ERR_UNSUPPORTED, "%s: tokenizer.ggml.model = \"%s\" is not supported (gpt2: byte-level BPE)", g->path, model);
    if (gguf_has(g, "tokenizer.ggml.pre")) LL_TRY(gguf_get_str(g, "tokenizer.ggml.pre", &pre));
    const char *regex = tok_pre_regex(pre ? pre : "qwen2");
    if (!regex) return ll_err(LL_ERR_UNSUPPORTED, "%s: tokenizer.ggml.pre = \"%s\" is not supported (qwen2, qwen35)", g->path, pre);
    const char *const *toks, *const *merges;
    uint64_t n, nm = 0;
    LL_TRY(gguf_get_arr_str(g, "tokenizer.ggml.tokens", &toks, &n));
    if (n == 0 || n > INT32_MAX) return ll_err(LL_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries", g->path, (unsigned long long)n);
    if (gguf_has(g, "tokenizer.ggml.merges")) LL_TRY(gguf_get_arr_str(g, "tokenizer.ggml.merges", &merges, &nm));
    if (nm > INT32_MAX) return ll_err(LL_ERR_FORMAT, "%s: too many merges", g->path);
    const int32_t *types = NULL;
    uint64_t nt = 0;
    if (gguf_has(g, "tokenizer.ggml.token_type")) {
        LL_TRY(gguf_get_arr_i32(g, "tokenizer.ggml.token_type", &types, &nt));
        if (nt != n)
            return ll_err(LL_ERR_FORMAT, "%s: tokenizer.ggml.token_type has %llu entries for %llu tokens", g->path, (unsigned long long)nt,
                          (unsigned long long)n);
    }
    const char **tk = ll_malloc((size_t)n * sizeof(char *));
    int32_t *ty = ll_malloc((size_t)n * sizeof(int32_t));
    if (!tk || !ty) {
        ll_free(tk);
        ll_free(ty);
        return ll_err(LL_ERR_OOM, "%s: out of memory", g->path);
    }
    for (uint64_t i = 0; i < n; i++) {
        int t = types ? types[i] : TOK_TYPE_NORMAL;
        if (t == TOK_TYPE_UNUSED || t == TOK_TYPE_UNUSED0) { tk[i] = NULL; ty[i] = TOK_TYPE_UNUSED0; continue; }
        if (t != TOK_TYPE_NORMAL && t != TOK_TYPE_CONTROL && t != TOK_TYPE_USER && t != TOK_TYPE_BYTE && t != TOK_TYPE_UNKNOWN) {
            ll_free(tk);
            ll_free(ty);
            return ll_err(LL_ERR_FORMAT, "%s: tokenizer.ggml.token_type[%llu] = %d is not a token type", g->path, (unsigned long long)i, t);
        }
        tk[i] = toks[i];
        ty[i] = t == TOK_TYPE_BYTE || t == TOK_TYPE_UNKNOWN ? TOK_TYPE_NORMAL : t;
    }
    tok_spec sp;
    memset(&sp, 0, sizeof(sp));
    sp.tokens = tk;
    sp.types = ty;
    sp.n_tokens = (int32_t)n;
    sp.merges = nm ? merges : NULL;
    sp.n_merges = (int32_t)nm;
    sp.split_regex = regex;
    sp.nfc = 1;
    if (gguf_has(g, "tokenizer.chat_template")) gguf_get_str(g, "tokenizer.chat_template", &sp.chat_template);
    sp.eos_token = id_text(tk, n, g, "tokenizer.ggml.eos_token_id");
    sp.bos_token = id_text(tk, n, g, "tokenizer.ggml.bos_token_id");
    sp.pad_token = id_text(tk, n, g, "tokenizer.ggml.padding_token_id");
    ll_status st = tok_build(&sp, out);
    ll_free(tk);
    ll_free(ty);
    return st;
}

ll_status tok_load_gguf(const char *path, tok_tokenizer **out) {
    *out = NULL;
    gguf_file *g;
    LL_TRY(gguf_open(&g, path));
    ll_status st = tok_load_gguf_file(g, out);
    gguf_close(g);
    return st;
}
