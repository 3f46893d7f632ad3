/*
 * k_gemm2.cuh — prefill GEMM v2: mma.sync m16n8k16 (bf16 in, fp32 accumulate) with the weights
 * expanded in the kernel, one k-tile at a time (never a whole-matrix bf16 copy):
 *   C[m][n] = sum_k A[m][k] * W[n][k],  A bf16 [M][K] (rows optionally gathered), W Q4_K, Q6_K or BF16.
 * Same arguments (gemm_args), epilogue modes and grouped (MoE tile list) mode as k_gemm (k_gemm.cuh);
 * other weight types stay on k_gemm (gemm2_supports). One mode of its own, GM_GLU: W the gate and W2
 * the up matrix in one tile (64 ff per block), h = bf16(silu(gate) * up) straight from the
 * accumulators (no fp32 gate buffer; the same bits as GM_STORE + GM_SWIGLU).
 * Measured on the H200 (bench/results/2026-12-02-h200-s14): dense Q4_K 4096 x 8192 x 2048 at 214
 * TFLOP/s (BM 128; k_gemm 116), the MoE gate / down of a 4K chunk 157 / 114, GLU 0.845 vs 1.039 ms.
 *
 * Block tile BM (64 / 128 / 256 rows) x 128 (n) x 64 (k), 256 threads = 8 warps of
 * (BM / WM) x (128 / WN) (WM x WN = 2 x 4, or 4 x 2 for BM 256): MT m16 x NT n8 accumulators
 * (4 fp32 each) per warp, kept in registers through the epilogue.
 *
 * Pipeline (G2_ST = 4 stages of shared memory, one __syncthreads per k-tile):
 *   - cp.async (16-byte, zero-filled past the last row) copies the A tile and the raw quantized
 *     bytes of the W tile of k-tile kt + 3 into stage (kt + 3) % 4 while tile kt is multiplied;
 *   - during the products of tile kt every thread also expands half a W row of tile kt + 1 from its
 *     raw stage into the other of two bf16 W buffers (the dequantization ALU work overlaps the tensor
 *     cores within each warp instead of alternating with them);
 *   - the bf16 tiles are read with ldmatrix.x4. Rows are 128 bytes (8 chunks of 16 B); chunk c of
 *     row r is stored at chunk c ^ key(r & 7), so the 8 row addresses of one 8x8 ldmatrix hit 8
 *     distinct chunks (all 32 banks). A: key(r) = r. W: key(r) = r with bits 1 and 2 swapped,
 *     which also keeps the dequantizing threads' 16-byte stores conflict-free (4 rows x 2 halves per
 *     8-thread phase land in 8 distinct chunks).
 *
 * BF16 W: the raw stage is the tile itself, and the "expansion" a swizzled move of the same 4 chunks
 * the thread copied in.
 *
 * Dequantization (exact up to the final bf16 rounding, which is the reference's): a 4- or 6-bit
 * value v is masked into bits 16.. (or 12..) of the fp32 pattern 0x4B000000 (2^23), giving
 * x = 2^23 + v * 2^p exactly; then w = A * x + C with A = s * 2^-p and C = -(s * 2^(23-p) + o)
 * is one FFMA per element (fp32 error <= 2^-24 * s * 2^(23-p) <= 2^-13 s for p >= 12, far below a
 * bf16 step), and cvt.rn.bf16x2 packs two elements. p = 12 is used where the nibble already sits at
 * bits 12..15 (saves a shift); bits 20..23 cannot be used (bit 23 is the exponent's).
 *   Q4_K: w = d*sc*q - dmin*m (s = d*sc, o = dmin*m); a k-tile of 64 is one 32-byte qs window of the
 *         256-block: byte i holds element i (low nibble, sub-block 2j) and 32 + i (high, 2j + 1).
 *   Q6_K: w = d*sc*(q - 32) (o = 32 s); q = 4 bits of ql | 2 bits of qh << 4, assembled 4 at a time.
 *
 * Epilogue straight from the fragments: thread (g = lane / 4, t = lane % 4) holds rows g, g + 8 and
 * columns 2t, 2t + 1 of each m16 x n8 tile: float2 stores / bf16x2 (SWIGLU) where aligned; the
 * red4 scatter swaps half a fragment with the neighbour lane (t ^ 1) to form 4 consecutive columns
 * of one row (one float4 atomic); `fix` adds 64-bit fixed point as in k_gemm.
 * Grouped mode: m16 tiles past the tile's row count (tile_mn) skip their products (warp-uniform).
 *
 * Requirements: K % 256 == 0 (whole quantization blocks), lda % 8 == 0 and A 16-byte aligned.
 * Shared memory: 4 x BM x 128 B (A) + 2 x 16 KB (bf16 W) + 4 x raw (Q4_K 6 KB, Q6_K 14.5 KB):
 * BM 128: 120 / 154 KB, BM 256: 184 / 218 KB (1 block per SM), BM 64: 88 / 122 KB.
 */
#ifndef LILAC_K_GEMM2_CUH
#define LILAC_K_GEMM2_CUH

#include <string.h>
#include <math.h>
#include <type_traits>

#include "k_gemm.cuh"

#define G2_BN 128
#define G2_BK 64
#define G2_ST 4

/* raw bytes of one W k-tile (128 rows): Q4_K qs [128][32] + meta [128][16];
 * Q6_K ql [128][64] + qh [128][32] + scales [128][16] + the 4-byte word holding d [128][4] */
template <int WT> __host__ __device__ constexpr int g2_raw_bytes() {
    return WT == GT_Q4_K ? 128 * (32 + 16) : WT == GT_Q6_K ? 128 * (64 + 32 + 16 + 4) : 128 * 128; /* BF16: the tile itself */
}
template <int WT, int BM> __host__ __device__ constexpr size_t gemm2_smem_bytes() {
    return (size_t)G2_ST * BM * 128 + 2 * 128 * 128 + (size_t)G2_ST * g2_raw_bytes<WT>();
}

__device__ __forceinline__ uint32_t g2_saddr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void g2_cp16(uint32_t dst, const void *src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void g2_cp4(uint32_t dst, const void *src, int bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void g2_ldm4(uint32_t addr, uint32_t (&r)[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
/* d += a (16x16 row) * b (16x8 col) */
__device__ __forceinline__ void g2_mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
/* the helpers below are also host functions: the lab's CPU check of the expansion calls them */
__host__ __device__ __forceinline__ uint32_t g2_pack(float lo, float hi) {
    __nv_bfloat162 p = __floats2bfloat162_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &p, 4);
    return u;
}
/* A * (2^23 + v * 2^p) + C for the masked value bits (see the header) */
__host__ __device__ __forceinline__ float g2_fx(float A, uint32_t bits, float C) {
    uint32_t u = 0x4B000000u | bits;
    float x;
    memcpy(&x, &u, 4);
    return fmaf(A, x, C);
}
/* the swizzle key of a W row (bits 1 and 2 of r & 7 swapped) */
__host__ __device__ __forceinline__ int g2_wkey(int r) { return (r & 1) | ((r & 2) << 1) | ((r & 4) >> 1); }

/* Q4_K scale and min of sub-block s (0..7) from the 12 packed bytes in y, z, w (llama's
 * get_scale_min_k4; the branch is uniform across the block) */
__host__ __device__ __forceinline__ void g2_q4k_sm(uint32_t y, uint32_t z, uint32_t w, int s, float &sc, float &m) {
    int sh = 8 * (s & 3);
    uint32_t ys = y >> sh, zs = z >> sh;
    if (s < 4) {
        sc = (float)(ys & 63u); m = (float)(zs & 63u);
    } else {
        uint32_t ws = w >> sh;
        sc = (float)((ws & 15u) | ((ys >> 2) & 48u));
        m = (float)(((ws >> 4) & 15u) | ((zs >> 2) & 48u));
    }
}

/* The fp32 -> fp32 coefficients of one Q4_K / Q6_K group: c[0], c[1] = A, C for p = 16; c[2], c[3] for p = 12 */
__host__ __device__ __forceinline__ void g2_coef(float s, float o, float (&c)[4]) {
    c[0] = s * (1.0f / 65536.0f); c[1] = -(s * 128.0f + o);
    c[2] = s * (1.0f / 4096.0f);  c[3] = -(s * 2048.0f + o);
}

/* One qs word of Q4_K (bytes = 4 consecutive k) -> 2 bf16x2 words of the low sub-block (lo) and
 * 2 of the high one (hi). Low nibbles sit at bits 0, 8, 16, 24, high ones at 4, 12, 20, 28. */
__host__ __device__ __forceinline__ void g2_q4k_word(uint32_t w, const float (&cl)[4], const float (&ch)[4], uint32_t &lo0, uint32_t &lo1,
                                            uint32_t &hi0, uint32_t &hi1) {
    uint32_t l12 = w << 12, l8 = w << 8, r8 = w >> 8, r12 = w >> 12;
    float e0 = g2_fx(cl[2], l12 & 0xF000u, cl[3]);   /* bits 0..3   -> 12..15 */
    float e1 = g2_fx(cl[0], l8 & 0xF0000u, cl[1]);   /* bits 8..11  -> 16..19 */
    float e2 = g2_fx(cl[0], w & 0xF0000u, cl[1]);    /* bits 16..19 */
    float e3 = g2_fx(cl[0], r8 & 0xF0000u, cl[1]);   /* bits 24..27 -> 16..19 */
    float f0 = g2_fx(ch[0], l12 & 0xF0000u, ch[1]);  /* bits 4..7   -> 16..19 */
    float f1 = g2_fx(ch[2], w & 0xF000u, ch[3]);     /* bits 12..15 */
    float f2 = g2_fx(ch[2], r8 & 0xF000u, ch[3]);    /* bits 20..23 -> 12..15 */
    float f3 = g2_fx(ch[0], r12 & 0xF0000u, ch[1]);  /* bits 28..31 -> 16..19 */
    lo0 = g2_pack(e0, e1); lo1 = g2_pack(e2, e3);
    hi0 = g2_pack(f0, f1); hi1 = g2_pack(f2, f3);
}

/* 4 assembled 6-bit Q6_K values (one per byte of y, 0..63) -> 2 bf16x2 words, all at p = 16 */
__host__ __device__ __forceinline__ void g2_q6k_word(uint32_t y, float A, float C, uint32_t &o0, uint32_t &o1) {
    float e0 = g2_fx(A, (y << 16) & 0x3F0000u, C);
    float e1 = g2_fx(A, (y << 8) & 0x3F0000u, C);
    float e2 = g2_fx(A, y & 0x3F0000u, C);
    float e3 = g2_fx(A, (y >> 8) & 0x3F0000u, C);
    o0 = g2_pack(e0, e1); o1 = g2_pack(e2, e3);
}

/* PF 1: the fragments of step kk + 1 are loaded (ldmatrix) before the products of step kk, so
 * their shared-memory latency overlaps the mma issue (asm volatile keeps the written order, so
 * the compiler cannot do this itself); PF 0 loads each step's fragments just before its products */
template <int WT, int BM, int PF = 0>
__global__ void __launch_bounds__(256, BM == 64 ? 2 : 1) k_gemm2(const gemm_args a) {
    static_assert(WT == GT_Q4_K || WT == GT_Q6_K || WT == GT_BF16, "k_gemm2: Q4_K, Q6_K or BF16 weights");
    static_assert(BM == 64 || BM == 128 || BM == 256, "BM");
    constexpr int WM = BM == 256 ? 4 : 2, WN = 8 / WM;           /* warps along m / n */
    constexpr int TM = BM / WM, TN = G2_BN / WN;                 /* warp tile */
    constexpr int MT = TM / 16, NT = TN / 8;                     /* m16 / n8 tiles per warp */
    constexpr int RAW = g2_raw_bytes<WT>();
    constexpr int AR = BM / 32;                                  /* A chunks per thread and stage */
    constexpr int ASZ = BM * 128;                                /* bytes of one A stage */
    extern __shared__ __align__(128) unsigned char g2sm[];
    unsigned char *sA = g2sm;                                    /* [ST][BM][128 B] bf16 A, swizzled */
    unsigned char *sB = sA + G2_ST * ASZ;                        /* [2][128][128 B] bf16 W[n][k], swizzled */
    unsigned char *sR = sB + 2 * 128 * 128;                      /* [ST][RAW] raw W bytes */
    const uint32_t sA_a = g2_saddr(sA), sB_a = g2_saddr(sB), sR_a = g2_saddr(sR);
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;

    int m0, mn, e = 0;
    if (a.tile_e) {
        if ((int)blockIdx.y >= *a.n_tiles) return;
        e = a.tile_e[blockIdx.y]; m0 = a.tile_m0[blockIdx.y]; mn = a.tile_mn[blockIdx.y];
    } else {
        m0 = blockIdx.y * BM; mn = min(BM, a.M - m0);
    }
    /* GM_GLU: tile columns [q TN, q TN + TN/2) of warp column q are gate rows, the next TN/2 the
     * same up rows, so each thread's fragments hold gate and up of the same (row, ff) pairs;
     * a tile covers 64 ff (n0 counts ff) */
    const bool glu = a.mode == GM_GLU;
    const int n0 = blockIdx.x * (glu ? G2_BN / 2 : G2_BN);
    const long wrow0 = (long)e * a.w_rows_per_e;                 /* W row of the expert's first */
    const int nb = a.W.cols >> 8, nk = a.K / G2_BK;
    auto trow = [&](int r, bool &up) { /* the W (up: W2) row of tile column r */
        if (!glu) { up = false; return n0 + r; }
        int q = r / TN, wi = r % TN;
        up = wi >= TN / 2;
        return n0 + q * (TN / 2) + wi % (TN / 2);
    };

    /* ---- copy roles. A: rows (tid / 8) + 32 i, chunk tid % 8 (8 threads per 128-byte row). */
    const __nv_bfloat16 *asrc[AR];
    int abytes[AR];
#pragma unroll
    for (int i = 0; i < AR; i++) {
        int r = (tid >> 3) + 32 * i;
        bool v = r < mn;
        long ar = v ? (a.a_map ? (long)(a.a_map[m0 + r] / a.a_div) : (long)(m0 + r)) : 0;
        asrc[i] = a.A + ar * a.lda + (tid & 7) * 8;
        abytes[i] = v ? 16 : 0;
    }
    const uint32_t adst = sA_a + (tid >> 3) * 128 + (((tid & 7) ^ ((tid >> 3) & 7)) << 4);
    /* W: row tid / 2 (the qs / ql / qh part), row tid % 128 (the per-block scales, d) */
    const int wr = tid >> 1, wr2 = tid & 127;
    bool up1, up2;
    const int rw = trow(wr, up1), rw2 = trow(wr2, up2);
    const bool wv = rw < a.N, wv2 = rw2 < a.N;
    const long wblk = (wrow0 + (wv ? rw : 0)) * nb, wblk2 = (wrow0 + (wv2 ? rw2 : 0)) * nb; /* block of k = 0 */
    const gmat &W1r = up1 ? a.W2 : a.W, &W2r = up2 ? a.W2 : a.W;  /* the matrices of the two roles */
    const uint8_t *Wq = W1r.q, *Wqh = W1r.qh, *Wsc = W2r.sc;
    const __half *Wd = W2r.d;
    const long nblk_all = (long)W2r.rows * nb;

    auto load_stage = [&](int kt, int slot) {
        int k0 = kt * G2_BK, kb = k0 >> 8, kq = (k0 >> 6) & 3;
#pragma unroll
        for (int i = 0; i < AR; i++) g2_cp16(adst + slot * ASZ + i * 32 * 128, asrc[i] + k0, abytes[i]);
        uint32_t rb = sR_a + slot * RAW;
        if (WT == GT_BF16) { /* row wr, the 4 chunks its expanding thread moves (2h, 2h + 1, 4 + 2h, 5 + 2h) */
            const uint8_t *src = Wq + ((wrow0 + (wv ? rw : 0)) * (long)a.W.cols + k0) * 2;
            int h2 = 2 * (tid & 1);
            g2_cp16(rb + wr * 128 + h2 * 16, src + h2 * 16, wv ? 16 : 0);
            g2_cp16(rb + wr * 128 + (h2 + 1) * 16, src + (h2 + 1) * 16, wv ? 16 : 0);
            g2_cp16(rb + wr * 128 + (h2 + 4) * 16, src + (h2 + 4) * 16, wv ? 16 : 0);
            g2_cp16(rb + wr * 128 + (h2 + 5) * 16, src + (h2 + 5) * 16, wv ? 16 : 0);
        } else if (WT == GT_Q4_K) {
            g2_cp16(rb + tid * 16, Wq + (wblk + kb) * 128 + 32 * kq + 16 * (tid & 1), wv ? 16 : 0);
            if (tid < 128) g2_cp16(rb + 4096 + tid * 16, Wsc + (wblk2 + kb) * 16, wv2 ? 16 : 0);
        } else {
            int nh = kq >> 1;
            const uint8_t *ql = Wq + (wblk + kb) * 128 + 64 * nh + 32 * (tid & 1);
            g2_cp16(rb + tid * 32, ql, wv ? 16 : 0);
            g2_cp16(rb + tid * 32 + 16, ql + 16, wv ? 16 : 0);
            g2_cp16(rb + 8192 + tid * 16, Wqh + (wblk + kb) * 64 + 32 * nh + 16 * (tid & 1), wv ? 16 : 0);
            if (tid < 128) {
                g2_cp16(rb + 12288 + tid * 16, Wsc + (wblk2 + kb) * 16, wv2 ? 16 : 0);
            } else {
                /* d is 2 bytes: the aligned 4-byte word holding it (its second half only where it exists) */
                long blk = wblk2 + kb;
                g2_cp4(rb + 14336 + wr2 * 4, Wd + (blk & ~1L), wv2 ? ((blk | 1) < nblk_all ? 4 : 2) : 0);
            }
        }
    };

    /* ---- dequantization role: W row dr = tid / 2, half h = tid % 2: k [16h, 16h + 16) and
     * [32 + 16h, 48 + 16h) of the tile, i.e. bf16 chunks 2h, 2h + 1 and 4 + 2h, 5 + 2h. */
    const int dr = tid >> 1, dh = tid & 1, dkey = g2_wkey(dr & 7);
    unsigned char *bdst = sB + dr * 128;
    const int dpar = (int)(wblk & 1); /* Q6_K: parity of the row's first block (d's half); dr is the role wr */
    uint4 dq0, dq1, dq2, dq3;                                    /* the raw words of the next tile */
    float c_lo[4], c_hi[4];                                      /* their coefficients */
    int dsl = 0;                                                 /* Q6_K: the ql / qh shift of the tile (4 x the quarter pair) */
    auto deq_prep = [&](int kt, int slot) {
        const unsigned char *rb = sR + slot * RAW;
        int k0 = kt * G2_BK, kq = (k0 >> 6) & 3;
        if (WT == GT_BF16) {
            const unsigned char *row = rb + dr * 128;
            dq0 = *(const uint4 *)(row + (2 * dh) * 16); dq1 = *(const uint4 *)(row + (2 * dh + 1) * 16);
            dq2 = *(const uint4 *)(row + (2 * dh + 4) * 16); dq3 = *(const uint4 *)(row + (2 * dh + 5) * 16);
        } else if (WT == GT_Q4_K) {
            dq0 = *(const uint4 *)(rb + dr * 32 + 16 * dh);
            uint4 mv = *(const uint4 *)(rb + 4096 + dr * 16);
            float d = __half2float(__ushort_as_half((unsigned short)(mv.x & 0xffff)));
            float dmin = __half2float(__ushort_as_half((unsigned short)(mv.x >> 16)));
            float sc0, mm0, sc1, mm1;
            g2_q4k_sm(mv.y, mv.z, mv.w, 2 * kq, sc0, mm0);
            g2_q4k_sm(mv.y, mv.z, mv.w, 2 * kq + 1, sc1, mm1);
            g2_coef(d * sc0, dmin * mm0, c_lo);
            g2_coef(d * sc1, dmin * mm1, c_hi);
        } else {
            int nh = kq >> 1, qp = kq & 1;
            dq0 = *(const uint4 *)(rb + dr * 64 + 16 * dh);          /* ql, k 16h.. */
            dq1 = *(const uint4 *)(rb + dr * 64 + 32 + 16 * dh);     /* ql, k 32 + 16h.. */
            dq2 = *(const uint4 *)(rb + 8192 + dr * 32 + 16 * dh);   /* qh, both */
            const int8_t *sc = (const int8_t *)(rb + 12288 + dr * 16);
            uint32_t dw = *(const uint32_t *)(rb + 14336 + dr * 4);
            int kb = k0 >> 8;
            float d = __half2float(__ushort_as_half((unsigned short)(((dpar + kb) & 1) ? dw >> 16 : dw & 0xffff)));
            float s0 = d * (float)sc[8 * nh + 4 * qp + dh], s1 = d * (float)sc[8 * nh + 4 * qp + 2 + dh];
            /* x = 2^23 + q * 2^16: A x + C = s q - 32 s (only the p = 16 pair is used) */
            c_lo[0] = s0 * (1.0f / 65536.0f); c_lo[1] = -(s0 * 160.0f);
            c_hi[0] = s1 * (1.0f / 65536.0f); c_hi[1] = -(s1 * 160.0f);
            dsl = 4 * qp;
        }
    };
    /* part p (0, 1): raw words 2p, 2p + 1 -> chunks 2h + p (low / first quarter) and 4 + 2h + p */
    auto deq_part = [&](int p, int bslot) {
        if (WT == GT_BF16) { /* a swizzled move */
            unsigned char *b = bdst + bslot * 16384;
            *(uint4 *)(b + (((2 * dh + p) ^ dkey) << 4)) = p ? dq1 : dq0;
            *(uint4 *)(b + (((4 + 2 * dh + p) ^ dkey) << 4)) = p ? dq3 : dq2;
            return;
        }
        uint32_t x[2] = {p ? dq0.z : dq0.x, p ? dq0.w : dq0.y};
        uint32_t o[8];
        if (WT == GT_Q4_K) {
#pragma unroll
            for (int i = 0; i < 2; i++) g2_q4k_word(x[i], c_lo, c_hi, o[2 * i], o[2 * i + 1], o[4 + 2 * i], o[5 + 2 * i]);
        } else {
            uint32_t l1[2] = {p ? dq1.z : dq1.x, p ? dq1.w : dq1.y};
            uint32_t hq[2] = {p ? dq2.z : dq2.x, p ? dq2.w : dq2.y};
            const int sl = dsl;
#pragma unroll
            for (int i = 0; i < 2; i++) {
                uint32_t y0 = ((x[i] >> sl) & 0x0F0F0F0Fu) | (((hq[i] >> sl) & 0x03030303u) << 4);
                uint32_t y1 = ((l1[i] >> sl) & 0x0F0F0F0Fu) | (((hq[i] >> (sl + 2)) & 0x03030303u) << 4);
                g2_q6k_word(y0, c_lo[0], c_lo[1], o[2 * i], o[2 * i + 1]);
                g2_q6k_word(y1, c_hi[0], c_hi[1], o[4 + 2 * i], o[5 + 2 * i]);
            }
        }
        unsigned char *b = bdst + bslot * 16384;
        *(uint4 *)(b + (((2 * dh + p) ^ dkey) << 4)) = make_uint4(o[0], o[1], o[2], o[3]);
        *(uint4 *)(b + (((4 + 2 * dh + p) ^ dkey) << 4)) = make_uint4(o[4], o[5], o[6], o[7]);
    };

    /* ---- warp tile and ldmatrix addresses. Warps w and w + 4 share a scheduler: with wm = (w / WN) * TM
     * they hold different rows, so skipped m16 tiles (grouped mode) unload every scheduler alike. */
    const int wm = (w / WN) * TM, wn = (w % WN) * TN;
    const uint32_t a_ld = sA_a + (wm + (lane & 15)) * 128, a_x = (uint32_t)(((lane >> 4) ^ (lane & 7)) << 4);
    const uint32_t b_ld = sB_a + (wn + (lane & 7) + 8 * (lane >> 4)) * 128,
                   b_x = (uint32_t)((((lane >> 3) & 1) ^ g2_wkey(lane & 7)) << 4);
    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int c = 0; c < 4; c++) acc[i][j][c] = 0.0f;
    bool live[MT];
#pragma unroll
    for (int i = 0; i < MT; i++) live[i] = wm + 16 * i < mn;

    /* ---- prologue: tiles 0 .. ST-2 in flight, tile 0 expanded */
#pragma unroll
    for (int s = 0; s < G2_ST - 1; s++) {
        if (s < nk) load_stage(s, s);
        cp_async_commit();
    }
    cp_async_wait<G2_ST - 2>();
    __syncthreads();
    deq_prep(0, 0);
    deq_part(0, 0);
    deq_part(1, 0);

    /* the k loop; SKIP: this warp has m16 tiles past the tile's rows (their loads and products are
     * skipped, warp-uniform branches), a separate copy so that full warps run branch-free */
    auto kloop = [&](auto skip_t) {
        constexpr bool SKIP = decltype(skip_t)::value;
        for (int kt = 0; kt < nk; kt++) {
            /* tiles <= kt + 1 have landed (this thread's copies; the barrier makes everyone's visible,
             * publishes the bf16 W tile kt and retires every read of stage (kt - 1) % ST and W buffer (kt + 1) & 1) */
            cp_async_wait<G2_ST - 3>();
            __syncthreads();
            if (kt + G2_ST - 1 < nk) load_stage(kt + G2_ST - 1, (kt + G2_ST - 1) % G2_ST);
            cp_async_commit();
            const bool more = kt + 1 < nk;
            if (more) deq_prep(kt + 1, (kt + 1) % G2_ST);
            const uint32_t as = a_ld + (kt % G2_ST) * ASZ, bs = b_ld + (kt & 1) * 16384;
            auto frag = [&](int kk, uint32_t (&bf)[NT / 2][4], uint32_t (&af)[MT][4]) {
#pragma unroll
                for (int jj = 0; jj < NT / 2; jj++) g2_ldm4(bs + jj * 16 * 128 + (b_x ^ (32u * kk)), bf[jj]);
#pragma unroll
                for (int i = 0; i < MT; i++)
                    if (!SKIP || live[i]) g2_ldm4(as + i * 16 * 128 + (a_x ^ (32u * kk)), af[i]);
            };
            auto prod = [&](const uint32_t (&bf)[NT / 2][4], const uint32_t (&af)[MT][4]) {
#pragma unroll
                for (int i = 0; i < MT; i++)
                    if (!SKIP || live[i]) {
#pragma unroll
                        for (int j = 0; j < NT; j++) g2_mma(acc[i][j], af[i], bf[j >> 1][2 * (j & 1)], bf[j >> 1][2 * (j & 1) + 1]);
                    }
            };
            if (PF) {
                uint32_t bf[2][NT / 2][4], af[2][MT][4];
                frag(0, bf[0], af[0]);
#pragma unroll
                for (int kk = 0; kk < G2_BK / 16; kk++) {
                    if (kk + 1 < G2_BK / 16) frag(kk + 1, bf[(kk + 1) & 1], af[(kk + 1) & 1]);
                    prod(bf[kk & 1], af[kk & 1]);
                    if (more && (kk == 0 || kk == 2)) deq_part(kk >> 1, (kt + 1) & 1);
                }
            } else {
#pragma unroll
                for (int kk = 0; kk < G2_BK / 16; kk++) {
                    uint32_t bf[NT / 2][4], af[MT][4];
                    frag(kk, bf, af);
                    prod(bf, af);
                    if (more && (kk == 0 || kk == 2)) deq_part(kk >> 1, (kt + 1) & 1);
                }
            }
        }
    };
    if (wm + TM <= mn) kloop(std::false_type());
    else kloop(std::true_type());

    /* ---- epilogue: rows wm + 16 i + g (+ 8), columns n0 + wn + 8 j + 2 t (+ 1) */
    const int g = lane >> 2, t = lane & 3, N = a.N;
    if (glu) {
        /* n8 tiles j < NT/2 are gate, j + NT/2 the up values of the same ff */
        const bool v2 = (a.ldh & 1) == 0 && ((uintptr_t)a.H & 3) == 0;
        const int f0 = n0 + (wn / TN) * (TN / 2) + 2 * t;
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                int r = wm + 16 * i + g + 8 * hh;
                if (r >= mn) continue;
                __nv_bfloat16 *hrow = a.H + (long)(m0 + r) * a.ldh;
#pragma unroll
                for (int j = 0; j < NT / 2; j++) {
                    int f = f0 + 8 * j;
                    float h0 = silu_f(acc[i][j][2 * hh]) * acc[i][j + NT / 2][2 * hh];
                    float h1 = silu_f(acc[i][j][2 * hh + 1]) * acc[i][j + NT / 2][2 * hh + 1];
                    if (v2 && f + 1 < N) *(uint32_t *)(hrow + f) = g2_pack(h0, h1);
                    else {
                        if (f < N) hrow[f] = __float2bfloat16(h0);
                        if (f + 1 < N) hrow[f + 1] = __float2bfloat16(h1);
                    }
                }
            }
    } else if (a.mode == GM_SCATTER_ADD && a.fix) {
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                int r = wm + 16 * i + g + 8 * hh;
                if (r >= mn) continue;
                int src = a.c_map[m0 + r];
                float wgt = a.c_w[src];
                long ro = (long)(src / a.c_div) * a.ldc;
#pragma unroll
                for (int j = 0; j < NT; j++)
#pragma unroll
                    for (int c = 0; c < 2; c++) {
                        int n = n0 + wn + 8 * j + 2 * t + c;
                        if (n >= N) continue;
                        float v = wgt * acc[i][j][2 * hh + c];
                        if (isfinite(v)) gemm_fix_add(a.fix + ro + n, v);
                        else a.C[ro + n] = v; /* as k_gemm: inf / NaN reach X as fp32 adds would */
                    }
            }
    } else if (a.mode == GM_SCATTER_ADD && a.red4 && (a.ldc & 3) == 0 && (N & 3) == 0 && ((uintptr_t)a.C & 15) == 0) {
        /* even t: row g, columns 2t .. 2t + 3; odd t: row g + 8, columns 2t - 2 .. 2t + 1 */
        const int odd = t & 1;
#pragma unroll
        for (int i = 0; i < MT; i++) {
            int r = wm + 16 * i + g + 8 * odd;
            bool rv = r < mn;
            int src = rv ? a.c_map[m0 + r] : 0;
            float wgt = rv ? a.c_w[src] : 0.0f;
            float *row = a.C + (long)(src / a.c_div) * a.ldc;
#pragma unroll
            for (int j = 0; j < NT; j++) {
                float s0 = odd ? acc[i][j][0] : acc[i][j][2], s1 = odd ? acc[i][j][1] : acc[i][j][3];
                float r0 = __shfl_xor_sync(0xffffffffu, s0, 1), r1 = __shfl_xor_sync(0xffffffffu, s1, 1);
                float4 v = odd ? make_float4(r0, r1, acc[i][j][2], acc[i][j][3]) : make_float4(acc[i][j][0], acc[i][j][1], r0, r1);
                int n = n0 + wn + 8 * j + 4 * (t >> 1);
                v.x *= wgt; v.y *= wgt; v.z *= wgt; v.w *= wgt;
                if (rv && n < N) gemm_red4(row + n, v);
            }
        }
    } else if (a.mode == GM_SCATTER_ADD) {
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                int r = wm + 16 * i + g + 8 * hh;
                if (r >= mn) continue;
                int src = a.c_map[m0 + r];
                float wgt = a.c_w[src];
                float *row = a.C + (long)(src / a.c_div) * a.ldc;
#pragma unroll
                for (int j = 0; j < NT; j++)
#pragma unroll
                    for (int c = 0; c < 2; c++) {
                        int n = n0 + wn + 8 * j + 2 * t + c;
                        if (n < N) atomicAdd(row + n, wgt * acc[i][j][2 * hh + c]);
                    }
            }
    } else {
        const int mode = a.mode;
        /* pairs of columns as one 8-byte (fp32) / 4-byte (bf16) access where every row start is aligned */
        const bool v2 = mode == GM_SWIGLU ? ((a.ldg & 1) == 0 && ((uintptr_t)a.G & 7) == 0 && (a.ldh & 1) == 0 && ((uintptr_t)a.H & 3) == 0)
                                          : ((a.ldc & 1) == 0 && ((uintptr_t)a.C & 7) == 0);
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                int r = wm + 16 * i + g + 8 * hh;
                if (r >= mn) continue;
                long m = m0 + r;
                float gate = mode == GM_ADD_GATED ? sigmoid_f(a.rowgate[m * a.rg_stride]) : 1.0f;
#pragma unroll
                for (int j = 0; j < NT; j++) {
                    int n = n0 + wn + 8 * j + 2 * t;
                    if (n >= N) continue;
                    float v0 = acc[i][j][2 * hh], v1 = acc[i][j][2 * hh + 1];
                    if (v2 && n + 1 < N) {
                        if (mode == GM_SWIGLU) {
                            float2 gg = *(const float2 *)(a.G + m * a.ldg + n);
                            *(uint32_t *)(a.H + m * a.ldh + n) = g2_pack(silu_f(gg.x) * v0, silu_f(gg.y) * v1);
                        } else {
                            float2 *p = (float2 *)(a.C + m * a.ldc + n);
                            if (mode == GM_STORE) {
                                *p = make_float2(v0, v1);
                            } else {
                                float2 o = *p;
                                *p = make_float2(o.x + gate * v0, o.y + gate * v1); /* ADD: gate 1 */
                            }
                        }
                    } else {
#pragma unroll
                        for (int c = 0; c < 2; c++) {
                            if (n + c >= N) break;
                            float v = c ? v1 : v0;
                            switch (mode) {
                            case GM_STORE: a.C[m * a.ldc + n + c] = v; break;
                            case GM_SWIGLU: a.H[m * a.ldh + n + c] = __float2bfloat16(silu_f(a.G[m * a.ldg + n + c]) * v); break;
                            default: a.C[m * a.ldc + n + c] += gate * v; break; /* ADD, ADD_GATED */
                            }
                        }
                    }
                }
            }
    }
}

/* ---- host side */

/* whether k_gemm2 takes these arguments: Q4_K / Q6_K, whole blocks along k, 16-byte A rows */
static inline bool gemm2_supports(const gemm_args &a) {
    return (a.W.type == GT_Q4_K || a.W.type == GT_Q6_K || a.W.type == GT_BF16) && a.K == a.W.cols && a.K % 256 == 0 && (a.lda & 7) == 0 &&
           ((uintptr_t)a.A & 15) == 0 &&
           (a.mode != GM_GLU || (a.W2.type == a.W.type && a.W2.rows == a.W.rows && a.W2.cols == a.W.cols));
}

/* launches k_gemm2<WT, BM> on grid (n tiles of 128, m tiles of BM or the tile list); the dynamic
 * shared-memory limit is raised on the first launch of each instance */
template <int WT, int BM, int PF> static void gemm2_launch(dim3 grid, cudaStream_t st, const gemm_args &a) {
    static bool ready = false;
    if (!ready) {
        cudaFuncSetAttribute(k_gemm2<WT, BM, PF>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gemm2_smem_bytes<WT, BM>());
        ready = true;
    }
    k_gemm2<WT, BM, PF><<<grid, 256, gemm2_smem_bytes<WT, BM>(), st>>>(a);
}

template <int PF> static inline void gemm2_run_pf(int bm, dim3 grid, cudaStream_t st, const gemm_args &a) {
    if (a.W.type == GT_BF16) {
        if (bm == 256) gemm2_launch<GT_BF16, 256, PF>(grid, st, a);
        else if (bm == 128) gemm2_launch<GT_BF16, 128, PF>(grid, st, a);
        else gemm2_launch<GT_BF16, 64, PF>(grid, st, a);
    } else if (a.W.type == GT_Q4_K) {
        if (bm == 256) gemm2_launch<GT_Q4_K, 256, PF>(grid, st, a);
        else if (bm == 128) gemm2_launch<GT_Q4_K, 128, PF>(grid, st, a);
        else gemm2_launch<GT_Q4_K, 64, PF>(grid, st, a);
    } else {
        if (bm == 256) gemm2_launch<GT_Q6_K, 256, PF>(grid, st, a);
        else if (bm == 128) gemm2_launch<GT_Q6_K, 128, PF>(grid, st, a);
        else gemm2_launch<GT_Q6_K, 64, PF>(grid, st, a);
    }
}

/* bm: 64 / 128 (dense or grouped; grouped: the tile list's row tile) or 256 (dense only); pf: see k_gemm2 */
static inline void gemm2_run(int bm, dim3 grid, cudaStream_t st, const gemm_args &a, int pf = 0) {
    if (pf) gemm2_run_pf<1>(bm, grid, st, a);
    else gemm2_run_pf<0>(bm, grid, st, a);
}

#endif
