/*
 * k_gdn_chunk.cuh — chunked Gated DeltaNet prefill (the WY / UT form, qwen35-moe-spec.md §5.6), in
 * two kernels so that only the state carry is serial:
 *
 *   k_gdn_chunk_prep<DK>: grid (n_chunks, HV), block 256. Everything that depends only on one
 *     chunk of C = 64 tokens of one v head, all chunks in parallel: L2 norms of q and k, beta =
 *     sigmoid(b), log-decay g = ssm_a * softplus(a + dt_bias), its in-chunk prefix sum gam,
 *       A = strictlower(beta_i (k_i . k_j) e^(gam_i - gam_j)),  P = lower_incl((q_i . k_j) e^(gam_i - gam_j)),
 *       [W | U] = (I + A)^-1 [beta e^gam K | beta V]          (forward substitution, one column per thread)
 *     and the row factors that turn the raw conv output into Q_dec = q^ e^gam (fq) and
 *     K_dec = k^ e^(gam_last - gam) (fk), and lambda = e^gam_last.
 *   k_gdn_chunk_scan<DK, BV>: grid (HV, DV / BV), block 256. The serial pass over the chunks for BV
 *     value columns of one head, the state slice S[DK][BV] in shared memory:
 *       Vn = U - W S;   O = Q_dec S + P Vn;   S = lambda S + K_dec^T Vn.
 *
 * All arithmetic is fp32 (the state semantics of the token-serial k_gdn_step are kept; the chunked
 * form is the same recurrence reassociated) except the prefix sums gam, which are fp64: in a strongly
 * decaying head gam reaches -64 |g| within a chunk, and e^(gam_i - gam_j) from fp32 prefix sums
 * carries an absolute exponent error of ~|gam| 2^-24 (1e-5 at gam = -200: a 1e-5 relative error in
 * a decay factor the token-serial scan gets to 1e-7; dev/kernels/gdn_chunk_emu.c measures it). The
 * differences are taken in fp64 and rounded once. Every exponent is <= 0 (gam is a running sum of
 * non-positive log-decays and only differences gam_i - gam_j with j <= i are exponentiated), so
 * nothing overflows; rows past the end of a partial last chunk are zero (beta = 0, g = 0), which
 * leaves the state and the real rows unchanged.
 *
 * Workspace (gdn_chunk_ws), written by prep and read by scan:
 *   W  [HV][T][DK], U [HV][T][DV]            fp32
 *   P  [HV][n_chunks][64][64]                fp32 (upper triangle zero)
 *   fq, fk [HV][T], lam [HV][n_chunks]       fp32
 */
#ifndef LILAC_K_GDN_CHUNK_CUH
#define LILAC_K_GDN_CHUNK_CUH

#include "cu_common.cuh"

#define GDN_CC 64 /* chunk length */

struct gdn_chunk_ws {
    float *W, *U, *P, *fq, *fk, *lam;
};

/* floats of workspace besides W and U (which the caller may place elsewhere) for T tokens */
static inline size_t gdn_chunk_ws_small_floats(int T, int HV) {
    size_t nch = (size_t)(T + GDN_CC - 1) / GDN_CC;
    return (size_t)HV * (nch * GDN_CC * GDN_CC + 2 * (size_t)T + nch);
}

struct gdn_chunk_args {
    const float *qkv;      /* [T][CD] after conv + SiLU (q | k | v channels) */
    const float *b, *a;    /* [T][ldab] beta logits, decay inputs (column h) */
    int ldab;
    const float *dt_bias;  /* [HV] */
    const float *ssm_a;    /* [HV] */
    float *S;              /* [HV][DK][DV] state, read and written by scan */
    float *o;              /* [T][HV*DV] */
    gdn_chunk_ws ws;
    int T, HK, HV, DV, tiled;
    float *So;             /* [HV][DK][DV] where scan writes the state (NULL: S, in place; the double-buffered
                            * state's other copy when T is odd, gdn_state_copy) */
};

template <int DK> static inline size_t gdn_prep_smem_bytes() {
    return (size_t)(2 * GDN_CC * (DK + 4) + GDN_CC * (GDN_CC + 4) + 4 * GDN_CC) * 4 + GDN_CC * sizeof(double);
}

/* MB: blocks per SM the register allocation must allow (2: 128 registers, a few spills of the
 * solve's column; 1: no spills, one block of 8 warps per SM) */
template <int DK, int MB = 2>
__global__ void __launch_bounds__(256, MB) k_gdn_chunk_prep(const gdn_chunk_args g) {
    constexpr int C = GDN_CC, LD = DK + 4, LA = C + 4;
    extern __shared__ float4 smem4[];
    float *qs = (float *)smem4;          /* [C][LD] q^ (normalised, scaled) */
    float *ks = qs + C * LD;             /* [C][LD] k^ */
    float *As = ks + C * LD;             /* [C][LA] strict-lower A */
    float *bet = As + C * LA;            /* [C] */
    float *gam = bet + C;                /* [C] g, then its prefix sums rounded to fp32 */
    float *rq = gam + C, *rk = rq + C;   /* [C] row norm factors */
    double *gamd = (double *)(rk + C);   /* [C] prefix sums of g in fp64 (8-byte aligned: every
                                          * block above is a multiple of 4 floats) */
    const int n = blockIdx.x, h = blockIdx.y, tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    const int t0 = n * C, c = min(C, g.T - t0), nch = gridDim.x;
    const int r = g.HV / g.HK, kh = g.tiled ? h % g.HK : h / r;
    const int QK = g.HK * DK, CD = 2 * QK + g.HV * g.DV;
    /* raw q, k rows of the chunk (zero past the end) */
    for (int i = tid; i < C * (DK / 4); i += blockDim.x) {
        int row = i / (DK / 4), c4 = i % (DK / 4);
        float4 q4 = make_float4(0.f, 0.f, 0.f, 0.f), k4 = q4;
        if (row < c) {
            const float *base = g.qkv + (long)(t0 + row) * CD;
            q4 = __ldg((const float4 *)(base + kh * DK) + c4);
            k4 = __ldg((const float4 *)(base + QK + kh * DK) + c4);
        }
        *(float4 *)(qs + row * LD + 4 * c4) = q4;
        *(float4 *)(ks + row * LD + 4 * c4) = k4;
    }
    if (tid < C) {
        float bb = 0.0f, gg = 0.0f;
        if (tid < c) {
            bb = sigmoid_f(__ldg(g.b + (long)(t0 + tid) * g.ldab + h));
            gg = __ldg(g.ssm_a + h) * softplus_f(__ldg(g.a + (long)(t0 + tid) * g.ldab + h) + __ldg(g.dt_bias + h));
        }
        bet[tid] = bb;
        gam[tid] = gg;
    }
    __syncthreads();
    /* L2 norms (8 warps x 8 rows), as k_gdn_step: q scaled by 1/sqrt(DK) */
    for (int row = w; row < C; row += 8) {
        float sq = 0.0f, sk = 0.0f;
        for (int i = lane; i < DK; i += 32) { float x = qs[row * LD + i], y = ks[row * LD + i]; sq += x * x; sk += y * y; }
        sq = warp_sum(sq);
        sk = warp_sum(sk);
        float fq = rsqrtf(sq + 1e-6f) * rsqrtf((float)DK), fk = rsqrtf(sk + 1e-6f);
        for (int i = lane; i < DK; i += 32) { qs[row * LD + i] *= fq; ks[row * LD + i] *= fk; }
        if (lane == 0) { rq[row] = fq; rk[row] = fk; }
    }
    /* prefix sum of g over the chunk in fp64 (warp 0: lanes hold rows lane and lane + 32) */
    if (w == 0) {
        double x0 = gam[lane], x1 = gam[lane + 32];
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            double y0 = __shfl_up_sync(0xffffffffu, x0, o), y1 = __shfl_up_sync(0xffffffffu, x1, o);
            if (lane >= o) { x0 += y0; x1 += y1; }
        }
        x1 += __shfl_sync(0xffffffffu, x0, 31);
        gamd[lane] = x0;
        gamd[lane + 32] = x1;
        gam[lane] = (float)x0;
        gam[lane + 32] = (float)x1;
    }
    __syncthreads();
    /* K K^T and Q K^T, 4 x 4 outputs per thread: rows i = ti + 16 a, columns j = tj + 16 b */
    {
        const int ti = tid >> 4, tj = tid & 15;
        float kk[4][4] = {}, qk[4][4] = {};
        for (int d = 0; d < DK; d += 4) {
            float4 kj[4], ki, qi;
#pragma unroll
            for (int bb = 0; bb < 4; bb++) kj[bb] = *(const float4 *)(ks + (tj + 16 * bb) * LD + d);
#pragma unroll
            for (int aa = 0; aa < 4; aa++) {
                ki = *(const float4 *)(ks + (ti + 16 * aa) * LD + d);
                qi = *(const float4 *)(qs + (ti + 16 * aa) * LD + d);
#pragma unroll
                for (int bb = 0; bb < 4; bb++) {
                    kk[aa][bb] += ki.x * kj[bb].x + ki.y * kj[bb].y + ki.z * kj[bb].z + ki.w * kj[bb].w;
                    qk[aa][bb] += qi.x * kj[bb].x + qi.y * kj[bb].y + qi.z * kj[bb].z + qi.w * kj[bb].w;
                }
            }
        }
        float *Pn = g.ws.P + ((long)h * nch + n) * C * C;
#pragma unroll
        for (int aa = 0; aa < 4; aa++)
#pragma unroll
            for (int bb = 0; bb < 4; bb++) {
                int i = ti + 16 * aa, j = tj + 16 * bb;
                float dec = j <= i ? expf((float)(gamd[i] - gamd[j])) : 0.0f;
                As[i * LA + j] = j < i ? bet[i] * kk[aa][bb] * dec : 0.0f;
                Pn[i * C + j] = qk[aa][bb] * dec;
            }
    }
    if (tid < C && tid < c) {
        long t = (long)h * g.T + t0 + tid;
        g.ws.fq[t] = rq[tid] * expf(gam[tid]);
        g.ws.fk[t] = rk[tid] * expf((float)(gamd[c - 1] - gamd[tid]));
    }
    if (tid == 0) g.ws.lam[(long)h * nch + n] = expf(gam[c - 1]);
    __syncthreads();
    /* forward substitution, one right-hand-side column per thread: columns [0, DK) are
     * beta e^gam k^ (-> W), columns [DK, DK + DV) are beta v (-> U) */
    for (int col = tid; col < DK + g.DV; col += blockDim.x) {
        float x[C];
        if (col < DK) {
#pragma unroll
            for (int i = 0; i < C; i++) x[i] = bet[i] * expf(gam[i]) * ks[i * LD + col];
        } else {
            const float *vp = g.qkv + (long)t0 * CD + 2 * QK + h * g.DV + (col - DK);
#pragma unroll
            for (int i = 0; i < C; i++) x[i] = i < c ? bet[i] * __ldg(vp + (long)i * CD) : 0.0f;
        }
#pragma unroll
        for (int i = 1; i < C; i++) {
            /* four partial sums: the chain of dependent FMAs per row is i / 4 long, not i */
            float a0 = x[i], a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
#pragma unroll
            for (int j = 0; j < (i & ~3); j += 4) {
                float4 a4 = *(const float4 *)(As + i * LA + j);
                a0 = fmaf(-a4.x, x[j], a0);
                a1 = fmaf(-a4.y, x[j + 1], a1);
                a2 = fmaf(-a4.z, x[j + 2], a2);
                a3 = fmaf(-a4.w, x[j + 3], a3);
            }
#pragma unroll
            for (int j = i & ~3; j < i; j++) a0 = fmaf(-As[i * LA + j], x[j], a0);
            x[i] = (a0 + a1) + (a2 + a3);
        }
        if (col < DK) {
            float *Wp = g.ws.W + ((long)h * g.T + t0) * DK + col;
#pragma unroll
            for (int i = 0; i < C; i++)
                if (i < c) Wp[(long)i * DK] = x[i];
        } else {
            float *Up = g.ws.U + ((long)h * g.T + t0) * g.DV + (col - DK);
#pragma unroll
            for (int i = 0; i < C; i++)
                if (i < c) Up[(long)i * g.DV] = x[i];
        }
    }
}

template <int DK, int BV> static inline size_t gdn_scan_smem_bytes() {
    return (size_t)(3 * GDN_CC * (DK + 4) + GDN_CC * (GDN_CC + 4) + 2 * GDN_CC * BV + DK * BV) * 4;
}

/* BV value columns per block, 8 warps: lane = column (BV = 32) */
template <int DK, int BV>
__global__ void __launch_bounds__(256, 1) k_gdn_chunk_scan(const gdn_chunk_args g) {
    static_assert(BV == 32, "one value column per lane");
    static_assert(GDN_CC * (DK / 4) % 256 == 0, "whole float4 rounds per thread");
    constexpr int C = GDN_CC, LD = DK + 4, LP = C + 4, KR = DK / 8;
    extern __shared__ float4 smem4[];
    float *Qs = (float *)smem4;     /* [C][LD] Q_dec */
    float *Ks = Qs + C * LD;        /* [C][LD] K_dec */
    float *Ws = Ks + C * LD;        /* [C][LD] W */
    float *Ps = Ws + C * LD;        /* [C][LP] P */
    float *Us = Ps + C * LP;        /* [C][BV] U, then Vn */
    float *Os = Us + C * BV;        /* [C][BV] output staging */
    float *Ss = Os + C * BV;        /* [DK][BV] state slice */
    const int h = blockIdx.x, j0 = blockIdx.y * BV, tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    const int r = g.HV / g.HK, kh = g.tiled ? h % g.HK : h / r;
    const int QK = g.HK * DK, CD = 2 * QK + g.HV * g.DV, VD = g.HV * g.DV, nch = (g.T + C - 1) / C;
    float *Sg = g.S + (long)h * DK * g.DV + j0;
    for (int i = tid; i < DK * BV; i += blockDim.x) Ss[i] = Sg[(long)(i / BV) * g.DV + i % BV];
    /* The global inputs of chunk n + 1 are loaded into registers while chunk n is computed (the
     * loop is latency-bound otherwise: one block per SM, every chunk's 120 KB behind a barrier). */
    constexpr int NQ = C * (DK / 4) / 256, NP = C * (C / 4) / 256, NU = C * BV / 256;
    float4 rq[NQ], rk[NQ], rw[NQ], rp[NP];
    float ru[NU];
    auto fetch = [&](int n) {
        const int t0 = n * C, c = min(C, g.T - t0);
        const float *Pn = g.ws.P + ((long)h * nch + n) * C * C;
#pragma unroll
        for (int u = 0; u < NQ; u++) {
            int i = tid + 256 * u, row = i / (DK / 4), c4 = i % (DK / 4);
            float4 q4 = make_float4(0.f, 0.f, 0.f, 0.f), k4 = q4, w4 = q4;
            if (row < c) {
                long t = t0 + row;
                const float *base = g.qkv + t * CD;
                float fq = __ldg(g.ws.fq + (long)h * g.T + t), fk = __ldg(g.ws.fk + (long)h * g.T + t);
                q4 = __ldg((const float4 *)(base + kh * DK) + c4);
                k4 = __ldg((const float4 *)(base + QK + kh * DK) + c4);
                w4 = __ldg((const float4 *)(g.ws.W + ((long)h * g.T + t) * DK) + c4);
                q4.x *= fq; q4.y *= fq; q4.z *= fq; q4.w *= fq;
                k4.x *= fk; k4.y *= fk; k4.z *= fk; k4.w *= fk;
            }
            rq[u] = q4; rk[u] = k4; rw[u] = w4;
        }
#pragma unroll
        for (int u = 0; u < NP; u++) {
            int i = tid + 256 * u, row = i / (C / 4), c4 = i % (C / 4);
            rp[u] = __ldg((const float4 *)(Pn + row * C) + c4);
        }
#pragma unroll
        for (int u = 0; u < NU; u++) {
            int i = tid + 256 * u, row = i / BV, col = i % BV;
            ru[u] = row < c ? __ldg(g.ws.U + ((long)h * g.T + t0 + row) * g.DV + j0 + col) : 0.0f;
        }
    };
    auto stash = [&]() {
#pragma unroll
        for (int u = 0; u < NQ; u++) {
            int i = tid + 256 * u, row = i / (DK / 4), c4 = i % (DK / 4);
            *(float4 *)(Qs + row * LD + 4 * c4) = rq[u];
            *(float4 *)(Ks + row * LD + 4 * c4) = rk[u];
            *(float4 *)(Ws + row * LD + 4 * c4) = rw[u];
        }
#pragma unroll
        for (int u = 0; u < NP; u++) {
            int i = tid + 256 * u, row = i / (C / 4), c4 = i % (C / 4);
            *(float4 *)(Ps + row * LP + 4 * c4) = rp[u];
        }
#pragma unroll
        for (int u = 0; u < NU; u++) Us[tid + 256 * u] = ru[u];
    };
    fetch(0);
    for (int n = 0; n < nch; n++) {
        const int t0 = n * C, c = min(C, g.T - t0);
        stash();
        __syncthreads();
        if (n + 1 < nch) fetch(n + 1);
        /* Vn = U - W S and the Q_dec S half of O in one pass over S (both need only S, and they
         * share its loads): warp w owns rows w + 8 m, lane the column */
        float acc[8];
        {
            float av[8];
#pragma unroll
            for (int m = 0; m < 8; m++) { av[m] = Us[(w + 8 * m) * BV + lane]; acc[m] = 0.0f; }
            for (int d = 0; d < DK; d += 4) {
                float s0 = Ss[d * BV + lane], s1 = Ss[(d + 1) * BV + lane], s2 = Ss[(d + 2) * BV + lane], s3 = Ss[(d + 3) * BV + lane];
#pragma unroll
                for (int m = 0; m < 8; m++) {
                    float4 w4 = *(const float4 *)(Ws + (w + 8 * m) * LD + d);
                    float4 q4 = *(const float4 *)(Qs + (w + 8 * m) * LD + d);
                    av[m] -= w4.x * s0 + w4.y * s1 + w4.z * s2 + w4.w * s3;
                    acc[m] += q4.x * s0 + q4.y * s1 + q4.z * s2 + q4.w * s3;
                }
            }
            __syncwarp();
#pragma unroll
            for (int m = 0; m < 8; m++) Us[(w + 8 * m) * BV + lane] = av[m]; /* rows owned by this warp only */
        }
        __syncthreads();
        /* O += P Vn (P's rows need every warp's Vn rows) */
        {
            for (int j = 0; j < C; j += 4) {
                float v0 = Us[j * BV + lane], v1 = Us[(j + 1) * BV + lane], v2 = Us[(j + 2) * BV + lane], v3 = Us[(j + 3) * BV + lane];
#pragma unroll
                for (int m = 0; m < 8; m++) {
                    float4 p4 = *(const float4 *)(Ps + (w + 8 * m) * LP + j);
                    acc[m] += p4.x * v0 + p4.y * v1 + p4.z * v2 + p4.w * v3;
                }
            }
#pragma unroll
            for (int m = 0; m < 8; m++) Os[(w + 8 * m) * BV + lane] = acc[m];
        }
        __syncthreads();
        /* S = lambda S + K_dec^T Vn: warp w owns state rows [w KR, (w + 1) KR), lane the column */
        {
            float lam = __ldg(g.ws.lam + (long)h * nch + n);
            float acc[KR];
#pragma unroll
            for (int m = 0; m < KR; m++) acc[m] = lam * Ss[(w * KR + m) * BV + lane];
            for (int j = 0; j < C; j++) {
                float v = Us[j * BV + lane];
#pragma unroll
                for (int m = 0; m < KR; m += 4) {
                    float4 k4 = *(const float4 *)(Ks + j * LD + w * KR + m);
                    acc[m] += k4.x * v; acc[m + 1] += k4.y * v; acc[m + 2] += k4.z * v; acc[m + 3] += k4.w * v;
                }
            }
#pragma unroll
            for (int m = 0; m < KR; m++) Ss[(w * KR + m) * BV + lane] = acc[m];
        }
        /* output rows (coalesced per row: 32 lanes = 32 columns) */
        for (int i = tid; i < c * BV; i += blockDim.x) {
            int row = i / BV, col = i % BV;
            g.o[(long)(t0 + row) * VD + h * g.DV + j0 + col] = Os[i];
        }
        __syncthreads();
    }
    float *Sw = (g.So ? g.So : g.S) + (long)h * DK * g.DV + j0; /* this block's columns only: in place is safe */
    for (int i = tid; i < DK * BV; i += blockDim.x) Sw[(long)(i / BV) * g.DV + i % BV] = Ss[i];
}

#endif
