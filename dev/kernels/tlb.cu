/*
 * tlb.cu — lab: does a bulk copy from a random expert's rows pay for address translation?
 * (session 15 trace: MoE gate/up's first routed stage, 4 bulk copies of gate.q / gate.sc / up.q /
 * up.sc of one expert, took 1.4 µs to issue and 2.7 µs to land, on an SM with little else in
 * flight. The expert matrices of the model span ~18 GB; one token touches ~24-56 of their 2 MB pages
 * per layer, each once, so no TLB keeps them.)
 *
 * k_probe: one block of 32 threads per SM; thread 0 requests one gate/up-like tile (16 KB + 2 KB +
 * 16 KB + 2 KB from four regions, one mbarrier) at a random 2 MB page of each region and a random
 * 16 KB-aligned offset in it, and times issue (clock64 before the first copy to after the last) and
 * land (to the mbarrier's completion). Each launch follows a 256 MB write that flushes the 50 MB L2,
 * so the bytes come from DRAM every time; only the number of distinct pages P per region differs:
 *   P = 8       the pages' translations stay cached across launches (warm)
 *   P = 256 .. 8192   a random page of 512 MB .. 16 GB per region (the model's expert span)
 * pre: thread 0 first touches the four addresses with one 4-byte load each (translation and one
 * line), waits for the loads, then times the copies (does an early touch move the cost?).
 * one: a single 36 KB copy from one region (one page instead of four).
 * Output per config: median / max over blocks of issue and land, µs. Build: make build/lab/tlb.
 */
#include "lab.cuh"
#include "../../src/backend/cuda/k_gemvq.cuh"

#define PG (2u << 20)

/* out[2 * block] = issue cycles, out[2 * block + 1] = land cycles */
__global__ void k_probe(const uint8_t *buf, size_t region, uint32_t P, uint32_t seed, int mode, unsigned long long *out, unsigned *sink) {
    extern __shared__ __align__(16) uint8_t sm[];
    __shared__ __align__(8) uint64_t bar;
    if (threadIdx.x != 0) return;
    mbar_init(&bar, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    const int nreg = mode == 2 ? 1 : 4;
    const uint32_t sz[4] = {16384, 2048, 16384, 2048};
    const uint8_t *src[4];
    size_t stride = region / P; /* pages spread over the whole region */
    stride &= ~(size_t)(PG - 1);
    for (int r = 0; r < nreg; r++) {
        uint32_t h = lab_hash32(seed * 2654435761u + blockIdx.x * 97u + r * 7919u);
        size_t page = h % P, off = (size_t)(lab_hash32(h + 1) % (PG / 16384 - 2)) * 16384;
        src[r] = buf + (size_t)r * region + page * stride + off;
    }
    if (mode == 1) { /* touch first: translation (and one line) of each address */
        unsigned s = 0;
        for (int r = 0; r < nreg; r++) s += *(const volatile unsigned *)src[r];
        if (s == 0xdeadbeefu) atomicAdd(sink, s);
    }
    long long t0 = clock64();
    if (mode == 2) {
        mbar_expect_tx(&bar, 36864);
        bulk_g2s(sm, src[0], 36864, &bar);
    } else {
        mbar_expect_tx(&bar, 36864);
        uint32_t o = 0;
        for (int r = 0; r < 4; r++) { bulk_g2s(sm + o, src[r], sz[r], &bar); o += sz[r]; }
    }
    long long t1 = clock64();
    mbar_wait(&bar, 0);
    long long t2 = clock64();
    if (*(const unsigned *)(sm + 64) == 0xdeadbeefu) atomicAdd(sink, 1u);
    out[2 * blockIdx.x] = (unsigned long long)(t1 - t0);
    out[2 * blockIdx.x + 1] = (unsigned long long)(t2 - t0);
}

int main() {
    int nsm = 0, khz = 0;
    CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
    size_t freeb = 0, totb = 0;
    CK(cudaMemGetInfo(&freeb, &totb));
    size_t region = (size_t)16 << 30; /* 4 regions x 16 GB = 64 GB */
    while (4 * region + ((size_t)1 << 30) > freeb) region >>= 1;
    uint8_t *buf, *fl;
    unsigned *sink;
    unsigned long long *out;
    CK(cudaMalloc(&buf, 4 * region));
    CK(cudaMalloc(&fl, (size_t)256 << 20));
    CK(cudaMalloc(&sink, 4));
    CK(cudaMalloc(&out, 2 * nsm * sizeof(unsigned long long)));
    CK(cudaMemset(buf, 1, 4 * region)); /* every page mapped and written once */
    CK(cudaFuncSetAttribute(k_probe, cudaFuncAttributeMaxDynamicSharedMemorySize, 40 * 1024));
    printf("# %d SMs, %.0f MHz; 4 regions of %zu MB; one 36 KB tile per block per launch, L2 flushed before each\n", nsm, khz / 1e3,
           region >> 20);
    printf("%-6s %6s %6s | %9s %9s | %9s %9s (us)\n", "mode", "P", "span", "issue med", "issue max", "land med", "land max");
    const char *mn[3] = {"plain", "pre", "one"};
    uint32_t Ps[] = {8, 256, 2048, 8192};
    std::vector<unsigned long long> h(2 * nsm);
    for (int mode = 0; mode < 3; mode++)
        for (uint32_t P : Ps) {
            if ((size_t)P * PG > region) continue;
            std::vector<double> im, ix, lm, lx;
            for (int it = 0; it < 40; it++) {
                lab_k_flush<<<4 * nsm, 512>>>((uint4 *)fl, ((size_t)256 << 20) / 16);
                k_probe<<<nsm, 32, 40 * 1024>>>(buf, region, P, 1000u * mode + 17u * P + it, mode, out, sink);
                CK(cudaDeviceSynchronize());
                if (it < 4) continue; /* the warm case needs its pages seen once */
                CK(cudaMemcpy(h.data(), out, h.size() * 8, cudaMemcpyDeviceToHost));
                lab_probe_stats(h, nsm, khz, im, ix, lm, lx);
            }
            printf("%-6s %6u %5zuM | %9.2f %9.2f | %9.2f %9.2f\n", mn[mode], P, ((size_t)P * PG) >> 20, lab_median(im),
                   lab_median(ix), lab_median(lm), lab_median(lx));
        }
    CK(cudaGetLastError());
    return 0;
}
