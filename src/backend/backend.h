/*
 * backend.h — the narrow interface between the model-agnostic runtime and a compute backend
 * (cpu, cuda). A backend owns its copy/layout of the weights, its per-sequence state (KV cache
 * of the attention layers, conv windows and fp32 recurrent states of the GDN layers) and all
 * scratch buffers, allocated when it is created or when a sequence is created — never per token.
 * Each backend sequences its own kernels in exactly one forward function.
 *
 * Orchestration code includes only this header; it never sees CUDA types.
 */
#ifndef LILAC_BACKEND_H
#define LILAC_BACKEND_H

#include "../model/qwen35.h"

typedef struct ll_backend ll_backend;
typedef struct ll_seq ll_seq; /* backend-private per-sequence state */

typedef enum ll_logits_mode {
    LL_LOGITS_NONE = 0, /* only advance the state (prefill of a prefix) */
    LL_LOGITS_LAST,     /* logits[V] of the last token */
    LL_LOGITS_ALL,      /* logits[n_tokens][V], row i after token i (tests, `lilac logits`) */
} ll_logits_mode;

/* Debug tap: called (CPU backend) with named activations [n_tokens][dim] as the forward pass
 * produces them: "embed", "layer.<i>", "norm.in", "norm.out". */
typedef void (*ll_tap_fn)(void *ud, const char *name, const float *data, int32_t n_tokens, int32_t dim);

typedef struct ll_backend_params {
    int32_t n_threads;      /* cpu: worker threads (<= 0: all cores) */
    int32_t max_batch;      /* tokens per forward chunk; longer prompts are split (default 512) */
    int32_t device;         /* cuda: device ordinal */
    int32_t kv_q8;          /* cuda: the KV cache as int8 codes with an fp16 scale per 32 values (half the
                             * memory, faster past ~8K of context; `--kv-cache q8`): 1 q8, -1 bf16, 0 auto
                             * (q8 where the model's shapes have the q8 kernels, else bf16). The cuda
                             * backend writes its resolved choice (1 or -1) into ll_backend.params;
                             * the CPU backend keeps its own fp32 cache */
    int32_t deterministic;  /* cuda: prefill's MoE down adds its rows in 64-bit fixed point, so a run is the
                             * same bits every time (-5 % prefill; LILAC_CUDA_MOE_DET=1 does the same) */
    ll_tap_fn tap;          /* optional */
    void *tap_ud;
} ll_backend_params;

typedef struct ll_backend_vtbl {
    const char *name;
    void (*free)(ll_backend *be);
    /* Creates a sequence able to hold n_ctx tokens (KV cache sized now). */
    ll_status (*seq_new)(ll_backend *be, int32_t n_ctx, ll_seq **out);
    void (*seq_free)(ll_backend *be, ll_seq *s);
    /* Back to an empty sequence (position 0, zero states). */
    void (*seq_reset)(ll_backend *be, ll_seq *s);
    int32_t (*seq_pos)(ll_backend *be, const ll_seq *s);
    /* Snapshot: bytes needed to save the state at the current position, save into a host
     * buffer, and restore (the restored sequence continues exactly as the saved one would). */
    size_t (*seq_state_bytes)(ll_backend *be, const ll_seq *s);
    ll_status (*seq_save)(ll_backend *be, const ll_seq *s, void *dst, size_t cap);
    ll_status (*seq_load)(ll_backend *be, ll_seq *s, const void *src, size_t n);
    /* Runs n_tokens (>= 1) tokens at the sequence's current position and advances it. Prompts
     * of any length are accepted (chunked internally). logits: see ll_logits_mode, host memory
     * of the right size or NULL with LL_LOGITS_NONE. Errors: LL_ERR_OVERFLOW past n_ctx,
     * LL_ERR_INVALID for a token id outside [0, V). */
    ll_status (*forward)(ll_backend *be, ll_seq *s, const int32_t *tokens, int32_t n_tokens,
                         ll_logits_mode mode, float *logits);
} ll_backend_vtbl;

struct ll_backend {
    const ll_backend_vtbl *v;
    const qwen_model *model;  /* borrowed: must outlive the backend */
    ll_backend_params params;
};

/* Creates a backend by name ("cpu", "cuda", or "auto": cuda when compiled in and a GPU is
 * present, else cpu). */
ll_status ll_backend_new(const char *name, const qwen_model *model, const ll_backend_params *params,
                         ll_backend **out);
void ll_backend_free(ll_backend *be);

ll_status cpu_backend_new(const qwen_model *model, const ll_backend_params *params, ll_backend **out);
#ifdef LILAC_CUDA
ll_status cuda_backend_new(const qwen_model *model, const ll_backend_params *params, ll_backend **out);
int cuda_device_count(void);
#endif

#endif
