/*
 * api.h — the OpenAI request side of the server, with no HTTP in it: turns a request body into an
 * ll_gen_request for the engine, or into an ll_api_error that names the offending field and
 * carries the HTTP status and OpenAI error `type` to answer with.
 *
 * Policy (see docs/openapi.yaml): unknown fields are ignored; `null` means "absent"; a field with
 * the wrong type or range is a 400 naming it (`param`); features that would otherwise be silently
 * wrong fail closed (n > 1, images, response_format json_*, echo, best_of > 1).
 */
#ifndef LILAC_SERVER_API_H
#define LILAC_SERVER_API_H

#include <cjson/cJSON.h>

#include "runtime/engine.h"
#include "server/strbuf.h"

#define LL_API_MAX_STOP 16      /* OpenAI allows 4; local clients sometimes send a few more */
#define LL_API_MAX_DEPTH 64     /* JSON nesting accepted (cJSON recurses; cap it well below 1000) */
#define LL_API_MAX_LOGIT_BIAS 1024

typedef enum ll_api_kind {
    LL_API_CHAT,       /* POST /v1/chat/completions */
    LL_API_COMPLETION, /* POST /v1/completions */
} ll_api_kind;

typedef struct ll_api_error {
    int status;        /* HTTP status: 400, 401, 404, 405, 413, 429, 500, 503 */
    const char *type;  /* OpenAI error type: "invalid_request_error", ... (static string) */
    const char *code;  /* OpenAI error code ("model_not_found", ...) or NULL (static string) */
    char param[128];   /* the field at fault ("messages[2].content") or "" */
    char message[512];
} ll_api_error;

/* Fills *e (message formatted like printf). param may be NULL. */
void ll_api_error_set(ll_api_error *e, int status, const char *type, const char *code, const char *param,
                      const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* The OpenAI error envelope {"error":{"message","type","param","code"}} (no trailing newline). */
void ll_api_error_json(const ll_api_error *e, ll_strbuf *out);
/* Maps an engine status (with ll_errmsg() of the failing call as message) to an API error:
 * INVALID/OVERFLOW -> 400, UNSUPPORTED -> 400, OOM -> 503, others -> 500 (generic message). */
void ll_api_error_from_status(ll_api_error *e, ll_status st, const char *msg);

typedef struct ll_api_limits {
    const char *model_id; /* the served model; a request naming another model is 404 */
    const char *alias;    /* a second accepted name, or NULL */
    int32_t n_ctx;        /* max_tokens above it is rejected */
    uint64_t default_seed;/* used when the request has no seed (the caller passes a fresh random one) */
    const ll_sampler_params *defaults; /* sampling for fields the request leaves out (the model's
                                          generation_config); NULL: ll_sampler_defaults() */
} ll_api_limits;

typedef struct ll_api_request {
    ll_api_kind kind;
    cJSON *doc;           /* the parsed body; strings in `gen` point into it */
    cJSON *messages;      /* chat: normalized messages (text parts joined, developer -> system) */
    cJSON *tools;         /* chat: tools after tool_choice, or NULL */
    cJSON *kwargs;        /* chat: chat_template_kwargs (plus enable_thinking from reasoning_effort) */
    const char *model;    /* the name to echo back (the request's, else the served id) */
    int stream;
    int include_usage;    /* stream_options.include_usage */
    int legacy_logprobs;  /* completions: logprobs in the legacy parallel-array shape */
    const char *stop[LL_API_MAX_STOP];
    int32_t *prompt_ids;  /* completions with token ids: [n_prompt_ids], ll_malloc'ed */
    ll_logit_bias *bias;  /* [sampling.n_logit_bias], ll_malloc'ed */
    ll_gen_request gen;   /* what the engine runs (ns is left NULL for the caller to set) */
} ll_api_request;

/* Parses and validates a request body (len bytes, need not be NUL-terminated). Returns 0 and fills
 * *out (free with ll_api_request_free), or -1 with *err filled and *out left empty. */
int ll_api_parse(ll_api_kind kind, const char *body, size_t len, const ll_api_limits *lim, ll_api_request *out,
                 ll_api_error *err);
void ll_api_request_free(ll_api_request *r);

/* POST /tokenize: {"content": str, "add_special"?: bool, "parse_special"?: bool, "with_pieces"?: bool}.
 * `content` points into *doc (free with cJSON_Delete). */
typedef struct ll_api_tokenize {
    cJSON *doc;
    const char *content;
    size_t len;
    int parse_special, with_pieces;
} ll_api_tokenize;
int ll_api_parse_tokenize(const char *body, size_t len, ll_api_tokenize *out, ll_api_error *err);

/* POST /detokenize: {"tokens": [int, ...]} -> ids[n] (ll_malloc'ed; may be NULL when n == 0). */
int ll_api_parse_detokenize(const char *body, size_t len, int32_t **ids, int32_t *n, ll_api_error *err);

/* The checks every body gets before cJSON sees it: valid UTF-8, nesting depth at most
 * LL_API_MAX_DEPTH, and no NUL characters (raw or as \u0000, which C strings cannot carry).
 * Returns 0 or -1 with a 400 in *err that gives the byte offset. */
int ll_api_check_body(const char *body, size_t len, ll_api_error *err);

/* ll_api_check_body, then the body parsed as one JSON object (only whitespace after it).
 * Returns the document (the caller deletes it) or NULL with a 400 in *err naming the byte offset. */
cJSON *ll_api_parse_object(const char *body, size_t len, ll_api_error *err);

#endif
