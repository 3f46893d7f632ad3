/*
 * mask.c — numbered placeholders for found values, and their restoration in whole texts and in
 * chunked streams (see mask.h).
 */
#include "privacy/mask.h"

#include <stdio.h>

ll_status pii_buf_append(pii_buf *b, const void *p, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 64;
        while (nc < b->n + n + 1) nc *= 2;
        char *ns = ll_realloc(b->s, nc);
        if (!ns) return ll_err(LL_ERR_OOM, "privacy: out of memory growing a buffer to %zu bytes", nc);
        b->s = ns;
        b->cap = nc;
    }
    if (n) memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = 0;
    return LL_OK;
}

void pii_buf_free(pii_buf *b) {
    ll_free(b->s);
    memset(b, 0, sizeof(*b));
}

void pii_masker_init(pii_masker *m) { memset(m, 0, sizeof(*m)); }

void pii_masker_free(pii_masker *m) {
    for (size_t i = 0; i < m->n; i++) ll_free(m->v[i].value);
    ll_free(m->v);
    memset(m, 0, sizeof(*m));
}

ll_status pii_masker_placeholder(pii_masker *m, int label, const char *value, size_t n, const pii_mask_entry **out) {
    LL_ASSERT(label >= 0 && label < PII_N_CAT);
    for (size_t i = 0; i < m->n; i++)
        if (m->v[i].label == label && m->v[i].vlen == n && !memcmp(m->v[i].value, value, n)) {
            *out = &m->v[i];
            return LL_OK;
        }
    if (m->n == m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 16;
        pii_mask_entry *nv = ll_realloc(m->v, nc * sizeof(*nv));
        if (!nv) return ll_err(LL_ERR_OOM, "privacy: out of memory for %zu placeholders", nc);
        m->v = nv;
        m->cap = nc;
    }
    pii_mask_entry *e = &m->v[m->n];
    e->value = ll_malloc(n + 1);
    if (!e->value) return ll_err(LL_ERR_OOM, "privacy: out of memory for a %zu-byte value", n);
    memcpy(e->value, value, n);
    e->value[n] = 0;
    e->vlen = n;
    e->label = label;
    e->index = ++m->next_index[label];
    e->phlen = (size_t)snprintf(e->ph, sizeof(e->ph), "[%s_%d]", pii_category_upper(label), e->index);
    m->n++;
    *out = e;
    return LL_OK;
}

const pii_mask_entry *pii_masker_lookup(const pii_masker *m, const char *ph, size_t n) {
    for (size_t i = 0; i < m->n; i++)
        if (m->v[i].phlen == n && !memcmp(m->v[i].ph, ph, n)) return &m->v[i];
    return NULL;
}

ll_status pii_mask_text(pii_masker *m, const char *text, size_t n, const pii_span *spans, size_t ns, uint32_t cat_mask,
                        pii_buf *out) {
    size_t pos = 0;
    for (size_t i = 0; i < ns; i++) {
        const pii_span *sp = &spans[i];
        if (!(cat_mask & (1u << sp->label))) continue;
        if (sp->bstart < (int64_t)pos || sp->bend > (int64_t)n || sp->bend <= sp->bstart)
            return ll_err(LL_ERR_INVALID, "privacy: span %zu [%lld, %lld) is out of order or outside the %zu-byte text", i,
                          (long long)sp->bstart, (long long)sp->bend, n);
        const pii_mask_entry *e;
        LL_TRY(pii_buf_append(out, text + pos, (size_t)sp->bstart - pos));
        LL_TRY(pii_masker_placeholder(m, sp->label, text + sp->bstart, (size_t)(sp->bend - sp->bstart), &e));
        LL_TRY(pii_buf_append(out, e->ph, e->phlen));
        pos = (size_t)sp->bend;
    }
    return pii_buf_append(out, text + pos, n - pos);
}

static int ph_char(char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }

/* At s[0] == '[': the length of a complete "[NAME_N]" (> 0), 0 if it cannot be one, or -1 if
 * s[0..n) is a proper prefix of one (more bytes needed). */
static long ph_scan(const char *s, size_t n) {
    size_t i = 1;
    while (i < n && i < PII_PLACEHOLDER_MAX && ph_char(s[i])) i++;
    if (i == n) return i < PII_PLACEHOLDER_MAX ? -1 : 0;
    if (s[i] != ']' || i < 4 || !(s[i - 1] >= '0' && s[i - 1] <= '9')) return 0;
    return (long)(i + 1);
}

/* Appends v[n] so that it is valid inside a JSON string literal: a '"', a lone '\\' and control
 * bytes are escaped; escape sequences already in v (a value masked out of JSON text, such as tool
 * call arguments) are kept as they are, so restoring never escapes twice. */
static ll_status append_json_escaped(pii_buf *out, const char *v, size_t n) {
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c == '\\' && i + 1 < n && strchr("\"\\/bfnrtu", v[i + 1])) {
            LL_TRY(pii_buf_append(out, v + i, 2));
            i++;
        } else if (c == '\\' || c == '"') {
            char e[2] = {'\\', (char)c};
            LL_TRY(pii_buf_append(out, e, 2));
        } else if (c < 0x20) {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            LL_TRY(pii_buf_append(out, e, 6));
        } else {
            LL_TRY(pii_buf_append(out, v + i, 1));
        }
    }
    return LL_OK;
}

/* Restores placeholders in s[n] (json: the values JSON-escaped, for text that is the inside of a
 * JSON string); returns the number of bytes consumed (the rest is a possible placeholder prefix
 * when !final). */
static ll_status unmask_run(const pii_masker *m, const char *s, size_t n, int final, int json, pii_buf *out, size_t *consumed) {
    size_t pos = 0, i = 0;
    while (i < n) {
        const char *br = memchr(s + i, '[', n - i);
        if (!br) break;
        i = (size_t)(br - s);
        long l = ph_scan(s + i, n - i);
        if (l < 0 && !final) {
            LL_TRY(pii_buf_append(out, s + pos, i - pos));
            *consumed = i;
            return LL_OK;
        }
        if (l > 0) {
            const pii_mask_entry *e = pii_masker_lookup(m, s + i, (size_t)l);
            if (e) {
                LL_TRY(pii_buf_append(out, s + pos, i - pos));
                LL_TRY(json ? append_json_escaped(out, e->value, e->vlen) : pii_buf_append(out, e->value, e->vlen));
                pos = i + (size_t)l;
            }
            i += (size_t)l;
        } else {
            i++;
        }
    }
    LL_TRY(pii_buf_append(out, s + pos, n - pos));
    *consumed = n;
    return LL_OK;
}

ll_status pii_unmask_text(const pii_masker *m, const char *text, size_t n, pii_buf *out) {
    size_t used;
    return unmask_run(m, text, n, 1, 0, out, &used);
}

ll_status pii_unmask_text_json(const pii_masker *m, const char *text, size_t n, pii_buf *out) {
    size_t used;
    return unmask_run(m, text, n, 1, 1, out, &used);
}

void pii_unmask_stream_init(pii_unmask_stream *s, const pii_masker *m) {
    memset(s, 0, sizeof(*s));
    s->m = m;
}

ll_status pii_unmask_stream_feed(pii_unmask_stream *s, const char *chunk, size_t n, pii_buf *out) {
    /* First settle the held prefix with as many new bytes as it needs (at most the placeholder
     * length), then run over the rest of the chunk in place. */
    size_t k = 0;
    while (s->nhold && k < n) {
        char tmp[2 * PII_PLACEHOLDER_MAX];
        size_t take = LL_MIN(n - k, sizeof(tmp) - s->nhold);
        memcpy(tmp, s->hold, s->nhold);
        memcpy(tmp + s->nhold, chunk + k, take);
        size_t used;
        LL_TRY(unmask_run(s->m, tmp, s->nhold + take, 0, s->json, out, &used));
        size_t left = s->nhold + take - used; /* a prefix still open at the end of tmp */
        if (used < s->nhold) {
            /* the held '[' still opens a possible placeholder: keep it and the new bytes */
            LL_ASSERT(left <= PII_PLACEHOLDER_MAX);
            memmove(s->hold, tmp + used, left);
            s->nhold = left;
            k += take;
        } else {
            /* resolved: the bytes of tmp after `used` came from the chunk and are re-read below */
            k += take - left;
            s->nhold = 0;
        }
    }
    if (k < n) {
        size_t used;
        LL_TRY(unmask_run(s->m, chunk + k, n - k, 0, s->json, out, &used));
        size_t left = n - k - used;
        LL_ASSERT(left <= PII_PLACEHOLDER_MAX);
        memcpy(s->hold, chunk + k + used, left);
        s->nhold = left;
    }
    return LL_OK;
}

ll_status pii_unmask_stream_finish(pii_unmask_stream *s, pii_buf *out) {
    size_t used;
    ll_status st = unmask_run(s->m, s->hold, s->nhold, 1, s->json, out, &used);
    s->nhold = 0;
    return st;
}
