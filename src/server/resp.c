/* resp.c — chat.completion / text_completion objects and their SSE chunks. See resp.h. */
#include "server/resp.h"

#include <stdio.h>

/* OpenAI's value for a token outside the reported top list; JSON has no -Infinity. */
#define LP_FLOOR -9999.0

const char *ll_finish_reason_name(ll_finish_reason f) {
    switch (f) {
    case LL_FINISH_STOP: return "stop";
    case LL_FINISH_LENGTH: return "length";
    case LL_FINISH_TOOL_CALLS: return "tool_calls";
    case LL_FINISH_CANCELLED: return "stop";
    }
    return "stop";
}

void ll_resp_init(ll_resp *r, const ll_api_request *req, const char *id_hex, long long created,
                  ll_token_bytes_fn token_bytes, void *token_ud) {
    memset(r, 0, sizeof(*r));
    r->kind = req->kind;
    r->stream = req->stream;
    r->include_usage = req->include_usage;
    r->logprobs = req->gen.logprobs != 0;
    r->top_logprobs = req->gen.top_logprobs;
    r->legacy_logprobs = req->legacy_logprobs;
    snprintf(r->id, sizeof(r->id), "%s-%.32s", req->kind == LL_API_CHAT ? "chatcmpl" : "cmpl", id_hex);
    r->created = created;
    r->model = req->model;
    r->token_bytes = token_bytes;
    r->token_ud = token_ud;
}

void ll_resp_free(ll_resp *r) {
    ll_strbuf *bufs[] = {&r->content, &r->reasoning, &r->tool_calls, &r->lp, &r->lp_tokens,
                         &r->lp_values, &r->lp_top, &r->lp_offsets, &r->scratch};
    for (size_t i = 0; i < LL_ARRAY_LEN(bufs); i++) ll_strbuf_free(bufs[i]);
}

/* `"id":..,"object":..,"created":..,"model":..,` — the head every object and chunk shares. */
static void put_head(const ll_resp *r, ll_strbuf *o, const char *object) {
    ll_strbuf_puts(o, "{\"id\":");
    ll_strbuf_json_cstr(o, r->id);
    ll_strbuf_printf(o, ",\"object\":\"%s\",\"created\":%lld,\"model\":", object, r->created);
    ll_strbuf_json_cstr(o, r->model);
    ll_strbuf_putc(o, ',');
}

static void put_usage(ll_strbuf *o, const ll_gen_result *res) {
    ll_strbuf_printf(o,
                     "{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d,"
                     "\"prompt_tokens_details\":{\"cached_tokens\":%d}}",
                     (int)res->prompt_tokens, (int)res->completion_tokens,
                     (int)(res->prompt_tokens + res->completion_tokens), (int)res->cached_tokens);
}

/* The bytes of token `id` in r->scratch (empty if they cannot be had). */
static void token_bytes(ll_resp *r, int32_t id) {
    ll_strbuf_clear(&r->scratch);
    if (!r->token_bytes || r->token_bytes(r->token_ud, id, &r->scratch)) ll_strbuf_clear(&r->scratch);
}

/* {"token":..,"logprob":..,"bytes":[..]} (without the closing brace when `open`). */
static void put_token_lp(ll_resp *r, ll_strbuf *o, const ll_token_logprob *t, int open) {
    token_bytes(r, t->id);
    ll_strbuf_puts(o, "{\"token\":");
    ll_strbuf_json_str(o, r->scratch.data ? r->scratch.data : "", r->scratch.len);
    ll_strbuf_puts(o, ",\"logprob\":");
    ll_strbuf_json_num(o, t->logprob, LP_FLOOR);
    ll_strbuf_puts(o, ",\"bytes\":[");
    for (size_t i = 0; i < r->scratch.len; i++)
        ll_strbuf_printf(o, "%s%u", i ? "," : "", (unsigned)(unsigned char)r->scratch.data[i]);
    ll_strbuf_putc(o, ']');
    if (!open) ll_strbuf_putc(o, '}');
}

/* Chat logprobs items ({"token",...,"top_logprobs":[...]}) for the tokens of one event. */
static void put_chat_lp_items(ll_resp *r, ll_strbuf *o, const ll_gen_event *ev, int first) {
    for (int32_t i = 0; i < ev->n_logprobs; i++) {
        const ll_logprobs *lp = &ev->logprobs[i];
        if (!first || i) ll_strbuf_putc(o, ',');
        put_token_lp(r, o, &lp->chosen, 1);
        ll_strbuf_puts(o, ",\"top_logprobs\":[");
        int n = LL_MIN(lp->n_top, r->top_logprobs);
        for (int k = 0; k < n; k++) {
            if (k) ll_strbuf_putc(o, ',');
            put_token_lp(r, o, &lp->top[k], 0);
        }
        ll_strbuf_puts(o, "]}");
    }
}

/* Legacy completions logprobs: appends to the four parallel arrays. */
static void add_legacy_lp(ll_resp *r, const ll_gen_event *ev) {
    for (int32_t i = 0; i < ev->n_logprobs; i++) {
        const ll_logprobs *lp = &ev->logprobs[i];
        const char *sep = r->n_lp ? "," : "";
        token_bytes(r, lp->chosen.id);
        ll_strbuf_puts(&r->lp_tokens, sep);
        ll_strbuf_json_str(&r->lp_tokens, r->scratch.data ? r->scratch.data : "", r->scratch.len);
        ll_strbuf_puts(&r->lp_values, sep);
        ll_strbuf_json_num(&r->lp_values, lp->chosen.logprob, LP_FLOOR);
        ll_strbuf_printf(&r->lp_offsets, "%s%zu", sep, r->text_offset);
        r->text_offset += r->scratch.len;
        ll_strbuf_printf(&r->lp_top, "%s{", sep);
        int n = LL_MIN(lp->n_top, r->top_logprobs);
        for (int k = 0; k < n; k++) {
            token_bytes(r, lp->top[k].id);
            if (k) ll_strbuf_putc(&r->lp_top, ',');
            ll_strbuf_json_str(&r->lp_top, r->scratch.data ? r->scratch.data : "", r->scratch.len);
            ll_strbuf_putc(&r->lp_top, ':');
            ll_strbuf_json_num(&r->lp_top, lp->top[k].logprob, LP_FLOOR);
        }
        ll_strbuf_putc(&r->lp_top, '}');
        r->n_lp++;
    }
}

static void put_legacy_lp(ll_resp *r, ll_strbuf *o) {
    ll_strbuf_puts(o, "{\"tokens\":[");
    ll_strbuf_append(o, r->lp_tokens.data, r->lp_tokens.len);
    ll_strbuf_puts(o, "],\"token_logprobs\":[");
    ll_strbuf_append(o, r->lp_values.data, r->lp_values.len);
    ll_strbuf_puts(o, "],\"top_logprobs\":[");
    ll_strbuf_append(o, r->lp_top.data, r->lp_top.len);
    ll_strbuf_puts(o, "],\"text_offset\":[");
    ll_strbuf_append(o, r->lp_offsets.data, r->lp_offsets.len);
    ll_strbuf_puts(o, "]}");
}

static void put_tool_call(ll_resp *r, ll_strbuf *o, const ll_gen_event *ev, int with_index) {
    ll_strbuf_putc(o, '{');
    if (with_index) ll_strbuf_printf(o, "\"index\":%d,", (int)ev->tool_index);
    /* ids are unique per response: the response's random part plus the call's index */
    ll_strbuf_printf(o, "\"id\":\"call_%.24s_%d\",\"type\":\"function\",\"function\":{\"name\":",
                     strchr(r->id, '-') + 1, (int)ev->tool_index);
    ll_strbuf_json_cstr(o, ev->tool_name ? ev->tool_name : "");
    ll_strbuf_puts(o, ",\"arguments\":");
    ll_strbuf_json_cstr(o, ev->tool_arguments ? ev->tool_arguments : "{}");
    ll_strbuf_puts(o, "}}");
}

static void sse_begin(ll_strbuf *o) { ll_strbuf_puts(o, "data: "); }
static void sse_end(ll_strbuf *o) { ll_strbuf_puts(o, "\n\n"); }

/* The end of a chat chunk: `,"logprobs":..,"finish_reason":..}]` + usage:null + `}`. */
static void chunk_tail(const ll_resp *r, ll_strbuf *o, const char *finish) {
    ll_strbuf_puts(o, ",\"finish_reason\":");
    ll_strbuf_json_cstr(o, finish);
    ll_strbuf_puts(o, "}]");
    if (r->include_usage) ll_strbuf_puts(o, ",\"usage\":null");
    ll_strbuf_putc(o, '}');
}

void ll_resp_begin(ll_resp *r, ll_strbuf *out) {
    LL_ASSERT(r->stream);
    if (r->kind != LL_API_CHAT) return; /* text completions have no role chunk */
    sse_begin(out);
    put_head(r, out, "chat.completion.chunk");
    ll_strbuf_puts(out, "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null");
    chunk_tail(r, out, NULL);
    sse_end(out);
}

static void stream_event(ll_resp *r, const ll_gen_event *ev, ll_strbuf *o) {
    sse_begin(o);
    if (r->kind == LL_API_COMPLETION) {
        put_head(r, o, "text_completion");
        ll_strbuf_puts(o, "\"choices\":[{\"index\":0,\"text\":");
        ll_strbuf_json_str(o, ev->text ? ev->text : "", ev->text ? ev->len : 0);
        ll_strbuf_puts(o, ",\"logprobs\":");
        if (r->legacy_logprobs && ev->n_logprobs) {
            /* each chunk carries the logprobs of its own tokens */
            ll_strbuf *bufs[] = {&r->lp_tokens, &r->lp_values, &r->lp_top, &r->lp_offsets};
            for (size_t i = 0; i < LL_ARRAY_LEN(bufs); i++) ll_strbuf_clear(bufs[i]);
            r->n_lp = 0;
            add_legacy_lp(r, ev);
            put_legacy_lp(r, o);
        } else
            ll_strbuf_puts(o, "null");
        ll_strbuf_puts(o, ",\"finish_reason\":null}]");
        if (r->include_usage) ll_strbuf_puts(o, ",\"usage\":null");
        ll_strbuf_putc(o, '}');
        sse_end(o);
        return;
    }
    put_head(r, o, "chat.completion.chunk");
    ll_strbuf_puts(o, "\"choices\":[{\"index\":0,\"delta\":{");
    if (ev->kind == LL_GEN_TOOL_CALL) {
        ll_strbuf_puts(o, "\"tool_calls\":[");
        put_tool_call(r, o, ev, 1);
        ll_strbuf_putc(o, ']');
    } else {
        ll_strbuf_puts(o, ev->kind == LL_GEN_REASONING ? "\"reasoning_content\":" : "\"content\":");
        ll_strbuf_json_str(o, ev->text ? ev->text : "", ev->text ? ev->len : 0);
    }
    ll_strbuf_puts(o, "},\"logprobs\":");
    if (r->logprobs && ev->n_logprobs) {
        ll_strbuf_puts(o, "{\"content\":[");
        put_chat_lp_items(r, o, ev, 1);
        ll_strbuf_puts(o, "]}");
    } else
        ll_strbuf_puts(o, "null");
    chunk_tail(r, o, NULL);
    sse_end(o);
}

void ll_resp_event(ll_resp *r, const ll_gen_event *ev, ll_strbuf *out) {
    if (ev->kind == LL_GEN_TOKEN) return; /* token ids are not part of the OpenAI responses */
    if (r->stream) {
        stream_event(r, ev, out);
        return;
    }
    if (r->kind == LL_API_COMPLETION) { /* raw prompts: all text is the completion */
        if (ev->kind != LL_GEN_TOOL_CALL && ev->text) ll_strbuf_append(&r->content, ev->text, ev->len);
        if (r->legacy_logprobs) add_legacy_lp(r, ev);
        return;
    }
    switch (ev->kind) {
    case LL_GEN_REASONING: ll_strbuf_append(&r->reasoning, ev->text ? ev->text : "", ev->text ? ev->len : 0); break;
    case LL_GEN_CONTENT: ll_strbuf_append(&r->content, ev->text ? ev->text : "", ev->text ? ev->len : 0); break;
    case LL_GEN_TOOL_CALL:
        if (r->n_tool_calls++) ll_strbuf_putc(&r->tool_calls, ',');
        put_tool_call(r, &r->tool_calls, ev, 0);
        break;
    case LL_GEN_TOKEN: break;
    }
    if (r->logprobs && ev->n_logprobs) {
        put_chat_lp_items(r, &r->lp, ev, r->n_lp == 0);
        r->n_lp += ev->n_logprobs;
    }
}

static void finish_stream(ll_resp *r, const ll_gen_result *res, ll_strbuf *o) {
    const char *fin = ll_finish_reason_name(res->finish);
    sse_begin(o);
    if (r->kind == LL_API_COMPLETION) {
        put_head(r, o, "text_completion");
        ll_strbuf_printf(o, "\"choices\":[{\"index\":0,\"text\":\"\",\"logprobs\":null,\"finish_reason\":\"%s\"}]", fin);
        if (r->include_usage) ll_strbuf_puts(o, ",\"usage\":null");
        ll_strbuf_putc(o, '}');
    } else {
        put_head(r, o, "chat.completion.chunk");
        ll_strbuf_puts(o, "\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null");
        chunk_tail(r, o, fin);
    }
    sse_end(o);
    if (r->include_usage) {
        sse_begin(o);
        put_head(r, o, r->kind == LL_API_CHAT ? "chat.completion.chunk" : "text_completion");
        ll_strbuf_puts(o, "\"choices\":[],\"usage\":");
        put_usage(o, res);
        ll_strbuf_putc(o, '}');
        sse_end(o);
    }
    ll_strbuf_puts(o, "data: [DONE]\n\n");
}

void ll_resp_finish(ll_resp *r, const ll_gen_result *res, ll_strbuf *out) {
    if (r->stream) {
        finish_stream(r, res, out);
        return;
    }
    const char *fin = ll_finish_reason_name(res->finish);
    if (r->kind == LL_API_COMPLETION) {
        put_head(r, out, "text_completion");
        ll_strbuf_puts(out, "\"choices\":[{\"index\":0,\"text\":");
        ll_strbuf_json_str(out, r->content.data ? r->content.data : "", r->content.len);
        ll_strbuf_puts(out, ",\"logprobs\":");
        if (r->legacy_logprobs) put_legacy_lp(r, out);
        else ll_strbuf_puts(out, "null");
        ll_strbuf_printf(out, ",\"finish_reason\":\"%s\"}],\"usage\":", fin);
        put_usage(out, res);
        ll_strbuf_putc(out, '}');
    } else {
        put_head(r, out, "chat.completion");
        ll_strbuf_puts(out, "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":");
        if (r->n_tool_calls && !r->content.len) ll_strbuf_puts(out, "null"); /* OpenAI: null beside tool calls */
        else ll_strbuf_json_str(out, r->content.data ? r->content.data : "", r->content.len);
        if (r->reasoning.len) {
            ll_strbuf_puts(out, ",\"reasoning_content\":");
            ll_strbuf_json_str(out, r->reasoning.data, r->reasoning.len);
        }
        if (r->n_tool_calls) {
            ll_strbuf_puts(out, ",\"tool_calls\":[");
            ll_strbuf_append(out, r->tool_calls.data, r->tool_calls.len);
            ll_strbuf_putc(out, ']');
        }
        ll_strbuf_puts(out, ",\"refusal\":null},\"logprobs\":");
        if (r->logprobs) {
            ll_strbuf_puts(out, "{\"content\":[");
            ll_strbuf_append(out, r->lp.data, r->lp.len);
            ll_strbuf_puts(out, "]}");
        } else
            ll_strbuf_puts(out, "null");
        ll_strbuf_printf(out, ",\"finish_reason\":\"%s\"}],\"usage\":", fin);
        put_usage(out, res);
        ll_strbuf_putc(out, '}');
    }
    r->oom |= r->content.oom | r->reasoning.oom | r->tool_calls.oom | r->lp.oom | r->lp_tokens.oom | r->lp_top.oom;
}

void ll_resp_stream_error(ll_resp *r, const ll_api_error *e, ll_strbuf *out) {
    (void)r;
    sse_begin(out);
    ll_api_error_json(e, out);
    sse_end(out);
    ll_strbuf_puts(out, "data: [DONE]\n\n");
}
