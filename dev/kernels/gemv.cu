/*
 * gemv.cu — lab: batch-1 matrix-vector product on Q4_K / Q6_K weights (the decode workhorse).
 *   v0  naive: one thread per row, fp32 dequant (gmat_dequant16) x fp32 activation
 *   v1  backend k_gemv, plain prologue: activation quantized to q8 per 32 in shared memory,
 *       lanes-per-row groups, 16-byte loads of the repacked nibbles, dp4a
 *   v2  backend k_gemv with the RMSNorm prologue
 *   v3  backend k_gemv_pf (what decode uses): one wave of blocks; each warp loads a batch of RB rows
 *       (about 8 units per lane in flight) before the RMSNorm/quantize prologue, and batch i+1 while
 *       batch i is computed
 * Reference: fp64 dot of the host-dequantized rows with x. Reports median time and GB/s of weight
 * bytes; copies of the matrix are rotated so that the L2 (60 MB) does not serve repeats.
 */
#include "lab_quant.cuh"

__global__ void gemv_v0(gmat W, const float *x, float *y) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= W.rows) return;
    float acc = 0, f[16];
    for (int k = 0; k < W.cols; k += 16) {
        gmat_dequant16(W, r, k, f);
        for (int i = 0; i < 16; i++) acc += f[i] * x[k + i];
    }
    y[r] = acc;
}

static void run_case(const char *name, int type, int rows, int cols, double peak) {
    host_qmat hm = lab_make_qmat(type, rows, cols, rows * 31 + cols);
    std::vector<float> x(cols), yref(rows), row(cols), y(rows);
    for (auto &v : x) v = lab_uniform(-1, 1);
    for (int r = 0; r < rows; r++) {
        lab_dequant_row(hm, r, row.data());
        double a = 0;
        for (int k = 0; k < cols; k++) a += (double)row[k] * x[k];
        yref[r] = (float)a;
    }
    double mb = lab_gmat_bytes({type, rows, cols});
    int copies = (int)std::max(1.0, std::ceil(600e6 / mb));
    std::vector<gmat> W(copies);
    W[0] = lab_upload(hm);
    for (int c = 1; c < copies; c++) W[c] = lab_upload(hm);
    float *dx, *dy, *dg;
    CK(cudaMalloc(&dx, cols * 4)); CK(cudaMalloc(&dy, rows * 4)); CK(cudaMalloc(&dg, cols * 4));
    CK(cudaMemcpy(dx, x.data(), cols * 4, cudaMemcpyHostToDevice));
    std::vector<float> ones(cols, 1.0f);
    CK(cudaMemcpy(dg, ones.data(), cols * 4, cudaMemcpyHostToDevice));
    int nsm; CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaFuncSetAttribute(k_gemv, cudaFuncAttributeMaxDynamicSharedMemorySize, 96 * 1024));
    for (int v = 0; v <= 3; v++) {
        auto launch = [&](int i) {
            const gmat &w = W[i % copies];
            if (v == 0) { gemv_v0<<<(rows + 127) / 128, 128>>>(w, dx, dy); return; }
            gemv_args a = {};
            a.seg[0].W = w; a.seg[0].y = dy; a.nseg = 1; a.total_rows = rows;
            a.pro = v >= 2 ? PRO_RMSNORM : PRO_PLAIN; a.x = dx; a.K = cols; a.g = dg; a.eps = 1e-6f;
            int rpw = 32 / gemv_lanes(cols), need = (rows + 16 * rpw - 1) / (16 * rpw);
            if (v < 3) { k_gemv<<<std::min(need, nsm * 4), GEMV_THREADS, qact_smem_bytes(cols)>>>(a); return; }
            int nu = cols / 32 / gemv_lanes(cols);
            auto go = [&](auto kern, int rb) {
                int occ = 0;
                cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, GEMV_THREADS, qact_smem_bytes(cols));
                int nb = (need + rb - 1) / rb;
                kern<<<std::min(nb, nsm * std::max(occ, 1)), GEMV_THREADS, qact_smem_bytes(cols)>>>(a);
            };
            /* rows per batch as the backend chooses them (gemv_rb) */
            if (type == GT_Q4_K) { if (nu <= 2) go(k_gemv_pf<GT_Q4_K, 2, 4>, 4); else go(k_gemv_pf<GT_Q4_K, 4, 2>, 2); }
            else { if (nu <= 2) go(k_gemv_pf<GT_Q6_K, 2, 2>, 2); else go(k_gemv_pf<GT_Q6_K, 4, 1>, 1); }
        };
        CK(cudaMemset(dy, 0xff, rows * 4)); /* poison */
        launch(0);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(y.data(), dy, rows * 4, cudaMemcpyDeviceToHost));
        double ma, re;
        if (v >= 2) { /* rmsnorm with unit gain: ref scales by 1/rms(x) */
            double ss = 0; for (float t : x) ss += (double)t * t;
            float s = (float)(1.0 / sqrt(ss / cols + 1e-6));
            std::vector<float> yr(rows); for (int r = 0; r < rows; r++) yr[r] = yref[r] * s;
            re = lab_relerr(yr.data(), y.data(), rows, &ma);
        } else re = lab_relerr(yref.data(), y.data(), rows, &ma);
        float ms = lab_time_ms(launch);
        double gbps = mb / (ms * 1e-3) / 1e9;
        printf("%-22s v%d  %s  rel.err %.2e  %8.1f us  %7.0f GB/s  %5.1f %% of probe\n", name, v,
               re < (v == 0 ? 1e-5 : 2e-2) ? "OK  " : "FAIL", re, ms * 1e3, gbps, 100 * gbps / peak);
    }
    for (auto &w : W) { cudaFree((void *)w.q); cudaFree((void *)w.sc); if (w.qh) cudaFree((void *)w.qh); if (w.d) cudaFree((void *)w.d); }
    cudaFree(dx); cudaFree(dy); cudaFree(dg);
}

int main() {
    size_t bytes = (size_t)4 << 30;
    uint4 *buf; unsigned *sink;
    CK(cudaMalloc(&buf, bytes)); CK(cudaMalloc(&sink, 4)); CK(cudaMemset(buf, 1, bytes));
    int nsm; CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
    float ms = lab_time_ms([&](int) { k_bw_read<<<nsm * 8, 512>>>(buf, (long)(bytes / 16), sink); }, 10);
    double peak = bytes / (ms * 1e-3) / 1e9;
    printf("read-bandwidth probe: %.0f GB/s (4 GiB, median of 10)\n", peak);
    cudaFree(buf);
    run_case("q4_K 8192x2048 (qkv)", GT_Q4_K, 8192, 2048, peak);
    run_case("q4_K 2048x4096 (out)", GT_Q4_K, 2048, 4096, peak);
    run_case("q4_K 32768x2048", GT_Q4_K, 32768, 2048, peak);
    run_case("q6_K 248320x2048 (lm)", GT_Q6_K, 248320, 2048, peak);
    return 0;
}
