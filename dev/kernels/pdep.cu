/*
 * pdep.cu — lab: does a consumer kernel gain by waiting only for the producer blocks it needs
 * (per-group counters) instead of for the whole producer grid (griddepcontrol.wait)? The question
 * behind "partial dependencies instead of whole-grid waits" in NOTES.md (the in-projection -> GDN
 * step boundary of a decode step, where each GDN head needs ~1/16 of the projection's rows).
 *
 *   producer k_prod: 132 blocks x 512 threads (one per SM, like k_lgemv); block b streams `kb` KB of
 *     cold weights (a window rotated past the 60 MB L2, as a decode step's projection does), then
 *     waits for the previous consumer (griddepcontrol.wait) and writes out[b]; with counters it also
 *     bumps cnt[b / GP] (store, __threadfence, atomicAdd).
 *   consumer k_cons: 132 blocks x 256 threads; block c needs group c % NG (GP = 8 producer blocks,
 *     NG = 132 / 8 rounded up), reads their out[] and checks each carries this iteration's tag.
 *     mode 0: griddepcontrol.wait (the whole producer grid, as now); mode 1: spins on
 *     ld.acquire cnt[group] until its GP producers have arrived (no deadlock: a PDL dependent starts
 *     only after every producer block has triggered, so all of them are resident).
 * Both trigger their dependents at entry, so the next kernel's blocks are resident while one runs.
 * Reported: µs per producer + consumer pair, 64 pairs in one CUDA graph, for several kb; and the
 * producer chain alone. A wrong tag seen by any consumer fails the run.
 */
#include "lab.cuh"
#include "../../src/backend/cuda/cu_common.cuh"

/* producer blocks per group: 8 (a GDN head group's share), or all of them (an all-to-all boundary
 * such as MoE down -> next in-projection, waited for by a counter instead of griddepcontrol.wait) */

__global__ void __launch_bounds__(512) k_prod(const uint4 *w, int u4_per_block, float *out, unsigned *cnt, int counters, int gp, int iter) {
    __shared__ float red[16];
    pdl_trigger(); /* the consumer may launch now: it waits by itself */
    const uint4 *p = w + (size_t)blockIdx.x * u4_per_block;
    uint32_t x = 0;
    for (int i = threadIdx.x; i < u4_per_block; i += blockDim.x) {
        uint4 v = __ldcs(p + i);
        x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    float s = (float)(x & 1u);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
    __syncthreads();
    pdl_wait(); /* the previous consumer has read out[] */
    if (threadIdx.x == 0) {
        float t = 0.0f;
        for (int k = 0; k < 16; k++) t += red[k];
        /* the tag, with the loads' result folded in at zero weight so that they cannot be dropped */
        out[blockIdx.x] = (float)(iter * 1000 + blockIdx.x) + (t < 0.0f ? 1.0f : 0.0f);
        if (counters) {
            __threadfence();
            atomicAdd(cnt + blockIdx.x / gp, 1u);
        }
    }
}

__global__ void __launch_bounds__(256) k_cons(const float *out, const unsigned *cnt, int np, int counters, int gp, int iter, float *res, unsigned *err) {
    pdl_trigger(); /* the next producer may launch and stream its weights */
    int ng = (np + gp - 1) / gp, g = blockIdx.x % ng;
    int p0 = g * gp, pn = min(gp, np - p0);
    if (counters) {
        if (threadIdx.x == 0) {
            unsigned want = (unsigned)(pn * (iter + 1)), v;
            do asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(cnt + g) : "memory");
            while (v < want);
        }
        __syncthreads();
    } else {
        pdl_wait();
    }
    for (int j = threadIdx.x; j < pn; j += blockDim.x) {
        float v = __ldcg(out + p0 + j);
        if (v != (float)(iter * 1000 + p0 + j)) atomicAdd(err, 1u);
        if (j < 8) res[blockIdx.x * 8 + j] = v;
    }
}

int main() {
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int np = prop.multiProcessorCount, nc = prop.multiProcessorCount;
    const int N = 64;
    const size_t window = (size_t)1 << 30; /* 1 GiB of weights: 64 pairs x 132 blocks x up to 128 KB */
    uint4 *w;
    CK(cudaMalloc(&w, window));
    CK(cudaMemset(w, 0x5a, window));
    float *out, *res;
    unsigned *cnt, *err;
    CK(cudaMalloc(&out, np * 4)); CK(cudaMalloc(&res, (size_t)nc * 8 * 4));
    CK(cudaMalloc(&cnt, 64 * 4)); CK(cudaMalloc(&err, 4));
    CK(cudaMemset(err, 0, 4));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    int bad = 0;
    printf("pdep: %d producer blocks, %d consumer blocks, %d pairs per graph\n", np, nc, N);
    for (int kb : {16, 36, 72, 128}) {
        int u4 = kb * 1024 / 16;
        size_t per_iter = (size_t)np * u4; /* uint4 per iteration */
        int rot = (int)(window / 16 / per_iter);
        float us[4];
        for (int mode = 0; mode < 4; mode++) { /* 0: whole-grid wait, 1: counters (groups of 8), 2: one counter over
                                                * all producers, 3: producers alone */
            int ctr = mode == 1 || mode == 2, gp = mode == 2 ? np : 8;
            auto fn = [&](int i) {
                if (i == 0) CK(cudaMemsetAsync(cnt, 0, 64 * 4, st));
                /* iterations count from 0 in every replay: the counters are reset by the memset above */
                lab_launch_pdl(k_prod, np, 512, 0, st, (const uint4 *)(w + (size_t)(i % rot) * per_iter), u4, out, cnt, ctr, gp, i);
                if (mode < 3) lab_launch_pdl(k_cons, nc, 256, 0, st, (const float *)out, (const unsigned *)cnt, np, ctr, gp, i, res, err);
            };
            us[mode] = lab_graph_us(st, fn, N);
        }
        unsigned e = 0;
        CK(cudaMemcpy(&e, err, 4, cudaMemcpyDeviceToHost));
        bad += e != 0;
        printf("kb %3d: whole-grid wait %.2f us/pair, counters (8) %.2f, one counter (all) %.2f, producers alone %.2f us  %s\n", kb,
               us[0], us[1], us[2], us[3],
               e ? "FAIL (a consumer read a stale tag)" : "OK");
    }
    return bad ? 1 : 0;
}
