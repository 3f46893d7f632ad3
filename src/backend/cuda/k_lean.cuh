/*
 * k_lean.cuh — decode kernels v3 (issue 6): GEMV and MoE kernels built for a chain of dependent
 * launches in a CUDA graph with programmatic dependent launch (PDL).
 *
 * Why (dev/kernels/NOTES.md, bench/results/2026-11-30-h200-s5): the v2 kernels filled every SM
 * (grid = SMs x occupancy), so the next kernel's blocks could not become resident before the
 * previous grid had drained: its weight loads, though issued before griddepcontrol.wait, started
 * only after the boundary, and every kernel paid launch + DRAM latency + prologue + drain in
 * series. Here every kernel takes at most half of an SM (one block of 512 threads, <= 64 registers,
 * <= ~110 KB of shared memory per SM), so kernel N+1's blocks are resident while kernel N computes
 * and their weight tiles (cp.async.bulk into a shared-memory ring) are already in flight or landed
 * when N completes. After the wait only the activation prologue and the dot products remain.
 *
 * The dot products are "lean": a thread owns one 64-column chunk of a row in a tile (a tile is 512
 * chunks), its slice of the quantized activation is loaded into registers once per kernel (the
 * chunk index of a thread is the same in every tile), and the Q4_K scale/min decode is specialised
 * to the chunk's two sub-blocks. About 1.1 instructions per weight instead of ~2.5 for row_dot_part.
 *
 * PDL convention as in k_gemvq.cuh: pdl_trigger() right after pdl_wait(); before its wait a kernel
 * reads weights and activations written two or more kernels back, never the previous kernel's.
 *
 * Tile layouts in shared memory (nb = K / 256 blocks per row, TR rows):
 *   Q4_K  [TR*nb*128 qs][TR*nb*16 meta]
 *   Q6_K  [TR*nb*128 ql][TR*nb*64 qh][TR*nb*16 scales][TR*nb*2 d]
 *   BF16  [TR*K*2]
 * Chunk c of a row: Q4_K elements [64c, 64c+64) (qs bytes 32c..32c+32: low nibbles = sub-block 2c,
 * high = 2c+1); Q6_K (b, n, s) = (c/4, (c/2)&1, c&1): ql bytes 32c.., qh bytes 64b+32n.., elements
 * 32(8b+4n+s) + [0,32) (low nibbles) and 32(8b+4n+s+2) + [0,32) (high); BF16 elements [64c, 64c+64).
 */
#ifndef LILAC_K_LEAN_CUH
#define LILAC_K_LEAN_CUH

#include "k_gemvq.cuh"

/* Block geometry. LN_THREADS chunks per tile (one per thread), at most LN_BPS blocks of one kernel
 * per SM (grid = SMs x LN_BPS) and LN_MINB blocks per SM in the register budget (<= 64 registers at
 * 512 threads). The default is one 512-thread block; an experiment may build 256 (two half-size
 * blocks per SM: -DLN_THREADS=256 -DLN_DOWN_THREADS=288, measured slower) or 1024 (-DLN_THREADS=1024
 * -DLN_DOWN_THREADS=1152: one whole-SM block). */
#ifndef LN_THREADS
#define LN_THREADS 512
#endif
#ifndef LN_DOWN_THREADS
#define LN_DOWN_THREADS 576     /* MoE down: 8 output rows x 9 slots x 8 chunks */
#endif
/* MoE gate/up with the router fold: the routing weights for the down written by the block with the
 * fewest tiles, its shared-expert logit loaded with the top-k's (session 17: +2.3 tok/s at 4K; 0:
 * block 0, which has the most tiles, and a load after its prologue) */
#ifndef LN_GU_WB
#define LN_GU_WB 1
#endif
/* MoE down: the residual rows of the first tile read before the wait (session 17: noise-level, the
 * same bits; 0: after the dot products, as before) */
#ifndef LN_DOWN_XPRE
#define LN_DOWN_XPRE 1
#endif
#define LN_BPS (LN_THREADS >= 512 ? 1 : 512 / LN_THREADS)
#define LN_MINB (LN_THREADS >= 1024 ? 1 : 1024 / LN_THREADS)
#define LN_DOWN_MINB (LN_DOWN_THREADS > 576 ? 1 : 1152 / LN_DOWN_THREADS)
#define LN_MAX_ST 12
#ifndef LN_GEMV_REGS
#define LN_GEMV_REGS 0 /* 0: the launch bounds' 64 */
#endif
#ifndef LN_DOWN_REGS
#define LN_DOWN_REGS 0 /* 0: the launch bounds' 56 */
#endif
/* MoE gate/up at 56 registers since session 24 (no spills; 48 before): with the tile copies evict-first
 * (LN_EVF) 56 measured +2.4 tok/s at 4K against HEAD at 48 and +3.3 against the same build path, +0.8
 * / +1.3 at 256 (one call, 3 rounds, the same bits: bench/results/2026-12-05-h200-s24 call 10). Session
 * 11's reasoning for 48 (0: the launch bounds' 56), which held until then: a 16-warp block at 56 takes
 * 7,168 of each sub-partition's 16,384 registers and the MoE down block (18 warps at 56) 8,960 on
 * two of them: on paper 16,128 fit, on the device the down entered an SM only as gate/up's block
 * left (trace: 3.3 µs from gate/up done to the down past its wait, its top-k and 18-36 bulk copies
 * after entry). At 48 (6,144) the down enters while gate/up runs, its pre-wait work hides, the gap
 * is 0.5 µs: +4 tok/s at 4K (gate/up's first routed tile arrives later, its copies now queued
 * behind the down's). At 48, 4-8 bytes of spill per instance. */
#ifndef LN_GU_REGS
#define LN_GU_REGS 56
#endif
/* Where k_lmoe_gu lets the MoE down launch (session 32, experiment; dev/lean_variant.sh gut1 -DLN_GU_TRIG=1,
 * never run): 0 right after its wait (PDL convention); 1 once the block's first tile has landed; 2 once
 * its last has. Why: the down's blocks enter at the trigger and at once ask the copy engine for their
 * whole ring (~45 KB per SM) plus the next in-projection's L2 prefetch; on the same SMs gate/up's first
 * routed copies, the step's critical path, queue behind that burst (see LN_GU_REGS above). The down
 * needs its tiles only after its own wait and ~1.5 µs of prologue. */
#ifndef LN_GU_TRIG
#define LN_GU_TRIG 0
#endif
/* The same for k_lgemv (dev/lean_variant.sh gvt2 -DLN_GEMV_TRIG=2, never run): the GDN in-projection's
 * window takes ~228 KB per SM, 108 of its own tiles and 120 of the fused GDN kernel's pre-wait loads
 * (state, W_out and fold slices), which enter at its trigger; 2 lets them in only once the block's
 * last tile has landed (the fused kernel needs them only after its wait). */
#ifndef LN_GEMV_TRIG
#define LN_GEMV_TRIG 0
#endif
#define LN_STAGE (36 * LN_THREADS) /* one Q4_K tile of LN_THREADS chunks (36 bytes each) */
/* dynamic shared memory per block (default; LILAC_CUDA_LN_SMEM): more than half of an SM's 228 KB,
 * so two blocks of one kernel never share an SM (lean.h) */
#define LN_SMEM_MAX (120 * 1024 / LN_BPS)
#define LN_STAGE_HEAD (54 * LN_THREADS) /* the lm head's stage: a whole Q6_K tile (16 rows of 2048) */
/* the lm head (argmax): the last big kernel of a step. Two blocks per SM with half the ring each
 * (32 warps hide the Q6_K dots' latency): 146 -> 117 us on the H200, +10 tok/s decode at 4K (session
 * 13, bench/results/2026-12-02-h200-s14, section 7); -DLN_HEAD_BPS=1 is the old single block with a 200 KB ring */
#ifndef LN_HEAD_BPS
#define LN_HEAD_BPS 2
#endif
#ifndef LN_SMEM_HEAD
#define LN_SMEM_HEAD (LN_HEAD_BPS > 1 ? 108 * 1024 : 200 * 1024)
#endif

/* ---- optional in-graph trace (a build with -DLILAC_LN_TRACE, then LILAC_CUDA_LN_TRACE=1). A record of LN_TRS u64 per launch: [0]
 * block 0's entry, [1] the last block past the wait, [2] the last block done, [3] the last block past
 * its prologue (MoE gate/up: past the top-k), [4] the last block with its first tile in shared memory
 * (globaltimer ns; maxima over blocks, no reset needed), [5] the grid size, [6] the last block with
 * its last tile in shared memory (how long the tiles after the first took to land), [7] the last block's
 * entry, then from byte 64 the SM
 * of each of the first 256 blocks (how blocks of one kernel share SMs). */
#define LN_TRS 52 /* [40, 48): the fused MoE kernel's phase stamps (k_fused.cuh); [48, 52): (time << 16 | block) of the last block past stamps 1..4 */
/* The calling thread spins ns nanoseconds (a kernel's pre-wait requests made a little later, k_lgdn.cuh). */
__device__ __forceinline__ void ln_delay_ns(unsigned ns) {
    if (ns == 0) return;
    unsigned long long t0 = ln_now();
    while (ln_now() - t0 < (unsigned long long)ns) __nanosleep(100);
}

/* ---- top-k with warp reductions (redux.sync): the same result as topk_warp (ties: lower index) */

/* host-callable for tests/cuda_host/test_topk_sort.cu (the bit casts are device intrinsics) */
__host__ __device__ __forceinline__ uint32_t ln_fkey(float v) {
#ifdef __CUDA_ARCH__
    uint32_t u = __float_as_uint(v);
#else
    uint32_t u;
    memcpy(&u, &v, 4);
#endif
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float ln_fkey_inv(uint32_t k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}
__device__ __forceinline__ uint32_t ln_warp_max_u32(uint32_t v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __reduce_max_sync(0xffffffffu, v);
#else
    for (int o = 16; o > 0; o >>= 1) { uint32_t t = __shfl_xor_sync(0xffffffffu, v, o); v = t > v ? t : v; }
    return v;
#endif
}
__device__ __forceinline__ uint32_t ln_warp_min_u32(uint32_t v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __reduce_min_sync(0xffffffffu, v);
#else
    for (int o = 16; o > 0; o >>= 1) { uint32_t t = __shfl_xor_sync(0xffffffffu, v, o); v = t < v ? t : v; }
    return v;
#endif
}

/* w[t] = softmax over the k chosen logits w[0..k) (w[0] their maximum) times scale (> 0: the
 * order, and so the choice, does not depend on it); one thread. */
__device__ __forceinline__ void ln_softmax_k(float *w, int k, float scale) {
    float m = w[0], sum = 0.0f;
    for (int t = 0; t < k; t++) { w[t] = __expf((w[t] - m) * scale); sum += w[t]; }
    float inv = 1.0f / sum;
    for (int t = 0; t < k; t++) w[t] *= inv;
}

/* ---- the sorted form of the top-k (LN_TOPK2; session 28, unmeasured): each lane sorts its 8 (key,
 * index) pairs once, by a comparator network, so that a round of the top-k reads the lane's head
 * instead of re-scanning its 8 keys (a chain of 8 dependent compare-selects per round, 8 rounds, on
 * gate/up's critical path: the routed tiles are requested only after it). Same order as ln_topk:
 * the larger key first, the lower index on a tie. Host + device: tests/cuda_host/test_topk_sort.cu. */
#ifndef LN_TOPK2
#define LN_TOPK2 0
#endif
/* slots i < j of one lane: slot i keeps the larger key (the lower index on a tie) */
__host__ __device__ __forceinline__ void tk_cx(uint32_t *k, uint32_t *p, int i, int j) {
    bool sw = k[j] > k[i] || (k[j] == k[i] && p[j] < p[i]);
    uint32_t ki = k[i], pi = p[i];
    k[i] = sw ? k[j] : ki;
    p[i] = sw ? p[j] : pi;
    k[j] = sw ? ki : k[j];
    p[j] = sw ? pi : p[j];
}
/* the 8 slots in that order: 19 comparators in 6 layers (indices distinct: a total order) */
__host__ __device__ __forceinline__ void tk_sort8(uint32_t k[8], uint32_t p[8]) {
    tk_cx(k, p, 0, 2); tk_cx(k, p, 1, 3); tk_cx(k, p, 4, 6); tk_cx(k, p, 5, 7);
    tk_cx(k, p, 0, 4); tk_cx(k, p, 1, 5); tk_cx(k, p, 2, 6); tk_cx(k, p, 3, 7);
    tk_cx(k, p, 0, 1); tk_cx(k, p, 2, 3); tk_cx(k, p, 4, 5); tk_cx(k, p, 6, 7);
    tk_cx(k, p, 2, 4); tk_cx(k, p, 3, 5);
    tk_cx(k, p, 1, 4); tk_cx(k, p, 3, 6);
    tk_cx(k, p, 1, 2); tk_cx(k, p, 3, 4); tk_cx(k, p, 5, 6);
}
/* take: the head was chosen; the others move up and slot 7 empties (key 0 loses to every real key) */
__host__ __device__ __forceinline__ void tk_pop8(uint32_t k[8], uint32_t p[8], bool take) {
    for (int j = 0; j < 7; j++) {
        k[j] = take ? k[j + 1] : k[j];
        p[j] = take ? p[j + 1] : p[j];
    }
    k[7] = take ? 0u : k[7];
}
/* one round over the lanes' heads: the winner's index (0xffffffff: nothing left, as ln_topk) given
 * the warp's maximum head key mk */
__host__ __device__ __forceinline__ uint32_t tk_cand(uint32_t head_key, uint32_t head_pos, uint32_t mk) {
    return head_key == mk && mk != 0u ? head_pos : 0xffffffffu;
}

/* ids[k], w[k] (softmax over the chosen k, as topk_warp) from logits[E], E <= 256, in the calling
 * warp: each lane keeps its 8 logits in registers; a round is a lane-local max, one warp max of the
 * key and one warp min of the index among the lanes that hold it. */
/* CG: the logits were written by other blocks of this launch (k_fused.cuh): loads bypass L1.
 * SOFT false: w keeps the chosen logits (raw logits, k_lgdn's router fold: the caller applies
 * ln_softmax_k once it knows their scale). */
template <bool CG = false, bool SOFT = true>
__device__ __forceinline__ void ln_topk(const float *logits, int E, int k, int *ids, float *w) {
    int lane = threadIdx.x & 31;
    uint32_t key[8];
#pragma unroll
    for (int c = 0; c < 8; c++)
        key[c] = lane + 32 * c < E ? ln_fkey(CG ? __ldcg(logits + lane + 32 * c) : logits[lane + 32 * c]) : 0u;
#if LN_TOPK2
    uint32_t pos[8];
#pragma unroll
    for (int c = 0; c < 8; c++) pos[c] = lane + 32 * c;
    tk_sort8(key, pos);
#pragma unroll
    for (int t = 0; t < QK_MAX_TOPK; t++) {
        if (t >= k) break;
        uint32_t mk = ln_warp_max_u32(key[0]);
        uint32_t wi = ln_warp_min_u32(tk_cand(key[0], pos[0], mk));
        tk_pop8(key, pos, pos[0] == wi);
        if (lane == 0) { ids[t] = (int)wi; w[t] = ln_fkey_inv(mk); }
    }
#else
    for (int t = 0; t < k; t++) {
        uint32_t bk = 0, bi = 0xffffffffu;
#pragma unroll
        for (int c = 0; c < 8; c++)
            if (key[c] > bk) { bk = key[c]; bi = lane + 32 * c; } /* strict: the lower index wins a tie */
        uint32_t mk = ln_warp_max_u32(bk);
        uint32_t wi = ln_warp_min_u32(bk == mk ? bi : 0xffffffffu);
        if ((wi & 31) == (uint32_t)lane) {
#pragma unroll
            for (int c = 0; c < 8; c++)
                if (lane + 32 * c == (int)wi) key[c] = 0u;
        }
        if (lane == 0) { ids[t] = (int)wi; w[t] = ln_fkey_inv(mk); } /* the logit for now */
    }
#endif
    if (SOFT && lane == 0) ln_softmax_k(w, k, 1.0f);
    __syncwarp();
}

/* ---- a thread's slice of the activation (registers) and the chunk dot products */

struct ln_act {
    int xl[8], xh[8];   /* q8 of the low-nibble and high-nibble 32-element groups of the chunk */
    float f0, f1;       /* their scales */
    float g0, g1;       /* Q4_K: scale * sum of the group's q8 (the min term); unused for Q6_K */
    int n0, n1, n2, n3; /* Q6_K: 32 * sum of q8 over each 16-element half group (the -32 offset) */
};

/* Q4_K chunk c: groups 2c, 2c+1. q = the block's quantized activation (shared memory). */
__device__ __forceinline__ void ln_act_q4k(const qact &q, int a0, int c, ln_act &A) {
    const int4 *p = (const int4 *)(q.xq + a0 + 64 * c);
    int4 v0 = p[0], v1 = p[1], v2 = p[2], v3 = p[3];
    A.xl[0] = v0.x; A.xl[1] = v0.y; A.xl[2] = v0.z; A.xl[3] = v0.w;
    A.xl[4] = v1.x; A.xl[5] = v1.y; A.xl[6] = v1.z; A.xl[7] = v1.w;
    A.xh[0] = v2.x; A.xh[1] = v2.y; A.xh[2] = v2.z; A.xh[3] = v2.w;
    A.xh[4] = v3.x; A.xh[5] = v3.y; A.xh[6] = v3.z; A.xh[7] = v3.w;
    int g = (a0 >> 5) + 2 * c;
    A.f0 = q.dx[g]; A.f1 = q.dx[g + 1];
    A.g0 = q.s16[2 * g] + q.s16[2 * g + 1];
    A.g1 = q.s16[2 * g + 2] + q.s16[2 * g + 3];
    A.n0 = A.n1 = A.n2 = A.n3 = 0;
}

/* Q6_K chunk c: groups 8b+4n+s and +2. */
__device__ __forceinline__ void ln_act_q6k(const qact &q, int a0, int c, ln_act &A) {
    int gl = (a0 >> 5) + 8 * (c >> 2) + 4 * ((c >> 1) & 1) + (c & 1), gh = gl + 2;
    const int4 *pl = (const int4 *)(q.xq + 32 * gl), *ph = (const int4 *)(q.xq + 32 * gh);
    int4 v0 = pl[0], v1 = pl[1], v2 = ph[0], v3 = ph[1];
    A.xl[0] = v0.x; A.xl[1] = v0.y; A.xl[2] = v0.z; A.xl[3] = v0.w;
    A.xl[4] = v1.x; A.xl[5] = v1.y; A.xl[6] = v1.z; A.xl[7] = v1.w;
    A.xh[0] = v2.x; A.xh[1] = v2.y; A.xh[2] = v2.z; A.xh[3] = v2.w;
    A.xh[4] = v3.x; A.xh[5] = v3.y; A.xh[6] = v3.z; A.xh[7] = v3.w;
    A.f0 = q.dx[gl]; A.f1 = q.dx[gh];
    A.g0 = A.g1 = 0.0f;
    int s[4] = {0, 0, 0, 0};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        s[0] = __dp4a(A.xl[i], 0x01010101, s[0]);
        s[1] = __dp4a(A.xl[4 + i], 0x01010101, s[1]);
        s[2] = __dp4a(A.xh[i], 0x01010101, s[2]);
        s[3] = __dp4a(A.xh[4 + i], 0x01010101, s[3]);
    }
    A.n0 = 32 * s[0]; A.n1 = 32 * s[1]; A.n2 = 32 * s[2]; A.n3 = 32 * s[3];
}

/* The group scales of a loaded activation slice times r (the RMSNorm factor ln_prologue returns). */
__device__ __forceinline__ void ln_act_scale(ln_act &A, float r) {
    A.f0 *= r; A.f1 *= r; A.g0 *= r; A.g1 *= r;
}

/* Elements [e, e + 4) of x̂ = v into the qact buffers (fp32 and q8, its 32-element group's scale and
 * 16-element sums): lane l of a warp whose 8 consecutive lanes hold one group (e = 4 l + const). */
__device__ __forceinline__ void ln_quant_store4(float4 v, int e, int l, float *xf, int8_t *xq, float *dx, float *s16) {
    *(float4 *)(xf + e) = v;
    float am = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
    am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, 1));
    am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, 2));
    am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, 4));
    float d = am * (1.0f / 127.0f), id = am > 0.0f ? 127.0f / am : 0.0f;
    int q0 = __float2int_rn(v.x * id), q1 = __float2int_rn(v.y * id);
    int q2 = __float2int_rn(v.z * id), q3 = __float2int_rn(v.w * id);
    *(int *)(xq + e) = (q0 & 0xff) | ((q1 & 0xff) << 8) | ((q2 & 0xff) << 16) | ((q3 & 0xff) << 24);
    int t = q0 + q1 + q2 + q3;
    t += __shfl_xor_sync(0xffffffffu, t, 1);
    t += __shfl_xor_sync(0xffffffffu, t, 2);
    if ((l & 7) == 0) dx[e >> 5] = d;
    if ((l & 3) == 0) s16[e >> 4] = d * (float)t;
}

/* ---- the prologue: x̂ = transform(x) (RMSNorm / gated head norm / plain, a.pro) quantized to q8 in
 * shared memory (qact layout of k_gemv.cuh, plus x̂ in fp32 for BF16 rows) with ONE __syncthreads.
 * Warp w takes the 128-element pieces w, w + nw, ... (LN_PRO_PPW of them loaded at once), a lane 4
 * consecutive elements (one float4), so a 32-element group is 8 lanes and its scale a 3-step
 * shuffle; a head of 128 is one warp. RMSNorm's 1/rms is NOT applied to the stored values: the q8
 * integers of x*g and of x*g/rms are the same, so the block-wide sum of squares needs no barrier of
 * its own; the caller scales its group scales (ln_act_scale) and BF16 dots by the returned factor.
 * The older gemv_prologue took four barriers, a scale pass and a quantization loop of 4-9 groups
 * per warp. K % 128 == 0; heads of 32, 64 or 128; RMSNorm with <= 1024 threads. */
#define LN_PRO_PPW 2
__device__ __forceinline__ float4 ln_ld4(const float *p, bool cg) { return cg ? __ldcg((const float4 *)p) : *(const float4 *)p; }
/* CG: x (and z) were written by other blocks of this launch (k_fused.cuh): loads bypass L1 */
/* W0: the first W0 warps take no pieces (they are busy elsewhere; they still meet the barrier) */
template <bool CG = false, int W0 = 0>
__device__ __forceinline__ float ln_prologue(const gemv_args &a, unsigned char *sm, float *red, qact *Q) {
    float *xf, *dx, *s16;
    int8_t *xq;
    qact_carve(sm, a.K, &xf, &xq, &dx, &s16);
    int w = (int)(threadIdx.x >> 5) - W0, l = threadIdx.x & 31, nw = (int)(blockDim.x >> 5) - W0, K = a.K, np = K >> 7;
    float ss = 0.0f;
    for (int p0 = w; (W0 == 0 || p0 >= 0) && p0 < np; p0 += LN_PRO_PPW * nw) {
        float4 xv[LN_PRO_PPW], gv[LN_PRO_PPW], zv[LN_PRO_PPW];
#pragma unroll
        for (int i = 0; i < LN_PRO_PPW; i++) { /* every load of the batch first: L2 round trips overlap */
            int p = p0 + i * nw, e = 128 * p + 4 * l;
            if (p < np) {
                xv[i] = ln_ld4(a.x + e, CG);
                if (a.pro == PRO_RMSNORM) gv[i] = *(const float4 *)(a.g + e);
                if (a.pro == PRO_HEADNORM_GATED) {
                    gv[i] = *(const float4 *)(a.g + (e & (a.hd - 1)));
                    zv[i] = ln_ld4(a.z + e, CG);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < LN_PRO_PPW; i++) {
            int p = p0 + i * nw, e = 128 * p + 4 * l;
            if (p >= np) break; /* uniform in the warp */
            float4 v = xv[i];
            if (a.pro == PRO_RMSNORM) {
                ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
                v.x *= gv[i].x; v.y *= gv[i].y; v.z *= gv[i].z; v.w *= gv[i].w;
            } else if (a.pro == PRO_HEADNORM_GATED) {
                float h = v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
                for (int o = 1; o < (a.hd >> 2); o <<= 1) h += __shfl_xor_sync(0xffffffffu, h, o);
                float r = rsqrtf(h / (float)a.hd + a.eps);
                v.x = v.x * r * gv[i].x * silu_f(zv[i].x);
                v.y = v.y * r * gv[i].y * silu_f(zv[i].y);
                v.z = v.z * r * gv[i].z * silu_f(zv[i].z);
                v.w = v.w * r * gv[i].w * silu_f(zv[i].w);
            }
            ln_quant_store4(v, e, l, xf, xq, dx, s16);
        }
    }
    if (a.pro == PRO_RMSNORM) {
        ss = warp_sum(ss);
        if (l == 0) red[w + W0] = ss;
    }
    __syncthreads();
    *Q = qact{xf, xq, dx, s16};
    if (a.pro != PRO_RMSNORM) return 1.0f;
    float t = l < nw + W0 ? red[l] : 0.0f;
    return rsqrtf(warp_sum(t) / (float)K + a.eps);
}

/* Q4_K chunk dot. qs: the chunk's 32 bytes; meta: its block's 16 bytes (d, dmin, 12 scale bytes);
 * j = c & 3 (the chunk's sub-block pair in the block). */
__device__ __forceinline__ float ln_dot_q4k(const unsigned char *qs, const unsigned char *meta, int j, const ln_act &A) {
    uint4 q0 = *(const uint4 *)qs, q1 = *(const uint4 *)(qs + 16);
    uint4 mv = *(const uint4 *)meta;
    uint32_t w[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
    int s0 = 0, s1 = 0;
#pragma unroll
    for (int k = 0; k < 8; k++) {
        s0 = __dp4a((int)(w[k] & 0x0f0f0f0fu), A.xl[k], s0);
        s1 = __dp4a((int)((w[k] >> 4) & 0x0f0f0f0fu), A.xh[k], s1);
    }
    /* 6-bit scales/mins of sub-blocks 2j, 2j+1 (llama's get_scale_min_k4, both at once) */
    uint32_t t = (uint32_t)(16 * (j & 1));
    uint32_t scp, mp;
    if (j < 2) {
        scp = (mv.y >> t) & 0x3f3fu;
        mp = (mv.z >> t) & 0x3f3fu;
    } else {
        scp = ((mv.w >> t) & 0x0f0fu) | ((mv.y >> (t + 2)) & 0x3030u);
        mp = ((mv.w >> (t + 4)) & 0x0f0fu) | ((mv.z >> (t + 2)) & 0x3030u);
    }
    float d = __half2float(__ushort_as_half((unsigned short)(mv.x & 0xffffu)));
    float dmin = __half2float(__ushort_as_half((unsigned short)(mv.x >> 16)));
    int i0 = (int)(scp & 0xffu) * s0, i1 = (int)(scp >> 8) * s1;
    return d * (A.f0 * (float)i0 + A.f1 * (float)i1) - dmin * ((float)(mp & 0xffu) * A.g0 + (float)(mp >> 8) * A.g1);
}

/* Q6_K chunk dot. ql: the chunk's 32 ql bytes; qh: the 32 qh bytes of its half block; sc: the 8
 * scales of its half block; d: the block's scale; s = c & 1. */
__device__ __forceinline__ float ln_dot_q6k(const unsigned char *ql, const unsigned char *qh, const int8_t *sc, float d, int s,
                                            const ln_act &A) {
    uint4 l0 = *(const uint4 *)ql, l1 = *(const uint4 *)(ql + 16);
    uint4 h0 = *(const uint4 *)qh, h1 = *(const uint4 *)(qh + 16);
    uint2 sv = *(const uint2 *)sc;
    uint32_t l[8] = {l0.x, l0.y, l0.z, l0.w, l1.x, l1.y, l1.z, l1.w};
    uint32_t h[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
    int shl = 2 * s, shh = 4 + 2 * s;
    int sl0 = 0, sl1 = 0, sh0 = 0, sh1 = 0;
#pragma unroll
    for (int k = 0; k < 8; k++) {
        int lo = (int)((l[k] & 0x0f0f0f0fu) | (((h[k] >> shl) & 0x03030303u) << 4));
        int hi = (int)(((l[k] >> 4) & 0x0f0f0f0fu) | (((h[k] >> shh) & 0x03030303u) << 4));
        if (k < 4) { sl0 = __dp4a(lo, A.xl[k], sl0); sh0 = __dp4a(hi, A.xh[k], sh0); }
        else { sl1 = __dp4a(lo, A.xl[k], sl1); sh1 = __dp4a(hi, A.xh[k], sh1); }
    }
    /* scales 2s, 2s+1 (low nibbles) and 4+2s, 4+2s+1 (high) of the 8 */
    uint32_t sa = s ? (sv.x >> 16) : sv.x, sb = s ? (sv.y >> 16) : sv.y;
    int c0 = (int)(int8_t)(sa & 0xffu), c1 = (int)(int8_t)((sa >> 8) & 0xffu);
    int c2 = (int)(int8_t)(sb & 0xffu), c3 = (int)(int8_t)((sb >> 8) & 0xffu);
    int ilo = c0 * (sl0 - A.n0) + c1 * (sl1 - A.n1), ihi = c2 * (sh0 - A.n2) + c3 * (sh1 - A.n3);
    return d * (A.f0 * (float)ilo + A.f1 * (float)ihi);
}

/* BF16 chunk dot with the fp32 activation (exact path: router logits). */
__device__ __forceinline__ float ln_dot_bf16(const unsigned char *w, const float *xf) {
    float acc = 0.0f;
#pragma unroll
    for (int v = 0; v < 8; v++) {
        uint4 u = *(const uint4 *)(w + 16 * v);
        float4 xa = *(const float4 *)(xf + 8 * v), xb = *(const float4 *)(xf + 8 * v + 4);
        acc = fmaf(__uint_as_float(u.x << 16), xa.x, acc);
        acc = fmaf(__uint_as_float(u.x & 0xffff0000u), xa.y, acc);
        acc = fmaf(__uint_as_float(u.y << 16), xa.z, acc);
        acc = fmaf(__uint_as_float(u.y & 0xffff0000u), xa.w, acc);
        acc = fmaf(__uint_as_float(u.z << 16), xb.x, acc);
        acc = fmaf(__uint_as_float(u.z & 0xffff0000u), xb.y, acc);
        acc = fmaf(__uint_as_float(u.w << 16), xb.z, acc);
        acc = fmaf(__uint_as_float(u.w & 0xffff0000u), xb.w, acc);
    }
    return acc;
}

/* 8 BF16 weights (16 bytes of shared memory) times 8 fp32 activations: a thread's share of a BF16
 * row split over the whole block (the router's path). */
__device__ __forceinline__ float ln_dot_bf16x8(const unsigned char *w, const float *xf) {
    uint4 u = *(const uint4 *)w;
    float4 xa = *(const float4 *)xf, xb = *(const float4 *)(xf + 4);
    return __uint_as_float(u.x << 16) * xa.x + __uint_as_float(u.x & 0xffff0000u) * xa.y +
           __uint_as_float(u.y << 16) * xa.z + __uint_as_float(u.y & 0xffff0000u) * xa.w +
           __uint_as_float(u.z << 16) * xb.x + __uint_as_float(u.z & 0xffff0000u) * xb.y +
           __uint_as_float(u.w << 16) * xb.z + __uint_as_float(u.w & 0xffff0000u) * xb.w;
}

/* Bytes of one row of a K-column matrix in a tile. */
__host__ __device__ static inline int ln_row_bytes(int WT, int K) {
    return WT == GT_Q4_K ? (K >> 8) * 144 : (WT == GT_Q6_K ? (K >> 8) * 210 : K * 2);
}

#ifdef LN_L2ARENA /* diagnostic build (session 21): every tile copy reads from one LN_L2ARENA-MB buffer
                   * instead of its weights, at an offset spread like the real addresses (no L2 slice a
                   * hot spot, unlike the old LN_L2ONLY's 64 rows per matrix): the chain as if every
                   * tile were an L2 hit (results garbage). Measured: no faster (call 4) */
static __device__ unsigned char ln_l2arena[(size_t)LN_L2ARENA << 20];
__device__ __forceinline__ const unsigned char *ln_arena(const void *p, uint32_t bytes) {
    size_t span = ((size_t)LN_L2ARENA << 20) - bytes;
    return ln_l2arena + ((((size_t)p) % span) & ~(size_t)15);
}
#define LN_SRC(p, b) ln_arena((p), (b))
#else
#define LN_SRC(p, b) (p)
#endif
#ifndef LN_EVF
#define LN_EVF 1
#endif
#if LN_EVF
/* A tile copy whose lines the L2 allocates evict-first (session 24: +2.8 / +2.8 / +2.9 tok/s at
 * 4K and +3.0 .. +3.8 at 256 in three calls; LN_EVF=0 the plain copy). Every weight byte is read
 * once a step and 1.9 GB stream through the 50 MB L2 per token, so nothing of a tile is worth
 * keeping; with the default policy the tiles pushed out what is: the next input projection that
 * the MoE down asks the L2 for (LILAC_CUDA_PFNEXT). Without that prefetch the policy gains nothing
 * (call 3); the fused GDN kernel's and the fold's cp.async weight rows evict-first too lose 3.2,
 * flash decoding's K / V rows by ld.global.cs 1.4 more, the prefetch itself evict-last 10.8
 * (bench/results/2026-12-05-h200-s24). */
__device__ __forceinline__ void ln_g2s(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;"
                 ::"r"(smem_u32(dst)), "l"(src), "r"(bytes), "r"(smem_u32(bar)), "l"(pol)
                 : "memory");
}
#else
#define ln_g2s bulk_g2s
#endif
/* Requests rows [r0, r0+n) of W into a tile laid out for TR rows at dst (thread 0; bar armed here). */
__device__ __forceinline__ void ln_copy_rows(const gmat &W, long r0, int n, int TR, unsigned char *dst, uint64_t *bar, bool arm) {
    int nb = W.cols >> 8;
    size_t blk0 = (size_t)r0 * nb, nblk = (size_t)n * nb;
    if (W.type == GT_Q4_K) {
        if (arm) mbar_expect_tx(bar, (uint32_t)(nblk * 144));
        ln_g2s(dst, LN_SRC(W.q + blk0 * 128, (uint32_t)(nblk * 128)), (uint32_t)(nblk * 128), bar);
        ln_g2s(dst + (size_t)TR * nb * 128, LN_SRC(W.sc + blk0 * 16, (uint32_t)(nblk * 16)), (uint32_t)(nblk * 16), bar);
    } else if (W.type == GT_Q6_K) {
        if (arm) mbar_expect_tx(bar, (uint32_t)(nblk * 210));
        ln_g2s(dst, LN_SRC(W.q + blk0 * 128, (uint32_t)(nblk * 128)), (uint32_t)(nblk * 128), bar);
        ln_g2s(dst + (size_t)TR * nb * 128, LN_SRC(W.qh + blk0 * 64, (uint32_t)(nblk * 64)), (uint32_t)(nblk * 64), bar);
        ln_g2s(dst + (size_t)TR * nb * 192, LN_SRC(W.sc + blk0 * 16, (uint32_t)(nblk * 16)), (uint32_t)(nblk * 16), bar);
        ln_g2s(dst + (size_t)TR * nb * 208, LN_SRC((const unsigned char *)W.d + blk0 * 2, (uint32_t)(nblk * 2)), (uint32_t)(nblk * 2), bar);
    } else { /* BF16 */
        size_t bytes = (size_t)n * W.cols * 2;
        if (arm) mbar_expect_tx(bar, (uint32_t)bytes);
        ln_g2s(dst, W.q + (size_t)r0 * W.cols * 2, (uint32_t)bytes, bar);
    }
}

#ifdef LN_PFSELF
/* Experiment (session 24, prepared, not measured): asks the L2 for rows [r0, r0+n) of W, plane by plane
 * (the bytes ln_copy_rows would copy; thread 0). */
__device__ __forceinline__ void ln_prefetch_rows(const gmat &W, long r0, int n) {
    int nb = W.cols >> 8;
    size_t blk0 = (size_t)r0 * nb, nblk = (size_t)n * nb;
    auto pf = [](const void *p, size_t bytes) { /* 16-byte multiples (every plane of a 256-column row is) */
        if (bytes >= 16) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"((uint32_t)(bytes & ~(size_t)15)) : "memory");
    };
    if (W.type == GT_Q4_K) { pf(W.q + blk0 * 128, nblk * 128); pf(W.sc + blk0 * 16, nblk * 16); }
    else if (W.type == GT_Q6_K) {
        pf(W.q + blk0 * 128, nblk * 128); pf(W.qh + blk0 * 64, nblk * 64); pf(W.sc + blk0 * 16, nblk * 16);
        pf((const unsigned char *)W.d + blk0 * 2, nblk * 2);
    } else pf(W.q + (size_t)r0 * W.cols * 2, (size_t)n * W.cols * 2);
}
#endif
/* The dot of chunk c of tile row rr (a tile of TR rows of type WT at base). */
__device__ __forceinline__ float ln_dot_tile(int WT, const unsigned char *base, int TR, int K, int rr, int c, const ln_act &A,
                                             const float *xf) {
    int nb = K >> 8, b = c >> 2;
    if (WT == GT_Q4_K) {
        const unsigned char *qs = base + (size_t)rr * nb * 128 + 32 * c;
        const unsigned char *meta = base + (size_t)TR * nb * 128 + ((size_t)rr * nb + b) * 16;
        return ln_dot_q4k(qs, meta, c & 3, A);
    }
    if (WT == GT_Q6_K) {
        int n = (c >> 1) & 1;
        const unsigned char *ql = base + (size_t)rr * nb * 128 + 32 * c;
        const unsigned char *qh = base + (size_t)TR * nb * 128 + ((size_t)rr * nb + b) * 64 + 32 * n;
        const int8_t *sc = (const int8_t *)(base + (size_t)TR * nb * 192 + ((size_t)rr * nb + b) * 16 + 8 * n);
        float d = __half2float(((const __half *)(base + (size_t)TR * nb * 208))[(size_t)rr * nb + b]);
        return ln_dot_q6k(ql, qh, sc, d, c & 1, A);
    }
    return ln_dot_bf16(base + (size_t)rr * K * 2 + 128 * c, xf + 64 * c);
}

/* ---- dense GEMV over up to 4 segments (one input): y_s = W_s x̂, store or residual add */

struct lgemv_args {
    gemv_args a;                    /* segments, prologue, K, argmax (exact: BF16 only) */
    int tr[GEMV_MAX_SEG];           /* rows per tile of each segment */
    int t0[GEMV_MAX_SEG + 1];       /* first tile of each segment; t0[nseg] = all tiles */
    int stage;                      /* bytes per ring stage */
    int nst;                        /* stages */
    int npre;                       /* stages requested before the wait (0: all; the rest after the prologue) */
    unsigned long long *trace;      /* optional trace record (LILAC_LN_TRACE builds) */
    /* k_lgemv_fb (the router folded into an attention layer's out-projection): block b also adds
     * B[r] . x to flraw[r] for logit rows r = b and b + grid (r < fNL), B's rows requested into
     * shared memory at byte fboff before the wait */
    const __nv_bfloat16 *fB;        /* [fNL][K] W_r diag(g_ffn) W_o, BF16 */
    float *flraw;                   /* [fNL] raw router logits: W_r diag(g_ffn) x_old + B att */
    float *fxs;                     /* FB 1: [K] where block 0 copies x (x_old for FB 2's launch) */
    int fNL, fboff;
    const __nv_bfloat16 *fWr, *fWs; /* [fNL - 1 or fNL][H] router rows, [H] shared-expert gate row (NULL: none) */
    const float *fg, *fx;           /* [H] ffn norm gain, x_old (a copy: this launch adds to the residual) */
    int fH;
};

/* grid <= tiles, block LN_THREADS, dynamic smem nst * stage + qact_smem_bytes(K). Segments are
 * Q4_K, Q6_K or BF16, K % 256 == 0, K / 64 a power of two in [1, 512] (checked by the host).
 * AM (a.argmax != NULL): the packed (logit, row) maximum over segment 0 is merged into *a.argmax. */
/* FB: 0; 1 block 0 copies the input x to lgemv_args.fxs (an attention layer's qkv projection,
 * k_lgemv_fb<1>); 2 the router fold's rows (its out-projection, k_lgemv_fb<2>: lgemv_args.fB) */
template <bool AM, int FB = 0>
__device__ __forceinline__ void ln_gemv_body(const lgemv_args &L) {
    extern __shared__ __align__(16) unsigned char sm[];
    __shared__ __align__(8) uint64_t bar[LN_MAX_ST];
    __shared__ float red[32];
    __shared__ float part[2][LN_THREADS / 32];
    __shared__ unsigned long long best_s[LN_THREADS / 32];
    const gemv_args &a = L.a;
    ln_trace(L.trace, 0);
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int T = L.t0[a.nseg], G = gridDim.x, NST = L.nst;
    int mine = T > (int)blockIdx.x ? (T - 1 - (int)blockIdx.x) / G + 1 : 0;
    auto locate = [&](int i, int *s, int *r0, int *n) {
        int t = blockIdx.x + i * G, k = 0;
        while (k < a.nseg - 1 && t >= L.t0[k + 1]) k++;
        *s = k;
        *r0 = (t - L.t0[k]) * L.tr[k];
        *n = min(L.tr[k], a.seg[k].W.rows - *r0);
    };
    auto issue = [&](int i) {
        int s, r0, n;
        locate(i, &s, &r0, &n);
        ln_copy_rows(a.seg[s].W, r0, n, L.tr[s], sm + (size_t)(i % NST) * L.stage, &bar[i % NST], true);
    };
    int npre = L.npre < 0 ? 0 : (L.npre > 0 && L.npre < NST ? L.npre : NST); /* < 0: none before the wait */
    if (tid == 0) {
        mbar_ring_init(bar, NST);
        for (int i = 0; i < npre && i < mine; i++) issue(i);
#ifdef LN_PFSELF /* experiment: the stages requested after the prologue asked of the L2 at entry (run with
                  * LILAC_CUDA_PFNEXT=0 and 2: the down's prefetch of the same bytes off / on) */
        for (int i = npre; i < NST && i < mine; i++) {
            int s, r0, n;
            locate(i, &s, &r0, &n);
            ln_prefetch_rows(a.seg[s].W, r0, n);
        }
#endif
    }
    float fxo = 0.0f; /* FB 2, threads 0 and 1: the x_old term of logit row b + tid G */
    if (FB == 2) { /* this block's (at most two) B rows, 16 bytes a thread per step; then the x_old term
               * of its rows (x_old is several kernels back): 8 warps a row, H / 8 columns a warp */
        for (int q = 0; q < 2; q++) {
            int row = (int)blockIdx.x + q * G;
            if (row < L.fNL)
                for (int i = tid; i < (a.K >> 3); i += LN_THREADS)
                    cp_async16(sm + L.fboff + (size_t)q * a.K * 2 + 16 * i, (const unsigned char *)(L.fB + (size_t)row * a.K) + 16 * i, 16);
        }
        cp_async_commit();
        int q = warp >> 3, wr = warp & 7, row = (int)blockIdx.x + q * G, per = L.fH >> 3;
        float t = 0.0f;
        if (row < L.fNL) {
            const __nv_bfloat16 *wrow = row < L.fNL - (L.fWs ? 1 : 0) ? L.fWr + (size_t)row * L.fH : L.fWs;
            for (int c = wr * per + 8 * lane; c < (wr + 1) * per; c += 256) {
                float4 x0 = *(const float4 *)(L.fx + c), x1 = *(const float4 *)(L.fx + c + 4);
                float4 g0 = *(const float4 *)(L.fg + c), g1 = *(const float4 *)(L.fg + c + 4);
                float xg[8] = {x0.x * g0.x, x0.y * g0.y, x0.z * g0.z, x0.w * g0.w, x1.x * g1.x, x1.y * g1.y, x1.z * g1.z, x1.w * g1.w};
                t = bf16x8_fma(*(const uint4 *)(wrow + c), xg, t);
            }
        }
        t = warp_sum(t);
        if (lane == 0) red[warp] = t;
        __syncthreads();
        if (tid < 2)
            for (int k = 0; k < 8; k++) fxo += red[8 * tid + k];
    }
    __syncthreads();
    qact Q;
#ifdef LN_DRY /* experiment (session 10): the prologue's code run once before the wait on constant data
               * (the norm gain as x), so that its instructions and g are cached when the real one runs */
    if (a.pro == PRO_RMSNORM) {
        gemv_args d = a;
        d.x = a.g;
        volatile float r = ln_prologue(d, sm + (size_t)NST * L.stage, red, &Q);
        (void)r;
        __syncthreads();
    }
#endif
    pdl_wait();
    if (!LN_GEMV_TRIG) pdl_trigger();
    ln_trace(L.trace, 1);
#ifdef LN_ICTEST /* diagnostic (session 21): the same code twice (a loop), stamps 40 and 41: cold vs warm
                 * instruction cache (the second pass's loads also hit L1) */
    float rn;
#pragma unroll 1
    for (int rep = 0; rep < 2; rep++) {
        rn = ln_prologue(a, sm + (size_t)NST * L.stage, red, &Q);
        ln_trace(L.trace, 40 + rep);
        __syncthreads();
    }
#else
    float rn = ln_prologue(a, sm + (size_t)NST * L.stage, red, &Q);
    ln_trace(L.trace, 40); /* slots 8..39 hold the SM ids; 40.. are free outside k_fused */
#endif
    if (tid == 0) /* npre < NST: x's loads went ahead of these tiles' */
        for (int i = npre; i < NST && i < mine; i++) issue(i);
    if (FB == 1 && blockIdx.x == 0) /* the attention layer's input for its out-projection's fold */
        for (int i = 4 * tid; i < a.K; i += 4 * LN_THREADS) *(float4 *)(L.fxs + i) = *(const float4 *)(a.x + i);
    if (FB == 2) { /* logit rows b and b + G: 8 warps a row, K / 8 columns a warp, warp sums in order */
        cp_async_wait<0>();
        __syncthreads();
        int q = warp >> 3, wr = warp & 7, row = (int)blockIdx.x + q * G, per = a.K >> 3;
        float t = 0.0f;
        if (row < L.fNL) {
            const unsigned char *bp = sm + L.fboff + (size_t)q * a.K * 2 + (size_t)wr * per * 2;
            const float *xp = Q.xf + wr * per;
            for (int c = 8 * lane; c < per; c += 256) t = bf16x8_fma(*(const uint4 *)(bp + 2 * c), xp + c, t);
        }
        t = warp_sum(t);
        if (lane == 0) red[warp] = t;
        __syncthreads();
        if (tid < 2 && (int)blockIdx.x + tid * G < L.fNL) {
            float s = 0.0f;
            for (int k = 0; k < 8; k++) s += red[8 * tid + k];
            L.flraw[blockIdx.x + tid * G] = fxo + s * rn;
        }
    }
    ln_trace(L.trace, 3);
    int C = a.K >> 6, K = a.K;
    int rr = tid / C, c = tid % C;  /* this thread's row in a tile and chunk in the row */
    /* C > 32: a row is wpr warps, reduced through part[] behind a named barrier of those warps
     * (ids 1..rows; __syncthreads where a tile has more than 15 rows) */
    int wpr = C > 32 ? C >> 5 : 1, nrw = (LN_THREADS / 32) / wpr;
    ln_act A;
    int act_t = -1;
    unsigned long long best = 0; /* argmax over segment 0 (a.argmax) */
    auto row_store = [&](float t, int s, int row) { /* y[row] of segment s, and the argmax */
        float *y = a.seg[s].y + row;
        if (a.seg[s].epi == EPI_ADD) *y += t; else *y = t;
        if (AM && s == 0) { unsigned long long p = argmax_pack(t, row); best = p > best ? p : best; }
    };
    /* a row spread over wpr warps: their partial sums meet in part[] behind the row's named barrier
     * (1 + row, 32 * wpr threads) or, when `named` is false, the block's; the first warp stores f * sum */
    auto row_reduce = [&](float v, int i, int s, int r0, int row, int n, int wpr, bool named, float f, int id0) {
        if (lane == 0) part[i & 1][warp] = v;
        if (named) asm volatile("bar.sync %0, %1;" ::"r"(id0 + row), "r"(32 * wpr) : "memory");
        else __syncthreads();
        if (lane == 0 && warp % wpr == 0 && row < n) {
            float t = 0.0f;
            for (int k = 0; k < wpr; k++) t += part[i & 1][warp + k];
            row_store(t * f, s, r0 + row);
        }
    };
    for (int i = 0; i < mine; i++) {
        int s, r0, n;
        locate(i, &s, &r0, &n);
        const gmat &W = a.seg[s].W;
        mbar_wait(&bar[i % NST], (uint32_t)((i / NST) & 1));
        if (i == 0) ln_trace(L.trace, 4);
        if (i == mine - 1) ln_trace(L.trace, 6);
        if ((LN_GEMV_TRIG == 1 && i == 0) || (LN_GEMV_TRIG == 2 && i == mine - 1)) pdl_trigger();
        const unsigned char *base = sm + (size_t)(i % NST) * L.stage;
        bool refill = i + NST < mine; /* the same in every thread */
        if (W.type == GT_BF16 && L.tr[s] * K == 8 * LN_THREADS) {
            /* BF16 rows split over the whole block: P = K / 8 threads per row, 8 elements each (the
             * router: 2 rows per tile, 129 tiles of 8 KB instead of 65 of 16 KB with 3/4 of the
             * threads idle); the row's warps meet at named barrier 1 + row */
            int P = K >> 3, rb = tid / P, pp = tid % P, wpb = P >> 5;
            float v = rb < n ? ln_dot_bf16x8(base + (size_t)rb * K * 2 + 16 * pp, Q.xf + 8 * pp) : 0.0f;
            for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            /* named barriers 1 + nrw + rb: not the ids the Q4_K rows of a mixed GEMV use (1 .. nrw with
             * 64 threads; the same id with another count while a warp still waits is an illegal
             * instruction); a row of the whole block takes __syncthreads */
            int id0 = C > 32 ? 1 + nrw : 1;
            row_reduce(v, i, s, r0, rb, n, wpb, wpb > 1 && wpb < LN_THREADS / 32 && id0 + L.tr[s] <= 16 && !refill, rn, id0);
            if (tid == 0 && refill) {
                asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                issue(i + NST);
            }
            continue;
        }
        float v = 0.0f, v2 = 0.0f;
        /* paired tile (C <= 32, 2 * LN_THREADS / C rows, the host's choice for Q4_K): this thread also
         * dots row rr + half, an independent chain (ILP), and a block issues half the copies */
        int half = LN_THREADS / C;
        bool pair = !AM && C <= 32 && L.tr[s] > half; /* not in the lm head's instance: its registers (measured 139 -> 165 µs) */
        if (rr < n || (pair && rr + half < n)) {
            if (W.type != act_t && W.type != GT_BF16) {
                if (W.type == GT_Q4_K) ln_act_q4k(Q, 0, c, A); else ln_act_q6k(Q, 0, c, A);
                ln_act_scale(A, rn);
                act_t = W.type;
            }
        }
        if (pair) { /* Q4_K: rows rr and rr + half share their address arithmetic */
            int nb = K >> 8;
            const unsigned char *qs = base + (size_t)rr * nb * 128 + 32 * c;
            const unsigned char *meta = base + (size_t)L.tr[s] * nb * 128 + ((size_t)rr * nb + (c >> 2)) * 16;
            if (rr < n) v = ln_dot_q4k(qs, meta, c & 3, A);
            if (rr + half < n) v2 = ln_dot_q4k(qs + (size_t)half * nb * 128, meta + (size_t)half * nb * 16, c & 3, A);
        } else if (rr < n) {
            v = ln_dot_tile(W.type, base, L.tr[s], K, rr, c, A, Q.xf);
            if (W.type == GT_BF16) v *= rn;
        }
        int G2 = C < 32 ? C : 32;
        for (int o = G2 >> 1; o > 0; o >>= 1) {
            v += __shfl_xor_sync(0xffffffffu, v, o);
            if (pair) v2 += __shfl_xor_sync(0xffffffffu, v2, o);
        }
        if (C <= 32) {
            if (c == 0 && rr < n) row_store(v, s, r0 + rr);
            if (pair && c == 0 && rr + half < n) row_store(v2, s, r0 + rr + half);
            if (refill) __syncthreads(); /* stage i % NST consumed (no barrier at all when no refill follows) */
        } else {
            row_reduce(v, i, s, r0, rr, n, wpr, nrw <= 15 && !refill, 1.0f, 1);
        }
        if (tid == 0 && refill) {
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            issue(i + NST);
        }
    }
    if (AM) gemv_argmax_block(a, best, best_s);
    ln_trace(L.trace, 2);
}

/* k_lgemv<false> (every decode GEMV) at LN_GEMV_REGS registers when set (session 10). A 16-warp block at
 * 64 registers takes 8192 of a sub-partition's 16384; the MoE down block (18 warps at 56 registers)
 * puts 5 warps = 8960 on two of the four, so an in-projection block could not enter an SM until the
 * down block there had left (the trace's 3.5 µs entry spread after every down). At 56 both fit.
 * k_lgemv<true> (the lm head, alone on its SMs) keeps 64: spills there cost 20 % (session 7). */
template <bool AM> __global__ void k_lgemv(const __grid_constant__ lgemv_args L);
#if LN_GEMV_REGS
template <> __global__ void __maxnreg__(LN_GEMV_REGS) k_lgemv<false>(const __grid_constant__ lgemv_args L) { ln_gemv_body<false>(L); }
#else
template <> __global__ void __launch_bounds__(LN_THREADS, LN_MINB) k_lgemv<false>(const __grid_constant__ lgemv_args L) { ln_gemv_body<false>(L); }
#endif
template <> __global__ void __launch_bounds__(LN_THREADS, LN_MINB) k_lgemv<true>(const __grid_constant__ lgemv_args L) { ln_gemv_body<true>(L); }
/* an attention layer's qkv projection (1) and out-projection (2) with the router fold (lean_gemv with a lean_fb) */
template <int FB> __global__ void __launch_bounds__(LN_THREADS, LN_MINB) k_lgemv_fb(const __grid_constant__ lgemv_args L) { ln_gemv_body<false, FB>(L); }

/* ---- the lm head through registers (session 20). The copy-engine ring of k_lgemv<true> streams
 * the head's 417 MB (Q6_K, 248,320 x 2048) at ~3.6 TB/s at best (lab bulkbw: 117 µs; the engine's
 * head ~110 µs), plain 16-byte loads from every warp at ~4.2 TB/s (99 µs, the same run). A warp takes
 * whole rows of K = 2048: lane c loads and dots the 64-value chunk c exactly as k_lgemv<true>'s thread
 * (rr, c) does from its tile, and the row's 32 partial sums meet in the same shuffle order, so the
 * logits (and the argmax) are the same bits. The next row's bytes are in flight while the warp dots
 * the current one (session 20: +4.5 tok/s at 4K over the ring, 24 warps per SM; 16 warps: +1.4..3.4,
 * two rows per step at 16 warps: +3.0). grid: nsm x LN_LHEAD_BPS blocks of LN_LHEAD_THREADS, dynamic smem qact_smem_bytes(K); segment 0 only,
 * Q6_K, K = 2048 (the host checks). Trace: no tiles, so stamp 4 is the prologue's end ("1st tile" 0,
 * "rest" the row loop). */
struct ln_q6row { uint4 l0, l1, h0, h1; uint2 s; unsigned short d; };
__device__ __forceinline__ void ln_head_load(const gmat &W, int row, int c, ln_q6row &q) {
    int b = c >> 2, n = (c >> 1) & 1; /* the chunk's superblock and its half (qh, scales) */
    const uint8_t *pl = W.q + (size_t)row * 1024 + 32 * c, *ph = W.qh + ((size_t)row * 8 + b) * 64 + 32 * n;
    q.l0 = __ldcs((const uint4 *)pl);
    q.l1 = __ldcs((const uint4 *)(pl + 16));
    q.h0 = __ldcs((const uint4 *)ph);
    q.h1 = __ldcs((const uint4 *)(ph + 16));
    q.s = __ldcs((const uint2 *)(W.sc + ((size_t)row * 8 + b) * 16 + 8 * n));
    q.d = __ldcs((const unsigned short *)W.d + (size_t)row * 8 + b);
}
#ifndef LN_LHEAD_BPS
#define LN_LHEAD_BPS 1 /* k_lhead blocks per SM (2: 64 registers, spills; -7 tok/s, session 20) */
#endif
#ifndef LN_LHEAD_THREADS
#define LN_LHEAD_THREADS 768 /* k_lhead's block: 24 warps, 74 registers (session 20: +3.1 tok/s over 512) */
#endif
#ifndef LN_LHEAD_R
#define LN_LHEAD_R 1 /* rows a warp dots per step, as many more in flight (2: 112 registers, 512 threads only: +1.6 there) */
#endif
__global__ void __launch_bounds__(LN_LHEAD_THREADS, LN_LHEAD_BPS) k_lhead(const __grid_constant__ lgemv_args L) {
    extern __shared__ __align__(16) unsigned char sm[];
    __shared__ float red[32];
    __shared__ unsigned long long best_s[LN_LHEAD_THREADS / 32];
    const gemv_args &a = L.a;
    const gmat &W = a.seg[0].W;
    ln_trace(L.trace, 0);
    int c = threadIdx.x & 31, NW = gridDim.x * (LN_LHEAD_THREADS / 32), rows = W.rows;
    int row = blockIdx.x * (LN_LHEAD_THREADS / 32) + (threadIdx.x >> 5);
    ln_q6row cur, nxt;
    if (row < rows) ln_head_load(W, row, c, cur); /* static weights: before the wait */
    pdl_wait();
    pdl_trigger();
    ln_trace(L.trace, 1);
    qact Q;
    float rn = ln_prologue(a, sm, red, &Q);
    ln_trace(L.trace, 40);
    ln_act A;
    ln_act_q6k(Q, 0, c, A);
    ln_act_scale(A, rn);
    ln_trace(L.trace, 3);
    ln_trace(L.trace, 4);
    unsigned long long best = 0;
    auto dot_row = [&](const ln_q6row &q, int r) { /* row r's logit (lane 0 stores it) */
        float v = ln_dot_q6k((const unsigned char *)&q.l0, (const unsigned char *)&q.h0, (const int8_t *)&q.s,
                             __half2float(__ushort_as_half(q.d)), c & 1, A);
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (c == 0) {
            a.seg[0].y[r] = v;
            unsigned long long p = argmax_pack(v, r);
            best = p > best ? p : best;
        }
    };
#if LN_LHEAD_R == 2 /* two rows in flight behind the two being dotted */
    ln_q6row cur2, nxt2;
    if (row + NW < rows) ln_head_load(W, row + NW, c, cur2);
    for (; row < rows; row += 2 * NW) {
        if (row + 2 * NW < rows) ln_head_load(W, row + 2 * NW, c, nxt);
        if (row + 3 * NW < rows) ln_head_load(W, row + 3 * NW, c, nxt2);
        dot_row(cur, row);
        if (row + NW < rows) dot_row(cur2, row + NW);
        cur = nxt;
        cur2 = nxt2;
    }
#else
    for (; row < rows; row += NW) {
        if (row + NW < rows) ln_head_load(W, row + NW, c, nxt);
        dot_row(cur, row);
        cur = nxt;
    }
#endif
    ln_trace(L.trace, 6);
    gemv_argmax_block(a, best, best_s);
    ln_trace(L.trace, 2);
}

/* ---- MoE gate/up + SwiGLU. Tiles: TH = LN_THREADS / C rows of h (C = H / 64 chunks per row), i.e.
 * TH gate rows then the same TH up rows of one slot (36 KB for H = 2048); thread (row rr, chunk c)
 * dots chunk c of gate row rr AND of up row rr, so its two dot chains are independent (ILP) and
 * the row's C threads produce h = silu(gate) * up with no exchange between warps. (Session 6's tiles
 * were TH/2 rows: a gate warp and an up warp met at a named barrier per tile, and a block issued
 * twice the bulk copies after the top-k, each ~150 ns of its copy engine: bench/results/
 * 2026-11-30-h200-s7.) The shared expert's tiles come first (their weights are known before the
 * wait), then the routed slots'. The ffn-norm prologue reads x (two kernels back) before the wait;
 * after it warp 0 computes the top-k from the router logits (the kernel just before).
 * grid <= tiles, block LN_THREADS, dynamic smem nst * stage + qact_smem_bytes(H). Q4_K gate/up
 * (and shared gate/up), H % 256 == 0, H <= 2048. */
struct lmoe_args {
    moe_args m;
    int nst;
    int stage; /* bytes per ring stage: 2 * TH * H/256 * 144 */
    float *wraw; /* NULL, or the router is folded into the kernel before (k_lgdn): m.logits are raw
                  * (W_r diag(g) x, without RMSNorm's 1/rms) and x is that kernel's output, so the
                  * prologue comes after the wait; block 0 writes the routing weights (k, then the
                  * shared expert's gate) here for k_lmoe_down */
    unsigned long long *tr;
    /* NULL, or the gate/up weights tile-packed (LILAC_CUDA_MOE_PACK & 1, lean_pack): tile t (rows
     * t*TH .. t*TH + TH of the routed [E*FF] rows, resp. of the shared expert's FS) is `stage`
     * contiguous bytes at gup + t * stage laid out as a ring stage (gate qs | gate scales | up qs |
     * up scales), so a stage is ONE bulk copy instead of four (each ~150-290 ns of issue on the
     * routed tiles' critical path after the top-k) */
    const unsigned char *gup, *sgup;
};

/* RAW: L.wraw != NULL (the fold); PK: L.gup / L.sgup may be set (the pack). Each its own instance, so
 * that the default one is as before (session 29: the pack's branch in the default instance cost ~9
 * tok/s on an H100 with the pack off) */
template <bool RAW, bool PK = false>
#if LN_GU_REGS
__global__ void __maxnreg__(LN_GU_REGS) k_lmoe_gu(const __grid_constant__ lmoe_args L) {
#else
__global__ void __launch_bounds__(LN_THREADS, LN_MINB) k_lmoe_gu(const __grid_constant__ lmoe_args L) {
#endif
    extern __shared__ __align__(16) unsigned char sm[];
    __shared__ __align__(8) uint64_t bar[LN_MAX_ST];
    __shared__ float red[32];
    __shared__ int ids[QK_MAX_TOPK];
    __shared__ float wts[QK_MAX_TOPK];
    const moe_args &a = L.m;
    ln_trace(L.tr, 0);
    int tid = threadIdx.x, warp = tid >> 5, NST = L.nst;
    int C = a.H >> 6, TH = LN_THREADS / C, nb = a.H >> 8;
    int nsh = a.FS / TH, T = nsh + a.k * (a.FF / TH), G = gridDim.x;
    int mine = T > (int)blockIdx.x ? (T - 1 - (int)blockIdx.x) / G + 1 : 0;
    size_t mat = (size_t)TH * nb * 144; /* gate rows, then up rows */
    auto locate = [&](int i, const gmat **g, const gmat **u, long *r0, int *hrow) {
        int t = blockIdx.x + i * G;
        if (t < nsh) { *g = &a.sgate; *u = &a.sup; *r0 = (long)t * TH; *hrow = a.k * a.FF + t * TH; }
        else {
            t -= nsh;
            int sl = t / (a.FF / TH), r = (t % (a.FF / TH)) * TH;
            *g = &a.gate; *u = &a.up; *r0 = (long)ids[sl] * a.FF + r; *hrow = sl * a.FF + r;
        }
    };
    auto issue = [&](int i) {
        const gmat *g, *u; long r0; int hrow;
        locate(i, &g, &u, &r0, &hrow);
        unsigned char *dst = sm + (size_t)(i % NST) * L.stage;
        uint64_t *b = &bar[i % NST];
        mbar_expect_tx(b, (uint32_t)(2 * mat));
        const unsigned char *pk = PK ? (g == &a.sgate ? L.sgup : L.gup) : nullptr;
        if (PK && pk) {
            ln_g2s(dst, pk + (size_t)(r0 / TH) * (2 * mat), (uint32_t)(2 * mat), b);
            return;
        }
        ln_copy_rows(*g, r0, TH, TH, dst, b, false);
        ln_copy_rows(*u, r0, TH, TH, dst + mat, b, false);
    };
    int pre = 0; /* tiles requested before the wait: the shared expert's */
    /* the block that writes the routing weights for the down (fold): the last, which has the fewest
     * tiles (LN_GU_WB; block 0, which has the most, before session 17), and its shared-expert logit */
    int wb = RAW && LN_GU_WB ? (int)gridDim.x - 1 : 0;
    float lsh = 0.0f;
    if (tid == 0) {
        mbar_ring_init(bar, NST);
        while (pre < NST && pre < mine && (int)blockIdx.x + pre * G < nsh) issue(pre++);
    }
    gemv_args pa = {};
    pa.pro = PRO_RMSNORM; pa.x = a.x; pa.K = a.H; pa.g = a.g; pa.eps = a.eps;
    qact Q;
    ln_act A;
    int rr = tid / C, c = tid % C;
    auto issue_routed = [&](int from, int upto) { /* tid 0, once ids[] holds the top-k: stages from .. upto - 1 */
        for (int i = from; i < upto && i < NST && i < mine; i++) issue(i);
    };
    pre = 0; /* the stages before the first routed tile's */
    while (pre < NST && pre < mine && (int)blockIdx.x + pre * G < nsh) pre++;
    if (!RAW) {
        float rn = ln_prologue(pa, sm + (size_t)NST * L.stage, red, &Q); /* x is final: two kernels back */
        ln_act_q4k(Q, 0, c, A);
        ln_act_scale(A, rn);
        pdl_wait();
        if (!LN_GU_TRIG) pdl_trigger();
        ln_trace(L.tr, 1);
        if (warp == 0) {
            ln_topk(a.logits, a.E, a.k, ids, wts);
            ln_trace(L.tr, 44);
        }
        __syncthreads();
        ln_trace(L.tr, 3);
        if (tid == 0) issue_routed(pre, NST);
    } else {
        /* x and the raw logits are the previous kernel's: warp 0 takes the top-k and the routed
         * tiles' requests, the other warps the prologue meanwhile (its barrier publishes ids[]) */
        __syncthreads(); /* the ring's barriers initialised */
        pdl_wait();
        if (!LN_GU_TRIG) pdl_trigger();
        ln_trace(L.tr, 1);
        if (warp == 0) { /* the first routed stage only: the rest after the barrier (each copy costs
                          * ~150 ns of issue, which the other warps would wait out at the barrier) */
            if (LN_GU_WB && blockIdx.x == wb && tid == 0 && a.FS) lsh = a.logits[a.E]; /* with the top-k's loads */
            ln_topk<false, false>(a.logits, a.E, a.k, ids, wts);
            ln_trace(L.tr, 44);
            if (tid == 0) issue_routed(pre, pre + 1);
            ln_trace(L.tr, 45);
#ifdef LN_ICTEST /* diagnostic: the top-k twice more in a loop (same addresses), stamps 46 (a cold copy
                  * of its code) and 47 (warm); both passes' loads hit L1 */
#pragma unroll 1
            for (int rep = 0; rep < 2; rep++) {
                ln_topk<false, false>(a.logits, a.E, a.k, ids, wts);
                ln_trace(L.tr, 46 + rep);
            }
#endif
        }
        float rn = ln_prologue<false, 1>(pa, sm + (size_t)NST * L.stage, red, &Q);
        if (!LN_GU_WB && blockIdx.x == wb && tid == 0 && a.FS) lsh = a.logits[a.E];
        if (tid == 0) issue_routed(pre + 1, NST);
        ln_act_q4k(Q, 0, c, A);
        ln_act_scale(A, rn);
        ln_trace(L.tr, 3);
        if (blockIdx.x == wb && tid == 0) { /* the logits are W_r x̂ * rms: the weights need rn */
            ln_softmax_k(wts, a.k, rn);
            for (int t = 0; t < a.k; t++) L.wraw[t] = wts[t];
            if (a.FS) L.wraw[a.k] = sigmoid_f(lsh * rn);
        }
        if (blockIdx.x == wb && a.w_out) __syncthreads(); /* wts scaled by thread 0 */
    }
    if (blockIdx.x == wb && tid < a.k) {
        if (a.ids_out) a.ids_out[tid] = ids[tid];
        if (a.w_out) a.w_out[tid] = wts[tid];
    }
    for (int i = 0; i < mine; i++) {
        const gmat *g, *u; long r0; int hrow;
        locate(i, &g, &u, &r0, &hrow);
        mbar_wait(&bar[i % NST], (uint32_t)((i / NST) & 1));
        if (i == 0) ln_trace(L.tr, 4);
        if (i == mine - 1) ln_trace(L.tr, 6);
        if ((LN_GU_TRIG == 1 && i == 0) || (LN_GU_TRIG == 2 && i == mine - 1)) pdl_trigger();
        const unsigned char *base = sm + (size_t)(i % NST) * L.stage;
        float vg = ln_dot_tile(GT_Q4_K, base, TH, a.H, rr, c, A, NULL);
        float vu = ln_dot_tile(GT_Q4_K, base + mat, TH, a.H, rr, c, A, NULL);
        for (int o = (C < 32 ? C : 32) >> 1; o > 0; o >>= 1) {
            vg += __shfl_xor_sync(0xffffffffu, vg, o);
            vu += __shfl_xor_sync(0xffffffffu, vu, o);
        }
        if (c == 0) a.h[hrow + rr] = silu_f(vg) * vu;
        if (i + NST < mine) { /* the same in every thread */
            __syncthreads(); /* stage i % NST consumed */
            if (tid == 0) {
                asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                issue(i + NST);
            }
        }
    }
    ln_trace(L.tr, 2);
}

/* ---- MoE down + weighted combine + residual add. Tiles: R output rows x the nslot slots (the k
 * routed experts' down rows, then the shared expert's); thread (slot, row, chunk). The top-k (router
 * logits three kernels back) and the first tiles' requests come before the wait; after it the block
 * quantizes h (the kernel just before) into shared memory.
 * grid <= H / R, block LN_DOWN_THREADS, dynamic smem nst * stage + qact_smem_bytes(k*FF + FS).
 * Down matrices Q4_K or Q6_K (routed and shared the same), FF % 256 == 0, FS == FF or 0. */
struct lmoe_down_args {
    moe_args m;
    int R;      /* output rows a pass of the block's threads covers per slot */
    int pr;     /* passes per tile (1 or 2): a tile is pr * R rows of every slot and a thread dots rows
                 * rr, rr + R, ... (half the tiles, so half the bulk copies a block issues before its
                 * wait: ~150 ns of copy engine each, which had delayed the kernel's wait by ~2 µs) */
    int stage;  /* bytes per stage: nslot * pr * R * row bytes */
    int nst;
    const float *wraw; /* NULL, or the logits are raw (k_lmoe_gu's wraw): the routing weights are
                        * read from here after the wait */
    unsigned long long *tr;
    /* the next layer's input projection, fetched into L2 while this kernel and the next one's
     * prologue run (pf.n == 0: none); each block asks for its 1/G of every range */
    const unsigned char *pfp[8];
    unsigned long long pfb[8];
    int pfn, pfwhen;
    /* NULL, or the routed / shared down tile-packed (lean_pack): the TR rows r0 .. r0 + TR of a
     * matrix are `stage / nslot` contiguous bytes at (r0 / TR) * that, in a slot's layout: one bulk
     * copy per slot instead of one per plane */
    const unsigned char *dnp, *sdnp;
};

#ifdef LN_PFLSU
/* ln_prefetch_share's bytes, every thread of the block a line at a time (LN_PFLSU experiment) */
__device__ __forceinline__ void ln_prefetch_share_lsu(const unsigned char *const *p, const unsigned long long *bytes, int n, int b, int G) {
    for (int r = 0; r < n; r++) {
        unsigned long long chunk = ((bytes[r] + G - 1) / G + 15) & ~15ull, o = (unsigned long long)b * chunk;
        if (o >= bytes[r]) continue;
        unsigned long long len = bytes[r] - o < chunk ? bytes[r] - o : chunk;
        for (unsigned long long k = 128ull * threadIdx.x; k < len; k += 128ull * blockDim.x)
            asm volatile("prefetch.global.L2 [%0];" ::"l"(p[r] + o + k) : "memory");
    }
}
#endif
/* Block b of G asks the L2 for its share of ranges [p, p + bytes) (thread 0; 16-byte granules). */
__device__ __forceinline__ void ln_prefetch_share(const unsigned char *const *p, const unsigned long long *bytes, int n, int b, int G) {
    for (int r = 0; r < n; r++) {
        unsigned long long chunk = ((bytes[r] + G - 1) / G + 15) & ~15ull, o = (unsigned long long)b * chunk;
        if (o >= bytes[r]) continue;
        unsigned long long len = bytes[r] - o < chunk ? bytes[r] - o : chunk;
        for (unsigned long long k = 0; k < len; k += (1u << 20)) { /* <= 1 MB per request */
            unsigned long long m = len - k < (1u << 20) ? len - k : (1u << 20);
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p[r] + o + k), "r"((uint32_t)(m & ~15ull)) : "memory");
        }
    }
}

template <int WT, bool RAW, bool PK = false> /* RAW: L.wraw != NULL; PK: L.dnp / L.sdnp may be set (as k_lmoe_gu's) */
#if LN_DOWN_REGS
__global__ void __maxnreg__(LN_DOWN_REGS) k_lmoe_down(const __grid_constant__ lmoe_down_args L) {
#else
__global__ void __launch_bounds__(LN_DOWN_THREADS, LN_DOWN_MINB) k_lmoe_down(const __grid_constant__ lmoe_down_args L) {
#endif
    extern __shared__ __align__(16) unsigned char sm[];
    __shared__ __align__(8) uint64_t bar[LN_MAX_ST];
    __shared__ float red[32];
    __shared__ int ids[QK_MAX_TOPK];
    __shared__ float wts[QK_MAX_TOPK + 1];
    __shared__ float acc[2][2 * (LN_DOWN_THREADS / 8)];
    const moe_args &a = L.m;
    ln_trace(L.tr, 0);
    int tid = threadIdx.x, warp = tid >> 5, NST = L.nst, R = L.R, PR = L.pr, TR = PR * R;
    int nslot = a.k + (a.FS ? 1 : 0), C = a.FF >> 6;
    size_t mat = (size_t)TR * ln_row_bytes(WT, a.FF);
    int T = a.H / TR, G = gridDim.x;
    int mine = T > (int)blockIdx.x ? (T - 1 - (int)blockIdx.x) / G + 1 : 0;
    auto issue = [&](int i) {
        long r0 = (long)(blockIdx.x + i * G) * TR;
        unsigned char *dst = sm + (size_t)(i % NST) * L.stage;
        uint64_t *b = &bar[i % NST];
        mbar_expect_tx(b, (uint32_t)(nslot * mat));
        for (int s = 0; s < nslot; s++) {
            if (PK) {
                const unsigned char *pk = s < a.k ? L.dnp : L.sdnp;
                long row = s < a.k ? (long)ids[s] * a.H + r0 : r0;
                if (pk) {
                    ln_g2s(dst + s * mat, pk + (size_t)(row / TR) * mat, (uint32_t)mat, b);
                    continue;
                }
            }
            if (s < a.k) ln_copy_rows(a.down, (long)ids[s] * a.H + r0, TR, TR, dst + s * mat, b, false);
            else ln_copy_rows(a.sdown, r0, TR, TR, dst + s * mat, b, false);
        }
    };
    if (warp == 0) {
        ln_topk(a.logits, a.E, a.k, ids, wts); /* raw logits (L.wraw): the same choice, weights later */
        ln_trace(L.tr, 44);
        if (tid == 0) {
            wts[a.k] = a.FS ? sigmoid_f(a.logits[a.E]) : 0.0f;
            mbar_ring_init(bar, NST);
        }
        __syncwarp();
        if (tid == 0)
            for (int i = 0; i < NST && i < mine; i++) issue(i);
#ifndef LN_PFLSU
        if (tid == 0 && L.pfwhen == 2) ln_prefetch_share(L.pfp, L.pfb, L.pfn, blockIdx.x, G);
#endif
    }
#ifdef LN_PFLSU /* experiment (session 25): the prefetch as per-thread prefetch.global.L2 of 128-byte lines
                 * (the load path) instead of bulk prefetches through the copy engine, whose queue the
                 * down's 18-36 tile copies and gate/up's routed copies on the same SM share */
    if (L.pfwhen == 2) ln_prefetch_share_lsu(L.pfp, L.pfb, L.pfn, blockIdx.x, G);
#endif
    ln_trace(L.tr, 45);
    /* the residual of row tid of the first tile, before the wait: x is the mixer's output, two or
     * more kernels back, so the tail below is one store instead of an L2 round trip and a store
     * (the same sum, the same bits) */
    float xr0 = LN_DOWN_XPRE && tid < TR && mine > 0 ? a.out[(long)blockIdx.x * TR + tid] : 0.0f;
    __syncthreads();
    pdl_wait();
    pdl_trigger();
    ln_trace(L.tr, 1);
    if (tid == 0 && L.pfwhen == 1) ln_prefetch_share(L.pfp, L.pfb, L.pfn, blockIdx.x, G);
    int kf = a.k * a.FF + a.FS;
    int j = tid / C, c = tid % C, s = j / R, rr = j % R; /* slot-major: j = s * R + rr */
    bool on = s < nslot;
    /* raw logits: this slot's weight from gate/up (L2; loaded here, used after the prologue) */
    float ws = RAW && on ? __ldcg(L.wraw + s) : 0.0f;
    gemv_args pa = {};
    pa.pro = PRO_PLAIN; pa.x = a.h; pa.K = kf; pa.eps = a.eps;
    qact Q;
#ifdef LN_ICTEST /* diagnostic: the prologue twice (a loop: the same code), stamps 46 and 47 */
#pragma unroll 1
    for (int rep = 0; rep < 2; rep++) {
        ln_prologue(pa, sm + (size_t)NST * L.stage, red, &Q);
        ln_trace(L.tr, 46 + rep);
        __syncthreads();
    }
#else
    ln_prologue(pa, sm + (size_t)NST * L.stage, red, &Q); /* plain: factor 1 */
#endif
    ln_trace(L.tr, 3);
    ln_act A;
    if (on) { if (WT == GT_Q4_K) ln_act_q4k(Q, s * a.FF, c, A); else ln_act_q6k(Q, s * a.FF, c, A); }
    if (!RAW) ws = on ? wts[s] : 0.0f;
    for (int i = 0; i < mine; i++) {
        long r0 = (long)(blockIdx.x + i * G) * TR;
        mbar_wait(&bar[i % NST], (uint32_t)((i / NST) & 1));
        if (i == 0) ln_trace(L.tr, 4);
        if (i == mine - 1) ln_trace(L.tr, 6);
        const unsigned char *base = sm + (size_t)(i % NST) * L.stage;
        /* pass p: tile row rr + p R of slot s (independent chains when PR = 2) */
        float v = on ? ln_dot_tile(WT, base + s * mat, TR, a.FF, rr, c, A, NULL) : 0.0f;
        float v2 = on && PR > 1 ? ln_dot_tile(WT, base + s * mat, TR, a.FF, rr + R, c, A, NULL) : 0.0f;
        for (int o = (C < 32 ? C : 32) >> 1; o > 0; o >>= 1) {
            v += __shfl_xor_sync(0xffffffffu, v, o);
            if (PR > 1) v2 += __shfl_xor_sync(0xffffffffu, v2, o);
        }
        if (c == 0 && on) {
            acc[i & 1][j] = ws * v;
            if (PR > 1) acc[i & 1][nslot * R + j] = ws * v2;
        }
        __syncthreads();
        if (tid < TR) { /* row tid of the tile: pass tid / R, row tid % R of it */
            float t = 0.0f;
            int p0 = (tid / R) * nslot * R + tid % R;
            for (int k = 0; k < nslot; k++) t += acc[i & 1][p0 + k * R];
            if (LN_DOWN_XPRE && i == 0) a.out[r0 + tid] = xr0 + t;
            else a.out[r0 + tid] += t;
        }
        if (tid == 0 && i + NST < mine) {
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            issue(i + NST);
        }
    }
    ln_trace(L.tr, 2);
}

#endif
