/*
 * gemvq.cu — lab: the decode GEMV with the q8 activation written once to global memory (k_qact)
 * and prologue-free GEMV blocks (k_gemv_q, k_gemvq.cuh), against the current default (k_gemv with
 * the per-block RMSNorm + quantize prologue). Every timing is the per-launch average of N back-to-
 * back launches captured in a CUDA graph (what decode does), weight copies rotated past the L2:
 *   old      k_gemv (RMSNorm prologue), N launches
 *   pair/RB  k_qact + k_gemv_q<RB rows per warp batch, T threads>, PDL, N pairs (the new path)
 *   q-only   k_gemv_q alone on a prepared qbuf (weight streaming + dots only)
 * plus the MoE: old k_moe_gateup + k_moe_down vs k_qact + k_moe_gateup_q + k_qact(h) + k_moe_down_q.
 * Every variant is checked against the fp64 host reference first.
 */
#include "lab_quant.cuh"
#include "../../src/backend/cuda/k_gemvq.cuh"

static int g_nsm;
static cudaStream_t g_st;

static qbuf qbuf_alloc(int K) {
    qbuf q;
    CK(cudaMalloc(&q.xf, K * 4)); CK(cudaMalloc(&q.xq, K)); CK(cudaMalloc(&q.dx, K / 32 * 4)); CK(cudaMalloc(&q.s16, K / 16 * 4));
    return q;
}

template <int WT, int NU, int RB, int T> static void gq_launch(const gemv_args &a, const qbuf &q) {
    int occ = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k_gemv_q<WT, NU, RB, T>, T, 0);
    static bool shown = false;
    if (!shown) {
        cudaFuncAttributes fa; cudaFuncGetAttributes(&fa, k_gemv_q<WT, NU, RB, T>);
        printf("  [k_gemv_q<type %d, NU %d, RB %d, T %d>: %d regs, %d blocks/SM]\n", WT, NU, RB, T, fa.numRegs, occ);
        shown = true;
    }
    int rpw = 32 / gemv_lanes(a.K), per = (T / 32) * rpw * RB, need = (a.total_rows + per - 1) / per;
    lab_launch_pdl(k_gemv_q<WT, NU, RB, T>, std::min(need, g_nsm * std::max(occ, 1)), T, 0, g_st, a, q);
}

static void tma_launch(const gemv_args &a, const qbuf &q0, int type, int tile_kb, int nst, bool self = false) {
    int TR = tma_tr(type, a.K, tile_kb), nt = tma_ntiles(a, TR);
    size_t smem = (size_t)nst * TR * tma_row_bytes(type, a.K);
    qbuf q = q0;
    if (self) { q.xq = NULL; smem += qact_smem_bytes(a.K); }
    int occ = 0;
    if (type == GT_Q4_K) cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k_gemv_tma<GT_Q4_K>, TMA_THREADS, smem);
    else cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k_gemv_tma<GT_Q6_K>, TMA_THREADS, smem);
    int grid = std::min(nt, g_nsm * std::max(occ, 1));
    static int shown = 0;
    if (shown < 12) { printf("  [tma: TR %d, %d tiles, %d stages, %zu B smem, %d blocks/SM, grid %d]\n", TR, nt, nst, smem, occ, grid); shown++; }
    if (type == GT_Q4_K) lab_launch_pdl(k_gemv_tma<GT_Q4_K>, grid, TMA_THREADS, smem, g_st, a, q, TR, nst, nt);
    else lab_launch_pdl(k_gemv_tma<GT_Q6_K>, grid, TMA_THREADS, smem, g_st, a, q, TR, nst, nt);
}

static void run_case(const char *name, int type, int rows, int cols) {
    lab_gemv_case cs = lab_gemv_case_make(type, rows, cols);
    const std::vector<gmat> &W = cs.W;
    int copies = (int)W.size();
    qbuf q = qbuf_alloc(cols);
    CK(cudaFuncSetAttribute(k_gemv, cudaFuncAttributeMaxDynamicSharedMemorySize, 96 * 1024));
    CK(cudaFuncSetAttribute(k_gemv_tma<GT_Q4_K>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    CK(cudaFuncSetAttribute(k_gemv_tma<GT_Q6_K>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    gemv_args a = {};
    a.nseg = 1; a.total_rows = rows; a.seg[0].y = cs.dy; a.seg[0].epi = EPI_STORE;
    a.pro = PRO_RMSNORM; a.x = cs.dx; a.K = cols; a.g = cs.dg; a.eps = 1e-6f;
    int nu = cols / 32 / gemv_lanes(cols);
    int N = rows > 100000 ? 10 : 100;
    auto qact_launch = [&]() { lab_launch_pdl(k_qact, 1, QACT_THREADS, (size_t)cols * 4, g_st, a, q); };
    const int NV = 14;
    const char *vn[NV] = {"old k_gemv", "pair RB1 T256", "pair RB2 T256", "pair RB4 T256", "pair RB2 T512", "pair RB1 T128",
                          "q-only RB2 T256", "q-only RB1 T256", "tma-only 16K x4", "tma-only 32K x4", "pair tma 16Kx4", "pair tma 32Kx4",
                          "pair tma 8Kx8", "tma self-quant 16Kx4"};
    auto variant = [&](int v, int i) {
        a.seg[0].W = W[i % copies];
        if (v == 0) {
            int occ = 0, rpw = 32 / gemv_lanes(cols);
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k_gemv, GEMV_THREADS, qact_smem_bytes(cols));
            int need = (rows + 16 * rpw - 1) / (16 * rpw);
            k_gemv<<<std::min(need, g_nsm * std::max(occ, 1)), GEMV_THREADS, qact_smem_bytes(cols), g_st>>>(a);
            return;
        }
        if (v <= 5 || v >= 10) qact_launch();
        if (v == 13) { tma_launch(a, q, type, 16, 4, true); return; }
        if (v >= 8) {
            static const int kb[5] = {16, 32, 16, 32, 8}, ns[5] = {4, 4, 4, 4, 8};
            tma_launch(a, q, type, kb[v - 8], ns[v - 8]);
            return;
        }
        auto go = [&](auto f2, auto f4) { if (nu <= 2) f2(); else f4(); };
#define GQ(RB, T)                                                                                             \
    do {                                                                                                      \
        if (type == GT_Q4_K) go([&] { gq_launch<GT_Q4_K, 2, RB, T>(a, q); }, [&] { gq_launch<GT_Q4_K, 4, RB, T>(a, q); }); \
        else go([&] { gq_launch<GT_Q6_K, 2, RB, T>(a, q); }, [&] { gq_launch<GT_Q6_K, 4, RB, T>(a, q); });           \
    } while (0)
        switch (v) {
        case 1: GQ(1, 256); break;
        case 2: GQ(2, 256); break;
        case 3: GQ(4, 256); break;
        case 4: GQ(2, 512); break;
        case 5: GQ(1, 128); break;
        case 6: GQ(2, 256); break;
        case 7: GQ(1, 256); break;
        }
    };
    for (int v = 0; v < NV; v++) {
        if (v >= 6 && v <= 9) qact_launch(); /* the q-only variants read a prepared qbuf */
        lab_gemv_case_run(cs, g_st, name, vn[v], [&](int i) { variant(v, i); }, N);
    }
    lab_gemv_case_free(cs);
    cudaFree(q.xf); cudaFree(q.xq); cudaFree(q.dx); cudaFree(q.s16);
}

static void run_moe() {
    const int H = 2048, E = 256, K = 8, FF = 512, FS = 512, kf = K * FF + FS;
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
    CK(cudaMalloc(&dh, kf * 4)); CK(cudaMalloc(&dout, H * 4));
    CK(cudaMemcpy(dx, x.data(), H * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dg, g.data(), H * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dl, logits.data(), logits.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaFuncSetAttribute(k_moe_down, cudaFuncAttributeMaxDynamicSharedMemorySize, 96 * 1024));
    qbuf q1 = qbuf_alloc(H), q2 = qbuf_alloc(kf);
    /* out must not accumulate across timing runs for the check: the check runs once from zero */
    auto args = [&](int set) {
        moe_args a = {dx, dg, 1e-6f, H, E, K, FF, FS, dl + (size_t)set * (E + 1), G, U, D, SG, SU, SD, dh, dout, NULL, NULL};
        return a;
    };
    int occ = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k_moe_gateup_q<GT_Q4_K, 2>, MOE_GU_THREADS, 0));
    int nb = (kf + 8 * MOE_GU_RB - 1) / (8 * MOE_GU_RB), gu_grid = std::min(nb, g_nsm * std::max(occ, 1));
    int variant = 0;
    auto launch = [&](int i) {
        moe_args a = args(i % NSETS);
        if (variant == 0) {
            k_moe_gateup<<<(kf + 15) / 16, GEMV_THREADS, qact_smem_bytes(H), g_st>>>(a);
            k_moe_down<<<(H + 7) / 8, 256, qact_smem_bytes(kf), g_st>>>(a);
        } else if (variant == 1) {
            gemv_args p = {};
            p.pro = PRO_RMSNORM; p.x = dx; p.K = H; p.g = dg; p.eps = 1e-6f;
            lab_launch_pdl(k_qact, 1, QACT_THREADS, (size_t)H * 4, g_st, p, q1);
            lab_launch_pdl(k_moe_gateup_q<GT_Q4_K, 2>, gu_grid, MOE_GU_THREADS, 0, g_st, a, q1);
            gemv_args ph = {};
            ph.pro = PRO_PLAIN; ph.x = dh; ph.K = kf;
            lab_launch_pdl(k_qact, 1, QACT_THREADS, (size_t)kf * 4, g_st, ph, q2);
            lab_launch_pdl(k_moe_down_q<GT_Q6_K, 1>, (H + 7) / 8, MOE_DOWN_THREADS, 0, g_st, a, q2);
        } else {
            /* 2: TR 8 with a k_qact of h; 3: TR 16; 4: TR 8, gate/up writes the q8 of h itself */
            int TR = variant == 3 ? 16 : 8, NST = 4;
            qbuf hq = q2;
            if (variant != 4) hq.xq = NULL;
            gemv_args p = {};
            p.pro = PRO_RMSNORM; p.x = dx; p.K = H; p.g = dg; p.eps = 1e-6f;
            lab_launch_pdl(k_qact, 1, QACT_THREADS, (size_t)H * 4, g_st, p, q1);
            size_t s1 = (size_t)NST * 2 * TR * tma_row_bytes(GT_Q4_K, H);
            int o1 = 0, nt1 = (K * FF / TR + FS / TR) / (32 / TR);
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o1, k_moe_gateup_tma<GT_Q4_K>, TMA_THREADS, s1);
            lab_launch_pdl(k_moe_gateup_tma<GT_Q4_K>, std::min(nt1, g_nsm * std::max(o1, 1)), TMA_THREADS, s1, g_st, a, q1, TR, NST, hq);
            if (variant != 4) {
                gemv_args ph = {};
                ph.pro = PRO_PLAIN; ph.x = dh; ph.K = kf;
                lab_launch_pdl(k_qact, 1, QACT_THREADS, (size_t)kf * 4, g_st, ph, q2);
            }
            int NST2 = TR == 16 ? 3 : 4;
            size_t s2 = (size_t)NST2 * (K + 1) * TR * tma_row_bytes(GT_Q6_K, FF);
            int o2 = 0, nt2 = H / TR;
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o2, k_moe_down_tma<GT_Q6_K>, TMA_THREADS, s2);
            if (i == 0) printf("  [moe tma TR %d: gateup %zu B smem %d blocks/SM, %d tiles; down %zu B smem %d blocks/SM, %d tiles]\n", TR, s1, o1, nt1, s2, o2, nt2);
            lab_launch_pdl(k_moe_down_tma<GT_Q6_K>, std::min(nt2, g_nsm * std::max(o2, 1)), TMA_THREADS, s2, g_st, a, q2, TR, NST2);
        }
    };
    double ssx = 0; for (float v : x) ssx += (double)v * v;
    float r = (float)(1 / sqrt(ssx / H + 1e-6));
    std::vector<float> out(H), xn(H), row(H), hh(kf), ref(H, 0.0f);
    for (int i = 0; i < H; i++) xn[i] = x[i] * r * g[i];
    const float *lg = logits.data();
    int ids[K]; float w[K]; bool used[E] = {};
    for (int t = 0; t < K; t++) { int bi = -1; for (int e = 0; e < E; e++) if (!used[e] && (bi < 0 || lg[e] > lg[bi])) bi = e; used[bi] = 1; ids[t] = bi; }
    double den = 0; for (int t = 0; t < K; t++) { w[t] = expf(lg[ids[t]] - lg[ids[0]]); den += w[t]; }
    for (int t = 0; t < K; t++) w[t] /= (float)den;
    auto dot = [&](const host_qmat &m, int rr, const float *v) { lab_dequant_row(m, rr, row.data()); double acc = 0; for (int k = 0; k < m.cols; k++) acc += (double)row[k] * v[k]; return acc; };
    for (int s = 0; s <= K; s++)
        for (int f = 0; f < FF; f++) {
            double gv = s < K ? dot(hg, ids[s] * FF + f, xn.data()) : dot(sg, f, xn.data());
            double uv = s < K ? dot(hu, ids[s] * FF + f, xn.data()) : dot(su, f, xn.data());
            hh[s * FF + f] = (float)(gv / (1 + exp(-gv)) * uv);
        }
    float sgate = 1 / (1 + expf(-lg[E]));
    for (int o = 0; o < H; o++) {
        double acc = 0;
        for (int s = 0; s < K; s++) acc += w[s] * dot(hd, ids[s] * H + o, hh.data() + s * FF);
        acc += sgate * dot(sd, o, hh.data() + K * FF);
        ref[o] = (float)acc;
    }
    CK(cudaFuncSetAttribute(k_moe_gateup_tma<GT_Q4_K>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    CK(cudaFuncSetAttribute(k_moe_down_tma<GT_Q6_K>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    for (variant = 0; variant <= 4; variant++) {
        CK(cudaMemset(dout, 0, H * 4));
        launch(0);
        CK(cudaStreamSynchronize(g_st)); CK(cudaGetLastError());
        CK(cudaMemcpy(out.data(), dout, H * 4, cudaMemcpyDeviceToHost));
        double ma, re = lab_relerr(ref.data(), out.data(), H, &ma);
        float us = lab_graph_us(g_st, launch, 100);
        double bytes = K * (lab_gmat_bytes(G) + lab_gmat_bytes(U) + lab_gmat_bytes(D)) / E + lab_gmat_bytes(SG) + lab_gmat_bytes(SU) + lab_gmat_bytes(SD);
        printf("moe decode %-34s %s rel.err %.2e %8.2f us %6.0f GB/s\n", variant == 0 ? "old k_moe_gateup+k_moe_down" : variant == 1 ? "qact+gateup_q+qact(h)+down_q (PDL)" : variant == 2 ? "tma TR8 x4 (qact, gateup, qact, down)" : variant == 3 ? "tma TR16 x4" : "tma TR8 x4, gateup writes q8(h)",
               re < 3e-2 ? "OK  " : "FAIL", re, us, bytes / (us * 1e-6) / 1e9);
        fflush(stdout);
    }
}

int main() {
    CK(cudaDeviceGetAttribute(&g_nsm, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaStreamCreateWithFlags(&g_st, cudaStreamNonBlocking));
    run_case("q4_K 8192x2048 (qkv)", GT_Q4_K, 8192, 2048);
    run_case("q4_K 12288x2048 (qkv+z)", GT_Q4_K, 12288, 2048);
    run_case("q4_K 2048x4096 (out)", GT_Q4_K, 2048, 4096);
    run_case("q4_K 257x2048 (router)", GT_Q4_K, 264, 2048);
    run_case("q6_K 248320x2048 (lm)", GT_Q6_K, 248320, 2048);
    run_moe();
    return 0;
}
