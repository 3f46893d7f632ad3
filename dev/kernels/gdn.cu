/*
 * gdn.cu — lab: the Gated DeltaNet recurrence (HK 16, HV 32, DK = DV = 128, fp32 state).
 *   decode: k_gdn_step<128, true> — conv (ring) + SiLU + L2 norm + gates + state update + readout,
 *           one token; bytes = state read + write (2 x 2 MiB) + inputs.
 *   prefill v1: k_gdn_conv + k_gdn_step<128, false> over T tokens, state in registers; tokens/s.
 *   prefill v2 (chunked, k_gdn_chunk.cuh): k_gdn_chunk_prep + k_gdn_chunk_scan; checked against the
 *     host recurrence over 200 tokens (3 full chunks + a partial one) from a non-zero state, then
 *     timed at T = 4096 next to v1.
 * Reference: the spec's recurrent form (qwen35-moe-spec.md §5.5) in double on the host, for the
 * decode step and for a short prefill (which must equal T decode steps).
 */
#include "lab.cuh"
#include "lab_gdn.cuh"
#include "../../src/backend/cuda/k_gdn.cuh"
#include "../../src/backend/cuda/k_gdn_chunk.cuh"
#include "../../src/backend/cuda/k_misc.cuh"

static const int HK = 16, HV = 32, DK = 128, DV = 128, QK = HK * DK, CD = 2 * QK + HV * DV;

/* one host step (lab_gdn.cuh) at this file's shapes */
static void host_step(const float *raw, const float *b, const float *a, const float *cw, float *hist, float *S,
                      const float *dtb, const float *sa, float *o) {
    lab_gdn_host_step(raw, b, a, cw, hist, S, dtb, sa, o, HK, HV, DK, DV);
}

int main() {
    const int T = 8, TP = 4096;
    std::vector<float> raw((size_t)TP * CD), ab((size_t)TP * 2 * HV), cw(CD * 4), S0((size_t)HV * DK * DV), dtb(HV), sa(HV);
    for (auto &v : raw) v = lab_uniform(-2, 2);
    for (auto &v : ab) v = lab_uniform(-2, 2);
    for (auto &v : cw) v = lab_uniform(-0.5f, 0.5f);
    for (auto &v : S0) v = lab_uniform(-0.1f, 0.1f);
    for (auto &v : dtb) v = lab_uniform(-1, 1);
    for (auto &v : sa) v = lab_uniform(-2, -0.1f);
    /* host: T decode steps from S0, empty conv history */
    std::vector<float> hist(3 * CD, 0.0f), S = S0, oref((size_t)T * HV * DV);
    std::vector<float> bvec((size_t)TP * HV), avec((size_t)TP * HV);
    for (int t = 0; t < TP; t++) for (int h = 0; h < HV; h++) { bvec[t * HV + h] = ab[t * 2 * HV + h]; avec[t * HV + h] = ab[t * 2 * HV + HV + h]; }
    for (int t = 0; t < T; t++) host_step(&raw[(size_t)t * CD], &bvec[t * HV], &avec[t * HV], cw.data(), hist.data(), S.data(), dtb.data(), sa.data(), &oref[(size_t)t * HV * DV]);
    float *d_raw, *d_c, *d_b, *d_a, *d_cw, *d_ring, *d_S, *d_dtb, *d_sa, *d_o; int *d_pos;
    CK(cudaMalloc(&d_raw, raw.size() * 4)); CK(cudaMalloc(&d_c, raw.size() * 4));
    CK(cudaMalloc(&d_b, bvec.size() * 4)); CK(cudaMalloc(&d_a, avec.size() * 4)); CK(cudaMalloc(&d_cw, cw.size() * 4));
    CK(cudaMalloc(&d_ring, 4 * CD * 4)); CK(cudaMalloc(&d_S, S0.size() * 4)); CK(cudaMalloc(&d_dtb, HV * 4)); CK(cudaMalloc(&d_sa, HV * 4));
    CK(cudaMalloc(&d_o, (size_t)TP * HV * DV * 4)); CK(cudaMalloc(&d_pos, 4));
    CK(cudaMemcpy(d_raw, raw.data(), raw.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_b, bvec.data(), bvec.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_a, avec.data(), avec.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_cw, cw.data(), cw.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_dtb, dtb.data(), HV * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_sa, sa.data(), HV * 4, cudaMemcpyHostToDevice));
    auto reset = [&]() {
        CK(cudaMemcpy(d_S, S0.data(), S0.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemset(d_ring, 0, 4 * CD * 4)); CK(cudaMemset(d_pos, 0, 4));
    };
    std::vector<float> o((size_t)T * HV * DV), Sg(S0.size());
    gdn_chunk_ws ws;
    CK(cudaMalloc(&ws.W, (size_t)HV * TP * DK * 4)); CK(cudaMalloc(&ws.U, (size_t)HV * TP * DV * 4));
    CK(cudaMalloc(&ws.P, gdn_chunk_ws_small_floats(TP, HV) * 4));
    ws.fq = ws.P + (size_t)HV * (TP / 64) * 64 * 64; ws.fk = ws.fq + (size_t)HV * TP; ws.lam = ws.fk + (size_t)HV * TP;
    CK(cudaFuncSetAttribute(k_gdn_chunk_prep<128>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gdn_prep_smem_bytes<128>()));
    CK(cudaFuncSetAttribute(k_gdn_chunk_prep<128, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gdn_prep_smem_bytes<128>()));
    CK(cudaFuncSetAttribute(k_gdn_chunk_scan<128, 32>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gdn_scan_smem_bytes<128, 32>()));
    double ma, re;
    /* decode: T steps */
    reset();
    for (int t = 0; t < T; t++) {
        gdn_args g = {d_raw + (size_t)t * CD, d_b + t * HV, d_a + t * HV, HV, d_cw, d_ring, d_S, d_dtb, d_sa, d_o + (size_t)t * HV * DV, d_pos, 1, HK, HV, DV, 0};
        k_gdn_step<128, true><<<dim3(HV, DV / 16), 64>>>(g);
        k_pos_add<<<1, 1>>>(d_pos, 1);
    }
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(o.data(), d_o, o.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(Sg.data(), d_S, Sg.size() * 4, cudaMemcpyDeviceToHost));
    re = lab_relerr(oref.data(), o.data(), o.size(), &ma);
    double reS = lab_relerr(S.data(), Sg.data(), S.size(), &ma);
    CK(cudaMemset(d_pos, 0, 4));
    gdn_args g1 = {d_raw, d_b, d_a, HV, d_cw, d_ring, d_S, d_dtb, d_sa, d_o, d_pos, 1, HK, HV, DV, 0};
    float ms = lab_time_ms([&](int) { k_gdn_step<128, true><<<dim3(HV, DV / 16), 64>>>(g1); }, 200);
    double bytes = 2.0 * S0.size() * 4 + CD * 4 * 5;
    printf("gdn decode step v1  %s  o rel.err %.2e  S rel.err %.2e  %6.2f us  %5.0f GB/s (state r+w)\n",
           re < 1e-4 && reS < 1e-4 ? "OK  " : "FAIL", re, reS, ms * 1e3, bytes / (ms * 1e-3) / 1e9);
    /* prefill of T tokens must equal the T decode steps */
    reset();
    k_gdn_conv<<<dim3((CD + 255) / 256, T), 256>>>(d_raw, CD, d_c, d_cw, d_ring, d_pos, T, CD);
    k_gdn_ring<<<(CD + 255) / 256, 256>>>(d_raw, CD, d_ring, d_pos, T, CD);
    gdn_args gp = {d_c, d_b, d_a, HV, d_cw, d_ring, d_S, d_dtb, d_sa, d_o, d_pos, T, HK, HV, DV, 0};
    k_gdn_step<128, false><<<dim3(HV, DV / 16), 64>>>(gp);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(o.data(), d_o, o.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(Sg.data(), d_S, Sg.size() * 4, cudaMemcpyDeviceToHost));
    re = lab_relerr(oref.data(), o.data(), o.size(), &ma);
    reS = lab_relerr(S.data(), Sg.data(), S.size(), &ma);
    printf("gdn prefill (conv+scan), T=%d  %s  o rel.err %.2e  S rel.err %.2e\n", T, re < 1e-4 && reS < 1e-4 ? "OK  " : "FAIL", re, reS);
    /* chunked prefill over T2 tokens (crosses chunk boundaries, partial last chunk) vs the host */
    const int T2 = 200;
    {
        std::vector<float> hist2(3 * CD, 0.0f), S2 = S0, oref2((size_t)T2 * HV * DV);
        for (int t = 0; t < T2; t++) host_step(&raw[(size_t)t * CD], &bvec[t * HV], &avec[t * HV], cw.data(), hist2.data(), S2.data(), dtb.data(), sa.data(), &oref2[(size_t)t * HV * DV]);
        std::vector<float> o2((size_t)T2 * HV * DV);
        for (int v = 1; v <= 2; v++) {
            reset();
            k_gdn_conv<<<dim3((CD + 255) / 256, T2), 256>>>(d_raw, CD, d_c, d_cw, d_ring, d_pos, T2, CD);
            if (v == 1) {
                gdn_args g2 = {d_c, d_b, d_a, HV, d_cw, d_ring, d_S, d_dtb, d_sa, d_o, d_pos, T2, HK, HV, DV, 0};
                k_gdn_step<128, false><<<dim3(HV, DV / 16), 64>>>(g2);
            } else {
                gdn_chunk_args ca = {d_c, d_b, d_a, HV, d_dtb, d_sa, d_S, d_o, ws, T2, HK, HV, DV, 0};
                k_gdn_chunk_prep<128><<<dim3((T2 + 63) / 64, HV), 256, gdn_prep_smem_bytes<128>()>>>(ca);
                k_gdn_chunk_scan<128, 32><<<dim3(HV, DV / 32), 256, gdn_scan_smem_bytes<128, 32>()>>>(ca);
            }
            CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(o2.data(), d_o, o2.size() * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(Sg.data(), d_S, Sg.size() * 4, cudaMemcpyDeviceToHost));
            re = lab_relerr(oref2.data(), o2.data(), o2.size(), &ma);
            reS = lab_relerr(S2.data(), Sg.data(), S2.size(), &ma);
            printf("gdn prefill v%d (%s), T=%d  %s  o rel.err %.2e  S rel.err %.2e\n", v, v == 1 ? "token-serial" : "chunked", T2,
                   re < 1e-4 && reS < 1e-4 ? "OK  " : "FAIL", re, reS);
        }
    }
    gp.T = TP;
    ms = lab_time_ms([&](int) {
        k_gdn_conv<<<dim3((CD + 255) / 256, TP), 256>>>(d_raw, CD, d_c, d_cw, d_ring, d_pos, TP, CD);
        k_gdn_step<128, false><<<dim3(HV, DV / 16), 64>>>(gp);
    }, 10);
    printf("gdn prefill v1 T=%d: %.3f ms per layer  (%.0f tokens/s per layer; x30 layers: %.1f ms)\n", TP, ms, TP / (ms * 1e-3), 30 * ms);
    float msc = lab_time_ms([&](int) { k_gdn_conv<<<dim3((CD + 255) / 256, TP), 256>>>(d_raw, CD, d_c, d_cw, d_ring, d_pos, TP, CD); }, 10);
    gdn_chunk_args ct = {d_c, d_b, d_a, HV, d_dtb, d_sa, d_S, d_o, ws, TP, HK, HV, DV, 0};
    float msp1 = lab_time_ms([&](int) { k_gdn_chunk_prep<128, 1><<<dim3(TP / 64, HV), 256, gdn_prep_smem_bytes<128>()>>>(ct); }, 10);
    float msp = lab_time_ms([&](int) { k_gdn_chunk_prep<128><<<dim3(TP / 64, HV), 256, gdn_prep_smem_bytes<128>()>>>(ct); }, 10);
    printf("gdn chunk prep T=%d: 1 block/SM (no spills) %.3f ms, 2 blocks/SM (128 registers) %.3f ms\n", TP, msp1, msp);
    float mss = lab_time_ms([&](int) { k_gdn_chunk_scan<128, 32><<<dim3(HV, DV / 32), 256, gdn_scan_smem_bytes<128, 32>()>>>(ct); }, 10);
    printf("gdn prefill v2 T=%d: conv %.3f + prep %.3f + scan %.3f = %.3f ms per layer  (x30 layers: %.1f ms)\n", TP, msc, msp, mss,
           msc + msp + mss, 30 * (msc + msp + mss));
    return 0;
}
