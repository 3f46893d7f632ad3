/*
 * engine.h — the generation engine: one loaded model (weights + backend), its tokenizer and chat
 * template, a snapshot store for prefix reuse, and the generation loop (prefill, decode, sample,
 * detokenize, stop, split reasoning / content / tool calls). The CLI (`lilac run`, `chat`) and
 * the server call only this.
 *
 * Threading: an engine is NOT thread-safe. The server owns it from one worker thread and queues
 * requests to it; callbacks run on that thread.
 *
 * Errors: LL_ERR_INVALID (bad request content, message names the field, e.g. "messages[2].role"),
 * LL_ERR_OVERFLOW (prompt + max_tokens exceed the context; message gives both numbers),
 * LL_ERR_CANCELLED (the callback asked to stop — res still holds the counts so far), others
 * are internal/device errors.
 */
#ifndef LILAC_ENGINE_H
#define LILAC_ENGINE_H

#include <cjson/cJSON.h>

#include "runtime/sampler.h"

typedef struct ll_engine ll_engine;

typedef struct ll_engine_params {
    const char *model_path;     /* model dir/file (tokenizer and template are found beside it) */
    const char *tokenizer_path; /* optional override: tokenizer.json or a dir */
    const char *template_path;  /* optional override: a .jinja file */
    const char *backend;        /* "cpu", "cuda", "auto" (NULL = auto) */
    int32_t n_ctx;              /* per-sequence context (<= 0: min(model max, 32768)) */
    int32_t n_threads;          /* cpu threads (<= 0: all) */
    int32_t kv_q8;              /* cuda: 0 auto, 1 q8, -1 bf16 KV cache (ll_backend_params.kv_q8) */
    size_t snapshot_budget;     /* bytes for the snapshot LRU (0: default 1 GiB on CPU) */
} ll_engine_params;

ll_status ll_engine_open(const ll_engine_params *p, ll_engine **out);
void ll_engine_close(ll_engine *e);

/* A short model id for /v1/models (the model directory or file name). */
const char *ll_engine_model_id(const ll_engine *e);
int32_t ll_engine_n_ctx(const ll_engine *e);

typedef struct ll_gen_request {
    const char *ns;                 /* snapshot namespace (e.g. a hash of the API key); NULL = "" */
    /* chat (messages != NULL): rendered through the model's chat template */
    const cJSON *messages;          /* OpenAI messages array */
    const cJSON *tools;             /* OpenAI tools array or NULL */
    const cJSON *template_kwargs;   /* object (enable_thinking, preserve_thinking, ...) or NULL */
    /* completion (messages == NULL): raw text or token ids */
    const char *prompt;
    const int32_t *prompt_ids;
    int32_t n_prompt_ids;
    ll_sampler_params sampling;     /* temperature <= 0: greedy */
    int32_t max_tokens;             /* <= 0: until the context is full */
    const char *const *stop;        /* stop strings */
    int32_t n_stop;
    int32_t logprobs;               /* nonzero: report logprobs of generated tokens */
    int32_t emit_token_ids;         /* nonzero: an LL_GEN_TOKEN event for every generated token */
    int32_t top_logprobs;           /* 0..20 */
} ll_gen_request;

typedef enum ll_gen_event_kind {
    LL_GEN_REASONING,  /* text delta inside <think>...</think> */
    LL_GEN_CONTENT,    /* text delta of the answer */
    LL_GEN_TOOL_CALL,  /* one complete tool call */
    LL_GEN_TOKEN,      /* a generated token id (only with emit_token_ids), before its text */
} ll_gen_event_kind;

typedef struct ll_gen_event {
    ll_gen_event_kind kind;
    const char *text;               /* REASONING / CONTENT: UTF-8 delta (never a broken sequence) */
    size_t len;
    int32_t token;                  /* TOKEN: the id */
    int32_t tool_index;             /* TOOL_CALL: 0, 1, ... within this response */
    const char *tool_name;
    const char *tool_arguments;     /* TOOL_CALL: JSON object text */
    /* logprobs of the tokens that produced this delta (when requested; may be 0 entries) */
    const ll_logprobs *logprobs;
    int32_t n_logprobs;
} ll_gen_event;

/* Returns nonzero to cancel the generation (e.g. the client disconnected). */
typedef int (*ll_gen_cb)(void *ud, const ll_gen_event *ev);

typedef enum ll_finish_reason {
    LL_FINISH_STOP,        /* end-of-sequence token or a stop string */
    LL_FINISH_LENGTH,      /* max_tokens or the context limit */
    LL_FINISH_TOOL_CALLS,  /* the answer ended with tool calls */
    LL_FINISH_CANCELLED,
} ll_finish_reason;

typedef struct ll_gen_result {
    ll_finish_reason finish;
    int32_t prompt_tokens;
    int32_t cached_tokens;         /* prompt tokens reused from a snapshot */
    int32_t completion_tokens;
    double prefill_sec, decode_sec;
} ll_gen_result;

/* Sampling defaults from the model's generation_config.json (temperature, top_k, top_p), or
 * temperature 1 with everything else off when there is none. */
ll_sampler_params ll_engine_default_sampling(const ll_engine *e);

/* Runs one request to completion, calling cb for every delta/tool call as it is produced. */
ll_status ll_engine_generate(ll_engine *e, const ll_gen_request *req, ll_gen_cb cb, void *ud, ll_gen_result *res);

/* Sessions that survive the process: save the state at the end of the last prompt this engine
 * processed in namespace `ns` (its tokens and backend state, versioned, checksummed, tied to the
 * model's identity) and load such a file back into the snapshot store, so that a prompt extending
 * those tokens resumes from it. LL_ERR_INVALID if there is nothing to save; a foreign/corrupt
 * file is LL_ERR_FORMAT naming the problem. */
ll_status ll_engine_session_save(ll_engine *e, const char *ns, const char *path);
ll_status ll_engine_session_load(ll_engine *e, const char *ns, const char *path);
/* Model identity string used in session files. */
const char *ll_engine_model_identity(const ll_engine *e);
/* 0 if the model came without a tokenizer (then only prompt_ids requests work, with
 * emit_token_ids; text is never produced). */
int ll_engine_has_tokenizer(const ll_engine *e);

/* Tokenizer access for /tokenize and /detokenize. Outputs are ll_malloc'ed (caller frees). */
ll_status ll_engine_tokenize(ll_engine *e, const char *text, size_t len, int parse_special, int32_t **ids,
                             int32_t *n);
ll_status ll_engine_detokenize(ll_engine *e, const int32_t *ids, int32_t n, char **text, size_t *len);

/* Counters for /metrics (monotonic since open). */
typedef struct ll_engine_stats {
    uint64_t requests, prompt_tokens, cached_tokens, completion_tokens, snapshot_hits, snapshot_misses;
    double prefill_sec, decode_sec;
} ll_engine_stats;
void ll_engine_get_stats(const ll_engine *e, ll_engine_stats *out);

#endif
