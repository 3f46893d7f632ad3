/*
 * k_gemm.cuh — prefill GEMM on tensor cores with in-tile dequantization:
 *   C[m][n] = sum_k A[m][k] * W[n][k],  A bf16 [M][K] (rows optionally gathered), W any gmat type.
 * Tile BM (m: 64 or 128) x 128 (n) x 64 (k), 256 threads = 8 warps of 32 x (128 / (8 / (BM/32)))
 * (2 x 2 or 2 x 4 WMMA 16x16x16 bf16 -> fp32). BM = 128 halves the weight dequantization per
 * multiply-add (every dequantized W tile is used by twice the rows), which is what limits the BM = 64
 * kernel (the dequant ALU work is about as long as the tensor-core work); the epilogue runs in two
 * halves of 64 rows so the fp32 staging tile still fits the 64 x 64 x 2 operand buffers.
 * The next k-tile is loaded (A) and dequantized (W, 16 elements per thread via gmat_dequant16) into
 * registers while the current one is multiplied (K % 64 == 0), so quantized weights are expanded only tile by tile.
 *
 * Grouped mode (MoE): blockIdx.y indexes a tile list (expert e, first sorted row m0, row count);
 * W rows start at e * w_rows_per_e; blocks past *n_tiles exit.
 * Epilogues: STORE / ADD into fp32 C; SWIGLU: H = bf16(silu(G) * acc); SCATTER_ADD (MoE down):
 * atomicAdd(X[c_map[m]/c_div][n], c_w[c_map[m]] * acc); ADD_GATED: C[m][n] += sigmoid(rowgate[m]) * acc.
 * SCATTER_ADD with `fix` set adds c_w * acc as a 64-bit fixed-point integer (2^32 units) into
 * fix[c_map[m]/c_div][n] instead: integer addition is associative, so the sum of a token's k rows
 * does not depend on which block adds first, and k_fix_add then adds it to X once (fix zeroed before;
 * a prefill whose
 * result is the same bits on every run; fp32 atomics made the bench digest differ between runs).
 */
#ifndef LILAC_K_GEMM_CUH
#define LILAC_K_GEMM_CUH

#include <mma.h>

#include "cu_common.cuh"

enum { GM_STORE = 0, GM_ADD = 1, GM_SWIGLU = 2, GM_SCATTER_ADD = 3, GM_ADD_GATED = 4,
       GM_GLU = 5 /* k_gemm2 only: H = bf16(silu(A W^T) * (A W2^T)), gate W and up W2 in one tile (k_gemm2.cuh) */ };

#define GM_BM 64 /* the smaller tile; BM is a template parameter (64 or 128) */
#define GM_BN 128
#define GM_BK 64

struct gemm_args {
    const __nv_bfloat16 *A; int lda;
    const int *a_map; int a_div;      /* A row of sorted row m = a_map[m] / a_div (NULL: m) */
    gmat W; int N, K, M;
    gmat W2;                          /* GM_GLU: the up matrix (W the gate), same type and shape */
    const int *tile_e, *tile_m0, *tile_mn, *n_tiles; int w_rows_per_e; /* grouped (tile_e != NULL) */
    int mode;
    float *C; int ldc;
    const float *G; int ldg;
    __nv_bfloat16 *H; int ldh;
    const int *c_map; int c_div; const float *c_w;
    const float *rowgate; int rg_stride;
    int red4;                         /* SCATTER_ADD with 4-column vector atomics (sm_90) */
    unsigned long long *fix;          /* SCATTER_ADD into a fixed-point buffer [rows of C][ldc] (see above) */
};

#define GM_FIX_SCALE 4294967296.0f /* 2^32: |sum| < 2^31, resolution 2.3e-10 (finer than fp32's at |x| > 1e-3) */
__device__ __forceinline__ void gemm_fix_add(unsigned long long *p, float v) {
    atomicAdd(p, (unsigned long long)__float2ll_rn(v * GM_FIX_SCALE)); /* two's complement: a signed add */
}

/* x[i] += fix[i] / 2^32; n = rows * cols */
__global__ void k_fix_add(const unsigned long long *fix, float *x, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        x[i] += __ll2float_rn((long long)fix[i]) * (1.0f / GM_FIX_SCALE);
}

/* The fp32 store of one scatter-add group of 4 columns: one vector atomic on sm_90. */
__device__ __forceinline__ void gemm_red4(float *p, float4 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    atomicAdd((float4 *)p, v);
#else
    atomicAdd(p, v.x); atomicAdd(p + 1, v.y); atomicAdd(p + 2, v.z); atomicAdd(p + 3, v.w);
#endif
}

/* MB: blocks per SM the register allocation must allow (BM 128 needs ~177 registers for 1 block;
 * MB = 2 caps it at 128 with a few spills) */
template <int BM, int MB = 2>
__global__ void __launch_bounds__(256, MB) k_gemm(const gemm_args a) {
    using namespace nvcuda;
    static_assert(BM == 64 || BM == 128, "BM");
    constexpr int LDA = GM_BK + 8, LDC = GM_BN + 4;
    constexpr int WM = BM / 32, WN = 8 / WM, FN = GM_BN / WN / 16; /* warps along m / n, n-fragments per warp */
    constexpr int SMB = (BM + GM_BN) * LDA * 2 > 64 * LDC * 4 ? (BM + GM_BN) * LDA * 2 : 64 * LDC * 4;
    __shared__ __align__(128) unsigned char smraw[SMB];
    __nv_bfloat16 *As = (__nv_bfloat16 *)smraw;          /* [BM][72] */
    __nv_bfloat16 *Bs = As + BM * LDA;                    /* [128][72]: Bs[n][k] */
    float *Cs = (float *)smraw;                           /* [64][132] (after the loop, one half at a time) */
    int tid = threadIdx.x, w = tid >> 5;
    int m0, mn, e = 0;
    if (a.tile_e) {
        if ((int)blockIdx.y >= *a.n_tiles) return;
        e = a.tile_e[blockIdx.y]; m0 = a.tile_m0[blockIdx.y]; mn = a.tile_mn[blockIdx.y];
    } else {
        m0 = blockIdx.y * BM; mn = min(BM, a.M - m0);
    }
    int n0 = blockIdx.x * GM_BN;
    long wrow0 = (long)e * a.w_rows_per_e;
    /* per-thread load roles */
    constexpr int AR = BM / 64;                    /* A rows per thread (64 apart) */
    int ar = tid >> 2, ak = (tid & 3) * 16;        /* A: rows ar + 64 i, 16 elements at ak */
    int bn = tid >> 1, bk = (tid & 1) * 32;        /* W: row bn, 32 elements at bk */
    long arow[AR];
#pragma unroll
    for (int i = 0; i < AR; i++) {
        int rr = ar + 64 * i;
        arow[i] = rr < mn ? (a.a_map ? (long)(a.a_map[m0 + rr] / a.a_div) : (long)(m0 + rr)) : -1;
    }
    bool bvalid = n0 + bn < a.N;
    uint4 areg[2 * AR];
    uint32_t breg[16];
    auto load = [&](int k0) {
#pragma unroll
        for (int i = 0; i < AR; i++) {
            if (arow[i] >= 0) {
                areg[2 * i] = *(const uint4 *)(a.A + arow[i] * a.lda + k0 + ak);
                areg[2 * i + 1] = *(const uint4 *)(a.A + arow[i] * a.lda + k0 + ak + 8);
            } else {
                areg[2 * i] = areg[2 * i + 1] = make_uint4(0, 0, 0, 0);
            }
        }
        if (bvalid) {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                float f[16];
                gmat_dequant16(a.W, wrow0 + n0 + bn, k0 + bk + 16 * h, f);
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    __nv_bfloat162 p = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
                    breg[8 * h + i] = *(uint32_t *)&p;
                }
            }
        } else {
#pragma unroll
            for (int i = 0; i < 16; i++) breg[i] = 0;
        }
    };
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][FN];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < FN; j++) wmma::fill_fragment(acc[i][j], 0.0f);
    int wm = (w % WM) * 32, wn = (w / WM) * (16 * FN);
    load(0);
    for (int k0 = 0; k0 < a.K; k0 += GM_BK) {
#pragma unroll
        for (int i = 0; i < AR; i++) {
            *(uint4 *)(As + (ar + 64 * i) * LDA + ak) = areg[2 * i];
            *(uint4 *)(As + (ar + 64 * i) * LDA + ak + 8) = areg[2 * i + 1];
        }
#pragma unroll
        for (int q = 0; q < 4; q++)
            *(uint4 *)(Bs + bn * LDA + bk + 8 * q) = make_uint4(breg[4 * q], breg[4 * q + 1], breg[4 * q + 2], breg[4 * q + 3]);
        __syncthreads();
        if (k0 + GM_BK < a.K) load(k0 + GM_BK);
#pragma unroll
        for (int kk = 0; kk < GM_BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb[FN];
#pragma unroll
            for (int i = 0; i < 2; i++) wmma::load_matrix_sync(fa[i], As + (wm + 16 * i) * LDA + kk, LDA);
#pragma unroll
            for (int j = 0; j < FN; j++) wmma::load_matrix_sync(fb[j], Bs + (wn + 16 * j) * LDA + kk, LDA);
#pragma unroll
            for (int i = 0; i < 2; i++)
#pragma unroll
                for (int j = 0; j < FN; j++) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
        __syncthreads();
    }
    /* epilogue per half of 64 rows: the warps of that half stage their tiles, all threads store */
#pragma unroll
    for (int half = 0; half < BM / 64; half++) {
        if (wm / 64 == half) {
#pragma unroll
            for (int i = 0; i < 2; i++)
#pragma unroll
                for (int j = 0; j < FN; j++)
                    wmma::store_matrix_sync(Cs + (wm - 64 * half + 16 * i) * LDC + wn + 16 * j, acc[i][j], LDC, wmma::mem_row_major);
        }
        __syncthreads();
        int rbase = 64 * half;
        if (a.mode == GM_SCATTER_ADD && a.fix) {
            for (int i = tid; i < 64 * GM_BN; i += 256) {
                int r = i / GM_BN, c = i % GM_BN, n = n0 + c;
                if (rbase + r >= mn || n >= a.N) continue;
                int src = a.c_map[m0 + rbase + r];
                long o = (long)(src / a.c_div) * a.ldc + n;
                float v = a.c_w[src] * Cs[r * LDC + c];
                if (isfinite(v)) gemm_fix_add(a.fix + o, v);
                else a.C[o] = v; /* inf / NaN reach X as they would through fp32 adds (k_fix_add keeps them) */
            }
        } else if (a.mode == GM_SCATTER_ADD && a.red4 && (a.ldc & 3) == 0 && (a.N & 3) == 0) {
            /* 4 columns per vector atomic: the MoE down projection adds T*k rows of H into X */
            for (int i = tid; i < 64 * GM_BN / 4; i += 256) {
                int r = i / (GM_BN / 4), c = (i % (GM_BN / 4)) * 4, n = n0 + c;
                if (rbase + r >= mn || n >= a.N) continue;
                int src = a.c_map[m0 + rbase + r];
                float wgt = a.c_w[src];
                float4 v = *(const float4 *)(Cs + r * LDC + c);
                v.x *= wgt; v.y *= wgt; v.z *= wgt; v.w *= wgt;
                gemm_red4(a.C + (long)(src / a.c_div) * a.ldc + n, v);
            }
        } else {
            for (int i = tid; i < 64 * GM_BN; i += 256) {
                int r = i / GM_BN, c = i % GM_BN, n = n0 + c;
                if (rbase + r >= mn || n >= a.N) continue;
                float v = Cs[r * LDC + c];
                long m = m0 + rbase + r;
                switch (a.mode) {
                case GM_STORE: a.C[m * a.ldc + n] = v; break;
                case GM_ADD: a.C[m * a.ldc + n] += v; break;
                case GM_SWIGLU: a.H[m * a.ldh + n] = __float2bfloat16(silu_f(a.G[m * a.ldg + n]) * v); break;
                case GM_SCATTER_ADD: {
                    int src = a.c_map[m];
                    atomicAdd(&a.C[(long)(src / a.c_div) * a.ldc + n], a.c_w[src] * v);
                    break;
                }
                case GM_ADD_GATED: a.C[m * a.ldc + n] += sigmoid_f(a.rowgate[m * a.rg_stride]) * v; break;
                }
            }
        }
        if (half + 1 < BM / 64) __syncthreads();
    }
}

#endif
