/*
 * gateway.c — the HTTP-free parts of the privacy gateway: request scanning and masking, findings
 * JSON, placeholder restore in answers and their logprobs (whole and streamed), the skip refusal
 * and audit lines.
 * See gateway.h.
 */
#include "server/gateway.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <time.h>

#include "privacy/scan.h"

/* ------------------------------------------------------------------ scanning */

static int add_text(ll_gw_scan *s, cJSON *item, int message, const char *path, const pii_policy *p,
                    ll_gw_model *pm, ll_api_error *err) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 8;
        ll_gw_text *v = ll_realloc(s->v, cap * sizeof(*v));
        if (!v) goto oom;
        s->v = v;
        s->cap = cap;
    }
    ll_gw_text *t = &s->v[s->n];
    memset(t, 0, sizeof(*t));
    t->item = item;
    t->message = message;
    snprintf(t->path, sizeof(t->path), "%s", path);
    const char *text = item->valuestring ? item->valuestring : "";
    pii_spans all = {0};
    if (pm) pthread_mutex_lock(&pm->mu);
    ll_status st = pii_scan(text, strlen(text), pm ? pm->m : NULL, pm ? pm->tok : NULL, &all, &t->sensitivity);
    if (pm) pthread_mutex_unlock(&pm->mu);
    if (st != LL_OK) {
        pii_spans_free(&all);
        if (st == LL_ERR_OOM) goto oom;
        ll_api_error_set(err, 503, "server_error", NULL, path, "the privacy scan failed (%s)", ll_status_name(st));
        return -1;
    }
    s->n++;
    /* findings under the policy's min_score are ignored everywhere: not reported, not masked */
    for (size_t i = 0; i < all.n; i++)
        if (all.v[i].score >= p->min_score && pii_spans_push(&t->spans, all.v[i]) != LL_OK) {
            pii_spans_free(&all);
            goto oom;
        }
    pii_spans_free(&all);
    pii_decision d = pii_policy_decide(p, t->spans.v, t->spans.n);
    if (d.action > s->decision.action) s->decision.action = d.action;
    s->decision.categories |= d.categories;
    s->decision.mask_categories |= d.mask_categories;
    for (int c = 0; c < PII_N_CAT; c++) s->decision.counts[c] += d.counts[c];
    return 0;
oom:
    ll_api_error_set(err, 503, "server_error", NULL, NULL, "out of memory while scanning the request");
    return -1;
}

int ll_gw_scan_text(cJSON *text, const pii_policy *p, ll_gw_model *pm, ll_gw_scan *out, ll_api_error *err) {
    memset(out, 0, sizeof(*out));
    out->decision.action = PII_ACT_UPSTREAM;
    if (!cJSON_IsString(text)) {
        ll_api_error_set(err, 400, "invalid_request_error", NULL, "text", "'text' must be a string");
        return -1;
    }
    return add_text(out, text, -1, "text", p, pm, err);
}

int ll_gw_scan_messages(cJSON *doc, const pii_policy *p, ll_gw_model *pm, ll_gw_scan *out, ll_api_error *err) {
    memset(out, 0, sizeof(*out));
    out->decision.action = PII_ACT_UPSTREAM;
    cJSON *msgs = cJSON_IsObject(doc) ? cJSON_GetObjectItemCaseSensitive(doc, "messages") : NULL;
    if (!cJSON_IsArray(msgs)) {
        ll_api_error_set(err, 400, "invalid_request_error", NULL, "messages", "'messages' must be an array");
        return -1;
    }
    char path[64];
    int mi = 0;
    for (cJSON *m = msgs->child; m; m = m->next, mi++) {
        if (!cJSON_IsObject(m)) {
            ll_api_error_set(err, 400, "invalid_request_error", NULL, "messages", "messages[%d] must be an object", mi);
            return -1;
        }
        cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (cJSON_IsString(c)) {
            snprintf(path, sizeof(path), "messages[%d].content", mi);
            if (add_text(out, c, mi, path, p, pm, err)) return -1;
        } else if (cJSON_IsArray(c)) {
            int pi = 0;
            for (cJSON *part = c->child; part; part = part->next, pi++) {
                cJSON *t = cJSON_IsObject(part) ? cJSON_GetObjectItemCaseSensitive(part, "text") : NULL;
                if (!cJSON_IsString(t)) continue;
                snprintf(path, sizeof(path), "messages[%d].content[%d].text", mi, pi);
                if (add_text(out, t, mi, path, p, pm, err)) return -1;
            }
        }
        cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
        int ci = 0;
        for (cJSON *tc = cJSON_IsArray(calls) ? calls->child : NULL; tc; tc = tc->next, ci++) {
            cJSON *fn = cJSON_IsObject(tc) ? cJSON_GetObjectItemCaseSensitive(tc, "function") : NULL;
            cJSON *args = cJSON_IsObject(fn) ? cJSON_GetObjectItemCaseSensitive(fn, "arguments") : NULL;
            if (!cJSON_IsString(args)) continue;
            snprintf(path, sizeof(path), "messages[%d].tool_calls[%d].function.arguments", mi, ci);
            if (add_text(out, args, mi, path, p, pm, err)) return -1;
        }
    }
    return 0;
}

int ll_gw_scan_prompt(cJSON *doc, const pii_policy *p, ll_gw_model *pm, ll_gw_scan *out, ll_api_error *err) {
    memset(out, 0, sizeof(*out));
    out->decision.action = PII_ACT_UPSTREAM;
    cJSON *prompt = cJSON_IsObject(doc) ? cJSON_GetObjectItemCaseSensitive(doc, "prompt") : NULL;
    char path[32];
    if (cJSON_IsString(prompt)) {
        if (add_text(out, prompt, -1, "prompt", p, pm, err)) return -1;
    } else if (cJSON_IsArray(prompt)) {
        int i = 0;
        for (cJSON *t = prompt->child; t; t = t->next, i++) {
            if (!cJSON_IsString(t)) {
                ll_api_error_set(err, 400, "invalid_request_error", NULL, "prompt",
                                 "the privacy gateway needs 'prompt' as text (a string or an array of strings): it "
                                 "cannot check token ids");
                return -1;
            }
            snprintf(path, sizeof(path), "prompt[%d]", i);
            if (add_text(out, t, -1, path, p, pm, err)) return -1;
        }
    } else {
        ll_api_error_set(err, 400, "invalid_request_error", NULL, "prompt",
                         "'prompt' must be a string or an array of strings");
        return -1;
    }
    cJSON *suffix = cJSON_GetObjectItemCaseSensitive(doc, "suffix");
    if (cJSON_IsString(suffix) && add_text(out, suffix, -1, "suffix", p, pm, err)) return -1;
    return 0;
}

void ll_gw_scan_free(ll_gw_scan *s) {
    for (size_t i = 0; i < s->n; i++) {
        pii_spans_free(&s->v[i].spans);
        ll_free(s->v[i].orig);
    }
    ll_free(s->v);
    memset(s, 0, sizeof(*s));
}

static void categories_json(const int *counts, uint32_t only, ll_strbuf *out) {
    ll_strbuf_putc(out, '{');
    int first = 1;
    for (int c = 0; c < PII_N_CAT; c++) {
        if (!counts[c] || !(only & (1u << c))) continue;
        ll_strbuf_printf(out, "%s\"%s\":%d", first ? "" : ",", pii_category_name(c), counts[c]);
        first = 0;
    }
    ll_strbuf_putc(out, '}');
}

void ll_gw_scan_json(const ll_gw_scan *s, const pii_policy *p, ll_strbuf *out) {
    (void)p;
    ll_strbuf_puts(out, "{\"spans\":[");
    int first = 1;
    float sens = 0;
    for (size_t i = 0; i < s->n; i++) {
        const ll_gw_text *t = &s->v[i];
        if (t->sensitivity > sens) sens = t->sensitivity;
        for (size_t k = 0; k < t->spans.n; k++) {
            const pii_span *sp = &t->spans.v[k];
            ll_strbuf_puts(out, first ? "{" : ",{");
            first = 0;
            if (t->message >= 0) ll_strbuf_printf(out, "\"message\":%d,", t->message);
            ll_strbuf_puts(out, "\"path\":");
            ll_strbuf_json_cstr(out, t->path);
            ll_strbuf_printf(out, ",\"start\":%lld,\"end\":%lld,\"label\":\"%s\",\"score\":%.4f,\"source\":\"%s\"}",
                             (long long)sp->start, (long long)sp->end, pii_category_name(sp->label), (double)sp->score,
                             sp->source == PII_SRC_MODEL ? "model" : "rule");
        }
    }
    ll_strbuf_printf(out, "],\"sensitivity\":%.4f,\"decision\":{\"action\":\"%s\",\"categories\":", (double)sens,
                     pii_action_name(s->decision.action));
    categories_json(s->decision.counts, ~0u, out);
    ll_strbuf_puts(out, "}}");
}

int ll_gw_take_decision(cJSON *doc, int *act, ll_api_error *err) {
    *act = -1;
    cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(doc, "privacy_decision");
    if (!v || cJSON_IsNull(v)) {
        cJSON_Delete(v);
        return 0;
    }
    int a = cJSON_IsString(v) ? pii_action_from_name(v->valuestring) : -1;
    cJSON_Delete(v);
    if (a != PII_ACT_LOCAL && a != PII_ACT_UPSTREAM && a != PII_ACT_SKIP) {
        ll_api_error_set(err, 400, "invalid_request_error", NULL, "privacy_decision",
                         "'privacy_decision' must be \"local\", \"upstream\" or \"skip\"");
        return -1;
    }
    *act = a;
    return 0;
}

ll_status ll_gw_mask(ll_gw_scan *s, uint32_t cat_mask, pii_masker *m) {
    pii_buf b = {0};
    for (size_t i = 0; i < s->n; i++) {
        ll_gw_text *t = &s->v[i];
        if (!t->spans.n || t->orig) continue;
        const char *text = t->item->valuestring;
        b.n = 0;
        ll_status st = pii_mask_text(m, text, strlen(text), t->spans.v, t->spans.n, cat_mask, &b);
        if (st == LL_OK && !(t->orig = ll_strdup(text))) st = LL_ERR_OOM;
        if (st == LL_OK && !b.s) st = pii_buf_append(&b, "", 0);
        if (st != LL_OK || !cJSON_SetValuestring(t->item, b.s)) {
            pii_buf_free(&b);
            return ll_err(LL_ERR_OOM, "gateway: out of memory while masking");
        }
    }
    pii_buf_free(&b);
    return LL_OK;
}

/* ------------------------------------------------------------------ restoring answers */

/* Replaces the string node's value with its unmasked text (unchanged on OOM: the caller's
 * output then still carries placeholders, never anything wrong). json: the node is JSON text
 * (tool call arguments), so restored values are JSON-escaped and it stays parseable. */
static void unmask_node(const pii_masker *m, cJSON *item, pii_buf *tmp, int json) {
    if (!cJSON_IsString(item) || !item->valuestring || !strchr(item->valuestring, '[')) return;
    tmp->n = 0;
    size_t n = strlen(item->valuestring);
    ll_status st = json ? pii_unmask_text_json(m, item->valuestring, n, tmp) : pii_unmask_text(m, item->valuestring, n, tmp);
    if (st == LL_OK && tmp->s) cJSON_SetValuestring(item, tmp->s);
}
static void unmask_item(const pii_masker *m, cJSON *item, pii_buf *tmp) { unmask_node(m, item, tmp, 0); }
static void unmask_args(const pii_masker *m, cJSON *item, pii_buf *tmp) { unmask_node(m, item, tmp, 1); }

static void unmask_tool_calls(const pii_masker *m, cJSON *calls, pii_buf *tmp) {
    for (cJSON *tc = cJSON_IsArray(calls) ? calls->child : NULL; tc; tc = tc->next) {
        cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
        if (cJSON_IsObject(fn)) unmask_args(m, cJSON_GetObjectItemCaseSensitive(fn, "arguments"), tmp);
    }
}

/* ------------------------------------------------------------------ logprobs
 * OpenAI's logprobs.content is one entry per token: {token, logprob, bytes, top_logprobs}. A
 * placeholder spans several tokens ("[", "SECRET", "_1", "]"), so restoring it token by token is
 * not possible: the entries that cover an issued placeholder become ONE entry whose token is their
 * text with the value in place of the placeholder, whose logprob is their sum (the probability of
 * the whole run) and whose bytes are its UTF-8; it keeps the first entry's top_logprobs (the
 * alternatives at that position; the upstream never saw the value, so they hold none of it).
 *
 * Legacy completions carry the same per-token facts as parallel arrays (tokens, token_logprobs,
 * top_logprobs, text_offset). They are turned into one entry object per token (lp_legacy_split),
 * merged by the same code, and put back (lp_legacy_join). There the merged logprob is null when
 * any of the run's was (an upstream that did not score a token gives no sum), no bytes are added,
 * and since the merged token's length differs from the run's, every later text_offset of the
 * choice moves by that difference (counted in bytes, as lilac's own server counts them). */

static const char *lp_token(const cJSON *e) {
    const cJSON *t = cJSON_IsObject(e) ? cJSON_GetObjectItemCaseSensitive(e, "token") : NULL;
    return cJSON_IsString(t) && t->valuestring ? t->valuestring : "";
}

/* The text of entries [0, n) of arr into tmp, and the offset of each entry's token in off[0..n]
 * (off[n] = the length). 0 on OOM. */
static int lp_text(cJSON *arr, int n, pii_buf *tmp, size_t *off) {
    tmp->n = 0;
    int i = 0;
    for (cJSON *e = arr->child; e && i < n; e = e->next, i++) {
        off[i] = tmp->n;
        const char *t = lp_token(e);
        if (pii_buf_append(tmp, t, strlen(t)) != LL_OK) return 0;
    }
    off[n] = tmp->n;
    return pii_buf_append(tmp, "", 0) == LL_OK;
}

static void lp_set(cJSON *o, const char *key, cJSON *v) { /* o[key] = v (o owns v) */
    if (cJSON_GetObjectItemCaseSensitive(o, key)) cJSON_ReplaceItemInObjectCaseSensitive(o, key, v);
    else cJSON_AddItemToObject(o, key, v);
}

static int lp_at(const size_t *off, int n, size_t pos) { /* the entry whose token holds byte pos */
    int i = 0;
    while (i + 1 < n && off[i + 1] <= pos) i++;
    return i;
}

/* Adds d to the numeric text_offset of entries e and after (legacy entries). */
static void lp_shift_offsets(cJSON *e, double d) {
    for (; e; e = e->next) {
        cJSON *o = cJSON_GetObjectItemCaseSensitive(e, "text_offset");
        if (cJSON_IsNumber(o)) cJSON_SetNumberValue(o, o->valuedouble + d);
    }
}

/* Merges the runs of entries [0, *upto) that cover an issued placeholder (lp above). A placeholder
 * that starts before *upto and ends at or past it moves *upto back to its first entry (the caller
 * holds those). shift is NULL for chat entries; for legacy ones it is the choice's running
 * text_offset shift: each merge moves the offsets of the entries after its run (held ones
 * included) and adds its length difference to *shift, for the entries that arrive later. Returns
 * 0 on OOM (arr then unchanged or partly merged: never wrong text). */
static int lp_merge(const pii_masker *m, cJSON *arr, int *upto, pii_buf *tmp, long long *shift) {
    int n = cJSON_GetArraySize(arr);
    if (n == 0) return 1;
    size_t *off = ll_malloc((size_t)(n + 1) * sizeof(*off));
    if (!off || !lp_text(arr, n, tmp, off)) {
        ll_free(off);
        return 0;
    }
    /* the occurrences, first to last: [a, b] byte ranges of issued placeholders */
    int ok = 1, cap = 8, k = 0;
    size_t *occ = ll_malloc((size_t)cap * 2 * sizeof(*occ));
    if (!occ) ok = 0;
    for (size_t a = 0; ok && a < tmp->n; a++) {
        if (tmp->s[a] != '[') continue;
        const char *close = memchr(tmp->s + a, ']', LL_MIN(tmp->n - a, (size_t)PII_PLACEHOLDER_MAX));
        if (!close || !pii_masker_lookup(m, tmp->s + a, (size_t)(close - tmp->s - a) + 1)) continue;
        if (k == cap) {
            size_t *v = ll_realloc(occ, (size_t)cap * 4 * sizeof(*occ));
            if (!v) { ok = 0; break; }
            occ = v;
            cap *= 2;
        }
        occ[2 * k] = a;
        occ[2 * k + 1] = (size_t)(close - tmp->s);
        k++;
        a = occ[2 * k - 1];
    }
    /* the final part ends before a run that crosses it */
    for (int q = 0; ok && q < k; q++) {
        int i = lp_at(off, n, occ[2 * q]), j = lp_at(off, n, occ[2 * q + 1]);
        if (i < *upto && j >= *upto) *upto = i;
    }
    /* merge from the last run back, so that the entries before keep their indices */
    pii_buf t = {0};
    for (int q = k - 1; ok && q >= 0; q--) {
        size_t a = occ[2 * q], b = occ[2 * q + 1];
        int i = lp_at(off, n, a), j = lp_at(off, n, b);
        if (j >= *upto) continue;
        const pii_mask_entry *en = pii_masker_lookup(m, tmp->s + a, b - a + 1);
        t.n = 0;
        if (pii_buf_append(&t, tmp->s + off[i], a - off[i]) != LL_OK || pii_buf_append(&t, en->value, en->vlen) != LL_OK ||
            pii_buf_append(&t, tmp->s + b + 1, off[j + 1] - b - 1) != LL_OK || pii_buf_append(&t, "", 0) != LL_OK) {
            ok = 0;
            break;
        }
        double lp = 0.0;
        int scored = 1; /* every logprob of the run a number */
        cJSON *first = cJSON_GetArrayItem(arr, i);
        for (int e = i; e <= j; e++) {
            cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(arr, e), "logprob");
            if (cJSON_IsNumber(v)) lp += v->valuedouble;
            else scored = 0;
        }
        cJSON *tok = cJSON_CreateString(t.s), *num = shift && !scored ? cJSON_CreateNull() : cJSON_CreateNumber(lp);
        cJSON *ba = NULL;
        if (!shift) { /* chat entries carry the token's UTF-8 bytes */
            int *bytes = ll_malloc((t.n ? t.n : 1) * sizeof(int));
            if (bytes) {
                for (size_t u = 0; u < t.n; u++) bytes[u] = (unsigned char)t.s[u];
                ba = cJSON_CreateIntArray(bytes, (int)t.n);
            }
            ll_free(bytes);
        }
        if (!cJSON_IsObject(first) || !tok || !num || (!shift && !ba)) {
            cJSON_Delete(tok);
            cJSON_Delete(num);
            cJSON_Delete(ba);
            ok = 0;
            break;
        }
        lp_set(first, "token", tok);
        lp_set(first, "logprob", num);
        if (ba) lp_set(first, "bytes", ba);
        for (int e = j; e > i; e--) cJSON_DeleteItemFromArray(arr, e);
        *upto -= j - i;
        if (shift) {
            long long d = (long long)t.n - (long long)(off[j + 1] - off[i]);
            lp_shift_offsets(first->next, (double)d);
            *shift += d;
        }
    }
    pii_buf_free(&t);
    ll_free(occ);
    ll_free(off);
    return ok;
}

/* A legacy logprobs object's arrays and the entry field each position becomes, in the same order. */
static const char *const lp_legacy_keys[4] = {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
static const char *const lp_entry_keys[4] = {"token", "logprob", "top_logprobs", "text_offset"};

/* Whether lp is a legacy logprobs object: "tokens" an array, and each other key absent, null or an
 * array of the same length (anything else is passed through as it came: positions would not line up). */
static int lp_legacy_shaped(const cJSON *lp) {
    const cJSON *toks = cJSON_IsObject(lp) ? cJSON_GetObjectItemCaseSensitive(lp, "tokens") : NULL;
    if (!cJSON_IsArray(toks)) return 0;
    int n = cJSON_GetArraySize(toks);
    for (int k = 1; k < 4; k++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(lp, lp_legacy_keys[k]);
        if (a && !cJSON_IsNull(a) && (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n)) return 0;
    }
    return 1;
}

/* Moves the positions of legacy-shaped lp to the end of entries, one object each with all four
 * fields (null where lp has no array, so that joining them back needs no memory), adding shift to
 * each text_offset. lp's arrays are left empty. Returns 0 on OOM, with lp and entries unchanged. */
static int lp_legacy_split(cJSON *lp, cJSON *entries, long long shift) {
    cJSON *src[4];
    for (int k = 0; k < 4; k++) {
        src[k] = cJSON_GetObjectItemCaseSensitive(lp, lp_legacy_keys[k]);
        if (!cJSON_IsArray(src[k])) src[k] = NULL;
    }
    int n = cJSON_GetArraySize(src[0]);
    cJSON *made = cJSON_CreateArray();
    /* every allocation first, then only moves, which cannot fail */
    for (int i = 0; made && i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        if (!e) goto oom;
        cJSON_AddItemToArray(made, e);
        for (int k = 0; k < 4; k++) {
            if (src[k]) continue;
            cJSON *z = cJSON_CreateNull();
            if (!z) goto oom;
            cJSON_AddItemToObjectCS(e, lp_entry_keys[k], z);
        }
    }
    if (!made) return 0;
    for (cJSON *e = made->child; e; e = e->next)
        for (int k = 0; k < 4; k++) {
            if (!src[k]) continue;
            cJSON *v = cJSON_DetachItemViaPointer(src[k], src[k]->child);
            if (k == 3 && cJSON_IsNumber(v)) cJSON_SetNumberValue(v, v->valuedouble + (double)shift);
            cJSON_AddItemToObjectCS(e, lp_entry_keys[k], v);
        }
    while (made->child) cJSON_AddItemToArray(entries, cJSON_DetachItemViaPointer(made, made->child));
    cJSON_Delete(made);
    return 1;
oom:
    cJSON_Delete(made);
    return 0;
}

/* Moves the first n entries back into lp's arrays, after what they hold. A key of lp that is not
 * an array becomes one when a position has a non-null value for it (null stays null). On OOM
 * positions are dropped whole, never put into some arrays and not others. */
static void lp_legacy_join(cJSON *entries, int n, cJSON *lp) {
    cJSON *dst[4];
    for (int k = 0; k < 4; k++) {
        dst[k] = cJSON_GetObjectItemCaseSensitive(lp, lp_legacy_keys[k]);
        if (cJSON_IsArray(dst[k])) continue;
        dst[k] = NULL;
        int need = 0;
        cJSON *e = entries->child;
        for (int q = 0; q < n && e && !need; q++, e = e->next) {
            cJSON *v = cJSON_GetObjectItemCaseSensitive(e, lp_entry_keys[k]);
            need = v && !cJSON_IsNull(v);
        }
        if (!need) continue;
        cJSON_DeleteItemFromObjectCaseSensitive(lp, lp_legacy_keys[k]);
        if ((dst[k] = cJSON_CreateArray())) cJSON_AddItemToObjectCS(lp, lp_legacy_keys[k], dst[k]);
        else n = 0; /* OOM: none can go back whole */
    }
    for (int q = 0; q < n && entries->child; q++) {
        cJSON *e = cJSON_DetachItemViaPointer(entries, entries->child), *v[4] = {0};
        int whole = 1;
        for (int k = 0; k < 4; k++) {
            if (!dst[k]) continue;
            v[k] = cJSON_DetachItemFromObjectCaseSensitive(e, lp_entry_keys[k]);
            if (!v[k] && !(v[k] = cJSON_CreateNull())) whole = 0;
        }
        for (int k = 0; k < 4; k++) {
            if (whole && v[k]) cJSON_AddItemToArray(dst[k], v[k]);
            else cJSON_Delete(v[k]);
        }
        cJSON_Delete(e);
    }
}

/* The positions of legacy logprobs object lp restored in place (lp_merge, shift from 0). */
static void lp_legacy_unmask(const pii_masker *m, cJSON *lp, pii_buf *tmp) {
    cJSON *entries = lp_legacy_shaped(lp) ? cJSON_CreateArray() : NULL;
    if (!entries || !lp_legacy_split(lp, entries, 0)) {
        cJSON_Delete(entries);
        return;
    }
    int all = cJSON_GetArraySize(entries);
    long long shift = 0;
    lp_merge(m, entries, &all, tmp, &shift);
    lp_legacy_join(entries, all, lp);
    cJSON_Delete(entries);
}

static void put_json(cJSON *doc, ll_strbuf *out) {
    char *js = cJSON_PrintUnformatted(doc);
    if (!js) {
        out->oom = 1;
        return;
    }
    ll_strbuf_puts(out, js);
    free(js); /* cJSON's allocator */
}

void ll_gw_unmask_body(const pii_masker *m, const char *body, size_t n, ll_strbuf *out) {
    cJSON *doc = cJSON_ParseWithLength(body, n);
    cJSON *choices = doc ? cJSON_GetObjectItemCaseSensitive(doc, "choices") : NULL;
    if (!cJSON_IsArray(choices)) {
        cJSON_Delete(doc);
        ll_strbuf_append(out, body, n);
        return;
    }
    pii_buf tmp = {0};
    for (cJSON *c = choices->child; c; c = c->next) {
        cJSON *msg = cJSON_GetObjectItemCaseSensitive(c, "message");
        if (cJSON_IsObject(msg)) {
            unmask_item(m, cJSON_GetObjectItemCaseSensitive(msg, "content"), &tmp);
            unmask_item(m, cJSON_GetObjectItemCaseSensitive(msg, "reasoning_content"), &tmp);
            unmask_tool_calls(m, cJSON_GetObjectItemCaseSensitive(msg, "tool_calls"), &tmp);
        }
        unmask_item(m, cJSON_GetObjectItemCaseSensitive(c, "text"), &tmp); /* legacy completions */
        cJSON *lp = cJSON_GetObjectItemCaseSensitive(c, "logprobs");
        cJSON *lc = cJSON_IsObject(lp) ? cJSON_GetObjectItemCaseSensitive(lp, "content") : NULL;
        if (cJSON_IsArray(lc)) {
            int all = cJSON_GetArraySize(lc);
            lp_merge(m, lc, &all, &tmp, NULL);
        } else lp_legacy_unmask(m, lp, &tmp); /* legacy completions */
    }
    put_json(doc, out);
    pii_buf_free(&tmp);
    cJSON_Delete(doc);
}

void ll_gw_sse_init(ll_gw_sse *s, const pii_masker *m) {
    memset(s, 0, sizeof(*s));
    s->m = m;
    for (int i = 0; i < LL_GW_MAX_CHOICES; i++) {
        pii_unmask_stream_init(&s->content[i], m);
        pii_unmask_stream_init(&s->reasoning[i], m);
        for (int k = 0; k < LL_GW_MAX_CALLS; k++) {
            pii_unmask_stream_init(&s->args[i][k], m);
            s->args[i][k].json = 1;
        }
    }
}

void ll_gw_sse_free(ll_gw_sse *s) {
    for (int i = 0; i < LL_GW_MAX_CHOICES; i++) cJSON_Delete(s->lp_hold[i]);
    ll_strbuf_free(&s->line);
    pii_buf_free(&s->tmp);
}

/* Runs field `name` of delta through stream us; with fin, also flushes what us holds. The field is
 * created when only held text is left to say, and removed (never sent empty) when everything is
 * still held, so a client sees no placeholder fragment. */
static void stream_field(ll_gw_sse *s, cJSON *delta, const char *name, pii_unmask_stream *us, int fin) {
    cJSON *v = cJSON_GetObjectItemCaseSensitive(delta, name);
    int had = cJSON_IsString(v) && v->valuestring;
    if (!had && !(fin && us->nhold)) return;
    s->tmp.n = 0;
    ll_status st = LL_OK;
    if (had) st = pii_unmask_stream_feed(us, v->valuestring, strlen(v->valuestring), &s->tmp);
    if (st == LL_OK && fin) st = pii_unmask_stream_finish(us, &s->tmp);
    if (st == LL_OK) st = pii_buf_append(&s->tmp, "", 0);
    if (st != LL_OK) return;
    if (had && (s->tmp.n || !*v->valuestring)) cJSON_SetValuestring(v, s->tmp.s);
    else if (had) cJSON_DeleteItemFromObjectCaseSensitive(delta, name);
    else cJSON_AddStringToObject(delta, name, s->tmp.s);
}

/* Flushes what the argument stream of tool call k holds into a new entry of calls, placed before
 * `before` (NULL: at the end). */
static void flush_call(ll_gw_sse *s, cJSON *calls, cJSON *before, int k, pii_unmask_stream *us) {
    s->tmp.n = 0;
    if (pii_unmask_stream_finish(us, &s->tmp) != LL_OK || pii_buf_append(&s->tmp, "", 0) != LL_OK) return;
    cJSON *e = cJSON_CreateObject(), *fn = cJSON_CreateObject();
    if (!e || !fn || !cJSON_AddNumberToObject(e, "index", k) || !cJSON_AddStringToObject(fn, "arguments", s->tmp.s)) {
        cJSON_Delete(e);
        cJSON_Delete(fn);
        return;
    }
    cJSON_AddItemToObject(e, "function", fn);
    if (!before) {
        cJSON_AddItemToArray(calls, e);
        return;
    }
    int pos = 0;
    for (cJSON *c = calls->child; c && c != before; c = c->next) pos++;
    cJSON_InsertItemInArray(calls, pos, e);
}

/* The tool_calls of one choice's delta: each call's arguments fragment goes through that call's
 * stream. Calls arrive one after another, so a new index completes the others: their held bytes
 * are flushed first. With fin everything held is flushed. A fragment that is entirely held is
 * sent as "" (the field stays, as OpenAI's first tool call chunk has it). */
static void stream_tool_calls(ll_gw_sse *s, int ci, cJSON *delta, int fin) {
    pii_unmask_stream *as = s->args[ci];
    cJSON *calls = cJSON_GetObjectItemCaseSensitive(delta, "tool_calls");
    for (cJSON *tc = cJSON_IsArray(calls) ? calls->child : NULL; tc; tc = tc->next) {
        cJSON *idx = cJSON_IsObject(tc) ? cJSON_GetObjectItemCaseSensitive(tc, "index") : NULL;
        int k = cJSON_IsNumber(idx) ? idx->valueint : 0;
        cJSON *fn = cJSON_IsObject(tc) ? cJSON_GetObjectItemCaseSensitive(tc, "function") : NULL;
        cJSON *args = cJSON_IsObject(fn) ? cJSON_GetObjectItemCaseSensitive(fn, "arguments") : NULL;
        if (k < 0 || k >= LL_GW_MAX_CALLS) { /* beyond the streams kept: restored per event */
            unmask_args(s->m, args, &s->tmp);
            continue;
        }
        for (int o = 0; o < LL_GW_MAX_CALLS; o++)
            if (o != k && as[o].nhold) flush_call(s, calls, tc, o, &as[o]);
        if (!cJSON_IsString(args) || !args->valuestring) continue;
        s->tmp.n = 0;
        if (pii_unmask_stream_feed(&as[k], args->valuestring, strlen(args->valuestring), &s->tmp) != LL_OK ||
            pii_buf_append(&s->tmp, "", 0) != LL_OK)
            continue;
        cJSON_SetValuestring(args, s->tmp.s);
    }
    if (!fin) return;
    for (int o = 0; o < LL_GW_MAX_CALLS; o++) {
        if (!as[o].nhold) continue;
        if (!cJSON_IsArray(calls)) {
            cJSON_DeleteItemFromObjectCaseSensitive(delta, "tool_calls");
            if (!(calls = cJSON_AddArrayToObject(delta, "tool_calls"))) return;
        }
        flush_call(s, calls, NULL, o, &as[o]);
    }
}

/* Of the entries held for a choice (h), merges those that can no longer be part of a placeholder
 * (with fin: all) as lp_merge does and returns how many they now are: the first ones of h, to go
 * out. Held: from the entry holding the last '[' that no ']' follows, while fewer than
 * PII_PLACEHOLDER_MAX bytes follow it. shift: as lp_merge's. */
static int lp_release(ll_gw_sse *s, cJSON *h, int fin, long long *shift) {
    int n = cJSON_GetArraySize(h), upto = n;
    if (!fin && n) {
        size_t *off = ll_malloc((size_t)(n + 1) * sizeof(*off));
        if (off && lp_text(h, n, &s->tmp, off))
            for (size_t a = s->tmp.n; a-- > 0;) {
                if (s->tmp.s[a] == ']') break;
                if (s->tmp.s[a] == '[') {
                    if (s->tmp.n - a < PII_PLACEHOLDER_MAX) upto = lp_at(off, n, a);
                    break;
                }
            }
        ll_free(off);
    }
    lp_merge(s->m, h, &upto, &s->tmp, shift);
    return upto;
}

/* The logprobs.content entries of choice ci's chunk join those held for it; the ones lp_release
 * lets go are sent in this chunk. */
static void stream_logprobs(ll_gw_sse *s, int ci, cJSON *choice, int fin) {
    cJSON *lp = cJSON_GetObjectItemCaseSensitive(choice, "logprobs");
    cJSON *lc = cJSON_IsObject(lp) ? cJSON_GetObjectItemCaseSensitive(lp, "content") : NULL;
    cJSON *h = s->lp_hold[ci];
    if (!cJSON_IsArray(lc) && !(fin && h && h->child)) return;
    if (!h && !(h = s->lp_hold[ci] = cJSON_CreateArray())) return; /* OOM: this chunk's entries pass as they are */
    while (cJSON_IsArray(lc) && lc->child) cJSON_AddItemToArray(h, cJSON_DetachItemViaPointer(lc, lc->child));
    int upto = lp_release(s, h, fin, NULL);
    if (!cJSON_IsArray(lc)) { /* fin with entries held: the chunk gets a logprobs.content of its own */
        if (!cJSON_IsObject(lp)) {
            cJSON_DeleteItemFromObjectCaseSensitive(choice, "logprobs");
            if (!(lp = cJSON_AddObjectToObject(choice, "logprobs"))) return;
        }
        cJSON_DeleteItemFromObjectCaseSensitive(lp, "content");
        if (!(lc = cJSON_AddArrayToObject(lp, "content"))) return;
    }
    for (int q = 0; q < upto && h->child; q++) cJSON_AddItemToArray(lc, cJSON_DetachItemViaPointer(h, h->child));
}

/* The same for a legacy text_completion chunk: its logprobs positions join those held for choice
 * ci as entries (lp_legacy_split, their text_offset moved by what earlier merges of the choice
 * shifted), and the ones released go back into this chunk's arrays. */
static void stream_legacy_logprobs(ll_gw_sse *s, int ci, cJSON *choice, int fin) {
    cJSON *lp = cJSON_GetObjectItemCaseSensitive(choice, "logprobs");
    cJSON *h = s->lp_hold[ci];
    int shaped = lp_legacy_shaped(lp);
    if (!shaped && !(fin && h && h->child)) return;
    if (!h && !(h = s->lp_hold[ci] = cJSON_CreateArray())) return; /* OOM: this chunk's positions pass as they are */
    if (shaped && !lp_legacy_split(lp, h, s->lp_shift[ci])) return;
    int upto = lp_release(s, h, fin, &s->lp_shift[ci]);
    if (!shaped) { /* fin with positions held: the chunk gets a logprobs object of its own */
        cJSON_DeleteItemFromObjectCaseSensitive(choice, "logprobs");
        if (!(lp = cJSON_AddObjectToObject(choice, "logprobs"))) return;
        for (int k = 0; k < 4; k++)
            if (!cJSON_AddArrayToObject(lp, lp_legacy_keys[k])) return;
    }
    lp_legacy_join(h, upto, lp);
}

static void sse_event(ll_gw_sse *s, const char *line, size_t n, ll_strbuf *out) {
    const char *p = line + 5; /* after "data:" */
    size_t k = n - 5;
    while (k && *p == ' ') p++, k--;
    cJSON *doc = k && *p == '{' ? cJSON_ParseWithLength(p, k) : NULL;
    cJSON *choices = doc ? cJSON_GetObjectItemCaseSensitive(doc, "choices") : NULL;
    if (!cJSON_IsArray(choices)) { /* [DONE], errors, usage: unchanged */
        cJSON_Delete(doc);
        ll_strbuf_append(out, line, n);
        return;
    }
    for (cJSON *c = choices->child; c; c = c->next) {
        cJSON *idx = cJSON_GetObjectItemCaseSensitive(c, "index");
        int i = cJSON_IsNumber(idx) ? idx->valueint : 0;
        if (i < 0 || i >= LL_GW_MAX_CHOICES || !cJSON_IsObject(c)) continue;
        cJSON *fr = cJSON_GetObjectItemCaseSensitive(c, "finish_reason");
        int fin = fr && !cJSON_IsNull(fr);
        cJSON *delta = cJSON_GetObjectItemCaseSensitive(c, "delta");
        if (!cJSON_IsObject(delta)) {
            /* a legacy text_completion chunk carries its text in the choice itself */
            if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(c, "text")) || (fin && s->content[i].nhold)) {
                stream_field(s, c, "text", &s->content[i], fin);
                if (!cJSON_GetObjectItemCaseSensitive(c, "text")) cJSON_AddStringToObject(c, "text", "");
            }
            stream_legacy_logprobs(s, i, c, fin);
            continue;
        }
        stream_field(s, delta, "reasoning_content", &s->reasoning[i], fin);
        stream_field(s, delta, "content", &s->content[i], fin);
        stream_tool_calls(s, i, delta, fin);
        stream_logprobs(s, i, c, fin);
    }
    ll_strbuf_puts(out, "data: ");
    put_json(doc, out);
    cJSON_Delete(doc);
}

static void sse_line(ll_gw_sse *s, const char *line, size_t n, ll_strbuf *out) {
    /* n includes the '\n' (and a '\r' before it, if any); the line ending is kept as it came */
    size_t body = n;
    while (body && (line[body - 1] == '\n' || line[body - 1] == '\r')) body--;
    if (body >= 5 && !memcmp(line, "data:", 5)) {
        sse_event(s, line, body, out);
        ll_strbuf_append(out, line + body, n - body);
    } else
        ll_strbuf_append(out, line, n);
}

void ll_gw_sse_feed(ll_gw_sse *s, const char *data, size_t n, ll_strbuf *out) {
    while (n) {
        const char *nl = memchr(data, '\n', n);
        if (!nl) {
            ll_strbuf_append(&s->line, data, n);
            return;
        }
        size_t k = (size_t)(nl - data) + 1;
        if (s->line.len) {
            ll_strbuf_append(&s->line, data, k);
            sse_line(s, s->line.data, s->line.len, out);
            ll_strbuf_clear(&s->line);
        } else
            sse_line(s, data, k, out);
        data += k;
        n -= k;
    }
}

void ll_gw_sse_finish(ll_gw_sse *s, ll_strbuf *out) {
    if (s->line.len) sse_line(s, s->line.data, s->line.len, out);
    ll_strbuf_clear(&s->line);
}

/* ------------------------------------------------------------------ refusal and audit */

void ll_gw_refusal(const pii_decision *d, const char *model, const char *id, long long created, int stream, int legacy,
                   ll_strbuf *out) {
    ll_strbuf msg = {0};
    ll_strbuf_puts(&msg, "This request was not processed: it contains personal data (");
    int first = 1;
    for (int c = 0; c < PII_N_CAT; c++)
        if (d->categories & (1u << c)) {
            ll_strbuf_printf(&msg, "%s%s", first ? "" : ", ", pii_category_name(c));
            first = 0;
        }
    ll_strbuf_puts(&msg, ") that the privacy policy does not allow to be processed.");
    const char *text = msg.data ? msg.data : "";
    const char *object = legacy ? "text_completion" : stream ? "chat.completion.chunk" : "chat.completion";
    if (!stream) {
        ll_strbuf_printf(out, "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,\"model\":", id, object, created);
        ll_strbuf_json_cstr(out, model);
        ll_strbuf_puts(out, legacy ? ",\"choices\":[{\"index\":0,\"text\":"
                                   : ",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":");
        ll_strbuf_json_cstr(out, text);
        ll_strbuf_puts(out, legacy ? "" : "}");
        ll_strbuf_puts(out, ",\"finish_reason\":\"content_filter\",\"logprobs\":null}],"
                            "\"usage\":{\"prompt_tokens\":0,\"completion_tokens\":0,\"total_tokens\":0}}");
    } else {
        /* chat: role, content, finish; legacy: text, finish (its chunks have no role) */
        const char *deltas[3] = {"{\"role\":\"assistant\",\"content\":\"\"}", NULL, "{}"};
        for (int k = legacy ? 1 : 0; k < 3; k++) {
            ll_strbuf_printf(out, "data: {\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,\"model\":", id, object,
                             created);
            ll_strbuf_json_cstr(out, model);
            ll_strbuf_puts(out, legacy ? ",\"choices\":[{\"index\":0,\"text\":" : ",\"choices\":[{\"index\":0,\"delta\":");
            if (legacy) ll_strbuf_json_cstr(out, k == 1 ? text : "");
            else if (deltas[k]) ll_strbuf_puts(out, deltas[k]);
            else {
                ll_strbuf_puts(out, "{\"content\":");
                ll_strbuf_json_cstr(out, text);
                ll_strbuf_putc(out, '}');
            }
            ll_strbuf_printf(out, ",\"finish_reason\":%s,\"logprobs\":null}]}\n\n",
                             k == 2 ? "\"content_filter\"" : "null");
        }
        ll_strbuf_puts(out, "data: [DONE]\n\n");
    }
    if (msg.oom) out->oom = 1;
    ll_strbuf_free(&msg);
}

void ll_gw_sha256_hex(const void *data, size_t n, char hex[65]) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (!EVP_Digest(data, n, md, &len, EVP_sha256(), NULL) || len != 32) {
        snprintf(hex, 65, "%s", "unavailable");
        return;
    }
    for (int i = 0; i < 32; i++) sprintf(hex + 2 * i, "%02x", md[i]);
}

void ll_gw_audit_line(const ll_gw_scan *s, const char *id, const char *action, const char *upstream,
                      uint32_t mask_cats, size_t bytes_sent, ll_strbuf *out) {
    char ts[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
    int raw[PII_N_CAT] = {0}, masked[PII_N_CAT] = {0};
    for (int c = 0; c < PII_N_CAT; c++)
        if (mask_cats & (1u << c)) masked[c] = s->decision.counts[c];
        else raw[c] = s->decision.counts[c];
    ll_strbuf_printf(out, "{\"time\":\"%s\",\"id\":\"%s\",\"action\":\"%s\",\"upstream\":", ts, id, action);
    ll_strbuf_json_cstr(out, upstream);
    ll_strbuf_printf(out, ",\"bytes\":%zu,\"found\":", bytes_sent);
    categories_json(s->decision.counts, ~0u, out);
    ll_strbuf_puts(out, ",\"masked\":");
    categories_json(masked, ~0u, out);
    ll_strbuf_puts(out, ",\"sent_raw\":");
    categories_json(raw, ~0u, out);
    ll_strbuf_puts(out, ",\"raw_hashes\":[");
    int first = 1;
    ll_strbuf hb = {0};
    for (size_t i = 0; i < s->n; i++) {
        const ll_gw_text *t = &s->v[i];
        for (size_t k = 0; k < t->spans.n; k++) {
            const pii_span *sp = &t->spans.v[k];
            if (mask_cats & (1u << sp->label)) continue;
            /* hashed as "<label>:<value>" so an auditor can check whether a known value left */
            ll_strbuf_clear(&hb);
            ll_strbuf_printf(&hb, "%s:", pii_category_name(sp->label));
            ll_strbuf_append(&hb, (t->orig ? t->orig : t->item->valuestring) + sp->bstart, (size_t)(sp->bend - sp->bstart));
            char hex[65];
            ll_gw_sha256_hex(hb.data ? hb.data : "", hb.len, hex);
            ll_strbuf_printf(out, "%s{\"label\":\"%s\",\"sha256\":\"%s\"}", first ? "" : ",",
                             pii_category_name(sp->label), hex);
            first = 0;
        }
    }
    ll_strbuf_free(&hb);
    ll_strbuf_puts(out, "]}\n");
}
