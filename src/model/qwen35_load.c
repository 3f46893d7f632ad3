/*
 * qwen35_load.c — qwen_model_load: HF safetensors (nested `model.language_model.*` or flat
 * `model.*`), MLX affine 4/8-bit directories and llama.cpp `qwen35moe` GGUF files, converted to
 * the canonical form of qwen35.h. No compute here: matrices stay views into the mapped files
 * (MLX weights are repacked into self-contained LL_TYPE_MLX4/8 blocks); only small tensors
 * (norm gains, GDN vectors, conv weights) are converted to fp32 copies in the model's arena.
 *
 * Naming sources:
 *  - HF: transformers `modeling_qwen3_5_moe.py` (see shared/reference/qwen35-moe-spec.md §2).
 *  - MLX: mlx-lm `mlx_lm/models/qwen3_5.py` / `qwen3_5_moe.py` (`Model.sanitize`): keys are
 *    renamed `model.language_model.` → `language_model.model.`, fused experts are split into
 *    `mlp.switch_mlp.{gate,up,down}_proj` stacks [E, out, in], `lm_head` becomes
 *    `language_model.lm_head`, conv1d is moved to [C, K, 1] and the zero-centred norms get +1
 *    baked in (`TextModel.sanitize`, norm_keys). `quant_predicate` quantizes `mlp.gate` and
 *    `shared_expert_gate` at 8 bits, group 64; the rest uses the default bits. Quantized
 *    modules store `X.weight` (U32, LSB-first packed codes), `X.scales` and `X.biases`.
 *  - GGUF: llama.cpp `src/llama-arch.cpp` (LLM_TENSOR_NAMES, LLM_KV_NAMES),
 *    `src/models/qwen35moe.cpp` (load_arch_hparams / load_arch_tensors: shapes in ggml ne order,
 *    `blk.N.ssm_a` without suffix, `ssm_dt.bias`, 1-D `ffn_gate_inp_shexp`, optional fused
 *    `attn_qkv` / `ffn_gate_up_exps`, MTP blocks appended after the main stack counted by
 *    `nextn_predict_layers`) and the converter `conversion/qwen.py` (`Qwen3NextModel`: norms +1
 *    except linear_attn.norm, ssm_a = -exp(A_log), conv1d squeezed;
 *    `_LinearAttentionVReorderBase`: V heads reordered from grouped to tiled order, so
 *    gdn_v_tiled = 1).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "format/arena.h"
#include "format/hfconfig.h"
#include "format/model_file.h"
#include "qwen35.h"

typedef enum { SRC_HF, SRC_MLX, SRC_GGUF } src_kind;

typedef struct lctx {
    qwen_model *m;
    qwen_model_file *f;
    const char *src;          /* path for messages */
    src_kind kind;
    uint8_t *used;            /* [n_tensors] marks (index into st.by_name / gguf by_name) */
    const char *pfx;          /* text-stack prefix (safetensors) */
    hf_quant q;
    int norms_shifted;        /* checkpoint already stores 1 + w */
} lctx;

/* A stack of matrices [n_outer, rows, cols] of one type, contiguous rows. */
typedef struct mstack {
    ll_type type;
    const uint8_t *data;
    size_t row_bytes;
    const char *name;
} mstack;

static void *arena(lctx *c, size_t n) { return fmt_arena_alloc(&c->m->owned, n); }

/* ---------------------------------------------------------------- tensor lookup */

static int64_t lookup_index(const lctx *c, const char *name) {
    if (c->f->kind == QWEN_FILE_SAFETENSORS) return st_set_lookup(&c->f->st, name);
    const gguf_file *g = c->f->gguf;
    int64_t lo = 0, hi = g->n_tensors - 1;
    while (lo <= hi) {
        int64_t mid = (lo + hi) / 2;
        int r = strcmp(g->by_name[mid]->name, name);
        if (r == 0) return mid;
        if (r < 0) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
}

static const ll_tensor *tensor_at(const lctx *c, int64_t i) {
    return c->f->kind == QWEN_FILE_SAFETENSORS ? c->f->st.by_name[i] : c->f->gguf->by_name[i];
}

static const ll_tensor *find(lctx *c, const char *name) {
    int64_t i = lookup_index(c, name);
    if (i < 0) return NULL;
    c->used[i] = 1;
    return tensor_at(c, i);
}

/* The file that holds tensor t (the shard, for sharded checkpoints), for messages. */
static const char *file_of(const lctx *c, const ll_tensor *t) {
    if (c->f->kind != QWEN_FILE_SAFETENSORS) return c->src;
    int64_t i = lookup_index(c, t->name);
    return i < 0 ? c->src : st_set_file_of(&c->f->st, i);
}

static ll_status missing(const lctx *c, const char *name, const int64_t *shape, int nd) {
    char sb[96];
    return ll_err(LL_ERR_FORMAT, "%s: missing tensor '%s' (expected shape %s)", c->src, name, ll_shape_str(shape, nd, sb, sizeof(sb)));
}

static ll_status bad_shape(const lctx *c, const ll_tensor *t, const int64_t *shape, int nd) {
    char a[96], b[96];
    return ll_err(LL_ERR_FORMAT, "%s: tensor '%s' has shape %s, expected %s", file_of(c, t), t->name, ll_shape_str(t->shape, t->n_dims, a, sizeof(a)),
                  ll_shape_str(shape, nd, b, sizeof(b)));
}

static int shape_is(const ll_tensor *t, const int64_t *shape, int nd) {
    if (t->n_dims != nd) return 0;
    for (int i = 0; i < nd; i++)
        if (t->shape[i] != shape[i]) return 0;
    return 1;
}

/* ---------------------------------------------------------------- small tensors → fp32 */

static ll_status to_f32(lctx *c, const ll_tensor *t, int64_t n, int add_one, float **out) {
    if (t->type != LL_TYPE_F32 && t->type != LL_TYPE_BF16 && t->type != LL_TYPE_F16)
        return ll_err(LL_ERR_FORMAT, "%s: tensor '%s' has type %s (a float type expected)", file_of(c, t), t->name, quant_type_name(t->type));
    float *d = arena(c, (size_t)n * sizeof(float));
    if (!d) return ll_err(LL_ERR_OOM, "%s: out of memory converting '%s'", file_of(c, t), t->name);
    const uint8_t *s = t->data;
    for (int64_t i = 0; i < n; i++) {
        float v;
        if (t->type == LL_TYPE_F32) memcpy(&v, s + 4 * i, 4);
        else {
            uint16_t h;
            memcpy(&h, s + 2 * i, 2);
            v = t->type == LL_TYPE_BF16 ? ll_bf16_to_f32(h) : ll_f16_to_f32(h);
        }
        d[i] = add_one ? 1.0f + v : v;
    }
    *out = d;
    return LL_OK;
}

/* A 1-D vector of n floats. */
static ll_status get_vec(lctx *c, const char *name, int64_t n, int add_one, float **out) {
    const ll_tensor *t = find(c, name);
    int64_t shape[1] = {n};
    if (!t) return missing(c, name, shape, 1);
    if (!shape_is(t, shape, 1)) return bad_shape(c, t, shape, 1);
    return to_f32(c, t, n, add_one, out);
}

/* A zero-centred norm gain: stored as w (HF) or 1 + w (MLX, GGUF); canonical form is 1 + w. */
static ll_status get_norm(lctx *c, const char *name, int64_t n, float **out) { return get_vec(c, name, n, !c->norms_shifted, out); }

/* ---------------------------------------------------------------- matrices */

static ll_status check_weight_type(const lctx *c, const ll_tensor *t, int64_t cols) {
    if (!quant_type_is_weight(t->type))
        return ll_err(LL_ERR_FORMAT, "%s: tensor '%s' has type %s, which is not a weight type", file_of(c, t), t->name, quant_type_name(t->type));
    if (cols % quant_block_elems(t->type) != 0)
        return ll_err(LL_ERR_FORMAT, "%s: tensor '%s': row length %lld is not a multiple of %s's block of %lld", file_of(c, t), t->name,
                      (long long)cols, quant_type_name(t->type), (long long)quant_block_elems(t->type));
    return LL_OK;
}

/* MLX affine: `wname` (U32 packed codes [outer.., rows, cols*bits/32]) with `.scales`/`.biases`
 * ([outer.., rows, cols/group]) → LL_TYPE_MLX4/8 blocks in the arena. */
static ll_status mlx_repack(lctx *c, const ll_tensor *w, int64_t outer, int64_t rows, int64_t cols, mstack *out) {
    size_t nl = strlen(w->name);
    if (nl < 7 || strcmp(w->name + nl - 7, ".weight") != 0)
        return ll_err(LL_ERR_FORMAT, "%s: tensor '%s' is U32 (MLX-quantized) but not named X.weight", file_of(c, w), w->name);
    char module[512], sname[512 + 8], bname[512 + 8];
    if (nl - 7 >= sizeof(module)) return ll_err(LL_ERR_FORMAT, "%s: tensor name '%s' is too long", file_of(c, w), w->name);
    memcpy(module, w->name, nl - 7);
    module[nl - 7] = '\0';
    snprintf(sname, sizeof(sname), "%s.scales", module);
    snprintf(bname, sizeof(bname), "%s.biases", module);
    int nd = outer > 1 ? 3 : 2;
    int64_t wl = w->shape[w->n_dims - 1];
    if (w->n_dims != nd || (nd == 3 && (w->shape[0] != outer || w->shape[1] != rows)) || (nd == 2 && w->shape[0] != rows) || wl <= 0 ||
        (wl * 32) % cols != 0) {
        int64_t shp[3] = {outer, rows, cols / 8};
        return bad_shape(c, w, nd == 3 ? shp : shp + 1, nd);
    }
    int bits = (int)(wl * 32 / cols);
    const ll_tensor *s = find(c, sname), *b = find(c, bname);
    int64_t sshape[3] = {outer, rows, cols / LL_QK_MLX};
    if (!s) return missing(c, sname, nd == 3 ? sshape : sshape + 1, nd);
    if (!b) return missing(c, bname, nd == 3 ? sshape : sshape + 1, nd);
    int64_t ng = s->shape[s->n_dims - 1];
    if (ng <= 0 || cols % ng != 0) return bad_shape(c, s, nd == 3 ? sshape : sshape + 1, nd);
    int gs = (int)(cols / ng);
    int64_t gshape[3] = {outer, rows, ng};
    if (!shape_is(s, nd == 3 ? gshape : gshape + 1, nd)) return bad_shape(c, s, nd == 3 ? gshape : gshape + 1, nd);
    if (!shape_is(b, nd == 3 ? gshape : gshape + 1, nd)) return bad_shape(c, b, nd == 3 ? gshape : gshape + 1, nd);
    const hf_quant_entry *qe = hf_quant_find(&c->q, module);
    if (qe && !qe->quantized)
        return ll_err(LL_ERR_FORMAT, "%s: tensor '%s' is quantized but config.json says %s is not", file_of(c, w), w->name, module);
    int cbits = qe ? qe->bits : c->q.bits, cgs = qe ? qe->group_size : c->q.group_size;
    if (!c->q.present)
        return ll_err(LL_ERR_FORMAT, "%s: tensor '%s' is MLX-quantized (U32) but config.json has no \"quantization\"", file_of(c, w), w->name);
    if (bits != cbits || gs != cgs)
        return ll_err(LL_ERR_FORMAT, "%s: tensor '%s' is packed as %d-bit, group %d, but config.json says %d-bit, group %d", file_of(c, w), w->name,
                      bits, gs, cbits, cgs);
    if ((bits != 4 && bits != 8) || gs != LL_QK_MLX)
        return ll_err(LL_ERR_UNSUPPORTED, "%s: tensor '%s': MLX %d-bit with group size %d is not supported (4 or 8 bits, group 64)", c->src,
                      w->name, bits, gs);
    if (s->type != b->type || (s->type != LL_TYPE_BF16 && s->type != LL_TYPE_F16 && s->type != LL_TYPE_F32))
        return ll_err(LL_ERR_FORMAT, "%s: tensors '%s'/'%s' have types %s/%s (float expected)", c->src, sname, bname, quant_type_name(s->type),
                      quant_type_name(b->type));
    ll_type ty = bits == 4 ? LL_TYPE_MLX4 : LL_TYPE_MLX8;
    size_t bb = quant_block_bytes(ty), qbytes = (size_t)LL_QK_MLX * bits / 8, row_bytes = (size_t)ng * bb;
    int64_t nrows = outer * rows;
    uint8_t *dst = arena(c, (size_t)nrows * row_bytes);
    if (!dst) return ll_err(LL_ERR_OOM, "%s: out of memory repacking '%s'", file_of(c, w), w->name);
    const uint8_t *wq = w->data, *sp = s->data, *bp = b->data;
    size_t esz = quant_block_bytes(s->type);
    for (int64_t r = 0; r < nrows; r++) {
        for (int64_t g = 0; g < ng; g++) {
            uint8_t *blk = dst + (size_t)r * row_bytes + (size_t)g * bb;
            uint16_t sc[2];
            const uint8_t *src2[2] = {sp + ((size_t)r * ng + g) * esz, bp + ((size_t)r * ng + g) * esz};
            for (int k = 0; k < 2; k++) {
                if (s->type == LL_TYPE_BF16) memcpy(&sc[k], src2[k], 2);
                else {
                    float v;
                    if (s->type == LL_TYPE_F32) memcpy(&v, src2[k], 4);
                    else { uint16_t h; memcpy(&h, src2[k], 2); v = ll_f16_to_f32(h); }
                    sc[k] = ll_f32_to_bf16(v);
                }
            }
            memcpy(blk, &sc[0], 2);
            memcpy(blk + 2, &sc[1], 2);
            /* MLX packs codes LSB-first into little-endian u32 words, so the byte stream is
             * already the block's qs order (see quant.h) */
            memcpy(blk + 4, wq + (size_t)r * (size_t)wl * 4 + (size_t)g * qbytes, qbytes);
        }
    }
    out->type = ty;
    out->data = dst;
    out->row_bytes = row_bytes;
    out->name = w->name;
    return LL_OK;
}

/* A stack [outer, rows, cols] (outer 1: a plain 2-D matrix; 1-D [cols] accepted when rows == 1). */
static ll_status get_stack(lctx *c, const char *name, int64_t outer, int64_t rows, int64_t cols, mstack *out, int required, int *found) {
    int nd = outer > 1 ? 3 : 2;
    int64_t shape[3] = {outer, rows, cols};
    const int64_t *sp = nd == 3 ? shape : shape + 1;
    const ll_tensor *t = find(c, name);
    if (found) *found = t != NULL;
    if (!t) return required ? missing(c, name, sp, nd) : LL_OK;
    if (t->type == LL_TYPE_U32 && c->kind == SRC_MLX) return mlx_repack(c, t, outer, rows, cols, out);
    int ok = shape_is(t, sp, nd) || (nd == 2 && rows == 1 && t->n_dims == 1 && t->shape[0] == cols);
    if (!ok) return bad_shape(c, t, sp, nd);
    LL_TRY(check_weight_type(c, t, cols));
    out->type = t->type;
    out->data = t->data;
    out->row_bytes = quant_row_bytes(t->type, cols);
    out->name = t->name;
    return LL_OK;
}

static ll_mat stack_view(const mstack *s, int64_t row0, int64_t rows, int64_t cols) {
    ll_mat m = {s->type, rows, cols, s->row_bytes, s->data + (size_t)row0 * s->row_bytes, s->name};
    return m;
}

static ll_status get_mat(lctx *c, const char *name, int64_t rows, int64_t cols, ll_mat *out) {
    mstack s;
    LL_TRY(get_stack(c, name, 1, rows, cols, &s, 1, NULL));
    *out = stack_view(&s, 0, rows, cols);
    return LL_OK;
}

static ll_status alloc_experts(lctx *c, qwen_layer *L, int64_t E) {
    L->exp_gate = arena(c, (size_t)E * sizeof(ll_mat));
    L->exp_up = arena(c, (size_t)E * sizeof(ll_mat));
    L->exp_down = arena(c, (size_t)E * sizeof(ll_mat));
    if (!L->exp_gate || !L->exp_up || !L->exp_down) return ll_err(LL_ERR_OOM, "%s: out of memory", c->src);
    return LL_OK;
}

/* ---------------------------------------------------------------- HF / MLX layers */

#define NAME(buf, ...) snprintf(buf, sizeof(buf), __VA_ARGS__)

static ll_status load_st_experts(lctx *c, int il, qwen_layer *L) {
    const qwen_hparams *hp = &c->m->hp;
    int64_t E = hp->n_expert, FF = hp->n_ff_exp, H = hp->n_embd;
    char n1[256], n2[256], n3[256];
    LL_TRY(alloc_experts(c, L, E));
    mstack gu, g, u, d;
    int found;
    if (c->kind == SRC_MLX) {
        NAME(n1, "%slayers.%d.mlp.switch_mlp.gate_proj.weight", c->pfx, il);
        NAME(n2, "%slayers.%d.mlp.switch_mlp.up_proj.weight", c->pfx, il);
        NAME(n3, "%slayers.%d.mlp.switch_mlp.down_proj.weight", c->pfx, il);
        LL_TRY(get_stack(c, n1, E, FF, H, &g, 1, NULL));
        LL_TRY(get_stack(c, n2, E, FF, H, &u, 1, NULL));
        LL_TRY(get_stack(c, n3, E, H, FF, &d, 1, NULL));
        for (int64_t e = 0; e < E; e++) {
            L->exp_gate[e] = stack_view(&g, e * FF, FF, H);
            L->exp_up[e] = stack_view(&u, e * FF, FF, H);
            L->exp_down[e] = stack_view(&d, e * H, H, FF);
        }
        return LL_OK;
    }
    /* fused [E, 2FF, H] (rows 0..FF-1 gate, FF..2FF-1 up) + [E, H, FF], or per-expert tensors */
    NAME(n1, "%slayers.%d.mlp.experts.gate_up_proj", c->pfx, il);
    LL_TRY(get_stack(c, n1, E, 2 * FF, H, &gu, 0, &found));
    if (found) {
        NAME(n3, "%slayers.%d.mlp.experts.down_proj", c->pfx, il);
        LL_TRY(get_stack(c, n3, E, H, FF, &d, 1, NULL));
        for (int64_t e = 0; e < E; e++) {
            L->exp_gate[e] = stack_view(&gu, e * 2 * FF, FF, H);
            L->exp_up[e] = stack_view(&gu, e * 2 * FF + FF, FF, H);
            L->exp_down[e] = stack_view(&d, e * H, H, FF);
        }
        return LL_OK;
    }
    NAME(n2, "%slayers.%d.mlp.experts.0.gate_proj.weight", c->pfx, il);
    if (lookup_index(c, n2) < 0) {
        int64_t shape[3] = {E, 2 * FF, H};
        return ll_err(LL_ERR_FORMAT, "%s: missing tensor '%s' (expected shape %s) or per-expert '%slayers.%d.mlp.experts.{e}.gate_proj.weight'",
                      c->src, n1, ll_shape_str(shape, 3, n3, sizeof(n3)), c->pfx, il);
    }
    for (int64_t e = 0; e < E; e++) {
        NAME(n1, "%slayers.%d.mlp.experts.%lld.gate_proj.weight", c->pfx, il, (long long)e);
        NAME(n2, "%slayers.%d.mlp.experts.%lld.up_proj.weight", c->pfx, il, (long long)e);
        NAME(n3, "%slayers.%d.mlp.experts.%lld.down_proj.weight", c->pfx, il, (long long)e);
        LL_TRY(get_mat(c, n1, FF, H, &L->exp_gate[e]));
        LL_TRY(get_mat(c, n2, FF, H, &L->exp_up[e]));
        LL_TRY(get_mat(c, n3, H, FF, &L->exp_down[e]));
    }
    return LL_OK;
}

/* conv1d: HF [C, 1, K], MLX [C, K, 1], GGUF [C, K]; all the same bytes → fp32 [C][K]. */
static ll_status get_conv(lctx *c, const char *name, float **out) {
    const qwen_hparams *hp = &c->m->hp;
    int64_t C = qwen_gdn_conv_dim(hp), K = hp->gdn_conv_k;
    const ll_tensor *t = find(c, name);
    int64_t s_hf[3] = {C, 1, K}, s_mlx[3] = {C, K, 1}, s_2d[2] = {C, K};
    const int64_t *want = c->kind == SRC_HF ? s_hf : c->kind == SRC_MLX ? s_mlx : s_2d;
    int nd = c->kind == SRC_GGUF ? 2 : 3;
    if (!t) return missing(c, name, want, nd);
    if (!shape_is(t, s_hf, 3) && !shape_is(t, s_mlx, 3) && !shape_is(t, s_2d, 2)) return bad_shape(c, t, want, nd);
    return to_f32(c, t, C * K, 0, out);
}

static ll_status load_st_layer(lctx *c, int il) {
    const qwen_hparams *hp = &c->m->hp;
    qwen_layer *L = &c->m->layers[il];
    int64_t H = hp->n_embd;
    char nm[256];
    const char *p = c->pfx;
    NAME(nm, "%slayers.%d.input_layernorm.weight", p, il);
    LL_TRY(get_norm(c, nm, H, &L->attn_norm));
    NAME(nm, "%slayers.%d.post_attention_layernorm.weight", p, il);
    LL_TRY(get_norm(c, nm, H, &L->ffn_norm));
    if (hp->is_attn[il]) {
        int64_t NH = hp->n_head, NKV = hp->n_head_kv, HD = hp->head_dim;
        NAME(nm, "%slayers.%d.self_attn.q_proj.weight", p, il);
        LL_TRY(get_mat(c, nm, NH * 2 * HD, H, &L->wq));
        NAME(nm, "%slayers.%d.self_attn.k_proj.weight", p, il);
        LL_TRY(get_mat(c, nm, NKV * HD, H, &L->wk));
        NAME(nm, "%slayers.%d.self_attn.v_proj.weight", p, il);
        LL_TRY(get_mat(c, nm, NKV * HD, H, &L->wv));
        NAME(nm, "%slayers.%d.self_attn.o_proj.weight", p, il);
        LL_TRY(get_mat(c, nm, H, NH * HD, &L->wo));
        NAME(nm, "%slayers.%d.self_attn.q_norm.weight", p, il);
        LL_TRY(get_norm(c, nm, HD, &L->q_norm));
        NAME(nm, "%slayers.%d.self_attn.k_norm.weight", p, il);
        LL_TRY(get_norm(c, nm, HD, &L->k_norm));
    } else {
        int64_t HV = hp->gdn_n_v_heads, VD = qwen_gdn_v_dim(hp);
        NAME(nm, "%slayers.%d.linear_attn.in_proj_qkv.weight", p, il);
        LL_TRY(get_mat(c, nm, qwen_gdn_conv_dim(hp), H, &L->wqkv));
        NAME(nm, "%slayers.%d.linear_attn.in_proj_z.weight", p, il);
        LL_TRY(get_mat(c, nm, VD, H, &L->wz));
        NAME(nm, "%slayers.%d.linear_attn.in_proj_b.weight", p, il);
        LL_TRY(get_mat(c, nm, HV, H, &L->wb));
        NAME(nm, "%slayers.%d.linear_attn.in_proj_a.weight", p, il);
        LL_TRY(get_mat(c, nm, HV, H, &L->wa));
        NAME(nm, "%slayers.%d.linear_attn.conv1d.weight", p, il);
        LL_TRY(get_conv(c, nm, &L->conv));
        NAME(nm, "%slayers.%d.linear_attn.dt_bias", p, il);
        LL_TRY(get_vec(c, nm, HV, 0, &L->dt_bias));
        NAME(nm, "%slayers.%d.linear_attn.A_log", p, il);
        LL_TRY(get_vec(c, nm, HV, 0, &L->ssm_a));
        for (int64_t h = 0; h < HV; h++) L->ssm_a[h] = -expf(L->ssm_a[h]);
        NAME(nm, "%slayers.%d.linear_attn.norm.weight", p, il);
        LL_TRY(get_vec(c, nm, hp->gdn_v_dim, 0, &L->gdn_norm)); /* plain gain: never shifted */
        NAME(nm, "%slayers.%d.linear_attn.out_proj.weight", p, il);
        LL_TRY(get_mat(c, nm, H, VD, &L->wout));
    }
    NAME(nm, "%slayers.%d.mlp.gate.weight", p, il);
    LL_TRY(get_mat(c, nm, hp->n_expert, H, &L->router));
    LL_TRY(load_st_experts(c, il, L));
    if (hp->n_ff_shexp > 0) {
        int64_t FS = hp->n_ff_shexp;
        NAME(nm, "%slayers.%d.mlp.shared_expert.gate_proj.weight", p, il);
        LL_TRY(get_mat(c, nm, FS, H, &L->sh_gate));
        NAME(nm, "%slayers.%d.mlp.shared_expert.up_proj.weight", p, il);
        LL_TRY(get_mat(c, nm, FS, H, &L->sh_up));
        NAME(nm, "%slayers.%d.mlp.shared_expert.down_proj.weight", p, il);
        LL_TRY(get_mat(c, nm, H, FS, &L->sh_down));
        NAME(nm, "%slayers.%d.mlp.shared_expert_gate.weight", p, il);
        LL_TRY(get_mat(c, nm, 1, H, &L->sh_gate_inp));
    }
    return LL_OK;
}

static int has_prefix(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

static ll_status load_safetensors(lctx *c) {
    qwen_model *m = c->m;
    const qwen_hparams *hp = &m->hp;
    static const char *pfxs[] = {"model.language_model.", "language_model.model.", "model."};
    char nm[256];
    c->pfx = NULL;
    for (size_t i = 0; i < LL_ARRAY_LEN(pfxs) && !c->pfx; i++) {
        NAME(nm, "%sembed_tokens.weight", pfxs[i]);
        if (lookup_index(c, nm) >= 0) c->pfx = pfxs[i];
    }
    if (!c->pfx)
        return ll_err(LL_ERR_FORMAT, "%s: missing tensor 'model.language_model.embed_tokens.weight' (nor 'model.embed_tokens.weight' or "
                                     "'language_model.model.embed_tokens.weight')", c->src);
    int mlx_names = !strcmp(c->pfx, "language_model.model.");
    c->kind = (c->q.present || mlx_names) ? SRC_MLX : SRC_HF;
    c->norms_shifted = mlx_names; /* mlx-lm's sanitize bakes +1 into the saved norms */
    int64_t V = hp->n_vocab, H = hp->n_embd;
    NAME(nm, "%sembed_tokens.weight", c->pfx);
    LL_TRY(get_mat(c, nm, V, H, &m->tok_embd));
    NAME(nm, "%snorm.weight", c->pfx);
    LL_TRY(get_norm(c, nm, H, &m->out_norm));
    const char *head = mlx_names ? "language_model.lm_head.weight" : "lm_head.weight";
    if (hp->tie_embeddings) {
        m->lm_head = m->tok_embd;
        find(c, head); /* a redundant copy of a tied head is ignored, as transformers does */
    } else {
        LL_TRY(get_mat(c, head, V, H, &m->lm_head));
    }
    for (int il = 0; il < hp->n_layer; il++) {
        ll_progress("loading", (double)il / hp->n_layer);
        LL_TRY(load_st_layer(c, il));
    }
    ll_progress("loading", 1.0);
    return LL_OK;
}

/* ---------------------------------------------------------------- GGUF */

#define ARCH "qwen35moe"

static ll_status gg_u32(lctx *c, const char *key, int32_t *out, int required, int32_t def) {
    const gguf_file *g = c->f->gguf;
    char k[128];
    NAME(k, ARCH ".%s", key);
    if (!gguf_has(g, k)) {
        if (required) return ll_err(LL_ERR_FORMAT, "%s: metadata key '%s' is missing", c->src, k);
        *out = def;
        return LL_OK;
    }
    uint32_t v;
    LL_TRY(gguf_get_u32(g, k, &v));
    if (v > INT32_MAX) return ll_err(LL_ERR_FORMAT, "%s: metadata key '%s' = %u is out of range", c->src, k, v);
    *out = (int32_t)v;
    return LL_OK;
}

static ll_status gg_f32(lctx *c, const char *key, float *out, int required, float def) {
    const gguf_file *g = c->f->gguf;
    char k[128];
    NAME(k, ARCH ".%s", key);
    if (!gguf_has(g, k)) {
        if (required) return ll_err(LL_ERR_FORMAT, "%s: metadata key '%s' is missing", c->src, k);
        *out = def;
        return LL_OK;
    }
    return gguf_get_f32(g, k, out);
}

static ll_status gguf_hparams(lctx *c) {
    const gguf_file *g = c->f->gguf;
    qwen_hparams *hp = &c->m->hp;
    const char *arch;
    if (!gguf_has(g, "general.architecture")) return ll_err(LL_ERR_FORMAT, "%s: metadata key 'general.architecture' is missing", c->src);
    LL_TRY(gguf_get_str(g, "general.architecture", &arch));
    if (strcmp(arch, ARCH) != 0) return ll_err(LL_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported (" ARCH ")", c->src, arch);
    int32_t n_block, nextn, inner, interval;
    LL_TRY(gg_u32(c, "block_count", &n_block, 1, 0));
    LL_TRY(gg_u32(c, "nextn_predict_layers", &nextn, 0, 0));
    if (nextn < 0 || nextn >= n_block)
        return ll_err(LL_ERR_FORMAT, "%s: " ARCH ".nextn_predict_layers = %d is not below block_count = %d", c->src, nextn, n_block);
    hp->n_layer = n_block - nextn; /* MTP blocks are appended after the main stack */
    LL_TRY(gg_u32(c, "embedding_length", &hp->n_embd, 1, 0));
    LL_TRY(gg_u32(c, "attention.head_count", &hp->n_head, 1, 0));
    LL_TRY(gg_u32(c, "attention.head_count_kv", &hp->n_head_kv, 1, 0));
    LL_TRY(gg_u32(c, "attention.key_length", &hp->head_dim, 0, hp->n_head > 0 ? hp->n_embd / hp->n_head : 0));
    int32_t vlen;
    LL_TRY(gg_u32(c, "attention.value_length", &vlen, 0, hp->head_dim));
    if (vlen != hp->head_dim)
        return ll_err(LL_ERR_FORMAT, "%s: " ARCH ".attention.value_length = %d differs from key_length = %d", c->src, vlen, hp->head_dim);
    LL_TRY(gg_u32(c, "rope.dimension_count", &hp->n_rot, 1, 0));
    LL_TRY(gg_f32(c, "rope.freq_base", &hp->rope_theta, 1, 0));
    LL_TRY(gg_u32(c, "expert_count", &hp->n_expert, 1, 0));
    LL_TRY(gg_u32(c, "expert_used_count", &hp->n_expert_used, 1, 0));
    LL_TRY(gg_u32(c, "expert_feed_forward_length", &hp->n_ff_exp, 1, 0));
    LL_TRY(gg_u32(c, "expert_shared_feed_forward_length", &hp->n_ff_shexp, 0, 0));
    LL_TRY(gg_u32(c, "ssm.conv_kernel", &hp->gdn_conv_k, 1, 0));
    LL_TRY(gg_u32(c, "ssm.state_size", &hp->gdn_k_dim, 1, 0));
    hp->gdn_v_dim = hp->gdn_k_dim; /* llama.cpp: head_k_dim = head_v_dim = ssm_d_state */
    LL_TRY(gg_u32(c, "ssm.group_count", &hp->gdn_n_k_heads, 1, 0));
    LL_TRY(gg_u32(c, "ssm.time_step_rank", &hp->gdn_n_v_heads, 1, 0));
    LL_TRY(gg_u32(c, "ssm.inner_size", &inner, 1, 0));
    if ((int64_t)inner != (int64_t)hp->gdn_n_v_heads * hp->gdn_v_dim)
        return ll_err(LL_ERR_FORMAT, "%s: " ARCH ".ssm.inner_size = %d != time_step_rank %d × state_size %d", c->src, inner, hp->gdn_n_v_heads,
                      hp->gdn_v_dim);
    LL_TRY(gg_f32(c, "attention.layer_norm_rms_epsilon", &hp->rms_eps, 1, 0));
    LL_TRY(gg_u32(c, "context_length", &hp->n_ctx_train, 0, 32768));
    if (hp->n_layer <= 0 || hp->n_layer > QWEN_MAX_LAYERS)
        return ll_err(LL_ERR_UNSUPPORTED, "%s: " ARCH ".block_count = %d is out of range", c->src, n_block);
    const gguf_value *rl = NULL;
    if (gguf_has(g, ARCH ".attention.recurrent_layers")) {
        LL_TRY(gguf_get_arr(g, ARCH ".attention.recurrent_layers", &rl));
        if ((rl->arr_type != GGUF_TYPE_BOOL && rl->arr_type != GGUF_TYPE_UINT8) || rl->n < (uint64_t)hp->n_layer)
            return ll_err(LL_ERR_FORMAT, "%s: " ARCH ".attention.recurrent_layers is not a bool array of block_count entries", c->src);
        for (int i = 0; i < hp->n_layer; i++) hp->is_attn[i] = ((const uint8_t *)rl->arr)[i] == 0;
    } else {
        LL_TRY(gg_u32(c, "full_attention_interval", &interval, 0, 4));
        if (interval <= 0) return ll_err(LL_ERR_FORMAT, "%s: " ARCH ".full_attention_interval = %d is not positive", c->src, interval);
        for (int i = 0; i < hp->n_layer; i++) hp->is_attn[i] = (i + 1) % interval == 0;
    }
    hp->eos_token_id = -1;
    if (gguf_has(g, "tokenizer.ggml.eos_token_id")) {
        uint32_t e;
        LL_TRY(gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &e));
        hp->eos_token_id = (int32_t)e;
    }
    const ll_tensor *te = gguf_find_tensor(g, "token_embd.weight");
    if (!te || te->n_dims != 2) return ll_err(LL_ERR_FORMAT, "%s: missing tensor 'token_embd.weight' (2-D [n_vocab, n_embd])", c->src);
    if (te->shape[0] > INT32_MAX) return ll_err(LL_ERR_FORMAT, "%s: token_embd.weight has too many rows", c->src);
    hp->n_vocab = (int32_t)te->shape[0];
    hp->tie_embeddings = gguf_find_tensor(g, "output.weight") == NULL;
    hp->gdn_v_tiled = 1;
    return hfconfig_check(hp, c->src, ARCH " hparams: ");
}

static ll_status load_gguf_layer(lctx *c, int il) {
    const qwen_hparams *hp = &c->m->hp;
    qwen_layer *L = &c->m->layers[il];
    int64_t H = hp->n_embd, E = hp->n_expert, FF = hp->n_ff_exp;
    char nm[128], n2[128];
    NAME(nm, "blk.%d.attn_norm.weight", il);
    LL_TRY(get_vec(c, nm, H, 0, &L->attn_norm));
    NAME(nm, "blk.%d.post_attention_norm.weight", il);
    LL_TRY(get_vec(c, nm, H, 0, &L->ffn_norm));
    if (hp->is_attn[il]) {
        int64_t NH = hp->n_head, NKV = hp->n_head_kv, HD = hp->head_dim, q = NH * 2 * HD, kv = NKV * HD;
        NAME(nm, "blk.%d.attn_qkv.weight", il);
        if (lookup_index(c, nm) >= 0) { /* fused q|k|v rows */
            mstack s;
            LL_TRY(get_stack(c, nm, 1, q + 2 * kv, H, &s, 1, NULL));
            L->wq = stack_view(&s, 0, q, H);
            L->wk = stack_view(&s, q, kv, H);
            L->wv = stack_view(&s, q + kv, kv, H);
        } else {
            NAME(nm, "blk.%d.attn_q.weight", il);
            LL_TRY(get_mat(c, nm, q, H, &L->wq));
            NAME(nm, "blk.%d.attn_k.weight", il);
            LL_TRY(get_mat(c, nm, kv, H, &L->wk));
            NAME(nm, "blk.%d.attn_v.weight", il);
            LL_TRY(get_mat(c, nm, kv, H, &L->wv));
        }
        NAME(nm, "blk.%d.attn_output.weight", il);
        LL_TRY(get_mat(c, nm, H, NH * HD, &L->wo));
        NAME(nm, "blk.%d.attn_q_norm.weight", il);
        LL_TRY(get_vec(c, nm, HD, 0, &L->q_norm));
        NAME(nm, "blk.%d.attn_k_norm.weight", il);
        LL_TRY(get_vec(c, nm, HD, 0, &L->k_norm));
    } else {
        int64_t HV = hp->gdn_n_v_heads, VD = qwen_gdn_v_dim(hp);
        NAME(nm, "blk.%d.attn_qkv.weight", il);
        LL_TRY(get_mat(c, nm, qwen_gdn_conv_dim(hp), H, &L->wqkv));
        NAME(nm, "blk.%d.attn_gate.weight", il);
        LL_TRY(get_mat(c, nm, VD, H, &L->wz));
        NAME(nm, "blk.%d.ssm_beta.weight", il);
        LL_TRY(get_mat(c, nm, HV, H, &L->wb));
        NAME(nm, "blk.%d.ssm_alpha.weight", il);
        LL_TRY(get_mat(c, nm, HV, H, &L->wa));
        NAME(nm, "blk.%d.ssm_conv1d.weight", il);
        LL_TRY(get_conv(c, nm, &L->conv));
        NAME(nm, "blk.%d.ssm_dt.bias", il);
        LL_TRY(get_vec(c, nm, HV, 0, &L->dt_bias));
        NAME(nm, "blk.%d.ssm_a", il);
        LL_TRY(get_vec(c, nm, HV, 0, &L->ssm_a)); /* already -exp(A_log) */
        NAME(nm, "blk.%d.ssm_norm.weight", il);
        LL_TRY(get_vec(c, nm, hp->gdn_v_dim, 0, &L->gdn_norm));
        NAME(nm, "blk.%d.ssm_out.weight", il);
        LL_TRY(get_mat(c, nm, H, VD, &L->wout));
    }
    NAME(nm, "blk.%d.ffn_gate_inp.weight", il);
    LL_TRY(get_mat(c, nm, E, H, &L->router));
    LL_TRY(alloc_experts(c, L, E));
    mstack g, u, d;
    /* fused variant: ne {n_embd, 2*n_ff, n_expert} (llama-model.cpp create_tensor_gate_up_exps),
     * i.e. [E, 2FF, H] with the gate rows first, as in HF's gate_up_proj */
    NAME(nm, "blk.%d.ffn_gate_up_exps.weight", il);
    int fused = lookup_index(c, nm) >= 0;
    if (fused) LL_TRY(get_stack(c, nm, E, 2 * FF, H, &g, 1, NULL));
    else {
        NAME(nm, "blk.%d.ffn_gate_exps.weight", il);
        LL_TRY(get_stack(c, nm, E, FF, H, &g, 1, NULL));
        NAME(n2, "blk.%d.ffn_up_exps.weight", il);
        LL_TRY(get_stack(c, n2, E, FF, H, &u, 1, NULL));
    }
    NAME(nm, "blk.%d.ffn_down_exps.weight", il);
    LL_TRY(get_stack(c, nm, E, H, FF, &d, 1, NULL));
    for (int64_t e = 0; e < E; e++) {
        L->exp_gate[e] = fused ? stack_view(&g, e * 2 * FF, FF, H) : stack_view(&g, e * FF, FF, H);
        L->exp_up[e] = fused ? stack_view(&g, e * 2 * FF + FF, FF, H) : stack_view(&u, e * FF, FF, H);
        L->exp_down[e] = stack_view(&d, e * H, H, FF);
    }
    if (hp->n_ff_shexp > 0) {
        int64_t FS = hp->n_ff_shexp;
        NAME(nm, "blk.%d.ffn_gate_inp_shexp.weight", il);
        LL_TRY(get_mat(c, nm, 1, H, &L->sh_gate_inp));
        NAME(nm, "blk.%d.ffn_gate_shexp.weight", il);
        LL_TRY(get_mat(c, nm, FS, H, &L->sh_gate));
        NAME(nm, "blk.%d.ffn_up_shexp.weight", il);
        LL_TRY(get_mat(c, nm, FS, H, &L->sh_up));
        NAME(nm, "blk.%d.ffn_down_shexp.weight", il);
        LL_TRY(get_mat(c, nm, H, FS, &L->sh_down));
    }
    return LL_OK;
}

static ll_status load_gguf(lctx *c) {
    qwen_model *m = c->m;
    c->kind = SRC_GGUF;
    c->norms_shifted = 1;
    LL_TRY(gguf_hparams(c));
    const qwen_hparams *hp = &m->hp;
    LL_TRY(get_mat(c, "token_embd.weight", hp->n_vocab, hp->n_embd, &m->tok_embd));
    LL_TRY(get_vec(c, "output_norm.weight", hp->n_embd, 0, &m->out_norm));
    if (hp->tie_embeddings) m->lm_head = m->tok_embd;
    else LL_TRY(get_mat(c, "output.weight", hp->n_vocab, hp->n_embd, &m->lm_head));
    for (int il = 0; il < hp->n_layer; il++) {
        ll_progress("loading", (double)il / hp->n_layer);
        LL_TRY(load_gguf_layer(c, il));
    }
    ll_progress("loading", 1.0);
    return LL_OK;
}

/* ---------------------------------------------------------------- entry points */

/* Tensors a text engine skips on purpose. */
static int skippable(const lctx *c, const char *name) {
    if (c->kind == SRC_GGUF) {
        int blk;
        /* MTP blocks sit after the main stack */
        if (sscanf(name, "blk.%d.", &blk) == 1 && blk >= c->m->hp.n_layer) return 1;
        return 0;
    }
    return has_prefix(name, "model.visual.") || has_prefix(name, "mtp.") || has_prefix(name, "visual.") ||
           has_prefix(name, "language_model.mtp.") || has_prefix(name, "vision_tower.");
}

static ll_status check_unused(lctx *c) {
    for (int64_t i = 0; i < c->f->n_tensors; i++) {
        if (c->used[i]) continue;
        const ll_tensor *t = tensor_at(c, i);
        if (skippable(c, t->name)) continue;
        const char *file = c->f->kind == QWEN_FILE_SAFETENSORS ? st_set_file_of(&c->f->st, i) : c->src;
        return ll_err(LL_ERR_FORMAT, "%s: unexpected tensor '%s'", file, t->name);
    }
    return LL_OK;
}

static size_t mat_bytes(const ll_mat *m) { return m->data ? (size_t)m->rows * m->row_bytes : 0; }

static size_t model_weight_bytes(const qwen_model *m) {
    size_t n = mat_bytes(&m->tok_embd);
    if (!m->hp.tie_embeddings) n += mat_bytes(&m->lm_head);
    for (int il = 0; il < m->hp.n_layer; il++) {
        const qwen_layer *L = &m->layers[il];
        const ll_mat *ms[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->wqkv, &L->wz, &L->wb, &L->wa, &L->wout,
                              &L->router, &L->sh_gate, &L->sh_up, &L->sh_down, &L->sh_gate_inp};
        for (size_t k = 0; k < LL_ARRAY_LEN(ms); k++) n += mat_bytes(ms[k]);
        for (int e = 0; e < m->hp.n_expert; e++) n += mat_bytes(&L->exp_gate[e]) + mat_bytes(&L->exp_up[e]) + mat_bytes(&L->exp_down[e]);
    }
    return n;
}

static int file_is_gguf(const char *p) {
    FILE *fp = fopen(p, "rb");
    if (!fp) return 0;
    char mg[4] = {0};
    size_t n = fread(mg, 1, 4, fp);
    fclose(fp);
    return n == 4 && memcmp(mg, GGUF_MAGIC, 4) == 0;
}

void qwen_model_free(qwen_model *m) {
    if (!m) return;
    if (m->file) {
        st_set_close(&m->file->st);
        gguf_close(m->file->gguf);
        ll_free(m->file);
    }
    fmt_arena_free(m->owned);
    ll_free(m->path);
    ll_free(m->format_name);
    ll_free(m);
}

ll_status qwen_model_load(const char *path, qwen_model **out) {
    *out = NULL;
    qwen_model *m = ll_calloc(1, sizeof(*m));
    if (!m) return ll_err(LL_ERR_OOM, "%s: out of memory", path);
    lctx c = {0};
    c.m = m;
    c.src = path;
    ll_status st = LL_OK;
    char *cfg_path = NULL, *cfg_txt = NULL;
    if (!(m->path = ll_strdup(path)) || !(m->file = ll_calloc(1, sizeof(qwen_model_file)))) {
        st = ll_err(LL_ERR_OOM, "%s: out of memory", path);
        goto done;
    }
    qwen_model_file *f = m->file;
    c.f = f;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        st = ll_err(LL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        goto done;
    }
    int dir = S_ISDIR(sb.st_mode);
    if (!dir && file_is_gguf(path)) {
        f->kind = QWEN_FILE_GGUF;
        if ((st = gguf_open(&f->gguf, path)) != LL_OK) goto done;
        f->n_tensors = (int)f->gguf->n_tensors;
    } else {
        f->kind = QWEN_FILE_SAFETENSORS;
        /* config.json: inside the directory, or beside the .safetensors file */
        size_t n = strlen(path);
        cfg_path = ll_malloc(n + 16);
        if (!cfg_path) { st = ll_err(LL_ERR_OOM, "%s: out of memory", path); goto done; }
        if (dir) snprintf(cfg_path, n + 16, "%s/config.json", path);
        else {
            const char *sl = strrchr(path, '/');
            if (sl) snprintf(cfg_path, n + 16, "%.*s/config.json", (int)(sl - path), path);
            else snprintf(cfg_path, n + 16, "config.json");
        }
        size_t len;
        if ((st = ll_read_file(cfg_path, &cfg_txt, &len)) != LL_OK) goto done;
        if ((st = hfconfig_parse(cfg_txt, len, cfg_path, &m->hp, &c.q)) != LL_OK) goto done;
        if ((st = st_set_open(&f->st, path)) != LL_OK) goto done;
        f->n_tensors = (int)f->st.n_tensors;
    }
    c.used = ll_calloc(f->n_tensors ? (size_t)f->n_tensors : 1, 1);
    if (!c.used) { st = ll_err(LL_ERR_OOM, "%s: out of memory", path); goto done; }
    st = f->kind == QWEN_FILE_GGUF ? load_gguf(&c) : load_safetensors(&c);
    if (st != LL_OK) goto done;
    if ((st = check_unused(&c)) != LL_OK) goto done;
    m->weight_bytes = model_weight_bytes(m);
    m->format_name = ll_strdup(c.kind == SRC_GGUF ? "gguf" : c.kind == SRC_MLX ? "mlx" : "safetensors");
    if (!m->format_name) { st = ll_err(LL_ERR_OOM, "%s: out of memory", path); goto done; }
done:
    ll_free(cfg_path);
    ll_free(cfg_txt);
    ll_free(c.used);
    hf_quant_free(&c.q);
    if (st != LL_OK) qwen_model_free(m);
    else *out = m;
    return st;
}
