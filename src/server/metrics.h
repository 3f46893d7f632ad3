/*
 * metrics.h — the server's counters and their Prometheus text exposition (GET /metrics).
 * Counter names carry the `lilac_` prefix; totals are monotonic since start, gauges are live.
 */
#ifndef LILAC_SERVER_METRICS_H
#define LILAC_SERVER_METRICS_H

#include "runtime/engine.h"
#include "server/strbuf.h"

typedef struct ll_metrics {
    uint64_t http_requests;                 /* every request answered */
    uint64_t status_2xx, status_4xx, status_5xx, status_429;
    uint64_t chat_requests, completion_requests, tokenize_requests;
    uint64_t cancelled;                     /* client went away before its answer was complete */
    uint64_t timeouts;                      /* --timeout reached */
    uint64_t queue_length, max_queue;       /* gauges */
    uint64_t processing;                    /* gauge: 0 or 1 (one engine worker) */
    /* privacy gateway (--upstream): chat requests by the action taken (pii_action order:
     * upstream, mask, ask, local, skip), and forwarded requests that failed (502/504) */
    uint64_t privacy_actions[5];
    uint64_t upstream_errors;
} ll_metrics;

/* Appends the exposition text (HELP/TYPE lines, one sample each) for m and the engine's stats. */
void ll_metrics_format(const ll_metrics *m, const ll_engine_stats *es, ll_strbuf *out);

#endif
