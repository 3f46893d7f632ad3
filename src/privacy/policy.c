/* policy.c — per-category privacy actions from a config file, and the decision for a set of
 * findings (see policy.h for the file format and the strictness order). */
#include "privacy/policy.h"

#include <ctype.h>
#include <stdlib.h>
#include <strings.h>

#include "base/mapfile.h"

static const char *const k_act[PII_ACT_N] = {"upstream", "mask", "ask", "local", "skip"};

const char *pii_action_name(pii_action a) { return a >= 0 && a < PII_ACT_N ? k_act[a] : "?"; }

int pii_action_from_name(const char *s) {
    for (int i = 0; i < PII_ACT_N; i++)
        if (!strcasecmp(s, k_act[i])) return i;
    return -1;
}

void pii_policy_default(pii_policy *p) {
    for (int c = 0; c < PII_N_CAT; c++) p->action[c] = PII_ACT_MASK;
    p->action[PII_SECRET] = PII_ACT_LOCAL;
    p->action[PII_ACCOUNT] = PII_ACT_LOCAL;
    p->action[PII_OTHER] = PII_ACT_ASK;
    p->min_score = 0.5f;
}

/* Copies s[a, b) trimmed into out (cap bytes); returns its length or -1 if too long. */
static int trimmed(const char *s, size_t a, size_t b, char *out, size_t cap) {
    while (a < b && isspace((unsigned char)s[a])) a++;
    while (b > a && isspace((unsigned char)s[b - 1])) b--;
    if (b - a >= cap) return -1;
    memcpy(out, s + a, b - a);
    out[b - a] = 0;
    return (int)(b - a);
}

ll_status pii_policy_parse(pii_policy *p, const char *text, size_t n, const char *src) {
    size_t pos = 0;
    int line = 0;
    int explicit_cat[PII_N_CAT] = {0};
    int def = -1;
    while (pos < n) {
        line++;
        const char *nl = memchr(text + pos, '\n', n - pos);
        size_t end = nl ? (size_t)(nl - text) : n;
        const char *hash = memchr(text + pos, '#', end - pos);
        size_t stop = hash ? (size_t)(hash - text) : end;
        char key[64], val[64];
        const char *eq = memchr(text + pos, '=', stop - pos);
        int kl;
        if (!eq) {
            if (trimmed(text, pos, stop, key, sizeof(key)) != 0)
                return ll_err(LL_ERR_FORMAT, "%s:%d: expected 'key = value'", src, line);
        } else {
            kl = trimmed(text, pos, (size_t)(eq - text), key, sizeof(key));
            int vl = trimmed(text, (size_t)(eq - text) + 1, stop, val, sizeof(val));
            if (kl <= 0 || vl <= 0) return ll_err(LL_ERR_FORMAT, "%s:%d: expected 'key = value'", src, line);
            if (!strcasecmp(key, "min_score")) {
                char *e;
                double v = strtod(val, &e);
                if (*e || v < 0 || v > 1) return ll_err(LL_ERR_FORMAT, "%s:%d: min_score must be in [0, 1]", src, line);
                p->min_score = (float)v;
            } else {
                int a = pii_action_from_name(val);
                if (a < 0)
                    return ll_err(LL_ERR_FORMAT, "%s:%d: unknown action '%s' (upstream|mask|ask|local|skip)", src, line, val);
                if (!strcasecmp(key, "default")) {
                    def = a;
                } else {
                    int c = pii_category_from_name(key);
                    if (c < 0) return ll_err(LL_ERR_FORMAT, "%s:%d: unknown category '%s'", src, line, key);
                    p->action[c] = (pii_action)a;
                    explicit_cat[c] = 1;
                }
            }
        }
        pos = end + 1;
    }
    if (def >= 0)
        for (int c = 0; c < PII_N_CAT; c++)
            if (!explicit_cat[c]) p->action[c] = (pii_action)def;
    return LL_OK;
}

ll_status pii_policy_load(pii_policy *p, const char *path) {
    pii_policy_default(p);
    char *text;
    size_t n;
    LL_TRY(ll_read_file(path, &text, &n));
    ll_status st = pii_policy_parse(p, text, n, path);
    ll_free(text);
    return st;
}

pii_decision pii_policy_decide(const pii_policy *p, const pii_span *spans, size_t n) {
    pii_decision d;
    memset(&d, 0, sizeof(d));
    d.action = PII_ACT_UPSTREAM;
    for (size_t i = 0; i < n; i++) {
        const pii_span *s = &spans[i];
        if (s->label < 0 || s->label >= PII_N_CAT || s->score < p->min_score) continue;
        d.counts[s->label]++;
        d.categories |= 1u << s->label;
        pii_action a = p->action[s->label];
        if (a == PII_ACT_MASK) d.mask_categories |= 1u << s->label;
        if (a > d.action) d.action = a;
    }
    return d;
}
