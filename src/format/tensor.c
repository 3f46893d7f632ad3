/* tensor.c — small helpers for ll_tensor (see tensor.h). */
#include <stdio.h>

#include "tensor.h"

const char *ll_shape_str(const int64_t *shape, int n_dims, char *buf, size_t cap) {
    size_t n = 0;
    if (cap == 0) return buf;
    buf[0] = '\0';
    n += (size_t)snprintf(buf + n, cap - n, "[");
    for (int i = 0; i < n_dims && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
    return buf;
}
