/* strbuf.c — growable text buffer, JSON string escaping and UTF-8 validation. See strbuf.h. */
#include "server/strbuf.h"

#include <math.h>
#include <stdio.h>

void ll_strbuf_free(ll_strbuf *b) {
    ll_free(b->data);
    memset(b, 0, sizeof(*b));
}

void ll_strbuf_clear(ll_strbuf *b) {
    b->len = 0;
    if (b->cap) b->data[0] = 0;
}

int ll_strbuf_reserve(ll_strbuf *b, size_t extra) {
    if (b->oom) return 0;
    if (b->len + extra + 1 <= b->cap) return 1;
    if (extra > SIZE_MAX / 4 - b->len) {
        b->oom = 1;
        return 0;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) cap *= 2; /* doubling: amortised O(1) appends */
    char *p = ll_realloc(b->data, cap);
    if (!p) {
        b->oom = 1;
        return 0;
    }
    b->data = p;
    b->cap = cap;
    return 1;
}

void ll_strbuf_append(ll_strbuf *b, const void *s, size_t n) {
    if (!ll_strbuf_reserve(b, n)) return;
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

void ll_strbuf_puts(ll_strbuf *b, const char *s) { ll_strbuf_append(b, s, strlen(s)); }

void ll_strbuf_putc(ll_strbuf *b, char c) { ll_strbuf_append(b, &c, 1); }

void ll_strbuf_printf(ll_strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof(small)) {
        ll_strbuf_append(b, small, (size_t)n);
        return;
    }
    if (!ll_strbuf_reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void ll_strbuf_consume(ll_strbuf *b, size_t n) {
    LL_ASSERT(n <= b->len);
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    if (b->cap) b->data[b->len] = 0;
}

size_t ll_utf8_seq_len(const unsigned char *s, size_t n) {
    if (n == 0) return 0;
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;      /* overlong */
        else if (c == 0xED) hi = 0x9F; /* UTF-16 surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;      /* overlong */
        else if (c == 0xF4) hi = 0x8F; /* above U+10FFFF */
    } else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return len;
}

size_t ll_utf8_find_invalid(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (u[i] < 0x80) { i++; continue; }
        size_t k = ll_utf8_seq_len(u + i, n - i);
        if (!k) return i;
        i += k;
    }
    return n;
}

void ll_strbuf_json_str(ll_strbuf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    /* worst case is 6 bytes per input byte (\u00XX); reserving it up front keeps the loop simple */
    if (n > (SIZE_MAX / 8) || !ll_strbuf_reserve(b, n * 6 + 2)) {
        b->oom = 1;
        return;
    }
    char *o = b->data + b->len;
    *o++ = '"';
    size_t i = 0;
    while (i < n) {
        unsigned c = u[i];
        if (c >= 0x80) {
            size_t k = ll_utf8_seq_len(u + i, n - i);
            if (k) {
                memcpy(o, u + i, k);
                o += k;
                i += k;
            } else { /* U+FFFD for a byte that starts no valid sequence */
                *o++ = (char)0xEF, *o++ = (char)0xBF, *o++ = (char)0xBD;
                i++;
            }
            continue;
        }
        i++;
        switch (c) {
        case '"': *o++ = '\\', *o++ = '"'; break;
        case '\\': *o++ = '\\', *o++ = '\\'; break;
        case '\n': *o++ = '\\', *o++ = 'n'; break;
        case '\r': *o++ = '\\', *o++ = 'r'; break;
        case '\t': *o++ = '\\', *o++ = 't'; break;
        default:
            if (c < 0x20 || c == 0x7f) {
                *o++ = '\\', *o++ = 'u', *o++ = '0', *o++ = '0';
                *o++ = hex[c >> 4], *o++ = hex[c & 15];
            } else
                *o++ = (char)c;
        }
    }
    *o++ = '"';
    b->len = (size_t)(o - b->data);
    b->data[b->len] = 0;
}

void ll_strbuf_json_num(ll_strbuf *b, double v, double nonfinite) {
    if (!isfinite(v)) v = nonfinite;
    /* integers print without a fraction; %.9g round-trips a float (logprobs are floats) */
    if (v == floor(v) && fabs(v) < 1e15) ll_strbuf_printf(b, "%.0f", v);
    else ll_strbuf_printf(b, "%.9g", v);
}
