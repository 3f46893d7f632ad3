/*
 * qwen35_quant.c — in-memory re-quantization of a loaded model: every matrix whose row length is
 * a whole number of the target type's blocks is converted (dequantize row -> quantize row);
 * others stay as views of the source. Used by the quantization-quality tests and by backends'
 * tests; the streaming converter for files is `lilac convert`.
 */
#include "format/arena.h"
#include "qwen35.h"

typedef struct {
    void **arena;
    ll_type type;
    float *row;       /* [max cols] scratch */
    ll_status st;
} rq_ctx;

static void requant(rq_ctx *c, ll_mat *dst, const ll_mat *src) {
    *dst = *src;
    if (c->st != LL_OK || src->cols % quant_block_elems(c->type) != 0 || src->type == c->type) return;
    size_t rb = quant_row_bytes(c->type, src->cols);
    uint8_t *data = fmt_arena_alloc(c->arena, rb * (size_t)src->rows);
    if (!data) { c->st = ll_err(LL_ERR_OOM, "requantize %s: out of memory", src->name ? src->name : "?"); return; }
    for (int64_t r = 0; r < src->rows; r++) {
        quant_dequant_row(src->type, ll_mat_row(src, r), c->row, src->cols);
        quant_quantize_row(c->type, c->row, data + (size_t)r * rb, src->cols);
    }
    dst->type = c->type;
    dst->row_bytes = rb;
    dst->data = data;
}

static int64_t max_cols(const qwen_model *m) {
    const qwen_hparams *hp = &m->hp;
    int64_t c = LL_MAX(hp->n_embd, hp->n_head * hp->head_dim);
    c = LL_MAX(c, qwen_gdn_v_dim(hp));
    return LL_MAX(c, LL_MAX(hp->n_ff_exp, hp->n_ff_shexp));
}

ll_status qwen_model_requantize(const qwen_model *src, ll_type type, qwen_model **out) {
    *out = NULL;
    if (!quant_type_is_weight(type)) return ll_err(LL_ERR_INVALID, "requantize: %s is not a weight type", quant_type_name(type));
    qwen_model *m = ll_calloc(1, sizeof(*m));
    if (!m) return ll_err(LL_ERR_OOM, "requantize: out of memory");
    *m = *src;
    m->file = NULL;
    m->owned = NULL;
    m->path = ll_strdup(src->path ? src->path : "");
    m->format_name = ll_strdup("requantized");
    rq_ctx c = {&m->owned, type, ll_malloc(sizeof(float) * (size_t)max_cols(m)), LL_OK};
    if (!m->path || !m->format_name || !c.row) c.st = ll_err(LL_ERR_OOM, "requantize: out of memory");
    const qwen_hparams *hp = &src->hp;
    requant(&c, &m->tok_embd, &src->tok_embd);
    if (src->lm_head.data == src->tok_embd.data) m->lm_head = m->tok_embd;
    else requant(&c, &m->lm_head, &src->lm_head);
    for (int32_t l = 0; l < hp->n_layer && c.st == LL_OK; l++) {
        const qwen_layer *S = &src->layers[l];
        qwen_layer *D = &m->layers[l];
        if (hp->is_attn[l]) {
            requant(&c, &D->wq, &S->wq);
            requant(&c, &D->wk, &S->wk);
            requant(&c, &D->wv, &S->wv);
            requant(&c, &D->wo, &S->wo);
        } else {
            requant(&c, &D->wqkv, &S->wqkv);
            requant(&c, &D->wz, &S->wz);
            requant(&c, &D->wb, &S->wb);
            requant(&c, &D->wa, &S->wa);
            requant(&c, &D->wout, &S->wout);
        }
        requant(&c, &D->router, &S->router);
        size_t ne = (size_t)hp->n_expert;
        D->exp_gate = fmt_arena_alloc(&m->owned, sizeof(ll_mat) * ne);
        D->exp_up = fmt_arena_alloc(&m->owned, sizeof(ll_mat) * ne);
        D->exp_down = fmt_arena_alloc(&m->owned, sizeof(ll_mat) * ne);
        if (!D->exp_gate || !D->exp_up || !D->exp_down) { c.st = ll_err(LL_ERR_OOM, "requantize: out of memory"); break; }
        for (size_t e = 0; e < ne; e++) {
            requant(&c, &D->exp_gate[e], &S->exp_gate[e]);
            requant(&c, &D->exp_up[e], &S->exp_up[e]);
            requant(&c, &D->exp_down[e], &S->exp_down[e]);
        }
        if (hp->n_ff_shexp > 0) {
            requant(&c, &D->sh_gate, &S->sh_gate);
            requant(&c, &D->sh_up, &S->sh_up);
            requant(&c, &D->sh_down, &S->sh_down);
            requant(&c, &D->sh_gate_inp, &S->sh_gate_inp);
        }
    }
    ll_free(c.row);
    size_t bytes = 0;
    /* weight_bytes: recount what the matrices occupy now */
    if (c.st == LL_OK) {
        const ll_mat *all[] = {&m->tok_embd, &m->lm_head};
        for (size_t i = 0; i < 2; i++) bytes += all[i]->row_bytes * (size_t)all[i]->rows;
        for (int32_t l = 0; l < hp->n_layer; l++) {
            const qwen_layer *D = &m->layers[l];
            const ll_mat *ms[] = {&D->wq, &D->wk, &D->wv, &D->wo, &D->wqkv, &D->wz, &D->wb, &D->wa, &D->wout,
                                  &D->router, &D->sh_gate, &D->sh_up, &D->sh_down, &D->sh_gate_inp};
            for (size_t i = 0; i < LL_ARRAY_LEN(ms); i++) if (ms[i]->data) bytes += ms[i]->row_bytes * (size_t)ms[i]->rows;
            for (int32_t e = 0; e < hp->n_expert; e++)
                bytes += D->exp_gate[e].row_bytes * (size_t)D->exp_gate[e].rows +
                         D->exp_up[e].row_bytes * (size_t)D->exp_up[e].rows +
                         D->exp_down[e].row_bytes * (size_t)D->exp_down[e].rows;
        }
        m->weight_bytes = bytes;
    }
    if (c.st != LL_OK) { qwen_model_free(m); return c.st; }
    *out = m;
    return LL_OK;
}

/* ---------------------------------------------------------------- decode traffic */

static double mat_bytes(const ll_mat *m) { return m->data || m->rows ? (double)m->row_bytes * (double)m->rows : 0; }

double qwen_decode_weight_bytes(const qwen_model *m) {
    const qwen_hparams *hp = &m->hp;
    double b = mat_bytes(&m->lm_head) + (double)m->tok_embd.row_bytes; /* the head, one embedding row */
    for (int32_t l = 0; l < hp->n_layer; l++) {
        const qwen_layer *L = &m->layers[l];
        if (hp->is_attn[l]) b += mat_bytes(&L->wq) + mat_bytes(&L->wk) + mat_bytes(&L->wv) + mat_bytes(&L->wo);
        else b += mat_bytes(&L->wqkv) + mat_bytes(&L->wz) + mat_bytes(&L->wb) + mat_bytes(&L->wa) + mat_bytes(&L->wout);
        b += mat_bytes(&L->router);
        if (hp->n_ff_shexp > 0) b += mat_bytes(&L->sh_gate) + mat_bytes(&L->sh_up) + mat_bytes(&L->sh_down) + mat_bytes(&L->sh_gate_inp);
        double ex = 0; /* routed experts: the average expert's bytes times the number used */
        for (int32_t e = 0; e < hp->n_expert; e++)
            ex += mat_bytes(&L->exp_gate[e]) + mat_bytes(&L->exp_up[e]) + mat_bytes(&L->exp_down[e]);
        b += ex / hp->n_expert * hp->n_expert_used;
    }
    return b;
}
