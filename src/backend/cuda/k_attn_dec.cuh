/*
 * k_attn_dec.cuh — decode attention, flash-decoding style (issue 6).
 *
 *   k_attn_decode_fd<DPL>: grid (NKV, NS) for a FIXED number of splits NS (so the launch shape does
 *     not depend on the context and the decode graph stays valid), block 256 = 8 warps. Split s of
 *     kv head h covers positions [s*n/NS, (s+1)*n/NS) of the n = pos + 1 in the cache; warp w of
 *     the block takes tiles of FD_TILE consecutive positions (tiles w, w + 8, ...), so the 8 warps read
 *     adjacent rows. Lane l holds dims [l*DPL, (l+1)*DPL) of K and V rows (HD = 32 * DPL), the G
 *     query heads of the kv head (GQA packing: K/V read once for all of them) in shared memory, and
 *     an online-softmax state (m, l, o[G][DPL]) in registers.
 *     Per tile: the FD_TILE K and V rows are loaded first (2 * FD_TILE loads of DPL bf16 per lane in flight),
 *     then the G partial dots of each position are all-reduced over the warp with a reduce-scatter
 *     butterfly (4+2+1+1+1 shuffles for G = 8, instead of 5 per head) and broadcast back (G
 *     shuffles), then one rescale of the state per tile. At the end the 8 warps' states are merged
 *     in shared memory and the split's partial (o unnormalised, m, l) is written for k_attn_combine
 *     (k_attn.cuh), which reads NS splits when attn_dec_args.CH == 0.
 *   Why: the previous kernel gave each block 64 positions (2 x 2K blocks at 128K), staged them in
 *     shared memory and reduced each score with 5 shuffles per head: 409 GB/s at 128K, 39 µs at 4K.
 *   MMA (the default for HD 256 and 8 query heads, LILAC_CUDA_FD_MMA): the same blocks, splits,
 *     prep and merge, but a warp iteration takes 16 positions through two tensor-core
 *     products (fd_mma_tile below): the per-position chain of dots, butterflies and softmax bound
 *     the loop above at 1.6-1.9 TB/s; this one reads 128K of context at 2.9 TB/s (session 12).
 * KV cache layout: [NKV][n_ctx][HD] bf16. Empty splits (n < NS) write m = -inf, l = 0.
 */
#ifndef LILAC_K_ATTN_DEC_CUH
#define LILAC_K_ATTN_DEC_CUH

#include "k_attn.cuh"
#include "k_flash2.cuh" /* fl2_mma, fl2_pack: the tensor-core loop (FD_MMA) */

#define FD_G 8      /* query heads per kv head the kernel is built for (G <= FD_G) */
#ifndef FD_TILE
#define FD_TILE 4   /* positions per warp iteration (2: 200 registers, also one block per SM; 4 keeps twice the K/V loads in flight: 295 -> 315 tok/s at 128K, session 8) */
#endif
#define FD_WARPS 8
#ifndef FD_TILE_FG
#define FD_TILE_FG 2 /* positions per warp iteration of the FG < FD_G blocks (128 registers) */
#endif
#ifndef FD_Q8_TS
#define FD_Q8_TS 1  /* sub-tiles of FD_TILE positions a q8 warp iteration loads at once (2: measured slower, session 11) */
#endif
#define FD_PF 64    /* cached rows per split prefetched into L2 before the wait (past the warps' first tiles) */
#ifndef FD_XS_DIRECT
#define FD_XS_DIRECT 1 /* the appended position's block (attn_dec_args.xs) writes its one-position partial from the rows it appends (0: through the loop and the merge) */
#endif
#ifndef FD_MINB_MMA
#define FD_MINB_MMA 1 /* blocks per SM the tensor-core instances are built for (2: <= 128 registers, so that an
                       * 8-head block fits beside the 16-warp qkv projection at 64 registers; session 28, unmeasured) */
#endif
#ifndef FD_EARLY
#define FD_EARLY 1 /* experiment (session 31; dev/lean_variant.sh fdne -DFD_EARLY=0): 0 drops the first tile's
                    * loads and the L2 prefetches before the wait. Why: in session 31's H100 timeline the last
                    * flash-decoding block enters 0.25 µs after the qkv projection ends and passes its wait
                    * 2 µs later; if the pre-wait requests hold the threads (as suspected of the cout kernel's
                    * cp.async), dropping them moves the wait earlier and the loads after it */
#endif
#ifndef FD_PF_FG
#define FD_PF_FG 256 /* the same for the FG < FD_G blocks, which enter while the projection before them runs */
#endif

/* The merge's per-warp head rows in shared memory: row r (warp w, head g: r = w * FG + g) holds dim d
 * at fd_wo(r, d) = r * FD_WS(HD) + d + 2 (d / 32). The padding keeps the stores of a warp's state
 * free of bank conflicts: the tensor-core loop's lane (g, c) stores dims 32g + 2mt of heads 2c and
 * 2c + 1, which with rows of exactly HD floats all fell into one bank pair (32 ways; session 23's
 * trace: 3.6 µs of merge per flash-decoding block at 4K); now they are 8c + 2g apart (mod 32). */
#define FD_WS(HD) ((HD) + 2 * ((HD) >> 5) + 4)
__host__ __device__ static inline int fd_wo(int r, int d, int HD) { return r * FD_WS(HD) + d + 2 * (d >> 5); }

/* dynamic smem: q [G][HD] fp32 + per-warp states for the merge + q as bf16 mma fragments [HD/16][32] x 8 B
 * (the tensor-core loop) */
__host__ __device__ static inline size_t attn_fd_smem(int HD, int FG = FD_G) {
    return (size_t)FG * HD * 4 + (size_t)FD_WARPS * FG * FD_WS(HD) * 4 + (size_t)FD_WARPS * FG * 2 * 4 + (size_t)FG * HD * 2;
}

/* All-reduce of v[0..N) over the warp (N = 8: the 8-head blocks, 4: the FG = 4 blocks of
 * k_attn_decode_fd): afterwards every lane holds all N totals. Level k halves the values a lane
 * carries (it keeps the half its lane bit 16 >> k selects and sends the other to its partner); the
 * last value is summed over the remaining lane bits; head g then lives in the lane whose bits
 * 4, 3, .. are g's bits from the top. */
template <int N>
__device__ __forceinline__ void fd_allreduce(float v[N], int lane) {
    static_assert(N == 4 || N == 8, "fd_allreduce: 4 or 8 values");
    constexpr int L = N == 8 ? 3 : 2;
    float a[N];
#pragma unroll
    for (int i = 0; i < N; i++) a[i] = v[i];
#pragma unroll
    for (int k = 0; k < L; k++) {
        const int h = N >> (k + 1), off = 16 >> k;
        bool b = lane & off;
#pragma unroll
        for (int i = 0; i < h; i++) {
            float send = b ? a[i] : a[i + h], keep = b ? a[i + h] : a[i];
            a[i] = keep + __shfl_xor_sync(0xffffffffu, send, off);
        }
    }
    float a1 = a[0];
#pragma unroll
    for (int off = 16 >> L; off > 0; off >>= 1) a1 += __shfl_xor_sync(0xffffffffu, a1, off);
#pragma unroll
    for (int g = 0; g < N; g++) {
        int src = 0;
#pragma unroll
        for (int k = 0; k < L; k++) src |= ((g >> (L - 1 - k)) & 1) << (4 - k);
        v[g] = __shfl_sync(0xffffffffu, a1, src);
    }
}

/* NC: the non-coherent __ldg path (a separate launch); the persistent decode kernel appends the
 * current K/V row in the same launch and reads with plain loads. */
template <int DPL, bool NC>
__device__ __forceinline__ void fd_load_row(const __nv_bfloat16 *p, float *out) {
    if (DPL == 8) {
        uint4 v = NC ? __ldg((const uint4 *)p) : *(const uint4 *)p;
        uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; i++) { out[2 * i] = __uint_as_float(w[i] << 16); out[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u); }
    } else if (DPL == 4) {
        uint2 v = NC ? __ldg((const uint2 *)p) : *(const uint2 *)p;
        out[0] = __uint_as_float(v.x << 16); out[1] = __uint_as_float(v.x & 0xffff0000u);
        out[2] = __uint_as_float(v.y << 16); out[3] = __uint_as_float(v.y & 0xffff0000u);
    } else {
#pragma unroll
        for (int i = 0; i < DPL; i++) out[i] = __bfloat162float(p[i]);
    }
}

template <int DPL, bool NC>
__device__ __forceinline__ void kvq_load(const unsigned char *row, int lane, kvq_raw<DPL> &r) {
    constexpr int HD = 32 * DPL;
    const unsigned char *c = row + lane * DPL;
    const __half *sp = (const __half *)(row + HD) + (lane * DPL >> 5);
    r.d = __half2float(NC ? __ldg(sp) : *sp);
    if (DPL == 8) { uint2 v = NC ? __ldg((const uint2 *)c) : *(const uint2 *)c; r.w[0] = v.x; r.w[(DPL + 3) / 4 - 1] = v.y; }
    else if (DPL == 4) r.w[0] = NC ? __ldg((const unsigned *)c) : *(const unsigned *)c;
    else r.w[0] = NC ? __ldg((const unsigned short *)c) : *(const unsigned short *)c;
}
/* One head row of HD = 32 * DPL values (lane: dims [lane*DPL, (lane+1)*DPL), loaded: xin) normalised with gain g,
 * partially rotated (NeoX pairs i, i + n_rot/2, as attn_prep_block; fr: the n_rot/2 inverse
 * frequencies) at position p and scaled by sc, through xs (HD floats of this warp's shared memory).
 * Whole warp. */
template <int DPL>
__device__ __forceinline__ void fd_norm_rope(const attn_dec_args &a, const float xin[DPL], const float *g, const float *fr, int p, float sc,
                                             float *xs, float out[DPL]) {
    constexpr int HD = 32 * DPL;
    int lane = threadIdx.x & 31;
    float x[DPL], ss = 0.0f;
#pragma unroll
    for (int d = 0; d < DPL; d++) { x[d] = xin[d]; ss += x[d] * x[d]; }
    float r = rsqrtf(warp_sum(ss) / (float)HD + a.eps);
#pragma unroll
    for (int d = 0; d < DPL; d++) x[d] *= r * g[lane * DPL + d];
    if (DPL % 4 == 0) /* 16-byte stores: 2-way bank conflicts instead of DPL-way */
#pragma unroll
        for (int d = 0; d < DPL; d += 4) *(float4 *)(xs + lane * DPL + d) = make_float4(x[d], x[d + 1], x[d + 2], x[d + 3]);
    else
#pragma unroll
        for (int d = 0; d < DPL; d++) xs[lane * DPL + d] = x[d];
    __syncwarp();
    int half = a.n_rot / 2;
#pragma unroll
    for (int k = 0; k < DPL; k++) {
        int d = lane * DPL + k;
        float y = x[k];
        if (d < a.n_rot) {
            int i = d < half ? d : d - half;
            float sn, cs;
            if (a.rope_cs) { cs = fr[2 * i]; sn = fr[2 * i + 1]; } /* fr holds the step's table */
            else sincosf((float)p * fr[i], &sn, &cs);
            y = d < half ? x[k] * cs - xs[d + half] * sn : x[k] * cs + xs[d - half] * sn;
        }
        out[k] = y * sc;
    }
    __syncwarp();
}

/* k_attn_prep's work inside a flash-decoding block (attn_dec_args.fused): the G query heads of kv
 * head kvh into qs [FD_G][HD], and when `last` (the block of the split that ends at position p) the
 * current K and V rows into the cache. Warp w takes heads w, w + FD_WARPS, ...; the last warp the K
 * row. xs: FD_WARPS * HD floats of scratch; gq, gk, fr: the q and k norm gains and the inverse
 * frequencies, in shared memory. */
template <int DPL, int FG = FD_G>
/* kvs (or NULL): where the appending warp also leaves the K and V rows as the cache now holds them
 * (fp32 [2][HD], the q8 codes times their scale or the bf16 values), for the block of the appended
 * position alone (attn_fd_block, xs). */
__device__ __forceinline__ void attn_fd_prep(const attn_dec_args &a, int kvh, int p, bool last, float *qs, float *xs, const float *gq,
                                             const float *gk, const float *fr, int g0 = 0, float *kvs = NULL) {
    constexpr int HD = 32 * DPL;
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31, G = a.NH / a.NKV;
    float *xw = xs + w * HD, v[DPL], xq[DPL], xk[DPL], xv[DPL];
    bool kv = last && w == FD_WARPS - 1;
    /* every load of the warp at once (the K / V rows for the appending warp, then its head's q): one
     * round trip to L2 instead of three */
    if (kv)
#pragma unroll
        for (int d = 0; d < DPL; d++) {
            xk[d] = a.kraw[(long)kvh * HD + lane * DPL + d];
            xv[d] = a.vraw[(long)kvh * HD + lane * DPL + d];
        }
    /* the K row is the appending warp's last pass through the loop body of its q heads (g >= FG):
     * one inlined copy of the norm / RoPE code, which that warp has just run, instead of a second
     * copy run cold after the first (session 15's trace: the appending warp took 2.3 µs more) */
#pragma unroll 1
    for (int g = w; g < FG || (kv && g < FG + FD_WARPS); g += FD_WARPS) {
        bool isk = g >= FG, on = !isk && g0 + g < G;
        const float *src = a.qg + (long)(kvh * G + g0 + (isk ? 0 : g)) * 2 * HD + lane * DPL;
#pragma unroll
        for (int d = 0; d < DPL; d++) xq[d] = isk ? xk[d] : (on ? src[d] : 0.0f);
#ifdef LILAC_LN_TRACE
        if (g == 0 && threadIdx.x == 0 && a.tr) { /* warp 0's q has landed (the stamp depends on it) */
            unsigned long long t;
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) : "f"(xq[0])); /* issued once xq[0] is there */
            atomicMax(a.tr + 44, t);
        }
#endif
        if (on || isk) fd_norm_rope<DPL>(a, xq, isk ? gk : gq, fr, p, isk ? 1.0f : rsqrtf((float)HD), xw, v);
        else
#pragma unroll
            for (int d = 0; d < DPL; d++) v[d] = 0.0f;
        if (!isk) {
            if (DPL % 4 == 0) /* 16-byte stores: 2-way bank conflicts instead of DPL-way */
#pragma unroll
                for (int d = 0; d < DPL; d += 4) *(float4 *)(qs + g * HD + lane * DPL + d) = make_float4(v[d], v[d + 1], v[d + 2], v[d + 3]);
            else
#pragma unroll
                for (int d = 0; d < DPL; d++) qs[g * HD + lane * DPL + d] = v[d];
        } else if (a.q8) { /* the lane's DPL values lie in one 32-value block of 32 / DPL lanes */
            long ro = ((long)kvh * a.n_ctx + p) * kv_row_bytes(HD, 1);
            unsigned char *rows[2] = {(unsigned char *)a.kc + ro, (unsigned char *)a.vc + ro};
            for (int k = 0; k < 2; k++) {
                signed char c[DPL];
                __half sc = kv_q8_quant<DPL>(k ? xv : v, 32 / DPL, c);
#pragma unroll
                for (int d = 0; d < DPL; d++) rows[k][lane * DPL + d] = (unsigned char)c[d];
                if ((lane * DPL & 31) == 0) ((__half *)(rows[k] + HD))[lane * DPL >> 5] = sc;
                if (kvs)
#pragma unroll
                    for (int d = 0; d < DPL; d++) kvs[k * HD + lane * DPL + d] = (float)c[d] * __half2float(sc);
            }
        } else {
            __nv_bfloat16 *kc = (__nv_bfloat16 *)a.kc + ((long)kvh * a.n_ctx + p) * HD + lane * DPL;
            __nv_bfloat16 *vc = (__nv_bfloat16 *)a.vc + ((long)kvh * a.n_ctx + p) * HD + lane * DPL;
#pragma unroll
            for (int d = 0; d < DPL; d++) {
                kc[d] = __float2bfloat16(v[d]);
                vc[d] = __float2bfloat16(xv[d]);
                if (kvs) {
                    kvs[lane * DPL + d] = __bfloat162float(kc[d]);
                    kvs[HD + lane * DPL + d] = __bfloat162float(vc[d]);
                }
            }
        }
    }
}

/* ---- the tensor-core loop (MMA, session 12; HD = 256, 8 query heads). A warp takes 16
 * positions per iteration and computes S^T = K q^T (16 positions x 8 heads) and O^T += V^T P^T (256 dims
 * x 8 heads) with mma.sync m16n8k16: 32 tensor-core instructions and ~120 others per 16 positions
 * instead of ~3,400 instructions of 8-wide dots, butterfly all-reduces and per-position softmax (the
 * chain that bound the loop: 0.8 µs per position and warp at 4K, 1.9 TB/s at 128K, session 11).
 * No shared memory for K and V: a sum may take its terms in any order, so the fragments are filled
 * straight from 16-byte loads of whole row pieces. Lane (g = lane / 4, c = lane % 4):
 *   K (A of the first product, m = position, k = dim): rows t0 + g and t0 + g + 8, bytes [128c, 128c +
 *     128); k-step ks takes words 2ks and 2ks + 1 of that piece, i.e. dims 64c + 4ks + {0,1} and
 *     64c + 4ks + {2,3}. q (B, in shared memory as fragments, `qf`) is laid out with the same dims.
 *   S^T (accumulator): positions g and g + 8, heads 2c and 2c + 1.
 *   V (A of the second product = V^T, m = dim slot, k = position): rows t0 + 2c + {0, 1, 8, 9}, bytes
 *     [64g, 64g + 64); m-tile mt maps slot g to dim 32g + 2mt and slot g + 8 to 32g + 2mt + 1, so a
 *     register is two rows' words recombined by one byte permute.
 *   P^T (B of the second product): S^T's probabilities as bf16, transposed by movmatrix.
 *   O^T (accumulator, 16 m-tiles x 4): dims 32g + 2mt + {0, 1} of heads 2c and 2c + 1.
 * A lane's softmax state covers heads 2c and 2c + 1; l is summed over its own positions and reduced
 * over the 8 lanes of a head once, at the end. */
/* q8 cache (int8 codes + an fp16 scale per 32 values, k_attn.cuh): the same loop on fp16 tensor cores.
 * A code byte b becomes the half 1024 + (b ^ 0x80) by a byte permute (0x64 above it), 1152 is
 * subtracted (exact) and the block's scale multiplied: the value rounded once to fp16 (11 bits, finer
 * than bf16's 8). K: the lane's 64 dims are blocks 2c and 2c + 1 (both scales in one 32-bit word at
 * byte 256 + 4c); V: its 32 dims are block g (scale at byte 256 + 2g). q and P in fp16 as well. */
template <bool Q8> struct fd_mma_regs;
template <> struct fd_mma_regs<false> { uint4 k[2][8], v[4][4]; };  /* 128 registers: 16 positions of bf16 rows */
template <> struct fd_mma_regs<true> { uint4 k[2][4], v[4][2]; uint32_t ks[2], vs[4]; }; /* 70: 16 positions of q8 rows */
struct fd_mma_state { float m[2], l[2], o[16][4]; };
#ifndef FD_MMA_Q8_NT
#define FD_MMA_Q8_NT 1 /* 16-position sub-tiles a q8 warp iteration loads at once (2: as many bytes in flight as bf16's
                        * one, 242 registers: lab 128K 65.5 vs 61.2 µs, session 12) */
#endif

template <bool NC> __device__ __forceinline__ uint4 fd_ld16(const unsigned char *p) {
    return NC ? __ldg((const uint4 *)p) : *(const uint4 *)p;
}
template <bool NC> __device__ __forceinline__ uint32_t fd_ld4(const unsigned char *p) {
    return NC ? __ldg((const unsigned *)p) : *(const unsigned *)p;
}
/* word i (0..3, a constant after unrolling) of v */
__device__ __forceinline__ uint32_t fd_u4w(const uint4 &v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }
__device__ __forceinline__ uint32_t fd_movt(uint32_t x) {
    uint32_t y;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
    return y;
}
__device__ __forceinline__ uint32_t fd_pack_h(float lo, float hi) {
    __half2 p = __floats2half2_rn(lo, hi);
    return *(uint32_t *)&p;
}
/* two q8 codes (bytes of x = word ^ 0x80808080 picked by the permute selector sel: 0x4140 bytes 0, 1;
 * 0x4342 bytes 2, 3) times the scales sc (half2) */
__device__ __forceinline__ uint32_t fd_q8h2(uint32_t x, uint32_t sel, uint32_t sc) {
    uint32_t h = __byte_perm(x, 0x64646464u, sel);
    __half2 v = __hmul2(__hsub2(*(__half2 *)&h, __float2half2_rn(1152.0f)), *(__half2 *)&sc);
    return *(uint32_t *)&v;
}

/* the K / V pieces of positions [tb, tb + 16) of this lane (rows past hi - 1: row hi - 1, masked later) */
template <bool NC, bool Q8>
__device__ __forceinline__ void fd_mma_load(const unsigned char *K, const unsigned char *V, int tb, int hi, int lane, fd_mma_regs<Q8> &r) {
    constexpr int RB = Q8 ? 272 : 512, KB = Q8 ? 64 : 128, VB = Q8 ? 32 : 64; /* bytes per row, per lane of a K / V row */
    int g = lane >> 2, c = lane & 3;
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const unsigned char *src = K + (long)min(tb + g + 8 * i, hi - 1) * RB;
#pragma unroll
        for (int j = 0; j < KB / 16; j++) r.k[i][j] = fd_ld16<NC>(src + KB * c + 16 * j);
        if constexpr (Q8) r.ks[i] = fd_ld4<NC>(src + 256 + 4 * c);
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const unsigned char *src = V + (long)min(tb + 2 * c + (i & 1) + 8 * (i >> 1), hi - 1) * RB;
#pragma unroll
        for (int j = 0; j < VB / 16; j++) r.v[i][j] = fd_ld16<NC>(src + VB * g + 16 * j);
        if constexpr (Q8) r.vs[i] = fd_ld4<NC>(src + 256 + 4 * (g >> 1)) >> (16 * (g & 1));
    }
}

/* one warp iteration: positions [tb, tb + 16) (those >= hi masked) into the online-softmax state */
template <bool Q8>
__device__ __forceinline__ void fd_mma_tile(const fd_mma_regs<Q8> &r, const uint2 *qf, int tb, int hi, int lane, fd_mma_state &st) {
    int g = lane >> 2;
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int ks = 0; ks < 16; ks++) {
        uint2 b = qf[ks * 32 + lane];
        if constexpr (Q8) { /* dims 64c + 4ks + [0, 4): byte 4ks of the lane's piece, block 2c + ks / 8 */
            uint32_t x0 = fd_u4w(r.k[0][ks >> 2], ks & 3) ^ 0x80808080u, x1 = fd_u4w(r.k[1][ks >> 2], ks & 3) ^ 0x80808080u;
            uint32_t s0 = __byte_perm(r.ks[0], 0, ks < 8 ? 0x1010 : 0x3232), s1 = __byte_perm(r.ks[1], 0, ks < 8 ? 0x1010 : 0x3232);
            fl2_mma<true>(s, fd_q8h2(x0, 0x4140, s0), fd_q8h2(x1, 0x4140, s1), fd_q8h2(x0, 0x4342, s0), fd_q8h2(x1, 0x4342, s1), b.x, b.y);
        } else {
            int q0 = 2 * (ks & 1);
            fl2_mma(s, fd_u4w(r.k[0][ks >> 1], q0), fd_u4w(r.k[1][ks >> 1], q0), fd_u4w(r.k[0][ks >> 1], q0 + 1), fd_u4w(r.k[1][ks >> 1], q0 + 1),
                    b.x, b.y);
        }
    }
    if (tb + g >= hi) s[0] = s[1] = -INFINITY;
    if (tb + g + 8 >= hi) s[2] = s[3] = -INFINITY;
    float mx0 = fmaxf(s[0], s[2]), mx1 = fmaxf(s[1], s[3]);
#pragma unroll
    for (int o = 4; o < 32; o <<= 1) {
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, o));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, o));
    }
    /* position tb < hi is in every tile: the maxima are finite; the first tile's scale exp(-inf) is 0 */
    float mn0 = fmaxf(st.m[0], mx0), mn1 = fmaxf(st.m[1], mx1);
    float sc0 = __expf(st.m[0] - mn0), sc1 = __expf(st.m[1] - mn1);
    st.m[0] = mn0; st.m[1] = mn1;
    float p0 = __expf(s[0] - mn0), p1 = __expf(s[1] - mn1), p2 = __expf(s[2] - mn0), p3 = __expf(s[3] - mn1);
    st.l[0] = st.l[0] * sc0 + p0 + p2;
    st.l[1] = st.l[1] * sc1 + p1 + p3;
    uint32_t b01 = fd_movt(Q8 ? fd_pack_h(p0, p1) : fl2_pack(p0, p1)), b23 = fd_movt(Q8 ? fd_pack_h(p2, p3) : fl2_pack(p2, p3));
    uint32_t vs01 = 0, vs23 = 0;
    if constexpr (Q8) { vs01 = __byte_perm(r.vs[0], r.vs[1], 0x5410); vs23 = __byte_perm(r.vs[2], r.vs[3], 0x5410); }
#pragma unroll
    for (int mt = 0; mt < 16; mt++) {
        st.o[mt][0] *= sc0; st.o[mt][1] *= sc1; st.o[mt][2] *= sc0; st.o[mt][3] *= sc1;
        if constexpr (Q8) { /* dims 32g + 2mt + {0, 1}: bytes 2mt, 2mt + 1 of the lane's piece (word mt / 2) */
            uint32_t sel = mt & 1 ? 0x7362 : 0x5140;
            uint32_t t01 = __byte_perm(fd_u4w(r.v[0][mt >> 3], (mt >> 1) & 3) ^ 0x80808080u, fd_u4w(r.v[1][mt >> 3], (mt >> 1) & 3) ^ 0x80808080u, sel);
            uint32_t t23 = __byte_perm(fd_u4w(r.v[2][mt >> 3], (mt >> 1) & 3) ^ 0x80808080u, fd_u4w(r.v[3][mt >> 3], (mt >> 1) & 3) ^ 0x80808080u, sel);
            fl2_mma<true>(st.o[mt], fd_q8h2(t01, 0x4140, vs01), fd_q8h2(t01, 0x4342, vs01), fd_q8h2(t23, 0x4140, vs23), fd_q8h2(t23, 0x4342, vs23), b01,
                       b23);
        } else {
            uint32_t w0 = fd_u4w(r.v[0][mt >> 2], mt & 3), w1 = fd_u4w(r.v[1][mt >> 2], mt & 3);
            uint32_t w2 = fd_u4w(r.v[2][mt >> 2], mt & 3), w3 = fd_u4w(r.v[3][mt >> 2], mt & 3);
            fl2_mma(st.o[mt], __byte_perm(w0, w1, 0x5410), __byte_perm(w0, w1, 0x7632), __byte_perm(w2, w3, 0x5410), __byte_perm(w2, w3, 0x7632),
                    b01, b23);
        }
    }
}

/* the warp's state into the merge's shared memory: wo_w 8 rows of fd_wo (its heads' O), wml_w [8][2] (m, l) */
__device__ __forceinline__ void fd_mma_store(const fd_mma_state &st, int lane, float *wo_w, float *wml_w) {
    int g = lane >> 2, c = lane & 3;
    float l0 = st.l[0], l1 = st.l[1];
#pragma unroll
    for (int o = 4; o < 32; o <<= 1) {
        l0 += __shfl_xor_sync(0xffffffffu, l0, o);
        l1 += __shfl_xor_sync(0xffffffffu, l1, o);
    }
#pragma unroll
    for (int mt = 0; mt < 16; mt++) {
        *(float2 *)(wo_w + fd_wo(2 * c, 32 * g + 2 * mt, 256)) = make_float2(st.o[mt][0], st.o[mt][2]);
        *(float2 *)(wo_w + fd_wo(2 * c + 1, 32 * g + 2 * mt, 256)) = make_float2(st.o[mt][1], st.o[mt][3]);
    }
    if (g == 0) {
        wml_w[4 * c] = st.m[0]; wml_w[4 * c + 1] = l0;
        wml_w[4 * c + 2] = st.m[1]; wml_w[4 * c + 3] = l1;
    }
}

/* One block (FD_WARPS warps) of k_attn_decode_fd: kv head kvh, split `split` of NS; fsm: dynamic
 * shared memory of attn_fd_smem(HD) bytes. */
/* MMA: the tensor-core loop above (DPL 8, FG 8) instead of the per-position one.
 * PH (LILAC_CUDA_FD_PH=1, session 33, for k_lattn_out<.., PH> only): each partial stored normalised
 * (o / l) in FP16 in part_o's space, half the bytes the cout kernel's ~128 blocks each load for their
 * head's merge (~67 KB a block at 4K: -DLA_DIAG_PART's ceiling of cutting them was +7 tok/s on an
 * H100); o / l is a convex combination of V rows, so FP16's range holds it and its 11 bits are finer
 * than the q8 codes the merged y becomes. (m, l) stay FP32. */
template <int DPL, bool NC, int FG = FD_G, bool Q8 = false, bool MMA = false, bool PH = false>
__device__ __forceinline__ void attn_fd_block(const attn_dec_args &a, int kvh, int split, int NS, float *fsm, bool pdl = false,
                                              int g0 = 0) {
    constexpr int HD = 32 * DPL;
    constexpr int TL = FG < FD_G ? FD_TILE_FG : FD_TILE; /* positions per warp iteration */
    float *qs = fsm;                              /* [FG][HD] */
    float *wo = qs + FG * HD;                     /* [FD_WARPS][FG][HD] */
    float *wml = wo + FD_WARPS * FG * FD_WS(HD);  /* [FD_WARPS][FG][2] */
    /* in wo until the merge: the prep's scratch [FD_WARPS][HD], then the q / k norm gains and the
     * inverse frequencies */
    float *gq = wo + FD_WARPS * HD, *gk = gq + HD, *fr = gk + HD;
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int G = a.NH / a.NKV;
    int n = *a.pos + 1; /* written by the previous step's k_finish: final before this step's first kernel */
    bool app = a.xs && split == NS; /* a.xs: the block of position n - 1 alone (attn_dec_args.xs) */
    NS = attn_fd_used(NS, a.minpos, n);
    if (app) split = NS; /* its partial follows the used splits' */
    else if (split >= NS) return; /* a split past those this context needs (uniform in the block) */
    int nr = a.xs ? n - 1 : n; /* positions the splits share */
    int lo = app ? n - 1 : (int)((long)split * nr / NS), hi = app ? n : (int)((long)(split + 1) * nr / NS);
    bool appends = a.xs ? app : split == NS - 1; /* this block appends the K / V rows of position n - 1 */
    /* the prep's weights into shared memory and (PDL: before the wait) the split's cached K/V rows,
     * all but position n - 1 which this launch appends, on their way into L2, so that the loop
     * below starts on L2 hits instead of DRAM round trips */
    if (a.fused) {
        for (int i = threadIdx.x; i < HD; i += blockDim.x) { gq[i] = a.q_norm[i]; gk[i] = a.k_norm[i]; }
        if (a.rope_cs)
            for (int i = threadIdx.x; i < a.n_rot; i += blockDim.x) fr[i] = a.rope_cs[i]; /* k_embed: many kernels back */
        else
            for (int i = threadIdx.x; i < a.n_rot / 2; i += blockDim.x) fr[i] = a.inv_freq[i];
    }
    const int RB = kv_row_bytes(HD, Q8); /* bytes per cached row */
    const unsigned char *K = (const unsigned char *)a.kc + (long)kvh * a.n_ctx * RB;
    const unsigned char *V = (const unsigned char *)a.vc + (long)kvh * a.n_ctx * RB;
    /* positions per warp iteration: TL, or for a q8 cache two sub-tiles of TL loaded at once (the
     * rows are half the bytes: as many bytes in flight as the bf16 loop) */
    static_assert(!MMA || (DPL == 8 && FG == FD_G), "the tensor-core loop: HD 256, 8 heads");
    constexpr int MNT = Q8 ? FD_MMA_Q8_NT : 1; /* the tensor-core loop's 16-position sub-tiles per warp iteration */
    constexpr int TS = MMA ? 16 * MNT : Q8 ? FD_Q8_TS * TL : TL;
    float kr[TL][DPL], vr[TL][DPL];
    fd_mma_regs<Q8> mr[MNT];
    kvq_raw<DPL> kq[Q8 ? TS : 1], vq[Q8 ? TS : 1];
    int t0 = lo + w * TS;
    auto load_tile = [&](int tb) {
        if constexpr (MMA) {
#pragma unroll
            for (int j = 0; j < MNT; j++) fd_mma_load<NC, Q8>(K, V, min(tb + 16 * j, hi - 1), hi, lane, mr[j]);
        } else {
#pragma unroll
        for (int j = 0; j < TS; j++) {
            int p = min(tb + j, hi - 1); /* past the end: a valid row, masked below */
            if constexpr (Q8) {
                kvq_load<DPL, NC>(K + (long)p * RB, lane, kq[j]);
                kvq_load<DPL, NC>(V + (long)p * RB, lane, vq[j]);
            } else {
                fd_load_row<DPL, NC>((const __nv_bfloat16 *)(K + (long)p * RB) + lane * DPL, kr[j]);
                fd_load_row<DPL, NC>((const __nv_bfloat16 *)(V + (long)p * RB) + lane * DPL, vr[j]);
            }
        }
        }
    };
    /* PDL: this warp's first tile is loaded before the wait when it holds only cached rows (not
     * position n - 1); rows past it (at most FD_PF per split: more would only evict each other
     * at long contexts) are prefetched into L2 */
    bool early = FD_EARLY && pdl && t0 < hi && min(t0 + TS - 1, hi - 1) < n - 1;
    if (early) load_tile(t0);
    if (pdl) {
        int last = min(min(hi, n - 1), lo + (FG < FD_G ? FD_PF_FG : FD_PF)), lines = (RB + 127) / 128; /* 128-byte lines per row */
        for (int i = threadIdx.x + FD_WARPS * TS * 2 * lines; FD_EARLY && i < 2 * (last - lo) * lines; i += blockDim.x) {
            int r = i / (2 * lines), k = i % (2 * lines);
            const unsigned char *base = (k < lines ? K : V) + (long)(lo + r) * RB;
            asm volatile("prefetch.global.L2 [%0];" ::"l"((const char *)base + 128 * (k % lines)));
        }
        pdl_wait();
        /* the combine may launch now: it reads the q/gate projection (finished: the wait above)
         * before its own wait */
        pdl_trigger();
        ln_trace(a.tr, 1);
    }
    __syncthreads(); /* the weights in shared memory */
    ln_trace(a.tr, 41);
    /* the appended position's block (xs) keeps the rows it appends: [2][HD] past the prep's scratch
     * (FD_WARPS + 3 rows of HD) in wo, which holds FD_WARPS * FG rows */
    float *kvs = app && a.fused && FD_XS_DIRECT ? gk + 2 * HD : NULL;
    if (a.fused) attn_fd_prep<DPL, FG>(a, kvh, n - 1, appends, qs, wo, gq, gk, fr, g0, kvs); /* wo is free until the merge */
    else
        for (int i = threadIdx.x; i < FG * HD; i += blockDim.x) qs[i] = g0 * HD + i < G * HD ? a.q[(long)kvh * G * HD + g0 * HD + i] : 0.0f;
    ln_trace(a.tr, 42);
#ifdef LILAC_LN_TRACE
    if (threadIdx.x == 32 * (FD_WARPS - 1) && a.tr) atomicMax(a.tr + 43, ln_now()); /* the last warp (the K/V row) */
#endif
    __syncthreads(); /* fused: the block's own K/V row of position n-1 is visible to its plain loads (NC = false) */
    ln_trace(a.tr, 3);
    if (kvs) { /* one position: m = q.k, l = 1, o = v for each head, from the rows just written (the
                * loop below would load them back from memory and run a 16-position tile and the
                * 8 warps' merge for them: session 23's trace, this block was the launch's last, 4.2 µs
                * of loop and 2.8 of merge at 4K) */
        int Gb = min(FG, G - g0);
        for (int g = w; g < Gb; g += FD_WARPS) {
            float t = 0.0f;
            for (int d = lane; d < HD; d += 32) t = fmaf(qs[g * HD + d], kvs[d], t);
            t = warp_sum(t);
            long h = (long)split * a.NH + kvh * G + g0 + g;
            if constexpr (PH) /* l = 1: o / l = v */
                for (int d = lane; d < HD; d += 32) ((__half *)a.part_o)[h * HD + d] = __float2half_rn(kvs[HD + d]);
            else
                for (int d = lane; d < HD; d += 32) a.part_o[h * HD + d] = kvs[HD + d];
            if (lane == 0) { a.part_ml[h * 2] = t; a.part_ml[h * 2 + 1] = 1.0f; }
        }
        return;
    }
    if constexpr (MMA) {
        uint2 *qf = (uint2 *)(wml + FD_WARPS * FG * 2); /* [16 k-steps][32 lanes]: see fd_mma_tile */
        /* thread i: lane ln = i % 32 of k-step (i / 32 + ln) % 16, so that the 8 threads of a 16-byte
         * load phase read 8 different k-steps (banks 4 ks apart; k-step i / 32 for all of them put
         * the warp's 32 reads in one bank: head rows and 64-dim quarters are multiples of 32 floats)
         * and the stores of a half warp go to 16 different lanes' words */
        for (int i = threadIdx.x; i < 16 * 32; i += blockDim.x) {
            int ln = i & 31, ks = ((i >> 5) + ln) & 15;
            float4 q = *(const float4 *)(qs + (ln >> 2) * HD + 64 * (ln & 3) + 4 * ks);
            qf[ks * 32 + ln] = Q8 ? make_uint2(fd_pack_h(q.x, q.y), fd_pack_h(q.z, q.w)) : make_uint2(fl2_pack(q.x, q.y), fl2_pack(q.z, q.w));
        }
        __syncthreads();
        fd_mma_state st;
#pragma unroll
        for (int h = 0; h < 2; h++) { st.m[h] = -INFINITY; st.l[h] = 0.0f; }
#pragma unroll
        for (int mt = 0; mt < 16; mt++)
#pragma unroll
            for (int k = 0; k < 4; k++) st.o[mt][k] = 0.0f;
        for (; t0 < hi; t0 += FD_WARPS * TS) {
            if (!early) load_tile(t0);
            early = false;
#pragma unroll
            for (int j = 0; j < MNT; j++)
                if (t0 + 16 * j < hi) fd_mma_tile<Q8>(mr[j], qf, t0 + 16 * j, hi, lane, st);
        }
        ln_trace(a.tr, 4);
        fd_mma_store(st, lane, wo + (long)w * FG * FD_WS(HD), wml + w * FG * 2);
    } else {
    float m[FG], l[FG], o[FG][DPL];
#pragma unroll
    for (int g = 0; g < FG; g++) {
        m[g] = -INFINITY; l[g] = 0.0f;
#pragma unroll
        for (int d = 0; d < DPL; d++) o[g][d] = 0.0f;
    }
    for (; t0 < hi; t0 += FD_WARPS * TS) {
        if (!early) load_tile(t0);
        early = false;
#pragma unroll
        for (int hh = 0; hh < TS / TL; hh++) {
        int tb = t0 + hh * TL;
        if constexpr (Q8) {
            /* the bf16 loop's sums in the same order per (head, dim), each row expanded where it is
             * used (K in the scores, V in the output update: j outer), so that 8 floats of a row
             * are live at a time instead of 2 x TL x DPL (which spilled) */
            float s[TL][FG];
#pragma unroll
            for (int j = 0; j < TL; j++) {
                float k8[DPL];
                kvq_expand<DPL>(kq[hh * TL + j], k8);
#pragma unroll
                for (int g = 0; g < FG; g++) {
                    float acc = 0.0f;
                    const float *qg = qs + g * HD + lane * DPL;
#pragma unroll
                    for (int d = 0; d < DPL; d++) acc = fmaf(qg[d], k8[d], acc);
                    s[j][g] = acc;
                }
                fd_allreduce<FG>(s[j], lane);
                if (tb + j >= hi)
#pragma unroll
                    for (int g = 0; g < FG; g++) s[j][g] = -INFINITY;
            }
#pragma unroll
            for (int g = 0; g < FG; g++) {
                float mt = m[g];
#pragma unroll
                for (int j = 0; j < TL; j++) mt = fmaxf(mt, s[j][g]);
                float sc = __expf(m[g] - mt);
                l[g] *= sc;
#pragma unroll
                for (int d = 0; d < DPL; d++) o[g][d] *= sc;
#pragma unroll
                for (int j = 0; j < TL; j++) {
                    s[j][g] = __expf(s[j][g] - mt);
                    l[g] += s[j][g];
                }
                m[g] = mt;
            }
#pragma unroll
            for (int j = 0; j < TL; j++) {
                float v8[DPL];
                kvq_expand<DPL>(vq[hh * TL + j], v8);
#pragma unroll
                for (int g = 0; g < FG; g++)
#pragma unroll
                    for (int d = 0; d < DPL; d++) o[g][d] = fmaf(s[j][g], v8[d], o[g][d]);
            }
        } else {
        float s[TL][FG];
#pragma unroll
        for (int j = 0; j < TL; j++) {
#pragma unroll
            for (int g = 0; g < FG; g++) {
                float acc = 0.0f;
                const float *qg = qs + g * HD + lane * DPL;
#pragma unroll
                for (int d = 0; d < DPL; d++) acc = fmaf(qg[d], kr[j][d], acc);
                s[j][g] = acc;
            }
            fd_allreduce<FG>(s[j], lane);
            if (tb + j >= hi)
#pragma unroll
                for (int g = 0; g < FG; g++) s[j][g] = -INFINITY;
        }
#pragma unroll
        for (int g = 0; g < FG; g++) {
            float mt = m[g];
#pragma unroll
            for (int j = 0; j < TL; j++) mt = fmaxf(mt, s[j][g]);
            float sc = __expf(m[g] - mt); /* m = -inf first: exp(-inf) = 0 */
            l[g] *= sc;
#pragma unroll
            for (int d = 0; d < DPL; d++) o[g][d] *= sc;
#pragma unroll
            for (int j = 0; j < TL; j++) {
                float p = __expf(s[j][g] - mt);
                l[g] += p;
#pragma unroll
                for (int d = 0; d < DPL; d++) o[g][d] = fmaf(p, vr[j][d], o[g][d]);
            }
            m[g] = mt;
        }
        } /* bf16 */
        } /* sub-tiles */
    }
    ln_trace(a.tr, 4);
    /* merge the 8 warps' states */
#pragma unroll
    for (int g = 0; g < FG; g++) {
#pragma unroll
        for (int d = 0; d < DPL; d++) wo[fd_wo(w * FG + g, lane * DPL + d, HD)] = o[g][d];
        if (lane == 0) { wml[(w * FG + g) * 2] = m[g]; wml[(w * FG + g) * 2 + 1] = l[g]; }
    }
    } /* per-position loop */
    __syncthreads();
    int Gb = min(FG, G - g0); /* the heads of this block */
    /* the merge weights exp(m_w - M) once per (head, warp) instead of once per (head, warp, dim):
     * 64 exponentials instead of 16K, the same sums in the same order (the same bits; session 19:
     * neutral in time, the split's merge 0.6 µs shorter in the trace). q is dead after the loop:
     * cf [FG][FD_WARPS + 1] (the weights, then M) takes its place. */
    float *cf = qs;
    if (threadIdx.x < Gb * FD_WARPS) {
        int g = threadIdx.x / FD_WARPS, ww = threadIdx.x % FD_WARPS;
        float M = -INFINITY;
        for (int k = 0; k < FD_WARPS; k++) M = fmaxf(M, wml[(k * FG + g) * 2]);
        cf[g * (FD_WARPS + 1) + ww] = M != -INFINITY ? __expf(wml[(ww * FG + g) * 2] - M) : 0.0f;
        if (ww == 0) cf[g * (FD_WARPS + 1) + FD_WARPS] = M;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < Gb * HD; i += blockDim.x) {
        int g = i / HD, d = i % HD;
        const float *e = cf + g * (FD_WARPS + 1);
        float M = e[FD_WARPS], L = 0.0f, O = 0.0f;
        if (M != -INFINITY)
#pragma unroll
            for (int ww = 0; ww < FD_WARPS; ww++) O += e[ww] * wo[fd_wo(ww * FG + g, d, HD)];
        int h = kvh * G + g0 + g;
        if constexpr (PH) { /* o / l (0 for an empty split: its weight is 0 too) */
            float Lh = 0.0f;
            if (M != -INFINITY)
                for (int ww = 0; ww < FD_WARPS; ww++) Lh += e[ww] * wml[(ww * FG + g) * 2 + 1];
            ((__half *)a.part_o)[((long)split * a.NH + h) * HD + d] = __float2half_rn(Lh > 0.0f ? O / Lh : 0.0f);
        } else {
            a.part_o[((long)split * a.NH + h) * HD + d] = O;
        }
        if (d == 0) {
            if (M != -INFINITY)
                for (int ww = 0; ww < FD_WARPS; ww++) L += e[ww] * wml[(ww * FG + g) * 2 + 1];
            a.part_ml[((long)split * a.NH + h) * 2] = M;
            a.part_ml[((long)split * a.NH + h) * 2 + 1] = L;
        }
    }
}

/* NC: the non-coherent load path for K/V; the fused launch (a.fused, k_attn_decode_fd<DPL, false>)
 * reads with plain loads, because the last split's block reads the K/V row it has just written. */
/* FG < FD_G (LILAC_CUDA_FD_FG=4, session 10): a block takes FG of the kv head's query heads (grid.x =
 * NKV * FD_G / FG) at <= 128 registers, so that it fits on an SM next to the 16-warp input projection
 * before it and its K/V loads start while that projection runs. */
template <int DPL, bool NC = true, int FG = FD_G, bool Q8 = false, bool MMA = false, bool PH = false>
__global__ void __launch_bounds__(FD_WARPS * 32, FG < FD_G ? 2 : MMA ? FD_MINB_MMA : 1) k_attn_decode_fd(const attn_dec_args a) {
    extern __shared__ __align__(16) float fsm[];
    ln_trace(a.tr, 0);
    constexpr int NHG = FD_G / FG;
    attn_fd_block<DPL, NC, FG, Q8, MMA, PH>(a, blockIdx.x / NHG, blockIdx.y, gridDim.y - a.xs, fsm, true, (blockIdx.x % NHG) * FG); /* waits after its prefetch, then triggers */
    ln_trace(a.tr, 2);
}

#endif
