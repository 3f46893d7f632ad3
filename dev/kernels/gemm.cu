/*
 * gemm.cu — lab: the prefill GEMM k_gemm<BM> (tensor cores, weights dequantized tile by tile).
 *   dense:   C[M][N] = A[M][K] W^T, bf16 A, Q4_K / Q6_K W (GM_STORE): the GDN qkv shape
 *            M 4096 x N 8192 x K 2048 (Q4_K) and the shared-expert down shape N 2048 x K 512 (Q6_K).
 *   grouped: the MoE of one 4096-token chunk (256 experts, top-8, FF 512, H 2048): tokens sorted by
 *            expert with the backend's k_moe_count / k_moe_tiles / k_moe_scatter, then the gate GEMM
 *            (Q4_K, GM_STORE into [pairs][FF]) and the down GEMM (Q6_K, GM_SCATTER_ADD with the
 *            routing weights into X[T][H]), each with BM = 64 / 128 and scalar / vector atomics, and two
 *            deterministic scatters (session 12): "fix", 64-bit fixed-point atomics + k_fix_add (the
 *            backend's `--deterministic`), and "ord", plain stores of the sorted rows + a per-token sum
 *            in slot order (k_moe_sum_ordered, k_misc.cuh: the backend's LILAC_CUDA_MOE_DET=2). Written when no device time
 *            was left: first run next session.
 * Reference: host fp64 dot products of the bf16-rounded A with the host-dequantized W, on every
 * element of small problems (partial tiles in m and n) and on sampled rows of the timed ones.
 * k_gemm2 (k_gemm2.cuh, mma.sync + in-kernel expansion; session 13, written without a device): its
 * variants run next to k_gemm's in every case (dense BM 64 / 128 / 256, MoE BM 128 / 64); first a CPU
 * emulation of its W expansion + swizzle + fragment mapping (runs without a GPU), and "modes": its
 * ADD / SWIGLU / ADD_GATED / odd-stride STORE epilogues against k_gemm<64> on the same inputs.
 */
#include "lab_quant.cuh"
#include "../../src/backend/cuda/k_gemm.cuh"
#include "../../src/backend/cuda/k_gemm2.cuh"


static float bf16r(float x) { return __bfloat162float(__float2bfloat16(x)); }

/* CPU emulation of k_gemm2's W path for one 128-row tile over all k-tiles, with the kernel's own
 * expansion helpers (host-callable): the raw bytes of each k-tile laid out as the cp.async roles put
 * them, expanded by each thread's role into the swizzled bf16 tile, then read back through the
 * ldmatrix.x4 lane mapping of the B fragments (and the A tile through the A-fragment mapping);
 * every fragment element is compared with the bf16-rounded host dequantization. Counts elements
 * that differ (a last-bit difference of the fp32 value can round to the neighbouring bf16). */
static void check_gemm2_host(int type) {
    const int R = 128, K = 512, nb = K / 256;
    host_qmat hw = lab_make_qmat(type, R, K, 5);
    std::vector<float> ref((size_t)R * K);
    for (int r = 0; r < R; r++) lab_dequant_row(hw, r, &ref[(size_t)r * K]);
    int bb = type == GT_Q4_K ? 144 : 210;
    long bad = 0, far = 0;
    double maxd = 0, maxr = 0;
    std::vector<uint8_t> sB(128 * 128);
    for (int kt = 0; kt < K / 64; kt++) {
        int k0 = kt * 64, kb = k0 >> 8, kq = (k0 >> 6) & 3, nh = kq >> 1, qp = kq & 1;
        for (int tid = 0; tid < 256; tid++) {
            int dr = tid >> 1, dh = tid & 1, dkey = g2_wkey(dr & 7);
            const uint8_t *blk = hw.blocks.data() + ((size_t)dr * nb + kb) * bb;
            uint32_t q[4], l1[4], hq[4];
            float cl[4], ch[4];
            int sl = 4 * qp;
            if (type == GT_Q4_K) {
                memcpy(q, blk + 16 + 32 * kq + 16 * dh, 16);
                uint32_t mv[4];
                memcpy(mv, blk, 16);
                float d = lab_h2f((uint16_t)(mv[0] & 0xffff)), dmin = lab_h2f((uint16_t)(mv[0] >> 16));
                float sc0, mm0, sc1, mm1;
                g2_q4k_sm(mv[1], mv[2], mv[3], 2 * kq, sc0, mm0);
                g2_q4k_sm(mv[1], mv[2], mv[3], 2 * kq + 1, sc1, mm1);
                g2_coef(d * sc0, dmin * mm0, cl);
                g2_coef(d * sc1, dmin * mm1, ch);
            } else {
                memcpy(q, blk + 64 * nh + 16 * dh, 16);
                memcpy(l1, blk + 64 * nh + 32 + 16 * dh, 16);
                memcpy(hq, blk + 128 + 32 * nh + 16 * dh, 16);
                const int8_t *sc = (const int8_t *)(blk + 192);
                float d = lab_h2f((uint16_t)(blk[208] | blk[209] << 8));
                float s0 = d * (float)sc[8 * nh + 4 * qp + dh], s1 = d * (float)sc[8 * nh + 4 * qp + 2 + dh];
                cl[0] = s0 * (1.0f / 65536.0f); cl[1] = -(s0 * 160.0f);
                ch[0] = s1 * (1.0f / 65536.0f); ch[1] = -(s1 * 160.0f);
            }
            for (int p = 0; p < 2; p++) {
                uint32_t o[8];
                for (int i = 0; i < 2; i++) {
                    uint32_t x = q[2 * p + i];
                    if (type == GT_Q4_K) {
                        g2_q4k_word(x, cl, ch, o[2 * i], o[2 * i + 1], o[4 + 2 * i], o[5 + 2 * i]);
                    } else {
                        uint32_t h = hq[2 * p + i];
                        uint32_t y0 = ((x >> sl) & 0x0F0F0F0Fu) | (((h >> sl) & 0x03030303u) << 4);
                        uint32_t y1 = ((l1[2 * p + i] >> sl) & 0x0F0F0F0Fu) | (((h >> (sl + 2)) & 0x03030303u) << 4);
                        g2_q6k_word(y0, cl[0], cl[1], o[2 * i], o[2 * i + 1]);
                        g2_q6k_word(y1, ch[0], ch[1], o[4 + 2 * i], o[5 + 2 * i]);
                    }
                }
                memcpy(&sB[dr * 128 + (((2 * dh + p) ^ dkey) << 4)], o, 16);
                memcpy(&sB[dr * 128 + (((4 + 2 * dh + p) ^ dkey) << 4)], o + 4, 16);
            }
        }
        /* ldmatrix.x4 of warp column wn, k step kk, pair jj: matrix mq's 8 row addresses come from
         * lanes 8 mq .. 8 mq + 7; lane L receives row L / 4, elements 2 (L % 4), + 1 of each matrix */
        for (int wn = 0; wn < 128; wn += 32)
            for (int kk = 0; kk < 4; kk++)
                for (int jj = 0; jj < 2; jj++)
                    for (int L = 0; L < 32; L++)
                        for (int mq = 0; mq < 4; mq++) {
                            int src = 8 * mq + L / 4;
                            int row = wn + jj * 16 + (src & 7) + 8 * (src >> 4);
                            int off = (((src >> 3) & 1) ^ g2_wkey(src & 7)) << 4 ^ (32 * kk);
                            for (int h = 0; h < 2; h++) {
                                uint16_t bits;
                                memcpy(&bits, &sB[row * 128 + off + 4 * (L % 4) + 2 * h], 2);
                                uint32_t u = (uint32_t)bits << 16;
                                float got;
                                memcpy(&got, &u, 4);
                                /* b fragment: n tile 2 jj + mq / 2, register mq % 2: k = 2 (L % 4) + h + 8 (mq % 2), n = L / 4 */
                                int n = wn + 8 * (2 * jj + mq / 2) + L / 4, k = k0 + 16 * kk + 2 * (L % 4) + h + 8 * (mq % 2);
                                float want = bf16r(ref[(size_t)n * K + k]);
                                double df = fabs((double)got - want);
                                if (df > 0) bad++;
                                if (df > 1e-2 * fabs(want) + 1e-6) far++;
                                maxd = fmax(maxd, df);
                                maxr = fmax(maxr, fabs(want));
                            }
                        }
    }
    /* A: the cp.async role (row tid / 8 + 32 i, chunk tid % 8 -> chunk ^ row % 8) read back through
     * the A fragment mapping (rows wm + lane % 16, chunk 2 kk + lane / 16) */
    long abad = 0;
    {
        const int BMa = 128;
        std::vector<uint16_t> At(BMa * 64), sA(BMa * 64);
        for (int i = 0; i < BMa * 64; i++) At[i] = (uint16_t)(i * 2654435761u >> 7);
        for (int tid = 0; tid < 256; tid++)
            for (int i = 0; i < BMa / 32; i++) {
                int r = (tid >> 3) + 32 * i, c = tid & 7;
                memcpy(&sA[r * 64 + ((c ^ (r & 7)) * 8)], &At[r * 64 + c * 8], 16);
            }
        for (int wm = 0; wm < BMa; wm += 16)
            for (int kk = 0; kk < 4; kk++)
                for (int L = 0; L < 32; L++)
                    for (int mq = 0; mq < 4; mq++) {
                        int src = 8 * mq + L / 4;
                        int row = wm + (src & 15);
                        int off = ((((src >> 4) ^ (src & 7)) << 4) ^ (32 * kk)) / 2;
                        for (int h = 0; h < 2; h++) {
                            /* a fragment register mq: row g + 8 (mq % 2), k 2 t + h + 8 (mq / 2) */
                            int r = wm + L / 4 + 8 * (mq % 2), k = 16 * kk + 2 * (L % 4) + h + 8 * (mq / 2);
                            if (sA[row * 64 + off + 2 * (L % 4) + h] != At[r * 64 + k]) abad++;
                        }
                    }
    }
    printf("k_gemm2 host emulation %s: W fragments %ld / %d differ from bf16(ref) (%ld by > 1%%, max |diff| %.2e of max %.2e), A fragments %ld wrong  %s\n",
           type == GT_Q4_K ? "Q4_K" : "Q6_K", bad, R * K, far, maxd, maxr, abad, far == 0 && abad == 0 && bad * 1000 < R * K ? "OK" : "FAIL");
}

struct dense_case {
    int type, M, N, K;
};

/* max |err| / max |ref| over rows rows_chk (all if empty) */
static double check_dense(const host_qmat &hw, const std::vector<float> &A, const std::vector<float> &C, int M, int N, int K,
                          const std::vector<int> &rows) {
    std::vector<float> wrow(K);
    std::vector<double> ref((size_t)rows.size() * N);
    for (int n = 0; n < N; n++) {
        lab_dequant_row(hw, n, wrow.data());
        for (size_t i = 0; i < rows.size(); i++) {
            double s = 0;
            const float *a = &A[(size_t)rows[i] * K];
            for (int k = 0; k < K; k++) s += (double)a[k] * bf16r(wrow[k]);
            ref[i * N + n] = s;
        }
    }
    double me = 0, mr = 0;
    for (size_t i = 0; i < rows.size(); i++)
        for (int n = 0; n < N; n++) {
            double r = ref[i * N + n], g = C[(size_t)rows[i] * N + n];
            double d = fabs(r - g);
            me = fmax(me, d == d ? d : INFINITY); /* NaN (an element never written) fails */
            mr = fmax(mr, fabs(r));
        }
    return me / (mr > 0 ? mr : 1);
}

static void run_dense(const dense_case &dc, bool time_it) {
    host_qmat hw = lab_make_qmat(dc.type, dc.N, dc.K, 11);
    gmat W = lab_upload(hw);
    std::vector<float> A((size_t)dc.M * dc.K);
    std::vector<__nv_bfloat16> Ab(A.size());
    for (size_t i = 0; i < A.size(); i++) { A[i] = bf16r(lab_uniform(-1, 1)); Ab[i] = __float2bfloat16(A[i]); }
    __nv_bfloat16 *dA; float *dC;
    CK(cudaMalloc(&dA, Ab.size() * 2)); CK(cudaMalloc(&dC, (size_t)dc.M * dc.N * 4));
    CK(cudaMemcpy(dA, Ab.data(), Ab.size() * 2, cudaMemcpyHostToDevice));
    std::vector<int> rows;
    if (dc.M <= 512) for (int m = 0; m < dc.M; m++) rows.push_back(m);
    else for (int i = 0; i < 24; i++) rows.push_back((int)(lab_u32() % dc.M));
    std::vector<float> C((size_t)dc.M * dc.N);
    /* v 0..2: k_gemm BM 64, 128 (MB 1), 128 (MB 2); v 3..5: k_gemm2 BM 64, 128, 256; v 6..8: the same with
     * the fragments of the next k-step loaded first (PF 1) */
    for (int v = 0; v < 9; v++) {
        int bm = v == 0 || v == 3 || v == 6 ? 64 : v == 5 || v == 8 ? 256 : 128, pf = v >= 6;
        gemm_args a = {};
        a.A = dA; a.lda = dc.K; a.W = W; a.N = dc.N; a.K = dc.K; a.M = dc.M; a.mode = GM_STORE; a.C = dC; a.ldc = dc.N;
        dim3 grid((dc.N + GM_BN - 1) / GM_BN, (dc.M + bm - 1) / bm);
        auto launch = [&](int) {
            if (v >= 3) gemm2_run(bm, grid, 0, a, pf);
            else if (v == 2) k_gemm<128, 2><<<grid, 256>>>(a);
            else if (v == 1) k_gemm<128, 1><<<grid, 256>>>(a);
            else k_gemm<64><<<grid, 256>>>(a);
        };
        CK(cudaMemset(dC, 0xff, C.size() * 4)); /* NaN: an element the kernel skips fails the check */
        launch(0);
        CK(cudaDeviceSynchronize());
        CK(cudaGetLastError());
        CK(cudaMemcpy(C.data(), dC, C.size() * 4, cudaMemcpyDeviceToHost));
        double e = check_dense(hw, A, C, dc.M, dc.N, dc.K, rows);
        printf("dense %s M %4d N %5d K %4d %-6s BM %3d MB %d  %s  max err / max ref %.2e", dc.type == GT_Q4_K ? "Q4_K" : dc.type == GT_Q6_K ? "Q6_K" : "BF16", dc.M, dc.N,
               dc.K, pf ? "gemm2p" : v >= 3 ? "gemm2" : "gemm", bm, v == 1 || v >= 3 ? 1 : 2, e < 2e-3 ? "OK  " : "FAIL", e);
        if (time_it) {
            float ms = lab_time_ms(launch, 20);
            printf("  %.3f ms  %.1f TFLOP/s", ms, 2.0 * dc.M * dc.N * dc.K / (ms * 1e-3) / 1e12);
        }
        printf("\n");
    }
    CK(cudaFree(dA)); CK(cudaFree(dC));
}

/* The other epilogues (ADD, SWIGLU, ADD_GATED, and STORE with an odd row stride) on a small problem
 * with partial tiles: k_gemm2 (BM 64 / 128 / 256) against k_gemm<64> from the same inputs. */
static void run_modes(int type, int M, int N, int K) {
    host_qmat hw = lab_make_qmat(type, N, K, 31);
    gmat W = lab_upload(hw);
    int ld = N | 1; /* odd: the scalar store path; SWIGLU's G and H use N (the vector path where N is even) */
    std::vector<__nv_bfloat16> Ab((size_t)M * K);
    for (auto &x : Ab) x = __float2bfloat16(lab_uniform(-1, 1));
    std::vector<float> C0((size_t)M * ld), G((size_t)M * N), RG((size_t)M * 3);
    for (auto &x : C0) x = lab_uniform(-1, 1);
    for (auto &x : G) x = lab_uniform(-3, 3);
    for (auto &x : RG) x = lab_uniform(-3, 3);
    __nv_bfloat16 *dA, *dH; float *dC, *dG, *dR;
    CK(cudaMalloc(&dA, Ab.size() * 2)); CK(cudaMalloc(&dC, C0.size() * 4)); CK(cudaMalloc(&dG, G.size() * 4));
    CK(cudaMalloc(&dR, RG.size() * 4)); CK(cudaMalloc(&dH, G.size() * 2));
    CK(cudaMemcpy(dA, Ab.data(), Ab.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dG, G.data(), G.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dR, RG.data(), RG.size() * 4, cudaMemcpyHostToDevice));
    const char *names[] = {"STORE", "ADD", "SWIGLU", "", "ADD_GATED"};
    for (int mode : {GM_STORE, GM_ADD, GM_SWIGLU, GM_ADD_GATED}) {
        std::vector<float> out[4];
        for (int v = 0; v < 4; v++) { /* 0: k_gemm<64>; 1..3: k_gemm2 BM 64, 128, 256 */
            int bm = v == 0 || v == 1 ? 64 : v == 2 ? 128 : 256;
            gemm_args a = {};
            a.A = dA; a.lda = K; a.W = W; a.N = N; a.K = K; a.M = M; a.mode = mode; a.C = dC; a.ldc = ld;
            a.G = dG; a.ldg = N; a.H = dH; a.ldh = N; a.rowgate = dR + 1; a.rg_stride = 3;
            dim3 grid((N + GM_BN - 1) / GM_BN, (M + bm - 1) / bm);
            CK(cudaMemcpy(dC, C0.data(), C0.size() * 4, cudaMemcpyHostToDevice));
            CK(cudaMemset(dH, 0xff, G.size() * 2));
            if (v) gemm2_run(bm, grid, 0, a);
            else k_gemm<64><<<grid, 256>>>(a);
            CK(cudaDeviceSynchronize());
            CK(cudaGetLastError());
            if (mode == GM_SWIGLU) {
                std::vector<__nv_bfloat16> Hh(G.size());
                CK(cudaMemcpy(Hh.data(), dH, Hh.size() * 2, cudaMemcpyDeviceToHost));
                out[v].resize(Hh.size());
                for (size_t i = 0; i < Hh.size(); i++) out[v][i] = __bfloat162float(Hh[i]);
            } else {
                out[v].resize(C0.size());
                CK(cudaMemcpy(out[v].data(), dC, C0.size() * 4, cudaMemcpyDeviceToHost));
            }
        }
        printf("modes %s M %d N %d K %d %-9s", type == GT_Q4_K ? "Q4_K" : "Q6_K", M, N, K, names[mode]);
        for (int v = 1; v < 4; v++) {
            double me = 0, mr = 0;
            for (size_t i = 0; i < out[0].size(); i++) {
                double d = fabs((double)out[v][i] - out[0][i]);
                me = fmax(me, d == d ? d : INFINITY);
                mr = fmax(mr, fabs((double)out[0][i]));
            }
            me /= mr > 0 ? mr : 1;
            /* SWIGLU's bf16 output can differ by one bf16 step (2^-8) where the fp32 sums differ in the last bits */
            printf("  gemm2 BM %3d vs gemm %s %.2e", v == 1 ? 64 : v == 2 ? 128 : 256, me < (mode == GM_SWIGLU ? 1e-2 : 2e-3) ? "OK  " : "FAIL", me);
        }
        printf("\n");
    }
    cudaFree(dA); cudaFree(dC); cudaFree(dG); cudaFree(dR); cudaFree(dH);
}

/* The grouped MoE pair of one chunk of T tokens. */
static void run_moe(int T, bool time_it) {
    const int H = 2048, E = 256, KT = 8, FF = 512, n = T * KT;
    static host_qmat hg = lab_make_qmat(GT_Q4_K, E * FF, H, 21), hd = lab_make_qmat(GT_Q6_K, E * H, FF, 22);
    static gmat G = lab_upload(hg), D = lab_upload(hd);
    static host_qmat hu = lab_make_qmat(GT_Q4_K, E * FF, H, 23);
    static gmat U = lab_upload(hu);
    std::vector<int> ids(n);
    std::vector<float> wts(n), X((size_t)T * H), Hh((size_t)n * FF);
    for (int t = 0; t < T; t++) {
        /* KT distinct experts, skewed so expert sizes vary (some above 128 rows, many below 64) */
        for (int s = 0; s < KT; s++) {
            int e;
            bool dup;
            do {
                uint32_t u = lab_u32();
                e = (u & 3) == 0 ? (int)((u >> 2) % 16) : (int)((u >> 2) % E);
                dup = false;
                for (int j = 0; j < s; j++) dup |= ids[t * KT + j] == e;
            } while (dup);
            ids[t * KT + s] = e;
            wts[t * KT + s] = lab_uniform(0.05f, 0.3f);
        }
    }
    std::vector<float> Xf((size_t)T * H);
    std::vector<__nv_bfloat16> Xb((size_t)T * H), Hb((size_t)n * FF);
    for (size_t i = 0; i < Xf.size(); i++) { Xf[i] = bf16r(lab_uniform(-1, 1)); Xb[i] = __float2bfloat16(Xf[i]); }
    for (size_t i = 0; i < Hh.size(); i++) { Hh[i] = bf16r(lab_uniform(-1, 1)); Hb[i] = __float2bfloat16(Hh[i]); }
    for (auto &v : X) v = lab_uniform(-1, 1);
    int *d_ids, *d_cnt, *d_cur, *d_perm, *d_te, *d_tm0, *d_tmn, *d_nt;
    float *d_w, *d_X, *d_Gb;
    __nv_bfloat16 *d_Xb, *d_Hb;
    int mt = (n + 63) / 64 + E;
    CK(cudaMalloc(&d_ids, n * 4)); CK(cudaMalloc(&d_cnt, E * 4)); CK(cudaMalloc(&d_cur, E * 4)); CK(cudaMalloc(&d_perm, n * 4));
    CK(cudaMalloc(&d_te, mt * 4)); CK(cudaMalloc(&d_tm0, mt * 4)); CK(cudaMalloc(&d_tmn, mt * 4)); CK(cudaMalloc(&d_nt, 16));
    CK(cudaMalloc(&d_w, n * 4)); CK(cudaMalloc(&d_X, X.size() * 4)); CK(cudaMalloc(&d_Gb, (size_t)n * FF * 4));
    unsigned long long *d_fix; /* the deterministic scatter's fixed-point sums (k_gemm.cuh, gd.fix) */
    CK(cudaMalloc(&d_fix, X.size() * 8));
    float *d_Y; /* mode "ord": the down GEMM's rows in sorted order, [n][H] */
    int *d_inv;
    CK(cudaMalloc(&d_Y, (size_t)n * H * 4)); CK(cudaMalloc(&d_inv, n * 4));
    CK(cudaMalloc(&d_Xb, Xb.size() * 2)); CK(cudaMalloc(&d_Hb, Hb.size() * 2));
    CK(cudaMemcpy(d_ids, ids.data(), n * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_w, wts.data(), n * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_Xb, Xb.data(), Xb.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_Hb, Hb.data(), Hb.size() * 2, cudaMemcpyHostToDevice));
    /* host reference rows: the first 16 tokens (gate: their 8 pairs; down: X after the scatter) */
    int TC = T < 16 ? T : 16;
    std::vector<float> wrow(H > FF ? H : FF);
    std::vector<double> gref((size_t)TC * KT * FF), xref((size_t)TC * H);
    for (int t = 0; t < TC; t++) {
        for (int s = 0; s < KT; s++) {
            int e = ids[t * KT + s];
            for (int f = 0; f < FF; f++) {
                lab_dequant_row(hg, e * FF + f, wrow.data());
                double acc = 0;
                for (int k = 0; k < H; k++) acc += (double)Xf[(size_t)t * H + k] * bf16r(wrow[k]);
                gref[((size_t)t * KT + s) * FF + f] = acc;
            }
        }
        for (int h = 0; h < H; h++) {
            double acc = X[(size_t)t * H + h];
            for (int s = 0; s < KT; s++) {
                int e = ids[t * KT + s];
                lab_dequant_row(hd, e * H + h, wrow.data());
                double d = 0;
                for (int f = 0; f < FF; f++) d += (double)Hh[((size_t)t * KT + s) * FF + f] * bf16r(wrow[f]);
                acc += wts[t * KT + s] * d;
            }
            xref[(size_t)t * H + h] = acc;
        }
    }
    /* red4 2: the deterministic scatter (64-bit fixed point, then k_fix_add), timed with its memset
     * and add as the model runs it; 3: the ordered one (k_moe_sum_ordered); both checked to give the
     * same bits twice */
    /* v 0..2: k_gemm BM 64, 128 (MB 1), 128 (MB 2); v 3, 4: k_gemm2 BM 128, 64; v 5, 6: the same with PF 1
     * (the older kernels with red4 1 only: their other scatters were measured in session 13) */
    for (int v = 0; v < 7; v++)
        for (int red4 = 0; red4 <= 3; red4++) {
            if (v < 3 && red4 != 1) continue;
            int bm = v == 0 || v == 4 || v == 6 ? 64 : 128, pf = v >= 5;
            bool g2 = v >= 3;
            CK(cudaMemset(d_cnt, 0, E * 4));
            k_moe_count<<<(n + 255) / 256, 256>>>(d_ids, n, d_cnt);
            k_moe_tiles<<<1, 1>>>(d_cnt, E, bm, d_cur, d_te, d_tm0, d_tmn, d_nt);
            k_moe_scatter<<<(n + 255) / 256, 256>>>(d_ids, n, d_cur, d_perm);
            int max_tiles = (n + bm - 1) / bm + E;
            gemm_args ga = {};
            ga.A = d_Xb; ga.lda = H; ga.a_map = d_perm; ga.a_div = KT; ga.W = G; ga.N = FF; ga.K = H; ga.M = n;
            ga.tile_e = d_te; ga.tile_m0 = d_tm0; ga.tile_mn = d_tmn; ga.n_tiles = d_nt; ga.w_rows_per_e = FF;
            ga.mode = GM_STORE; ga.C = d_Gb; ga.ldc = FF; ga.red4 = red4;
            gemm_args gd = ga;
            /* down: A = the sorted rows of h (Hb is indexed by sorted row here: gather it by perm below) */
            gd.A = d_Hb; gd.lda = FF; gd.a_map = d_perm; gd.a_div = 1; gd.W = D; gd.N = H; gd.K = FF; gd.w_rows_per_e = H;
            gd.mode = GM_SCATTER_ADD; gd.C = d_X; gd.ldc = H; gd.c_map = d_perm; gd.c_div = KT; gd.c_w = d_w;
            gd.red4 = red4 == 1;
            gd.fix = red4 == 2 ? d_fix : NULL;
            if (red4 == 3) { gd.mode = GM_STORE; gd.C = d_Y; gd.ldc = H; }
            auto gate = [&](int) {
                if (g2) gemm2_run(bm, dim3(FF / GM_BN, max_tiles), 0, ga, pf);
                else if (v == 2) k_gemm<128, 2><<<dim3(FF / GM_BN, max_tiles), 256>>>(ga);
                else if (v == 1) k_gemm<128, 1><<<dim3(FF / GM_BN, max_tiles), 256>>>(ga);
                else k_gemm<64><<<dim3(FF / GM_BN, max_tiles), 256>>>(ga);
            };
            auto down = [&](int) {
                if (gd.fix) cudaMemsetAsync(gd.fix, 0, X.size() * 8);
                if (g2) gemm2_run(bm, dim3(H / GM_BN, max_tiles), 0, gd, pf);
                else if (v == 2) k_gemm<128, 2><<<dim3(H / GM_BN, max_tiles), 256>>>(gd);
                else if (v == 1) k_gemm<128, 1><<<dim3(H / GM_BN, max_tiles), 256>>>(gd);
                else k_gemm<64><<<dim3(H / GM_BN, max_tiles), 256>>>(gd);
                if (gd.fix) k_fix_add<<<1024, 256>>>(gd.fix, d_X, (long)X.size());
                if (red4 == 3) {
                    k_inv_perm<<<(n + 255) / 256, 256>>>(d_perm, n, d_inv);
                    k_moe_sum_ordered<<<T, 128>>>(d_Y, d_inv, d_w, d_X, T, KT, H);
                }
            };
            CK(cudaMemcpy(d_X, X.data(), X.size() * 4, cudaMemcpyHostToDevice));
            CK(cudaMemset(d_Gb, 0xff, (size_t)n * FF * 4)); /* NaN: rows the gate GEMM skips fail */
            gate(0);
            down(0);
            CK(cudaDeviceSynchronize());
            CK(cudaGetLastError());
            std::vector<int> perm(n);
            std::vector<float> Gb((size_t)n * FF), Xg(X.size());
            CK(cudaMemcpy(perm.data(), d_perm, n * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(Gb.data(), d_Gb, Gb.size() * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(Xg.data(), d_X, Xg.size() * 4, cudaMemcpyDeviceToHost));
            double eg = 0, mg = 0, ex = 0, mx = 0;
            for (int m = 0; m < n; m++) {
                int src = perm[m];
                if (src / KT >= TC) continue;
                for (int f = 0; f < FF; f++) {
                    double r = gref[(size_t)src * FF + f];
                    double dg = fabs(r - Gb[(size_t)m * FF + f]);
                    eg = fmax(eg, dg == dg ? dg : INFINITY);
                    mg = fmax(mg, fabs(r));
                }
            }
            for (int t = 0; t < TC; t++)
                for (int h = 0; h < H; h++) {
                    double r = xref[(size_t)t * H + h];
                    double dx = fabs(r - Xg[(size_t)t * H + h]);
                    ex = fmax(ex, dx == dx ? dx : INFINITY);
                    mx = fmax(mx, fabs(r));
                }
            eg /= mg; ex /= mx;
            bool same = true; /* the same input twice: the same bits (red4 2) */
            if (red4 >= 2) {
                std::vector<float> X2(X.size());
                CK(cudaMemcpy(d_X, X.data(), X.size() * 4, cudaMemcpyHostToDevice));
                down(0);
                CK(cudaMemcpy(X2.data(), d_X, X2.size() * 4, cudaMemcpyDeviceToHost));
                same = !memcmp(X2.data(), Xg.data(), X2.size() * 4);
            }
            if (g2 && red4 == 1) { /* gate + up (SWIGLU) as two GEMMs against one GM_GLU GEMM: the same bits */
                __nv_bfloat16 *dH1, *dH2;
                CK(cudaMalloc(&dH1, (size_t)n * FF * 2)); CK(cudaMalloc(&dH2, (size_t)n * FF * 2));
                gemm_args gu = ga;
                gu.W = U; gu.mode = GM_SWIGLU; gu.G = d_Gb; gu.ldg = FF; gu.H = dH1; gu.ldh = FF;
                gemm_args gl = ga;
                gl.W2 = U; gl.mode = GM_GLU; gl.H = dH2; gl.ldh = FF;
                auto two = [&](int) { gate(0); gemm2_run(bm, dim3(FF / GM_BN, max_tiles), 0, gu, pf); };
                auto one = [&](int) { gemm2_run(bm, dim3((FF + 63) / 64, max_tiles), 0, gl, pf); };
                CK(cudaMemset(dH1, 0xff, (size_t)n * FF * 2)); CK(cudaMemset(dH2, 0x7f, (size_t)n * FF * 2));
                two(0); one(0);
                CK(cudaDeviceSynchronize());
                CK(cudaGetLastError());
                std::vector<uint16_t> h1((size_t)n * FF), h2(h1.size());
                CK(cudaMemcpy(h1.data(), dH1, h1.size() * 2, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(h2.data(), dH2, h2.size() * 2, cudaMemcpyDeviceToHost));
                long diff = 0;
                for (size_t i = 0; i < h1.size(); i++) diff += h1[i] != h2[i];
                printf("moe T %4d %-6s BM %3d glu (gate+up in one GEMM) vs gate, up+swiglu: %ld of %zu h values differ %s", T,
                       pf ? "gemm2p" : "gemm2", bm, diff, h1.size(), diff == 0 ? "OK" : "FAIL");
                if (time_it) {
                    float m2 = lab_time_ms(two, 20), m1 = lab_time_ms(one, 20);
                    printf("  two GEMMs %.3f ms, glu %.3f ms (%.1f TFLOP/s)", m2, m1, 4.0 * n * FF * H / (m1 * 1e-3) / 1e12);
                }
                printf("\n");
                cudaFree(dH1); cudaFree(dH2);
            }
            printf("moe T %4d %-6s BM %3d MB %d %-5s gate %s %.2e  down+scatter %s %.2e", T, pf ? "gemm2p" : g2 ? "gemm2" : "gemm", bm, v == 1 || g2 ? 1 : 2, red4 == 3 ? "ord" : red4 == 2 ? "fix" : red4 ? "red4" : "red1",
                   eg < 2e-3 ? "OK  " : "FAIL", eg, ex < 2e-3 && same ? "OK  " : "FAIL", ex);
            if (time_it) {
                double fl = 2.0 * n * FF * H;
                float mg_ = lab_time_ms(gate, 20), md_ = lab_time_ms(down, 20);
                printf("  gate %.3f ms %.1f TFLOP/s  down %.3f ms %.1f TFLOP/s", mg_, fl / (mg_ * 1e-3) / 1e12, md_, fl / (md_ * 1e-3) / 1e12);
            }
            printf("\n");
        }
    cudaFree(d_ids); cudaFree(d_cnt); cudaFree(d_cur); cudaFree(d_perm); cudaFree(d_te); cudaFree(d_tm0); cudaFree(d_tmn);
    cudaFree(d_nt); cudaFree(d_w); cudaFree(d_X); cudaFree(d_Gb); cudaFree(d_Xb); cudaFree(d_Hb); cudaFree(d_fix); cudaFree(d_Y); cudaFree(d_inv);
}

/* dense GM_GLU (the shared expert's gate + up) against GM_STORE gate + GM_SWIGLU up: the same bits */
static void run_glu_dense(int M, int FF, int K, bool time_it) {
    host_qmat hg = lab_make_qmat(GT_Q4_K, FF, K, 31), hu = lab_make_qmat(GT_Q4_K, FF, K, 32);
    gmat Wg = lab_upload(hg), Wu = lab_upload(hu);
    std::vector<__nv_bfloat16> Ab((size_t)M * K);
    for (auto &v : Ab) v = __float2bfloat16(lab_uniform(-1, 1));
    __nv_bfloat16 *dA, *dH1, *dH2;
    float *dG;
    CK(cudaMalloc(&dA, Ab.size() * 2)); CK(cudaMalloc(&dG, (size_t)M * FF * 4));
    CK(cudaMalloc(&dH1, (size_t)M * FF * 2)); CK(cudaMalloc(&dH2, (size_t)M * FF * 2));
    CK(cudaMemcpy(dA, Ab.data(), Ab.size() * 2, cudaMemcpyHostToDevice));
    for (int v = 0; v < 4; v++) {
        int bm = v == 0 ? 64 : v == 1 ? 128 : v == 2 ? 256 : 128, pf = v == 3;
        gemm_args a = {};
        a.A = dA; a.lda = K; a.W = Wg; a.N = FF; a.K = K; a.M = M; a.mode = GM_STORE; a.C = dG; a.ldc = FF;
        gemm_args u = a;
        u.W = Wu; u.mode = GM_SWIGLU; u.G = dG; u.ldg = FF; u.H = dH1; u.ldh = FF;
        gemm_args l = a;
        l.W2 = Wu; l.mode = GM_GLU; l.H = dH2; l.ldh = FF;
        auto two = [&](int) {
            gemm2_run(bm, dim3((FF + 127) / 128, (M + bm - 1) / bm), 0, a, pf);
            gemm2_run(bm, dim3((FF + 127) / 128, (M + bm - 1) / bm), 0, u, pf);
        };
        auto one = [&](int) { gemm2_run(bm, dim3((FF + 63) / 64, (M + bm - 1) / bm), 0, l, pf); };
        CK(cudaMemset(dH1, 0xff, (size_t)M * FF * 2)); CK(cudaMemset(dH2, 0x7f, (size_t)M * FF * 2));
        two(0); one(0);
        CK(cudaDeviceSynchronize());
        CK(cudaGetLastError());
        std::vector<uint16_t> h1((size_t)M * FF), h2(h1.size());
        CK(cudaMemcpy(h1.data(), dH1, h1.size() * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(h2.data(), dH2, h2.size() * 2, cudaMemcpyDeviceToHost));
        long diff = 0;
        for (size_t i = 0; i < h1.size(); i++) diff += h1[i] != h2[i];
        printf("dense glu M %4d FF %4d K %4d %-6s BM %3d: %ld of %zu h values differ %s", M, FF, K, pf ? "gemm2p" : "gemm2", bm, diff,
               h1.size(), diff == 0 ? "OK" : "FAIL");
        if (time_it) {
            float m2 = lab_time_ms(two, 20), m1 = lab_time_ms(one, 20);
            printf("  two GEMMs %.3f ms, glu %.3f ms (%.1f TFLOP/s)", m2, m1, 4.0 * M * FF * K / (m1 * 1e-3) / 1e12);
        }
        printf("\n");
    }
    cudaFree(dA); cudaFree(dG); cudaFree(dH1); cudaFree(dH2);
}

int main() {
    check_gemm2_host(GT_Q4_K);
    check_gemm2_host(GT_Q6_K);
    run_modes(GT_Q4_K, 300, 200, 512);
    run_modes(GT_Q6_K, 77, 130, 256);
    run_dense({GT_Q4_K, 300, 640, 512}, false);
    run_dense({GT_Q6_K, 200, 384, 512}, false);
    run_dense({GT_Q4_K, 4096, 8192, 2048}, true);
    run_dense({GT_Q6_K, 4096, 2048, 512}, true);
    run_dense({GT_BF16, 300, 257, 512}, false);   /* the router (+ shared gate) shape, partial tiles */
    run_dense({GT_BF16, 4096, 257, 2048}, true);
    run_dense({GT_BF16, 4096, 32, 2048}, true);   /* the GDN b / a projections */
    run_glu_dense(300, 200, 512, false);
    run_glu_dense(4096, 512, 2048, true);
    run_moe(40, false);
    run_moe(4096, true);
    return 0;
}
