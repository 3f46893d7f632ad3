/*
 * lean.cu — lab: the lean decode GEMV (k_lgemv, src/backend/cuda/k_lean.cuh, launched by the
 * backend's own lean_gemv in lean.cu) against the v2 default (k_qact + k_gemv_q, k_gemvq.cuh).
 * Every timing is the per-launch average of N back-to-back launches in one CUDA graph with PDL
 * (what decode does), weight copies rotated past the L2; every variant is checked against the
 * fp64 host reference of RMSNorm(x) * g -> W first.
 *   v2 pair   k_qact (1 block) + k_gemv_q<RB 1, 256 threads>, N pairs
 *   lean      k_lgemv (RMSNorm + q8 per block after the wait, weight tiles requested before it)
 */
#include "lab_quant.cuh"
#include "../../src/backend/cuda/k_gemvq.cuh"
#include "../../src/backend/cuda/lean.cu"

static int g_nsm;
static cudaStream_t g_st;

static void run_case(const char *name, int type, int rows, int cols) {
    lab_gemv_case cs = lab_gemv_case_make(type, rows, cols);
    const std::vector<gmat> &W = cs.W;
    int copies = (int)W.size();
    qbuf q;
    CK(cudaMalloc(&q.xf, cols * 4)); CK(cudaMalloc(&q.xq, cols)); CK(cudaMalloc(&q.dx, cols / 32 * 4)); CK(cudaMalloc(&q.s16, cols / 16 * 4));
    gemv_args a = {};
    a.nseg = 1; a.total_rows = rows; a.seg[0].y = cs.dy; a.seg[0].epi = EPI_STORE;
    a.pro = PRO_RMSNORM; a.x = cs.dx; a.K = cols; a.g = cs.dg; a.eps = 1e-6f;
    int N = 100;
    const int NV = 2;
    const char *vn[NV] = {"v2 pair", "lean"};
    auto variant = [&](int v, int i) {
        a.seg[0].W = W[i % copies];
        if (v == 0) {
            lab_launch_pdl(k_qact, 1, QACT_THREADS, (size_t)cols * 4, g_st, a, q);
            int occ = 0, rpw = 32 / gemv_lanes(cols), per = 8 * rpw, need = (rows + per - 1) / per;
            if (type == GT_Q4_K) {
                cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k_gemv_q<GT_Q4_K, 2, 1, 256>, 256, 0);
                lab_launch_pdl(k_gemv_q<GT_Q4_K, 2, 1, 256>, std::min(need, g_nsm * std::max(occ, 1)), 256, 0, g_st, a, q);
            } else {
                cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k_gemv_q<GT_Q6_K, 2, 1, 256>, 256, 0);
                lab_launch_pdl(k_gemv_q<GT_Q6_K, 2, 1, 256>, std::min(need, g_nsm * std::max(occ, 1)), 256, 0, g_st, a, q);
            }
            return;
        }
        if (!lean_gemv(&a, g_nsm, 1, g_st, NULL)) { fprintf(stderr, "lean_gemv refused %s\n", name); exit(1); }
    };
    for (int v = 0; v < NV; v++) {
        if (v == 0 && cols / 32 / gemv_lanes(cols) > 2) continue; /* the NU 2 instantiation only */
        lab_gemv_case_run(cs, g_st, name, vn[v], [&](int i) { variant(v, i); }, N);
    }
    lab_gemv_case_free(cs);
    cudaFree(q.xf); cudaFree(q.xq); cudaFree(q.dx); cudaFree(q.s16);
}

int main() {
    CK(cudaDeviceGetAttribute(&g_nsm, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaStreamCreateWithFlags(&g_st, cudaStreamNonBlocking));
    CK(lean_init(0, -1, 0, 1, 1, 1, 1));
    run_case("q4_K 12288x2048 (qkv+z)", GT_Q4_K, 12288, 2048);
    run_case("q4_K 8192x2048 (attn q)", GT_Q4_K, 8192, 2048);
    run_case("q4_K 2048x4096 (out)", GT_Q4_K, 2048, 4096);
    run_case("q6_K 2048x2048", GT_Q6_K, 2048, 2048);
    run_case("q6_K 512x2048 (attn v)", GT_Q6_K, 512, 2048);
    run_case("q4_K 1024x2048 (shared gu)", GT_Q4_K, 1024, 2048);
    return 0;
}
