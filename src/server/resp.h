/*
 * resp.h — the OpenAI response side, with no HTTP in it: turns the engine's events
 * (ll_gen_event) and final counts (ll_gen_result) into a chat.completion / text_completion
 * object, or into the SSE chunks of a streamed one:
 *
 *   data: {"id":..,"object":"chat.completion.chunk",..,"choices":[{"index":0,"delta":{"role":"assistant","content":""},..}]}
 *   data: {..."delta":{"reasoning_content":"..."}...}          thinking
 *   data: {..."delta":{"content":"..."}...}                    answer
 *   data: {..."delta":{"tool_calls":[{"index":0,"id":..,"type":"function","function":{..}}]}...}
 *   data: {..."delta":{},"finish_reason":"stop"|"length"|"tool_calls"}
 *   data: {..."choices":[],"usage":{...}}                       only with stream_options.include_usage
 *   data: [DONE]
 *
 * Each event becomes one chunk appended to `out`; nothing is allocated per event beyond the growth
 * of the caller's and the builder's buffers.
 */
#ifndef LILAC_SERVER_RESP_H
#define LILAC_SERVER_RESP_H

#include "server/api.h"

/* Appends the raw bytes of token `id` (possibly a partial UTF-8 sequence) to out; 0 on success.
 * The server implements it with ll_engine_detokenize; used only when logprobs are requested. */
typedef int (*ll_token_bytes_fn)(void *ud, int32_t id, ll_strbuf *out);

typedef struct ll_resp {
    ll_api_kind kind;
    int stream, include_usage;
    int logprobs, top_logprobs, legacy_logprobs;
    char id[48];          /* "chatcmpl-<hex>" or "cmpl-<hex>" */
    long long created;    /* unix seconds */
    const char *model;
    ll_token_bytes_fn token_bytes;
    void *token_ud;
    /* non-streaming accumulation */
    ll_strbuf content, reasoning;
    ll_strbuf tool_calls; /* JSON array items, comma-separated */
    int n_tool_calls;
    ll_strbuf lp;         /* chat: logprobs.content items; legacy: see lp_* */
    ll_strbuf lp_tokens, lp_values, lp_top, lp_offsets; /* legacy parallel arrays (items) */
    size_t text_offset;   /* legacy text_offset of the next token */
    int32_t n_lp;
    ll_strbuf scratch;    /* token bytes */
    int oom;
} ll_resp;

/* `id_hex` is a random hex string that makes the response id (and tool call ids) unique. */
void ll_resp_init(ll_resp *r, const ll_api_request *req, const char *id_hex, long long created,
                  ll_token_bytes_fn token_bytes, void *token_ud);
void ll_resp_free(ll_resp *r);

/* Streaming only: the first chunk (chat: the assistant role with empty content). */
void ll_resp_begin(ll_resp *r, ll_strbuf *out);
/* One engine event: streaming appends its SSE chunk to out; otherwise it is accumulated. */
void ll_resp_event(ll_resp *r, const ll_gen_event *ev, ll_strbuf *out);
/* End of generation: streaming appends the finish chunk, the usage chunk (if asked) and
 * `data: [DONE]`; otherwise appends the whole response object. */
void ll_resp_finish(ll_resp *r, const ll_gen_result *res, ll_strbuf *out);
/* Streaming only: an error after the stream started, sent in-band (`data: {"error":{...}}`),
 * followed by `data: [DONE]` so every client sees the stream end. */
void ll_resp_stream_error(ll_resp *r, const ll_api_error *e, ll_strbuf *out);

const char *ll_finish_reason_name(ll_finish_reason f);

#endif
