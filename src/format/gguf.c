/* gguf.c — GGUF reader and writer; see gguf.h. */
#include "gguf.h"

#include "arena.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* ---------------------------------------------------------------- reader */

const char *gguf_type_name(gguf_type t) {
    static const char *names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
    return (unsigned)t < GGUF_TYPE_COUNT_ ? names[t] : "?";
}

static size_t scalar_size(gguf_type t) {
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

typedef struct cursor {
    const uint8_t *d;
    size_t pos, size;
    gguf_file *g;
} cursor;

static size_t cur_left(const cursor *c) { return c->size - c->pos; }

static ll_status cur_read(cursor *c, void *dst, size_t n, const char *what) {
    if (cur_left(c) < n)
        return ll_err(LL_ERR_FORMAT, "%s: truncated: %s at byte offset %zu needs %zu bytes, %zu left", c->g->path, what, c->pos, n, cur_left(c));
    memcpy(dst, c->d + c->pos, n); /* host is little endian (x86-64 / aarch64) */
    c->pos += n;
    return LL_OK;
}

static ll_status cur_u32(cursor *c, uint32_t *v, const char *what) { return cur_read(c, v, 4, what); }
static ll_status cur_u64(cursor *c, uint64_t *v, const char *what) { return cur_read(c, v, 8, what); }

static ll_status cur_str(cursor *c, const char **out, const char *what) {
    uint64_t len;
    size_t at = c->pos;
    LL_TRY(cur_u64(c, &len, what));
    if (len > cur_left(c))
        return ll_err(LL_ERR_FORMAT, "%s: %s at byte offset %zu has length %llu, past the end of the file", c->g->path, what, at,
                      (unsigned long long)len);
    char *s = fmt_arena_alloc(&c->g->arena, (size_t)len + 1);
    if (!s) return ll_err(LL_ERR_OOM, "%s: out of memory", c->g->path);
    memcpy(s, c->d + c->pos, (size_t)len);
    s[len] = '\0';
    c->pos += (size_t)len;
    *out = s;
    return LL_OK;
}

static ll_status read_value(cursor *c, gguf_type type, gguf_value *v, const char *key, int depth) {
    memset(v, 0, sizeof(*v));
    if ((unsigned)type >= GGUF_TYPE_COUNT_)
        return ll_err(LL_ERR_FORMAT, "%s: key '%s': unknown value type %u at byte offset %zu", c->g->path, key, (unsigned)type, c->pos);
    v->type = type;
    size_t sz = scalar_size(type);
    if (sz) {
        uint8_t b[8] = {0};
        LL_TRY(cur_read(c, b, sz, key));
        switch (type) {
        case GGUF_TYPE_UINT8: v->v.u64 = b[0]; break;
        case GGUF_TYPE_INT8: v->v.i64 = (int8_t)b[0]; break;
        case GGUF_TYPE_BOOL: v->v.u64 = b[0] != 0; break;
        case GGUF_TYPE_UINT16: { uint16_t x; memcpy(&x, b, 2); v->v.u64 = x; break; }
        case GGUF_TYPE_INT16: { int16_t x; memcpy(&x, b, 2); v->v.i64 = x; break; }
        case GGUF_TYPE_UINT32: { uint32_t x; memcpy(&x, b, 4); v->v.u64 = x; break; }
        case GGUF_TYPE_INT32: { int32_t x; memcpy(&x, b, 4); v->v.i64 = x; break; }
        case GGUF_TYPE_FLOAT32: { float x; memcpy(&x, b, 4); v->v.f64 = x; break; }
        case GGUF_TYPE_UINT64: memcpy(&v->v.u64, b, 8); break;
        case GGUF_TYPE_INT64: memcpy(&v->v.i64, b, 8); break;
        case GGUF_TYPE_FLOAT64: memcpy(&v->v.f64, b, 8); break;
        default: break;
        }
        return LL_OK;
    }
    if (type == GGUF_TYPE_STRING) return cur_str(c, &v->v.str, key);
    /* array */
    uint32_t at;
    uint64_t n;
    size_t pos0 = c->pos;
    LL_TRY(cur_u32(c, &at, key));
    LL_TRY(cur_u64(c, &n, key));
    if (at >= GGUF_TYPE_COUNT_)
        return ll_err(LL_ERR_FORMAT, "%s: key '%s': array of unknown type %u at byte offset %zu", c->g->path, key, at, pos0);
    v->arr_type = (gguf_type)at;
    v->n = n;
    size_t esz = scalar_size((gguf_type)at);
    /* the least bytes one element can take: checked before allocating anything */
    size_t min_el = esz ? esz : at == GGUF_TYPE_STRING ? 8 : 12;
    if (n > cur_left(c) / min_el)
        return ll_err(LL_ERR_FORMAT, "%s: key '%s': array of %llu %s elements at byte offset %zu runs past the end of the file", c->g->path,
                      key, (unsigned long long)n, gguf_type_name((gguf_type)at), pos0);
    if (esz) {
        void *a = fmt_arena_alloc(&c->g->arena, (size_t)n * esz + 1);
        if (!a) return ll_err(LL_ERR_OOM, "%s: out of memory", c->g->path);
        LL_TRY(cur_read(c, a, (size_t)n * esz, key));
        v->arr = a;
    } else if (at == GGUF_TYPE_STRING) {
        const char **s = fmt_arena_alloc(&c->g->arena, (size_t)n * sizeof(char *) + 1);
        if (!s) return ll_err(LL_ERR_OOM, "%s: out of memory", c->g->path);
        for (uint64_t i = 0; i < n; i++) LL_TRY(cur_str(c, &s[i], key));
        v->strs = s;
    } else {
        if (depth >= 4) return ll_err(LL_ERR_FORMAT, "%s: key '%s': arrays nested too deeply", c->g->path, key);
        gguf_value *sub = fmt_arena_alloc(&c->g->arena, (size_t)n * sizeof(gguf_value) + 1);
        if (!sub) return ll_err(LL_ERR_OOM, "%s: out of memory", c->g->path);
        for (uint64_t i = 0; i < n; i++) LL_TRY(read_value(c, GGUF_TYPE_ARRAY, &sub[i], key, depth + 1));
        v->sub = sub;
    }
    return LL_OK;
}

void gguf_close(gguf_file *g) {
    if (!g) return;
    ll_free(g->kv);
    ll_free(g->tensors);
    ll_free(g->tensor_offsets);
    ll_free(g->by_name);
    fmt_arena_free(g->arena);
    ll_free(g->path);
    if (g->map.path) ll_mapfile_close(&g->map);
    ll_free(g);
}

static int cmp_tensor_pp_name(const void *a, const void *b) {
    return strcmp((*(const ll_tensor *const *)a)->name, (*(const ll_tensor *const *)b)->name);
}
static int cmp_tensor_pp_data(const void *a, const void *b) {
    const uint8_t *x = (*(const ll_tensor *const *)a)->data, *y = (*(const ll_tensor *const *)b)->data;
    return x < y ? -1 : x > y;
}

static ll_status parse_tensor_info(cursor *c, gguf_file *g, int64_t i) {
    ll_tensor *t = &g->tensors[i];
    char what[48];
    snprintf(what, sizeof(what), "tensor info %lld", (long long)i);
    const char *name;
    LL_TRY(cur_str(c, &name, what));
    t->name = name;
    uint32_t nd;
    LL_TRY(cur_u32(c, &nd, name));
    if (nd == 0 || nd > GGUF_MAX_DIMS)
        return ll_err(LL_ERR_FORMAT, "%s: tensor '%s': %u dimensions (1 to %d allowed)", g->path, name, nd, GGUF_MAX_DIMS);
    uint64_t ne[GGUF_MAX_DIMS];
    for (uint32_t d = 0; d < nd; d++) LL_TRY(cur_u64(c, &ne[d], name));
    uint32_t ty;
    LL_TRY(cur_u32(c, &ty, name));
    LL_TRY(cur_u64(c, &g->tensor_offsets[i], name));
    /* lilac-only ids (>= LL_TYPE_U8) never appear in a GGUF file */
    if (!quant_type_valid((int)ty) || ty >= LL_TYPE_U8)
        return ll_err(LL_ERR_UNSUPPORTED, "%s: tensor '%s': unknown or unsupported ggml type id %u", g->path, name, ty);
    t->type = (ll_type)ty;
    t->n_dims = (int32_t)nd;
    double nel = 1;
    for (uint32_t d = 0; d < nd; d++) {
        if (ne[d] > (uint64_t)INT64_MAX / 2)
            return ll_err(LL_ERR_FORMAT, "%s: tensor '%s': dimension %u is %llu", g->path, name, d, (unsigned long long)ne[d]);
        t->shape[nd - 1 - d] = (int64_t)ne[d];
        nel *= (double)ne[d];
    }
    if (nel > (double)((uint64_t)1 << 52)) return ll_err(LL_ERR_FORMAT, "%s: tensor '%s': too many elements", g->path, name);
    int64_t be = quant_block_elems(t->type);
    if ((int64_t)ne[0] % be != 0)
        return ll_err(LL_ERR_FORMAT, "%s: tensor '%s': row length %llu is not a multiple of %s's block of %lld", g->path, name,
                      (unsigned long long)ne[0], quant_type_name(t->type), (long long)be);
    uint64_t rows = 1;
    for (uint32_t d = 1; d < nd; d++) rows *= ne[d];
    t->nbytes = quant_row_bytes(t->type, (int64_t)ne[0]) * (size_t)rows;
    return LL_OK;
}

ll_status gguf_parse(gguf_file **out, const uint8_t *data, size_t size, const char *label) {
    *out = NULL;
    gguf_file *g = ll_calloc(1, sizeof(*g));
    if (!g) return ll_err(LL_ERR_OOM, "%s: out of memory", label);
    g->path = ll_strdup(label);
    if (!g->path) { ll_free(g); return ll_err(LL_ERR_OOM, "%s: out of memory", label); }
    g->data = data;
    g->size = size;
    cursor c = {data, 0, size, g};
    ll_status st;
    char magic[4];
    uint64_t n_tensors, n_kv;
    if (size < 4 || memcmp(data, GGUF_MAGIC, 4) != 0) {
        st = ll_err(LL_ERR_FORMAT, "%s: not a GGUF file (bad magic)", label);
        goto fail;
    }
    if ((st = cur_read(&c, magic, 4, "magic")) != LL_OK) goto fail;
    if ((st = cur_u32(&c, &g->version, "version")) != LL_OK) goto fail;
    if (g->version != 2 && g->version != 3) {
        st = ll_err(LL_ERR_UNSUPPORTED, "%s: GGUF version %u is not supported (2 and 3 are)", label, g->version);
        goto fail;
    }
    if ((st = cur_u64(&c, &n_tensors, "tensor count")) != LL_OK) goto fail;
    if ((st = cur_u64(&c, &n_kv, "metadata count")) != LL_OK) goto fail;
    /* a KV takes at least 8 + 4 + 1 bytes, a tensor info at least 8 + 4 + 8 + 4 + 8 */
    if (n_kv > cur_left(&c) / 13) {
        st = ll_err(LL_ERR_FORMAT, "%s: metadata count %llu cannot fit in the file (%zu bytes)", label, (unsigned long long)n_kv, size);
        goto fail;
    }
    if (n_tensors > cur_left(&c) / 32) {
        st = ll_err(LL_ERR_FORMAT, "%s: tensor count %llu cannot fit in the file (%zu bytes)", label, (unsigned long long)n_tensors, size);
        goto fail;
    }
    g->kv = ll_calloc(n_kv ? (size_t)n_kv : 1, sizeof(gguf_kv));
    if (!g->kv) { st = ll_err(LL_ERR_OOM, "%s: out of memory", label); goto fail; }
    for (uint64_t i = 0; i < n_kv; i++) {
        gguf_kv *kv = &g->kv[i];
        char what[48];
        snprintf(what, sizeof(what), "metadata key %llu", (unsigned long long)i);
        if ((st = cur_str(&c, &kv->key, what)) != LL_OK) goto fail;
        for (uint64_t j = 0; j < i; j++)
            if (!strcmp(g->kv[j].key, kv->key)) { st = ll_err(LL_ERR_FORMAT, "%s: metadata key '%s' appears twice", label, kv->key); goto fail; }
        uint32_t ty;
        if ((st = cur_u32(&c, &ty, kv->key)) != LL_OK) goto fail;
        if ((st = read_value(&c, (gguf_type)ty, &kv->val, kv->key, 0)) != LL_OK) goto fail;
        g->n_kv = (int64_t)i + 1;
    }
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_kv *al = gguf_find_kv(g, "general.alignment");
    if (al) {
        if (al->val.type != GGUF_TYPE_UINT32) {
            st = ll_err(LL_ERR_FORMAT, "%s: general.alignment has type %s (u32 expected)", label, gguf_type_name(al->val.type));
            goto fail;
        }
        uint64_t a = al->val.v.u64;
        if (a == 0 || (a & (a - 1)) != 0) {
            st = ll_err(LL_ERR_FORMAT, "%s: general.alignment = %llu is not a power of two", label, (unsigned long long)a);
            goto fail;
        }
        g->alignment = (uint32_t)a;
    }
    if (n_tensors > cur_left(&c) / 32) {
        st = ll_err(LL_ERR_FORMAT, "%s: tensor count %llu cannot fit in the file (%zu bytes)", label, (unsigned long long)n_tensors, size);
        goto fail;
    }
    size_t nt = n_tensors ? (size_t)n_tensors : 1;
    g->tensors = ll_calloc(nt, sizeof(ll_tensor));
    g->tensor_offsets = ll_calloc(nt, sizeof(uint64_t));
    g->by_name = ll_calloc(nt, sizeof(*g->by_name));
    if (!g->tensors || !g->tensor_offsets || !g->by_name) { st = ll_err(LL_ERR_OOM, "%s: out of memory", label); goto fail; }
    for (uint64_t i = 0; i < n_tensors; i++) {
        if ((st = parse_tensor_info(&c, g, (int64_t)i)) != LL_OK) goto fail;
        g->n_tensors = (int64_t)i + 1;
    }
    size_t a = g->alignment;
    size_t ds = c.pos % a ? c.pos + (a - c.pos % a) : c.pos;
    if (n_tensors && ds > size) {
        st = ll_err(LL_ERR_FORMAT, "%s: data section (byte offset %zu) starts past the end of the file", label, ds);
        goto fail;
    }
    g->data_start = ds;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        ll_tensor *t = &g->tensors[i];
        uint64_t off = g->tensor_offsets[i];
        if (off % a != 0) {
            st = ll_err(LL_ERR_FORMAT, "%s: tensor '%s': offset %llu is not a multiple of the alignment %zu", label, t->name, (unsigned long long)off, a);
            goto fail;
        }
        if (off > size - ds || t->nbytes > size - ds - off) {
            st = ll_err(LL_ERR_FORMAT, "%s: tensor '%s': data [%llu, +%zu) at file offset %llu runs past the end of the file (%zu bytes)", label,
                        t->name, (unsigned long long)off, t->nbytes, (unsigned long long)(ds + off), size);
            goto fail;
        }
        t->data = data + ds + off;
        g->by_name[i] = t;
    }
    qsort(g->by_name, (size_t)g->n_tensors, sizeof(*g->by_name), cmp_tensor_pp_data);
    for (int64_t i = 1; i < g->n_tensors; i++) {
        const ll_tensor *p = g->by_name[i - 1], *t = g->by_name[i];
        if (p->nbytes && t->nbytes && (const uint8_t *)t->data < (const uint8_t *)p->data + p->nbytes) {
            st = ll_err(LL_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap", label, p->name, t->name);
            goto fail;
        }
    }
    qsort(g->by_name, (size_t)g->n_tensors, sizeof(*g->by_name), cmp_tensor_pp_name);
    for (int64_t i = 1; i < g->n_tensors; i++)
        if (!strcmp(g->by_name[i - 1]->name, g->by_name[i]->name)) {
            st = ll_err(LL_ERR_FORMAT, "%s: tensor '%s' appears twice", label, g->by_name[i]->name);
            goto fail;
        }
    *out = g;
    return LL_OK;
fail:
    gguf_close(g);
    return st;
}

ll_status gguf_open(gguf_file **out, const char *path) {
    *out = NULL;
    ll_mapfile m;
    LL_TRY(ll_mapfile_open(&m, path));
    ll_status st = gguf_parse(out, m.data, m.size, path);
    if (st != LL_OK) { ll_mapfile_close(&m); return st; }
    (*out)->map = m;
    return LL_OK;
}

const gguf_kv *gguf_find_kv(const gguf_file *g, const char *key) {
    for (int64_t i = 0; i < g->n_kv; i++)
        if (!strcmp(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

int gguf_has(const gguf_file *g, const char *key) { return gguf_find_kv(g, key) != NULL; }

static ll_status need_kv(const gguf_file *g, const char *key, const gguf_kv **kv) {
    *kv = gguf_find_kv(g, key);
    if (!*kv) return ll_err(LL_ERR_FORMAT, "%s: metadata key '%s' is missing", g->path, key);
    return LL_OK;
}

static ll_status bad_type(const gguf_file *g, const char *key, gguf_type have, const char *want) {
    return ll_err(LL_ERR_FORMAT, "%s: metadata key '%s' has type %s (%s expected)", g->path, key, gguf_type_name(have), want);
}

static int is_unsigned(gguf_type t) {
    return t == GGUF_TYPE_UINT8 || t == GGUF_TYPE_UINT16 || t == GGUF_TYPE_UINT32 || t == GGUF_TYPE_UINT64;
}
static int is_signed(gguf_type t) {
    return t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_INT32 || t == GGUF_TYPE_INT64;
}

ll_status gguf_get_i64(const gguf_file *g, const char *key, int64_t *out) {
    const gguf_kv *kv;
    LL_TRY(need_kv(g, key, &kv));
    if (is_signed(kv->val.type)) { *out = kv->val.v.i64; return LL_OK; }
    if (is_unsigned(kv->val.type)) {
        if (kv->val.v.u64 > (uint64_t)INT64_MAX) return ll_err(LL_ERR_FORMAT, "%s: metadata key '%s' is out of range", g->path, key);
        *out = (int64_t)kv->val.v.u64;
        return LL_OK;
    }
    return bad_type(g, key, kv->val.type, "integer");
}

ll_status gguf_get_u32(const gguf_file *g, const char *key, uint32_t *out) {
    int64_t v;
    LL_TRY(gguf_get_i64(g, key, &v));
    if (v < 0 || v > (int64_t)UINT32_MAX)
        return ll_err(LL_ERR_FORMAT, "%s: metadata key '%s' = %lld is out of range for u32", g->path, key, (long long)v);
    *out = (uint32_t)v;
    return LL_OK;
}

ll_status gguf_get_f32(const gguf_file *g, const char *key, float *out) {
    const gguf_kv *kv;
    LL_TRY(need_kv(g, key, &kv));
    if (kv->val.type != GGUF_TYPE_FLOAT32 && kv->val.type != GGUF_TYPE_FLOAT64) return bad_type(g, key, kv->val.type, "f32");
    *out = (float)kv->val.v.f64;
    return LL_OK;
}

ll_status gguf_get_bool(const gguf_file *g, const char *key, int *out) {
    const gguf_kv *kv;
    LL_TRY(need_kv(g, key, &kv));
    if (kv->val.type != GGUF_TYPE_BOOL) return bad_type(g, key, kv->val.type, "bool");
    *out = (int)kv->val.v.u64;
    return LL_OK;
}

ll_status gguf_get_str(const gguf_file *g, const char *key, const char **out) {
    const gguf_kv *kv;
    LL_TRY(need_kv(g, key, &kv));
    if (kv->val.type != GGUF_TYPE_STRING) return bad_type(g, key, kv->val.type, "string");
    *out = kv->val.v.str;
    return LL_OK;
}

ll_status gguf_get_arr(const gguf_file *g, const char *key, const gguf_value **out) {
    const gguf_kv *kv;
    LL_TRY(need_kv(g, key, &kv));
    if (kv->val.type != GGUF_TYPE_ARRAY) return bad_type(g, key, kv->val.type, "array");
    *out = &kv->val;
    return LL_OK;
}

static ll_status get_arr_of(const gguf_file *g, const char *key, gguf_type et, const gguf_value **v) {
    LL_TRY(gguf_get_arr(g, key, v));
    if ((*v)->arr_type != et)
        return ll_err(LL_ERR_FORMAT, "%s: metadata key '%s' is an array of %s (%s expected)", g->path, key,
                      gguf_type_name((*v)->arr_type), gguf_type_name(et));
    return LL_OK;
}

ll_status gguf_get_arr_str(const gguf_file *g, const char *key, const char *const **out, uint64_t *n) {
    const gguf_value *v;
    LL_TRY(get_arr_of(g, key, GGUF_TYPE_STRING, &v));
    *out = v->strs;
    *n = v->n;
    return LL_OK;
}

ll_status gguf_get_arr_i32(const gguf_file *g, const char *key, const int32_t **out, uint64_t *n) {
    const gguf_value *v;
    LL_TRY(get_arr_of(g, key, GGUF_TYPE_INT32, &v));
    *out = v->arr;
    *n = v->n;
    return LL_OK;
}

ll_status gguf_get_arr_f32(const gguf_file *g, const char *key, const float **out, uint64_t *n) {
    const gguf_value *v;
    LL_TRY(get_arr_of(g, key, GGUF_TYPE_FLOAT32, &v));
    *out = v->arr;
    *n = v->n;
    return LL_OK;
}

const ll_tensor *gguf_find_tensor(const gguf_file *g, const char *name) {
    int64_t lo = 0, hi = g->n_tensors - 1;
    while (lo <= hi) {
        int64_t mid = (lo + hi) / 2;
        int c = strcmp(g->by_name[mid]->name, name);
        if (c == 0) return g->by_name[mid];
        if (c < 0) lo = mid + 1; else hi = mid - 1;
    }
    return NULL;
}

/* ---------------------------------------------------------------- writer */

typedef struct wtensor {
    char *name;
    ll_type type;
    int n_dims;
    int64_t shape[GGUF_MAX_DIMS];
    const void *data;
    size_t nbytes;
} wtensor;

struct gguf_writer {
    uint8_t *kv;        /* serialised metadata */
    size_t kv_len, kv_cap;
    uint64_t n_kv;
    char **keys;        /* [n_kv] for duplicate checks */
    wtensor *t;
    int64_t n_t, cap_t;
    uint32_t alignment;
    int failed;         /* an append ran out of memory */
    int64_t cur;        /* streaming: tensor whose data comes next */
    size_t cur_done;    /* bytes of it written so far */
};

gguf_writer *gguf_writer_new(void) {
    gguf_writer *w = ll_calloc(1, sizeof(*w));
    if (w) w->alignment = GGUF_DEFAULT_ALIGNMENT;
    return w;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    for (uint64_t i = 0; i < w->n_kv; i++) ll_free(w->keys[i]);
    for (int64_t i = 0; i < w->n_t; i++) ll_free(w->t[i].name);
    ll_free(w->keys);
    ll_free(w->t);
    ll_free(w->kv);
    ll_free(w);
}

static void put(gguf_writer *w, const void *p, size_t n) {
    if (w->failed) return;
    if (w->kv_len + n > w->kv_cap) {
        size_t cap = w->kv_cap ? w->kv_cap : 4096;
        while (cap < w->kv_len + n) cap *= 2;
        uint8_t *nb = ll_realloc(w->kv, cap);
        if (!nb) { w->failed = 1; return; }
        w->kv = nb;
        w->kv_cap = cap;
    }
    memcpy(w->kv + w->kv_len, p, n);
    w->kv_len += n;
}
static void put_u32(gguf_writer *w, uint32_t v) { put(w, &v, 4); }
static void put_u64(gguf_writer *w, uint64_t v) { put(w, &v, 8); }
static void put_str(gguf_writer *w, const char *s) {
    uint64_t n = strlen(s);
    put_u64(w, n);
    put(w, s, (size_t)n);
}

/* Starts a key: duplicate check, key string and value type. */
static ll_status begin_kv(gguf_writer *w, const char *key, gguf_type t) {
    for (uint64_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->keys[i], key)) return ll_err(LL_ERR_INVALID, "gguf writer: key '%s' set twice", key);
    char **nk = ll_realloc(w->keys, (size_t)(w->n_kv + 1) * sizeof(char *));
    if (!nk) return ll_err(LL_ERR_OOM, "gguf writer: out of memory");
    w->keys = nk;
    if (!(w->keys[w->n_kv] = ll_strdup(key))) return ll_err(LL_ERR_OOM, "gguf writer: out of memory");
    w->n_kv++;
    put_str(w, key);
    put_u32(w, (uint32_t)t);
    return w->failed ? ll_err(LL_ERR_OOM, "gguf writer: out of memory") : LL_OK;
}

static ll_status end_kv(gguf_writer *w) { return w->failed ? ll_err(LL_ERR_OOM, "gguf writer: out of memory") : LL_OK; }

ll_status gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v) {
    if (!strcmp(key, "general.alignment")) {
        if (v == 0 || (v & (v - 1))) return ll_err(LL_ERR_INVALID, "gguf writer: general.alignment = %u is not a power of two", v);
        w->alignment = v;
    }
    LL_TRY(begin_kv(w, key, GGUF_TYPE_UINT32));
    put_u32(w, v);
    return end_kv(w);
}
ll_status gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v) {
    LL_TRY(begin_kv(w, key, GGUF_TYPE_INT32));
    put(w, &v, 4);
    return end_kv(w);
}
ll_status gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v) {
    LL_TRY(begin_kv(w, key, GGUF_TYPE_UINT64));
    put_u64(w, v);
    return end_kv(w);
}
ll_status gguf_writer_set_f32(gguf_writer *w, const char *key, float v) {
    LL_TRY(begin_kv(w, key, GGUF_TYPE_FLOAT32));
    put(w, &v, 4);
    return end_kv(w);
}
ll_status gguf_writer_set_bool(gguf_writer *w, const char *key, int v) {
    LL_TRY(begin_kv(w, key, GGUF_TYPE_BOOL));
    uint8_t b = v != 0;
    put(w, &b, 1);
    return end_kv(w);
}
ll_status gguf_writer_set_str(gguf_writer *w, const char *key, const char *v) {
    LL_TRY(begin_kv(w, key, GGUF_TYPE_STRING));
    put_str(w, v);
    return end_kv(w);
}
ll_status gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *v, uint64_t n) {
    LL_TRY(begin_kv(w, key, GGUF_TYPE_ARRAY));
    put_u32(w, GGUF_TYPE_STRING);
    put_u64(w, n);
    for (uint64_t i = 0; i < n; i++) put_str(w, v[i]);
    return end_kv(w);
}
ll_status gguf_writer_set_arr_i32(gguf_writer *w, const char *key, const int32_t *v, uint64_t n) {
    LL_TRY(begin_kv(w, key, GGUF_TYPE_ARRAY));
    put_u32(w, GGUF_TYPE_INT32);
    put_u64(w, n);
    put(w, v, (size_t)n * 4);
    return end_kv(w);
}
ll_status gguf_writer_set_arr_f32(gguf_writer *w, const char *key, const float *v, uint64_t n) {
    LL_TRY(begin_kv(w, key, GGUF_TYPE_ARRAY));
    put_u32(w, GGUF_TYPE_FLOAT32);
    put_u64(w, n);
    put(w, v, (size_t)n * 4);
    return end_kv(w);
}

ll_status gguf_writer_add_tensor(gguf_writer *w, const char *name, ll_type type, int n_dims, const int64_t *shape,
                                 const void *data) {
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS) return ll_err(LL_ERR_INVALID, "gguf writer: tensor '%s': %d dimensions", name, n_dims);
    if (!quant_type_valid(type) || type >= LL_TYPE_U8)
        return ll_err(LL_ERR_INVALID, "gguf writer: tensor '%s': type %s cannot be stored in GGUF", name, quant_type_name(type));
    if (shape[n_dims - 1] % quant_block_elems(type) != 0)
        return ll_err(LL_ERR_INVALID, "gguf writer: tensor '%s': row of %lld is not a multiple of %s's block", name,
                      (long long)shape[n_dims - 1], quant_type_name(type));
    for (int64_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name)) return ll_err(LL_ERR_INVALID, "gguf writer: tensor '%s' added twice", name);
    if (w->n_t == w->cap_t) {
        int64_t cap = w->cap_t ? w->cap_t * 2 : 64;
        wtensor *nt = ll_realloc(w->t, (size_t)cap * sizeof(wtensor));
        if (!nt) return ll_err(LL_ERR_OOM, "gguf writer: out of memory");
        w->t = nt;
        w->cap_t = cap;
    }
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof(*t));
    if (!(t->name = ll_strdup(name))) return ll_err(LL_ERR_OOM, "gguf writer: out of memory");
    t->type = type;
    t->n_dims = n_dims;
    int64_t rows = 1;
    for (int d = 0; d < n_dims; d++) {
        t->shape[d] = shape[d];
        if (d < n_dims - 1) rows *= shape[d];
    }
    t->nbytes = quant_row_bytes(type, shape[n_dims - 1]) * (size_t)rows;
    t->data = data;
    w->n_t++;
    return LL_OK;
}

static size_t pad_to(size_t x, size_t a) { return x % a ? x + (a - x % a) : x; }

static ll_status put_value(gguf_writer *w, const gguf_value *v, const char *key);

/* Serialises a value's payload (no type tag), recursively for nested arrays. */
static ll_status put_payload(gguf_writer *w, gguf_type t, const gguf_value *v, const char *key) {
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: { uint8_t b = (uint8_t)v->v.u64; put(w, &b, 1); break; }
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: { uint16_t b = (uint16_t)v->v.u64; put(w, &b, 2); break; }
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: { uint32_t b = (uint32_t)v->v.u64; put(w, &b, 4); break; }
    case GGUF_TYPE_FLOAT32: { float f = (float)v->v.f64; put(w, &f, 4); break; }
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: put_u64(w, v->v.u64); break;
    case GGUF_TYPE_FLOAT64: put(w, &v->v.f64, 8); break;
    case GGUF_TYPE_STRING: put_str(w, v->v.str ? v->v.str : ""); break;
    case GGUF_TYPE_ARRAY: LL_TRY(put_value(w, v, key)); break;
    default: return ll_err(LL_ERR_INVALID, "gguf writer: key '%s': value type %d cannot be written", key, (int)t);
    }
    return w->failed ? ll_err(LL_ERR_OOM, "gguf writer: out of memory") : LL_OK;
}

/* An array value: element type, count, elements. */
static ll_status put_value(gguf_writer *w, const gguf_value *v, const char *key) {
    static const uint8_t esz[GGUF_TYPE_COUNT_] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    put_u32(w, (uint32_t)v->arr_type);
    put_u64(w, v->n);
    if (v->arr_type == GGUF_TYPE_STRING) {
        for (uint64_t i = 0; i < v->n; i++) put_str(w, v->strs[i] ? v->strs[i] : "");
    } else if (v->arr_type == GGUF_TYPE_ARRAY) {
        for (uint64_t i = 0; i < v->n; i++) LL_TRY(put_value(w, &v->sub[i], key));
    } else if ((int)v->arr_type >= 0 && v->arr_type < GGUF_TYPE_COUNT_ && esz[v->arr_type]) {
        put(w, v->arr, (size_t)v->n * esz[v->arr_type]);
    } else {
        return ll_err(LL_ERR_INVALID, "gguf writer: key '%s': array element type %d cannot be written", key, (int)v->arr_type);
    }
    return w->failed ? ll_err(LL_ERR_OOM, "gguf writer: out of memory") : LL_OK;
}

ll_status gguf_writer_set_value(gguf_writer *w, const char *key, const gguf_value *v) {
    if (v->type == GGUF_TYPE_UINT32 && !strcmp(key, "general.alignment")) return gguf_writer_set_u32(w, key, (uint32_t)v->v.u64);
    LL_TRY(begin_kv(w, key, v->type));
    LL_TRY(put_payload(w, v->type, v, key));
    return end_kv(w);
}

/* n zero bytes (alignment padding); 0 on a write error. */
static int write_zeros(FILE *f, size_t n) {
    static const uint8_t z[256];
    while (n > 0) {
        size_t k = LL_MIN(n, sizeof(z));
        if (fwrite(z, 1, k, f) != k) return 0;
        n -= k;
    }
    return 1;
}

ll_status gguf_writer_begin(gguf_writer *w, FILE *f, const char *label) {
    if (w->failed) return ll_err(LL_ERR_OOM, "gguf writer: out of memory");
    int ok = 1;
    uint32_t version = 3;
    uint64_t nt = (uint64_t)w->n_t;
    size_t pos = 0;
#define WR(p, n) do { if (ok && fwrite((p), 1, (n), f) != (n)) ok = 0; pos += (n); } while (0)
    WR(GGUF_MAGIC, 4);
    WR(&version, 4);
    WR(&nt, 8);
    WR(&w->n_kv, 8);
    WR(w->kv, w->kv_len);
    size_t off = 0;
    for (int64_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        uint64_t len = strlen(t->name);
        uint32_t nd = (uint32_t)t->n_dims, ty = (uint32_t)t->type;
        WR(&len, 8);
        WR(t->name, (size_t)len);
        WR(&nd, 4);
        for (int d = t->n_dims - 1; d >= 0; d--) { uint64_t ne = (uint64_t)t->shape[d]; WR(&ne, 8); }
        WR(&ty, 4);
        uint64_t o = off;
        WR(&o, 8);
        off = pad_to(off + t->nbytes, w->alignment);
    }
#undef WR
    if (ok) ok = write_zeros(f, pad_to(pos, w->alignment) - pos);
    w->cur = 0;
    w->cur_done = 0;
    if (!ok) return ll_err(LL_ERR_IO, "%s: write failed: %s", label, strerror(errno));
    return LL_OK;
}

/* Ends the current tensor (padding) once all its bytes are in, skipping empty tensors. */
static int advance(gguf_writer *w, FILE *f) {
    int ok = 1;
    while (w->cur < w->n_t && w->cur_done == w->t[w->cur].nbytes) {
        if (ok) ok = write_zeros(f, pad_to(w->t[w->cur].nbytes, w->alignment) - w->t[w->cur].nbytes);
        w->cur++;
        w->cur_done = 0;
    }
    return ok;
}

ll_status gguf_writer_put_data(gguf_writer *w, FILE *f, const void *p, size_t n, const char *label) {
    const uint8_t *b = p;
    if (!advance(w, f)) return ll_err(LL_ERR_IO, "%s: write failed: %s", label, strerror(errno));
    while (n > 0) {
        if (w->cur >= w->n_t) return ll_err(LL_ERR_INVALID, "gguf writer: %zu bytes of data beyond the last tensor", n);
        const wtensor *t = &w->t[w->cur];
        size_t k = LL_MIN(n, t->nbytes - w->cur_done);
        if (fwrite(b, 1, k, f) != k) return ll_err(LL_ERR_IO, "%s: write failed (tensor '%s'): %s", label, t->name, strerror(errno));
        w->cur_done += k;
        b += k;
        n -= k;
        if (!advance(w, f)) return ll_err(LL_ERR_IO, "%s: write failed: %s", label, strerror(errno));
    }
    return LL_OK;
}

uint64_t gguf_writer_data_offset(const gguf_writer *w, int64_t i) {
    size_t off = 0;
    for (int64_t k = 0; k < i && k < w->n_t; k++) off = pad_to(off + w->t[k].nbytes, w->alignment);
    return off;
}

ll_status gguf_writer_end(gguf_writer *w, FILE *f, const char *label) {
    if (!advance(w, f)) return ll_err(LL_ERR_IO, "%s: write failed: %s", label, strerror(errno));
    if (w->cur < w->n_t)
        return ll_err(LL_ERR_INVALID, "gguf writer: tensor '%s' got %zu of %zu bytes", w->t[w->cur].name, w->cur_done, w->t[w->cur].nbytes);
    return LL_OK;
}

ll_status gguf_writer_write(gguf_writer *w, const char *path) {
    if (w->failed) return ll_err(LL_ERR_OOM, "gguf writer: out of memory");
    for (int64_t i = 0; i < w->n_t; i++)
        if (!w->t[i].data && w->t[i].nbytes) return ll_err(LL_ERR_INVALID, "gguf writer: tensor '%s' has no data", w->t[i].name);
    FILE *f = fopen(path, "wb");
    if (!f) return ll_err(LL_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    ll_status st = gguf_writer_begin(w, f, path);
    for (int64_t i = 0; i < w->n_t && st == LL_OK; i++) st = gguf_writer_put_data(w, f, w->t[i].data, w->t[i].nbytes, path);
    if (st == LL_OK) st = gguf_writer_end(w, f, path);
    if (fclose(f) != 0 && st == LL_OK) st = ll_err(LL_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return st;
}
