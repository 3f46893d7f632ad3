/*
 * sampler.c — logits to token: penalties, bias, temperature, top-k/top-p/min-p, seeded draw and
 * log-probabilities. The pipeline and its conventions are documented in sampler.h.
 *
 * Selection never sorts the vocabulary: top-k is a bounded heap (k <= 1024) or a quickselect;
 * without top-k, a cut-off derived from top-p/min-p keeps only tokens that can survive, and top-p
 * is then a quickselect that carries the probability mass of each partition, so the nucleus
 * boundary is found in expected linear time; min-p is a linear filter. The candidate order is the
 * strict total order (logit desc, id asc), which makes every selected set unique; the pivot PRNG
 * restarts on every call so that the array order, and therefore the seeded draw, depends on the
 * inputs only.
 */
#include "runtime/sampler.h"

#include <math.h>

/* ---------------------------------------------------------------- PRNG */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void ll_rng_seed(ll_rng *r, uint64_t seed) {
    /* splitmix64 never yields four zero words in a row, so the xoshiro state is never all-zero */
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t ll_rng_next(ll_rng *r) {
    uint64_t *s = r->s;
    uint64_t out = rotl64(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return out;
}

double ll_rng_uniform(ll_rng *r) { return (double)(ll_rng_next(r) >> 11) * 0x1.0p-53; }

/* ---------------------------------------------------------------- state */

enum { SUM_BLOCK = 256 }; /* tokens per partial sum of the dense distribution */

typedef struct cand {
    float logit; /* after bias, penalties and temperature */
    float p;     /* exp(logit - max logit): unnormalised probability, max candidate = 1 */
    int32_t id;
} cand;

struct ll_sampler {
    ll_sampler_params p;
    ll_logit_bias *bias; /* [p.n_logit_bias], own copy */
    int32_t n_logits, n_vocab;
    ll_rng rng;          /* the draws: the only thing the seed controls */
    ll_rng pivot_rng;    /* selection pivots, restarted on every call */
    float *work;         /* [n_vocab] logits after bias, penalties (and temperature) */
    float *prob;         /* [n_vocab] exp(logit - max) when top-k is off */
    double *block_mass;  /* [ceil(n_vocab / SUM_BLOCK)] sums of prob[] per block */
    int dense;           /* the last prepare() left the distribution in prob[], not in cands[] */
    cand *cands;         /* [n_vocab] candidates of the current step */
    int32_t *count;      /* [n_vocab] occurrences among generated tokens */
    uint8_t *in_prompt;  /* [n_vocab] 1 if the id occurs in the prompt */
    int32_t *touched;    /* [n_vocab] ids with count > 0 or in_prompt, each listed once */
    int32_t n_touched;
};

ll_sampler_params ll_sampler_defaults(void) {
    ll_sampler_params p = {0};
    p.temperature = 1.0f;
    p.top_p = 1.0f;
    p.repetition_penalty = 1.0f;
    return p;
}

static ll_status validate(const ll_sampler_params *p, int32_t n_logits, int32_t n_vocab) {
    if (n_vocab < 1 || n_logits < n_vocab)
        return ll_err(LL_ERR_INVALID, "sampler: vocabulary size %d with %d logits", n_vocab, n_logits);
    if (!(p->temperature >= 0.0f) || isinf(p->temperature))
        return ll_err(LL_ERR_INVALID, "sampler: temperature %g must be a finite number >= 0", p->temperature);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return ll_err(LL_ERR_INVALID, "sampler: top_p %g must be in (0, 1]", p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return ll_err(LL_ERR_INVALID, "sampler: min_p %g must be in [0, 1]", p->min_p);
    if (!(p->repetition_penalty > 0.0f) || isinf(p->repetition_penalty))
        return ll_err(LL_ERR_INVALID, "sampler: repetition_penalty %g must be a finite number > 0",
                      p->repetition_penalty);
    if (!isfinite(p->presence_penalty))
        return ll_err(LL_ERR_INVALID, "sampler: presence_penalty %g must be finite", p->presence_penalty);
    if (!isfinite(p->frequency_penalty))
        return ll_err(LL_ERR_INVALID, "sampler: frequency_penalty %g must be finite", p->frequency_penalty);
    if (p->n_logit_bias < 0 || (p->n_logit_bias > 0 && !p->logit_bias))
        return ll_err(LL_ERR_INVALID, "sampler: logit_bias has %d entries", p->n_logit_bias);
    for (int32_t i = 0; i < p->n_logit_bias; i++) {
        const ll_logit_bias *b = &p->logit_bias[i];
        if (b->id < 0 || b->id >= n_vocab)
            return ll_err(LL_ERR_INVALID, "sampler: logit_bias token id %d outside the vocabulary [0, %d)",
                          b->id, n_vocab);
        if (isnan(b->bias) || b->bias == INFINITY)
            return ll_err(LL_ERR_INVALID, "sampler: logit_bias for token %d is %g", b->id, b->bias);
    }
    return LL_OK;
}

ll_status ll_sampler_new(const ll_sampler_params *p, int32_t n_logits, int32_t n_vocab, ll_sampler **out) {
    *out = NULL;
    LL_TRY(validate(p, n_logits, n_vocab));
    ll_sampler *s = ll_calloc(1, sizeof(*s));
    if (!s) return ll_err(LL_ERR_OOM, "sampler: out of memory");
    s->p = *p;
    s->n_logits = n_logits;
    s->n_vocab = n_vocab;
    size_t nv = (size_t)n_vocab;
    s->work = ll_malloc(nv * sizeof(float));
    s->prob = ll_malloc(nv * sizeof(float));
    s->block_mass = ll_malloc((nv / SUM_BLOCK + 1) * sizeof(double));
    s->cands = ll_malloc(nv * sizeof(cand));
    s->count = ll_calloc(nv, sizeof(int32_t));
    s->in_prompt = ll_calloc(nv, 1);
    s->touched = ll_malloc(nv * sizeof(int32_t));
    if (p->n_logit_bias > 0) {
        s->bias = ll_malloc((size_t)p->n_logit_bias * sizeof(ll_logit_bias));
        if (s->bias) memcpy(s->bias, p->logit_bias, (size_t)p->n_logit_bias * sizeof(ll_logit_bias));
    }
    s->p.logit_bias = s->bias;
    if (!s->work || !s->prob || !s->block_mass || !s->cands || !s->count || !s->in_prompt || !s->touched ||
        (p->n_logit_bias > 0 && !s->bias)) {
        ll_sampler_free(s);
        return ll_err(LL_ERR_OOM, "sampler: out of memory for a vocabulary of %d", n_vocab);
    }
    ll_rng_seed(&s->rng, p->seed);
    *out = s;
    return LL_OK;
}

void ll_sampler_free(ll_sampler *s) {
    if (!s) return;
    ll_free(s->work);
    ll_free(s->prob);
    ll_free(s->block_mass);
    ll_free(s->cands);
    ll_free(s->count);
    ll_free(s->in_prompt);
    ll_free(s->touched);
    ll_free(s->bias);
    ll_free(s);
}

void ll_sampler_reset(ll_sampler *s, uint64_t seed) {
    for (int32_t i = 0; i < s->n_touched; i++) {
        s->count[s->touched[i]] = 0;
        s->in_prompt[s->touched[i]] = 0;
    }
    s->n_touched = 0;
    s->p.seed = seed;
    ll_rng_seed(&s->rng, seed);
}

ll_status ll_sampler_set_prompt(ll_sampler *s, const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= s->n_vocab)
            return ll_err(LL_ERR_INVALID, "sampler: prompt token %zu is id %d, outside the vocabulary [0, %d)", i,
                          ids[i], s->n_vocab);
    /* drop the previous prompt, keeping ids still counted as generated */
    int32_t keep = 0;
    for (int32_t i = 0; i < s->n_touched; i++) {
        int32_t id = s->touched[i];
        s->in_prompt[id] = 0;
        if (s->count[id] > 0) s->touched[keep++] = id;
    }
    s->n_touched = keep;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (!s->in_prompt[id] && s->count[id] == 0) s->touched[s->n_touched++] = id;
        s->in_prompt[id] = 1;
    }
    return LL_OK;
}

void ll_sampler_accept(ll_sampler *s, int32_t id) {
    LL_ASSERT(id >= 0 && id < s->n_vocab);
    if (!s->in_prompt[id] && s->count[id] == 0) s->touched[s->n_touched++] = id;
    if (s->count[id] < INT32_MAX) s->count[id]++;
}

/* ---------------------------------------------------------------- selection */

/* The candidate order: a before b. Strict and total because ids are distinct. */
static inline int cand_before(const cand *a, const cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static inline void cand_swap(cand *a, cand *b) {
    cand t = *a;
    *a = *b;
    *b = t;
}

/* Partitions a[lo, hi) around a random pivot: on return a[lo, *store) come before the pivot, the
 * pivot is at *store, the rest after it. Returns the summed p of a[lo, *store). */
static double partition(ll_sampler *s, cand *a, int32_t lo, int32_t hi, int32_t *store) {
    int32_t pi = lo + (int32_t)(ll_rng_next(&s->pivot_rng) % (uint64_t)(hi - lo));
    cand_swap(&a[pi], &a[hi - 1]);
    const cand pivot = a[hi - 1];
    int32_t st = lo;
    double mass = 0.0;
    for (int32_t i = lo; i < hi - 1; i++) {
        if (cand_before(&a[i], &pivot)) {
            mass += a[i].p;
            cand_swap(&a[i], &a[st++]);
        }
    }
    cand_swap(&a[st], &a[hi - 1]);
    *store = st;
    return mass;
}

/* Moves the k first candidates (in candidate order) of a[0, n) to a[0, k), in no particular order. */
static void select_top_k(ll_sampler *s, cand *a, int32_t n, int32_t k) {
    int32_t lo = 0, hi = n;
    while (lo < hi) {
        int32_t st;
        partition(s, a, lo, hi, &st);
        if (k <= st) hi = st;
        else if (k == st + 1) return;
        else lo = st + 1;
    }
}

/* Smallest m such that the first m candidates (in candidate order) carry at least `target` of the
 * p mass; moves them to a[0, m). Invariant: mass(a[0, lo)) = acc < target <= mass(a[0, hi)). */
static int32_t select_top_p(ll_sampler *s, cand *a, int32_t n, double target) {
    int32_t lo = 0, hi = n;
    double acc = 0.0;
    while (lo < hi) {
        int32_t st;
        double g = partition(s, a, lo, hi, &st);
        if (acc + g >= target) {
            hi = st;
        } else if (acc + g + a[st].p >= target) {
            return st + 1;
        } else {
            acc += g + a[st].p;
            lo = st + 1;
        }
    }
    /* only reachable through rounding (target ~ total mass): keep what we have, at least one */
    return lo > 0 ? lo : 1;
}

/* ---------------------------------------------------------------- pipeline */

/* Writes the biased and penalised logits of ids [0, n_vocab) to s->work. */
static ll_status apply_penalties(ll_sampler *s, const float *logits) {
    float *w = s->work;
    memcpy(w, logits, (size_t)s->n_vocab * sizeof(float));
    for (int32_t i = 0; i < s->p.n_logit_bias; i++) w[s->bias[i].id] += s->bias[i].bias;
    const float rp = s->p.repetition_penalty, pp = s->p.presence_penalty, fp = s->p.frequency_penalty;
    for (int32_t i = 0; i < s->n_touched; i++) {
        int32_t id = s->touched[i];
        float l = w[id];
        if (rp != 1.0f) l = l > 0.0f ? l / rp : l * rp;
        if (s->count[id] > 0) l -= (float)s->count[id] * fp + pp;
        w[id] = l;
    }
    return LL_OK;
}

/* exp(x) for x <= 0 (logit minus the maximum), branch-free so the passes over the vocabulary stay
 * cheap: x = n ln2 + r with |r| <= ln2/2, e^r by its degree-6 Taylor polynomial (relative error
 * < 2e-7), 2^n put into the exponent bits. exp(0) is exactly 1; below -80 (and for -inf) it is 0
 * (the true value is < 2e-35 there). */
static inline float exp_neg(float x) {
    float xc = x < -80.0f ? -80.0f : x;
    float tn = xc * 1.44269504088896341f - 0.5f; /* round to nearest via truncation of a negative */
    int32_t n = (int32_t)tn;
    float r = xc - (float)n * 0.693145751953125f - (float)n * 1.42860682030941723e-6f; /* ln2 in two parts */
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
    uint32_t bits;
    memcpy(&bits, &p, 4);
    bits += (uint32_t)n << 23;
    float out;
    memcpy(&out, &bits, 4);
    return x < -80.0f ? 0.0f : out;
}

static ll_status first_nan(const float *w, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        if (isnan(w[i])) return ll_err(LL_ERR_INVALID, "sampler: logit of token %d is NaN", i);
    return ll_err(LL_ERR_INTERNAL, "sampler: NaN vanished");
}

/* Keeps the k first candidates (in candidate order) of w[0, nv) in c[0, k) as a heap whose root
 * c[0] is the LAST of them: one pass in which almost every logit loses its single comparison with
 * the root. Returns the number kept (< k only if fewer than k tokens are possible). */
static int32_t heap_top_k(const float *w, int32_t nv, int32_t k, cand *c) {
    int32_t n = 0;
    for (int32_t i = 0; i < nv; i++) {
        if (w[i] == -INFINITY) continue;
        cand x = {w[i], 0.0f, i};
        int32_t j;
        if (n < k) { /* sift up */
            j = n++;
            while (j > 0 && cand_before(&c[(j - 1) / 2], &x)) {
                c[j] = c[(j - 1) / 2];
                j = (j - 1) / 2;
            }
            c[j] = x;
            continue;
        }
        if (!cand_before(&x, &c[0])) continue;
        j = 0; /* replace the root, sift down */
        for (;;) {
            int32_t l = 2 * j + 1, r = l + 1, m = j;
            const cand *mv = &x;
            if (l < n && cand_before(mv, &c[l])) m = l, mv = &c[l];
            if (r < n && cand_before(mv, &c[r])) m = r, mv = &c[r];
            if (m == j) break;
            c[j] = c[m];
            j = m;
        }
        c[j] = x;
    }
    return n;
}

/* Runs the pipeline and leaves the final candidates in s->cands[0, *n_out) with unnormalised p;
 * returns their total p through *mass. The candidate array order is a function of the inputs
 * only (the pivot PRNG restarts on every call), so the seeded draw is reproducible. */
static ll_status prepare(ll_sampler *s, const float *logits, int32_t *n_out, double *mass) {
    const int32_t nv = s->n_vocab;
    LL_TRY(apply_penalties(s, logits));
    float *w = s->work;
    cand *c = s->cands;
    ll_rng_seed(&s->pivot_rng, 0x5eed);
    s->dense = 0;

    if (s->p.temperature <= 0.0f) { /* greedy: first maximum, i.e. lowest id among ties */
        int32_t best = -1;
        float bv = -INFINITY; /* kept in a register: reloading w[best] would serialise the loop */
        int bad = 0;
        for (int32_t i = 0; i < nv; i++) {
            float v = w[i];
            bad |= v != v;
            if (v > bv) bv = v, best = i;
        }
        if (bad) return first_nan(w, nv);
        if (best < 0) return ll_err(LL_ERR_INVALID, "sampler: every token is banned (all logits -inf)");
        c[0] = (cand){bv, 1.0f, best};
        *n_out = 1;
        *mass = 1.0;
        return LL_OK;
    }

    /* temperature in place, maximum, NaN check: one branch-free pass */
    const float t = s->p.temperature;
    float mx = -INFINITY;
    int32_t n_ok = 0;
    int bad = 0;
    for (int32_t i = 0; i < nv; i++) {
        float v = w[i] / t;
        w[i] = v;
        bad |= v != v;
        n_ok += v != -INFINITY;
        mx = v > mx ? v : mx;
    }
    if (bad) return first_nan(w, nv);
    if (n_ok == 0) return ll_err(LL_ERR_INVALID, "sampler: every token is banned (all logits -inf)");
    if (mx == INFINITY) { /* a +inf logit simply wins (ties: lowest id) */
        for (int32_t i = 0; i < nv; i++)
            if (w[i] == INFINITY) {
                c[0] = (cand){w[i], 1.0f, i};
                break;
            }
        *n_out = 1;
        *mass = 1.0;
        return LL_OK;
    }

    int32_t n = 0;
    double total = 0.0;
    const int32_t k = s->p.top_k;
    if (k > 0 && k < n_ok) {
        if (k <= 1024) {
            n = heap_top_k(w, nv, k, c);
        } else {
            for (int32_t i = 0; i < nv; i++)
                if (w[i] != -INFINITY) c[n++] = (cand){w[i], 0.0f, i};
            select_top_k(s, c, n, k);
            n = k;
        }
        for (int32_t i = 0; i < n; i++) total += (c[i].p = exp_neg(c[i].logit - mx));
    } else {
        /* no top-k: probabilities of the whole vocabulary, then only tokens that can survive
         * top-p and min-p become candidates. For top-p: if every token below a cut-off c were
         * dropped, the dropped mass would be < (n-1)c; with c = (1-p)Z/(n-1) the kept tokens carry
         * more than pZ, so the nucleus lies among them (the factor 1/2 absorbs rounding). */
        float *e = s->prob;
        double acc = 0.0;
        int32_t i = 0, b = 0;
        while (i < nv) {
            int32_t end = LL_MIN(nv, i + SUM_BLOCK);
            float s0 = 0, s1 = 0, s2 = 0, s3 = 0; /* four chains: one running sum would serialise */
            for (; i + 4 <= end; i += 4) {
                s0 += (e[i] = exp_neg(w[i] - mx));
                s1 += (e[i + 1] = exp_neg(w[i + 1] - mx));
                s2 += (e[i + 2] = exp_neg(w[i + 2] - mx));
                s3 += (e[i + 3] = exp_neg(w[i + 3] - mx));
            }
            for (; i < end; i++) s0 += (e[i] = exp_neg(w[i] - mx));
            s->block_mass[b] = (double)((s0 + s1) + (s2 + s3));
            acc += s->block_mass[b++];
        }
        total = acc;
        if (s->p.top_p >= 1.0f && s->p.min_p <= 0.0f) {
            /* plain temperature sampling: draw straight from prob[], no candidate list */
            s->dense = 1;
            *n_out = n_ok;
            *mass = total;
            return LL_OK;
        }
        double cut = 0.0;
        if (s->p.top_p < 1.0f && n_ok > 1) {
            double cp = 0.5 * (1.0 - (double)s->p.top_p) * total / (double)(n_ok - 1);
            if (cp <= 1.0) cut = cp; /* else it could drop the maximum (p = 1): no cut */
        }
        if (s->p.min_p > 0.0f && (double)s->p.min_p > cut) cut = s->p.min_p;
        for (int32_t j = 0; j < nv; j++)
            if (e[j] > 0.0f && e[j] >= cut) c[n++] = (cand){w[j], e[j], j};
        if (n == 0) /* everything underflowed except... nothing: cannot happen, the max has e = 1 */
            return ll_err(LL_ERR_INTERNAL, "sampler: no candidate left");
    }
    /* top-p against the mass of the whole (top-k) distribution: if min-p's cut already removed
     * part of the nucleus, this keeps every remaining candidate, which is the intersection of
     * the two sets either way */
    if (s->p.top_p < 1.0f && n > 1) n = select_top_p(s, c, n, (double)s->p.top_p * total);
    if (s->p.min_p > 0.0f) {
        int32_t m = 0;
        for (int32_t i = 0; i < n; i++)
            if (c[i].p >= s->p.min_p) c[m++] = c[i];
        n = m;
    }
    total = 0.0;
    for (int32_t i = 0; i < n; i++) total += c[i].p;
    LL_ASSERT(n >= 1 && total > 0.0);
    *n_out = n;
    *mass = total;
    return LL_OK;
}

/* Inverse-CDF draw from the dense distribution prob[0, n_vocab): whole blocks are skipped by their
 * stored sums, so only one block is walked token by token. */
static int32_t draw_dense(ll_sampler *s, double r) {
    const float *e = s->prob;
    const int32_t nv = s->n_vocab, nb = (nv + SUM_BLOCK - 1) / SUM_BLOCK;
    double acc = 0.0;
    int32_t b = 0;
    while (b < nb - 1 && acc + s->block_mass[b] <= r) acc += s->block_mass[b++];
    int32_t pick = -1;
    for (int32_t i = b * SUM_BLOCK; i < LL_MIN(nv, (b + 1) * SUM_BLOCK); i++) {
        if (e[i] <= 0.0f) continue;
        acc += e[i];
        pick = i;
        if (r < acc) return i;
    }
    /* only through rounding (r within a few ulps of a block boundary): the last possible token */
    if (pick < 0)
        for (int32_t i = LL_MIN(nv, (b + 1) * SUM_BLOCK) - 1; i >= 0 && pick < 0; i--)
            if (e[i] > 0.0f) pick = i;
    LL_ASSERT(pick >= 0);
    return pick;
}

ll_status ll_sampler_sample(ll_sampler *s, const float *logits, int32_t *out_id) {
    int32_t n;
    double total;
    LL_TRY(prepare(s, logits, &n, &total));
    if (s->dense) {
        *out_id = draw_dense(s, ll_rng_uniform(&s->rng) * total);
        return LL_OK;
    }
    const cand *c = s->cands;
    if (n == 1) {
        *out_id = c[0].id;
        return LL_OK;
    }
    /* inverse CDF over the candidates in array order; the array order is a deterministic function
     * of the inputs, so the same seed gives the same token */
    double r = ll_rng_uniform(&s->rng) * total, acc = 0.0;
    int32_t pick = -1;
    for (int32_t i = 0; i < n; i++) {
        if (c[i].p <= 0.0f) continue;
        acc += c[i].p;
        pick = i;
        if (r < acc) break;
    }
    LL_ASSERT(pick >= 0);
    *out_id = c[pick].id;
    return LL_OK;
}

ll_status ll_sampler_dist(ll_sampler *s, const float *logits, int32_t *ids, float *probs, int32_t cap, int32_t *n) {
    int32_t m;
    double total;
    LL_TRY(prepare(s, logits, &m, &total));
    if (s->dense) {
        m = 0;
        for (int32_t i = 0; i < s->n_vocab; i++) {
            if (s->prob[i] <= 0.0f) continue;
            if (m < cap) {
                ids[m] = i;
                probs[m] = (float)(s->prob[i] / total);
            }
            m++;
        }
        *n = m;
        return LL_OK;
    }
    for (int32_t i = 0; i < m && i < cap; i++) {
        ids[i] = s->cands[i].id;
        probs[i] = (float)(s->cands[i].p / total);
    }
    *n = m;
    return LL_OK;
}

/* ---------------------------------------------------------------- log-probabilities */

ll_status ll_sampler_logprobs(ll_sampler *s, const float *logits, int32_t id, int32_t n_top, ll_logprobs *out) {
    const int32_t nv = s->n_vocab;
    if (id < 0 || id >= nv)
        return ll_err(LL_ERR_INVALID, "sampler: logprobs for token %d outside the vocabulary [0, %d)", id, nv);
    if (n_top < 0 || n_top > LL_SAMPLER_MAX_TOP_LOGPROBS)
        return ll_err(LL_ERR_INVALID, "sampler: top_logprobs %d must be in [0, %d]", n_top,
                      LL_SAMPLER_MAX_TOP_LOGPROBS);
    float mx = -INFINITY;
    for (int32_t i = 0; i < nv; i++) {
        if (isnan(logits[i])) return ll_err(LL_ERR_INVALID, "sampler: logit of token %d is NaN", i);
        if (logits[i] > mx) mx = logits[i];
    }
    if (!isfinite(mx)) return ll_err(LL_ERR_INVALID, "sampler: maximum logit is %g", mx);
    double sum = 0.0;
    for (int32_t i = 0; i < nv; i++) sum += expf(logits[i] - mx);
    const float lse = mx + (float)log(sum);

    /* top n_top by insertion into a small sorted array (n_top <= 32): almost every logit fails the
     * comparison with the current last entry, so this is one pass over the vocabulary */
    ll_token_logprob *top = out->top;
    int32_t k = 0;
    for (int32_t i = 0; i < nv && n_top > 0; i++) {
        float l = logits[i];
        if (k == n_top && !(l > top[k - 1].logprob)) continue; /* ties keep the lower id */
        int32_t j = k < n_top ? k++ : k - 1;
        while (j > 0 && l > top[j - 1].logprob) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = (ll_token_logprob){i, l};
    }
    for (int32_t j = 0; j < k; j++) top[j].logprob -= lse;
    out->n_top = k;
    out->chosen = (ll_token_logprob){id, logits[id] - lse};
    return LL_OK;
}
