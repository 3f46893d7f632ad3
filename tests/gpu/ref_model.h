/*
 * ref_model.h — a deliberately plain fp32 host reference of the qwen3_5_moe forward pass (one token
 * at a time, the recurrent GDN form, exact softmax attention), used by the GPU tests to check the
 * CUDA backend independently of any other backend. Weights are dequantized row by row (F32, F16,
 * BF16, Q4_K, Q6_K, Q8_0). Written from the model spec (qwen35-moe-spec.md §3–§6), slow by design.
 */
#ifndef LILAC_REF_MODEL_H
#define LILAC_REF_MODEL_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/qwen35.h"

static void ref_dequant_row(const ll_mat *m, int64_t r, float *y) {
    const uint8_t *p = ll_mat_row(m, r);
    int64_t n = m->cols;
    switch (m->type) {
    case LL_TYPE_F32: memcpy(y, p, (size_t)n * 4); return;
    case LL_TYPE_F16: for (int64_t i = 0; i < n; i++) y[i] = ll_f16_to_f32(((const uint16_t *)p)[i]); return;
    case LL_TYPE_BF16: for (int64_t i = 0; i < n; i++) y[i] = ll_bf16_to_f32(((const uint16_t *)p)[i]); return;
    case LL_TYPE_Q8_0:
        for (int64_t b = 0; b < n / 32; b++) {
            const ll_block_q8_0 *bk = (const ll_block_q8_0 *)p + b;
            for (int i = 0; i < 32; i++) y[32 * b + i] = ll_f16_to_f32(bk->d) * bk->qs[i];
        }
        return;
    case LL_TYPE_Q4_K:
        for (int64_t b = 0; b < n / 256; b++) {
            const ll_block_q4_K *bk = (const ll_block_q4_K *)p + b;
            float d = ll_f16_to_f32(bk->d), dmin = ll_f16_to_f32(bk->dmin);
            const uint8_t *q = bk->scales;
            for (int s = 0; s < 8; s++) {
                int sc, mn;
                if (s < 4) { sc = q[s] & 63; mn = q[s + 4] & 63; }
                else { sc = (q[s + 4] & 0xF) | ((q[s - 4] >> 6) << 4); mn = (q[s + 4] >> 4) | ((q[s] >> 6) << 4); }
                for (int l = 0; l < 32; l++) {
                    int nib = (bk->qs[32 * (s / 2) + l] >> (4 * (s & 1))) & 15;
                    y[256 * b + 32 * s + l] = d * sc * nib - dmin * mn;
                }
            }
        }
        return;
    case LL_TYPE_Q6_K:
        for (int64_t b = 0; b < n / 256; b++) {
            const ll_block_q6_K *bk = (const ll_block_q6_K *)p + b;
            float d = ll_f16_to_f32(bk->d);
            float *yy = y + 256 * b;
            const uint8_t *ql = bk->ql, *qh = bk->qh;
            const int8_t *sc = bk->scales;
            for (int h = 0; h < 2; h++) {
                for (int l = 0; l < 32; l++) {
                    int is = l / 16;
                    int q1 = ((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32;
                    int q2 = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
                    int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                    int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                    yy[l] = d * sc[is] * q1;
                    yy[l + 32] = d * sc[is + 2] * q2;
                    yy[l + 64] = d * sc[is + 4] * q3;
                    yy[l + 96] = d * sc[is + 6] * q4;
                }
                yy += 128; ql += 64; qh += 32; sc += 8;
            }
        }
        return;
    default: LL_ABORT("ref: type %d", (int)m->type);
    }
}

static void ref_matvec(const ll_mat *m, const float *x, float *y, float *tmp) {
    for (int64_t r = 0; r < m->rows; r++) {
        ref_dequant_row(m, r, tmp);
        double acc = 0;
        for (int64_t k = 0; k < m->cols; k++) acc += (double)tmp[k] * x[k];
        y[r] = (float)acc;
    }
}

static void ref_rmsnorm(const float *x, const float *g, float *y, int n, float eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float r = (float)(1.0 / sqrt(ss / n + eps));
    for (int i = 0; i < n; i++) y[i] = x[i] * r * g[i];
}
static float ref_silu(float x) { return x / (1.0f + expf(-x)); }
static float ref_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

typedef struct ref_state {
    const qwen_model *m;
    int n_ctx, pos;
    float **kc, **vc;       /* per layer [n_ctx][NKV*HD] */
    float **S, **conv;      /* per GDN layer: [HV][DK][DV], [3][CD] (oldest first) */
    float *buf;             /* scratch */
} ref_state;

static ref_state *ref_new(const qwen_model *m, int n_ctx) {
    const qwen_hparams *hp = &m->hp;
    ref_state *r = calloc(1, sizeof(*r));
    r->m = m;
    r->n_ctx = n_ctx;
    r->kc = calloc(hp->n_layer, sizeof(float *));
    r->vc = calloc(hp->n_layer, sizeof(float *));
    r->S = calloc(hp->n_layer, sizeof(float *));
    r->conv = calloc(hp->n_layer, sizeof(float *));
    int CD = qwen_gdn_conv_dim(hp);
    for (int l = 0; l < hp->n_layer; l++) {
        if (hp->is_attn[l]) {
            r->kc[l] = calloc((size_t)n_ctx * hp->n_head_kv * hp->head_dim, 4);
            r->vc[l] = calloc((size_t)n_ctx * hp->n_head_kv * hp->head_dim, 4);
        } else {
            r->S[l] = calloc((size_t)hp->gdn_n_v_heads * hp->gdn_k_dim * hp->gdn_v_dim, 4);
            r->conv[l] = calloc((size_t)3 * CD, 4);
        }
    }
    r->buf = calloc((size_t)1 << 22, 4);
    return r;
}

static void ref_free(ref_state *r) {
    for (int l = 0; l < r->m->hp.n_layer; l++) { free(r->kc[l]); free(r->vc[l]); free(r->S[l]); free(r->conv[l]); }
    free(r->kc); free(r->vc); free(r->S); free(r->conv); free(r->buf); free(r);
}

/* One token; logits[V]. */
static void ref_step(ref_state *r, int tok, float *logits) {
    const qwen_model *m = r->m;
    const qwen_hparams *hp = &m->hp;
    int H = hp->n_embd, p = r->pos;
    float *x = r->buf, *xn = x + 8192, *tmp = xn + 8192, *a = tmp + 300000, *bq = a + 16384, *bz = bq + 16384,
          *bb = bz + 16384, *ba = bb + 256, *o = ba + 256, *hbuf = o + 16384, *y = hbuf + 16384, *lg = y + 16384;
    ref_dequant_row(&m->tok_embd, tok, x);
    for (int l = 0; l < hp->n_layer; l++) {
        const qwen_layer *ly = &m->layers[l];
        ref_rmsnorm(x, ly->attn_norm, xn, H, hp->rms_eps);
        if (hp->is_attn[l]) {
            int NH = hp->n_head, NKV = hp->n_head_kv, HD = hp->head_dim, G = NH / NKV, half = hp->n_rot / 2;
            ref_matvec(&ly->wq, xn, bq, tmp);
            ref_matvec(&ly->wk, xn, bz, tmp);
            ref_matvec(&ly->wv, xn, o, tmp);
            float *kk = bz, *vv = o;
            for (int h = 0; h < NH + NKV; h++) {
                float *v = h < NH ? bq + (size_t)h * 2 * HD : kk + (size_t)(h - NH) * HD;
                ref_rmsnorm(v, h < NH ? ly->q_norm : ly->k_norm, y, HD, hp->rms_eps);
                for (int i = 0; i < half; i++) {
                    double ang = (double)p * pow((double)hp->rope_theta, -2.0 * i / hp->n_rot);
                    float cs = (float)cos(ang), sn = (float)sin(ang);
                    float x0 = y[i], x1 = y[i + half];
                    y[i] = x0 * cs - x1 * sn;
                    y[i + half] = x1 * cs + x0 * sn;
                }
                memcpy(v, y, (size_t)HD * 4);
            }
            memcpy(r->kc[l] + (size_t)p * NKV * HD, kk, (size_t)NKV * HD * 4);
            memcpy(r->vc[l] + (size_t)p * NKV * HD, vv, (size_t)NKV * HD * 4);
            for (int h = 0; h < NH; h++) {
                int kv = h / G;
                float *q = bq + (size_t)h * 2 * HD, *gate = q + HD;
                double mx = -1e300;
                for (int j = 0; j <= p; j++) {
                    double s = 0;
                    for (int d = 0; d < HD; d++) s += (double)q[d] * r->kc[l][((size_t)j * NKV + kv) * HD + d];
                    s /= sqrt((double)HD);
                    tmp[j] = (float)s;
                    if (s > mx) mx = s;
                }
                double den = 0;
                for (int j = 0; j <= p; j++) { tmp[j] = (float)exp(tmp[j] - mx); den += tmp[j]; }
                for (int d = 0; d < HD; d++) {
                    double acc = 0;
                    for (int j = 0; j <= p; j++) acc += tmp[j] * r->vc[l][((size_t)j * NKV + kv) * HD + d];
                    a[h * HD + d] = (float)(acc / den) * ref_sigmoid(gate[d]);
                }
            }
            ref_matvec(&ly->wo, a, y, tmp);
        } else {
            int HK = hp->gdn_n_k_heads, HV = hp->gdn_n_v_heads, DK = hp->gdn_k_dim, DV = hp->gdn_v_dim;
            int QK = HK * DK, CD = 2 * QK + HV * DV;
            ref_matvec(&ly->wqkv, xn, bq, tmp);
            ref_matvec(&ly->wz, xn, bz, tmp);
            ref_matvec(&ly->wb, xn, bb, tmp);
            ref_matvec(&ly->wa, xn, ba, tmp);
            float *cv = r->conv[l];
            for (int c = 0; c < CD; c++) {
                float acc = ly->conv[c * 4 + 3] * bq[c];
                for (int j = 0; j < 3; j++) acc += ly->conv[c * 4 + j] * cv[j * CD + c];
                cv[0 * CD + c] = cv[1 * CD + c];
                cv[1 * CD + c] = cv[2 * CD + c];
                cv[2 * CD + c] = bq[c];
                a[c] = ref_silu(acc);
            }
            for (int h = 0; h < HV; h++) {
                int kh = hp->gdn_v_tiled ? h % HK : h / (HV / HK);
                float q[128], k[128];
                double sq = 0, sk = 0;
                for (int i = 0; i < DK; i++) { q[i] = a[kh * DK + i]; k[i] = a[QK + kh * DK + i]; sq += q[i] * q[i]; sk += k[i] * k[i]; }
                float rq = (float)(1.0 / sqrt(sq + 1e-6) / sqrt((double)DK)), rk = (float)(1.0 / sqrt(sk + 1e-6));
                for (int i = 0; i < DK; i++) { q[i] *= rq; k[i] *= rk; }
                const float *v = a + 2 * QK + h * DV;
                float beta = ref_sigmoid(bb[h]);
                float sp = ba[h] + ly->dt_bias[h];
                sp = sp > 20 ? sp : log1pf(expf(sp));
                float alpha = expf(ly->ssm_a[h] * sp);
                float *S = r->S[l] + (size_t)h * DK * DV;
                for (int j = 0; j < DV; j++) {
                    double u = 0;
                    for (int i = 0; i < DK; i++) { S[i * DV + j] *= alpha; u += S[i * DV + j] * k[i]; }
                    float delta = beta * (v[j] - (float)u);
                    double oo = 0;
                    for (int i = 0; i < DK; i++) { S[i * DV + j] += k[i] * delta; oo += S[i * DV + j] * q[i]; }
                    o[h * DV + j] = (float)oo;
                }
                ref_rmsnorm(o + h * DV, ly->gdn_norm, hbuf + h * DV, DV, hp->rms_eps);
                for (int j = 0; j < DV; j++) hbuf[h * DV + j] *= ref_silu(bz[h * DV + j]);
            }
            ref_matvec(&ly->wout, hbuf, y, tmp);
        }
        for (int i = 0; i < H; i++) x[i] += y[i];
        /* MoE */
        ref_rmsnorm(x, ly->ffn_norm, xn, H, hp->rms_eps);
        int E = hp->n_expert, K = hp->n_expert_used, FF = hp->n_ff_exp;
        ref_matvec(&ly->router, xn, lg, tmp);
        int ids[16];
        float w[16], used[1024] = {0};
        float mx = -INFINITY;
        for (int t = 0; t < K; t++) {
            int bi = -1;
            for (int e = 0; e < E; e++)
                if (!used[e] && (bi < 0 || lg[e] > lg[bi])) bi = e;
            used[bi] = 1;
            ids[t] = bi;
            if (lg[bi] > mx) mx = lg[bi];
        }
        double den = 0;
        for (int t = 0; t < K; t++) { w[t] = expf(lg[ids[t]] - mx); den += w[t]; }
        for (int t = 0; t < K; t++) w[t] = (float)(w[t] / den);
        memset(y, 0, (size_t)H * 4);
        for (int t = 0; t < K + (hp->n_ff_shexp ? 1 : 0); t++) {
            const ll_mat *G = t < K ? &ly->exp_gate[ids[t]] : &ly->sh_gate, *U = t < K ? &ly->exp_up[ids[t]] : &ly->sh_up,
                         *D = t < K ? &ly->exp_down[ids[t]] : &ly->sh_down;
            int ff = t < K ? FF : hp->n_ff_shexp;
            ref_matvec(G, xn, bq, tmp);
            ref_matvec(U, xn, bz, tmp);
            for (int i = 0; i < ff; i++) hbuf[i] = ref_silu(bq[i]) * bz[i];
            ref_matvec(D, hbuf, o, tmp);
            float wt = w[0];
            if (t < K) wt = w[t];
            else { float sg; ref_matvec(&ly->sh_gate_inp, xn, &sg, tmp); wt = ref_sigmoid(sg); }
            for (int i = 0; i < H; i++) y[i] += wt * o[i];
        }
        for (int i = 0; i < H; i++) x[i] += y[i];
    }
    ref_rmsnorm(x, m->out_norm, xn, H, hp->rms_eps);
    ref_matvec(&m->lm_head, xn, logits, tmp);
    r->pos++;
}

#endif
