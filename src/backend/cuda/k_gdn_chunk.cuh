/*
 * k_gdn_chunk.cuh — chunked Gated DeltaNet prefill (the WY / UT form, qwen35-moe-spec.md §5.6), in
 * two kernels so that only the state carry is serial:
 *
 *   k_gdn_chunk_prep<DK, MB, TI>: grid (n_chunks, HV), block 256. Everything that depends only on one
 *     chunk of C = 64 tokens of one v head, all chunks in parallel: L2 norms of q and k, beta =
 *     sigmoid(b), log-decay g = ssm_a * softplus(a + dt_bias), its in-chunk prefix sum gam,
 *       A = strictlower(beta_i (k_i . k_j) e^(gam_i - gam_j)),  P = lower_incl((q_i . k_j) e^(gam_i - gam_j)),
 *       [W | U] = (I + A)^-1 [beta e^gam K | beta V]
 *     (TI where DV == DK: T = (I + A)^-1 built once, then T R in register tiles, TI == 2, the default since
 *     session 39, with K K^T and Q K^T on tensor cores; else a
 *     forward substitution per column) and the row factors that turn the raw conv output into
 *     Q_dec = q^ e^gam (fq) and K_dec = k^ e^(gam_last - gam) (fk), and lambda = e^gam_last.
 *   k_gdn_chunk_scan<DK, BV>: grid (HV, DV / BV), block 256. The serial pass over the chunks for BV
 *     value columns of one head, the state slice S[DK][BV] in shared memory:
 *       Vn = U - W S;   O = Q_dec S + P Vn;   S = lambda S + K_dec^T Vn.
 *   k_gdn_chunk_scan_tc<DK, F> (the default since session 38): the same pass on tensor cores, in
 *     3xTF32 (below).
 *
 * All arithmetic is fp32 (the state semantics of the token-serial k_gdn_step are kept; the chunked
 * form is the same recurrence reassociated; the tensor-core scan's 3xTF32 products carry ~2^-22 of
 * each product, a few fp32 ulps) except the prefix sums gam, which are fp64: in a strongly
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

/* 3xTF32 fragments and products (the tensor-core scan below; the prep's TI == 2 Gram matrices) */
__device__ __forceinline__ void gtc_split(float x, uint32_t &hi, uint32_t &lo) {
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(hi) : "f"(x));
    float r = x - __uint_as_float(hi);
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(lo) : "f"(r));
}
__device__ __forceinline__ void gtc_mma(float d[4], const uint32_t a[4], const uint32_t b[2]) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
/* d += a b in 3xTF32: the small terms first */
__device__ __forceinline__ void gtc_mma3(float d[4], const uint32_t ah[4], const uint32_t al[4], const uint32_t bh[2],
                                         const uint32_t bl[2]) {
    gtc_mma(d, al, bh);
    gtc_mma(d, ah, bl);
    gtc_mma(d, ah, bh);
}
/* A fragment (16 x 8, row-major in shared memory at X, stride ld) at rows r0 .. r0 + 15, cols k0 .. k0 + 7 */
__device__ __forceinline__ void gtc_lda(const float *X, int ld, int r0, int k0, int g, int t, uint32_t ah[4], uint32_t al[4]) {
    gtc_split(X[(r0 + g) * ld + k0 + t], ah[0], al[0]);
    gtc_split(X[(r0 + g + 8) * ld + k0 + t], ah[1], al[1]);
    gtc_split(X[(r0 + g) * ld + k0 + t + 4], ah[2], al[2]);
    gtc_split(X[(r0 + g + 8) * ld + k0 + t + 4], ah[3], al[3]);
}
/* A fragment of X^T: element (m, k) is X[k][m] */
__device__ __forceinline__ void gtc_lda_t(const float *X, int ld, int m0, int k0, int g, int t, uint32_t ah[4], uint32_t al[4]) {
    gtc_split(X[(k0 + t) * ld + m0 + g], ah[0], al[0]);
    gtc_split(X[(k0 + t) * ld + m0 + g + 8], ah[1], al[1]);
    gtc_split(X[(k0 + t + 4) * ld + m0 + g], ah[2], al[2]);
    gtc_split(X[(k0 + t + 4) * ld + m0 + g + 8], ah[3], al[3]);
}
/* gtc_lda with row r0 + g scaled by s0 and row r0 + g + 8 by s1 (__fmul_rn: the product rounded once, as a
 * stored product would be, never contracted into the split's subtraction) */
__device__ __forceinline__ void gtc_lda_s(const float *X, int ld, int r0, int k0, int g, int t, float s0, float s1, uint32_t ah[4],
                                          uint32_t al[4]) {
    gtc_split(__fmul_rn(X[(r0 + g) * ld + k0 + t], s0), ah[0], al[0]);
    gtc_split(__fmul_rn(X[(r0 + g + 8) * ld + k0 + t], s1), ah[1], al[1]);
    gtc_split(__fmul_rn(X[(r0 + g) * ld + k0 + t + 4], s0), ah[2], al[2]);
    gtc_split(__fmul_rn(X[(r0 + g + 8) * ld + k0 + t + 4], s1), ah[3], al[3]);
}
/* gtc_lda_t with X's row k scaled by f[k] */
__device__ __forceinline__ void gtc_lda_ts(const float *X, int ld, int m0, int k0, int g, int t, const float *f, uint32_t ah[4],
                                           uint32_t al[4]) {
    float f0 = f[k0 + t], f1 = f[k0 + t + 4];
    gtc_split(__fmul_rn(X[(k0 + t) * ld + m0 + g], f0), ah[0], al[0]);
    gtc_split(__fmul_rn(X[(k0 + t) * ld + m0 + g + 8], f0), ah[1], al[1]);
    gtc_split(__fmul_rn(X[(k0 + t + 4) * ld + m0 + g], f1), ah[2], al[2]);
    gtc_split(__fmul_rn(X[(k0 + t + 4) * ld + m0 + g + 8], f1), ah[3], al[3]);
}
/* B fragment (8 x 8; element (k, n) is X[k][n], stride ld) at rows k0 .., cols n0 .. */
__device__ __forceinline__ void gtc_ldb(const float *X, int ld, int k0, int n0, int g, int t, uint32_t bh[2], uint32_t bl[2]) {
    gtc_split(X[(k0 + t) * ld + n0 + g], bh[0], bl[0]);
    gtc_split(X[(k0 + t + 4) * ld + n0 + g], bh[1], bl[1]);
}

template <int DK, int TI = 0> static inline size_t gdn_prep_smem_bytes() {
    return (size_t)(2 * GDN_CC * (DK + 4) + GDN_CC * (GDN_CC + 4) + 4 * GDN_CC) * 4 + GDN_CC * sizeof(double) +
           (TI ? (size_t)(GDN_CC * (GDN_CC + 4) + 3 * 16 * 17) * 4 : 0);
}

/* MB: blocks per SM the register allocation must allow (2: 128 registers, a few spills of the
 * solve's column; 1: no spills, one block of 8 warps per SM).
 * TI == 2 (the default since session 39): the T form with K K^T and Q K^T on tensor cores in 3xTF32.
 * TI (session 38): instead of a forward substitution per right-hand-side column (a 64-long
 * chain per thread; at 128 registers its column spills: ncu counted 2.1 M local requests per layer,
 * 35 % of the kernel by its estimate), T = (I + A)^-1 is built once per chunk in shared memory (the
 * four 16 x 16 diagonal blocks by substitution in warps 0-3, then the block rows below them as 16 x 16
 * products) and each thread forms its column as rows of T times that column, with no chain between rows. */
template <int DK, int MB = 2, int TI = 0>
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
    if constexpr (TI == 2) {
        /* K K^T and Q K^T on tensor cores in 3xTF32 (lab only so far): warp w the rows 16 (w & 3) .. + 16 and
         * the columns 32 (w >> 2) .. + 32 of both; B = K^T, so its fragments read k^'s rows (bank 4 g + t) */
        const int gq = lane >> 2, tq = lane & 3, m0 = 16 * (w & 3), n0 = 32 * (w >> 2);
        float kk[4][4] = {}, qk[4][4] = {}, ck[4][4] = {}, cq[4][4] = {};
#pragma unroll 2
        for (int k0 = 0; k0 < DK; k0 += 8) {
            uint32_t khi[4], klo[4], qhi[4], qlo[4];
            gtc_lda(ks, LD, m0, k0, gq, tq, khi, klo);
            gtc_lda(qs, LD, m0, k0, gq, tq, qhi, qlo);
#pragma unroll
            for (int s = 0; s < 4; s++) {
                uint32_t bh[2], bl[2];
                gtc_split(ks[(n0 + 8 * s + gq) * LD + k0 + tq], bh[0], bl[0]);
                gtc_split(ks[(n0 + 8 * s + gq) * LD + k0 + tq + 4], bh[1], bl[1]);
                gtc_mma(ck[s], klo, bh); gtc_mma(ck[s], khi, bl); gtc_mma(kk[s], khi, bh);
                gtc_mma(cq[s], qlo, bh); gtc_mma(cq[s], qhi, bl); gtc_mma(qk[s], qhi, bh);
            }
        }
        float *Pn = g.ws.P + ((long)h * nch + n) * C * C;
#pragma unroll
        for (int s = 0; s < 4; s++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int i = m0 + gq + 8 * (e >> 1), j = n0 + 8 * s + 2 * tq + (e & 1);
                float dec = j <= i ? expf((float)(gamd[i] - gamd[j])) : 0.0f;
                As[i * LA + j] = j < i ? bet[i] * (kk[s][e] + ck[s][e]) * dec : 0.0f;
                Pn[i * C + j] = (qk[s][e] + cq[s][e]) * dec;
            }
    } else
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
    if constexpr (TI != 0) {
        float *Ts = (float *)(gamd + C);  /* [C][LA] T = (I + A)^-1, lower triangular with a unit diagonal */
        float *Ms = Ts + C * LA;          /* [3][16][17] a block row's partial products */
        for (int i = tid; i < C * LA; i += blockDim.x) Ts[i] = 0.0f;
        __syncthreads();
        if (w < 4 && lane < 16) { /* diagonal block w, column lane: forward substitution on e_lane */
            const int b0 = 16 * w;
            float x[16];
#pragma unroll
            for (int i = 0; i < 16; i++) {
                float s = i == lane ? 1.0f : 0.0f;
#pragma unroll
                for (int k = 0; k < i; k++) s = fmaf(-As[(b0 + i) * LA + b0 + k], x[k], s);
                x[i] = s;
            }
#pragma unroll
            for (int i = 0; i < 16; i++) Ts[(b0 + i) * LA + b0 + lane] = x[i];
        }
        __syncthreads();
        /* block row I: T[I][J] = -T[I][I] sum_{K = J .. I-1} A[I][K] T[K][J] (thread: row r, column q of each block) */
        const int r = tid >> 4, q = tid & 15;
        for (int I = 1; I < 4; I++) {
            for (int J = 0; J < I; J++) {
                float s = 0.0f;
                for (int K = J; K < I; K++)
#pragma unroll
                    for (int k = 0; k < 16; k++) s = fmaf(As[(16 * I + r) * LA + 16 * K + k], Ts[(16 * K + k) * LA + 16 * J + q], s);
                Ms[(16 * J + r) * 17 + q] = s;
            }
            __syncthreads();
            for (int J = 0; J < I; J++) {
                float s = 0.0f;
#pragma unroll
                for (int k = 0; k < 16; k++) s = fmaf(Ts[(16 * I + r) * LA + 16 * I + k], Ms[(16 * J + k) * 17 + q], s);
                Ts[(16 * I + r) * LA + 16 * J + q] = -s;
            }
            __syncthreads();
        }
        /* R = [beta e^gam K | beta V] in place of k^ and q^ (both dead now; the TI form needs DV == DK) */
        for (int i = tid; i < C * DK; i += blockDim.x) {
            int row = i / DK, d = i % DK;
            ks[row * LD + d] *= bet[row] * expf(gam[row]);
            qs[row * LD + d] = row < c ? bet[row] * __ldg(g.qkv + (long)(t0 + row) * CD + 2 * QK + h * g.DV + d) : 0.0f;
        }
        __syncthreads();
        /* [W | U] = T R: warp w the rows 8 w .. 8 w + 7 (T's entries warp-uniform), lane the 8 columns 8 lane ..
         * (W's for 8 lane < DK, U's past it); T is lower triangular, so j stops at the tile's last row */
        constexpr int NCT = 2 * DK / 8;
        static_assert(NCT <= 32, "one column tile per lane");
        if (lane < NCT) {
            const int i0 = 8 * w, c0 = 8 * lane;
            const float *Rb = c0 < DK ? ks + c0 : qs + (c0 - DK);
            float acc[8][8] = {};
            for (int j = 0; j < i0 + 8; j++) {
                float4 r0 = *(const float4 *)(Rb + j * LD), r1 = *(const float4 *)(Rb + j * LD + 4);
#pragma unroll
                for (int ii = 0; ii < 8; ii++) {
                    float t = Ts[(i0 + ii) * LA + j];
                    acc[ii][0] = fmaf(t, r0.x, acc[ii][0]); acc[ii][1] = fmaf(t, r0.y, acc[ii][1]);
                    acc[ii][2] = fmaf(t, r0.z, acc[ii][2]); acc[ii][3] = fmaf(t, r0.w, acc[ii][3]);
                    acc[ii][4] = fmaf(t, r1.x, acc[ii][4]); acc[ii][5] = fmaf(t, r1.y, acc[ii][5]);
                    acc[ii][6] = fmaf(t, r1.z, acc[ii][6]); acc[ii][7] = fmaf(t, r1.w, acc[ii][7]);
                }
            }
            float *dst = c0 < DK ? g.ws.W + ((long)h * g.T + t0) * DK + c0 : g.ws.U + ((long)h * g.T + t0) * g.DV + (c0 - DK);
            const long ld = c0 < DK ? DK : g.DV;
#pragma unroll
            for (int ii = 0; ii < 8; ii++)
                if (i0 + ii < c) {
                    *(float4 *)(dst + (long)(i0 + ii) * ld) = make_float4(acc[ii][0], acc[ii][1], acc[ii][2], acc[ii][3]);
                    *(float4 *)(dst + (long)(i0 + ii) * ld + 4) = make_float4(acc[ii][4], acc[ii][5], acc[ii][6], acc[ii][7]);
                }
        }
    } else {
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
    } /* TI */
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

/* ---- the scan on tensor cores (the default since session 38; LILAC_CUDA_GDN_SCAN=fp32: the fp32 scan) ----
 *
 * The same three products per chunk as k_gdn_chunk_scan, as mma.sync m16n8k8 TF32 with fp32
 * accumulation, each operand split into a TF32 head and a TF32 tail (x = hi + lo, both rounded to
 * nearest) and a product taken as lo*hi + hi*lo + hi*hi ("3xTF32"): the dropped lo*lo term and the
 * tail's own rounding are ~2^-22 of the product, a few fp32 ulps, so the state keeps fp32-like
 * accuracy (a single TF32 product would carry 2^-11). Why: the fp32 scan spends ~5,000 instructions
 * per warp per chunk (20 shared loads per 64 FMA) with 8 warps per SM and runs at ~23 % of the
 * FP32 rate; here one warp instruction does 16 x 8 x 8 MACs.
 *
 * Per chunk (block: head h, value columns j0 .. j0 + 32; 8 warps; g = lane / 4, t = lane % 4):
 *   phase 1  [64 x 32] Vn = U - W S  and  Oq = Q_dec S       (K = DK)  warp: rows 16 (w & 3), cols 16 (w >> 2)
 *   phase 2  [64 x 32] O = Oq + P Vn                          (K = 64)  the same tile as phase 1
 *   phase 3  [DK x 32] S = lambda S + K_dec^T Vn              (K = 64)  warp: rows 16 (w % (DK / 16)), NT3 n8 tiles
 * Phases 2 and 3 read only Vn and write disjoint data, so one barrier separates them from phase 1.
 * Shared strides are chosen so that every fragment load is free of bank conflicts: row-major A
 * operands (W, Q, P) use stride = 4 mod 32 (bank 4 g + t); column reads (S, Vn as B, K_dec^T as A)
 * use stride = 8 mod 32 (bank 8 t + g). */
/* F: GTC_PS the state slice and Vn kept in shared memory already split (written once, read by
 * several warps: the split is not repeated per reader), the state itself in fp32 registers of the
 * warp that updates it (phase 3's tile stays the same every chunk); GTC_SA the two small terms in
 * an accumulator of their own (the chain of dependent mma per accumulator a third as long);
 * GTC_D1 / GTC_DF diagnostics for the lab only (wrong results): one TF32 product instead of three,
 * and the first chunk's inputs reused instead of each chunk's fetch. */
#define GTC_PS 1
#define GTC_SA 2
#define GTC_D1 4
#define GTC_DF 8
/* GTC_LS: the fetch stores q and k as loaded and the rows' factors fq / fk beside them; the fragments
 * apply them. Why: scaling in the fetch made every warp wait there for the loads (the multiply needs
 * them) before phase 1 could start, so the next chunk's load latency was paid on every chunk (the lab's
 * no-fetch diagnostic: 0.42 vs 0.70 ms). The same products, rounded once each: the same bits. */
#define GTC_LS 32

template <int DK, int F> static inline size_t gdn_scan_tc_smem_bytes() {
    size_t f = 2 * GDN_CC * (DK + 4) + GDN_CC * (DK + 8) + GDN_CC * (GDN_CC + 4) + GDN_CC * 40;
    f += (F & GTC_PS) ? 2 * (size_t)GDN_CC * 40 + 2 * (size_t)DK * 40 : (size_t)DK * 40;
    f += (F & GTC_LS) ? 2 * (size_t)GDN_CC : 0;
    return f * 4;
}

template <int DK, int F>
__global__ void __launch_bounds__(256, 1) k_gdn_chunk_scan_tc(const gdn_chunk_args g) {
    constexpr bool PS = F & GTC_PS, SA = F & GTC_SA, D1 = F & GTC_D1, DF = F & GTC_DF, LSC = F & GTC_LS;
    constexpr int C = GDN_CC, BV = 32, LQ = DK + 4, LK = DK + 8, LP = C + 4, LU = BV + 8, LS = BV + 8;
    constexpr int MT3 = DK / 16, NT3 = 4 * MT3 / 8; /* phase 3: m16 tiles, n8 tiles per warp */
    static_assert(GDN_CC * (DK / 4) % 256 == 0 && NT3 >= 1, "shapes");
    extern __shared__ float4 smem4[];
    float *Qs = (float *)smem4;     /* [C][LQ] Q_dec */
    float *Ws = Qs + C * LQ;        /* [C][LQ] W */
    float *Ks = Ws + C * LQ;        /* [C][LK] K_dec */
    float *Ps = Ks + C * LK;        /* [C][LP] P */
    float *Us = Ps + C * LP;        /* [C][LU] U (then Vn unless PS) */
    float *Ss = Us + C * LU;        /* [DK][LS] state slice (not PS) */
    uint32_t *Vh = (uint32_t *)Ss, *Vl = Vh + C * LU;   /* PS: [C][LU] Vn split */
    uint32_t *Sh = Vl + C * LU, *Sl = Sh + DK * LS;     /* PS: [DK][LS] state split */
    float *Fq = PS ? (float *)(Sl + DK * LS) : Ss + DK * LS, *Fk = Fq + C; /* LSC: [C] each, the rows' fq / fk */
    const int h = blockIdx.x, j0 = blockIdx.y * BV, tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    const int gq = lane >> 2, tq = lane & 3;
    const int r = g.HV / g.HK, kh = g.tiled ? h % g.HK : h / r;
    const int QK = g.HK * DK, CD = 2 * QK + g.HV * g.DV, VD = g.HV * g.DV, nch = (g.T + C - 1) / C;
    const int m1 = 16 * (w & 3), n1 = 16 * (w >> 2);            /* phases 1-2: this warp's 16 x 16 tile */
    const int m3 = 16 * (w % MT3), n3 = 8 * NT3 * (w / MT3);    /* phase 3: rows m3 .. + 16, cols n3 .. + 8 NT3 */
    /* element e of a D fragment of n8 tile s in a tile at (m, n): row m + g + 8 (e / 2), col n + 8 s + 2 t + e % 2 */
#define GTC_AT(ld, m, n, s, e) ((m) + gq + 8 * ((e) >> 1)) * (ld) + (n) + 8 * (s) + 2 * tq + ((e) & 1)
    const float *Sg = g.S + (long)h * DK * g.DV + j0;
    float as[NT3][4]; /* PS: this warp's part of the state, all chunks long */
    if constexpr (PS) {
#pragma unroll
        for (int s = 0; s < NT3; s++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                as[s][e] = Sg[(long)(m3 + gq + 8 * (e >> 1)) * g.DV + n3 + 8 * s + 2 * tq + (e & 1)];
                gtc_split(as[s][e], Sh[GTC_AT(LS, m3, n3, s, e)], Sl[GTC_AT(LS, m3, n3, s, e)]);
            }
    } else {
        for (int i = tid; i < DK * BV; i += blockDim.x) Ss[(i / BV) * LS + i % BV] = Sg[(long)(i / BV) * g.DV + i % BV];
    }
    /* the next chunk's inputs in registers while this one is computed, as k_gdn_chunk_scan */
    constexpr int NQ = C * (DK / 4) / 256, NP = C * (C / 4) / 256, NU = C * BV / 256;
    float4 rq[NQ], rk[NQ], rw[NQ], rp[NP];
    float ru[NU], rfq = 0.0f, rfk = 0.0f;
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
                if constexpr (!LSC) {
                    q4.x *= fq; q4.y *= fq; q4.z *= fq; q4.w *= fq;
                    k4.x *= fk; k4.y *= fk; k4.z *= fk; k4.w *= fk;
                }
            }
            rq[u] = q4; rk[u] = k4; rw[u] = w4;
        }
        if constexpr (LSC) {
            rfq = tid < c ? __ldg(g.ws.fq + (long)h * g.T + t0 + tid) : 0.0f;
            rfk = tid < c ? __ldg(g.ws.fk + (long)h * g.T + t0 + tid) : 0.0f;
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
        if constexpr (LSC) {
            if (tid < C) { Fq[tid] = rfq; Fk[tid] = rfk; }
        }
#pragma unroll
        for (int u = 0; u < NQ; u++) {
            int i = tid + 256 * u, row = i / (DK / 4), c4 = i % (DK / 4);
            *(float4 *)(Qs + row * LQ + 4 * c4) = rq[u];
            *(float4 *)(Ws + row * LQ + 4 * c4) = rw[u];
            *(float4 *)(Ks + row * LK + 4 * c4) = rk[u];
        }
#pragma unroll
        for (int u = 0; u < NP; u++) {
            int i = tid + 256 * u, row = i / (C / 4), c4 = i % (C / 4);
            *(float4 *)(Ps + row * LP + 4 * c4) = rp[u];
        }
#pragma unroll
        for (int u = 0; u < NU; u++) {
            int i = tid + 256 * u;
            Us[(i / BV) * LU + i % BV] = ru[u];
        }
    };
    /* d (+ c for the small terms under SA) += a b */
    auto mma3 = [&](float d[4], float c[4], const uint32_t ah[4], const uint32_t al[4], const uint32_t bh[2], const uint32_t bl[2]) {
        if constexpr (!D1) {
            gtc_mma(SA ? c : d, al, bh);
            gtc_mma(SA ? c : d, ah, bl);
        }
        gtc_mma(d, ah, bh);
    };
    /* B fragment of Vn (phases 2 and 3) */
    auto ldb_v = [&](int k0, int n0, uint32_t bh[2], uint32_t bl[2]) {
        if constexpr (PS) {
            bh[0] = Vh[(k0 + tq) * LU + n0 + gq]; bl[0] = Vl[(k0 + tq) * LU + n0 + gq];
            bh[1] = Vh[(k0 + tq + 4) * LU + n0 + gq]; bl[1] = Vl[(k0 + tq + 4) * LU + n0 + gq];
        } else {
            gtc_ldb(Us, LU, k0, n0, gq, tq, bh, bl);
        }
    };
    fetch(0);
    for (int n = 0; n < nch; n++) {
        const int t0 = n * C, c = min(C, g.T - t0);
        stash();
        __syncthreads();
        if (n + 1 < nch && (!DF || n == 0)) fetch(n + 1);
        /* phase 1: W S and Q_dec S over K = DK, sharing the S fragments */
        float aw[2][4] = {}, aq[2][4] = {}, cw[2][4] = {}, cq[2][4] = {};
        const float sq0 = LSC ? Fq[m1 + gq] : 1.0f, sq1 = LSC ? Fq[m1 + gq + 8] : 1.0f;
#pragma unroll 4
        for (int k0 = 0; k0 < DK; k0 += 8) {
            uint32_t wh[4], wl[4], qh[4], ql[4];
            gtc_lda(Ws, LQ, m1, k0, gq, tq, wh, wl);
            if constexpr (LSC) gtc_lda_s(Qs, LQ, m1, k0, gq, tq, sq0, sq1, qh, ql);
            else gtc_lda(Qs, LQ, m1, k0, gq, tq, qh, ql);
#pragma unroll
            for (int s = 0; s < 2; s++) {
                uint32_t bh[2], bl[2];
                if constexpr (PS) {
                    bh[0] = Sh[(k0 + tq) * LS + n1 + 8 * s + gq]; bl[0] = Sl[(k0 + tq) * LS + n1 + 8 * s + gq];
                    bh[1] = Sh[(k0 + tq + 4) * LS + n1 + 8 * s + gq]; bl[1] = Sl[(k0 + tq + 4) * LS + n1 + 8 * s + gq];
                } else {
                    gtc_ldb(Ss, LS, k0, n1 + 8 * s, gq, tq, bh, bl);
                }
                mma3(aw[s], cw[s], wh, wl, bh, bl);
                mma3(aq[s], cq[s], qh, ql, bh, bl);
            }
        }
        /* Vn = U - W S (this warp's tile only) */
#pragma unroll
        for (int s = 0; s < 2; s++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int at = GTC_AT(LU, m1, n1, s, e);
                float v = Us[at] - (aw[s][e] + cw[s][e]);
                if constexpr (PS) gtc_split(v, Vh[at], Vl[at]);
                else Us[at] = v;
            }
        __syncthreads();
        /* phase 2: O = Q_dec S + P Vn over the chunk's 64 tokens */
#pragma unroll 2
        for (int k0 = 0; k0 < C; k0 += 8) {
            uint32_t ph[4], pl[4];
            gtc_lda(Ps, LP, m1, k0, gq, tq, ph, pl);
#pragma unroll
            for (int s = 0; s < 2; s++) {
                uint32_t bh[2], bl[2];
                ldb_v(k0, n1 + 8 * s, bh, bl);
                mma3(aq[s], cq[s], ph, pl, bh, bl);
            }
        }
#pragma unroll
        for (int s = 0; s < 2; s++)
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                int row = m1 + gq + 8 * hh;
                if (row < c)
                    *(float2 *)(g.o + (long)(t0 + row) * VD + h * g.DV + j0 + n1 + 8 * s + 2 * tq) =
                        make_float2(aq[s][2 * hh] + cq[s][2 * hh], aq[s][2 * hh + 1] + cq[s][2 * hh + 1]);
            }
        /* phase 3: S = lambda S + K_dec^T Vn (this warp's rows and columns of S only) */
        {
            const float lam = __ldg(g.ws.lam + (long)h * nch + n);
            float cs[NT3][4] = {};
#pragma unroll
            for (int s = 0; s < NT3; s++)
#pragma unroll
                for (int e = 0; e < 4; e++) as[s][e] = lam * (PS ? as[s][e] : Ss[GTC_AT(LS, m3, n3, s, e)]);
#pragma unroll 2
            for (int k0 = 0; k0 < C; k0 += 8) {
                uint32_t kh_[4], kl_[4];
                if constexpr (LSC) gtc_lda_ts(Ks, LK, m3, k0, gq, tq, Fk, kh_, kl_);
                else gtc_lda_t(Ks, LK, m3, k0, gq, tq, kh_, kl_);
#pragma unroll
                for (int s = 0; s < NT3; s++) {
                    uint32_t bh[2], bl[2];
                    ldb_v(k0, n3 + 8 * s, bh, bl);
                    mma3(as[s], cs[s], kh_, kl_, bh, bl);
                }
            }
#pragma unroll
            for (int s = 0; s < NT3; s++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    as[s][e] += cs[s][e];
                    int at = GTC_AT(LS, m3, n3, s, e);
                    if constexpr (PS) gtc_split(as[s][e], Sh[at], Sl[at]);
                    else Ss[at] = as[s][e];
                }
        }
        __syncthreads();
    }
    float *Sw = (g.So ? g.So : g.S) + (long)h * DK * g.DV + j0; /* this block's columns only: in place is safe */
    if constexpr (PS) {
#pragma unroll
        for (int s = 0; s < NT3; s++)
#pragma unroll
            for (int e = 0; e < 4; e++) Sw[(long)(m3 + gq + 8 * (e >> 1)) * g.DV + n3 + 8 * s + 2 * tq + (e & 1)] = as[s][e];
    } else {
        for (int i = tid; i < DK * BV; i += blockDim.x) Sw[(long)(i / BV) * g.DV + i % BV] = Ss[(i / BV) * LS + i % BV];
    }
#undef GTC_AT
}

#endif
