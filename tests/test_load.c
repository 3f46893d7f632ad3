/*
 * test_load.c — qwen_model_load on the fixtures (tiny F32 single file, small BF16 3 shards),
 * variants written from tiny's tensors (per-expert + flat `model.` names, MLX 4/8-bit, a
 * llama.cpp-convention GGUF), and broken checkpoints whose errors must name the problem.
 */
#include <math.h>

#include "format/gguf.h"
#include "format/hfconfig.h"
#include "format/model_file.h"
#include "model/qwen35.h"
#include "st_testutil.h"

/* ---------------------------------------------------------------- helpers */

static float mat_f32(const ll_mat *m, int64_t r, int64_t c) {
    const uint8_t *row = ll_mat_row(m, r);
    float v;
    if (m->type == LL_TYPE_F32) { memcpy(&v, row + 4 * c, 4); return v; }
    uint16_t h;
    memcpy(&h, row + 2 * c, 2);
    return m->type == LL_TYPE_BF16 ? ll_bf16_to_f32(h) : ll_f16_to_f32(h);
}

static const ll_tensor *raw(const st_set *s, const char *fmt, int il) {
    char nm[256];
    snprintf(nm, sizeof(nm), fmt, il);
    const ll_tensor *t = st_set_find(s, nm);
    if (!t) fail_msg("fixture lacks %s", nm);
    return t;
}

/* Checks a loaded model against the raw HF tensors it came from (grouped V order). */
static void check_against_hf(const qwen_model *m, const st_set *s) {
    const qwen_hparams *hp = &m->hp;
    const ll_tensor *t = raw(s, "model.language_model.norm.weight", 0);
    for (int i = 0; i < hp->n_embd; i++) assert_true(m->out_norm[i] == 1.0f + tu_f32_at(t, i));
    /* matrices are views of the stored bytes (the test maps its own copy of the file) */
    t = raw(s, "model.language_model.embed_tokens.weight", 0);
    assert_int_equal(m->tok_embd.rows * m->tok_embd.row_bytes, t->nbytes);
    assert_memory_equal(m->tok_embd.data, t->data, t->nbytes);
    t = raw(s, "lm_head.weight", 0);
    assert_memory_equal(m->lm_head.data, t->data, t->nbytes);
    assert_ptr_not_equal(m->lm_head.data, m->tok_embd.data);
    int64_t FF = hp->n_ff_exp, H = hp->n_embd;
    for (int il = 0; il < hp->n_layer; il++) {
        const qwen_layer *L = &m->layers[il];
        t = raw(s, "model.language_model.layers.%d.input_layernorm.weight", il);
        for (int i = 0; i < H; i++) assert_true(L->attn_norm[i] == 1.0f + tu_f32_at(t, i));
        t = raw(s, "model.language_model.layers.%d.post_attention_layernorm.weight", il);
        for (int i = 0; i < H; i++) assert_true(L->ffn_norm[i] == 1.0f + tu_f32_at(t, i));
        if (hp->is_attn[il]) {
            t = raw(s, "model.language_model.layers.%d.self_attn.q_norm.weight", il);
            for (int i = 0; i < hp->head_dim; i++) assert_true(L->q_norm[i] == 1.0f + tu_f32_at(t, i));
            t = raw(s, "model.language_model.layers.%d.self_attn.q_proj.weight", il);
            assert_memory_equal(L->wq.data, t->data, t->nbytes);
            assert_int_equal(L->wq.rows, hp->n_head * 2 * hp->head_dim);
            assert_int_equal(L->wo.cols, hp->n_head * hp->head_dim);
            assert_null(L->wqkv.data);
        } else {
            t = raw(s, "model.language_model.layers.%d.linear_attn.A_log", il);
            for (int h = 0; h < hp->gdn_n_v_heads; h++) assert_true(L->ssm_a[h] == -expf(tu_f32_at(t, h)));
            t = raw(s, "model.language_model.layers.%d.linear_attn.norm.weight", il);
            for (int i = 0; i < hp->gdn_v_dim; i++) assert_true(L->gdn_norm[i] == tu_f32_at(t, i)); /* plain */
            t = raw(s, "model.language_model.layers.%d.linear_attn.dt_bias", il);
            for (int h = 0; h < hp->gdn_n_v_heads; h++) assert_true(L->dt_bias[h] == tu_f32_at(t, h));
            t = raw(s, "model.language_model.layers.%d.linear_attn.conv1d.weight", il);
            int64_t n = (int64_t)qwen_gdn_conv_dim(hp) * hp->gdn_conv_k;
            for (int64_t i = 0; i < n; i++) assert_true(L->conv[i] == tu_f32_at(t, i));
            assert_int_equal(L->wqkv.rows, qwen_gdn_conv_dim(hp));
            assert_null(L->wq.data);
        }
        /* expert e's gate row r is gate_up_proj[e][r], up row r is gate_up_proj[e][FF + r] */
        t = raw(s, "model.language_model.layers.%d.mlp.experts.gate_up_proj", il);
        const ll_tensor *d = raw(s, "model.language_model.layers.%d.mlp.experts.down_proj", il);
        size_t es = quant_block_bytes(t->type);
        for (int e = 0; e < hp->n_expert; e++) {
            assert_int_equal(L->exp_gate[e].rows, FF);
            assert_int_equal(L->exp_gate[e].cols, H);
            assert_int_equal(L->exp_down[e].rows, H);
            assert_int_equal(L->exp_down[e].cols, FF);
            int64_t rs[3] = {0, 1, FF - 1};
            for (int k = 0; k < 3; k++) {
                int64_t r = rs[k];
                assert_memory_equal(ll_mat_row(&L->exp_gate[e], r), (const uint8_t *)t->data + ((size_t)e * 2 * FF + r) * H * es, H * es);
                assert_memory_equal(ll_mat_row(&L->exp_up[e], r), (const uint8_t *)t->data + ((size_t)e * 2 * FF + FF + r) * H * es, H * es);
                assert_true(mat_f32(&L->exp_gate[e], r, 5) == tu_f32_at(t, ((int64_t)e * 2 * FF + r) * H + 5));
                assert_true(mat_f32(&L->exp_down[e], r, 3) == tu_f32_at(d, ((int64_t)e * H + r) * FF + 3));
            }
        }
        assert_int_equal(L->sh_gate_inp.rows, 1);
        assert_int_equal(L->sh_gate_inp.cols, H);
        assert_int_equal(L->router.rows, hp->n_expert);
    }
}

static void test_tiny(void **state) {
    (void)state;
    qwen_model *m;
    const char *dir = tu_shared_path("fixtures/tiny");
    size_t before = ll_alloc_used();
    assert_int_equal(qwen_model_load(dir, &m), LL_OK);
    assert_string_equal(m->format_name, "safetensors");
    assert_int_equal(m->hp.n_layer, 4);
    const uint8_t pat[4] = {0, 0, 0, 1};
    assert_memory_equal(m->hp.is_attn, pat, 4);
    assert_int_equal(m->hp.gdn_v_tiled, 0);
    assert_int_equal(m->tok_embd.type, LL_TYPE_F32);
    /* every matrix as stored: 5404672 bytes (what `lilac info` reports) */
    assert_int_equal(m->weight_bytes, 5404672);
    st_set s;
    assert_int_equal(st_set_open(&s, dir), LL_OK);
    check_against_hf(m, &s);
    st_set_close(&s);
    qwen_model_free(m);
    assert_int_equal(ll_alloc_used(), before); /* everything owned was freed */
    /* a single .safetensors file with config.json beside it */
    assert_int_equal(qwen_model_load(tu_shared_path("fixtures/tiny/model.safetensors"), &m), LL_OK);
    assert_int_equal(m->hp.n_layer, 4);
    qwen_model_free(m);
}

static void test_small_sharded_bf16(void **state) {
    (void)state;
    qwen_model *m;
    const char *dir = tu_shared_path("fixtures/small");
    assert_int_equal(qwen_model_load(dir, &m), LL_OK);
    const uint8_t pat[3] = {0, 1, 0};
    assert_memory_equal(m->hp.is_attn, pat, 3);
    assert_int_equal(m->layers[0].wqkv.type, LL_TYPE_BF16);
    assert_int_equal(m->layers[1].wq.type, LL_TYPE_BF16);
    assert_int_equal(m->layers[0].exp_gate[3].type, LL_TYPE_BF16);
    assert_int_equal(m->file->st.n_files, 3);
    st_set s;
    assert_int_equal(st_set_open(&s, dir), LL_OK);
    check_against_hf(m, &s);
    st_set_close(&s);
    qwen_model_free(m);
}

/* ---------------------------------------------------------------- variants of tiny */

typedef struct variant {
    char dir[64];
    st_file src;        /* tiny's tensors */
    tu_st w;            /* what gets written */
} variant;

static void variant_begin(variant *v) {
    snprintf(v->dir, sizeof(v->dir), "%s", tu_tmpdir());
    assert_int_equal(st_open(&v->src, tu_shared_path("fixtures/tiny/model.safetensors")), LL_OK);
    memset(&v->w, 0, sizeof(v->w));
    tu_st_add_all(&v->w, &v->src);
    tu_copy_file(tu_shared_path("fixtures/tiny/config.json"), v->dir, "config.json");
}

static void variant_write(variant *v) {
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/model.safetensors", v->dir);
    tu_st_write(&v->w, p);
}

static void variant_end(variant *v) {
    tu_st_free(&v->w);
    st_close(&v->src);
    tu_rmdir(v->dir);
}

/* Loads the variant and expects failure with the given message fragments. */
static void variant_expect(variant *v, ll_status want, const char *f1, const char *f2) {
    variant_write(v);
    qwen_model *m = (qwen_model *)1;
    ll_status st = qwen_model_load(v->dir, &m);
    if (st != want) fail_msg("status %s (want %s): %s", ll_status_name(st), ll_status_name(want), ll_errmsg());
    assert_null(m);
    tu_assert_err_has(f1, f2);
}

static void test_per_expert_flat_names(void **state) {
    (void)state;
    variant v;
    variant_begin(&v);
    tu_st w = {0};
    const int64_t E = 8, FF = 64, H = 128;
    /* rename model.language_model.X → model.X and split the fused experts */
    for (int i = 0; i < v.w.n; i++) {
        tu_st_entry *e = &v.w.e[i];
        char nm[300];
        if (strncmp(e->name, "model.language_model.", 21) == 0) snprintf(nm, sizeof(nm), "model.%s", e->name + 21);
        else snprintf(nm, sizeof(nm), "%s", e->name);
        int il;
        char rest[64];
        if (sscanf(nm, "model.layers.%d.mlp.experts.%63s", &il, rest) == 2) {
            const uint8_t *d = e->data;
            for (int64_t x = 0; x < E; x++) {
                char en[300];
                int64_t s2[2];
                if (!strcmp(rest, "gate_up_proj")) {
                    s2[0] = FF, s2[1] = H;
                    snprintf(en, sizeof(en), "model.layers.%d.mlp.experts.%lld.gate_proj.weight", il, (long long)x);
                    tu_st_add(&w, en, "F32", 2, s2, d + (size_t)x * 2 * FF * H * 4, (size_t)FF * H * 4);
                    snprintf(en, sizeof(en), "model.layers.%d.mlp.experts.%lld.up_proj.weight", il, (long long)x);
                    tu_st_add(&w, en, "F32", 2, s2, d + ((size_t)x * 2 * FF + FF) * H * 4, (size_t)FF * H * 4);
                } else {
                    s2[0] = H, s2[1] = FF;
                    snprintf(en, sizeof(en), "model.layers.%d.mlp.experts.%lld.down_proj.weight", il, (long long)x);
                    tu_st_add(&w, en, "F32", 2, s2, d + (size_t)x * H * FF * 4, (size_t)FF * H * 4);
                }
            }
            continue;
        }
        tu_st_add(&w, nm, e->dtype, e->n_dims, e->shape, e->data, e->nbytes);
    }
    tu_st_free(&v.w);
    v.w = w;
    variant_write(&v);
    qwen_model *m;
    assert_int_equal(qwen_model_load(v.dir, &m), LL_OK);
    const ll_tensor *gu = st_find(&v.src, "model.language_model.layers.2.mlp.experts.gate_up_proj");
    const ll_tensor *dn = st_find(&v.src, "model.language_model.layers.2.mlp.experts.down_proj");
    for (int e = 0; e < E; e++)
        for (int r = 0; r < FF; r += 21) {
            assert_true(mat_f32(&m->layers[2].exp_gate[e], r, 7) == tu_f32_at(gu, ((int64_t)e * 2 * FF + r) * H + 7));
            assert_true(mat_f32(&m->layers[2].exp_up[e], r, 9) == tu_f32_at(gu, ((int64_t)e * 2 * FF + FF + r) * H + 9));
            assert_true(mat_f32(&m->layers[2].exp_down[e], r, 11) == tu_f32_at(dn, ((int64_t)e * H + r) * FF + 11));
        }
    const ll_tensor *nw = st_find(&v.src, "model.language_model.norm.weight");
    assert_true(m->out_norm[3] == 1.0f + tu_f32_at(nw, 3));
    qwen_model_free(m);
    /* one expert missing */
    tu_st_remove(&v.w, "model.layers.1.mlp.experts.5.up_proj.weight");
    variant_expect(&v, LL_ERR_FORMAT, "missing tensor 'model.layers.1.mlp.experts.5.up_proj.weight'", "[64, 128]");
    variant_end(&v);
}

static void test_bad_checkpoints(void **state) {
    (void)state;
    variant v;
    const char *q3 = "model.language_model.layers.3.self_attn.q_proj.weight";
    /* missing tensor */
    variant_begin(&v);
    tu_st_remove(&v.w, q3);
    variant_expect(&v, LL_ERR_FORMAT, "missing tensor 'model.language_model.layers.3.self_attn.q_proj.weight'", "expected shape [512, 128]");
    variant_end(&v);
    /* duplicated tensor (twice in one header) */
    variant_begin(&v);
    tu_st_entry e = *tu_st_get(&v.w, q3);
    tu_st_add(&v.w, e.name, e.dtype, e.n_dims, e.shape, e.data, e.nbytes);
    variant_expect(&v, LL_ERR_FORMAT, "model.safetensors", "'model.language_model.layers.3.self_attn.q_proj.weight' appears twice");
    variant_end(&v);
    /* unexpected tensor */
    variant_begin(&v);
    e = *tu_st_get(&v.w, q3);
    tu_st_add(&v.w, "model.language_model.layers.3.self_attn.extra.weight", e.dtype, e.n_dims, e.shape, e.data, e.nbytes);
    variant_expect(&v, LL_ERR_FORMAT, "model.safetensors: unexpected tensor 'model.language_model.layers.3.self_attn.extra.weight'", "");
    variant_end(&v);
    /* mis-shaped tensor (same bytes, other shape) */
    variant_begin(&v);
    tu_st_entry *pe = tu_st_get(&v.w, q3);
    pe->shape[0] = 256, pe->shape[1] = 256;
    variant_expect(&v, LL_ERR_FORMAT, "model.safetensors: tensor 'model.language_model.layers.3.self_attn.q_proj.weight' has shape [256, 256]",
                   "expected [512, 128]");
    variant_end(&v);
    /* wrong dtype for a matrix: I32 */
    variant_begin(&v);
    snprintf(tu_st_get(&v.w, q3)->dtype, 8, "I32");
    variant_expect(&v, LL_ERR_FORMAT, "'model.language_model.layers.3.self_attn.q_proj.weight' has type i32", "not a weight type");
    variant_end(&v);
    /* wrong dtype for a norm: U8 (4× the elements keeps the byte size valid, shape is then wrong too) */
    variant_begin(&v);
    pe = tu_st_get(&v.w, "model.language_model.norm.weight");
    snprintf(pe->dtype, 8, "I32");
    variant_expect(&v, LL_ERR_FORMAT, "'model.language_model.norm.weight' has type i32", "float type expected");
    variant_end(&v);
    /* truncated file */
    variant_begin(&v);
    variant_write(&v);
    {
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/model.safetensors", v.dir);
        ll_mapfile mf;
        assert_int_equal(ll_mapfile_open(&mf, p), LL_OK);
        uint8_t *copy = malloc(mf.size);
        memcpy(copy, mf.data, mf.size);
        size_t n = mf.size / 2;
        ll_mapfile_close(&mf);
        tu_write_file(p, copy, n);
        free(copy);
        qwen_model *m;
        assert_int_equal(qwen_model_load(v.dir, &m), LL_ERR_FORMAT);
        tu_assert_err_has(p, "out of range");
    }
    variant_end(&v);
    /* missing config field / contradictory config field / no config */
    variant_begin(&v);
    {
        char p[PATH_MAX], *txt;
        size_t n;
        snprintf(p, sizeof(p), "%s/config.json", v.dir);
        assert_int_equal(ll_read_file(p, &txt, &n), LL_OK);
        char *bad = strdup(txt);
        char *at = strstr(bad, "\"num_experts\"");
        assert_non_null(at);
        at[1] = 'X'; /* "Xum_experts": the field is gone */
        tu_write_file(p, bad, n);
        variant_write(&v);
        qwen_model *m;
        assert_int_equal(qwen_model_load(v.dir, &m), LL_ERR_FORMAT);
        tu_assert_err_has(p, "text_config.num_experts is missing");
        strcpy(bad, txt);
        at = strstr(bad, "\"num_key_value_heads\": 2");
        assert_non_null(at);
        at[strlen("\"num_key_value_heads\": ")] = '3';
        tu_write_file(p, bad, n);
        assert_int_equal(qwen_model_load(v.dir, &m), LL_ERR_FORMAT);
        tu_assert_err_has(p, "text_config.num_key_value_heads = 3 does not divide num_attention_heads = 4");
        free(bad);
        ll_free(txt);
        unlink(p);
        assert_int_equal(qwen_model_load(v.dir, &m), LL_ERR_IO);
        tu_assert_err_has(p);
    }
    variant_end(&v);
    /* config says more experts than the tensors hold */
    variant_begin(&v);
    {
        char p[PATH_MAX], *txt;
        size_t n;
        snprintf(p, sizeof(p), "%s/config.json", v.dir);
        assert_int_equal(ll_read_file(p, &txt, &n), LL_OK);
        char *at = strstr(txt, "\"num_experts\": 8");
        at[strlen("\"num_experts\": ")] = '9';
        tu_write_file(p, txt, n);
        ll_free(txt);
        variant_expect(&v, LL_ERR_FORMAT, "'model.language_model.layers.0.mlp.gate.weight' has shape [8, 128]", "expected [9, 128]");
    }
    variant_end(&v);
}

/* ---------------------------------------------------------------- MLX */

/* Affine-quantizes rows [n_rows][cols] to MLX layout: codes packed LSB-first in u32 words,
 * bf16 scales/biases per group of 64. */
static void mlx_quantize(const ll_tensor *t, int64_t n_rows, int64_t cols, int bits, uint32_t *codes, uint16_t *scales, uint16_t *biases) {
    int64_t ng = cols / 64, per_word = 32 / bits, qmax = (1 << bits) - 1;
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t g = 0; g < ng; g++) {
            float lo = INFINITY, hi = -INFINITY;
            for (int k = 0; k < 64; k++) {
                float x = tu_f32_at(t, r * cols + g * 64 + k);
                lo = fminf(lo, x), hi = fmaxf(hi, x);
            }
            float sc = (hi - lo) / (float)qmax;
            if (sc == 0) sc = 1;
            uint16_t sb = ll_f32_to_bf16(sc), bb = ll_f32_to_bf16(lo);
            scales[r * ng + g] = sb, biases[r * ng + g] = bb;
            float s = ll_bf16_to_f32(sb), b = ll_bf16_to_f32(bb);
            for (int k = 0; k < 64; k++) {
                float x = tu_f32_at(t, r * cols + g * 64 + k);
                long q = lroundf((x - b) / s);
                q = q < 0 ? 0 : q > qmax ? qmax : q;
                int64_t idx = g * 64 + k;
                uint32_t *wd = &codes[r * (cols / per_word) + idx / per_word];
                if (idx % per_word == 0) *wd = 0;
                *wd |= (uint32_t)q << (bits * (idx % per_word));
            }
        }
}

typedef struct mlx_buf { void *p[3]; } mlx_buf;

/* Adds name.{weight,scales,biases} for a tensor [outer.., rows, cols] quantized to `bits`. */
static void add_mlx(tu_st *w, mlx_buf *keep, const char *module, const ll_tensor *t, int bits) {
    int64_t cols = t->shape[t->n_dims - 1], rows = ll_tensor_nelem(t) / cols;
    uint32_t *codes = malloc((size_t)rows * cols * bits / 8);
    uint16_t *sc = malloc((size_t)rows * (cols / 64) * 2), *bi = malloc((size_t)rows * (cols / 64) * 2);
    mlx_quantize(t, rows, cols, bits, codes, sc, bi);
    keep->p[0] = codes, keep->p[1] = sc, keep->p[2] = bi;
    int64_t shape[LL_MAX_DIMS];
    memcpy(shape, t->shape, sizeof(shape));
    char nm[300];
    shape[t->n_dims - 1] = cols * bits / 32;
    snprintf(nm, sizeof(nm), "%s.weight", module);
    tu_st_add(w, nm, "U32", t->n_dims, shape, codes, (size_t)rows * cols * bits / 8);
    shape[t->n_dims - 1] = cols / 64;
    snprintf(nm, sizeof(nm), "%s.scales", module);
    tu_st_add(w, nm, "BF16", t->n_dims, shape, sc, (size_t)rows * (cols / 64) * 2);
    snprintf(nm, sizeof(nm), "%s.biases", module);
    tu_st_add(w, nm, "BF16", t->n_dims, shape, bi, (size_t)rows * (cols / 64) * 2);
}

/* Dequantizes element (r, c) of an MLX4/MLX8 matrix (reference for the repacked blocks). */
static float mlx_elem(const ll_mat *m, int64_t r, int64_t c) {
    const uint8_t *blk = ll_mat_row(m, r) + (size_t)(c / 64) * quant_block_bytes(m->type);
    uint16_t s, b;
    memcpy(&s, blk, 2);
    memcpy(&b, blk + 2, 2);
    int k = (int)(c % 64);
    int q = m->type == LL_TYPE_MLX8 ? blk[4 + k] : (k & 1) ? blk[4 + k / 2] >> 4 : blk[4 + k / 2] & 15;
    return ll_bf16_to_f32(s) * (float)q + ll_bf16_to_f32(b);
}

/* MLX's config block: 4-bit default, 8-bit router and shared-expert gate (mlx-lm
 * quant_predicate for qwen3_5_moe). */
static cJSON *mlx_add_quant(cJSON *cfg) {
    cJSON *q = cJSON_AddObjectToObject(cfg, "quantization");
    cJSON_AddNumberToObject(q, "group_size", 64);
    cJSON_AddNumberToObject(q, "bits", 4);
    for (int il = 0; il < 4; il++) {
        char mod[128];
        snprintf(mod, sizeof(mod), "language_model.model.layers.%d.mlp.gate", il);
        cJSON *o = cJSON_AddObjectToObject(q, mod);
        cJSON_AddNumberToObject(o, "group_size", 64);
        cJSON_AddNumberToObject(o, "bits", 8);
        snprintf(mod, sizeof(mod), "language_model.model.layers.%d.mlp.shared_expert_gate", il);
        o = cJSON_AddObjectToObject(q, mod);
        cJSON_AddNumberToObject(o, "group_size", 64);
        cJSON_AddNumberToObject(o, "bits", 8);
    }
    return q;
}

/* Quantization error bound for element c of row r: half a step plus bf16 rounding of the bias. */
static float mlx_tol(const ll_mat *m, int64_t r, int64_t c) {
    const uint8_t *blk = ll_mat_row(m, r) + (size_t)(c / 64) * quant_block_bytes(m->type);
    uint16_t s, b;
    memcpy(&s, blk, 2);
    memcpy(&b, blk + 2, 2);
    return 0.51f * ll_bf16_to_f32(s) + 0.01f * fabsf(ll_bf16_to_f32(b)) + 1e-6f;
}

static void test_mlx(void **state) {
    (void)state;
    variant v;
    variant_begin(&v);
    tu_st w = {0};
    mlx_buf keep[128];
    int nk = 0;
    float *shifted[32];
    int ns = 0;
    for (int i = 0; i < v.w.n; i++) {
        const tu_st_entry *e = &v.w.e[i];
        if (!strncmp(e->name, "model.visual.", 13) || !strncmp(e->name, "mtp.", 4)) continue; /* mlx-lm drops them */
        const ll_tensor *t = st_find(&v.src, e->name);
        char nm[300];
        if (!strcmp(e->name, "lm_head.weight")) snprintf(nm, sizeof(nm), "language_model.lm_head.weight");
        else snprintf(nm, sizeof(nm), "language_model.model.%s", e->name + 21);
        int il;
        char rest[96];
        if (sscanf(nm, "language_model.model.layers.%d.mlp.experts.%95s", &il, rest) == 2) {
            int64_t E = t->shape[0], R = t->shape[1], C = t->shape[2];
            char mod[300];
            if (!strcmp(rest, "gate_up_proj")) {
                /* split [E, 2FF, H] into two [E, FF, H] stacks */
                for (int half = 0; half < 2; half++) {
                    float *buf = malloc((size_t)E * (R / 2) * C * 4);
                    for (int64_t x = 0; x < E; x++)
                        memcpy(buf + x * (R / 2) * C, (const float *)t->data + (x * R + half * (R / 2)) * C, (size_t)(R / 2) * C * 4);
                    ll_tensor tt = {"tmp", LL_TYPE_F32, 3, {E, R / 2, C}, buf, (size_t)E * (R / 2) * C * 4};
                    snprintf(mod, sizeof(mod), "language_model.model.layers.%d.mlp.switch_mlp.%s", il, half ? "up_proj" : "gate_proj");
                    add_mlx(&w, &keep[nk++], mod, &tt, 4);
                    free(buf);
                }
            } else {
                snprintf(mod, sizeof(mod), "language_model.model.layers.%d.mlp.switch_mlp.down_proj", il);
                add_mlx(&w, &keep[nk++], mod, t, 4);
            }
            continue;
        }
        size_t nl = strlen(nm);
        int is_norm = strstr(nm, "layernorm.weight") || strstr(nm, "q_norm.weight") || strstr(nm, "k_norm.weight") ||
                      !strcmp(nm, "language_model.model.norm.weight");
        if (is_norm) { /* mlx-lm's sanitize stores 1 + w */
            float *sh = malloc(e->nbytes);
            for (int64_t k = 0; k < e->shape[0]; k++) sh[k] = 1.0f + tu_f32_at(t, k);
            shifted[ns++] = sh;
            tu_st_add(&w, nm, "F32", 1, e->shape, sh, e->nbytes);
        } else if (strstr(nm, "conv1d.weight")) {
            int64_t s3[3] = {e->shape[0], e->shape[2], 1};
            tu_st_add(&w, nm, "F32", 3, s3, e->data, e->nbytes);
        } else if (e->n_dims == 2 && nl > 7 && !strcmp(nm + nl - 7, ".weight")) {
            nm[nl - 7] = '\0';
            int bits = (strstr(nm, "mlp.gate") && !strstr(nm, "gate_proj")) || strstr(nm, "shared_expert_gate") ? 8 : 4;
            add_mlx(&w, &keep[nk++], nm, t, bits);
        } else {
            tu_st_add(&w, nm, e->dtype, e->n_dims, e->shape, e->data, e->nbytes);
        }
    }
    tu_st_free(&v.w);
    v.w = w;
    variant_write(&v);
    /* config.json with the quantization block and the 8-bit overrides */
    char p[PATH_MAX], *txt;
    size_t n;
    snprintf(p, sizeof(p), "%s/config.json", v.dir);
    assert_int_equal(ll_read_file(p, &txt, &n), LL_OK);
    cJSON *cfg = cJSON_ParseWithLength(txt, n);
    ll_free(txt);
    cJSON *q = mlx_add_quant(cfg);
    char *js = cJSON_Print(cfg);
    tu_write_file(p, js, strlen(js));
    free(js);

    qwen_model *m;
    size_t before = ll_alloc_used();
    assert_int_equal(qwen_model_load(v.dir, &m), LL_OK);
    assert_string_equal(m->format_name, "mlx");
    const qwen_layer *L0 = &m->layers[0], *L3 = &m->layers[3];
    assert_int_equal(L0->router.type, LL_TYPE_MLX8);
    assert_int_equal(L0->sh_gate_inp.type, LL_TYPE_MLX8);
    assert_int_equal(L0->wqkv.type, LL_TYPE_MLX4);
    assert_int_equal(L3->wq.type, LL_TYPE_MLX4);
    assert_int_equal(m->tok_embd.type, LL_TYPE_MLX4);
    assert_int_equal(L0->exp_down[7].type, LL_TYPE_MLX4);
    assert_int_equal(L0->wqkv.row_bytes, 2 * sizeof(ll_block_mlx4));
    /* norms were stored shifted: loaded as is (1 + w of the HF tensor) */
    const ll_tensor *t = st_find(&v.src, "model.language_model.layers.3.self_attn.k_norm.weight");
    for (int i = 0; i < 64; i++) assert_true(L3->k_norm[i] == 1.0f + tu_f32_at(t, i));
    t = st_find(&v.src, "model.language_model.layers.0.linear_attn.A_log");
    for (int h = 0; h < 4; h++) assert_true(L0->ssm_a[h] == -expf(tu_f32_at(t, h)));
    t = st_find(&v.src, "model.language_model.layers.1.linear_attn.conv1d.weight");
    for (int i = 0; i < 256 * 4; i++) assert_true(m->layers[1].conv[i] == tu_f32_at(t, i));
    /* quantized values approximate the originals (error ≤ half a step + bf16 rounding) */
    t = st_find(&v.src, "model.language_model.layers.2.linear_attn.in_proj_qkv.weight");
    for (int64_t r = 0; r < 256; r += 17)
        for (int64_t c2 = 0; c2 < 128; c2 += 5) {
            float x = tu_f32_at(t, r * 128 + c2), y = mlx_elem(&m->layers[2].wqkv, r, c2);
            assert_true(fabsf(x - y) <= mlx_tol(&m->layers[2].wqkv, r, c2));
        }
    const ll_tensor *gu = st_find(&v.src, "model.language_model.layers.1.mlp.experts.gate_up_proj");
    for (int e = 0; e < 8; e++) {
        float x = tu_f32_at(gu, ((int64_t)e * 128 + 64 + 10) * 128 + 3), y = mlx_elem(&m->layers[1].exp_up[e], 10, 3);
        assert_true(fabsf(x - y) <= mlx_tol(&m->layers[1].exp_up[e], 10, 3));
    }
    t = st_find(&v.src, "model.language_model.layers.0.mlp.gate.weight");
    for (int c2 = 0; c2 < 128; c2++) assert_true(fabsf(tu_f32_at(t, 5 * 128 + c2) - mlx_elem(&L0->router, 5, c2)) <= mlx_tol(&L0->router, 5, c2));
    qwen_model_free(m);
    assert_int_equal(ll_alloc_used(), before);
    /* config that disagrees with the packing of the 8-bit router */
    cJSON_DeleteItemFromObject(q, "language_model.model.layers.0.mlp.gate");
    js = cJSON_Print(cfg);
    tu_write_file(p, js, strlen(js));
    free(js);
    assert_int_equal(qwen_model_load(v.dir, &m), LL_ERR_FORMAT);
    tu_assert_err_has("'language_model.model.layers.0.mlp.gate.weight'", "packed as 8-bit, group 64", "config.json says 4-bit");
    /* no quantization block at all */
    cJSON_DeleteItemFromObject(cfg, "quantization");
    js = cJSON_Print(cfg);
    tu_write_file(p, js, strlen(js));
    free(js);
    assert_int_equal(qwen_model_load(v.dir, &m), LL_ERR_FORMAT);
    tu_assert_err_has("no \"quantization\"");
    /* missing scales */
    mlx_add_quant(cfg);
    js = cJSON_Print(cfg);
    tu_write_file(p, js, strlen(js));
    free(js);
    tu_st_remove(&v.w, "language_model.model.layers.3.self_attn.o_proj.scales");
    variant_expect(&v, LL_ERR_FORMAT, "missing tensor 'language_model.model.layers.3.self_attn.o_proj.scales'", "[128, 4]");
    cJSON_Delete(cfg);
    for (int i = 0; i < nk; i++)
        for (int k = 0; k < 3; k++) free(keep[i].p[k]);
    for (int i = 0; i < ns; i++) free(shifted[i]);
    variant_end(&v);
}

/* ---------------------------------------------------------------- GGUF (llama.cpp conventions) */

typedef struct gg_build {
    gguf_writer *w;
    void *bufs[512];
    int nb;
} gg_build;

static void *gb_keep(gg_build *b, size_t n) {
    void *p = malloc(n);
    b->bufs[b->nb++] = p;
    return p;
}

/* grouped → tiled: HF v head h = kh*r + j goes to position j*HK + kh (llama.cpp
 * _LinearAttentionVReorderBase._reorder_v_heads) */
static int tiled_pos(int h, int hk, int r) { return (h % r) * hk + h / r; }

static void gb_add(gg_build *b, const char *name, int nd, const int64_t *shape, const void *data) {
    assert_int_equal(gguf_writer_add_tensor(b->w, name, LL_TYPE_F32, nd, shape, data), LL_OK);
}

static void test_gguf_round_trip(void **state) {
    (void)state;
    const char *dir = tu_tmpdir();
    qwen_model *hf;
    assert_int_equal(qwen_model_load(tu_shared_path("fixtures/tiny"), &hf), LL_OK);
    st_file src;
    assert_int_equal(st_open(&src, tu_shared_path("fixtures/tiny/model.safetensors")), LL_OK);
    const qwen_hparams *hp = &hf->hp;
    const int H = hp->n_embd, HK = hp->gdn_n_k_heads, HV = hp->gdn_n_v_heads, DV = hp->gdn_v_dim, R = HV / HK;
    const int QK2 = 2 * qwen_gdn_qk_dim(hp), CD = qwen_gdn_conv_dim(hp), K = hp->gdn_conv_k, E = hp->n_expert, FF = hp->n_ff_exp;
    gg_build b = {gguf_writer_new(), {0}, 0};
    gguf_writer *w = b.w;
    assert_int_equal(gguf_writer_set_str(w, "general.architecture", "qwen35moe"), LL_OK);
#define KV(k, v) assert_int_equal(gguf_writer_set_u32(w, "qwen35moe." k, (uint32_t)(v)), LL_OK)
    KV("block_count", hp->n_layer);
    KV("context_length", hp->n_ctx_train);
    KV("embedding_length", H);
    KV("attention.head_count", hp->n_head);
    KV("attention.head_count_kv", hp->n_head_kv);
    KV("attention.key_length", hp->head_dim);
    KV("attention.value_length", hp->head_dim);
    KV("rope.dimension_count", hp->n_rot);
    KV("expert_count", E);
    KV("expert_used_count", hp->n_expert_used);
    KV("expert_feed_forward_length", FF);
    KV("expert_shared_feed_forward_length", hp->n_ff_shexp);
    KV("ssm.conv_kernel", K);
    KV("ssm.state_size", DV);
    KV("ssm.group_count", HK);
    KV("ssm.time_step_rank", HV);
    KV("ssm.inner_size", HV * DV);
    KV("full_attention_interval", 4);
#undef KV
    assert_int_equal(gguf_writer_set_f32(w, "qwen35moe.rope.freq_base", hp->rope_theta), LL_OK);
    assert_int_equal(gguf_writer_set_f32(w, "qwen35moe.attention.layer_norm_rms_epsilon", hp->rms_eps), LL_OK);
    assert_int_equal(gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 510), LL_OK);
    int64_t s1[1], s2[2], s3[3];
    const ll_tensor *t;
#define SRC(...) do { snprintf(nm, sizeof(nm), __VA_ARGS__); t = st_find(&src, nm); assert_non_null(t); } while (0)
    char nm[300], gn[200];
    SRC("model.language_model.embed_tokens.weight");
    gb_add(&b, "token_embd.weight", 2, t->shape, t->data);
    SRC("lm_head.weight");
    gb_add(&b, "output.weight", 2, t->shape, t->data);
    SRC("model.language_model.norm.weight");
    float *v = gb_keep(&b, (size_t)H * 4);
    for (int i = 0; i < H; i++) v[i] = 1.0f + tu_f32_at(t, i);
    s1[0] = H;
    gb_add(&b, "output_norm.weight", 1, s1, v);
    for (int il = 0; il < hp->n_layer; il++) {
        /* plain copies: (HF name, GGUF name) */
        static const char *plain_attn[][2] = {{"self_attn.q_proj.weight", "attn_q.weight"}, {"self_attn.k_proj.weight", "attn_k.weight"},
                                              {"self_attn.v_proj.weight", "attn_v.weight"}, {"self_attn.o_proj.weight", "attn_output.weight"}};
        static const char *plain_all[][2] = {{"mlp.gate.weight", "ffn_gate_inp.weight"},
                                             {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
                                             {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
                                             {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"}};
        static const char *norms[][2] = {{"input_layernorm.weight", "attn_norm.weight"},
                                         {"post_attention_layernorm.weight", "post_attention_norm.weight"},
                                         {"self_attn.q_norm.weight", "attn_q_norm.weight"},
                                         {"self_attn.k_norm.weight", "attn_k_norm.weight"}};
        for (int k = 0; k < 4; k++) {
            if (!hp->is_attn[il] && k >= 2) break;
            snprintf(nm, sizeof(nm), "model.language_model.layers.%d.%s", il, norms[k][0]);
            t = st_find(&src, nm);
            v = gb_keep(&b, t->nbytes);
            for (int64_t i = 0; i < t->shape[0]; i++) v[i] = 1.0f + tu_f32_at(t, i);
            snprintf(gn, sizeof(gn), "blk.%d.%s", il, norms[k][1]);
            gb_add(&b, gn, 1, t->shape, v);
        }
        for (int k = 0; k < 4; k++) {
            if (hp->is_attn[il]) {
                snprintf(nm, sizeof(nm), "model.language_model.layers.%d.%s", il, plain_attn[k][0]);
                t = st_find(&src, nm);
                snprintf(gn, sizeof(gn), "blk.%d.%s", il, plain_attn[k][1]);
                gb_add(&b, gn, 2, t->shape, t->data);
            }
            snprintf(nm, sizeof(nm), "model.language_model.layers.%d.%s", il, plain_all[k][0]);
            t = st_find(&src, nm);
            snprintf(gn, sizeof(gn), "blk.%d.%s", il, plain_all[k][1]);
            gb_add(&b, gn, 2, t->shape, t->data);
        }
        SRC("model.language_model.layers.%d.mlp.shared_expert_gate.weight", il);
        s1[0] = H;
        snprintf(gn, sizeof(gn), "blk.%d.ffn_gate_inp_shexp.weight", il);
        gb_add(&b, gn, 1, s1, t->data); /* llama.cpp stores it 1-D */
        SRC("model.language_model.layers.%d.mlp.experts.gate_up_proj", il);
        float *g = gb_keep(&b, (size_t)E * FF * H * 4), *u = gb_keep(&b, (size_t)E * FF * H * 4);
        for (int e = 0; e < E; e++) {
            memcpy(g + (size_t)e * FF * H, (const float *)t->data + (size_t)e * 2 * FF * H, (size_t)FF * H * 4);
            memcpy(u + (size_t)e * FF * H, (const float *)t->data + ((size_t)e * 2 * FF + FF) * H, (size_t)FF * H * 4);
        }
        s3[0] = E, s3[1] = FF, s3[2] = H;
        snprintf(gn, sizeof(gn), "blk.%d.ffn_gate_exps.weight", il);
        gb_add(&b, gn, 3, s3, g);
        snprintf(gn, sizeof(gn), "blk.%d.ffn_up_exps.weight", il);
        gb_add(&b, gn, 3, s3, u);
        SRC("model.language_model.layers.%d.mlp.experts.down_proj", il);
        snprintf(gn, sizeof(gn), "blk.%d.ffn_down_exps.weight", il);
        gb_add(&b, gn, 3, t->shape, t->data);
        if (hp->is_attn[il]) continue;
        /* GDN with V heads reordered to tiled order */
        SRC("model.language_model.layers.%d.linear_attn.in_proj_qkv.weight", il);
        float *qkv = gb_keep(&b, t->nbytes);
        memcpy(qkv, t->data, t->nbytes);
        for (int h = 0; h < HV; h++)
            memcpy(qkv + ((size_t)QK2 + (size_t)tiled_pos(h, HK, R) * DV) * H, (const float *)t->data + ((size_t)QK2 + (size_t)h * DV) * H,
                   (size_t)DV * H * 4);
        snprintf(gn, sizeof(gn), "blk.%d.attn_qkv.weight", il);
        gb_add(&b, gn, 2, t->shape, qkv);
        SRC("model.language_model.layers.%d.linear_attn.in_proj_z.weight", il);
        float *z = gb_keep(&b, t->nbytes);
        for (int h = 0; h < HV; h++)
            memcpy(z + (size_t)tiled_pos(h, HK, R) * DV * H, (const float *)t->data + (size_t)h * DV * H, (size_t)DV * H * 4);
        snprintf(gn, sizeof(gn), "blk.%d.attn_gate.weight", il);
        gb_add(&b, gn, 2, t->shape, z);
        static const char *ab[][2] = {{"in_proj_b.weight", "ssm_beta.weight"}, {"in_proj_a.weight", "ssm_alpha.weight"}};
        for (int k = 0; k < 2; k++) {
            snprintf(nm, sizeof(nm), "model.language_model.layers.%d.linear_attn.%s", il, ab[k][0]);
            t = st_find(&src, nm);
            float *x = gb_keep(&b, t->nbytes);
            for (int h = 0; h < HV; h++) memcpy(x + (size_t)tiled_pos(h, HK, R) * H, (const float *)t->data + (size_t)h * H, (size_t)H * 4);
            snprintf(gn, sizeof(gn), "blk.%d.%s", il, ab[k][1]);
            gb_add(&b, gn, 2, t->shape, x);
        }
        SRC("model.language_model.layers.%d.linear_attn.conv1d.weight", il);
        float *cv = gb_keep(&b, t->nbytes);
        memcpy(cv, t->data, t->nbytes);
        for (int h = 0; h < HV; h++)
            memcpy(cv + ((size_t)QK2 + (size_t)tiled_pos(h, HK, R) * DV) * K, (const float *)t->data + ((size_t)QK2 + (size_t)h * DV) * K,
                   (size_t)DV * K * 4);
        s2[0] = CD, s2[1] = K;
        snprintf(gn, sizeof(gn), "blk.%d.ssm_conv1d.weight", il);
        gb_add(&b, gn, 2, s2, cv);
        SRC("model.language_model.layers.%d.linear_attn.dt_bias", il);
        float *dt = gb_keep(&b, t->nbytes);
        for (int h = 0; h < HV; h++) dt[tiled_pos(h, HK, R)] = tu_f32_at(t, h);
        snprintf(gn, sizeof(gn), "blk.%d.ssm_dt.bias", il);
        gb_add(&b, gn, 1, t->shape, dt);
        SRC("model.language_model.layers.%d.linear_attn.A_log", il);
        float *sa = gb_keep(&b, t->nbytes);
        for (int h = 0; h < HV; h++) sa[tiled_pos(h, HK, R)] = -expf(tu_f32_at(t, h));
        snprintf(gn, sizeof(gn), "blk.%d.ssm_a", il);
        gb_add(&b, gn, 1, t->shape, sa);
        SRC("model.language_model.layers.%d.linear_attn.norm.weight", il);
        snprintf(gn, sizeof(gn), "blk.%d.ssm_norm.weight", il);
        gb_add(&b, gn, 1, t->shape, t->data);
        SRC("model.language_model.layers.%d.linear_attn.out_proj.weight", il);
        float *o = gb_keep(&b, t->nbytes);
        for (int r = 0; r < H; r++)
            for (int h = 0; h < HV; h++)
                memcpy(o + (size_t)r * HV * DV + (size_t)tiled_pos(h, HK, R) * DV, (const float *)t->data + (size_t)r * HV * DV + (size_t)h * DV,
                       (size_t)DV * 4);
        snprintf(gn, sizeof(gn), "blk.%d.ssm_out.weight", il);
        gb_add(&b, gn, 2, t->shape, o);
    }
#undef SRC
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/tiny.gguf", dir);
    assert_int_equal(gguf_writer_write(w, path), LL_OK);
    gguf_writer_free(w);
    for (int i = 0; i < b.nb; i++) free(b.bufs[i]);

    qwen_model *gm;
    assert_int_equal(qwen_model_load(path, &gm), LL_OK);
    assert_string_equal(gm->format_name, "gguf");
    const qwen_hparams *gh = &gm->hp;
    assert_int_equal(gh->gdn_v_tiled, 1);
    qwen_hparams h2 = *gh;
    h2.gdn_v_tiled = 0;
    assert_memory_equal(&h2, hp, sizeof(h2)); /* every other hyperparameter agrees */
    assert_int_equal(gm->weight_bytes, hf->weight_bytes);
    for (int i = 0; i < H; i++) assert_true(gm->out_norm[i] == hf->out_norm[i]);
    for (int il = 0; il < hp->n_layer; il++) {
        const qwen_layer *a = &hf->layers[il], *g2 = &gm->layers[il];
        for (int i = 0; i < H; i++) assert_true(a->attn_norm[i] == g2->attn_norm[i] && a->ffn_norm[i] == g2->ffn_norm[i]);
        assert_memory_equal(ll_mat_row(&a->router, 0), ll_mat_row(&g2->router, 0), a->router.row_bytes * a->router.rows);
        assert_memory_equal(ll_mat_row(&a->sh_gate_inp, 0), ll_mat_row(&g2->sh_gate_inp, 0), (size_t)H * 4);
        for (int e = 0; e < E; e++) {
            assert_memory_equal(ll_mat_row(&a->exp_gate[e], 0), ll_mat_row(&g2->exp_gate[e], 0), (size_t)FF * H * 4);
            assert_memory_equal(ll_mat_row(&a->exp_up[e], 0), ll_mat_row(&g2->exp_up[e], 0), (size_t)FF * H * 4);
            assert_memory_equal(ll_mat_row(&a->exp_down[e], 0), ll_mat_row(&g2->exp_down[e], 0), (size_t)FF * H * 4);
        }
        if (hp->is_attn[il]) {
            for (int i = 0; i < hp->head_dim; i++) assert_true(a->q_norm[i] == g2->q_norm[i] && a->k_norm[i] == g2->k_norm[i]);
            assert_memory_equal(ll_mat_row(&a->wq, 0), ll_mat_row(&g2->wq, 0), a->wq.row_bytes * a->wq.rows);
            continue;
        }
        for (int h = 0; h < HV; h++) {
            int ht = tiled_pos(h, HK, R);
            assert_true(a->ssm_a[h] == g2->ssm_a[ht]);
            assert_true(a->dt_bias[h] == g2->dt_bias[ht]);
            assert_true(mat_f32(&a->wa, h, 9) == mat_f32(&g2->wa, ht, 9));
            for (int d = 0; d < DV; d += 7) {
                assert_true(mat_f32(&a->wqkv, QK2 + h * DV + d, 3) == mat_f32(&g2->wqkv, QK2 + ht * DV + d, 3));
                assert_true(mat_f32(&a->wz, h * DV + d, 4) == mat_f32(&g2->wz, ht * DV + d, 4));
                assert_true(mat_f32(&a->wout, 11, h * DV + d) == mat_f32(&g2->wout, 11, ht * DV + d));
                for (int k = 0; k < K; k++) assert_true(a->conv[(QK2 + h * DV + d) * K + k] == g2->conv[(QK2 + ht * DV + d) * K + k]);
            }
        }
        assert_true(mat_f32(&a->wqkv, 5, 6) == mat_f32(&g2->wqkv, 5, 6)); /* q/k rows untouched */
        for (int i = 0; i < DV; i++) assert_true(a->gdn_norm[i] == g2->gdn_norm[i]);
    }
    qwen_model_free(gm);
    /* allocation failures while loading the GGUF: clean errors, nothing leaked */
    size_t before = ll_alloc_used();
    for (long n = 0;; n++) {
        ll_alloc_fail_after(n);
        ll_status st = qwen_model_load(path, &gm);
        ll_alloc_fail_after(-1);
        if (st == LL_OK) { qwen_model_free(gm); break; }
        assert_null(gm);
        assert_int_equal(ll_alloc_used(), before);
    }
    assert_int_equal(ll_alloc_used(), before);
    st_close(&src);
    qwen_model_free(hf);
    tu_rmdir(dir);
}

static void test_gguf_bad_model(void **state) {
    (void)state;
    const char *dir = tu_tmpdir();
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/x.gguf", dir);
    gguf_writer *w = gguf_writer_new();
    assert_int_equal(gguf_writer_set_str(w, "general.architecture", "llama"), LL_OK);
    assert_int_equal(gguf_writer_write(w, path), LL_OK);
    gguf_writer_free(w);
    qwen_model *m;
    assert_int_equal(qwen_model_load(path, &m), LL_ERR_UNSUPPORTED);
    tu_assert_err_has(path, "architecture 'llama'");
    w = gguf_writer_new();
    assert_int_equal(gguf_writer_set_str(w, "general.architecture", "qwen35moe"), LL_OK);
    assert_int_equal(gguf_writer_set_u32(w, "qwen35moe.block_count", 4), LL_OK);
    assert_int_equal(gguf_writer_write(w, path), LL_OK);
    gguf_writer_free(w);
    assert_int_equal(qwen_model_load(path, &m), LL_ERR_FORMAT);
    tu_assert_err_has(path, "'qwen35moe.embedding_length' is missing");
    tu_rmdir(dir);
}

/* Every allocation failure during a load is a clean LL_ERR_OOM (or IO/FORMAT from a helper
 * that reports it that way) with nothing leaked. */
static void test_alloc_failures(void **state) {
    (void)state;
    const char *dir = tu_shared_path("fixtures/tiny");
    size_t before = ll_alloc_used();
    int ok = 0;
    for (long n = 0; n < 10000 && !ok; n++) {
        ll_alloc_fail_after(n);
        qwen_model *m = (qwen_model *)1;
        ll_status st = qwen_model_load(dir, &m);
        ll_alloc_fail_after(-1);
        if (st == LL_OK) {
            ok = 1;
            qwen_model_free(m);
        } else {
            assert_null(m);
            assert_true(strlen(ll_errmsg()) > 0);
        }
        assert_int_equal(ll_alloc_used(), before);
    }
    assert_true(ok);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny),           cmocka_unit_test(test_small_sharded_bf16), cmocka_unit_test(test_per_expert_flat_names),
        cmocka_unit_test(test_bad_checkpoints), cmocka_unit_test(test_mlx),               cmocka_unit_test(test_gguf_round_trip),
        cmocka_unit_test(test_gguf_bad_model), cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
