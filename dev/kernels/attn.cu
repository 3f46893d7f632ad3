/*
 * attn.cu — lab: gated attention (NH 16, NKV 2, HD 256, bf16 KV cache [NKV][n_ctx][HD]).
 *   decode: k_attn_decode (split-K over CH = 64 positions, the 8 query heads of a kv head packed
 *           in one block so K/V are read once) + k_attn_combine (merge + sigmoid gate);
 *           GB/s over the KV bytes at contexts 4K / 32K / 128K.
 *   prefill: k_flash_prefill<256> (WMMA bf16, online softmax): TFLOP/s at T = 4096 from position 0.
 * Reference: double-precision softmax attention on the host (decode; and prefill on a few rows).
 */
#include "lab.cuh"
#include "../../src/backend/cuda/k_attn.cuh"

static const int NH = 16, NKV = 2, HD = 256, G = NH / NKV;


int main() {
    const int NCTX = 131072;
    size_t kvn = (size_t)NKV * NCTX * HD;
    std::vector<__nv_bfloat16> K(kvn), V(kvn);
    for (size_t i = 0; i < kvn; i++) { K[i] = __float2bfloat16(lab_uniform(-1, 1)); V[i] = __float2bfloat16(lab_uniform(-1, 1)); }
    std::vector<float> q(NH * HD), qg(NH * 2 * HD);
    for (auto &v : q) v = lab_uniform(-0.2f, 0.2f);
    for (auto &v : qg) v = lab_uniform(-2, 2);
    __nv_bfloat16 *dk, *dv; float *dq, *dqg, *dpo, *dpml, *dout; int *dpos;
    CK(cudaMalloc(&dk, kvn * 2)); CK(cudaMalloc(&dv, kvn * 2));
    CK(cudaMemcpy(dk, K.data(), kvn * 2, cudaMemcpyHostToDevice)); CK(cudaMemcpy(dv, V.data(), kvn * 2, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dq, q.size() * 4)); CK(cudaMalloc(&dqg, qg.size() * 4));
    CK(cudaMemcpy(dq, q.data(), q.size() * 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(dqg, qg.data(), qg.size() * 4, cudaMemcpyHostToDevice));
    int CH = 64, maxs = NCTX / CH;
    CK(cudaMalloc(&dpo, (size_t)maxs * NH * HD * 4)); CK(cudaMalloc(&dpml, (size_t)maxs * NH * 2 * 4));
    CK(cudaMalloc(&dout, NH * HD * 4)); CK(cudaMalloc(&dpos, 4));
    int ctxs[3] = {4096, 32768, 131072};
    for (int ci = 0; ci < 3; ci++) {
        int n = ctxs[ci], pos = n - 1;
        CK(cudaMemcpy(dpos, &pos, 4, cudaMemcpyHostToDevice));
        attn_dec_args a = {dq, dk, dv, dpo, dpml, dqg, dout, dpos, NH, NKV, HD, NCTX, CH};
        size_t smem = attn_decode_smem(G, HD, CH);
        CK(cudaFuncSetAttribute(k_attn_decode, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        int splits = (n + CH - 1) / CH;
        auto launch = [&](int) {
            k_attn_decode<<<dim3(NKV, splits), 256, smem>>>(a);
            k_attn_combine<<<NH, ATT_COMB_THREADS>>>(a);
        };
        launch(0);
        CK(cudaDeviceSynchronize());
        std::vector<float> out(NH * HD);
        CK(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
        std::vector<float> ref(NH * HD);
        std::vector<double> sc(n);
        for (int h = 0; h < NH; h++) {
            int kv = h / G;
            double mx = -1e300;
            for (int j = 0; j < n; j++) {
                double s = 0;
                for (int d = 0; d < HD; d++) s += (double)q[h * HD + d] * __bfloat162float(K[((size_t)kv * NCTX + j) * HD + d]);
                sc[j] = s; mx = std::max(mx, s);
            }
            double den = 0;
            for (int j = 0; j < n; j++) { sc[j] = exp(sc[j] - mx); den += sc[j]; }
            for (int d = 0; d < HD; d++) {
                double acc = 0;
                for (int j = 0; j < n; j++) acc += sc[j] * __bfloat162float(V[((size_t)kv * NCTX + j) * HD + d]);
                ref[h * HD + d] = (float)(acc / den / (1 + exp(-qg[h * 2 * HD + HD + d])));
            }
        }
        double ma, re = lab_relerr(ref.data(), out.data(), ref.size(), &ma);
        float ms = lab_time_ms(launch, 50);
        double bytes = 2.0 * NKV * (double)n * HD * 2;
        printf("attn decode ctx %6d v1  %s  rel.err %.2e  %7.1f us  %5.0f GB/s (KV)\n", n, re < 1e-4 ? "OK  " : "FAIL", re, ms * 1e3,
               bytes / (ms * 1e-3) / 1e9);
    }
    /* prefill: T tokens at positions 0..T-1 (the cache already holds their K/V) */
    const int T = 4096;
    std::vector<__nv_bfloat16> Q((size_t)T * NH * HD);
    for (auto &v : Q) v = __float2bfloat16(lab_uniform(-0.2f, 0.2f));
    std::vector<float> QG((size_t)T * NH * 2 * HD);
    for (auto &v : QG) v = lab_uniform(-2, 2);
    __nv_bfloat16 *dQ, *dO; float *dQG;
    CK(cudaMalloc(&dQ, Q.size() * 2)); CK(cudaMalloc(&dO, Q.size() * 2)); CK(cudaMalloc(&dQG, QG.size() * 4));
    CK(cudaMemcpy(dQ, Q.data(), Q.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dQG, QG.data(), QG.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(dpos, 0, 4));
    CK(cudaFuncSetAttribute(k_flash_prefill<256>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)flash_smem_bytes<256>()));
    flash_args fa = {dQ, dk, dv, dQG, NH * 2 * HD, dO, dpos, T, NH, NKV, NCTX};
    auto launch = [&](int) { k_flash_prefill<256><<<dim3(T / 64, NH), 256, flash_smem_bytes<256>()>>>(fa); };
    launch(0);
    CK(cudaDeviceSynchronize());
    std::vector<__nv_bfloat16> O(Q.size());
    CK(cudaMemcpy(O.data(), dO, O.size() * 2, cudaMemcpyDeviceToHost));
    int rows[4] = {0, 63, 1000, T - 1};
    double num = 0, den2 = 0;
    for (int ri = 0; ri < 4; ri++) {
        int t = rows[ri];
        for (int h = 0; h < NH; h++) {
            int kv = h / G;
            std::vector<double> s(t + 1);
            double mx = -1e300;
            for (int j = 0; j <= t; j++) {
                double acc = 0;
                for (int d = 0; d < HD; d++) acc += (double)__bfloat162float(Q[((size_t)t * NH + h) * HD + d]) * __bfloat162float(K[((size_t)kv * NCTX + j) * HD + d]);
                s[j] = acc; mx = std::max(mx, acc);
            }
            double dd = 0;
            for (int j = 0; j <= t; j++) { s[j] = exp(s[j] - mx); dd += s[j]; }
            for (int d = 0; d < HD; d++) {
                double acc = 0;
                for (int j = 0; j <= t; j++) acc += s[j] * __bfloat162float(V[((size_t)kv * NCTX + j) * HD + d]);
                double r = acc / dd / (1 + exp(-QG[(size_t)t * NH * 2 * HD + h * 2 * HD + HD + d]));
                double g = __bfloat162float(O[((size_t)t * NH + h) * HD + d]);
                num += (g - r) * (g - r); den2 += r * r;
            }
        }
    }
    double re = sqrt(num / den2);
    float ms = lab_time_ms(launch, 10);
    double fl = 4.0 * NH * HD * ((double)T * (T + 1) / 2);
    printf("flash prefill T=%d v1  %s  rel.err %.2e (bf16 P)  %.3f ms  %.1f TFLOP/s (causal)\n", T, re < 2e-2 ? "OK  " : "FAIL", re, ms,
           fl / (ms * 1e-3) / 1e12);
    return 0;
}
