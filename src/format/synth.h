/*
 * synth.h — `lilac synth`: a qwen3_5_moe model with random weights of any configuration, written
 * in the formats the loaders read (an HF safetensors directory, or a llama.cpp GGUF through the
 * converter), together with tokenizer files, so tests and benchmarks get a small model that
 * speaks through a real tokenizer.
 *
 * Weights follow the scaling of shared/reference/gen/gen_models.py (randomize): matrices
 * N(0, 1/sqrt(in)), embeddings N(0, 1), router N(0, 2/sqrt(H)) (peaky routing), lm_head
 * N(0, 3/sqrt(H)), zero-centred norms N(0, 0.2), the GDN norm N(1, 0.2), conv N(0, 0.5),
 * dt_bias N(0, 0.5), A_log = log(U(1, 16)), other vectors N(0, 0.1). Every tensor's values depend
 * only on (seed, tensor name, row), so the output is reproducible and independent of threads.
 */
#ifndef LILAC_SYNTH_H
#define LILAC_SYNTH_H

#include "../model/qwen35.h"

/* Hyperparameters of a named preset: "tiny", "small" (the shapes of shared/fixtures/tiny and
 * small) or "qwen3.6-35b-a3b" (the real release). LL_ERR_INVALID for an unknown name. */
ll_status synth_preset(const char *name, qwen_hparams *hp);

typedef struct synth_opts {
    const char *tokenizer;      /* tokenizer.json file or a directory holding one; NULL: a small
                                   byte-level tokenizer is generated (vocabulary = hp->n_vocab) */
    const char *chat_template;  /* .jinja file; NULL: the tokenizer's own, else a ChatML default */
    int gguf;                   /* 0: HF safetensors directory, 1: GGUF file */
    const char *type;           /* safetensors: "bf16" (default) or "f32"; gguf: any convert type */
    uint64_t seed;
    int threads;                /* <= 0: all cores */
    int force;                  /* replace an existing output */
    int quiet;                  /* no progress output */
} synth_opts;

/* Writes the model to `out` (a directory for safetensors, a file for GGUF). When a tokenizer
 * is given, hp->n_vocab becomes its vocabulary size and eos follows its eos token. */
ll_status synth_write(const qwen_hparams *hp, const synth_opts *o, const char *out);

/* Writes an HF config.json (nested qwen3_5_moe layout, as the release) for hp. */
ll_status synth_write_config(const qwen_hparams *hp, const char *path);

#endif
