/*
 * pii_model.c — CPU forward pass of the PII encoder (bidirectional Qwen3 + two heads) and the
 * constrained BIOES Viterbi decoder. See pii_model.h for the layout and numerics.
 *
 * The encoder sees a whole window at once (no KV cache: attention is bidirectional), so every
 * matmul is [T, K] x [N, K]^T; rows of W are dequantized once per call and dotted with all T
 * activations, which keeps quantized checkpoints cheap.
 */
#include "privacy/pii_model.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>

#include "base/mapfile.h"

/* ---- loading ---- */

static ll_status cfg_int(const cJSON *o, const char *key, int *out, int def, const char *src) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) {
        if (def < 0) return ll_err(LL_ERR_FORMAT, "%s: missing field '%s'", src, key);
        *out = def;
        return LL_OK;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > 1e9 || v->valuedouble != (int)v->valuedouble)
        return ll_err(LL_ERR_FORMAT, "%s: field '%s' must be a positive integer", src, key);
    *out = (int)v->valuedouble;
    return LL_OK;
}

static float cfg_float(const cJSON *o, const char *key, float def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? (float)v->valuedouble : def;
}

static ll_status parse_config(pii_model *m, const char *json, size_t len, const char *src) {
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) return ll_err(LL_ERR_FORMAT, "%s: not valid JSON", src);
    ll_status st = LL_OK;
    const cJSON *bb = cJSON_GetObjectItemCaseSensitive(root, "backbone");
    if (!cJSON_IsObject(bb)) { st = ll_err(LL_ERR_FORMAT, "%s: missing object 'backbone'", src); goto done; }
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (cJSON_IsString(mt) && strcmp(mt->valuestring, "pii_masking") != 0) {
        st = ll_err(LL_ERR_UNSUPPORTED, "%s: model_type '%s' is not pii_masking", src, mt->valuestring);
        goto done;
    }
    const cJSON *caus = cJSON_GetObjectItemCaseSensitive(bb, "is_causal");
    if (cJSON_IsTrue(caus)) { st = ll_err(LL_ERR_UNSUPPORTED, "%s: backbone.is_causal is true (encoder expected)", src); goto done; }
    if ((st = cfg_int(bb, "vocab_size", &m->vocab, -1, src)) ||
        (st = cfg_int(bb, "hidden_size", &m->hidden, -1, src)) ||
        (st = cfg_int(bb, "num_hidden_layers", &m->n_layers, -1, src)) ||
        (st = cfg_int(bb, "num_attention_heads", &m->n_heads, -1, src)) ||
        (st = cfg_int(bb, "num_key_value_heads", &m->n_kv, m->n_heads, src)) ||
        (st = cfg_int(bb, "head_dim", &m->head_dim, m->hidden / m->n_heads, src)) ||
        (st = cfg_int(bb, "intermediate_size", &m->ffn, -1, src)) ||
        (st = cfg_int(root, "max_seq_len", &m->max_seq, 4096, src)) ||
        (st = cfg_int(root, "num_token_labels", &m->n_labels, PII_N_LABELS, src)))
        goto done;
    if (m->n_labels != PII_N_LABELS) { st = ll_err(LL_ERR_UNSUPPORTED, "%s: num_token_labels %d (expected 37)", src, m->n_labels); goto done; }
    if (m->n_heads % m->n_kv) { st = ll_err(LL_ERR_FORMAT, "%s: num_attention_heads %% num_key_value_heads != 0", src); goto done; }
    if (m->head_dim % 2) { st = ll_err(LL_ERR_FORMAT, "%s: head_dim %d is odd", src, m->head_dim); goto done; }
    m->eps = cfg_float(bb, "rms_norm_eps", 1e-6f);
    m->rope_theta = cfg_float(bb, "rope_theta", 1e6f);
    m->b_bias = cfg_float(root, "viterbi_b_bias", 0.0f);
    m->e_bias = cfg_float(root, "viterbi_e_bias", 0.0f);
done:
    cJSON_Delete(root);
    return st;
}

/* Finds `name`, checking its shape ([d0] or [d0, d1]; d1 < 0 means 1-D). */
static ll_status get_tensor(pii_model *m, const char *name, int64_t d0, int64_t d1, const ll_tensor **out) {
    const ll_tensor *t = st_set_find(&m->st, name);
    if (!t) return ll_err(LL_ERR_FORMAT, "PII checkpoint: missing tensor '%s'", name);
    int want_dims = d1 < 0 ? 1 : 2;
    if (t->n_dims != want_dims || t->shape[0] != d0 || (d1 >= 0 && t->shape[1] != d1)) {
        char b1[96];
        return ll_err(LL_ERR_FORMAT, "PII checkpoint: tensor '%s' has shape %s, expected [%lld%s%lld]", name,
                      ll_shape_str(t->shape, t->n_dims, b1, sizeof(b1)), (long long)d0, d1 < 0 ? "" : ", ",
                      d1 < 0 ? 0LL : (long long)d1);
    }
    if (!quant_type_is_weight(t->type) || (int64_t)t->shape[t->n_dims - 1] % quant_block_elems(t->type))
        return ll_err(LL_ERR_UNSUPPORTED, "PII checkpoint: tensor '%s' has unsupported type %s", name,
                      quant_type_name(t->type));
    *out = t;
    return LL_OK;
}

/* An F32 copy of a (small) tensor of n elements. */
static ll_status copy_f32(const ll_tensor *t, int64_t n, float **out) {
    float *p = ll_malloc(sizeof(float) * (size_t)n);
    if (!p) return ll_err(LL_ERR_OOM, "PII checkpoint: out of memory copying '%s'", t->name);
    quant_dequant_row(t->type, t->data, p, n);
    *out = p;
    return LL_OK;
}

static ll_status scalar_f32(pii_model *m, const char *name, float *out) {
    const ll_tensor *t = st_set_find(&m->st, name);
    if (!t) return LL_OK; /* the config value stays */
    if (ll_tensor_nelem(t) != 1 || (t->type != LL_TYPE_F32 && t->type != LL_TYPE_BF16 && t->type != LL_TYPE_F16))
        return ll_err(LL_ERR_FORMAT, "PII checkpoint: '%s' must be one float", name);
    quant_dequant_row(t->type, t->data, out, 1);
    return LL_OK;
}

ll_status pii_model_load(pii_model *m, const char *dir, ll_pool *pool, int n_threads) {
    memset(m, 0, sizeof(*m));
    quant_init();
    char path[4096];
    if (snprintf(path, sizeof(path), "%s/config.json", dir) >= (int)sizeof(path))
        return ll_err(LL_ERR_INVALID, "PII model path too long");
    char *json = NULL;
    size_t len = 0;
    LL_TRY(ll_read_file(path, &json, &len));
    ll_status st = parse_config(m, json, len, path);
    ll_free(json);
    if (st) return st;
    if ((st = st_set_open(&m->st, dir))) return st;

    const int H = m->hidden, D = m->head_dim;
    char name[256];
    if ((st = get_tensor(m, "backbone.embed_tokens.weight", m->vocab, H, &m->embed)) ||
        (st = get_tensor(m, "backbone.norm.weight", H, -1, &m->final_norm)))
        goto fail;
    m->layers = ll_calloc((size_t)m->n_layers, sizeof(pii_layer));
    if (!m->layers) { st = ll_err(LL_ERR_OOM, "PII model: out of memory"); goto fail; }
    for (int l = 0; l < m->n_layers; l++) {
        pii_layer *L = &m->layers[l];
        struct { const char *n; int64_t d0, d1; const ll_tensor **dst; } want[] = {
            {"input_layernorm.weight", H, -1, &L->attn_norm},
            {"self_attn.q_proj.weight", (int64_t)m->n_heads * D, H, &L->q},
            {"self_attn.k_proj.weight", (int64_t)m->n_kv * D, H, &L->k},
            {"self_attn.v_proj.weight", (int64_t)m->n_kv * D, H, &L->v},
            {"self_attn.o_proj.weight", H, (int64_t)m->n_heads * D, &L->o},
            {"self_attn.q_norm.weight", D, -1, &L->q_norm},
            {"self_attn.k_norm.weight", D, -1, &L->k_norm},
            {"post_attention_layernorm.weight", H, -1, &L->ffn_norm},
            {"mlp.gate_proj.weight", m->ffn, H, &L->gate},
            {"mlp.up_proj.weight", m->ffn, H, &L->up},
            {"mlp.down_proj.weight", H, m->ffn, &L->down},
        };
        for (size_t i = 0; i < LL_ARRAY_LEN(want); i++) {
            snprintf(name, sizeof(name), "backbone.layers.%d.%s", l, want[i].n);
            if ((st = get_tensor(m, name, want[i].d0, want[i].d1, want[i].dst))) goto fail;
        }
    }
    const ll_tensor *cw, *cb, *sw, *sb;
    if ((st = get_tensor(m, "token_cls_head.weight", PII_N_LABELS, H, &cw)) ||
        (st = get_tensor(m, "token_cls_head.bias", PII_N_LABELS, -1, &cb)) ||
        (st = get_tensor(m, "sensitivity_head.weight", 1, H, &sw)) ||
        (st = get_tensor(m, "sensitivity_head.bias", 1, -1, &sb)) ||
        (st = copy_f32(cw, (int64_t)PII_N_LABELS * H, &m->cls_w)) ||
        (st = copy_f32(cb, PII_N_LABELS, &m->cls_b)) ||
        (st = copy_f32(sw, H, &m->sens_w)) ||
        (st = scalar_f32(m, "sensitivity_head.bias", &m->sens_b)) ||
        (st = scalar_f32(m, "viterbi.b_bias", &m->b_bias)) ||
        (st = scalar_f32(m, "viterbi.e_bias", &m->e_bias)))
        goto fail;
    m->rope_inv_freq = ll_malloc(sizeof(float) * (size_t)(D / 2));
    if (!m->rope_inv_freq) { st = ll_err(LL_ERR_OOM, "PII model: out of memory"); goto fail; }
    for (int i = 0; i < D / 2; i++) /* computed in double, as transformers' float64-free path rounds once */
        m->rope_inv_freq[i] = (float)(1.0 / pow((double)m->rope_theta, (double)(2 * i) / (double)D));
    if (pool) {
        m->pool = pool;
    } else {
        m->pool = ll_pool_new(n_threads);
        if (!m->pool) { st = LL_ERR_OOM; goto fail; }
        m->own_pool = 1;
    }
    return LL_OK;
fail:
    pii_model_free(m);
    return st;
}

void pii_model_free(pii_model *m) {
    if (m->own_pool) ll_pool_free(m->pool);
    ll_free(m->layers);
    ll_free(m->cls_w);
    ll_free(m->cls_b);
    ll_free(m->sens_w);
    ll_free(m->rope_inv_freq);
    st_set_close(&m->st);
    memset(m, 0, sizeof(*m));
}

/* ---- forward ---- */

/* y[T, N] = x[T, K] W[N, K]^T: threads split the rows of W; each row is dequantized once into the
 * thread's scratch and dotted with every token. */
typedef struct {
    const ll_tensor *w;
    const float *x;
    float *y;
    int T, N, K;
    float *scratch; /* [nth, K] */
} mm_ctx;

static void mm_worker(void *vctx, int ith, int nth) {
    mm_ctx *c = vctx;
    int64_t lo, hi;
    ll_split_range(c->N, ith, nth, &lo, &hi);
    size_t rb = quant_row_bytes(c->w->type, c->K);
    float *row = c->scratch + (size_t)ith * c->K;
    for (int64_t n = lo; n < hi; n++) {
        const uint8_t *src = (const uint8_t *)c->w->data + (size_t)n * rb;
        const float *wr;
        if (c->w->type == LL_TYPE_F32) {
            wr = (const float *)src;
        } else {
            quant_dequant_row(c->w->type, src, row, c->K);
            wr = row;
        }
        for (int t = 0; t < c->T; t++)
            c->y[(size_t)t * c->N + n] = quant_dot_row(LL_TYPE_F32, wr, c->x + (size_t)t * c->K, c->K);
    }
}

static void matmul(pii_model *m, const ll_tensor *w, const float *x, float *y, int T, float *scratch) {
    mm_ctx c = {w, x, y, T, (int)w->shape[0], (int)w->shape[1], scratch};
    ll_pool_run(m->pool, mm_worker, &c);
}

/* In-place RMSNorm of n rows of width d with gain w (any float type). */
static void rmsnorm_rows(float *x, int n, int d, const ll_tensor *w, float eps, float *gain) {
    quant_dequant_row(w->type, w->data, gain, d);
    for (int r = 0; r < n; r++) {
        float *v = x + (size_t)r * d;
        double ss = 0;
        for (int i = 0; i < d; i++) ss += (double)v[i] * v[i];
        float s = 1.0f / sqrtf((float)(ss / d) + eps);
        for (int i = 0; i < d; i++) v[i] = v[i] * s * gain[i];
    }
}

/* NeoX rotate-half RoPE on n_heads heads of width D at position pos. */
static void rope_apply(float *v, int n_heads, int D, int pos, const float *inv_freq) {
    int half = D / 2;
    for (int i = 0; i < half; i++) {
        float ang = (float)pos * inv_freq[i];
        float c = cosf(ang), s = sinf(ang);
        for (int h = 0; h < n_heads; h++) {
            float *p = v + (size_t)h * D;
            float a = p[i], b = p[i + half];
            p[i] = a * c - b * s;
            p[i + half] = b * c + a * s;
        }
    }
}

typedef struct {
    const float *q, *k, *v; /* [T, nh*D], [T, nkv*D], [T, nkv*D] */
    float *out;             /* [T, nh*D] */
    float *scores;          /* [nth, T] */
    int T, nh, nkv, D;
} attn_ctx;

/* Full (bidirectional) softmax attention; threads split the (head, query) pairs. */
static void attn_worker(void *vctx, int ith, int nth) {
    attn_ctx *c = vctx;
    int64_t lo, hi;
    ll_split_range((int64_t)c->nh * c->T, ith, nth, &lo, &hi);
    float *sc = c->scores + (size_t)ith * c->T;
    const float scale = 1.0f / sqrtf((float)c->D);
    const int group = c->nh / c->nkv, qw = c->nh * c->D, kw = c->nkv * c->D;
    for (int64_t p = lo; p < hi; p++) {
        int h = (int)(p / c->T), t = (int)(p % c->T), kh = h / group;
        const float *qv = c->q + (size_t)t * qw + (size_t)h * c->D;
        float mx = -INFINITY;
        for (int s = 0; s < c->T; s++) {
            sc[s] = scale * quant_dot_row(LL_TYPE_F32, c->k + (size_t)s * kw + (size_t)kh * c->D, qv, c->D);
            if (sc[s] > mx) mx = sc[s];
        }
        double sum = 0;
        for (int s = 0; s < c->T; s++) sum += (sc[s] = expf(sc[s] - mx));
        float inv = (float)(1.0 / sum);
        float *o = c->out + (size_t)t * qw + (size_t)h * c->D;
        memset(o, 0, sizeof(float) * (size_t)c->D);
        for (int s = 0; s < c->T; s++) {
            const float *vv = c->v + (size_t)s * kw + (size_t)kh * c->D;
            float w = sc[s] * inv;
            for (int d = 0; d < c->D; d++) o[d] += w * vv[d];
        }
    }
}

ll_status pii_model_forward(pii_model *m, const int32_t *tokens, int T, float *hidden, float *logits,
                            float *sens_logit) {
    if (T < 1 || T > m->max_seq) return ll_err(LL_ERR_INVALID, "PII model: %d tokens (allowed 1..%d)", T, m->max_seq);
    for (int t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= m->vocab)
            return ll_err(LL_ERR_INVALID, "PII model: token %d at position %d is outside the vocabulary (%d)",
                          tokens[t], t, m->vocab);
    const int H = m->hidden, D = m->head_dim, QW = m->n_heads * D, KW = m->n_kv * D, F = m->ffn;
    const int nth = ll_pool_size(m->pool);
    const int kmax = LL_MAX(LL_MAX(H, F), QW);
    size_t n_x = (size_t)T * H, n_q = (size_t)T * QW, n_k = (size_t)T * KW, n_f = (size_t)T * F;
    /* one block per call: x [T,H] xn [T,H] q [T,QW] k,v [T,KW] att [T,QW] g,u [T,F]
     * scratch [nth, kmax] scores [nth, T] gain [kmax] */
    size_t total = 2 * n_x + 2 * n_q + 2 * n_k + 2 * n_f + (size_t)nth * kmax + (size_t)nth * T + (size_t)kmax;
    float *buf = ll_malloc(sizeof(float) * total);
    if (!buf) return ll_err(LL_ERR_OOM, "PII model: out of memory for %d tokens", T);
    float *x = buf, *xn = x + n_x, *q = xn + n_x, *k = q + n_q, *v = k + n_k, *att = v + n_k, *g = att + n_q,
          *u = g + n_f, *scratch = u + n_f, *scores = scratch + (size_t)nth * kmax, *gain = scores + (size_t)nth * T;

    size_t erb = quant_row_bytes(m->embed->type, H);
    for (int t = 0; t < T; t++)
        quant_dequant_row(m->embed->type, (const uint8_t *)m->embed->data + (size_t)tokens[t] * erb, x + (size_t)t * H, H);

    for (int l = 0; l < m->n_layers; l++) {
        const pii_layer *L = &m->layers[l];
        memcpy(xn, x, sizeof(float) * n_x);
        rmsnorm_rows(xn, T, H, L->attn_norm, m->eps, gain);
        matmul(m, L->q, xn, q, T, scratch);
        matmul(m, L->k, xn, k, T, scratch);
        matmul(m, L->v, xn, v, T, scratch);
        rmsnorm_rows(q, T * m->n_heads, D, L->q_norm, m->eps, gain);
        rmsnorm_rows(k, T * m->n_kv, D, L->k_norm, m->eps, gain);
        for (int t = 0; t < T; t++) {
            rope_apply(q + (size_t)t * QW, m->n_heads, D, t, m->rope_inv_freq);
            rope_apply(k + (size_t)t * KW, m->n_kv, D, t, m->rope_inv_freq);
        }
        attn_ctx ac = {q, k, v, att, scores, T, m->n_heads, m->n_kv, D};
        ll_pool_run(m->pool, attn_worker, &ac);
        matmul(m, L->o, att, xn, T, scratch);
        for (size_t i = 0; i < n_x; i++) x[i] += xn[i];

        memcpy(xn, x, sizeof(float) * n_x);
        rmsnorm_rows(xn, T, H, L->ffn_norm, m->eps, gain);
        matmul(m, L->gate, xn, g, T, scratch);
        matmul(m, L->up, xn, u, T, scratch);
        for (size_t i = 0; i < n_f; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
        matmul(m, L->down, g, xn, T, scratch);
        for (size_t i = 0; i < n_x; i++) x[i] += xn[i];
    }
    rmsnorm_rows(x, T, H, m->final_norm, m->eps, gain);

    if (hidden) memcpy(hidden, x, sizeof(float) * n_x);
    if (logits)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < PII_N_LABELS; j++)
                logits[(size_t)t * PII_N_LABELS + j] =
                    m->cls_b[j] + quant_dot_row(LL_TYPE_F32, m->cls_w + (size_t)j * H, x + (size_t)t * H, H);
    if (sens_logit) {
        /* mean-pool first (it commutes with the affine head), accumulated in double */
        double acc = 0;
        for (int i = 0; i < H; i++) {
            double s = 0;
            for (int t = 0; t < T; t++) s += x[(size_t)t * H + i];
            acc += (s / T) * m->sens_w[i];
        }
        *sens_logit = (float)acc + m->sens_b;
    }
    ll_free(buf);
    return LL_OK;
}

/* ---- Viterbi ---- */

static int trans_ok(int prev, int cur) {
    int pk = pii_tag_kind(prev), ck = pii_tag_kind(cur);
    if (prev == 0 || pk == PII_TAG_E || pk == PII_TAG_S) return cur == 0 || ck == PII_TAG_B || ck == PII_TAG_S;
    /* prev is B or I: continue the same entity */
    return (ck == PII_TAG_I || ck == PII_TAG_E) && pii_tag_cat(cur) == pii_tag_cat(prev);
}

ll_status pii_viterbi(const float *logits, int T, float b_bias, float e_bias, int32_t *tags) {
    enum { NL = PII_N_LABELS };
    if (T <= 0) return LL_OK;
    float *score = ll_malloc(sizeof(float) * (size_t)T * NL); /* [T, NL] best path score ending in tag */
    int8_t *back = ll_malloc((size_t)T * NL);                  /* [T, NL] previous tag */
    if (!score || !back) {
        ll_free(score);
        ll_free(back);
        return ll_err(LL_ERR_OOM, "PII Viterbi: out of memory for %d tokens", T);
    }
    float lp[NL];
    for (int t = 0; t < T; t++) {
        const float *lg = logits + (size_t)t * NL;
        float mx = lg[0];
        for (int j = 1; j < NL; j++) mx = lg[j] > mx ? lg[j] : mx;
        double se = 0;
        for (int j = 0; j < NL; j++) se += exp((double)(lg[j] - mx));
        float lse = mx + (float)log(se);
        for (int j = 0; j < NL; j++) lp[j] = lg[j] - lse;
        float *sc = score + (size_t)t * NL;
        for (int j = 0; j < NL; j++) {
            float bonus = pii_tag_kind(j) == PII_TAG_B ? b_bias : 0.0f;
            if (t == 0) {
                int k = pii_tag_kind(j);
                sc[j] = (j == 0 || k == PII_TAG_B || k == PII_TAG_S) ? lp[j] + bonus : -INFINITY;
                back[j] = -1;
                continue;
            }
            const float *ps = score + (size_t)(t - 1) * NL;
            float best = -INFINITY;
            int arg = -1;
            for (int i = 0; i < NL; i++) {
                if (!trans_ok(i, j) || ps[i] == -INFINITY) continue;
                float s = ps[i] + (pii_tag_kind(i) == PII_TAG_E ? e_bias : 0.0f);
                if (s > best) { best = s; arg = i; }
            }
            sc[j] = arg < 0 ? -INFINITY : best + lp[j] + bonus;
            back[(size_t)t * NL + j] = (int8_t)arg;
        }
    }
    const float *last = score + (size_t)(T - 1) * NL;
    float best = -INFINITY;
    int arg = 0;
    for (int j = 0; j < NL; j++) {
        int k = pii_tag_kind(j);
        if (!(j == 0 || k == PII_TAG_E || k == PII_TAG_S) || last[j] == -INFINITY) continue;
        float s = last[j] + (k == PII_TAG_E ? e_bias : 0.0f);
        if (s > best) { best = s; arg = j; }
    }
    for (int t = T - 1; t >= 0; t--) {
        tags[t] = arg;
        if (t > 0) arg = back[(size_t)t * NL + arg];
    }
    ll_free(score);
    ll_free(back);
    return LL_OK;
}
