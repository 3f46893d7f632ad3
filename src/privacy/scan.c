/* scan.c — rules + PII encoder over overlapping windows (see scan.h). */
#include "privacy/scan.h"

#include <ctype.h>
#include <math.h>

static float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

static int is_space_at(const char *s, size_t n, size_t i) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x80) return isspace(c);
    /* U+00A0, U+3000 and the U+2000..U+200B spaces */
    if (c == 0xC2 && i + 1 < n && (unsigned char)s[i + 1] == 0xA0) return 2;
    if (c == 0xE3 && i + 2 < n && (unsigned char)s[i + 1] == 0x80 && (unsigned char)s[i + 2] == 0x80) return 3;
    if (c == 0xE2 && i + 2 < n && (unsigned char)s[i + 1] == 0x80 && (unsigned char)s[i + 2] <= 0x8B) return 3;
    return 0;
}

ll_status pii_model_scan_tokens(pii_model *m, const char *text, size_t n, const int32_t *ids, const int64_t *tb,
                                const int64_t *te, int ntok, int window, pii_spans *out, float *sensitivity) {
    if (sensitivity) *sensitivity = 0;
    if (ntok <= 0) return LL_OK;
    int W = window > 0 ? LL_MIN(window, m->max_seq) : m->max_seq;
    if (W < 4) W = LL_MIN(4, m->max_seq);
    int S = LL_MAX(W / 2, 1);
    float *logits = ll_malloc(sizeof(float) * (size_t)W * PII_N_LABELS); /* [W, 37] */
    int32_t *tags = ll_malloc(sizeof(int32_t) * (size_t)W);
    if (!logits || !tags) {
        ll_free(logits);
        ll_free(tags);
        return ll_err(LL_ERR_OOM, "PII scan: out of memory for a %d-token window", W);
    }
    ll_status st = LL_OK;
    int prev_hi = 0;
    int64_t last_end = 0; /* end of the last span emitted: spans come out in text order */
    float best_sens = 0;
    for (int start = 0;; start += S) {
        int last = start + W >= ntok;
        if (last && ntok > W) start = ntok - W;
        int T = LL_MIN(W, ntok - start);
        float sl;
        if ((st = pii_model_forward(m, ids + start, T, NULL, logits, &sl))) break;
        if ((st = pii_viterbi(logits, T, m->b_bias, m->e_bias, tags))) break;
        best_sens = fmaxf(best_sens, sigmoidf(sl));
        int own_lo = prev_hi, own_hi = last ? ntok : start + W - W / 4;
        for (int t = 0; t < T;) {
            int k = pii_tag_kind(tags[t]);
            if (k != PII_TAG_B && k != PII_TAG_S) { t++; continue; }
            int e = t;
            if (k == PII_TAG_B)
                while (e + 1 < T && pii_tag_kind(tags[e]) != PII_TAG_E) e++;
            float mean = 0;
            for (int j = t; j <= e; j++) mean += logits[(size_t)j * PII_N_LABELS + tags[j]];
            mean /= (float)(e - t + 1);
            int mid = start + (t + e) / 2;
            if (mid >= own_lo && mid < own_hi) {
                int64_t bs = tb[start + t], be = te[start + e];
                if (bs < 0) bs = 0;
                if (be > (int64_t)n) be = (int64_t)n;
                /* byte-level tokens can split a character: widen to whole characters */
                while (bs > 0 && ((unsigned char)text[bs] & 0xC0) == 0x80) bs--;
                while (be < (int64_t)n && ((unsigned char)text[be] & 0xC0) == 0x80) be++;
                /* neighbouring byte tokens of one character may carry different tags: the first
                 * span keeps the character */
                if (bs < last_end) bs = last_end;
                /* leading and trailing whitespace is not part of the value */
                while (bs < be) { int w = is_space_at(text, n, (size_t)bs); if (!w) break; bs += w; }
                while (be > bs && isspace((unsigned char)text[be - 1])) be--;
                if (be > bs) {
                    pii_span sp = {0, 0, bs, be, pii_tag_cat(tags[t]), sigmoidf(mean), PII_SRC_MODEL};
                    if ((st = pii_spans_push(out, sp))) break;
                    last_end = be;
                }
            }
            t = e + 1;
        }
        if (st) break;
        prev_hi = own_hi;
        if (last) break;
    }
    ll_free(logits);
    ll_free(tags);
    if (st == LL_OK && sensitivity) *sensitivity = best_sens;
    return st;
}

ll_status pii_model_scan_text(pii_model *m, const tok_tokenizer *tok, const char *text, size_t n, int window,
                              pii_spans *out, float *sensitivity) {
    tok_ids ids = {0};
    ll_status st = tok_encode(tok, text, n, TOK_ENC_SPECIAL_AS_TEXT | TOK_ENC_ADDED_AS_TEXT, &ids);
    if (st) return st;
    int64_t *tb = ll_malloc(sizeof(int64_t) * (ids.n + 1)), *te = ll_malloc(sizeof(int64_t) * (ids.n + 1));
    if (!tb || !te) {
        st = ll_err(LL_ERR_OOM, "PII scan: out of memory for %zu token offsets", ids.n);
        goto done;
    }
    int64_t pos = 0;
    for (size_t i = 0; i < ids.n; i++) {
        size_t len = 0;
        const char *b = tok_bytes(tok, ids.ids[i], &len);
        if (!b) len = 0;
        tb[i] = LL_MIN(pos, (int64_t)n);
        pos += (int64_t)len;
        te[i] = LL_MIN(pos, (int64_t)n);
    }
    if (pos != (int64_t)n) ll_log(LL_LOG_WARN, "PII scan: tokens cover %lld bytes of %zu (NFC changed the text); model offsets are approximate", (long long)pos, n);
    if (ids.n > (size_t)INT32_MAX) { st = ll_err(LL_ERR_OVERFLOW, "PII scan: too many tokens"); goto done; }
    st = pii_model_scan_tokens(m, text, n, ids.ids, tb, te, (int)ids.n, window, out, sensitivity);
done:
    ll_free(tb);
    ll_free(te);
    tok_ids_free(&ids);
    return st;
}

ll_status pii_scan(const char *text, size_t n, pii_model *m, const tok_tokenizer *tok, pii_spans *out,
                   float *sensitivity) {
    pii_spans all = {0};
    float sens = 0;
    ll_status st = pii_rules_scan(text, n, &all);
    if (st == LL_OK && m && tok) st = pii_model_scan_text(m, tok, text, n, 0, &all, &sens);
    if (st == LL_OK) st = pii_spans_resolve(&all);
    if (st == LL_OK) {
        pii_spans_set_cp(&all, text, n);
        if (!(m && tok)) {
            sens = 0;
            for (size_t i = 0; i < all.n; i++)
                if (all.v[i].score >= 0.5f) sens = 1;
        }
        for (size_t i = 0; i < all.n && st == LL_OK; i++) st = pii_spans_push(out, all.v[i]);
    }
    pii_spans_free(&all);
    if (sensitivity) *sensitivity = sens;
    return st;
}
