/*
 * attn_dec.cu — lab: decode attention, the flash-decoding kernel (k_attn_dec.cuh: fixed splits,
 * warps streaming 2-position tiles, butterfly all-reduce of the 8 GQA scores) against the older
 * k_attn_decode (64 positions per block staged in shared memory), and the flash-decoding kernel's
 * tensor-core loop (MMA: 16 positions per warp iteration, q and P rounded to bf16 as in flash2 prefill,
 * so its tolerance is that of a bf16 query: 1e-2 relative). NH 16, NKV 2, HD 256, bf16 KV
 * cache [NKV][n_ctx][HD]; both followed by k_attn_combine (merge + sigmoid gate).
 * Reference: double-precision softmax attention on the host; contexts 1, 7, 300 (odd splits, empty
 * splits) and 4K / 32K / 128K (GB/s over the KV bytes; one launch pair, CUDA-event median).
 */
#include "lab.cuh"
#include "../../src/backend/cuda/k_attn_dec.cuh"

static const int NH = 16, NKV = 2, HD = 256, G = NH / NKV;

int main() {
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
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
    size_t fsm = attn_fd_smem(HD);
    CK(cudaFuncSetAttribute(k_attn_decode_fd<8>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fsm));
    auto kmma = k_attn_decode_fd<8, true, FD_G, false, true>;
    CK(cudaFuncSetAttribute(kmma, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fsm));
    auto kq8 = k_attn_decode_fd<8, true, FD_G, true>, kq8m = k_attn_decode_fd<8, true, FD_G, true, true>;
    CK(cudaFuncSetAttribute(kq8, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fsm));
    CK(cudaFuncSetAttribute(kq8m, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fsm));
    /* the q8 cache (k_attn.cuh): codes + an fp16 scale per 32 values, as kv_q8_quant; the reference
     * for the q8 kernels reads the dequantized values */
    const int RBQ = kv_row_bytes(HD, 1);
    std::vector<unsigned char> Kq((size_t)NKV * NCTX * RBQ), Vq(Kq.size());
    std::vector<float> Kd(kvn), Vd(kvn);
    for (int t = 0; t < 2; t++) {
        const std::vector<__nv_bfloat16> &X = t ? V : K;
        std::vector<unsigned char> &Q = t ? Vq : Kq;
        std::vector<float> &D = t ? Vd : Kd;
        for (size_t r = 0; r < (size_t)NKV * NCTX; r++)
            for (int b = 0; b < HD / 32; b++) {
                float am = 0;
                for (int i = 0; i < 32; i++) am = std::max(am, fabsf(__bfloat162float(X[r * HD + 32 * b + i])));
                __half d = __float2half(am / 127.0f);
                float df = __half2float(d), inv = df > 0 ? 1.0f / df : 0.0f;
                for (int i = 0; i < 32; i++) {
                    int c = std::max(-127, std::min(127, (int)lrintf(__bfloat162float(X[r * HD + 32 * b + i]) * inv)));
                    Q[r * RBQ + 32 * b + i] = (unsigned char)(signed char)c;
                    D[r * HD + 32 * b + i] = c * df;
                }
                memcpy(&Q[r * RBQ + HD + 2 * b], &d, 2);
            }
    }
    unsigned char *dkq, *dvq;
    CK(cudaMalloc(&dkq, Kq.size())); CK(cudaMalloc(&dvq, Vq.size()));
    CK(cudaMemcpy(dkq, Kq.data(), Kq.size(), cudaMemcpyHostToDevice)); CK(cudaMemcpy(dvq, Vq.data(), Vq.size(), cudaMemcpyHostToDevice));
    size_t osm = attn_decode_smem(G, HD, CH);
    CK(cudaFuncSetAttribute(k_attn_decode, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)osm));
    int occ = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k_attn_decode_fd<8>, FD_WARPS * 32, fsm));
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, k_attn_decode_fd<8>));
    int NS = std::max(1, prop.multiProcessorCount * occ / NKV);
    printf("k_attn_decode_fd<8>: %d regs, %zu B local, %d blocks/SM, %d splits per kv head\n", fa.numRegs, (size_t)fa.localSizeBytes, occ, NS);
    CK(cudaFuncGetAttributes(&fa, kmma));
    printf("k_attn_decode_fd<8, mma>: %d regs, %zu B local\n", fa.numRegs, (size_t)fa.localSizeBytes);
    CK(cudaFuncGetAttributes(&fa, kq8m));
    printf("k_attn_decode_fd<8, q8, mma>: %d regs, %zu B local\n", fa.numRegs, (size_t)fa.localSizeBytes);
    int ctxs[7] = {1, 7, 300, 4096, 32768, 131072, 0};
    int bad = 0;
    for (int ci = 0; ctxs[ci]; ci++) {
        int n = ctxs[ci], pos = n - 1;
        CK(cudaMemcpy(dpos, &pos, 4, cudaMemcpyHostToDevice));
        std::vector<float> refs[2] = {std::vector<float>(NH * HD), std::vector<float>(NH * HD)};
        std::vector<double> sc(n);
        for (int rq = 0; rq < 2; rq++) {
        std::vector<float> &ref = refs[rq];
        auto kval = [&](size_t i) { return rq ? Kd[i] : __bfloat162float(K[i]); };
        auto vval = [&](size_t i) { return rq ? Vd[i] : __bfloat162float(V[i]); };
        for (int h = 0; h < NH; h++) {
            int kv = h / G;
            double mx = -1e300;
            for (int j = 0; j < n; j++) {
                double s = 0;
                for (int d = 0; d < HD; d++) s += (double)q[h * HD + d] * kval(((size_t)kv * NCTX + j) * HD + d);
                sc[j] = s; mx = std::max(mx, s);
            }
            double den = 0;
            for (int j = 0; j < n; j++) { sc[j] = exp(sc[j] - mx); den += sc[j]; }
            for (int d = 0; d < HD; d++) {
                double acc = 0;
                for (int j = 0; j < n; j++) acc += sc[j] * vval(((size_t)kv * NCTX + j) * HD + d);
                ref[h * HD + d] = (float)(acc / den / (1 + exp(-qg[h * 2 * HD + HD + d])));
            }
        }
        }
        double bytes = 2.0 * NKV * (double)n * HD * 2, qbytes = 2.0 * NKV * (double)n * RBQ;
        for (int v = 0; v < 5; v++) {
            bool q8 = v >= 3;
            attn_dec_args a = {dq, q8 ? (__nv_bfloat16 *)dkq : dk, q8 ? (__nv_bfloat16 *)dvq : dv, dpo, dpml, dqg, dout, dpos, NH, NKV, HD, NCTX, v == 0 ? CH : 0, v == 0 ? 0 : NS};
            a.q8 = q8;
            const std::vector<float> &ref = refs[q8];
            int splits = (n + CH - 1) / CH;
            auto launch = [&](int) {
                if (v == 0) k_attn_decode<<<dim3(NKV, splits), 256, osm>>>(a);
                else if (v == 1) k_attn_decode_fd<8><<<dim3(NKV, NS), FD_WARPS * 32, fsm>>>(a);
                else if (v == 2) kmma<<<dim3(NKV, NS), FD_WARPS * 32, fsm>>>(a);
                else if (v == 3) kq8<<<dim3(NKV, NS), FD_WARPS * 32, fsm>>>(a);
                else kq8m<<<dim3(NKV, NS), FD_WARPS * 32, fsm>>>(a);
                k_attn_combine<false><<<NH, ATT_COMB_THREADS>>>(a);
            };
            CK(cudaMemset(dout, 0xff, NH * HD * 4));
            launch(0);
            CK(cudaDeviceSynchronize());
            std::vector<float> out(NH * HD);
            CK(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
            double ma, re = lab_relerr(ref.data(), out.data(), ref.size(), &ma);
            bool ok = re < (v == 2 || v == 4 ? 1e-2 : 1e-4);
            bad += !ok;
            float ms = lab_time_ms(launch, 30);
            printf("attn decode ctx %6d %-4s %s rel.err %.2e  %7.1f us  %5.0f GB/s (KV)\n", n, v == 0 ? "old" : v == 1 ? "fd" : v == 2 ? "mma" : v == 3 ? "q8" : "q8m", ok ? "OK  " : "FAIL", re,
                   ms * 1e3, (q8 ? qbytes : bytes) / (ms * 1e-3) / 1e9);
        }
    }
    return bad ? 1 : 0;
}
