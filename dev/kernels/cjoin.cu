/*
 * cjoin.cu — lab (session 20, written when no device time was left: not yet run): what does the
 * in-projection -> GDN step boundary cost as a kernel boundary, and what would it cost inside one
 * launch of thread-block clusters that exchange the projection's rows through distributed shared
 * memory? The question behind docs/notes.md's "in-projection + GDN join" (session 20).
 *
 * The decode step's shape: a k-head group (2 v-heads) needs 772 of the projection's 12,352 rows;
 * 16 groups x 8 blocks = 128 blocks, one per SM, each streaming ~111 KB of Q4_K rows (the
 * projection's per-SM share) and producing R = 97 row values.
 *   mode 0 (now): producer k_prod streams its bytes (before griddepcontrol.wait, as k_lgemv's
 *     pre-wait stage), waits, writes its R values to global memory and ends; consumer k_cons (PDL,
 *     griddepcontrol.wait) reads its group's 8 x R values (L2) and reduces them.
 *   mode 1 (the join): k_join, clusters of 8: each block streams and waits as k_prod, writes its R
 *     values into all 8 blocks' shared memory (st through map_shared_rank), cluster barrier, then
 *     reduces the 8 x R values from its own shared memory. No grid-wide boundary between the two.
 *   mode 2: k_prod alone (the floor).
 * Each launch is PDL-chained to the one before (the previous "layer"), 64 iterations in one graph,
 * µs per iteration reported for several kb; every value carries its iteration's tag, and a stale one
 * seen by any reader fails the run. The producer and the join ask for 120 KB of dynamic shared memory
 * so that there is one per SM, as the lean kernels; the consumer for 40 KB, so that it can enter
 * beside a producer block, as the fused GDN kernel does beside the projection.
 * Session 21: the join lost (1.7-1.8 µs slower; at most 15 clusters of 8 resident). Built again as
 * cjoin4 (-DCJ_CL=4 -DCJ_R=33 -DCJ_SMEM_KB=64): 32 clusters of 4 exchanging 33 values, the cost of
 * a fused-GDN step split by value columns (a head's 4 blocks swap their 32 o values and sums of
 * squares); its ceiling is +9.6 tok/s (bench/results/2026-12-04-h200-s21, call 9).
 */
#include <cooperative_groups.h>
#include "lab.cuh"
#include "../../src/backend/cuda/cu_common.cuh"

namespace cg = cooperative_groups;

#ifndef CJ_CL
#define CJ_CL 8   /* blocks per cluster (a k-head group; -DCJ_CL=4: a v-head's 4 fused-GDN blocks) */
#endif
#ifndef CJ_R
#define CJ_R 97   /* row values per block (772 / 8, rounded up; -DCJ_R=33: 32 o values + a sum of squares) */
#endif
#define CJ_T 512
#ifndef CJ_SMEM_KB
#define CJ_SMEM_KB 120
#endif
#define CJ_SMEM (CJ_SMEM_KB * 1024)

/* this block's share of cold weights, folded into one word (so the loads cannot be dropped) */
__device__ __forceinline__ float cj_stream(const uint4 *p, int u4, float *red) {
    uint32_t x = 0;
    for (int i = threadIdx.x; i < u4; i += blockDim.x) {
        uint4 v = __ldcs(p + i);
        x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    float s = (float)(x & 1u);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
    __syncthreads();
    float t = 0.0f;
    for (int k = 0; k < CJ_T / 32; k++) t += red[k];
    return t < 0.0f ? 1.0f : 0.0f; /* 0: folded in at zero weight */
}
__device__ __forceinline__ float cj_tag(int iter, int row) { return (float)(iter * 16384 + row); }

__global__ void __launch_bounds__(CJ_T) k_prod(const uint4 *w, int u4, float *out, int iter) {
    __shared__ float red[CJ_T / 32];
    pdl_trigger();
    float z = cj_stream(w + (size_t)blockIdx.x * u4, u4, red);
    pdl_wait(); /* the previous consumer has read out[] */
    if (threadIdx.x < CJ_R) out[blockIdx.x * CJ_R + threadIdx.x] = cj_tag(iter, blockIdx.x * CJ_R + threadIdx.x) + z;
}

__global__ void __launch_bounds__(CJ_T) k_cons(const float *out, int iter, float *res, unsigned *err) {
    __shared__ float red[CJ_T / 32];
    pdl_trigger();
    pdl_wait();
    int g0 = (blockIdx.x / CJ_CL) * CJ_CL * CJ_R; /* the group's first row */
    float s = 0.0f;
    for (int j = threadIdx.x; j < CJ_CL * CJ_R; j += CJ_T) {
        float v = __ldcg(out + g0 + j);
        if (v != cj_tag(iter, g0 + j)) atomicAdd(err, 1u);
        s += v;
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.0f;
        for (int k = 0; k < CJ_T / 32; k++) t += red[k];
        res[blockIdx.x] = t;
    }
}

__global__ void __launch_bounds__(CJ_T) k_join(const uint4 *w, int u4, int iter, float *res, unsigned *err) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 /* clusters: sm_90+ (the compute_80 PTX of a default build has an empty body) */
    __shared__ float red[CJ_T / 32];
    __shared__ float rows[CJ_CL * CJ_R]; /* every block of the cluster's values: [rank][row] */
    cg::cluster_group cl = cg::this_cluster();
    int rank = (int)cl.block_rank();
    cl.barrier_arrive(); /* this block has started: its peers may write into its shared memory after their wait below */
    pdl_trigger();
    float z = cj_stream(w + (size_t)blockIdx.x * u4, u4, red);
    pdl_wait(); /* the previous launch is done (its clusters have read their rows) */
    cl.barrier_wait();
    /* thread t: row t % R of this block into peer t / R (8 x 97 = 776 of the 512 threads' two passes) */
    for (int t = threadIdx.x; t < CJ_CL * CJ_R; t += CJ_T) {
        int peer = t / CJ_R, r = t % CJ_R;
        float *dst = cl.map_shared_rank(rows, peer);
        dst[rank * CJ_R + r] = cj_tag(iter, blockIdx.x * CJ_R + r) + z;
    }
    cl.sync(); /* barrier.cluster arrive.release + wait.acquire: the peers' stores are visible */
    int g0 = (blockIdx.x / CJ_CL) * CJ_CL * CJ_R;
    float s = 0.0f;
    for (int j = threadIdx.x; j < CJ_CL * CJ_R; j += CJ_T) {
        float v = rows[j];
        if (v != cj_tag(iter, g0 + j)) atomicAdd(err, 1u);
        s += v;
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.0f;
        for (int k = 0; k < CJ_T / 32; k++) t += red[k];
        res[blockIdx.x] = t;
    }
    /* (no barrier at the end: every write into a peer's shared memory came before the one above) */
#endif
}

/* k_join as clusters of CJ_CL, PDL-chained */
static void launch_join(int grid, cudaStream_t st, const uint4 *w, int u4, int iter, float *res, unsigned *err) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid); cfg.blockDim = dim3(CJ_T); cfg.dynamicSmemBytes = CJ_SMEM; cfg.stream = st;
    cudaLaunchAttribute at[2];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    at[1].id = cudaLaunchAttributeClusterDimension;
    at[1].val.clusterDim.x = CJ_CL; at[1].val.clusterDim.y = 1; at[1].val.clusterDim.z = 1;
    cfg.attrs = at; cfg.numAttrs = 2;
    CK(cudaLaunchKernelEx(&cfg, k_join, w, u4, iter, res, err));
}

int main() {
    const int G = 128, N = 64; /* 16 k-head groups of 8, or 32 v-heads of 4 */
    const size_t window = (size_t)1 << 30;
    uint4 *w;
    CK(cudaMalloc(&w, window));
    CK(cudaMemset(w, 0x5a, window));
    float *out, *res;
    unsigned *err;
    CK(cudaMalloc(&out, (size_t)G * CJ_R * 4)); CK(cudaMalloc(&res, G * 4)); CK(cudaMalloc(&err, 4));
    CK(cudaMemset(err, 0, 4));
    for (auto k : {(const void *)k_prod, (const void *)k_cons, (const void *)k_join})
        CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, CJ_SMEM));
    int ncl = 0;
    {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(G); cfg.blockDim = dim3(CJ_T); cfg.dynamicSmemBytes = CJ_SMEM;
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = CJ_CL; at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1;
        cfg.attrs = at; cfg.numAttrs = 1;
        CK(cudaOccupancyMaxActiveClusters(&ncl, k_join, &cfg));
    }
    printf("cjoin: %d blocks (%d clusters of %d), %d KB shared memory each; at most %d such clusters resident\n", G, G / CJ_CL, CJ_CL,
           CJ_SMEM / 1024, ncl);
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    int bad = 0;
    for (int kb : {16, 72, 111}) {
        int u4 = kb * 1024 / 16;
        size_t per_iter = (size_t)G * u4;
        int rot = (int)(window / 16 / per_iter);
        float us[3];
        for (int mode = 0; mode < 3; mode++) {
            auto fn = [&](int i) {
                const uint4 *wi = w + (size_t)(i % rot) * per_iter;
                if (mode == 1) launch_join(G, st, wi, u4, i, res, err);
                else {
                    lab_launch_pdl(k_prod, G, CJ_T, CJ_SMEM, st, wi, u4, out, i);
                    /* 40 KB: it fits beside a producer block, as the fused GDN kernel beside the projection */
                    if (mode == 0) lab_launch_pdl(k_cons, G, CJ_T, (size_t)40 * 1024, st, (const float *)out, i, res, err);
                }
            };
            us[mode] = lab_graph_us(st, fn, N);
        }
        unsigned e = 0;
        CK(cudaMemcpy(&e, err, 4, cudaMemcpyDeviceToHost));
        bad += e != 0;
        printf("kb %3d: producer + consumer kernels %.2f us/iteration, cluster join %.2f, producer alone %.2f  %s\n", kb, us[0], us[1], us[2],
               e ? "FAIL (a stale value was read)" : "OK");
    }
    return bad ? 1 : 0;
}
