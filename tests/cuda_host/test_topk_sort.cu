/*
 * test_topk_sort.cu — the sorted top-k of the lean MoE kernels (LN_TOPK2 in src/backend/cuda/k_lean.cuh),
 * run on the CPU: nvcc compiles it as host code, no GPU needed.
 *
 * Why here: the router's top-k picks the experts of every MoE layer. A comparator network that
 * misorders one pair, or a tie broken the other way, would not crash: it would route a token to
 * another expert now and then, and the GPU would drift from the CPU engine. ln_topk (LN_TOPK2) keeps
 * its lane-local helpers host-callable (tk_sort8, tk_pop8, tk_cand); this test runs them for the 32
 * lanes of a warp in lockstep, with the two warp reductions done here, and compares the chosen ids
 * and keys with a plain reference: the larger key first, the lower index on a tie; index -1 and key
 * 0 once nothing is left (ln_topk's rounds past the valid logits).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

namespace ln_impl {
#include "backend/cuda/k_lean.cuh"
}
using namespace ln_impl;

#include "host_tap.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* ln_topk's LN_TOPK2 rounds for one warp, the lanes in lockstep: ids[t], keys[t] for t < k */
static void topk_sorted(const float *logits, int E, int k, int *ids, uint32_t *keys) {
    uint32_t key[32][8], pos[32][8];
    for (int lane = 0; lane < 32; lane++) {
        for (int c = 0; c < 8; c++) {
            pos[lane][c] = lane + 32 * c;
            key[lane][c] = lane + 32 * c < E ? ln_fkey(logits[lane + 32 * c]) : 0u;
        }
        tk_sort8(key[lane], pos[lane]);
    }
    for (int t = 0; t < k; t++) {
        uint32_t mk = 0, wi = 0xffffffffu;
        for (int lane = 0; lane < 32; lane++) mk = key[lane][0] > mk ? key[lane][0] : mk; /* warp max */
        for (int lane = 0; lane < 32; lane++) {                                         /* warp min */
            uint32_t c = tk_cand(key[lane][0], pos[lane][0], mk);
            wi = c < wi ? c : wi;
        }
        for (int lane = 0; lane < 32; lane++) tk_pop8(key[lane], pos[lane], pos[lane][0] == wi);
        ids[t] = (int)wi;
        keys[t] = mk;
    }
}

/* the reference: k times, the unchosen valid logit with the largest key, the lowest index on a tie
 * (a key of 0 is never chosen, as in ln_topk: its scan starts from 0 with a strict compare) */
static void topk_ref(const float *logits, int E, int k, int *ids, uint32_t *keys) {
    int taken[256] = {0};
    for (int t = 0; t < k; t++) {
        int best = -1;
        uint32_t bk = 0;
        for (int i = 0; i < E; i++) {
            uint32_t ki = ln_fkey(logits[i]);
            if (!taken[i] && ki > bk) { bk = ki; best = i; }
        }
        if (best >= 0) taken[best] = 1;
        ids[t] = best;
        keys[t] = bk;
    }
}

/* every one of the 8! orders of 8 distinct keys, and all 2^8 0/1 keys (ties broken by position) */
static void test_network(void) {
    int bad_perm = 0, bad_01 = 0, n_perm = 0;
    int a[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    for (;;) { /* permutations in lexicographic order */
        uint32_t k[8], p[8];
        for (int i = 0; i < 8; i++) { k[i] = 100 + a[i]; p[i] = i; }
        tk_sort8(k, p);
        for (int i = 0; i < 8; i++) bad_perm += k[i] != (uint32_t)(107 - i) || a[p[i]] != 7 - i;
        n_perm++;
        int i = 6;
        while (i >= 0 && a[i] > a[i + 1]) i--;
        if (i < 0) break;
        int j = 7;
        while (a[j] < a[i]) j--;
        int t = a[i]; a[i] = a[j]; a[j] = t;
        for (int l = i + 1, r = 7; l < r; l++, r--) { t = a[l]; a[l] = a[r]; a[r] = t; }
    }
    for (int m = 0; m < 256; m++) {
        uint32_t k[8], p[8];
        for (int i = 0; i < 8; i++) { k[i] = (m >> i) & 1; p[i] = 32 * i + 5; }
        tk_sort8(k, p);
        for (int i = 0; i < 7; i++) /* keys descending; equal keys by ascending position */
            bad_01 += k[i] < k[i + 1] || (k[i] == k[i + 1] && p[i] > p[i + 1]);
        int ones = 0;
        for (int i = 0; i < 8; i++) ones += k[i];
        bad_01 += ones != __builtin_popcount(m);
    }
    check(n_perm == 40320 && !bad_perm && !bad_01, "tk_sort8: %d orders of distinct keys (%d wrong), 256 0/1 inputs with "
          "ties (%d wrong)", n_perm, bad_perm, bad_01);
}

/* pops: a lane's slots drain in order and then read as empty */
static void test_pop(void) {
    uint32_t k[8] = {9, 8, 7, 6, 5, 4, 3, 2}, p[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    tk_pop8(k, p, false);
    int ok = k[0] == 9 && p[0] == 0;
    for (int t = 0; t < 9; t++) tk_pop8(k, p, true);
    for (int i = 0; i < 8; i++) ok &= k[i] == 0;
    check(ok && tk_cand(0, 3, 0) == 0xffffffffu && tk_cand(7, 3, 7) == 3 && tk_cand(6, 3, 7) == 0xffffffffu,
          "tk_pop8 keeps the head when not taken and empties a lane; tk_cand: winners only, none at key 0");
}

enum { MODE_RANDOM, MODE_TIES, MODE_FEW, MODE_SPECIAL, MODE_ONE_LANE, N_MODE };

static void fill(float *x, int E, int mode) {
    for (int i = 0; i < E; i++) {
        switch (mode) {
        case MODE_RANDOM: x[i] = ((int)(rnd() % 200001) - 100000) * 1e-4f; break;
        case MODE_TIES: x[i] = (float)((int)(rnd() % 5) - 2); break;  /* 5 values: ties everywhere */
        case MODE_FEW: x[i] = (rnd() % 7 == 0) ? 3.0f : -1.0f; break;  /* a few equal maxima */
        case MODE_SPECIAL: {
            static const float v[] = {0.0f, -0.0f, INFINITY, -INFINITY, 1e-38f, -1e-38f, 65504.0f, -3.5f};
            x[i] = v[rnd() % 8];
            break;
        }
        default: x[i] = -5.0f + (float)(rnd() % 3); break;            /* below: lane 3's 8 logits win */
        }
    }
    if (mode == MODE_ONE_LANE)
        for (int c = 0; c < 8 && 3 + 32 * c < E; c++) x[3 + 32 * c] = 10.0f + (float)(rnd() % 3); /* ties inside a lane */
}

static void test_topk(void) {
    static const char *names[N_MODE] = {"random", "ties", "few maxima", "+-0 / inf / tiny", "one lane holds all"};
    static const int Es[] = {256, 128, 200, 64, 9};
    for (int mode = 0; mode < N_MODE; mode++)
        for (unsigned ei = 0; ei < sizeof Es / sizeof Es[0]; ei++) {
            int E = Es[ei], bad = 0, cases = 0;
            for (int rep = 0; rep < 400; rep++)
                for (int k = 1; k <= 16; k += (k < 10 ? 1 : 6)) {
                    float x[256];
                    int ia[16], ib[16];
                    uint32_t ka[16], kb[16];
                    fill(x, E, mode);
                    topk_sorted(x, E, k, ia, ka);
                    topk_ref(x, E, k, ib, kb);
                    bad += memcmp(ia, ib, k * sizeof(int)) != 0 || memcmp(ka, kb, k * sizeof(uint32_t)) != 0;
                    cases++;
                }
            check(!bad, "top-k, %s logits, E %d: %d cases, k 1..16, ids and keys as the reference (%d differ)", names[mode], E,
                  cases, bad);
        }
    /* more picks than valid logits: the rounds past them report -1, as ln_topk's */
    float x[9];
    int ia[16], ib[16];
    uint32_t ka[16], kb[16];
    fill(x, 9, MODE_RANDOM);
    topk_sorted(x, 9, 12, ia, ka);
    topk_ref(x, 9, 12, ib, kb);
    check(!memcmp(ia, ib, sizeof(int) * 12) && ia[9] == -1 && ia[11] == -1 && ka[10] == 0, "E 9, k 12: ids 9.. are -1");
}

int main(void) {
    printf("# sorted top-k (LN_TOPK2) lane helpers, host\n");
    test_network();
    test_pop();
    test_topk();
    printf("1..%d\n", n_test);
    return n_fail ? 1 : 0;
}
