/*
 * synth.c — random-weight qwen3_5_moe models (see synth.h). The safetensors directory uses the
 * real release's tensor names (`model.language_model.*`, fused experts, F32 A_log and GDN norm)
 * and its nested config.json; the GGUF output is that directory converted by convert.c.
 */
#include "synth.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/mapfile.h"
#include "base/threadpool.h"
#include "convert.h"
#include "tokenizer/tokenizer.h"

/* ---------------------------------------------------------------- presets */

static void preset_common(qwen_hparams *hp) {
    hp->rope_theta = 10000000.0f;
    hp->rms_eps = 1e-6f;
    hp->gdn_conv_k = 4;
    hp->n_ctx_train = 262144;
    hp->tie_embeddings = 0;
}

ll_status synth_preset(const char *name, qwen_hparams *hp) {
    memset(hp, 0, sizeof(*hp));
    preset_common(hp);
    if (!strcmp(name, "tiny")) { /* shared/fixtures/tiny */
        hp->n_vocab = 512, hp->n_embd = 128, hp->n_layer = 4;
        hp->is_attn[3] = 1;
        hp->n_head = 4, hp->n_head_kv = 2, hp->head_dim = 64;
        hp->gdn_n_k_heads = 2, hp->gdn_n_v_heads = 4, hp->gdn_k_dim = 32, hp->gdn_v_dim = 32;
        hp->n_expert = 8, hp->n_expert_used = 2, hp->n_ff_exp = 64, hp->n_ff_shexp = 64;
    } else if (!strcmp(name, "small")) { /* shared/fixtures/small */
        hp->n_vocab = 512, hp->n_embd = 256, hp->n_layer = 3;
        hp->is_attn[1] = 1;
        hp->n_head = 8, hp->n_head_kv = 2, hp->head_dim = 128;
        hp->gdn_n_k_heads = 4, hp->gdn_n_v_heads = 8, hp->gdn_k_dim = 64, hp->gdn_v_dim = 64;
        hp->n_expert = 4, hp->n_expert_used = 2, hp->n_ff_exp = 256, hp->n_ff_shexp = 256;
    } else if (!strcmp(name, "qwen3.6-35b-a3b")) { /* reference/qwen35-moe-spec.md §1.1 */
        hp->n_vocab = 248320, hp->n_embd = 2048, hp->n_layer = 40;
        for (int i = 0; i < 40; i++) hp->is_attn[i] = (i + 1) % 4 == 0;
        hp->n_head = 16, hp->n_head_kv = 2, hp->head_dim = 256;
        hp->gdn_n_k_heads = 16, hp->gdn_n_v_heads = 32, hp->gdn_k_dim = 128, hp->gdn_v_dim = 128;
        hp->n_expert = 256, hp->n_expert_used = 8, hp->n_ff_exp = 512, hp->n_ff_shexp = 512;
    } else {
        return ll_err(LL_ERR_INVALID, "synth: unknown preset '%s' (tiny, small, qwen3.6-35b-a3b)", name);
    }
    hp->n_rot = hp->head_dim / 4; /* partial_rotary_factor 0.25 */
    hp->eos_token_id = hp->n_vocab - 2;
    return LL_OK;
}

/* ---------------------------------------------------------------- small file helpers */

/* dst = a + b; an error when it does not fit. */
static ll_status pjoin(char *dst, size_t cap, const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la + lb + 1 > cap) return ll_err(LL_ERR_INVALID, "path too long: %s%s", a, b);
    memcpy(dst, a, la);
    memcpy(dst + la, b, lb + 1);
    return LL_OK;
}

static ll_status write_text(const char *path, const char *text) {
    char tmp[4200];
    LL_TRY(pjoin(tmp, sizeof(tmp), path, ".tmp"));
    FILE *f = fopen(tmp, "wb");
    if (!f) return ll_err(LL_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    size_t n = strlen(text);
    int ok = fwrite(text, 1, n, f) == n;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        return ll_err(LL_ERR_IO, "%s: write failed: %s", path, strerror(e));
    }
    return LL_OK;
}

static ll_status write_json(const char *path, cJSON *j) {
    char *s = j ? cJSON_Print(j) : NULL;
    if (!s) return ll_err(LL_ERR_OOM, "%s: out of memory", path);
    ll_status st = write_text(path, s);
    cJSON_free(s);
    return st;
}

static ll_status copy_file(const char *from, const char *to) {
    char *buf;
    size_t len;
    LL_TRY(ll_read_file(from, &buf, &len));
    ll_status st = write_text(to, buf); /* text files only: tokenizer JSON and templates */
    if (st == LL_OK && strlen(buf) != len) st = ll_err(LL_ERR_FORMAT, "%s: contains NUL bytes", from);
    ll_free(buf);
    return st;
}

static int file_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* ---------------------------------------------------------------- config.json */

static void mrope_sections(int n_rot, int sec[3]) {
    /* the three sections split the n_rot/2 rotary pairs; the real model has [11, 11, 10] */
    int half = n_rot / 2;
    sec[0] = (half + 2) / 3;
    sec[1] = (half - sec[0] + 1) / 2;
    sec[2] = half - sec[0] - sec[1];
}

ll_status synth_write_config(const qwen_hparams *hp, const char *path) {
    cJSON *root = cJSON_CreateObject(), *tc = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "architectures", cJSON_CreateStringArray((const char *[]){"Qwen3_5MoeForConditionalGeneration"}, 1));
    cJSON_AddStringToObject(root, "model_type", "qwen3_5_moe");
    cJSON_AddItemToObject(root, "text_config", tc);
    cJSON_AddStringToObject(tc, "model_type", "qwen3_5_moe_text");
    cJSON_AddNumberToObject(tc, "vocab_size", hp->n_vocab);
    cJSON_AddNumberToObject(tc, "hidden_size", hp->n_embd);
    cJSON_AddNumberToObject(tc, "num_hidden_layers", hp->n_layer);
    cJSON *lt = cJSON_AddArrayToObject(tc, "layer_types");
    for (int i = 0; i < hp->n_layer; i++) cJSON_AddItemToArray(lt, cJSON_CreateString(hp->is_attn[i] ? "full_attention" : "linear_attention"));
    cJSON_AddNumberToObject(tc, "full_attention_interval", 4);
    cJSON_AddNumberToObject(tc, "num_attention_heads", hp->n_head);
    cJSON_AddNumberToObject(tc, "num_key_value_heads", hp->n_head_kv);
    cJSON_AddNumberToObject(tc, "head_dim", hp->head_dim);
    cJSON_AddBoolToObject(tc, "attn_output_gate", 1);
    cJSON_AddBoolToObject(tc, "attention_bias", 0);
    cJSON_AddNumberToObject(tc, "linear_num_key_heads", hp->gdn_n_k_heads);
    cJSON_AddNumberToObject(tc, "linear_num_value_heads", hp->gdn_n_v_heads);
    cJSON_AddNumberToObject(tc, "linear_key_head_dim", hp->gdn_k_dim);
    cJSON_AddNumberToObject(tc, "linear_value_head_dim", hp->gdn_v_dim);
    cJSON_AddNumberToObject(tc, "linear_conv_kernel_dim", hp->gdn_conv_k);
    cJSON_AddStringToObject(tc, "mamba_ssm_dtype", "float32");
    cJSON_AddNumberToObject(tc, "num_experts", hp->n_expert);
    cJSON_AddNumberToObject(tc, "num_experts_per_tok", hp->n_expert_used);
    cJSON_AddNumberToObject(tc, "moe_intermediate_size", hp->n_ff_exp);
    cJSON_AddNumberToObject(tc, "shared_expert_intermediate_size", hp->n_ff_shexp);
    cJSON_AddStringToObject(tc, "hidden_act", "silu");
    cJSON_AddNumberToObject(tc, "rms_norm_eps", hp->rms_eps);
    cJSON_AddNumberToObject(tc, "max_position_embeddings", hp->n_ctx_train);
    cJSON_AddBoolToObject(tc, "tie_word_embeddings", hp->tie_embeddings);
    double prf = hp->head_dim > 0 ? (double)hp->n_rot / hp->head_dim : 0.25;
    cJSON *rp = cJSON_AddObjectToObject(tc, "rope_parameters");
    cJSON_AddStringToObject(rp, "rope_type", "default");
    cJSON_AddNumberToObject(rp, "rope_theta", hp->rope_theta);
    cJSON_AddNumberToObject(rp, "partial_rotary_factor", prf);
    cJSON_AddBoolToObject(rp, "mrope_interleaved", 1);
    int sec[3];
    mrope_sections(hp->n_rot, sec);
    cJSON_AddItemToObject(rp, "mrope_section", cJSON_CreateIntArray(sec, 3));
    cJSON_AddNumberToObject(tc, "partial_rotary_factor", prf);
    cJSON_AddNullToObject(tc, "bos_token_id");
    if (hp->eos_token_id >= 0) cJSON_AddNumberToObject(tc, "eos_token_id", hp->eos_token_id);
    else cJSON_AddNullToObject(tc, "eos_token_id");
    cJSON_AddNullToObject(tc, "pad_token_id");
    cJSON_AddStringToObject(tc, "dtype", "bfloat16");
    cJSON_AddBoolToObject(root, "tie_word_embeddings", hp->tie_embeddings);
    ll_status st = write_json(path, root);
    cJSON_Delete(root);
    return st;
}

/* ---------------------------------------------------------------- tensors */

typedef enum { G_NORMAL, G_ALOG } gen_kind;

typedef struct syn_tensor {
    char name[192];
    ll_type type;
    int nd;
    int64_t shape[3];
    gen_kind kind;
    float mean, std;
} syn_tensor;

typedef struct syn_list {
    syn_tensor *t;
    int n, cap;
} syn_list;

static ll_status add_t(syn_list *l, const char *name, ll_type type, int nd, int64_t a, int64_t b, int64_t c, gen_kind k, float mean, float std) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 64;
        syn_tensor *nt = ll_realloc(l->t, (size_t)cap * sizeof(*nt));
        if (!nt) return ll_err(LL_ERR_OOM, "synth: out of memory");
        l->t = nt;
        l->cap = cap;
    }
    syn_tensor *t = &l->t[l->n++];
    memset(t, 0, sizeof(*t));
    snprintf(t->name, sizeof(t->name), "%s", name);
    t->type = type;
    t->nd = nd;
    t->shape[0] = a, t->shape[1] = b, t->shape[2] = c;
    t->kind = k;
    t->mean = mean;
    t->std = std;
    return LL_OK;
}

/* The release's tensors for hp (reference/qwen35-moe-spec.md §2); mats in `wt`. */
static ll_status build_list(const qwen_hparams *hp, ll_type wt, syn_list *l) {
    const char *P = "model.language_model.";
    char nm[192];
    int64_t H = hp->n_embd, V = hp->n_vocab;
    float sh = 1.0f / sqrtf((float)H);
#define N(...) snprintf(nm, sizeof(nm), __VA_ARGS__)
    N("%sembed_tokens.weight", P);
    LL_TRY(add_t(l, nm, wt, 2, V, H, 0, G_NORMAL, 0, 1.0f));
    N("%snorm.weight", P);
    LL_TRY(add_t(l, nm, wt, 1, H, 0, 0, G_NORMAL, 0, 0.2f));
    if (!hp->tie_embeddings) LL_TRY(add_t(l, "lm_head.weight", wt, 2, V, H, 0, G_NORMAL, 0, 3.0f * sh));
    for (int i = 0; i < hp->n_layer; i++) {
        N("%slayers.%d.input_layernorm.weight", P, i);
        LL_TRY(add_t(l, nm, wt, 1, H, 0, 0, G_NORMAL, 0, 0.2f));
        N("%slayers.%d.post_attention_layernorm.weight", P, i);
        LL_TRY(add_t(l, nm, wt, 1, H, 0, 0, G_NORMAL, 0, 0.2f));
        if (hp->is_attn[i]) {
            int64_t NH = hp->n_head, NKV = hp->n_head_kv, HD = hp->head_dim;
            N("%slayers.%d.self_attn.q_proj.weight", P, i);
            LL_TRY(add_t(l, nm, wt, 2, NH * 2 * HD, H, 0, G_NORMAL, 0, sh));
            N("%slayers.%d.self_attn.k_proj.weight", P, i);
            LL_TRY(add_t(l, nm, wt, 2, NKV * HD, H, 0, G_NORMAL, 0, sh));
            N("%slayers.%d.self_attn.v_proj.weight", P, i);
            LL_TRY(add_t(l, nm, wt, 2, NKV * HD, H, 0, G_NORMAL, 0, sh));
            N("%slayers.%d.self_attn.o_proj.weight", P, i);
            LL_TRY(add_t(l, nm, wt, 2, H, NH * HD, 0, G_NORMAL, 0, 1.0f / sqrtf((float)(NH * HD))));
            N("%slayers.%d.self_attn.q_norm.weight", P, i);
            LL_TRY(add_t(l, nm, wt, 1, HD, 0, 0, G_NORMAL, 0, 0.2f));
            N("%slayers.%d.self_attn.k_norm.weight", P, i);
            LL_TRY(add_t(l, nm, wt, 1, HD, 0, 0, G_NORMAL, 0, 0.2f));
        } else {
            int64_t HV = hp->gdn_n_v_heads, VD = qwen_gdn_v_dim(hp), C = qwen_gdn_conv_dim(hp);
            N("%slayers.%d.linear_attn.in_proj_qkv.weight", P, i);
            LL_TRY(add_t(l, nm, wt, 2, C, H, 0, G_NORMAL, 0, sh));
            N("%slayers.%d.linear_attn.in_proj_z.weight", P, i);
            LL_TRY(add_t(l, nm, wt, 2, VD, H, 0, G_NORMAL, 0, sh));
            N("%slayers.%d.linear_attn.in_proj_b.weight", P, i);
            LL_TRY(add_t(l, nm, wt, 2, HV, H, 0, G_NORMAL, 0, sh));
            N("%slayers.%d.linear_attn.in_proj_a.weight", P, i);
            LL_TRY(add_t(l, nm, wt, 2, HV, H, 0, G_NORMAL, 0, sh));
            N("%slayers.%d.linear_attn.conv1d.weight", P, i);
            LL_TRY(add_t(l, nm, wt, 3, C, 1, hp->gdn_conv_k, G_NORMAL, 0, 0.5f));
            N("%slayers.%d.linear_attn.dt_bias", P, i);
            LL_TRY(add_t(l, nm, wt, 1, HV, 0, 0, G_NORMAL, 0, 0.5f));
            N("%slayers.%d.linear_attn.A_log", P, i); /* F32 in the release */
            LL_TRY(add_t(l, nm, LL_TYPE_F32, 1, HV, 0, 0, G_ALOG, 0, 0));
            N("%slayers.%d.linear_attn.norm.weight", P, i); /* plain gain, F32 in the release */
            LL_TRY(add_t(l, nm, LL_TYPE_F32, 1, hp->gdn_v_dim, 0, 0, G_NORMAL, 1.0f, 0.2f));
            N("%slayers.%d.linear_attn.out_proj.weight", P, i);
            LL_TRY(add_t(l, nm, wt, 2, H, VD, 0, G_NORMAL, 0, 1.0f / sqrtf((float)VD)));
        }
        int64_t E = hp->n_expert, FF = hp->n_ff_exp, FS = hp->n_ff_shexp;
        N("%slayers.%d.mlp.gate.weight", P, i);
        LL_TRY(add_t(l, nm, wt, 2, E, H, 0, G_NORMAL, 0, 2.0f * sh));
        N("%slayers.%d.mlp.experts.gate_up_proj", P, i);
        LL_TRY(add_t(l, nm, wt, 3, E, 2 * FF, H, G_NORMAL, 0, sh));
        N("%slayers.%d.mlp.experts.down_proj", P, i);
        LL_TRY(add_t(l, nm, wt, 3, E, H, FF, G_NORMAL, 0, 1.0f / sqrtf((float)FF)));
        if (FS > 0) {
            N("%slayers.%d.mlp.shared_expert.gate_proj.weight", P, i);
            LL_TRY(add_t(l, nm, wt, 2, FS, H, 0, G_NORMAL, 0, sh));
            N("%slayers.%d.mlp.shared_expert.up_proj.weight", P, i);
            LL_TRY(add_t(l, nm, wt, 2, FS, H, 0, G_NORMAL, 0, sh));
            N("%slayers.%d.mlp.shared_expert.down_proj.weight", P, i);
            LL_TRY(add_t(l, nm, wt, 2, H, FS, 0, G_NORMAL, 0, 1.0f / sqrtf((float)FS)));
            N("%slayers.%d.mlp.shared_expert_gate.weight", P, i);
            LL_TRY(add_t(l, nm, wt, 2, 1, H, 0, G_NORMAL, 0, sh));
        }
    }
#undef N
    return LL_OK;
}

static int64_t t_cols(const syn_tensor *t) { return t->shape[t->nd - 1]; }
static int64_t t_rows(const syn_tensor *t) {
    int64_t r = 1;
    for (int d = 0; d < t->nd - 1; d++) r *= t->shape[d];
    return r;
}
static size_t t_bytes(const syn_tensor *t) { return (size_t)t_rows(t) * quant_row_bytes(t->type, t_cols(t)); }

/* ---------------------------------------------------------------- random numbers */

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static uint64_t next64(uint64_t *s) { return mix64(*s += 0x9e3779b97f4a7c15ULL); }
static float unif01(uint64_t *s) { return ((float)(next64(s) >> 40) + 0.5f) * (1.0f / 16777216.0f); } /* (0, 1) */

static uint64_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ULL;
    return h;
}

/* Row r of tensor t into dst[cols] (fp32), from (seed, name, r) alone. */
static void gen_row(const syn_tensor *t, uint64_t tseed, int64_t r, float *dst) {
    uint64_t s = mix64(tseed ^ mix64((uint64_t)r + 0x632be59bd9b4e019ULL));
    int64_t n = t_cols(t);
    if (t->kind == G_ALOG) {
        for (int64_t i = 0; i < n; i++) dst[i] = logf(unif01(&s) * 15.0f + 1.0f);
        return;
    }
    for (int64_t i = 0; i < n; i += 2) { /* Box-Muller: two normals per pair of uniforms */
        float u1 = unif01(&s), u2 = unif01(&s);
        float rad = sqrtf(-2.0f * logf(u1)), ang = 6.28318530718f * u2;
        dst[i] = t->mean + t->std * rad * cosf(ang);
        if (i + 1 < n) dst[i + 1] = t->mean + t->std * rad * sinf(ang);
    }
}

typedef struct gen_job {
    const syn_tensor *t;
    uint64_t tseed;
    int64_t r0, nr;
    uint8_t *out;      /* [nr] rows of the tensor's type */
    float *scratch;    /* [nth][cols] */
} gen_job;

static void gen_worker(void *ctx, int ith, int nth) {
    gen_job *j = ctx;
    int64_t lo, hi, cols = t_cols(j->t);
    ll_split_range(j->nr, ith, nth, &lo, &hi);
    float *f = j->scratch + (size_t)ith * (size_t)cols;
    size_t rb = quant_row_bytes(j->t->type, cols);
    for (int64_t r = lo; r < hi; r++) {
        gen_row(j->t, j->tseed, j->r0 + r, f);
        quant_quantize_row(j->t->type, f, j->out + (size_t)r * rb, cols);
    }
}

/* ---------------------------------------------------------------- safetensors (streamed) */

static ll_status write_safetensors(const syn_list *l, uint64_t seed, int threads, const char *path, int quiet) {
    size_t cap = 4096 + (size_t)l->n * 320, len = 0, off = 0;
    char *hdr = ll_malloc(cap);
    if (!hdr) return ll_err(LL_ERR_OOM, "%s: out of memory", path);
    len += (size_t)snprintf(hdr + len, cap - len, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < l->n; i++) {
        const syn_tensor *t = &l->t[i];
        const char *dt = t->type == LL_TYPE_F32 ? "F32" : "BF16";
        size_t nb = t_bytes(t);
        len += (size_t)snprintf(hdr + len, cap - len, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t->name, dt);
        for (int d = 0; d < t->nd; d++) len += (size_t)snprintf(hdr + len, cap - len, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        len += (size_t)snprintf(hdr + len, cap - len, "],\"data_offsets\":[%zu,%zu]}", off, off + nb);
        off += nb;
    }
    len += (size_t)snprintf(hdr + len, cap - len, "}");
    LL_ASSERT(len + 8 < cap);
    while (len % 8) hdr[len++] = ' ';

    char tmp[4200];
    ll_status st = pjoin(tmp, sizeof(tmp), path, ".tmp");
    if (st != LL_OK) { ll_free(hdr); return st; }
    ll_pool *pool = ll_pool_new(threads);
    FILE *f = NULL;
    float *scratch = NULL;
    uint8_t *buf = NULL;
    int64_t max_cols = 1;
    for (int i = 0; i < l->n; i++) max_cols = LL_MAX(max_cols, t_cols(&l->t[i]));
    int tty = isatty(2);
    const size_t chunk = (size_t)16 << 20;
    if (!pool) { st = ll_err(LL_ERR_OOM, "synth: cannot start threads"); goto done; }
    scratch = ll_malloc((size_t)ll_pool_size(pool) * (size_t)max_cols * sizeof(float));
    buf = ll_malloc(chunk + (size_t)max_cols * 4);
    if (!scratch || !buf) { st = ll_err(LL_ERR_OOM, "synth: out of memory"); goto done; }
    if (!(f = fopen(tmp, "wb"))) { st = ll_err(LL_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno)); goto done; }
    uint64_t hl = len;
    if (fwrite(&hl, 8, 1, f) != 1 || fwrite(hdr, 1, len, f) != len) goto werr;
    for (int i = 0; i < l->n; i++) {
        const syn_tensor *t = &l->t[i];
        int64_t rows = t_rows(t);
        size_t rb = quant_row_bytes(t->type, t_cols(t));
        int64_t per = LL_MAX(1, (int64_t)(chunk / rb));
        gen_job j = {t, mix64(seed ^ name_hash(t->name)), 0, 0, buf, scratch};
        for (int64_t r = 0; r < rows; r += per) {
            j.r0 = r;
            j.nr = LL_MIN(per, rows - r);
            ll_pool_run(pool, gen_worker, &j);
            if (fwrite(buf, rb, (size_t)j.nr, f) != (size_t)j.nr) goto werr;
        }
        if (!quiet && tty) fprintf(stderr, "\rsynth: %d/%d tensors", i + 1, l->n);
    }
    if (!quiet) fprintf(stderr, "%ssynth: %d tensors written\n", tty ? "\r" : "", l->n);
    if (fclose(f) != 0) { f = NULL; goto werr; }
    f = NULL;
    if (rename(tmp, path) != 0) goto werr;
    goto done;
werr:
    st = ll_err(LL_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
    if (f) fclose(f);
    f = NULL;
    remove(tmp);
done:
    if (f) { fclose(f); remove(tmp); }
    ll_free(scratch);
    ll_free(buf);
    ll_free(hdr);
    ll_pool_free(pool);
    return st;
}

/* ---------------------------------------------------------------- tokenizer files */

/* ChatML, the format of every Qwen chat template (used only when no template is available). */
static const char *k_default_template =
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

/* GPT-2 byte → code point (printable bytes map to themselves, the rest to 256 + k). */
static int byte_cp(int b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) return b;
    int k = 0;
    for (int c = 0; c < b; c++)
        if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255))) k++;
    return 256 + k;
}

static void put_utf8(char *o, int cp) {
    if (cp < 0x80) { o[0] = (char)cp; o[1] = 0; }
    else { o[0] = (char)(0xc0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3f)); o[2] = 0; }
}

/* A byte-level BPE tokenizer with the 256 byte tokens, no merges, and the Qwen control tokens;
 * the ids up to n_vocab are filled with <|extra_N|> control tokens. */
static const char *k_added[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>"};

static ll_status write_byte_tokenizer(const char *dir, int32_t n_vocab, int32_t *eos, int32_t *pad) {
    int n_named = (int)LL_ARRAY_LEN(k_added);
    if (n_vocab < 256 + n_named)
        return ll_err(LL_ERR_INVALID, "synth: vocabulary %d is too small for a byte-level tokenizer (needs %d)", n_vocab, 256 + n_named);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON_AddNullToObject(root, "truncation");
    cJSON_AddNullToObject(root, "padding");
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    for (int32_t id = 256; id < n_vocab; id++) {
        char nm[48];
        int k = id - 256;
        if (k < n_named) snprintf(nm, sizeof(nm), "%s", k_added[k]);
        else snprintf(nm, sizeof(nm), "<|extra_%d|>", k - n_named);
        cJSON *a = cJSON_CreateObject();
        cJSON_AddNumberToObject(a, "id", id);
        cJSON_AddStringToObject(a, "content", nm);
        cJSON_AddBoolToObject(a, "single_word", 0);
        cJSON_AddBoolToObject(a, "lstrip", 0);
        cJSON_AddBoolToObject(a, "rstrip", 0);
        cJSON_AddBoolToObject(a, "normalized", 0);
        cJSON_AddBoolToObject(a, "special", k < 3 || k >= n_named);
        cJSON_AddItemToArray(added, a);
    }
    cJSON *norm = cJSON_AddObjectToObject(root, "normalizer");
    cJSON_AddStringToObject(norm, "type", "NFC");
    cJSON *pre = cJSON_AddObjectToObject(root, "pre_tokenizer");
    cJSON_AddStringToObject(pre, "type", "Sequence");
    cJSON *pts = cJSON_AddArrayToObject(pre, "pretokenizers");
    cJSON *sp = cJSON_CreateObject();
    cJSON_AddStringToObject(sp, "type", "Split");
    cJSON *pat = cJSON_AddObjectToObject(sp, "pattern");
    cJSON_AddStringToObject(pat, "Regex", tok_pre_regex("qwen2"));
    cJSON_AddStringToObject(sp, "behavior", "Isolated");
    cJSON_AddBoolToObject(sp, "invert", 0);
    cJSON_AddItemToArray(pts, sp);
    cJSON *bl = cJSON_CreateObject();
    cJSON_AddStringToObject(bl, "type", "ByteLevel");
    cJSON_AddBoolToObject(bl, "add_prefix_space", 0);
    cJSON_AddBoolToObject(bl, "trim_offsets", 0);
    cJSON_AddBoolToObject(bl, "use_regex", 0);
    cJSON_AddItemToArray(pts, bl);
    cJSON *dec = cJSON_AddObjectToObject(root, "decoder");
    cJSON_AddStringToObject(dec, "type", "ByteLevel");
    cJSON_AddBoolToObject(dec, "add_prefix_space", 0);
    cJSON_AddBoolToObject(dec, "trim_offsets", 0);
    cJSON_AddBoolToObject(dec, "use_regex", 0);
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddNullToObject(model, "dropout");
    cJSON_AddNullToObject(model, "unk_token");
    cJSON_AddBoolToObject(model, "byte_fallback", 0);
    cJSON_AddBoolToObject(model, "ignore_merges", 0);
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    for (int b = 0; b < 256; b++) {
        char s[4];
        put_utf8(s, byte_cp(b));
        cJSON_AddNumberToObject(vocab, s, b);
    }
    cJSON_AddArrayToObject(model, "merges");
    char path[4200];
    ll_status st = pjoin(path, sizeof(path), dir, "/tokenizer.json");
    if (st == LL_OK) st = write_json(path, root);
    cJSON_Delete(root);
    *eos = 256 + 2; /* <|im_end|> */
    *pad = 256;     /* <|endoftext|> */
    return st;
}

/* tokenizer_config.json for a tokenizer that came without one. */
static ll_status write_tok_config(const char *dir, const tok_tokenizer *t, int32_t eos, int32_t pad) {
    cJSON *c = cJSON_CreateObject();
    cJSON_AddBoolToObject(c, "add_bos_token", 0);
    cJSON_AddBoolToObject(c, "add_prefix_space", 0);
    const char *e = eos >= 0 ? tok_piece(t, eos) : NULL, *p = pad >= 0 ? tok_piece(t, pad) : NULL;
    if (e) cJSON_AddStringToObject(c, "eos_token", e);
    if (p) cJSON_AddStringToObject(c, "pad_token", p);
    cJSON_AddNullToObject(c, "bos_token");
    cJSON_AddNumberToObject(c, "model_max_length", 262144);
    cJSON_AddStringToObject(c, "tokenizer_class", "Qwen2Tokenizer");
    char path[4200];
    ll_status st = pjoin(path, sizeof(path), dir, "/tokenizer_config.json");
    if (st == LL_OK) st = write_json(path, c);
    cJSON_Delete(c);
    return st;
}

/* Copies/creates tokenizer.json, tokenizer_config.json and chat_template.jinja in `dir`; sets
 * the vocabulary and eos of *hp from the tokenizer. */
static ll_status write_tokenizer(const synth_opts *o, const char *dir, qwen_hparams *hp, int32_t eos_ids[2], int *n_eos) {
    char src_json[4200], src_dir[4200], dst[4200], p[4200];
    int32_t eos = -1, pad = -1;
    *n_eos = 0;
    if (o->tokenizer) {
        struct stat sb;
        if (stat(o->tokenizer, &sb) != 0) return ll_err(LL_ERR_IO, "%s: cannot open: %s", o->tokenizer, strerror(errno));
        if (S_ISDIR(sb.st_mode)) {
            LL_TRY(pjoin(src_dir, sizeof(src_dir), o->tokenizer, ""));
            LL_TRY(pjoin(src_json, sizeof(src_json), o->tokenizer, "/tokenizer.json"));
        } else {
            LL_TRY(pjoin(src_json, sizeof(src_json), o->tokenizer, ""));
            const char *sl = strrchr(o->tokenizer, '/');
            if (sl) snprintf(src_dir, sizeof(src_dir), "%.*s", (int)(sl - o->tokenizer), o->tokenizer);
            else snprintf(src_dir, sizeof(src_dir), ".");
        }
        LL_TRY(pjoin(dst, sizeof(dst), dir, "/tokenizer.json"));
        LL_TRY(copy_file(src_json, dst));
        LL_TRY(pjoin(p, sizeof(p), src_dir, "/tokenizer_config.json"));
        LL_TRY(pjoin(dst, sizeof(dst), dir, "/tokenizer_config.json"));
        int have_cfg = 0;
        if (file_exists(p)) { LL_TRY(copy_file(p, dst)); have_cfg = 1; }
        LL_TRY(pjoin(p, sizeof(p), src_dir, "/chat_template.jinja"));
        LL_TRY(pjoin(dst, sizeof(dst), dir, "/chat_template.jinja"));
        if (!o->chat_template && file_exists(p)) LL_TRY(copy_file(p, dst));
        tok_tokenizer *t;
        LL_TRY(tok_load_file(dir, &t));
        hp->n_vocab = tok_n_vocab(t);
        eos = tok_eos(t);
        if (eos < 0) eos = tok_find(t, "<|im_end|>");
        if (eos < 0) eos = tok_find(t, "<|endoftext|>");
        pad = tok_pad(t);
        if (pad < 0) pad = tok_find(t, "<|endoftext|>");
        ll_status st = have_cfg ? LL_OK : write_tok_config(dir, t, eos, pad);
        int has_tmpl = tok_chat_template(t) != NULL;
        int32_t eot = tok_find(t, "<|endoftext|>");
        tok_free(t);
        LL_TRY(st);
        if (eos >= 0) eos_ids[(*n_eos)++] = eos;
        if (eot >= 0 && eot != eos) eos_ids[(*n_eos)++] = eot;
        if (!o->chat_template && !has_tmpl) LL_TRY(write_text(dst, k_default_template));
    } else {
        LL_TRY(write_byte_tokenizer(dir, hp->n_vocab, &eos, &pad));
        tok_tokenizer *t;
        LL_TRY(tok_load_file(dir, &t));
        ll_status st = write_tok_config(dir, t, eos, pad);
        tok_free(t);
        LL_TRY(st);
        eos_ids[(*n_eos)++] = eos;
        eos_ids[(*n_eos)++] = pad;
        if (!o->chat_template) {
            LL_TRY(pjoin(dst, sizeof(dst), dir, "/chat_template.jinja"));
            LL_TRY(write_text(dst, k_default_template));
        }
    }
    if (o->chat_template) {
        LL_TRY(pjoin(dst, sizeof(dst), dir, "/chat_template.jinja"));
        LL_TRY(copy_file(o->chat_template, dst));
    }
    hp->eos_token_id = eos;
    return LL_OK;
}

static ll_status write_generation_config(const char *dir, const int32_t *eos, int n_eos) {
    cJSON *g = cJSON_CreateObject();
    cJSON_AddNullToObject(g, "bos_token_id");
    if (n_eos > 0) cJSON_AddItemToObject(g, "eos_token_id", cJSON_CreateIntArray(eos, n_eos));
    if (n_eos > 1) cJSON_AddNumberToObject(g, "pad_token_id", eos[1]);
    /* Qwen3.6's published sampling defaults (thinking mode) */
    cJSON_AddBoolToObject(g, "do_sample", 1);
    cJSON_AddNumberToObject(g, "temperature", 1.0);
    cJSON_AddNumberToObject(g, "top_p", 0.95);
    cJSON_AddNumberToObject(g, "top_k", 20);
    char path[4200];
    ll_status st = pjoin(path, sizeof(path), dir, "/generation_config.json");
    if (st == LL_OK) st = write_json(path, g);
    cJSON_Delete(g);
    return st;
}

/* ---------------------------------------------------------------- the whole model */

/* 1 when `p` does not exist or holds none of the files synth writes. */
static int dir_is_empty(const char *p) {
    struct stat sb;
    if (stat(p, &sb) != 0) return 1;
    if (!S_ISDIR(sb.st_mode)) return 0;
    static const char *known[] = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                                  "chat_template.jinja", "generation_config.json"};
    char buf[4200];
    for (size_t i = 0; i < LL_ARRAY_LEN(known); i++) {
        size_t a = strlen(p), b = strlen(known[i]);
        if (a + b + 2 > sizeof(buf)) return 0;
        memcpy(buf, p, a);
        buf[a] = '/';
        memcpy(buf + a + 1, known[i], b + 1);
        if (file_exists(buf)) return 0;
    }
    return 1;
}

static ll_status write_st_dir(const qwen_hparams *hp0, const synth_opts *o, const char *dir, int quiet) {
    qwen_hparams hp = *hp0;
    ll_type wt = LL_TYPE_BF16;
    if (o->type && !o->gguf) {
        if (!strcmp(o->type, "f32") || !strcmp(o->type, "F32")) wt = LL_TYPE_F32;
        else if (strcmp(o->type, "bf16") && strcmp(o->type, "BF16"))
            return ll_err(LL_ERR_INVALID, "synth: --type %s is not available for safetensors output (bf16 or f32)", o->type);
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return ll_err(LL_ERR_IO, "%s: cannot create directory: %s", dir, strerror(errno));
    int32_t eos[2];
    int n_eos;
    LL_TRY(write_tokenizer(o, dir, &hp, eos, &n_eos));
    LL_TRY(qwen_hparams_validate(&hp, dir));
    char p[4200];
    LL_TRY(pjoin(p, sizeof(p), dir, "/config.json"));
    LL_TRY(synth_write_config(&hp, p));
    LL_TRY(write_generation_config(dir, eos, n_eos));
    syn_list l = {0};
    ll_status st = build_list(&hp, wt, &l);
    if (st == LL_OK) st = pjoin(p, sizeof(p), dir, "/model.safetensors");
    if (st == LL_OK) st = write_safetensors(&l, o->seed, o->threads, p, quiet);
    ll_free(l.t);
    return st;
}

static void remove_st_dir(const char *dir) {
    static const char *files[] = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                                  "chat_template.jinja", "generation_config.json", "model.safetensors.tmp"};
    char p[4200];
    for (size_t i = 0; i < LL_ARRAY_LEN(files); i++) {
        size_t a = strlen(dir), b = strlen(files[i]);
        if (a + b + 2 > sizeof(p)) return;
        memcpy(p, dir, a);
        p[a] = '/';
        memcpy(p + a + 1, files[i], b + 1);
        remove(p);
    }
    rmdir(dir);
}

ll_status synth_write(const qwen_hparams *hp, const synth_opts *o, const char *out) {
    quant_init();
    if (!o->gguf) {
        if (!o->force && !dir_is_empty(out))
            return ll_err(LL_ERR_INVALID, "%s: already exists (use --force to replace it)", out);
        return write_st_dir(hp, o, out, o->quiet);
    }
    if (!o->force && file_exists(out)) return ll_err(LL_ERR_INVALID, "%s: already exists (use --force to replace it)", out);
    convert_opts co = {0};
    if (convert_type_from_name(o->type ? o->type : "bf16", &co.type) != 0)
        return ll_err(LL_ERR_INVALID, "synth: unknown --type '%s' (f32, bf16, q8_0, q6_k, q4_k_m, q4_k_s)", o->type);
    co.threads = o->threads;
    co.force = 1;
    co.name = "lilac-synth";
    /* the GGUF is the safetensors model converted: both carry exactly the same weights */
    char tmpdir[4200];
    LL_TRY(pjoin(tmpdir, sizeof(tmpdir), out, ".synth-XXXXXX"));
    if (!mkdtemp(tmpdir)) return ll_err(LL_ERR_IO, "%s: cannot create a temporary directory: %s", tmpdir, strerror(errno));
    synth_opts so = *o;
    so.gguf = 0;
    so.type = "bf16";
    if (o->type && (!strcmp(o->type, "f32") || !strcmp(o->type, "F32"))) so.type = "f32";
    ll_status st = write_st_dir(hp, &so, tmpdir, o->quiet);
    if (st == LL_OK) st = convert_model(tmpdir, out, &co, NULL);
    remove_st_dir(tmpdir);
    return st;
}
