/*
 * tokenizer.c — byte-level BPE (Qwen family): building from arrays, encode, decode, streaming.
 * Loading from tokenizer.json lives in tok_load.c. See tokenizer.h for the pipeline.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/tokenizer.h"
#include "tokenizer/tok_internal.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <utf8proc.h>

/* ------------------------------------------------------------------ growable outputs */

void tok_ids_free(tok_ids *v) {
    ll_free(v->ids);
    memset(v, 0, sizeof(*v));
}
void tok_str_free(tok_str *s) {
    ll_free(s->s);
    memset(s, 0, sizeof(*s));
}

static ll_status str_reserve(tok_str *s, size_t extra) {
    if (s->n + extra + 1 <= s->cap) return LL_OK;
    size_t cap = s->cap ? s->cap : 64;
    while (cap < s->n + extra + 1) cap *= 2;
    char *p = ll_realloc(s->s, cap);
    if (!p) return ll_err(LL_ERR_OOM, "tokenizer: out of memory growing a string to %zu bytes", cap);
    s->s = p;
    s->cap = cap;
    return LL_OK;
}

ll_status tok_str_append(tok_str *s, const void *p, size_t n) {
    LL_TRY(str_reserve(s, n));
    if (n) memcpy(s->s + s->n, p, n);
    s->n += n;
    s->s[s->n] = 0;
    return LL_OK;
}

static ll_status ids_push(tok_ids *v, int32_t id) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 256;
        int32_t *p = ll_realloc(v->ids, cap * sizeof(int32_t));
        if (!p) return ll_err(LL_ERR_OOM, "tokenizer: out of memory growing the id list to %zu", cap);
        v->ids = p;
        v->cap = cap;
    }
    v->ids[v->n++] = id;
    return LL_OK;
}

/* ------------------------------------------------------------------ UTF-8 */

/* Well-formed UTF-8 per Unicode Table 3-7: the sequence length a lead byte starts (2-4; 0 for
 * a byte that cannot lead) and the allowed range [*lo, *hi] of the second byte, which depends on
 * the lead; later bytes are 80..BF. */
static int utf8_lead(uint8_t c, uint8_t *lo, uint8_t *hi) {
    *lo = 0x80;
    *hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c == 0xE0) { *lo = 0xA0; return 3; }
    if (c == 0xED) { *hi = 0x9F; return 3; }
    if (c >= 0xE1 && c <= 0xEF) return 3;
    if (c == 0xF0) { *lo = 0x90; return 4; }
    if (c == 0xF4) { *hi = 0x8F; return 4; }
    if (c >= 0xF1 && c <= 0xF3) return 4;
    return 0;
}

/* Returns 1-4, or 0 when the bytes at s are not a complete valid sequence (invalid, or cut off
 * by the end). */
int tok_utf8_seq_len(const uint8_t *s, size_t n) {
    if (n == 0) return 0;
    if (s[0] < 0x80) return 1;
    uint8_t lo, hi;
    int len = utf8_lead(s[0], &lo, &hi);
    if (len == 0 || n < (size_t)len) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (int i = 2; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return len;
}

/* Length of the maximal subpart at s (the bytes one U+FFFD replaces), and whether it was cut
 * short only by the end of the buffer (*incomplete). Called where tok_utf8_seq_len gave 0. */
static size_t utf8_bad_len(const uint8_t *s, size_t n, int *incomplete) {
    uint8_t lo, hi;
    int len = utf8_lead(s[0], &lo, &hi);
    *incomplete = 0;
    if (len == 0) return 1;
    size_t i = 1;
    for (; i < (size_t)len && i < n; i++) {
        uint8_t l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (s[i] < l || s[i] > h) return i;
    }
    if (i < (size_t)len) *incomplete = 1;
    return i;
}

size_t tok_utf8_lossy(const uint8_t *s, size_t n, int final, tok_str *out, ll_status *st) {
    static const char repl[3] = {(char)0xEF, (char)0xBF, (char)0xBD};
    size_t i = 0, run = 0; /* [run, i) is valid and not yet appended */
    *st = LL_OK;
    while (i < n) {
        if (s[i] < 0x80) { i++; continue; }
        int k = tok_utf8_seq_len(s + i, n - i);
        if (k) { i += (size_t)k; continue; }
        int inc;
        size_t bad = utf8_bad_len(s + i, n - i, &inc);
        if (inc && !final) break;
        if ((*st = tok_str_append(out, s + run, i - run)) != LL_OK) return run;
        if ((*st = tok_str_append(out, repl, 3)) != LL_OK) return i;
        i += bad;
        run = i;
    }
    if ((*st = tok_str_append(out, s + run, i - run)) != LL_OK) return run;
    return i;
}

/* ------------------------------------------------------------------ GPT-2 byte map */

/* Byte b is shown as code point byte_cp[b]: printable Latin-1 bytes as themselves, the other 68
 * bytes as U+0100.. in byte order (so that no token contains a space or control character). */
void tok_byte_map_init(uint16_t byte_cp[256], int16_t cp_byte[512]) {
    int n = 0;
    for (int i = 0; i < 512; i++) cp_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        byte_cp[b] = (uint16_t)(keep ? b : 256 + n++);
        cp_byte[byte_cp[b]] = (int16_t)b;
    }
}

/* ------------------------------------------------------------------ hashing */

uint64_t tok_hash(const void *p, size_t n) {
    const uint8_t *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        h = (h ^ v) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 29;
        s += 8;
        n -= 8;
    }
    uint64_t v = 0;
    memcpy(&v, s, n);
    h = (h ^ v) * 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h;
}

static inline uint64_t hash_pair(int32_t a, int32_t b) {
    uint64_t h = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 32);
}

int32_t tok_vocab_lookup(const tok_tokenizer *t, const void *raw, size_t n) {
    uint64_t h = tok_hash(raw, n);
    for (uint32_t i = (uint32_t)h & t->vmask;; i = (i + 1) & t->vmask) {
        int32_t id = t->vmap[i];
        if (id < 0) return -1;
        uint32_t o = t->raw_off[id], l = t->raw_off[id + 1] - o;
        if (l == n && !memcmp(t->raw + o, raw, n)) return id;
    }
}

/* Merge (a, b) → rank and result id; returns 0 when the pair has no merge. */
static inline int merge_lookup(const tok_tokenizer *t, int32_t a, int32_t b, int32_t *rank, int32_t *nid) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (uint32_t i = (uint32_t)hash_pair(a, b) & t->mmask;; i = (i + 1) & t->mmask) {
        uint64_t k = t->mkey[i];
        if (k == UINT64_MAX) return 0;
        if (k == key) {
            *rank = t->mval[i].rank;
            *nid = t->mval[i].id;
            return 1;
        }
    }
}

int tok_merge_insert(tok_tokenizer *t, int32_t a, int32_t b, int32_t rank, int32_t nid) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (uint32_t i = (uint32_t)hash_pair(a, b) & t->mmask;; i = (i + 1) & t->mmask) {
        if (t->mkey[i] == key) return 0; /* duplicate merge: the first (lower rank) wins, as in HF */
        if (t->mkey[i] == UINT64_MAX) {
            t->mkey[i] = key;
            t->mval[i].rank = rank;
            t->mval[i].id = nid;
            return 1;
        }
    }
}

/* ------------------------------------------------------------------ queries */

int32_t tok_n_vocab(const tok_tokenizer *t) { return t->n; }
int tok_type(const tok_tokenizer *t, int32_t id) { return id >= 0 && id < t->n ? t->type[id] : TOK_TYPE_UNUSED0; }
const char *tok_piece(const tok_tokenizer *t, int32_t id) {
    if (id < 0 || id >= t->n || t->type[id] == TOK_TYPE_UNUSED0) return NULL;
    return t->piece + t->piece_off[id];
}
const char *tok_bytes(const tok_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n || t->type[id] == TOK_TYPE_UNUSED0) return NULL;
    *len = t->raw_off[id + 1] - t->raw_off[id];
    return t->raw + t->raw_off[id];
}
int32_t tok_find(const tok_tokenizer *t, const char *piece) {
    if (!piece) return -1;
    for (int32_t i = 0; i < t->n_added; i++)
        if (!strcmp(t->piece + t->piece_off[t->added[i]], piece)) return t->added[i];
    /* NORMAL tokens: translate the byte-level spelling to raw bytes first */
    size_t n = strlen(piece), k = 0;
    uint8_t *raw = ll_malloc(n + 1);
    if (!raw) return -1;
    for (size_t i = 0; i < n;) {
        int l = tok_utf8_seq_len((const uint8_t *)piece + i, n - i);
        int32_t cp = -1;
        if (l) utf8proc_iterate((const uint8_t *)piece + i, l, &cp);
        if (!l || cp < 0 || cp >= 512 || t->cp_byte[cp] < 0) { k = SIZE_MAX; break; }
        raw[k++] = (uint8_t)t->cp_byte[cp];
        i += (size_t)l;
    }
    int32_t id = k == SIZE_MAX ? -1 : tok_vocab_lookup(t, raw, k);
    ll_free(raw);
    return id;
}
int32_t tok_eos(const tok_tokenizer *t) { return t->eos; }
int32_t tok_bos(const tok_tokenizer *t) { return t->bos; }
int32_t tok_pad(const tok_tokenizer *t) { return t->pad; }
const char *tok_chat_template(const tok_tokenizer *t) { return t->chat_template; }

const char *tok_pre_regex(const char *name) {
    /* The regexes tokenizer.json files carry; GGUF only names them (tokenizer.ggml.pre). */
    static const char qwen2[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
                                "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    static const char qwen35[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}"
                                 "| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    if (!name) return NULL;
    if (!strcmp(name, "qwen2")) return qwen2;
    if (!strcmp(name, "qwen35")) return qwen35;
    return NULL;
}

/* ------------------------------------------------------------------ encode scratch */

/* Per-call working memory. The piece cache is direct-mapped: Zipf-distributed words make most
 * pieces repeats, and a hit skips BPE entirely. It is cleared, never grown, when its arenas fill. */
typedef struct cache_ent {
    uint64_t h;
    uint32_t key_off, ids_off;
    uint16_t key_len, n_ids; /* key_len 0 = empty */
} cache_ent;

typedef struct bpe_sym {
    int32_t id, prev, next;
} bpe_sym;

typedef struct scratch {
    tok_str nfc;                 /* NFC output of one segment */
    utf8proc_int32_t *u32;       /* [u32_cap] utf8proc work buffer */
    size_t u32_cap;
    bpe_sym *sym;                /* [sym_cap] one per byte of the piece */
    uint64_t *heap;              /* [sym_cap] (rank << 32 | pos) */
    size_t sym_cap;
    cache_ent *cache;            /* [cache_mask + 1] */
    uint32_t cache_mask;
    uint8_t *ckeys;              /* [ckeys_cap] */
    int32_t *cids;               /* [cids_cap] */
    uint32_t ckeys_n, ckeys_cap, cids_n, cids_cap;
    pcre2_match_data *md;
    pcre2_match_context *mc;
    pcre2_jit_stack *js;
} scratch;

enum { CACHE_MAX_PIECE = 64 };

static void *pcre_alloc(size_t n, void *ud) { (void)ud; return ll_malloc(n); }
static void pcre_free(void *p, void *ud) { (void)ud; ll_free(p); }

static void scratch_free(scratch *sc) {
    tok_str_free(&sc->nfc);
    ll_free(sc->u32);
    ll_free(sc->sym);
    ll_free(sc->heap);
    ll_free(sc->cache);
    ll_free(sc->ckeys);
    ll_free(sc->cids);
    if (sc->md) pcre2_match_data_free(sc->md);
    if (sc->mc) pcre2_match_context_free(sc->mc);
    if (sc->js) pcre2_jit_stack_free(sc->js);
}

static ll_status scratch_init(scratch *sc, const tok_tokenizer *t, size_t text_len) {
    memset(sc, 0, sizeof(*sc));
    pcre2_general_context *gc = pcre2_general_context_create(pcre_alloc, pcre_free, NULL);
    if (!gc) return ll_err(LL_ERR_OOM, "tokenizer: out of memory (pcre2 context)");
    sc->md = pcre2_match_data_create_from_pattern(t->re, gc);
    sc->mc = pcre2_match_context_create(gc);
    /* 32 KiB to start, up to 16 MiB for pathological inputs (megabytes of whitespace) */
    sc->js = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, gc);
    pcre2_general_context_free(gc);
    if (!sc->md || !sc->mc || !sc->js) return ll_err(LL_ERR_OOM, "tokenizer: out of memory (pcre2 match data)");
    pcre2_jit_stack_assign(sc->mc, NULL, sc->js);
    uint32_t ents = 256;
    while (ents < 16384 && ents * 8 < text_len) ents *= 2;
    sc->cache_mask = ents - 1;
    sc->ckeys_cap = ents * 16;
    sc->cids_cap = ents * 8;
    sc->cache = ll_calloc(ents, sizeof(cache_ent));
    sc->ckeys = ll_malloc(sc->ckeys_cap);
    sc->cids = ll_malloc(sc->cids_cap * sizeof(int32_t));
    if (!sc->cache || !sc->ckeys || !sc->cids) return ll_err(LL_ERR_OOM, "tokenizer: out of memory (piece cache)");
    return LL_OK;
}

static ll_status scratch_syms(scratch *sc, size_t n) {
    if (n <= sc->sym_cap) return LL_OK;
    size_t cap = sc->sym_cap ? sc->sym_cap : 64;
    while (cap < n) cap *= 2;
    ll_free(sc->sym);
    ll_free(sc->heap);
    sc->sym = ll_malloc(cap * sizeof(bpe_sym));
    sc->heap = ll_malloc(cap * sizeof(uint64_t));
    sc->sym_cap = sc->sym && sc->heap ? cap : 0;
    if (!sc->sym_cap) return ll_err(LL_ERR_OOM, "tokenizer: out of memory for a %zu-byte piece", n);
    return LL_OK;
}

/* ------------------------------------------------------------------ BPE */

static inline void heap_push(uint64_t *h, size_t *n, uint64_t v) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p] <= v) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}

static inline uint64_t heap_pop(uint64_t *h, size_t *n) {
    uint64_t top = h[0], v = h[--(*n)];
    size_t i = 0, m = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && h[c + 1] < h[c]) c++;
        if (h[c] >= v) break;
        h[i] = h[c];
        i = c;
    }
    if (m) h[i] = v;
    return top;
}

static inline void bpe_try_push(const tok_tokenizer *t, scratch *sc, size_t *hn, int32_t pos) {
    int32_t nx = sc->sym[pos].next, rank, nid;
    if (nx < 0) return;
    if (merge_lookup(t, sc->sym[pos].id, sc->sym[nx].id, &rank, &nid))
        heap_push(sc->heap, hn, (uint64_t)(uint32_t)rank << 32 | (uint32_t)pos);
}

/* Byte-level BPE of one piece, as HF does it: always apply the lowest-rank merge available,
 * leftmost first on ties. A heap of candidate (rank, position) pairs with lazy invalidation
 * keeps it O(n log n) even for megabyte-long pieces. */
static ll_status bpe_piece(const tok_tokenizer *t, scratch *sc, const uint8_t *p, size_t n, tok_ids *out) {
    if (n == 1) return ids_push(out, t->byte_id[p[0]]);
    if (t->ignore_merges) {
        int32_t id = tok_vocab_lookup(t, p, n);
        if (id >= 0) return ids_push(out, id);
    }
    cache_ent *ce = NULL;
    uint64_t h = 0;
    if (n <= CACHE_MAX_PIECE) {
        h = tok_hash(p, n);
        ce = &sc->cache[h & sc->cache_mask];
        if (ce->key_len == n && ce->h == h && !memcmp(sc->ckeys + ce->key_off, p, n)) {
            for (uint32_t i = 0; i < ce->n_ids; i++) LL_TRY(ids_push(out, sc->cids[ce->ids_off + i]));
            return LL_OK;
        }
    }
    LL_TRY(scratch_syms(sc, n));
    bpe_sym *s = sc->sym;
    for (size_t i = 0; i < n; i++) {
        s[i].id = t->byte_id[p[i]];
        s[i].prev = (int32_t)i - 1;
        s[i].next = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    size_t hn = 0;
    for (size_t i = 0; i + 1 < n; i++) bpe_try_push(t, sc, &hn, (int32_t)i);
    while (hn) {
        uint64_t top = heap_pop(sc->heap, &hn);
        int32_t pos = (int32_t)(uint32_t)top, rank = (int32_t)(top >> 32), r2, nid;
        /* stale entries: the symbol was merged away, or one side changed since the push */
        if (s[pos].id < 0 || s[pos].next < 0) continue;
        int32_t nx = s[pos].next;
        if (!merge_lookup(t, s[pos].id, s[nx].id, &r2, &nid) || r2 != rank) continue;
        s[pos].id = nid;
        s[pos].next = s[nx].next;
        if (s[nx].next >= 0) s[s[nx].next].prev = pos;
        s[nx].id = -1;
        if (s[pos].prev >= 0) bpe_try_push(t, sc, &hn, s[pos].prev);
        bpe_try_push(t, sc, &hn, pos);
    }
    size_t first = out->n;
    for (int32_t i = 0; i >= 0; i = s[i].next) LL_TRY(ids_push(out, s[i].id));
    if (ce) {
        size_t k = out->n - first;
        if (k <= 0xFFFF && k <= sc->cids_cap) {
            if (sc->ckeys_n + n > sc->ckeys_cap || sc->cids_n + k > sc->cids_cap) {
                memset(sc->cache, 0, (sc->cache_mask + 1) * sizeof(cache_ent));
                sc->ckeys_n = sc->cids_n = 0;
            }
            ce->h = h;
            ce->key_off = sc->ckeys_n;
            ce->key_len = (uint16_t)n;
            ce->ids_off = sc->cids_n;
            ce->n_ids = (uint16_t)k;
            memcpy(sc->ckeys + sc->ckeys_n, p, n);
            memcpy(sc->cids + sc->cids_n, out->ids + first, k * sizeof(int32_t));
            sc->ckeys_n += (uint32_t)n;
            sc->cids_n += (uint32_t)k;
        }
    }
    return LL_OK;
}

/* ------------------------------------------------------------------ pre-tokenization */

/* Splits valid UTF-8 text with the regex, Isolated behaviour: matches and the gaps between them
 * are all pieces. */
static ll_status split_and_bpe(const tok_tokenizer *t, scratch *sc, const uint8_t *s, size_t n, tok_ids *out) {
    size_t gap = 0, at = 0;
    while (at < n) {
        int rc = pcre2_match(t->re, s, n, at, PCRE2_NO_UTF_CHECK, sc->md, sc->mc);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            char msg[120];
            pcre2_get_error_message(rc, (PCRE2_UCHAR *)msg, sizeof(msg));
            return ll_err(LL_ERR_INTERNAL, "tokenizer: split regex failed at byte %zu: %s", at, msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(sc->md);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) { /* empty match: no piece; step one character and search again */
            int k = tok_utf8_seq_len(s + ms, n - ms);
            at = ms + (size_t)(k ? k : 1);
            continue;
        }
        if (ms > gap) LL_TRY(bpe_piece(t, sc, s + gap, ms - gap, out));
        LL_TRY(bpe_piece(t, sc, s + ms, me - ms, out));
        gap = at = me;
    }
    if (gap < n) LL_TRY(bpe_piece(t, sc, s + gap, n - gap, out));
    return LL_OK;
}

/* NFC of valid UTF-8 into sc->nfc. */
static ll_status nfc_run(scratch *sc, const uint8_t *s, size_t n) {
    const int opt = UTF8PROC_STABLE | UTF8PROC_COMPOSE;
    for (;;) {
        utf8proc_ssize_t k = utf8proc_decompose(s, (utf8proc_ssize_t)n, sc->u32, (utf8proc_ssize_t)sc->u32_cap, opt);
        if (k < 0) return ll_err(LL_ERR_INTERNAL, "tokenizer: NFC failed: %s", utf8proc_errmsg(k));
        if ((size_t)k <= sc->u32_cap) {
            k = utf8proc_reencode(sc->u32, k, opt);
            if (k < 0) return ll_err(LL_ERR_INTERNAL, "tokenizer: NFC failed: %s", utf8proc_errmsg(k));
            sc->nfc.n = 0;
            return tok_str_append(&sc->nfc, sc->u32, (size_t)k);
        }
        size_t cap = (size_t)k + 16;
        ll_free(sc->u32);
        sc->u32 = ll_malloc(cap * sizeof(utf8proc_int32_t));
        sc->u32_cap = sc->u32 ? cap : 0;
        if (!sc->u32) return ll_err(LL_ERR_OOM, "tokenizer: out of memory for NFC of %zu bytes", n);
    }
}

/* NFC quick check for one code point: 1 when NFC might change text containing it (a combining
 * mark, a canonical decomposition, a character that composes with what precedes it, Hangul
 * vowel/trailing jamo). Conservative: a 1 only costs a full NFC pass. Every code point below
 * U+0300 is a 0, so the caller only asks for lead bytes >= 0xCC. */
static int nfc_maybe(const uint8_t *s, int len) {
    utf8proc_int32_t cp;
    utf8proc_iterate(s, len, &cp);
    if ((cp >= 0x1161 && cp <= 0x1175) || (cp >= 0x11A8 && cp <= 0x11C2)) return 1;
    const utf8proc_property_t *p = utf8proc_get_property(cp);
    if (p->combining_class) return 1;
    if (p->decomp_type == 0 && p->decomp_seqindex != UINT16_MAX) return 1;
    return p->comb_index != UINT16_MAX && (p->comb_index & 0x8000);
}

/* One segment between added tokens: valid runs are normalised and split; each maximal invalid
 * run is one piece of raw bytes. */
static ll_status encode_segment(const tok_tokenizer *t, scratch *sc, const uint8_t *s, size_t n, tok_ids *out) {
    size_t i = 0;
    while (i < n) {
        size_t a = i;
        int need_nfc = 0;
        while (i < n) {
            if (s[i] < 0x80) { i++; continue; }
            int k = tok_utf8_seq_len(s + i, n - i);
            if (!k) break;
            if (!need_nfc && s[i] >= 0xCC) need_nfc = nfc_maybe(s + i, k);
            i += (size_t)k;
        }
        if (i > a) {
            if (t->nfc && need_nfc) {
                LL_TRY(nfc_run(sc, s + a, i - a));
                LL_TRY(split_and_bpe(t, sc, (const uint8_t *)sc->nfc.s, sc->nfc.n, out));
            } else {
                LL_TRY(split_and_bpe(t, sc, s + a, i - a, out));
            }
        }
        size_t b = i;
        while (i < n && !tok_utf8_seq_len(s + i, n - i)) i++;
        if (i > b) LL_TRY(bpe_piece(t, sc, s + b, i - b, out));
    }
    return LL_OK;
}

/* Leftmost-longest added token at or after `from`; returns its start or n. */
static size_t find_added(const tok_tokenizer *t, const uint8_t *s, size_t n, size_t from, unsigned flags,
                         int32_t *id, size_t *len) {
    for (size_t i = from; i < n; i++) {
        uint8_t c = s[i];
        for (uint32_t j = t->abeg[c]; j < t->abeg[c + 1]; j++) { /* longest first */
            int32_t a = t->added[j];
            if ((flags & TOK_ENC_SPECIAL_AS_TEXT) && t->type[a] == TOK_TYPE_CONTROL) continue;
            uint32_t o = t->piece_off[a];
            size_t l = t->alen[j];
            if (l <= n - i && !memcmp(s + i, t->piece + o, l)) {
                *id = a;
                *len = l;
                return i;
            }
        }
    }
    return n;
}

ll_status tok_encode(const tok_tokenizer *t, const char *text, size_t len, unsigned flags, tok_ids *out) {
    LL_ASSERT(t && out && (text || !len));
    if (!len) return LL_OK;
    scratch sc;
    ll_status st = scratch_init(&sc, t, len);
    const uint8_t *s = (const uint8_t *)text;
    size_t pos = 0;
    while (st == LL_OK && pos < len) {
        int32_t id = -1;
        size_t alen = 0, m = len;
        if (!(flags & TOK_ENC_ADDED_AS_TEXT) && t->n_added) m = find_added(t, s, len, pos, flags, &id, &alen);
        if (m > pos) st = encode_segment(t, &sc, s + pos, m - pos, out);
        if (st == LL_OK && m < len) st = ids_push(out, id);
        pos = m + alen;
    }
    scratch_free(&sc);
    return st;
}

/* ------------------------------------------------------------------ decode */

static ll_status check_id(const tok_tokenizer *t, int32_t id) {
    if (id < 0 || id >= t->n || t->type[id] == TOK_TYPE_UNUSED0)
        return ll_err(LL_ERR_INVALID, "tokenizer: token id %d is not in the vocabulary (0..%d)", id, t->n - 1);
    return LL_OK;
}

ll_status tok_decode(const tok_tokenizer *t, const int32_t *ids, size_t n, unsigned flags, tok_str *out) {
    LL_ASSERT(t && out && (ids || !n));
    size_t start = out->n;
    LL_TRY(str_reserve(out, 0));
    out->s[out->n] = 0;
    for (size_t i = 0; i < n; i++) {
        LL_TRY(check_id(t, ids[i]));
        if ((flags & TOK_DEC_SKIP_SPECIAL) && t->type[ids[i]] == TOK_TYPE_CONTROL) continue;
        uint32_t o = t->raw_off[ids[i]];
        LL_TRY(tok_str_append(out, t->raw + o, t->raw_off[ids[i] + 1] - o));
    }
    if (flags & TOK_DEC_RAW) return LL_OK;
    /* repair only when needed: almost all decodes are valid UTF-8 already */
    const uint8_t *s = (const uint8_t *)out->s + start;
    size_t len = out->n - start, i = 0;
    while (i < len) {
        int k = s[i] < 0x80 ? 1 : tok_utf8_seq_len(s + i, len - i);
        if (!k) break;
        i += (size_t)k;
    }
    if (i == len) return LL_OK;
    tok_str tmp = {0};
    ll_status st = tok_str_append(&tmp, s + i, len - i);
    if (st == LL_OK) {
        out->n = start + i;
        tok_utf8_lossy((const uint8_t *)tmp.s, tmp.n, 1, out, &st);
    }
    tok_str_free(&tmp);
    return st;
}

void tok_stream_init(tok_stream *s, const tok_tokenizer *t, unsigned flags) {
    memset(s, 0, sizeof(*s));
    s->t = t;
    s->flags = flags;
}

ll_status tok_stream_push(tok_stream *s, int32_t id, tok_str *out) {
    LL_TRY(check_id(s->t, id));
    if ((s->flags & TOK_DEC_SKIP_SPECIAL) && s->t->type[id] == TOK_TYPE_CONTROL) return LL_OK;
    uint32_t o = s->t->raw_off[id];
    const uint8_t *b = (const uint8_t *)s->t->raw + o;
    size_t n = s->t->raw_off[id + 1] - o, from = 0;
    ll_status st;
    if (s->npend) {
        /* resolve the held-back character with at most 3 more bytes of this token */
        uint8_t tmp[8];
        size_t k = (size_t)s->npend, extra = LL_MIN(n, (size_t)3);
        memcpy(tmp, s->pend, k);
        memcpy(tmp + k, b, extra);
        size_t c = tok_utf8_lossy(tmp, k + extra, 0, out, &st);
        LL_TRY(st);
        if (c < k) { /* still incomplete: all of this token is in tmp */
            s->npend = (int)(k + extra - c);
            memmove(s->pend, tmp + c, (size_t)s->npend);
            return LL_OK;
        }
        s->npend = 0;
        from = c - k;
    }
    size_t c = from + tok_utf8_lossy(b + from, n - from, 0, out, &st);
    LL_TRY(st);
    s->npend = (int)(n - c);
    LL_ASSERT(s->npend <= 3);
    memcpy(s->pend, b + c, (size_t)s->npend);
    return LL_OK;
}

ll_status tok_stream_flush(tok_stream *s, tok_str *out) {
    ll_status st = LL_OK;
    if (s->npend) tok_utf8_lossy(s->pend, (size_t)s->npend, 1, out, &st);
    s->npend = 0;
    return st;
}

/* ------------------------------------------------------------------ build */

void tok_free(tok_tokenizer *t) {
    if (!t) return;
    ll_free(t->type);
    ll_free(t->raw_off);
    ll_free(t->raw);
    ll_free(t->piece_off);
    ll_free(t->piece);
    ll_free(t->vmap);
    ll_free(t->mkey);
    ll_free(t->mval);
    ll_free(t->added);
    ll_free(t->alen);
    ll_free(t->chat_template);
    if (t->re) pcre2_code_free(t->re);
    ll_free(t);
}

/* Raw bytes of a token spelling. NORMAL tokens are byte-level: each character maps back to one
 * byte. Like HF's ByteLevel decoder, a spelling with any character outside the map (added tokens
 * such as "<|im_start|>" are all inside it; ones with spaces or CJK are not) stands for its own
 * UTF-8 bytes. */
static size_t spelling_to_raw(const tok_tokenizer *t, const char *sp, uint8_t *dst) {
    size_t n = strlen(sp), k = 0;
    for (size_t i = 0; i < n;) {
        int l = tok_utf8_seq_len((const uint8_t *)sp + i, n - i);
        int32_t cp = -1;
        if (l) utf8proc_iterate((const uint8_t *)sp + i, l, &cp);
        if (!l || cp < 0 || cp >= 512 || t->cp_byte[cp] < 0) {
            memcpy(dst, sp, n);
            return n;
        }
        dst[k++] = (uint8_t)t->cp_byte[cp];
        i += (size_t)l;
    }
    return k;
}

static int cmp_added(const void *a, const void *b, void *ctx) {
    const tok_tokenizer *t = ctx;
    const char *x = t->piece + t->piece_off[*(const int32_t *)a], *y = t->piece + t->piece_off[*(const int32_t *)b];
    if ((uint8_t)x[0] != (uint8_t)y[0]) return (uint8_t)x[0] < (uint8_t)y[0] ? -1 : 1;
    size_t lx = strlen(x), ly = strlen(y);
    if (lx != ly) return lx > ly ? -1 : 1; /* longest first */
    return *(const int32_t *)a - *(const int32_t *)b;
}

static ll_status build_merges(tok_tokenizer *t, const tok_spec *sp, uint8_t *buf) {
    uint32_t cap = 16;
    while (cap < (uint32_t)sp->n_merges * 2 + 16) cap *= 2;
    t->mmask = cap - 1;
    t->mkey = ll_malloc(cap * sizeof(uint64_t));
    t->mval = ll_malloc(cap * sizeof(*t->mval));
    if (!t->mkey || !t->mval) return ll_err(LL_ERR_OOM, "tokenizer: out of memory for %d merges", sp->n_merges);
    memset(t->mkey, 0xff, cap * sizeof(uint64_t));
    for (int32_t r = 0; r < sp->n_merges; r++) {
        const char *left, *right;
        size_t ll;
        if (sp->merge_pairs) {
            left = sp->merge_pairs[2 * r];
            right = sp->merge_pairs[2 * r + 1];
            if (!left || !right) return ll_err(LL_ERR_FORMAT, "tokenizer: merge %d is missing a side", r);
            ll = strlen(left);
        } else {
            const char *m = sp->merges[r];
            const char *sp1 = m ? strchr(m, ' ') : NULL;
            if (!sp1 || strchr(sp1 + 1, ' '))
                return ll_err(LL_ERR_FORMAT, "tokenizer: merge %d '%.40s' is not \"left right\"", r, m ? m : "(null)");
            left = m;
            ll = (size_t)(sp1 - m);
            right = sp1 + 1;
        }
        /* left and right in raw bytes, side by side in buf */
        char lcopy[1024];
        if (ll >= sizeof(lcopy) || strlen(right) >= sizeof(lcopy))
            return ll_err(LL_ERR_FORMAT, "tokenizer: merge %d is too long", r);
        memcpy(lcopy, left, ll);
        lcopy[ll] = 0;
        size_t a = spelling_to_raw(t, lcopy, buf);
        size_t b = spelling_to_raw(t, right, buf + a);
        int32_t ia = tok_vocab_lookup(t, buf, a), ib = tok_vocab_lookup(t, buf + a, b), in = tok_vocab_lookup(t, buf, a + b);
        if (ia < 0 || ib < 0 || in < 0)
            return ll_err(LL_ERR_FORMAT, "tokenizer: merge %d ('%s' + '%s') uses a token not in the vocabulary", r, lcopy,
                          right);
        tok_merge_insert(t, ia, ib, r, in);
    }
    return LL_OK;
}

ll_status tok_build(const tok_spec *sp, tok_tokenizer **out) {
    *out = NULL;
    if (sp->n_tokens < 0 || sp->n_merges < 0 || sp->n_added < 0 || !sp->split_regex)
        return ll_err(LL_ERR_INVALID, "tokenizer: incomplete spec (counts or split regex missing)");
    int32_t n = sp->n_tokens;
    for (int32_t i = 0; i < sp->n_added; i++) {
        if (sp->added[i].id < 0 || sp->added[i].id >= (1 << 24) || !sp->added[i].content)
            return ll_err(LL_ERR_FORMAT, "tokenizer: added token %d has a bad id (%d) or no content", i, sp->added[i].id);
        n = LL_MAX(n, sp->added[i].id + 1);
    }
    if (n <= 0 || n >= (1 << 24)) return ll_err(LL_ERR_FORMAT, "tokenizer: vocabulary size %d out of range", n);
    tok_tokenizer *t = ll_calloc(1, sizeof(*t));
    if (!t) return ll_err(LL_ERR_OOM, "tokenizer: out of memory");
    t->n = n;
    t->nfc = sp->nfc;
    t->ignore_merges = sp->ignore_merges;
    t->eos = t->bos = t->pad = -1;
    tok_byte_map_init(t->byte_cp, t->cp_byte);
    ll_status st = LL_OK;
    const char **spell = ll_calloc((size_t)n, sizeof(char *));
    t->type = ll_calloc((size_t)n, 1);
    uint8_t *buf = NULL;
    if (!spell || !t->type) { st = ll_err(LL_ERR_OOM, "tokenizer: out of memory"); goto done; }
    for (int32_t i = 0; i < sp->n_tokens; i++) {
        if (!sp->tokens[i]) continue;
        int ty = sp->types ? sp->types[i] : TOK_TYPE_NORMAL;
        if (ty < 1 || ty > 6) { st = ll_err(LL_ERR_FORMAT, "tokenizer: token %d has unknown type %d", i, ty); goto done; }
        spell[i] = sp->tokens[i];
        t->type[i] = (uint8_t)ty;
    }
    for (int32_t i = 0; i < sp->n_added; i++) {
        spell[sp->added[i].id] = sp->added[i].content;
        t->type[sp->added[i].id] = sp->added[i].special ? TOK_TYPE_CONTROL : TOK_TYPE_USER;
    }
    /* pools: spellings (NUL-terminated) and raw bytes (never longer than the spelling) */
    size_t total = 0, maxlen = 0;
    for (int32_t i = 0; i < n; i++)
        if (spell[i]) {
            size_t l = strlen(spell[i]);
            total += l + 1;
            maxlen = LL_MAX(maxlen, l);
        }
    if (total >= UINT32_MAX) { st = ll_err(LL_ERR_FORMAT, "tokenizer: vocabulary too large"); goto done; }
    t->piece_off = ll_malloc(((size_t)n + 1) * sizeof(uint32_t));
    t->raw_off = ll_malloc(((size_t)n + 1) * sizeof(uint32_t));
    t->piece = ll_malloc(total + 1);
    t->raw = ll_malloc(total + 1);
    buf = ll_malloc(2 * LL_MAX(maxlen, (size_t)1024) + 8);
    if (!t->piece_off || !t->raw_off || !t->piece || !t->raw || !buf) {
        st = ll_err(LL_ERR_OOM, "tokenizer: out of memory");
        goto done;
    }
    size_t po = 1, ro = 0;
    t->piece[0] = 0; /* holes point at an empty string */
    for (int32_t i = 0; i < n; i++) {
        t->raw_off[i] = (uint32_t)ro;
        if (!spell[i]) { t->piece_off[i] = 0; continue; }
        size_t l = strlen(spell[i]);
        t->piece_off[i] = (uint32_t)po;
        memcpy(t->piece + po, spell[i], l + 1);
        po += l + 1;
        ro += spelling_to_raw(t, spell[i], (uint8_t *)t->raw + ro);
    }
    t->raw_off[n] = (uint32_t)ro;
    /* vocabulary map: raw bytes → id, for the ordinary tokens BPE can produce */
    uint32_t cap = 16;
    while (cap < (uint32_t)n * 2) cap *= 2;
    t->vmask = cap - 1;
    t->vmap = ll_malloc(cap * sizeof(int32_t));
    if (!t->vmap) { st = ll_err(LL_ERR_OOM, "tokenizer: out of memory"); goto done; }
    memset(t->vmap, 0xff, cap * sizeof(int32_t));
    for (int32_t i = 0; i < n; i++) {
        if (!spell[i] || t->type[i] == TOK_TYPE_CONTROL || t->type[i] == TOK_TYPE_USER) continue;
        const char *r = t->raw + t->raw_off[i];
        size_t l = t->raw_off[i + 1] - t->raw_off[i];
        if (!l || tok_vocab_lookup(t, r, l) >= 0) continue; /* duplicate spelling: first id wins */
        uint32_t k = (uint32_t)tok_hash(r, l) & t->vmask;
        while (t->vmap[k] >= 0) k = (k + 1) & t->vmask;
        t->vmap[k] = i;
    }
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        t->byte_id[b] = tok_vocab_lookup(t, &c, 1);
        if (t->byte_id[b] < 0) {
            st = ll_err(LL_ERR_FORMAT, "tokenizer: no token for byte 0x%02x (a byte-level BPE needs all 256)", b);
            goto done;
        }
    }
    if ((st = build_merges(t, sp, buf)) != LL_OK) goto done;
    /* added tokens, grouped by first byte, longest first */
    for (int32_t i = 0; i < n; i++)
        if ((t->type[i] == TOK_TYPE_CONTROL || t->type[i] == TOK_TYPE_USER) && spell[i][0]) t->n_added++;
    t->added = ll_malloc((size_t)LL_MAX(t->n_added, 1) * sizeof(int32_t));
    if (!t->added) { st = ll_err(LL_ERR_OOM, "tokenizer: out of memory"); goto done; }
    t->n_added = 0;
    for (int32_t i = 0; i < n; i++)
        if ((t->type[i] == TOK_TYPE_CONTROL || t->type[i] == TOK_TYPE_USER) && spell[i][0]) t->added[t->n_added++] = i;
    qsort_r(t->added, (size_t)t->n_added, sizeof(int32_t), cmp_added, t);
    t->alen = ll_malloc((size_t)LL_MAX(t->n_added, 1) * sizeof(uint32_t));
    if (!t->alen) { st = ll_err(LL_ERR_OOM, "tokenizer: out of memory"); goto done; }
    for (int32_t j = 0; j < t->n_added; j++) t->alen[j] = (uint32_t)strlen(t->piece + t->piece_off[t->added[j]]);
    for (int c = 0, j = 0; c <= 256; c++) {
        while (j < t->n_added && (uint8_t)t->piece[t->piece_off[t->added[j]]] < c) j++;
        t->abeg[c] = (uint32_t)j;
    }
    t->abeg[256] = (uint32_t)t->n_added;
    /* the split regex */
    {
        int err;
        PCRE2_SIZE eoff;
        t->re = pcre2_compile((PCRE2_SPTR)sp->split_regex, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &eoff, NULL);
        if (!t->re) {
            char msg[160];
            pcre2_get_error_message(err, (PCRE2_UCHAR *)msg, sizeof(msg));
            st = ll_err(LL_ERR_FORMAT, "tokenizer: split regex does not compile at offset %zu: %s", (size_t)eoff, msg);
            goto done;
        }
        pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE); /* the interpreter is the fallback if JIT fails */
    }
    if (sp->chat_template && !(t->chat_template = ll_strdup(sp->chat_template))) {
        st = ll_err(LL_ERR_OOM, "tokenizer: out of memory");
        goto done;
    }
    t->eos = sp->eos_token ? tok_find(t, sp->eos_token) : -1;
    t->bos = sp->bos_token ? tok_find(t, sp->bos_token) : -1;
    t->pad = sp->pad_token ? tok_find(t, sp->pad_token) : -1;
done:
    ll_free(spell);
    ll_free(buf);
    if (st != LL_OK) {
        tok_free(t);
        return st;
    }
    *out = t;
    return LL_OK;
}
