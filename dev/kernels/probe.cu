/*
 * probe.cu — lab: where the fixed time of a small decode kernel goes. Times (a) an empty kernel,
 * (b) the GEMV prologue alone (load x, RMSNorm, quantize to q8 in shared memory), (c) the weight
 * loads + dots alone (activation pre-quantized in global memory), (d) the full k_gemv_pf — each as
 * one launch and as the per-kernel average of 200 back-to-back launches, and (e) the same 200
 * launches captured in a CUDA graph. Matrix: Q4_K 8192 x 2048 (9.4 MB, the GDN qkv projection).
 */
#include "lab_quant.cuh"

__global__ void p_empty() {}

__global__ void __launch_bounds__(GEMV_THREADS) p_prologue(const gemv_args a, float *sink) {
    extern __shared__ __align__(16) unsigned char sm[];
    __shared__ float red[32];
    qact A;
    gemv_prologue(a, sm, red, &A);
    if (threadIdx.x == 0 && A.dx[0] == 12345.0f) *sink = 1;
}

template <int RB>
__global__ void __launch_bounds__(GEMV_THREADS) p_weights(gmat W, qact A, float *y) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    int r0 = (blockIdx.x * nw + warp) * RB;
    rowregs<GT_Q4_K, 2> R[RB];
#pragma unroll
    for (int b = 0; b < RB; b++)
        if (r0 + b < W.rows) R[b].load(W, r0 + b, lane, 32, 2);
#pragma unroll
    for (int b = 0; b < RB; b++) {
        float v = warp_sum(R[b].dot(A, 0, lane, 32, 2));
        if (lane == 0 && r0 + b < W.rows) y[r0 + b] = v;
    }
}

int main() {
    const int rows = 8192, cols = 2048;
    host_qmat hm = lab_make_qmat(GT_Q4_K, rows, cols, 5);
    const int NC = 8; /* copies rotated so the L2 does not hold the weights */
    std::vector<gmat> W(NC);
    for (int c = 0; c < NC; c++) W[c] = lab_upload(hm);
    float *dx, *dy, *dg, *sink, *ddx, *ds16;
    int8_t *dxq;
    CK(cudaMalloc(&dx, cols * 4)); CK(cudaMalloc(&dy, rows * 4)); CK(cudaMalloc(&dg, cols * 4)); CK(cudaMalloc(&sink, 4));
    CK(cudaMalloc(&dxq, cols)); CK(cudaMalloc(&ddx, cols / 32 * 4)); CK(cudaMalloc(&ds16, cols / 16 * 4));
    std::vector<float> x(cols);
    for (auto &v : x) v = lab_uniform(-1, 1);
    CK(cudaMemcpy(dx, x.data(), cols * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dg, x.data(), cols * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(dxq, 1, cols)); CK(cudaMemset(ddx, 0, cols / 32 * 4)); CK(cudaMemset(ds16, 0, cols / 16 * 4));
    qact Ag{dx, dxq, ddx, ds16};
    int nsm; CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
    gemv_args a = {};
    a.nseg = 1; a.total_rows = rows; a.pro = PRO_RMSNORM; a.x = dx; a.K = cols; a.g = dg; a.eps = 1e-6f;
    size_t smem = qact_smem_bytes(cols);
    int occ = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k_gemv_pf<GT_Q4_K, 2, 4>, GEMV_THREADS, smem));
    printf("k_gemv_pf<Q4_K,2,4> occupancy: %d blocks of %d threads per SM\n", occ, GEMV_THREADS);
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    auto variant = [&](int v, int i) {
        const gmat &w = W[i % NC];
        a.seg[0].W = w; a.seg[0].y = dy; a.seg[0].epi = EPI_STORE;
        switch (v) {
        case 0: p_empty<<<nsm, GEMV_THREADS, 0, st>>>(); break;
        case 1: p_prologue<<<nsm, GEMV_THREADS, smem, st>>>(a, sink); break;
        case 2: p_weights<4><<<(rows + 63) / 64, GEMV_THREADS, 0, st>>>(w, Ag, dy); break;
        case 3: p_weights<1><<<(rows + 15) / 16, GEMV_THREADS, 0, st>>>(w, Ag, dy); break;
        case 4: k_gemv_pf<GT_Q4_K, 2, 4><<<std::min((rows + 63) / 64, nsm * occ), GEMV_THREADS, smem, st>>>(a); break;
        case 5: k_gemv<<<std::min(rows / 16, nsm * 4), GEMV_THREADS, smem, st>>>(a); break;
        }
    };
    const char *names[6] = {"empty kernel", "prologue only (rmsnorm+q8)", "weights only, 4 rows/warp", "weights only, 1 row/warp",
                            "k_gemv_pf (full)", "k_gemv (v1)"};
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    for (int v = 0; v < 6; v++) {
        for (int i = 0; i < 10; i++) variant(v, i);
        CK(cudaStreamSynchronize(st));
        float single = 1e9f, ms;
        for (int r = 0; r < 20; r++) {
            CK(cudaEventRecord(e0, st)); variant(v, r); CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
            CK(cudaEventElapsedTime(&ms, e0, e1)); single = std::min(single, ms);
        }
        CK(cudaEventRecord(e0, st));
        for (int r = 0; r < 200; r++) variant(v, r);
        CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
        float stream_ms; CK(cudaEventElapsedTime(&stream_ms, e0, e1));
        cudaGraph_t g; cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        for (int r = 0; r < 200; r++) variant(v, r);
        CK(cudaStreamEndCapture(st, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        CK(cudaGraphLaunch(ge, st)); CK(cudaStreamSynchronize(st));
        CK(cudaEventRecord(e0, st)); CK(cudaGraphLaunch(ge, st)); CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
        float graph_ms; CK(cudaEventElapsedTime(&graph_ms, e0, e1));
        CK(cudaGetLastError());
        printf("%-30s single %7.2f us | 200 in stream %7.2f us each | 200 in a graph %7.2f us each (%5.0f GB/s)\n", names[v],
               single * 1e3, stream_ms * 1e3 / 200, graph_ms * 1e3 / 200, v >= 2 ? lab_gmat_bytes(W[0]) / (graph_ms * 1e-3 / 200) / 1e9 : 0.0);
        cudaGraphExecDestroy(ge); cudaGraphDestroy(g);
    }
    return 0;
}
