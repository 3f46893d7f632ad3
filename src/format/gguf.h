/*
 * gguf.h — GGUF (llama.cpp's model format, versions 2 and 3): reader and writer.
 *
 * Layout (little endian): magic "GGUF", u32 version, u64 n_tensors, u64 n_kv; n_kv metadata
 * pairs (string key, u32 value type, value); n_tensors tensor infos (string name, u32 n_dims,
 * u64 ne[n_dims] innermost first, u32 ggml type, u64 offset); padding to `general.alignment`
 * (default 32); the data section. Strings are u64 length + bytes (no NUL).
 *
 * The reader checks every count and length against the bytes that remain before allocating,
 * and every tensor against the data section. Metadata values are copied out (NUL-terminated
 * strings, aligned numeric arrays) so callers never read unaligned file memory; tensor data
 * stays in the (mapped) file. ll_tensor.shape is in PyTorch order (ne reversed).
 */
#ifndef LILAC_GGUF_H
#define LILAC_GGUF_H

#include <stdio.h>

#include "../base/mapfile.h"
#include "tensor.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4

typedef enum gguf_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT_ = 13,
} gguf_type;

const char *gguf_type_name(gguf_type t);

/* One metadata value. Scalars are widened into u64/i64/f64 (the declared type is kept).
 * Arrays: arr_type and n; numeric/bool elements in `arr` (aligned copy, element type as
 * declared), strings in `strs`, nested arrays in `sub`. */
typedef struct gguf_value {
    gguf_type type;
    union { uint64_t u64; int64_t i64; double f64; const char *str; } v;
    gguf_type arr_type;
    uint64_t n;
    const void *arr;                 /* [n] elements of arr_type (numeric / bool) */
    const char **strs;               /* [n] (arr_type == STRING) */
    struct gguf_value *sub;          /* [n] (arr_type == ARRAY) */
} gguf_value;

typedef struct gguf_kv {
    const char *key;
    gguf_value val;
} gguf_kv;

typedef struct gguf_file {
    char *path;                      /* label for messages */
    ll_mapfile map;                  /* set when opened from a path */
    const uint8_t *data;
    size_t size;
    uint32_t version;
    uint32_t alignment;
    int64_t n_kv;
    gguf_kv *kv;                     /* [n_kv] in file order */
    int64_t n_tensors;
    ll_tensor *tensors;              /* [n_tensors] in file order */
    uint64_t *tensor_offsets;        /* [n_tensors] offsets relative to data_start */
    const ll_tensor **by_name;       /* [n_tensors] sorted by name (lookup) */
    size_t data_start;
    void *arena;                     /* owned copies (strings, arrays); freed by gguf_close */
} gguf_file;

/* Parses a GGUF image held in memory (borrowed). On error *out is NULL. */
ll_status gguf_parse(gguf_file **out, const uint8_t *data, size_t size, const char *label);
ll_status gguf_open(gguf_file **out, const char *path);
void gguf_close(gguf_file *g);

/* ---- metadata lookup. Getters return LL_ERR_FORMAT naming file and key when the key is
 * missing or has an incompatible type (integers convert between widths when in range). ---- */
const gguf_kv *gguf_find_kv(const gguf_file *g, const char *key);
int gguf_has(const gguf_file *g, const char *key);
ll_status gguf_get_u32(const gguf_file *g, const char *key, uint32_t *out);
ll_status gguf_get_i64(const gguf_file *g, const char *key, int64_t *out);
ll_status gguf_get_f32(const gguf_file *g, const char *key, float *out);   /* f32 or f64 */
ll_status gguf_get_bool(const gguf_file *g, const char *key, int *out);
ll_status gguf_get_str(const gguf_file *g, const char *key, const char **out);
/* Arrays: the element pointer stays valid until gguf_close. */
ll_status gguf_get_arr_str(const gguf_file *g, const char *key, const char *const **out, uint64_t *n);
ll_status gguf_get_arr_i32(const gguf_file *g, const char *key, const int32_t **out, uint64_t *n); /* INT32 */
ll_status gguf_get_arr_f32(const gguf_file *g, const char *key, const float **out, uint64_t *n);   /* FLOAT32 */
/* Any array: its element type and count (for callers that accept several types). */
ll_status gguf_get_arr(const gguf_file *g, const char *key, const gguf_value **out);

const ll_tensor *gguf_find_tensor(const gguf_file *g, const char *name);

/* ---- writer: metadata is serialised as it is added; tensors are borrowed until written. ---- */
typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_new(void); /* NULL on OOM */
void gguf_writer_free(gguf_writer *w);
/* Setting a key twice is LL_ERR_INVALID. general.alignment (u32, power of two) also sets the
 * alignment used for the data section. */
ll_status gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v);
ll_status gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v);
ll_status gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v);
ll_status gguf_writer_set_f32(gguf_writer *w, const char *key, float v);
ll_status gguf_writer_set_bool(gguf_writer *w, const char *key, int v);
ll_status gguf_writer_set_str(gguf_writer *w, const char *key, const char *v);
ll_status gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *v, uint64_t n);
ll_status gguf_writer_set_arr_i32(gguf_writer *w, const char *key, const int32_t *v, uint64_t n);
ll_status gguf_writer_set_arr_f32(gguf_writer *w, const char *key, const float *v, uint64_t n);
/* Any metadata value as the reader returns it (scalars, strings, arrays of any element type,
 * nested arrays) — for copying keys from one file to another. */
ll_status gguf_writer_set_value(gguf_writer *w, const char *key, const gguf_value *v);
/* Adds a tensor; shape in PyTorch order (outermost first), innermost dim a multiple of the
 * type's block. `data` (quant_row_bytes * rows bytes) must stay valid until gguf_writer_write;
 * it may be NULL when the data is streamed (below). */
ll_status gguf_writer_add_tensor(gguf_writer *w, const char *name, ll_type type, int n_dims, const int64_t *shape,
                                 const void *data);
/* Writes header, metadata, tensor infos and aligned data to `path`. */
ll_status gguf_writer_write(gguf_writer *w, const char *path);
/* Streaming, for files larger than memory: once every tensor is added (data may be NULL),
 * gguf_writer_begin writes header, metadata and tensor infos to `f`; gguf_writer_put_data then
 * takes the tensors' bytes in the order they were added, in pieces of any size (the alignment
 * padding between tensors is inserted automatically); gguf_writer_end checks that every byte
 * came. `label` names the file in messages. Write errors (a full disk) are LL_ERR_IO. */
ll_status gguf_writer_begin(gguf_writer *w, FILE *f, const char *label);
ll_status gguf_writer_put_data(gguf_writer *w, FILE *f, const void *p, size_t n, const char *label);
ll_status gguf_writer_end(gguf_writer *w, FILE *f, const char *label);
/* Where tensor i's data starts, relative to the data section (the end of gguf_writer_begin's output). */
uint64_t gguf_writer_data_offset(const gguf_writer *w, int64_t i);

#endif
