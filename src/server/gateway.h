/*
 * gateway.h — the privacy gate of `lilac serve --upstream URL`, the parts with no HTTP in them:
 * scanning every text of a chat request, building the findings JSON (POST /v1/privacy/scan and the
 * `ask` answer), masking a request body, restoring placeholders in an upstream answer (whole JSON
 * or an SSE stream, where a placeholder may be split across chunks), the refusal of `skip`, and
 * the audit line of what left the machine. server.c does the HTTP and the forwarding (libcurl).
 *
 * Which texts of a request are scanned (and masked): every message's `content` (a string, or the
 * `text` of each content part), and the `function.arguments` of every assistant `tool_calls` item.
 * Messages of any role count, tool results included.
 */
#ifndef LILAC_SERVER_GATEWAY_H
#define LILAC_SERVER_GATEWAY_H

#include <cjson/cJSON.h>
#include <pthread.h>

#include "privacy/mask.h"
#include "privacy/pii_model.h"
#include "privacy/policy.h"
#include "tokenizer/tokenizer.h"
#include "server/api.h"
#include "server/strbuf.h"

/* The PII encoder used beside the rules, when one is loaded (lilac serve --pii-model). Its
 * forward pass uses shared scratch and a thread pool, so scans take the mutex in turn. */
typedef struct ll_gw_model {
    pii_model *m;
    const tok_tokenizer *tok;
    pthread_mutex_t mu;
} ll_gw_model;

/* One scanned text of a request: a cJSON string item (owned by the document) and its findings. */
typedef struct ll_gw_text {
    cJSON *item;      /* a string node inside the request document */
    int message;      /* index of its message (-1 for a plain {"text": ...} scan) */
    char path[64];    /* "messages[2].content", for clients that want to point at it */
    pii_spans spans;  /* resolved, byte and code-point offsets set (into the original text) */
    char *orig;       /* the original text once ll_gw_mask has replaced it (owned), else NULL */
    float sensitivity;
} ll_gw_text;

typedef struct ll_gw_scan {
    ll_gw_text *v; /* [n] */
    size_t n, cap;
    pii_decision decision;
} ll_gw_scan;

/* Scans the texts of a chat request document (its "messages" array) with the rules, plus the model
 * pm when not NULL, and decides with policy p. Returns 0, or -1 with a 400 in *err when
 * "messages" is missing or malformed (503 when out of memory or the model fails). */
int ll_gw_scan_messages(cJSON *doc, const pii_policy *p, ll_gw_model *pm, ll_gw_scan *out, ll_api_error *err);
/* Scans a legacy completions request: its "prompt" (a string or an array of strings; token-id
 * prompts are refused with a 400, since the gate cannot read them) and "suffix". */
int ll_gw_scan_prompt(cJSON *doc, const pii_policy *p, ll_gw_model *pm, ll_gw_scan *out, ll_api_error *err);
/* Scans one text node (the {"text": ...} form of the scan endpoint). */
int ll_gw_scan_text(cJSON *text, const pii_policy *p, ll_gw_model *pm, ll_gw_scan *out, ll_api_error *err);
void ll_gw_scan_free(ll_gw_scan *s);

/* The findings object (no trailing newline):
 *   {"spans":[{"message":M,"path":P,"start":S,"end":E,"label":L,"score":X,"source":"rule|model"}],
 *    "sensitivity":Y,"decision":{"action":A,"categories":{"private_email":2,...}}}
 * start/end are Unicode code points into the text at `path` (end exclusive). Values are never
 * included: the client has them, and they must not end up in logs of proxies in between. */
void ll_gw_scan_json(const ll_gw_scan *s, const pii_policy *p, ll_strbuf *out);

/* The `privacy_decision` field of a request ("local", "upstream" or "skip"), removed from doc so
 * it is never forwarded. Returns 0 and sets *act (-1 when absent), or -1 with a 400 in *err. */
int ll_gw_take_decision(cJSON *doc, int *act, ll_api_error *err);

/* Replaces, in place, every scanned text's spans of the categories in cat_mask with placeholders
 * issued by m (one masker per request, so the same value gets the same placeholder in every
 * message). LL_OK or LL_ERR_OOM. */
ll_status ll_gw_mask(ll_gw_scan *s, uint32_t cat_mask, pii_masker *m);

/* Restores placeholders in a non-streamed chat.completion body: the content, reasoning_content
 * and tool call arguments of every choice, and the tokens of its logprobs.content; in a legacy
 * text_completion body, each choice's text and its logprobs (tokens, token_logprobs,
 * top_logprobs, text_offset). A body that is not such JSON is passed through unchanged (an
 * upstream error object, for instance). */
void ll_gw_unmask_body(const pii_masker *m, const char *body, size_t n, ll_strbuf *out);

/* Streaming restore over SSE text as it arrives in arbitrary pieces: complete `data:` lines are
 * parsed, and each choice's delta content / reasoning_content, each tool call's
 * function.arguments fragments (per tool call index) and a legacy completion's `text` go through
 * their own pii_unmask_stream, so a placeholder split across events is restored whole in a later
 * event and no fragment of one reaches the client. A tool call's held-back bytes are flushed
 * (as an extra {"index":k,"function":{"arguments":...}} entry) when another tool call index
 * starts, and everything a choice holds is flushed into the event that carries its
 * finish_reason. Logprobs (chat logprobs.content entries, or a legacy chunk's parallel arrays)
 * are held from a token that may open a placeholder until it closes, so the tokens of one go out
 * as one; later legacy text_offsets move by what restored values changed. Other lines pass
 * through unchanged. */
#define LL_GW_MAX_CHOICES 8
#define LL_GW_MAX_CALLS 16 /* tool calls per choice with a stream of their own; later ones per event */
typedef struct ll_gw_sse {
    const pii_masker *m;
    ll_strbuf line;                                     /* an incomplete line */
    pii_unmask_stream content[LL_GW_MAX_CHOICES], reasoning[LL_GW_MAX_CHOICES];
    pii_unmask_stream args[LL_GW_MAX_CHOICES][LL_GW_MAX_CALLS];
    struct cJSON *lp_hold[LL_GW_MAX_CHOICES];           /* logprobs entries that may end in a placeholder */
    long long lp_shift[LL_GW_MAX_CHOICES];              /* legacy: what merges so far moved text_offset by */
    pii_buf tmp;
} ll_gw_sse;
void ll_gw_sse_init(ll_gw_sse *s, const pii_masker *m);
void ll_gw_sse_feed(ll_gw_sse *s, const char *data, size_t n, ll_strbuf *out);
/* End of the upstream stream: whatever line is still incomplete passes through. */
void ll_gw_sse_finish(ll_gw_sse *s, ll_strbuf *out);
void ll_gw_sse_free(ll_gw_sse *s);

/* The `skip` answer: a chat.completion (or its SSE stream) whose content explains the refusal,
 * with finish_reason "content_filter"; with legacy, a text_completion (chunks) with the
 * explanation as its text. */
void ll_gw_refusal(const pii_decision *d, const char *model, const char *id, long long created, int stream, int legacy,
                   ll_strbuf *out);

/* One audit line (JSON, newline-terminated; before or after ll_gw_mask) of a forwarded request: time, request id, action,
 * upstream URL, bytes sent, the categories found, masked and sent raw, with counts, and for each
 * value that left the machine raw its SHA-256 ("sha256:<hex>" of "<label>:<value>"); never a
 * value. */
void ll_gw_audit_line(const ll_gw_scan *s, const char *id, const char *action, const char *upstream,
                      uint32_t mask_cats, size_t bytes_sent, ll_strbuf *out);

/* Hex SHA-256 of data[n] into hex[65]. */
void ll_gw_sha256_hex(const void *data, size_t n, char hex[65]);

#endif
