/*
 * test_lgdn_in.cu — the addressing of the GDN layer's in-projection inside the fused GDN launch
 * (k_lgdn<true, ATOM, true>, LILAC_CUDA_GDN_IN=1; src/backend/cuda/k_lgdn.cuh), run on the CPU: nvcc
 * compiles it as host code, no GPU needed (tests/run.sh builds and runs it where nvcc is present).
 *
 * Why here: the kernel's blocks of one k-head (a cluster of ratio x P = 8) each dot six 16-row tiles
 * and at most one b / a row of the in-projection and store the values into every block's exchange
 * buffer; the step then reads its q / k / v channels, z, b and a from that buffer instead of the
 * in-projection's output vectors. A tile on the wrong rows or a read at the wrong place would not
 * crash: the step would quietly take another head's inputs. The engine's GPU test (`gpu_test
 * --gdnin`) catches that too, but only on a device; this checks on every CI run, with the kernel's
 * own helpers (lg_in_tile, lg_in_head, lg_in_xch, ...), that (1) the blocks' tiles and single rows
 * fill each k-head's buffer exactly once, (2) every place holds the projection row the step of
 * k_lgdn reads there (its chan() channel order, z_h, b_h, a_h of the block's v-head), in both v-head
 * orders (HF's grouped and llama.cpp's tiled), and (3) the blocks cover every (v-head, row part) once.
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
#include "backend/cuda/k_lgdn.cuh"
}
using namespace ln_impl;

#include "host_tap.h"

/* a projection row's identity: segment (0 qkv, 1 z, 2 b, 3 a) and row */
static long rid(int seg, long row) { return (long)seg * 1000000L + row; }

static void test_layout(int HK, int HV, int P, int tiled) {
    int ratio = HV / HK, cl = ratio * P, T = 16 + 16 * ratio, tpb = T / cl, NX = 2 * LG_D + 2 * ratio * LG_D + 2 * ratio;
    long QK = (long)HK * LG_D;
    long *xb = (long *)malloc((size_t)NX * sizeof(long));
    int *cnt = (int *)malloc((size_t)NX * sizeof(int));
    int *cover = (int *)calloc((size_t)HV * P, sizeof(int));
    int fill_bad = 0, read_bad = 0, kh_bad = 0;
    char first[200] = "";
    for (int kh = 0; kh < HK; kh++) {
        for (int i = 0; i < NX; i++) { xb[i] = -1; cnt[i] = 0; }
        /* the stores: every block's tiles (rank + cl i) and its single row */
        for (int rank = 0; rank < cl; rank++) {
            for (int i = 0; i < tpb; i++) {
                int seg;
                long row0;
                int xo = lg_in_tile(rank + cl * i, kh, ratio, HK, tiled, &seg, &row0);
                for (int rr = 0; rr < LG_IN_TR; rr++) {
                    if (xo + rr < 0 || xo + rr >= NX) { fill_bad++; continue; }
                    xb[xo + rr] = rid(seg, row0 + rr);
                    cnt[xo + rr]++;
                }
            }
            if (rank < 2 * ratio) {
                int at = lg_in_xb(0, ratio) + rank;
                xb[at] = rid(lg_in_mini_seg(rank, ratio), lg_in_head(kh, rank % ratio, ratio, HK, tiled));
                cnt[at]++;
            }
        }
        for (int i = 0; i < NX; i++)
            if (cnt[i] != 1) {
                if (!fill_bad && !*first) snprintf(first, sizeof first, "k-head %d place %d stored %d times", kh, i, cnt[i]);
                fill_bad++;
            }
        /* the reads: block (kh, rank) steps v-head h = head(kh, rank / P), row part rank % P */
        for (int rank = 0; rank < cl; rank++) {
            int jv = rank / P, part = rank % P, h = lg_in_head(kh, jv, ratio, HK, tiled);
            if (h < 0 || h >= HV || (tiled ? h % HK : h / ratio) != kh) kh_bad++; /* k_lgdn's own k-head of h */
            else cover[h * P + part]++;
            for (int i = 0; i < 3 * LG_D; i++) { /* k_lgdn's chan(i) */
                long ch = i < LG_D ? (long)kh * LG_D + i : (i < 2 * LG_D ? QK + (long)kh * LG_D + i - LG_D : 2 * QK + (long)h * LG_D + i - 2 * LG_D);
                if (xb[lg_in_xch(i, jv)] != rid(0, ch)) {
                    if (!read_bad) snprintf(first, sizeof first, "k-head %d rank %d channel %d: row %ld, want qkv row %ld", kh, rank, i, xb[lg_in_xch(i, jv)], ch);
                    read_bad++;
                }
            }
            for (int i = 0; i < LG_D; i++)
                if (xb[lg_in_xz(i, jv, ratio)] != rid(1, (long)h * LG_D + i)) {
                    if (!read_bad) snprintf(first, sizeof first, "k-head %d rank %d z %d: %ld", kh, rank, i, xb[lg_in_xz(i, jv, ratio)]);
                    read_bad++;
                }
            if (xb[lg_in_xb(jv, ratio)] != rid(2, h) || xb[lg_in_xa(jv, ratio)] != rid(3, h)) {
                if (!read_bad) snprintf(first, sizeof first, "k-head %d rank %d: b %ld a %ld, want rows %d", kh, rank, xb[lg_in_xb(jv, ratio)], xb[lg_in_xa(jv, ratio)], h);
                read_bad++;
            }
        }
    }
    int cover_bad = 0;
    for (int i = 0; i < HV * P; i++) cover_bad += cover[i] != 1;
    const char *order = tiled ? "tiled" : "grouped";
    check(fill_bad == 0, "HK %d HV %d P %d %s: every exchange place stored once (%d x %d tiles + %d rows per k-head) %s", HK, HV, P, order, cl,
          tpb, 2 * ratio, first);
    check(read_bad == 0, "HK %d HV %d P %d %s: the step's q / k / v channels, z, b, a are the projection rows it reads without IN %s", HK, HV, P,
          order, read_bad ? first : "");
    check(kh_bad == 0 && cover_bad == 0, "HK %d HV %d P %d %s: the blocks step every (v-head, row part) once (%d wrong k-heads, %d parts not once)",
          HK, HV, P, order, kh_bad, cover_bad);
    free(xb);
    free(cnt);
    free(cover);
}

int main(void) {
    printf("# the fused GDN launch's in-projection addressing (GDN_IN), host\n");
    /* the real shapes (the only ones lean_gdn takes: clusters of 8) */
    test_layout(16, 32, 4, 0);
    test_layout(16, 32, 4, 1);
    /* the helpers' other ratios (not launched today: the clusters would not be 8) */
    test_layout(8, 32, 2, 1);
    test_layout(8, 32, 2, 0);
    test_layout(16, 16, 8, 0);
    printf("1..%d\n", n_test);
    return n_fail ? 1 : 0;
}
