/*
 * k_attn.cuh — gated full-attention kernels.
 *
 *   k_attn_prep: per token, q/k RMSNorm (+1 baked gains) and partial NeoX RoPE (pairs i, i+n_rot/2),
 *     q scaled by 1/sqrt(HD); K (after norm+RoPE) and V (raw) appended to the bf16 cache at
 *     position pos+t. grid (NH + 2*NKV, T), block HD.
 *   k_attn_decode: split-K decode with GQA packing: block (kv head, split of CH positions) loads the
 *     G = NH/NKV query heads that share the kv head, so each K/V row is read once. Partial results
 *     (o, running max m, sum l) per split; blocks past the current length exit at once, so the
 *     launch shape is fixed per sequence (graph-capturable). grid (NKV, max_splits), block 256.
 *   k_attn_combine: merges the splits and applies the output gate sigmoid(gate). grid NH, block 1024.
 *   k_flash_prefill: causal flash attention over the chunk with bf16 tensor cores (WMMA): block =
 *     (64 queries, head); S = Q K^T and O += P V on tensor cores, online softmax in fp32, O in shared
 *     memory. grid (ceil(T/64), NH), block 256.
 * KV cache layout: [NKV][n_ctx][HD] bf16, or (q8, LILAC_CUDA_KV=q8) [NKV][n_ctx] rows of
 * kv_row_bytes(HD, 1) bytes: HD int8 codes, then HD/32 fp16 scales (one per 32 consecutive values,
 * as GGUF's Q8_0), padded to 16 bytes: 272 bytes per row at HD = 256 instead of 512.
 */
#ifndef LILAC_K_ATTN_CUH
#define LILAC_K_ATTN_CUH

#include <mma.h>

#include "cu_common.cuh"

#define ATT_MAX_G 16

/* Bytes of one cached K or V row of HD values (q8: codes, scales, padding to 16 bytes). */
__host__ __device__ static inline int kv_row_bytes(int HD, int q8) { return q8 ? HD + ((HD / 16 + 15) & ~15) : 2 * HD; }

/* The q8 code of x (lane of a group of `span` lanes, span a power of two <= 32, holding n values
 * each, the group covering one 32-value block): the block's scale amax / 127 rounded to fp16 first,
 * so that the codes are exact for the scale a reader sees. Returns the codes in c[], the scale. */
template <int N>
__device__ __forceinline__ __half kv_q8_quant(const float x[N], int span, signed char c[N]) {
    float am = 0.0f;
#pragma unroll
    for (int i = 0; i < N; i++) am = fmaxf(am, fabsf(x[i]));
    for (int o = 1; o < span; o <<= 1) am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, o));
    __half d = __float2half(am / 127.0f);
    float df = __half2float(d), inv = df > 0.0f ? 1.0f / df : 0.0f;
#pragma unroll
    for (int i = 0; i < N; i++) c[i] = (signed char)max(-127, min(127, __float2int_rn(x[i] * inv)));
    return d;
}

/* A lane's DPL values of a cached q8 row (k_attn.cuh), as loaded: the codes and the block's scale.
 * They stay packed in registers (6 per row at DPL = 8, against 8 floats), so a warp iteration can
 * keep twice the rows in flight for the same registers (attn_fd_block). */
template <int DPL> struct kvq_raw {
    uint32_t w[(DPL + 3) / 4];
    float d;
};
/* The values: a code c (signed byte) is placed in the low byte of the float 2^23 (0x4B000000) as
 * c + 128, and 2^23 + 128 subtracted: exact, two full-rate instructions instead of a quarter-rate
 * integer-to-float conversion (1.3 G per step at 128K context). */
template <int DPL> __device__ __forceinline__ void kvq_expand(const kvq_raw<DPL> &r, float *out) {
#pragma unroll
    for (int i = 0; i < DPL; i++) {
        uint32_t b = __byte_perm(r.w[i >> 2] ^ 0x80808080u, 0x4B000000u, 0x7650u | (uint32_t)(i & 3));
        out[i] = (__uint_as_float(b) - 8388736.0f) * r.d;
    }
}

/* Block-wide sum (red: 32 floats); every thread gets the total. */
__device__ __forceinline__ float block_sum_f(float v, float *red) {
    v = warp_sum(v);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    float t = 0.0f;
    for (int i = 0; i < (int)(blockDim.x >> 5); i++) t += red[i];
    return t;
}

struct attn_prep_args {
    const float *qg; int ldqg;    /* [T][NH*2*HD] per head: q (HD) then gate (HD) */
    const float *k; int ldk;      /* [T][NKV*HD] */
    const float *v; int ldv;      /* [T][NKV*HD] */
    const float *q_norm, *k_norm; /* [HD] */
    const float *inv_freq;        /* [n_rot/2] */
    float *q_out;                 /* [T][NH*HD] fp32 (or NULL) */
    __nv_bfloat16 *qb_out;        /* [T][NH*HD] bf16 (or NULL) */
    __nv_bfloat16 *kc, *vc;       /* [NKV][n_ctx][HD] (q8: rows of kv_row_bytes(HD, 1) bytes) */
    const int *pos;
    int NH, NKV, HD, n_rot, n_ctx;
    float eps;
    int q8;                       /* the cache holds q8 rows */
};

/* Thread d of a K or V row (HD threads, one value each) stores x at row p of kv head kvh: bf16, or
 * q8 (a warp per 32-value block: every thread of the row's warps takes part). */
__device__ __forceinline__ void attn_store_kv(__nv_bfloat16 *cache, bool q8, int kvh, int n_ctx, int p, int HD, int d, float x) {
    if (!q8) {
        cache[((long)kvh * n_ctx + p) * HD + d] = __float2bfloat16(x);
        return;
    }
    unsigned char *row = (unsigned char *)cache + ((long)kvh * n_ctx + p) * kv_row_bytes(HD, 1);
    signed char c[1];
    float xv[1] = {x};
    __half sc = kv_q8_quant<1>(xv, 32, c);
    row[d] = (unsigned char)c[0];
    if ((d & 31) == 0) ((__half *)(row + HD))[d >> 5] = sc;
}

/* One block of k_attn_prep: head slot hb (q heads, then k heads, then v heads), token t. Threads
 * d >= HD (a wider block, the persistent decode kernel) only take part in the barriers. */
__device__ __forceinline__ void attn_prep_block(const attn_prep_args &a, int hb, int t) {
    __shared__ float xs[256];
    __shared__ float red[32];
    int d = threadIdx.x, HD = a.HD;
    bool on = d < HD;
    int p = *a.pos + t;
    int kind = hb < a.NH ? 0 : (hb < a.NH + a.NKV ? 1 : 2);
    if (kind == 2) {
        int kvh = hb - a.NH - a.NKV;
        if (on) attn_store_kv(a.vc, a.q8, kvh, a.n_ctx, p, HD, d, a.v[(long)t * a.ldv + kvh * HD + d]);
        return;
    }
    float x = !on ? 0.0f : kind == 0 ? a.qg[(long)t * a.ldqg + hb * 2 * HD + d] : a.k[(long)t * a.ldk + (hb - a.NH) * HD + d];
    float ss = warp_sum(x * x);
    if (on && (d & 31) == 0) red[d >> 5] = ss;
    __syncthreads();
    float tot = 0.0f;
    for (int i = 0; i < HD / 32; i++) tot += red[i];
    if (on) {
        x = x * rsqrtf(tot / (float)HD + a.eps) * (kind == 0 ? a.q_norm[d] : a.k_norm[d]);
        xs[d] = x;
    }
    __syncthreads();
    if (!on) return;
    int half = a.n_rot / 2;
    if (d < a.n_rot) {
        int i = d < half ? d : d - half;
        float sn, cs;
        sincosf((float)p * a.inv_freq[i], &sn, &cs);
        x = d < half ? xs[d] * cs - xs[d + half] * sn : xs[d] * cs + xs[d - half] * sn;
    }
    if (kind == 0) {
        x *= rsqrtf((float)HD);
        if (a.q_out) a.q_out[(long)t * a.NH * HD + hb * HD + d] = x;
        if (a.qb_out) a.qb_out[(long)t * a.NH * HD + hb * HD + d] = __float2bfloat16(x);
    } else {
        attn_store_kv(a.kc, a.q8, hb - a.NH, a.n_ctx, p, HD, d, x);
    }
}

__global__ void k_attn_prep(const attn_prep_args a) {
    pdl_trigger();
    pdl_wait(); /* decode launches it with PDL (a no-op otherwise) */
    attn_prep_block(a, blockIdx.x, blockIdx.y);
}

struct attn_dec_args {
    const float *q;               /* [NH*HD] (scaled) */
    const __nv_bfloat16 *kc, *vc; /* [NKV][n_ctx][HD] */
    float *part_o;                /* [max_splits][NH][HD] */
    float *part_ml;               /* [max_splits][NH][2] */
    const float *qg;              /* [NH*2*HD] (gate part used by combine) */
    float *out;                   /* [NH*HD] gated attention output */
    const int *pos;               /* the current token's position (keys 0..pos) */
    int NH, NKV, HD, n_ctx, CH;   /* CH: positions per split of k_attn_decode; 0: fixed splits (k_attn_dec.cuh) */
    int nsplit;                   /* CH == 0: number of splits (launched) */
    int minpos;                   /* CH == 0, > 1: splits used = min(nsplit, ceil(n / minpos)), so that short
                                   * contexts are not cut into a few positions per block (the combine
                                   * then reads fewer partials); the other blocks exit at once */
    /* fused (k_attn_decode_fd<DPL, false>): the flash-decoding blocks do k_attn_prep's work themselves: each
     * normalises and rotates its G query heads from qg, and the block of the last split of each kv
     * head appends the current K (normed, rotated) and V rows to the cache before reading it */
    int fused;
    const float *kraw, *vraw;     /* [NKV*HD] raw k and v of the current token */
    const float *q_norm, *k_norm; /* [HD] */
    const float *inv_freq;        /* [n_rot/2] */
    int n_rot;
    float eps;
    unsigned long long *tr;       /* optional trace record of this launch (LILAC_LN_TRACE builds) */
    /* the MoE router folded into the out-projection (k_attn_combine, before its wait): flraw =
     * W_r diag(fg) x_old, the x_old term of the raw logits; the out-projection adds B att to it
     * (lean.h lean_fold). flraw NULL: off. fwr [fE][fH] and fws [1][fH] (or NULL) BF16. */
    const __nv_bfloat16 *fwr, *fws;
    const float *fg, *fx;
    float *flraw;
    int fE, fH;
    int q8; /* the cache holds q8 rows (k_attn_decode_fd<..., true> reads them; the fused prep writes them) */
    const float *rope_cs; /* fused: NULL, or [n_rot/2][2] cos / sin at position *pos (k_embed, this step) */
    /* fused, 1: one more block per kv head (grid.y = nsplit + 1) takes only position pos: it appends the
     * K / V rows and writes its one-position partial after the used splits' (index attn_fd_used()),
     * while the nsplit splits share positions 0 .. pos - 1, so no block both appends and loops over
     * a share of the context (the default; LILAC_CUDA_FD_XS=0 off; the combine reads one partial
     * more). The appending block's prep is the longest (session 15's trace: 2.3 µs more); it had
     * also looped over a split: +5 tok/s at 4K (session 17) */
    int xs;
};

/* dynamic smem: attn_decode_smem(G, HD, CH) bytes. The block's K and V rows are first copied to
 * shared memory with 16-byte loads (all in flight at once), then scores and P·V read shared memory. */
__host__ __device__ static inline size_t attn_decode_smem(int G, int HD, int CH) {
    return (size_t)G * HD * 4 + (size_t)G * CH * 4 + (size_t)2 * CH * HD * 2;
}

__global__ void __launch_bounds__(256) k_attn_decode(const attn_dec_args a) {
    extern __shared__ __align__(16) float smf[];
    int G = a.NH / a.NKV, HD = a.HD, CH = a.CH;
    float *qsm = smf;                                       /* [G][HD] */
    float *sc = smf + G * HD;                               /* [G][CH] */
    __nv_bfloat16 *Ks = (__nv_bfloat16 *)(sc + G * CH);     /* [CH][HD] */
    __nv_bfloat16 *Vs = Ks + CH * HD;                       /* [CH][HD] */
    __shared__ float mrow[ATT_MAX_G], lrow[ATT_MAX_G];
    int kvh = blockIdx.x, split = blockIdx.y;
    pdl_trigger();
    int n = *a.pos + 1, start = split * CH;
    if (start >= n) return;
    int cnt = min(CH, n - start);
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const __nv_bfloat16 *K = a.kc + ((long)kvh * a.n_ctx + start) * HD;
    const __nv_bfloat16 *V = a.vc + ((long)kvh * a.n_ctx + start) * HD;
    int nvec = cnt * HD / 8;
    for (int i = threadIdx.x; i < nvec; i += blockDim.x) {
        ((uint4 *)Ks)[i] = __ldg((const uint4 *)K + i);
        ((uint4 *)Vs)[i] = __ldg((const uint4 *)V + i);
    }
    for (int i = threadIdx.x; i < G * HD; i += blockDim.x) qsm[i] = a.q[(long)kvh * G * HD + i];
    __syncthreads();
    for (int pi = w; pi < cnt; pi += 8) {
        float acc[ATT_MAX_G];
#pragma unroll
        for (int g = 0; g < ATT_MAX_G; g++) acc[g] = 0.0f;
        for (int d0 = lane * 8; d0 < HD; d0 += 256) {
            uint4 kv = *(const uint4 *)(Ks + pi * HD + d0);
            uint32_t kw[4] = {kv.x, kv.y, kv.z, kv.w};
            float kf[8];
#pragma unroll
            for (int i = 0; i < 4; i++) { kf[2 * i] = __uint_as_float(kw[i] << 16); kf[2 * i + 1] = __uint_as_float(kw[i] & 0xffff0000u); }
#pragma unroll
            for (int g = 0; g < ATT_MAX_G; g++) {
                if (g < G) {
                    const float4 *qp = (const float4 *)(qsm + g * HD + d0);
                    float4 q0 = qp[0], q1 = qp[1];
                    acc[g] += q0.x * kf[0] + q0.y * kf[1] + q0.z * kf[2] + q0.w * kf[3] + q1.x * kf[4] + q1.y * kf[5] +
                              q1.z * kf[6] + q1.w * kf[7];
                }
            }
        }
#pragma unroll
        for (int g = 0; g < ATT_MAX_G; g++) {
            if (g < G) {
                float v = warp_sum(acc[g]);
                if (lane == 0) sc[g * CH + pi] = v;
            }
        }
    }
    __syncthreads();
    for (int g = w; g < G; g += 8) {
        float m = -INFINITY;
        for (int i = lane; i < cnt; i += 32) m = fmaxf(m, sc[g * CH + i]);
        m = warp_max(m);
        float l = 0.0f;
        for (int i = lane; i < cnt; i += 32) { float e = __expf(sc[g * CH + i] - m); sc[g * CH + i] = e; l += e; }
        l = warp_sum(l);
        if (lane == 0) { mrow[g] = m; lrow[g] = l; }
    }
    __syncthreads();
    for (int d = threadIdx.x; d < HD; d += blockDim.x) {
        float acc[ATT_MAX_G];
#pragma unroll
        for (int g = 0; g < ATT_MAX_G; g++) acc[g] = 0.0f;
        for (int pi = 0; pi < cnt; pi++) {
            float v = __bfloat162float(Vs[pi * HD + d]);
#pragma unroll
            for (int g = 0; g < ATT_MAX_G; g++)
                if (g < G) acc[g] = fmaf(sc[g * CH + pi], v, acc[g]);
        }
#pragma unroll
        for (int g = 0; g < ATT_MAX_G; g++)
            if (g < G) a.part_o[((long)split * a.NH + kvh * G + g) * HD + d] = acc[g];
    }
    if (threadIdx.x < G) {
        a.part_ml[((long)split * a.NH + kvh * G + threadIdx.x) * 2 + 0] = mrow[threadIdx.x];
        a.part_ml[((long)split * a.NH + kvh * G + threadIdx.x) * 2 + 1] = lrow[threadIdx.x];
    }
}

/* grid NH, block 1024 = HD dims x (1024 / HD) split groups; the per-split weights exp(m_s - M)
 * are computed once into shared memory, and each thread sums its group's splits (loads in flight
 * in parallel instead of one latency per split). */
#define ATT_COMB_THREADS 1024
#define ATT_COMB_MAXS 4096
/* Dims [d0, d0 + nd) of head h (blockDim.x = nd x groups <= ATT_COMB_THREADS; group g sums splits
 * g, g + groups, ..). A group merges its splits against its own maximum (the first CB with every
 * load in one round trip to L2, the rest online), then group 0 merges the groups' sums: one block
 * barrier after the loads. (Session 23; before: the block's maximum and the denominator by block
 * reductions first, 3 dependent L2 passes and 5 barriers, ~3.1 µs of the combine at 4K.) Scratch
 * in shared memory: part [blockDim.x + 2 * groups] (the caller's, so that the persistent decode
 * kernel can lend idle dynamic memory). Callers looping over several (h, d0) must __syncthreads
 * between calls. */
__device__ __forceinline__ void attn_combine_part(const attn_dec_args &a, int h, int d0, int nd, float *part, bool pdl = false) {
    int HD = a.HD, tid = threadIdx.x;
    int groups = blockDim.x / nd, d = d0 + tid % nd, g = tid / nd;
    /* PDL (k_attn_combine): the output gate before the wait (the q/gate projection is two kernels
     * back: the flash-decoding kernel triggers after its own wait) */
    float gate = 0.0f;
    if (pdl) {
        if (g == 0 && d < HD) gate = sigmoid_f(a.qg[h * 2 * HD + HD + d]);
        pdl_wait();
        ln_trace(a.tr, 1);
        ln_trace(a.tr, 3); /* no prologue or tiles: the trace's columns stay readable */
        ln_trace(a.tr, 4);
    }
    int n = *a.pos + 1, ns = a.CH ? (n + a.CH - 1) / a.CH : attn_fd_used(a.nsplit, a.minpos, n) + a.xs;
    constexpr int CB = 8;
    float po[CB];
    float2 ml[CB];
    int dd = d < HD ? d : HD - 1; /* threads past the head's dims load a valid address, unused */
#pragma unroll
    for (int k = 0; k < CB; k++) {
        int s = g + k * groups;
        long i = (long)(s < ns ? s : 0) * a.NH + h;
        po[k] = a.part_o[i * HD + dd];
        ml[k] = *(const float2 *)(a.part_ml + 2 * i);
        if (s >= ns) ml[k].x = -INFINITY; /* an empty split's m is -inf too (its l 0) */
    }
    float M = -INFINITY;
#pragma unroll
    for (int k = 0; k < CB; k++) M = fmaxf(M, ml[k].x);
    float acc = 0.0f, den = 0.0f;
    if (M != -INFINITY)
#pragma unroll
        for (int k = 0; k < CB; k++) {
            float e = __expf(ml[k].x - M); /* 0 for empty and absent splits */
            acc = fmaf(e, po[k], acc);
            den = fmaf(e, ml[k].y, den);
        }
    for (int s = g + CB * groups; s < ns; s += groups) { /* more splits than CB per group: online */
        long i = (long)s * a.NH + h;
        float2 t = *(const float2 *)(a.part_ml + 2 * i);
        if (t.x == -INFINITY) continue;
        float o = a.part_o[i * HD + dd];
        if (t.x > M) {
            float r = M == -INFINITY ? 0.0f : __expf(M - t.x);
            acc *= r;
            den *= r;
            M = t.x;
        }
        float e = __expf(t.x - M);
        acc = fmaf(e, o, acc);
        den = fmaf(e, t.y, den);
    }
    float *gm = part + blockDim.x, *gd = gm + groups; /* [groups] maxima, denominators */
    part[tid] = acc;
    if (tid % nd == 0) { gm[g] = M; gd[g] = den; }
    __syncthreads();
    if (g == 0 && d < HD) {
        float Mt = -INFINITY;
        for (int k = 0; k < groups; k++) Mt = fmaxf(Mt, gm[k]);
        float o = 0.0f, dt = 0.0f;
        if (Mt != -INFINITY)
            for (int k = 0; k < groups; k++) {
                float e = gm[k] == -INFINITY ? 0.0f : __expf(gm[k] - Mt);
                o = fmaf(e, part[k * nd + tid], o);
                dt = fmaf(e, gd[k], dt);
            }
        a.out[h * HD + d] = (dt > 0.0f ? o / dt : 0.0f) * (pdl ? gate : sigmoid_f(a.qg[h * 2 * HD + HD + d]));
    }
}

/* The router fold's x_old term (attn_dec_args.flraw): block b of the grid takes logit rows
 * [b * rpb, b * rpb + rpb), fH / 8 threads a row (8 columns each; fH / 8 a multiple of 32 dividing
 * the block), warp sums then the row's warps in order. Before the wait: x_old is several kernels
 * back and the out-projection, which updates x in place, waits for this kernel. */
__device__ __forceinline__ void attn_fold_xold(const attn_dec_args &a, float *red) {
    int NL = a.fE + (a.fws ? 1 : 0), nb = gridDim.x * gridDim.y, b = blockIdx.x * gridDim.y + blockIdx.y;
    int rpb = (NL + nb - 1) / nb, tpr = a.fH >> 3, rpp = blockDim.x / tpr, tid = threadIdx.x;
    int col = 8 * (tid % tpr), wpr = tpr >> 5;
    float4 x0 = *(const float4 *)(a.fx + col), x1 = *(const float4 *)(a.fx + col + 4);
    float4 g0 = *(const float4 *)(a.fg + col), g1 = *(const float4 *)(a.fg + col + 4);
    float xg[8] = {x0.x * g0.x, x0.y * g0.y, x0.z * g0.z, x0.w * g0.w, x1.x * g1.x, x1.y * g1.y, x1.z * g1.z, x1.w * g1.w};
    for (int r0 = 0; r0 < rpb; r0 += rpp) {
        int rr = r0 + tid / tpr, row = b * rpb + rr;
        bool on = rr < rpb && row < NL;
        float t = 0.0f;
        if (on) {
            t = bf16x8_fma(*(const uint4 *)((row < a.fE ? a.fwr + (size_t)row * a.fH : a.fws) + col), xg, t);
        }
        t = warp_sum(t);
        if ((tid & 31) == 0) red[tid >> 5] = t;
        __syncthreads();
        if (on && tid % tpr == 0) {
            float s = 0.0f;
            for (int w = 0; w < wpr; w++) s += red[(tid >> 5) + w];
            a.flraw[row] = s;
        }
        __syncthreads();
    }
}

template <bool FOLD> /* a.flraw != NULL */
__global__ void __launch_bounds__(ATT_COMB_THREADS) k_attn_combine(const attn_dec_args a) {
    __shared__ float part[ATT_COMB_THREADS + 2 * ATT_COMB_THREADS / 32];
    ln_trace(a.tr, 0);
    pdl_trigger();
    if (FOLD) attn_fold_xold(a, part);
    int nd = a.HD / gridDim.y; /* grid (NH, HD / nd): a head's dims over several blocks, fewer partials each */
    attn_combine_part(a, blockIdx.x, blockIdx.y * nd, nd, part, true); /* waits inside */
    ln_trace(a.tr, 2);
}

/* ---- prefill flash attention (WMMA bf16) */

struct flash_args {
    const __nv_bfloat16 *q;       /* [T][NH*HD] scaled, normed, roped */
    const __nv_bfloat16 *kc, *vc; /* [NKV][n_ctx][HD] (already holds the chunk) */
    const float *qg; int ldqg;    /* [T][NH*2*HD] gates */
    __nv_bfloat16 *out;           /* [T][NH*HD] gated output */
    const int *pos;               /* position of token 0 */
    int T, NH, NKV, n_ctx;
    int q8;                       /* the cache holds q8 rows (k_flash2_prefill only) */
};

template <int HD>
__host__ __device__ constexpr size_t flash_smem_bytes() {
    return (size_t)3 * 64 * (HD + 8) * 2 + 64 * 68 * 4 + 64 * 72 * 2 + 64 * (HD + 4) * 4 + 3 * 64 * 4;
}

template <int HD>
__global__ void __launch_bounds__(256) k_flash_prefill(const flash_args a) {
    using namespace nvcuda;
    extern __shared__ __align__(128) unsigned char smraw[];
    constexpr int LD = HD + 8, LDS = 68, LDP = 72, LDO = HD + 4;
    __nv_bfloat16 *Qs = (__nv_bfloat16 *)smraw;
    __nv_bfloat16 *Ks = Qs + 64 * LD;
    __nv_bfloat16 *Vs = Ks + 64 * LD;
    float *S = (float *)(Vs + 64 * LD);
    __nv_bfloat16 *P = (__nv_bfloat16 *)(S + 64 * LDS);
    float *O = (float *)(P + 64 * LDP);
    float *mrow = O + 64 * LDO, *lrow = mrow + 64, *corr = lrow + 64;
    int qt = blockIdx.x, h = blockIdx.y, kvh = h / (a.NH / a.NKV);
    int tid = threadIdx.x, w = tid >> 5;
    int p0 = *a.pos, q0 = qt * 64, nq = min(64, a.T - q0);
    /* load Q, zero O */
    for (int i = tid; i < 64 * HD / 8; i += 256) {
        int r = i / (HD / 8), c8 = (i % (HD / 8)) * 8;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (r < nq) v = *(const uint4 *)(a.q + (long)(q0 + r) * a.NH * HD + h * HD + c8);
        *(uint4 *)(Qs + r * LD + c8) = v;
    }
    for (int i = tid; i < 64 * LDO; i += 256) O[i] = 0.0f;
    if (tid < 64) { mrow[tid] = -INFINITY; lrow[tid] = 0.0f; }
    __syncthreads();
    int nkeys = p0 + q0 + nq; /* keys [0, nkeys) are visible to some query of this tile */
    const __nv_bfloat16 *Kg = a.kc + (long)kvh * a.n_ctx * HD, *Vg = a.vc + (long)kvh * a.n_ctx * HD;
    for (int k0 = 0; k0 < nkeys; k0 += 64) {
        for (int i = tid; i < 64 * HD / 8; i += 256) {
            int r = i / (HD / 8), c8 = (i % (HD / 8)) * 8;
            uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
            if (k0 + r < nkeys) {
                kv = *(const uint4 *)(Kg + (long)(k0 + r) * HD + c8);
                vv = *(const uint4 *)(Vg + (long)(k0 + r) * HD + c8);
            }
            *(uint4 *)(Ks + r * LD + c8) = kv;
            *(uint4 *)(Vs + r * LD + c8) = vv;
        }
        __syncthreads();
        { /* S = Q K^T: warp w computes rows 16*(w>>1), cols 32*(w&1) .. +32 */
            int mi = w >> 1, nj = (w & 1) * 2;
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> c0, c1;
            wmma::fill_fragment(c0, 0.0f);
            wmma::fill_fragment(c1, 0.0f);
            for (int kk = 0; kk < HD; kk += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb0, fb1;
                wmma::load_matrix_sync(fa, Qs + mi * 16 * LD + kk, LD);
                wmma::load_matrix_sync(fb0, Ks + nj * 16 * LD + kk, LD);
                wmma::load_matrix_sync(fb1, Ks + (nj + 1) * 16 * LD + kk, LD);
                wmma::mma_sync(c0, fa, fb0, c0);
                wmma::mma_sync(c1, fa, fb1, c1);
            }
            wmma::store_matrix_sync(S + mi * 16 * LDS + nj * 16, c0, LDS, wmma::mem_row_major);
            wmma::store_matrix_sync(S + mi * 16 * LDS + (nj + 1) * 16, c1, LDS, wmma::mem_row_major);
        }
        __syncthreads();
        { /* online softmax: 4 threads per row, 16 columns each */
            int r = tid >> 2, part = tid & 3;
            int qpos = p0 + q0 + r;
            float mx = -INFINITY;
            for (int c = part * 16; c < part * 16 + 16; c++) {
                int kp = k0 + c;
                float v = (kp <= qpos && r < nq) ? S[r * LDS + c] : -INFINITY;
                S[r * LDS + c] = v;
                mx = fmaxf(mx, v);
            }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            float mold = mrow[r], mnew = fmaxf(mold, mx);
            float cf = mnew == -INFINITY ? 1.0f : __expf(mold - mnew);
            float sum = 0.0f;
            for (int c = part * 16; c < part * 16 + 16; c++) {
                float v = S[r * LDS + c];
                float e = v == -INFINITY ? 0.0f : __expf(v - mnew);
                sum += e;
                P[r * LDP + c] = __float2bfloat16(e);
            }
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            __syncwarp();
            if (part == 0) { mrow[r] = mnew; lrow[r] = lrow[r] * cf + sum; corr[r] = cf; }
        }
        __syncthreads();
        for (int i = tid; i < 64 * HD; i += 256) { int r = i / HD, c = i % HD; O[r * LDO + c] *= corr[r]; }
        __syncthreads();
        { /* O += P V: warp w owns rows 16*(w&3), cols (w>>2)*HD/2 .. +HD/2 */
            int mi = w & 3, n0 = (w >> 2) * (HD / 2);
            for (int nn = n0; nn < n0 + HD / 2; nn += 16) {
                wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
                wmma::load_matrix_sync(c, O + mi * 16 * LDO + nn, LDO, wmma::mem_row_major);
#pragma unroll
                for (int kk = 0; kk < 64; kk += 16) {
                    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
                    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
                    wmma::load_matrix_sync(fa, P + mi * 16 * LDP + kk, LDP);
                    wmma::load_matrix_sync(fb, Vs + kk * LD + nn, LD);
                    wmma::mma_sync(c, fa, fb, c);
                }
                wmma::store_matrix_sync(O + mi * 16 * LDO + nn, c, LDO, wmma::mem_row_major);
            }
        }
        __syncthreads();
    }
    for (int i = tid; i < nq * HD; i += 256) {
        int r = i / HD, c = i % HD;
        float gate = a.qg[(long)(q0 + r) * a.ldqg + h * 2 * HD + HD + c];
        float v = O[r * LDO + c] / lrow[r] * sigmoid_f(gate);
        a.out[(long)(q0 + r) * a.NH * HD + h * HD + c] = __float2bfloat16(v);
    }
}

#endif
