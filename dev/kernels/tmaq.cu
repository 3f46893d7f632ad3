/*
 * tmaq.cu — lab: does an SM's bulk L2 prefetch (or its tile copies) delay another block's tile copy
 * issued on the same SM a little later? (session 25, written without a device; run it in the next
 * session's first call.)
 *
 * The question: in the in-graph trace (session 24 call 9) MoE gate/up's first routed stage lands ~4 µs
 * after its request, against ~2.4 µs for a cold tile when every SM asks at once (lab tlb). The MoE
 * down's blocks enter ~1 µs after gate/up's wait, on the same SMs, and right away ask the copy
 * engine for 18-36 tile copies (their routed rows) and ~106 KB each of bulk L2 prefetch (the next
 * layer's input projection, LILAC_CUDA_PFNEXT=2). If one SM's copy engine works through its queue in
 * order, gate/up's four copies wait behind all of that: a per-SM queue, not the DRAM. The engine's
 * experiment for the same question is -DLN_PFLSU (the prefetch as per-thread prefetch.global.L2).
 *
 * k_q: one block of 64 threads per SM (two warps). Warp 1 plays the down's entry burst, by mode:
 *   none     nothing
 *   pfb      lane 0: bulk prefetch (cp.async.bulk.prefetch.L2) of PF bytes, <= 1 MB per request
 *   pfl      all 32 lanes: prefetch.global.L2 of the same PF bytes, a 128-byte line each
 *   cp       lane 0: NC bulk copies of CS bytes into shared memory (the down's routed rows)
 *   cp+pfb   both, copies first (the engine's order today)
 *   cp+pfl   both, the prefetch by lines (LN_PFLSU)
 *   pf-own   lane 0: bulk prefetch of the very bytes warp 0 will copy (a prefetch of lines that a
 *            copy then asks for while they are in flight: session 19's gate/up prefetch of the down's
 *            rows lost 219 tok/s, not understood)
 *   pf-nbr   the same for the next block's stage (bytes another SM copies)
 * Warp 0 lane 0 waits D ns after the block's entry, then asks for one gate/up-like stage (16 KB +
 * 2 KB + 16 KB + 2 KB from four random 2 MB pages, one mbarrier) and times issue and land. The L2 is
 * flushed before every launch, so every byte comes from DRAM. Output: per mode and D, the median and
 * max over blocks (median of 36 launches) of issue and land in µs.
 * Reading it: if land(cp+pfb) - land(cp) is ~1 µs or more and land(cp+pfl) is close to land(cp), the
 * copy engine's queue is the delay and LN_PFLSU's direction is right; if every mode lands alike,
 * the DRAM is (hypothesis 2b of docs/notes.md) and the prefetch's path does not matter.
 * Build: make build/lab/tmaq (make lab).
 */
#include "lab.cuh"
#include "../../src/backend/cuda/k_gemvq.cuh"

#define TQ_PG (2u << 20)
#define TQ_TILE 36864
#define TQ_NC 18     /* the down's entry copies per block (2 planes x 9 slots of a Q4_K stage) */
#define TQ_CS 2304   /* bytes per copy: 16 rows x 144 B (one 256-column superblock row each) */

__device__ __forceinline__ unsigned long long tq_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}

enum { TQ_NONE, TQ_PFB, TQ_PFL, TQ_CP, TQ_CP_PFB, TQ_CP_PFL, TQ_PF_OWN, TQ_PF_NBR, TQ_NMODE };

/* The four source ranges of block b's gate/up-like stage (16 KB + 2 KB + 16 KB + 2 KB, random pages). */
__device__ __forceinline__ void tq_sources(const uint8_t *buf, size_t region, uint32_t seed, int b, const uint8_t **src) {
    size_t P = region / TQ_PG;
    for (int r = 0; r < 4; r++) {
        uint32_t h = lab_hash32(seed * 2654435761u + b * 97u + r * 7919u);
        size_t page = h % P, off = (size_t)(lab_hash32(h + 1) % (TQ_PG / 16384 - 2)) * 16384;
        src[r] = buf + (size_t)r * region + page * TQ_PG + off;
    }
}

__constant__ uint32_t tq_sz[4] = {16384, 2048, 16384, 2048};

/* buf: 4 regions of `region` bytes (gate/up tile sources) then the prefetch / copy region `pfr`
 * (PF bytes per block, contiguous per block as the engine's shares). out[2b] issue, out[2b+1] land
 * (clock cycles). */
__global__ void __launch_bounds__(64) k_q(const uint8_t *buf, size_t region, const uint8_t *pfr, uint32_t PF, int mode, int D,
                                         uint32_t seed, unsigned long long *out, unsigned *sink) {
    extern __shared__ __align__(16) uint8_t sm[];
    __shared__ __align__(8) uint64_t bar[2];
    unsigned long long t_in = tq_ns();
    if (threadIdx.x == 0) {
        mbar_init(&bar[0], 1);
        mbar_init(&bar[1], 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    const uint8_t *mine = pfr + (size_t)blockIdx.x * (PF + TQ_NC * TQ_CS); /* copies, then the prefetch */
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (warp == 1) {
        bool cp = mode == TQ_CP || mode == TQ_CP_PFB || mode == TQ_CP_PFL;
        if (cp && lane == 0) {
            mbar_expect_tx(&bar[1], TQ_NC * TQ_CS);
            for (int i = 0; i < TQ_NC; i++) bulk_g2s(sm + TQ_TILE + i * TQ_CS, mine + (size_t)i * TQ_CS, TQ_CS, &bar[1]);
        }
        const uint8_t *pf = mine + (cp ? TQ_NC * TQ_CS : 0); /* not the copied bytes */
        if ((mode == TQ_PFB || mode == TQ_CP_PFB) && lane == 0)
            for (uint32_t k = 0; k < PF; k += (1u << 20)) {
                uint32_t m = PF - k < (1u << 20) ? PF - k : (1u << 20);
                asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(pf + k), "r"(m & ~15u) : "memory");
            }
        if (mode == TQ_PFL || mode == TQ_CP_PFL)
            for (uint32_t k = 128u * lane; k < PF; k += 128u * 32)
                asm volatile("prefetch.global.L2 [%0];" ::"l"(pf + k) : "memory");
        if ((mode == TQ_PF_OWN || mode == TQ_PF_NBR) && lane == 0) { /* the stage's own bytes, or the next block's */
            const uint8_t *o[4];
            tq_sources(buf, region, seed, mode == TQ_PF_OWN ? blockIdx.x : (blockIdx.x + 1) % gridDim.x, o);
            for (int r = 0; r < 4; r++) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(o[r]), "r"(tq_sz[r]) : "memory");
        }
        if (cp && lane == 0) mbar_wait(&bar[1], 0);
        return;
    }
    if (lane != 0) return;
    const uint8_t *src[4];
    tq_sources(buf, region, seed, blockIdx.x, src);
    while (tq_ns() - t_in < (unsigned long long)D) {}
    long long t0 = clock64();
    mbar_expect_tx(&bar[0], TQ_TILE);
    uint32_t o = 0;
    for (int r = 0; r < 4; r++) { bulk_g2s(sm + o, src[r], tq_sz[r], &bar[0]); o += tq_sz[r]; }
    long long t1 = clock64();
    mbar_wait(&bar[0], 0);
    long long t2 = clock64();
    if (*(const unsigned *)(sm + 64) == 0xdeadbeefu) atomicAdd(sink, 1u);
    out[2 * blockIdx.x] = (unsigned long long)(t1 - t0);
    out[2 * blockIdx.x + 1] = (unsigned long long)(t2 - t0);
}

int main() {
    int nsm = 0, khz = 0;
    CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
    size_t region = (size_t)1 << 30; /* 4 x 1 GB of expert-like rows */
    const uint32_t PFs[] = {106 * 1024, 256 * 1024};
    size_t pfbytes = (size_t)nsm * (256 * 1024 + TQ_NC * TQ_CS);
    uint8_t *buf, *pfr, *fl;
    unsigned *sink;
    unsigned long long *out;
    CK(cudaMalloc(&buf, 4 * region));
    CK(cudaMalloc(&pfr, pfbytes * 2));
    CK(cudaMalloc(&fl, (size_t)256 << 20));
    CK(cudaMalloc(&sink, 4));
    CK(cudaMalloc(&out, 2 * nsm * sizeof(unsigned long long)));
    CK(cudaMemset(buf, 1, 4 * region));
    CK(cudaMemset(pfr, 2, pfbytes * 2));
    size_t smem = TQ_TILE + TQ_NC * TQ_CS;
    CK(cudaFuncSetAttribute(k_q, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    printf("# %d SMs, %.0f MHz; per block: one 36 KB gate/up-like stage (4 copies) after D ns, beside the 'down' warp's burst;"
           " L2 flushed before each launch\n", nsm, khz / 1e3);
    printf("%-7s %7s %5s | %9s %9s | %9s %9s (us)\n", "mode", "PF", "D ns", "issue med", "issue max", "land med", "land max");
    const char *mn[TQ_NMODE] = {"none", "pfb", "pfl", "cp", "cp+pfb", "cp+pfl", "pf-own", "pf-nbr"};
    const int Ds[] = {0, 300, 1000};
    std::vector<unsigned long long> h(2 * nsm);
    for (uint32_t PF : PFs)
        for (int D : Ds)
            for (int mode = 0; mode < TQ_NMODE; mode++) {
                if (PF != PFs[0] && (mode == TQ_NONE || mode == TQ_CP || mode >= TQ_PF_OWN)) continue; /* PF does not matter there */
                std::vector<double> im, ix, lm, lx;
                for (int it = 0; it < 40; it++) {
                    lab_k_flush<<<4 * nsm, 512>>>((uint4 *)fl, ((size_t)256 << 20) / 16);
                    k_q<<<nsm, 64, smem>>>(buf, region, pfr + (it & 1) * pfbytes, PF, mode, D, 1000u * mode + 31u * D + it, out, sink);
                    CK(cudaDeviceSynchronize());
                    if (it < 4) continue;
                    CK(cudaMemcpy(h.data(), out, h.size() * 8, cudaMemcpyDeviceToHost));
                    lab_probe_stats(h, nsm, khz, im, ix, lm, lx);
                }
                printf("%-7s %6uK %5d | %9.2f %9.2f | %9.2f %9.2f\n", mn[mode], PF >> 10, D, lab_median(im), lab_median(ix), lab_median(lm), lab_median(lx));
            }
    CK(cudaGetLastError());
    return 0;
}
