/*
 * moe.cu — lab: the fused decode MoE (real Qwen3.6-35B-A3B shapes: 256 experts, top-8, FF 512,
 * shared expert 512, hidden 2048). v1 = backend k_moe_gateup (RMSNorm + q8 quantize + top-k in the
 * prologue, gate/up + SwiGLU over the 8 chosen experts and the shared one) then k_moe_down (down +
 * weighted combine + residual add). Expert ids are read on the device from the router logits.
 * v2 = the prefetching kernels decode uses (k_moe_gateup_pf / k_moe_down_pf: each warp computes the
 * top-k itself and issues its expert-row loads before the block's prologue).
 * Reference: fp64 host computation with the same top-k. Router logits rotate between runs so the
 * chosen experts change (bandwidth from HBM, not L2).
 */
#include "lab_quant.cuh"

int main() {
    const int H = 2048, E = 256, K = 8, FF = 512, FS = 512;
    host_qmat hg = lab_make_qmat(GT_Q4_K, E * FF, H, 1), hu = lab_make_qmat(GT_Q4_K, E * FF, H, 2),
              hd = lab_make_qmat(GT_Q6_K, E * H, FF, 3);
    host_qmat sg = lab_make_qmat(GT_Q4_K, FS, H, 4), su = lab_make_qmat(GT_Q4_K, FS, H, 5), sd = lab_make_qmat(GT_Q6_K, H, FS, 6);
    gmat G = lab_upload(hg), U = lab_upload(hu), D = lab_upload(hd), SG = lab_upload(sg), SU = lab_upload(su), SD = lab_upload(sd);
    const int NSETS = 64;
    std::vector<float> x(H), g(H), logits((size_t)NSETS * (E + 1));
    for (auto &v : x) v = lab_uniform(-1, 1);
    for (auto &v : g) v = lab_uniform(0.8f, 1.2f);
    for (auto &v : logits) v = lab_uniform(-3, 3);
    float *dx, *dg, *dl, *dh, *dout;
    CK(cudaMalloc(&dx, H * 4)); CK(cudaMalloc(&dg, H * 4)); CK(cudaMalloc(&dl, logits.size() * 4));
    CK(cudaMalloc(&dh, (K * FF + FS) * 4)); CK(cudaMalloc(&dout, H * 4));
    CK(cudaMemcpy(dx, x.data(), H * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dg, g.data(), H * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dl, logits.data(), logits.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaFuncSetAttribute(k_moe_down, cudaFuncAttributeMaxDynamicSharedMemorySize, 96 * 1024));
    auto args = [&](int set) {
        moe_args a = {dx, dg, 1e-6f, H, E, K, FF, FS, dl + (size_t)set * (E + 1), G, U, D, SG, SU, SD, dh, dout, NULL, NULL};
        return a;
    };
    int kf = K * FF + FS, need = (kf + 15) / 16;
    int variant = 1, nsm, occ = 0;
    CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k_moe_gateup_pf<GT_Q4_K, 2>, MOE_GU_THREADS, qact_smem_bytes(H)));
    auto launch = [&](int i) {
        moe_args a = args(i % NSETS);
        if (variant == 1) {
            k_moe_gateup<<<need, GEMV_THREADS, qact_smem_bytes(H)>>>(a);
            k_moe_down<<<(H + 7) / 8, 256, qact_smem_bytes(kf)>>>(a);
        } else {
            int nb = (kf + 8 * MOE_GU_RB - 1) / (8 * MOE_GU_RB);
            if (variant != 4) k_moe_gateup_pf<GT_Q4_K, 2><<<std::min(nb, nsm * std::max(occ, 1)), MOE_GU_THREADS, qact_smem_bytes(H)>>>(a);
            if (variant != 3) k_moe_down_pf<GT_Q6_K, 1><<<(H + 7) / 8, MOE_DOWN_THREADS, qact_smem_bytes(kf)>>>(a);
        }
    };
    /* reference */
    double ss = 0; for (float v : x) ss += (double)v * v;
    float r = (float)(1 / sqrt(ss / H + 1e-6));
    std::vector<float> out(H), xn(H), row(H), hh(kf), ref(H, 0.0f);
    for (int i = 0; i < H; i++) xn[i] = x[i] * r * g[i];
    const float *lg = logits.data();
    int ids[K]; float w[K]; bool used[E] = {};
    for (int t = 0; t < K; t++) { int bi = -1; for (int e = 0; e < E; e++) if (!used[e] && (bi < 0 || lg[e] > lg[bi])) bi = e; used[bi] = 1; ids[t] = bi; }
    double den = 0; for (int t = 0; t < K; t++) { w[t] = expf(lg[ids[t]] - lg[ids[0]]); den += w[t]; }
    for (int t = 0; t < K; t++) w[t] /= (float)den;
    auto dot = [&](const host_qmat &m, int rr, const float *v) { lab_dequant_row(m, rr, row.data()); double a = 0; for (int k = 0; k < m.cols; k++) a += (double)row[k] * v[k]; return a; };
    for (int s = 0; s <= K; s++)
        for (int f = 0; f < FF; f++) {
            double gv = s < K ? dot(hg, ids[s] * FF + f, xn.data()) : dot(sg, f, xn.data());
            double uv = s < K ? dot(hu, ids[s] * FF + f, xn.data()) : dot(su, f, xn.data());
            hh[s * FF + f] = (float)(gv / (1 + exp(-gv)) * uv);
        }
    float sgate = 1 / (1 + expf(-lg[E]));
    for (int o = 0; o < H; o++) {
        double a = 0;
        for (int s = 0; s < K; s++) a += w[s] * dot(hd, ids[s] * H + o, hh.data() + s * FF);
        a += sgate * dot(sd, o, hh.data() + K * FF);
        ref[o] = (float)a;
    }
    for (variant = 1; variant <= 4; variant++) { /* 3: gate/up only, 4: down only (timing) */
        CK(cudaMemset(dout, 0, H * 4));
        launch(0);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(out.data(), dout, H * 4, cudaMemcpyDeviceToHost));
        double ma, re = lab_relerr(ref.data(), out.data(), H, &ma);
        float ms = lab_time_ms(launch, 100);
        double bytes = K * (lab_gmat_bytes(G) + lab_gmat_bytes(U) + lab_gmat_bytes(D)) / E + lab_gmat_bytes(SG) + lab_gmat_bytes(SU) + lab_gmat_bytes(SD);
        if (variant >= 3) { printf("moe decode v2, %s only: %7.1f us\n", variant == 3 ? "gate/up" : "down", ms * 1e3); continue; }
        printf("moe decode (gateup+down) v%d  %s  rel.err %.2e  %7.1f us  %.2f MB  %6.0f GB/s\n", variant, re < 3e-2 ? "OK  " : "FAIL", re,
               ms * 1e3, bytes / 1e6, bytes / (ms * 1e-3) / 1e9);
    }
    return 0;
}
