/*
 * qwen35.h — the qwen3_5_moe (Qwen3.5 / Qwen3.6 hybrid MoE) text model: hyperparameters and
 * weights in lilac's canonical form, independent of the file format they came from.
 *
 * Canonical conventions (every loader converts to these; every backend relies on them):
 *   - Matrices are ll_mat views [rows=out, cols=in] in their stored type (F32, F16, BF16, Q-blocks, MLX blocks);
 *     y = W x. Quantized data is never expanded to float outside a kernel.
 *   - Zero-centred RMSNorm gains (input/post-attention/final norm, q_norm, k_norm) are stored as
 *     fp32 with the +1 already applied (llama.cpp's convention), so every norm is y = x̂ * g.
 *     The GDN output norm gain is plain (HF initialises it to ones) and is never shifted.
 *   - GDN: ssm_a = -exp(A_log) in fp32; dt_bias fp32; conv weights fp32 [conv_dim][K] with tap
 *     K-1 multiplying the current token. V heads are in HF "grouped" order (v head h uses k head
 *     h / (Hv/Hk)) unless gdn_v_tiled is set (llama.cpp GGUF: v head h uses k head h % Hk); the
 *     flag covers the V rows of qkv, z, a, b, ssm_a, dt_bias, conv channels and out_proj columns.
 *   - Attention q_proj rows are HF's per-head interleaved [q_h (hd) | gate_h (hd)] × n_head.
 *   - Experts: per-expert views (gate [ff, H], up [ff, H], down [H, ff]) that may point into one
 *     fused tensor.
 *
 * Shape letters: V vocab, H hidden, L layers, NH/NKV attention heads, HD head_dim, HK/HV GDN key/
 * value heads, DK/DV their dims, E experts, FF expert intermediate, FS shared intermediate.
 */
#ifndef LILAC_QWEN35_H
#define LILAC_QWEN35_H

#include "../format/tensor.h"

#define QWEN_MAX_LAYERS 128
#define QWEN_MAX_EXPERTS_USED 16

typedef struct ll_mat {
    ll_type type;
    int64_t rows, cols;       /* [out, in] */
    size_t row_bytes;         /* stride between consecutive rows */
    const uint8_t *data;      /* rows * row_bytes bytes */
    const char *name;         /* source tensor name, for messages */
} ll_mat;

static inline const uint8_t *ll_mat_row(const ll_mat *m, int64_t r) { return m->data + (size_t)r * m->row_bytes; }

typedef struct qwen_hparams {
    int32_t n_vocab;          /* V (embedding rows; may exceed the tokenizer's vocabulary) */
    int32_t n_embd;           /* H */
    int32_t n_layer;          /* L */
    uint8_t is_attn[QWEN_MAX_LAYERS]; /* from layer_types: 1 = full_attention, 0 = linear_attention (GDN) */
    /* gated full attention */
    int32_t n_head, n_head_kv, head_dim; /* NH, NKV, HD */
    int32_t n_rot;            /* rotary dims = HD * partial_rotary_factor (NeoX pairs i, i + n_rot/2) */
    float rope_theta;
    /* Gated DeltaNet */
    int32_t gdn_n_k_heads, gdn_n_v_heads; /* HK, HV */
    int32_t gdn_k_dim, gdn_v_dim;          /* DK, DV */
    int32_t gdn_conv_k;                    /* K (4) */
    int32_t gdn_v_tiled;                   /* see header comment */
    /* MoE */
    int32_t n_expert, n_expert_used;       /* E, top-k */
    int32_t n_ff_exp, n_ff_shexp;          /* FF, FS (FS = 0: no shared expert) */
    float rms_eps;
    int32_t n_ctx_train;
    int32_t tie_embeddings;
    int32_t eos_token_id;                  /* -1 if unknown */
} qwen_hparams;

/* Derived sizes. */
static inline int32_t qwen_gdn_qk_dim(const qwen_hparams *h) { return h->gdn_n_k_heads * h->gdn_k_dim; }   /* HK*DK */
static inline int32_t qwen_gdn_v_dim(const qwen_hparams *h) { return h->gdn_n_v_heads * h->gdn_v_dim; }    /* HV*DV */
static inline int32_t qwen_gdn_conv_dim(const qwen_hparams *h) { return 2 * qwen_gdn_qk_dim(h) + qwen_gdn_v_dim(h); }
static inline int32_t qwen_n_attn_layers(const qwen_hparams *h) {
    int32_t n = 0;
    for (int32_t i = 0; i < h->n_layer; i++) n += h->is_attn[i];
    return n;
}

typedef struct qwen_layer {
    float *attn_norm;          /* [H] gain (+1 baked in) */
    float *ffn_norm;           /* [H] gain (+1 baked in) — post_attention_layernorm */

    /* full attention (is_attn) */
    ll_mat wq;                 /* [NH*2*HD, H]  per head: HD query rows then HD gate rows */
    ll_mat wk;                 /* [NKV*HD, H] */
    ll_mat wv;                 /* [NKV*HD, H] */
    ll_mat wo;                 /* [H, NH*HD] */
    float *q_norm, *k_norm;    /* [HD] gains (+1 baked in) */

    /* Gated DeltaNet (!is_attn) */
    ll_mat wqkv;               /* [2*HK*DK + HV*DV, H]  rows: q | k | v */
    ll_mat wz;                 /* [HV*DV, H] */
    ll_mat wb;                 /* [HV, H]  beta = sigmoid(wb x) */
    ll_mat wa;                 /* [HV, H]  decay input */
    float *conv;               /* [conv_dim][K] */
    float *dt_bias;            /* [HV] */
    float *ssm_a;              /* [HV] = -exp(A_log) */
    float *gdn_norm;           /* [DV] plain gain */
    ll_mat wout;               /* [H, HV*DV] */

    /* MoE */
    ll_mat router;             /* [E, H] */
    ll_mat *exp_gate;          /* [E] views, each [FF, H] */
    ll_mat *exp_up;            /* [E] views, each [FF, H] */
    ll_mat *exp_down;          /* [E] views, each [H, FF] */
    ll_mat sh_gate, sh_up;     /* [FS, H] */
    ll_mat sh_down;            /* [H, FS] */
    ll_mat sh_gate_inp;        /* [1, H]  shared-expert gate: sigmoid(w · x) */
} qwen_layer;

typedef struct qwen_model_file qwen_model_file; /* the file(s) backing the weights (format/model_file.h) */

typedef struct qwen_model {
    qwen_hparams hp;
    ll_mat tok_embd;           /* [V, H] */
    ll_mat lm_head;            /* [V, H] (== tok_embd when tied) */
    float *out_norm;           /* [H] gain (+1 baked in) */
    qwen_layer layers[QWEN_MAX_LAYERS];
    qwen_model_file *file;     /* owned; keeps the mmaps alive */
    void *owned;               /* loader-owned arena (converted small tensors, repacked MLX blocks) */
    char *path;                /* owned */
    char *format_name;         /* "safetensors", "gguf", "mlx", "synthetic" */
    size_t weight_bytes;       /* bytes of matrix weights as stored */
} qwen_model;

/* Loads a model directory or file (HF safetensors dir, MLX dir, GGUF file, single .safetensors
 * with a config.json next to it). Every problem is an error naming the file, tensor or field.
 * On success *out owns everything; free with qwen_model_free. */
ll_status qwen_model_load(const char *path, qwen_model **out);
void qwen_model_free(qwen_model *m);

/* A copy of `src` with every matrix whose rows are whole blocks of `type` re-quantized to it
 * (others stay views of src). Norms and other small vectors are shared with src, which must
 * outlive the result. Free with qwen_model_free. */
ll_status qwen_model_requantize(const qwen_model *src, ll_type type, qwen_model **out);

/* Weight bytes one decode step reads (every dense matrix, the LM head, one embedding row, and
 * n_expert_used average experts per layer): the numerator of decode bandwidth figures. */
double qwen_decode_weight_bytes(const qwen_model *m);

/* Checks every hyperparameter the graph uses; error names the field. */
ll_status qwen_hparams_validate(const qwen_hparams *hp, const char *src);

#endif
