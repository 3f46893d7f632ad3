/*
 * tok_load.c — HuggingFace tokenizer.json (+ tokenizer_config.json, chat_template.jinja) and
 * merges.txt → tok_spec → tok_build. Only what the byte-level BPE family needs is accepted; any
 * other normalizer / pre-tokenizer / model is refused with a message naming it.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"

static ll_status read_all(const char *path, char **out, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return ll_err(LL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *b = ll_malloc(cap);
    for (;;) {
        if (!b) { fclose(f); return ll_err(LL_ERR_OOM, "%s: out of memory reading", path); }
        n += fread(b + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        cap *= 2;
        char *nb = ll_realloc(b, cap);
        if (!nb) ll_free(b);
        b = nb;
    }
    int err = ferror(f);
    fclose(f);
    if (err) { ll_free(b); return ll_err(LL_ERR_IO, "%s: read error", path); }
    b[n] = 0;
    *out = b;
    *len = n;
    return LL_OK;
}

static const char *json_str(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A role entry of tokenizer_config.json: "eos_token": "<|im_end|>" or {"content": ...}. */
static const char *role_token(const cJSON *cfg, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsString(v)) return v->valuestring;
    if (cJSON_IsObject(v)) return json_str(v, "content");
    return NULL;
}

/* Finds the Split regex of the pre-tokenizer and checks the rest is plain ByteLevel. */
/* tok_build with the special-token roles from tokenizer_config.json (cfg may be NULL); an error
 * is prefixed with the tokenizer's file or folder name. */
static ll_status build_with_roles(tok_spec *sp, const cJSON *cfg, const char *name, tok_tokenizer **out) {
    sp->eos_token = role_token(cfg, "eos_token");
    sp->bos_token = role_token(cfg, "bos_token");
    sp->pad_token = role_token(cfg, "pad_token");
    ll_status st = tok_build(sp, out);
    if (st != LL_OK) {
        char msg[1024];
        snprintf(msg, sizeof(msg), "%s", ll_errmsg());
        st = ll_err(st, "%s: %s", name, msg);
    }
    return st;
}

static ll_status find_regex(const cJSON *pt, const char *name, const char **regex, int depth) {
    const char *type = json_str(pt, "type");
    if (!type) return ll_err(LL_ERR_FORMAT, "%s: pre_tokenizer without a type", name);
    if (!strcmp(type, "Sequence") && depth == 0) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(pt, "pretokenizers"), *e;
        if (!cJSON_IsArray(arr)) return ll_err(LL_ERR_FORMAT, "%s: pre_tokenizer Sequence without pretokenizers", name);
        cJSON_ArrayForEach(e, arr) LL_TRY(find_regex(e, name, regex, 1));
        return LL_OK;
    }
    if (!strcmp(type, "Split")) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(pt, "pattern");
        const char *re = json_str(pat, "Regex");
        const char *beh = json_str(pt, "behavior");
        const cJSON *inv = cJSON_GetObjectItemCaseSensitive(pt, "invert");
        if (!re) return ll_err(LL_ERR_UNSUPPORTED, "%s: pre_tokenizer Split needs pattern.Regex", name);
        if (!beh || strcmp(beh, "Isolated") || cJSON_IsTrue(inv))
            return ll_err(LL_ERR_UNSUPPORTED, "%s: pre_tokenizer Split behavior '%s'%s is not supported (Isolated only)",
                          name, beh ? beh : "?", cJSON_IsTrue(inv) ? " inverted" : "");
        if (*regex) return ll_err(LL_ERR_UNSUPPORTED, "%s: more than one Split pre-tokenizer", name);
        *regex = re;
        return LL_OK;
    }
    if (!strcmp(type, "ByteLevel")) {
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pt, "add_prefix_space")))
            return ll_err(LL_ERR_UNSUPPORTED, "%s: ByteLevel add_prefix_space=true is not supported", name);
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pt, "use_regex"))) {
            /* GPT-2's own split, which ByteLevel applies when asked to */
            if (*regex) return ll_err(LL_ERR_UNSUPPORTED, "%s: Split followed by ByteLevel use_regex", name);
            *regex = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
        }
        return LL_OK;
    }
    return ll_err(LL_ERR_UNSUPPORTED, "%s: pre_tokenizer type '%s' is not supported", name, type);
}

static ll_status check_normalizer(const cJSON *nz, const char *name, int *nfc) {
    *nfc = 0;
    if (!nz || cJSON_IsNull(nz)) return LL_OK;
    const char *type = json_str(nz, "type");
    if (type && !strcmp(type, "NFC")) { *nfc = 1; return LL_OK; }
    if (type && !strcmp(type, "Sequence")) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(nz, "normalizers"), *e;
        cJSON_ArrayForEach(e, arr) {
            const char *t2 = json_str(e, "type");
            if (!t2 || strcmp(t2, "NFC"))
                return ll_err(LL_ERR_UNSUPPORTED, "%s: normalizer '%s' is not supported (NFC only)", name, t2 ? t2 : "?");
            *nfc = 1;
        }
        return LL_OK;
    }
    return ll_err(LL_ERR_UNSUPPORTED, "%s: normalizer '%s' is not supported (NFC only)", name, type ? type : "?");
}

/* added tokens from tokenizer.json's list and tokenizer_config.json's added_tokens_decoder */
static ll_status collect_added(const cJSON *list, const cJSON *dec, const char *name, tok_added **out, int32_t *n) {
    int32_t cap = cJSON_GetArraySize(list) + cJSON_GetArraySize(dec);
    *out = ll_calloc((size_t)LL_MAX(cap, 1), sizeof(tok_added));
    if (!*out) return ll_err(LL_ERR_OOM, "%s: out of memory", name);
    int32_t k = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        const char *c = json_str(e, "content");
        if (!cJSON_IsNumber(id) || !c) return ll_err(LL_ERR_FORMAT, "%s: added_tokens[%d] needs id and content", name, k);
        (*out)[k++] = (tok_added){(int32_t)id->valuedouble, c, cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special"))};
    }
    cJSON_ArrayForEach(e, dec) {
        char *end;
        long id = strtol(e->string ? e->string : "", &end, 10);
        const char *c = json_str(e, "content");
        if (!e->string || *end || id < 0 || id >= (1 << 24) || !c)
            return ll_err(LL_ERR_FORMAT, "%s: added_tokens_decoder entry '%s' needs a numeric id and content", name,
                          e->string ? e->string : "?");
        (*out)[k++] = (tok_added){(int32_t)id, c, cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special"))};
    }
    *n = k;
    return LL_OK;
}

static ll_status load_parsed(const cJSON *root, const cJSON *cfg, const char *tmpl, const char *name,
                             tok_tokenizer **out) {
    tok_spec sp = {0};
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model)) return ll_err(LL_ERR_FORMAT, "%s: no \"model\" object", name);
    const char *mt = json_str(model, "type");
    if (mt && strcmp(mt, "BPE")) return ll_err(LL_ERR_UNSUPPORTED, "%s: model type '%s' is not supported (BPE only)", name, mt);
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback")))
        return ll_err(LL_ERR_UNSUPPORTED, "%s: BPE byte_fallback is not supported", name);
    const char *pre = json_str(model, "continuing_subword_prefix"), *suf = json_str(model, "end_of_word_suffix");
    if ((pre && *pre) || (suf && *suf))
        return ll_err(LL_ERR_UNSUPPORTED, "%s: BPE continuing_subword_prefix/end_of_word_suffix are not supported", name);
    sp.ignore_merges = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "ignore_merges"));
    LL_TRY(check_normalizer(cJSON_GetObjectItemCaseSensitive(root, "normalizer"), name, &sp.nfc));
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    if (!cJSON_IsObject(pt)) return ll_err(LL_ERR_UNSUPPORTED, "%s: a pre_tokenizer is required (byte-level BPE)", name);
    LL_TRY(find_regex(pt, name, &sp.split_regex, 0));
    if (!sp.split_regex) return ll_err(LL_ERR_UNSUPPORTED, "%s: pre_tokenizer has no split regex", name);

    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab"), *e;
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges)) return ll_err(LL_ERR_FORMAT, "%s: model needs vocab and merges", name);
    int32_t n = 0;
    cJSON_ArrayForEach(e, vocab) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= (1 << 24) || e->valuedouble != (int32_t)e->valuedouble)
            return ll_err(LL_ERR_FORMAT, "%s: vocab entry '%.40s' has a bad id", name, e->string);
        n = LL_MAX(n, (int32_t)e->valuedouble + 1);
    }
    ll_status st = LL_OK;
    const char **tokens = ll_calloc((size_t)LL_MAX(n, 1), sizeof(char *));
    int32_t nm = cJSON_GetArraySize(merges);
    const char **mlist = ll_calloc((size_t)LL_MAX(nm, 1) * 2, sizeof(char *));
    tok_added *added = NULL;
    if (!tokens || !mlist) { st = ll_err(LL_ERR_OOM, "%s: out of memory", name); goto done; }
    cJSON_ArrayForEach(e, vocab) {
        int32_t id = (int32_t)e->valuedouble;
        if (tokens[id]) { st = ll_err(LL_ERR_FORMAT, "%s: vocab id %d appears twice", name, id); goto done; }
        tokens[id] = e->string;
    }
    int32_t k = 0, pairs = -1;
    cJSON_ArrayForEach(e, merges) {
        int is_pair = cJSON_IsArray(e);
        if (pairs < 0) pairs = is_pair;
        if (is_pair != pairs) { st = ll_err(LL_ERR_FORMAT, "%s: merges mix strings and pairs (at %d)", name, k); goto done; }
        if (is_pair) {
            const cJSON *a = cJSON_GetArrayItem(e, 0), *b = cJSON_GetArrayItem(e, 1);
            if (cJSON_GetArraySize(e) != 2 || !cJSON_IsString(a) || !cJSON_IsString(b)) {
                st = ll_err(LL_ERR_FORMAT, "%s: merges[%d] is not a pair of strings", name, k);
                goto done;
            }
            mlist[2 * k] = a->valuestring;
            mlist[2 * k + 1] = b->valuestring;
        } else {
            if (!cJSON_IsString(e)) { st = ll_err(LL_ERR_FORMAT, "%s: merges[%d] is not a string", name, k); goto done; }
            mlist[k] = e->valuestring;
        }
        k++;
    }
    int32_t n_added = 0;
    if ((st = collect_added(cJSON_GetObjectItemCaseSensitive(root, "added_tokens"),
                            cJSON_GetObjectItemCaseSensitive(cfg, "added_tokens_decoder"), name, &added, &n_added)) != LL_OK)
        goto done;
    const cJSON *at;
    cJSON_ArrayForEach(at, cJSON_GetObjectItemCaseSensitive(root, "added_tokens")) {
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(at, "lstrip")) || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(at, "rstrip")) ||
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(at, "single_word")))
            ll_log(LL_LOG_WARN, "%s: added token '%s': lstrip/rstrip/single_word are ignored", name, json_str(at, "content"));
    }
    sp.tokens = tokens;
    sp.n_tokens = n;
    if (pairs == 1) sp.merge_pairs = mlist;
    else sp.merges = mlist;
    sp.n_merges = k;
    sp.added = added;
    sp.n_added = n_added;
    sp.chat_template = tmpl;
    if (!sp.chat_template) {
        const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
        if (cJSON_IsString(ct)) sp.chat_template = ct->valuestring;
        else if (cJSON_IsArray(ct)) { /* [{"name": "default", "template": ...}, ...] */
            cJSON_ArrayForEach(e, ct) {
                const char *nm2 = json_str(e, "name");
                if (nm2 && !strcmp(nm2, "default")) sp.chat_template = json_str(e, "template");
            }
        }
    }
    st = build_with_roles(&sp, cfg, name, out);
done:
    ll_free(tokens);
    ll_free(mlist);
    ll_free(added);
    return st;
}

ll_status tok_load_json(const char *json, size_t len, const char *config, size_t config_len, const char *name,
                        tok_tokenizer **out) {
    *out = NULL;
    if (!name) name = "tokenizer.json";
    cJSON *root = cJSON_ParseWithLength(json, len), *cfg = NULL;
    if (!root) return ll_err(LL_ERR_FORMAT, "%s: not valid JSON (near byte %zu)", name,
                             (size_t)(cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() - json : 0));
    if (config) {
        cfg = cJSON_ParseWithLength(config, config_len);
        if (!cfg) {
            cJSON_Delete(root);
            return ll_err(LL_ERR_FORMAT, "%s: tokenizer_config is not valid JSON", name);
        }
    }
    ll_status st = load_parsed(root, cfg, NULL, name, out);
    cJSON_Delete(root);
    cJSON_Delete(cfg);
    return st;
}

static int is_dir(const char *p) {
    struct stat s;
    return stat(p, &s) == 0 && S_ISDIR(s.st_mode);
}
static int is_file(const char *p) {
    struct stat s;
    return stat(p, &s) == 0 && S_ISREG(s.st_mode);
}

/* dst = dir + "/" + name; 0 if it does not fit */
static int path_join(char *dst, size_t cap, const char *dir, size_t dl, const char *name) {
    size_t nl = strlen(name);
    if (dl + 1 + nl + 1 > cap) return 0;
    memcpy(dst, dir, dl);
    dst[dl] = '/';
    memcpy(dst + dl + 1, name, nl + 1);
    return 1;
}

/* The "slow" layout: vocab.json + merges.txt + tokenizer_config.json (Qwen2Tokenizer: NFC, and
 * the split regex from the config's pretokenize_regex, else Qwen2's). */
static ll_status load_slow_dir(const char *dir, const char *cj, const char *tp, tok_tokenizer **out) {
    char vj[4096], mt[4096];
    if (!path_join(vj, sizeof(vj), dir, strlen(dir), "vocab.json") || !path_join(mt, sizeof(mt), dir, strlen(dir), "merges.txt"))
        return ll_err(LL_ERR_INVALID, "%s: path too long", dir);
    char *vtext = NULL, *mtext = NULL, *ctext = NULL, *tmpl = NULL, *mstore = NULL;
    char **merges = NULL;
    size_t vl = 0, ml = 0, cl = 0, tl = 0;
    int32_t nm = 0;
    const char **tokens = NULL;
    tok_added *added = NULL;
    cJSON *vocab = NULL, *cfg = NULL;
    ll_status st = read_all(vj, &vtext, &vl);
    if (st == LL_OK) st = read_all(mt, &mtext, &ml);
    if (st == LL_OK && is_file(cj)) st = read_all(cj, &ctext, &cl);
    if (st == LL_OK && is_file(tp)) st = read_all(tp, &tmpl, &tl);
    if (st == LL_OK && !(vocab = cJSON_ParseWithLength(vtext, vl))) st = ll_err(LL_ERR_FORMAT, "%s: not valid JSON", vj);
    if (st == LL_OK && ctext && !(cfg = cJSON_ParseWithLength(ctext, cl))) st = ll_err(LL_ERR_FORMAT, "%s: not valid JSON", cj);
    if (st == LL_OK) st = tok_parse_merges_txt(mtext, ml, &merges, &nm, &mstore);
    int32_t n = 0, n_added = 0;
    const cJSON *e;
    if (st == LL_OK && !cJSON_IsObject(vocab)) st = ll_err(LL_ERR_FORMAT, "%s: not a JSON object", vj);
    if (st == LL_OK) {
        cJSON_ArrayForEach(e, vocab) {
            if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= (1 << 24)) {
                st = ll_err(LL_ERR_FORMAT, "%s: entry '%.40s' has a bad id", vj, e->string);
                break;
            }
            n = LL_MAX(n, (int32_t)e->valuedouble + 1);
        }
    }
    if (st == LL_OK && !(tokens = ll_calloc((size_t)LL_MAX(n, 1), sizeof(char *)))) st = ll_err(LL_ERR_OOM, "%s: out of memory", vj);
    if (st == LL_OK) {
        cJSON_ArrayForEach(e, vocab) tokens[(int32_t)e->valuedouble] = e->string;
        st = collect_added(NULL, cJSON_GetObjectItemCaseSensitive(cfg, "added_tokens_decoder"), cj, &added, &n_added);
    }
    if (st == LL_OK) {
        tok_spec sp = {0};
        sp.tokens = tokens;
        sp.n_tokens = n;
        sp.merges = (const char *const *)merges;
        sp.n_merges = nm;
        sp.added = added;
        sp.n_added = n_added;
        sp.nfc = 1;
        sp.split_regex = json_str(cfg, "pretokenize_regex");
        if (!sp.split_regex) sp.split_regex = tok_pre_regex("qwen2");
        sp.chat_template = tmpl ? tmpl : json_str(cfg, "chat_template");
        st = build_with_roles(&sp, cfg, dir, out);
    }
    cJSON_Delete(vocab);
    cJSON_Delete(cfg);
    ll_free(tokens);
    ll_free(added);
    ll_free(merges);
    ll_free(mstore);
    ll_free(vtext);
    ll_free(mtext);
    ll_free(ctext);
    ll_free(tmpl);
    return st;
}

ll_status tok_load_file(const char *path, tok_tokenizer **out) {
    *out = NULL;
    char tj[4096], cj[4096], tp[4096];
    size_t pl = strlen(path);
    if (is_dir(path)) {
        if (!path_join(tj, sizeof(tj), path, pl, "tokenizer.json") || !path_join(cj, sizeof(cj), path, pl, "tokenizer_config.json") ||
            !path_join(tp, sizeof(tp), path, pl, "chat_template.jinja"))
            return ll_err(LL_ERR_INVALID, "%s: path too long", path);
        if (!is_file(tj)) {
            char vj[4096];
            if (path_join(vj, sizeof(vj), path, pl, "vocab.json") && is_file(vj)) return load_slow_dir(path, cj, tp, out);
        }
    } else {
        FILE *fp = fopen(path, "rb");
        char mg[4] = {0};
        int gg = fp && fread(mg, 1, 4, fp) == 4 && !memcmp(mg, "GGUF", 4);
        if (fp) fclose(fp);
        if (gg) return tok_load_gguf(path, out);
        if (pl >= sizeof(tj)) return ll_err(LL_ERR_INVALID, "%s: path too long", path);
        memcpy(tj, path, pl + 1);
        /* a tokenizer_config.json / chat_template.jinja beside the file are used too */
        const char *sl = strrchr(path, '/');
        const char *dir = sl ? path : ".";
        size_t dl = sl ? (size_t)(sl - path) : 1;
        if (!path_join(cj, sizeof(cj), dir, dl, "tokenizer_config.json") || !path_join(tp, sizeof(tp), dir, dl, "chat_template.jinja"))
            return ll_err(LL_ERR_INVALID, "%s: path too long", path);
    }
    char *json = NULL, *cfgtext = NULL, *tmpl = NULL;
    size_t len = 0, clen = 0, tlen = 0;
    LL_TRY(read_all(tj, &json, &len));
    ll_status st = LL_OK;
    if (is_file(cj)) st = read_all(cj, &cfgtext, &clen);
    if (st == LL_OK && is_file(tp)) st = read_all(tp, &tmpl, &tlen);
    cJSON *root = NULL, *cfg = NULL;
    if (st == LL_OK) {
        root = cJSON_ParseWithLength(json, len);
        if (!root) st = ll_err(LL_ERR_FORMAT, "%s: not valid JSON", tj);
    }
    if (st == LL_OK && cfgtext) {
        cfg = cJSON_ParseWithLength(cfgtext, clen);
        if (!cfg) st = ll_err(LL_ERR_FORMAT, "%s: not valid JSON", cj);
    }
    if (st == LL_OK) st = load_parsed(root, cfg, tmpl, tj, out);
    cJSON_Delete(root);
    cJSON_Delete(cfg);
    ll_free(json);
    ll_free(cfgtext);
    ll_free(tmpl);
    return st;
}

ll_status tok_parse_merges_txt(const char *text, size_t len, char ***merges, int32_t *n, char **storage) {
    *merges = NULL;
    *storage = NULL;
    *n = 0;
    char *s = ll_malloc(len + 1);
    if (!s) return ll_err(LL_ERR_OOM, "merges.txt: out of memory");
    memcpy(s, text, len);
    s[len] = 0;
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += s[i] == '\n';
    char **m = ll_malloc(lines * sizeof(char *));
    if (!m) { ll_free(s); return ll_err(LL_ERR_OOM, "merges.txt: out of memory"); }
    int32_t k = 0;
    size_t line = 0;
    for (char *p = s; p < s + len; line++) {
        char *e = memchr(p, '\n', (size_t)(s + len - p));
        if (!e) e = s + len;
        *e = 0;
        if (e > p && e[-1] == '\r') e[-1] = 0;
        if (*p && !(line == 0 && !strncmp(p, "#version", 8))) {
            char *sp1 = strchr(p, ' ');
            if (!sp1 || sp1 == p || !sp1[1] || strchr(sp1 + 1, ' ')) {
                ll_free(s);
                ll_free(m);
                return ll_err(LL_ERR_FORMAT, "merges.txt: line %zu is not \"left right\"", line + 1);
            }
            m[k++] = p;
        }
        p = e + 1;
    }
    *merges = m;
    *n = k;
    *storage = s;
    return LL_OK;
}
