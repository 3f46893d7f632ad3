/* safetensors.c — safetensors reader (single file and sharded index); see safetensors.h. */
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* Largest integer a JSON double holds exactly; offsets and dims beyond it are rejected. */
#define ST_MAX_INT 9007199254740992.0
/* Header sizes above this are surely corrupt (the real 35B header is ~100 KB). */
#define ST_MAX_HEADER (100u << 20)

static const struct { const char *name; ll_type type; } st_dtypes[] = {
    {"F32", LL_TYPE_F32}, {"BF16", LL_TYPE_BF16}, {"F16", LL_TYPE_F16}, {"I32", LL_TYPE_I32},
    {"U32", LL_TYPE_U32}, {"U8", LL_TYPE_U8},     {"I8", LL_TYPE_I8},   {"I16", LL_TYPE_I16},
    {"I64", LL_TYPE_I64}, {"F64", LL_TYPE_F64},
};

int st_dtype_from_name(const char *s, ll_type *t) {
    for (size_t i = 0; i < LL_ARRAY_LEN(st_dtypes); i++)
        if (!strcmp(st_dtypes[i].name, s)) { *t = st_dtypes[i].type; return 0; }
    return -1;
}

const char *st_dtype_name(ll_type t) {
    for (size_t i = 0; i < LL_ARRAY_LEN(st_dtypes); i++)
        if (st_dtypes[i].type == t) return st_dtypes[i].name;
    return NULL;
}

static int json_uint(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return 0;
    double d = j->valuedouble;
    if (!isfinite(d) || d < 0 || d > ST_MAX_INT || floor(d) != d) return 0;
    *out = (uint64_t)d;
    return 1;
}

static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp(((const ll_tensor *)a)->name, ((const ll_tensor *)b)->name);
}

static int cmp_tensor_ptr_offset(const void *a, const void *b) {
    const ll_tensor *x = *(const ll_tensor *const *)a, *y = *(const ll_tensor *const *)b;
    const uint8_t *px = x->data, *py = y->data;
    return px < py ? -1 : px > py ? 1 : 0;
}

void st_close(st_file *f) {
    if (!f) return;
    ll_free(f->tensors);
    ll_free(f->names);
    ll_free(f->path);
    if (f->map.path) ll_mapfile_close(&f->map);
    memset(f, 0, sizeof(*f));
}

/* Validates one header entry and fills t (name set by the caller). */
static ll_status parse_entry(const st_file *f, const cJSON *e, ll_tensor *t, size_t data_size) {
    const char *nm = e->string;
    if (!cJSON_IsObject(e)) return ll_err(LL_ERR_FORMAT, "%s: tensor '%s': header entry is not an object", f->path, nm);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!dt) return ll_err(LL_ERR_FORMAT, "%s: tensor '%s': missing \"dtype\"", f->path, nm);
    if (!cJSON_IsString(dt)) return ll_err(LL_ERR_FORMAT, "%s: tensor '%s': \"dtype\" is not a string", f->path, nm);
    if (!sh) return ll_err(LL_ERR_FORMAT, "%s: tensor '%s': missing \"shape\"", f->path, nm);
    if (!cJSON_IsArray(sh)) return ll_err(LL_ERR_FORMAT, "%s: tensor '%s': \"shape\" is not an array", f->path, nm);
    if (!off) return ll_err(LL_ERR_FORMAT, "%s: tensor '%s': missing \"data_offsets\"", f->path, nm);
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2)
        return ll_err(LL_ERR_FORMAT, "%s: tensor '%s': \"data_offsets\" is not an array of 2 integers", f->path, nm);
    ll_type type;
    if (st_dtype_from_name(dt->valuestring, &type) != 0)
        return ll_err(LL_ERR_UNSUPPORTED, "%s: tensor '%s': dtype %s is not supported", f->path, nm, dt->valuestring);
    int nd = cJSON_GetArraySize(sh);
    if (nd > LL_MAX_DIMS)
        return ll_err(LL_ERR_UNSUPPORTED, "%s: tensor '%s': %d dimensions (at most %d supported)", f->path, nm, nd, LL_MAX_DIMS);
    t->type = type;
    t->n_dims = nd;
    /* element count with overflow checks: every product stays below 2^53 */
    double nelem = 1;
    int i = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, sh) {
        uint64_t v;
        if (!json_uint(d, &v)) return ll_err(LL_ERR_FORMAT, "%s: tensor '%s': shape[%d] is not a non-negative integer", f->path, nm, i);
        t->shape[i++] = (int64_t)v;
        nelem *= (double)v;
    }
    if (nelem > ST_MAX_INT / 8)
        return ll_err(LL_ERR_FORMAT, "%s: tensor '%s': shape is too large", f->path, nm);
    uint64_t b, en;
    if (!json_uint(cJSON_GetArrayItem(off, 0), &b) || !json_uint(cJSON_GetArrayItem(off, 1), &en))
        return ll_err(LL_ERR_FORMAT, "%s: tensor '%s': \"data_offsets\" is not an array of 2 integers", f->path, nm);
    if (en < b)
        return ll_err(LL_ERR_FORMAT, "%s: tensor '%s': data_offsets end %llu < begin %llu", f->path, nm,
                      (unsigned long long)en, (unsigned long long)b);
    if (en > data_size)
        return ll_err(LL_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] out of range (data region is %zu bytes, file offset %llu)",
                      f->path, nm, (unsigned long long)b, (unsigned long long)en, data_size,
                      (unsigned long long)(f->data_start + b));
    uint64_t want = (uint64_t)nelem * quant_block_bytes(type);
    if (en - b != want) {
        char sbuf[128];
        return ll_err(LL_ERR_FORMAT, "%s: tensor '%s': %llu bytes but dtype %s shape %s needs %llu", f->path, nm,
                      (unsigned long long)(en - b), dt->valuestring, ll_shape_str(t->shape, nd, sbuf, sizeof(sbuf)),
                      (unsigned long long)want);
    }
    t->data = f->data + f->data_start + b;
    t->nbytes = (size_t)want;
    return LL_OK;
}

ll_status st_parse(st_file *f, const uint8_t *data, size_t size, const char *label) {
    memset(f, 0, sizeof(*f));
    f->path = ll_strdup(label);
    if (!f->path) return ll_err(LL_ERR_OOM, "%s: out of memory", label);
    f->data = data;
    f->size = size;
    if (size < 8) { ll_status st = ll_err(LL_ERR_FORMAT, "%s: file is %zu bytes, too short for a safetensors header", label, size); st_close(f); return st; }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | data[i];
    if (hlen > size - 8) {
        ll_status st = ll_err(LL_ERR_FORMAT, "%s: header length %llu runs past the end of the file (%zu bytes)", label,
                              (unsigned long long)hlen, size);
        st_close(f);
        return st;
    }
    if (hlen > ST_MAX_HEADER) { ll_status st = ll_err(LL_ERR_FORMAT, "%s: header length %llu is implausibly large", label, (unsigned long long)hlen); st_close(f); return st; }
    f->data_start = 8 + (size_t)hlen;
    size_t data_size = size - f->data_start;

    ll_status st = LL_OK;
    const ll_tensor **order = NULL;
    cJSON *root = cJSON_ParseWithLength((const char *)data + 8, (size_t)hlen);
    if (!root) {
        const char *ep = cJSON_GetErrorPtr();
        size_t at = ep ? (size_t)(ep - (const char *)data) : 8;
        if (at > 8 + hlen) at = 8 + (size_t)hlen; /* cJSON may point one past the buffer */
        st = ll_err(LL_ERR_FORMAT, "%s: malformed JSON header (near byte offset %zu)", label, at);
        goto fail;
    }
    if (!cJSON_IsObject(root)) { st = ll_err(LL_ERR_FORMAT, "%s: JSON header is not an object", label); goto fail; }

    int64_t n = 0;
    size_t name_bytes = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, root) {
        if (!e->string) { st = ll_err(LL_ERR_FORMAT, "%s: JSON header has an unnamed entry", label); goto fail; }
        if (!strcmp(e->string, "__metadata__")) {
            if (!cJSON_IsObject(e)) { st = ll_err(LL_ERR_FORMAT, "%s: \"__metadata__\" is not an object", label); goto fail; }
            continue;
        }
        n++;
        name_bytes += strlen(e->string) + 1;
    }
    f->tensors = ll_calloc(n ? (size_t)n : 1, sizeof(ll_tensor));
    f->names = ll_malloc(name_bytes ? name_bytes : 1);
    if (!f->tensors || !f->names) { st = ll_err(LL_ERR_OOM, "%s: out of memory for %lld tensors", label, (long long)n); goto fail; }
    char *np = f->names;
    int64_t k = 0;
    cJSON_ArrayForEach(e, root) {
        if (!strcmp(e->string, "__metadata__")) continue;
        ll_tensor *t = &f->tensors[k];
        size_t ln = strlen(e->string) + 1;
        memcpy(np, e->string, ln);
        t->name = np;
        np += ln;
        if ((st = parse_entry(f, e, t, data_size)) != LL_OK) goto fail;
        k++;
    }
    f->n_tensors = n;
    qsort(f->tensors, (size_t)n, sizeof(ll_tensor), cmp_tensor_name);
    for (int64_t i = 1; i < n; i++)
        if (!strcmp(f->tensors[i - 1].name, f->tensors[i].name)) {
            st = ll_err(LL_ERR_FORMAT, "%s: tensor '%s' appears twice in the header", label, f->tensors[i].name);
            goto fail;
        }
    /* overlap: sort by start; each non-empty tensor must begin at or after the previous end */
    order = ll_malloc((n ? (size_t)n : 1) * sizeof(*order));
    if (!order) { st = ll_err(LL_ERR_OOM, "%s: out of memory", label); goto fail; }
    for (int64_t i = 0; i < n; i++) order[i] = &f->tensors[i];
    qsort(order, (size_t)n, sizeof(*order), cmp_tensor_ptr_offset);
    const ll_tensor *prev = NULL;
    for (int64_t i = 0; i < n; i++) {
        const ll_tensor *t = order[i];
        if (t->nbytes == 0) continue;
        if (prev && (const uint8_t *)t->data < (const uint8_t *)prev->data + prev->nbytes) {
            st = ll_err(LL_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap (data offsets %zu and %zu)", label, prev->name, t->name,
                        (size_t)((const uint8_t *)prev->data - data - f->data_start),
                        (size_t)((const uint8_t *)t->data - data - f->data_start));
            goto fail;
        }
        prev = t;
    }
    ll_free(order);
    cJSON_Delete(root);
    return LL_OK;
fail:
    ll_free(order);
    cJSON_Delete(root);
    st_close(f);
    return st;
}

ll_status st_open(st_file *f, const char *path) {
    memset(f, 0, sizeof(*f));
    ll_mapfile m;
    LL_TRY(ll_mapfile_open(&m, path));
    ll_status st = st_parse(f, m.data, m.size, path);
    if (st != LL_OK) { ll_mapfile_close(&m); return st; }
    f->map = m;
    return LL_OK;
}

const ll_tensor *st_find(const st_file *f, const char *name) {
    int64_t lo = 0, hi = f->n_tensors - 1;
    while (lo <= hi) {
        int64_t mid = (lo + hi) / 2;
        int c = strcmp(f->tensors[mid].name, name);
        if (c == 0) return &f->tensors[mid];
        if (c < 0) lo = mid + 1; else hi = mid - 1;
    }
    return NULL;
}

/* ---- sets of files ---- */

static int cmp_tensor_pp_name(const void *a, const void *b) {
    return strcmp((*(const ll_tensor *const *)a)->name, (*(const ll_tensor *const *)b)->name);
}

void st_set_close(st_set *s) {
    if (!s) return;
    for (int i = 0; i < s->n_files; i++) st_close(&s->files[i]);
    ll_free(s->files);
    ll_free(s->by_name);
    memset(s, 0, sizeof(*s));
}

/* Builds the sorted name table over all files; duplicates across files are errors. */
static ll_status set_build_index(st_set *s) {
    int64_t n = 0;
    for (int i = 0; i < s->n_files; i++) n += s->files[i].n_tensors;
    s->by_name = ll_malloc((n ? (size_t)n : 1) * sizeof(*s->by_name));
    if (!s->by_name) return ll_err(LL_ERR_OOM, "out of memory for the tensor index");
    int64_t k = 0;
    for (int i = 0; i < s->n_files; i++)
        for (int64_t j = 0; j < s->files[i].n_tensors; j++) s->by_name[k++] = &s->files[i].tensors[j];
    s->n_tensors = n;
    qsort(s->by_name, (size_t)n, sizeof(*s->by_name), cmp_tensor_pp_name);
    for (int64_t i = 1; i < n; i++)
        if (!strcmp(s->by_name[i - 1]->name, s->by_name[i]->name))
            return ll_err(LL_ERR_FORMAT, "%s: tensor '%s' is also in %s (duplicate across shards)", st_set_file_of(s, i),
                          s->by_name[i]->name, st_set_file_of(s, i - 1));
    return LL_OK;
}

int64_t st_set_lookup(const st_set *s, const char *name) {
    int64_t lo = 0, hi = s->n_tensors - 1;
    while (lo <= hi) {
        int64_t mid = (lo + hi) / 2;
        int c = strcmp(s->by_name[mid]->name, name);
        if (c == 0) return mid;
        if (c < 0) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
}

const ll_tensor *st_set_find(const st_set *s, const char *name) {
    int64_t i = st_set_lookup(s, name);
    return i < 0 ? NULL : s->by_name[i];
}

const char *st_set_file_of(const st_set *s, int64_t i) {
    const ll_tensor *t = s->by_name[i];
    for (int k = 0; k < s->n_files; k++) {
        const st_file *f = &s->files[k];
        if (f->n_tensors && t >= f->tensors && t < f->tensors + f->n_tensors) return f->path;
    }
    return "?";
}

static char *path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = ll_malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

ll_status st_set_open_index(st_set *s, const char *dir, const char *index, size_t len, const char *index_path) {
    memset(s, 0, sizeof(*s));
    ll_status st = LL_OK;
    const char **shard_names = NULL;
    cJSON *root = cJSON_ParseWithLength(index, len);
    if (!root || !cJSON_IsObject(root)) { st = ll_err(LL_ERR_FORMAT, "%s: malformed JSON", index_path); goto done; }
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(wm)) { st = ll_err(LL_ERR_FORMAT, "%s: missing or non-object \"weight_map\"", index_path); goto done; }
    int n_entries = cJSON_GetArraySize(wm);
    shard_names = ll_calloc(n_entries ? (size_t)n_entries : 1, sizeof(*shard_names));
    if (!shard_names) { st = ll_err(LL_ERR_OOM, "%s: out of memory", index_path); goto done; }
    int n_shards = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, wm) {
        if (!cJSON_IsString(e) || !e->valuestring[0])
            { st = ll_err(LL_ERR_FORMAT, "%s: weight_map entry '%s' is not a file name", index_path, e->string); goto done; }
        const char *fn = e->valuestring;
        if (strchr(fn, '/') || !strcmp(fn, "..") || !strcmp(fn, "."))
            { st = ll_err(LL_ERR_FORMAT, "%s: weight_map entry '%s' names '%s', which is not a plain file name", index_path, e->string, fn); goto done; }
        int found = 0;
        for (int i = 0; i < n_shards && !found; i++) found = !strcmp(shard_names[i], fn);
        if (!found) shard_names[n_shards++] = fn;
    }
    if (n_shards == 0) { st = ll_err(LL_ERR_FORMAT, "%s: weight_map is empty", index_path); goto done; }
    s->files = ll_calloc((size_t)n_shards, sizeof(st_file));
    if (!s->files) { st = ll_err(LL_ERR_OOM, "%s: out of memory", index_path); goto done; }
    for (int i = 0; i < n_shards; i++) {
        char *p = path_join(dir, shard_names[i]);
        if (!p) { st = ll_err(LL_ERR_OOM, "%s: out of memory", index_path); goto done; }
        st = st_open(&s->files[i], p);
        ll_free(p);
        if (st != LL_OK) goto done;
        s->n_files = i + 1;
    }
    /* every tensor the index names must be in the shard it names */
    cJSON_ArrayForEach(e, wm) {
        int i = 0;
        while (strcmp(shard_names[i], e->valuestring)) i++;
        if (!st_find(&s->files[i], e->string)) {
            st = ll_err(LL_ERR_FORMAT, "%s: tensor '%s' is mapped to %s, which does not hold it", index_path, e->string, s->files[i].path);
            goto done;
        }
    }
    st = set_build_index(s);
done:
    ll_free(shard_names);
    cJSON_Delete(root);
    if (st != LL_OK) st_set_close(s);
    return st;
}

static int is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}
static int is_file(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

ll_status st_set_open(st_set *s, const char *path) {
    memset(s, 0, sizeof(*s));
    if (!is_dir(path)) {
        s->files = ll_calloc(1, sizeof(st_file));
        if (!s->files) return ll_err(LL_ERR_OOM, "%s: out of memory", path);
        ll_status st = st_open(&s->files[0], path);
        if (st != LL_OK) { st_set_close(s); return st; }
        s->n_files = 1;
        if ((st = set_build_index(s)) != LL_OK) st_set_close(s);
        return st;
    }
    char *ip = path_join(path, "model.safetensors.index.json");
    if (!ip) return ll_err(LL_ERR_OOM, "%s: out of memory", path);
    if (is_file(ip)) {
        char *txt;
        size_t len;
        ll_status st = ll_read_file(ip, &txt, &len);
        if (st == LL_OK) {
            st = st_set_open_index(s, path, txt, len, ip);
            ll_free(txt);
        }
        ll_free(ip);
        return st;
    }
    ll_free(ip);
    char *fp = path_join(path, "model.safetensors");
    if (!fp) return ll_err(LL_ERR_OOM, "%s: out of memory", path);
    if (!is_file(fp)) {
        ll_free(fp);
        return ll_err(LL_ERR_IO, "%s: no model.safetensors.index.json or model.safetensors in this directory", path);
    }
    ll_status st = st_set_open(s, fp);
    ll_free(fp);
    return st;
}
