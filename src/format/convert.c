/*
 * convert.c — model → llama.cpp `qwen35moe` GGUF (see convert.h).
 *
 * How: the source is opened with qwen_model_load, which already turns every supported layout
 * (HF nested/flat names, sharded or not, fused or per-expert experts, MLX affine blocks, GGUF)
 * into the canonical model of qwen35.h and rejects bad checkpoints (missing or truncated shard,
 * wrong shape, unsupported dtype) with a message naming the tensor. Matrices stay views into the
 * memory-mapped files, so nothing is read until it is converted. The canonical model is then
 * written in llama.cpp's conventions, tensor by tensor, in chunks of rows quantized by all
 * threads. The three stages overlap: while the pool quantizes chunk k, a writer thread writes
 * chunk k - 1 and a read-ahead thread reads chunk k + 1: with O_DIRECT into a reused buffer when
 * it is not in the page cache, else by mapping it (MADV_WILLNEED + MADV_POPULATE_READ); the
 * output's whole blocks are written with O_DIRECT too (convert_io.h). Peak memory: two chunk
 * buffers, about two chunks of source, plus the model's small fp32 vectors; mapped pages of the
 * source already converted are dropped.
 *
 * llama.cpp conventions (ggml-org/llama.cpp):
 *  - tensor names: src/llama-arch.cpp LLM_TENSOR_NAMES for LLM_ARCH_QWEN35MOE (the same names
 *    qwen35_load.c reads): token_embd, output_norm, output, blk.N.{attn_norm,
 *    post_attention_norm, attn_q, attn_k, attn_v, attn_output, attn_q_norm, attn_k_norm,
 *    attn_qkv, attn_gate, ssm_beta, ssm_alpha, ssm_conv1d, ssm_dt.bias, ssm_a, ssm_norm,
 *    ssm_out, ffn_gate_inp, ffn_{gate,up,down}_exps, ffn_gate_inp_shexp,
 *    ffn_{gate,up,down}_shexp}.
 *  - tensor contents: conversion/qwen.py (Qwen3NextModel.modify_tensors: `norm.weight` + 1
 *    except linear_attn.norm, A_log → -exp(A_log), conv1d squeezed to [C, K], dt_bias renamed
 *    ssm_dt.bias; _LinearAttentionVReorderBase: V heads of in_proj_qkv's V rows, in_proj_z,
 *    in_proj_a/b, A_log, dt_bias, conv1d's V channels and out_proj's columns reordered from
 *    grouped (by K head) to tiled order; Qwen2MoeModel: fused gate_up_proj split into
 *    ffn_gate_exps / ffn_up_exps, experts stacked [E, out, in]). The canonical model already
 *    holds the +1 norms and -exp(A_log); the reorder is applied here unless the source is
 *    tiled already (a GGUF).
 *  - metadata keys: gguf-py/gguf/constants.py (Keys.LLM / Keys.Attention / Keys.Rope /
 *    Keys.SSM / Keys.Tokenizer) as written by convert_hf_to_gguf.py TextModel
 *    .set_gguf_parameters + Qwen2MoeModel + Qwen3NextModel + _Qwen35MRopeMixin
 *    (rope.dimension_sections, 4 entries) — see write_arch_kv.
 *  - tokenizer: convert_hf_to_gguf.py _set_vocab_gpt2 / get_vocab_base (tokens padded to the
 *    embedding's vocabulary with "[PAD{i}]" of type UNUSED, token types NORMAL / CONTROL /
 *    USER_DEFINED, merges "a b", SpecialVocab ids, add_bos_token, chat_template), and
 *    tokenizer.ggml.pre "qwen35" (Qwen3.5/3.6 split regex) or "qwen2" (src/llama-vocab.cpp).
 *  - types per tensor: src/llama-quant.cpp; see convert_tensor_type below.
 */
#include "convert.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"
#include "base/threadpool.h"
#include "convert_io.h"
#include "model_file.h"
#include "tokenizer/tokenizer.h"

#define ARCH "qwen35moe"

/* ---------------------------------------------------------------- type names */

static const struct { const char *name; convert_type t; uint32_t ftype; ll_type base; } k_types[] = {
    /* ftype = llama.cpp's llama_ftype (general.file_type) */
    {"f32", CONVERT_F32, 0, LL_TYPE_F32},       {"bf16", CONVERT_BF16, 32, LL_TYPE_BF16},
    {"q8_0", CONVERT_Q8_0, 7, LL_TYPE_Q8_0},    {"q6_k", CONVERT_Q6_K, 18, LL_TYPE_Q6_K},
    {"q4_k_m", CONVERT_Q4_K_M, 15, LL_TYPE_Q4_K}, {"q4_k_s", CONVERT_Q4_K_S, 14, LL_TYPE_Q4_K},
};

int convert_type_from_name(const char *name, convert_type *out) {
    for (size_t i = 0; i < LL_ARRAY_LEN(k_types); i++)
        if (!strcasecmp(name, k_types[i].name)) { *out = k_types[i].t; return 0; }
    return -1;
}

const char *convert_type_name(convert_type t) {
    for (size_t i = 0; i < LL_ARRAY_LEN(k_types); i++)
        if (k_types[i].t == t) return k_types[i].name;
    return "?";
}

/* ---------------------------------------------------------------- per-tensor type rule */

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* llama-quant.cpp use_more_bits: the first and last eighth of the layers and every third one
 * in between get more bits. */
static int use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* llama-quant.cpp tensor_type_fallback, for rows that are not whole blocks. lilac has no Q5_0 /
 * Q5_1, so where llama.cpp falls back to those (from Q4_K / Q5_K) we use Q8_0. */
static ll_type fallback(ll_type t, int64_t cols) {
    if (cols % quant_block_elems(t) == 0) return t;
    if (t == LL_TYPE_Q4_K || t == LL_TYPE_Q5_K || t == LL_TYPE_Q6_K) t = LL_TYPE_Q8_0;
    if (cols % quant_block_elems(t) == 0) return t;
    return LL_TYPE_F16;
}

/*
 * The rule (llama.cpp, converting with convert_hf_to_gguf.py then llama-quantize):
 *  1. Kept in F32 whatever the type: 1-D tensors (norm gains, ssm_a, ssm_dt.bias, the 1-D
 *     ffn_gate_inp_shexp), the router ffn_gate_inp and ssm_conv1d (convert_hf_to_gguf forces
 *     F32 for FFN_GATE_INP and SSM_CONV1D; llama-quant's tensor_allows_quantization never
 *     quantizes *_norm, ffn_gate_inp or ssm_conv1d).
 *  2. f32 / bf16 / q8_0 / q6_k: every other tensor gets that type (output.weight too: for q6_k
 *     llama-quant gives output Q6_K, for q8_0 it keeps Q8_0).
 *  3. q4_k_m (LLAMA_FTYPE_MOSTLY_Q4_K_M, llama_tensor_get_type_impl), base Q4_K:
 *       output.weight (and token_embd when tied) → Q6_K;
 *       "attention-v-like" tensors — attn_v and attn_qkv (llama-quant's category_is_attn_v
 *       includes ATTENTION_QKV, so the GDN in_proj_qkv of qwen35moe counts) — → Q6_K when
 *       use_more_bits(i, n): i counts those tensors in llama.cpp's tensor order (by layer; one
 *       per layer here, so i = layer), n = their number (= n_layer);
 *       ffn_down_exps and ffn_down_shexp of layer i → Q6_K when use_more_bits(i, n_layer);
 *       everything else (token_embd, attn_q/k/output, attn_gate, ssm_alpha/beta, ssm_out,
 *       ffn_gate/up_exps and _shexp) → Q4_K.
 *  4. q4_k_s (LLAMA_FTYPE_MOSTLY_Q4_K_S), base Q4_K: output → Q6_K; attention-v-like tensors
 *     with i < 4 → Q5_K; ffn_down of layers i < n_layer/8 → Q5_K; the rest Q4_K.
 *  5. Rows that are not whole blocks fall back as in `fallback` (never for the real model).
 */
ll_type convert_tensor_type(convert_type type, const qwen_hparams *hp, const char *name, int n_dims, int64_t cols) {
    if (n_dims < 2 || ends_with(name, "_norm.weight") || strstr(name, "ffn_gate_inp.weight") || strstr(name, "ssm_conv1d"))
        return LL_TYPE_F32;
    ll_type base = LL_TYPE_F32;
    for (size_t i = 0; i < LL_ARRAY_LEN(k_types); i++)
        if (k_types[i].t == type) base = k_types[i].base;
    if (type == CONVERT_F32 || type == CONVERT_BF16 || type == CONVERT_Q8_0 || type == CONVERT_Q6_K) return fallback(base, cols);
    int layer = -1;
    if (sscanf(name, "blk.%d.", &layer) != 1) layer = -1;
    int n = hp->n_layer;
    ll_type t = LL_TYPE_Q4_K;
    int is_output = !strcmp(name, "output.weight") || (hp->tie_embeddings && !strcmp(name, "token_embd.weight"));
    int attn_v_like = strstr(name, "attn_v.weight") || strstr(name, "attn_qkv.weight");
    int ffn_down = strstr(name, "ffn_down") != NULL;
    if (is_output) {
        t = cols % LL_QK_K ? LL_TYPE_Q8_0 : LL_TYPE_Q6_K;
    } else if (type == CONVERT_Q4_K_M) {
        if ((attn_v_like || ffn_down) && layer >= 0 && use_more_bits(layer, n)) t = LL_TYPE_Q6_K;
    } else { /* Q4_K_S */
        if (attn_v_like && layer >= 0 && layer < 4) t = LL_TYPE_Q5_K;
        else if (ffn_down && layer >= 0 && layer < n / 8) t = LL_TYPE_Q5_K;
    }
    return fallback(t, cols);
}

/* ---------------------------------------------------------------- the plan */

typedef enum { PERM_NONE, PERM_ROWS, PERM_COLS } perm_kind;

typedef struct out_tensor {
    char name[64];
    ll_type type;              /* output type */
    int nd;
    int64_t shape[3];          /* PyTorch order */
    int64_t rows, cols;        /* rows = product of the outer dims */
    /* source: n_mats matrices stacked along rows (experts), or an fp32 array [rows][cols] */
    const ll_mat *mats;
    int n_mats;
    ll_mat one;
    int uses_one;              /* mats == &one (re-pointed when the plan array moves) */
    const float *f32;
    perm_kind perm;            /* V-head reorder (grouped → tiled) */
    int64_t perm_off;          /* first permuted row (PERM_ROWS) */
    int64_t perm_dim;          /* rows / columns per V head */
    uint64_t src_bytes;
} out_tensor;

typedef struct plan {
    out_tensor *t;
    int n, cap;
    void *arena;               /* permuted fp32 copies */
    const qwen_model *m;
    int reorder;               /* source V heads are grouped and must be tiled */
} plan;

static ll_status plan_grow(plan *p) {
    if (p->n < p->cap) return LL_OK;
    int cap = p->cap ? p->cap * 2 : 256;
    out_tensor *nt = ll_realloc(p->t, (size_t)cap * sizeof(*nt));
    if (!nt) return ll_err(LL_ERR_OOM, "convert: out of memory");
    p->t = nt;
    p->cap = cap;
    return LL_OK;
}

/* Tiled V head t → the grouped head that holds its weights (conversion/qwen.py
 * _reorder_v_heads: [HK, r, D] → [r, HK, D], i.e. tiled t = j*HK + k from grouped k*r + j). */
static int64_t grouped_of(const qwen_hparams *hp, int64_t t) {
    int64_t hk = hp->gdn_n_k_heads, r = hp->gdn_n_v_heads / hp->gdn_n_k_heads;
    return (t % hk) * r + t / hk;
}

static out_tensor *plan_add(plan *p, const char *name, int nd, int64_t a, int64_t b, int64_t c) {
    if (plan_grow(p) != LL_OK) return NULL;
    out_tensor *t = &p->t[p->n++];
    memset(t, 0, sizeof(*t));
    snprintf(t->name, sizeof(t->name), "%s", name);
    t->nd = nd;
    t->shape[0] = a, t->shape[1] = b, t->shape[2] = c;
    t->cols = t->shape[nd - 1];
    t->rows = 1;
    for (int d = 0; d < nd - 1; d++) t->rows *= t->shape[d];
    return t;
}

static ll_status add_mat(plan *p, convert_type ty, const char *name, const ll_mat *m, int nd_out, perm_kind perm, int64_t off, int64_t dim) {
    out_tensor *t = nd_out == 1 ? plan_add(p, name, 1, m->cols, 0, 0) : plan_add(p, name, 2, m->rows, m->cols, 0);
    if (!t) return ll_err(LL_ERR_OOM, "convert: out of memory");
    t->one = *m;
    t->uses_one = 1;
    t->mats = &t->one; /* fixed up after the plan stops growing */
    t->n_mats = 1;
    t->perm = p->reorder ? perm : PERM_NONE;
    t->perm_off = off;
    t->perm_dim = dim;
    t->src_bytes = (uint64_t)m->rows * m->row_bytes;
    t->type = convert_tensor_type(ty, &p->m->hp, name, t->nd, t->cols);
    return LL_OK;
}

static ll_status add_experts(plan *p, convert_type ty, const char *name, const ll_mat *mats, int64_t E) {
    out_tensor *t = plan_add(p, name, 3, E, mats[0].rows, mats[0].cols);
    if (!t) return ll_err(LL_ERR_OOM, "convert: out of memory");
    t->mats = mats;
    t->n_mats = (int)E;
    for (int64_t e = 0; e < E; e++) t->src_bytes += (uint64_t)mats[e].rows * mats[e].row_bytes;
    t->type = convert_tensor_type(ty, &p->m->hp, name, 3, t->cols);
    return LL_OK;
}

/* An fp32 vector/array; `perm_off`/`dim` reorder V heads along rows (or along the elements of
 * a 1-D vector, dim 1) into a copy. */
static ll_status add_f32(plan *p, const char *name, const float *v, int nd, int64_t rows, int64_t cols, int permute, int64_t off, int64_t dim) {
    out_tensor *t = nd == 1 ? plan_add(p, name, 1, cols, 0, 0) : plan_add(p, name, 2, rows, cols, 0);
    if (!t) return ll_err(LL_ERR_OOM, "convert: out of memory");
    t->type = LL_TYPE_F32;
    t->src_bytes = (uint64_t)rows * (uint64_t)cols * 4;
    if (!(permute && p->reorder)) {
        t->f32 = v;
        return LL_OK;
    }
    int64_t n = rows * cols, unit = nd == 1 ? 1 : cols; /* elements per permuted "row" */
    float *c = fmt_arena_alloc(&p->arena, (size_t)n * sizeof(float));
    if (!c) return ll_err(LL_ERR_OOM, "convert: out of memory");
    int64_t nunits = n / unit;
    for (int64_t u = 0; u < nunits; u++) {
        int64_t su = u;
        if (u >= off) su = off + grouped_of(&p->m->hp, (u - off) / dim) * dim + (u - off) % dim;
        memcpy(c + u * unit, v + su * unit, (size_t)unit * sizeof(float));
    }
    t->f32 = c;
    return LL_OK;
}

static ll_status build_plan(plan *p, const qwen_model *m, convert_type ty) {
    const qwen_hparams *hp = &m->hp;
    p->m = m;
    p->reorder = !hp->gdn_v_tiled && hp->gdn_n_k_heads != hp->gdn_n_v_heads;
    int64_t H = hp->n_embd, E = hp->n_expert;
    char nm[64];
    LL_TRY(add_mat(p, ty, "token_embd.weight", &m->tok_embd, 2, PERM_NONE, 0, 0));
    LL_TRY(add_f32(p, "output_norm.weight", m->out_norm, 1, 1, H, 0, 0, 0));
    if (!hp->tie_embeddings) LL_TRY(add_mat(p, ty, "output.weight", &m->lm_head, 2, PERM_NONE, 0, 0));
    for (int il = 0; il < hp->n_layer; il++) {
        const qwen_layer *L = &m->layers[il];
#define NM(s) (snprintf(nm, sizeof(nm), "blk.%d." s, il), nm)
        LL_TRY(add_f32(p, NM("attn_norm.weight"), L->attn_norm, 1, 1, H, 0, 0, 0));
        LL_TRY(add_f32(p, NM("post_attention_norm.weight"), L->ffn_norm, 1, 1, H, 0, 0, 0));
        if (hp->is_attn[il]) {
            LL_TRY(add_mat(p, ty, NM("attn_q.weight"), &L->wq, 2, PERM_NONE, 0, 0));
            LL_TRY(add_mat(p, ty, NM("attn_k.weight"), &L->wk, 2, PERM_NONE, 0, 0));
            LL_TRY(add_mat(p, ty, NM("attn_v.weight"), &L->wv, 2, PERM_NONE, 0, 0));
            LL_TRY(add_mat(p, ty, NM("attn_output.weight"), &L->wo, 2, PERM_NONE, 0, 0));
            LL_TRY(add_f32(p, NM("attn_q_norm.weight"), L->q_norm, 1, 1, hp->head_dim, 0, 0, 0));
            LL_TRY(add_f32(p, NM("attn_k_norm.weight"), L->k_norm, 1, 1, hp->head_dim, 0, 0, 0));
        } else {
            int64_t QK2 = 2 * (int64_t)qwen_gdn_qk_dim(hp), DV = hp->gdn_v_dim, HV = hp->gdn_n_v_heads;
            LL_TRY(add_mat(p, ty, NM("attn_qkv.weight"), &L->wqkv, 2, PERM_ROWS, QK2, DV));
            LL_TRY(add_mat(p, ty, NM("attn_gate.weight"), &L->wz, 2, PERM_ROWS, 0, DV));
            LL_TRY(add_mat(p, ty, NM("ssm_beta.weight"), &L->wb, 2, PERM_ROWS, 0, 1));
            LL_TRY(add_mat(p, ty, NM("ssm_alpha.weight"), &L->wa, 2, PERM_ROWS, 0, 1));
            LL_TRY(add_f32(p, NM("ssm_conv1d.weight"), L->conv, 2, qwen_gdn_conv_dim(hp), hp->gdn_conv_k, 1, QK2, DV));
            LL_TRY(add_f32(p, NM("ssm_dt.bias"), L->dt_bias, 1, 1, HV, 1, 0, 1));
            LL_TRY(add_f32(p, NM("ssm_a"), L->ssm_a, 1, 1, HV, 1, 0, 1));
            LL_TRY(add_f32(p, NM("ssm_norm.weight"), L->gdn_norm, 1, 1, DV, 0, 0, 0));
            LL_TRY(add_mat(p, ty, NM("ssm_out.weight"), &L->wout, 2, PERM_COLS, 0, DV));
        }
        LL_TRY(add_mat(p, ty, NM("ffn_gate_inp.weight"), &L->router, 2, PERM_NONE, 0, 0));
        LL_TRY(add_experts(p, ty, NM("ffn_gate_exps.weight"), L->exp_gate, E));
        LL_TRY(add_experts(p, ty, NM("ffn_up_exps.weight"), L->exp_up, E));
        LL_TRY(add_experts(p, ty, NM("ffn_down_exps.weight"), L->exp_down, E));
        if (hp->n_ff_shexp > 0) {
            LL_TRY(add_mat(p, ty, NM("ffn_gate_inp_shexp.weight"), &L->sh_gate_inp, 1, PERM_NONE, 0, 0));
            LL_TRY(add_mat(p, ty, NM("ffn_gate_shexp.weight"), &L->sh_gate, 2, PERM_NONE, 0, 0));
            LL_TRY(add_mat(p, ty, NM("ffn_up_shexp.weight"), &L->sh_up, 2, PERM_NONE, 0, 0));
            LL_TRY(add_mat(p, ty, NM("ffn_down_shexp.weight"), &L->sh_down, 2, PERM_NONE, 0, 0));
        }
#undef NM
    }
    for (int i = 0; i < p->n; i++) /* the array may have moved while growing */
        if (p->t[i].uses_one) p->t[i].mats = &p->t[i].one;
    return LL_OK;
}

/* ---------------------------------------------------------------- metadata */

static ll_status set_u32(gguf_writer *w, const char *k, int64_t v) { return gguf_writer_set_u32(w, k, (uint32_t)v); }

/* The layer pattern as llama.cpp's full_attention_interval (layer i is attention iff
 * (i + 1) % interval == 0), or 0 when no interval describes it. */
static int attn_interval(const qwen_hparams *hp) {
    for (int iv = 1; iv <= hp->n_layer; iv++) {
        int ok = 1;
        for (int i = 0; i < hp->n_layer && ok; i++) ok = hp->is_attn[i] == ((i + 1) % iv == 0);
        if (ok) return iv;
    }
    return 0;
}

/* rope.dimension_sections from config.json's rope_parameters.mrope_section, else llama.cpp's
 * default [11, 11, 10, 0] (conversion/qwen.py _Qwen35MRopeMixin). */
static void read_mrope(const char *src_dir, int32_t sec[4]) {
    sec[0] = 11, sec[1] = 11, sec[2] = 10, sec[3] = 0;
    char p[4400], *txt;
    size_t len;
    snprintf(p, sizeof(p), "%s/config.json", src_dir);
    if (ll_read_file(p, &txt, &len) != LL_OK) return;
    cJSON *root = cJSON_ParseWithLength(txt, len);
    ll_free(txt);
    if (!root) return;
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    if (!cJSON_IsObject(tc)) tc = root;
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(tc, "rope_parameters");
    if (!cJSON_IsObject(rp)) rp = cJSON_GetObjectItemCaseSensitive(tc, "rope_scaling");
    const cJSON *ms = cJSON_IsObject(rp) ? cJSON_GetObjectItemCaseSensitive(rp, "mrope_section") : NULL;
    if (cJSON_IsArray(ms) && cJSON_GetArraySize(ms) >= 1 && cJSON_GetArraySize(ms) <= 4) {
        int i = 0;
        const cJSON *e;
        int32_t tmp[4] = {0, 0, 0, 0};
        int ok = 1;
        cJSON_ArrayForEach(e, ms) { if (!cJSON_IsNumber(e)) ok = 0; else tmp[i++] = (int32_t)e->valuedouble; }
        if (ok) memcpy(sec, tmp, sizeof(tmp));
    }
    cJSON_Delete(root);
}

static ll_status write_arch_kv(gguf_writer *w, const qwen_hparams *hp, const char *src_dir, const char *name, convert_type ty) {
    uint32_t ftype = 0;
    for (size_t i = 0; i < LL_ARRAY_LEN(k_types); i++)
        if (k_types[i].t == ty) ftype = k_types[i].ftype;
    LL_TRY(gguf_writer_set_str(w, "general.architecture", ARCH));
    LL_TRY(gguf_writer_set_str(w, "general.type", "model"));
    LL_TRY(gguf_writer_set_str(w, "general.name", name));
    LL_TRY(set_u32(w, ARCH ".block_count", hp->n_layer));
    LL_TRY(set_u32(w, ARCH ".context_length", hp->n_ctx_train));
    LL_TRY(set_u32(w, ARCH ".embedding_length", hp->n_embd));
    LL_TRY(set_u32(w, ARCH ".attention.head_count", hp->n_head));
    LL_TRY(set_u32(w, ARCH ".attention.head_count_kv", hp->n_head_kv));
    int32_t sec[4];
    read_mrope(src_dir, sec);
    LL_TRY(gguf_writer_set_arr_i32(w, ARCH ".rope.dimension_sections", sec, 4));
    LL_TRY(gguf_writer_set_f32(w, ARCH ".rope.freq_base", hp->rope_theta));
    LL_TRY(gguf_writer_set_f32(w, ARCH ".attention.layer_norm_rms_epsilon", hp->rms_eps));
    LL_TRY(set_u32(w, ARCH ".expert_used_count", hp->n_expert_used));
    LL_TRY(set_u32(w, ARCH ".attention.key_length", hp->head_dim));
    LL_TRY(set_u32(w, ARCH ".attention.value_length", hp->head_dim));
    LL_TRY(set_u32(w, "general.file_type", ftype));
    LL_TRY(set_u32(w, ARCH ".expert_count", hp->n_expert));
    LL_TRY(set_u32(w, ARCH ".expert_feed_forward_length", hp->n_ff_exp));
    if (hp->n_ff_shexp > 0) LL_TRY(set_u32(w, ARCH ".expert_shared_feed_forward_length", hp->n_ff_shexp));
    LL_TRY(set_u32(w, ARCH ".ssm.conv_kernel", hp->gdn_conv_k));
    LL_TRY(set_u32(w, ARCH ".ssm.state_size", hp->gdn_k_dim));
    LL_TRY(set_u32(w, ARCH ".ssm.group_count", hp->gdn_n_k_heads));
    LL_TRY(set_u32(w, ARCH ".ssm.time_step_rank", hp->gdn_n_v_heads));
    LL_TRY(set_u32(w, ARCH ".ssm.inner_size", (int64_t)hp->gdn_n_v_heads * hp->gdn_v_dim));
    int iv = attn_interval(hp);
    if (iv > 0) {
        LL_TRY(set_u32(w, ARCH ".full_attention_interval", iv));
    } else {
        /* no interval describes layer_types: lilac's loader reads this array; llama.cpp only
         * knows full_attention_interval and will not load such a file */
        uint8_t rec[QWEN_MAX_LAYERS];
        for (int i = 0; i < hp->n_layer; i++) rec[i] = !hp->is_attn[i];
        gguf_value v = {.type = GGUF_TYPE_ARRAY, .arr_type = GGUF_TYPE_BOOL, .n = (uint64_t)hp->n_layer, .arr = rec};
        LL_TRY(gguf_writer_set_value(w, ARCH ".attention.recurrent_layers", &v));
        ll_log(LL_LOG_WARN, "convert: the layer pattern has no full_attention_interval; llama.cpp cannot load the result");
    }
    LL_TRY(set_u32(w, ARCH ".rope.dimension_count", hp->n_rot));
    LL_TRY(set_u32(w, "general.quantization_version", 2));
    return LL_OK;
}

/* tokenizer.json's merges ("a b" strings, or [a, b] pairs in newer files) as "a b" strings. */
static ll_status read_merges(const cJSON *root, const char *label, char ***out, int64_t *n, void **arena) {
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *mg = cJSON_IsObject(model) ? cJSON_GetObjectItemCaseSensitive(model, "merges") : NULL;
    *out = NULL;
    *n = 0;
    if (!cJSON_IsArray(mg)) return LL_OK;
    int64_t cnt = cJSON_GetArraySize(mg);
    char **v = fmt_arena_alloc(arena, (size_t)(cnt ? cnt : 1) * sizeof(char *));
    if (!v) return ll_err(LL_ERR_OOM, "%s: out of memory", label);
    int64_t i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, mg) {
        const char *a = NULL, *b = NULL;
        if (cJSON_IsString(e)) {
            v[i++] = e->valuestring; /* root outlives the use */
            continue;
        }
        if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2) {
            a = cJSON_GetArrayItem(e, 0)->valuestring;
            b = cJSON_GetArrayItem(e, 1)->valuestring;
        }
        if (!a || !b) return ll_err(LL_ERR_FORMAT, "%s: model.merges[%lld] is neither \"a b\" nor [a, b]", label, (long long)i);
        size_t la = strlen(a), lb = strlen(b);
        char *s = fmt_arena_alloc(arena, la + lb + 2);
        if (!s) return ll_err(LL_ERR_OOM, "%s: out of memory", label);
        memcpy(s, a, la);
        s[la] = ' ';
        memcpy(s + la + 1, b, lb + 1);
        v[i++] = s;
    }
    *out = v;
    *n = i;
    return LL_OK;
}

/* The Split regex of tokenizer.json's pre_tokenizer (first one found), or NULL. */
static const char *find_split_regex(const cJSON *pt) {
    if (!cJSON_IsObject(pt)) return NULL;
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(pt, "pattern");
    const cJSON *re = cJSON_IsObject(pat) ? cJSON_GetObjectItemCaseSensitive(pat, "Regex") : NULL;
    if (cJSON_IsString(re)) return re->valuestring;
    const cJSON *seq = cJSON_GetObjectItemCaseSensitive(pt, "pretokenizers"), *e;
    if (!cJSON_IsArray(seq)) return NULL;
    cJSON_ArrayForEach(e, seq) {
        const char *r = find_split_regex(e);
        if (r) return r;
    }
    return NULL;
}

/* tokenizer.* keys from the HF tokenizer files in `dir`; returns LL_OK without keys (and a
 * warning) when there is no tokenizer.json. */
static ll_status write_tokenizer_kv(gguf_writer *w, const char *dir, int32_t n_vocab) {
    char p[4400];
    snprintf(p, sizeof(p), "%s/tokenizer.json", dir);
    struct stat sb;
    if (stat(p, &sb) != 0) {
        ll_log(LL_LOG_WARN, "convert: %s not found: the GGUF gets no tokenizer", p);
        return LL_OK;
    }
    tok_tokenizer *tk;
    LL_TRY(tok_load_file(dir, &tk));
    char *txt = NULL;
    size_t len;
    cJSON *root = NULL;
    void *arena = NULL;
    ll_status st = ll_read_file(p, &txt, &len);
    if (st == LL_OK && !(root = cJSON_ParseWithLength(txt, len))) st = ll_err(LL_ERR_FORMAT, "%s: invalid JSON", p);
    int32_t nv = LL_MAX(n_vocab, tok_n_vocab(tk));
    const char **toks = NULL;
    int32_t *types = NULL;
    if (st == LL_OK) {
        toks = fmt_arena_alloc(&arena, (size_t)nv * sizeof(char *));
        types = fmt_arena_alloc(&arena, (size_t)nv * sizeof(int32_t));
        if (!toks || !types) st = ll_err(LL_ERR_OOM, "%s: out of memory", p);
    }
    for (int32_t id = 0; id < nv && st == LL_OK; id++) {
        const char *s = id < tok_n_vocab(tk) ? tok_piece(tk, id) : NULL;
        int ty = tok_type(tk, id);
        if (!s || ty == TOK_TYPE_UNUSED0) {
            char buf[32];
            snprintf(buf, sizeof(buf), "[PAD%d]", id);
            char *c = fmt_arena_alloc(&arena, strlen(buf) + 1);
            if (!c) { st = ll_err(LL_ERR_OOM, "%s: out of memory", p); break; }
            strcpy(c, buf);
            s = c;
            ty = TOK_TYPE_UNUSED;
        }
        toks[id] = s;
        types[id] = ty;
    }
    char **merges = NULL;
    int64_t n_merges = 0;
    if (st == LL_OK) st = read_merges(root, p, &merges, &n_merges, &arena);
    const char *pre = "qwen2";
    if (st == LL_OK) {
        const char *re = find_split_regex(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"));
        if (re && tok_pre_regex("qwen35") && !strcmp(re, tok_pre_regex("qwen35"))) pre = "qwen35";
        else if (!re || !tok_pre_regex("qwen2") || strcmp(re, tok_pre_regex("qwen2")) != 0)
            ll_log(LL_LOG_WARN, "convert: %s: split regex is neither Qwen2/3's nor Qwen3.5's; writing tokenizer.ggml.pre = qwen2", p);
    }
    if (st == LL_OK) st = gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    if (st == LL_OK) st = gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
    if (st == LL_OK) st = gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, (uint64_t)nv);
    if (st == LL_OK) st = gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", types, (uint64_t)nv);
    if (st == LL_OK) st = gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)merges, (uint64_t)n_merges);
    if (st == LL_OK && tok_eos(tk) >= 0) st = set_u32(w, "tokenizer.ggml.eos_token_id", tok_eos(tk));
    if (st == LL_OK && tok_pad(tk) >= 0) st = set_u32(w, "tokenizer.ggml.padding_token_id", tok_pad(tk));
    if (st == LL_OK && tok_bos(tk) >= 0) st = set_u32(w, "tokenizer.ggml.bos_token_id", tok_bos(tk));
    if (st == LL_OK) st = gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", 0);
    if (st == LL_OK && tok_chat_template(tk)) st = gguf_writer_set_str(w, "tokenizer.chat_template", tok_chat_template(tk));
    cJSON_Delete(root);
    ll_free(txt);
    fmt_arena_free(arena);
    tok_free(tk);
    return st;
}

/* A GGUF source: every key but the ones that describe the new file is copied as it is (as
 * llama-quantize does). MTP blocks are not carried over (the loader skips them), so block_count
 * becomes the main stack's and nextn_predict_layers is dropped. */
static ll_status copy_gguf_kv(gguf_writer *w, const gguf_file *g, convert_type ty, const qwen_hparams *hp) {
    uint32_t ftype = 0;
    for (size_t i = 0; i < LL_ARRAY_LEN(k_types); i++)
        if (k_types[i].t == ty) ftype = k_types[i].ftype;
    for (int64_t i = 0; i < g->n_kv; i++) {
        const char *k = g->kv[i].key;
        if (!strcmp(k, "general.file_type") || !strcmp(k, "general.quantization_version") || !strcmp(k, "general.alignment")) continue;
        if (!strncmp(k, "split.", 6)) continue;
        if (!strcmp(k, ARCH ".nextn_predict_layers")) continue;
        if (!strcmp(k, ARCH ".block_count")) {
            LL_TRY(set_u32(w, k, hp->n_layer));
            continue;
        }
        LL_TRY(gguf_writer_set_value(w, k, &g->kv[i].val));
    }
    LL_TRY(set_u32(w, "general.file_type", ftype));
    return set_u32(w, "general.quantization_version", 2);
}

/* ---------------------------------------------------------------- tensor data */

/* Where the source rows of one chunk are: read into `buf` (direct), or in the mapping. */
typedef struct src_slot {
    const out_tensor *t;       /* the chunk this slot holds: t, rows [r0, r0 + nr); t NULL: none */
    int64_t r0, nr;
    int direct;                /* the rows are in buf; else read them through the mapping */
    int64_t k0;                /* first matrix (expert) of the chunk */
    const uint8_t **base;      /* [k - k0]: source row lo[k - k0] of matrix k, in buf */
    int64_t *lo, *hi;          /* [k - k0]: source rows [lo, hi) of matrix k are there */
    uint64_t *off;             /* [k - k0]: their file offset */
    int *file;                 /* [k - k0]: their file */
    uint8_t *buf;              /* aligned to CONV_IO_ALIGN */
    void *buf_raw;
    size_t cap;
    unsigned char *vec;        /* mincore scratch */
    size_t vec_cap;
    uint64_t bytes;            /* read into buf */
    int ignore_cache;          /* read with O_DIRECT even what is in the page cache */
    ll_status st;              /* a read error, with its message */
    char msg[512];
} src_slot;

typedef struct chunk_job {
    const out_tensor *t;
    const qwen_hparams *hp;
    const src_slot *src;       /* where the chunk's source rows are */
    int64_t r0, nr;            /* output rows */
    uint8_t *out;              /* [nr] rows of t->type */
    float *scratch;            /* [nth][2][cols] */
    atomic_llong next;         /* first row of the chunk not yet claimed by a worker */
} chunk_job;

/* Source row of output row r (V-head reorder along rows). */
static int64_t src_row(const out_tensor *t, const qwen_hparams *hp, int64_t r) {
    if (t->perm != PERM_ROWS || r < t->perm_off) return r;
    int64_t u = r - t->perm_off;
    return t->perm_off + grouped_of(hp, u / t->perm_dim) * t->perm_dim + u % t->perm_dim;
}

/* The source bytes of output row r of the chunk held by s (not for t->f32 tensors). */
static const uint8_t *src_row_ptr(const out_tensor *t, const qwen_hparams *hp, const src_slot *s, int64_t r, const ll_mat **m_out) {
    int64_t per = t->mats[0].rows, k = r / per, sr = src_row(t, hp, r % per);
    const ll_mat *m = &t->mats[k];
    *m_out = m;
    if (s->direct) return s->base[k - s->k0] + (size_t)(sr - s->lo[k - s->k0]) * m->row_bytes;
    return ll_mat_row(m, sr);
}

/* Output rows [lo, hi) of the chunk (indices within it); f, g: [cols] scratch. */
static void chunk_rows(chunk_job *j, int64_t lo, int64_t hi, float *f, float *g, size_t rb) {
    const out_tensor *t = j->t;
    int64_t cols = t->cols;
    for (int64_t i = lo; i < hi; i++) {
        int64_t r = j->r0 + i;
        uint8_t *dst = j->out + (size_t)i * rb;
        if (t->f32) {
            quant_quantize_row(t->type, t->f32 + (size_t)r * (size_t)cols, dst, cols);
            continue;
        }
        const ll_mat *m, *mn;
        const uint8_t *src = src_row_ptr(t, j->hp, j->src, r, &m);
        if (i + 1 < hi) {
            /* Start loading the next source row into the cache now, while this one is
             * quantized: a BF16 row of the real model is one 4 KiB page, where the hardware
             * prefetcher stops, so without this every row begins with a stall on memory
             * (BF16 -> fp32 took 12 % of convert's time, 3 % in a cache-warm benchmark). */
            const uint8_t *nx = src_row_ptr(t, j->hp, j->src, r + 1, &mn);
            for (size_t o = 0; o < mn->row_bytes; o += 64) __builtin_prefetch(nx + o);
        }
        if (m->type == t->type && t->perm != PERM_COLS) {
            memcpy(dst, src, rb); /* same type: the bytes as they are (bit-exact bf16 → bf16) */
            continue;
        }
        quant_dequant_row(m->type, src, f, cols);
        if (t->perm == PERM_COLS) {
            for (int64_t c = 0; c < cols; c += t->perm_dim) /* V-head blocks of columns, tiled from grouped */
                memcpy(g + c, f + grouped_of(j->hp, c / t->perm_dim) * t->perm_dim, (size_t)t->perm_dim * sizeof(float));
            quant_quantize_row(t->type, g, dst, cols);
        } else {
            quant_quantize_row(t->type, f, dst, cols);
        }
    }
}

/* Rows are claimed in small batches from a shared counter rather than split evenly up front:
 * on a busy machine a worker that loses its core would otherwise leave the others (and the
 * pool's caller, which spins until all are done) idle for the rest of the chunk. */
static void chunk_worker(void *ctx, int ith, int nth) {
    (void)nth;
    chunk_job *j = ctx;
    const out_tensor *t = j->t;
    int64_t cols = t->cols;
    float *f = j->scratch + (size_t)ith * 2 * (size_t)cols, *g = f + cols;
    size_t rb = quant_row_bytes(t->type, cols);
    const int64_t batch = LL_MAX(1, (int64_t)((64 << 10) / rb)); /* ~64 KiB of output per claim */
    for (;;) {
        int64_t lo = atomic_fetch_add_explicit(&j->next, batch, memory_order_relaxed);
        if (lo >= j->nr) break;
        int64_t hi = LL_MIN(j->nr, lo + batch);
        chunk_rows(j, lo, hi, f, g, rb);
    }
}

/* Drops the (clean, file-backed) pages of a converted source range, so the resident size stays
 * bounded (about one chunk of source) on machines with less memory than the model. */
static void drop_pages(const void *p, size_t n) {
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0 || !p || !n) return;
    uintptr_t a = ((uintptr_t)p + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1), b = ((uintptr_t)p + n) & ~((uintptr_t)pg - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

/* Drops the source pages of output rows [r0, r0 + nr) once they are written (V-head reordered
 * rows stay within their matrix, so at worst a page is read twice). */
static void drop_rows(const out_tensor *t, int64_t r0, int64_t nr) {
    int64_t per = t->mats[0].rows;
    for (int64_t r = r0; r < r0 + nr;) {
        int64_t k = r / per, lo = r % per, hi = LL_MIN(per, lo + (r0 + nr - r));
        const ll_mat *m = &t->mats[k];
        drop_pages(ll_mat_row(m, lo), (size_t)(hi - lo) * m->row_bytes);
        r += hi - lo;
    }
}

/* Reads the source rows of output rows [r0, r0 + nr) into memory and maps them: MADV_WILLNEED
 * (asynchronous readahead of the whole range into the page cache), then, where the kernel has it
 * (Linux 5.14), MADV_POPULATE_READ, which waits for those pages and maps them into our page
 * tables. Run on the read-ahead thread for the next chunk while the workers quantize this one,
 * so that they neither wait for the disk nor take a page fault per 4 KiB row (the kernel maps
 * pages in bulk only when they are already read, which on a cold run they are not; and a
 * prefetch instruction to an unmapped page is dropped — cold runs spent 18 % of their time in
 * BF16 -> fp32, warm ones 3 %). Errors are ignored here: an unreadable page faults again when
 * the workers touch it. */
static void prefetch_rows(const out_tensor *t, int64_t r0, int64_t nr) {
    long pg = sysconf(_SC_PAGESIZE);
    if (t->f32 || pg <= 0) return;
    int64_t per = t->mats[0].rows;
    for (int64_t r = r0; r < r0 + nr;) {
        int64_t k = r / per, lo = r % per, hi = LL_MIN(per, lo + (r0 + nr - r));
        const ll_mat *m = &t->mats[k];
        uintptr_t a = (uintptr_t)ll_mat_row(m, lo) & ~((uintptr_t)pg - 1), b = (uintptr_t)ll_mat_row(m, lo) + (size_t)(hi - lo) * m->row_bytes;
        if (b > a) madvise((void *)a, b - a, MADV_WILLNEED);
        r += hi - lo;
    }
#ifdef MADV_POPULATE_READ
    for (int64_t r = r0; r < r0 + nr;) {
        int64_t k = r / per, lo = r % per, hi = LL_MIN(per, lo + (r0 + nr - r));
        const ll_mat *m = &t->mats[k];
        uintptr_t a = (uintptr_t)ll_mat_row(m, lo) & ~((uintptr_t)pg - 1), b = (uintptr_t)ll_mat_row(m, lo) + (size_t)(hi - lo) * m->row_bytes;
        if (b > a) madvise((void *)a, b - a, MADV_POPULATE_READ);
        r += hi - lo;
    }
#endif
}

/* Most source bytes one chunk may read into a slot's buffer; a chunk that needs more (only the
 * V-head reorder spreads a chunk's rows that far) is read through the mapping. */
#define SRC_SLOT_MAX ((size_t)256 << 20)

/* Brings the source rows of output rows [r0, r0 + nr) of t into memory, into slot s: with
 * O_DIRECT reads into s->buf when cs can read them and they are not all in the page cache
 * already (from the page cache, the mapping is cheaper than a second read from the disk), else
 * through the mapping (prefetch_rows). A read error is kept in s->st / s->msg. */
static void load_chunk(conv_src *cs, src_slot *s, const qwen_hparams *hp, const out_tensor *t, int64_t r0, int64_t nr) {
    s->t = t, s->r0 = r0, s->nr = nr;
    s->direct = 0;
    s->bytes = 0;
    s->st = LL_OK;
    if (t->f32 || nr <= 0) return;
    int64_t per = t->mats[0].rows, k0 = r0 / per, k1 = (r0 + nr - 1) / per;
    s->k0 = k0;
    int resident = !s->ignore_cache;
    size_t need = 0;
    for (int64_t k = k0; k <= k1 && cs; k++) {
        int64_t lo = LL_MAX(r0, k * per) - k * per, hi = LL_MIN(r0 + nr, (k + 1) * per) - k * per;
        int64_t slo = lo, shi = hi;
        if (t->perm == PERM_ROWS) { /* the reorder moves rows within their matrix */
            slo = INT64_MAX, shi = INT64_MIN;
            for (int64_t r = lo; r < hi; r++) {
                int64_t q = src_row(t, hp, r);
                slo = LL_MIN(slo, q), shi = LL_MAX(shi, q + 1);
            }
        }
        const ll_mat *m = &t->mats[k];
        const uint8_t *p = ll_mat_row(m, slo);
        size_t n = (size_t)(shi - slo) * m->row_bytes;
        int64_t i = k - k0;
        if ((s->file[i] = conv_src_locate(cs, p, n, &s->off[i])) < 0) goto mapped;
        s->lo[i] = slo, s->hi[i] = shi;
        if (resident) resident = conv_src_resident(p, n, &s->vec, &s->vec_cap);
        need += (size_t)(shi - slo) * m->row_bytes + 2 * CONV_IO_ALIGN;
    }
    if (!cs || resident || need > SRC_SLOT_MAX) goto mapped;
    if (need > s->cap) {
        ll_free(s->buf_raw);
        s->cap = 0;
        if (!(s->buf = conv_io_alloc(need, &s->buf_raw))) goto mapped;
        s->cap = need;
    }
    /* one read per run of matrices that lie back to back in one file (fused experts) */
    size_t pos = 0;
    for (int64_t i = 0; i <= k1 - k0;) {
        const ll_mat *m = &t->mats[k0 + i];
        uint64_t a = s->off[i] / CONV_IO_ALIGN * CONV_IO_ALIGN, end = s->off[i] + (uint64_t)(s->hi[i] - s->lo[i]) * m->row_bytes;
        int64_t e = i + 1;
        for (; e <= k1 - k0; e++) {
            const ll_mat *me = &t->mats[k0 + e];
            if (s->file[e] != s->file[i] || s->off[e] < a || s->off[e] > end) break;
            end = LL_MAX(end, s->off[e] + (uint64_t)(s->hi[e] - s->lo[e]) * me->row_bytes);
        }
        uint64_t b = (end + CONV_IO_ALIGN - 1) / CONV_IO_ALIGN * CONV_IO_ALIGN;
        int rc = conv_src_read(cs, s->file[i], a, b, end - a, s->buf + pos, s->msg, sizeof(s->msg));
        if (rc > 0) goto mapped; /* no O_DIRECT here after all */
        if (rc < 0) {
            s->st = LL_ERR_IO;
            return;
        }
        for (int64_t q = i; q < e; q++) s->base[q] = s->buf + pos + (s->off[q] - a);
        pos += (size_t)(b - a);
        s->bytes += end - a;
        i = e;
    }
    s->direct = 1;
    return;
mapped:
    prefetch_rows(t, r0, nr);
}

/* Read-ahead: a thread runs load_chunk for chunk k + 1 while the pool quantizes chunk k.
 * One request in flight; the driver waits for it before quantizing that chunk (when the disk is
 * slower than the quantizers, that wait is the conversion being read-bound, as it should be). */
typedef struct read_ahead {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    const out_tensor *t; /* the request; NULL when idle */
    int64_t r0, nr;
    src_slot *slot;      /* where it goes */
    conv_src *cs;
    const qwen_hparams *hp;
    int quit;
} read_ahead;

static void *ra_main(void *arg) {
    read_ahead *ra = arg;
    pthread_mutex_lock(&ra->mu);
    for (;;) {
        while (!ra->t && !ra->quit) pthread_cond_wait(&ra->cv, &ra->mu);
        if (!ra->t) break;
        const out_tensor *t = ra->t;
        int64_t r0 = ra->r0, nr = ra->nr;
        src_slot *slot = ra->slot;
        pthread_mutex_unlock(&ra->mu);
        load_chunk(ra->cs, slot, ra->hp, t, r0, nr);
        pthread_mutex_lock(&ra->mu);
        ra->t = NULL;
        pthread_cond_broadcast(&ra->cv);
    }
    pthread_mutex_unlock(&ra->mu);
    return NULL;
}

static ll_status ra_start(read_ahead *ra, conv_src *cs, const qwen_hparams *hp) {
    memset(ra, 0, sizeof(*ra));
    ra->cs = cs, ra->hp = hp;
    pthread_mutex_init(&ra->mu, NULL);
    pthread_cond_init(&ra->cv, NULL);
    int rc = pthread_create(&ra->th, NULL, ra_main, ra);
    if (rc != 0) {
        pthread_cond_destroy(&ra->cv);
        pthread_mutex_destroy(&ra->mu);
        return ll_err(LL_ERR_IO, "convert: cannot start the read-ahead thread: %s", strerror(rc));
    }
    return LL_OK;
}

static void ra_wait_idle(read_ahead *ra) {
    pthread_mutex_lock(&ra->mu);
    while (ra->t) pthread_cond_wait(&ra->cv, &ra->mu);
    pthread_mutex_unlock(&ra->mu);
}

/* Hands rows [r0, r0 + nr) of t (into `slot`) to the thread once it is idle (no-op for
 * in-memory tensors). */
static void ra_submit(read_ahead *ra, src_slot *slot, const out_tensor *t, int64_t r0, int64_t nr) {
    if (t->f32 || nr <= 0) return;
    ra_wait_idle(ra);
    pthread_mutex_lock(&ra->mu);
    ra->t = t, ra->r0 = r0, ra->nr = nr, ra->slot = slot;
    pthread_cond_broadcast(&ra->cv);
    pthread_mutex_unlock(&ra->mu);
}

static void ra_finish(read_ahead *ra) {
    ra_wait_idle(ra);
    pthread_mutex_lock(&ra->mu);
    ra->quit = 1;
    pthread_cond_broadcast(&ra->cv);
    pthread_mutex_unlock(&ra->mu);
    pthread_join(ra->th, NULL);
    pthread_cond_destroy(&ra->cv);
    pthread_mutex_destroy(&ra->mu);
}

/* Write-behind: a thread writes chunk k to the output while the pool quantizes chunk k + 1 into
 * the other buffer, so the quantizers never wait for the page cache or the disk (when the disk
 * is slower than the quantizers, the kernel's dirty-page throttling blocks this thread instead).
 * Only one chunk is in flight; errors are kept (with their message, which is thread-local) and
 * returned by the next wb_submit / wb_finish. */
typedef struct write_behind {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    gguf_writer *w;
    FILE *f;
    const char *label;
    const uint8_t *data;     /* the chunk to write; NULL when idle */
    size_t n;
    int quit;
    ll_status st;            /* first error */
    char msg[1024];
} write_behind;

static void *wb_main(void *arg) {
    write_behind *wb = arg;
    pthread_mutex_lock(&wb->mu);
    for (;;) {
        while (!wb->data && !wb->quit) pthread_cond_wait(&wb->cv, &wb->mu);
        if (!wb->data) break;
        const uint8_t *d = wb->data;
        size_t n = wb->n;
        int ok = wb->st == LL_OK;
        pthread_mutex_unlock(&wb->mu);
        ll_status st = ok ? gguf_writer_put_data(wb->w, wb->f, d, n, wb->label) : LL_OK;
        pthread_mutex_lock(&wb->mu);
        if (st != LL_OK && wb->st == LL_OK) {
            wb->st = st;
            snprintf(wb->msg, sizeof(wb->msg), "%s", ll_errmsg());
        }
        wb->data = NULL;
        pthread_cond_broadcast(&wb->cv);
    }
    pthread_mutex_unlock(&wb->mu);
    return NULL;
}

static ll_status wb_start(write_behind *wb, gguf_writer *w, FILE *f, const char *label) {
    memset(wb, 0, sizeof(*wb));
    wb->w = w, wb->f = f, wb->label = label;
    pthread_mutex_init(&wb->mu, NULL);
    pthread_cond_init(&wb->cv, NULL);
    int rc = pthread_create(&wb->th, NULL, wb_main, wb);
    if (rc != 0) {
        pthread_cond_destroy(&wb->cv);
        pthread_mutex_destroy(&wb->mu);
        return ll_err(LL_ERR_IO, "convert: cannot start the writer thread: %s", strerror(rc));
    }
    return LL_OK;
}

/* Waits until the writer is idle; returns its first error (re-recorded on this thread). */
static ll_status wb_wait_idle(write_behind *wb) {
    pthread_mutex_lock(&wb->mu);
    while (wb->data) pthread_cond_wait(&wb->cv, &wb->mu);
    ll_status st = wb->st;
    pthread_mutex_unlock(&wb->mu);
    return st == LL_OK ? LL_OK : ll_err(st, "%s", wb->msg);
}

/* Hands data[n] to the writer once the previous chunk is written; data must stay untouched
 * until the next wb_submit or wb_finish returns. */
static ll_status wb_submit(write_behind *wb, const uint8_t *data, size_t n) {
    LL_TRY(wb_wait_idle(wb));
    pthread_mutex_lock(&wb->mu);
    wb->data = data;
    wb->n = n;
    pthread_cond_broadcast(&wb->cv);
    pthread_mutex_unlock(&wb->mu);
    return LL_OK;
}

/* Waits for the last chunk, stops the thread; returns the first write error. */
static ll_status wb_finish(write_behind *wb) {
    ll_status st = wb_wait_idle(wb);
    pthread_mutex_lock(&wb->mu);
    wb->quit = 1;
    pthread_cond_broadcast(&wb->cv);
    pthread_mutex_unlock(&wb->mu);
    pthread_join(wb->th, NULL);
    pthread_cond_destroy(&wb->cv);
    pthread_mutex_destroy(&wb->mu);
    return st;
}

/* ---------------------------------------------------------------- driver */

static const char *base_name(const char *path, char *buf, size_t cap) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t s = n;
    while (s > 0 && path[s - 1] != '/') s--;
    snprintf(buf, cap, "%.*s", (int)(n - s), path + s);
    return buf;
}

/* The model's files, opened again for O_DIRECT reads (NULL: none can be). */
static conv_src *open_sources(const qwen_model *m) {
    const qwen_model_file *mf = m->file;
    int n = mf->kind == QWEN_FILE_GGUF ? 1 : mf->st.n_files;
    const uint8_t *base[n > 0 ? n : 1];
    size_t size[n > 0 ? n : 1];
    const char *path[n > 0 ? n : 1];
    for (int i = 0; i < n; i++) {
        const ll_mapfile *mp = mf->kind == QWEN_FILE_GGUF ? &mf->gguf->map : &mf->st.files[i].map;
        base[i] = mp->data, size[i] = mp->size, path[i] = mp->path;
    }
    return n > 0 ? conv_src_open(n, base, size, path) : NULL;
}

ll_status convert_model(const char *src, const char *dst, const convert_opts *o, convert_stats *stats) {
    double t0 = ll_time_sec();
    /* LILAC_CONVERT_DIRECT: 0 = no O_DIRECT, r = reads only, w = writes only; default both */
    const char *dio = getenv("LILAC_CONVERT_DIRECT");
    int direct_all = dio && !strcmp(dio, "all");
    int direct_read = !dio || direct_all || !strcmp(dio, "1") || !strcmp(dio, "r");
    int direct_write = !dio || direct_all || !strcmp(dio, "1") || !strcmp(dio, "w");
    uint64_t read_direct = 0;
    quant_init();
    struct stat sb;
    if (!o->force && stat(dst, &sb) == 0) return ll_err(LL_ERR_INVALID, "%s: already exists (use --force to overwrite)", dst);
    qwen_model *m = NULL;
    LL_TRY(qwen_model_load(src, &m));
    plan p = {0};
    gguf_writer *w = NULL;
    ll_pool *pool = NULL;
    uint8_t *buf = NULL;
    void *buf_raw = NULL;
    float *scratch = NULL;
    FILE *f = NULL;
    conv_out *out = NULL;
    conv_src *cs = NULL;
    src_slot slots[2];
    memset(slots, 0, sizeof(slots));
    char *tmp = NULL;
    ll_status st = build_plan(&p, m, o->type);
    if (st != LL_OK) goto done;
    if (!(w = gguf_writer_new())) { st = ll_err(LL_ERR_OOM, "convert: out of memory"); goto done; }
    char nm[256], src_dir[4200];
    snprintf(src_dir, sizeof(src_dir), "%s", src);
    if (stat(src, &sb) == 0 && !S_ISDIR(sb.st_mode)) { /* a file: its folder holds the side files */
        char *sl = strrchr(src_dir, '/');
        if (sl) *sl = '\0';
        else snprintf(src_dir, sizeof(src_dir), ".");
    }
    if (m->file->kind == QWEN_FILE_GGUF) st = copy_gguf_kv(w, m->file->gguf, o->type, &m->hp);
    else {
        st = write_arch_kv(w, &m->hp, src_dir, o->name ? o->name : base_name(src, nm, sizeof(nm)), o->type);
        if (st == LL_OK) st = write_tokenizer_kv(w, src_dir, m->hp.n_vocab);
    }
    uint64_t total = 0;
    int64_t max_cols = 1, max_mats = 1;
    size_t max_rb = 1;
    for (int i = 0; i < p.n && st == LL_OK; i++) {
        out_tensor *t = &p.t[i];
        st = gguf_writer_add_tensor(w, t->name, t->type, t->nd, t->shape, NULL);
        total += t->src_bytes;
        max_cols = LL_MAX(max_cols, t->cols);
        max_rb = LL_MAX(max_rb, quant_row_bytes(t->type, t->cols));
        max_mats = LL_MAX(max_mats, t->n_mats);
    }
    if (st != LL_OK) goto done;
    if (!(pool = ll_pool_new(o->threads))) { st = ll_err(LL_ERR_OOM, "convert: cannot start threads: %s", ll_errmsg()); goto done; }
    const size_t chunk = (size_t)8 << 20; /* output bytes per chunk (also the cancel / progress granularity) */
    /* two chunks: one quantized while the other is written; each placed so that its first byte
     * sits where it goes within a CONV_IO_ALIGN block of the file (direct writes need no copy) */
    const size_t half = (chunk + max_rb + 2 * CONV_IO_ALIGN) / CONV_IO_ALIGN * CONV_IO_ALIGN;
    buf = conv_io_alloc(2 * half, &buf_raw);
    scratch = ll_malloc((size_t)ll_pool_size(pool) * 2 * (size_t)max_cols * sizeof(float));
    size_t tl = strlen(dst) + 32;
    tmp = ll_malloc(tl);
    int slots_ok = 1;
    for (int k = 0; k < 2; k++) {
        src_slot *sl = &slots[k];
        sl->base = ll_malloc((size_t)max_mats * sizeof(*sl->base));
        sl->lo = ll_malloc((size_t)max_mats * sizeof(*sl->lo));
        sl->hi = ll_malloc((size_t)max_mats * sizeof(*sl->hi));
        sl->off = ll_malloc((size_t)max_mats * sizeof(*sl->off));
        sl->file = ll_malloc((size_t)max_mats * sizeof(*sl->file));
        slots_ok &= sl->base && sl->lo && sl->hi && sl->off && sl->file;
        sl->ignore_cache = direct_all;
    }
    if (!buf || !scratch || !tmp || !slots_ok) { st = ll_err(LL_ERR_OOM, "convert: out of memory"); goto done; }
    if (direct_read) cs = open_sources(m);
    snprintf(tmp, tl, "%s.part.XXXXXX", dst);
    int fd = mkstemp(tmp);
    if (fd < 0) { st = ll_err(LL_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno)); tmp[0] = '\0'; goto done; }
    fchmod(fd, 0644);
    if ((st = conv_out_open(&out, fd, direct_write, tmp)) != LL_OK) goto done; /* owns fd now */
    f = conv_out_stream(out);
    if ((st = gguf_writer_begin(w, f, tmp)) != LL_OK) goto done;
    const uint64_t data_start = conv_out_tell(out);
    uint64_t done_bytes = 0;
    if (o->progress) o->progress(o->progress_ud, 0, total);
    write_behind wb;
    if ((st = wb_start(&wb, w, f, tmp)) != LL_OK) goto done;
    read_ahead ra;
    int ra_on = (st = ra_start(&ra, cs, &m->hp)) == LL_OK; /* on failure: the loop is skipped, the writer joined */
    int cur = 0; /* which half of buf the pool fills next */
    int sc = 0;  /* which slot holds the source of the chunk quantized next */
    for (int i = 0; i < p.n && st == LL_OK; i++) {
        const out_tensor *t = &p.t[i];
        size_t rb = quant_row_bytes(t->type, t->cols);
        int64_t per = LL_MAX(1, (int64_t)(chunk / rb));
        uint64_t t_start = data_start + gguf_writer_data_offset(w, i);
        chunk_job j = {t, &m->hp, NULL, 0, 0, NULL, scratch, 0};
        for (int64_t r = 0; r < t->rows && st == LL_OK; r += per) {
            if (o->cancel && *o->cancel) { st = ll_err(LL_ERR_CANCELLED, "convert: interrupted; %s not written", dst); break; }
            j.r0 = r;
            j.nr = LL_MIN(per, t->rows - r);
            j.out = buf + (size_t)cur * half + (t_start + (uint64_t)r * rb) % CONV_IO_ALIGN;
            atomic_store_explicit(&j.next, 0, memory_order_relaxed); /* ll_pool_run publishes it */
            /* this chunk's source is read (the read-ahead thread had it; the first chunk is read
             * here), start the next one's */
            ra_wait_idle(&ra);
            src_slot *sl = &slots[sc];
            if (sl->t != t || sl->r0 != r || sl->nr != j.nr) load_chunk(cs, sl, &m->hp, t, r, j.nr);
            if (sl->st != LL_OK) { st = ll_err(sl->st, "%s", sl->msg); break; }
            read_direct += sl->bytes;
            if (r + per < t->rows) ra_submit(&ra, &slots[sc ^ 1], t, r + per, LL_MIN(per, t->rows - r - per));
            else if (i + 1 < p.n) {
                const out_tensor *tn = &p.t[i + 1];
                ra_submit(&ra, &slots[sc ^ 1], tn, 0, LL_MIN(tn->rows, LL_MAX(1, (int64_t)(chunk / quant_row_bytes(tn->type, tn->cols)))));
            }
            j.src = sl;
            ll_pool_run(pool, chunk_worker, &j);
            if (!t->f32 && !sl->direct) drop_rows(t, r, j.nr); /* the chunk holds its own copy now */
            sc ^= 1;
            st = wb_submit(&wb, j.out, rb * (size_t)j.nr);
            cur ^= 1;
            uint64_t sb_ = t->src_bytes * (uint64_t)j.nr / (uint64_t)t->rows;
            done_bytes += sb_;
            if (o->progress) o->progress(o->progress_ud, done_bytes, total);
        }
    }
    if (ra_on) ra_finish(&ra);
    {
        ll_status wst = wb_finish(&wb); /* always joined, also after an error or a cancel */
        if (st == LL_OK) st = wst;
    }
    if (st == LL_OK) st = gguf_writer_end(w, f, tmp);
    if (st == LL_OK) st = conv_out_finish(out); /* the staged tail, fsync */
    {
        uint64_t sz = conv_out_tell(out), wd = conv_out_direct_bytes(out);
        conv_out_close(out);
        out = NULL;
        f = NULL;
        if (st == LL_OK && rename(tmp, dst) != 0) st = ll_err(LL_ERR_IO, "%s: cannot rename to %s: %s", tmp, dst, strerror(errno));
        if (st == LL_OK) {
            tmp[0] = '\0'; /* nothing to clean up */
            if (stats) {
                stats->src_bytes = total;
                stats->out_bytes = (uint64_t)sz;
                stats->n_tensors = p.n;
                stats->seconds = ll_time_sec() - t0;
                stats->read_direct = read_direct;
                stats->written_direct = wd;
            }
        }
    }
done:
    conv_out_close(out);
    conv_src_close(cs);
    for (int k = 0; k < 2; k++) {
        ll_free(slots[k].buf_raw);
        ll_free(slots[k].vec);
        ll_free(slots[k].base);
        ll_free(slots[k].lo);
        ll_free(slots[k].hi);
        ll_free(slots[k].off);
        ll_free(slots[k].file);
    }
    if (tmp && tmp[0] && st != LL_OK) remove(tmp);
    ll_free(tmp);
    ll_free(buf_raw);
    ll_free(scratch);
    ll_pool_free(pool);
    gguf_writer_free(w);
    ll_free(p.t);
    fmt_arena_free(p.arena);
    qwen_model_free(m);
    return st;
}
