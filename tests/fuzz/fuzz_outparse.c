/* fuzz_outparse.c — libFuzzer target for the output parser: any text, fed whole and in pieces
 * chosen by the input, must parse without crashing and give the same result both ways. Input:
 * byte 0 = flags (bit 0 start in reasoning, bit 1 parse tools), byte 1 = piece length seed. */
#include <stdio.h>
#include <stdlib.h>

#include "runtime/outparse.h"

typedef struct {
    char *buf; /* every event, serialised: kind byte + payload + NUL */
    size_t len, cap;
} sink;

static void put(sink *s, const char *p, size_t n) {
    if (s->len + n + 1 > s->cap) {
        s->cap = (s->len + n + 1) * 2;
        s->buf = realloc(s->buf, s->cap);
        if (!s->buf) abort();
    }
    memcpy(s->buf + s->len, p, n);
    s->len += n;
}

/* Coalesces consecutive text deltas of one kind so that different splits compare equal. */
static void on_event(void *ud, const ll_out_event *ev) {
    sink *s = ud;
    static const char sep = 0;
    char k = (char)ev->kind;
    if (ev->kind == LL_OUT_TOOL_CALL) {
        put(s, &sep, 1);
        put(s, &k, 1);
        put(s, ev->call->name, strlen(ev->call->name));
        put(s, &sep, 1);
        put(s, ev->call->arguments, strlen(ev->call->arguments));
        put(s, &sep, 1);
        return;
    }
    put(s, &k, 1); /* kind before every delta: merged below by comparing streams per kind */
    put(s, ev->text, ev->len);
}

static void run(const uint8_t *d, size_t n, int flags, size_t step, sink *out, cJSON *tools) {
    ll_outparse_params p = {flags & 1, (flags >> 1) & 1, tools};
    ll_outparse *op;
    if (ll_outparse_new(&p, on_event, out, &op) != LL_OK) abort();
    for (size_t i = 0; i < n; i += step)
        if (ll_outparse_feed(op, (const char *)d + i, n - i < step ? n - i : step) != LL_OK) abort();
    if (ll_outparse_finish(op) != LL_OK) abort();
    ll_outparse_free(op);
}

/* Text of one kind, concatenated, from a serialised stream. */
static size_t extract(const sink *s, char kind, char *dst) {
    size_t o = 0;
    for (size_t i = 0; i < s->len;) {
        char k = s->buf[i];
        if (k == 0) { /* tool call: skip to after its two NULs */
            i += 2;
            while (s->buf[i]) i++;
            i++;
            while (s->buf[i]) i++;
            i++;
            if (kind == 'T') dst[o++] = 'T';
            continue;
        }
        i++;
        while (i < s->len && s->buf[i] != 0 && s->buf[i] != LL_OUT_REASONING && s->buf[i] != LL_OUT_CONTENT)
            if (k == kind) dst[o++] = s->buf[i++];
            else i++;
    }
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    int flags = data[0];
    size_t step = 1 + data[1] % 7;
    data += 2;
    size += -2;
    /* bytes 0..3 would confuse the serialisation above; the parser itself takes any bytes */
    uint8_t *t = malloc(size + 1);
    for (size_t i = 0; i < size; i++) t[i] = data[i] < 4 ? ' ' : data[i];
    cJSON *tools = cJSON_Parse("[{\"function\":{\"name\":\"f\",\"parameters\":{\"properties\":"
                               "{\"x\":{\"type\":\"integer\"},\"y\":{\"type\":\"object\"},\"z\":{\"type\":\"number\"}}}}}]");
    sink a = {0}, b = {0};
    run(t, size, flags, size ? size : 1, &a, tools);
    run(t, size, flags, step, &b, tools);
    char *x = malloc(a.len + 1), *y = malloc(b.len + 1);
    const char kinds[3] = {LL_OUT_REASONING, LL_OUT_CONTENT, 'T'};
    for (int k = 0; k < 3; k++) {
        size_t nx = extract(&a, kinds[k], x), ny = extract(&b, kinds[k], y);
        if (nx != ny || memcmp(x, y, nx) != 0) abort();
    }
    free(x);
    free(y);
    free(a.buf);
    free(b.buf);
    free(t);
    cJSON_Delete(tools);
    return 0;
}
