/*
 * icache.cu — does a kernel's first pass through straight-line code pay for a cold instruction cache?
 * (session 15: the flash-decoding prep took ~2 µs per head row after its loads had landed, for ~300
 * instructions; gate/up's top-k 2.5 µs; session 10's dry run of a GEMV prologue halved it.)
 *
 * k_straight<N, S>: one pass through N fused multiply-adds on 8 independent chains (distinct
 * immediates, so N distinct instructions, ~16 N bytes of code), timed by clock64 in every warp of the
 * block; the block's slowest warp is reported. Sequences on one stream:
 *   warm:   probe, probe            (the second run finds its code cached)
 *   thrash: big kernel, probe       (a kernel of ~20x the code in between, as in the decode chain)
 *   other:  other probe, probe      (a different kernel of the same size in between)
 * Cycles of the timed section at 1 and 16 warps per block, 1 and 132 blocks. A large cold/warm ratio
 * means the decode kernels' one-pass prologues are bound by instruction fetch, not by their loads.
 * Build: make build/lab/icache; run on the GPU machine.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <vector>

#define CK(x)                                                                                    \
    do {                                                                                         \
        cudaError_t e_ = (x);                                                                    \
        if (e_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));         \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

/* out[block * warps + warp] = cycles of the section in that warp; sink keeps the chains alive */
template <int N, int S>
__global__ void k_straight(unsigned long long *cyc, float *sink, float seed) {
    float a[8];
#pragma unroll
    for (int k = 0; k < 8; k++) a[k] = seed + (float)(threadIdx.x + k);
    __syncwarp();
    long long t0 = clock64();
#pragma unroll
    for (int i = 0; i < N; i++) a[i & 7] = fmaf(a[i & 7], 1.0f + (float)(S * 7919 + i) * 1e-9f, 0.5f);
    long long t1 = clock64();
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < 8; k++) s += a[k];
    if (s == 12345.678f) sink[threadIdx.x] = s; /* never true in practice: the chains stay live */
    if ((threadIdx.x & 31) == 0) cyc[blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)] = (unsigned long long)(t1 - t0);
}

#define NP 1024   /* the probe: 1024 instructions, ~16 KB of code */
#define NB 20000  /* the thrash kernel: ~320 KB of code */

static unsigned long long slowest(unsigned long long *d, int n) {
    std::vector<unsigned long long> h(n);
    CK(cudaMemcpy(h.data(), d, n * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    return *std::max_element(h.begin(), h.end());
}

int main(void) {
    int nsm = 0;
    CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
    unsigned long long *cyc, *cyc2;
    float *sink;
    CK(cudaMalloc(&cyc, 4096 * sizeof(unsigned long long)));
    CK(cudaMalloc(&cyc2, 4096 * sizeof(unsigned long long)));
    CK(cudaMalloc(&sink, 4096 * sizeof(float)));
    int shapes[4][2] = {{1, 32}, {1, 512}, {nsm, 32}, {nsm, 512}};
    printf("icache: probe %d FMAs on 8 chains (~%d KB of code), thrash kernel %d (~%d KB); cycles of the timed\n"
           "section, slowest warp, median of 9 repeats\n", NP, NP * 16 / 1024, NB, NB * 16 / 1024);
    printf("%8s %8s %10s %10s %10s %10s\n", "blocks", "threads", "first", "warm", "thrash", "other");
    for (auto &sh : shapes) {
        int G = sh[0], T = sh[1], n = G * T / 32;
        std::vector<unsigned long long> first, warm, thr, oth;
        for (int r = 0; r < 9; r++) {
            k_straight<NB, 1><<<G, T>>>(cyc2, sink, 1.0f); /* evict the probe's code */
            k_straight<NP, 0><<<G, T>>>(cyc, sink, 1.0f);
            CK(cudaDeviceSynchronize());
            first.push_back(slowest(cyc, n));
            k_straight<NP, 0><<<G, T>>>(cyc, sink, 1.0f);
            CK(cudaDeviceSynchronize());
            warm.push_back(slowest(cyc, n));
            k_straight<NB, 1><<<G, T>>>(cyc2, sink, 1.0f);
            k_straight<NP, 0><<<G, T>>>(cyc, sink, 1.0f);
            CK(cudaDeviceSynchronize());
            thr.push_back(slowest(cyc, n));
            k_straight<NP, 2><<<G, T>>>(cyc2, sink, 1.0f);
            k_straight<NP, 0><<<G, T>>>(cyc, sink, 1.0f);
            CK(cudaDeviceSynchronize());
            oth.push_back(slowest(cyc, n));
        }
        auto med = [](std::vector<unsigned long long> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
        printf("%8d %8d %10llu %10llu %10llu %10llu\n", G, T, med(first), med(warm), med(thr), med(oth));
    }
    CK(cudaGetLastError());
    printf("(at 1.98 GHz, 1000 cycles = 0.5 µs; a warm single warp issues ~1 instruction per cycle)\n");
    return 0;
}
