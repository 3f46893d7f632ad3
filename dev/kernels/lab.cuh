/*
 * lab.cuh — helpers for the kernel lab (dev/kernels/*.cu, llm.c dev/cuda style): each lab program
 * builds random inputs, runs numbered kernel variants, checks them against a CPU reference and
 * prints time and achieved bandwidth. Build with `make lab`; run build/lab/<name> on the GPU.
 * The kernels under test are the backend's own (src/backend/cuda/k_*.cuh), so a lab result is a
 * result for the engine.
 */
#ifndef LILAC_LAB_CUH
#define LILAC_LAB_CUH

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

#define CK(x)                                                                                        \
    do {                                                                                             \
        cudaError_t e_ = (x);                                                                        \
        if (e_ != cudaSuccess) {                                                                     \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));      \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)

static uint64_t lab_rng_state = 88172645463325252ull;
static inline uint32_t lab_u32() {
    lab_rng_state ^= lab_rng_state << 13; lab_rng_state ^= lab_rng_state >> 7; lab_rng_state ^= lab_rng_state << 17;
    return (uint32_t)(lab_rng_state >> 16);
}
static inline float lab_uniform(float lo, float hi) { return lo + (hi - lo) * (lab_u32() >> 8) * (1.0f / 16777216.0f); }

static inline float lab_h2f(uint16_t h) {
    uint32_t s = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(m | 1024), (int)e - 25);
    return s ? -v : v;
}

/* Median of `reps` timed runs (CUDA events) of fn(i), i = run index (for rotating buffers). */
template <typename F> static float lab_time_ms(F fn, int reps = 50) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    for (int i = 0; i < 5; i++) fn(i);
    CK(cudaDeviceSynchronize());
    std::vector<float> t;
    for (int i = 0; i < reps; i++) {
        CK(cudaEventRecord(a));
        fn(i);
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms; CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    CK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

/* Launch with programmatic dependent launch allowed (what decode does). */
template <typename... KArgs, typename... Args>
static void lab_launch_pdl(void (*kern)(KArgs...), int grid, int block, size_t smem, cudaStream_t st, Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid); cfg.blockDim = dim3(block); cfg.dynamicSmemBytes = smem; cfg.stream = st;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at; cfg.numAttrs = 1;
    CK(cudaLaunchKernelEx(&cfg, kern, args...));
}

/* Per-launch µs of N launches of fn(i) captured in one CUDA graph (median of 7 replays). */
template <typename F> static float lab_graph_us(cudaStream_t st, F fn, int N) {
    cudaGraph_t g; cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < N; i++) fn(i);
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    std::vector<float> t;
    for (int r = 0; r < 7; r++) {
        CK(cudaEventRecord(e0, st)); CK(cudaGraphLaunch(ge, st)); CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); t.push_back(ms);
    }
    CK(cudaGetLastError());
    cudaGraphExecDestroy(ge); cudaGraphDestroy(g);
    std::sort(t.begin(), t.end());
    return t[3] * 1e3f / N;
}

/* ‖got − ref‖ / ‖ref‖ and max abs error. */
static inline double lab_relerr(const float *ref, const float *got, size_t n, double *maxabs) {
    double num = 0, den = 0, ma = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - ref[i];
        if (d != d) { *maxabs = INFINITY; return INFINITY; }
        num += d * d; den += (double)ref[i] * ref[i];
        if (fabs(d) > ma) ma = fabs(d);
    }
    *maxabs = ma;
    return sqrt(num / (den > 0 ? den : 1));
}

/* ---- probes that time one request per SM (tlb.cu, tmaq.cu) */

/* A 32-bit mix (random pages and offsets from a seed, the same on host and device). */
__host__ __device__ __forceinline__ uint32_t lab_hash32(uint32_t x) {
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    return x;
}

/* Writes n 16-byte words: launched before a probe, it pushes the probe's bytes out of the 50 MB L2. */
__global__ void lab_k_flush(uint4 *p, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = make_uint4(i, 1, 2, 3);
}

/* One launch's per-block (issue, land) cycle pairs h[2b], h[2b+1] as µs: the median and the max over
 * the nb blocks of each, appended to im / ix / lm / lx. */
static inline void lab_probe_stats(const std::vector<unsigned long long> &h, int nb, int khz, std::vector<double> &im,
                                   std::vector<double> &ix, std::vector<double> &lm, std::vector<double> &lx) {
    std::vector<double> a(nb), b(nb);
    for (int i = 0; i < nb; i++) { a[i] = h[2 * i] / (khz * 1e-3); b[i] = h[2 * i + 1] / (khz * 1e-3); }
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    im.push_back(a[nb / 2]); ix.push_back(a[nb - 1]); lm.push_back(b[nb / 2]); lx.push_back(b[nb - 1]);
}

static inline double lab_median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

#endif
