/*
 * lgdn_in.cu — lab: a GDN layer's input projection inside the fused GDN launch (k_lgdn<true, 1, true>,
 * LILAC_CUDA_GDN_IN=1, session 30) against the two launches it replaces (the in-projection through
 * lean_gemv, then lean_gdn with the router fold in its atomic form, the engine's default). Shapes of
 * Qwen3.6-35B-A3B: HK 16, HV 32, DK = DV = 128, H 2048, E 256 + the shared expert's gate.
 *
 * One decode step at position 5 from a random state and conv history, on both paths, compared:
 *   ring  the raw q / k / v inputs the step stores at slot p: the in-projection's values. The fused
 *         form dots the same chunks and sums the lanes as k_lgemv does, so these must be the SAME
 *         BITS (a tile on the wrong rows or a value exchanged into the wrong place shows here first)
 *   S     the new state: the same bits where b / a are Q4_K (every input the same); BF16 b / a rows
 *         are summed in another order, so only close then
 *   x, l  the residual x_old + W_out y and the raw router logits: fp32 atomics in both, so close
 * Variants: b / a rows BF16 (the synthetic model's) or Q4_K (a GGUF's), the qkv rows Q6_K, v-heads
 * in llama.cpp's tiled order, ring depths 1 / 3 / 6, the W_out / B slices before the wait (wpre). Timing: N layers in one graph with PDL (the
 * pair = 2 launches a layer); the weights stay in L2 here (~19 MB a layer), so only the relative
 * figure means anything; the engine's A/B is `lilac bench` with LILAC_CUDA_GDN_IN=1.
 */
#include "lab_quant.cuh"
#include "../../src/backend/cuda/k_gdn.cuh"
#include "../../src/backend/cuda/k_gemvq.cuh"
#include "../../src/backend/cuda/k_misc.cuh"
#include "../../src/backend/cuda/lean.cu"

static const int HK = 16, HV = 32, DK = 128, DV = 128, QK = HK * DK, CD = 2 * QK + HV * DV, VD = HV * DV, H = 2048, E = 256, NL = E + 1;

template <typename T> static T *dev_vec(const std::vector<T> &v) {
    T *p;
    CK(cudaMalloc(&p, v.size() * sizeof(T)));
    CK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
}
static std::vector<float> rnd(size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (auto &x : v) x = lab_uniform(lo, hi);
    return v;
}
static std::vector<__nv_bfloat16> rnd_bf16(size_t n, float lo, float hi) {
    std::vector<__nv_bfloat16> v(n);
    for (auto &x : v) x = __float2bfloat16(lab_uniform(lo, hi));
    return v;
}
template <typename T> static std::vector<T> down(const T *d, size_t n) {
    std::vector<T> v(n);
    CK(cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
}

static void run_case(int nsm, cudaStream_t st, int qkv_t, int ba_t, int tiled, int nst, int wpre = 0) {
    const float eps = 1e-6f;
    /* the layer's weights */
    gmat Wqkv = lab_upload(lab_make_qmat(qkv_t, CD, H, 11)), Wz = lab_upload(lab_make_qmat(GT_Q4_K, VD, H, 12));
    gmat Wb = lab_upload(lab_make_qmat(ba_t, HV, H, 13)), Wa = lab_upload(lab_make_qmat(ba_t, HV, H, 14));
    gmat Wo = lab_upload(lab_make_qmat(GT_Q4_K, H, VD, 15));
    float *d_ng = dev_vec(rnd(H, 0.8f, 1.2f)), *d_cw = dev_vec(rnd((size_t)CD * 4, -0.5f, 0.5f)), *d_dtb = dev_vec(rnd(HV, -1, 1));
    float *d_sa = dev_vec(rnd(HV, -2, -0.1f)), *d_gain = dev_vec(rnd(DV, 0.8f, 1.2f)), *d_gf = dev_vec(rnd(H, 0.8f, 1.2f));
    __nv_bfloat16 *d_B = dev_vec(rnd_bf16((size_t)NL * VD, -0.05f, 0.05f)), *d_Wr = dev_vec(rnd_bf16((size_t)E * H, -0.1f, 0.1f));
    __nv_bfloat16 *d_Ws = dev_vec(rnd_bf16(H, -0.1f, 0.1f));
    /* the step's inputs: x_old, the state, the conv history (slots of positions 2, 3, 4), position 5 */
    std::vector<float> xin = rnd(H, -1, 1), S0 = rnd((size_t)HV * DK * DV, -0.1f, 0.1f), ring0 = rnd((size_t)4 * CD, -2, 2);
    float *d_xin = dev_vec(xin), *d_S = dev_vec(S0), *d_ring = dev_vec(ring0);
    int pos = 5, *d_pos = dev_vec(std::vector<int>{pos});
    float *d_qkv, *d_z, *d_ab, *d_o, *d_x, *d_l, *d_zx, *d_zl, *d_part;
    CK(cudaMalloc(&d_qkv, CD * 4)); CK(cudaMalloc(&d_z, VD * 4)); CK(cudaMalloc(&d_ab, 2 * HV * 4)); CK(cudaMalloc(&d_o, VD * 4));
    CK(cudaMalloc(&d_x, H * 4)); CK(cudaMalloc(&d_l, NL * 4)); CK(cudaMalloc(&d_zx, H * 4)); CK(cudaMalloc(&d_zl, NL * 4));
    CK(cudaMalloc(&d_part, lean_gdn_part_floats(HV, H, NL) * 4));
    /* the engine's arguments (decode_layer_args) */
    gemv_args in = {};
    in.nseg = 4; in.total_rows = CD + VD + 2 * HV; in.pro = PRO_RMSNORM; in.x = d_xin; in.K = H; in.g = d_ng; in.eps = eps;
    in.seg[0] = {Wqkv, d_qkv, EPI_STORE}; in.seg[1] = {Wz, d_z, EPI_STORE}; in.seg[2] = {Wb, d_ab, EPI_STORE}; in.seg[3] = {Wa, d_ab + HV, EPI_STORE};
    gemv_args out = {};
    out.nseg = 1; out.total_rows = H; out.seg[0] = {Wo, d_x, EPI_ADD};
    out.pro = PRO_HEADNORM_GATED; out.x = d_o; out.K = VD; out.g = d_gain; out.z = d_z; out.hd = DV; out.eps = eps;
    gdn_args g = {d_qkv, d_ab, d_ab + HV, 0, d_cw, d_ring, d_S, d_dtb, d_sa, d_o, d_pos, 1, HK, HV, DV, tiled};
    auto layer = [&](int form, int pdl) { /* 0: the pair, 1: the in-projection inside */
        lean_fold fo = {d_B, d_Wr, d_Ws, d_gf, E, d_xin, d_l, d_zx, d_zl, 1, form ? &in : NULL, nst, wpre};
        if (!form && !lean_gemv(&in, nsm, pdl, st, NULL)) { fprintf(stderr, "lean_gemv refused the in-projection\n"); exit(1); }
        if (!lean_gdn(&g, DK, &out, d_part, NULL, NULL, 11, pdl, st, NULL, 1, &fo)) { fprintf(stderr, "lean_gdn refused (form %d)\n", form); exit(1); }
    };
    std::vector<float> ring[2], S[2], x[2], l[2];
    float us[2];
    for (int form = 0; form < 2; form++) {
        CK(cudaMemcpy(d_S, S0.data(), S0.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_ring, ring0.data(), ring0.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemset(d_x, 0, H * 4)); CK(cudaMemset(d_l, 0, NL * 4));
        layer(form, 0);
        CK(cudaStreamSynchronize(st));
        CK(cudaGetLastError());
        ring[form] = down(d_ring, ring0.size()); S[form] = down(d_S, S0.size()); x[form] = down(d_x, H); l[form] = down(d_l, NL);
        /* N layers' worth in one graph (the state keeps evolving; x and the logits accumulate) */
        us[form] = lab_graph_us(st, [&](int) { layer(form, 1); }, 100);
    }
    size_t rdiff = 0, sdiff = 0;
    for (size_t i = 0; i < ring[0].size(); i++) rdiff += memcmp(&ring[0][i], &ring[1][i], 4) != 0;
    double dS = 0;
    for (size_t i = 0; i < S[0].size(); i++) {
        sdiff += memcmp(&S[0][i], &S[1][i], 4) != 0;
        dS = std::max(dS, (double)fabsf(S[0][i] - S[1][i]));
    }
    double mx, ml, rx = lab_relerr(x[0].data(), x[1].data(), H, &mx), rl = lab_relerr(l[0].data(), l[1].data(), NL, &ml);
    bool exact_s = ba_t != GT_BF16;
    bool ok = rdiff == 0 && (exact_s ? sdiff == 0 : dS < 1e-4) && rx < 1e-4 && rl < 1e-4;
    printf("qkv %s b/a %-4s %s nst %d%s: %s ring %zu differ, S %zu differ (max %.1e), x rel %.1e, logits rel %.1e | %.2f us pair, %.2f us fused (%+.2f)\n",
           qkv_t == GT_Q4_K ? "Q4_K" : "Q6_K", ba_t == GT_BF16 ? "BF16" : "Q4_K", tiled ? "tiled  " : "grouped", nst, wpre ? " wpre" : "", ok ? "OK  " : "FAIL", rdiff,
           sdiff, dS, rx, rl, us[0], us[1], us[1] - us[0]);
    fflush(stdout);
}

int main() {
    int nsm = 0;
    CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    CK(lean_init(0, -1, 0, 1, 1, 1, 1));
    run_case(nsm, st, GT_Q4_K, GT_BF16, 0, 3);
    run_case(nsm, st, GT_Q4_K, GT_Q4_K, 0, 3);
    run_case(nsm, st, GT_Q4_K, GT_Q4_K, 1, 3);
    run_case(nsm, st, GT_Q6_K, GT_Q4_K, 1, 3);
    run_case(nsm, st, GT_Q4_K, GT_BF16, 1, 1);
    run_case(nsm, st, GT_Q4_K, GT_BF16, 0, 6);
    run_case(nsm, st, GT_Q4_K, GT_Q4_K, 0, 3, 1);
    return 0;
}
