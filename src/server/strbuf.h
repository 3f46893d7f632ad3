/*
 * strbuf.h — a growable byte buffer for building HTTP bodies, JSON text and SSE events by hand.
 * The server writes every response with it (rather than building cJSON trees) so that a streamed
 * token costs one append into a buffer that is reused for the whole request.
 *
 * Allocation failures are sticky: after one, `oom` is set, further appends do nothing, and the
 * owner checks `oom` once when the text is complete (so builders need no error path per append).
 */
#ifndef LILAC_SERVER_STRBUF_H
#define LILAC_SERVER_STRBUF_H

#include <stdarg.h>

#include "base/base.h"

typedef struct ll_strbuf {
    char *data; /* [cap], always NUL-terminated when cap > 0 */
    size_t len, cap;
    int oom;
} ll_strbuf;

void ll_strbuf_free(ll_strbuf *b);           /* releases the memory; the buffer is empty again */
void ll_strbuf_clear(ll_strbuf *b);          /* len = 0, keeps the memory */
int ll_strbuf_reserve(ll_strbuf *b, size_t extra); /* 0 on failure (and sets oom) */
void ll_strbuf_append(ll_strbuf *b, const void *s, size_t n);
void ll_strbuf_puts(ll_strbuf *b, const char *s);
void ll_strbuf_putc(ll_strbuf *b, char c);
void ll_strbuf_printf(ll_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Drops the first n bytes (what a reader has consumed). */
void ll_strbuf_consume(ll_strbuf *b, size_t n);

/* Appends s[0..n) as a JSON string literal, quotes included. Control characters are escaped;
 * bytes that are not valid UTF-8 become U+FFFD, so the output is always valid JSON. */
void ll_strbuf_json_str(ll_strbuf *b, const char *s, size_t n);
static inline void ll_strbuf_json_cstr(ll_strbuf *b, const char *s) {
    if (s) ll_strbuf_json_str(b, s, strlen(s));
    else ll_strbuf_puts(b, "null");
}
/* Appends a JSON number; non-finite values (which JSON cannot carry) become the given fallback. */
void ll_strbuf_json_num(ll_strbuf *b, double v, double nonfinite);

/* Length of the valid UTF-8 sequence starting at s[0] (1..4), or 0 if s[0..n) does not start with
 * one (overlong forms, surrogates and code points above U+10FFFF are invalid). */
size_t ll_utf8_seq_len(const unsigned char *s, size_t n);
/* Byte offset of the first invalid UTF-8 sequence in s[0..n), or n if it is all valid. */
size_t ll_utf8_find_invalid(const char *s, size_t n);

#endif
