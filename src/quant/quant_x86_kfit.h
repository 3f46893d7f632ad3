/*
 * quant_x86_kfit.h — the K-quant sub-block fits of quant_ref.c (quant_fit_affine,
 * quant_fit_symmetric), vectorized one sub-block per SIMD lane. Included by quant_x86.c once per
 * vector width, after it defines:
 *   KF_W         lanes (8: AVX2, 16: AVX-512)
 *   KF_FN(name)  the function's attributes and name for this width
 *   VF, VM       float vector and comparison-mask types
 *   V_*          the operations below, each one IEEE operation per lane
 *
 * Why lanes = sub-blocks: the reference fit is a long chain of scalar decisions per sub-block
 * (21 candidate scales, each a rounding pass, a least-squares refit and an error pass). Running
 * W sub-blocks side by side turns every scalar operation into the same operation on a vector,
 * with the reference's early exits (`continue`, constant sub-blocks) as lane masks; each lane
 * then performs exactly the reference's operations in the reference's order, so the results are
 * identical bit for bit (no horizontal sums are needed at all). The input is transposed:
 * xt[i * KF_W + j] is element i of sub-block j.
 */

/* (p0 + p1) + (p2 + p3), the reference's sum4 */
#define KF_SUM4(p) V_ADD(V_ADD((p)[0], (p)[1]), V_ADD((p)[2], (p)[3]))

/* quant_fit_affine for KF_W sub-blocks of 32: writes s[j] and m[j]. */
KF_FN(fit_affine)(const float *xt, float nm_s, float *s_out, float *m_out) {
    const VF zero = V_ZERO(), one = V_SET1(1.0f), half = V_SET1(0.5f), nm = V_SET1(nm_s), n = V_SET1(32.0f);
    VF lo = zero, hi = V_LOAD(xt), px[4] = {zero, zero, zero, zero};
    for (int i = 0; i < 32; i++) {
        VF x = V_LOAD(xt + i * KF_W);
        lo = V_MIN(x, lo);
        hi = V_MAX(x, hi);
        px[i & 3] = V_ADD(px[i & 3], x);
    }
    VM dead = V_LE(hi, lo); /* constant sub-blocks: the reference returns s = 0, m = -lo */
    VF sx = KF_SUM4(px), range = V_SUB(hi, lo);
    VF best_s = V_DIV(range, nm), best_b = lo, inv_range = V_DIV(one, range), is0 = V_DIV(one, best_s);
    float xl[32 * KF_W] __attribute__((aligned(64))); /* x - lo, used by every candidate */
    VF pe[4] = {zero, zero, zero, zero};
    for (int i = 0; i < 32; i++) {
        VF x = V_LOAD(xt + i * KF_W), d = V_SUB(x, lo);
        V_STORE(xl + i * KF_W, d);
        VF q = V_TRUNC(V_MIN(V_ADD(V_MUL(d, is0), half), nm));
        VF e = V_SUB(V_ADD(V_MUL(best_s, q), lo), x);
        pe[i & 3] = V_ADD(pe[i & 3], V_MUL(e, e));
    }
    VF best_err = KF_SUM4(pe);
    for (int k = -10; k <= 10; k++) {
        VF is = V_MUL(V_SET1(nm_s + 0.1f * (float)k), inv_range);
        VF sq0 = zero, sq1 = zero, sqq0 = zero, sqq1 = zero, pqx[4] = {zero, zero, zero, zero};
        for (int i = 0; i < 32; i += 2) { /* the code sums are exact: two chains each, any order */
            VF q0 = V_TRUNC(V_MIN(V_ADD(V_MUL(V_LOAD(xl + i * KF_W), is), half), nm));
            VF q1 = V_TRUNC(V_MIN(V_ADD(V_MUL(V_LOAD(xl + (i + 1) * KF_W), is), half), nm));
            sq0 = V_ADD(sq0, q0);
            sq1 = V_ADD(sq1, q1);
            sqq0 = V_ADD(sqq0, V_MUL(q0, q0));
            sqq1 = V_ADD(sqq1, V_MUL(q1, q1));
            pqx[i & 3] = V_ADD(pqx[i & 3], V_MUL(q0, V_LOAD(xt + i * KF_W)));
            pqx[(i + 1) & 3] = V_ADD(pqx[(i + 1) & 3], V_MUL(q1, V_LOAD(xt + (i + 1) * KF_W)));
        }
        VF sq = V_ADD(sq0, sq1), sqq = V_ADD(sqq0, sqq1), sqx = KF_SUM4(pqx);
        VF det = V_SUB(V_MUL(n, sqq), V_MUL(sq, sq));
        VM ok = V_NLE(det, zero); /* reference: if (det <= 0) continue */
        if (!V_ANY(ok)) continue;
        VF s = V_DIV(V_SUB(V_MUL(n, sqx), V_MUL(sq, sx)), det);
        VF b = V_DIV(V_SUB(sx, V_MUL(s, sq)), n);
        VM bpos = V_GT(b, zero);
        b = V_SEL(bpos, zero, b);
        s = V_SEL(bpos, V_SEL(V_GT(sqq, zero), V_DIV(sqx, sqq), zero), s);
        ok = V_MAND(ok, V_NLE(s, zero)); /* reference: if (s <= 0) continue */
        if (!V_ANY(ok)) continue;
        VF inv = V_DIV(one, s), ae[4] = {zero, zero, zero, zero};
        for (int i = 0; i < 32; i++) {
            VF x = V_LOAD(xt + i * KF_W);
            VF q = V_TRUNC(V_MIN(V_MAX(V_ADD(V_MUL(V_SUB(x, b), inv), half), zero), nm));
            VF e = V_SUB(V_ADD(V_MUL(s, q), b), x);
            ae[i & 3] = V_ADD(ae[i & 3], V_MUL(e, e));
        }
        VM upd = V_MAND(ok, V_LT(KF_SUM4(ae), best_err));
        best_err = V_SEL(upd, KF_SUM4(ae), best_err);
        best_s = V_SEL(upd, s, best_s);
        best_b = V_SEL(upd, b, best_b);
    }
    V_STORE(s_out, V_SEL(dead, zero, best_s));
    V_STORE(m_out, V_SEL(dead, V_NEG(lo), V_NEG(best_b)));
}

/* quant_fit_symmetric for KF_W sub-blocks of 16 (codes in [-nmax, nmax-1]): writes s[j]. */
KF_FN(fit_symmetric)(const float *xt, int nmax, float *s_out) {
    const VF zero = V_ZERO(), qlo = V_SET1(-(float)nmax), qhi = V_SET1((float)(nmax - 1)), magic = V_SET1(12582912.0f);
    VF amax = zero, max = zero;
    for (int i = 0; i < 16; i++) { /* the first element of largest magnitude */
        VF x = V_LOAD(xt + i * KF_W), a = V_ABS(x);
        VM gt = V_GT(a, amax);
        amax = V_SEL(gt, a, amax);
        max = V_SEL(gt, x, max);
    }
    VM dead = V_EQ(amax, zero);
    VF best_s = zero, best_gain = V_SET1(-1.0f);
    for (int k = -10; k <= 10; k++) {
        VF is = V_DIV(V_SET1(-((float)nmax + 0.1f * (float)k)), max);
        VF sqq0 = zero, sqq1 = zero, pqx[4] = {zero, zero, zero, zero};
        for (int i = 0; i < 16; i += 2) {
            VF x0 = V_LOAD(xt + i * KF_W), x1 = V_LOAD(xt + (i + 1) * KF_W);
            /* quant_rint_clamp: clamp, then round by adding and subtracting 1.5 * 2^23 */
            VF q0 = V_SUB(V_ADD(V_MAX(V_MIN(V_MUL(is, x0), qhi), qlo), magic), magic);
            VF q1 = V_SUB(V_ADD(V_MAX(V_MIN(V_MUL(is, x1), qhi), qlo), magic), magic);
            sqq0 = V_ADD(sqq0, V_MUL(q0, q0));
            sqq1 = V_ADD(sqq1, V_MUL(q1, q1));
            pqx[i & 3] = V_ADD(pqx[i & 3], V_MUL(q0, x0));
            pqx[(i + 1) & 3] = V_ADD(pqx[(i + 1) & 3], V_MUL(q1, x1));
        }
        VF sqq = V_ADD(sqq0, sqq1), sqx = KF_SUM4(pqx);
        VF gain = V_DIV(V_MUL(sqx, sqx), sqq);
        VM upd = V_MAND(V_NLE(sqq, zero), V_GT(gain, best_gain)); /* reference: if (sqq <= 0) continue */
        best_gain = V_SEL(upd, gain, best_gain);
        best_s = V_SEL(upd, V_DIV(sqx, sqq), best_s);
    }
    V_STORE(s_out, V_SEL(dead, zero, best_s));
}

#undef KF_SUM4
