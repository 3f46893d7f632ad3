/*
 * sampler.h — turns one vector of logits into the next token id: greedy or seeded random sampling
 * with temperature, top-k, top-p, min-p, logit bias and repetition/presence/frequency penalties,
 * plus the log-probabilities the OpenAI API reports (`logprobs`, `top_logprobs`).
 *
 * Pipeline, applied in this order to a private copy of the logits (the caller's array is never
 * modified):
 *   1. vocabulary mask: only ids < n_vocab (the tokenizer's size) are candidates; the model's
 *      padded rows [n_vocab, n_logits) are ignored entirely.
 *   2. logit bias:       l[id] += bias (OpenAI `logit_bias`; -INFINITY bans a token).
 *   3. repetition penalty (HF `RepetitionPenaltyLogitsProcessor` / vLLM convention): for every id
 *      that occurs in the prompt or in the accepted (generated) tokens, l = l > 0 ? l / r : l * r.
 *   4. presence / frequency penalties (OpenAI / vLLM convention, over generated tokens only):
 *      l[id] -= count[id] * frequency_penalty + (count[id] > 0) * presence_penalty.
 *   5. temperature <= 0: greedy — the largest logit wins, ties go to the LOWEST id. Stop here.
 *   6. l /= temperature.
 *   7. top-k (k > 0): keep the k largest logits.
 *   8. top-p (p < 1): keep the smallest set of most-probable tokens whose probability (softmax of
 *      what is left after top-k) sums to at least p.
 *   9. min-p (m > 0): keep tokens whose probability is at least m times the most probable one's.
 *  10. draw one token from the renormalised remaining probabilities with the seeded PRNG.
 * Ordering among equal logits is (logit descending, id ascending) everywhere, so every set above
 * is uniquely defined and the result depends only on (logits, params, seed, history).
 *
 * Cost per token: O(V) passes plus expected-linear selection (quickselect, and a mass-weighted
 * quickselect for top-p); nothing sorts the whole vocabulary and nothing is allocated per token —
 * all buffers are sized once, at creation, from n_logits.
 *
 * Log-probabilities (ll_sampler_logprobs) are those of the RAW model distribution (log-softmax of
 * the logits over ids < n_vocab, before bias, penalties and temperature), as vLLM reports by
 * default.
 *
 * Not thread-safe: one sampler per sequence.
 */
#ifndef LILAC_SAMPLER_H
#define LILAC_SAMPLER_H

#include "base/base.h"

#define LL_SAMPLER_MAX_TOP_LOGPROBS 32 /* OpenAI allows up to 20 */

typedef struct ll_logit_bias {
    int32_t id;
    float bias;
} ll_logit_bias;

typedef struct ll_sampler_params {
    float temperature;        /* <= 0: greedy (default 1) */
    int32_t top_k;            /* <= 0: off */
    float top_p;              /* (0, 1]; 1: off */
    float min_p;              /* [0, 1]; 0: off */
    float repetition_penalty; /* > 0; 1: off */
    float presence_penalty;   /* 0: off */
    float frequency_penalty;  /* 0: off */
    uint64_t seed;
    const ll_logit_bias *logit_bias; /* [n_logit_bias], copied at creation */
    int32_t n_logit_bias;
} ll_sampler_params;

typedef struct ll_sampler ll_sampler;

typedef struct ll_token_logprob {
    int32_t id;
    float logprob;
} ll_token_logprob;

typedef struct ll_logprobs {
    ll_token_logprob chosen;                           /* the token passed in */
    int32_t n_top;                                     /* entries in top[] */
    ll_token_logprob top[LL_SAMPLER_MAX_TOP_LOGPROBS]; /* most probable first, ties by id asc */
} ll_logprobs;

/* Defaults: temperature 1, everything else off, seed 0. */
ll_sampler_params ll_sampler_defaults(void);

/* Validates `p` (LL_ERR_INVALID with a message naming the field) and creates a sampler for logit
 * vectors of n_logits floats of which the first n_vocab (<= n_logits) are real tokens. */
ll_status ll_sampler_new(const ll_sampler_params *p, int32_t n_logits, int32_t n_vocab, ll_sampler **out);
void ll_sampler_free(ll_sampler *s);

/* Forgets prompt and generated history and restarts the PRNG from `seed`. */
void ll_sampler_reset(ll_sampler *s, uint64_t seed);

/* Records the prompt for the repetition penalty (replaces an earlier prompt; generated history is
 * kept). Ids outside [0, n_vocab) are LL_ERR_INVALID. */
ll_status ll_sampler_set_prompt(ll_sampler *s, const int32_t *ids, size_t n);

/* Records a generated token (for all penalties). The generation loop calls it for every token it
 * emits, after ll_sampler_sample. Out-of-range ids are a programmer error. */
void ll_sampler_accept(ll_sampler *s, int32_t id);

/* Picks the next token from logits[n_logits]. LL_ERR_INVALID if no token is possible (every
 * candidate banned by logit bias) or a logit is NaN. Does not call ll_sampler_accept. */
ll_status ll_sampler_sample(ll_sampler *s, const float *logits, int32_t *out_id);

/* The exact distribution ll_sampler_sample draws from for these logits (after every step above):
 * writes up to `cap` (id, probability) pairs in unspecified order into ids/probs and the number of
 * candidates into *n (which may exceed cap; then only cap are written). Greedy mode gives one
 * candidate with probability 1. For tests and debugging; does not advance the PRNG. */
ll_status ll_sampler_dist(ll_sampler *s, const float *logits, int32_t *ids, float *probs, int32_t cap, int32_t *n);

/* Log-probability of `id` and the n_top (<= LL_SAMPLER_MAX_TOP_LOGPROBS) most probable tokens
 * under the raw model distribution. */
ll_status ll_sampler_logprobs(ll_sampler *s, const float *logits, int32_t id, int32_t n_top, ll_logprobs *out);

/* ---- the PRNG, exposed for tests and for other seeded components ---- */
typedef struct ll_rng {
    uint64_t s[4];
} ll_rng;
void ll_rng_seed(ll_rng *r, uint64_t seed); /* splitmix64 expansion of the seed */
uint64_t ll_rng_next(ll_rng *r);            /* xoshiro256** */
double ll_rng_uniform(ll_rng *r);           /* [0, 1), 53 random bits */

#endif
