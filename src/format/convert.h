/*
 * convert.h — `lilac convert` / `lilac quantize`: any model qwen_model_load reads (HF safetensors
 * directory, MLX directory, GGUF) → a llama.cpp `qwen35moe` GGUF of a chosen type, streamed
 * tensor by tensor (memory stays bounded by a few chunks, whatever the model size), quantized on
 * all cores, written to a temporary file that is renamed only when complete.
 */
#ifndef LILAC_CONVERT_H
#define LILAC_CONVERT_H

#include "../model/qwen35.h"

/* Output types. The names are llama.cpp's (`llama-quantize` / convert_hf_to_gguf --outtype). */
typedef enum convert_type {
    CONVERT_F32,
    CONVERT_BF16,
    CONVERT_Q8_0,
    CONVERT_Q6_K,
    CONVERT_Q4_K_M,
    CONVERT_Q4_K_S,
} convert_type;

/* "f32", "bf16", "q8_0", "q6_k", "q4_k_m", "q4_k_s" (case-insensitive); -1 if unknown. */
int convert_type_from_name(const char *name, convert_type *out);
const char *convert_type_name(convert_type t);

/* Progress: bytes of source weights processed so far, and the total. */
typedef void (*convert_progress_fn)(void *ud, uint64_t done, uint64_t total);

typedef struct convert_opts {
    convert_type type;
    int threads;                 /* <= 0: all online CPUs */
    int force;                   /* overwrite an existing output */
    convert_progress_fn progress;/* optional, called from the converting thread */
    void *progress_ud;
    volatile int *cancel;        /* optional: set nonzero (e.g. from a signal handler) to stop;
                                    the conversion then fails with LL_ERR_CANCELLED */
    const char *name;            /* general.name; NULL: the source folder's name */
} convert_opts;

typedef struct convert_stats {
    uint64_t src_bytes;          /* source weight bytes read */
    uint64_t out_bytes;          /* size of the written file */
    int64_t n_tensors;
    double seconds;
    uint64_t read_direct;        /* source bytes read with O_DIRECT (the rest came through the mapping) */
    uint64_t written_direct;     /* output bytes written with O_DIRECT (the rest through the page cache) */
} convert_stats;

/* File I/O: a source that is not in the page cache is read with O_DIRECT into the converter's
 * own buffers, and the output's whole 4 KiB blocks are written with O_DIRECT, where the file
 * systems allow it (ordinary I/O otherwise). The environment variable LILAC_CONVERT_DIRECT
 * changes that: 0 = no O_DIRECT, r = reads only, w = writes only, all = also read source pages
 * that are in the page cache with O_DIRECT (for tests). The output bytes never depend on it. */

/* Converts `src` (anything qwen_model_load accepts) to the GGUF file `dst`. On any error the
 * destination is left as it was (no partial file) and the message names the cause. */
ll_status convert_model(const char *src, const char *dst, const convert_opts *o, convert_stats *stats);

/* The GGUF type that `type` gives the tensor `name` (GGUF naming) of a model with hp, with
 * `cols` elements per row and `n_dims` dimensions (see convert.c for the exact rule). */
ll_type convert_tensor_type(convert_type type, const qwen_hparams *hp, const char *name, int n_dims, int64_t cols);

#endif
