/*
 * cpu_backend.c — the CPU backend: buffers, sequences (KV cache, conv windows, recurrent
 * states, snapshots) and the one function that sequences the qwen3_5_moe forward pass
 * (port of HF `Qwen3_5MoeForCausalLM.forward`, fp32 throughout; spec §3-§6).
 *
 * Prompts are processed in chunks of at most params.max_batch tokens; every buffer is sized for
 * one chunk when the backend is created, and per-sequence state when a sequence is created.
 */
#include <math.h>
#include <stdio.h>

#include "backend/backend.h"
#include "cpu_ops.h"

typedef struct cpu_backend {
    ll_backend base;
    ll_pool *pool;
    int32_t B;               /* max tokens per chunk */
    int32_t n_attn, n_gdn;   /* layer counts by kind */
    int32_t kind_idx[QWEN_MAX_LAYERS]; /* layer -> index among its kind */
    /* activations, sized for B tokens */
    float *x;        /* [B, H] residual stream */
    float *xn;       /* [B, H] normed input of a block */
    float *proj;     /* [B, P] projections: attn q|gate | k | v  or  gdn qkv | z | b | a */
    float *mix;      /* [B, M] mixer core output (attn heads / gdn heads), M = max(NH*HD, HV*DV) */
    float *conv;     /* [B, conv_dim] conv + SiLU output */
    float *gbeta;    /* [B, 2*HV] beta | g */
    float *rlog;     /* [B, E] router logits -> probs */
    int32_t *sel;    /* [B, k] selected experts */
    float *selw;     /* [B, k] their renormalised weights */
    int32_t *etok;   /* [E, B] tokens routed to each expert */
    int32_t *ecnt;   /* [E] */
    int32_t *eslot;  /* [E, B] slot (t*k + j) of each routed token */
    float *hgate;    /* [B*k + B, FF'] expert gate products (routed rows then shared) */
    float *hup;      /* [B*k + B, FF'] */
    float *hdown;    /* [B*k, H] expert outputs before the weighted sum */
    float *shout;    /* [B, H] shared expert output */
    float *shg;      /* [B] shared-expert gate logit */
    uint8_t *actbuf[3]; size_t act_cap; /* quantized activations (up to 3 types at once) */
    float *gdn_scratch;  /* [threads, cpu_gdn_scratch_floats] */
    float *logit_tmp;    /* [V] for LL_LOGITS_LAST */
} cpu_backend;

struct ll_seq {
    int32_t n_ctx, pos;
    float *kc, *vc;      /* [n_attn][n_ctx][NKV*HD] K after norm+RoPE, V raw */
    float *convw;        /* [n_gdn][K-1][conv_dim] */
    float *ssm;          /* [n_gdn][HV][DK][DV] fp32 recurrent state */
    float *att_scratch;  /* [threads][n_ctx] */
};

#define HP(be) (&(be)->base.model->hp)

/* ================================================================ sequences */

static size_t kv_floats(const cpu_backend *be, int32_t n_ctx) {
    const qwen_hparams *hp = HP(be);
    return (size_t)be->n_attn * (size_t)n_ctx * (size_t)(hp->n_head_kv * hp->head_dim);
}
static size_t conv_floats(const cpu_backend *be) {
    const qwen_hparams *hp = HP(be);
    return (size_t)be->n_gdn * (size_t)(hp->gdn_conv_k - 1) * (size_t)qwen_gdn_conv_dim(hp);
}
static size_t ssm_floats(const cpu_backend *be) {
    const qwen_hparams *hp = HP(be);
    return (size_t)be->n_gdn * (size_t)hp->gdn_n_v_heads * (size_t)hp->gdn_k_dim * (size_t)hp->gdn_v_dim;
}

static void cpu_seq_free(ll_backend *b, ll_seq *s) {
    (void)b;
    if (!s) return;
    ll_free_aligned(s->kc);
    ll_free_aligned(s->vc);
    ll_free_aligned(s->convw);
    ll_free_aligned(s->ssm);
    ll_free_aligned(s->att_scratch);
    ll_free(s);
}

static void cpu_seq_reset(ll_backend *b, ll_seq *s) {
    cpu_backend *be = (cpu_backend *)b;
    s->pos = 0;
    memset(s->convw, 0, conv_floats(be) * sizeof(float));
    memset(s->ssm, 0, ssm_floats(be) * sizeof(float));
}

static ll_status cpu_seq_new(ll_backend *b, int32_t n_ctx, ll_seq **out) {
    cpu_backend *be = (cpu_backend *)b;
    *out = NULL;
    if (n_ctx <= 0) return ll_err(LL_ERR_INVALID, "context size %d must be positive", n_ctx);
    ll_seq *s = ll_calloc(1, sizeof(*s));
    if (!s) return ll_err(LL_ERR_OOM, "cpu: out of memory for a sequence");
    s->n_ctx = n_ctx;
    size_t kv = kv_floats(be, n_ctx) * sizeof(float);
    s->kc = ll_malloc_aligned(kv ? kv : 64);
    s->vc = ll_malloc_aligned(kv ? kv : 64);
    s->convw = ll_malloc_aligned(conv_floats(be) * sizeof(float) + 64);
    s->ssm = ll_malloc_aligned(ssm_floats(be) * sizeof(float) + 64);
    s->att_scratch = ll_malloc_aligned((size_t)ll_pool_size(be->pool) * (size_t)n_ctx * sizeof(float));
    if (!s->kc || !s->vc || !s->convw || !s->ssm || !s->att_scratch) {
        cpu_seq_free(b, s);
        return ll_err(LL_ERR_OOM, "cpu: out of memory for a %d-token context (%.1f MiB KV cache)", n_ctx,
                      2.0 * (double)kv / (1 << 20));
    }
    cpu_seq_reset(b, s);
    *out = s;
    return LL_OK;
}

static int32_t cpu_seq_pos(ll_backend *b, const ll_seq *s) {
    (void)b;
    return s->pos;
}

/* Snapshot layout: int32 pos | K rows [n_attn][pos][kvdim] | V rows | conv | ssm. */
static size_t cpu_seq_state_bytes(ll_backend *b, const ll_seq *s) {
    cpu_backend *be = (cpu_backend *)b;
    return sizeof(int32_t) + 2 * kv_floats(be, s->pos) * sizeof(float) +
           (conv_floats(be) + ssm_floats(be)) * sizeof(float);
}

static ll_status cpu_seq_save(ll_backend *b, const ll_seq *s, void *dst, size_t cap) {
    cpu_backend *be = (cpu_backend *)b;
    size_t need = cpu_seq_state_bytes(b, s);
    if (cap < need) return ll_err(LL_ERR_INVALID, "snapshot buffer too small (%zu < %zu bytes)", cap, need);
    uint8_t *p = dst;
    memcpy(p, &s->pos, sizeof(int32_t));
    p += sizeof(int32_t);
    size_t row = (size_t)(HP(be)->n_head_kv * HP(be)->head_dim) * sizeof(float);
    for (int which = 0; which < 2; which++) {
        const float *c = which ? s->vc : s->kc;
        for (int32_t l = 0; l < be->n_attn; l++) {
            memcpy(p, c + (size_t)l * s->n_ctx * (row / sizeof(float)), row * (size_t)s->pos);
            p += row * (size_t)s->pos;
        }
    }
    memcpy(p, s->convw, conv_floats(be) * sizeof(float));
    p += conv_floats(be) * sizeof(float);
    memcpy(p, s->ssm, ssm_floats(be) * sizeof(float));
    return LL_OK;
}

static ll_status cpu_seq_load(ll_backend *b, ll_seq *s, const void *src, size_t n) {
    cpu_backend *be = (cpu_backend *)b;
    int32_t pos;
    if (n < sizeof(int32_t)) return ll_err(LL_ERR_FORMAT, "snapshot: truncated (%zu bytes)", n);
    memcpy(&pos, src, sizeof(int32_t));
    if (pos < 0 || pos > s->n_ctx)
        return ll_err(LL_ERR_OVERFLOW, "snapshot: position %d does not fit a %d-token context", pos, s->n_ctx);
    size_t row = (size_t)(HP(be)->n_head_kv * HP(be)->head_dim) * sizeof(float);
    size_t need = sizeof(int32_t) + 2 * (size_t)be->n_attn * row * (size_t)pos +
                  (conv_floats(be) + ssm_floats(be)) * sizeof(float);
    if (n != need) return ll_err(LL_ERR_FORMAT, "snapshot: %zu bytes, expected %zu for position %d", n, need, pos);
    const uint8_t *p = (const uint8_t *)src + sizeof(int32_t);
    for (int which = 0; which < 2; which++) {
        float *c = which ? s->vc : s->kc;
        for (int32_t l = 0; l < be->n_attn; l++) {
            memcpy(c + (size_t)l * s->n_ctx * (row / sizeof(float)), p, row * (size_t)pos);
            p += row * (size_t)pos;
        }
    }
    memcpy(s->convw, p, conv_floats(be) * sizeof(float));
    p += conv_floats(be) * sizeof(float);
    memcpy(s->ssm, p, ssm_floats(be) * sizeof(float));
    s->pos = pos;
    return LL_OK;
}

/* ================================================================ helpers */

/* Quantized-activation slot k holds x in the dot type that weight type wt wants. */
static const cpu_act *prep_ld(cpu_backend *be, cpu_act *a, int slot, const float *x, int32_t T, int32_t n,
                              int64_t ldx, ll_type wt) {
    cpu_act_prepare(a, be->pool, x, T, n, ldx, wt, be->actbuf[slot], be->act_cap);
    return a;
}
static const cpu_act *prep(cpu_backend *be, cpu_act *a, int slot, const float *x, int32_t T, int32_t n, ll_type wt) {
    cpu_act_prepare(a, be->pool, x, T, n, n, wt, be->actbuf[slot], be->act_cap);
    return a;
}

static void tap(cpu_backend *be, const char *name, const float *x, int32_t T, int32_t dim) {
    if (be->base.params.tap) be->base.params.tap(be->base.params.tap_ud, name, x, T, dim);
}

/* Embedding rows: dequantize row tok[t] of the table (any weight type). */
static void embed_tokens(cpu_backend *be, const int32_t *tok, int32_t T, float *x) {
    const ll_mat *e = &be->base.model->tok_embd;
    for (int32_t t = 0; t < T; t++) quant_dequant_row(e->type, ll_mat_row(e, tok[t]), x + (int64_t)t * e->cols, e->cols);
}

/* ================================================================ mixers */

/* Gated full attention (§4) over T tokens at positions pos..pos+T-1. xn -> mix (pre-o_proj,
 * already gated); then x += Wo mix. */
static void attn_block(cpu_backend *be, ll_seq *s, const qwen_layer *L, int32_t li, int32_t T) {
    const qwen_hparams *hp = HP(be);
    const int32_t H = hp->n_embd, NH = hp->n_head, NKV = hp->n_head_kv, HD = hp->head_dim;
    const int32_t QD = NH * 2 * HD, KD = NKV * HD;
    const int64_t P = QD + 2 * KD; /* proj row: q|gate interleaved per head, then k, then v */
    float *qg = be->proj, *k = be->proj + QD, *v = be->proj + QD + KD;
    cpu_act a0;
    const cpu_act *a = prep(be, &a0, 0, be->xn, T, H, L->wq.type);
    cpu_act a1, a2;
    const cpu_act *ak = L->wk.type == L->wq.type ? a : prep(be, &a1, 1, be->xn, T, H, L->wk.type);
    const cpu_act *av = L->wv.type == L->wq.type ? a : L->wv.type == L->wk.type ? ak : prep(be, &a2, 2, be->xn, T, H, L->wv.type);
    cpu_mm mm[3] = {{&L->wq, a, NULL, T, qg, P}, {&L->wk, ak, NULL, T, k, P}, {&L->wv, av, NULL, T, v, P}};
    cpu_matmul_batch(be->pool, mm, 3);

    const int32_t ai = be->kind_idx[li];
    float *kc = s->kc + (size_t)ai * s->n_ctx * KD, *vc = s->vc + (size_t)ai * s->n_ctx * KD;
    for (int32_t t = 0; t < T; t++) {
        float *row = be->proj + (int64_t)t * P;
        for (int32_t h = 0; h < NH; h++) { /* q_norm per head over its HD query dims */
            float *qh = row + (int64_t)h * 2 * HD;
            cpu_rmsnorm(qh, qh, L->q_norm, 1, HD, hp->rms_eps);
            cpu_rope_neox(qh, 1, HD, hp->n_rot, hp->rope_theta, s->pos + t);
        }
        float *kt = row + QD, *vt = row + QD + KD;
        for (int32_t h = 0; h < NKV; h++) cpu_rmsnorm(kt + h * HD, kt + h * HD, L->k_norm, 1, HD, hp->rms_eps);
        cpu_rope_neox(kt, NKV, HD, hp->n_rot, hp->rope_theta, s->pos + t);
        memcpy(kc + (size_t)(s->pos + t) * KD, kt, sizeof(float) * (size_t)KD);
        memcpy(vc + (size_t)(s->pos + t) * KD, vt, sizeof(float) * (size_t)KD);
    }
    cpu_attention(be->pool, be->mix, be->proj, P, 2 * HD, kc, vc, T, s->pos, NH, NKV, HD, s->att_scratch);
    /* output gate: per head, the HD rows after the query rows (per-head interleave) */
    for (int32_t t = 0; t < T; t++)
        for (int32_t h = 0; h < NH; h++) {
            const float *gate = be->proj + (int64_t)t * P + (int64_t)h * 2 * HD + HD;
            float *o = be->mix + (int64_t)t * NH * HD + (int64_t)h * HD;
            for (int32_t d = 0; d < HD; d++) o[d] *= cpu_sigmoid(gate[d]);
        }
    cpu_act ao;
    cpu_mm mo = {&L->wo, prep(be, &ao, 0, be->mix, T, NH * HD, L->wo.type), NULL, T, be->xn, H};
    cpu_matmul_batch(be->pool, &mo, 1);
    for (int64_t i = 0; i < (int64_t)T * H; i++) be->x[i] += be->xn[i];
}

/* Gated DeltaNet (§5) over T tokens. */
static void gdn_block(cpu_backend *be, ll_seq *s, const qwen_layer *L, int32_t li, int32_t T) {
    const qwen_hparams *hp = HP(be);
    const int32_t H = hp->n_embd, HV = hp->gdn_n_v_heads, DV = hp->gdn_v_dim;
    const int32_t CD = qwen_gdn_conv_dim(hp), VD = qwen_gdn_v_dim(hp), K = hp->gdn_conv_k;
    const int64_t P = CD + VD + 2 * HV; /* proj row: qkv | z | b | a */
    float *qkv = be->proj, *z = be->proj + CD, *bb = z + VD, *aa = bb + HV;
    const ll_mat *ws[4] = {&L->wqkv, &L->wz, &L->wb, &L->wa};
    float *ys[4] = {qkv, z, bb, aa};
    cpu_act acts[3];
    ll_type types[3];
    int n_types = 0;
    cpu_mm mm[4];
    for (int i = 0; i < 4; i++) {
        int slot = -1;
        for (int k2 = 0; k2 < n_types; k2++)
            if (quant_vec_dot_type(types[k2]) == quant_vec_dot_type(ws[i]->type)) slot = k2;
        if (slot < 0) {
            LL_ASSERT(n_types < 3);
            slot = n_types++;
            types[slot] = ws[i]->type;
            prep(be, &acts[slot], slot, be->xn, T, H, ws[i]->type);
        }
        mm[i] = (cpu_mm){ws[i], &acts[slot], NULL, T, ys[i], P};
    }
    cpu_matmul_batch(be->pool, mm, 4);

    const int32_t gi = be->kind_idx[li];
    /* conv + SiLU needs the T qkv rows contiguous: gather them out of the strided proj rows */
    for (int32_t t = 0; t < T; t++) memcpy(be->mix + (int64_t)t * CD, be->proj + (int64_t)t * P, sizeof(float) * (size_t)CD);
    float *win = s->convw + (size_t)gi * (size_t)(K - 1) * CD;
    cpu_conv_silu(be->conv, be->mix, win, L->conv, T, CD, K);
    float *beta = be->gbeta, *g = be->gbeta + (int64_t)T * HV;
    for (int32_t t = 0; t < T; t++)
        for (int32_t h = 0; h < HV; h++) {
            beta[t * HV + h] = cpu_sigmoid(bb[(int64_t)t * P + h]);
            g[t * HV + h] = L->ssm_a[h] * cpu_softplus(aa[(int64_t)t * P + h] + L->dt_bias[h]);
        }
    float *S = s->ssm + (size_t)gi * HV * hp->gdn_k_dim * DV;
    cpu_gdn(be->pool, be->mix, be->conv, beta, g, S, T, hp->gdn_n_k_heads, HV, hp->gdn_k_dim, DV,
            hp->gdn_v_tiled, T > 1, be->gdn_scratch);
    /* gated RMSNorm per v head (§3b): rmsnorm(o) * w * silu(z) */
    for (int32_t t = 0; t < T; t++)
        for (int32_t h = 0; h < HV; h++) {
            float *o = be->mix + (int64_t)t * VD + (int64_t)h * DV;
            const float *zh = z + (int64_t)t * P + (int64_t)h * DV;
            cpu_rmsnorm(o, o, L->gdn_norm, 1, DV, hp->rms_eps);
            for (int32_t d = 0; d < DV; d++) o[d] *= cpu_silu(zh[d]);
        }
    cpu_act ao;
    cpu_mm mo = {&L->wout, prep(be, &ao, 0, be->mix, T, VD, L->wout.type), NULL, T, be->xn, H};
    cpu_matmul_batch(be->pool, &mo, 1);
    for (int64_t i = 0; i < (int64_t)T * H; i++) be->x[i] += be->xn[i];
}

/* ================================================================ MoE (§6) */

static void moe_block(cpu_backend *be, const qwen_layer *L, int32_t T) {
    const qwen_hparams *hp = HP(be);
    const int32_t H = hp->n_embd, E = hp->n_expert, KU = hp->n_expert_used, FF = hp->n_ff_exp, FS = hp->n_ff_shexp;
    const int32_t FM = LL_MAX(FF, FS);
    cpu_act ar, as0;
    /* router logits and the shared-expert gate logit */
    cpu_mm mr[2] = {{&L->router, prep(be, &ar, 0, be->xn, T, H, L->router.type), NULL, T, be->rlog, E}, {0}};
    int nr = 1;
    if (FS > 0) mr[nr++] = (cpu_mm){&L->sh_gate_inp, prep(be, &as0, 1, be->xn, T, H, L->sh_gate_inp.type), NULL, T, be->shg, 1};
    cpu_matmul_batch(be->pool, mr, nr);

    /* softmax over all experts (fp32), top-k, renormalise; group tokens by expert */
    memset(be->ecnt, 0, sizeof(int32_t) * (size_t)E);
    for (int32_t t = 0; t < T; t++) {
        float *p = be->rlog + (int64_t)t * E, mx = -INFINITY, sum = 0;
        for (int32_t e = 0; e < E; e++) mx = p[e] > mx ? p[e] : mx;
        for (int32_t e = 0; e < E; e++) { p[e] = expf(p[e] - mx); sum += p[e]; }
        for (int32_t e = 0; e < E; e++) p[e] /= sum;
        int32_t *sel = be->sel + (int64_t)t * KU;
        float *w = be->selw + (int64_t)t * KU, wsum = 0;
        for (int32_t j = 0; j < KU; j++) { /* selection: largest first, lowest index on ties (torch.topk) */
            int32_t best = -1;
            for (int32_t e = 0; e < E; e++) {
                int taken = 0;
                for (int32_t q = 0; q < j; q++) taken |= sel[q] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e;
            }
            sel[j] = best;
            w[j] = p[best];
            wsum += p[best];
        }
        for (int32_t j = 0; j < KU; j++) {
            w[j] /= wsum;
            int32_t e = sel[j], c = be->ecnt[e]++;
            be->etok[(int64_t)e * be->B + c] = t;
            be->eslot[(int64_t)e * be->B + c] = t * KU + j;
        }
    }

    /* gate and up products of every (expert, routed token) pair, plus the shared expert, in one
     * parallel region. Rows of hgate/hup: slot-ordered per expert group, then T shared rows. */
    ll_type wt = L->exp_gate[0].type;
    cpu_act ax;
    const cpu_act *a = prep(be, &ax, 0, be->xn, T, H, wt);
    cpu_act ash;
    const cpu_act *ash_p = FS > 0 ? (quant_vec_dot_type(L->sh_gate.type) == quant_vec_dot_type(wt) ? a
                                     : prep(be, &ash, 1, be->xn, T, H, L->sh_gate.type)) : NULL;
    /* at most 2*E + 2 products */
    cpu_mm mm[2 * 256 + 2];
    LL_ASSERT(E <= 256);
    int n = 0;
    int64_t row0 = 0;
    int64_t grow[256];
    for (int32_t e = 0; e < E; e++) {
        grow[e] = row0;
        if (!be->ecnt[e]) continue;
        const int32_t *toks = be->etok + (int64_t)e * be->B;
        mm[n++] = (cpu_mm){&L->exp_gate[e], a, toks, be->ecnt[e], be->hgate + row0 * FM, FM};
        mm[n++] = (cpu_mm){&L->exp_up[e], a, toks, be->ecnt[e], be->hup + row0 * FM, FM};
        row0 += be->ecnt[e];
    }
    int64_t shrow = row0;
    if (FS > 0) {
        mm[n++] = (cpu_mm){&L->sh_gate, ash_p, NULL, T, be->hgate + shrow * FM, FM};
        mm[n++] = (cpu_mm){&L->sh_up, ash_p, NULL, T, be->hup + shrow * FM, FM};
    }
    cpu_matmul_batch(be->pool, mm, n);
    int64_t nrows = shrow + (FS > 0 ? T : 0);
    for (int64_t r = 0; r < nrows; r++) {
        int32_t f = r < shrow ? FF : FS;
        float *gr = be->hgate + r * FM, *ur = be->hup + r * FM;
        for (int32_t i = 0; i < f; i++) gr[i] = cpu_silu(gr[i]) * ur[i];
    }

    /* down products: routed rows into hdown (by group row), shared into shout. The routed
     * activations are hgate rows 0..shrow-1 (FF used of FM); each expert reads its own
     * consecutive group through a row-id list. */
    ll_type dt = L->exp_down[0].type;
    cpu_act ad, asd;
    const cpu_act *adp = prep_ld(be, &ad, 0, be->hgate, (int32_t)shrow, FF, FM, dt);
    int32_t *rowids = be->etok + (int64_t)E * be->B; /* spare [B*k] ints after etok */
    for (int64_t r = 0; r < shrow; r++) rowids[r] = (int32_t)r;
    n = 0;
    for (int32_t e = 0; e < E; e++) {
        if (!be->ecnt[e]) continue;
        mm[n++] = (cpu_mm){&L->exp_down[e], adp, rowids + grow[e], be->ecnt[e], be->hdown + grow[e] * H, H};
    }
    if (FS > 0) {
        const cpu_act *asdp = prep_ld(be, &asd, 1, be->hgate + shrow * FM, T, FS, FM, L->sh_down.type);
        mm[n++] = (cpu_mm){&L->sh_down, asdp, NULL, T, be->shout, H};
    }
    cpu_matmul_batch(be->pool, mm, n);

    /* combine: x += sum_j w_j y_{e_j} + sigmoid(shg) * shared */
    for (int32_t e = 0; e < E; e++)
        for (int32_t c = 0; c < be->ecnt[e]; c++) {
            int32_t t = be->etok[(int64_t)e * be->B + c], slot = be->eslot[(int64_t)e * be->B + c];
            float w = be->selw[slot];
            const float *y = be->hdown + (grow[e] + c) * H;
            float *xt = be->x + (int64_t)t * H;
            for (int32_t i = 0; i < H; i++) xt[i] += w * y[i];
        }
    if (FS > 0)
        for (int32_t t = 0; t < T; t++) {
            float gsh = cpu_sigmoid(be->shg[t]);
            const float *y = be->shout + (int64_t)t * H;
            float *xt = be->x + (int64_t)t * H;
            for (int32_t i = 0; i < H; i++) xt[i] += gsh * y[i];
        }
}

/* ================================================================ forward */

static void lm_head(cpu_backend *be, const float *xn, int32_t T, float *out) {
    const qwen_model *m = be->base.model;
    cpu_act a;
    cpu_mm mm = {&m->lm_head, prep(be, &a, 0, xn, T, m->hp.n_embd, m->lm_head.type), NULL, T, out, m->hp.n_vocab};
    cpu_matmul_batch(be->pool, &mm, 1);
}

static ll_status forward_chunk(cpu_backend *be, ll_seq *s, const int32_t *tok, int32_t T, ll_logits_mode mode,
                               float *logits) {
    const qwen_model *m = be->base.model;
    const qwen_hparams *hp = &m->hp;
    const int32_t H = hp->n_embd;
    char name[32];
    embed_tokens(be, tok, T, be->x);
    tap(be, "embed", be->x, T, H);
    for (int32_t l = 0; l < hp->n_layer; l++) {
        const qwen_layer *L = &m->layers[l];
        cpu_rmsnorm(be->xn, be->x, L->attn_norm, T, H, hp->rms_eps);
        if (hp->is_attn[l]) attn_block(be, s, L, l, T);
        else gdn_block(be, s, L, l, T);
        cpu_rmsnorm(be->xn, be->x, L->ffn_norm, T, H, hp->rms_eps);
        moe_block(be, L, T);
        snprintf(name, sizeof(name), "layer.%d", l);
        tap(be, name, be->x, T, H);
    }
    s->pos += T;
    if (mode == LL_LOGITS_NONE && !be->base.params.tap) return LL_OK;
    tap(be, "norm.in", be->x, T, H);
    cpu_rmsnorm(be->xn, be->x, m->out_norm, T, H, hp->rms_eps);
    tap(be, "norm.out", be->xn, T, H);
    if (mode == LL_LOGITS_ALL) lm_head(be, be->xn, T, logits);
    else if (mode == LL_LOGITS_LAST) lm_head(be, be->xn + (int64_t)(T - 1) * H, 1, logits);
    return LL_OK;
}

static ll_status cpu_forward(ll_backend *b, ll_seq *s, const int32_t *tokens, int32_t n_tokens,
                             ll_logits_mode mode, float *logits) {
    cpu_backend *be = (cpu_backend *)b;
    const qwen_hparams *hp = HP(be);
    if (n_tokens <= 0) return ll_err(LL_ERR_INVALID, "forward: no tokens");
    if ((int64_t)s->pos + n_tokens > s->n_ctx)
        return ll_err(LL_ERR_OVERFLOW, "context overflow: %d cached + %d new tokens > context size %d", s->pos,
                      n_tokens, s->n_ctx);
    for (int32_t i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
            return ll_err(LL_ERR_INVALID, "token %d at index %d is outside the vocabulary [0, %d)", tokens[i], i,
                          hp->n_vocab);
    for (int32_t i = 0; i < n_tokens; i += be->B) {
        int32_t T = LL_MIN(be->B, n_tokens - i);
        int last = i + T == n_tokens;
        ll_logits_mode cm = mode == LL_LOGITS_ALL ? LL_LOGITS_ALL : (last ? mode : LL_LOGITS_NONE);
        float *out = mode == LL_LOGITS_ALL ? logits + (int64_t)i * hp->n_vocab : logits;
        LL_TRY(forward_chunk(be, s, tokens + i, T, cm, out));
    }
    return LL_OK;
}

/* ================================================================ create / free */

static void cpu_free(ll_backend *b) {
    cpu_backend *be = (cpu_backend *)b;
    if (!be) return;
    ll_pool_free(be->pool);
    void *bufs[] = {be->x, be->xn, be->proj, be->mix, be->conv, be->gbeta, be->rlog, be->selw, be->hgate,
                    be->hup, be->hdown, be->shout, be->shg, be->gdn_scratch, be->logit_tmp,
                    be->actbuf[0], be->actbuf[1], be->actbuf[2]};
    for (size_t i = 0; i < LL_ARRAY_LEN(bufs); i++) ll_free_aligned(bufs[i]);
    ll_free(be->sel);
    ll_free(be->etok);
    ll_free(be->ecnt);
    ll_free(be->eslot);
    ll_free(be);
}

static const ll_backend_vtbl cpu_vtbl = {
    .name = "cpu",
    .free = cpu_free,
    .seq_new = cpu_seq_new,
    .seq_free = cpu_seq_free,
    .seq_reset = cpu_seq_reset,
    .seq_pos = cpu_seq_pos,
    .seq_state_bytes = cpu_seq_state_bytes,
    .seq_save = cpu_seq_save,
    .seq_load = cpu_seq_load,
    .forward = cpu_forward,
};

static float *fbuf(size_t n, int *ok) {
    float *p = ll_malloc_aligned(n * sizeof(float) + 64);
    if (!p) *ok = 0;
    return p;
}

ll_status cpu_backend_new(const qwen_model *model, const ll_backend_params *params, ll_backend **out) {
    *out = NULL;
    quant_init();
    const qwen_hparams *hp = &model->hp;
    cpu_backend *be = ll_calloc(1, sizeof(*be));
    if (!be) return ll_err(LL_ERR_OOM, "cpu backend: out of memory");
    be->base.v = &cpu_vtbl;
    be->base.model = model;
    if (params) be->base.params = *params;
    be->B = be->base.params.max_batch > 0 ? be->base.params.max_batch : 256;
    be->pool = ll_pool_new(be->base.params.n_threads);
    if (!be->pool) { cpu_free(&be->base); return LL_ERR_OOM; }
    for (int32_t l = 0; l < hp->n_layer; l++) be->kind_idx[l] = hp->is_attn[l] ? be->n_attn++ : be->n_gdn++;

    const size_t B = (size_t)be->B, H = (size_t)hp->n_embd, E = (size_t)hp->n_expert, KU = (size_t)hp->n_expert_used;
    const size_t FF = (size_t)hp->n_ff_exp, FS = (size_t)hp->n_ff_shexp, FM = LL_MAX(FF, FS);
    const size_t CD = (size_t)qwen_gdn_conv_dim(hp), VD = (size_t)qwen_gdn_v_dim(hp), HV = (size_t)hp->gdn_n_v_heads;
    const size_t QD = (size_t)(hp->n_head * 2 * hp->head_dim), KD = (size_t)(hp->n_head_kv * hp->head_dim);
    const size_t P = LL_MAX(QD + 2 * KD, CD + VD + 2 * HV);
    const size_t M = LL_MAX(LL_MAX((size_t)(hp->n_head * hp->head_dim), VD), CD);
    LL_ASSERT(FF > 0);
    int ok = 1;
    be->x = fbuf(B * H, &ok);
    be->xn = fbuf(B * H, &ok);
    be->proj = fbuf(B * P, &ok);
    be->mix = fbuf(B * M, &ok);
    be->conv = fbuf(B * CD, &ok);
    be->gbeta = fbuf(B * 2 * HV, &ok);
    be->rlog = fbuf(B * E, &ok);
    be->selw = fbuf(B * KU, &ok);
    be->hgate = fbuf((B * KU + B) * FM, &ok);
    be->hup = fbuf((B * KU + B) * FM, &ok);
    be->hdown = fbuf(B * KU * H, &ok);
    be->shout = fbuf(B * H, &ok);
    be->shg = fbuf(B, &ok);
    be->gdn_scratch = fbuf((size_t)ll_pool_size(be->pool) * cpu_gdn_scratch_floats(hp->gdn_k_dim, hp->gdn_v_dim), &ok);
    be->sel = ll_malloc(B * KU * sizeof(int32_t));
    be->etok = ll_malloc((E * B + B * KU) * sizeof(int32_t));
    be->ecnt = ll_malloc(E * sizeof(int32_t));
    be->eslot = ll_malloc(E * B * sizeof(int32_t));
    /* quantized activations: the widest input row of any product, for every row of a chunk
     * (the expert down products quantize up to B*k rows) */
    size_t widest = LL_MAX(LL_MAX(H, M), FM);
    size_t act_rows = B * KU + B;
    be->act_cap = act_rows * cpu_act_row_bound((int64_t)widest);
    for (int i = 0; i < 3; i++) {
        be->actbuf[i] = ll_malloc_aligned(be->act_cap);
        if (!be->actbuf[i]) ok = 0;
    }
    if (!ok || !be->sel || !be->etok || !be->ecnt || !be->eslot) {
        cpu_free(&be->base);
        return ll_err(LL_ERR_OOM, "cpu backend: out of memory for activation buffers (batch %d)", be->B);
    }
    *out = &be->base;
    return LL_OK;
}
