/*
 * gpu_test.c — correctness of the CUDA backend on a machine with an NVIDIA GPU (`make test-gpu`).
 *
 * References: ref_model.h (a plain fp32 host forward written from the spec) on synthetic models,
 * HF golden logits on the shared fixtures (when the safetensors loader is linked: -DHAVE_LOADER),
 * the CPU backend (when linked: -DHAVE_CPU_BACKEND), and the GPU's own other paths (prefill vs
 * decode, graph vs forward, save/load, host- vs device-generated synthetic weights).
 *
 * Tolerances (the GPU quantizes activations to 8 bits per 32 for the integer-dot GEMVs, rounds
 * prefill GEMM operands, F32 weights and the KV cache to bf16; the references are fp32). A rounding
 * difference that flips one router choice changes that token's logits by O(1), so the bounds are:
 *   top-1 agreement >= 99 % of rows, or all but one row for short prompts (a row whose GPU top-1 is
 *   within NEAR_TIE of the reference's top logit counts as agreeing),
 *   mean KL(ref || gpu) <= 5e-3 nats,
 *   max |Δlogit| <= 0.35 * max |ref logit| (catches broken paths, not rounding; the value is printed).
 * Greedy continuations must agree up to the first step where the reference's top two logits are
 * closer than GREEDY_TIE (larger than the observed logit error), after which they may diverge.
 * Where a yardstick exists, a path may instead be no further from the reference than it (top-1 at
 * most one row fewer, mean KL at most twice its + 1e-4): the CPU backend's q8_K decode for the
 * synthetic models, the CPU backend on a bf16 copy of the weights for the F32 `tiny` fixture.
 * GPU-vs-GPU paths that must agree exactly (save/load, host vs device weights, graph vs forward)
 * are compared bit for bit; prefill vs decode uses the same tolerance as above.
 *
 * Output: TAP-like "ok N - name" / "not ok N - name" lines; exit status 1 on any failure.
 */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "model/qwen35_synth.h"
#include "ref_model.h"
#ifdef HAVE_LOADER
#include "format/safetensors.h"
#endif

static int g_n, g_fail;
static int g_quick; /* gpu_test --quick: the shorter long-context runs, the 35B preset's slow parts skipped */

/* Random-weight models have many near-tied top logits; a top-1 difference where the reference's
 * own top two are closer than this is not an error. */
#define NEAR_TIE 0.02f
#define GREEDY_TIE 0.25f

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s %d - ", ok ? "ok" : "not ok", ++g_n);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    if (!ok) g_fail++;
}

/* kl_trim: the mean KL without the worst ceil(rows / 50) rows (see check_close_trim) */
typedef struct cmp_stats { double max_abs, max_ref, mean_kl, kl_trim; int top1, rows; } cmp_stats;

static int cmp_double_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

static int argmaxf(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static cmp_stats compare(const float *ref, const float *got, int rows, int V) {
    cmp_stats s = {0};
    s.rows = rows;
    double *rkl = malloc((size_t)rows * sizeof(double));
    for (int r = 0; r < rows; r++) {
        const float *a = ref + (size_t)r * V, *b = got + (size_t)r * V;
        double ma = -1e30, mb = -1e30;
        for (int i = 0; i < V; i++) {
            double d = fabs((double)a[i] - b[i]);
            if (d > s.max_abs || d != d) s.max_abs = d != d ? INFINITY : d;
            if (fabs(a[i]) > s.max_ref) s.max_ref = fabs(a[i]);
            if (a[i] > ma) ma = a[i];
            if (b[i] > mb) mb = b[i];
        }
        double za = 0, zb = 0;
        for (int i = 0; i < V; i++) { za += exp(a[i] - ma); zb += exp(b[i] - mb); }
        double kl = 0;
        for (int i = 0; i < V; i++) {
            double pa = exp(a[i] - ma) / za;
            double lpa = a[i] - ma - log(za), lpb = b[i] - mb - log(zb);
            kl += pa * (lpa - lpb);
        }
        s.mean_kl += kl / rows;
        rkl[r] = kl;
        int ga = argmaxf(a, V), gb = argmaxf(b, V);
        s.top1 += ga == gb || a[gb] >= a[ga] - NEAR_TIE; /* a near-tie in the reference counts as agreement */
    }
    qsort(rkl, (size_t)rows, sizeof(double), cmp_double_desc);
    int drop = (rows + 49) / 50;
    for (int r = drop; r < rows; r++) s.kl_trim += rkl[r] / (rows - drop);
    free(rkl);
    return s;
}

static void check_close(const char *what, const float *ref, const float *got, int rows, int V) {
    cmp_stats s = compare(ref, got, rows, V);
    int miss = rows - s.top1, allowed = rows / 100 > 1 ? rows / 100 : 1;
    int ok = miss <= allowed && s.mean_kl <= 5e-3 && s.max_abs <= 0.35 * s.max_ref;
    check(ok, "%s: top-1 %d/%d, mean KL %.2e, max |d| %.4f (max |ref| %.2f)", what, s.top1, rows, s.mean_kl, s.max_abs, s.max_ref);
}

/* As check_close, for a quantized-activation path (decode: q8 per 32): when a yardstick is given
 * (the CPU backend's own decode on the same weights, q8_K activations as in llama.cpp), the path
 * also passes if it is no further from the fp32 reference than that: top-1 at most one row fewer
 * and mean KL at most twice the yardstick's (+1e-4). The max |d| bound always applies, so a
 * broken path still fails. */
static void check_close_yard(const char *what, const float *ref, const float *got, int rows, int V, const cmp_stats *yard,
                             const char *yname) {
    cmp_stats s = compare(ref, got, rows, V);
    int miss = rows - s.top1, allowed = rows / 100 > 1 ? rows / 100 : 1;
    int sane = s.max_abs <= 0.35 * s.max_ref;
    int abs_ok = miss <= allowed && s.mean_kl <= 5e-3;
    int yard_ok = yard && s.top1 >= yard->top1 - 1 && s.mean_kl <= 2 * yard->mean_kl + 1e-4;
    if (yard)
        check(sane && (abs_ok || yard_ok), "%s: top-1 %d/%d, mean KL %.2e, max |d| %.4f (max |ref| %.2f); %s: top-1 %d/%d, mean KL %.2e",
              what, s.top1, rows, s.mean_kl, s.max_abs, s.max_ref, yname, yard->top1, yard->rows, yard->mean_kl);
    else
        check(sane && abs_ok, "%s: top-1 %d/%d, mean KL %.2e, max |d| %.4f (max |ref| %.2f)", what, s.top1, rows, s.mean_kl, s.max_abs,
              s.max_ref);
}

/* As check_close for a prefill with bf16 GEMM operands (the GPU) against a path without them (fp32
 * reference, CPU backend): the KL bound applies to the mean without the worst 2 % of rows, and those
 * rows may also lose top-1. Why: a bf16 operand rounding can swap two experts whose router scores
 * are within ~1 % of each other, and one such row carries 0.1-0.3 nats (session 3,
 * dev/kernels/gdn_kl_emu.py: on the tiny fixture 81 % of an emulated 3.7e-3 mean KL is two such
 * rows; which rows flip depends on summation order, so the mean moves by ~1e-3 between equally exact
 * kernels). The untrimmed mean (<= 1e-2) and max |d| are still bounded, so a wrong path fails. */
static void check_close_trim(const char *what, const float *ref, const float *got, int rows, int V, const cmp_stats *yard,
                             const char *yname) {
    cmp_stats s = compare(ref, got, rows, V);
    int drop = (rows + 49) / 50, miss = rows - s.top1, allowed = (rows / 100 > 1 ? rows / 100 : 1) + drop;
    int ok = s.max_abs <= 0.35 * s.max_ref && miss <= allowed && s.kl_trim <= 5e-3 && s.mean_kl <= 1e-2;
    char y[160] = "";
    if (yard) snprintf(y, sizeof(y), "; %s: top-1 %d/%d, mean KL %.2e, trimmed %.2e", yname, yard->top1, yard->rows, yard->mean_kl, yard->kl_trim);
    check(ok, "%s: top-1 %d/%d, mean KL %.2e, without the worst %d rows %.2e, max |d| %.4f (max |ref| %.2f)%s", what, s.top1, rows,
          s.mean_kl, drop, s.kl_trim, s.max_abs, s.max_ref, y);
}

static void rand_tokens(int32_t *t, int n, int V, uint64_t seed) {
    for (int i = 0; i < n; i++) t[i] = (int32_t)(qsyn_mix(seed + (uint64_t)i) % (uint64_t)V);
}

/* Reference logits for n tokens (one row each), plus `greedy` argmax continuations. */
static void ref_run(const qwen_model *m, const int32_t *tok, int n, float *out, int greedy, int32_t *gtok, float *gap) {
    ref_state *r = ref_new(m, n + greedy + 1);
    int V = m->hp.n_vocab;
    float *lg = malloc((size_t)V * 4);
    for (int i = 0; i < n; i++) ref_step(r, tok[i], out + (size_t)i * V);
    memcpy(lg, out + (size_t)(n - 1) * V, (size_t)V * 4);
    for (int g = 0; g < greedy; g++) {
        gtok[g] = argmaxf(lg, V);
        float second = -INFINITY;
        for (int i = 0; i < V; i++)
            if (i != gtok[g] && lg[i] > second) second = lg[i];
        gap[g] = lg[gtok[g]] - second;
        ref_step(r, gtok[g], lg);
    }
    free(lg);
    ref_free(r);
}

static ll_backend *mk_backend(const qwen_model *m, int chunk) {
    ll_backend_params p = {.max_batch = chunk};
    ll_backend *be = NULL;
    if (cuda_backend_new(m, &p, &be) != LL_OK) { check(0, "cuda_backend_new: %s", ll_errmsg()); return NULL; }
    return be;
}

/* Against the host reference: prefill (LOGITS_ALL, chunked) and token-by-token decode, greedy. */
static void test_vs_ref(const char *preset, int n, int chunk, int greedy) {
    qwen_model *m = NULL;
    if (qwen_model_synthetic(preset, 7, &m) != LL_OK) { check(0, "synthetic %s: %s", preset, ll_errmsg()); return; }
    int V = m->hp.n_vocab;
    int32_t *tok = malloc((size_t)n * 4), gref[64], ggpu[64];
    float gap[64];
    float *ref = malloc((size_t)n * V * 4), *got = malloc((size_t)n * V * 4);
    rand_tokens(tok, n, V, 11);
    ref_run(m, tok, n, ref, greedy, gref, gap);
    ll_backend *be = mk_backend(m, chunk);
    if (be) {
        ll_seq *s = NULL;
        char what[128];
        be->v->seq_new(be, n + greedy + 4, &s);
        ll_status st = be->v->forward(be, s, tok, n, LL_LOGITS_ALL, got);
        check(st == LL_OK, "%s: prefill %d tokens in chunks of %d: %s", preset, n, chunk, st == LL_OK ? "" : ll_errmsg());
        snprintf(what, sizeof(what), "%s: prefill logits vs fp32 reference", preset);
        if (st == LL_OK) check_close(what, ref, got, n, V);
        st = cuda_backend_generate(be, s, -1, greedy, ggpu);
        /* equal up to the first step where the reference itself had a near-tie */
        int agree = 0;
        while (agree < greedy && gref[agree] == ggpu[agree]) agree++;
        int ok = st == LL_OK && (agree == greedy || gap[agree] < GREEDY_TIE);
        check(ok, "%s: greedy tokens after the prompt equal the reference's (%d/%d, then %s)", preset, agree, greedy,
              agree == greedy ? "done" : "a reference near-tie");
        be->v->seq_reset(be, s);
        st = LL_OK;
        for (int i = 0; i < n && st == LL_OK; i++) st = be->v->forward(be, s, tok + i, 1, LL_LOGITS_ALL, got + (size_t)i * V);
        check(st == LL_OK, "%s: decode %d tokens one by one", preset, n);
        snprintf(what, sizeof(what), "%s: decode logits vs fp32 reference", preset);
        cmp_stats yard, *yp = NULL;
#ifdef HAVE_CPU_BACKEND
        {
            ll_backend *cpu = NULL;
            ll_seq *cs = NULL;
            float *cl = malloc((size_t)n * V * 4);
            if (cpu_backend_new(m, NULL, &cpu) == LL_OK && cpu->v->seq_new(cpu, n + 4, &cs) == LL_OK) {
                ll_status cst = LL_OK;
                for (int i = 0; i < n && cst == LL_OK; i++) cst = cpu->v->forward(cpu, cs, tok + i, 1, LL_LOGITS_ALL, cl + (size_t)i * V);
                if (cst == LL_OK) { yard = compare(ref, cl, n, V); yp = &yard; }
                cpu->v->seq_free(cpu, cs);
            }
            if (cpu) ll_backend_free(cpu);
            free(cl);
        }
#endif
        if (st == LL_OK) check_close_yard(what, ref, got, n, V, yp, "CPU backend (q8_K activations)");
        be->v->seq_free(be, s);
        ll_backend_free(be);
    }
    free(tok); free(ref); free(got);
    qwen_model_free_synthetic(m);
}

/* Device-generated (lazy) synthetic weights equal host-generated ones: identical logits. */
static void test_lazy_equal_run(const char *preset) {
    qwen_model *a = NULL, *b = NULL;
    if (qwen_model_synthetic_ex(preset, 3, 0, &a) != LL_OK || qwen_model_synthetic_ex(preset, 3, 1, &b) != LL_OK) {
        check(0, "synthetic %s: %s", preset, ll_errmsg());
        return;
    }
    int V = a->hp.n_vocab, n = 20;
    int32_t tok[20];
    rand_tokens(tok, n, V, 5);
    float *la = malloc((size_t)V * 4), *lb = malloc((size_t)V * 4);
    for (int k = 0; k < 2; k++) {
        ll_backend *be = mk_backend(k ? b : a, 64);
        if (!be) break;
        ll_seq *s;
        be->v->seq_new(be, 64, &s);
        /* token by token: the decode path is deterministic (prefill's MoE scatter uses atomics) */
        for (int i = 0; i < n; i++) be->v->forward(be, s, tok + i, 1, LL_LOGITS_LAST, k ? lb : la);
        be->v->seq_free(be, s);
        ll_backend_free(be);
    }
    check(!memcmp(la, lb, (size_t)V * 4), "%s: weights generated on the device equal host-generated ones (logits bit-identical)", preset);
    free(la); free(lb);
    qwen_model_free_synthetic(a);
    qwen_model_free_synthetic(b);
}

/* the top logit's lead over the second */
static float top_gap(const float *x, int n) {
    int b = argmaxf(x, n);
    float second = -INFINITY;
    for (int v = 0; v < n; v++)
        if (v != b && x[v] > second) second = x[v];
    return x[b] - second;
}

/* On a fresh backend (so that environment switches apply): prefill P tokens, decode D one by one
 * (their logits into lg: D x V), then 8 greedy tokens from generate fed tok[P] (gen: the 8 tokens
 * fed, gen[0] = tok[P]); 1 when all ran. With gap (7 floats): the same
 * greedy run again on a fresh sequence through forward, gap[j] the lead of the top logit that
 * chose gen[j + 1], so a caller can tell a near-tie from an error. */
static int run_decode_gap(const qwen_model *m, const int32_t *tok, int P, int D, float *lg, int32_t *gen, float *gap) {
    int V = m->hp.n_vocab;
    ll_backend *be = mk_backend(m, 64);
    if (!be) return 0;
    ll_seq *s = NULL;
    int ok = be->v->seq_new(be, P + D + 16, &s) == LL_OK;
    for (int pass = 0; pass < (gap ? 2 : 1) && ok; pass++) {
        if (pass) be->v->seq_reset(be, s);
        ok = be->v->forward(be, s, tok, P, LL_LOGITS_NONE, NULL) == LL_OK;
        for (int i = 0; i < D && ok; i++)
            ok = be->v->forward(be, s, tok + P + i, 1, pass ? LL_LOGITS_NONE : LL_LOGITS_LAST, pass ? NULL : lg + (size_t)i * V) == LL_OK;
        if (pass == 0) {
            if (ok) ok = cuda_backend_generate(be, s, tok[P], 8, gen) == LL_OK;
            continue;
        }
        float *row = malloc((size_t)V * 4);
        int32_t t = tok[P];
        for (int j = 0; j < 7 && ok; j++) {
            ok = be->v->forward(be, s, &t, 1, LL_LOGITS_LAST, row) == LL_OK;
            gap[j] = top_gap(row, V);
            t = argmaxf(row, V);
        }
        free(row);
    }
    if (s) be->v->seq_free(be, s);
    ll_backend_free(be);
    return ok;
}

static int run_decode(const qwen_model *m, const int32_t *tok, int P, int D, float *lg, int32_t *gen) {
    return run_decode_gap(m, tok, P, D, lg, gen, NULL);
}

/* run_decode with var=on (lg[0], gen[0]), then var=off (lg[1], gen[1]); 0 (checked) when one fails */
static int decode_both(const qwen_model *m, const char *preset, const int32_t *tok, int P, int D, const char *var, const char *on,
                       const char *off, float *lg[2], int32_t gen[2][8]) {
    int okrun = 1;
    for (int k = 0; k < 2 && okrun; k++) {
        setenv(var, k ? off : on, 1);
        okrun = run_decode(m, tok, P, D, lg[k], gen[k]);
        if (!okrun) check(0, "%s: decode with %s=%s: %s", preset, var, k ? off : on, ll_errmsg());
    }
    unsetenv(var);
    return okrun;
}

/* A decode switch against its other setting on the same weights: a prefill of P tokens, D tokens
 * decoded one by one, then 8 greedy tokens from generate. The two settings round differently, so:
 * every row's argmax equal, the mean KL of the two distributions under 1e-3 and (`greedy`) the same
 * greedy tokens. (Each setting is also checked against the fp32 reference by the accuracy tests, which run
 * with the default.) Used for:
 * - the router folded into the GDN kernel (LILAC_CUDA_FOLD, k_lgdn.cuh; default 3) against the router
 *   GEMV: the fold computes the logits from fp32 y and a BF16 B = W_r diag(g) W_out instead of from
 *   q8(y) through Q4_K W_out and the new residual;
 * - flash-decoding blocks of 4 query heads (LILAC_CUDA_FD_FG=4, k_attn_dec.cuh; opt-in) against
 *   blocks of all 8 (the default): other split boundaries, so other partial sums;
 * - flash-decoding's tensor-core loop (LILAC_CUDA_FD_MMA=1, the default) against the per-position
 *   loop: q and the probabilities rounded to bf16 (as flash2 prefill does) instead of fp32;
 * - the appended position in a flash-decoding block of its own (LILAC_CUDA_FD_XS=1, the default)
 *   against the last split appending it: one split fewer over the other positions, one partial
 *   more in the combine;
 * - the attention combine at 32 dims per block (LILAC_CUDA_COMB_ND=32, the default) against 64:
 *   16 groups of splits either way, so the same sums per dim; what can break is the grid's cover of
 *   the dims (a dim no block writes leaves the attention output stale). */
static void test_switch_equal(const char *preset, int P, int D, const char *var, const char *on, const char *off, const char *what,
                              int greedy) {
    qwen_model *m = NULL;
    if (qwen_model_synthetic(preset, 21, &m) != LL_OK) { check(0, "synthetic: %s", ll_errmsg()); return; }
    int V = m->hp.n_vocab;
    int32_t *tok = malloc((size_t)(P + D) * 4);
    rand_tokens(tok, P + D, V, 29);
    float *lg[2] = {malloc((size_t)D * V * 4), malloc((size_t)D * V * 4)};
    int32_t gen[2][8];
    int okrun = decode_both(m, preset, tok, P, D, var, on, off, lg, gen);
    if (okrun) {
        cmp_stats st = compare(lg[1], lg[0], D, V);
        int same = 0;
        for (int i = 0; i < D; i++) same += argmaxf(lg[0] + (size_t)i * V, V) == argmaxf(lg[1] + (size_t)i * V, V);
        check(same == D && st.mean_kl <= 1e-3, "%s: decode with %s (%s=%s vs %s), %d rows after %d: argmax %d/%d, mean KL %.2e, max |d| %.3g (max |logit| %.3g)",
              preset, what, var, on, off, D, P, same, D, st.mean_kl, st.max_abs, st.max_ref);
        if (greedy) check(!memcmp(gen[0], gen[1], sizeof(gen[0])), "%s: greedy generate with %s=%s equals %s=%s (8 tokens)", preset, var, on, var, off);
        else {
            int agree = 0;
            while (agree < 8 && gen[0][agree] == gen[1][agree]) agree++;
            printf("  (greedy generate with %s=%s and %s: the first %d of 8 tokens agree)\n", var, on, off, agree);
        }
    }
    free(lg[0]); free(lg[1]); free(tok);
    qwen_model_free_synthetic(m);
}

/* The cuda_info of a backend built for m with `env` set: "NAME=VALUE" pairs, comma-separated, names
 * without their LILAC_CUDA_ prefix. Each variable gets its earlier value (or none) back after, so a
 * switch the runner exports (tests/gpu/run.sh's PK=2 etc.) survives the probe. 0 if no backend. */
static int info_under(const qwen_model *m, const char *env, cuda_info *ci) {
    enum { NV = 4 };
    char name[NV][64], *old[NV] = {0};
    int n = 0;
    for (const char *e = env; e && *e; n++) {
        assert(n < NV);
        const char *eq = strchr(e, '='), *end = strchr(e, ',');
        assert(eq && (!end || eq < end));
        if (!end) end = e + strlen(e);
        char val[64];
        snprintf(name[n], sizeof name[n], "LILAC_CUDA_%.*s", (int)(eq - e), e);
        snprintf(val, sizeof val, "%.*s", (int)(end - eq - 1), eq + 1);
        const char *o = getenv(name[n]);
        old[n] = o ? strdup(o) : NULL;
        setenv(name[n], val, 1);
        e = *end ? end + 1 : end;
    }
    ll_backend *be = mk_backend(m, 64);
    int ok = be && cuda_backend_info(be, ci) == LL_OK;
    if (be) ll_backend_free(be);
    while (n--) {
        if (old[n]) setenv(name[n], old[n], 1);
        else unsetenv(name[n]);
        free(old[n]);
    }
    return ok;
}

/* One cuda_info field under each of n environments (info_under); -1 where no backend came up. */
#define INFO_UNDER(m, field, out, ...)                                                    \
    do {                                                                                  \
        const char *envs_[] = {__VA_ARGS__};                                              \
        for (size_t k_ = 0; k_ < sizeof envs_ / sizeof *envs_; k_++) {                    \
            cuda_info ci_;                                                                \
            (out)[k_] = info_under((m), envs_[k_], &ci_) ? (long)ci_.field : -1;          \
        }                                                                                 \
    } while (0)

/* LILAC_CUDA_GDN_ATOM=1 takes effect where it should (so that the switch tests below compare two
 * forms, not one with itself) and not in a deterministic run. */
static void test_gdn_atom_active(const char *preset) {
    qwen_model *m = NULL;
    if (qwen_model_synthetic(preset, 21, &m) != LL_OK) { check(0, "synthetic: %s", ll_errmsg()); return; }
    long on[3];
    INFO_UNDER(m, gdn_atom, on, "GDN_ATOM=1", "GDN_ATOM=2", "GDN_ATOM=1,MOE_DET=1");
    check(on[0] == 1 && on[1] == 2 && on[2] == 0, "%s: LILAC_CUDA_GDN_ATOM=1 and 2 are on (%ld, %ld) and off in a deterministic run (%ld)", preset,
          on[0], on[1], on[2]);
    qwen_model_free_synthetic(m);
}

/* LILAC_CUDA_MOE_SK=1 takes effect on the real dimensions (the split-K MoE, k_lmoe_sk.cuh: so that the
 * switch test compares two forms) and not in a deterministic run. */
static void test_moe_sk_active(const char *preset) {
    qwen_model *m = NULL;
    if (qwen_model_synthetic(preset, 21, &m) != LL_OK) { check(0, "synthetic: %s", ll_errmsg()); return; }
    long on[2];
    INFO_UNDER(m, moe_sk, on, "MOE_SK=1", "MOE_SK=1,MOE_DET=1");
    check(on[0] == 1 && on[1] == 0, "%s: LILAC_CUDA_MOE_SK=1 is on (%ld) and off in a deterministic run (%ld)", preset, on[0], on[1]);
    qwen_model_free_synthetic(m);
}

/* LILAC_CUDA_ATT_COUT=1 takes effect on the real dimensions (k_lattn.cuh: so that the switch tests
 * compare two forms), not in a deterministic run, and not where the chain of zeroed buffers would
 * be shorter than three layers (L4 with GDN_ATOM=0: its one attention layer alone). */
static void test_att_cout_active(const char *preset) {
    qwen_model *m = NULL;
    if (qwen_model_synthetic(preset, 21, &m) != LL_OK) { check(0, "synthetic: %s", ll_errmsg()); return; }
    long on[3];
    INFO_UNDER(m, att_cout, on, "ATT_COUT=1", "ATT_COUT=1,MOE_DET=1", "ATT_COUT=1,GDN_ATOM=0");
    check(on[0] == 1 && on[1] == 0 && on[2] == 0, "%s: LILAC_CUDA_ATT_COUT=1 is on (%ld), off in a deterministic run (%ld) and off with a chain of one layer (%ld)",
          preset, on[0], on[1], on[2]);
    qwen_model_free_synthetic(m);
}

#ifdef HAVE_CPU_BACKEND
static void test_vs_cpu(const char *preset, int n, int chunk, int greedy);
#endif
static void test_switch_same_bits(const char *preset, int P, int D, const char *var, const char *on, const char *off, const char *what);

/* The chunked GDN prefill scan on tensor cores (k_gdn_chunk_scan_tc, 3xTF32; the default since session 38,
 * LILAC_CUDA_GDN_SCAN=fp32 the fp32 scan): on by default and with =tc, off with =fp32 and for the
 * token-serial prefill (so that the switch tests compare two scans), then
 * the prefill + decode of the L4 35B against the fp32 scan (another summation order: routing may flip at
 * near-ties, so the greedy tokens are reported and the rows' argmax and KL asserted), and the fp32 scan's
 * tiny model and L4 against the fp32 reference model through test_vs_cpu (session 38 on an H100, tc:
 * tiny mean KL 6.60e-5, L4 5.03e-4; the fp32 scan in session 26: 6.39e-5, 5.04e-4).
 * Alone: `gpu_test --scan`. */
static void tests_gdn_scan_tc(void) {
    qwen_model *m = NULL;
    if (qwen_model_synthetic("qwen3.6-35b-a3b-L4", 21, &m) != LL_OK) { check(0, "synthetic: %s", ll_errmsg()); return; }
    long on[5];
    INFO_UNDER(m, gdn_scan_tc, on, "", "GDN_SCAN=tc", "GDN_SCAN=tc-early", "GDN_SCAN=fp32", "GDN_SCAN=tc,GDN_CHUNK=0");
    check(on[0] == 2 && on[1] == 2 && on[2] == 1 && on[3] == 0 && on[4] == 0,
          "L4: the tensor-core GDN scan is on by default (%ld) and with =tc (%ld), its early-scaled form with =tc-early (%ld), "
          "off for fp32 (%ld) and for the token-serial prefill (%ld)", on[0], on[1], on[2], on[3], on[4]);
    qwen_model_free_synthetic(m);
    test_switch_equal("qwen3.6-35b-a3b-L4", 300, 12, "LILAC_CUDA_GDN_SCAN", "tc", "fp32", "the tensor-core GDN scan", 0);
    test_switch_equal("qwen3.6-35b-a3b-L4", 301, 12, "LILAC_CUDA_GDN_SCAN", "tc", "fp32", "the tensor-core GDN scan, odd prompt", 0);
    /* q and k scaled at fragment load (the default) or in the fetch: the same products, so the same bits */
    test_switch_same_bits("qwen3.6-35b-a3b-L4", 300, 8, "LILAC_CUDA_GDN_SCAN", "tc", "tc-early", "the scan's late-scaled q and k");
    test_switch_same_bits("qwen3.6-35b-a3b-L4", 301, 8, "LILAC_CUDA_GDN_SCAN", "tc", "tc-early", "the scan's late-scaled q and k, odd prompt");
    /* the chunk prep's T = (I + A)^-1 form against the substitution per column */
    if (qwen_model_synthetic("qwen3.6-35b-a3b-L4", 21, &m) == LL_OK) {
        INFO_UNDER(m, gdn_prep_ti, on, "", "GDN_PREP=sub", "GDN_PREP_MB=1", "GDN_PREP=ti", "GDN_PREP=ti2");
        check(on[0] == 2 && on[1] == 0 && on[2] == 0 && on[3] == 1 && on[4] == 2,
              "L4: the GDN prep's T form with tensor-core Gram matrices is on by default (%ld), off with =sub (%ld) and with PREP_MB=1 (%ld); "
              "the fp32 Gram form with =ti (%ld), the tensor-core one with =ti2 (%ld)",
              on[0], on[1], on[2], on[3], on[4]);
        qwen_model_free_synthetic(m);
    }
    test_switch_equal("qwen3.6-35b-a3b-L4", 300, 12, "LILAC_CUDA_GDN_PREP", "ti", "sub", "the GDN prep's T form", 0);
    /* K K^T and Q K^T by mma.sync in 3xTF32 (k_gdn_chunk_prep<DK, 2, 2>, the default since session 39):
     * other sums, a few fp32 ulps (session 39, H100: mean KL 1.0e-4 against ti, 2.1e-4 ti against sub) */
    test_switch_equal("qwen3.6-35b-a3b-L4", 300, 12, "LILAC_CUDA_GDN_PREP", "ti2", "ti", "the GDN prep's Gram matrices on tensor cores", 0);
    test_switch_equal("qwen3.6-35b-a3b-L4", 301, 12, "LILAC_CUDA_GDN_PREP", "ti2", "ti", "the GDN prep's Gram matrices on tensor cores, odd prompt", 0);
#ifdef HAVE_CPU_BACKEND
    /* the default (tc) meets the reference in the suite's first tests; here the other scan does */
    setenv("LILAC_CUDA_GDN_SCAN", "fp32", 1);
    test_vs_cpu("tiny", 300, 64, 64);
    test_vs_cpu("qwen3.6-35b-a3b-L4", 40, 16, 16);
    unsetenv("LILAC_CUDA_GDN_SCAN");
#endif
}

/* lean_attn_cl_launches() through a backend of the preset (cuda_info), and its cout_pk (may be NULL) */
static long cout_cl_launches(const char *preset, int *pk) {
    qwen_model *m = NULL;
    long n = -1;
    if (qwen_model_synthetic(preset, 21, &m) != LL_OK) return -1;
    cuda_info ci;
    if (info_under(m, NULL, &ci)) {
        n = ci.cout_cl_launches;
        if (pk) *pk = ci.cout_pk;
    }
    qwen_model_free_synthetic(m);
    return n;
}

/* LILAC_CUDA_FD_PH=1 (session 33) takes effect with the default cout form on the preset's real
 * dimensions, and not with COUT_PACK=1 (whose kernel reads FP32 partials) */
static void test_fd_ph_active(const char *preset) {
    qwen_model *m = NULL;
    if (qwen_model_synthetic(preset, 21, &m) != LL_OK) { check(0, "synthetic: %s", ll_errmsg()); return; }
    long on[2];
    INFO_UNDER(m, fd_ph, on, "FD_PH=1", "FD_PH=1,COUT_PACK=1");
    check(on[0] == 1 && on[1] == 0, "%s: LILAC_CUDA_FD_PH=1 is on with the default cout form (%ld), off with COUT_PACK=1 (%ld)", preset, on[0], on[1]);
    qwen_model_free_synthetic(m);
}

/* LILAC_CUDA_COUT_R=<rows> (session 33) keeps ATT_COUT and its two-copy pack on the preset (a plan
 * refused would leave ATT_COUT off, and the switch tests would compare the combine with itself) */
static void test_cout_r_active(const char *preset, const char *rows) {
    qwen_model *m = NULL;
    if (qwen_model_synthetic(preset, 21, &m) != LL_OK) { check(0, "synthetic: %s", ll_errmsg()); return; }
    char env[32];
    snprintf(env, sizeof env, "COUT_R=%s", rows);
    long pk[1];
    INFO_UNDER(m, cout_pk, pk, env);
    check(pk[0] == 2, "%s: LILAC_CUDA_COUT_R=%s keeps ATT_COUT with the two-copy pack (cout_pk %ld)", preset, rows, pk[0]);
    qwen_model_free_synthetic(m);
}

/* LILAC_CUDA_GDN_IN=1 takes effect on every GDN layer of the real dimensions (so that the switch tests
 * compare two forms), not in a deterministic run and not without GDN_ATOM (its atomic form only). */
static void test_gdn_in_active(const char *preset) {
    qwen_model *m = NULL;
    if (qwen_model_synthetic(preset, 21, &m) != LL_OK) { check(0, "synthetic: %s", ll_errmsg()); return; }
    int ngdn = 0;
    for (int l = 0; l < m->hp.n_layer; l++) ngdn += !m->hp.is_attn[l];
    long on[3];
    INFO_UNDER(m, gdn_in, on, "GDN_IN=1", "GDN_IN=1,MOE_DET=1", "GDN_IN=1,GDN_ATOM=0");
    check(on[0] == ngdn && ngdn > 0 && on[1] == 0 && on[2] == 0,
          "%s: LILAC_CUDA_GDN_IN=1 takes %ld of %d GDN layers, none in a deterministic run (%ld) or without GDN_ATOM (%ld)", preset, on[0], ngdn,
          on[1], on[2]);
    qwen_model_free_synthetic(m);
}

/* A decode switch that must not move a bit: P prompt tokens, D rows decoded one by one under each
 * setting, every logit compared bit for bit (and the greedy tokens). Used for the lm head through
 * registers (LILAC_CUDA_LN_HEAD=1, k_lhead, the default) against the copy-engine ring (0): the same
 * chunk dots summed in the same order, only the path of the weights differs. */
static void test_switch_same_bits(const char *preset, int P, int D, const char *var, const char *on, const char *off, const char *what) {
    qwen_model *m = NULL;
    if (qwen_model_synthetic(preset, 21, &m) != LL_OK) { check(0, "synthetic: %s", ll_errmsg()); return; }
    int V = m->hp.n_vocab;
    int32_t *tok = malloc((size_t)(P + D) * 4);
    rand_tokens(tok, P + D, V, 31);
    float *lg[2] = {malloc((size_t)D * V * 4), malloc((size_t)D * V * 4)};
    int32_t gen[2][8];
    setenv("LILAC_CUDA_MOE_DET", "1", 1); /* the prefill's sums in a fixed order: both runs start from the same state */
    int okrun = decode_both(m, preset, tok, P, D, var, on, off, lg, gen);
    unsetenv("LILAC_CUDA_MOE_DET");
    if (okrun) {
        size_t diff = 0;
        for (size_t i = 0; i < (size_t)D * V; i++) diff += memcmp(&lg[0][i], &lg[1][i], 4) != 0;
        check(diff == 0, "%s: decode with %s (%s=%s vs %s), %d rows x %d logits after %d: %zu differ in any bit", preset, what, var, on, off,
              D, V, P, diff);
        check(!memcmp(gen[0], gen[1], sizeof(gen[0])), "%s: greedy generate with %s=%s equals %s=%s (8 tokens)", preset, var, on, var, off);
    }
    free(lg[0]); free(lg[1]); free(tok);
    qwen_model_free_synthetic(m);
}

/* LILAC_CUDA_MOE_PACK (session 29, opt-in): the MoE weights tile-packed at load, one bulk copy per
 * gate/up stage and per down slot. It takes effect on the real dimensions (so the same-bits tests
 * compare two paths) and moves no bit: the same bytes land in the same stage layout. A tile packed
 * from the wrong rows, planes or expert would change the logits. The preset's layers 0-1 have Q4_K
 * downs, 2-3 Q6_K (synth_more_bits): both slot layouts. Alone: `gpu_test --pack`. */
static void tests_moe_pack(void) {
    const char *preset = "qwen3.6-35b-a3b-L4";
    qwen_model *m = NULL;
    if (qwen_model_synthetic(preset, 21, &m) != LL_OK) { check(0, "synthetic: %s", ll_errmsg()); return; }
    int on[2] = {-1, -1};
    for (int k = 0; k < 2; k++) {
        setenv("LILAC_CUDA_MOE_PACK", k ? "0" : "3", 1);
        ll_backend *be = mk_backend(m, 64);
        cuda_info ci;
        if (be && cuda_backend_info(be, &ci) == LL_OK) on[k] = ci.moe_pack;
        if (be) ll_backend_free(be);
        unsetenv("LILAC_CUDA_MOE_PACK");
    }
    check(on[0] == 3 && on[1] == 0, "%s: LILAC_CUDA_MOE_PACK=3 is on (%d) and =0 off (%d)", preset, on[0], on[1]);
    qwen_model_free_synthetic(m);
    test_switch_same_bits(preset, 300, 8, "LILAC_CUDA_MOE_PACK", "1", "0", "the tile-packed gate/up");
    test_switch_same_bits(preset, 300, 8, "LILAC_CUDA_MOE_PACK", "2", "0", "the tile-packed down");
    test_switch_same_bits(preset, 300, 8, "LILAC_CUDA_MOE_PACK", "3", "0", "the tile-packed gate/up and down");
}

/* The persistent decode kernel (k_persist.cuh, the default) against the per-kernel decode
 * (LILAC_CUDA_PERSIST=0) on the same weights: a prefill of P tokens, then D tokens decoded one by
 * one. The two compute the same q8 dots but sum them in other orders (and the per-kernel MoE uses
 * the bulk-copy kernels); a rounding difference can move an activation's q8 code by one, which the
 * next layers carry on (session 3: 5e-7 of the range on tiny, 4e-3 on the 4-layer 35B preset, whose
 * fp32 reference itself differs from both by 1e-2). So: every row's argmax equal and max |d| <= 1e-2
 * of the logits' range, and the same greedy tokens from generate. */
static void test_persist_equal(const char *preset, int P, int D) {
    qwen_model *m = NULL;
    if (qwen_model_synthetic(preset, 21, &m) != LL_OK) { check(0, "synthetic: %s", ll_errmsg()); return; }
    int V = m->hp.n_vocab;
    int32_t *tok = malloc((size_t)(P + D) * 4);
    rand_tokens(tok, P + D, V, 23);
    float *lg[2] = {malloc((size_t)D * V * 4), malloc((size_t)D * V * 4)};
    int32_t gen[2][8];
    float gap[7];
    int okrun = 1;
    /* the persistent kernel keeps the router GEMV: the per-kernel path without the router fold
     * computes the same sums (the fold has its own test, test_switch_equal) */
    setenv("LILAC_CUDA_FOLD", "0", 1);
    setenv("LILAC_CUDA_KV", "bf16", 1); /* the persistent kernel reads a bf16 cache (auto would pick q8 for the other) */
    for (int k = 0; k < 2 && okrun; k++) {
        setenv("LILAC_CUDA_PERSIST", k ? "0" : "1", 1);
        okrun = run_decode_gap(m, tok, P, D, lg[k], gen[k], k ? gap : NULL);
        if (!okrun) check(0, "%s: persistent decode: %s", preset, ll_errmsg());
    }
    unsetenv("LILAC_CUDA_PERSIST");
    unsetenv("LILAC_CUDA_FOLD");
    unsetenv("LILAC_CUDA_KV");
    if (okrun) {
        int same = 0;
        float md = 0, range = 0;
        for (int i = 0; i < D; i++) {
            const float *a = lg[0] + (size_t)i * V, *b = lg[1] + (size_t)i * V;
            same += argmaxf(a, V) == argmaxf(b, V);
            for (int v = 0; v < V; v++) { md = fmaxf(md, fabsf(a[v] - b[v])); range = fmaxf(range, fabsf(b[v])); }
        }
        check(same == D && md <= 1e-2f * range, "%s: persistent decode vs per-kernel decode, %d rows after %d: argmax %d/%d, max |d| %.3g (max |logit| %.3g)",
              preset, D, P, same, D, md, range);
        /* equal up to the first step where the per-kernel run's top two logits are within twice the
         * rows' bound of each other (each may move by it): past that either token is right (tiny's
         * random weights have many such near-ties; session 38's prefill kernels led to one) */
        int agree = 1, tie = 7;
        while (agree < 8 && gen[0][agree] == gen[1][agree]) agree++;
        for (int j = 6; j >= 0; j--)
            if (gap[j] < 2e-2f * range) tie = j;
        check(agree == 8 || tie <= agree - 1,
              "%s: persistent greedy generate equals the per-kernel one for %d of 7 tokens (the per-kernel run's first near-tie at step %d, gap %.3g)",
              preset, agree - 1, tie, tie < 7 ? gap[tie] : 0.0f);
    }
    free(lg[0]); free(lg[1]); free(tok);
    qwen_model_free_synthetic(m);
}

/* With LILAC_CUDA_MOE_DET=1 (`lilac bench --deterministic`) a prefill is the same bits on every run:
 * P tokens in one chunk, then 4 decoded rows, twice on fresh sequences, every logit compared bit for
 * bit. The MoE down's rows meet in 64-bit fixed point (k_gemm.cuh); with fp32 atomics (the default,
 * LILAC_CUDA_MOE_DET=0) the order of the adds varies, which the second part reports (not asserted:
 * two runs may happen to agree; session 12: 1,241,542 of 1,241,600 logits differed). */
static int prefill_rows(const qwen_model *m, const int32_t *tok, int P, float *out) {
    ll_backend *be = mk_backend(m, P);
    if (!be) return 0;
    ll_seq *s = NULL;
    int V = m->hp.n_vocab, ok = be->v->seq_new(be, P + 8, &s) == LL_OK;
    if (ok) ok = be->v->forward(be, s, tok, P, LL_LOGITS_LAST, out) == LL_OK;
    for (int i = 0; ok && i < 4; i++) ok = be->v->forward(be, s, tok + P + i, 1, LL_LOGITS_LAST, out + (size_t)(i + 1) * V) == LL_OK;
    if (s) be->v->seq_free(be, s);
    ll_backend_free(be);
    return ok;
}
static void test_prefill_repeat(const char *preset, int P) {
    qwen_model *m = NULL;
    if (qwen_model_synthetic(preset, 33, &m) != LL_OK) { check(0, "synthetic: %s", ll_errmsg()); return; }
    int V = m->hp.n_vocab;
    int32_t *tok = malloc((size_t)(P + 4) * 4);
    rand_tokens(tok, P + 4, V, 37);
    float *a = malloc((size_t)5 * V * 4), *c = malloc((size_t)5 * V * 4);
    for (int det = 2; det >= 0; det--) { /* 2: the ordered sum (k_misc.cuh), 1: fixed point, 0: atomics */
        setenv("LILAC_CUDA_MOE_DET", det == 2 ? "2" : det ? "1" : "0", 1);
        int ok = prefill_rows(m, tok, P, a) && prefill_rows(m, tok, P, c);
        size_t diff = 0;
        for (size_t i = 0; ok && i < (size_t)5 * V; i++) diff += memcmp(a + i, c + i, 4) != 0;
        if (det) check(ok && diff == 0, "%s: a %d-token prefill and 4 decoded rows twice (LILAC_CUDA_MOE_DET=%d): %zu of %zu logits differ", preset, P,
                       det, diff, (size_t)5 * V);
        else printf("  (with fp32 atomics, LILAC_CUDA_MOE_DET=0: %zu of %zu logits differ between the two runs)\n", diff, (size_t)5 * V);
    }
    unsetenv("LILAC_CUDA_MOE_DET");
    free(a); free(c); free(tok);
    qwen_model_free_synthetic(m);
}

/* The q8 KV cache (LILAC_CUDA_KV=q8, k_attn.cuh: int8 codes, an fp16 scale per 32 values) against
 * the bf16 cache on the same weights: a prefill of P tokens (flash2 reads the q8 rows), D decoded
 * rows (the flash-decoding kernel), 8 greedy tokens. A K/V value moves by at most half a step of its
 * block (1/254 of the block's largest), so: argmax of all rows but one equal, mean KL <= 2e-3 (a
 * cache read as the wrong type gives KL > 1). And the snapshot is smaller by exactly the bytes the
 * rows save. main() also runs the fp32-reference and long-context tests with it. */
static void test_kv_q8(const char *preset, int P, int D) {
    qwen_model *m = NULL;
    if (qwen_model_synthetic(preset, 21, &m) != LL_OK) { check(0, "synthetic: %s", ll_errmsg()); return; }
    int V = m->hp.n_vocab, HD = m->hp.head_dim, n_attn = 0;
    for (int l = 0; l < m->hp.n_layer; l++) n_attn += m->hp.is_attn[l] != 0;
    int32_t *tok = malloc((size_t)(P + D) * 4);
    rand_tokens(tok, P + D, V, 31);
    float *lg[2] = {malloc((size_t)D * V * 4), malloc((size_t)D * V * 4)};
    int32_t gen[2][8];
    size_t bytes[2] = {0, 0};
    int okrun = 1;
    for (int k = 0; k < 2 && okrun; k++) {
        setenv("LILAC_CUDA_KV", k ? "q8" : "bf16", 1);
        okrun = run_decode(m, tok, P, D, lg[k], gen[k]);
        ll_backend *be = okrun ? mk_backend(m, 64) : NULL;
        ll_seq *s = NULL;
        if (be && be->v->seq_new(be, P + 8, &s) == LL_OK && be->v->forward(be, s, tok, P, LL_LOGITS_NONE, NULL) == LL_OK)
            bytes[k] = be->v->seq_state_bytes(be, s);
        if (s) be->v->seq_free(be, s);
        if (be) ll_backend_free(be);
        unsetenv("LILAC_CUDA_KV");
        if (!okrun) check(0, "%s: decode with the %s cache: %s", preset, k ? "q8" : "bf16", ll_errmsg());
        else if (k) { /* auto (the default, session 12) picks q8 for these shapes and bf16 for tiny's */
            ll_backend *ba = mk_backend(m, 64);
            check(ba && ba->params.kv_q8 == 1, "%s: the default KV cache (auto) is q8 (resolved %d)", preset, ba ? ba->params.kv_q8 : 0);
            if (ba) ll_backend_free(ba);
        }
    }
    if (okrun) {
        cmp_stats st = compare(lg[0], lg[1], D, V);
        int same = 0;
        for (int i = 0; i < D; i++) same += argmaxf(lg[0] + (size_t)i * V, V) == argmaxf(lg[1] + (size_t)i * V, V);
        check(same >= D - 1 && st.mean_kl <= 2e-3, "%s: q8 vs bf16 KV cache, %d decoded rows after %d: argmax %d/%d, mean KL %.2e, max |d| %.3g (max |logit| %.3g)",
              preset, D, P, same, D, st.mean_kl, st.max_abs, st.max_ref);
        int agree = 0;
        while (agree < 8 && gen[0][agree] == gen[1][agree]) agree++;
        printf("  (q8 vs bf16 cache: greedy tokens agree for %d of 8)\n", agree);
        size_t rb = (size_t)HD + (((size_t)HD / 16 + 15) & ~(size_t)15), save = (size_t)n_attn * 2 * m->hp.n_head_kv * P * (2 * HD - rb);
        check(bytes[0] > 0 && bytes[0] - bytes[1] == save, "%s: the q8 snapshot at %d positions is %zu bytes smaller (%zu vs %zu; expected %zu)",
              preset, P, bytes[0] - bytes[1], bytes[1], bytes[0], save);
    }
    free(lg[0]); free(lg[1]); free(tok);
    qwen_model_free_synthetic(m);
    /* a model the q8 readers do not cover (tiny: 2 query heads per kv head) is refused by name */
    if (qwen_model_synthetic("tiny", 21, &m) != LL_OK) { check(0, "synthetic: %s", ll_errmsg()); return; }
    setenv("LILAC_CUDA_KV", "q8", 1);
    ll_backend_params p = {.max_batch = 64};
    ll_backend *be = NULL;
    ll_status st = cuda_backend_new(m, &p, &be);
    unsetenv("LILAC_CUDA_KV");
    check(st == LL_ERR_UNSUPPORTED && !be && strstr(ll_errmsg(), "q8 KV cache"), "tiny: a q8 KV cache is refused: %s", ll_errmsg());
    if (be) ll_backend_free(be);
    be = NULL;
    st = cuda_backend_new(m, &p, &be); /* auto: bf16 there */
    check(st == LL_OK && be && be->params.kv_q8 == -1, "tiny: the default KV cache (auto) is bf16 (resolved %d)", be ? be->params.kv_q8 : 0);
    if (be) ll_backend_free(be);
    qwen_model_free_synthetic(m);
}

/* Long context: prefill P tokens; the decode of token P must match prefilling P+1 tokens; save/load
 * round trip; greedy generate on the device equals forward + host argmax. */
static void test_long_run(const char *preset, int P, int chunk) {
    qwen_model *m = NULL;
    if (qwen_model_synthetic(preset, 9, &m) != LL_OK) { check(0, "synthetic: %s", ll_errmsg()); return; }
    int V = m->hp.n_vocab;
    const int ND = 8; /* decoded rows compared with the prefill path (a mean over one row is noise) */
    int32_t *tok = malloc((size_t)(P + ND) * 4);
    rand_tokens(tok, P + ND, V, 17);
    float *l1 = malloc((size_t)ND * V * 4), *l2 = malloc((size_t)ND * V * 4), *l3 = malloc((size_t)4 * V * 4), *l4 = malloc((size_t)4 * V * 4);
    ll_backend *be = mk_backend(m, chunk);
    if (!be) return;
    ll_seq *s = NULL, *s2 = NULL;
    be->v->seq_new(be, P + 300, &s);
    be->v->seq_new(be, P + 300, &s2);
    ll_status st = be->v->forward(be, s, tok, P, LL_LOGITS_NONE, NULL);
    check(st == LL_OK, "%s: prefill %d tokens (chunks of %d)", preset, P, chunk);
    size_t nb = be->v->seq_state_bytes(be, s);
    void *snap = malloc(nb);
    st = be->v->seq_save(be, s, snap, nb);
    check(st == LL_OK, "seq_save at %d: %zu bytes", P, nb);
    for (int i = 0; i < ND; i++) be->v->forward(be, s, tok + P + i, 1, LL_LOGITS_LAST, l1 + (size_t)i * V);
    be->v->forward(be, s2, tok, P, LL_LOGITS_NONE, NULL);
    be->v->forward(be, s2, tok + P, ND, LL_LOGITS_ALL, l2);
    char what[128];
    snprintf(what, sizeof(what), "%s: decode at positions %d..%d vs prefill (%d tokens, then a chunk of %d)", preset, P, P + ND - 1, P, ND);
    check_close(what, l2, l1, ND, V);
    /* save/load: continue 4 tokens twice from the snapshot */
    for (int k = 0; k < 2; k++) {
        st = be->v->seq_load(be, s, snap, nb);
        if (k == 0) check(st == LL_OK && be->v->seq_pos(be, s) == P, "seq_load restores position %d", P);
        for (int i = 0; i < 4; i++) be->v->forward(be, s, tok + i, 1, LL_LOGITS_LAST, (k ? l4 : l3) + (size_t)i * V);
    }
    check(!memcmp(l3, l4, (size_t)4 * V * 4), "after seq_load the sequence continues bit-identically");
    /* greedy: device generate vs forward + host argmax, 256 tokens */
    int G = 256;
    int32_t *ga = malloc((size_t)G * 4), *gb = malloc((size_t)G * 4);
    be->v->seq_load(be, s, snap, nb);
    int32_t t0 = tok[P];
    st = cuda_backend_generate(be, s, t0, G, ga); /* ga[0] = t0, ga[i] = argmax after ga[i-1] */
    be->v->seq_load(be, s, snap, nb);
    int32_t t = t0;
    for (int i = 0; i < G && st == LL_OK; i++) {
        st = be->v->forward(be, s, &t, 1, LL_LOGITS_LAST, l1);
        t = argmaxf(l1, V);
        gb[i] = t;
    }
    int agree = 0;
    while (agree < G - 1 && ga[agree + 1] == gb[agree]) agree++;
    agree += ga[0] == t0;
    check(st == LL_OK && agree == G, "greedy decode of %d tokens at context %d: device argmax == host argmax (%d agree)", G, P, agree);
    /* errors */
    int32_t bad = V;
    check(be->v->forward(be, s, &bad, 1, LL_LOGITS_NONE, NULL) == LL_ERR_INVALID, "token id %d rejected: %s", V, ll_errmsg());
    ll_seq *small = NULL;
    be->v->seq_new(be, 4, &small);
    check(be->v->forward(be, small, tok, 5, LL_LOGITS_NONE, NULL) == LL_ERR_OVERFLOW, "5 tokens into n_ctx 4 rejected: %s", ll_errmsg());
    be->v->seq_free(be, small);
    free(ga); free(gb); free(snap);
    be->v->seq_free(be, s);
    be->v->seq_free(be, s2);
    ll_backend_free(be);
    free(tok); free(l1); free(l2); free(l3); free(l4);
    qwen_model_free_synthetic(m);
}

#ifdef HAVE_CPU_BACKEND
/* GPU vs the CPU backend on the same (synthetic) weights: all-position logits of a prompt that
 * crosses GPU chunk boundaries, and greedy continuations. */
static void test_vs_cpu(const char *preset, int n, int chunk, int greedy) {
    qwen_model *m = NULL;
    if (qwen_model_synthetic(preset, 21, &m) != LL_OK) { check(0, "synthetic %s: %s", preset, ll_errmsg()); return; }
    int V = m->hp.n_vocab;
    int32_t *tok = malloc((size_t)n * 4), *gc = malloc((size_t)greedy * 4), *gg = malloc((size_t)greedy * 4);
    float *lc = malloc((size_t)n * V * 4), *lg = malloc((size_t)n * V * 4), *last = malloc((size_t)V * 4);
    rand_tokens(tok, n, V, 23);
    ll_backend_params p = {.max_batch = 64};
    ll_backend *cpu = NULL, *gpu = mk_backend(m, chunk);
    if (cpu_backend_new(m, &p, &cpu) != LL_OK || !gpu) { check(0, "backends: %s", ll_errmsg()); return; }
    ll_seq *sc, *sg;
    cpu->v->seq_new(cpu, n + greedy + 1, &sc);
    gpu->v->seq_new(gpu, n + greedy + 1, &sg);
    ll_status st = cpu->v->forward(cpu, sc, tok, n, LL_LOGITS_ALL, lc);
    if (st == LL_OK) st = gpu->v->forward(gpu, sg, tok, n, LL_LOGITS_ALL, lg);
    char what[200];
    /* Both backends approximate the fp32 reference (ref_model.h) differently (GPU: bf16 GEMM
     * operands; CPU: q8_K activations), so their mutual top-1 agreement on random-weight logits,
     * whose top-2 gaps are often smaller than either's error, is noise (37-39 of 40 across runs).
     * The GPU is held to the fp32 reference with the CPU backend's own distance as the yardstick. */
    float *lr = malloc((size_t)n * V * 4);
    ref_run(m, tok, n, lr, 0, NULL, NULL);
    cmp_stats yc = compare(lr, lc, n, V), gc_ = compare(lc, lg, n, V);
    snprintf(what, sizeof(what), "%s: GPU prefill logits vs fp32 reference, %d tokens (GPU chunks of %d; GPU vs CPU: top-1 %d/%d, mean KL %.2e)",
             preset, n, chunk, gc_.top1, n, gc_.mean_kl);
    if (st == LL_OK) {
        /* top-1 only on decisive rows (reference top-2 gap >= GREEDY_TIE): on the others either
         * backend's error can swap the two (session 3, L4: GPU 36/40 with mean KL 5.1e-4, CPU 38/40
         * with 1.7e-3) */
        cmp_stats sg = compare(lr, lg, n, V);
        int dec = 0, dec_ok = 0;
        for (int r = 0; r < n; r++) {
            const float *a = lr + (size_t)r * V, *b = lg + (size_t)r * V;
            int ga = argmaxf(a, V);
            float second = -INFINITY;
            for (int v = 0; v < V; v++)
                if (v != ga && a[v] > second) second = a[v];
            if (a[ga] - second < GREEDY_TIE) continue;
            dec++;
            dec_ok += argmaxf(b, V) == ga;
        }
        int ok = sg.max_abs <= 0.35 * sg.max_ref && dec_ok == dec && (sg.mean_kl <= 5e-3 || sg.mean_kl <= 2 * yc.mean_kl + 1e-4);
        check(ok, "%s: top-1 %d/%d (decisive rows %d/%d), mean KL %.2e, max |d| %.4f (max |ref| %.2f); CPU backend: top-1 %d/%d, mean KL %.2e",
              what, sg.top1, n, dec_ok, dec, sg.mean_kl, sg.max_abs, sg.max_ref, yc.top1, n, yc.mean_kl);
    } else {
        check(0, "%s: %s", what, ll_errmsg());
    }
    free(lr);
    /* greedy: CPU token by token (host argmax) vs the GPU's on-device loop */
    memcpy(last, lc + (size_t)(n - 1) * V, (size_t)V * 4);
    float gap0 = 1e9f;
    int agree_limit = greedy;
    for (int i = 0; i < greedy && st == LL_OK; i++) {
        gc[i] = argmaxf(last, V);
        float second = -INFINITY;
        for (int k = 0; k < V; k++)
            if (k != gc[i] && last[k] > second) second = last[k];
        if (last[gc[i]] - second < GREEDY_TIE && agree_limit == greedy) { agree_limit = i; gap0 = last[gc[i]] - second; }
        st = cpu->v->forward(cpu, sc, &gc[i], 1, LL_LOGITS_LAST, last);
    }
    if (st == LL_OK) st = cuda_backend_generate(gpu, sg, -1, greedy, gg);
    int agree = 0;
    while (agree < greedy && gc[agree] == gg[agree]) agree++;
    check(st == LL_OK && agree >= agree_limit, "%s: greedy GPU == CPU for %d of %d tokens (first CPU near-tie at %d, gap %.3f)", preset,
          agree, greedy, agree_limit, gap0);
    cpu->v->seq_free(cpu, sc);
    gpu->v->seq_free(gpu, sg);
    ll_backend_free(cpu);
    ll_backend_free(gpu);
    free(tok); free(gc); free(gg); free(lc); free(lg); free(last);
    qwen_model_free_synthetic(m);
}
#endif

#ifdef HAVE_LOADER
/* HF transformers golden logits (shared/fixtures/NAME): one prefill over the whole prompt (in GPU
 * chunks of `chunk`), prefill-then-decode, and the greedy continuation. */
static void test_fixture(const char *name, int chunk) {
    const char *shared = getenv("LILAC_SHARED") ? getenv("LILAC_SHARED") : "/work/shared";
    char dir[512], gpath[600];
    snprintf(dir, sizeof(dir), "%s/fixtures/%s", shared, name);
    snprintf(gpath, sizeof(gpath), "%s/golden.safetensors", dir);
    qwen_model *m = NULL;
    st_file g;
    memset(&g, 0, sizeof(g));
    if (qwen_model_load(dir, &m) != LL_OK || st_open(&g, gpath) != LL_OK) {
        printf("ok %d # SKIP fixture %s: %s\n", ++g_n, name, ll_errmsg());
        return;
    }
    const ll_tensor *tt = st_find(&g, "tokens"), *tl = st_find(&g, "logits"), *tp = st_find(&g, "decode.prefix_len"),
                    *td = st_find(&g, "decode.logits"), *tg = st_find(&g, "greedy.tokens");
    int T = (int)tt->shape[0], V = m->hp.n_vocab, P = ((const int32_t *)tp->data)[0], NG = (int)tg->shape[0];
    const int32_t *tok = tt->data;
    float *lg = malloc((size_t)T * V * 4);
    /* Yardstick for a fixture stored in F32 (tiny): the GPU computes with bf16 weights and GEMM
     * operands, so it is held to what bf16 rounding of the weights alone costs: the CPU backend
     * (fp32 arithmetic) on a bf16 copy of the model, against the same HF logits. For a BF16
     * fixture (small) the copy is the model itself and the yardstick is ~exact. */
    cmp_stats yard_p, yard_d, *ypp = NULL, *ypd = NULL;
#ifdef HAVE_CPU_BACKEND
    {
        qwen_model *mb = NULL;
        ll_backend *cpu = NULL;
        ll_seq *cs = NULL;
        float *cl = malloc((size_t)T * V * 4);
        if (qwen_model_requantize(m, LL_TYPE_BF16, &mb) == LL_OK && cpu_backend_new(mb, NULL, &cpu) == LL_OK &&
            cpu->v->seq_new(cpu, T + 1, &cs) == LL_OK) {
            if (cpu->v->forward(cpu, cs, tok, T, LL_LOGITS_ALL, cl) == LL_OK) { yard_p = compare(tl->data, cl, T, V); ypp = &yard_p; }
            cpu->v->seq_reset(cpu, cs);
            ll_status cst = cpu->v->forward(cpu, cs, tok, P, LL_LOGITS_LAST, cl);
            for (int i = P; i < T - 1 && cst == LL_OK; i++) cst = cpu->v->forward(cpu, cs, tok + i, 1, LL_LOGITS_LAST, cl + (size_t)(i - P + 1) * V);
            if (cst == LL_OK) { yard_d = compare(td->data, cl, T - P, V); ypd = &yard_d; }
            cpu->v->seq_free(cpu, cs);
        }
        if (cpu) ll_backend_free(cpu);
        if (mb) qwen_model_free(mb);
        free(cl);
    }
#endif
    ll_backend *be = mk_backend(m, chunk);
    if (be) {
        ll_seq *s;
        be->v->seq_new(be, T + NG + 1, &s);
        char what[160];
        ll_status st = be->v->forward(be, s, tok, T, LL_LOGITS_ALL, lg);
        snprintf(what, sizeof(what), "fixture %s: prefill logits (%d tokens, chunks of %d) vs HF fp32", name, T, chunk);
        if (st == LL_OK) check_close_trim(what, tl->data, lg, T, V, ypp, "CPU on bf16 weights"); else check(0, "%s: %s", what, ll_errmsg());
        be->v->seq_reset(be, s);
        /* decode.logits row j = logits after position P-1+j: row 0 from the prefill, then one row
         * per fed token P..T-2 */
        st = be->v->forward(be, s, tok, P, LL_LOGITS_LAST, lg);
        for (int i = P; i < T - 1 && st == LL_OK; i++) st = be->v->forward(be, s, tok + i, 1, LL_LOGITS_LAST, lg + (size_t)(i - P + 1) * V);
        snprintf(what, sizeof(what), "fixture %s: prefill %d then decode %d tokens vs HF", name, P, T - 1 - P);
        if (st == LL_OK) check_close_yard(what, td->data, lg, T - P, V, ypd, "CPU on bf16 weights"); else check(0, "%s: %s", what, ll_errmsg());
        be->v->seq_reset(be, s);
        int32_t *gen = malloc((size_t)NG * 4);
        st = be->v->forward(be, s, tok, T, LL_LOGITS_LAST, lg);
        if (st == LL_OK) st = cuda_backend_generate(be, s, -1, NG, gen);
        int agree = 0;
        while (st == LL_OK && agree < NG && gen[agree] == ((const int32_t *)tg->data)[agree]) agree++;
        /* HF's greedy run has no logits: the fp32 host reference (ref_model.h) replays it, must pick
         * the same tokens, and gives the top-2 gap of each step; the GPU (bf16 weights and GEMM
         * operands, q8 decode activations) must agree up to the first step closer than GREEDY_TIE */
        int32_t *rg = malloc((size_t)NG * 4);
        float *gap = malloc((size_t)NG * 4), *rl = malloc((size_t)T * V * 4);
        ref_run(m, tok, T, rl, NG, rg, gap);
        int ref_same = !memcmp(rg, tg->data, (size_t)NG * 4), tie = 0;
        while (tie < NG && gap[tie] >= GREEDY_TIE) tie++;
        check(st == LL_OK && ref_same && agree >= tie,
              "fixture %s: greedy continuation %d/%d tokens equal HF's (fp32 reference %s HF; its first near-tie at step %d, gap %.3f)",
              name, agree, NG, ref_same ? "equals" : "DIFFERS FROM", tie, tie < NG ? gap[tie] : 0.0f);
        free(rg); free(gap); free(rl);
        free(gen);
        be->v->seq_free(be, s);
        ll_backend_free(be);
    }
    free(lg);
    st_close(&g);
    qwen_model_free(m);
}
#endif

/* test_lazy_equal and test_long compare runs bit for bit (device- vs host-generated weights; a
 * sequence continued twice from one snapshot) and 256 greedy steps with host argmax: they run on the
 * ordered GDN sums, since the default fp32 atomics (GDN_ATOM=1, session 27) add in a varying order.
 * The atomics have their own tests (test_gdn_atom_active, the GDN_ATOM switch tests). */
static void test_lazy_equal(const char *preset) {
    setenv("LILAC_CUDA_GDN_ATOM", "0", 1);
    setenv("LILAC_CUDA_ATT_COUT", "0", 1); /* the same for the attention layers' atomics (default since session 29) */
    test_lazy_equal_run(preset);
    unsetenv("LILAC_CUDA_GDN_ATOM");
    unsetenv("LILAC_CUDA_ATT_COUT");
}
static void test_long(const char *preset, int P, int chunk) {
    setenv("LILAC_CUDA_GDN_ATOM", "0", 1);
    setenv("LILAC_CUDA_ATT_COUT", "0", 1);
    test_long_run(preset, P, chunk);
    unsetenv("LILAC_CUDA_GDN_ATOM");
    unsetenv("LILAC_CUDA_ATT_COUT");
}

/* The split-K MoE's tests (LILAC_CUDA_MOE_SK=1, opt-in, session 26), with the bf16 cache of the
 * switch tests around them. Alone: `gpu_test --sk` (its first run on a GPU may hang if a cluster
 * barrier or the grid-wide counter is wrong: run it under a short timeout first); the full suite
 * skips them with GPU_TEST_NO_SK=1. */
static void tests_moe_sk(void) {
    setenv("LILAC_CUDA_KV", "bf16", 1);
    /* the decode MoE as one split-K launch (LILAC_CUDA_MOE_SK=1, opt-in, session 26): clusters of 8
     * blocks share h through distributed shared memory, the down's partial sums go into x by fp32
     * reductions (other orders: greedy reported). A unit's slice misread (a wrong half, scale or d)
     * or a lost or doubled reduction moves the logits far past the KL bound. Layers 0-1 of L4 have
     * Q4_K downs, 2-3 Q6_K: both instances run. With GDN_ATOM too: both atomic forms together. */
    test_moe_sk_active("qwen3.6-35b-a3b-L4");
    test_switch_equal("qwen3.6-35b-a3b-L4", 300, 12, "LILAC_CUDA_MOE_SK", "1", "0", "the MoE as one split-K launch", 0);
    setenv("LILAC_CUDA_GDN_ATOM", "1", 1);
    test_switch_equal("qwen3.6-35b-a3b-L4", 300, 12, "LILAC_CUDA_MOE_SK", "1", "0", "the split-K MoE beside GDN_ATOM=1", 0);
    unsetenv("LILAC_CUDA_GDN_ATOM");
    setenv("LILAC_CUDA_FOLD", "0", 1); /* the router as its own launch: the kernel's normalized-logit form */
    test_switch_equal("qwen3.6-35b-a3b-L4", 300, 12, "LILAC_CUDA_MOE_SK", "1", "0", "the split-K MoE without the router fold", 0);
    unsetenv("LILAC_CUDA_FOLD");
    test_switch_same_bits("qwen3.6-35b-a3b-L4", 300, 8, "LILAC_CUDA_MOE_SK", "1", "0", "MOE_SK in a deterministic run (ignored)");
    unsetenv("LILAC_CUDA_KV");
}

/* The attention combine + out-projection + router fold as one launch (LILAC_CUDA_ATT_COUT=1, the default since session 29,
 * session 28): merged partials, the gate, q8 codes and W_o's super-block h of every row in one block
 * per (head, row part), x and the logits by fp32 atomics into buffers zeroed one layer ahead (the
 * chain through the GDN layers' atomic form). A wrong merge weight, a head's columns misread, a
 * share lost or added twice, or a stale buffer (the chain broken: a whole residual added again)
 * moves the logits far past the KL bound; the order of the atomics only rounds. Alone: `gpu_test
 * --cout`. */
static void tests_att_cout(void) {
    unsetenv("LILAC_CUDA_KV"); /* the default q8 cache first */
    test_att_cout_active("qwen3.6-35b-a3b-L4");
    test_switch_equal("qwen3.6-35b-a3b-L4", 300, 12, "LILAC_CUDA_ATT_COUT", "1", "0", "the attention combine + out-projection as one launch", 0);
    test_switch_equal("qwen3.6-35b-a3b-L4", 300, 12, "LILAC_CUDA_ATT_COUT", "2", "0", "ATT_COUT with four-float reductions", 0);
    /* 1200 positions: every split non-empty; 4-head flash-decoding blocks: 33 splits, no appended-position block */
    test_switch_equal("qwen3.6-35b-a3b-L4", 1200, 12, "LILAC_CUDA_ATT_COUT", "1", "0", "ATT_COUT at 1200 positions", 0);
    setenv("LILAC_CUDA_FD_FG", "4", 1);
    test_switch_equal("qwen3.6-35b-a3b-L4", 1200, 12, "LILAC_CUDA_ATT_COUT", "1", "0", "ATT_COUT after 4-head flash-decoding blocks", 0);
    unsetenv("LILAC_CUDA_FD_FG");
    /* session 31's forms: the x_old term after the wait (XL), the static slices packed at load (PK: one
     * bulk copy a block; a slice of the wrong head, part or row moves the logits past the bound) */
    test_switch_equal("qwen3.6-35b-a3b-L4", 300, 12, "LILAC_CUDA_COUT_XL", "1", "0", "ATT_COUT with the x_old term after the wait", 0);
    test_switch_equal("qwen3.6-35b-a3b-L4", 300, 12, "LILAC_CUDA_COUT_PACK", "1", "0", "ATT_COUT with its slices packed at load", 0);
    /* session 32: the image as two bulk copies on two barriers (COUT_PACK=2) */
    test_switch_equal("qwen3.6-35b-a3b-L4", 300, 12, "LILAC_CUDA_COUT_PACK", "2", "0", "ATT_COUT with its packed slices as two copies", 0);
    /* session 32: a head's blocks as one cluster sharing the merge (COUT_CL, with the one-copy pack: the
     * default before session 33); the form falls back to the pack's where no cluster fits, so the
     * launches are counted */
    int pk = 0;
    long ncl = cout_cl_launches("qwen3.6-35b-a3b-L4", &pk);
    check(pk == 2, "the two-copy pack is the default (cout_pk %d; session 33)", pk);
    setenv("LILAC_CUDA_COUT_PACK", "1", 1); /* the cluster form is the one-copy pack's (the two-copy form has none) */
    test_switch_equal("qwen3.6-35b-a3b-L4", 300, 12, "LILAC_CUDA_COUT_CL", "1", "0", "ATT_COUT with the merge shared by a head's cluster", 0);
    long ncl2 = cout_cl_launches("qwen3.6-35b-a3b-L4", &pk);
    check(ncl2 > ncl && pk == 1, "COUT_CL=1 launched the cluster form (%ld launches; cout_pk %d)", ncl2 - ncl, pk);
    unsetenv("LILAC_CUDA_COUT_PACK");
    /* session 33: flash decoding's partials as FP16 o / l for the two-copy form (FD_PH=1): a wrong
     * weight (e instead of e l), a half read at the float index or an unnormalised store moves the
     * logits past the bound */
    test_fd_ph_active("qwen3.6-35b-a3b-L4");
    test_switch_equal("qwen3.6-35b-a3b-L4", 300, 12, "LILAC_CUDA_FD_PH", "1", "0", "ATT_COUT from FP16 partials", 0);
    test_switch_equal("qwen3.6-35b-a3b-L4", 1200, 12, "LILAC_CUDA_FD_PH", "1", "0", "ATT_COUT from FP16 partials, 1200 positions", 0);
    /* session 33: 512 W_o rows a cout block (4 blocks a head, each loading its head's partials once) and
     * 128 (16 a head): another pack layout, another split of the logit rows; a row or slice of the wrong
     * part moves the logits past the bound */
    /* (512 is the default since session 35, so the switches compare it with 256 and 128 explicitly) */
    test_cout_r_active("qwen3.6-35b-a3b-L4", "512");
    test_cout_r_active("qwen3.6-35b-a3b-L4", "256");
    test_cout_r_active("qwen3.6-35b-a3b-L4", "128");
    test_switch_equal("qwen3.6-35b-a3b-L4", 300, 12, "LILAC_CUDA_COUT_R", "512", "256", "ATT_COUT with 512 vs 256 W_o rows a block", 0);
    test_switch_equal("qwen3.6-35b-a3b-L4", 1200, 12, "LILAC_CUDA_COUT_R", "128", "0", "ATT_COUT with 128 W_o rows a block, 1200 positions", 0);
    setenv("LILAC_CUDA_FD_PH", "1", 1);
    test_switch_equal("qwen3.6-35b-a3b-L4", 1200, 12, "LILAC_CUDA_COUT_R", "256", "0", "ATT_COUT with 256 rows a block from FP16 partials", 0);
    unsetenv("LILAC_CUDA_FD_PH");
    setenv("LILAC_CUDA_ATT_COUT", "2", 1);
    test_switch_equal("qwen3.6-35b-a3b-L4", 1200, 12, "LILAC_CUDA_FD_PH", "1", "0", "ATT_COUT from FP16 partials, four-float reductions", 0);
    test_switch_equal("qwen3.6-35b-a3b-L4", 1200, 12, "LILAC_CUDA_COUT_PACK", "1", "0", "packed ATT_COUT, four-float reductions, 1200 positions", 0);
    test_switch_equal("qwen3.6-35b-a3b-L4", 1200, 12, "LILAC_CUDA_COUT_PACK", "2", "0", "packed ATT_COUT as two copies, four-float reductions, 1200 positions", 0);
    setenv("LILAC_CUDA_COUT_PACK", "1", 1); /* the switch tests above unset it */
    test_switch_equal("qwen3.6-35b-a3b-L4", 1200, 12, "LILAC_CUDA_COUT_CL", "1", "0", "cluster-merged ATT_COUT, four-float reductions, 1200 positions", 0);
    unsetenv("LILAC_CUDA_COUT_PACK");
    unsetenv("LILAC_CUDA_ATT_COUT");
    setenv("LILAC_CUDA_KV", "bf16", 1);
    test_switch_equal("qwen3.6-35b-a3b-L4", 300, 12, "LILAC_CUDA_ATT_COUT", "1", "0", "ATT_COUT on the bf16 cache", 0);
    test_switch_same_bits("qwen3.6-35b-a3b-L4", 300, 8, "LILAC_CUDA_ATT_COUT", "1", "0", "ATT_COUT in a deterministic run (ignored)");
    unsetenv("LILAC_CUDA_KV");
}

/* The GDN layer's input projection inside the fused GDN launch (LILAC_CUDA_GDN_IN=1, session 30): clusters
 * of 8 blocks per k-head dot the k-head's 772 in-projection rows (six 16-row tiles a block and four b / a
 * rows), exchange them through distributed shared memory and run the step. The q / k / v / z values are
 * the in-projection's bits (the same chunk dots and lane sums; the b / a rows of the synthetic model are
 * BF16, summed in another order), so against the two launches only the atomics' order and the b / a
 * rounding differ. A tile on the wrong rows, a value stored into the wrong place or block, a missing
 * barrier or a stale ring stage moves the logits far past the KL bound. Ring depths 1 (every tile after
 * the first waits on a refill) and 6 (all before the wait); ATOM 2. Alone: `gpu_test --gdnin`. */
static void tests_gdn_in(void) {
    test_gdn_in_active("qwen3.6-35b-a3b-L4");
    test_switch_equal("qwen3.6-35b-a3b-L4", 300, 12, "LILAC_CUDA_GDN_IN", "1", "0", "the in-projection inside the fused GDN launch", 0);
    setenv("LILAC_CUDA_GDN_IN_NST", "1", 1);
    test_switch_equal("qwen3.6-35b-a3b-L4", 300, 12, "LILAC_CUDA_GDN_IN", "1", "0", "GDN_IN with a one-stage ring", 0);
    setenv("LILAC_CUDA_GDN_IN_NST", "6", 1);
    test_switch_equal("qwen3.6-35b-a3b-L4", 300, 12, "LILAC_CUDA_GDN_IN", "1", "0", "GDN_IN with every tile requested before the wait", 0);
    unsetenv("LILAC_CUDA_GDN_IN_NST");
    setenv("LILAC_CUDA_GDN_IN_WPRE", "1", 1);
    test_switch_equal("qwen3.6-35b-a3b-L4", 300, 12, "LILAC_CUDA_GDN_IN", "1", "0", "GDN_IN with the W_out / B slices before the wait", 0);
    unsetenv("LILAC_CUDA_GDN_IN_WPRE");
    setenv("LILAC_CUDA_GDN_ATOM", "2", 1);
    test_switch_equal("qwen3.6-35b-a3b-L4", 300, 12, "LILAC_CUDA_GDN_IN", "1", "0", "GDN_IN beside four-float atomics", 0);
    unsetenv("LILAC_CUDA_GDN_ATOM");
    test_switch_equal("qwen3.6-35b-a3b-L4", 1200, 24, "LILAC_CUDA_GDN_IN", "1", "0", "GDN_IN at 1200 positions, 24 rows", 0);
    test_switch_same_bits("qwen3.6-35b-a3b-L4", 300, 8, "LILAC_CUDA_GDN_IN", "1", "0", "GDN_IN in a deterministic run (ignored)");
}

/* The double-buffered GDN state (LILAC_CUDA_GDN_DB, default 1, session 36): the state after n tokens
 * lives in copy n & 1. A snapshot must save the copy of its position and a load must fill the copy of
 * the loaded position, whatever the sequence's position was before. Prefill P tokens on a
 * double-buffered backend, save, decode D (odd) tokens; then the same D tokens from the snapshot loaded
 * into a sequence at position 3, into the first sequence (now at the other parity) and into a fresh
 * sequence of an in-place backend (GDN_DB=0): all bit-identical. A copy saved or loaded by the wrong
 * parity starts the decode from another state (zeros or a stale one) and moves the logits. The
 * atomic forms are off (their order varies). */
static void decode_rows(ll_backend *be, ll_seq *s, const int32_t *tok, int D, float *lg, int V) {
    for (int i = 0; i < D; i++) be->v->forward(be, s, tok + i, 1, LL_LOGITS_LAST, lg + (size_t)i * V);
}
static void test_gdn_db_snap(const char *preset, int P) {
    qwen_model *m = NULL;
    if (qwen_model_synthetic(preset, 9, &m) != LL_OK) { check(0, "synthetic: %s", ll_errmsg()); return; }
    setenv("LILAC_CUDA_GDN_ATOM", "0", 1);
    setenv("LILAC_CUDA_ATT_COUT", "0", 1);
    int V = m->hp.n_vocab, D = 5;
    int32_t *tok = malloc((size_t)(P + D) * 4);
    rand_tokens(tok, P + D, V, 23);
    float *lg[4];
    for (int k = 0; k < 4; k++) lg[k] = calloc((size_t)D * V, 4);
    ll_backend *be[2] = {NULL, NULL};
    int db[2] = {-1, -1};
    for (int k = 0; k < 2; k++) {
        setenv("LILAC_CUDA_GDN_DB", k ? "0" : "1", 1);
        be[k] = mk_backend(m, 64);
        cuda_info ci;
        if (be[k] && cuda_backend_info(be[k], &ci) == LL_OK) db[k] = ci.gdn_db;
    }
    unsetenv("LILAC_CUDA_GDN_DB");
    check(db[0] == 1 && db[1] == 0, "%s: LILAC_CUDA_GDN_DB=1 double-buffers the GDN states (%d), =0 not (%d)", preset, db[0], db[1]);
    if (be[0] && be[1]) {
        ll_seq *a = NULL, *b = NULL, *c = NULL;
        be[0]->v->seq_new(be[0], P + D + 16, &a);
        be[0]->v->seq_new(be[0], P + D + 16, &b);
        be[1]->v->seq_new(be[1], P + D + 16, &c);
        ll_status st = be[0]->v->forward(be[0], a, tok, P, LL_LOGITS_NONE, NULL);
        size_t nb = be[0]->v->seq_state_bytes(be[0], a), nb1 = 0;
        void *snap = malloc(nb);
        if (st == LL_OK) st = be[0]->v->seq_save(be[0], a, snap, nb);
        check(st == LL_OK, "%s: prefill %d tokens and save (double-buffered): %s", preset, P, st == LL_OK ? "ok" : ll_errmsg());
        decode_rows(be[0], a, tok + P, D, lg[0], V);
        be[0]->v->forward(be[0], b, tok, 3, LL_LOGITS_NONE, NULL); /* b at position 3, its state in copy 1 */
        ll_status s1 = be[0]->v->seq_load(be[0], b, snap, nb);
        decode_rows(be[0], b, tok + P, D, lg[1], V);
        ll_status s2 = be[0]->v->seq_load(be[0], a, snap, nb); /* a at P + D: the other parity */
        decode_rows(be[0], a, tok + P, D, lg[2], V);
        ll_status s3 = be[1]->v->seq_load(be[1], c, snap, nb);
        nb1 = be[1]->v->seq_state_bytes(be[1], c); /* at the same position: the same size (one copy saved) */
        decode_rows(be[1], c, tok + P, D, lg[3], V);
        check(s1 == LL_OK && s2 == LL_OK && s3 == LL_OK && nb1 == nb, "%s: the snapshot at %d loads three times (%zu bytes; %zu in place)", preset, P,
              nb, nb1);
        check(!memcmp(lg[0], lg[1], (size_t)D * V * 4), "%s: snapshot at %d loaded into a sequence at position 3: the same %d rows", preset, P, D);
        check(!memcmp(lg[0], lg[2], (size_t)D * V * 4), "%s: snapshot at %d loaded back at position %d: the same %d rows", preset, P, P + D, D);
        check(!memcmp(lg[0], lg[3], (size_t)D * V * 4), "%s: snapshot at %d (double-buffered) continued by the in-place state: the same %d rows",
              preset, P, D);
        free(snap);
        be[0]->v->seq_free(be[0], a);
        be[0]->v->seq_free(be[0], b);
        be[1]->v->seq_free(be[1], c);
    }
    for (int k = 0; k < 2; k++)
        if (be[k]) ll_backend_free(be[k]);
    unsetenv("LILAC_CUDA_GDN_ATOM");
    unsetenv("LILAC_CUDA_ATT_COUT");
    for (int k = 0; k < 4; k++) free(lg[k]);
    free(tok);
    qwen_model_free_synthetic(m);
}

/* The decode graph captured while the first prefill chunk runs (LILAC_CUDA_EAGER_GRAPH, default 1,
 * session 36): after a prefill and before any decode the sequence has its graph (one built; none with
 * EAGER_GRAPH=0, whose first decode step builds it), and the decode is the same bits either way (the
 * capture must not disturb the prefill in flight on the same stream). */
static void test_eager_graph(const char *preset) {
    qwen_model *m = NULL;
    if (qwen_model_synthetic(preset, 21, &m) != LL_OK) { check(0, "synthetic: %s", ll_errmsg()); return; }
    int V = m->hp.n_vocab, n[2] = {-1, -1}, n2[2] = {-1, -1};
    int32_t tok[40];
    rand_tokens(tok, 40, V, 3);
    for (int k = 0; k < 2; k++) {
        setenv("LILAC_CUDA_EAGER_GRAPH", k ? "0" : "1", 1);
        ll_backend *be = mk_backend(m, 16);
        unsetenv("LILAC_CUDA_EAGER_GRAPH");
        if (!be) break;
        ll_seq *s = NULL;
        cuda_info ci;
        if (be->v->seq_new(be, 64, &s) == LL_OK && be->v->forward(be, s, tok, 39, LL_LOGITS_NONE, NULL) == LL_OK &&
            cuda_backend_info(be, &ci) == LL_OK) {
            n[k] = ci.graph_builds;
            if (be->v->forward(be, s, tok + 39, 1, LL_LOGITS_NONE, NULL) == LL_OK && cuda_backend_info(be, &ci) == LL_OK) n2[k] = ci.graph_builds;
        }
        if (s) be->v->seq_free(be, s);
        ll_backend_free(be);
    }
    check(n[0] == 1 && n2[0] == 1 && n[1] == 0 && n2[1] == 1,
          "%s: the decode graph is built during the prefill (%d after it, %d after a decode step), at the first decode step with "
          "EAGER_GRAPH=0 (%d, %d)", preset, n[0], n2[0], n[1], n2[1]);
    qwen_model_free_synthetic(m);
    test_switch_same_bits(preset, 300, 8, "LILAC_CUDA_EAGER_GRAPH", "1", "0", "the decode graph captured during the prefill");
}

/* Several decode steps per graph launch in generate (LILAC_CUDA_GRAPH_STEPS, session 30), and the step's
 * finish / embed kernels as programmatic dependents (LILAC_CUDA_STEP_PDL): the same
 * kernels in the same order, so the same bits in a deterministic run; 8 greedy tokens at 3 steps per
 * graph are two 3-step launches and two single ones (a step lost, repeated or reading the wrong token
 * shows in the tokens). Alone: `gpu_test --steps`. */
static void tests_graph_steps(void) {
    test_switch_same_bits("qwen3.6-35b-a3b-L4", 300, 8, "LILAC_CUDA_GRAPH_STEPS", "3", "1", "3 decode steps per graph launch");
    test_switch_same_bits("tiny", 40, 8, "LILAC_CUDA_GRAPH_STEPS", "8", "1", "8 decode steps per graph launch");
    test_switch_equal("qwen3.6-35b-a3b-L4", 300, 12, "LILAC_CUDA_GRAPH_STEPS", "4", "1", "4 decode steps per graph launch (atomic forms)", 0);
    /* the step's finish and (between steps of one graph) embedding as programmatic dependents */
    test_switch_same_bits("qwen3.6-35b-a3b-L4", 300, 8, "LILAC_CUDA_STEP_PDL", "1", "0", "the finish kernel launched with PDL");
    setenv("LILAC_CUDA_STEP_PDL", "1", 1);
    test_switch_same_bits("qwen3.6-35b-a3b-L4", 300, 8, "LILAC_CUDA_GRAPH_STEPS", "3", "1", "3 steps per graph, embed and finish with PDL");
    unsetenv("LILAC_CUDA_STEP_PDL");
    /* session 33: programmatic dependent launches overlap each kernel's pre-wait part with its
     * predecessor's tail; in a deterministic run that overlap must move no bit. A kernel reading
     * before its wait what its predecessor writes after the trigger (or writing what it still reads)
     * would differ here from the launches without overlap. (Why now: a build whose dense GEMV
     * triggered later, -DLN_GEMV_TRIG=2, changed the 35B's deterministic digest.) The attention
     * layer and the GDN layers of L4 both run. */
    test_switch_same_bits("qwen3.6-35b-a3b-L4", 300, 8, "LILAC_CUDA_PDL", "1", "0", "programmatic dependent launches (vs none)");
    /* session 35: the fused GDN kernel's P blocks of a head each read the whole old state and write back
     * their 1/P of its columns; a block that entered late read columns already updated (the race the
     * test above missed, seen only with -DLN_GEMV_TRIG=2). Every block but part 0 now enters 20 us
     * late: without the barrier between reads and write-backs part 0 finishes first and the
     * others read its new columns, which moves the logits; with it, no bit. */
    /* (session 36: the state is double-buffered by default, so a late block reads the old copy; the
     * barrier's forms are checked below with the state in place) */
    test_switch_same_bits("qwen3.6-35b-a3b-L4", 300, 8, "LILAC_CUDA_GDN_STAGGER", "20000", "0", "GDN blocks but each head's part 0 entering 20 us late");
    setenv("LILAC_CUDA_GDN_DB", "0", 1);
    test_switch_same_bits("qwen3.6-35b-a3b-L4", 300, 8, "LILAC_CUDA_GDN_STAGGER", "20000", "0", "late GDN blocks, the state in place, the counter barrier");
    /* ... and the barrier's other form, the head's blocks as one cluster (LILAC_CUDA_GDN_HC=0): the same bits */
    setenv("LILAC_CUDA_GDN_HC", "0", 1);
    test_switch_same_bits("qwen3.6-35b-a3b-L4", 300, 8, "LILAC_CUDA_GDN_STAGGER", "20000", "0", "GDN blocks entering late, the cluster barrier");
    unsetenv("LILAC_CUDA_GDN_HC");
    test_switch_same_bits("qwen3.6-35b-a3b-L4", 300, 8, "LILAC_CUDA_GDN_HC", "0", "1", "the state barrier as clusters (vs counters)");
    unsetenv("LILAC_CUDA_GDN_DB");
    /* session 36: the double-buffered state against the state in place: the same arithmetic, so the same
     * bits, after an even prompt (prefill ends in copy 0) and an odd one (the scan writes copy 1), with
     * the token-serial prefill (copies chosen from the device position) and the persistent decode kernel;
     * then snapshots at both parities */
    test_switch_same_bits("qwen3.6-35b-a3b-L4", 300, 8, "LILAC_CUDA_GDN_DB", "1", "0", "the double-buffered GDN state (vs in place)");
    test_switch_same_bits("qwen3.6-35b-a3b-L4", 301, 8, "LILAC_CUDA_GDN_DB", "1", "0", "the double-buffered GDN state after an odd prompt");
    setenv("LILAC_CUDA_GDN_CHUNK", "0", 1);
    test_switch_same_bits("qwen3.6-35b-a3b-L4", 301, 8, "LILAC_CUDA_GDN_DB", "1", "0", "the double-buffered state, token-serial prefill");
    unsetenv("LILAC_CUDA_GDN_CHUNK");
    setenv("LILAC_CUDA_PERSIST", "1", 1);
    setenv("LILAC_CUDA_KV", "bf16", 1);
    test_switch_same_bits("qwen3.6-35b-a3b-L4", 301, 8, "LILAC_CUDA_GDN_DB", "1", "0", "the double-buffered state, persistent decode kernel");
    unsetenv("LILAC_CUDA_PERSIST");
    unsetenv("LILAC_CUDA_KV");
    test_gdn_db_snap("qwen3.6-35b-a3b-L4", 300);
    test_gdn_db_snap("qwen3.6-35b-a3b-L4", 301);
    test_eager_graph("qwen3.6-35b-a3b-L4");
}

/* the real-weight fixtures vs HF, and tiny vs the CPU (`--fixtures`) */
static void tests_fixtures(void) {
#ifdef HAVE_LOADER
    test_fixture("tiny", 64);
    test_fixture("small", 128);
#endif
#ifdef HAVE_CPU_BACKEND
    test_vs_cpu("tiny", 300, 64, 64);
#endif
}

/* the suite after the graph-steps part: decode switches at 1200 positions, the reference, prefill
 * repeats, long contexts and the q8 cache (`--late`: a device call whose suite ran out of time) */
static void tests_late(void) {
    /* 1200 positions: 33 splits of 4-head blocks vs 66 of 8-head blocks, every split non-empty */
    test_switch_equal("qwen3.6-35b-a3b-L4", 1200, 12, "LILAC_CUDA_FD_FG", "4", "8", "4-head flash-decoding blocks", 1);
    test_switch_equal("qwen3.6-35b-a3b-L4", 1200, 12, "LILAC_CUDA_FD_MMA", "1", "0", "the tensor-core flash-decoding loop (q8 cache)", 1);
    /* the appended position in a block of its own: 65 splits of the other 1199+ positions, other sums */
    test_switch_equal("qwen3.6-35b-a3b-L4", 1200, 12, "LILAC_CUDA_FD_XS", "1", "0", "the appended position in a flash-decoding block of its own", 1);
    setenv("LILAC_CUDA_ATT_COUT", "0", 1); /* the combine runs only without ATT_COUT (the default since session 29) */
    test_switch_equal("qwen3.6-35b-a3b-L4", 1200, 12, "LILAC_CUDA_COMB_ND", "32", "64", "the combine at 32 dims per block", 1);
    unsetenv("LILAC_CUDA_ATT_COUT");
    test_switch_same_bits("qwen3.6-35b-a3b-L4", 300, 8, "LILAC_CUDA_LN_HEAD", "1", "0", "the lm head through registers");
    setenv("LILAC_CUDA_KV", "bf16", 1);
    test_switch_equal("qwen3.6-35b-a3b-L4", 1200, 12, "LILAC_CUDA_FD_MMA", "1", "0", "the tensor-core flash-decoding loop (bf16 cache)", 1);
    unsetenv("LILAC_CUDA_KV");
    test_vs_ref("tiny", 70, 16, 16);
    test_prefill_repeat("qwen3.6-35b-a3b-L4", 512);
    test_lazy_equal("tiny");
    test_long("tiny", g_quick ? 5000 : 33000, 4096);
    test_long("qwen3.6-35b-a3b-L4", g_quick ? 5000 : 33000, 4096); /* the real shapes: flash-decoding's tensor-core loop */
    /* the q8 KV cache: against bf16, then the reference and long-context tests again with it */
    test_kv_q8("qwen3.6-35b-a3b-L4", 300, 12);
    /* the real shapes run q8 by default (auto); the bf16 cache again on them (tiny has no q8 path) */
    setenv("LILAC_CUDA_KV", "bf16", 1);
    printf("-- with LILAC_CUDA_KV=bf16:\n");
    test_vs_ref("qwen3.6-35b-a3b-L4", 8, 3, 4);
    unsetenv("LILAC_CUDA_KV");
}

/* the persistent decode kernel against the per-kernel decode (`--persist`) */
static void tests_persist(void) {
    test_persist_equal("tiny", 40, 12);
    if (!g_quick) test_persist_equal("qwen3.6-35b-a3b-L4", 300, 12);
}

/* the suite's last tests (`--tail`: a device call whose suite ran out of time) */
static void tests_tail(void) {
    setenv("LILAC_CUDA_KV", "bf16", 1);
    test_long("qwen3.6-35b-a3b-L4", 33000, 4096);
    unsetenv("LILAC_CUDA_KV");
    test_vs_ref("qwen3.6-35b-a3b-L4", 4, 3, 2);
    test_lazy_equal("qwen3.6-35b-a3b-L4");
}

int main(int argc, char **argv) {
    int quick = g_quick = argc > 1 && !strcmp(argv[1], "--quick");
    if (cuda_device_count() < 1) {
        printf("ok 1 # SKIP no CUDA device\n");
        return 0;
    }
    /* one part of the suite alone (README: a device call's time does not hold the whole suite) */
    static const struct { const char *flag; void (*run)(void); } parts[] = {
        {"--cout", tests_att_cout}, {"--gdnin", tests_gdn_in},   {"--fixtures", tests_fixtures}, {"--scan", tests_gdn_scan_tc},
        {"--steps", tests_graph_steps}, {"--tail", tests_tail}, {"--pack", tests_moe_pack},       {"--sk", tests_moe_sk},
        {"--persist", tests_persist},   {"--late", tests_late},
    };
    for (size_t i = 0; argc > 1 && i < sizeof parts / sizeof *parts; i++)
        if (!strcmp(argv[1], parts[i].flag)) {
            parts[i].run();
            printf("# %d tests, %d failed\n", g_n, g_fail);
            return g_fail ? 1 : 0;
        }
#ifdef HAVE_LOADER
    test_fixture("tiny", 64);
    test_fixture("small", 128);
#endif
#ifdef HAVE_CPU_BACKEND
    test_vs_cpu("tiny", 300, 64, 64);
    /* 40 rows against the fp32 reference. GPU vs CPU directly: 191/200 rows, max |d| 2.08 at 200
     * (session 2: docs/notes.md, open item) */
    if (!quick) test_vs_cpu("qwen3.6-35b-a3b-L4", 40, 16, 16);
#endif
    tests_persist();
    /* the fold flips MoE routing decisions at near-ties (rows: KL 2.4e-4 .. 3.4e-4 depending on the
     * prefill's state, 10x the other switches), so its 8 greedy tokens are reported, not asserted:
     * they diverged on the q8 cache (session 12, call 3) and, on bf16, once the prefill's sums changed
     * to fixed point (call 4); the rows' argmax and KL stay asserted */
    setenv("LILAC_CUDA_KV", "bf16", 1);
    test_switch_equal("qwen3.6-35b-a3b-L4", 300, 12, "LILAC_CUDA_FOLD", "3", "0", "the router fold", 0);
    /* the GDN fold's x and logit shares by fp32 atomics into buffers zeroed one GDN layer ahead
     * (LILAC_CUDA_GDN_ATOM=1, the default since session 27) against the ordered sums: other orders, so routing
     * may flip at near-ties (greedy reported); a stale buffer (the zeroing chain broken) would add a
     * whole residual: far past the KL bound. Under --deterministic the switch is ignored: same bits. */
    test_gdn_atom_active("qwen3.6-35b-a3b-L4");
    test_switch_equal("qwen3.6-35b-a3b-L4", 300, 12, "LILAC_CUDA_GDN_ATOM", "1", "0", "the GDN fold's shares by atomics", 0);
    test_switch_equal("qwen3.6-35b-a3b-L4", 300, 12, "LILAC_CUDA_GDN_ATOM", "2", "0", "the GDN fold's shares by four-float atomics", 0);
    test_switch_same_bits("qwen3.6-35b-a3b-L4", 300, 8, "LILAC_CUDA_GDN_ATOM", "1", "0", "GDN_ATOM in a deterministic run (ignored)");
    if (!getenv("GPU_TEST_NO_SK")) tests_moe_sk();
    tests_att_cout();
    unsetenv("LILAC_CUDA_KV");
    tests_moe_pack();
    tests_gdn_in();
    tests_gdn_scan_tc();
    if (!getenv("GPU_TEST_NO_STEPS")) tests_graph_steps();
    /* GPU_TEST_NO_LATE=1: the suite in parts (README), the rest as `--late` and `--tail` */
    if (!getenv("GPU_TEST_NO_LATE")) {
        tests_late();
        setenv("LILAC_CUDA_KV", "bf16", 1);
        test_long("qwen3.6-35b-a3b-L4", quick ? 5000 : 33000, 4096);
        unsetenv("LILAC_CUDA_KV");
        if (!quick) {
            test_vs_ref("qwen3.6-35b-a3b-L4", 4, 3, 2);
            test_lazy_equal("qwen3.6-35b-a3b-L4");
        }
    }
    printf("# %d tests, %d failed\n", g_n, g_fail);
    return g_fail ? 1 : 0;
}
