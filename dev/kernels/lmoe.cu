/*
 * lmoe.cu — lab: the lean decode MoE at the real shapes (256 experts, top-8, FF 512, shared expert
 * 512, hidden 2048): the two kernels decode runs by default (k_lmoe_gu + k_lmoe_down, lean_moe)
 * against the split-K kernel (k_lmoe_sk, lean_moe_sk, session 26: one launch, clusters of 8 share h
 * through distributed shared memory, the down's partial sums added into x by fp32 reductions).
 * For a Q4_K and a Q6_K down matrix:
 *   - correctness: x += moe(x) once from the same x, checked against the fp64 host reference (the
 *     same top-k, moe.cu's), and split-K against the pair directly (the same q8 values and chunk
 *     dots in another summation order: ~1e-6 relative);
 *   - time: N launches in one CUDA graph with PDL, each MoE waiting for the one before (the chain
 *     decode runs), router logits rotating over 64 sets so the experts (weights) change.
 * The residual is the kernels' input and output (m.x == m.out), as in the engine: the split-K
 * kernel's grid-wide counter is what keeps a late block's RMSNorm from reading a changed x.
 * Split-K variants: shared memory capped at 220 (default: every unit's tile and slice in flight),
 * 138 and 111 KB.
 */
#include "lab_quant.cuh"
#include "../../src/backend/cuda/k_gemvq.cuh"
#include "../../src/backend/cuda/lean.cu"

static int g_nsm;
static cudaStream_t g_st;

static void run_case(int down_type) {
    const int H = 2048, E = 256, K = 8, FF = 512, FS = 512, NSETS = 64;
    host_qmat hg = lab_make_qmat(GT_Q4_K, E * FF, H, 11), hu = lab_make_qmat(GT_Q4_K, E * FF, H, 12),
              hd = lab_make_qmat(down_type, E * H, FF, 13);
    host_qmat sg = lab_make_qmat(GT_Q4_K, FS, H, 14), su = lab_make_qmat(GT_Q4_K, FS, H, 15), sd = lab_make_qmat(down_type, H, FS, 16);
    gmat G = lab_upload(hg), U = lab_upload(hu), D = lab_upload(hd), SG = lab_upload(sg), SU = lab_upload(su), SD = lab_upload(sd);
    std::vector<float> x(H), g(H), logits((size_t)NSETS * (E + 1));
    for (auto &v : x) v = lab_uniform(-1, 1);
    for (auto &v : g) v = lab_uniform(0.8f, 1.2f);
    for (auto &v : logits) v = lab_uniform(-3, 3);
    float *dx, *dg, *dl, *dh;
    unsigned long long *ctr;
    CK(cudaMalloc(&dx, H * 4)); CK(cudaMalloc(&dg, H * 4)); CK(cudaMalloc(&dl, logits.size() * 4));
    CK(cudaMalloc(&dh, (K * FF + FS) * 4)); CK(cudaMalloc(&ctr, 128));
    CK(cudaMemset(ctr, 0, 128));
    CK(cudaMemcpy(dg, g.data(), H * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dl, logits.data(), logits.size() * 4, cudaMemcpyHostToDevice));
    auto args = [&](int set) {
        moe_args a = {dx, dg, 1e-6f, H, E, K, FF, FS, dl + (size_t)set * (E + 1), G, U, D, SG, SU, SD, dh, dx, NULL, NULL};
        return a;
    };
    /* fp64 reference of moe(x) for logit set 0 (moe.cu's) */
    double ss = 0;
    for (float v : x) ss += (double)v * v;
    float r = (float)(1 / sqrt(ss / H + 1e-6));
    std::vector<float> xn(H), row(H), hh(K * FF + FS), ref(H);
    for (int i = 0; i < H; i++) xn[i] = x[i] * r * g[i];
    const float *lg = logits.data();
    int ids[K];
    float w[K];
    bool used[E] = {};
    for (int t = 0; t < K; t++) {
        int bi = -1;
        for (int e = 0; e < E; e++)
            if (!used[e] && (bi < 0 || lg[e] > lg[bi])) bi = e;
        used[bi] = 1;
        ids[t] = bi;
    }
    double den = 0;
    for (int t = 0; t < K; t++) { w[t] = expf(lg[ids[t]] - lg[ids[0]]); den += w[t]; }
    for (int t = 0; t < K; t++) w[t] /= (float)den;
    auto dot = [&](const host_qmat &m, int rr, const float *v) {
        lab_dequant_row(m, rr, row.data());
        double a = 0;
        for (int k = 0; k < m.cols; k++) a += (double)row[k] * v[k];
        return a;
    };
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
    const char *tn = down_type == GT_Q4_K ? "q4_K" : "q6_K";
    const int NV = 4;
    const char *vn[NV] = {"pair (gu + down)", "split-K 220 KB", "split-K 138 KB", "split-K 111 KB"};
    const size_t cap[NV] = {0, 0, 138 * 1024, 111 * 1024};
    std::vector<float> pair_out(H);
    for (int v = 0; v < NV; v++) {
        auto launch = [&](int i) {
            moe_args a = args(i % NSETS);
            int ok = v == 0 ? lean_moe(&a, g_nsm, 1, g_st, 3, NULL, NULL, NULL) : lean_moe_sk(&a, g_nsm, 1, g_st, NULL, 0, NULL, ctr, cap[v], 1);
            if (!ok) { fprintf(stderr, "%s: %s refused the shapes\n", tn, vn[v]); exit(1); }
        };
        CK(cudaMemset(ctr, 0, 128)); /* a new counter epoch per variant: its grid may differ */
        /* one MoE from x: x_out - x against the reference */
        CK(cudaMemcpy(dx, x.data(), H * 4, cudaMemcpyHostToDevice));
        launch(0);
        CK(cudaStreamSynchronize(g_st));
        CK(cudaGetLastError());
        std::vector<float> out(H);
        CK(cudaMemcpy(out.data(), dx, H * 4, cudaMemcpyDeviceToHost));
        for (int i = 0; i < H; i++) out[i] -= x[i];
        double ma, re = lab_relerr(ref.data(), out.data(), H, &ma), rp = 0, mp = 0;
        if (v == 0) pair_out = out;
        else rp = lab_relerr(pair_out.data(), out.data(), H, &mp);
        float us = lab_graph_us(g_st, launch, 100);
        printf("moe %s down  %-18s %s rel.err %.2e (vs pair %.1e, max %.1e)  %7.2f us per layer\n", tn, vn[v], re < 3e-2 && (v == 0 || rp < 1e-4) ? "OK  " : "FAIL",
               re, rp, mp, us);
        fflush(stdout);
    }
    gmat all[6] = {G, U, D, SG, SU, SD};
    for (auto &m : all) { cudaFree((void *)m.q); cudaFree((void *)m.sc); if (m.qh) cudaFree((void *)m.qh); if (m.d) cudaFree((void *)m.d); }
    cudaFree(dx); cudaFree(dg); cudaFree(dl); cudaFree(dh); cudaFree(ctr);
}

int main() {
    CK(cudaDeviceGetAttribute(&g_nsm, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaStreamCreateWithFlags(&g_st, cudaStreamNonBlocking));
    CK(lean_init(0, -1, 0, 1, 1, 1, 1));
    run_case(GT_Q4_K);
    run_case(GT_Q6_K);
    return 0;
}
