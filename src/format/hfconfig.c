/* hfconfig.c — config.json → qwen_hparams, MLX quantization block, and hparams validation. */
#include "hfconfig.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>

typedef struct cfg {
    const char *src;
    const cJSON *root;
    const cJSON *tc;      /* text config object (root itself in the flat layout) */
    const char *prefix;   /* "text_config." or "" */
} cfg;

static ll_status get_int(const cfg *c, const cJSON *obj, const char *pre, const char *name, int32_t *out, int required, int32_t def) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!j || cJSON_IsNull(j)) {
        if (required) return ll_err(LL_ERR_FORMAT, "%s: %s%s is missing", c->src, pre, name);
        *out = def;
        return LL_OK;
    }
    if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble) || floor(j->valuedouble) != j->valuedouble ||
        fabs(j->valuedouble) > 2147483647.0)
        return ll_err(LL_ERR_FORMAT, "%s: %s%s is not an integer", c->src, pre, name);
    *out = (int32_t)j->valuedouble;
    return LL_OK;
}

static ll_status get_num(const cfg *c, const cJSON *obj, const char *pre, const char *name, double *out, int *found) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, name);
    *found = 0;
    if (!j || cJSON_IsNull(j)) return LL_OK;
    if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble)) return ll_err(LL_ERR_FORMAT, "%s: %s%s is not a number", c->src, pre, name);
    *out = j->valuedouble;
    *found = 1;
    return LL_OK;
}

static ll_status get_bool(const cfg *c, const cJSON *obj, const char *pre, const char *name, int *out, int *found) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, name);
    *found = 0;
    if (!j || cJSON_IsNull(j)) return LL_OK;
    if (!cJSON_IsBool(j)) return ll_err(LL_ERR_FORMAT, "%s: %s%s is not a boolean", c->src, pre, name);
    *out = cJSON_IsTrue(j);
    *found = 1;
    return LL_OK;
}

/* eos_token_id: an integer or a list (first entry); -1 when absent. */
static ll_status get_eos(const cfg *c, const cJSON *obj, const char *pre, int32_t *out, int *found) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, "eos_token_id");
    *found = 0;
    if (!j || cJSON_IsNull(j)) return LL_OK;
    if (cJSON_IsArray(j)) j = cJSON_GetArrayItem(j, 0);
    if (!j || !cJSON_IsNumber(j) || floor(j->valuedouble) != j->valuedouble || j->valuedouble < 0 || j->valuedouble > 2147483647.0)
        return ll_err(LL_ERR_FORMAT, "%s: %seos_token_id is not a token id", c->src, pre);
    *out = (int32_t)j->valuedouble;
    *found = 1;
    return LL_OK;
}

static ll_status parse_rope(const cfg *c, qwen_hparams *hp) {
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(c->tc, "rope_parameters");
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(c->tc, "rope_scaling"); /* older spelling */
    if (rp && !cJSON_IsNull(rp) && !cJSON_IsObject(rp))
        return ll_err(LL_ERR_FORMAT, "%s: %srope_parameters is not an object", c->src, c->prefix);
    if (rp && cJSON_IsNull(rp)) rp = NULL;
    char rpre[64];
    snprintf(rpre, sizeof(rpre), "%srope_parameters.", c->prefix);
    const cJSON *objs[2] = {rp, cJSON_IsObject(rs) ? rs : NULL};
    for (int k = 0; k < 2; k++) {
        if (!objs[k]) continue;
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(objs[k], "rope_type");
        if (!ty) ty = cJSON_GetObjectItemCaseSensitive(objs[k], "type");
        if (ty && !cJSON_IsString(ty)) return ll_err(LL_ERR_FORMAT, "%s: %srope_type is not a string", c->src, k ? "rope_scaling." : rpre);
        if (ty && strcmp(ty->valuestring, "default") != 0)
            return ll_err(LL_ERR_UNSUPPORTED, "%s: %srope_type \"%s\" is not supported (only \"default\"; YaRN is future work)", c->src,
                          k ? "rope_scaling." : rpre, ty->valuestring);
    }
    /* rope_theta: inside rope_parameters (new) or at the top of the text config (old) */
    double th_in = 0, th_top = 0;
    int f_in = 0, f_top = 0;
    if (rp) LL_TRY(get_num(c, rp, rpre, "rope_theta", &th_in, &f_in));
    LL_TRY(get_num(c, c->tc, c->prefix, "rope_theta", &th_top, &f_top));
    if (f_in && f_top && th_in != th_top)
        return ll_err(LL_ERR_FORMAT, "%s: %srope_theta = %g contradicts %srope_theta = %g", c->src, c->prefix, th_top, rpre, th_in);
    if (!f_in && !f_top) return ll_err(LL_ERR_FORMAT, "%s: %srope_theta is missing", c->src, rpre);
    hp->rope_theta = (float)(f_in ? th_in : th_top);
    double pf_in = 0, pf_top = 0;
    f_in = f_top = 0;
    if (rp) LL_TRY(get_num(c, rp, rpre, "partial_rotary_factor", &pf_in, &f_in));
    LL_TRY(get_num(c, c->tc, c->prefix, "partial_rotary_factor", &pf_top, &f_top));
    if (f_in && f_top && pf_in != pf_top)
        return ll_err(LL_ERR_FORMAT, "%s: %spartial_rotary_factor = %g contradicts %spartial_rotary_factor = %g", c->src, c->prefix, pf_top,
                      rpre, pf_in);
    double pf = f_in ? pf_in : f_top ? pf_top : 0.25; /* transformers' default for qwen3_5_moe */
    if (!(pf > 0 && pf <= 1))
        return ll_err(LL_ERR_FORMAT, "%s: %spartial_rotary_factor = %g is not in (0, 1]", c->src, f_in ? rpre : c->prefix, pf);
    double nr = hp->head_dim * pf;
    if (floor(nr) != nr)
        return ll_err(LL_ERR_FORMAT, "%s: %spartial_rotary_factor = %g times head_dim = %d is not a whole number of dims", c->src,
                      c->prefix, pf, hp->head_dim);
    hp->n_rot = (int32_t)nr;
    return LL_OK;
}

static ll_status parse_layers(const cfg *c, qwen_hparams *hp) {
    if (hp->n_layer <= 0 || hp->n_layer > QWEN_MAX_LAYERS)
        return ll_err(LL_ERR_FORMAT, "%s: %snum_hidden_layers = %d is out of range (1..%d)", c->src, c->prefix, hp->n_layer, QWEN_MAX_LAYERS);
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(c->tc, "layer_types");
    if (lt && !cJSON_IsNull(lt)) {
        if (!cJSON_IsArray(lt)) return ll_err(LL_ERR_FORMAT, "%s: %slayer_types is not an array", c->src, c->prefix);
        int n = cJSON_GetArraySize(lt);
        if (n != hp->n_layer)
            return ll_err(LL_ERR_FORMAT, "%s: %slayer_types has %d entries but num_hidden_layers = %d", c->src, c->prefix, n, hp->n_layer);
        int i = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, lt) {
            if (!cJSON_IsString(e)) return ll_err(LL_ERR_FORMAT, "%s: %slayer_types[%d] is not a string", c->src, c->prefix, i);
            if (!strcmp(e->valuestring, "full_attention")) hp->is_attn[i] = 1;
            else if (!strcmp(e->valuestring, "linear_attention")) hp->is_attn[i] = 0;
            else
                return ll_err(LL_ERR_UNSUPPORTED, "%s: %slayer_types[%d] = \"%s\" is not a known layer type (full_attention, linear_attention)",
                              c->src, c->prefix, i, e->valuestring);
            i++;
        }
        return LL_OK;
    }
    int32_t interval;
    LL_TRY(get_int(c, c->tc, c->prefix, "full_attention_interval", &interval, 0, 4));
    if (interval <= 0) return ll_err(LL_ERR_FORMAT, "%s: %sfull_attention_interval = %d is not positive", c->src, c->prefix, interval);
    for (int i = 0; i < hp->n_layer; i++) hp->is_attn[i] = (i + 1) % interval == 0;
    return LL_OK;
}

static ll_status parse_quant(const cfg *c, hf_quant *q) {
    memset(q, 0, sizeof(*q));
    const cJSON *qj = cJSON_GetObjectItemCaseSensitive(c->root, "quantization");
    if (!qj || cJSON_IsNull(qj)) qj = cJSON_GetObjectItemCaseSensitive(c->root, "quantization_config");
    if (!qj || cJSON_IsNull(qj)) return LL_OK;
    if (!cJSON_IsObject(qj)) return ll_err(LL_ERR_FORMAT, "%s: quantization is not an object", c->src);
    const cJSON *mode = cJSON_GetObjectItemCaseSensitive(qj, "mode");
    if (mode && (!cJSON_IsString(mode) || strcmp(mode->valuestring, "affine") != 0))
        return ll_err(LL_ERR_UNSUPPORTED, "%s: quantization.mode %s%s%s is not supported (only MLX \"affine\")", c->src,
                      cJSON_IsString(mode) ? "\"" : "", cJSON_IsString(mode) ? mode->valuestring : "(not a string)",
                      cJSON_IsString(mode) ? "\"" : "");
    const cJSON *qm = cJSON_GetObjectItemCaseSensitive(qj, "quant_method");
    if (qm) return ll_err(LL_ERR_UNSUPPORTED, "%s: quantization method %s is not supported (MLX affine only)", c->src,
                          cJSON_IsString(qm) ? qm->valuestring : "?");
    q->present = 1;
    LL_TRY(get_int(c, qj, "quantization.", "bits", &q->bits, 1, 0));
    LL_TRY(get_int(c, qj, "quantization.", "group_size", &q->group_size, 1, 0));
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, qj) n += cJSON_IsObject(e) || cJSON_IsBool(e);
    q->e = ll_calloc(n ? (size_t)n : 1, sizeof(hf_quant_entry));
    if (!q->e) return ll_err(LL_ERR_OOM, "%s: out of memory", c->src);
    cJSON_ArrayForEach(e, qj) {
        if (!cJSON_IsObject(e) && !cJSON_IsBool(e)) continue;
        hf_quant_entry *qe = &q->e[q->n];
        if (!(qe->module = ll_strdup(e->string))) return ll_err(LL_ERR_OOM, "%s: out of memory", c->src);
        q->n++;
        if (cJSON_IsBool(e)) {
            qe->quantized = cJSON_IsTrue(e);
            qe->bits = q->bits;
            qe->group_size = q->group_size;
            continue;
        }
        char pre[300];
        snprintf(pre, sizeof(pre), "quantization.%.250s.", e->string);
        qe->quantized = 1;
        LL_TRY(get_int(c, e, pre, "bits", &qe->bits, 0, q->bits));
        LL_TRY(get_int(c, e, pre, "group_size", &qe->group_size, 0, q->group_size));
    }
    return LL_OK;
}

void hf_quant_free(hf_quant *q) {
    if (!q) return;
    for (int i = 0; i < q->n; i++) ll_free(q->e[i].module);
    ll_free(q->e);
    memset(q, 0, sizeof(*q));
}

const hf_quant_entry *hf_quant_find(const hf_quant *q, const char *module) {
    for (int i = 0; i < q->n; i++)
        if (!strcmp(q->e[i].module, module)) return &q->e[i];
    return NULL;
}

static ll_status parse_text(const cfg *c, qwen_hparams *hp) {
    const cJSON *tc = c->tc;
    const char *p = c->prefix;
    LL_TRY(get_int(c, tc, p, "vocab_size", &hp->n_vocab, 1, 0));
    LL_TRY(get_int(c, tc, p, "hidden_size", &hp->n_embd, 1, 0));
    LL_TRY(get_int(c, tc, p, "num_hidden_layers", &hp->n_layer, 1, 0));
    LL_TRY(get_int(c, tc, p, "num_attention_heads", &hp->n_head, 1, 0));
    LL_TRY(get_int(c, tc, p, "num_key_value_heads", &hp->n_head_kv, 1, 0));
    LL_TRY(get_int(c, tc, p, "head_dim", &hp->head_dim, 0, hp->n_head > 0 ? hp->n_embd / hp->n_head : 0));
    LL_TRY(get_int(c, tc, p, "linear_num_key_heads", &hp->gdn_n_k_heads, 1, 0));
    LL_TRY(get_int(c, tc, p, "linear_num_value_heads", &hp->gdn_n_v_heads, 1, 0));
    LL_TRY(get_int(c, tc, p, "linear_key_head_dim", &hp->gdn_k_dim, 1, 0));
    LL_TRY(get_int(c, tc, p, "linear_value_head_dim", &hp->gdn_v_dim, 1, 0));
    LL_TRY(get_int(c, tc, p, "linear_conv_kernel_dim", &hp->gdn_conv_k, 1, 0));
    LL_TRY(get_int(c, tc, p, "num_experts", &hp->n_expert, 1, 0));
    LL_TRY(get_int(c, tc, p, "num_experts_per_tok", &hp->n_expert_used, 1, 0));
    LL_TRY(get_int(c, tc, p, "moe_intermediate_size", &hp->n_ff_exp, 1, 0));
    LL_TRY(get_int(c, tc, p, "shared_expert_intermediate_size", &hp->n_ff_shexp, 1, 0));
    LL_TRY(get_int(c, tc, p, "max_position_embeddings", &hp->n_ctx_train, 0, 32768));
    double eps = 1e-6;
    int found;
    LL_TRY(get_num(c, tc, p, "rms_norm_eps", &eps, &found));
    hp->rms_eps = (float)eps;
    const char *hact = NULL;
    const cJSON *ha = cJSON_GetObjectItemCaseSensitive(tc, "hidden_act");
    if (ha && cJSON_IsString(ha)) hact = ha->valuestring;
    if (hact && strcmp(hact, "silu") != 0)
        return ll_err(LL_ERR_UNSUPPORTED, "%s: %shidden_act \"%s\" is not supported (silu)", c->src, p, hact);
    /* tie_word_embeddings: the nested layout has it at both levels; they must agree */
    int tie_t = 0, tie_r = 0, f_t = 0, f_r = 0;
    LL_TRY(get_bool(c, tc, p, "tie_word_embeddings", &tie_t, &f_t));
    if (c->tc != c->root) LL_TRY(get_bool(c, c->root, "", "tie_word_embeddings", &tie_r, &f_r));
    if (f_t && f_r && tie_t != tie_r)
        return ll_err(LL_ERR_FORMAT, "%s: %stie_word_embeddings = %s contradicts tie_word_embeddings = %s", c->src, p,
                      tie_t ? "true" : "false", tie_r ? "true" : "false");
    hp->tie_embeddings = f_r ? tie_r : tie_t;
    hp->eos_token_id = -1;
    LL_TRY(get_eos(c, tc, p, &hp->eos_token_id, &found));
    if (!found && c->tc != c->root) LL_TRY(get_eos(c, c->root, "", &hp->eos_token_id, &found));
    LL_TRY(parse_layers(c, hp));
    if (hp->head_dim <= 0) return ll_err(LL_ERR_FORMAT, "%s: %shead_dim = %d is not positive", c->src, p, hp->head_dim);
    LL_TRY(parse_rope(c, hp));
    hp->gdn_v_tiled = 0;
    return LL_OK;
}

ll_status hfconfig_parse(const char *json, size_t len, const char *src, qwen_hparams *hp, hf_quant *q) {
    memset(hp, 0, sizeof(*hp));
    if (q) memset(q, 0, sizeof(*q));
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) return ll_err(LL_ERR_FORMAT, "%s: malformed JSON", src);
    ll_status st = LL_OK;
    cfg c = {src, root, root, ""};
    if (!cJSON_IsObject(root)) { st = ll_err(LL_ERR_FORMAT, "%s: not a JSON object", src); goto done; }
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (!cJSON_IsString(mt)) { st = ll_err(LL_ERR_FORMAT, "%s: model_type is missing", src); goto done; }
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    if (!strcmp(mt->valuestring, "qwen3_5_moe") && tc) {
        if (!cJSON_IsObject(tc)) { st = ll_err(LL_ERR_FORMAT, "%s: text_config is not an object", src); goto done; }
        const cJSON *tmt = cJSON_GetObjectItemCaseSensitive(tc, "model_type");
        if (tmt && (!cJSON_IsString(tmt) || strcmp(tmt->valuestring, "qwen3_5_moe_text") != 0)) {
            st = ll_err(LL_ERR_UNSUPPORTED, "%s: text_config.model_type is not \"qwen3_5_moe_text\"", src);
            goto done;
        }
        c.tc = tc;
        c.prefix = "text_config.";
    } else if (strcmp(mt->valuestring, "qwen3_5_moe_text") != 0 && strcmp(mt->valuestring, "qwen3_5_moe") != 0) {
        st = ll_err(LL_ERR_UNSUPPORTED, "%s: model_type \"%s\" is not supported (qwen3_5_moe)", src, mt->valuestring);
        goto done;
    }
    if ((st = parse_text(&c, hp)) != LL_OK) goto done;
    if ((st = hfconfig_check(hp, src, c.prefix)) != LL_OK) goto done;
    if (q && (st = parse_quant(&c, q)) != LL_OK) { hf_quant_free(q); goto done; }
done:
    cJSON_Delete(root);
    return st;
}

ll_status hfconfig_check(const qwen_hparams *hp, const char *src, const char *p) {
#define POS(field, name) \
    if (hp->field <= 0) return ll_err(LL_ERR_FORMAT, "%s: %s" name " = %d must be positive", src, p, (int)hp->field)
    POS(n_vocab, "vocab_size");
    POS(n_embd, "hidden_size");
    POS(n_layer, "num_hidden_layers");
    POS(n_head, "num_attention_heads");
    POS(n_head_kv, "num_key_value_heads");
    POS(head_dim, "head_dim");
    POS(gdn_n_k_heads, "linear_num_key_heads");
    POS(gdn_n_v_heads, "linear_num_value_heads");
    POS(gdn_k_dim, "linear_key_head_dim");
    POS(gdn_v_dim, "linear_value_head_dim");
    POS(gdn_conv_k, "linear_conv_kernel_dim");
    POS(n_expert, "num_experts");
    POS(n_expert_used, "num_experts_per_tok");
    POS(n_ff_exp, "moe_intermediate_size");
    POS(n_ctx_train, "max_position_embeddings");
#undef POS
    if (hp->n_layer > QWEN_MAX_LAYERS)
        return ll_err(LL_ERR_UNSUPPORTED, "%s: %snum_hidden_layers = %d exceeds the supported %d", src, p, hp->n_layer, QWEN_MAX_LAYERS);
    if (hp->n_ff_shexp < 0) return ll_err(LL_ERR_FORMAT, "%s: %sshared_expert_intermediate_size = %d is negative", src, p, hp->n_ff_shexp);
    if (hp->n_head % hp->n_head_kv != 0)
        return ll_err(LL_ERR_FORMAT, "%s: %snum_key_value_heads = %d does not divide num_attention_heads = %d", src, p, hp->n_head_kv, hp->n_head);
    if (hp->gdn_n_v_heads % hp->gdn_n_k_heads != 0)
        return ll_err(LL_ERR_FORMAT, "%s: %slinear_num_key_heads = %d does not divide linear_num_value_heads = %d", src, p, hp->gdn_n_k_heads,
                      hp->gdn_n_v_heads);
    if (hp->n_expert_used > hp->n_expert)
        return ll_err(LL_ERR_FORMAT, "%s: %snum_experts_per_tok = %d exceeds num_experts = %d", src, p, hp->n_expert_used, hp->n_expert);
    if (hp->n_expert_used > QWEN_MAX_EXPERTS_USED)
        return ll_err(LL_ERR_UNSUPPORTED, "%s: %snum_experts_per_tok = %d exceeds the supported %d", src, p, hp->n_expert_used, QWEN_MAX_EXPERTS_USED);
    if (hp->n_rot <= 0 || hp->n_rot % 2 != 0 || hp->n_rot > hp->head_dim)
        return ll_err(LL_ERR_FORMAT, "%s: %srotary dims = %d (head_dim × partial_rotary_factor) must be even and in 2..head_dim = %d", src, p,
                      hp->n_rot, hp->head_dim);
    if (!(hp->rope_theta > 0) || !isfinite(hp->rope_theta))
        return ll_err(LL_ERR_FORMAT, "%s: %srope_theta = %g must be positive", src, p, (double)hp->rope_theta);
    if (!(hp->rms_eps > 0 && hp->rms_eps < 1))
        return ll_err(LL_ERR_FORMAT, "%s: %srms_norm_eps = %g must be in (0, 1)", src, p, (double)hp->rms_eps);
    if (hp->gdn_conv_k < 2 || hp->gdn_conv_k > 16)
        return ll_err(LL_ERR_UNSUPPORTED, "%s: %slinear_conv_kernel_dim = %d is outside 2..16", src, p, hp->gdn_conv_k);
    for (int i = 0; i < hp->n_layer; i++)
        if (hp->is_attn[i] > 1) return ll_err(LL_ERR_FORMAT, "%s: %slayer_types[%d] is invalid", src, p, i);
    /* sizes the graph multiplies together must stay far from int32 overflow */
    if ((int64_t)hp->n_head * 2 * hp->head_dim > (1 << 24) || (int64_t)qwen_gdn_conv_dim(hp) > (1 << 24) ||
        (int64_t)hp->n_expert > (1 << 16) || hp->n_embd > (1 << 20) || hp->n_ff_exp > (1 << 20) || hp->n_ff_shexp > (1 << 20))
        return ll_err(LL_ERR_UNSUPPORTED, "%s: %sdimensions are implausibly large", src, p);
    if (hp->eos_token_id >= hp->n_vocab)
        return ll_err(LL_ERR_FORMAT, "%s: %seos_token_id = %d is outside vocab_size = %d", src, p, hp->eos_token_id, hp->n_vocab);
    return LL_OK;
}

ll_status qwen_hparams_validate(const qwen_hparams *hp, const char *src) { return hfconfig_check(hp, src, ""); }
