/*
 * stop.c — stop ids, stop strings across token boundaries, max tokens. See stop.h.
 *
 * The matcher keeps a small buffer: the held-back tail of the text (shorter than the longest stop
 * string, plus at most 3 bytes of an unfinished UTF-8 character) followed by the newest piece.
 * Every stop string that completes in the stream lies entirely in that buffer, because a match
 * that started earlier would have made its beginning part of the held tail.
 */
#include "runtime/stop.h"

struct ll_stop {
    int32_t *ids;       /* [n_ids] */
    int32_t n_ids;
    char **strs;        /* [n_strs] own copies */
    size_t *str_len;    /* [n_strs] */
    int32_t n_strs;
    int64_t max_tokens;
    int64_t n_tokens;
    int stopped;
    char *buf;          /* [cap]: buf[skip, skip + held) is held text */
    size_t cap, held, skip; /* skip: bytes emitted by the last call, dropped lazily on the next */
};

ll_status ll_stop_new(const ll_stop_params *p, ll_stop **out) {
    *out = NULL;
    if (p->n_stop_ids < 0 || p->n_stop_strs < 0 || (p->n_stop_ids && !p->stop_ids) ||
        (p->n_stop_strs && !p->stop_strs))
        return ll_err(LL_ERR_INVALID, "stop: bad parameter counts");
    for (int32_t i = 0; i < p->n_stop_strs; i++)
        if (!p->stop_strs[i] || !p->stop_strs[i][0])
            return ll_err(LL_ERR_INVALID, "stop: stop string %d is empty", i);
    ll_stop *s = ll_calloc(1, sizeof(*s));
    if (!s) return ll_err(LL_ERR_OOM, "stop: out of memory");
    s->max_tokens = p->max_tokens;
    s->n_ids = p->n_stop_ids;
    s->n_strs = p->n_stop_strs;
    int ok = 1;
    if (s->n_ids) {
        s->ids = ll_malloc((size_t)s->n_ids * sizeof(int32_t));
        if (s->ids) memcpy(s->ids, p->stop_ids, (size_t)s->n_ids * sizeof(int32_t));
        else ok = 0;
    }
    if (s->n_strs) {
        s->strs = ll_calloc((size_t)s->n_strs, sizeof(char *));
        s->str_len = ll_calloc((size_t)s->n_strs, sizeof(size_t));
        ok = ok && s->strs && s->str_len;
        for (int32_t i = 0; ok && i < s->n_strs; i++) {
            s->strs[i] = ll_strdup(p->stop_strs[i]);
            if (!s->strs[i]) ok = 0;
            else s->str_len[i] = strlen(s->strs[i]);
        }
    }
    s->cap = 256;
    s->buf = ll_malloc(s->cap);
    if (!ok || !s->buf) {
        ll_stop_free(s);
        return ll_err(LL_ERR_OOM, "stop: out of memory");
    }
    *out = s;
    return LL_OK;
}

void ll_stop_free(ll_stop *s) {
    if (!s) return;
    for (int32_t i = 0; s->strs && i < s->n_strs; i++) ll_free(s->strs[i]);
    ll_free(s->strs);
    ll_free(s->str_len);
    ll_free(s->ids);
    ll_free(s->buf);
    ll_free(s);
}

void ll_stop_reset(ll_stop *s) {
    s->n_tokens = 0;
    s->stopped = 0;
    s->held = s->skip = 0;
}

int64_t ll_stop_n_tokens(const ll_stop *s) { return s->n_tokens; }

/* Length of the longest suffix of t[0, n) that is a proper prefix of some stop string. */
static size_t partial_suffix(const ll_stop *s, const char *t, size_t n) {
    size_t best = 0;
    for (int32_t i = 0; i < s->n_strs; i++) {
        size_t k = LL_MIN(s->str_len[i] - 1, n);
        for (; k > best; k--)
            if (memcmp(t + n - k, s->strs[i], k) == 0) break;
        if (k > best) best = k;
    }
    return best;
}

/* Bytes at the end of t[0, n) that form an unfinished UTF-8 character (0 if none). */
static size_t utf8_unfinished(const char *t, size_t n) {
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        unsigned char c = (unsigned char)t[n - back];
        if ((c & 0xC0) == 0x80) continue; /* continuation byte: look further back */
        size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
        return need > back ? back : 0;
    }
    return 0; /* four continuation bytes: invalid anyway, let it through */
}

static void emit(ll_stop *s, size_t len, ll_stop_reason reason, int32_t which, ll_stop_out *out) {
    out->text = s->buf;
    out->len = len;
    out->reason = reason;
    out->which = which;
    s->skip = len;
    if (reason != LL_STOP_NONE) s->stopped = 1;
}

ll_status ll_stop_feed(ll_stop *s, int32_t token_id, const char *piece, size_t len, ll_stop_out *out) {
    LL_ASSERT(!s->stopped);
    /* drop what the previous call emitted */
    if (s->skip) {
        memmove(s->buf, s->buf + s->skip, s->held - s->skip);
        s->held -= s->skip;
        s->skip = 0;
    }
    s->n_tokens++;
    for (int32_t i = 0; i < s->n_ids; i++)
        if (s->ids[i] == token_id) {
            emit(s, s->held, LL_STOP_TOKEN, i, out);
            return LL_OK;
        }
    if (s->held + len > s->cap) {
        size_t cap = LL_MAX(s->cap * 2, s->held + len);
        char *nb = ll_realloc(s->buf, cap);
        if (!nb) return ll_err(LL_ERR_OOM, "stop: out of memory for a %zu-byte piece", len);
        s->buf = nb;
        s->cap = cap;
    }
    if (len) memcpy(s->buf + s->held, piece, len);
    size_t n = s->held + len;
    s->held = n;

    /* The first stop string to complete in the byte stream wins; among strings completing at the
     * same byte, the longest (earliest start). Ends inside the old held text were checked by
     * earlier calls, so only ends inside the new piece are tried. This makes the result
     * independent of how the text is split into pieces. */
    for (size_t e = n - len + 1; e <= n; e++) {
        int32_t best = -1;
        for (int32_t i = 0; i < s->n_strs; i++) {
            size_t L = s->str_len[i];
            if (L <= e && (best < 0 || L > s->str_len[best]) && memcmp(s->buf + e - L, s->strs[i], L) == 0)
                best = i;
        }
        if (best >= 0) {
            emit(s, e - s->str_len[best], LL_STOP_STRING, best, out);
            return LL_OK;
        }
    }
    if (s->max_tokens > 0 && s->n_tokens >= s->max_tokens) {
        emit(s, n, LL_STOP_LENGTH, -1, out);
        return LL_OK;
    }
    size_t hold = partial_suffix(s, s->buf, n);
    hold += utf8_unfinished(s->buf, n - hold);
    emit(s, n - hold, LL_STOP_NONE, -1, out);
    return LL_OK;
}

void ll_stop_finish(ll_stop *s, ll_stop_out *out) {
    if (s->stopped) {
        out->text = "";
        out->len = 0;
        out->reason = LL_STOP_NONE;
        out->which = -1;
        return;
    }
    if (s->skip) {
        memmove(s->buf, s->buf + s->skip, s->held - s->skip);
        s->held -= s->skip;
        s->skip = 0;
    }
    emit(s, s->held, LL_STOP_NONE, -1, out);
    s->stopped = 1;
}
