/*
 * server.h — `lilac serve`: the OpenAI-compatible HTTP server (libmicrohttpd, one thread per
 * connection) in front of one engine. One worker thread owns the engine and runs requests one at
 * a time from a bounded FIFO (past it: 429 with Retry-After). A client that disconnects cancels
 * its own request, and only its own, at the engine's next token.
 *
 * Routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models[/{id}], GET /health,
 * GET /metrics, POST /tokenize, POST /detokenize, POST /v1/privacy/scan, GET / (the chat page).
 *
 * With params.upstream set the server is a privacy gateway: each chat request is scanned and the
 * policy decides to answer it locally, forward it (unchanged or masked, the answer's placeholders
 * restored), refuse it (skip), or ask the client (409 with the findings; the client repeats the
 * request with "privacy_decision"). Forwarding runs on the connection's own thread (libcurl), never
 * on the engine worker. See README "Privacy gateway" and docs/openapi.yaml. The /v1 routes are also
 * served without the prefix. /health and / need no API key; everything else does when keys are set.
 */
#ifndef LILAC_SERVER_H
#define LILAC_SERVER_H

#include "privacy/policy.h"
#include "runtime/engine.h"

typedef struct ll_server_params {
    const char *host;             /* bind address (NULL: 127.0.0.1) */
    int port;                     /* 0: an ephemeral port (see ll_server_port) */
    const char *const *api_keys;  /* [n_api_keys]; none: no authentication */
    int n_api_keys;
    const char *cors_origin;      /* Access-Control-Allow-Origin value, or NULL for no CORS */
    const char *alias;            /* a second model name accepted in requests, or NULL */
    int max_queue;                /* requests waiting behind the running one (< 0: default 32) */
    double timeout_sec;           /* per request, from arrival, and HTTP idle timeout (<= 0: 600) */
    size_t max_body;              /* request body limit in bytes (0: 16 MiB) */
    int max_connections;          /* 0: 256 */
    /* the privacy gateway (gateway.h); with no upstream every request is answered locally */
    const char *upstream;         /* base URL of an OpenAI-compatible API ("http://host:port/v1"), or NULL */
    const char *upstream_key;     /* sent upstream as 'Authorization: Bearer KEY', or NULL */
    const pii_policy *policy;     /* NULL: pii_policy_default (copied at start) */
    const char *audit_log;        /* JSON-lines file of what left the machine, or NULL */
    double upstream_timeout_sec;  /* whole upstream exchange (<= 0: timeout_sec); past it: 504 */
    const char *pii_model_dir;    /* PII encoder checkpoint used beside the rules, or NULL (rules only) */
    int pii_threads;              /* its CPU threads (<= 0: 2) */
} ll_server_params;

typedef struct ll_server ll_server;

/* Starts listening and the engine worker. The engine must stay open until ll_server_stop returns;
 * the server calls it only from its worker thread. */
ll_status ll_server_start(const ll_server_params *p, ll_engine *e, ll_server **out);
int ll_server_port(const ll_server *s);
/* Graceful shutdown: stops accepting, answers queued requests 503, lets the running one finish
 * for up to grace_sec and then cancels it, waits for every connection, frees the server. */
void ll_server_stop(ll_server *s, double grace_sec);

/* The chat page served at / (NUL-terminated HTML with inline JS). */
extern const char ll_web_index_html[];

#endif
