/*
 * bulkbw.cu — lab: how fast do the tiles of one lean-kernel-like launch arrive? Every block of a
 * 132-block grid (one per SM, as the lean decode kernels) requests B bytes into shared memory at
 * entry and waits for all of them; the launch is timed alone (events around 40 launches, each on a
 * fresh part of a 4 GB buffer so that nothing is in L2) and the figure is bytes / time.
 *   bulk N x S   thread 0 issues N cp.async.bulk copies of S bytes on one mbarrier (the lean kernels:
 *                6 x 18 KB for the GDN in-projection)
 *   async        all 512 threads issue 16-byte cp.async for the same bytes, then wait_all
 * The question (session 6 trace): a lean block's last tile lands ~5 µs after its first, i.e. its
 * 108 KB arrive at ~20 GB/s. Is that the copy engine of one SM (bulk), the DRAM, or the launch?
 * Session 7 added equal-byte configs cut into many small copies: the fused MoE kernel's trace said a
 * copy issued after the top-k costs ~150 ns of the copy engine whatever its size.
 * Output: per config, µs per launch and GB/s over the grid; then (session 9) the lm head's tiles
 * streamed through a ring, four copies per tile vs one (k_ring).
 */
#include "lab.cuh"
#include "../../src/backend/cuda/k_gemvq.cuh"

#define BB_THREADS 512

/* mode 0: bulk copies of S bytes, N of them; mode 1: cp.async 16 B by every thread */
__global__ void __launch_bounds__(BB_THREADS) k_bb(const uint8_t *src, int N, int S, int mode, unsigned *sink) {
    extern __shared__ __align__(16) uint8_t sm[];
    __shared__ __align__(8) uint64_t bar;
    size_t B = (size_t)N * S;
    const uint8_t *p = src + (size_t)blockIdx.x * B;
    if (mode == 0) {
        if (threadIdx.x == 0) {
            mbar_init(&bar, 1);
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
            mbar_expect_tx(&bar, (uint32_t)B);
            for (int i = 0; i < N; i++) bulk_g2s(sm + (size_t)i * S, p + (size_t)i * S, (uint32_t)S, &bar);
        }
        __syncthreads();
        mbar_wait(&bar, 0);
    } else {
        for (size_t o = (size_t)threadIdx.x * 16; o < B; o += (size_t)BB_THREADS * 16)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_u32(sm + o)), "l"(p + o) : "memory");
        asm volatile("cp.async.wait_all;" ::: "memory");
        __syncthreads();
    }
    if (threadIdx.x == 0 && B && sm[0] == 0xfe && sm[B - 1] == 0xfd) atomicAdd(sink, 1u); /* keep the copies */
}

/* Session 9: the same question in steady state, for the lm head (decode's largest kernel, ~137 µs at
 * ~3.05 TB/s): each block streams T tiles through an NST-stage ring as k_lgemv<true> does, each tile
 * issued as the given copies (the Q6_K planes of 16 rows x 2048: ql 16 KB, qh 8 KB, scales 2 KB,
 * d 256 B; or the same 26.25 KB as one copy, a tile-contiguous layout), every thread reading its
 * 16 bytes of each landed stage before thread 0 refills it. No dot products: the copy engine and
 * the DRAM alone. */
#define RING_MAXC 4
struct ring_cfg { int nc, sz[RING_MAXC]; };
__global__ void __launch_bounds__(BB_THREADS) k_ring(const uint8_t *src, int T, int NST, ring_cfg c, unsigned *sink) {
    extern __shared__ __align__(16) uint8_t sm[];
    __shared__ __align__(8) uint64_t bar[8];
    int S = 0;
    for (int k = 0; k < c.nc; k++) S += c.sz[k];
    const uint8_t *p = src + (size_t)blockIdx.x * T * S;
    auto issue = [&](int i) {
        uint8_t *dst = sm + (size_t)(i % NST) * S;
        mbar_expect_tx(&bar[i % NST], (uint32_t)S);
        size_t o = 0;
        for (int k = 0; k < c.nc; k++) { /* plane k of tile i: adjacent here (apart in the SoA layout); the copy count is what differs */
            bulk_g2s(dst + o, p + (size_t)i * S + o, (uint32_t)c.sz[k], &bar[i % NST]);
            o += c.sz[k];
        }
    };
    if (threadIdx.x == 0) {
        for (int i = 0; i < NST; i++) mbar_init(&bar[i], 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        for (int i = 0; i < NST && i < T; i++) issue(i);
    }
    __syncthreads();
    unsigned acc = 0;
    for (int i = 0; i < T; i++) {
        mbar_wait(&bar[i % NST], (uint32_t)((i / NST) & 1));
        const uint8_t *st = sm + (size_t)(i % NST) * S;
        for (int o = threadIdx.x * 16; o < S; o += BB_THREADS * 16) acc += *(const unsigned *)(st + o);
        __syncthreads();
        if (threadIdx.x == 0 && i + NST < T) {
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            issue(i + NST);
        }
    }
    if (acc == 0x12345678u) atomicAdd(sink, 1u); /* keep the reads */
}

/* bps blocks per SM (grid nsm * bps); a stage of S bytes holds 15520 * 26880 / (T * grid) tiles */
static void ring_run(const uint8_t *buf, size_t total, unsigned *sink, int nsm, const char *name, ring_cfg c, int NST, int bps = 1) {
    int S = 0;
    for (int k = 0; k < c.nc; k++) S += c.sz[k];
    int T = (int)((15520LL * 26880 / S) / (nsm * bps)) + 1; /* the lm head's bytes (16-row tiles of 248320 rows) per block */
    nsm *= bps;
    size_t per = (size_t)T * S * nsm, smem = (size_t)NST * S;
    CK(cudaFuncSetAttribute(k_ring, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    k_ring<<<nsm, BB_THREADS, smem>>>(buf, T, NST, c, sink);
    CK(cudaDeviceSynchronize());
    float sum = 0.0f;
    size_t off = 0;
    for (int it = 0; it < 10; it++) {
        off = (off + per + 4096) % (total - per);
        off &= ~(size_t)127;
        CK(cudaEventRecord(e0));
        k_ring<<<nsm, BB_THREADS, smem>>>(buf + off, T, NST, c, sink);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms = 0.0f;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        sum += ms;
    }
    double us = sum * 1000.0 / 10;
    printf("ring %-22s %d stages: %4d tiles x %6d B per block, %8.1f us, %6.0f GB/s\n", name, NST, T, S, us, per / (us * 1e3));
}

/* Session 20: the lm head's bytes through registers instead of the copy engine. The probe in
 * cuda_measure_read_bw (plain 16-byte loads, grid-stride) reads ~4.5 TB/s where the ring above
 * peaks at ~3.6: does a warp-per-row GEMV-shaped read of the Q6_K planes (ql 1024 B, qh 512 B,
 * scales 128 B and d 16 B per row of 2048; lane = 64-value chunk, as ln_dot_q6k reads them) get
 * the probe's rate? R rows in flight per warp, bps blocks of 512 threads per SM. */
template <int R>
__global__ void __launch_bounds__(BB_THREADS) k_lsu(const uint8_t *ql, const uint8_t *qh, const uint8_t *sc, const uint8_t *dd, int rows,
                                                   unsigned *sink) {
    int lane = threadIdx.x & 31, c = lane, b = c >> 2, n = (c >> 1) & 1;
    int w = (blockIdx.x * BB_THREADS + threadIdx.x) >> 5, nw = (gridDim.x * BB_THREADS) >> 5;
    unsigned acc = 0;
    for (int r0 = w * R; r0 < rows; r0 += nw * R) {
        uint4 l0[R], l1[R], h0[R], h1[R];
        uint2 s2[R];
        unsigned short d[R];
#pragma unroll
        for (int k = 0; k < R; k++) {
            int row = r0 + k < rows ? r0 + k : rows - 1;
            const uint8_t *pl = ql + (size_t)row * 1024 + 32 * c, *ph = qh + ((size_t)row * 8 + b) * 64 + 32 * n;
            l0[k] = __ldcs((const uint4 *)pl);
            l1[k] = __ldcs((const uint4 *)(pl + 16));
            h0[k] = __ldcs((const uint4 *)ph);
            h1[k] = __ldcs((const uint4 *)(ph + 16));
            s2[k] = __ldcs((const uint2 *)(sc + ((size_t)row * 8 + b) * 16 + 8 * n));
            d[k] = __ldcs((const unsigned short *)(dd + ((size_t)row * 8 + b) * 2));
        }
#pragma unroll
        for (int k = 0; k < R; k++) acc ^= l0[k].x ^ l1[k].w ^ h0[k].y ^ h1[k].z ^ s2[k].x ^ d[k];
    }
    if (acc == 0x12345678u) atomicAdd(sink, 1u); /* keep the loads */
}

template <int R>
static void lsu_run(const uint8_t *buf, size_t total, unsigned *sink, int nsm, int bps) {
    const int rows = 248320;
    size_t per = (size_t)rows * (1024 + 512 + 128 + 16), off = 0;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float sum = 0.0f;
    for (int it = 0; it < 11; it++) {
        off = (off + per + 4096) % (total - per);
        off &= ~(size_t)4095;
        const uint8_t *ql = buf + off, *qh = ql + (size_t)rows * 1024, *sc = qh + (size_t)rows * 512, *dd = sc + (size_t)rows * 128;
        CK(cudaEventRecord(e0));
        k_lsu<R><<<nsm * bps, BB_THREADS>>>(ql, qh, sc, dd, rows, sink);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms = 0.0f;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (it > 0) sum += ms;
    }
    double us = sum * 1000.0 / 10;
    printf("lsu  warp-per-row Q6_K planes, %d rows in flight per warp, %d blocks/SM: %8.1f us, %6.0f GB/s\n", R, bps, us, per / (us * 1e3));
}

int main() {
    int nsm = 0;
    CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
    size_t total = (size_t)4 << 30;
    uint8_t *buf;
    unsigned *sink;
    CK(cudaMalloc(&buf, total));
    CK(cudaMalloc(&sink, 4));
    CK(cudaMemset(buf, 1, total));
    CK(cudaFuncSetAttribute(k_bb, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    struct cfg { int N, S, mode; } cs[] = {
        {6, 18432, 0}, {12, 9216, 0}, {3, 36864, 0}, {1, 110592, 0}, {24, 4608, 0}, {2, 18432, 0}, {1, 18432, 0},
        {10, 18432, 0}, {6, 18432, 1}, {2, 18432, 1}, {10, 18432, 1},
        /* session 7: does a copy's count cost more than its bytes? ~41 KB per block as the MoE down's
         * two tiles (36 copies of 2 KB and 224 B there), as 2 x 20.7 KB, and as 256 B copies */
        {36, 1152, 0}, {2, 20736, 0}, {162, 256, 0}, {81, 512, 0}, {20, 2048, 0},
    };
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    printf("# %d blocks (one per SM), 512 threads; each launch alone, fresh bytes (not in L2)\n", nsm);
    printf("%-8s %4s %8s %10s %12s %10s\n", "mode", "N", "S(B)", "KB/block", "us/launch", "GB/s");
    for (const cfg &c : cs) {
        size_t B = (size_t)c.N * c.S, per = B * nsm;
        int iters = 40;
        size_t off = 0;
        for (int w = 0; w < 3; w++) k_bb<<<nsm, BB_THREADS, B>>>(buf, c.N, c.S, c.mode, sink);
        CK(cudaDeviceSynchronize());
        float ms_sum = 0.0f;
        for (int it = 0; it < iters; it++) {
            off = (off + per + 4096) % (total - per);
            off &= ~(size_t)127;
            CK(cudaEventRecord(e0));
            k_bb<<<nsm, BB_THREADS, B>>>(buf + off, c.N, c.S, c.mode, sink);
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            float ms = 0.0f;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            ms_sum += ms;
        }
        double us = ms_sum * 1000.0 / iters;
        printf("%-8s %4d %8d %10.1f %12.2f %10.0f\n", c.mode ? "async" : "bulk", c.N, c.S, B / 1024.0, us, per / (us * 1e3));
    }
    /* the floor of a launch: an empty k_bb (N = 0) */
    CK(cudaEventRecord(e0));
    for (int it = 0; it < 40; it++) k_bb<<<nsm, BB_THREADS, 0>>>(buf, 0, 16, 1, sink);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    printf("empty launch (back to back): %.2f us\n", ms * 1000.0 / 40);
    /* session 10: is the ~3.5 µs before a cold launch's first bytes address translation? The same
     * 3 x 36 KB per block, the fresh offsets rotating through windows of 256 MB .. 4 GB (all past
     * the L2; a TLB covering the smaller windows would show as a shorter launch there) */
    for (size_t win = (size_t)256 << 20; win <= total; win <<= 2) {
        size_t per = (size_t)3 * 36864 * nsm, off = 0;
        float ms_sum = 0.0f;
        for (int it = 0; it < 60; it++) {
            off = (off + per + 4096) % (win - per);
            off &= ~(size_t)127;
            CK(cudaEventRecord(e0));
            k_bb<<<nsm, BB_THREADS, 3 * 36864>>>(buf + off, 3, 36864, 0, sink);
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            float m = 0.0f;
            CK(cudaEventElapsedTime(&m, e0, e1));
            if (it >= 20) ms_sum += m;
        }
        printf("window %5zu MB: bulk 3 x 36864 B per block, %.2f us per launch\n", win >> 20, ms_sum * 1000.0 / 40);
    }
    /* steady-state streaming of the lm head's tiles: four planes vs one copy */
    ring_cfg planes = {4, {16384, 8192, 2048, 256}}, one = {1, {26880, 0, 0, 0}};
    for (int nst = 3; nst <= 4; nst++) {
        ring_run(buf, total, sink, nsm, "Q6_K planes (4 copies)", planes, nst);
        ring_run(buf, total, sink, nsm, "tile-contiguous (1)", one, nst);
    }
    /* session 10: the ring got ~3.4 TB/s where bulk launches of 180 KB reach ~4.3 TB/s. Bigger
     * stages (2 tiles), deeper rings, two blocks per SM */
    ring_cfg two = {1, {53760, 0, 0, 0}}, half = {1, {13440, 0, 0, 0}};
    ring_run(buf, total, sink, nsm, "2 tiles per stage", two, 3);
    ring_run(buf, total, sink, nsm, "2 tiles per stage", two, 4);
    ring_run(buf, total, sink, nsm, "1 tile, 6 stages", one, 6);
    ring_run(buf, total, sink, nsm, "1 tile, 2 blocks/SM", one, 3, 2);
    ring_run(buf, total, sink, nsm, "1 tile, 2 blocks/SM", one, 4, 2);
    ring_run(buf, total, sink, nsm, "half tile, 8 stages", half, 8);
    lsu_run<1>(buf, total, sink, nsm, 2);
    lsu_run<2>(buf, total, sink, nsm, 2);
    lsu_run<4>(buf, total, sink, nsm, 2);
    lsu_run<1>(buf, total, sink, nsm, 4);
    lsu_run<2>(buf, total, sink, nsm, 4);
    return 0;
}
