/*
 * base.h — the few things every lilac module uses: status codes and the error message,
 * assertions, accounted allocation, fp16/bf16 conversion, and small helpers.
 *
 * Error conventions (Redis/SQLite style):
 *   - Programmer errors (violated preconditions) trip LL_ASSERT, which aborts with file:line.
 *   - Runtime errors (bad file, OOM, bad request) return an ll_status; the function that detects
 *     the problem records a one-line message with ll_err(), and callers pass the status up
 *     unchanged. The message is thread-local and names the file, tensor, field or byte offset.
 */
#ifndef LILAC_BASE_H
#define LILAC_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum ll_status {
    LL_OK = 0,
    LL_ERR_IO,          /* open/read/mmap failed */
    LL_ERR_FORMAT,      /* malformed or inconsistent file contents */
    LL_ERR_UNSUPPORTED, /* valid but not supported (dtype, architecture, ...) */
    LL_ERR_INVALID,     /* invalid argument or request */
    LL_ERR_OOM,         /* allocation failed or over budget */
    LL_ERR_DEVICE,      /* accelerator error (CUDA) */
    LL_ERR_OVERFLOW,    /* context or buffer limit exceeded */
    LL_ERR_CANCELLED,
    LL_ERR_INTERNAL,
} ll_status;

/* Records a formatted error message for this thread and returns `st` (so callers can
 * `return ll_err(LL_ERR_FORMAT, "%s: ...", path)`). */
ll_status ll_err(ll_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The last message recorded on this thread ("" if none). Valid until the next ll_err. */
const char *ll_errmsg(void);
const char *ll_status_name(ll_status st);

void ll_abort(const char *file, int line, const char *fmt, ...) __attribute__((noreturn, format(printf, 3, 4)));
#define LL_ASSERT(x) \
    do { if (!(x)) ll_abort(__FILE__, __LINE__, "assertion failed: %s", #x); } while (0)
#define LL_ABORT(...) ll_abort(__FILE__, __LINE__, __VA_ARGS__)

/* Propagate a non-OK status. */
#define LL_TRY(expr) \
    do { ll_status st__ = (expr); if (st__ != LL_OK) return st__; } while (0)

/* ---- accounted allocation (every host allocation of the engine goes through here) ---- */
void *ll_malloc(size_t n);            /* NULL on failure (never aborts) */
void *ll_calloc(size_t count, size_t size);
void *ll_realloc(void *p, size_t n);
void ll_free(void *p);
char *ll_strdup(const char *s);
size_t ll_alloc_used(void);           /* bytes currently allocated through ll_malloc */
size_t ll_alloc_peak(void);
/* Aligned allocation (64 B) for SIMD buffers; free with ll_free_aligned. */
void *ll_malloc_aligned(size_t n);
void ll_free_aligned(void *p);
/* Fault injection for tests: after `n` more successful allocations, fail (n < 0 disables). */
void ll_alloc_fail_after(long n);

/* ---- logging (stderr) ---- */
typedef enum { LL_LOG_DEBUG, LL_LOG_INFO, LL_LOG_WARN, LL_LOG_ERROR } ll_log_level;
void ll_log(ll_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ll_log_set_level(ll_log_level lvl);

/* ---- fp16 / bf16 ---- */
static inline float ll_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint16_t ll_f32_to_bf16(float f) { /* round to nearest even, NaN kept quiet */
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
float ll_f16_to_f32(uint16_t h);
uint16_t ll_f32_to_f16(float f);

/* ---- progress of long operations (model load, weight upload) ---- */
/* The hook receives a stage name and the fraction done in [0, 1] (1 exactly once at the end of
 * a stage). The CLI installs a terminal progress bar; libraries only call ll_progress. */
typedef void (*ll_progress_fn)(void *ud, const char *stage, double frac);
void ll_progress_set(ll_progress_fn fn, void *ud);
void ll_progress(const char *stage, double frac);

/* ---- timing ---- */
double ll_time_sec(void); /* monotonic */

#define LL_MIN(a, b) ((a) < (b) ? (a) : (b))
#define LL_MAX(a, b) ((a) > (b) ? (a) : (b))
#define LL_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
