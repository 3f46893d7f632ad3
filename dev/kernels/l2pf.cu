/*
 * l2pf.cu — lab: is a decode GEMV limited by DRAM or by its own latency chain? Per-launch µs of N
 * launches in one CUDA graph (PDL), for a 9.4 MB matrix (8192 x 2048 Q4_K):
 *   read  rot     plain 16-byte streaming read, copies rotated past the L2 (the DRAM floor of a kernel)
 *   read  same    the same copy every launch (L2-resident: the L2 floor)
 *   read  rot+pf  rotated, each launch requesting the NEXT launch's copy into L2 (l2pf_issue)
 *   gemv  rot / same   the same for k_gemv_q (activation ready in a qbuf)
 * If `gemv same` is not much faster than `gemv rot`, weights arriving earlier cannot help and the
 * kernel's time is its internal latency chain (dependent loads per warp, reductions, tail).
 * The GEMV is checked against the fp64 host reference first.
 */
#include "lab_quant.cuh"
#include "../../src/backend/cuda/k_gemvq.cuh"

/* L2 prefetch list: ranges a kernel hands to the copy engine at block start
 * (cp.async.bulk.prefetch.L2), so that a LATER kernel finds them in L2. Ranges: 16-byte aligned,
 * sizes multiples of 16. The backend carried this for one session (every GEMV-like kernel of the
 * decode step requesting the next 8-40 MB of weights): no gain, see NOTES.md 2026-11-30 08:00. */
#define L2PF_MAX 12
#define L2PF_CHUNK 32768u
struct l2pf {
    const uint8_t *p[L2PF_MAX];
    uint32_t n[L2PF_MAX];
    int cnt;
};
__device__ __forceinline__ void l2pf_issue(const l2pf &pf) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (!pf.cnt) return;
    /* chunks go round-robin over the BLOCKS first: each SM's copy engine works through its
     * requests one after another, so 8 MB asked of one block would take ~100 µs */
    uint32_t nb = gridDim.x * gridDim.y, nt = nb * blockDim.x;
    uint32_t tid = threadIdx.x * nb + blockIdx.y * gridDim.x + blockIdx.x;
    for (int r = 0; r < pf.cnt; r++) {
        uint32_t nch = (pf.n[r] + L2PF_CHUNK - 1) / L2PF_CHUNK;
        for (uint32_t c = tid; c < nch; c += nt) {
            uint32_t len = pf.n[r] - c * L2PF_CHUNK;
            if (len > L2PF_CHUNK) len = L2PF_CHUNK;
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(pf.p[r] + (size_t)c * L2PF_CHUNK), "r"(len) : "memory");
        }
    }
#else
    (void)pf;
#endif
}


static int g_nsm;
static cudaStream_t g_st;

/* sum of 16-byte words, grid-strided; one word per thread written so nothing is optimized away */
__global__ void __launch_bounds__(256) k_read(const uint4 *p, size_t n16, uint32_t *sink, const l2pf pf) {
    l2pf_issue(pf);
    pdl_wait();
    pdl_trigger();
    uint32_t acc = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += (size_t)gridDim.x * blockDim.x) {
        uint4 v = __ldg(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u) sink[threadIdx.x] = acc;
}

static l2pf pf_of(const gmat &W) {
    l2pf pf{};
    size_t nb = (size_t)W.rows * (W.cols / 256);
    pf.p[0] = W.q; pf.n[0] = (uint32_t)(nb * 128);
    pf.p[1] = W.sc; pf.n[1] = (uint32_t)(nb * 16);
    pf.cnt = 2;
    return pf;
}

int main() {
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    g_nsm = prop.multiProcessorCount;
    CK(cudaStreamCreateWithFlags(&g_st, cudaStreamNonBlocking));
    printf("%s, %d SMs, L2 %d MB\n", prop.name, g_nsm, prop.l2CacheSize >> 20);
    const int rows = 8192, cols = 2048;
    host_qmat hm = lab_make_qmat(GT_Q4_K, rows, cols, 12345);
    std::vector<float> x(cols), yref(rows), row(cols), y(rows);
    for (auto &v : x) v = lab_uniform(-1, 1);
    for (int r = 0; r < rows; r++) {
        lab_dequant_row(hm, r, row.data());
        double acc = 0;
        for (int k = 0; k < cols; k++) acc += (double)row[k] * x[k];
        yref[r] = (float)acc;
    }
    double mb = lab_gmat_bytes({GT_Q4_K, rows, cols});
    int copies = (int)std::ceil(600e6 / mb);
    std::vector<gmat> W(copies);
    for (int c = 0; c < copies; c++) W[c] = lab_upload(hm);
    float *dx, *dy;
    uint32_t *sink;
    CK(cudaMalloc(&dx, cols * 4)); CK(cudaMalloc(&dy, rows * 4)); CK(cudaMalloc(&sink, 1024 * 4));
    CK(cudaMemcpy(dx, x.data(), cols * 4, cudaMemcpyHostToDevice));
    qbuf q;
    CK(cudaMalloc(&q.xf, cols * 4)); CK(cudaMalloc(&q.xq, cols)); CK(cudaMalloc(&q.dx, cols / 32 * 4)); CK(cudaMalloc(&q.s16, cols / 16 * 4));
    gemv_args a = {};
    a.nseg = 1; a.total_rows = rows; a.seg[0].y = dy; a.seg[0].epi = EPI_STORE;
    a.pro = PRO_PLAIN; a.x = dx; a.K = cols; a.eps = 1e-6f;
    a.seg[0].W = W[0];
    lab_launch_pdl(k_qact, 1, QACT_THREADS, (size_t)cols * 4, g_st, a, q);
    int occ = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k_gemv_q<GT_Q4_K, 2, 1, 256>, 256, 0);
    int rpw = 32 / gemv_lanes(cols), need = (rows + 8 * rpw - 1) / (8 * rpw), grid = std::min(need, g_nsm * std::max(occ, 1));
    auto gemv = [&](int i, int mode) { /* mode 0 rot, 1 same */
        gemv_args b = a;
        b.seg[0].W = W[mode == 1 ? 0 : i % copies];
        lab_launch_pdl(k_gemv_q<GT_Q4_K, 2, 1, 256>, grid, 256, 0, g_st, b, q);
    };
    gemv(0, 1);
    CK(cudaStreamSynchronize(g_st));
    CK(cudaMemcpy(y.data(), dy, rows * 4, cudaMemcpyDeviceToHost));
    double ma, re = lab_relerr(yref.data(), y.data(), rows, &ma);
    printf("k_gemv_q vs fp64 reference: rel err %.2e, max abs %.3e %s\n", re, ma, re < 2e-2 ? "OK" : "FAIL");
    if (!(re < 2e-2)) return 1;
    const int N = 100;
    const char *mn[3] = {"rot", "same", "rot+pf"};
    for (int mode = 0; mode < 3; mode++) {
        float us = lab_graph_us(g_st, [&](int i) {
            const gmat &M = W[mode == 1 ? 0 : i % copies];
            l2pf pf{};
            if (mode == 2) pf = pf_of(W[(i + 1) % copies]);
            lab_launch_pdl(k_read, g_nsm * 8, 256, 0, g_st, (const uint4 *)M.q, (size_t)rows * (cols / 256) * 128 / 16, sink, pf);
        }, N);
        printf("read %-7s %7.2f us  %6.0f GB/s (q array only: %.2f MB)\n", mn[mode], us, rows * (cols / 256) * 128.0 / us / 1e3,
               rows * (cols / 256) * 128.0 / 1e6);
    }
    for (int mode = 0; mode < 2; mode++) {
        float us = lab_graph_us(g_st, [&](int i) { gemv(i, mode); }, N);
        printf("gemv %-7s %7.2f us  %6.0f GB/s\n", mn[mode], us, mb / us / 1e3);
    }
    /* pairs: k_qact + k_gemv_q, the decode pattern */
    for (int mode = 0; mode < 2; mode++) {
        float us = lab_graph_us(g_st, [&](int i) {
            lab_launch_pdl(k_qact, 1, QACT_THREADS, (size_t)cols * 4, g_st, a, q);
            gemv(i, mode);
        }, N);
        printf("qact+gemv %-7s %7.2f us\n", mn[mode], us);
    }
    return 0;
}
