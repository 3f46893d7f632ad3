/*
 * cpu_gemv.c — decode-path benchmark: the machine's read bandwidth (multi-threaded streaming
 * sum over a buffer much larger than the caches) against the matrix-vector product of a weight
 * matrix of the same size in Q4_K, Q5_K, Q6_K, Q8_0 and BF16, single- and multi-threaded with
 * ll_pool. Reports GB/s of weight bytes read and the fraction of the measured read bandwidth.
 *
 *   build/bench/cpu_gemv [--mib N] [--reps R] [--cols C] [--scalar]
 *   (make bench-cpu runs it with the defaults: 1024 MiB, 10 repetitions, 4096 columns.)
 * LILAC_NO_AVX512=1 restricts the kernels to AVX2.
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/base.h"
#include "base/threadpool.h"
#include "quant/quant.h"

/* ------------------------------------------------------------------ read bandwidth */

typedef struct {
    const uint8_t *buf;
    size_t bytes;
    uint64_t sums[64];
} bw_ctx;

__attribute__((target("avx2"))) static uint64_t stream_sum(const uint8_t *p, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 128 <= n; i += 128) {
        a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *)(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_load_si256((const __m256i *)(p + i + 32)));
        a2 = _mm256_add_epi64(a2, _mm256_load_si256((const __m256i *)(p + i + 64)));
        a3 = _mm256_add_epi64(a3, _mm256_load_si256((const __m256i *)(p + i + 96)));
    }
    __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    uint64_t o[4];
    _mm256_storeu_si256((__m256i *)o, s);
    return o[0] + o[1] + o[2] + o[3];
}

static void bw_worker(void *vctx, int ith, int nth) {
    bw_ctx *c = vctx;
    int64_t lo, hi;
    ll_split_range((int64_t)(c->bytes / 4096), ith, nth, &lo, &hi); /* page-aligned shares */
    c->sums[ith] = stream_sum(c->buf + lo * 4096, (size_t)(hi - lo) * 4096);
}

static double measure_bw(ll_pool *pool, const uint8_t *buf, size_t bytes, int reps) {
    bw_ctx c = {.buf = buf, .bytes = bytes};
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = ll_time_sec();
        ll_pool_run(pool, bw_worker, &c);
        best = LL_MIN(best, ll_time_sec() - t0);
    }
    volatile uint64_t sink = c.sums[0];
    (void)sink;
    return (double)bytes / best / 1e9;
}

/* ------------------------------------------------------------------ gemv */

typedef struct {
    ll_type t;
    const uint8_t *w; /* [rows, cols] in type t */
    size_t row_bytes;
    int64_t rows, cols;
    const void *act; /* activation quantized to quant_vec_dot_type(t) */
    const float *x;  /* [cols] fp32 activation (for the quant_dot_row timing) */
    int fp32;        /* 1: time quant_dot_row (prefill's per-row path) instead */
    float *y;        /* [rows] */
} gemv_ctx;

static void gemv_worker(void *vctx, int ith, int nth) {
    gemv_ctx *c = vctx;
    int64_t lo, hi;
    ll_split_range(c->rows, ith, nth, &lo, &hi);
    if (c->fp32)
        for (int64_t r = lo; r < hi; r++) c->y[r] = quant_dot_row(c->t, c->w + (size_t)r * c->row_bytes, c->x, c->cols);
    else
        quant_dot_rows_q(c->t, c->w + (size_t)lo * c->row_bytes, c->row_bytes, hi - lo, c->act, c->cols, c->y + lo);
}

/* Fills buf with random valid rows of type t: random code bytes, moderate finite scales. */
static void fill_rows(ll_type t, uint8_t *buf, size_t bytes) {
    uint64_t s = 0x12345678abcdefull;
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        memcpy(buf + i, &s, 8);
    }
    size_t bb = quant_block_bytes(t);
    uint16_t h = ll_f32_to_f16(0.01f), hb = ll_f32_to_bf16(0.01f);
    for (size_t off = 0; off + bb <= bytes; off += bb) {
        uint8_t *b = buf + off;
        switch (t) {
        case LL_TYPE_Q4_K: case LL_TYPE_Q5_K: memcpy(b, &h, 2); memcpy(b + 2, &h, 2); break;
        case LL_TYPE_Q6_K: memcpy(b + 208, &h, 2); break;
        case LL_TYPE_Q8_0: memcpy(b, &h, 2); break;
        case LL_TYPE_BF16: memcpy(b, &hb, 2); break;
        default: break;
        }
    }
}

typedef struct {
    double bw[2]; /* best read bandwidth seen, GB/s: [1 thread, all threads] */
} bw_best;

/* Runs the GEMV of type t reps times on 1 and on all threads, each timing interleaved with a
 * bandwidth probe of the same thread count, so both see the same machine conditions (the
 * machine is shared; best-of-reps filters out the periods when a neighbour steals a core). */
static void bench_type(ll_pool *pools[2], ll_type t, uint8_t *buf, size_t buf_bytes, int64_t cols, int reps,
                       bw_best *bb, double out[5]) {
    size_t rb = quant_row_bytes(t, cols);
    int64_t rows = (int64_t)(buf_bytes / rb);
    size_t mat = (size_t)rows * rb;
    fill_rows(t, buf, mat);
    float *x = ll_malloc((size_t)cols * sizeof(float)), *y = ll_malloc((size_t)rows * sizeof(float));
    void *act = ll_malloc(quant_act_bytes(t, cols));
    LL_ASSERT(x && y && act);
    for (int64_t i = 0; i < cols; i++) x[i] = (float)((i * 37) % 101 - 50) * 0.02f;
    gemv_ctx c = {.t = t, .w = buf, .row_bytes = rb, .rows = rows, .cols = cols, .act = act, .x = x, .y = y};
    double best[3] = {1e30, 1e30, 1e30};
    double *ratio = ll_malloc(2 * (size_t)reps * sizeof(double)); /* [2][reps] */
    LL_ASSERT(ratio);
    for (int r = 0; r < reps; r++)
        for (int p = 0; p < 2; p++) {
            double bw = measure_bw(pools[p], buf, mat, 1);
            bb->bw[p] = LL_MAX(bb->bw[p], bw);
            double t0 = ll_time_sec();
            quant_quantize_act(t, x, act, cols); /* once per input vector, as decode does */
            ll_pool_run(pools[p], gemv_worker, &c);
            double dt = ll_time_sec() - t0;
            best[p] = LL_MIN(best[p], dt);
            ratio[p * reps + r] = (double)mat / dt / 1e9 / bw;
        }
    /* median of the per-repetition ratios to the bandwidth probe run just before: robust when
     * neighbours load the machine (both timings then see the same conditions) */
    for (int p = 0; p < 2; p++) {
        double *v = ratio + p * reps;
        for (int i = 1; i < reps; i++)
            for (int j = i; j > 0 && v[j - 1] > v[j]; j--) { double tmp = v[j]; v[j] = v[j - 1]; v[j - 1] = tmp; }
        out[3 + p] = reps % 2 ? v[reps / 2] : 0.5 * (v[reps / 2 - 1] + v[reps / 2]);
    }
    ll_free(ratio);
    c.fp32 = 1;
    for (int r = 0; r < (reps + 1) / 2; r++) {
        double t0 = ll_time_sec();
        ll_pool_run(pools[1], gemv_worker, &c);
        best[2] = LL_MIN(best[2], ll_time_sec() - t0);
    }
    for (int k = 0; k < 3; k++) out[k] = (double)mat / best[k] / 1e9;
    printf("| %-5s | %6lld x %-5lld | %7.1f | %7.2f | %7.2f | %7.2f |\n", quant_type_name(t), (long long)rows,
           (long long)cols, (double)mat / (1 << 20), out[0], out[1], out[2]);
    fflush(stdout);
    ll_free(x);
    ll_free(y);
    ll_free(act);
}

int main(int argc, char **argv) {
    size_t mib = 1024;
    int reps = 10, scalar = 0;
    int64_t cols = 4096;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mib") && i + 1 < argc) mib = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cols") && i + 1 < argc) cols = atol(argv[++i]);
        else if (!strcmp(argv[i], "--scalar")) scalar = 1;
        else {
            fprintf(stderr, "usage: cpu_gemv [--mib N] [--reps R] [--cols C] [--scalar]\n");
            return 2;
        }
    }
    if (mib < 1 || reps < 1 || cols < 256 || cols % 256) {
        fprintf(stderr, "cpu_gemv: need --mib >= 1, --reps >= 1, --cols a multiple of 256\n");
        return 2;
    }
    quant_init();
    if (scalar) quant_force_scalar(1);
    if (!__builtin_cpu_supports("avx2")) {
        fprintf(stderr, "cpu_gemv: the bandwidth probe needs AVX2\n");
        return 2;
    }
    size_t bytes = mib << 20;
    uint8_t *buf = ll_malloc_aligned(bytes);
    ll_pool *pool1 = ll_pool_new(1), *pooln = ll_pool_new(0);
    if (!buf || !pool1 || !pooln) {
        fprintf(stderr, "cpu_gemv: cannot allocate %zu MiB or the thread pools\n", mib);
        return 1;
    }
    memset(buf, 1, bytes); /* fault every page in before timing */
    int nth = ll_pool_size(pooln);
    ll_pool *pools[2] = {pool1, pooln};
    bw_best bb = {{measure_bw(pool1, buf, bytes, reps), measure_bw(pooln, buf, bytes, reps)}};
    printf("simd: %s, threads: %d, buffer: %zu MiB, best of %d\n\n", quant_simd_name(), nth, mib, reps);
    printf("GB/s of weights read; decode = quant_quantize_act + quant_dot_rows_q, fp32 = quant_dot_row\n\n");
    printf("| type  | rows x cols    | MiB     | decode 1T | decode %dT | fp32 %dT |\n", nth, nth);
    printf("|-------|----------------|---------|---------|---------|---------|\n");
    const ll_type types[] = {LL_TYPE_Q4_K, LL_TYPE_Q5_K, LL_TYPE_Q6_K, LL_TYPE_Q8_0, LL_TYPE_BF16};
    double gb[LL_ARRAY_LEN(types)][5];
    for (size_t i = 0; i < LL_ARRAY_LEN(types); i++) bench_type(pools, types[i], buf, bytes, cols, reps, &bb, gb[i]);
    printf("\nread bandwidth (streaming sum, best seen): 1 thread %.2f GB/s, %d threads %.2f GB/s\n\n", bb.bw[0], nth,
           bb.bw[1]);
    printf("decode GB/s as a fraction of read bandwidth: best GEMV / best probe, and the median over repetitions\n"
           "of GEMV / the probe run just before it\n\n");
    printf("| type  | 1T best/best | 1T median | %dT best/best | %dT median |\n", nth, nth);
    printf("|-------|--------------|-----------|--------------|-----------|\n");
    for (size_t i = 0; i < LL_ARRAY_LEN(types); i++)
        printf("| %-5s | %10.1f %% | %7.1f %% | %10.1f %% | %7.1f %% |\n", quant_type_name(types[i]),
               100 * gb[i][0] / bb.bw[0], 100 * gb[i][3], 100 * gb[i][1] / bb.bw[1], 100 * gb[i][4]);
    ll_pool_free(pool1);
    ll_pool_free(pooln);
    ll_free_aligned(buf);
    return 0;
}
