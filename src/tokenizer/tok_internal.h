/* tok_internal.h — the tokenizer struct, shared by tokenizer.c and tok_load.c only. */
#ifndef LILAC_TOK_INTERNAL_H
#define LILAC_TOK_INTERNAL_H

#include <stdint.h>

#include "tokenizer/tokenizer.h"

struct pcre2_real_code_8;

struct tok_tokenizer {
    int32_t n;              /* ids 0..n-1 */
    uint8_t *type;          /* [n] TOK_TYPE_* (0 = hole) */
    uint32_t *piece_off;    /* [n] offset of the NUL-terminated spelling in piece */
    char *piece;            /* spelling pool; offset 0 is "" */
    uint32_t *raw_off;      /* [n + 1] raw bytes of token i are raw[raw_off[i] .. raw_off[i+1]) */
    char *raw;
    int32_t *vmap;          /* [vmask + 1] open addressing, raw bytes → id, -1 empty */
    uint32_t vmask;
    uint64_t *mkey;         /* [mmask + 1] (left << 32 | right), UINT64_MAX empty */
    struct { int32_t rank, id; } *mval; /* [mmask + 1] */
    uint32_t mmask;
    int32_t byte_id[256];   /* token of each single byte */
    uint16_t byte_cp[256];  /* GPT-2 byte → code point */
    int16_t cp_byte[512];   /* and back (-1 when not in the map) */
    int32_t *added;         /* [n_added] added token ids, by first byte, longest first */
    uint32_t *alen;         /* [n_added] byte length of each added token */
    int32_t n_added;
    uint32_t abeg[257];     /* added[abeg[c] .. abeg[c+1]) start with byte c */
    struct pcre2_real_code_8 *re;
    int nfc, ignore_merges;
    char *chat_template;
    int32_t eos, bos, pad;
};

uint64_t tok_hash(const void *p, size_t n);
int32_t tok_vocab_lookup(const tok_tokenizer *t, const void *raw, size_t n);
int tok_merge_insert(tok_tokenizer *t, int32_t a, int32_t b, int32_t rank, int32_t nid);
void tok_byte_map_init(uint16_t byte_cp[256], int16_t cp_byte[512]);

#endif
