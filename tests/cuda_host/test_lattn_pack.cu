/*
 * test_lattn_pack.cu — the packed slices of the attention cout kernel (LILAC_CUDA_COUT_PACK;
 * lattn_pk_src / lattn_pk_bytes in src/backend/cuda/k_lattn.cuh), run on the CPU: nvcc compiles it as
 * host code, no GPU needed.
 *
 * Why here: under the pack, each k_lattn_out block copies ONE contiguous image (built at load by
 * k_lattn_pack from lattn_pk_src) into shared memory and reads it where the cp.async form would have
 * put W_o's quants and scales, B's head columns and the router rows' head columns. A piece taken from
 * the wrong row, head or part would not crash: the residual and the router logits would be silently
 * wrong. This test builds the image on the host from matrices whose every 16-byte piece is distinct,
 * then reads it the way the kernel does (tq + 128 row + 32 cc for the chunk dots, tm + 16 row, tb + 512 r
 * + 16 lane, twr + 2 CPH r + 16 j) and compares with the matrices addressed directly by (row, head,
 * column): the real shapes (H 2048, 16 heads, 257 logit rows over 8 parts of 256 rows) and a smaller one.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace ln_impl {
#include "backend/cuda/k_lean.cuh"
#include "backend/cuda/k_lattn.cuh"
}
using namespace ln_impl;

#include "host_tap.h"

/* bytes with a pattern that differs in every 16-byte piece of every buffer (tag: the buffer) */
static void fill(uint8_t *p, size_t n, uint32_t tag) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)((i * 2654435761u + (i >> 4) * 40503u + tag * 977u) >> 7);
}

static void test_shapes(int H, int NH, int R, int E, int ws) {
    int nb = NH * LA_HD / 256, P = H / R, NL = E + ws, NLR = (NL + P - 1) / P, tpr = H / NH / 8, CPH = 8 * tpr, K = NH * LA_HD;
    size_t qn = (size_t)H * nb * 128, sn = (size_t)H * nb * 16;
    uint8_t *wq = (uint8_t *)malloc(qn), *wsc = (uint8_t *)malloc(sn);
    __nv_bfloat16 *B = (__nv_bfloat16 *)malloc((size_t)NL * K * 2), *Wr = (__nv_bfloat16 *)malloc((size_t)E * H * 2);
    __nv_bfloat16 *Ws = (__nv_bfloat16 *)malloc((size_t)H * 2);
    fill(wq, qn, 1);
    fill(wsc, sn, 2);
    fill((uint8_t *)B, (size_t)NL * K * 2, 3);
    fill((uint8_t *)Wr, (size_t)E * H * 2, 4);
    fill((uint8_t *)Ws, (size_t)H * 2, 5);
    lattn_args L;
    memset(&L, 0, sizeof(L));
    L.NH = NH;
    L.W = gmat{GT_Q4_K, H, K, wq, NULL, wsc, NULL};
    L.R = R;
    L.Bm = B;
    L.Wr = Wr;
    L.Ws = ws ? Ws : NULL;
    L.E = E;
    L.NL = NL;
    L.NLR = NLR;
    L.tpr = tpr;
    size_t pb = lattn_pk_bytes(R, NLR, CPH);
    uint8_t *img = (uint8_t *)malloc(pb);
    int bad_q = 0, bad_s = 0, bad_b = 0, bad_r = 0, zero_bad = 0, nblk = NH * P;
    char first[160] = "";
    for (int blk = 0; blk < nblk; blk++) {
        for (size_t i = 0; i < pb / 16; i++) { /* k_lattn_pack's loop */
            const void *src = lattn_pk_src(L, blk, (int)i);
            if (src) memcpy(img + 16 * i, src, 16);
            else memset(img + 16 * i, 0, 16);
        }
        int h = blk / P, part = blk % P, r0 = part * R;
        const uint8_t *tq = img, *tm = img + (size_t)R * 128, *tb = tm + (size_t)R * 16, *twr = tb + (size_t)NLR * 2 * LA_HD;
        for (int row = 0; row < R; row++) {
            for (int cc = 0; cc < 4; cc++) /* the chunk dot's 32 quant bytes of super-block h */
                if (memcmp(tq + (size_t)row * 128 + 32 * cc, wq + ((size_t)(r0 + row) * nb + h) * 128 + 32 * cc, 32)) {
                    if (!bad_q++ && !first[0]) snprintf(first, sizeof(first), "quants: block %d row %d chunk %d", blk, row, cc);
                }
            if (memcmp(tm + (size_t)row * 16, wsc + ((size_t)(r0 + row) * nb + h) * 16, 16)) {
                if (!bad_s++ && !first[0]) snprintf(first, sizeof(first), "scales: block %d row %d", blk, row);
            }
        }
        for (int r = 0; r < NLR; r++) {
            int gi = part * NLR + r;
            for (int lane = 0; lane < 32; lane++) { /* step 6: B's row r, columns 8 lane .. of head h */
                const uint8_t *got = tb + (size_t)r * 2 * LA_HD + 16 * lane;
                if (gi < NL) {
                    if (memcmp(got, B + (size_t)gi * K + h * LA_HD + 8 * lane, 16) && !bad_b++ && !first[0])
                        snprintf(first, sizeof(first), "B: block %d row %d lane %d", blk, r, lane);
                } else
                    for (int k = 0; k < 16; k++) zero_bad += got[k] != 0;
            }
            for (int j = 0; j < CPH / 8; j++) { /* the x_old term: router row gi, columns h CPH + 8 j */
                const uint8_t *got = twr + (size_t)r * CPH * 2 + 16 * j;
                if (gi < NL) {
                    const __nv_bfloat16 *want = (gi < E ? Wr + (size_t)gi * H : Ws) + h * CPH + 8 * j;
                    if (memcmp(got, want, 16) && !bad_r++ && !first[0])
                        snprintf(first, sizeof(first), "router rows: block %d row %d piece %d", blk, r, j);
                } else
                    for (int k = 0; k < 16; k++) zero_bad += got[k] != 0;
            }
        }
    }
    check(bad_q + bad_s + bad_b + bad_r + zero_bad == 0 && pb % 16 == 0,
          "H %d, %d heads, %d rows a block, %d logit rows%s: %d blocks of %zu bytes read as the kernel reads them "
          "(quants %d, scales %d, B %d, router %d wrong, %d bytes not zero past the logit rows)%s%s",
          H, NH, R, NL, ws ? " (shared gate)" : "", nblk, pb, bad_q, bad_s, bad_b, bad_r, zero_bad, first[0] ? "; first: " : "", first);
    free(wq); free(wsc); free(B); free(Wr); free(Ws); free(img);
}

/* The CL form's split of the merge: over a head's P blocks, every split of [0, ns) exactly once (a
 * split merged twice or never would move the attention output without any error) */
static void test_cl_splits(void) {
    int bad = 0, cases = 0;
    for (int P = 1; P <= 8; P++)
        for (int ns = 1; ns <= 140; ns++) {
            int seen[140] = {0}, total = 0;
            for (int part = 0; part < P; part++) {
                int c = lattn_cl_count(ns, part, P);
                total += c;
                for (int j = 0; j < c; j++) {
                    int s = lattn_cl_split(part, P, j);
                    if (s < 0 || s >= ns) bad++;
                    else seen[s]++;
                }
            }
            for (int s = 0; s < ns; s++) bad += seen[s] != 1;
            bad += total != ns;
            cases++;
        }
    check(bad == 0, "the CL merge's splits: each of [0, ns) once over the P blocks (%d cases, P 1..8, ns 1..140; %d wrong)", cases, bad);
}

int main(void) {
    printf("# the cout kernel's packed slices (lattn_pk_src), host\n");
    test_shapes(2048, 16, 256, 256, 1); /* the 35B: 8 parts, 33 logit rows a part (the last part 25 + zeros) */
    test_shapes(1024, 8, 128, 64, 0);   /* no shared gate; CPH 128, 8 parts of 128 rows */
    test_shapes(1024, 16, 128, 40, 1);  /* CPH 64 (tpr 8): the router slices of 8 pieces a row */
    test_shapes(2048, 16, 512, 256, 1); /* LILAC_CUDA_COUT_R=512 on the 35B: 4 parts, 65 logit rows a part */
    test_shapes(2048, 16, 128, 256, 1); /* LILAC_CUDA_COUT_R=128: 16 parts, 17 logit rows a part */
    test_cl_splits();
    printf("1..%d\n", n_test);
    return n_fail ? 1 : 0;
}
