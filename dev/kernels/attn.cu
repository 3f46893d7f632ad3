/*
 * attn.cu — lab: gated attention (NH 16, NKV 2, HD 256, bf16 KV cache [NKV][n_ctx][HD]).
 *   decode: see attn_dec.cu (the old split-K kernel and the flash-decoding one, side by side).
 *   prefill v1: k_flash_prefill<256> (WMMA bf16, online softmax): TFLOP/s at T = 4096 from position 0.
 *   prefill v2: k_flash2_prefill<256> (k_flash2.cuh: mma.sync, registers, cp.async double buffer,
 *     the 8 query heads of a kv head in one block); both also checked on a 300-query chunk at
 *     position 1000 (a partial last tile, keys before the chunk).
 * Reference: double-precision softmax attention on the host, on a few rows.
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
    __nv_bfloat16 *dk, *dv; int *dpos;
    CK(cudaMalloc(&dk, kvn * 2)); CK(cudaMalloc(&dv, kvn * 2));
    CK(cudaMemcpy(dk, K.data(), kvn * 2, cudaMemcpyHostToDevice)); CK(cudaMemcpy(dv, V.data(), kvn * 2, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dpos, 4));
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
