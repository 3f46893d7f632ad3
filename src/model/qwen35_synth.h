/*
 * qwen35_synth.h — synthetic qwen3_5_moe models with random weights of any preset's shapes, for
 * benchmarks and backend-equivalence tests when no checkpoint is at hand.
 *
 * Every quantized block is a pure function of (seed, tensor key, block index) through a
 * counter-based hash (qsyn_block_fill below), so the host builder (qwen35_synth.c) and a GPU
 * generator produce byte-identical weights. That lets a backend build a full-size model directly in
 * device memory ("lazy" synthetic: matrix data pointers are NULL on the host) while the CPU gets the
 * same numbers from host memory for the small presets.
 *
 * Quant mix (llama.cpp Q4_K_M-like rule): lm_head Q6_K; attention wv Q6_K in every attention layer;
 * expert and shared-expert down projections Q6_K in the "more bits" layers (i < L/8, i >= 7L/8, or
 * (i - L/8) % 3 == 2), Q4_K elsewhere; every other matrix (tok_embd, wq/wk/wo, wqkv/wz/wout, expert
 * gate/up/down) Q4_K; router, shared-expert gate, GDN a/b projections F32; norms and GDN vectors F32.
 * Block contents are random but valid: fp16 d/dmin in a range that gives weights of RMS ≈ 0.02–0.05,
 * random 6-bit scales/mins, random nibbles. They are not quantizations of anything.
 */
#ifndef LILAC_QWEN35_SYNTH_H
#define LILAC_QWEN35_SYNTH_H

#include <stdint.h>

#ifdef __CUDACC__
#define QSYN_FN __host__ __device__ static inline
#else
#define QSYN_FN static inline
#endif

/* splitmix64 finalizer: a good 64-bit mix of a counter. */
QSYN_FN uint64_t qsyn_mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* FNV-1a of a tensor name: the tensor key. */
QSYN_FN uint64_t qsyn_key(const char *name) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *name; name++) h = (h ^ (uint8_t)*name) * 0x100000001b3ull;
    return h;
}

/* Exact fp16 bits for a few positive values 2^e * (1 + m/1024), built without float math so
 * host and device agree bit for bit. e in [-24+15.., ..]: here e = exp - 15 with exp in [1, 30]. */
QSYN_FN uint16_t qsyn_f16(int exp_biased, int mant) { return (uint16_t)((exp_biased << 10) | (mant & 1023)); }

/* Fills one block of type `type` (12 = Q4_K, 14 = Q6_K; other types unsupported here) with
 * random contents. `out` receives 144 (Q4_K) or 210 (Q6_K) bytes. */
QSYN_FN void qsyn_block_fill(int type, uint64_t seed, uint64_t key, uint64_t block, uint8_t *out) {
    uint64_t s = qsyn_mix(seed ^ qsyn_mix(key ^ qsyn_mix(block)));
    uint64_t r = qsyn_mix(s);
    if (type == 12) { /* Q4_K: d ≈ 2^-12..2^-11, dmin ≈ 2^-9..2^-8; scales 16..47, mins 16..47, so
                       * d·sc·q (mean ≈ d·32·7.5) and dmin·m roughly cancel: weights centred near 0 */
        uint16_t d = qsyn_f16(15 - 12, (int)(r & 1023)), dmin = qsyn_f16(15 - 9, (int)((r >> 10) & 1023));
        out[0] = (uint8_t)d; out[1] = (uint8_t)(d >> 8); out[2] = (uint8_t)dmin; out[3] = (uint8_t)(dmin >> 8);
        /* 12 bytes of 6-bit scales/mins: sc[j] in 16..47 (bit 4 or 5 set), m[j] in 0..31 */
        uint8_t sc[8], mn[8];
        r = qsyn_mix(r);
        for (int j = 0; j < 8; j++) { sc[j] = (uint8_t)(16 + ((r >> (4 * j)) & 31)); mn[j] = (uint8_t)(16 + ((r >> (32 + 4 * j)) & 15) * 2); }
        for (int j = 0; j < 4; j++) {
            out[4 + j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
            out[4 + j + 4] = (uint8_t)((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
            out[4 + j + 8] = (uint8_t)((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
        }
        for (int i = 0; i < 128; i += 8) {
            r = qsyn_mix(r + (uint64_t)i);
            for (int b = 0; b < 8; b++) out[16 + i + b] = (uint8_t)(r >> (8 * b));
        }
    } else if (type == 14) { /* Q6_K: ql[128] qh[64] scales[16] (int8 8..23) d ≈ 2^-13..2^-12 */
        for (int i = 0; i < 192; i += 8) {
            r = qsyn_mix(r + (uint64_t)i);
            for (int b = 0; b < 8; b++) out[i + b] = (uint8_t)(r >> (8 * b));
        }
        r = qsyn_mix(r);
        for (int j = 0; j < 16; j++) {
            int v = 8 + (int)((r >> (4 * j)) & 15);
            out[192 + j] = (uint8_t)(((j + (int)(s & 1)) & 1) ? v : -v); /* signed scales */
        }
        uint16_t d = qsyn_f16(15 - 13, (int)(s >> 54));
        out[208] = (uint8_t)d; out[209] = (uint8_t)(d >> 8);
    }
}

#include "qwen35.h"
#ifdef __cplusplus
extern "C" {
#endif

/* Builds a synthetic model. Presets: "qwen3.6-35b-a3b" (the real shapes, 40 layers),
 * "qwen3.6-35b-a3b-L4" (real widths, 4 layers: L L L F), "tiny" (H 256, 4 layers, 16 experts,
 * for tests). lazy = 0: every weight is generated in host memory (the CPU can run it);
 * lazy = 1: quantized matrices get data == NULL and only a backend that generates them on the
 * device (cuda) can run the model. Free with qwen_model_free_synthetic (or qwen_model_free once the
 * loader knows format "synthetic"). */
ll_status qwen_model_synthetic(const char *preset, uint64_t seed, qwen_model **out);
ll_status qwen_model_synthetic_ex(const char *preset, uint64_t seed, int lazy, qwen_model **out);
void qwen_model_free_synthetic(qwen_model *m);
/* 1 (and *seed) if m is a lazy synthetic model whose NULL matrices a backend must generate with
 * qsyn_block_fill(type, seed, qsyn_key(mat.name), block index within the named tensor, ...). For
 * expert views all E views of one kind share one name; expert e's blocks start at e*rows*nb. */
int qwen_model_synthetic_lazy(const qwen_model *m, uint64_t *seed);
#ifdef __cplusplus
}
#endif

#endif
