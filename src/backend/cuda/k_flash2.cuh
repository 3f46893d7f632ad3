/*
 * k_flash2.cuh — prefill flash attention v2 (causal, gated output), mma.sync m16n8k16 bf16 with the
 * scores, probabilities and the output accumulator in registers.
 *
 *   k_flash2_prefill<HD>: grid (ceil(T / 16), NKV), block 256 (8 warps). One block = 16 query
 *   positions x the G = NH / NKV query heads of one kv head (G == 8): warp w owns the 16 rows of
 *   head kvh * G + w, so each K/V tile is loaded once for the 8 heads of the group (GQA packing).
 *   K/V tiles of 64 keys are copied with cp.async into a double buffer (tile j + 1 in flight while
 *   tile j is multiplied). Per tile and warp: S = Q K^T (16 x 64, fp32 in registers), causal mask,
 *   online softmax (row max / sum across the 4 lanes of a quad), P packed to bf16 straight from the
 *   S registers into the A fragments of O += P V (16 x HD fp32 in registers).
 *   Blocks are issued last query tile first (the longest rows start first, fewer idle SMs at the end).
 *
 * Shared memory (bf16, rows padded by 8 elements so the 8 row addresses of an ldmatrix hit distinct
 * banks): Q [8 * 16][HD + 8], K and V [2][64][HD + 8].
 */
#ifndef LILAC_K_FLASH2_CUH
#define LILAC_K_FLASH2_CUH

#include "cu_common.cuh"
#include "k_attn.cuh"

#define FL2_QR 16 /* query positions per block */
#define FL2_BC 64 /* keys per tile */
#define FL2_G 8   /* query heads per kv head handled by one block (one per warp) */

/* Q8 (a q8 cache, k_attn.cuh): the K/V tiles land as q8 rows in a double-buffered staging area and
 * are expanded to bf16 in a single K and V buffer before the tile's products. */
template <int HD, bool Q8 = false> __host__ __device__ constexpr size_t flash2_smem_bytes() {
    return Q8 ? (size_t)(FL2_G * FL2_QR + 2 * FL2_BC) * (HD + 8) * 2 + (size_t)4 * FL2_BC * (HD + ((HD / 16 + 15) & ~15))
              : (size_t)(FL2_G * FL2_QR + 4 * FL2_BC) * (HD + 8) * 2;
}

__device__ __forceinline__ uint32_t fl2_smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void fl2_ldm_x4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
__device__ __forceinline__ void fl2_ldm_x4_t(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
/* d += a (16x16, row) * b (16x8, col), bf16 (F16: fp16) in, fp32 accumulate */
template <bool F16 = false>
__device__ __forceinline__ void fl2_mma(float *d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
    if (F16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t fl2_pack(float lo, float hi) {
    __nv_bfloat162 p = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&p;
}

template <int HD, bool Q8 = false>
__global__ void __launch_bounds__(256, 1) k_flash2_prefill(const flash_args a) {
    constexpr int LD = HD + 8, NT = HD / 8; /* row stride (elements), n-tiles of the output */
    constexpr int NB = Q8 ? 1 : 2;                       /* bf16 K / V buffers */
    constexpr int RB = Q8 ? HD + ((HD / 16 + 15) & ~15) : 2 * HD; /* bytes per cached row (kv_row_bytes) */
    extern __shared__ __align__(128) unsigned char smraw[];
    __nv_bfloat16 *Qs = (__nv_bfloat16 *)smraw;         /* [8*16][LD] */
    __nv_bfloat16 *Ks = Qs + FL2_G * FL2_QR * LD;        /* [NB][64][LD] */
    __nv_bfloat16 *Vs = Ks + NB * FL2_BC * LD;           /* [NB][64][LD] */
    unsigned char *St = (unsigned char *)(Vs + NB * FL2_BC * LD); /* Q8: [2][K, V][64][RB] */
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    const int qt = gridDim.x - 1 - blockIdx.x, kvh = blockIdx.y, h = kvh * FL2_G + w;
    const int p0 = *a.pos, q0 = qt * FL2_QR, nq = min(FL2_QR, a.T - q0);
    const int nkeys = p0 + q0 + nq; /* keys [0, nkeys) are visible to some query of the block */
    const int ntiles = (nkeys + FL2_BC - 1) / FL2_BC;
    const unsigned char *Kg = (const unsigned char *)a.kc + (long)kvh * a.n_ctx * RB, *Vg = (const unsigned char *)a.vc + (long)kvh * a.n_ctx * RB;
    /* Q rows: smem row w*16 + i = position q0 + i of head kvh*8 + w (zero past T) */
    for (int i = tid; i < FL2_G * FL2_QR * (HD / 8); i += 256) {
        int r = i / (HD / 8), c8 = (i % (HD / 8)) * 8, hw = r / FL2_QR, qi = r % FL2_QR;
        bool ok = qi < nq;
        cp_async16(Qs + r * LD + c8, ok ? (const void *)(a.q + (long)(q0 + qi) * a.NH * HD + (kvh * FL2_G + hw) * HD + c8) : (const void *)a.q,
                 ok ? 16 : 0);
    }
    auto load_kv = [&](int j, int buf) {
        int k0 = j * FL2_BC;
        if (Q8) { /* whole q8 rows (RB / 16 chunks each) into the staging buffer */
            unsigned char *kd = St + (size_t)buf * 2 * FL2_BC * RB, *vd = kd + FL2_BC * RB;
            for (int i = tid; i < FL2_BC * (RB / 16); i += 256) {
                int r = i / (RB / 16), c = (i % (RB / 16)) * 16;
                bool ok = k0 + r < nkeys;
                long off = ok ? (long)(k0 + r) * RB + c : 0;
                cp_async16(kd + r * RB + c, Kg + off, ok ? 16 : 0);
                cp_async16(vd + r * RB + c, Vg + off, ok ? 16 : 0);
            }
            return;
        }
        __nv_bfloat16 *kd = Ks + buf * FL2_BC * LD, *vd = Vs + buf * FL2_BC * LD;
        for (int i = tid; i < FL2_BC * (HD / 8); i += 256) {
            int r = i / (HD / 8), c8 = (i % (HD / 8)) * 8;
            bool ok = k0 + r < nkeys;
            long off = ok ? (long)(k0 + r) * RB + 2 * c8 : 0;
            cp_async16(kd + r * LD + c8, Kg + off, ok ? 16 : 0);
            cp_async16(vd + r * LD + c8, Vg + off, ok ? 16 : 0);
        }
    };
    /* Q8: staging buffer buf -> the bf16 K / V tiles, 8 values (one scale) per step */
    auto expand_kv = [&](int buf) {
        const unsigned char *ks = St + (size_t)buf * 2 * FL2_BC * RB;
        for (int i = tid; i < 2 * FL2_BC * (HD / 8); i += 256) {
            int kvs = i / (FL2_BC * (HD / 8)), r = (i / (HD / 8)) % FL2_BC, c8 = (i % (HD / 8)) * 8;
            const unsigned char *row = ks + (size_t)(kvs * FL2_BC + r) * RB;
            uint2 q = *(const uint2 *)(row + c8);
            kvq_raw<8> raw = {{q.x, q.y}, __half2float(((const __half *)(row + HD))[c8 >> 5])};
            float f[8];
            kvq_expand<8>(raw, f);
            uint32_t out[4];
#pragma unroll
            for (int e = 0; e < 4; e++) out[e] = fl2_pack(f[2 * e], f[2 * e + 1]);
            *(uint4 *)((kvs ? Vs : Ks) + r * LD + c8) = make_uint4(out[0], out[1], out[2], out[3]);
        }
    };
    load_kv(0, 0);
    cp_async_commit(); /* group 0: Q + tile 0 */
    float o[NT][4];
#pragma unroll
    for (int n = 0; n < NT; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f; /* rows lane/4 and lane/4 + 8 */
    const int r0 = lane >> 2, cq = (lane & 3) * 2;
    const int qpos0 = p0 + q0 + r0, qpos1 = qpos0 + 8;
    const float sl2 = 1.4426950408889634f; /* scores to log2 units (q is pre-scaled by 1/sqrt(HD)) */
    /* ldmatrix lane roles: x4 matrices 0..3 take the row addresses of lanes 0-7, 8-15, 16-23, 24-31 */
    const int lrow = lane & 7, lmat = lane >> 3;
    for (int j = 0; j < ntiles; j++) {
        int buf = j & 1;
        if (j + 1 < ntiles) load_kv(j + 1, buf ^ 1);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        if (Q8) {
            expand_kv(buf);
            __syncthreads();
        }
        const __nv_bfloat16 *Kb = Ks + (Q8 ? 0 : buf) * FL2_BC * LD, *Vb = Vs + (Q8 ? 0 : buf) * FL2_BC * LD;
        /* S = Q K^T: 8 n-tiles of 8 keys */
        float s[8][4];
#pragma unroll
        for (int n = 0; n < 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < HD; kk += 16) {
            uint32_t qa0, qa1, qa2, qa3;
            /* A 16x16: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15) */
            fl2_ldm_x4(fl2_smem_addr(Qs + (w * FL2_QR + lrow + 8 * (lmat & 1)) * LD + kk + 8 * (lmat >> 1)), qa0, qa1, qa2, qa3);
#pragma unroll
            for (int n = 0; n < 8; n += 2) {
                uint32_t b0, b1, b2, b3;
                /* B for keys 8n..8n+7 and 8(n+1)..: matrices (keys n, k 0-7), (keys n, k 8-15), (keys n+1, k 0-7), (keys n+1, k 8-15) */
                fl2_ldm_x4(fl2_smem_addr(Kb + (8 * n + lrow + 8 * (lmat >> 1)) * LD + kk + 8 * (lmat & 1)), b0, b1, b2, b3);
                fl2_mma(s[n], qa0, qa1, qa2, qa3, b0, b1);
                fl2_mma(s[n + 1], qa0, qa1, qa2, qa3, b2, b3);
            }
        }
        /* causal mask (only tiles that reach past the first query need it) and the row maxima */
        int k0 = j * FL2_BC;
        float mx0 = m0, mx1 = m1;
#pragma unroll
        for (int n = 0; n < 8; n++) {
            int kc = k0 + 8 * n + cq;
            s[n][0] = kc <= qpos0 ? s[n][0] * sl2 : -INFINITY;
            s[n][1] = kc + 1 <= qpos0 ? s[n][1] * sl2 : -INFINITY;
            s[n][2] = kc <= qpos1 ? s[n][2] * sl2 : -INFINITY;
            s[n][3] = kc + 1 <= qpos1 ? s[n][3] * sl2 : -INFINITY;
            mx0 = fmaxf(mx0, fmaxf(s[n][0], s[n][1]));
            mx1 = fmaxf(mx1, fmaxf(s[n][2], s[n][3]));
        }
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        /* a row with no visible key yet keeps max -inf: use 0 as the reference so exp2 gives 0, not NaN */
        float b0m = mx0 == -INFINITY ? 0.0f : mx0, b1m = mx1 == -INFINITY ? 0.0f : mx1;
        float c0 = exp2f(m0 - b0m), c1 = exp2f(m1 - b1m); /* m = -inf -> 0 */
        m0 = mx0; m1 = mx1;
        float sum0 = 0.0f, sum1 = 0.0f;
        uint32_t pa[4][4]; /* A fragments of P for the 4 k-steps of 16 keys */
#pragma unroll
        for (int n = 0; n < 8; n++) {
            float e0 = exp2f(s[n][0] - b0m), e1 = exp2f(s[n][1] - b0m), e2 = exp2f(s[n][2] - b1m), e3 = exp2f(s[n][3] - b1m);
            sum0 += e0 + e1;
            sum1 += e2 + e3;
            /* k-step n/2: n even -> a0 (row r0), a1 (row r0+8); n odd -> a2, a3 (columns + 8) */
            pa[n >> 1][(n & 1) * 2] = fl2_pack(e0, e1);
            pa[n >> 1][(n & 1) * 2 + 1] = fl2_pack(e2, e3);
        }
        sum0 += __shfl_xor_sync(0xffffffffu, sum0, 1);
        sum0 += __shfl_xor_sync(0xffffffffu, sum0, 2);
        sum1 += __shfl_xor_sync(0xffffffffu, sum1, 1);
        sum1 += __shfl_xor_sync(0xffffffffu, sum1, 2);
        l0 = l0 * c0 + sum0;
        l1 = l1 * c1 + sum1;
#pragma unroll
        for (int n = 0; n < NT; n++) { o[n][0] *= c0; o[n][1] *= c0; o[n][2] *= c1; o[n][3] *= c1; }
        /* O += P V: V [key][dim] row-major -> B fragments by ldmatrix.trans */
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
#pragma unroll
            for (int n = 0; n < NT; n += 2) {
                uint32_t b0, b1, b2, b3;
                /* matrices (keys 0-7, dims n), (keys 8-15, dims n), (keys 0-7, dims n+1), (keys 8-15, dims n+1) */
                fl2_ldm_x4_t(fl2_smem_addr(Vb + (16 * ks + lrow + 8 * (lmat & 1)) * LD + 8 * n + 8 * (lmat >> 1)), b0, b1, b2, b3);
                fl2_mma(o[n], pa[ks][0], pa[ks][1], pa[ks][2], pa[ks][3], b0, b1);
                fl2_mma(o[n + 1], pa[ks][0], pa[ks][1], pa[ks][2], pa[ks][3], b2, b3);
            }
        }
        __syncthreads(); /* buffer buf is refilled by the next iteration's prefetch */
    }
    cp_async_wait<0>();
    /* out = O / l * sigmoid(gate) */
    float il0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, il1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
#pragma unroll
    for (int half = 0; half < 2; half++) {
        int qi = r0 + 8 * half;
        if (qi >= nq) continue;
        float il = half ? il1 : il0;
        const float *gp = a.qg + (long)(q0 + qi) * a.ldqg + h * 2 * HD + HD;
        __nv_bfloat16 *op = a.out + (long)(q0 + qi) * a.NH * HD + h * HD;
#pragma unroll
        for (int n = 0; n < NT; n++) {
            int c = 8 * n + cq;
            float2 g2 = *(const float2 *)(gp + c);
            float v0 = o[n][2 * half] * il * sigmoid_f(g2.x), v1 = o[n][2 * half + 1] * il * sigmoid_f(g2.y);
            *(__nv_bfloat162 *)(op + c) = __floats2bfloat162_rn(v0, v1);
        }
    }
}

#endif
