/*
 * quant_x86_kfit.h — the K-quant sub-block fits of quant_ref.c (quant_fit_affine,
 * quant_fit_symmetric), vectorized one sub-block per SIMD lane. Included by quant_x86.c once per
 * vector width, after it defines:
 *   KF_W         lanes (8: AVX2, 16: AVX-512)
 *   KF_FN(name)  the function's attributes and name for this width
 *   VF, VM       float vector and comparison-mask types; VD a vector of KF_W / 2 doubles
 *   V_*          the operations below, each one IEEE operation per lane
 *   KF_ERR, KF_UPD  the candidate error in double (see fit_affine)
 *
 * Why lanes = sub-blocks: the reference fit is a long chain of scalar decisions per sub-block
 * (21 candidate scales, each a rounding pass with its sums, a least-squares refit and its
 * error, kept if smallest). Running
 * W sub-blocks side by side turns every scalar operation into the same operation on a vector,
 * with the reference's early exits (`continue`, constant sub-blocks) as lane masks; each lane
 * then performs exactly the reference's operations in the reference's order, so the results are
 * identical bit for bit (no horizontal sums are needed at all). The input is transposed:
 * xt[i * KF_W + j] is element i of sub-block j.
 */

/* (p0 + p1) + (p2 + p3), the reference's sum4 */
#define KF_SUM4(a0, a1, a2, a3) V_ADD(V_ADD(a0, a1), V_ADD(a2, a3))
/* The loops over elements are unrolled by 4 by hand (element i goes into partial sum i % 4,
 * named variables rather than arrays) so that the partial sums stay in registers. */

/* quant_fit_affine for KF_W sub-blocks of 32: writes s[j] and m[j]. The error of each
 * candidate is quant_affine_err in double: KF_ERR computes it for the two halves of the lanes
 * (VD vectors of KF_W / 2 doubles) and KF_UPD(ok, err, best) returns the lanes where ok and
 * err < best, updating best there. */
KF_FN(fit_affine)(const float *xt, float nm_s, float *s_out, float *m_out) {
    const VF zero = V_ZERO(), one = V_SET1(1.0f), half = V_SET1(0.5f), nm = V_SET1(nm_s), n = V_SET1(32.0f);
    const VF inv_n = V_SET1(1.0f / 32.0f);
    VF lo = zero, hi = V_LOAD(xt), p0 = zero, p1 = zero, p2 = zero, p3 = zero;
    VF r0 = zero, r1 = zero, r2 = zero, r3 = zero;
#define KF_RANGE(i, acc, acc2)            \
    do {                                  \
        VF x_ = V_LOAD(xt + (i) * KF_W);  \
        lo = V_MIN(x_, lo);               \
        hi = V_MAX(x_, hi);               \
        acc = V_ADD(acc, x_);             \
        acc2 = V_ADD(acc2, V_MUL(x_, x_)); \
    } while (0)
    for (int i = 0; i < 32; i += 4) {
        KF_RANGE(i, p0, r0);
        KF_RANGE(i + 1, p1, r1);
        KF_RANGE(i + 2, p2, r2);
        KF_RANGE(i + 3, p3, r3);
    }
#undef KF_RANGE
    VM dead = V_LE(hi, lo); /* constant sub-blocks: the reference returns s = 0, m = -lo */
    VF sx = KF_SUM4(p0, p1, p2, p3), sxx = KF_SUM4(r0, r1, r2, r3), range = V_SUB(hi, lo);
    VF best_s = V_DIV(range, nm), best_b = lo, inv_range = V_DIV(one, range);
    float xl[32 * KF_W] __attribute__((aligned(64))); /* x - lo, used by every candidate */
    for (int i = 0; i < 32; i++) V_STORE(xl + i * KF_W, V_SUB(V_LOAD(xt + i * KF_W), lo));
    VD best_err[2], err[2];
    /* one pass per candidate: codes, and the sums of codes (exact: small integers, any order,
     * two chains each) and of code * x (four partial sums) */
    VF sq, sqq, sqx;
#define KF_SEARCH(i, acc, sq_, sqq_)                                                 \
    do {                                                                             \
        VF q_ = V_TRUNC(V_MIN(V_ADD(V_MUL(V_LOAD(xl + (i) * KF_W), is), half), nm)); \
        sq_ = V_ADD(sq_, q_);                                                        \
        sqq_ = V_ADD(sqq_, V_MUL(q_, q_));                                           \
        acc = V_ADD(acc, V_MUL(q_, V_LOAD(xt + (i) * KF_W)));                        \
    } while (0)
#define KF_PASS(is_)                                                 \
    do {                                                             \
        const VF is = (is_);                                         \
        VF sqa = zero, sqb = zero, sqqa = zero, sqqb = zero;         \
        p0 = p1 = p2 = p3 = zero;                                    \
        for (int i = 0; i < 32; i += 4) {                            \
            KF_SEARCH(i, p0, sqa, sqqa);                             \
            KF_SEARCH(i + 1, p1, sqb, sqqb);                         \
            KF_SEARCH(i + 2, p2, sqa, sqqa);                         \
            KF_SEARCH(i + 3, p3, sqb, sqqb);                         \
        }                                                            \
        sq = V_ADD(sqa, sqb), sqq = V_ADD(sqqa, sqqb), sqx = KF_SUM4(p0, p1, p2, p3); \
    } while (0)
    /* the plain min/max fit, scored first (the reference's k = -11) */
    KF_PASS(V_DIV(one, best_s));
    KF_ERR(best_s, best_b, sq, sqq, sqx, sx, sxx, best_err);
    for (int k = -10; k <= 10; k++) {
        KF_PASS(V_MUL(V_SET1(nm_s + 0.1f * (float)k), inv_range));
        VF det = V_SUB(V_MUL(n, sqq), V_MUL(sq, sq));
        VM ok = V_NLE(det, zero); /* reference: if (det <= 0) continue */
        if (!V_ANY(ok)) continue;
        VF s = V_DIV(V_SUB(V_MUL(n, sqx), V_MUL(sq, sx)), det);
        VF b = V_MUL(V_SUB(sx, V_MUL(s, sq)), inv_n); /* = / 32 exactly (a power of two) */
        VM bpos = V_GT(b, zero);
        if (V_ANY(bpos)) { /* rare for weights of both signs: skip the division */
            b = V_SEL(bpos, zero, b);
            s = V_SEL(bpos, V_SEL(V_GT(sqq, zero), V_DIV(sqx, sqq), zero), s);
        }
        ok = V_MAND(ok, V_NLE(s, zero)); /* reference: if (s <= 0) continue */
        if (!V_ANY(ok)) continue;
        KF_ERR(s, b, sq, sqq, sqx, sx, sxx, err);
        VM upd = KF_UPD(ok, err, best_err);
        best_s = V_SEL(upd, s, best_s);
        best_b = V_SEL(upd, b, best_b);
    }
#undef KF_PASS
#undef KF_SEARCH
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
    /* best_s = best_num / best_den, divided once at the end (the same division as the
     * reference's, on the same operands; 0 / 1 = +0 where no candidate won) */
    VF best_num = zero, best_den = V_SET1(1.0f), best_gain = V_SET1(-1.0f);
    for (int k = -10; k <= 10; k++) {
        VF is = V_DIV(V_SET1(-((float)nmax + 0.1f * (float)k)), max);
        VF sqqa = zero, sqqb = zero, p0 = zero, p1 = zero, p2 = zero, p3 = zero;
        /* quant_rint_clamp: clamp, then round by adding and subtracting 1.5 * 2^23 */
#define KF_SYM(i, acc, sqq_)                                                    \
    do {                                                                        \
        VF x_ = V_LOAD(xt + (i) * KF_W);                                        \
        VF q_ = V_SUB(V_ADD(V_MAX(V_MIN(V_MUL(is, x_), qhi), qlo), magic), magic); \
        sqq_ = V_ADD(sqq_, V_MUL(q_, q_));                                      \
        acc = V_ADD(acc, V_MUL(q_, x_));                                        \
    } while (0)
        for (int i = 0; i < 16; i += 4) {
            KF_SYM(i, p0, sqqa);
            KF_SYM(i + 1, p1, sqqb);
            KF_SYM(i + 2, p2, sqqa);
            KF_SYM(i + 3, p3, sqqb);
        }
#undef KF_SYM
        VF sqq = V_ADD(sqqa, sqqb), sqx = KF_SUM4(p0, p1, p2, p3);
        VF gain = V_DIV(V_MUL(sqx, sqx), sqq);
        VM upd = V_MAND(V_NLE(sqq, zero), V_GT(gain, best_gain)); /* reference: if (sqq <= 0) continue */
        best_gain = V_SEL(upd, gain, best_gain);
        best_num = V_SEL(upd, sqx, best_num);
        best_den = V_SEL(upd, sqq, best_den);
    }
    V_STORE(s_out, V_SEL(dead, zero, V_DIV(best_num, best_den)));
}

#undef KF_SUM4
