/*
 * gdn_chunk_emu.c — CPU emulation of the two CUDA GDN prefill scans, to measure their rounding
 * error without a GPU (issue 6: the chunked scan moved GPU test 1 from KL 4.61e-3 to 5.50e-3).
 *
 *   emu_step:  k_gdn_step<DK, false> (k_gdn.cuh), lane by lane: the per-lane partial sums over the
 *              DK/4 key rows a lane owns (two accumulators), the xor-8 / xor-16 butterflies, fmaf
 *              where nvcc contracts a multiply-add.
 *   emu_chunk: k_gdn_chunk_prep + k_gdn_chunk_scan (k_gdn_chunk.cuh), op by op: the warp
 *              Hillis-Steele prefix sum of the log-decays, the float4 dot products of K K^T and
 *              Q K^T, e^(gam_i - gam_j), the forward substitution with four partial sums, the
 *              Q_dec / K_dec row factors applied to the raw conv output, and the scan's
 *              Vn = U - W S, O = Q_dec S + P Vn, S = lambda S + K_dec^T Vn.
 *   ref:       the recurrence (qwen35-moe-spec.md §5.5) in fp64 on the same fp32 inputs.
 *
 * Everything the kernels do is fp32; the emulation is fp32 with the same association order. Two
 * things cannot be mirrored bit for bit: the GPU's rsqrtf (<= 2 ulp) and expf (<= 2 ulp) are
 * replaced by the libm ones, and nvcc's exact choice of which products it contracts. Both are
 * rounding-level, so the error figures are faithful in size, not in their last bits.
 *
 * The prefill is driven as GPU test 1 drives it: chunks of `call` tokens (64 for the tiny fixture),
 * the state carried between calls. Cases: the tiny fixture's GDN shapes (HK 2, HV 4, DK = DV = 32,
 * v heads tiled) and DK = DV = 128 (the 35B heads, 4 of them), with per-head gates from
 * non-decaying (g ~ -1e-3 per token) to very strong decay (g ~ -20), plus a case of nearly
 * parallel keys (the ill-conditioned (I + A) the forward substitution has to invert).
 *
 * Printed per case and scan: relative L2 error of o and of the final state vs fp64, the largest
 * |o| error over max |o|, and the same per head (heads 0..3 = the decay classes), for the token-serial
 * scan and the chunked one with the log-decay prefix sums in fp32 (session 2) and in fp64 (now).
 * Build and run: make gdn-emu && build/dev/gdn_chunk_emu (CPU only, a few seconds).
 * Finding (2026-11-30): both scans are within 2e-7..7e-7 of fp64; the fp32 prefix sums cost the
 * strongly decaying heads up to 10x (DK 128, g ~ -3: 1.3e-6 vs 1.0e-7), fp64 ones remove it.
 * gdn_kl_emu.py uses the same emulation (gdn_emu_run) inside HF's model of the tiny fixture.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EMU_C 64 /* GDN_CC */

typedef struct {
    int T, HK, HV, DK, DV, tiled;
    const float *qkv;        /* [T][CD] conv+SiLU output (q | k | v) */
    const float *b, *a;      /* [T][HV] beta logits, decay inputs */
    const float *dtb, *ssa;  /* [HV] dt_bias, ssm_a = -exp(A_log) */
    const float *beta, *g;   /* [T][HV] or NULL: beta and log-decay given as such (from HF, ctypes) */
} gdn_in;

static int in_cd(const gdn_in *in) { return 2 * in->HK * in->DK + in->HV * in->DV; }
static int in_kh(const gdn_in *in, int h) { return in->tiled ? h % in->HK : h / (in->HV / in->HK); }

/* ------------------------------------------------------------------ fp64 reference (§5.5) */

static void ref_run(const gdn_in *in, int t0, int T, double *S, double *o) {
    const int DK = in->DK, DV = in->DV, QK = in->HK * DK, CD = in_cd(in);
    double q[128], k[128];
    for (int t = t0; t < t0 + T; t++) {
        const float *row = in->qkv + (size_t)t * CD;
        for (int h = 0; h < in->HV; h++) {
            int kh = in_kh(in, h);
            double sq = 0, sk = 0;
            for (int i = 0; i < DK; i++) {
                q[i] = row[kh * DK + i]; k[i] = row[QK + kh * DK + i];
                sq += q[i] * q[i]; sk += k[i] * k[i];
            }
            for (int i = 0; i < DK; i++) { q[i] /= sqrt(sq + 1e-6) * sqrt((double)DK); k[i] /= sqrt(sk + 1e-6); }
            double beta, alpha;
            if (in->beta) {
                beta = in->beta[t * in->HV + h];
                alpha = exp((double)in->g[t * in->HV + h]);
            } else {
                double x = (double)in->a[t * in->HV + h] + in->dtb[h];
                beta = 1 / (1 + exp(-(double)in->b[t * in->HV + h]));
                alpha = exp(in->ssa[h] * (x > 20 ? x : log1p(exp(x))));
            }
            double *Sh = S + (size_t)h * DK * DV;
            for (int j = 0; j < DV; j++) {
                double u = 0, oo = 0;
                for (int i = 0; i < DK; i++) { Sh[i * DV + j] *= alpha; u += Sh[i * DV + j] * k[i]; }
                double delta = beta * (row[2 * QK + h * DV + j] - u);
                for (int i = 0; i < DK; i++) { Sh[i * DV + j] += k[i] * delta; oo += Sh[i * DV + j] * q[i]; }
                o[(size_t)t * in->HV * DV + h * DV + j] = oo;
            }
        }
    }
}

/* ------------------------------------------------------------------ device helpers, emulated */

static float sigmoid_e(float x) { return 1.0f / (1.0f + expf(-x)); }
static float softplus_e(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
static float rsqrt_e(float x) { return 1.0f / sqrtf(x); }

/* beta and the log-decay of token t, head h, as the kernels compute them from b and a */
static float in_beta(const gdn_in *in, int t, int h) { return in->beta ? in->beta[t * in->HV + h] : sigmoid_e(in->b[t * in->HV + h]); }
static float in_gate(const gdn_in *in, int t, int h) {
    return in->g ? in->g[t * in->HV + h] : in->ssa[h] * softplus_e(in->a[t * in->HV + h] + in->dtb[h]);
}

/* warp_sum: xor butterfly 16, 8, 4, 2, 1 over 32 lane values (all lanes end equal) */
static float warp_sum_e(float *v) {
    for (int o = 16; o > 0; o >>= 1) {
        float n[32];
        for (int l = 0; l < 32; l++) n[l] = v[l] + v[l ^ o];
        memcpy(v, n, sizeof(n));
    }
    return v[0];
}

/* sum of squares of x[0..DK) as a warp computes it: lane l adds x[l + 32 i] (fmaf), then warp_sum */
static float warp_sumsq_e(const float *x, int DK) {
    float p[32];
    for (int l = 0; l < 32; l++) {
        float s = 0.0f;
        for (int i = l; i < DK; i += 32) s = fmaf(x[i], x[i], s);
        p[l] = s;
    }
    return warp_sum_e(p);
}

/* float4 dot step as nvcc contracts `acc += a.x*b.x + a.y*b.y + a.z*b.z + a.w*b.w` */
static float dot4_e(const float *a, const float *b) {
    return fmaf(a[3], b[3], fmaf(a[2], b[2], fmaf(a[1], b[1], a[0] * b[0])));
}

/* ------------------------------------------------------------------ k_gdn_step<DK, false> */

/* One call over tokens [t0, t0 + T) with the fp32 state S [HV][DK][DV]. A lane (rg, column j)
 * owns key rows rg*RPL .. rg*RPL + RPL - 1. */
static void emu_step(const gdn_in *in, int t0, int T, float *S, float *o) {
    const int DK = in->DK, DV = in->DV, QK = in->HK * DK, CD = in_cd(in), RPL = DK / 4;
    float qs[128], ks[128];
    for (int t = t0; t < t0 + T; t++) {
        const float *row = in->qkv + (size_t)t * CD;
        for (int h = 0; h < in->HV; h++) {
            int kh = in_kh(in, h);
            const float *qv = row + kh * DK, *kv = row + QK + kh * DK;
            float sq = warp_sumsq_e(qv, DK), sk = warp_sumsq_e(kv, DK);
            float rq = rsqrt_e(sq + 1e-6f) * rsqrt_e((float)DK), rk = rsqrt_e(sk + 1e-6f);
            for (int i = 0; i < DK; i++) { qs[i] = qv[i] * rq; ks[i] = kv[i] * rk; }
            float beta = in_beta(in, t, h);
            float alpha = expf(in_gate(in, t, h));
            float *Sh = S + (size_t)h * DK * DV;
            for (int j = 0; j < DV; j++) {
                float up[4], op[4], vj = row[2 * QK + h * DV + j];
                for (int rg = 0; rg < 4; rg++) {
                    float u0 = 0.0f, u1 = 0.0f;
                    for (int i = 0; i < RPL; i += 2) {
                        float *s0 = &Sh[(rg * RPL + i) * DV + j], *s1 = &Sh[(rg * RPL + i + 1) * DV + j];
                        *s0 *= alpha; u0 = fmaf(*s0, ks[rg * RPL + i], u0);
                        *s1 *= alpha; u1 = fmaf(*s1, ks[rg * RPL + i + 1], u1);
                    }
                    up[rg] = u0 + u1;
                }
                float u = (up[0] + up[1]) + (up[2] + up[3]);
                float delta = beta * (vj - u);
                for (int rg = 0; rg < 4; rg++) {
                    float o0 = 0.0f, o1 = 0.0f;
                    for (int i = 0; i < RPL; i += 2) {
                        float *s0 = &Sh[(rg * RPL + i) * DV + j], *s1 = &Sh[(rg * RPL + i + 1) * DV + j];
                        *s0 = fmaf(ks[rg * RPL + i], delta, *s0); o0 = fmaf(*s0, qs[rg * RPL + i], o0);
                        *s1 = fmaf(ks[rg * RPL + i + 1], delta, *s1); o1 = fmaf(*s1, qs[rg * RPL + i + 1], o1);
                    }
                    op[rg] = o0 + o1;
                }
                o[(size_t)t * in->HV * DV + h * DV + j] = (op[0] + op[1]) + (op[2] + op[3]);
            }
        }
    }
}

/* ------------------------------------------------------------------ k_gdn_chunk_prep + scan */

/* The variants of the chunked kernel the emulation can run (FIX_* are candidate repairs). */
enum {
    CH_GAM32 = 0,   /* k_gdn_chunk.cuh of session 2: fp32 prefix sums gam, expf(gam_i - gam_j) */
    CH_GAM64 = 1,   /* k_gdn_chunk.cuh now: gam accumulated in fp64, differences taken in fp64,
                     * rounded once, then expf (e^gam_i itself from gam_i rounded to fp32) */
};
static int g_variant = CH_GAM64;

/* Per-chunk products of the prep kernel for one head: [C] row factors, [C][C] P, [C][DK] W,
 * [C][DV] U, lambda. */
typedef struct {
    float fq[EMU_C], fk[EMU_C], lam;
    float P[EMU_C * EMU_C];
    float W[EMU_C * 128], U[EMU_C * 128];
} chunk_ws;

/* log-decay of row r of the chunk at t0 (0 past its end), as the prep kernel computes it */
static float r_gate(const gdn_in *in, int t0, int c, int h, int r) {
    return r < c ? in_gate(in, t0 + r, h) : 0.0f;
}

/* gam_i - gam_j: fp32 difference of fp32 prefix sums (the kernel), or of fp64 ones (CH_GAM64) */
static float gam_diff(const float *gam, const double *gd, int i, int j) {
    return g_variant == CH_GAM64 ? (float)(gd[i] - gd[j]) : gam[i] - gam[j];
}

static void emu_prep(const gdn_in *in, int t0, int c, int h, chunk_ws *ws) {
    const int C = EMU_C, DK = in->DK, DV = in->DV, QK = in->HK * DK, CD = in_cd(in), kh = in_kh(in, h);
    static float qs[EMU_C * 128], ks[EMU_C * 128], As[EMU_C * EMU_C];
    float bet[EMU_C], gam[EMU_C], rq[EMU_C], rk[EMU_C];
    double gd[EMU_C]; /* CH_GAM64: the prefix sums in fp64 */
    for (int r = 0; r < C; r++) {
        for (int i = 0; i < DK; i++) {
            qs[r * DK + i] = r < c ? in->qkv[(size_t)(t0 + r) * CD + kh * DK + i] : 0.0f;
            ks[r * DK + i] = r < c ? in->qkv[(size_t)(t0 + r) * CD + QK + kh * DK + i] : 0.0f;
        }
        bet[r] = r < c ? in_beta(in, t0 + r, h) : 0.0f;
        gam[r] = r_gate(in, t0, c, h, r);
    }
    for (int r = 0; r < C; r++) {
        float sq = warp_sumsq_e(qs + r * DK, DK), sk = warp_sumsq_e(ks + r * DK, DK);
        float fq = rsqrt_e(sq + 1e-6f) * rsqrt_e((float)DK), fk = rsqrt_e(sk + 1e-6f);
        for (int i = 0; i < DK; i++) { qs[r * DK + i] *= fq; ks[r * DK + i] *= fk; }
        rq[r] = fq; rk[r] = fk;
    }
    /* warp prefix sum: lanes hold rows l and l + 32, Hillis-Steele steps 1..16, then the second
     * half adds row 31's total */
    {
        float x0[32], x1[32];
        for (int l = 0; l < 32; l++) { x0[l] = gam[l]; x1[l] = gam[l + 32]; }
        for (int o = 1; o < 32; o <<= 1) {
            float y0[32], y1[32];
            for (int l = 0; l < 32; l++) { y0[l] = l >= o ? x0[l - o] : 0.0f; y1[l] = l >= o ? x1[l - o] : 0.0f; }
            for (int l = o; l < 32; l++) { x0[l] += y0[l]; x1[l] += y1[l]; }
        }
        for (int l = 0; l < 32; l++) { gam[l] = x0[l]; gam[l + 32] = x1[l] + x0[31]; }
    }
    if (g_variant == CH_GAM64) {
        /* the same Hillis-Steele order in fp64 from the fp32 log-decays */
        double x0[32], x1[32];
        for (int l = 0; l < 32; l++) {
            x0[l] = r_gate(in, t0, c, h, l);
            x1[l] = r_gate(in, t0, c, h, l + 32);
        }
        for (int o = 1; o < 32; o <<= 1) {
            double y0[32], y1[32];
            for (int l = 0; l < 32; l++) { y0[l] = l >= o ? x0[l - o] : 0.0; y1[l] = l >= o ? x1[l - o] : 0.0; }
            for (int l = o; l < 32; l++) { x0[l] += y0[l]; x1[l] += y1[l]; }
        }
        for (int l = 0; l < 32; l++) { gd[l] = x0[l]; gd[l + 32] = x1[l] + x0[31]; }
    } else {
        for (int l = 0; l < C; l++) gd[l] = gam[l];
    }
    for (int i = 0; i < C; i++)
        for (int j = 0; j < C; j++) {
            float kk = 0.0f, qk = 0.0f;
            for (int d = 0; d < DK; d += 4) {
                kk += dot4_e(ks + i * DK + d, ks + j * DK + d);
                qk += dot4_e(qs + i * DK + d, ks + j * DK + d);
            }
            float dec = j <= i ? expf(gam_diff(gam, gd, i, j)) : 0.0f;
            As[i * C + j] = j < i ? bet[i] * kk * dec : 0.0f;
            ws->P[i * C + j] = qk * dec;
        }
    for (int r = 0; r < c; r++) {
        ws->fq[r] = rq[r] * expf(g_variant == CH_GAM64 ? (float)gd[r] : gam[r]);
        ws->fk[r] = rk[r] * expf(gam_diff(gam, gd, c - 1, r));
    }
    ws->lam = expf(g_variant == CH_GAM64 ? (float)gd[c - 1] : gam[c - 1]);
    /* forward substitution, one right-hand side column at a time */
    for (int col = 0; col < DK + DV; col++) {
        float x[EMU_C];
        for (int i = 0; i < C; i++) {
            if (col < DK) x[i] = bet[i] * expf(g_variant == CH_GAM64 ? (float)gd[i] : gam[i]) * ks[i * DK + col];
            else x[i] = i < c ? bet[i] * in->qkv[(size_t)(t0 + i) * CD + 2 * QK + h * DV + (col - DK)] : 0.0f;
        }
        for (int i = 1; i < C; i++) {
            float a0 = x[i], a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
            int j = 0;
            for (; j < (i & ~3); j += 4) {
                a0 = fmaf(-As[i * C + j], x[j], a0);
                a1 = fmaf(-As[i * C + j + 1], x[j + 1], a1);
                a2 = fmaf(-As[i * C + j + 2], x[j + 2], a2);
                a3 = fmaf(-As[i * C + j + 3], x[j + 3], a3);
            }
            for (; j < i; j++) a0 = fmaf(-As[i * C + j], x[j], a0);
            x[i] = (a0 + a1) + (a2 + a3);
        }
        for (int i = 0; i < C; i++) {
            if (col < DK) ws->W[i * DK + col] = i < c ? x[i] : 0.0f;
            else ws->U[i * DV + col - DK] = i < c ? x[i] : 0.0f;
        }
    }
}

/* the scan's work on one chunk of one head: S [DK][DV] fp32 */
static void emu_scan_chunk(const gdn_in *in, int t0, int c, int h, const chunk_ws *ws, float *Sh, float *o) {
    const int C = EMU_C, DK = in->DK, DV = in->DV, QK = in->HK * DK, CD = in_cd(in), kh = in_kh(in, h);
    static float Qd[EMU_C * 128], Kd[EMU_C * 128], Vn[EMU_C * 128];
    for (int r = 0; r < C; r++)
        for (int i = 0; i < DK; i++) {
            Qd[r * DK + i] = r < c ? in->qkv[(size_t)(t0 + r) * CD + kh * DK + i] * ws->fq[r] : 0.0f;
            Kd[r * DK + i] = r < c ? in->qkv[(size_t)(t0 + r) * CD + QK + kh * DK + i] * ws->fk[r] : 0.0f;
        }
    for (int r = 0; r < C; r++)
        for (int j = 0; j < DV; j++) {
            float acc = ws->U[r * DV + j];
            for (int d = 0; d < DK; d += 4) {
                float s4[4] = {Sh[d * DV + j], Sh[(d + 1) * DV + j], Sh[(d + 2) * DV + j], Sh[(d + 3) * DV + j]};
                acc -= dot4_e(ws->W + r * DK + d, s4);
            }
            Vn[r * DV + j] = acc;
        }
    for (int r = 0; r < c; r++)
        for (int j = 0; j < DV; j++) {
            float acc = 0.0f;
            for (int d = 0; d < DK; d += 4) {
                float s4[4] = {Sh[d * DV + j], Sh[(d + 1) * DV + j], Sh[(d + 2) * DV + j], Sh[(d + 3) * DV + j]};
                acc += dot4_e(Qd + r * DK + d, s4);
            }
            for (int jj = 0; jj < C; jj += 4) {
                float v4[4] = {Vn[jj * DV + j], Vn[(jj + 1) * DV + j], Vn[(jj + 2) * DV + j], Vn[(jj + 3) * DV + j]};
                acc += dot4_e(ws->P + r * C + jj, v4);
            }
            o[(size_t)(t0 + r) * in->HV * DV + h * DV + j] = acc;
        }
    for (int i = 0; i < DK; i++)
        for (int j = 0; j < DV; j++) {
            float acc = ws->lam * Sh[i * DV + j];
            for (int r = 0; r < C; r++) acc = fmaf(Kd[r * DK + i], Vn[r * DV + j], acc);
            Sh[i * DV + j] = acc;
        }
}

static void emu_chunk(const gdn_in *in, int t0, int T, float *S, float *o) {
    static chunk_ws ws;
    for (int h = 0; h < in->HV; h++)
        for (int n0 = t0; n0 < t0 + T; n0 += EMU_C) {
            int c = t0 + T - n0 < EMU_C ? t0 + T - n0 : EMU_C;
            emu_prep(in, n0, c, h, &ws);
            emu_scan_chunk(in, n0, c, h, &ws, S + (size_t)h * in->DK * in->DV, o);
        }
}

/* ------------------------------------------------------------------ entry for ctypes */

/* One prefill of T tokens in calls of `call` tokens from a zero state, for gdn_kl_emu.py.
 * which: 0 emu_step, 1 emu_chunk (variant: CH_*), 2 the fp64 recurrence (rounded to fp32 at the end).
 * q, k: [T][H][DK] raw conv outputs (the kernels L2-normalise them), v: [T][H][DV],
 * beta, g: [T][H]; o: [T][H][DV]; S: [H][DK][DV] final state. Returns 0, or -1 on bad shapes. */
int gdn_emu_run(int which, int variant, int T, int H, int DK, int DV, int call, const float *q, const float *k,
                const float *v, const float *beta, const float *g, float *o, float *S);
int gdn_emu_run(int which, int variant, int T, int H, int DK, int DV, int call, const float *q, const float *k,
                const float *v, const float *beta, const float *g, float *o, float *S) {
    if (DK != DV || DK % 32 || DK > 128 || call < 1) return -1;
    const int CD = 3 * H * DK;
    float *qkv = malloc((size_t)T * CD * 4);
    for (int t = 0; t < T; t++) {
        memcpy(qkv + (size_t)t * CD, q + (size_t)t * H * DK, (size_t)H * DK * 4);
        memcpy(qkv + (size_t)t * CD + H * DK, k + (size_t)t * H * DK, (size_t)H * DK * 4);
        memcpy(qkv + (size_t)t * CD + 2 * H * DK, v + (size_t)t * H * DV, (size_t)H * DV * 4);
    }
    gdn_in in = {T, H, H, DK, DV, 0, qkv, 0, 0, 0, 0, beta, g};
    g_variant = variant;
    memset(S, 0, (size_t)H * DK * DV * 4);
    if (which == 2) {
        double *Sd = calloc((size_t)H * DK * DV, 8), *od = malloc((size_t)T * H * DV * 8);
        ref_run(&in, 0, T, Sd, od);
        for (size_t i = 0; i < (size_t)T * H * DV; i++) o[i] = (float)od[i];
        for (size_t i = 0; i < (size_t)H * DK * DV; i++) S[i] = (float)Sd[i];
        free(Sd); free(od);
    } else {
        for (int t0 = 0; t0 < T; t0 += call) {
            int n = T - t0 < call ? T - t0 : call;
            if (which) emu_chunk(&in, t0, n, S, o); else emu_step(&in, t0, n, S, o);
        }
    }
    free(qkv);
    return 0;
}

/* ------------------------------------------------------------------ cases (the program) */
#ifndef GDN_EMU_LIB

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}
static double nrand(void) {
    double u = urand() + 1e-300, v = urand();
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

typedef struct { double o_rel, s_rel, o_max; double h_rel[8]; } errs;

static void measure(const gdn_in *in, int call, int which, const double *oref, const double *Sref, errs *e) {
    const int HV = in->HV, DK = in->DK, DV = in->DV, T = in->T;
    float *S = calloc((size_t)HV * DK * DV, 4), *o = calloc((size_t)T * HV * DV, 4);
    for (int t0 = 0; t0 < T; t0 += call) {
        int n = T - t0 < call ? T - t0 : call;
        if (which) emu_chunk(in, t0, n, S, o); else emu_step(in, t0, n, S, o);
    }
    double num = 0, den = 0, mx = 0, mref = 0, hn[8] = {0}, hd[8] = {0};
    for (size_t i = 0; i < (size_t)T * HV * DV; i++) {
        double d = o[i] - oref[i];
        num += d * d; den += oref[i] * oref[i];
        hn[(i / DV) % HV] += d * d; hd[(i / DV) % HV] += oref[i] * oref[i];
        if (fabs(d) > mx) mx = fabs(d);
        if (fabs(oref[i]) > mref) mref = fabs(oref[i]);
    }
    e->o_rel = sqrt(num / den);
    e->o_max = mx / mref;
    for (int h = 0; h < HV && h < 8; h++) e->h_rel[h] = sqrt(hn[h] / hd[h]);
    num = den = 0;
    for (size_t i = 0; i < (size_t)HV * DK * DV; i++) { double d = S[i] - Sref[i]; num += d * d; den += Sref[i] * Sref[i]; }
    e->s_rel = sqrt(num / den);
    free(S); free(o);
}

/* the largest ratio of a head's o error to the token-serial scan's error on that head */
static double worst_ratio(const errs *e, const errs *ref, int HV) {
    double r = 0;
    for (int h = 0; h < HV && h < 8; h++) r = fmax(r, e->h_rel[h] / ref->h_rel[h]);
    return r;
}

/* Build inputs: conv+SiLU-like activations, per-head decay classes through A_log and dt_bias
 * (g = -exp(A_log) softplus(a + dt_bias)); corr > 0 makes consecutive keys nearly parallel. */
static void run_case(const char *name, int T, int HK, int HV, int DK, int call, int tiled, double corr, const double *glog) {
    gdn_in in = {T, HK, HV, DK, DK, tiled, 0, 0, 0, 0, 0, 0, 0};
    const int CD = in_cd(&in), QK = HK * DK;
    float *qkv = malloc((size_t)T * CD * 4), *b = malloc((size_t)T * HV * 4), *a = malloc((size_t)T * HV * 4);
    float dtb[8], ssa[8];
    double base[128 * 8];
    for (int i = 0; i < DK * HK; i++) base[i] = nrand();
    for (int t = 0; t < T; t++) {
        for (int c = 0; c < CD; c++) {
            double x = 1.5 * nrand();
            if (corr > 0 && c >= QK && c < 2 * QK) x = corr * base[c - QK] + (1 - corr) * x;
            qkv[(size_t)t * CD + c] = (float)(x / (1 + exp(-x)));
        }
        for (int h = 0; h < HV; h++) { b[t * HV + h] = (float)(1.5 * nrand()); a[t * HV + h] = (float)nrand(); }
    }
    /* head h: typical per-token log-decay glog[h % 4] at a = 0 (softplus(dt_bias) = 0.69) */
    for (int h = 0; h < HV; h++) { dtb[h] = 0.0f; ssa[h] = (float)(glog[h % 4] / log(2.0)); }
    in.qkv = qkv; in.b = b; in.a = a; in.dtb = dtb; in.ssa = ssa;
    double *Sref = calloc((size_t)HV * DK * DK, 8), *oref = calloc((size_t)T * HV * DK, 8);
    ref_run(&in, 0, T, Sref, oref);
    errs es, e32, e64;
    measure(&in, call, 0, oref, Sref, &es);
    g_variant = CH_GAM32;
    measure(&in, call, 1, oref, Sref, &e32);
    g_variant = CH_GAM64;
    measure(&in, call, 1, oref, Sref, &e64);
    const errs *all[3] = {&es, &e32, &e64};
    const char *what[3] = {"step         ", "chunk (gam32)", "chunk (gam64)"};
    for (int v = 0; v < 3; v++) {
        const errs *e = all[v];
        printf("%-44s %s: o %.2e (max %.1e)  S %.2e  per head", v ? "" : name, what[v], e->o_rel, e->o_max, e->s_rel);
        for (int h = 0; h < HV && h < 4; h++) printf(" %.1e", e->h_rel[h]);
        if (v) printf("   worst head / step's %.1f", worst_ratio(e, &es, HV));
        printf("\n");
    }
    free(qkv); free(b); free(a); free(Sref); free(oref);
}

int main(void) {
    /* per-token log-decay classes of heads 0..3: none, mild, strong, very strong */
    const double spread[4] = {-1e-3, -0.1, -3.0, -20.0}, slow[4] = {-1e-4, -1e-3, -1e-2, -0.05};
    printf("relative L2 error vs the fp64 recurrence (o over all tokens, S at the end); per head: o error of heads 0..3\n");
    run_case("tiny DK32 T150 calls of 64, spread decay", 150, 2, 4, 32, 64, 1, 0.0, spread);
    run_case("tiny DK32 T150 calls of 64, slow decay", 150, 2, 4, 32, 64, 1, 0.0, slow);
    run_case("tiny DK32 T150 one call, slow decay", 150, 2, 4, 32, 150, 1, 0.0, slow);
    run_case("tiny DK32 T150 calls of 64, parallel keys", 150, 2, 4, 32, 64, 1, 0.9, slow);
    run_case("DK128 T512 one call, spread decay", 512, 2, 4, 128, 512, 0, 0.0, spread);
    run_case("DK128 T512 one call, slow decay", 512, 2, 4, 128, 512, 0, 0.0, slow);
    run_case("DK128 T512 one call, parallel keys", 512, 2, 4, 128, 512, 0, 0.9, slow);
    return 0;
}
#endif
