/*
 * test_quant.c — block formats: hand-built blocks with known values for every type,
 * quantize -> dequantize error bounds, dot products (SIMD vs scalar reference vs
 * dequantize-then-dot), pre-quantized activation dots, edge cases, and SIMD/scalar agreement.
 * The independent cross-check against the gguf package is tests/py/test_quant_gguf.py.
 */
#include "testutil.h"

#include <math.h>

#include "base/base.h"
#include "quant/quant.h"

/* ------------------------------------------------------------------ helpers */

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint32_t rng_u32(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}
static float rng_unif(void) { return ((float)(rng_u32() & 0xffffff) + 0.5f) / 16777216.0f; }
static float rng_normal(void) { return sqrtf(-2.0f * logf(rng_unif())) * cosf(6.2831853f * rng_unif()); }
static void fill_normal(float *x, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) x[i] = scale * rng_normal();
}

static const ll_type k_weight_types[] = {LL_TYPE_F32, LL_TYPE_F16,  LL_TYPE_BF16, LL_TYPE_Q4_0, LL_TYPE_Q8_0,
                                         LL_TYPE_Q4_K, LL_TYPE_Q5_K, LL_TYPE_Q6_K, LL_TYPE_MLX4, LL_TYPE_MLX8};
static const ll_type k_all_types[] = {LL_TYPE_F32,  LL_TYPE_F16,  LL_TYPE_BF16, LL_TYPE_Q4_0, LL_TYPE_Q8_0, LL_TYPE_Q4_K,
                                      LL_TYPE_Q5_K, LL_TYPE_Q6_K, LL_TYPE_Q8_K, LL_TYPE_MLX4, LL_TYPE_MLX8};

static void *xalloc(size_t n) {
    void *p = ll_malloc(n ? n : 1);
    assert_non_null(p);
    return p;
}

static double dot_d(const float *a, const float *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}
static double abs_dot_d(const float *a, const float *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += fabs((double)a[i] * b[i]);
    return s;
}

/* Dequantizes with both the selected kernels and the scalar reference; asserts they agree
 * bit for bit (the SIMD kernels evaluate the same fp32 expressions) and returns y. */
static void dequant_both(ll_type t, const void *src, float *y, int64_t n) {
    float *yf = xalloc((size_t)n * sizeof(float));
    quant_force_scalar(1);
    quant_dequant_row(t, src, y, n);
    quant_force_scalar(0);
    quant_dequant_row(t, src, yf, n);
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&yf[i], &y[i], sizeof(float)) != 0)
            fail_msg("%s: SIMD dequant differs at %lld: %g vs %g", quant_type_name(t), (long long)i, yf[i], y[i]);
    ll_free(yf);
}

static void expect_exact(const float *y, const float *want, int n, const char *what) {
    for (int i = 0; i < n; i++)
        if (y[i] != want[i]) fail_msg("%s: element %d is %.9g, want %.9g", what, i, y[i], want[i]);
}

/* ------------------------------------------------------------------ known blocks */

static void test_type_table(void **state) {
    (void)state;
    ll_type t;
    assert_int_equal(quant_type_from_name("Q4_K", &t), 0);
    assert_int_equal(t, LL_TYPE_Q4_K);
    assert_int_equal(quant_type_from_name("mlx4", &t), 0);
    assert_int_equal(t, LL_TYPE_MLX4);
    assert_int_equal(quant_type_from_name("q9_K", &t), -1);
    assert_int_equal(quant_row_bytes(LL_TYPE_Q4_K, 512), 288);
    assert_int_equal(quant_row_bytes(LL_TYPE_Q6_K, 256), 210);
    assert_int_equal(quant_act_bytes(LL_TYPE_Q4_K, 512), 2 * sizeof(ll_block_q8_K));
    assert_int_equal(quant_act_bytes(LL_TYPE_Q4_0, 64), 2 * sizeof(ll_block_q8_0));
    assert_int_equal(quant_act_bytes(LL_TYPE_BF16, 64), 256);
    assert_int_equal(quant_vec_dot_type(LL_TYPE_Q6_K), LL_TYPE_Q8_K);
    assert_int_equal(quant_vec_dot_type(LL_TYPE_Q8_0), LL_TYPE_Q8_0);
    assert_int_equal(quant_vec_dot_type(LL_TYPE_MLX4), LL_TYPE_F32);
    const char *simd = quant_simd_name();
    assert_true(!strcmp(simd, "avx512") || !strcmp(simd, "avx2") || !strcmp(simd, "scalar"));
    print_message("# simd: %s\n", simd);
}

static void test_known_plain(void **state) {
    (void)state;
    const float v[4] = {1.5f, -0.25f, 65504.0f, 0.0f};
    uint16_t h[4] = {0x3e00, 0xb400, 0x7bff, 0x0000}; /* f16 bit patterns of v */
    uint16_t b[4] = {0x3fc0, 0xbe80, 0x477f, 0x0000}; /* bf16: 65504 -> 65280 (0x477f) */
    const float vb[4] = {1.5f, -0.25f, 65280.0f, 0.0f};
    float y[4];
    dequant_both(LL_TYPE_F16, h, y, 4);
    expect_exact(y, v, 4, "f16");
    dequant_both(LL_TYPE_BF16, b, y, 4);
    expect_exact(y, vb, 4, "bf16");
    dequant_both(LL_TYPE_F32, v, y, 4);
    expect_exact(y, v, 4, "f32");
    uint16_t out[4];
    quant_quantize_row(LL_TYPE_F16, v, out, 4);
    assert_memory_equal(out, h, sizeof(h));
}

static void test_known_q4_0_q8_0(void **state) {
    (void)state;
    ll_block_q4_0 b4;
    b4.d = 0x3800; /* 0.5 */
    for (int j = 0; j < 16; j++) b4.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    float y[32], want[32];
    for (int j = 0; j < 16; j++) { want[j] = 0.5f * (float)(j - 8); want[j + 16] = 0.5f * (float)(7 - j); }
    dequant_both(LL_TYPE_Q4_0, &b4, y, 32);
    expect_exact(y, want, 32, "q4_0");

    ll_block_q8_0 b8;
    b8.d = 0x3400; /* 0.25 */
    for (int j = 0; j < 32; j++) { b8.qs[j] = (int8_t)(j * 8 - 128); want[j] = 0.25f * (float)(j * 8 - 128); }
    dequant_both(LL_TYPE_Q8_0, &b8, y, 32);
    expect_exact(y, want, 32, "q8_0");
}

/* Packs 8 six-bit scales and mins into the 12-byte field, written straight from the layout
 * diagram (bytes 0-3: scales 0-3 low 6 bits, top 2 bits = scales 4-7 bits 4-5; bytes 4-7 the
 * same for mins; bytes 8-11: low nibble scale 4-7 bits 0-3, high nibble min 4-7 bits 0-3). */
static void pack_k_scales(const int sc[8], const int mn[8], uint8_t s[12]) {
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)(sc[j] | ((sc[4 + j] >> 4) << 6));
        s[4 + j] = (uint8_t)(mn[j] | ((mn[4 + j] >> 4) << 6));
        s[8 + j] = (uint8_t)((sc[4 + j] & 15) | ((mn[4 + j] & 15) << 4));
    }
}

static const int k_sc[8] = {1, 2, 3, 4, 17, 33, 50, 63};
static const int k_mn[8] = {0, 5, 10, 15, 20, 40, 48, 63};

static void test_known_q4_K(void **state) {
    (void)state;
    ll_block_q4_K b;
    b.d = 0x3800;    /* 0.5 */
    b.dmin = 0x3400; /* 0.25 */
    pack_k_scales(k_sc, k_mn, b.scales);
    float want[256], y[256];
    /* byte 32c+l: low nibble = element 64c+l, high nibble = element 64c+32+l */
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            int lo = l & 15, hi = (l + 3 * c) & 15;
            b.qs[32 * c + l] = (uint8_t)(lo | (hi << 4));
            want[64 * c + l] = 0.5f * (float)k_sc[2 * c] * (float)lo - 0.25f * (float)k_mn[2 * c];
            want[64 * c + 32 + l] = 0.5f * (float)k_sc[2 * c + 1] * (float)hi - 0.25f * (float)k_mn[2 * c + 1];
        }
    dequant_both(LL_TYPE_Q4_K, &b, y, 256);
    expect_exact(y, want, 256, "q4_K");
}

static void test_known_q5_K(void **state) {
    (void)state;
    ll_block_q5_K b;
    b.d = 0x3400;    /* 0.25 */
    b.dmin = 0x3800; /* 0.5 */
    pack_k_scales(k_sc, k_mn, b.scales);
    for (int l = 0; l < 32; l++) b.qh[l] = (uint8_t)(l * 37 + 11);
    float want[256], y[256];
    /* element 32g+l: 4 low bits as in q4_K, 5th bit = bit g of qh[l] */
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            int lo = (l * 5) & 15, hi = (l + c) & 15;
            b.qs[32 * c + l] = (uint8_t)(lo | (hi << 4));
            int q1 = lo + 16 * ((b.qh[l] >> (2 * c)) & 1), q2 = hi + 16 * ((b.qh[l] >> (2 * c + 1)) & 1);
            want[64 * c + l] = 0.25f * (float)k_sc[2 * c] * (float)q1 - 0.5f * (float)k_mn[2 * c];
            want[64 * c + 32 + l] = 0.25f * (float)k_sc[2 * c + 1] * (float)q2 - 0.5f * (float)k_mn[2 * c + 1];
        }
    dequant_both(LL_TYPE_Q5_K, &b, y, 256);
    expect_exact(y, want, 256, "q5_K");
}

static void test_known_q6_K(void **state) {
    (void)state;
    ll_block_q6_K b;
    memset(&b, 0, sizeof(b));
    b.d = 0x3000; /* 0.125 */
    for (int g = 0; g < 16; g++) b.scales[g] = (int8_t)(g * 13 - 100);
    float want[256], y[256];
    for (int i = 0; i < 256; i++) {
        int q = (i * 7 + 3) & 63; /* unsigned 6-bit code; value = code - 32 */
        /* half h = i/128, r = i%128: low nibble of ql[64h + r] for r < 64, high nibble of
         * ql[64h + r - 64] otherwise; bits 4-5 in qh[32h + r%32] at bit 2*(r/32) */
        int h = i / 128, r = i % 128;
        if (r < 64) b.ql[64 * h + r] |= (uint8_t)(q & 15);
        else b.ql[64 * h + r - 64] |= (uint8_t)((q & 15) << 4);
        b.qh[32 * h + r % 32] |= (uint8_t)((q >> 4) << (2 * (r / 32)));
        want[i] = 0.125f * (float)b.scales[i / 16] * (float)(q - 32);
    }
    dequant_both(LL_TYPE_Q6_K, &b, y, 256);
    expect_exact(y, want, 256, "q6_K");
}

static void test_known_q8_K(void **state) {
    (void)state;
    ll_block_q8_K b;
    b.d = 0.375f;
    float want[256], y[256];
    for (int j = 0; j < 256; j++) { b.qs[j] = (int8_t)(j - 128); want[j] = 0.375f * (float)(j - 128); }
    dequant_both(LL_TYPE_Q8_K, &b, y, 256);
    expect_exact(y, want, 256, "q8_K");
}

static void test_known_mlx(void **state) {
    (void)state;
    ll_block_mlx4 b4;
    b4.scale = 0x3f00; /* bf16 0.5 */
    b4.bias = 0xc000;  /* bf16 -2.0 */
    float want[64], y[64];
    for (int j = 0; j < 32; j++) {
        int e0 = j & 15, e1 = (31 - j) & 15; /* element 2j in the low nibble (LSB first) */
        b4.qs[j] = (uint8_t)(e0 | (e1 << 4));
        want[2 * j] = 0.5f * (float)e0 - 2.0f;
        want[2 * j + 1] = 0.5f * (float)e1 - 2.0f;
    }
    dequant_both(LL_TYPE_MLX4, &b4, y, 64);
    expect_exact(y, want, 64, "mlx4");

    ll_block_mlx8 b8;
    b8.scale = 0x3d80; /* 0.0625 */
    b8.bias = 0x3f80;  /* 1.0 */
    for (int j = 0; j < 64; j++) { b8.qs[j] = (uint8_t)(j * 4 + 1); want[j] = 0.0625f * (float)(j * 4 + 1) + 1.0f; }
    dequant_both(LL_TYPE_MLX8, &b8, y, 64);
    expect_exact(y, want, 64, "mlx8");
}

/* ------------------------------------------------------------------ round trip */


/* Largest error the format allows for element i of block blk, from the block's stored step
 * sizes, plus the absolute precision of an fp16 scale near zero (tiny blocks may flush their
 * scale). The K-quant fits minimise squared error and may clip an outlier, so they get 1.5
 * steps of their own sub-block rather than half a step. */
static float elem_err_bound(ll_type t, const uint8_t *blk, int i) {
    switch (t) {
    case LL_TYPE_F32: return 0;
    case LL_TYPE_Q8_0: return 0.56f * fabsf(ll_f16_to_f32(((const ll_block_q8_0 *)blk)->d)) + 128 * 0x1p-24f;
    case LL_TYPE_Q4_0: return 1.01f * fabsf(ll_f16_to_f32(((const ll_block_q4_0 *)blk)->d)) + 8 * 0x1p-24f;
    case LL_TYPE_Q8_K: return 0.5f * ((const ll_block_q8_K *)blk)->d * 1.0001f;
    case LL_TYPE_Q4_K: case LL_TYPE_Q5_K: {
        const ll_block_q4_K *b = (const void *)blk; /* d, dmin, scales at the same offsets */
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 4; j++) { /* unpacked straight from the layout diagram */
            sc[j] = b->scales[j] & 63;
            mn[j] = b->scales[j + 4] & 63;
            sc[j + 4] = (uint8_t)((b->scales[j + 8] & 15) | ((b->scales[j] >> 6) << 4));
            mn[j + 4] = (uint8_t)((b->scales[j + 8] >> 4) | ((b->scales[j + 4] >> 6) << 4));
        }
        (void)mn;
        float d = ll_f16_to_f32(b->d), dmin = ll_f16_to_f32(b->dmin);
        return 1.5f * d * (float)sc[i / 32] + 0.5f * dmin + 64 * 32 * 0x1p-24f;
    }
    case LL_TYPE_Q6_K: {
        const ll_block_q6_K *b = (const void *)blk;
        return 1.5f * fabsf(ll_f16_to_f32(b->d) * (float)b->scales[i / 16]) + 128 * 32 * 0x1p-24f;
    }
    case LL_TYPE_MLX4: case LL_TYPE_MLX8: {
        const ll_block_mlx4 *b = (const void *)blk;
        float s = ll_bf16_to_f32(b->scale), z = fabsf(ll_bf16_to_f32(b->bias));
        return 0.5f * s + (t == LL_TYPE_MLX4 ? 15 : 255) * s / 256.0f + z / 256.0f;
    }
    default: return -1;
    }
}

/* Quantizes x[n], dequantizes, checks per-block error bounds and returns RMSE/RMS(x). */
static double roundtrip(ll_type t, const float *x, int64_t n) {
    size_t bytes = quant_row_bytes(t, n);
    uint8_t *q = xalloc(bytes);
    float *y = xalloc((size_t)n * sizeof(float));
    assert_int_equal(quant_quantize_row(t, x, q, n), bytes);
    dequant_both(t, q, y, n);
    int64_t qk = quant_block_elems(t);
    if (qk == 1) qk = 256;
    double se = 0, sx = 0;
    for (int64_t b = 0; b < n / qk; b++) {
        for (int64_t i = b * qk; i < (b + 1) * qk; i++) {
            float bound = elem_err_bound(t, q + (size_t)b * quant_row_bytes(t, qk), (int)(i - b * qk));
            float e = fabsf(y[i] - x[i]);
            if (t == LL_TYPE_F16) bound = fabsf(x[i]) * 0x1p-11f + 0x1p-25f;
            if (t == LL_TYPE_BF16) bound = fabsf(x[i]) * 0x1p-8f;
            if (!(e <= bound))
                fail_msg("%s: element %lld error %g > bound %g (x=%g y=%g)", quant_type_name(t), (long long)i, e,
                         bound, x[i], y[i]);
            se += (double)e * e;
            sx += (double)x[i] * x[i];
        }
    }
    ll_free(q);
    ll_free(y);
    return sx > 0 ? sqrt(se / sx) : sqrt(se);
}

static void run_roundtrip_rmse(void) {
    const int64_t n = 256 * 64;
    float *x = xalloc((size_t)n * sizeof(float));
    fill_normal(x, n, 1.0f);
    struct { ll_type t; double max_rel; } cases[] = {
        {LL_TYPE_F32, 0},       {LL_TYPE_F16, 3e-4},    {LL_TYPE_BF16, 2.5e-3}, {LL_TYPE_Q8_0, 0.008},
        {LL_TYPE_Q8_K, 0.008},  {LL_TYPE_Q4_0, 0.095},  {LL_TYPE_Q4_K, 0.078},  {LL_TYPE_Q5_K, 0.039},
        {LL_TYPE_Q6_K, 0.019},  {LL_TYPE_MLX4, 0.098},  {LL_TYPE_MLX8, 0.006},
    };
    for (size_t c = 0; c < LL_ARRAY_LEN(cases); c++) {
        double r = roundtrip(cases[c].t, x, n);
        print_message("# %-5s rel RMSE %.5f\n", quant_type_name(cases[c].t), r);
        if (r > cases[c].max_rel) fail_msg("%s: rel RMSE %g > %g", quant_type_name(cases[c].t), r, cases[c].max_rel);
    }
    /* the scale search must beat plain min/max scaling: Q4_K error well under Q4_0's */
    assert_true(roundtrip(LL_TYPE_Q4_K, x, n) < 0.9 * roundtrip(LL_TYPE_Q4_0, x, n));
    ll_free(x);
}

static void run_edge_cases(void) {
    float x[512], y[512];
    uint8_t q[1024];
    for (size_t c = 0; c < LL_ARRAY_LEN(k_all_types); c++) {
        ll_type t = k_all_types[c];
        int64_t n = quant_block_elems(t) == 1 ? 32 : quant_block_elems(t);
        /* all zero: exact zeros back */
        memset(x, 0, sizeof(x));
        quant_quantize_row(t, x, q, n);
        dequant_both(t, q, y, n);
        for (int64_t i = 0; i < n; i++)
            if (y[i] != 0) fail_msg("%s: zero block gave %g at %lld", quant_type_name(t), y[i], (long long)i);
        /* constant blocks, positive and negative */
        for (int sgn = -1; sgn <= 1; sgn += 2) {
            for (int64_t i = 0; i < n; i++) x[i] = 3.0f * (float)sgn;
            quant_quantize_row(t, x, q, n);
            dequant_both(t, q, y, n);
            for (int64_t i = 0; i < n; i++)
                if (fabsf(y[i] - x[i]) > 0.02f * 3.0f)
                    fail_msg("%s: constant %g gave %g", quant_type_name(t), x[i], y[i]);
        }
        /* huge and tiny magnitudes: finite, within the bounds (tiny may flush to zero) */
        const float mags[] = {3000.0f, 1e-6f};
        for (size_t m = 0; m < 2; m++) {
            fill_normal(x, n, mags[m]);
            (void)roundtrip(t, x, n);
        }
        /* one block and many blocks */
        fill_normal(x, 512, 1.0f);
        int64_t nb = quant_block_elems(t) == 1 ? 512 : 2 * quant_block_elems(t);
        (void)roundtrip(t, x, nb);
    }
}

/* Q4_0 / Q8_0 quantization follows llama.cpp's reference rounding exactly. */
static void test_q8_0_q4_0_exact_codes(void **state) {
    (void)state;
    float x[32];
    for (int j = 0; j < 32; j++) x[j] = (float)(j - 12) * 0.5f; /* amax 9.5 at j=31 */
    ll_block_q8_0 b8;
    quant_quantize_row(LL_TYPE_Q8_0, x, &b8, 32);
    assert_int_equal(b8.d, ll_f32_to_f16(9.5f / 127.0f));
    for (int j = 0; j < 32; j++) assert_int_equal(b8.qs[j], (int)roundf(x[j] * (127.0f / 9.5f)));
    ll_block_q4_0 b4;
    quant_quantize_row(LL_TYPE_Q4_0, x, &b4, 32);
    assert_int_equal(b4.d, ll_f32_to_f16(9.5f / -8.0f));
    assert_int_equal(b4.qs[15] >> 4, 0); /* the largest magnitude takes code 0 (value -8*d) */
    assert_int_equal(b4.qs[12] & 15, 8); /* zero takes code 8 */
}

/* ------------------------------------------------------------------ dot products */

static void check_dots(ll_type t, int64_t n) {
    size_t bytes = quant_row_bytes(t, n);
    float *w = xalloc((size_t)n * sizeof(float)), *x = xalloc((size_t)n * sizeof(float));
    float *wd = xalloc((size_t)n * sizeof(float)), *xd = xalloc((size_t)n * sizeof(float));
    uint8_t *q = xalloc(bytes);
    fill_normal(w, n, 0.05f);
    fill_normal(x, n, 2.0f);
    quant_quantize_row(t, w, q, n);
    quant_dequant_row(t, q, wd, n);
    double want = dot_d(wd, x, n), mag = abs_dot_d(wd, x, n) + 1e-30;

    quant_force_scalar(1);
    float ref = quant_dot_row(t, q, x, n);
    quant_force_scalar(0);
    float got = quant_dot_row(t, q, x, n);
    if (fabs(ref - want) > 1e-5 * mag) fail_msg("%s n=%lld: ref dot %g vs %g", quant_type_name(t), (long long)n, ref, want);
    if (fabs(got - want) > 1e-5 * mag) fail_msg("%s n=%lld: fast dot %g vs %g", quant_type_name(t), (long long)n, got, want);

    /* pre-quantized activations: the result equals dot(dequant(w), dequant(act)) */
    ll_type at = quant_vec_dot_type(t);
    size_t ab = quant_act_bytes(t, n);
    uint8_t *act = xalloc(ab), *act_ref = xalloc(ab);
    quant_force_scalar(1);
    quant_quantize_act(t, x, act_ref, n);
    float refq = quant_dot_row_q(t, q, act_ref, n);
    quant_force_scalar(0);
    quant_quantize_act(t, x, act, n);
    assert_memory_equal(act, act_ref, ab); /* SIMD activation quantization is bit-exact */
    float gotq = quant_dot_row_q(t, q, act, n);
    quant_dequant_row(at, act, xd, n);
    double wantq = dot_d(wd, xd, n);
    if (fabs(refq - wantq) > 2e-5 * mag)
        fail_msg("%s n=%lld: ref dot_q %g vs %g", quant_type_name(t), (long long)n, refq, wantq);
    if (fabs(gotq - refq) > 2e-5 * mag)
        fail_msg("%s n=%lld: fast dot_q %g vs ref %g", quant_type_name(t), (long long)n, gotq, refq);
    /* the multi-row form gives the same numbers */
    {
        float yr[3];
        quant_dot_rows_q(t, q, 0, 3, act, n, yr); /* stride 0: the same row three times */
        for (int r = 0; r < 3; r++) assert_true(yr[r] == gotq);
    }
    /* and it stays close to the exact fp32 dot (activation quantization error only) */
    if (fabs(gotq - want) > 0.02 * mag)
        fail_msg("%s n=%lld: dot_q %g far from %g", quant_type_name(t), (long long)n, gotq, want);
    ll_free(w); ll_free(x); ll_free(wd); ll_free(xd); ll_free(q); ll_free(act); ll_free(act_ref);
}

static void run_dot_products(void) {
    for (size_t c = 0; c < LL_ARRAY_LEN(k_weight_types); c++) {
        ll_type t = k_weight_types[c];
        check_dots(t, 256);       /* one K block */
        check_dots(t, 256 * 20);  /* many blocks */
        if (quant_block_elems(t) <= 64) check_dots(t, 64 * 3);
    }
}

/* Extreme activations and weights: dot_q must not overflow its integer accumulators. */
static void run_dot_extremes(void) {
    const int64_t n = 256 * 8;
    float *w = xalloc((size_t)n * sizeof(float)), *x = xalloc((size_t)n * sizeof(float));
    float *wd = xalloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) { w[i] = (i & 1) ? 1.0f : 0.999f; x[i] = 1000.0f; }
    for (size_t c = 0; c < LL_ARRAY_LEN(k_weight_types); c++) {
        ll_type t = k_weight_types[c];
        uint8_t *q = xalloc(quant_row_bytes(t, n)), *act = xalloc(quant_act_bytes(t, n));
        quant_quantize_row(t, w, q, n);
        quant_dequant_row(t, q, wd, n);
        double want = dot_d(wd, x, n);
        quant_quantize_act(t, x, act, n);
        float got = quant_dot_row_q(t, q, act, n), gotf = quant_dot_row(t, q, x, n);
        if (fabs(got - want) > 1e-3 * fabs(want) || fabs(gotf - want) > 1e-4 * fabs(want))
            fail_msg("%s: extreme dot %g / %g vs %g", quant_type_name(t), got, gotf, want);
        ll_free(q); ll_free(act);
    }
    ll_free(w); ll_free(x); ll_free(wd);
}

/* Random valid blocks (arbitrary bytes with finite scales): every SIMD kernel must agree with
 * the scalar reference, not just on blocks our own quantizer produced. */
static void run_random_bytes(void) {
    const int64_t n = 256 * 6;
    float *x = xalloc((size_t)n * sizeof(float)), *y = xalloc((size_t)n * sizeof(float));
    fill_normal(x, n, 1.0f);
    for (size_t c = 0; c < LL_ARRAY_LEN(k_weight_types); c++) {
        ll_type t = k_weight_types[c];
        size_t bytes = quant_row_bytes(t, n);
        uint8_t *q = xalloc(bytes);
        for (size_t i = 0; i < bytes; i++) q[i] = (uint8_t)rng_u32();
        /* make every scale field finite and moderate */
        size_t bb = quant_block_bytes(t);
        for (size_t off = 0; off < bytes; off += bb) {
            uint8_t *b = q + off;
            uint16_t h1 = (uint16_t)(0x2000 + (rng_u32() & 0x0fff)), h2 = (uint16_t)(0x2000 + (rng_u32() & 0x0fff));
            uint16_t b1 = (uint16_t)(0x3c00 + (rng_u32() & 0x3ff)), b2 = (uint16_t)(0xbc00 + (rng_u32() & 0x3ff));
            switch (t) {
            case LL_TYPE_Q4_0: case LL_TYPE_Q8_0: memcpy(b, &h1, 2); break;
            case LL_TYPE_Q4_K: case LL_TYPE_Q5_K: memcpy(b, &h1, 2); memcpy(b + 2, &h2, 2); break;
            case LL_TYPE_Q6_K: memcpy(b + 208, &h1, 2); break;
            case LL_TYPE_MLX4: case LL_TYPE_MLX8: memcpy(b, &b1, 2); memcpy(b + 2, &b2, 2); break;
            case LL_TYPE_F16: for (size_t i = 0; i < bb; i += 2) { uint16_t h = (uint16_t)(rng_u32() & 0xbbff); memcpy(b + i, &h, 2); } break;
            case LL_TYPE_BF16: for (size_t i = 0; i < bb; i += 2) { uint16_t h = (uint16_t)(0x3c00 + (rng_u32() & 0x87ff)); memcpy(b + i, &h, 2); } break;
            case LL_TYPE_F32: { float f = rng_normal(); memcpy(b, &f, 4); } break;
            default: break;
            }
        }
        dequant_both(t, q, y, n);
        double want = dot_d(y, x, n), mag = abs_dot_d(y, x, n) + 1e-30;
        float got = quant_dot_row(t, q, x, n);
        if (fabs(got - want) > 1e-5 * mag) fail_msg("%s: random-bytes dot %g vs %g", quant_type_name(t), got, want);
        uint8_t *act = xalloc(quant_act_bytes(t, n));
        quant_quantize_act(t, x, act, n);
        float gq = quant_dot_row_q(t, q, act, n);
        quant_force_scalar(1);
        float rq = quant_dot_row_q(t, q, act, n);
        quant_force_scalar(0);
        if (fabs(gq - rq) > 2e-5 * mag) fail_msg("%s: random-bytes dot_q %g vs ref %g", quant_type_name(t), gq, rq);
        ll_free(q); ll_free(act);
    }
    ll_free(x); ll_free(y);
}

/* Runs fn once per SIMD level this CPU has (each compared against the scalar reference inside
 * fn), so the AVX2 kernels are covered on AVX-512 machines too. */
static void for_each_simd(void (*fn)(void)) {
    const char *levels[] = {"avx2", "avx512"};
    int ran = 0;
    for (size_t i = 0; i < LL_ARRAY_LEN(levels); i++) {
        if (quant_force_simd(levels[i]) != 0) continue;
        assert_string_equal(quant_simd_name(), levels[i]);
        fn();
        ran++;
    }
    assert_int_equal(quant_force_simd(NULL), 0);
    if (!ran) fn(); /* scalar-only CPU: still checks the reference against itself */
}

static void test_roundtrip_rmse(void **state) { (void)state; for_each_simd(run_roundtrip_rmse); }
static void test_edge_cases(void **state) { (void)state; for_each_simd(run_edge_cases); }
static void test_dot_products(void **state) { (void)state; for_each_simd(run_dot_products); }
static void test_dot_extremes(void **state) { (void)state; for_each_simd(run_dot_extremes); }
static void test_simd_matches_scalar_random_bytes(void **state) { (void)state; for_each_simd(run_random_bytes); }

/* ------------------------------------------------------------------ SIMD quantizers == reference */

/* Quantizes x[n] with the scalar reference and with the selected SIMD kernels; the bytes must be
 * identical (`lilac convert` uses the SIMD ones, and files must not depend on the CPU). */
static void expect_same_quant(ll_type t, const float *x, int64_t n, const char *what) {
    size_t bytes = quant_row_bytes(t, n);
    uint8_t *ref = xalloc(bytes), *got = xalloc(bytes);
    memset(ref, 0xa5, bytes);
    memset(got, 0x5a, bytes); /* every byte must be written */
    quant_force_scalar(1);
    quant_quantize_row(t, x, ref, n);
    quant_force_scalar(0);
    quant_quantize_row(t, x, got, n);
    for (size_t i = 0; i < bytes; i++)
        if (ref[i] != got[i])
            fail_msg("%s %s (%s, n=%lld): byte %zu (block %zu) is %02x, reference %02x", quant_type_name(t), what, quant_simd_name(),
                     (long long)n, i, i / quant_block_bytes(t), got[i], ref[i]);
    ll_free(ref);
    ll_free(got);
}

static void run_quant_bit_identical(void) {
    static const ll_type types[] = {LL_TYPE_Q4_K, LL_TYPE_Q5_K, LL_TYPE_Q6_K, LL_TYPE_Q8_0};
    const int64_t nmax = 256 * 1024;
    float *x = xalloc((size_t)nmax * sizeof(float));
    for (size_t c = 0; c < LL_ARRAY_LEN(types); c++) {
        ll_type t = types[c];
        /* random data over many magnitudes (including fp16 under- and overflow of the scales),
         * bf16-rounded like the real source */
        static const float scales[] = {1.0f, 0.02f, 1e-3f, 3e-8f, 1e-30f, 1e-42f, 1e4f, 3e6f, 1e30f};
        for (size_t k = 0; k < LL_ARRAY_LEN(scales); k++) {
            int64_t n = k == 0 ? nmax : 256 * 8;
            fill_normal(x, n, scales[k]);
            if (k == 1)
                for (int64_t i = 0; i < n; i++) x[i] = ll_bf16_to_f32(ll_f32_to_bf16(x[i]));
            expect_same_quant(t, x, n, "random");
        }
        /* odd block counts (the AVX-512 K4 path pairs blocks) and single blocks */
        for (int64_t nb = 1; nb <= 5; nb += 2) {
            fill_normal(x, 256 * nb, 0.5f);
            expect_same_quant(t, x, 256 * nb, "odd size");
        }
        if (t == LL_TYPE_Q8_0) {
            fill_normal(x, 32 * 3, 1.0f);
            expect_same_quant(t, x, 32 * 3, "odd size");
        }
        /* one-signed data (mins at zero, all-negative mins), uniform data */
        const int64_t n = 256 * 16;
        for (int64_t i = 0; i < n; i++) x[i] = rng_unif();
        expect_same_quant(t, x, n, "uniform positive");
        for (int64_t i = 0; i < n; i++) x[i] = -3.0f * rng_unif();
        expect_same_quant(t, x, n, "uniform negative");
        /* zeros, constants, and constant sub-blocks mixed with random ones */
        memset(x, 0, (size_t)n * sizeof(float));
        expect_same_quant(t, x, n, "zeros");
        for (int64_t i = 0; i < n; i++) x[i] = -0.0f;
        expect_same_quant(t, x, n, "negative zeros");
        for (int64_t i = 0; i < n; i++) x[i] = 0.75f;
        expect_same_quant(t, x, n, "constant positive");
        for (int64_t i = 0; i < n; i++) x[i] = -2.5f;
        expect_same_quant(t, x, n, "constant negative");
        fill_normal(x, n, 1.0f);
        for (int64_t i = 0; i < n; i++)
            if ((i / 16) % 3 == 0) x[i] = (i / 16) % 2 ? 1.0f : 0.0f;
        expect_same_quant(t, x, n, "constant sub-blocks");
        /* sparse spikes, one outlier per sub-block, exact ties (multiples of 1/2, small integers) */
        memset(x, 0, (size_t)n * sizeof(float));
        for (int64_t i = 0; i < n; i += 37) x[i] = (i & 1) ? 5.0f : -7.0f;
        expect_same_quant(t, x, n, "sparse");
        fill_normal(x, n, 0.01f);
        for (int64_t i = 5; i < n; i += 16) x[i] = 40.0f;
        expect_same_quant(t, x, n, "outliers");
        for (int64_t i = 0; i < n; i++) x[i] = 0.5f * (float)((int)(rng_u32() % 64) - 32);
        expect_same_quant(t, x, n, "half-integers");
        for (int64_t i = 0; i < n; i++) x[i] = (float)(rng_u32() % 16);
        expect_same_quant(t, x, n, "small integers");
        /* huge magnitudes whose ranges overflow fp32 (NaN-free input, non-finite intermediates) */
        for (int64_t i = 0; i < n; i++) x[i] = (rng_u32() & 1 ? 3.0e38f : -3.0e38f) * rng_unif();
        expect_same_quant(t, x, n, "near FLT_MAX");
        /* subnormals */
        for (int64_t i = 0; i < n; i++) x[i] = 1e-40f * rng_normal();
        expect_same_quant(t, x, n, "subnormal");
        /* non-finite values sprinkled in (a corrupt source): no crash, and still one answer */
        fill_normal(x, n, 1.0f);
        for (int64_t i = 3; i < n; i += 29) x[i] = (i % 3 == 0) ? NAN : (i % 3 == 1) ? INFINITY : -INFINITY;
        expect_same_quant(t, x, n, "non-finite");
    }
    ll_free(x);
}
static void test_quant_simd_bit_identical(void **state) { (void)state; for_each_simd(run_quant_bit_identical); }

static void test_force_simd(void **state) {
    (void)state;
    assert_int_equal(quant_force_simd("bogus"), -1);
    assert_int_equal(quant_force_simd("scalar"), 0);
    assert_string_equal(quant_simd_name(), "scalar");
    assert_int_equal(quant_force_simd(NULL), 0);
    quant_force_scalar(1);
    assert_string_equal(quant_simd_name(), "scalar");
    quant_force_scalar(0);
}

int main(void) {
    quant_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_type_table),
        cmocka_unit_test(test_known_plain),
        cmocka_unit_test(test_known_q4_0_q8_0),
        cmocka_unit_test(test_known_q4_K),
        cmocka_unit_test(test_known_q5_K),
        cmocka_unit_test(test_known_q6_K),
        cmocka_unit_test(test_known_q8_K),
        cmocka_unit_test(test_known_mlx),
        cmocka_unit_test(test_roundtrip_rmse),
        cmocka_unit_test(test_edge_cases),
        cmocka_unit_test(test_q8_0_q4_0_exact_codes),
        cmocka_unit_test(test_dot_products),
        cmocka_unit_test(test_dot_extremes),
        cmocka_unit_test(test_simd_matches_scalar_random_bytes),
        cmocka_unit_test(test_quant_simd_bit_identical),
        cmocka_unit_test(test_force_simd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
