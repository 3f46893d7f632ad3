/*
 * scan.h — the combined privacy scan: rule recognizers plus, when a PII model is loaded, the
 * encoder over overlapping token windows, united with the documented category precedence
 * (privacy.h).
 *
 * Long inputs are never truncated: the token sequence is cut into windows of W tokens (W = the
 * model's max_seq_len unless smaller is asked) with stride W/2. Each window is decoded on its
 * own; a span is kept from the window whose central half holds the span's middle token (the first
 * window also owns its head, the last its tail), so every token is judged with at least W/4
 * tokens of context on each side where the text allows it. Spans of the same category that
 * overlap or touch after that are merged. The document sensitivity is the highest window score
 * (a document is as sensitive as its most sensitive part).
 */
#ifndef LILAC_SCAN_H
#define LILAC_SCAN_H

#include "privacy/pii_model.h"
#include "privacy/privacy.h"
#include "tokenizer/tokenizer.h"

/* Model spans for text[n] tokenized as ids[ntok], token i covering bytes [tb[i], te[i]).
 * window <= 0 means the model's max_seq. Appends spans (byte offsets set, source model) to *out
 * and sets *sensitivity (sigmoid, 0..1) when not NULL. */
ll_status pii_model_scan_tokens(pii_model *m, const char *text, size_t n, const int32_t *ids, const int64_t *tb,
                                const int64_t *te, int ntok, int window, pii_spans *out, float *sensitivity);

/* Tokenizes text (special-token text is treated as plain text) and runs pii_model_scan_tokens.
 * Token byte offsets come from the tokens' bytes; where the tokenizer's NFC step changed the
 * text they no longer line up, and spans are then clamped to the text (rules are unaffected). */
ll_status pii_model_scan_text(pii_model *m, const tok_tokenizer *tok, const char *text, size_t n, int window,
                              pii_spans *out, float *sensitivity);

/* Rules, plus the model when m and tok are given; resolved, code-point offsets set.
 * *sensitivity: the model's score, or (rules only) 1 if anything was found with score >= 0.5,
 * else 0. */
ll_status pii_scan(const char *text, size_t n, pii_model *m, const tok_tokenizer *tok, pii_spans *out,
                   float *sensitivity);

#endif
