/*
 * stop.h — when generation ends, and which text may be shown: stop token ids, stop strings matched
 * on the detokenized text stream across token boundaries, and a token limit.
 *
 * The generation loop feeds every sampled token with the text piece the incremental detokenizer
 * produced for it. The matcher returns the text that is safe to emit now. Text that could still be
 * the beginning of a stop string is held back until it is resolved: if the stop string completes,
 * neither it nor anything after it is ever emitted (OpenAI semantics: the stop sequence is not part
 * of the output); if it does not, the held text is released with a later token or by
 * ll_stop_finish(). A trailing incomplete UTF-8 sequence is held back too, so emitted text never
 * ends in the middle of a character.
 *
 * Reasons, checked in this order for each token:
 *   LL_STOP_TOKEN   the id is a stop id (e.g. <|im_end|>, EOS): its piece is not emitted; text held
 *                   back so far is released.
 *   LL_STOP_STRING  a stop string completed: text before it is emitted, the rest dropped. The
 *                   first string to complete in the byte stream wins (the longest if several
 *                   complete at the same byte), so the result does not depend on how the text
 *                   was split into tokens.
 *   LL_STOP_LENGTH  this was the max_tokens-th token: its text is kept, held text released.
 * After a stop, further feeds are a programmer error (LL_ASSERT); ll_stop_reset starts over.
 */
#ifndef LILAC_STOP_H
#define LILAC_STOP_H

#include "base/base.h"

typedef enum ll_stop_reason {
    LL_STOP_NONE = 0, /* keep generating */
    LL_STOP_TOKEN,
    LL_STOP_STRING,
    LL_STOP_LENGTH,
} ll_stop_reason;

typedef struct ll_stop_params {
    const int32_t *stop_ids;     /* [n_stop_ids] */
    int32_t n_stop_ids;
    const char *const *stop_strs; /* [n_stop_strs] NUL-terminated, non-empty */
    int32_t n_stop_strs;
    int64_t max_tokens;          /* <= 0: unlimited */
} ll_stop_params;

typedef struct ll_stop ll_stop;

typedef struct ll_stop_out {
    const char *text;      /* bytes safe to emit now (owned by the matcher, valid until next call) */
    size_t len;
    ll_stop_reason reason; /* LL_STOP_NONE: continue */
    int32_t which;         /* index of the stop id or stop string that matched, else -1 */
} ll_stop_out;

/* Copies the ids and strings. LL_ERR_INVALID for an empty stop string. */
ll_status ll_stop_new(const ll_stop_params *p, ll_stop **out);
void ll_stop_free(ll_stop *s);
void ll_stop_reset(ll_stop *s);

/* Feeds one generated token and its decoded text piece (may be empty, may be a partial UTF-8
 * sequence). Never allocates once the internal buffer has grown to the longest stop string plus
 * the longest piece. */
ll_status ll_stop_feed(ll_stop *s, int32_t token_id, const char *piece, size_t len, ll_stop_out *out);

/* End of generation for another reason (client gone, context full): releases the held text. */
void ll_stop_finish(ll_stop *s, ll_stop_out *out);

int64_t ll_stop_n_tokens(const ll_stop *s); /* tokens fed since creation/reset */

#endif
