/*
 * lab_gdn.cuh — the host reference of one Gated DeltaNet decode step (the spec's recurrent form,
 * qwen35-moe-spec.md §5.5, in double), shared by the GDN lab programs (gdn.cu, lgdn.cu).
 */
#ifndef LILAC_LAB_GDN_CUH
#define LILAC_LAB_GDN_CUH

#include "lab.cuh"

/* raw [CD] projection (CD = 2 HK DK + HV DV), b/a [HV]; cw [CD][4] conv weights; hist [3][CD] the
 * raw inputs of the 3 previous positions, oldest first (shifted here); S [HV][DK][DV] updated in
 * place; o [HV * DV] written. k-head of v-head h: h / (HV / HK). */
static void lab_gdn_host_step(const float *raw, const float *b, const float *a, const float *cw, float *hist, float *S,
                              const float *dtb, const float *sa, float *o, int HK, int HV, int DK, int DV) {
    int QK = HK * DK, CD = 2 * QK + HV * DV;
    std::vector<float> c(CD);
    for (int ch = 0; ch < CD; ch++) {
        double acc = cw[ch * 4 + 3] * raw[ch];
        for (int j = 0; j < 3; j++) acc += cw[ch * 4 + j] * hist[j * CD + ch];
        hist[0 * CD + ch] = hist[1 * CD + ch]; hist[1 * CD + ch] = hist[2 * CD + ch]; hist[2 * CD + ch] = raw[ch];
        c[ch] = (float)(acc / (1 + exp(-acc)));
    }
    std::vector<double> q(DK), k(DK);
    for (int h = 0; h < HV; h++) {
        int kh = h / (HV / HK);
        double sq = 0, sk = 0;
        for (int i = 0; i < DK; i++) { q[i] = c[kh * DK + i]; k[i] = c[QK + kh * DK + i]; sq += q[i] * q[i]; sk += k[i] * k[i]; }
        for (int i = 0; i < DK; i++) { q[i] /= sqrt(sq + 1e-6) * sqrt((double)DK); k[i] /= sqrt(sk + 1e-6); }
        double beta = 1 / (1 + exp(-b[h])), x = a[h] + dtb[h], sp = x > 20 ? x : log1p(exp(x)), alpha = exp(sa[h] * sp);
        float *Sh = S + (size_t)h * DK * DV;
        for (int j = 0; j < DV; j++) {
            double u = 0;
            for (int i = 0; i < DK; i++) { Sh[i * DV + j] = (float)(Sh[i * DV + j] * alpha); u += Sh[i * DV + j] * k[i]; }
            double delta = beta * (c[2 * QK + h * DV + j] - u), oo = 0;
            for (int i = 0; i < DK; i++) { Sh[i * DV + j] = (float)(Sh[i * DV + j] + k[i] * delta); oo += Sh[i * DV + j] * q[i]; }
            o[h * DV + j] = (float)oo;
        }
    }
}

#endif
