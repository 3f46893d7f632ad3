/*
 * quant_x86_kfit.h — the K-quant sub-block fits of quant_ref.c (quant_fit_affine,
 * quant_fit_symmetric), vectorized one sub-block per SIMD lane. Included by quant_x86.c once per
 * vector width, after it defines (this file undefines them at its end):
 *   KF_W         lanes (8: AVX2, 16: AVX-512)
 *   KF_FN(name)  the function's attributes and name for this width
 *   VF, VM       float vector and comparison-mask types
 *   V_*          the operations below, each one IEEE operation per lane (V_FMA: one rounding)
 *
 * Why lanes = sub-blocks: the reference fit is a long chain of scalar decisions per sub-block
 * (9 candidate scales, each a rounding pass with its sums and a score, kept if best). Running
 * W sub-blocks side by side turns every scalar operation into the same operation on a vector,
 * with the reference's branches (constant sub-blocks, invalid candidates, the m >= 0 refit) as
 * lane masks; each lane then performs exactly the reference's operations in the reference's
 * order, so the results are identical bit for bit (no horizontal sums are needed at all). The
 * input is transposed: xt[i * KF_W + j] is element i of sub-block j.
 */

/* (p0 + p1) + (p2 + p3), the reference's sum4 */
#define KF_SUM4(a0, a1, a2, a3) V_ADD(V_ADD(a0, a1), V_ADD(a2, a3))
/* The loops over elements are unrolled by 4 by hand (element i goes into partial sum i % 4,
 * named variables rather than arrays) so that the partial sums stay in registers. The code sums
 * (sum q, sum q^2) are exact in fp32 (small integers), so their order and FMA are free. */

/* quant_fit_affine for KF_W sub-blocks of 32: writes s[j] and m[j]. */
KF_FN(fit_affine)(const float *xt, int nmax, float *s_out, float *m_out) {
    const float nm_s = (float)nmax;
    const VF zero = V_ZERO(), one = V_SET1(1.0f), n32 = V_SET1(32.0f), inv_n = V_SET1(1.0f / 32.0f);
    const VF magic = V_SET1(QUANT_MAGIC), top = V_SET1(nm_s + QUANT_MAGIC);
    VF lo = zero, hi = V_LOAD(xt), p0 = zero, p1 = zero, p2 = zero, p3 = zero;
#define KF_RANGE(i, acc)                 \
    do {                                 \
        VF x_ = V_LOAD(xt + (i) * KF_W); \
        lo = V_MIN(x_, lo);              \
        hi = V_MAX(x_, hi);              \
        acc = V_ADD(acc, x_);            \
    } while (0)
    for (int i = 0; i < 32; i += 4) {
        KF_RANGE(i, p0);
        KF_RANGE(i + 1, p1);
        KF_RANGE(i + 2, p2);
        KF_RANGE(i + 3, p3);
    }
#undef KF_RANGE
    VM dead = V_LE(hi, lo); /* constant sub-blocks: the reference returns s = 0, m = -lo */
    VF mean = V_MUL(KF_SUM4(p0, p1, p2, p3), inv_n), range = V_SUB(hi, lo), ir = V_DIV(one, range);
    /* [32][KF_W] centred u = (x - mean) / range and zero-based v = (x - lo) / range */
    float ut[32 * KF_W] __attribute__((aligned(64))), vt[32 * KF_W] __attribute__((aligned(64)));
    p0 = p1 = p2 = p3 = zero;
#define KF_NORM(i, acc)                                   \
    do {                                                  \
        VF x_ = V_LOAD(xt + (i) * KF_W);                  \
        VF u_ = V_MUL(V_SUB(x_, mean), ir);               \
        V_STORE(ut + (i) * KF_W, u_);                     \
        V_STORE(vt + (i) * KF_W, V_MUL(V_SUB(x_, lo), ir)); \
        acc = V_ADD(acc, u_);                             \
    } while (0)
    for (int i = 0; i < 32; i += 4) {
        KF_NORM(i, p0);
        KF_NORM(i + 1, p1);
        KF_NORM(i + 2, p2);
        KF_NORM(i + 3, p3);
    }
#undef KF_NORM
    const VF su = KF_SUM4(p0, p1, p2, p3);
    /* the running best (quant_affine_best) */
    VF bg = zero, bdet = one, bnum = zero, bsq = zero, bsqq = zero, bsqx = zero, bc = V_SET1(nm_s);
    VF sq, sqq, sqx;
    /* one pass (quant_affine_pass): codes by one FMA against the magic constant, clamped to nmax
     * only where CLAMP_ (the reference's test, the same for every lane in the grid) */
#define KF_CODE(i, acc, sq_, sqq_, CLAMP_)                              \
    do {                                                                \
        VF t_ = V_FMA(V_LOAD(vt + (i) * KF_W), cv, magic);              \
        if (CLAMP_) t_ = V_MIN(t_, top);                                \
        VF q_ = V_SUB(t_, magic);                                       \
        sq_ = V_ADD(sq_, q_);                                           \
        sqq_ = V_FMA(q_, q_, sqq_);                                     \
        acc = V_FMA(q_, V_LOAD(ut + (i) * KF_W), acc);                  \
    } while (0)
#define KF_PASS(c_, CLAMP_)                                                           \
    do {                                                                              \
        const VF cv = (c_);                                                           \
        VF sqa = zero, sqb = zero, sqc = zero, sqd = zero;                            \
        VF sqqa = zero, sqqb = zero, sqqc = zero, sqqd = zero;                        \
        p0 = p1 = p2 = p3 = zero;                                                     \
        for (int i = 0; i < 32; i += 4) {                                             \
            KF_CODE(i, p0, sqa, sqqa, CLAMP_);                                        \
            KF_CODE(i + 1, p1, sqb, sqqb, CLAMP_);                                    \
            KF_CODE(i + 2, p2, sqc, sqqc, CLAMP_);                                    \
            KF_CODE(i + 3, p3, sqd, sqqd, CLAMP_);                                    \
        }                                                                             \
        sq = KF_SUM4(sqa, sqb, sqc, sqd), sqq = KF_SUM4(sqqa, sqqb, sqqc, sqqd);      \
        sqx = KF_SUM4(p0, p1, p2, p3);                                                \
    } while (0)
    /* quant_affine_score, lane-masked */
#define KF_SCORE(c_)                                                                                 \
    do {                                                                                             \
        VF det = V_SUB(V_MUL(n32, sqq), V_MUL(sq, sq)), num = V_SUB(V_MUL(n32, sqx), V_MUL(sq, su)); \
        VF g = V_MUL(num, num);                                                                      \
        VM upd = V_MAND(V_MAND(V_GT(det, zero), V_GT(num, zero)), V_GT(V_MUL(g, bdet), V_MUL(bg, det))); \
        bg = V_SEL(upd, g, bg);                                                                      \
        bdet = V_SEL(upd, det, bdet);                                                                \
        bnum = V_SEL(upd, num, bnum);                                                                \
        bsq = V_SEL(upd, sq, bsq);                                                                   \
        bsqq = V_SEL(upd, sqq, bsqq);                                                                \
        bsqx = V_SEL(upd, sqx, bsqx);                                                                \
        bc = V_SEL(upd, (c_), bc);                                                                   \
    } while (0)
    for (int k = -QUANT_FIT_HALF; k <= QUANT_FIT_HALF; k++) {
        float c = quant_fit_cand(nmax, k);
        if (c > nm_s + 0.25f) KF_PASS(V_SET1(c), 1);
        else KF_PASS(V_SET1(c), 0);
        KF_SCORE(V_SET1(c));
    }
    {   /* the best grid point's neighbours, per lane */
        const VF c1 = bc, h = V_SET1(0.5f * QUANT_FIT_STEP), cm = V_SUB(c1, h), cp = V_ADD(c1, h);
        KF_PASS(cm, 1);
        KF_SCORE(cm);
        KF_PASS(cp, 1);
        KF_SCORE(cp);
    }
#undef KF_SCORE
#undef KF_PASS
#undef KF_CODE
    /* back to x, as the reference: s = sn * range, b = ((su - sn sq) / 32) * range + mean */
    VF sn = V_DIV(bnum, bdet), s = V_MUL(sn, range);
    VF b = V_ADD(V_MUL(V_MUL(V_SUB(su, V_MUL(sn, bsq)), inv_n), range), mean);
    VM bpos = V_GT(b, zero);
    if (V_ANY(bpos)) { /* rare for weights of both signs: skip the division */
        VF s0 = V_SEL(V_GT(bsqq, zero), V_DIV(V_ADD(V_MUL(range, bsqx), V_MUL(mean, bsq)), bsqq), zero);
        b = V_SEL(bpos, zero, b);
        s = V_SEL(bpos, s0, s);
    }
    VM good = V_MAND(V_GT(bg, zero), V_GT(s, zero));
    s = V_SEL(good, s, V_DIV(range, V_SET1(nm_s)));
    b = V_SEL(good, b, lo);
    V_STORE(s_out, V_SEL(dead, zero, s));
    V_STORE(m_out, V_SEL(dead, V_NEG(lo), V_NEG(b)));
}

/* quant_fit_symmetric for KF_W sub-blocks of 16 (codes in [-nmax, nmax-1]): writes s[j]. */
KF_FN(fit_symmetric)(const float *xt, int nmax, float *s_out) {
    const float nm_s = (float)nmax;
    const VF zero = V_ZERO(), magic = V_SET1(QUANT_MAGIC);
    const VF top = V_SET1((nm_s - 1.0f) + QUANT_MAGIC), bot = V_SET1(QUANT_MAGIC - nm_s);
    /* the first element of largest magnitude (the reference's sequential scan, NaN never
     * winning): the largest |x| as a tree of maxima over |x| with NaN -> +0 (exact, order-free),
     * then the first element equal to it, by selecting from the last element to the first */
    VF a0 = zero, a1 = zero, a2 = zero, a3 = zero, max = zero;
    for (int i = 0; i < 16; i += 4) {
        a0 = V_MAX(V_MAX(V_ABS(V_LOAD(xt + i * KF_W)), zero), a0);
        a1 = V_MAX(V_MAX(V_ABS(V_LOAD(xt + (i + 1) * KF_W)), zero), a1);
        a2 = V_MAX(V_MAX(V_ABS(V_LOAD(xt + (i + 2) * KF_W)), zero), a2);
        a3 = V_MAX(V_MAX(V_ABS(V_LOAD(xt + (i + 3) * KF_W)), zero), a3);
    }
    const VF amax = V_MAX(V_MAX(a0, a1), V_MAX(a2, a3));
    for (int i = 15; i >= 0; i--) {
        VF x = V_LOAD(xt + i * KF_W);
        max = V_SEL(V_EQ(V_ABS(x), amax), x, max);
    }
    VM dead = V_EQ(amax, zero);
    const VF inv = V_DIV(V_SET1(-1.0f), max);
    float yt[16 * KF_W] __attribute__((aligned(64))); /* [16][KF_W] y = -x / max */
    for (int i = 0; i < 16; i++) V_STORE(yt + i * KF_W, V_MUL(V_LOAD(xt + i * KF_W), inv));
    VF bg = V_SET1(-1.0f), bsqq = V_SET1(1.0f), bsqx = zero, bc = V_SET1(nm_s), sqq, sqx;
#define KF_SYM(i, acc, sqq_, CLAMP_)                            \
    do {                                                        \
        VF y_ = V_LOAD(yt + (i) * KF_W);                        \
        VF t_ = V_MIN(V_FMA(y_, cv, magic), top);               \
        if (CLAMP_) t_ = V_MAX(t_, bot);                        \
        VF q_ = V_SUB(t_, magic);                               \
        sqq_ = V_FMA(q_, q_, sqq_);                             \
        acc = V_FMA(q_, y_, acc);                               \
    } while (0)
#define KF_PASS(c_, CLAMP_)                                     \
    do {                                                        \
        const VF cv = (c_);                                     \
        VF sqqa = zero, sqqb = zero, sqqc = zero, sqqd = zero;  \
        VF p0 = zero, p1 = zero, p2 = zero, p3 = zero;          \
        for (int i = 0; i < 16; i += 4) {                       \
            KF_SYM(i, p0, sqqa, CLAMP_);                        \
            KF_SYM(i + 1, p1, sqqb, CLAMP_);                    \
            KF_SYM(i + 2, p2, sqqc, CLAMP_);                    \
            KF_SYM(i + 3, p3, sqqd, CLAMP_);                    \
        }                                                       \
        sqq = KF_SUM4(sqqa, sqqb, sqqc, sqqd), sqx = KF_SUM4(p0, p1, p2, p3); \
    } while (0)
#define KF_SCORE(c_)                                                                   \
    do {                                                                               \
        VF g = V_MUL(sqx, sqx);                                                        \
        VM upd = V_MAND(V_GT(sqq, zero), V_GT(V_MUL(g, bsqq), V_MUL(bg, sqq)));       \
        bg = V_SEL(upd, g, bg);                                                        \
        bsqq = V_SEL(upd, sqq, bsqq);                                                  \
        bsqx = V_SEL(upd, sqx, bsqx);                                                  \
        bc = V_SEL(upd, (c_), bc);                                                     \
    } while (0)
    for (int k = -QUANT_SYM_HALF; k <= QUANT_SYM_HALF; k++) {
        float c = quant_sym_cand(nmax, k);
        if (c > nm_s + 0.25f) KF_PASS(V_SET1(c), 1);
        else KF_PASS(V_SET1(c), 0);
        KF_SCORE(V_SET1(c));
    }
    {
        const VF c1 = bc, h = V_SET1(0.5f * QUANT_SYM_STEP), cm = V_SUB(c1, h), cp = V_ADD(c1, h);
        KF_PASS(cm, 1);
        KF_SCORE(cm);
        KF_PASS(cp, 1);
        KF_SCORE(cp);
    }
#undef KF_SCORE
#undef KF_PASS
#undef KF_SYM
    V_STORE(s_out, V_SEL(dead, zero, V_MUL(V_DIV(bsqx, bsqq), V_NEG(max))));
}

#undef KF_SUM4

/* the includer's parameters end here, so that the next width can define its own */
#undef KF_W
#undef KF_FN
#undef VF
#undef VM
#undef V_ZERO
#undef V_SET1
#undef V_LOAD
#undef V_STORE
#undef V_ADD
#undef V_SUB
#undef V_MUL
#undef V_FMA
#undef V_DIV
#undef V_MIN
#undef V_MAX
#undef V_TRUNC
#undef V_ABS
#undef V_NEG
#undef V_LT
#undef V_GT
#undef V_LE
#undef V_EQ
#undef V_NLE
#undef V_SEL
#undef V_MAND
#undef V_ANY
