/*
 * gdn_chunk.cu — lab: the chunked GDN prefill (k_gdn_chunk_prep + k_gdn_chunk_scan) and the
 * token-serial k_gdn_step<DK, false> on the shapes the GPU tests use, each against the recurrence
 * in fp64 on the host (qwen35-moe-spec.md §5.5), from the conv output on (no conv here):
 *   - the tiny fixture: HK 2, HV 4, DK = DV = 32, v heads tiled (h % HK), 150 tokens (64 + 64 + 22)
 *   - the 35B shapes (HK 16, HV 32, DK = DV = 128) in chunks of 16 and 40 tokens (GPU test 9)
 *   - DK 64, and the 35B shapes with strong decay (ssm_a down to -16: e^gam underflows in a chunk)
 * Each case runs twice, from a zero state and then on from the state the first run left (a second
 * chunk), and prints the relative L2 error of o and S and the largest |o| error for both kernels, so a
 * shape-specific difference between them shows up without the whole model.
 */
#include "lab.cuh"
#include "../../src/backend/cuda/k_gdn.cuh"
#include "../../src/backend/cuda/k_gdn_chunk.cuh"

/* host recurrence, fp64 state */
static void host_gdn(int T, int HK, int HV, int DK, int DV, int tiled, const float *qkv, const float *b, const float *a,
                     const float *dtb, const float *sa, std::vector<double> &S, float *o) {
    int QK = HK * DK, CD = 2 * QK + HV * DV;
    std::vector<double> q(DK), k(DK);
    for (int t = 0; t < T; t++) {
        const float *row = qkv + (size_t)t * CD;
        for (int h = 0; h < HV; h++) {
            int kh = tiled ? h % HK : h / (HV / HK);
            double sq = 0, sk = 0;
            for (int i = 0; i < DK; i++) { q[i] = row[kh * DK + i]; k[i] = row[QK + kh * DK + i]; sq += q[i] * q[i]; sk += k[i] * k[i]; }
            for (int i = 0; i < DK; i++) { q[i] /= sqrt(sq + 1e-6) * sqrt((double)DK); k[i] /= sqrt(sk + 1e-6); }
            double beta = 1 / (1 + exp(-(double)b[t * HV + h])), x = (double)a[t * HV + h] + dtb[h];
            double alpha = exp(sa[h] * (x > 20 ? x : log1p(exp(x))));
            double *Sh = S.data() + (size_t)h * DK * DV;
            for (int j = 0; j < DV; j++) {
                double u = 0;
                for (int i = 0; i < DK; i++) { Sh[i * DV + j] *= alpha; u += Sh[i * DV + j] * k[i]; }
                double delta = beta * (row[2 * QK + h * DV + j] - u), oo = 0;
                for (int i = 0; i < DK; i++) { Sh[i * DV + j] += k[i] * delta; oo += Sh[i * DV + j] * q[i]; }
                o[(size_t)t * HV * DV + h * DV + j] = (float)oo;
            }
        }
    }
}

template <int DK>
static void run_case(const char *name, int HK, int HV, int DV, int tiled, int T, float sa_lo, float sa_hi) {
    int QK = HK * DK, CD = 2 * QK + HV * DV, nch = (T + GDN_CC - 1) / GDN_CC;
    /* post-conv activations: SiLU outputs are > -0.28; use the same range the model produces */
    std::vector<float> qkv((size_t)2 * T * CD), ab((size_t)2 * T * HV), bb((size_t)2 * T * HV), dtb(HV), sa(HV);
    for (auto &v : qkv) { float x = lab_uniform(-3, 3); v = x / (1 + expf(-x)); }
    for (auto &v : ab) v = lab_uniform(-3, 3);
    for (auto &v : bb) v = lab_uniform(-3, 3);
    for (auto &v : dtb) v = lab_uniform(-1, 1);
    for (auto &v : sa) v = lab_uniform(sa_lo, sa_hi);
    float *d_qkv, *d_b, *d_a, *d_dtb, *d_sa, *d_S, *d_o, *d_ring, *d_cw; int *d_pos;
    CK(cudaMalloc(&d_qkv, qkv.size() * 4)); CK(cudaMalloc(&d_b, bb.size() * 4)); CK(cudaMalloc(&d_a, ab.size() * 4));
    CK(cudaMalloc(&d_dtb, HV * 4)); CK(cudaMalloc(&d_sa, HV * 4)); CK(cudaMalloc(&d_S, (size_t)HV * DK * DV * 4));
    CK(cudaMalloc(&d_o, (size_t)T * HV * DV * 4)); CK(cudaMalloc(&d_ring, (size_t)4 * CD * 4)); CK(cudaMalloc(&d_cw, (size_t)CD * 16));
    CK(cudaMalloc(&d_pos, 16));
    CK(cudaMemcpy(d_qkv, qkv.data(), qkv.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_b, bb.data(), bb.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_a, ab.data(), ab.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_dtb, dtb.data(), HV * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_sa, sa.data(), HV * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(d_pos, 0, 16));
    gdn_chunk_ws ws;
    CK(cudaMalloc(&ws.W, (size_t)HV * T * DK * 4)); CK(cudaMalloc(&ws.U, (size_t)HV * T * DV * 4));
    CK(cudaMalloc(&ws.P, gdn_chunk_ws_small_floats(T, HV) * 4));
    ws.fq = ws.P + (size_t)HV * nch * GDN_CC * GDN_CC; ws.fk = ws.fq + (size_t)HV * T; ws.lam = ws.fk + (size_t)HV * T;
    CK(cudaFuncSetAttribute(k_gdn_chunk_prep<DK>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gdn_prep_smem_bytes<DK>()));
    CK(cudaFuncSetAttribute(k_gdn_chunk_scan<DK, 32>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gdn_scan_smem_bytes<DK, 32>()));
    for (int v = 1; v <= 2; v++) {
        std::vector<double> S((size_t)HV * DK * DV, 0.0);
        CK(cudaMemset(d_S, 0, (size_t)HV * DK * DV * 4));
        printf("%-34s %s:", name, v == 1 ? "token-serial" : "chunked     ");
        for (int part = 0; part < 2; part++) {
            const float *q0 = d_qkv + (size_t)part * T * CD, *b0 = d_b + (size_t)part * T * HV, *a0 = d_a + (size_t)part * T * HV;
            std::vector<float> oref((size_t)T * HV * DV), o(oref.size()), Sg(S.size());
            host_gdn(T, HK, HV, DK, DV, tiled, qkv.data() + (size_t)part * T * CD, bb.data() + (size_t)part * T * HV,
                     ab.data() + (size_t)part * T * HV, dtb.data(), sa.data(), S, oref.data());
            if (v == 1) {
                gdn_args g = {q0, b0, a0, HV, d_cw, d_ring, d_S, d_dtb, d_sa, d_o, d_pos, T, HK, HV, DV, tiled};
                k_gdn_step<DK, false><<<dim3(HV, DV / 16), 64>>>(g);
            } else {
                gdn_chunk_args ca = {q0, b0, a0, HV, d_dtb, d_sa, d_S, d_o, ws, T, HK, HV, DV, tiled};
                k_gdn_chunk_prep<DK><<<dim3(nch, HV), 256, gdn_prep_smem_bytes<DK>()>>>(ca);
                k_gdn_chunk_scan<DK, 32><<<dim3(HV, DV / 32), 256, gdn_scan_smem_bytes<DK, 32>()>>>(ca);
            }
            CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(o.data(), d_o, o.size() * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(Sg.data(), d_S, Sg.size() * 4, cudaMemcpyDeviceToHost));
            std::vector<float> Sf(S.begin(), S.end());
            double ma, mS, re = lab_relerr(oref.data(), o.data(), o.size(), &ma), reS = lab_relerr(Sf.data(), Sg.data(), Sf.size(), &mS);
            printf("  [%s] o %.2e (max %.1e) S %.2e  %s", part ? "2nd chunk" : "from 0", re, ma, reS, re < 1e-5 && reS < 1e-5 ? "OK" : "FAIL");
        }
        printf("\n");
    }
    cudaFree(d_qkv); cudaFree(d_b); cudaFree(d_a); cudaFree(d_dtb); cudaFree(d_sa); cudaFree(d_S); cudaFree(d_o);
    cudaFree(d_ring); cudaFree(d_cw); cudaFree(d_pos); cudaFree(ws.W); cudaFree(ws.U); cudaFree(ws.P);
}

int main() {
    run_case<32>("tiny fixture (2/4 x 32, tiled) T=150", 2, 4, 32, 1, 150, -2.0f, -0.1f);
    run_case<128>("35B (16/32 x 128) T=16", 16, 32, 128, 0, 16, -2.0f, -0.1f);
    run_case<128>("35B (16/32 x 128) T=40", 16, 32, 128, 0, 40, -2.0f, -0.1f);
    run_case<64>("DK 64 (4/8 x 64) T=100", 4, 8, 64, 0, 100, -2.0f, -0.1f);
    run_case<128>("35B strong decay T=200", 16, 32, 128, 0, 200, -16.0f, -4.0f);
    return 0;
}
