/* cmd_info.c — `lilac info -m MODEL`: architecture, format, hyperparameters, layer pattern,
 * weight bytes per type, bits per weight, and the memory a context needs. */
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "cli.h"
#include "format/model_file.h"
#include "model/qwen35.h"

typedef struct type_acc {
    size_t bytes[LL_TYPE_COUNT_];
    int64_t params[LL_TYPE_COUNT_];
    int64_t mats[LL_TYPE_COUNT_];
} type_acc;

static void acc_mat(type_acc *a, const ll_mat *m) {
    if (!m->data) return;
    a->bytes[m->type] += (size_t)m->rows * m->row_bytes;
    a->params[m->type] += m->rows * m->cols;
    a->mats[m->type]++;
}

/* --tensors: every tensor of the file(s) as stored, in file order (GGUF) or by name. */
static void print_tensors(const qwen_model *m) {
    const qwen_model_file *f = m->file;
    int64_t n = f->kind == QWEN_FILE_GGUF ? f->gguf->n_tensors : f->st.n_tensors;
    printf("tensors (%lld):\n", (long long)n);
    for (int64_t i = 0; i < n; i++) {
        const ll_tensor *t = f->kind == QWEN_FILE_GGUF ? &f->gguf->tensors[i] : f->st.by_name[i];
        char sb[96];
        int64_t ne = ll_tensor_nelem(t);
        printf("  %-52s %-6s %-22s %12zu bytes  %6.2f bits/weight\n", t->name, quant_type_name(t->type),
               ll_shape_str(t->shape, t->n_dims, sb, sizeof(sb)), t->nbytes, ne ? 8.0 * (double)t->nbytes / (double)ne : 0.0);
    }
}

static void info_usage(FILE *f) {
    fprintf(f, "usage: lilac info -m MODEL [--tensors]\n\n"
               "MODEL is an HF safetensors directory, an MLX directory, a .safetensors file with\n"
               "config.json beside it, or a GGUF file. --tensors lists every stored tensor with its type.\n");
}

int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    int tensors = 0;
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "--tensors")) tensors = 1;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { info_usage(stdout); return 0; }
        else { info_usage(stderr); return 2; }
    }
    if (!path) { info_usage(stderr); return 2; }
    qwen_model *m;
    if (qwen_model_load(path, &m) != LL_OK) return cli_fail("info", ll_errmsg());
    const qwen_hparams *h = &m->hp;
    printf("model:         %s\n", m->path);
    printf("format:        %s\n", m->format_name);
    printf("architecture:  qwen3_5_moe (hybrid Gated DeltaNet + gated attention, MoE)\n");
    char pat[QWEN_MAX_LAYERS + 1];
    for (int i = 0; i < h->n_layer; i++) pat[i] = h->is_attn[i] ? 'F' : 'L';
    pat[h->n_layer] = '\0';
    int n_attn = qwen_n_attn_layers(h), n_gdn = h->n_layer - n_attn;
    printf("layers:        %d (%d GDN, %d attention)  %s\n", h->n_layer, n_gdn, n_attn, pat);
    printf("vocab:         %d   hidden: %d   rms_eps: %g   context (train): %d   eos: %d   tied embeddings: %s\n", h->n_vocab,
           h->n_embd, (double)h->rms_eps, h->n_ctx_train, h->eos_token_id, h->tie_embeddings ? "yes" : "no");
    printf("attention:     %d q heads, %d kv heads, head_dim %d, rotary dims %d, rope theta %g\n", h->n_head, h->n_head_kv,
           h->head_dim, h->n_rot, (double)h->rope_theta);
    printf("gated deltanet: %d k heads × %d, %d v heads × %d, conv kernel %d, v head order %s\n", h->gdn_n_k_heads,
           h->gdn_k_dim, h->gdn_n_v_heads, h->gdn_v_dim, h->gdn_conv_k, h->gdn_v_tiled ? "tiled (llama.cpp)" : "grouped (HF)");
    printf("moe:           %d experts, top-%d, expert ffn %d, shared ffn %d\n", h->n_expert, h->n_expert_used, h->n_ff_exp, h->n_ff_shexp);
    printf("tensors:       %d in the file(s)\n", m->file ? m->file->n_tensors : 0);

    type_acc a;
    memset(&a, 0, sizeof(a));
    acc_mat(&a, &m->tok_embd);
    if (!h->tie_embeddings) acc_mat(&a, &m->lm_head);
    for (int il = 0; il < h->n_layer; il++) {
        const qwen_layer *L = &m->layers[il];
        const ll_mat *ms[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->wqkv, &L->wz, &L->wb, &L->wa, &L->wout,
                              &L->router, &L->sh_gate, &L->sh_up, &L->sh_down, &L->sh_gate_inp};
        for (size_t k = 0; k < LL_ARRAY_LEN(ms); k++) acc_mat(&a, ms[k]);
        for (int e = 0; e < h->n_expert; e++) {
            acc_mat(&a, &L->exp_gate[e]);
            acc_mat(&a, &L->exp_up[e]);
            acc_mat(&a, &L->exp_down[e]);
        }
    }
    printf("weights by type:\n");
    size_t tot = 0;
    int64_t par = 0;
    for (int t = 0; t < LL_TYPE_COUNT_; t++) {
        if (!a.mats[t]) continue;
        printf("  %-6s %14zu bytes (%9.1f MiB)  %12lld params  %6lld matrices  %.2f bits/weight\n", quant_type_name((ll_type)t),
               a.bytes[t], a.bytes[t] / 1048576.0, (long long)a.params[t], (long long)a.mats[t], 8.0 * a.bytes[t] / (double)a.params[t]);
        tot += a.bytes[t];
        par += a.params[t];
    }
    printf("total:         %zu bytes (%.2f GiB), %lld params, %.2f bits/weight\n", tot, tot / 1073741824.0, (long long)par,
           par ? 8.0 * tot / (double)par : 0.0);
    /* KV cache: k and v per attention layer per token; GDN: recurrent state + conv window */
    size_t kv_tok = (size_t)n_attn * 2 * h->n_head_kv * h->head_dim;
    size_t gdn_seq = (size_t)n_gdn * ((size_t)h->gdn_n_v_heads * h->gdn_k_dim * h->gdn_v_dim * 4 +
                                      (size_t)(h->gdn_conv_k - 1) * qwen_gdn_conv_dim(h) * 4);
    printf("context memory: KV cache %zu bytes/token in bf16 (%zu in fp32); GDN state %zu bytes/sequence (%.1f MiB, fp32)\n",
           kv_tok * 2, kv_tok * 4, gdn_seq, gdn_seq / 1048576.0);
    if (tensors && m->file) print_tensors(m);
    qwen_model_free(m);
    return 0;
}
