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
 */
#include "lab_quant.cuh"
#include "../../src/backend/cuda/k_gemm.cuh"


static float bf16r(float x) { return __bfloat162float(__float2bfloat16(x)); }

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
            me = fmax(me, fabs(r - g));
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
    for (int v = 0; v < 3; v++) {
        int bm = v ? 128 : 64;
        gemm_args a = {};
        a.A = dA; a.lda = dc.K; a.W = W; a.N = dc.N; a.K = dc.K; a.M = dc.M; a.mode = GM_STORE; a.C = dC; a.ldc = dc.N;
        dim3 grid((dc.N + GM_BN - 1) / GM_BN, (dc.M + bm - 1) / bm);
        auto launch = [&](int) {
            if (v == 2) k_gemm<128, 2><<<grid, 256>>>(a);
            else if (v == 1) k_gemm<128, 1><<<grid, 256>>>(a);
            else k_gemm<64><<<grid, 256>>>(a);
        };
        CK(cudaMemset(dC, 0, C.size() * 4));
        launch(0);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(C.data(), dC, C.size() * 4, cudaMemcpyDeviceToHost));
        double e = check_dense(hw, A, C, dc.M, dc.N, dc.K, rows);
        printf("dense %s M %4d N %5d K %4d BM %3d MB %d  %s  max err / max ref %.2e", dc.type == GT_Q4_K ? "Q4_K" : "Q6_K", dc.M, dc.N,
               dc.K, bm, v == 1 ? 1 : 2, e < 2e-3 ? "OK  " : "FAIL", e);
        if (time_it) {
            float ms = lab_time_ms(launch, 20);
            printf("  %.3f ms  %.1f TFLOP/s", ms, 2.0 * dc.M * dc.N * dc.K / (ms * 1e-3) / 1e12);
        }
        printf("\n");
    }
    CK(cudaFree(dA)); CK(cudaFree(dC));
}

/* The grouped MoE pair of one chunk of T tokens. */
static void run_moe(int T, bool time_it) {
    const int H = 2048, E = 256, KT = 8, FF = 512, n = T * KT;
    static host_qmat hg = lab_make_qmat(GT_Q4_K, E * FF, H, 21), hd = lab_make_qmat(GT_Q6_K, E * H, FF, 22);
    static gmat G = lab_upload(hg), D = lab_upload(hd);
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
    for (int v = 0; v < 3; v++)
        for (int red4 = 0; red4 <= 3; red4++) {
            int bm = v ? 128 : 64;
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
                if (v == 2) k_gemm<128, 2><<<dim3(FF / GM_BN, max_tiles), 256>>>(ga);
                else if (v == 1) k_gemm<128, 1><<<dim3(FF / GM_BN, max_tiles), 256>>>(ga);
                else k_gemm<64><<<dim3(FF / GM_BN, max_tiles), 256>>>(ga);
            };
            auto down = [&](int) {
                if (gd.fix) cudaMemsetAsync(gd.fix, 0, X.size() * 8);
                if (v == 2) k_gemm<128, 2><<<dim3(H / GM_BN, max_tiles), 256>>>(gd);
                else if (v == 1) k_gemm<128, 1><<<dim3(H / GM_BN, max_tiles), 256>>>(gd);
                else k_gemm<64><<<dim3(H / GM_BN, max_tiles), 256>>>(gd);
                if (gd.fix) k_fix_add<<<1024, 256>>>(gd.fix, d_X, (long)X.size());
                if (red4 == 3) {
                    k_inv_perm<<<(n + 255) / 256, 256>>>(d_perm, n, d_inv);
                    k_moe_sum_ordered<<<T, 128>>>(d_Y, d_inv, d_w, d_X, T, KT, H);
                }
            };
            CK(cudaMemcpy(d_X, X.data(), X.size() * 4, cudaMemcpyHostToDevice));
            gate(0);
            down(0);
            CK(cudaDeviceSynchronize());
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
                    eg = fmax(eg, fabs(r - Gb[(size_t)m * FF + f]));
                    mg = fmax(mg, fabs(r));
                }
            }
            for (int t = 0; t < TC; t++)
                for (int h = 0; h < H; h++) {
                    double r = xref[(size_t)t * H + h];
                    ex = fmax(ex, fabs(r - Xg[(size_t)t * H + h]));
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
            printf("moe T %4d BM %3d MB %d %-5s gate %s %.2e  down+scatter %s %.2e", T, bm, v == 1 ? 1 : 2, red4 == 3 ? "ord" : red4 == 2 ? "fix" : red4 ? "red4" : "red1",
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

int main() {
    run_dense({GT_Q4_K, 300, 640, 512}, false);
    run_dense({GT_Q6_K, 200, 384, 512}, false);
    run_dense({GT_Q4_K, 4096, 8192, 2048}, true);
    run_dense({GT_Q6_K, 4096, 2048, 512}, true);
    run_moe(40, false);
    run_moe(4096, true);
    return 0;
}
