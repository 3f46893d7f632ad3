/* metrics.c — Prometheus text format for /metrics. See metrics.h. */
#include "server/metrics.h"

static void metric(ll_strbuf *o, const char *name, const char *type, const char *help, double v) {
    ll_strbuf_printf(o, "# HELP lilac_%s %s\n# TYPE lilac_%s %s\nlilac_%s ", name, help, name, type, name);
    ll_strbuf_json_num(o, v, 0); /* Prometheus and JSON agree on plain decimal numbers */
    ll_strbuf_putc(o, '\n');
}

void ll_metrics_format(const ll_metrics *m, const ll_engine_stats *es, ll_strbuf *o) {
    metric(o, "http_requests_total", "counter", "HTTP requests answered.", (double)m->http_requests);
    ll_strbuf_puts(o, "# HELP lilac_http_responses_total HTTP responses by status class.\n"
                      "# TYPE lilac_http_responses_total counter\n");
    ll_strbuf_printf(o, "lilac_http_responses_total{code=\"2xx\"} %llu\n", (unsigned long long)m->status_2xx);
    ll_strbuf_printf(o, "lilac_http_responses_total{code=\"4xx\"} %llu\n", (unsigned long long)m->status_4xx);
    ll_strbuf_printf(o, "lilac_http_responses_total{code=\"429\"} %llu\n", (unsigned long long)m->status_429);
    ll_strbuf_printf(o, "lilac_http_responses_total{code=\"5xx\"} %llu\n", (unsigned long long)m->status_5xx);
    metric(o, "chat_requests_total", "counter", "Chat completion requests accepted.", (double)m->chat_requests);
    metric(o, "completion_requests_total", "counter", "Text completion requests accepted.",
           (double)m->completion_requests);
    metric(o, "tokenize_requests_total", "counter", "Tokenize and detokenize requests.", (double)m->tokenize_requests);
    metric(o, "requests_cancelled_total", "counter", "Requests cancelled because the client disconnected.",
           (double)m->cancelled);
    metric(o, "requests_timed_out_total", "counter", "Requests stopped by --timeout.", (double)m->timeouts);
    metric(o, "queue_length", "gauge", "Requests waiting for the engine.", (double)m->queue_length);
    metric(o, "queue_capacity", "gauge", "Maximum requests waiting (--max-queue).", (double)m->max_queue);
    metric(o, "requests_processing", "gauge", "Requests the engine is running now.", (double)m->processing);
    static const char *const acts[5] = {"upstream", "mask", "ask", "local", "skip"};
    ll_strbuf_puts(o, "# HELP lilac_privacy_decisions_total Gateway chat requests by the action taken.\n"
                      "# TYPE lilac_privacy_decisions_total counter\n");
    for (int i = 0; i < 5; i++)
        ll_strbuf_printf(o, "lilac_privacy_decisions_total{action=\"%s\"} %llu\n", acts[i],
                         (unsigned long long)m->privacy_actions[i]);
    metric(o, "upstream_errors_total", "counter", "Forwarded requests answered 502 or 504.", (double)m->upstream_errors);
    metric(o, "engine_requests_total", "counter", "Generations run by the engine.", (double)es->requests);
    metric(o, "prompt_tokens_total", "counter", "Prompt tokens (including cached ones).", (double)es->prompt_tokens);
    metric(o, "cached_tokens_total", "counter", "Prompt tokens reused from snapshots.", (double)es->cached_tokens);
    metric(o, "completion_tokens_total", "counter", "Generated tokens.", (double)es->completion_tokens);
    metric(o, "snapshot_hits_total", "counter", "Requests that resumed from a snapshot.", (double)es->snapshot_hits);
    metric(o, "snapshot_misses_total", "counter", "Requests with no usable snapshot.", (double)es->snapshot_misses);
    metric(o, "prefill_seconds_total", "counter", "Time spent in prefill.", es->prefill_sec);
    metric(o, "decode_seconds_total", "counter", "Time spent in decode.", es->decode_sec);
    /* lifetime averages: the prefilled (uncached) prompt tokens and the generated tokens per second */
    double pre = (double)(es->prompt_tokens - LL_MIN(es->cached_tokens, es->prompt_tokens));
    metric(o, "prefill_tokens_per_second", "gauge", "Average prefill rate since start.",
           es->prefill_sec > 0 ? pre / es->prefill_sec : 0);
    metric(o, "decode_tokens_per_second", "gauge", "Average decode rate since start.",
           es->decode_sec > 0 ? (double)es->completion_tokens / es->decode_sec : 0);
}
