/*
 * k_misc.cuh — small kernels: embedding gather, row RMSNorm to bf16, the step's finishing kernel
 * (argmax -> next token, position advance), MoE routing for prefill (top-k per token, counting
 * sort by expert, tile list), weight repacking / synthetic generation, and a read-bandwidth probe.
 */
#ifndef LILAC_K_MISC_CUH
#define LILAC_K_MISC_CUH

#include "../../model/qwen35_synth.h"
#include "cu_common.cuh"
#include "k_gemv.cuh"

/* X[t][:] = dequant(E[tok[t]]). grid T, block 128. tok: device token ids. */
/* cs: NULL, or (decode, grid 1) the cos / sin pairs [half][2] of the rotary angles (float)*pos * fr[i]
 * for the flash-decoding blocks' RoPE (attn_dec_args.rope_cs): computed once per step here, off the
 * critical path, instead of by a warp of every block, where the sincosf chains of one head took
 * ~2.6 µs and the warp with the K row too ~5.7 µs of the kernel's prologue (session 15 trace) */
/* PDL (LILAC_CUDA_STEP_PDL=1, session 30): launched with programmatic dependent launch after the previous
 * step's k_finish<true> inside a multi-step graph; waits for it, then lets the first layer's kernel in */
template <bool PDL = false>
__global__ void k_embed(gmat E, const int *tok, float *X, int H, const int *pos = NULL, const float *fr = NULL, int half = 0,
                        float *cs = NULL) {
    if (PDL) {
        pdl_wait();
        pdl_trigger();
    }
    int t = blockIdx.x;
    long row = tok[t];
    for (int k0 = threadIdx.x * 16; k0 < H; k0 += blockDim.x * 16) {
        float f[16];
        gmat_dequant16(E, row, k0, f);
#pragma unroll
        for (int i = 0; i < 16; i++) X[(long)t * H + k0 + i] = f[i];
    }
    if (cs)
        for (int i = threadIdx.x; i < half; i += blockDim.x) {
            float sn, c;
            sincosf((float)*pos * fr[i], &sn, &c); /* the same argument and function as fd_norm_rope's: the same bits */
            cs[2 * i] = c;
            cs[2 * i + 1] = sn;
        }
}

/* Y[t] = bf16(rmsnorm(X[t]) * g). grid T, block 256. */
__global__ void k_rmsnorm_rows(const float *X, const float *g, __nv_bfloat16 *Y, int H, float eps) {
    __shared__ float red[32];
    const float *x = X + (long)blockIdx.x * H;
    float ss = 0.0f;
    for (int k = threadIdx.x; k < H; k += blockDim.x) ss += x[k] * x[k];
    float r = rsqrtf(block_sum(ss, red) / (float)H + eps);
    for (int k = threadIdx.x; k < H; k += blockDim.x) Y[(long)blockIdx.x * H + k] = __float2bfloat16(x[k] * r * g[k]);
}

/* End of a decode step: record the token this step consumed (gen), next token = argmax, reset the
 * argmax slot, advance the position. */
/* PDL: launched with programmatic dependent launch after the lm head (it enters while the head runs and
 * waits for it), so that the step's end is not a full launch boundary (LILAC_CUDA_STEP_PDL=1) */
template <bool PDL = false>
__global__ void k_finish(unsigned long long *argmax, int *tok, int *pos, int *gen, int *gen_n, int adv) {
    if (PDL) {
        pdl_wait();
        pdl_trigger();
    }
    int t = argmax_row(*argmax);
    if (gen) { gen[*gen_n & 65535] = *tok; *gen_n += 1; }
    *argmax = 0ull;
    *tok = t;
    *pos += adv;
}

__global__ void k_pos_add(int *pos, int n) { *pos += n; }

/* ---- prefill MoE routing */

/* grid T, block 32: ids/w [T][k] from logits [T][ldl]. */
__global__ void k_topk_rows(const float *logits, int ldl, int E, int k, int *ids, float *w) {
    topk_warp(logits + (long)blockIdx.x * ldl, E, k, ids + (long)blockIdx.x * k, w + (long)blockIdx.x * k);
}

__global__ void k_moe_count(const int *ids, int n, int *cnt) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&cnt[ids[i]], 1);
}

/* One thread: exclusive offsets, cursor copy, and the tile list of (expert, m0, rows). */
__global__ void k_moe_tiles(const int *cnt, int E, int bm, int *cursor, int *tile_e, int *tile_m0, int *tile_mn,
                            int *n_tiles) {
    int off = 0, nt = 0;
    for (int e = 0; e < E; e++) {
        cursor[e] = off;
        for (int m = 0; m < cnt[e]; m += bm) { tile_e[nt] = e; tile_m0[nt] = off + m; tile_mn[nt] = min(bm, cnt[e] - m); nt++; }
        off += cnt[e];
    }
    *n_tiles = nt;
}

__global__ void k_moe_scatter(const int *ids, int n, int *cursor, int *perm) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) perm[atomicAdd(&cursor[ids[i]], 1)] = i;
}

/* The ordered alternative to the MoE down's scatter (LILAC_CUDA_MOE_DET=2; lab gemm.cu "ord"): the down
 * GEMM stores each sorted row m's output
 * y[m][H] (GM_STORE), and this kernel adds a token's K rows in slot order: x[t][h] += sum_j w[t*K+j] *
 * y[inv[t*K+j]][h], inv[perm[m]] = m. Deterministic like the fixed-point one, with plain stores and one
 * coalesced pass instead of 64-bit atomics, at the price of an [n][H] fp32 buffer (268 MB at T 4096). */
__global__ void k_inv_perm(const int *perm, int n, int *inv) {
    int m = blockIdx.x * blockDim.x + threadIdx.x;
    if (m < n) inv[perm[m]] = m;
}
__global__ void k_moe_sum_ordered(const float *y, const int *inv, const float *w, float *x, int T, int K, int H) {
    int t = blockIdx.x;
    for (int h = threadIdx.x * 4; h < H; h += blockDim.x * 4) {
        float4 acc = *(const float4 *)(x + (size_t)t * H + h);
        for (int j = 0; j < K; j++) {
            float wj = w[t * K + j];
            float4 v = *(const float4 *)(y + (size_t)inv[t * K + j] * H + h);
            acc.x += wj * v.x; acc.y += wj * v.y; acc.z += wj * v.z; acc.w += wj * v.w;
        }
        *(float4 *)(x + (size_t)t * H + h) = acc;
    }
}

/* ---- weight preparation */

/* Splits n llama Q4_K blocks (AoS, 144 B) into meta [n][16] + qs [n][128]. */
__global__ void k_repack_q4k(const uint8_t *src, long n, uint8_t *meta, uint8_t *qs) {
    long b = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (b >= n) return;
    const uint8_t *s = src + b * 144;
    for (int i = 0; i < 16; i++) meta[b * 16 + i] = s[i];
    for (int i = 0; i < 128; i++) qs[b * 128 + i] = s[16 + i];
}

/* Splits n Q6_K blocks (210 B: ql 128, qh 64, scales 16, d 2) into SoA. */
__global__ void k_repack_q6k(const uint8_t *src, long n, uint8_t *ql, uint8_t *qh, uint8_t *sc, __half *d) {
    long b = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (b >= n) return;
    const uint8_t *s = src + b * 210;
    for (int i = 0; i < 128; i++) ql[b * 128 + i] = s[i];
    for (int i = 0; i < 64; i++) qh[b * 64 + i] = s[128 + i];
    for (int i = 0; i < 16; i++) sc[b * 16 + i] = s[192 + i];
    d[b] = __ushort_as_half((unsigned short)(s[208] | (s[209] << 8)));
}

/* Splits n Q8_0 blocks (34 B: d, 32 int8) into qs [n][32] + d [n]. */
__global__ void k_repack_q8_0(const uint8_t *src, long n, uint8_t *qs, __half *d) {
    long b = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (b >= n) return;
    const uint8_t *s = src + b * 34;
    d[b] = __ushort_as_half((unsigned short)(s[0] | (s[1] << 8)));
    for (int i = 0; i < 32; i++) qs[b * 32 + i] = s[2 + i];
}

/* Synthetic blocks [first, first + n) of tensor `key` into AoS dst (bytes per block bb). */
__global__ void k_synth_blocks(int type, uint64_t seed, uint64_t key, long first, long n, uint8_t *dst, int bb) {
    long b = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (b >= n) return;
    uint8_t blk[210];
    qsyn_block_fill(type, seed, key, (uint64_t)(first + b), blk);
    for (int i = 0; i < bb; i++) dst[b * bb + i] = blk[i];
}

/* Read-bandwidth probe: sums n uint4 (grid-stride) so the loads cannot be dropped. */
__global__ void k_bw_read(const uint4 *p, long n, unsigned int *sink) {
    unsigned int acc = 0;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        uint4 v = __ldcs(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x12345678u) *sink = acc;
}

#endif
