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

#endif
