/*
 * privacy.h — personal-data detection: the nine PII-Tracer categories, found spans, the rule
 * recognizers (no model needed), the format validators they use, and the combined scan (rules,
 * plus the PII encoder over overlapping windows when one is loaded).
 *
 * Offsets. Every span carries byte offsets into the UTF-8 input (bstart/bend, for masking) and
 * Unicode code-point offsets (start/end, end exclusive, what `lilac scan --json` prints, like
 * PII-Tracer's predict). Invalid UTF-8 never fails a scan: each byte of a maximal invalid
 * sequence counts as one code point (as if replaced by U+FFFD per byte), and recognizers treat it
 * as a non-word character.
 *
 * Combining rules and model (pii_spans_resolve). Spans of the same category that overlap or touch
 * are united (rule ∪ model), keeping the higher score and "rule" as source when a rule took part.
 * Where spans of different categories overlap, a rule span keeps the overlapping characters over a
 * model span (rules fire on validated formats and explicit context; the model's neighbouring
 * guess must not cut an e-mail address in half). Between two spans of the same source, the
 * category earlier in this precedence keeps them; the other is trimmed to what remains (dropped
 * if nothing does):
 *   secret > account_number > private_email > private_url > private_phone > private_date
 *   > private_address > private_person > other_pii
 * Rationale: a validated format (checksum, key prefix, PEM armour) is more specific than a
 * contextual guess, and the stricter category is the safer one to act on.
 */
#ifndef LILAC_PRIVACY_H
#define LILAC_PRIVACY_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

typedef enum pii_category {
    PII_PERSON = 0,
    PII_EMAIL,
    PII_PHONE,
    PII_ADDRESS,
    PII_URL,
    PII_DATE,
    PII_ACCOUNT,
    PII_SECRET,
    PII_OTHER,
    PII_N_CAT,
} pii_category;

/* "private_person", ... (PII-Tracer's PII_TYPES spelling); NULL when out of range. */
const char *pii_category_name(int c);
/* The placeholder stem: "PRIVATE_PERSON", ..., "ACCOUNT_NUMBER", "SECRET", "OTHER_PII". */
const char *pii_category_upper(int c);
/* Category from its name (either spelling, case-insensitive); -1 if unknown. */
int pii_category_from_name(const char *s);

enum { PII_SRC_RULE = 0, PII_SRC_MODEL = 1 };

typedef struct pii_span {
    int64_t start, end;   /* code points, end exclusive */
    int64_t bstart, bend; /* bytes, end exclusive */
    int label;            /* pii_category */
    float score;          /* 0..1 */
    int source;           /* PII_SRC_* */
} pii_span;

/* Growable list of spans; zero-initialise, free with pii_spans_free. */
typedef struct pii_spans {
    pii_span *v; /* [n] */
    size_t n, cap;
} pii_spans;
ll_status pii_spans_push(pii_spans *s, pii_span sp);
void pii_spans_free(pii_spans *s);

/* ---- validators (exposed for tests and the evaluation set) ---- */
/* Each takes the raw text of a candidate (separators such as spaces and dashes allowed where the
 * format has them) and returns 1 when it passes the format's checksum/structure, else 0. */
int pii_luhn_ok(const char *s, size_t n);          /* card numbers (13–19 digits, IIN checked) */
int pii_iban_ok(const char *s, size_t n);          /* ISO 13616: country length + mod-97 == 1 */
int pii_us_ssn_ok(const char *s, size_t n);        /* AAA-GG-SSSS, no 000/666/9xx, 00, 0000 */
int pii_uk_nino_ok(const char *s, size_t n);       /* AB 12 34 56 C prefix rules */
int pii_es_dni_ok(const char *s, size_t n);        /* 8 digits + letter (mod 23); NIE X/Y/Z */
int pii_it_cf_ok(const char *s, size_t n);         /* codice fiscale, 16 chars with check char */
int pii_fr_nir_ok(const char *s, size_t n);        /* 13 digits + key (97 - n mod 97) */
int pii_pl_pesel_ok(const char *s, size_t n);      /* 11 digits, weighted checksum */
int pii_br_cpf_ok(const char *s, size_t n);        /* ddd.ddd.ddd-dd, two mod-11 digits */
int pii_cn_rid_ok(const char *s, size_t n);        /* 18 chars, ISO 7064 MOD 11-2 */
int pii_nl_bsn_ok(const char *s, size_t n);        /* 9 digits, 11-test */
int pii_se_pnr_ok(const char *s, size_t n);        /* YYMMDD-NNNN, Luhn over 10 digits */
int pii_jwt_ok(const char *s, size_t n);           /* header decodes to JSON with "alg" */
/* 10/8, 172.16/12, 192.168/16, 169.254/16, 100.64/10 (loopback is not private information) */
int pii_private_ipv4(const char *s, size_t n);
/* Shannon entropy in bits per byte. */
double pii_entropy(const char *s, size_t n);

/* ---- rules ---- */
/* Runs every rule recognizer over text[n] (any bytes; see the header comment on invalid UTF-8)
 * and appends the resolved spans (sorted by start, no overlaps) to *out. Thread-safe (the
 * compiled patterns are shared, read-only; match data is per call). */
ll_status pii_rules_scan(const char *text, size_t n, pii_spans *out);

/* Fills start/end (code points) of every span from bstart/bend. */
void pii_spans_set_cp(pii_spans *s, const char *text, size_t n);
/* Sorts, unites same-category overlaps and applies the category precedence (header comment). */
ll_status pii_spans_resolve(pii_spans *s);
/* Number of code points of text[n] under the invalid-byte convention above. */
int64_t pii_cp_count(const char *text, size_t n);
/* Length of the valid UTF-8 sequence at s[0..n) (1..4), or 0 if s[0] starts an invalid one. */
int pii_utf8_len(const unsigned char *s, size_t n);

#endif
