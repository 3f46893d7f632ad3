/*
 * mask.h — replacing found values with numbered placeholders ([PRIVATE_EMAIL_1]) and restoring
 * them, in whole texts and in a stream of chunks where a placeholder may be split anywhere.
 *
 * A masker keeps the mapping for one conversation: the same (category, value) always gets the
 * same placeholder, numbered per category in order of first appearance, so a request masked
 * message by message stays consistent and the answer can be restored. Placeholders the masker
 * did not issue pass through unchanged (the upstream model may write "[PRIVATE_EMAIL_9]" itself;
 * nothing is invented for it).
 */
#ifndef LILAC_MASK_H
#define LILAC_MASK_H

#include "privacy/privacy.h"

/* Growable byte buffer (NUL kept after the last byte). Zero-initialise; free with pii_buf_free. */
typedef struct pii_buf {
    char *s; /* [n] + NUL */
    size_t n, cap;
} pii_buf;
ll_status pii_buf_append(pii_buf *b, const void *p, size_t n);
void pii_buf_free(pii_buf *b);

typedef struct pii_mask_entry {
    char *value; /* owned, [vlen] + NUL */
    size_t vlen;
    int label;
    int index;        /* 1-based number within the category */
    char ph[40];      /* "[PRIVATE_EMAIL_1]" */
    size_t phlen;
} pii_mask_entry;

typedef struct pii_masker {
    pii_mask_entry *v; /* [n] */
    size_t n, cap;
    int next_index[PII_N_CAT];
} pii_masker;

#define PII_PLACEHOLDER_MAX 40 /* longest placeholder, brackets included */

void pii_masker_init(pii_masker *m);
void pii_masker_free(pii_masker *m);
/* The placeholder of (label, value), issuing a new one the first time. *out stays valid while m
 * lives. */
ll_status pii_masker_placeholder(pii_masker *m, int label, const char *value, size_t n, const pii_mask_entry **out);
/* The entry whose placeholder is exactly ph[n], or NULL. */
const pii_mask_entry *pii_masker_lookup(const pii_masker *m, const char *ph, size_t n);

/* Replaces the spans of text[n] (byte offsets; sorted, non-overlapping as pii_spans_resolve
 * leaves them) whose category bit is set in cat_mask (bit c = 1u << c) by their placeholders,
 * appending the result to *out. */
ll_status pii_mask_text(pii_masker *m, const char *text, size_t n, const pii_span *spans, size_t ns, uint32_t cat_mask,
                        pii_buf *out);
/* Restores every issued placeholder in text[n], appending to *out. */
ll_status pii_unmask_text(const pii_masker *m, const char *text, size_t n, pii_buf *out);
/* The same for text that sits inside a JSON string (tool call arguments are JSON text): each value
 * is JSON-escaped (its '"', lone '\\' and control bytes; escapes it already has are kept). */
ll_status pii_unmask_text_json(const pii_masker *m, const char *text, size_t n, pii_buf *out);

/* Streaming restore: feed chunks as they arrive; each feed appends everything that can no longer
 * be part of a placeholder and holds back a possible placeholder prefix (at most
 * PII_PLACEHOLDER_MAX bytes) until the next chunk decides it. finish flushes what is held. */
typedef struct pii_unmask_stream {
    const pii_masker *m;
    char hold[PII_PLACEHOLDER_MAX];
    size_t nhold;
    int json;           /* set after init: values JSON-escaped as pii_unmask_text_json does */
} pii_unmask_stream;
void pii_unmask_stream_init(pii_unmask_stream *s, const pii_masker *m);
ll_status pii_unmask_stream_feed(pii_unmask_stream *s, const char *chunk, size_t n, pii_buf *out);
ll_status pii_unmask_stream_finish(pii_unmask_stream *s, pii_buf *out);

#endif
