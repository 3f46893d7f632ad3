/*
 * tokenizer.h — byte-level BPE tokenizer of the Qwen family (Qwen2/3, Qwen3.5/3.6) and the
 * incremental detokenizer used for streaming.
 *
 * Encoding, as HuggingFace `tokenizers` does it for these files:
 *   1. added tokens (<|im_start|>, <think>, ...) are matched whole in the raw text, leftmost-longest;
 *   2. every other segment is NFC-normalised (utf8proc), if the file asks for it;
 *   3. split by the pre-tokenizer regex taken from the file (PCRE2, UTF + UCP, JIT);
 *   4. each piece is byte-level BPE'd by merge rank (heap + linked list: O(n log n) per piece).
 *
 * Invalid UTF-8 input has a defined treatment (never a crash): NFC is applied to each maximal valid
 * run, and the invalid bytes pass through as their own pieces, encoded as single-byte tokens. So
 * tok_decode(..., TOK_DEC_RAW) gives the input bytes back exactly (after NFC of the valid runs), and
 * the default decode replaces each maximal invalid subsequence by U+FFFD, as HF / Rust's
 * from_utf8_lossy does.
 *
 * A tokenizer is immutable after loading and may be shared by threads; encode/decode keep their
 * scratch per call (a few allocations per call, none per token).
 */
#ifndef LILAC_TOKENIZER_H
#define LILAC_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

typedef struct tok_tokenizer tok_tokenizer;

/* Token types, numbered as GGUF's tokenizer.ggml.token_type (llama.cpp's llama_token_type). */
enum {
    TOK_TYPE_UNUSED0 = 0, /* missing id (a hole in the vocabulary) */
    TOK_TYPE_NORMAL = 1,  /* ordinary BPE token, stored byte-level encoded */
    TOK_TYPE_UNKNOWN = 2,
    TOK_TYPE_CONTROL = 3, /* special added token (<|im_start|>): matched whole, skippable in decode */
    TOK_TYPE_USER = 4,    /* non-special added token (<think>): matched whole, never skipped */
    TOK_TYPE_UNUSED = 5,
    TOK_TYPE_BYTE = 6,
};

/* Growable outputs. Zero-initialise, reuse across calls (no allocation once large enough), free
 * with tok_ids_free / tok_str_free. tok_str keeps a NUL after the last byte. */
typedef struct tok_ids {
    int32_t *ids; /* [n] */
    size_t n, cap;
} tok_ids;
typedef struct tok_str {
    char *s; /* [n] + NUL */
    size_t n, cap;
} tok_str;
void tok_ids_free(tok_ids *v);
void tok_str_free(tok_str *s);
ll_status tok_str_append(tok_str *s, const void *p, size_t n);

/* An added token given on top of the vocabulary (tokenizer.json added_tokens,
 * tokenizer_config.json added_tokens_decoder). Its content is plain text, not byte-level. */
typedef struct tok_added {
    int32_t id;
    const char *content;
    int special; /* 1: TOK_TYPE_CONTROL, 0: TOK_TYPE_USER */
} tok_added;

/* Everything a tokenizer is built from, as plain arrays: what tokenizer.json holds, and what a
 * GGUF's tokenizer.ggml.{tokens,token_type,merges} arrays hold (with the regex chosen from
 * tokenizer.ggml.pre through tok_pre_regex). The builder copies everything it keeps. */
typedef struct tok_spec {
    const char *const *tokens; /* [n_tokens] byte-level strings for NORMAL tokens, plain text for
                                  CONTROL/USER ones; NULL entries are holes */
    const int32_t *types;      /* [n_tokens] TOK_TYPE_*, or NULL: all NORMAL */
    int32_t n_tokens;
    const char *const *merges; /* [n_merges] "left right", byte-level, rank = index */
    const char *const *merge_pairs; /* or [2 * n_merges] left, right (tokens that hold spaces) */
    int32_t n_merges;
    const tok_added *added;    /* [n_added] applied over tokens/types (may extend the id range) */
    int32_t n_added;
    const char *split_regex;   /* pre-tokenizer pattern (PCRE2 syntax; Oniguruma's \p{..} is the same) */
    int nfc;                   /* 1: NFC-normalise text outside added tokens */
    int ignore_merges;         /* HF BPE ignore_merges: a piece that is a whole vocab token wins */
    const char *chat_template; /* optional, kept for tok_chat_template */
    const char *eos_token, *bos_token, *pad_token; /* optional role names (token text) */
} tok_spec;

ll_status tok_build(const tok_spec *spec, tok_tokenizer **out);

/* HF tokenizer.json text (+ optional tokenizer_config.json text, for added_tokens_decoder, roles
 * and chat_template; config may be NULL). `name` is used in error messages. */
ll_status tok_load_json(const char *json, size_t len, const char *config, size_t config_len, const char *name,
                        tok_tokenizer **out);
/* A tokenizer.json file, or a model directory holding tokenizer.json (+ tokenizer_config.json,
 * chat_template.jinja when present), or else vocab.json + merges.txt + tokenizer_config.json (NFC,
 * regex from the config's pretokenize_regex, Qwen2's otherwise). GGUF files are refused for now
 * (needs the GGUF reader; see docs/tokenizer.md for the glue). */
ll_status tok_load_file(const char *path, tok_tokenizer **out);
void tok_free(tok_tokenizer *t);

/* The split regex for a llama.cpp pre-tokenizer name (tokenizer.ggml.pre): "qwen2" (Qwen2/3)
 * or "qwen35" (Qwen3.5/3.6). NULL when unknown. */
const char *tok_pre_regex(const char *name);

/* Parses merges.txt text ("left right" per line, optional "#version" first line). On success
 * *merges points to [*n] strings inside *storage (free both with ll_free). */
ll_status tok_parse_merges_txt(const char *text, size_t len, char ***merges, int32_t *n, char **storage);

/* ---- queries ---- */
int32_t tok_n_vocab(const tok_tokenizer *t);      /* ids are 0 .. n_vocab-1 (holes possible) */
int tok_type(const tok_tokenizer *t, int32_t id); /* TOK_TYPE_*; TOK_TYPE_UNUSED0 if out of range */
/* The token's string as the file spells it (byte-level for NORMAL tokens), or NULL. */
const char *tok_piece(const tok_tokenizer *t, int32_t id);
/* The raw bytes the token decodes to (not NUL-terminated), or NULL. */
const char *tok_bytes(const tok_tokenizer *t, int32_t id, size_t *len);
/* Id of a token whose file spelling is exactly `piece` (added tokens first), or -1. */
int32_t tok_find(const tok_tokenizer *t, const char *piece);
int32_t tok_eos(const tok_tokenizer *t);          /* from tokenizer_config eos_token, or -1 */
int32_t tok_bos(const tok_tokenizer *t);
int32_t tok_pad(const tok_tokenizer *t);
const char *tok_chat_template(const tok_tokenizer *t); /* text or NULL */

/* ---- encode ---- */
enum {
    TOK_ENC_SPECIAL_AS_TEXT = 1u << 0, /* CONTROL tokens' text is encoded as plain text */
    TOK_ENC_ADDED_AS_TEXT = 1u << 1,   /* ... and so is the text of every added token (USER too) */
};
/* Appends the ids of `text` (len bytes, any bytes) to `out`. No BOS/EOS is added. */
ll_status tok_encode(const tok_tokenizer *t, const char *text, size_t len, unsigned flags, tok_ids *out);

/* ---- decode ---- */
enum {
    TOK_DEC_SKIP_SPECIAL = 1u << 0, /* drop CONTROL tokens */
    TOK_DEC_RAW = 1u << 1,          /* give the bytes as they are (no U+FFFD repair) */
};
/* Appends the text of ids[0..n) to `out`. An id outside the vocabulary is LL_ERR_INVALID. */
ll_status tok_decode(const tok_tokenizer *t, const int32_t *ids, size_t n, unsigned flags, tok_str *out);

/* Incremental decoder: feed ids one at a time; each push appends only complete, valid UTF-8 and
 * holds back a partial character (at most 3 bytes) until a later token completes it. The
 * concatenation of all pushes and the final flush equals tok_decode of all ids. */
typedef struct tok_stream {
    const tok_tokenizer *t;
    unsigned flags;   /* TOK_DEC_SKIP_SPECIAL honoured */
    uint8_t pend[4];  /* held-back prefix of an incomplete character */
    int npend;
} tok_stream;
void tok_stream_init(tok_stream *s, const tok_tokenizer *t, unsigned flags);
ll_status tok_stream_push(tok_stream *s, int32_t id, tok_str *out);
/* Ends the stream: a dangling partial character becomes one U+FFFD. */
ll_status tok_stream_flush(tok_stream *s, tok_str *out);

/* UTF-8 helpers shared with the template engine and server. */
/* Appends `s` to `out`, replacing each maximal invalid subsequence with U+FFFD. If !final, an
 * incomplete (but so far valid) sequence at the end is not consumed; returns bytes consumed. */
size_t tok_utf8_lossy(const uint8_t *s, size_t n, int final, tok_str *out, ll_status *st);
/* Length of the valid UTF-8 sequence at s (1-4), or 0 if s starts an invalid/incomplete one. */
int tok_utf8_seq_len(const uint8_t *s, size_t n);

#endif
