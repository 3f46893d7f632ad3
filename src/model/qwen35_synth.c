/*
 * qwen35_synth.c — host-side builder of synthetic qwen3_5_moe models (see qwen35_synth.h for the
 * quant-mix rule and why blocks are a pure function of (seed, tensor, block)).
 */
#include "qwen35_synth.h"

#include <math.h>
#include <stdio.h>

#define SYNTH_MAGIC 0x53594e5448514e33ull /* "SYNTHQN3" */

/* Everything the model owns lives in this arena; model->owned points at it. */
typedef struct synth_arena {
    uint64_t magic;
    uint64_t seed;
    int lazy;
    void **bufs;          /* [n_bufs] ll_malloc'd buffers */
    size_t n_bufs, cap_bufs;
} synth_arena;

static void *arena_alloc(synth_arena *a, size_t n) {
    if (a->n_bufs == a->cap_bufs) {
        size_t nc = a->cap_bufs ? 2 * a->cap_bufs : 256;
        void **nb = ll_realloc(a->bufs, nc * sizeof(void *));
        if (!nb) return NULL;
        a->bufs = nb;
        a->cap_bufs = nc;
    }
    void *p = ll_calloc(1, n ? n : 1);
    if (p) a->bufs[a->n_bufs++] = p;
    return p;
}

typedef struct synth_ctx {
    synth_arena *a;
    uint64_t seed;
    int lazy;
    size_t weight_bytes;
} synth_ctx;

/* xorshift-style uniform in [0,1) from a counter. */
static float synth_u01(uint64_t seed, uint64_t key, uint64_t i) {
    return (float)((qsyn_mix(seed ^ qsyn_mix(key + i)) >> 40) * (1.0 / 16777216.0));
}

static ll_status synth_f32(synth_ctx *c, const char *name, int64_t n, float lo, float hi, float **out) {
    float *p = arena_alloc(c->a, (size_t)n * sizeof(float));
    if (!p) return ll_err(LL_ERR_OOM, "synthetic: %s: out of memory", name);
    uint64_t key = qsyn_key(name);
    for (int64_t i = 0; i < n; i++) p[i] = lo + (hi - lo) * synth_u01(c->seed, key, (uint64_t)i);
    *out = p;
    return LL_OK;
}

static const char *synth_name(synth_ctx *c, const char *fmt, int layer) {
    char buf[96];
    snprintf(buf, sizeof(buf), fmt, layer);
    char *s = arena_alloc(c->a, strlen(buf) + 1);
    if (s) memcpy(s, buf, strlen(buf) + 1);
    return s;
}

/* A quantized matrix [rows, cols] (n_views > 1: n_views stacked views of `rows` rows each, e.g.
 * the experts of one layer, all named `name`). */
static ll_status synth_qmat(synth_ctx *c, const char *name, ll_type type, int64_t rows, int64_t cols,
                            int n_views, ll_mat *views) {
    if (!name) return ll_err(LL_ERR_OOM, "synthetic: out of memory");
    size_t rb = quant_row_bytes(type, cols);
    size_t bb = quant_block_bytes(type);
    int64_t nb = cols / quant_block_elems(type);
    uint8_t *data = NULL;
    if (!c->lazy) {
        data = arena_alloc(c->a, rb * (size_t)rows * (size_t)n_views);
        if (!data) return ll_err(LL_ERR_OOM, "synthetic: %s: out of memory (%zu bytes)", name, rb * (size_t)rows * n_views);
        uint64_t key = qsyn_key(name);
        int64_t nblk = rows * n_views * nb;
        for (int64_t b = 0; b < nblk; b++) qsyn_block_fill((int)type, c->seed, key, (uint64_t)b, data + (size_t)b * bb);
    }
    for (int v = 0; v < n_views; v++) {
        views[v] = (ll_mat){.type = type, .rows = rows, .cols = cols, .row_bytes = rb,
                            .data = data ? data + (size_t)v * rows * rb : NULL, .name = name};
    }
    c->weight_bytes += rb * (size_t)rows * n_views;
    return LL_OK;
}

/* A small F32 matrix (router, gates): values uniform in ±amp. */
static ll_status synth_fmat(synth_ctx *c, const char *name, int64_t rows, int64_t cols, float amp, ll_mat *m) {
    if (!name) return ll_err(LL_ERR_OOM, "synthetic: out of memory");
    float *p;
    LL_TRY(synth_f32(c, name, rows * cols, -amp, amp, &p));
    *m = (ll_mat){.type = LL_TYPE_F32, .rows = rows, .cols = cols, .row_bytes = (size_t)cols * 4,
                  .data = (const uint8_t *)p, .name = name};
    c->weight_bytes += (size_t)rows * cols * 4;
    return LL_OK;
}

static int synth_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static ll_status synth_preset(const char *preset, qwen_hparams *hp) {
    memset(hp, 0, sizeof(*hp));
    int is_full = !strcmp(preset, "qwen3.6-35b-a3b"), is_l4 = !strcmp(preset, "qwen3.6-35b-a3b-L4");
    if (is_full || is_l4) {
        *hp = (qwen_hparams){.n_vocab = 248320, .n_embd = 2048, .n_layer = is_full ? 40 : 4, .n_head = 16,
                             .n_head_kv = 2, .head_dim = 256, .n_rot = 64, .rope_theta = 1e7f, .gdn_n_k_heads = 16,
                             .gdn_n_v_heads = 32, .gdn_k_dim = 128, .gdn_v_dim = 128, .gdn_conv_k = 4,
                             .n_expert = 256, .n_expert_used = 8, .n_ff_exp = 512, .n_ff_shexp = 512,
                             .rms_eps = 1e-6f, .n_ctx_train = 262144, .eos_token_id = 248046};
    } else if (!strcmp(preset, "tiny")) {
        *hp = (qwen_hparams){.n_vocab = 1024, .n_embd = 256, .n_layer = 4, .n_head = 4, .n_head_kv = 2,
                             .head_dim = 256, .n_rot = 64, .rope_theta = 1e7f, .gdn_n_k_heads = 2,
                             .gdn_n_v_heads = 4, .gdn_k_dim = 128, .gdn_v_dim = 128, .gdn_conv_k = 4,
                             .n_expert = 16, .n_expert_used = 4, .n_ff_exp = 256, .n_ff_shexp = 256,
                             .rms_eps = 1e-6f, .n_ctx_train = 262144, .eos_token_id = 1};
    } else {
        return ll_err(LL_ERR_INVALID, "synthetic: unknown preset '%s' (expected qwen3.6-35b-a3b, qwen3.6-35b-a3b-L4, tiny)", preset);
    }
    for (int i = 0; i < hp->n_layer; i++) hp->is_attn[i] = (i + 1) % 4 == 0;
    return LL_OK;
}

static ll_status synth_build(synth_ctx *c, qwen_model *m) {
    qwen_hparams *hp = &m->hp;
    int64_t H = hp->n_embd, V = hp->n_vocab, L = hp->n_layer;
    LL_TRY(synth_qmat(c, "token_embd", LL_TYPE_Q4_K, V, H, 1, &m->tok_embd));
    LL_TRY(synth_qmat(c, "output", LL_TYPE_Q6_K, V, H, 1, &m->lm_head));
    LL_TRY(synth_f32(c, "output_norm", H, 0.8f, 1.2f, &m->out_norm));
    for (int i = 0; i < L; i++) {
        qwen_layer *ly = &m->layers[i];
        LL_TRY(synth_f32(c, synth_name(c, "blk.%d.attn_norm", i), H, 0.8f, 1.2f, &ly->attn_norm));
        LL_TRY(synth_f32(c, synth_name(c, "blk.%d.ffn_norm", i), H, 0.8f, 1.2f, &ly->ffn_norm));
        if (hp->is_attn[i]) {
            int64_t NH = hp->n_head, NKV = hp->n_head_kv, HD = hp->head_dim;
            LL_TRY(synth_qmat(c, synth_name(c, "blk.%d.attn_q", i), LL_TYPE_Q4_K, NH * 2 * HD, H, 1, &ly->wq));
            LL_TRY(synth_qmat(c, synth_name(c, "blk.%d.attn_k", i), LL_TYPE_Q4_K, NKV * HD, H, 1, &ly->wk));
            LL_TRY(synth_qmat(c, synth_name(c, "blk.%d.attn_v", i), LL_TYPE_Q6_K, NKV * HD, H, 1, &ly->wv));
            LL_TRY(synth_qmat(c, synth_name(c, "blk.%d.attn_output", i), LL_TYPE_Q4_K, H, NH * HD, 1, &ly->wo));
            LL_TRY(synth_f32(c, synth_name(c, "blk.%d.attn_q_norm", i), HD, 0.8f, 1.2f, &ly->q_norm));
            LL_TRY(synth_f32(c, synth_name(c, "blk.%d.attn_k_norm", i), HD, 0.8f, 1.2f, &ly->k_norm));
        } else {
            int64_t HV = hp->gdn_n_v_heads, DV = hp->gdn_v_dim;
            int64_t conv_dim = qwen_gdn_conv_dim(hp), vd = qwen_gdn_v_dim(hp);
            LL_TRY(synth_qmat(c, synth_name(c, "blk.%d.attn_qkv", i), LL_TYPE_Q4_K, conv_dim, H, 1, &ly->wqkv));
            LL_TRY(synth_qmat(c, synth_name(c, "blk.%d.attn_gate", i), LL_TYPE_Q4_K, vd, H, 1, &ly->wz));
            LL_TRY(synth_fmat(c, synth_name(c, "blk.%d.ssm_beta", i), HV, H, 0.05f, &ly->wb));
            LL_TRY(synth_fmat(c, synth_name(c, "blk.%d.ssm_alpha", i), HV, H, 0.05f, &ly->wa));
            LL_TRY(synth_f32(c, synth_name(c, "blk.%d.ssm_conv1d", i), conv_dim * hp->gdn_conv_k, -0.5f, 0.5f, &ly->conv));
            LL_TRY(synth_f32(c, synth_name(c, "blk.%d.ssm_dt", i), HV, -1.0f, 1.0f, &ly->dt_bias));
            LL_TRY(synth_f32(c, synth_name(c, "blk.%d.ssm_a", i), HV, -2.0f, -0.1f, &ly->ssm_a));
            LL_TRY(synth_f32(c, synth_name(c, "blk.%d.ssm_norm", i), DV, 0.8f, 1.2f, &ly->gdn_norm));
            LL_TRY(synth_qmat(c, synth_name(c, "blk.%d.ssm_out", i), LL_TYPE_Q4_K, H, vd, 1, &ly->wout));
        }
        int64_t E = hp->n_expert, FF = hp->n_ff_exp, FS = hp->n_ff_shexp;
        ll_type down_t = synth_more_bits(i, (int)L) ? LL_TYPE_Q6_K : LL_TYPE_Q4_K;
        LL_TRY(synth_fmat(c, synth_name(c, "blk.%d.ffn_gate_inp", i), E, H, 0.1f, &ly->router));
        ly->exp_gate = arena_alloc(c->a, (size_t)E * sizeof(ll_mat));
        ly->exp_up = arena_alloc(c->a, (size_t)E * sizeof(ll_mat));
        ly->exp_down = arena_alloc(c->a, (size_t)E * sizeof(ll_mat));
        if (!ly->exp_gate || !ly->exp_up || !ly->exp_down) return ll_err(LL_ERR_OOM, "synthetic: out of memory");
        LL_TRY(synth_qmat(c, synth_name(c, "blk.%d.ffn_gate_exps", i), LL_TYPE_Q4_K, FF, H, (int)E, ly->exp_gate));
        LL_TRY(synth_qmat(c, synth_name(c, "blk.%d.ffn_up_exps", i), LL_TYPE_Q4_K, FF, H, (int)E, ly->exp_up));
        LL_TRY(synth_qmat(c, synth_name(c, "blk.%d.ffn_down_exps", i), down_t, H, FF, (int)E, ly->exp_down));
        LL_TRY(synth_qmat(c, synth_name(c, "blk.%d.ffn_gate_shexp", i), LL_TYPE_Q4_K, FS, H, 1, &ly->sh_gate));
        LL_TRY(synth_qmat(c, synth_name(c, "blk.%d.ffn_up_shexp", i), LL_TYPE_Q4_K, FS, H, 1, &ly->sh_up));
        LL_TRY(synth_qmat(c, synth_name(c, "blk.%d.ffn_down_shexp", i), down_t, H, FS, 1, &ly->sh_down));
        LL_TRY(synth_fmat(c, synth_name(c, "blk.%d.ffn_gate_inp_shexp", i), 1, H, 0.05f, &ly->sh_gate_inp));
    }
    return LL_OK;
}

ll_status qwen_model_synthetic_ex(const char *preset, uint64_t seed, int lazy, qwen_model **out) {
    *out = NULL;
    qwen_model *m = ll_calloc(1, sizeof(*m));
    synth_arena *a = ll_calloc(1, sizeof(*a));
    if (!m || !a) { ll_free(m); ll_free(a); return ll_err(LL_ERR_OOM, "synthetic: out of memory"); }
    a->magic = SYNTH_MAGIC;
    a->seed = seed;
    a->lazy = lazy;
    m->owned = a;
    m->format_name = ll_strdup("synthetic");
    m->path = ll_strdup(preset ? preset : "");
    ll_status st = synth_preset(preset ? preset : "", &m->hp);
    if (st == LL_OK && (!m->format_name || !m->path)) st = ll_err(LL_ERR_OOM, "synthetic: out of memory");
    synth_ctx c = {.a = a, .seed = seed, .lazy = lazy};
    if (st == LL_OK) st = synth_build(&c, m);
    if (st != LL_OK) { qwen_model_free_synthetic(m); return st; }
    m->weight_bytes = c.weight_bytes;
    *out = m;
    return LL_OK;
}

ll_status qwen_model_synthetic(const char *preset, uint64_t seed, qwen_model **out) {
    return qwen_model_synthetic_ex(preset, seed, 0, out);
}

int qwen_model_synthetic_lazy(const qwen_model *m, uint64_t *seed) {
    const synth_arena *a = m->owned;
    if (!m->format_name || strcmp(m->format_name, "synthetic") || !a || a->magic != SYNTH_MAGIC || !a->lazy) return 0;
    if (seed) *seed = a->seed;
    return 1;
}

void qwen_model_free_synthetic(qwen_model *m) {
    if (!m) return;
    synth_arena *a = m->owned;
    if (a && a->magic == SYNTH_MAGIC) {
        for (size_t i = 0; i < a->n_bufs; i++) ll_free(a->bufs[i]);
        ll_free(a->bufs);
        ll_free(a);
    }
    ll_free(m->format_name);
    ll_free(m->path);
    ll_free(m);
}
