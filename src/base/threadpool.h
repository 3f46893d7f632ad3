/*
 * threadpool.h — a fixed pool of worker threads for data-parallel loops (the CPU backend's
 * matmuls, attention heads, experts). Created once at load; no allocation per call.
 */
#ifndef LILAC_THREADPOOL_H
#define LILAC_THREADPOOL_H

#include "base.h"

typedef struct ll_pool ll_pool;

/* fn(ctx, ith, nth): worker `ith` of `nth` does its share of the work. */
typedef void (*ll_pool_fn)(void *ctx, int ith, int nth);

/* n_threads <= 0 means "all online CPUs". Returns NULL on failure (error recorded). */
ll_pool *ll_pool_new(int n_threads);
void ll_pool_free(ll_pool *p);
int ll_pool_size(const ll_pool *p);
/* Runs fn on every thread (the caller is thread 0) and returns when all are done. */
void ll_pool_run(ll_pool *p, ll_pool_fn fn, void *ctx);

/* Splits [0, n) into nth nearly equal ranges; writes worker ith's range. */
static inline void ll_split_range(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t per = n / nth, rem = n % nth;
    *lo = ith * per + (ith < rem ? ith : rem);
    *hi = *lo + per + (ith < rem ? 1 : 0);
}

#endif
