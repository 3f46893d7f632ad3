/*
 * st_testutil.h — test helpers that write small safetensors files (to build variants of the
 * fixtures: renamed, dropped, re-typed or malformed tensors) and read them back.
 */
#ifndef LILAC_ST_TESTUTIL_H
#define LILAC_ST_TESTUTIL_H

#include <cjson/cJSON.h>

#include "format/safetensors.h"
#include "testutil.h"

typedef struct tu_st_entry {
    char name[256];
    char dtype[8];
    int n_dims;
    int64_t shape[LL_MAX_DIMS];
    const void *data;
    size_t nbytes;
} tu_st_entry;

typedef struct tu_st {
    int n, cap;
    tu_st_entry *e;
} tu_st;

static inline tu_st_entry *tu_st_add(tu_st *w, const char *name, const char *dtype, int nd, const int64_t *shape, const void *data,
                                     size_t nbytes) {
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 64;
        w->e = realloc(w->e, (size_t)w->cap * sizeof(tu_st_entry));
        assert_non_null(w->e);
    }
    tu_st_entry *e = &w->e[w->n++];
    memset(e, 0, sizeof(*e));
    if (snprintf(e->name, sizeof(e->name), "%s", name) >= (int)sizeof(e->name)) fail_msg("name too long: %s", name);
    snprintf(e->dtype, sizeof(e->dtype), "%s", dtype);
    e->n_dims = nd;
    for (int i = 0; i < nd; i++) e->shape[i] = shape[i];
    e->data = data;
    e->nbytes = nbytes;
    return e;
}

/* Copies every tensor of a parsed file (views stay pointing into it). */
static inline void tu_st_add_all(tu_st *w, const st_file *f) {
    for (int64_t i = 0; i < f->n_tensors; i++) {
        const ll_tensor *t = &f->tensors[i];
        tu_st_add(w, t->name, st_dtype_name(t->type), t->n_dims, t->shape, t->data, t->nbytes);
    }
}

static inline tu_st_entry *tu_st_get(tu_st *w, const char *name) {
    for (int i = 0; i < w->n; i++)
        if (!strcmp(w->e[i].name, name)) return &w->e[i];
    return NULL;
}

static inline void tu_st_remove(tu_st *w, const char *name) {
    for (int i = 0; i < w->n; i++)
        if (!strcmp(w->e[i].name, name)) {
            memmove(&w->e[i], &w->e[i + 1], (size_t)(w->n - i - 1) * sizeof(tu_st_entry));
            w->n--;
            return;
        }
    fail_msg("tu_st_remove: no tensor %s", name);
}

/* Serialises to a malloc'd image (header padded to 8 bytes, data packed in entry order). */
static inline uint8_t *tu_st_image(const tu_st *w, size_t *len) {
    cJSON *root = cJSON_CreateObject();
    cJSON *md = cJSON_AddObjectToObject(root, "__metadata__");
    cJSON_AddStringToObject(md, "format", "pt");
    size_t off = 0;
    for (int i = 0; i < w->n; i++) {
        const tu_st_entry *e = &w->e[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "dtype", e->dtype);
        cJSON *sh = cJSON_AddArrayToObject(o, "shape");
        for (int d = 0; d < e->n_dims; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)e->shape[d]));
        cJSON *of = cJSON_AddArrayToObject(o, "data_offsets");
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)(off + e->nbytes)));
        cJSON_AddItemToObject(root, e->name, o);
        off += e->nbytes;
    }
    char *js = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    size_t hl = strlen(js), hp = (hl + 7) & ~(size_t)7;
    uint8_t *img = malloc(8 + hp + off + 1);
    assert_non_null(img);
    uint64_t h = hp;
    memcpy(img, &h, 8);
    memcpy(img + 8, js, hl);
    memset(img + 8 + hl, ' ', hp - hl);
    free(js);
    size_t p = 8 + hp;
    for (int i = 0; i < w->n; i++) {
        if (w->e[i].nbytes) memcpy(img + p, w->e[i].data, w->e[i].nbytes);
        p += w->e[i].nbytes;
    }
    *len = p;
    return img;
}

static inline void tu_st_write(const tu_st *w, const char *path) {
    size_t len;
    uint8_t *img = tu_st_image(w, &len);
    tu_write_file(path, img, len);
    free(img);
}

static inline void tu_st_free(tu_st *w) {
    free(w->e);
    memset(w, 0, sizeof(*w));
}

/* Copies a fixture file (e.g. config.json) into dir. */
static inline void tu_copy_file(const char *src, const char *dir, const char *name) {
    char *buf;
    size_t len;
    assert_int_equal(ll_read_file(src, &buf, &len), LL_OK);
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    tu_write_file(p, buf, len);
    ll_free(buf);
}

/* Removes a flat temporary directory made by tu_tmpdir. */
static inline void tu_rmdir(const char *dir) {
    char cmd[PATH_MAX + 16];
    if (strncmp(dir, "/tmp/lilac-test-", 16) != 0) return;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0) print_message("could not remove %s\n", dir);
}

static inline float tu_f32_at(const ll_tensor *t, int64_t i) {
    float v;
    if (t->type == LL_TYPE_F32) { memcpy(&v, (const uint8_t *)t->data + 4 * i, 4); return v; }
    uint16_t h;
    memcpy(&h, (const uint8_t *)t->data + 2 * i, 2);
    return t->type == LL_TYPE_BF16 ? ll_bf16_to_f32(h) : ll_f16_to_f32(h);
}

/* Asserts that the last error message contains every given fragment. */
#define tu_assert_err_has(...)                                                         \
    do {                                                                               \
        const char *frags_[] = {__VA_ARGS__};                                          \
        for (size_t k_ = 0; k_ < sizeof(frags_) / sizeof(frags_[0]); k_++)            \
            if (!strstr(ll_errmsg(), frags_[k_]))                                      \
                fail_msg("error message '%s' lacks '%s'", ll_errmsg(), frags_[k_]);  \
    } while (0)

#endif
