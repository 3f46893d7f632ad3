/*
 * pii_model.h — the PII encoder (PII-Tracer layout) on the CPU: a bidirectional Qwen3 backbone,
 * a token-classification head over 37 BIOES tags, a mean-pooled document sensitivity head, and
 * the constrained BIOES Viterbi decoder with its two biases.
 *
 * Checkpoint layout (a directory): config.json (model_type "pii_masking", "backbone" holding the
 * Qwen3 config, viterbi_b_bias / viterbi_e_bias, max_seq_len) and model.safetensors (or a sharded
 * index) with backbone.{embed_tokens,layers.N.*,norm}.weight, token_cls_head.{weight,bias},
 * sensitivity_head.{weight,bias}, viterbi.{b_bias,e_bias}. Backbone weights may be F32, BF16, F16
 * or any quant type of quant.h; the heads are read as F32 (PII-Tracer keeps them fp32).
 *
 * Numerics follow transformers' Qwen3Model with is_causal=False: RMSNorm with plain gain w
 * (x * rsqrt(mean x^2 + eps) * w), per-head q_norm/k_norm before RoPE, NeoX-style RoPE over the
 * whole head (theta from config), GQA, no attention mask at all, SiLU-gated MLP, final norm.
 */
#ifndef LILAC_PII_MODEL_H
#define LILAC_PII_MODEL_H

#include "base/threadpool.h"
#include "format/safetensors.h"

#define PII_N_CATEGORIES 9
#define PII_N_LABELS 37 /* O + {B,I,E,S} x 9 */

/* Tag id helpers: tag 0 is O; tag 1 + 4*c + k is (B,I,E,S)[k] of category c. */
enum { PII_TAG_B = 0, PII_TAG_I = 1, PII_TAG_E = 2, PII_TAG_S = 3 };
static inline int pii_tag_cat(int tag) { return tag <= 0 ? -1 : (tag - 1) / 4; }
static inline int pii_tag_kind(int tag) { return tag <= 0 ? -1 : (tag - 1) % 4; }

typedef struct pii_layer {
    const ll_tensor *attn_norm, *q, *k, *v, *o, *q_norm, *k_norm;
    const ll_tensor *ffn_norm, *gate, *up, *down;
} pii_layer;

typedef struct pii_model {
    st_set st;
    int vocab, hidden, n_layers, n_heads, n_kv, head_dim, ffn, max_seq, n_labels;
    float eps, rope_theta;
    float b_bias, e_bias;
    const ll_tensor *embed, *final_norm;
    pii_layer *layers;     /* [n_layers] */
    float *cls_w, *cls_b;  /* [n_labels, hidden], [n_labels] (F32 copies) */
    float *sens_w;         /* [hidden] */
    float sens_b;
    float *rope_inv_freq;  /* [head_dim/2] */
    ll_pool *pool;
    int own_pool;
} pii_model;

/* Loads the checkpoint directory `dir`. `pool` may be NULL (a pool of n_threads is created;
 * n_threads <= 0 means all CPUs). */
ll_status pii_model_load(pii_model *m, const char *dir, ll_pool *pool, int n_threads);
void pii_model_free(pii_model *m);

/* Forward pass over T tokens (1 <= T <= max_seq; every id < vocab, else LL_ERR_INVALID).
 * Outputs (each may be NULL): hidden [T, hidden] after the final norm, logits [T, n_labels],
 * *sens_logit the sensitivity logit (sigmoid gives the score). */
ll_status pii_model_forward(pii_model *m, const int32_t *tokens, int T, float *hidden, float *logits,
                            float *sens_logit);

/* Constrained BIOES Viterbi over log_softmax(logits) [T, n_labels=37]; b_bias is added on every
 * step into a B tag, e_bias on every step out of an E tag (including the sequence end).
 * Writes tags[T]. Scratch is allocated per call (O(T * 37)); returns LL_ERR_OOM on failure. */
ll_status pii_viterbi(const float *logits, int T, float b_bias, float e_bias, int32_t *tags);

#endif
