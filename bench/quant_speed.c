/*
 * quant_speed.c — single-core quantizer throughput, the figure that decides whether `lilac
 * convert` is bound by quantization or by reading the source. For each target type and each
 * kernel level this CPU has (scalar reference, AVX2, AVX-512) it times the converter's per-row
 * work, BF16 row -> fp32 (quant_dequant_row) -> quant_quantize_row, on one thread, and reports
 * MB/s of BF16 source per core (the unit of `lilac convert`'s progress bar). Each figure is the
 * median of --reps timed passes over a --mib MiB BF16 matrix of Gaussian-like weights; the
 * levels are also checked to write identical bytes. Time is the thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID), so that other processes on a shared machine inflate it far less
 * than wall time; the wall-time median is printed alongside.
 *
 * With --threads N (N > 1) it also times the same work split over N threads (ll_pool, rows
 * divided evenly, as `lilac convert` does) and reports the total MB/s by wall time.
 *
 *   build/bench/quant_speed [--mib N] [--reps R] [--cols C] [--types q4_K,q6_K,...] [--levels scalar,avx2,avx512]
 *                           [--threads N]
 *   build/bench/quant_speed --rmse [--levels L]    (quality instead of speed, see print_rmse)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "base/base.h"
#include "base/threadpool.h"
#include "quant/quant.h"

/* deterministic N(0, 0.02²)-like weights: sum of 4 uniforms (xorshift) */
static float gauss(uint64_t *s) {
    float a = 0;
    for (int k = 0; k < 4; k++) {
        *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
        a += (float)(*s >> 40) / (float)(1u << 24) - 0.5f;
    }
    return a * 0.035f;
}

static double cpu_sec(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    const uint16_t *src;   /* [rows, cols] bf16 */
    uint8_t *out;          /* [rows] rows of t */
    float *rows_f32;       /* [nth][cols] scratch */
    int64_t rows, cols;
    ll_type t;
} mt_job;

static void mt_worker(void *ctx, int ith, int nth) {
    mt_job *j = ctx;
    int64_t lo, hi;
    ll_split_range(j->rows, ith, nth, &lo, &hi);
    float *row = j->rows_f32 + (size_t)ith * (size_t)j->cols;
    size_t rb = quant_row_bytes(j->t, j->cols);
    for (int64_t i = lo; i < hi; i++) {
        quant_dequant_row(LL_TYPE_BF16, j->src + i * j->cols, row, j->cols);
        quant_quantize_row(j->t, row, j->out + (size_t)i * rb, j->cols);
    }
}

/* N(0, 1) by Box-Muller on xorshift uniforms in (0, 1) */
static double normal01(uint64_t *s) {
    double u[2];
    for (int k = 0; k < 2; k++) {
        *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
        u[k] = ((double)(*s >> 11) + 0.5) / 9007199254740992.0;
    }
    return sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

/* --rmse: relative RMSE sqrt(sum (y - x)^2 / sum x^2) of quantize -> dequantize for the K-quants,
 * on 4096 blocks of N(0, 1) and of Student-t with 3 degrees of freedom (heavy tails, like the
 * outliers of real weight rows). The check that a faster scale search did not cost quality. */
static int print_rmse(void) {
    const int64_t n = 256 * 4096;
    float *x = ll_malloc((size_t)n * sizeof(float)), *y = ll_malloc((size_t)n * sizeof(float)); /* [n] */
    uint8_t *q = ll_malloc(quant_row_bytes(LL_TYPE_Q8_0, n));                                  /* [n] quantized */
    if (!x || !y || !q) { fprintf(stderr, "quant_speed: out of memory\n"); return 1; }
    static const ll_type ts[] = {LL_TYPE_Q4_K, LL_TYPE_Q5_K, LL_TYPE_Q6_K};
    printf("| data | q4_K | q5_K | q6_K |\n|---|---|---|---|\n");
    for (int dist = 0; dist < 2; dist++) {
        uint64_t seed = 0x2545f4914f6cdd1dull;
        for (int64_t i = 0; i < n; i++) {
            double v = normal01(&seed);
            if (dist == 1) { /* t(3) = N / sqrt(chi2(3) / 3) */
                double c = 0;
                for (int k = 0; k < 3; k++) { double z = normal01(&seed); c += z * z; }
                v /= sqrt(c / 3.0);
            }
            x[i] = (float)v;
        }
        printf("| %s |", dist ? "Student-t(3)" : "N(0,1)");
        for (size_t k = 0; k < LL_ARRAY_LEN(ts); k++) {
            quant_quantize_row(ts[k], x, q, n);
            quant_dequant_row(ts[k], q, y, n);
            double se = 0, sx = 0;
            for (int64_t i = 0; i < n; i++) { se += ((double)y[i] - x[i]) * ((double)y[i] - x[i]); sx += (double)x[i] * x[i]; }
            printf(" %.5f |", sqrt(se / sx));
        }
        printf("\n");
    }
    ll_free(x);
    ll_free(y);
    ll_free(q);
    return 0;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int64_t mib = 32, reps = 5, cols = 2048, threads = 1;
    int rmse = 0;
    const char *types = "q4_K,q5_K,q6_K,q8_0", *want = "scalar,avx2,avx512";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mib") && i + 1 < argc) mib = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--cols") && i + 1 < argc) cols = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--types") && i + 1 < argc) types = argv[++i];
        else if (!strcmp(argv[i], "--levels") && i + 1 < argc) want = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--rmse")) rmse = 1;
        else {
            fprintf(stderr, "usage: %s [--mib N] [--reps R] [--cols C] [--types q4_K,q6_K,...] [--levels scalar,avx2,avx512] [--threads N] | --rmse\n", argv[0]);
            return 2;
        }
    }
    if (mib < 1 || reps < 1 || reps > 99 || cols < 256 || cols % 256 || threads < 1 || threads > 256) {
        fprintf(stderr, "quant_speed: need --mib >= 1, 1 <= --reps <= 99, --cols a multiple of 256, 1 <= --threads <= 256\n");
        return 2;
    }
    if (rmse) { /* at the one level named by --levels, else the best this CPU has */
        if (strchr(want, ',') == NULL && quant_force_simd(want) != 0) { fprintf(stderr, "quant_speed: no level %s here\n", want); return 2; }
        return print_rmse();
    }
    int64_t rows = LL_MAX(1, (mib << 20) / (cols * 2));
    uint16_t *src = ll_malloc((size_t)(rows * cols) * 2);   /* [rows, cols] bf16 */
    float *row = ll_malloc((size_t)cols * sizeof(float));    /* [cols] */
    uint8_t *out[3] = {0};                                   /* per level: [rows] quantized rows */
    if (!src || !row) { fprintf(stderr, "quant_speed: out of memory\n"); return 1; }
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int64_t i = 0; i < rows * cols; i++) src[i] = ll_f32_to_bf16(gauss(&seed));
    printf("quant_speed: %lld x %lld BF16 (%.1f MiB), median of %lld passes, one thread\n", (long long)rows, (long long)cols,
           rows * cols * 2 / 1048576.0, (long long)reps);
    printf("| type | level | MB/s of BF16 per core (CPU time): median (min, max) | ns per 256-element block | MB/s (wall, median) |\n"
           "|---|---|---|---|---|\n");
    static const char *levels[] = {"scalar", "avx2", "avx512"};
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", types);
    int rc = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        ll_type t;
        if (quant_type_from_name(tok, &t) != 0) { fprintf(stderr, "quant_speed: unknown type %s\n", tok); return 2; }
        size_t rb = quant_row_bytes(t, cols);
        for (int l = 0; l < 3; l++) {
            ll_free(out[l]);
            out[l] = NULL;
            if (!strstr(want, levels[l]) || quant_force_simd(levels[l]) != 0) continue;
            out[l] = ll_malloc(rb * (size_t)rows);
            if (!out[l]) { fprintf(stderr, "quant_speed: out of memory\n"); return 1; }
            double sec[99], wall[99];
            for (int64_t r = 0; r < reps; r++) {
                double t0 = cpu_sec(), w0 = ll_time_sec();
                for (int64_t i = 0; i < rows; i++) {
                    quant_dequant_row(LL_TYPE_BF16, src + i * cols, row, cols);
                    quant_quantize_row(t, row, out[l] + (size_t)i * rb, cols);
                }
                sec[r] = cpu_sec() - t0;
                wall[r] = ll_time_sec() - w0;
            }
            qsort(sec, (size_t)reps, sizeof(double), cmp_dbl);
            qsort(wall, (size_t)reps, sizeof(double), cmp_dbl);
            double med = sec[reps / 2], mb = (double)(rows * cols * 2) / 1e6;
            printf("| %s | %s | %.1f (%.1f, %.1f) | %.0f | %.1f |\n", quant_type_name(t), levels[l], mb / med, mb / sec[reps - 1],
                   mb / sec[0], med * 1e9 / (rows * cols / 256.0), mb / wall[reps / 2]);
            if (threads > 1) {
                ll_pool *pool = ll_pool_new((int)threads);
                float *scr = ll_malloc((size_t)threads * (size_t)cols * sizeof(float));
                if (!pool || !scr) { fprintf(stderr, "quant_speed: cannot start %lld threads\n", (long long)threads); return 1; }
                mt_job j = {src, out[l], scr, rows, cols, t};
                for (int64_t r = 0; r < reps; r++) {
                    double w0 = ll_time_sec();
                    ll_pool_run(pool, mt_worker, &j);
                    wall[r] = ll_time_sec() - w0;
                }
                qsort(wall, (size_t)reps, sizeof(double), cmp_dbl);
                printf("| %s | %s, %lld threads | total %.1f (%.1f, %.1f) by wall time | | |\n", quant_type_name(t), levels[l],
                       (long long)threads, mb / wall[reps / 2], mb / wall[reps - 1], mb / wall[0]);
                ll_free(scr);
                ll_pool_free(pool);
            }
            if (l > 0 && out[0] && memcmp(out[0], out[l], rb * (size_t)rows) != 0) {
                printf("  ** %s output differs from the scalar reference for %s **\n", levels[l], quant_type_name(t));
                rc = 1;
            }
        }
    }
    quant_force_simd(NULL);
    for (int l = 0; l < 3; l++) ll_free(out[l]);
    ll_free(src);
    ll_free(row);
    return rc;
}
