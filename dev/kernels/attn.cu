/*
 * attn.cu — lab: gated attention (NH 16, NKV 2, HD 256, bf16 KV cache [NKV][n_ctx][HD]).
 *   decode: k_attn_decode (split-K over CH = 64 positions, the 8 query heads of a kv head packed
 *           in one block so K/V are read once) + k_attn_combine (merge + sigmoid gate);
 *           GB/s over the KV bytes at contexts 4K / 32K / 128K.
 *   prefill v1: k_flash_prefill<256> (WMMA bf16, online softmax): TFLOP/s at T = 4096 from position 0.
 *   prefill v2: k_flash2_prefill<256> (k_flash2.cuh: mma.sync, registers, cp.async double buffer,
 *     the 8 query heads of a kv head in one block); both also checked on a 300-query chunk at
 *     position 1000 (a partial last tile, keys before the chunk).
 * Reference: double-precision softmax attention on the host (decode; and prefill on a few rows).
 */
#include "lab.cuh"
#include "../../src/backend/cuda/k_attn.cuh"
#include "../../src/backend/cuda/k_flash2.cuh"

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
    CK(cudaFuncSetAttribute(k_flash2_prefill<256>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)flash2_smem_bytes<256>()));
    /* relative error of the output rows `rows` of a chunk of Tq queries at positions p0.. (query t
     * uses Q[t], sees keys 0..p0+t) against the host */
    auto check = [&](int Tq, int p0, const std::vector<int> &rows) {
        std::vector<__nv_bfloat16> O((size_t)Tq * NH * HD);
        CK(cudaMemcpy(O.data(), dO, O.size() * 2, cudaMemcpyDeviceToHost));
        double num = 0, den2 = 0;
        for (int t : rows) {
            int qp = p0 + t;
            for (int h = 0; h < NH; h++) {
                int kv = h / G;
                std::vector<double> sc2(qp + 1);
                double mx = -1e300;
                for (int j = 0; j <= qp; j++) {
                    double acc = 0;
                    for (int d = 0; d < HD; d++) acc += (double)__bfloat162float(Q[((size_t)t * NH + h) * HD + d]) * __bfloat162float(K[((size_t)kv * NCTX + j) * HD + d]);
                    sc2[j] = acc; mx = std::max(mx, acc);
                }
                double dd = 0;
                for (int j = 0; j <= qp; j++) { sc2[j] = exp(sc2[j] - mx); dd += sc2[j]; }
                for (int d = 0; d < HD; d++) {
                    double acc = 0;
                    for (int j = 0; j <= qp; j++) acc += sc2[j] * __bfloat162float(V[((size_t)kv * NCTX + j) * HD + d]);
                    double r = acc / dd / (1 + exp(-QG[(size_t)t * NH * 2 * HD + h * 2 * HD + HD + d]));
                    double g = __bfloat162float(O[((size_t)t * NH + h) * HD + d]);
                    num += (g - r) * (g - r); den2 += r * r;
                }
            }
        }
        return sqrt(num / den2);
    };
    double fl = 4.0 * NH * HD * ((double)T * (T + 1) / 2);
    for (int v = 1; v <= 2; v++) {
        auto launch = [&](int Tq) {
            flash_args fa = {dQ, dk, dv, dQG, NH * 2 * HD, dO, dpos, Tq, NH, NKV, NCTX};
            if (v == 1) k_flash_prefill<256><<<dim3((Tq + 63) / 64, NH), 256, flash_smem_bytes<256>()>>>(fa);
            else k_flash2_prefill<256><<<dim3((Tq + FL2_QR - 1) / FL2_QR, NKV), 256, flash2_smem_bytes<256>()>>>(fa);
        };
        /* a later chunk: 300 queries (a partial last tile) at positions 1000.. */
        int p0 = 1000;
        CK(cudaMemcpy(dpos, &p0, 4, cudaMemcpyHostToDevice));
        CK(cudaMemset(dO, 0, Q.size() * 2));
        launch(300);
        CK(cudaDeviceSynchronize());
        double re2 = check(300, 1000, {0, 7, 8, 15, 16, 150, 287, 288, 299});
        CK(cudaMemset(dpos, 0, 4));
        launch(T);
        CK(cudaDeviceSynchronize());
        double re = check(T, 0, {0, 1, 15, 16, 63, 64, 1000, 2047, T - 1});
        float ms = lab_time_ms([&](int) { launch(T); }, 10);
        bool ok = re < 2e-2 && re2 < 2e-2;
        printf("flash prefill T=%d v%d  %s  rel.err %.2e, chunk at 1000: %.2e (bf16 P)  %.3f ms  %.1f TFLOP/s (causal)\n", T, v,
               ok ? "OK  " : "FAIL", re, re2, ms, fl / (ms * 1e-3) / 1e12);
    }
    return 0;
}
