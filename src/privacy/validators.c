/*
 * validators.c — checksum and structure checks for the formats the rule recognizers find
 * (cards, IBANs, national IDs, JWTs, private IPv4), Shannon entropy, and the span list helpers
 * (code-point offsets, category names, overlap resolution with the documented precedence).
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <strings.h>

#include "privacy/privacy.h"

/* ---- categories ---- */

static const char *const k_cat_names[PII_N_CAT] = {
    "private_person", "private_email", "private_phone", "private_address", "private_url",
    "private_date", "account_number", "secret", "other_pii",
};
static const char *const k_cat_upper[PII_N_CAT] = {
    "PRIVATE_PERSON", "PRIVATE_EMAIL", "PRIVATE_PHONE", "PRIVATE_ADDRESS", "PRIVATE_URL",
    "PRIVATE_DATE", "ACCOUNT_NUMBER", "SECRET", "OTHER_PII",
};

const char *pii_category_name(int c) { return c >= 0 && c < PII_N_CAT ? k_cat_names[c] : NULL; }
const char *pii_category_upper(int c) { return c >= 0 && c < PII_N_CAT ? k_cat_upper[c] : NULL; }

int pii_category_from_name(const char *s) {
    if (!s) return -1;
    for (int c = 0; c < PII_N_CAT; c++)
        if (!strcasecmp(s, k_cat_names[c]) || !strcasecmp(s, k_cat_upper[c])) return c;
    return -1;
}

/* ---- span list ---- */

ll_status pii_spans_push(pii_spans *s, pii_span sp) {
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 16;
        pii_span *nv = ll_realloc(s->v, nc * sizeof(pii_span));
        if (!nv) return ll_err(LL_ERR_OOM, "privacy: out of memory for %zu spans", nc);
        s->v = nv;
        s->cap = nc;
    }
    s->v[s->n++] = sp;
    return LL_OK;
}

void pii_spans_free(pii_spans *s) {
    ll_free(s->v);
    memset(s, 0, sizeof(*s));
}

int pii_utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int len;
    unsigned min;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; min = 0x10000; }
    else return 0;
    if ((size_t)len > n) return 0;
    unsigned cp = c & (0x3F >> (len - 1));
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

int64_t pii_cp_count(const char *text, size_t n) {
    int64_t cp = 0;
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < n; cp++) {
        int l = pii_utf8_len(s + i, n - i);
        i += l ? (size_t)l : 1;
    }
    return cp;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

void pii_spans_set_cp(pii_spans *s, const char *text, size_t n) {
    if (!s->n) return;
    /* one pass over the text for all offsets: sort the distinct byte offsets, walk once */
    int64_t *offs = ll_malloc(sizeof(int64_t) * 2 * s->n);
    if (!offs) { /* fall back to counting per span (slow but correct) */
        for (size_t i = 0; i < s->n; i++) {
            s->v[i].start = pii_cp_count(text, (size_t)s->v[i].bstart);
            s->v[i].end = pii_cp_count(text, (size_t)s->v[i].bend);
        }
        return;
    }
    for (size_t i = 0; i < s->n; i++) { offs[2 * i] = s->v[i].bstart; offs[2 * i + 1] = s->v[i].bend; }
    size_t m = 2 * s->n;
    qsort(offs, m, sizeof(int64_t), cmp_i64);
    int64_t *cps = ll_malloc(sizeof(int64_t) * m);
    if (!cps) { ll_free(offs); for (size_t i = 0; i < s->n; i++) { s->v[i].start = pii_cp_count(text, (size_t)s->v[i].bstart); s->v[i].end = pii_cp_count(text, (size_t)s->v[i].bend); } return; }
    const unsigned char *u = (const unsigned char *)text;
    size_t b = 0;
    int64_t cp = 0;
    for (size_t k = 0; k < m; k++) {
        while ((int64_t)b < offs[k] && b < n) {
            int l = pii_utf8_len(u + b, n - b);
            b += l ? (size_t)l : 1;
            cp++;
        }
        cps[k] = cp;
    }
    for (size_t i = 0; i < s->n; i++) {
        int64_t *p = bsearch(&s->v[i].bstart, offs, m, sizeof(int64_t), cmp_i64);
        s->v[i].start = cps[p - offs];
        p = bsearch(&s->v[i].bend, offs, m, sizeof(int64_t), cmp_i64);
        s->v[i].end = cps[p - offs];
    }
    ll_free(offs);
    ll_free(cps);
}

/* precedence rank: lower wins */
static int cat_rank(int c) {
    static const int rank[PII_N_CAT] = {
        [PII_SECRET] = 0, [PII_ACCOUNT] = 1, [PII_EMAIL] = 2, [PII_URL] = 3, [PII_PHONE] = 4,
        [PII_DATE] = 5, [PII_ADDRESS] = 6, [PII_PERSON] = 7, [PII_OTHER] = 8,
    };
    return rank[c];
}

static int cmp_span(const void *a, const void *b) {
    const pii_span *x = a, *y = b;
    if (x->bstart != y->bstart) return x->bstart < y->bstart ? -1 : 1;
    if (x->bend != y->bend) return x->bend > y->bend ? -1 : 1;
    return cat_rank(x->label) - cat_rank(y->label);
}

ll_status pii_spans_resolve(pii_spans *s) {
    if (s->n < 2) return LL_OK;
    /* 1. unite same-category spans that overlap or touch */
    qsort(s->v, s->n, sizeof(pii_span), cmp_span);
    for (int c = 0; c < PII_N_CAT; c++) {
        pii_span *last = NULL;
        for (size_t i = 0; i < s->n; i++) {
            pii_span *p = &s->v[i];
            if (p->label != c || p->bend <= p->bstart) continue;
            if (last && p->bstart <= last->bend) {
                if (p->bend > last->bend) last->bend = p->bend;
                if (p->score > last->score) last->score = p->score;
                if (p->source == PII_SRC_RULE) last->source = PII_SRC_RULE;
                p->bend = p->bstart; /* emptied: dropped below */
            } else {
                last = p;
            }
        }
    }
    /* 2. different categories: the higher precedence keeps overlapping bytes. Repeat passes until
     * stable (each pass only shrinks spans, so this terminates). */
    int changed = 1;
    while (changed) {
        changed = 0;
        qsort(s->v, s->n, sizeof(pii_span), cmp_span);
        for (size_t i = 0; i < s->n; i++) {
            pii_span *a = &s->v[i];
            if (a->bend <= a->bstart) continue;
            for (size_t j = i + 1; j < s->n && s->v[j].bstart < a->bend; j++) {
                pii_span *b = &s->v[j];
                if (b->bend <= b->bstart) continue;
                /* a validated rule span beats a model guess; between equals, the category rank */
                pii_span *lose = a->source != b->source ? (a->source == PII_SRC_RULE ? b : a)
                                 : cat_rank(a->label) <= cat_rank(b->label) ? b : a;
                pii_span *win = lose == a ? b : a;
                /* keep the larger remainder of the loser outside the winner */
                int64_t left = win->bstart - lose->bstart, right = lose->bend - win->bend;
                if (left <= 0 && right <= 0) lose->bend = lose->bstart;
                else if (left >= right) lose->bend = win->bstart;
                else lose->bstart = win->bend;
                changed = 1;
                if (lose == a) break;
            }
        }
    }
    size_t w = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].bend > s->v[i].bstart) s->v[w++] = s->v[i];
    s->n = w;
    qsort(s->v, s->n, sizeof(pii_span), cmp_span);
    return LL_OK;
}

/* ---- validators ---- */

/* Copies the digits (and, with keep_alpha, letters upper-cased) of s into out; returns the count
 * or -1 when another character than the allowed separators appears or out would overflow. */
static int compact(const char *s, size_t n, char *out, int cap, int keep_alpha, const char *seps) {
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (isdigit(c) || (keep_alpha && isalpha(c))) {
            if (k >= cap) return -1;
            out[k++] = (char)toupper(c);
        } else if (!strchr(seps, c) || c == 0) {
            return -1;
        }
    }
    out[k < cap ? k : cap - 1] = 0;
    return k;
}

static int all_digits(const char *s, int n) {
    for (int i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i])) return 0;
    return 1;
}

static int luhn_digits(const char *d, int n) {
    int sum = 0;
    for (int i = 0; i < n; i++) {
        int v = d[n - 1 - i] - '0';
        if (i & 1) { v *= 2; if (v > 9) v -= 9; }
        sum += v;
    }
    return sum % 10 == 0;
}

int pii_luhn_ok(const char *s, size_t n) {
    char d[32];
    int k = compact(s, n, d, sizeof(d), 0, " -");
    if (k < 13 || k > 19 || !all_digits(d, k)) return 0;
    /* issuer prefixes in use: Visa 4, Mastercard 51-55/2221-2720, Amex 34/37, Discover 6011/65/644-649,
     * JCB 3528-3589, Diners 36/38/300-305, UnionPay 62, Maestro 50/56-58/67 */
    int p2 = (d[0] - '0') * 10 + d[1] - '0', p4 = p2 * 100 + (d[2] - '0') * 10 + d[3] - '0';
    int ok = d[0] == '4' || (p2 >= 51 && p2 <= 55) || (p4 >= 2221 && p4 <= 2720) || p2 == 34 || p2 == 37 ||
             p4 == 6011 || p2 == 65 || (p4 >= 6440 && p4 <= 6499) || (p4 >= 3528 && p4 <= 3589) || p2 == 36 ||
             p2 == 38 || (p4 >= 3000 && p4 <= 3059) || p2 == 62 || p2 == 50 || (p2 >= 56 && p2 <= 58) || p2 == 67;
    if (!ok) return 0;
    /* all one digit repeated is a test pattern, not a card */
    int same = 1;
    for (int i = 1; i < k; i++) same &= d[i] == d[0];
    return !same && luhn_digits(d, k);
}

int pii_iban_ok(const char *s, size_t n) {
    static const struct { char cc[3]; int len; } lens[] = {
        {"AD", 24}, {"AE", 23}, {"AL", 28}, {"AT", 20}, {"AZ", 28}, {"BA", 20}, {"BE", 16}, {"BG", 22},
        {"BH", 22}, {"BR", 29}, {"CH", 21}, {"CR", 22}, {"CY", 28}, {"CZ", 24}, {"DE", 22}, {"DK", 18},
        {"DO", 28}, {"EE", 20}, {"EG", 29}, {"ES", 24}, {"FI", 18}, {"FO", 18}, {"FR", 27}, {"GB", 22},
        {"GE", 22}, {"GI", 23}, {"GL", 18}, {"GR", 27}, {"GT", 28}, {"HR", 21}, {"HU", 28}, {"IE", 22},
        {"IL", 23}, {"IS", 26}, {"IT", 27}, {"JO", 30}, {"KW", 30}, {"KZ", 20}, {"LB", 28}, {"LI", 21},
        {"LT", 20}, {"LU", 20}, {"LV", 21}, {"MC", 27}, {"MD", 24}, {"ME", 22}, {"MK", 19}, {"MR", 27},
        {"MT", 31}, {"MU", 30}, {"NL", 18}, {"NO", 15}, {"PK", 24}, {"PL", 28}, {"PS", 29}, {"PT", 25},
        {"QA", 29}, {"RO", 24}, {"RS", 22}, {"SA", 24}, {"SE", 24}, {"SI", 19}, {"SK", 24}, {"SM", 27},
        {"TN", 24}, {"TR", 26}, {"UA", 29}, {"VG", 24}, {"XK", 20},
    };
    char d[40];
    int k = compact(s, n, d, sizeof(d), 1, " ");
    if (k < 15 || k > 34 || !isalpha((unsigned char)d[0]) || !isalpha((unsigned char)d[1]) ||
        !isdigit((unsigned char)d[2]) || !isdigit((unsigned char)d[3]))
        return 0;
    int want = 0;
    for (size_t i = 0; i < LL_ARRAY_LEN(lens); i++)
        if (d[0] == lens[i].cc[0] && d[1] == lens[i].cc[1]) want = lens[i].len;
    if (want != k) return 0;
    int rem = 0;
    for (int i = 0; i < k; i++) {
        char c = d[(i + 4) % k];
        if (isdigit((unsigned char)c)) rem = (rem * 10 + (c - '0')) % 97;
        else rem = (rem * 100 + (c - 'A' + 10)) % 97;
    }
    return rem == 1;
}

int pii_us_ssn_ok(const char *s, size_t n) {
    char d[16];
    int k = compact(s, n, d, sizeof(d), 0, "- ");
    if (k != 9 || !all_digits(d, k)) return 0;
    int area = (d[0] - '0') * 100 + (d[1] - '0') * 10 + d[2] - '0';
    int group = (d[3] - '0') * 10 + d[4] - '0';
    int serial = atoi(d + 5);
    if (area == 0 || area == 666 || area >= 900 || group == 0 || serial == 0) return 0;
    /* numbers published as examples (Woolworth wallet card, advertising) */
    if (!memcmp(d, "078051120", 9) || !memcmp(d, "219099999", 9) || !memcmp(d, "123456789", 9)) return 0;
    return 1;
}

int pii_uk_nino_ok(const char *s, size_t n) {
    char d[16];
    int k = compact(s, n, d, sizeof(d), 1, " ");
    if (k != 9) return 0;
    if (!isalpha((unsigned char)d[0]) || !isalpha((unsigned char)d[1]) || !all_digits(d + 2, 6) || !strchr("ABCD", d[8]))
        return 0;
    if (strchr("DFIQUV", d[0]) || strchr("DFIQUVO", d[1])) return 0;
    static const char *const bad[] = {"BG", "GB", "NK", "KN", "TN", "NT", "ZZ"};
    for (size_t i = 0; i < LL_ARRAY_LEN(bad); i++)
        if (d[0] == bad[i][0] && d[1] == bad[i][1]) return 0;
    return 1;
}

int pii_es_dni_ok(const char *s, size_t n) {
    static const char letters[] = "TRWAGMYFPDXBNJZSQVHLCKE";
    char d[16];
    int k = compact(s, n, d, sizeof(d), 1, "- ");
    if (k != 9 || !isalpha((unsigned char)d[8])) return 0;
    long v;
    if (strchr("XYZ", d[0])) {
        if (!all_digits(d + 1, 7)) return 0;
        char tmp[9];
        tmp[0] = (char)('0' + (d[0] - 'X'));
        memcpy(tmp + 1, d + 1, 7);
        tmp[8] = 0;
        v = atol(tmp);
    } else {
        if (!all_digits(d, 8)) return 0;
        char tmp[9];
        memcpy(tmp, d, 8);
        tmp[8] = 0;
        v = atol(tmp);
    }
    return letters[v % 23] == d[8];
}

int pii_it_cf_ok(const char *s, size_t n) {
    char d[20];
    int k = compact(s, n, d, sizeof(d), 1, "");
    if (k != 16) return 0;
    /* layout: 6 letters, 2 digits, letter, 2 digits, letter, 3 digits, check letter (digits may be
     * replaced by letters for omocodia; we accept the plain layout only) */
    for (int i = 0; i < 16; i++) {
        int want_alpha = i < 6 || i == 8 || i == 11 || i == 15;
        if (want_alpha ? !isalpha((unsigned char)d[i]) : !isdigit((unsigned char)d[i])) return 0;
    }
    static const int odd[36] = {1, 0, 5, 7, 9, 13, 15, 17, 19, 21, 1, 0, 5, 7, 9, 13, 15, 17,
                                19, 21, 2, 4, 18, 20, 11, 3, 6, 8, 12, 14, 16, 10, 22, 25, 24, 23};
    int sum = 0;
    for (int i = 0; i < 15; i++) {
        int c = d[i], idx = isdigit(c) ? c - '0' : 10 + (c - 'A'), val = isdigit(c) ? c - '0' : c - 'A';
        sum += (i % 2 == 0) ? odd[idx] : val; /* 1-based odd positions are even indices */
    }
    return d[15] == 'A' + sum % 26;
}

int pii_fr_nir_ok(const char *s, size_t n) {
    char d[20];
    int k = compact(s, n, d, sizeof(d), 1, " ");
    if (k != 15 || (d[0] != '1' && d[0] != '2')) return 0;
    /* Corsica: department 2A/2B count as 19/18 for the key */
    char num[14];
    memcpy(num, d, 13);
    num[13] = 0;
    long long sub = 0;
    if (num[6] == 'A' || num[6] == 'B') { /* 2A -> 19, 2B -> 18: subtract 1 or 2 at the 10^6 place */
        if (num[5] != '2') return 0;
        sub = num[6] == 'A' ? 1000000LL : 2000000LL;
        num[6] = '0';
    }
    if (!all_digits(num, 13) || !all_digits(d + 13, 2)) return 0;
    long long v = atoll(num) - sub;
    int key = (d[13] - '0') * 10 + d[14] - '0';
    int mon = (d[3] - '0') * 10 + d[4] - '0';
    if (mon < 1 || (mon > 12 && mon < 20) || mon > 99) return 0;
    return key == 97 - (int)(v % 97);
}

int pii_pl_pesel_ok(const char *s, size_t n) {
    char d[16];
    int k = compact(s, n, d, sizeof(d), 0, "");
    if (k != 11 || !all_digits(d, 11)) return 0;
    static const int w[10] = {1, 3, 7, 9, 1, 3, 7, 9, 1, 3};
    int sum = 0;
    for (int i = 0; i < 10; i++) sum += w[i] * (d[i] - '0');
    int mon = ((d[2] - '0') * 10 + d[3] - '0') % 20, day = (d[4] - '0') * 10 + d[5] - '0';
    if (mon < 1 || mon > 12 || day < 1 || day > 31) return 0;
    return (10 - sum % 10) % 10 == d[10] - '0';
}

int pii_br_cpf_ok(const char *s, size_t n) {
    char d[16];
    int k = compact(s, n, d, sizeof(d), 0, ".-");
    if (k != 11 || !all_digits(d, 11)) return 0;
    int same = 1;
    for (int i = 1; i < 11; i++) same &= d[i] == d[0];
    if (same) return 0;
    for (int j = 9; j <= 10; j++) {
        int sum = 0;
        for (int i = 0; i < j; i++) sum += (d[i] - '0') * (j + 1 - i);
        int c = (sum * 10) % 11 % 10;
        if (c != d[j] - '0') return 0;
    }
    return 1;
}

int pii_cn_rid_ok(const char *s, size_t n) {
    char d[20];
    int k = compact(s, n, d, sizeof(d), 1, "");
    if (k != 18 || !all_digits(d, 17) || !(isdigit((unsigned char)d[17]) || d[17] == 'X')) return 0;
    static const int w[17] = {7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2};
    static const char chk[] = "10X98765432";
    int sum = 0;
    for (int i = 0; i < 17; i++) sum += w[i] * (d[i] - '0');
    int year = atoi((char[]){d[6], d[7], d[8], d[9], 0});
    int mon = (d[10] - '0') * 10 + d[11] - '0', day = (d[12] - '0') * 10 + d[13] - '0';
    if (year < 1900 || year > 2100 || mon < 1 || mon > 12 || day < 1 || day > 31) return 0;
    return chk[sum % 11] == d[17];
}

int pii_nl_bsn_ok(const char *s, size_t n) {
    char d[16];
    int k = compact(s, n, d, sizeof(d), 0, ". ");
    if (k != 9 || !all_digits(d, 9)) return 0;
    int sum = 0;
    for (int i = 0; i < 8; i++) sum += (9 - i) * (d[i] - '0');
    sum -= d[8] - '0';
    return sum % 11 == 0 && sum != 0;
}

int pii_se_pnr_ok(const char *s, size_t n) {
    char d[16];
    int k = compact(s, n, d, sizeof(d), 0, "-+");
    if (k == 12) { memmove(d, d + 2, 10); k = 10; }
    if (k != 10 || !all_digits(d, 10)) return 0;
    int mon = (d[2] - '0') * 10 + d[3] - '0', day = (d[4] - '0') * 10 + d[5] - '0';
    if (mon < 1 || mon > 12 || day < 1 || day > 91) return 0;
    return luhn_digits(d, 10);
}

/* base64url decode of s[n] into out (cap bytes); returns length or -1 */
static int b64url_decode(const char *s, size_t n, unsigned char *out, int cap) {
    int k = 0, bits = 0;
    unsigned acc = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i], v;
        if (c >= 'A' && c <= 'Z') v = c - 'A';
        else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
        else if (c >= '0' && c <= '9') v = c - '0' + 52;
        else if (c == '-' || c == '+') v = 62;
        else if (c == '_' || c == '/') v = 63;
        else if (c == '=') break;
        else return -1;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (k >= cap) return k;
            out[k++] = (unsigned char)(acc >> bits);
        }
    }
    return k;
}

int pii_jwt_ok(const char *s, size_t n) {
    const char *dot = memchr(s, '.', n);
    if (!dot) return 0;
    const char *dot2 = memchr(dot + 1, '.', n - (size_t)(dot + 1 - s));
    if (!dot2) return 0;
    unsigned char hdr[256];
    int k = b64url_decode(s, (size_t)(dot - s), hdr, sizeof(hdr) - 1);
    if (k < 2 || hdr[0] != '{') return 0;
    hdr[k] = 0;
    return strstr((char *)hdr, "\"alg\"") != NULL || strstr((char *)hdr, "\"typ\"") != NULL;
}

int pii_private_ipv4(const char *s, size_t n) {
    int oct[4], k = 0;
    size_t i = 0;
    while (k < 4) {
        if (i >= n || !isdigit((unsigned char)s[i])) return 0;
        int v = 0, nd = 0;
        while (i < n && isdigit((unsigned char)s[i]) && nd < 4) v = v * 10 + (s[i++] - '0'), nd++;
        if (nd > 3 || v > 255) return 0;
        oct[k++] = v;
        if (k < 4) {
            if (i >= n || s[i] != '.') return 0;
            i++;
        }
    }
    if (i != n) return 0;
    return oct[0] == 10 || (oct[0] == 172 && oct[1] >= 16 && oct[1] <= 31) || (oct[0] == 192 && oct[1] == 168) ||
           (oct[0] == 169 && oct[1] == 254) || (oct[0] == 100 && oct[1] >= 64 && oct[1] <= 127);
}

double pii_entropy(const char *s, size_t n) {
    if (!n) return 0;
    int cnt[256] = {0};
    for (size_t i = 0; i < n; i++) cnt[(unsigned char)s[i]]++;
    double h = 0;
    for (int c = 0; c < 256; c++)
        if (cnt[c]) {
            double p = (double)cnt[c] / (double)n;
            h -= p * log2(p);
        }
    return h;
}
