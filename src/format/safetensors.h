/*
 * safetensors.h — reader for HuggingFace safetensors files: one file, or a sharded checkpoint
 * described by model.safetensors.index.json. Tensors are views into the memory-mapped file(s).
 *
 * File layout: u64 LE header length N, N bytes of JSON
 * {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
 * then the data region; offsets are relative to the start of the data region.
 * Every inconsistency (offsets out of range or overlapping, byte size that does not match the
 * shape, duplicate names, ...) is an LL_ERR_FORMAT naming the file and tensor.
 */
#ifndef LILAC_SAFETENSORS_H
#define LILAC_SAFETENSORS_H

#include "../base/mapfile.h"
#include "tensor.h"

typedef struct st_file {
    char *path;             /* owned: the label used in messages */
    ll_mapfile map;         /* set when opened from a path (st_open) */
    const uint8_t *data;    /* the whole file (mapped or borrowed) */
    size_t size;
    size_t data_start;      /* 8 + header length */
    int64_t n_tensors;
    ll_tensor *tensors;     /* [n_tensors], sorted by name */
    char *names;            /* arena holding the tensor names */
} st_file;

/* Parses a safetensors image held in memory (borrowed: must outlive f). `label` names it in
 * messages. On error f is left empty (st_close is still safe). */
ll_status st_parse(st_file *f, const uint8_t *data, size_t size, const char *label);
/* Maps and parses `path`. */
ll_status st_open(st_file *f, const char *path);
void st_close(st_file *f);
/* The tensor called `name`, or NULL. */
const ll_tensor *st_find(const st_file *f, const char *name);

/* Maps a safetensors dtype name ("BF16", ...) to an ll_type; -1 if not supported. */
int st_dtype_from_name(const char *s, ll_type *t);
/* safetensors spelling of a type ("F32", "BF16", "F16", "I32", "U32", "U8", ...); NULL if none. */
const char *st_dtype_name(ll_type t);

/* A checkpoint of one or more files, looked up by tensor name across all of them. */
typedef struct st_set {
    int n_files;
    st_file *files;              /* [n_files] */
    int64_t n_tensors;
    const ll_tensor **by_name;   /* [n_tensors] sorted by name, pointing into files[] */
} st_set;

/* Opens `path`: a .safetensors file, or a directory holding model.safetensors.index.json
 * (sharded; every tensor the index names must be in the shard it names, names are unique
 * across shards) or model.safetensors. */
ll_status st_set_open(st_set *s, const char *path);
/* Opens the shards listed by an index (JSON text `index`, `index_path` for messages) from `dir`. */
ll_status st_set_open_index(st_set *s, const char *dir, const char *index, size_t len, const char *index_path);
void st_set_close(st_set *s);
/* Index (into by_name) of `name`, or -1. */
int64_t st_set_lookup(const st_set *s, const char *name);
const ll_tensor *st_set_find(const st_set *s, const char *name);
/* The file that holds tensor by_name[i] (for messages). */
const char *st_set_file_of(const st_set *s, int64_t i);

#endif
