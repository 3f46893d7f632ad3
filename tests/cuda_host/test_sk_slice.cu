/*
 * test_sk_slice.cu — the split-K MoE's down-slice addressing (src/backend/cuda/k_lmoe_sk.cuh), run on
 * the CPU: nvcc compiles it as host code, no GPU needed (tests/run.sh builds and runs it where nvcc
 * is present, as CI has).
 *
 * Why here: k_lmoe_sk copies UH columns of each down row out of the device layout (Q4_K / Q6_K split
 * into planes) piece by piece (sk_slice_piece) and hands ln_dot_q4k / ln_dot_q6k the chunk's bytes,
 * half and scales (sk_slice_chunk). A wrong offset, half or scale there would not crash; it would
 * quietly decode other weights. This test fills slice buffers exactly as the kernel does (the same
 * helpers, byte for byte), decodes every chunk with the dot functions' documented semantics (the Q4_K
 * scale bits exactly as ln_dot_q4k extracts them) and compares with the CPU library's dequantization
 * of the original llama.cpp blocks, column by column; it also checks that the slice buffer is
 * covered once and that chunk dc's columns are the ones ln_act_q4k / ln_act_q6k (Q, 0, dc) read from
 * the unit's activation.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "quant/quant.h"
}
namespace ln_impl {
#include "backend/cuda/k_lean.cuh"
#include "backend/cuda/k_lmoe_sk.cuh"
}
using namespace ln_impl;

#include "host_tap.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static uint16_t f2h(float f) {
    __half h = __float2half(f);
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}
static float h2f(uint16_t u) {
    __half h;
    memcpy(&h, &u, 2);
    return __half2float(h);
}

enum { ROWS = 64, NBD = 2, FF = NBD * 256, R = 16 };

struct mat {
    int WT, bb;                        /* GT_Q4_K / GT_Q6_K, bytes per llama.cpp block */
    uint8_t *blocks;                   /* [ROWS * NBD][bb] llama.cpp order */
    uint8_t *plane[4];                 /* the device layout: q / ql, qh, sc, d (k_repack_q4k / q6k) */
    float *ref;                        /* [ROWS][FF] dequantized by the CPU library */
};

static void mat_make(mat *m, int WT) {
    m->WT = WT;
    m->bb = WT == GT_Q4_K ? 144 : 210;
    size_t nblk = (size_t)ROWS * NBD;
    m->blocks = (uint8_t *)malloc(nblk * m->bb);
    for (size_t i = 0; i < nblk * m->bb; i++) m->blocks[i] = (uint8_t)rnd();
    for (int k = 0; k < 4; k++) m->plane[k] = (uint8_t *)calloc(nblk * 128, 1);
    for (size_t b = 0; b < nblk; b++) {
        uint8_t *s = m->blocks + b * m->bb;
        if (WT == GT_Q4_K) { /* finite scales: d, dmin in [0.001, 0.05) */
            uint16_t d = f2h(0.001f + (rnd() % 1000) * 4.9e-5f), dm = f2h(0.001f + (rnd() % 1000) * 4.9e-5f);
            memcpy(s, &d, 2);
            memcpy(s + 2, &dm, 2);
            memcpy(m->plane[2] + b * 16, s, 16);
            memcpy(m->plane[0] + b * 128, s + 16, 128);
        } else {
            uint16_t d = f2h(0.001f + (rnd() % 1000) * 4.9e-5f);
            memcpy(s + 208, &d, 2);
            memcpy(m->plane[0] + b * 128, s, 128);
            memcpy(m->plane[1] + b * 64, s + 128, 64);
            memcpy(m->plane[2] + b * 16, s + 192, 16);
            memcpy(m->plane[3] + b * 2, s + 208, 2);
        }
    }
    m->ref = (float *)malloc((size_t)ROWS * FF * 4);
    for (int r = 0; r < ROWS; r++)
        quant_dequant_row(WT == GT_Q4_K ? LL_TYPE_Q4_K : LL_TYPE_Q6_K, m->blocks + (size_t)r * NBD * m->bb, m->ref + (size_t)r * FF, FF);
}

static void mat_free(mat *m) {
    free(m->blocks);
    for (int k = 0; k < 4; k++) free(m->plane[k]);
    free(m->ref);
}

/* The 64 values of a Q4_K chunk as ln_dot_q4k sees them: qs its 32 bytes, meta the block's 16, j its
 * index in the block (the scale / min bits exactly as ln_dot_q4k takes them); col[] block-relative. */
static void decode_q4k(const uint8_t *qs, const uint8_t *meta, int j, float *val, int *col) {
    uint32_t mv[4];
    memcpy(mv, meta, 16);
    uint32_t t = (uint32_t)(16 * (j & 1)), scp, mp;
    if (j < 2) {
        scp = (mv[1] >> t) & 0x3f3fu;
        mp = (mv[2] >> t) & 0x3f3fu;
    } else {
        scp = ((mv[3] >> t) & 0x0f0fu) | ((mv[1] >> (t + 2)) & 0x3030u);
        mp = ((mv[3] >> (t + 4)) & 0x0f0fu) | ((mv[2] >> (t + 2)) & 0x3030u);
    }
    float d = h2f((uint16_t)(mv[0] & 0xffffu)), dmin = h2f((uint16_t)(mv[0] >> 16));
    for (int i = 0; i < 32; i++) {
        val[i] = d * (float)(scp & 0xffu) * (float)(qs[i] & 15) - dmin * (float)(mp & 0xffu);
        col[i] = 64 * j + i;
        val[32 + i] = d * (float)(scp >> 8) * (float)(qs[i] >> 4) - dmin * (float)(mp >> 8);
        col[32 + i] = 64 * j + 32 + i;
    }
}

/* The 64 values of a Q6_K chunk as ln_dot_q6k sees them (ql its 32 bytes, qh the half's 32, sc the
 * half's 8 scales, d, s = j & 1); col[] block-relative for half n. */
static void decode_q6k(const uint8_t *ql, const uint8_t *qh, const int8_t *sc, float d, int n, int s, float *val, int *col) {
    for (int i = 0; i < 32; i++) {
        int lo = ((ql[i] & 15) | (((qh[i] >> (2 * s)) & 3) << 4)) - 32;
        int hi = ((ql[i] >> 4) | (((qh[i] >> (4 + 2 * s)) & 3) << 4)) - 32;
        val[i] = d * (float)sc[2 * s + i / 16] * (float)lo;
        col[i] = 128 * n + 32 * s + i;
        val[32 + i] = d * (float)sc[4 + 2 * s + i / 16] * (float)hi;
        col[32 + i] = 128 * n + 32 * (s + 2) + i;
    }
}

/* The column of the unit's activation (0 .. UH) that ln_act_q4k / ln_act_q6k(Q, 0, dc) put at
 * position e (0 .. 63) of a thread's slice: Q4_K [64 dc, +64); Q6_K groups gl, gl + 2 with
 * gl = 4 ((dc >> 1) & 1) + (dc & 1). */
static int act_col(int WT, int dc, int e) {
    if (WT == GT_Q4_K) return 64 * dc + e;
    int gl = 4 * ((dc >> 1) & 1) + (dc & 1);
    return 32 * (e < 32 ? gl : gl + 2) + (e & 31);
}

static void test_slices(const mat *m, int UH) {
    int WT = m->WT, P = sk_slice_pieces(WT, UH), rb = sk_slice_row_bytes(WT, UH);
    size_t bytes = (size_t)R * rb;
    uint8_t *buf = (uint8_t *)malloc(bytes);
    int *hits = (int *)malloc(bytes * sizeof(int));
    const long g0s[3] = {0, 16, 40};
    for (int gi = 0; gi < 3; gi++)
        for (int f0 = 0; f0 < FF; f0 += UH) {
            long g0 = g0s[gi];
            memset(buf, 0xa5, bytes);
            memset(hits, 0, bytes * sizeof(int));
            int bad_piece = 0;
            for (int r = 0; r < R; r++)
                for (int p = 0; p < P; p++) {
                    sk_piece pc = sk_slice_piece(WT, UH, R, NBD, g0, f0, r, p);
                    size_t plane_bytes = (size_t)ROWS * NBD * (pc.plane == 0 ? 128 : pc.plane == 1 ? 64 : pc.plane == 2 ? 16 : 2);
                    if (pc.dst + pc.bytes > bytes || pc.src + pc.bytes > plane_bytes || pc.src % pc.bytes || pc.dst % pc.bytes) {
                        bad_piece++;
                        continue;
                    }
                    memcpy(buf + pc.dst, m->plane[pc.plane] + pc.src, pc.bytes);
                    for (int k = 0; k < pc.bytes; k++) hits[pc.dst + k]++;
                }
            int once = 1;
            for (size_t k = 0; k < bytes; k++) once &= hits[k] == 1;
            /* every chunk of every row against the reference, and the unit's columns each exactly once */
            int wrong = 0, cover = 1, actmap = 1;
            double maxd = 0;
            for (int dr = 0; dr < R; dr++) {
                int seen[256] = {0};
                for (int dc = 0; dc < UH / 64; dc++) {
                    sk_chunk ch = sk_slice_chunk(WT, UH, R, NBD, g0, f0, dr, dc);
                    float val[64];
                    int col[64];
                    if (WT == GT_Q4_K) decode_q4k(buf + ch.q, buf + ch.m, ch.j & 3, val, col);
                    else {
                        uint16_t dw[2];
                        memcpy(dw, buf + ch.d, 4);
                        decode_q6k(buf + ch.q, buf + ch.m, (const int8_t *)(buf + ch.sc), h2f(dw[ch.dh]), (ch.j >> 1) & 1, ch.j & 1, val, col);
                    }
                    for (int e = 0; e < 64; e++) {
                        int c = (f0 & ~255) + col[e]; /* the matrix column */
                        if (c < f0 || c >= f0 + UH) { cover = 0; continue; }
                        seen[c - f0]++;
                        if (c - f0 != act_col(WT, dc, e)) actmap = 0;
                        float ref = m->ref[(size_t)(g0 + dr) * FF + c];
                        double dd = fabs((double)val[e] - ref);
                        if (dd > maxd) maxd = dd;
                        if (dd > 1e-5 * (fabs(ref) + 1e-3)) wrong++;
                    }
                }
                for (int c = 0; c < UH; c++) cover &= seen[c] == 1;
            }
            check(!bad_piece && once && cover && actmap && !wrong,
                  "%s UH %d rows %ld.. columns %d..: pieces in bounds and aligned (%d bad), buffer covered once (%d), "
                  "unit columns once (%d), activation columns match ln_act (%d), values vs the CPU dequant (%d wrong, max |d| %.2g)",
                  WT == GT_Q4_K ? "Q4_K" : "Q6_K", UH, g0, f0, bad_piece, once, cover, actmap, wrong, maxd);
        }
    free(buf);
    free(hits);
}

int main(void) {
    printf("# k_lmoe_sk down-slice addressing, host\n");
    for (int t = 0; t < 2; t++) {
        mat m;
        mat_make(&m, t ? GT_Q6_K : GT_Q4_K);
        test_slices(&m, 128);
        test_slices(&m, 256);
        mat_free(&m);
    }
    /* the kernel's slice buffer and shared-memory plan at the real shapes (H 2048: R 256, UH 128) */
    check(sk_slice_row_bytes(GT_Q4_K, 128) * 256 == 20480 && sk_slice_row_bytes(GT_Q6_K, 128) * 256 == 27648,
          "slice buffers at H 2048: Q4_K %d, Q6_K %d bytes", sk_slice_row_bytes(GT_Q4_K, 128) * 256, sk_slice_row_bytes(GT_Q6_K, 128) * 256);
    printf("1..%d\n", n_test);
    return n_fail ? 1 : 0;
}
