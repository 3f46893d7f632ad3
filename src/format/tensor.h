/*
 * tensor.h — a named view of tensor data inside a model file (memory-mapped) or owned by a
 * loader. Shapes are in PyTorch/safetensors order: shape[0] is the outermost dimension and
 * shape[n_dims-1] the innermost (contiguous) one. GGUF's ne[] (innermost first) is reversed on
 * load. A 2-D weight [rows, cols] = [out_features, in_features]; y = W x.
 */
#ifndef LILAC_TENSOR_H
#define LILAC_TENSOR_H

#include "../quant/quant.h"

#define LL_MAX_DIMS 8 /* safetensors checkpoints carry 5-D conv weights (vision tower); GGUF allows 4 */

typedef struct ll_tensor {
    const char *name;              /* owned by the file/loader that produced it */
    ll_type type;
    int32_t n_dims;
    int64_t shape[LL_MAX_DIMS];
    const void *data;
    size_t nbytes;
} ll_tensor;

static inline int64_t ll_tensor_nelem(const ll_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->n_dims; i++) n *= t->shape[i];
    return n;
}

/* Formats a shape as "[a, b, c]" into buf; returns buf. */
const char *ll_shape_str(const int64_t *shape, int n_dims, char *buf, size_t cap);

#endif
