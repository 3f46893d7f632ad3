/*
 * snapshot.h — prefix reuse for a model whose recurrent (GDN) state cannot be rolled back: a store
 * of state snapshots keyed by (namespace, token sequence), and a file format for one snapshot.
 *
 * A snapshot is an opaque byte blob (the session serialises its KV cache, conv windows and
 * recurrent states however it likes) taken after processing tokens[0, n_tokens). A new prompt
 * resumes from the longest stored snapshot whose tokens are a prefix of it, in the SAME namespace
 * only (the namespace is the API key: state never leaks between keys), and prefills the rest.
 * A snapshot that covers the whole prompt leaves no token to compute logits from, so a caller that
 * needs the logits of the last prompt token looks up with n - 1 tokens (or stores the logits in
 * its blob).
 *
 * The store is an LRU bounded by a byte budget. Accounted bytes per entry: blob size + 4 bytes per
 * token + namespace length + 1. Inserting evicts least-recently-used entries until the new one
 * fits; a lookup hit or a re-insert makes an entry most recent. Lookup is a linear scan over the
 * entries (there are tens, each a ~60 MiB state, not thousands), comparing token arrays.
 *
 * Not thread-safe: the scheduler owns the store and serialises access.
 *
 * File format (all integers little-endian):
 *   0   8  magic "LLSNAP\r\n" (the CR LF catches text-mode mangling)
 *   8   4  u32 format version (LL_SNAP_VERSION)
 *   12  4  u32 model identity length M (<= 4096)
 *   16  8  u64 token count N
 *   24  8  u64 blob size B
 *   32  M  model identity (bytes, no NUL)
 *   .  4N  i32 token ids
 *   .   B  blob
 *   .   4  u32 CRC-32 (IEEE 802.3, reflected, as zlib's crc32) of every byte before it
 * The file is written to PATH.tmp and renamed over PATH, so a crash never leaves half a file
 * under the real name.
 */
#ifndef LILAC_SNAPSHOT_H
#define LILAC_SNAPSHOT_H

#include "base/base.h"

#define LL_SNAP_VERSION 1u
#define LL_SNAP_MAX_MODEL_ID 4096u

typedef struct ll_snap {
    const char *ns;        /* namespace */
    const int32_t *tokens; /* [n_tokens] */
    size_t n_tokens;
    const void *blob;      /* [blob_size] */
    size_t blob_size;
} ll_snap;

typedef struct ll_snap_store ll_snap_store;

ll_snap_store *ll_snap_store_new(size_t budget_bytes); /* NULL on OOM */
void ll_snap_store_free(ll_snap_store *st);

/* Copies (ns, tokens, blob) into the store, replacing an entry with the same namespace and tokens,
 * and evicting LRU entries to stay within the budget. LL_ERR_OOM if the entry alone exceeds the
 * budget or memory runs out (the store is unchanged then, except for a replaced entry). */
ll_status ll_snap_store_put(ll_snap_store *st, const char *ns, const int32_t *tokens, size_t n_tokens,
                            const void *blob, size_t blob_size);

/* The longest snapshot in namespace `ns` whose tokens are a prefix of prompt[0, n) (length <= n),
 * or NULL. A hit becomes most recent. The returned view is valid until the next put/remove/clear. */
const ll_snap *ll_snap_store_lookup(ll_snap_store *st, const char *ns, const int32_t *prompt, size_t n);

/* Removes the entry with exactly these tokens in `ns`; returns 1 if there was one. */
int ll_snap_store_remove(ll_snap_store *st, const char *ns, const int32_t *tokens, size_t n_tokens);
void ll_snap_store_clear(ll_snap_store *st);

size_t ll_snap_store_count(const ll_snap_store *st);
size_t ll_snap_store_bytes(const ll_snap_store *st);  /* accounted bytes in use */
size_t ll_snap_store_budget(const ll_snap_store *st);
/* The i-th entry from most to least recently used (i < count), for inspection and tests. */
const ll_snap *ll_snap_store_at(const ll_snap_store *st, size_t i);

/* ---- files ---- */

/* Writes one snapshot with the model identity string (e.g. architecture + weights digest). */
ll_status ll_snap_save(const char *path, const char *model_id, const int32_t *tokens, size_t n_tokens,
                       const void *blob, size_t blob_size);

/* A loaded snapshot; free with ll_snap_file_free. ns is NULL. */
typedef struct ll_snap_file {
    ll_snap snap;
    int32_t *tokens;
    void *blob;
} ll_snap_file;

/* Reads and verifies a file: LL_ERR_IO if it cannot be read, LL_ERR_FORMAT if it is not a snapshot,
 * truncated, oversized or fails the checksum, LL_ERR_UNSUPPORTED for another format version,
 * LL_ERR_INVALID if it belongs to another model. Each message names the path and the problem. */
ll_status ll_snap_load(const char *path, const char *model_id, ll_snap_file *out);
void ll_snap_file_free(ll_snap_file *f);

/* Convenience: load a file and put it into the store under namespace `ns`. */
ll_status ll_snap_store_load(ll_snap_store *st, const char *ns, const char *path, const char *model_id);

/* CRC-32 (IEEE, reflected; crc32("123456789") = 0xCBF43926). Chain with crc = ll_crc32(crc, ...),
 * starting from 0. */
uint32_t ll_crc32(uint32_t crc, const void *data, size_t n);

#endif
