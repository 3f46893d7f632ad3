/* base.c — errors, accounted allocation, logging, fp16, time. See base.h. */
#include "base.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* ---------------------------------------------------------------- errors */

static _Thread_local char tls_errmsg[1024];

ll_status ll_err(ll_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tls_errmsg, sizeof(tls_errmsg), fmt, ap);
    va_end(ap);
    return st;
}

const char *ll_errmsg(void) { return tls_errmsg; }

const char *ll_status_name(ll_status st) {
    switch (st) {
    case LL_OK: return "ok";
    case LL_ERR_IO: return "io error";
    case LL_ERR_FORMAT: return "format error";
    case LL_ERR_UNSUPPORTED: return "unsupported";
    case LL_ERR_INVALID: return "invalid argument";
    case LL_ERR_OOM: return "out of memory";
    case LL_ERR_DEVICE: return "device error";
    case LL_ERR_OVERFLOW: return "overflow";
    case LL_ERR_CANCELLED: return "cancelled";
    case LL_ERR_INTERNAL: return "internal error";
    }
    return "unknown";
}

void ll_abort(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "lilac: fatal: %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

/* ---------------------------------------------------------------- allocation */

/* Each block carries a 16-byte header holding its size, so ll_free can account for it
 * (the Redis zmalloc approach without malloc_usable_size). 16 keeps malloc's alignment. */
#define HDR 16
static atomic_size_t g_used, g_peak;
static atomic_long g_fail_after = -1;

static int alloc_should_fail(void) {
    long n = atomic_load(&g_fail_after);
    if (n < 0) return 0;
    if (n == 0) return 1;
    atomic_fetch_sub(&g_fail_after, 1);
    return 0;
}

static void account(ptrdiff_t delta) {
    size_t now = atomic_fetch_add(&g_used, (size_t)delta) + (size_t)delta;
    size_t peak = atomic_load(&g_peak);
    while (now > peak && !atomic_compare_exchange_weak(&g_peak, &peak, now)) {}
}

void *ll_malloc(size_t n) {
    if (alloc_should_fail() || n > SIZE_MAX - HDR) return NULL;
    unsigned char *p = malloc(n + HDR);
    if (!p) return NULL;
    memcpy(p, &n, sizeof(n));
    account((ptrdiff_t)n);
    return p + HDR;
}

void *ll_calloc(size_t count, size_t size) {
    if (size && count > SIZE_MAX / size) return NULL;
    void *p = ll_malloc(count * size);
    if (p) memset(p, 0, count * size);
    return p;
}

void *ll_realloc(void *p, size_t n) {
    if (!p) return ll_malloc(n);
    if (alloc_should_fail() || n > SIZE_MAX - HDR) return NULL;
    unsigned char *b = (unsigned char *)p - HDR;
    size_t old;
    memcpy(&old, b, sizeof(old));
    unsigned char *q = realloc(b, n + HDR);
    if (!q) return NULL;
    memcpy(q, &n, sizeof(n));
    account((ptrdiff_t)n - (ptrdiff_t)old);
    return q + HDR;
}

void ll_free(void *p) {
    if (!p) return;
    unsigned char *b = (unsigned char *)p - HDR;
    size_t n;
    memcpy(&n, b, sizeof(n));
    account(-(ptrdiff_t)n);
    free(b);
}

char *ll_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = ll_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

void *ll_malloc_aligned(size_t n) {
    if (alloc_should_fail()) return NULL;
    void *p = NULL;
    size_t sz = (n + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, sz + 64) != 0) return NULL;
    memcpy(p, &sz, sizeof(sz));
    account((ptrdiff_t)sz);
    return (unsigned char *)p + 64;
}

void ll_free_aligned(void *p) {
    if (!p) return;
    unsigned char *b = (unsigned char *)p - 64;
    size_t n;
    memcpy(&n, b, sizeof(n));
    account(-(ptrdiff_t)n);
    free(b);
}

size_t ll_alloc_used(void) { return atomic_load(&g_used); }
size_t ll_alloc_peak(void) { return atomic_load(&g_peak); }
void ll_alloc_fail_after(long n) { atomic_store(&g_fail_after, n); }

/* ---------------------------------------------------------------- logging */

static ll_log_level g_log_level = LL_LOG_INFO;
void ll_log_set_level(ll_log_level lvl) { g_log_level = lvl; }

void ll_log(ll_log_level lvl, const char *fmt, ...) {
    static const char *names[] = {"debug", "info", "warn", "error"};
    if (lvl < g_log_level) return;
    va_list ap;
    fprintf(stderr, "lilac %s: ", names[lvl]);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* ---------------------------------------------------------------- fp16 */

float ll_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: renormalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) { man <<= 1; exp--; }
            man &= 0x3ff;
            u = sign | (exp << 23) | (man << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t ll_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000;
    int32_t exp = (int32_t)((u >> 23) & 0xff) - 127 + 15;
    uint32_t man = u & 0x7fffff;
    if (((u >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10) return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = sign | ((uint32_t)exp << 10) | (man >> 13);
    uint32_t rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; /* may carry into exponent: correct */
    return (uint16_t)h;
}

/* ---------------------------------------------------------------- progress */

static ll_progress_fn g_progress;
static void *g_progress_ud;

void ll_progress_set(ll_progress_fn fn, void *ud) {
    g_progress = fn;
    g_progress_ud = ud;
}

void ll_progress(const char *stage, double frac) {
    if (g_progress) g_progress(g_progress_ud, stage, frac < 0 ? 0 : frac > 1 ? 1 : frac);
}

/* ---------------------------------------------------------------- time */

double ll_time_sec(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
