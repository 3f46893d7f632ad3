/*
 * snapshot.c — the snapshot LRU store, the snapshot file format and CRC-32. See snapshot.h.
 */
#include "runtime/snapshot.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "snapshot files store token ids in host order, which must be little-endian"
#endif

/* ---------------------------------------------------------------- CRC-32 */

/* Slice-by-8 tables: crc_tab[0] is the classic byte-at-a-time table for the reflected polynomial
 * 0xEDB88320; crc_tab[k][b] advances the CRC of byte b by k further zero bytes, so eight input
 * bytes are folded per step (snapshots are tens of MiB; byte-at-a-time would cost ~100 ms). */
static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
        crc_tab[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; b++)
        for (int t = 1; t < 8; t++) crc_tab[t][b] = (crc_tab[t - 1][b] >> 8) ^ crc_tab[0][crc_tab[t - 1][b] & 0xFF];
}

uint32_t ll_crc32(uint32_t crc, const void *data, size_t n) {
    pthread_once(&crc_once, crc_init);
    const uint8_t *p = data;
    uint32_t c = ~crc;
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= c;
        c = crc_tab[7][lo & 0xFF] ^ crc_tab[6][(lo >> 8) & 0xFF] ^ crc_tab[5][(lo >> 16) & 0xFF] ^
            crc_tab[4][lo >> 24] ^ crc_tab[3][hi & 0xFF] ^ crc_tab[2][(hi >> 8) & 0xFF] ^
            crc_tab[1][(hi >> 16) & 0xFF] ^ crc_tab[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ crc_tab[0][(c ^ *p++) & 0xFF];
    return ~c;
}

/* ---------------------------------------------------------------- store */

typedef struct entry {
    ll_snap view;          /* points into the fields below */
    char *ns;
    int32_t *tokens;
    void *blob;
    size_t bytes;          /* accounted size */
    struct entry *prev, *next; /* LRU list: head is most recent */
} entry;

struct ll_snap_store {
    entry *head, *tail;
    size_t count, bytes, budget;
};

ll_snap_store *ll_snap_store_new(size_t budget_bytes) {
    ll_snap_store *st = ll_calloc(1, sizeof(*st));
    if (st) st->budget = budget_bytes;
    return st;
}

static void entry_free(entry *e) {
    ll_free(e->ns);
    ll_free(e->tokens);
    ll_free(e->blob);
    ll_free(e);
}

static void unlink_entry(ll_snap_store *st, entry *e) {
    if (e->prev) e->prev->next = e->next;
    else st->head = e->next;
    if (e->next) e->next->prev = e->prev;
    else st->tail = e->prev;
    e->prev = e->next = NULL;
}

static void push_front(ll_snap_store *st, entry *e) {
    e->prev = NULL;
    e->next = st->head;
    if (st->head) st->head->prev = e;
    st->head = e;
    if (!st->tail) st->tail = e;
}

static void drop(ll_snap_store *st, entry *e) {
    unlink_entry(st, e);
    st->count--;
    st->bytes -= e->bytes;
    entry_free(e);
}

void ll_snap_store_clear(ll_snap_store *st) {
    while (st->head) drop(st, st->head);
}

void ll_snap_store_free(ll_snap_store *st) {
    if (!st) return;
    ll_snap_store_clear(st);
    ll_free(st);
}

static size_t accounted(const char *ns, size_t n_tokens, size_t blob_size) {
    return blob_size + n_tokens * sizeof(int32_t) + strlen(ns) + 1;
}

static entry *find_exact(ll_snap_store *st, const char *ns, const int32_t *tokens, size_t n) {
    for (entry *e = st->head; e; e = e->next)
        if (e->view.n_tokens == n && strcmp(e->ns, ns) == 0 &&
            (n == 0 || memcmp(e->tokens, tokens, n * sizeof(int32_t)) == 0))
            return e;
    return NULL;
}

ll_status ll_snap_store_put(ll_snap_store *st, const char *ns, const int32_t *tokens, size_t n_tokens,
                            const void *blob, size_t blob_size) {
    LL_ASSERT(ns && (tokens || n_tokens == 0) && (blob || blob_size == 0));
    if (n_tokens > SIZE_MAX / 8) return ll_err(LL_ERR_INVALID, "snapshot: %zu tokens", n_tokens);
    size_t need = accounted(ns, n_tokens, blob_size);
    if (need > st->budget)
        return ll_err(LL_ERR_OOM, "snapshot: %zu bytes exceed the store budget of %zu bytes", need, st->budget);
    entry *old = find_exact(st, ns, tokens, n_tokens);
    if (old) drop(st, old);

    entry *e = ll_calloc(1, sizeof(*e));
    if (e) {
        e->ns = ll_strdup(ns);
        e->tokens = ll_malloc(LL_MAX(n_tokens, 1) * sizeof(int32_t));
        e->blob = ll_malloc(LL_MAX(blob_size, 1));
    }
    if (!e || !e->ns || !e->tokens || !e->blob) {
        if (e) entry_free(e);
        return ll_err(LL_ERR_OOM, "snapshot: out of memory for a %zu-byte snapshot", blob_size);
    }
    if (n_tokens) memcpy(e->tokens, tokens, n_tokens * sizeof(int32_t));
    if (blob_size) memcpy(e->blob, blob, blob_size);
    e->bytes = need;
    e->view = (ll_snap){e->ns, e->tokens, n_tokens, e->blob, blob_size};
    while (st->bytes + need > st->budget) drop(st, st->tail);
    push_front(st, e);
    st->count++;
    st->bytes += need;
    return LL_OK;
}

const ll_snap *ll_snap_store_lookup(ll_snap_store *st, const char *ns, const int32_t *prompt, size_t n) {
    entry *best = NULL;
    for (entry *e = st->head; e; e = e->next) {
        size_t m = e->view.n_tokens;
        if (m > n || (best && m <= best->view.n_tokens) || strcmp(e->ns, ns) != 0) continue;
        if (m == 0 || memcmp(e->tokens, prompt, m * sizeof(int32_t)) == 0) best = e;
    }
    if (!best) return NULL;
    unlink_entry(st, best);
    push_front(st, best);
    return &best->view;
}

int ll_snap_store_remove(ll_snap_store *st, const char *ns, const int32_t *tokens, size_t n_tokens) {
    entry *e = find_exact(st, ns, tokens, n_tokens);
    if (!e) return 0;
    drop(st, e);
    return 1;
}

size_t ll_snap_store_count(const ll_snap_store *st) { return st->count; }
size_t ll_snap_store_bytes(const ll_snap_store *st) { return st->bytes; }
size_t ll_snap_store_budget(const ll_snap_store *st) { return st->budget; }

const ll_snap *ll_snap_store_at(const ll_snap_store *st, size_t i) {
    entry *e = st->head;
    while (e && i--) e = e->next;
    return e ? &e->view : NULL;
}

/* ---------------------------------------------------------------- files */

static const char snap_magic[8] = {'L', 'L', 'S', 'N', 'A', 'P', '\r', '\n'};
enum { HEADER_BYTES = 32 };

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* fwrite that also folds the bytes into the running CRC. */
static int write_crc(FILE *f, const void *p, size_t n, uint32_t *crc) {
    *crc = ll_crc32(*crc, p, n);
    return n == 0 || fwrite(p, 1, n, f) == n;
}

ll_status ll_snap_save(const char *path, const char *model_id, const int32_t *tokens, size_t n_tokens,
                       const void *blob, size_t blob_size) {
    size_t mlen = strlen(model_id);
    if (mlen > LL_SNAP_MAX_MODEL_ID)
        return ll_err(LL_ERR_INVALID, "%s: model identity of %zu bytes exceeds %u", path, mlen, LL_SNAP_MAX_MODEL_ID);
    size_t plen = strlen(path);
    char *tmp = ll_malloc(plen + 5);
    if (!tmp) return ll_err(LL_ERR_OOM, "%s: out of memory", path);
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        ll_status st = ll_err(LL_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
        ll_free(tmp);
        return st;
    }
    uint8_t h[HEADER_BYTES];
    memcpy(h, snap_magic, 8);
    put_u32(h + 8, LL_SNAP_VERSION);
    put_u32(h + 12, (uint32_t)mlen);
    put_u64(h + 16, n_tokens);
    put_u64(h + 24, blob_size);
    uint32_t crc = 0;
    int ok = write_crc(f, h, sizeof(h), &crc) && write_crc(f, model_id, mlen, &crc) &&
             write_crc(f, tokens, n_tokens * sizeof(int32_t), &crc) && write_crc(f, blob, blob_size, &crc);
    uint8_t tail[4];
    put_u32(tail, crc);
    ok = ok && fwrite(tail, 1, 4, f) == 4;
    ok = (fflush(f) == 0) && ok;
    ok = (fsync(fileno(f)) == 0) && ok;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        ll_status st = ll_err(LL_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        unlink(tmp);
        ll_free(tmp);
        return st;
    }
    ll_free(tmp);
    return LL_OK;
}

void ll_snap_file_free(ll_snap_file *f) {
    if (!f) return;
    ll_free(f->tokens);
    ll_free(f->blob);
    memset(f, 0, sizeof(*f));
}

/* fread that also folds the bytes into the running CRC. */
static int read_crc(FILE *f, void *p, size_t n, uint32_t *crc) {
    if (n && fread(p, 1, n, f) != n) return 0;
    *crc = ll_crc32(*crc, p, n);
    return 1;
}

ll_status ll_snap_load(const char *path, const char *model_id, ll_snap_file *out) {
    memset(out, 0, sizeof(*out));
    FILE *f = fopen(path, "rb");
    if (!f) return ll_err(LL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    ll_status st = LL_OK;
    char *mid = NULL;
    struct stat sb;
    uint8_t h[HEADER_BYTES];
    if (fstat(fileno(f), &sb) != 0) {
        st = ll_err(LL_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        goto done;
    }
    uint64_t fsize = (uint64_t)sb.st_size;
    if (fsize < 8 || fread(h, 1, 8, f) != 8 || memcmp(h, snap_magic, 8) != 0) {
        st = ll_err(LL_ERR_FORMAT, "%s: not a lilac snapshot file (bad magic at byte 0)", path);
        goto done;
    }
    if (fsize < HEADER_BYTES || fread(h + 8, 1, HEADER_BYTES - 8, f) != HEADER_BYTES - 8) {
        st = ll_err(LL_ERR_FORMAT, "%s: truncated header (%llu bytes)", path, (unsigned long long)fsize);
        goto done;
    }
    uint32_t version = get_u32(h + 8), mlen = get_u32(h + 12);
    uint64_t n_tokens = get_u64(h + 16), blob_size = get_u64(h + 24);
    if (version != LL_SNAP_VERSION) {
        st = ll_err(LL_ERR_UNSUPPORTED, "%s: snapshot format version %u, this build reads version %u", path,
                    version, LL_SNAP_VERSION);
        goto done;
    }
    if (mlen > LL_SNAP_MAX_MODEL_ID) {
        st = ll_err(LL_ERR_FORMAT, "%s: model identity length %u at byte 12 exceeds %u", path, mlen,
                    LL_SNAP_MAX_MODEL_ID);
        goto done;
    }
    /* sizes are checked against the real file size before anything is allocated, so a corrupt
     * count can neither overflow nor ask for absurd memory */
    if (n_tokens > fsize / 4 || blob_size > fsize) {
        st = ll_err(LL_ERR_FORMAT, "%s: token count %llu / blob size %llu in the header exceed the file size %llu",
                    path, (unsigned long long)n_tokens, (unsigned long long)blob_size, (unsigned long long)fsize);
        goto done;
    }
    uint64_t want = HEADER_BYTES + (uint64_t)mlen + n_tokens * 4 + blob_size + 4;
    if (fsize != want) {
        st = ll_err(LL_ERR_FORMAT, "%s: %s: file has %llu bytes, the header describes %llu", path,
                    fsize < want ? "truncated" : "trailing bytes", (unsigned long long)fsize,
                    (unsigned long long)want);
        goto done;
    }
    mid = ll_malloc(mlen + 1);
    out->tokens = ll_malloc(LL_MAX(n_tokens, 1) * sizeof(int32_t));
    out->blob = ll_malloc(LL_MAX(blob_size, 1));
    if (!mid || !out->tokens || !out->blob) {
        st = ll_err(LL_ERR_OOM, "%s: out of memory for a %llu-byte snapshot", path, (unsigned long long)blob_size);
        goto done;
    }
    uint32_t crc = ll_crc32(0, h, HEADER_BYTES);
    uint8_t tail[4];
    if (!read_crc(f, mid, mlen, &crc) || !read_crc(f, out->tokens, n_tokens * 4, &crc) ||
        !read_crc(f, out->blob, blob_size, &crc) || fread(tail, 1, 4, f) != 4) {
        st = ll_err(LL_ERR_IO, "%s: read failed", path);
        goto done;
    }
    if (get_u32(tail) != crc) {
        st = ll_err(LL_ERR_FORMAT, "%s: checksum mismatch (stored %08x, computed %08x): the file is corrupt", path,
                    get_u32(tail), crc);
        goto done;
    }
    mid[mlen] = 0;
    if (strlen(mid) != mlen || strcmp(mid, model_id) != 0) {
        st = ll_err(LL_ERR_INVALID, "%s: snapshot belongs to model '%s', not to the loaded model '%s'", path, mid,
                    model_id);
        goto done;
    }
    for (uint64_t i = 0; i < n_tokens; i++)
        if (out->tokens[i] < 0) {
            st = ll_err(LL_ERR_FORMAT, "%s: token %llu has negative id %d", path, (unsigned long long)i,
                        out->tokens[i]);
            goto done;
        }
    out->snap = (ll_snap){NULL, out->tokens, (size_t)n_tokens, out->blob, (size_t)blob_size};
done:
    fclose(f);
    ll_free(mid);
    if (st != LL_OK) ll_snap_file_free(out);
    return st;
}

ll_status ll_snap_store_load(ll_snap_store *st, const char *ns, const char *path, const char *model_id) {
    ll_snap_file f;
    LL_TRY(ll_snap_load(path, model_id, &f));
    ll_status s = ll_snap_store_put(st, ns, f.snap.tokens, f.snap.n_tokens, f.snap.blob, f.snap.blob_size);
    ll_snap_file_free(&f);
    return s;
}
