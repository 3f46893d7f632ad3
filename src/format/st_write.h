/* st_write.h — writing small safetensors files (F32/I32 tensors) for `lilac logits` and tests. */
#ifndef LILAC_ST_WRITE_H
#define LILAC_ST_WRITE_H

#include "tensor.h"

typedef struct st_out_tensor {
    const char *name;
    ll_type type;             /* LL_TYPE_F32, LL_TYPE_I32, LL_TYPE_BF16, LL_TYPE_F16 */
    int32_t n_dims;
    int64_t shape[LL_MAX_DIMS];
    const void *data;
} st_out_tensor;

/* Writes the tensors to `path` (via a temporary file renamed on success). */
ll_status st_write_file(const char *path, const st_out_tensor *t, int n);

#endif
