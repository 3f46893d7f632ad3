/*
 * server.c — the HTTP glue of `lilac serve`: libmicrohttpd in thread-per-connection mode, the
 * routes, authentication, CORS, body limits, the job queue and the one engine worker. See
 * server.h. The OpenAI JSON lives in api.c (requests) and resp.c (responses).
 *
 * A generation request goes: connection thread parses the body -> job pushed on the FIFO (or 429)
 * -> the worker runs it, appending response text (SSE chunks or the final JSON) to job->out under
 * job->mu -> the connection thread drains job->out to the socket. While it waits, the connection
 * thread peeks at its socket every POLL_SEC; a closed socket sets job->cancel, which the engine
 * callback sees at its next token (per request: no global abort flag).
 *
 * The HTTP status of a streamed answer is chosen only when its first text exists, so errors the
 * engine finds before generating (context overflow, a template error) still get a real 4xx; after
 * that, errors go in-band as `data: {"error":...}`.
 */
#include "server/server.h"

#include <curl/curl.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server/api.h"
#include "server/gateway.h"
#include "server/jobq.h"
#include "server/metrics.h"
#include "server/resp.h"

#define POLL_SEC 0.05 /* how often a waiting connection checks its socket and deadline */

typedef enum { JOB_GEN, JOB_TOKENIZE, JOB_DETOKENIZE } job_kind;
typedef enum { JOB_QUEUED, JOB_RUNNING, JOB_DONE } job_state;
typedef enum { CANCEL_NONE, CANCEL_CLIENT, CANCEL_TIMEOUT, CANCEL_SHUTDOWN } cancel_reason;

typedef struct job {
    job_kind kind;
    atomic_int refs;    /* the connection's and the queue/worker's */
    atomic_int cancel;  /* cancel_reason, set by the connection side or shutdown */
    double deadline;    /* ll_time_sec() after which the request is stopped */
    char ns[16];        /* snapshot namespace: which API key (isolates sessions per key) */
    int conn_fd;        /* the client's socket (valid only on its connection thread) */
    /* input */
    ll_api_request req;
    ll_api_tokenize tok;
    int32_t *ids;       /* detokenize input [n_ids] */
    int32_t n_ids;
    /* output, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job_state state;
    ll_strbuf out;      /* text not yet sent: SSE chunks, or the whole JSON body */
    int begun;          /* streaming: the role chunk went into out */
    int failed;         /* err holds the answer (before any output) */
    ll_api_error err;
    ll_resp resp;
    ll_gen_result res;
} job;

struct ll_server {
    ll_server_params p;
    char **keys;          /* copies of the API keys [p.n_api_keys] */
    ll_engine *engine;
    const char *model_id;
    int32_t n_ctx;
    ll_sampler_params sampling; /* the model's defaults for fields a request leaves out */
    struct MHD_Daemon *mhd;
    int port;
    ll_jobq q;
    pthread_t worker;
    int worker_started;
    atomic_int stopping;
    pthread_mutex_t mu;   /* guards the fields below */
    job *current;         /* the job the worker runs now */
    ll_metrics m;
    ll_engine_stats es;   /* copied by the worker after each job (the engine is not thread-safe) */
    double avg_job_sec;   /* moving average, for Retry-After */
    double started;
    /* privacy gateway */
    pii_policy policy;
    char *upstream_chat;  /* the upstream's chat completions URL, or NULL (no gateway) */
    char *upstream_cmpl;  /* its legacy completions URL (set with upstream_chat) */
    char *upstream_auth;  /* "Authorization: Bearer KEY" header line, or NULL */
    FILE *audit;          /* under audit_mu */
    pii_model pii;        /* loaded when pm is set */
    tok_tokenizer *pii_tok;
    ll_gw_model gm;
    ll_gw_model *pm;      /* &gm with a PII model, else NULL */
    pthread_mutex_t audit_mu;
};

typedef enum { R_NONE, R_INDEX, R_HEALTH, R_METRICS, R_MODELS, R_MODEL, R_CHAT, R_COMPLETIONS, R_TOKENIZE,
               R_DETOKENIZE, R_PRIVACY_SCAN } route_id;

/* per HTTP request (MHD's con_cls) */
typedef struct reqctx {
    ll_server *srv;
    route_id route;
    int key_index;        /* which API key matched (-1: none needed) */
    ll_strbuf body;
    int too_big;
    job *job;
    double t0;
    int status;
    char method[8];
    char path[64];
} reqctx;

/* ------------------------------------------------------------------ jobs */

static job *job_new(job_kind kind) {
    job *j = ll_calloc(1, sizeof(*j));
    if (!j) return NULL;
    j->kind = kind;
    atomic_init(&j->refs, 1);
    atomic_init(&j->cancel, CANCEL_NONE);
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    return j;
}

static void job_release(job *j) {
    if (!j || atomic_fetch_sub(&j->refs, 1) != 1) return;
    ll_api_request_free(&j->req);
    cJSON_Delete(j->tok.doc);
    ll_free(j->ids);
    ll_resp_free(&j->resp);
    ll_strbuf_free(&j->out);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    ll_free(j);
}

/* Worker side: the job has its answer (or failed); wake its connection. */
static void job_done(job *j) {
    pthread_mutex_lock(&j->mu);
    j->state = JOB_DONE;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

static void job_fail(job *j, const ll_api_error *e) {
    pthread_mutex_lock(&j->mu);
    j->failed = 1;
    j->err = *e;
    pthread_mutex_unlock(&j->mu);
}

/* 1 if the peer has closed the connection (EOF or a socket error). Peeks, never consumes. */
static int client_gone(int fd) {
    if (fd < 0) return 0;
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return 1;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return 1;
    return 0;
}

static void timed_wait(pthread_cond_t *cv, pthread_mutex_t *mu, double sec) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long ns = ts.tv_nsec + (long)(sec * 1e9);
    ts.tv_sec += ns / 1000000000L;
    ts.tv_nsec = ns % 1000000000L;
    pthread_cond_timedwait(cv, mu, &ts);
}

/* ------------------------------------------------------------------ the engine worker */

static int token_bytes_cb(void *ud, int32_t id, ll_strbuf *out) {
    ll_engine *e = ud;
    char *text = NULL;
    size_t len = 0;
    if (ll_engine_detokenize(e, &id, 1, &text, &len) != LL_OK) return -1;
    ll_strbuf_append(out, text, len);
    ll_free(text);
    return 0;
}

typedef struct gen_ctx {
    ll_server *srv;
    job *j;
    int timed_out;
} gen_ctx;

static int gen_event_cb(void *ud, const ll_gen_event *ev) {
    gen_ctx *g = ud;
    job *j = g->j;
    if (atomic_load(&j->cancel) != CANCEL_NONE) return 1;
    if (ll_time_sec() > j->deadline) {
        g->timed_out = 1;
        return 1;
    }
    if (ev->kind == LL_GEN_TOKEN) return 0; /* only there so that cancellation is seen at every token */
    pthread_mutex_lock(&j->mu);
    if (j->req.stream && !j->begun) {
        ll_resp_begin(&j->resp, &j->out);
        j->begun = 1;
    }
    ll_resp_event(&j->resp, ev, &j->out);
    if (j->req.stream) pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return 0;
}

static void run_gen(ll_server *s, job *j) {
    gen_ctx g = {s, j, 0};
    j->req.gen.ns = j->ns[0] ? j->ns : NULL;
    /* a callback for every token, not only for every text delta (the stop matcher and the tool
     * parser can hold text back for many tokens): a cancel or timeout takes effect at the next token */
    j->req.gen.emit_token_ids = 1;
    ll_status st = ll_engine_generate(s->engine, &j->req.gen, gen_event_cb, &g, &j->res);
    ll_api_error e;
    int cancel = atomic_load(&j->cancel);
    if (st == LL_OK) {
        pthread_mutex_lock(&j->mu);
        if (j->req.stream && !j->begun) {
            ll_resp_begin(&j->resp, &j->out);
            j->begun = 1;
        }
        ll_resp_finish(&j->resp, &j->res, &j->out);
        int oom = j->out.oom || j->resp.oom;
        pthread_mutex_unlock(&j->mu);
        if (oom) {
            ll_api_error_set(&e, 503, "server_error", NULL, NULL, "out of memory while building the response");
            job_fail(j, &e);
        }
        return;
    }
    if (st == LL_ERR_CANCELLED && cancel == CANCEL_CLIENT) return; /* nobody to answer */
    if (st == LL_ERR_CANCELLED && (g.timed_out || cancel == CANCEL_TIMEOUT)) {
        pthread_mutex_lock(&s->mu);
        s->m.timeouts++;
        pthread_mutex_unlock(&s->mu);
        ll_api_error_set(&e, 504, "timeout_error", "timeout", NULL, "request exceeded the server timeout (%.0f s)",
                         s->p.timeout_sec);
    } else if (st == LL_ERR_CANCELLED)
        ll_api_error_set(&e, 503, "unavailable_error", NULL, NULL, "the server is shutting down");
    else {
        if (st != LL_ERR_INVALID && st != LL_ERR_OVERFLOW && st != LL_ERR_UNSUPPORTED)
            ll_log(LL_LOG_ERROR, "generation failed: %s: %s", ll_status_name(st), ll_errmsg());
        ll_api_error_from_status(&e, st, ll_errmsg());
    }
    pthread_mutex_lock(&j->mu);
    if (j->begun) ll_resp_stream_error(&j->resp, &e, &j->out); /* in-band: the status is already 200 */
    else {
        j->failed = 1;
        j->err = e;
    }
    pthread_mutex_unlock(&j->mu);
}

static void run_tokenize(ll_server *s, job *j) {
    int32_t *ids = NULL;
    int32_t n = 0;
    ll_api_error e;
    ll_status st = ll_engine_tokenize(s->engine, j->tok.content, j->tok.len, j->tok.parse_special, &ids, &n);
    if (st != LL_OK) {
        ll_api_error_from_status(&e, st, ll_errmsg());
        job_fail(j, &e);
        return;
    }
    ll_strbuf piece = {0};
    pthread_mutex_lock(&j->mu);
    ll_strbuf_puts(&j->out, "{\"tokens\":[");
    for (int32_t i = 0; i < n; i++) {
        if (i) ll_strbuf_putc(&j->out, ',');
        if (!j->tok.with_pieces) {
            ll_strbuf_printf(&j->out, "%d", (int)ids[i]);
            continue;
        }
        ll_strbuf_clear(&piece);
        token_bytes_cb(s->engine, ids[i], &piece);
        ll_strbuf_printf(&j->out, "{\"id\":%d,\"piece\":", (int)ids[i]);
        if (ll_utf8_find_invalid(piece.data ? piece.data : "", piece.len) == piece.len)
            ll_strbuf_json_str(&j->out, piece.data ? piece.data : "", piece.len);
        else { /* a piece that is part of a UTF-8 sequence: its bytes (as llama-server does) */
            ll_strbuf_putc(&j->out, '[');
            for (size_t k = 0; k < piece.len; k++)
                ll_strbuf_printf(&j->out, "%s%u", k ? "," : "", (unsigned)(unsigned char)piece.data[k]);
            ll_strbuf_putc(&j->out, ']');
        }
        ll_strbuf_putc(&j->out, '}');
    }
    ll_strbuf_puts(&j->out, "]}");
    pthread_mutex_unlock(&j->mu);
    ll_strbuf_free(&piece);
    ll_free(ids);
}

static void run_detokenize(ll_server *s, job *j) {
    char *text = NULL;
    size_t len = 0;
    ll_api_error e;
    ll_status st = ll_engine_detokenize(s->engine, j->ids, j->n_ids, &text, &len);
    if (st != LL_OK) {
        ll_api_error_from_status(&e, st, ll_errmsg());
        job_fail(j, &e);
        return;
    }
    pthread_mutex_lock(&j->mu);
    ll_strbuf_puts(&j->out, "{\"content\":");
    ll_strbuf_json_str(&j->out, text ? text : "", len);
    ll_strbuf_putc(&j->out, '}');
    pthread_mutex_unlock(&j->mu);
    ll_free(text);
}

static void *worker_main(void *arg) {
    ll_server *s = arg;
    job *j;
    while ((j = ll_jobq_pop(&s->q))) {
        ll_api_error e;
        int cancel = atomic_load(&j->cancel);
        if (atomic_load(&s->stopping)) {
            ll_api_error_set(&e, 503, "unavailable_error", NULL, NULL, "the server is shutting down");
            job_fail(j, &e);
        } else if (cancel == CANCEL_NONE && ll_time_sec() > j->deadline) {
            ll_api_error_set(&e, 504, "timeout_error", "timeout", NULL, "request timed out while queued (%.0f s)",
                             s->p.timeout_sec);
            job_fail(j, &e);
        } else if (cancel == CANCEL_NONE) {
            pthread_mutex_lock(&s->mu);
            s->current = j;
            s->m.processing = 1;
            pthread_mutex_unlock(&s->mu);
            pthread_mutex_lock(&j->mu);
            j->state = JOB_RUNNING;
            pthread_mutex_unlock(&j->mu);
            double t0 = ll_time_sec();
            if (j->kind == JOB_GEN) run_gen(s, j);
            else if (j->kind == JOB_TOKENIZE) run_tokenize(s, j);
            else run_detokenize(s, j);
            double dt = ll_time_sec() - t0;
            pthread_mutex_lock(&s->mu);
            s->current = NULL;
            s->m.processing = 0;
            if (j->kind == JOB_GEN) s->avg_job_sec = s->avg_job_sec > 0 ? 0.8 * s->avg_job_sec + 0.2 * dt : dt;
            ll_engine_get_stats(s->engine, &s->es);
            pthread_mutex_unlock(&s->mu);
        }
        job_done(j);
        job_release(j);
    }
    return NULL;
}

/* ------------------------------------------------------------------ HTTP helpers */

static void count_status(ll_server *s, int status) {
    pthread_mutex_lock(&s->mu);
    s->m.http_requests++;
    if (status == 429) s->m.status_429++;
    if (status >= 200 && status < 300) s->m.status_2xx++;
    else if (status >= 400 && status < 500) s->m.status_4xx++;
    else if (status >= 500) s->m.status_5xx++;
    pthread_mutex_unlock(&s->mu);
}

static void add_common_headers(ll_server *s, struct MHD_Response *r) {
    if (s->p.cors_origin) {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", s->p.cors_origin);
        MHD_add_response_header(r, "Vary", "Origin");
    }
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
}

/* Queues a complete response (the bytes are copied). */
static enum MHD_Result send_body(reqctx *c, struct MHD_Connection *conn, int status, const char *ctype,
                                 const char *data, size_t len, const char *allow, int retry_after) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    if (ctype) MHD_add_response_header(r, "Content-Type", ctype);
    add_common_headers(c->srv, r);
    if (allow) MHD_add_response_header(r, "Allow", allow);
    if (retry_after > 0) {
        char ra[16];
        snprintf(ra, sizeof(ra), "%d", retry_after);
        MHD_add_response_header(r, "Retry-After", ra);
    }
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    enum MHD_Result ok = MHD_queue_response(conn, (unsigned)status, r);
    MHD_destroy_response(r);
    c->status = status;
    return ok;
}

/* Queues a 200 event stream whose bytes come from r's reader callback; takes r. The headers keep
 * proxies from holding the events back. */
static enum MHD_Result send_stream(reqctx *c, struct MHD_Connection *conn, struct MHD_Response *r) {
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    add_common_headers(c->srv, r);
    enum MHD_Result ok = MHD_queue_response(conn, 200, r);
    MHD_destroy_response(r);
    c->status = 200;
    return ok;
}

static enum MHD_Result send_json(reqctx *c, struct MHD_Connection *conn, int status, const ll_strbuf *b) {
    if (b->oom) {
        static const char msg[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,"
                                  "\"code\":null}}";
        return send_body(c, conn, 503, "application/json", msg, sizeof(msg) - 1, NULL, 0);
    }
    return send_body(c, conn, status, "application/json", b->data ? b->data : "", b->len, NULL, 0);
}

static enum MHD_Result send_error_ex(reqctx *c, struct MHD_Connection *conn, const ll_api_error *e, const char *allow,
                                     int retry_after) {
    ll_strbuf b = {0};
    ll_api_error_json(e, &b);
    enum MHD_Result r = b.oom ? MHD_NO
                              : send_body(c, conn, e->status, "application/json", b.data, b.len, allow, retry_after);
    ll_strbuf_free(&b);
    return r;
}

static enum MHD_Result send_error(reqctx *c, struct MHD_Connection *conn, const ll_api_error *e) {
    return send_error_ex(c, conn, e, NULL, 0);
}

/* ------------------------------------------------------------------ routes and auth */

typedef struct route {
    const char *path;
    route_id id;
    const char *method; /* "GET" or "POST" */
    int auth;
} route;

static const route routes[] = {
    {"/", R_INDEX, "GET", 0},
    {"/index.html", R_INDEX, "GET", 0},
    {"/health", R_HEALTH, "GET", 0},
    {"/v1/health", R_HEALTH, "GET", 0},
    {"/metrics", R_METRICS, "GET", 1},
    {"/v1/models", R_MODELS, "GET", 1},
    {"/models", R_MODELS, "GET", 1},
    {"/v1/chat/completions", R_CHAT, "POST", 1},
    {"/chat/completions", R_CHAT, "POST", 1},
    {"/v1/completions", R_COMPLETIONS, "POST", 1},
    {"/completions", R_COMPLETIONS, "POST", 1},
    {"/tokenize", R_TOKENIZE, "POST", 1},
    {"/detokenize", R_DETOKENIZE, "POST", 1},
    {"/v1/privacy/scan", R_PRIVACY_SCAN, "POST", 1},
    {"/privacy/scan", R_PRIVACY_SCAN, "POST", 1},
};

static const route *find_route(const char *url) {
    for (size_t i = 0; i < LL_ARRAY_LEN(routes); i++)
        if (!strcmp(url, routes[i].path)) return &routes[i];
    static const route model_route = {"/v1/models/", R_MODEL, "GET", 1};
    if (!strncmp(url, "/v1/models/", 11) && url[11]) return &model_route;
    return NULL;
}

/* Constant-time equality: the time depends on the lengths only, never on where bytes differ. */
static int ct_equal(const char *a, size_t na, const char *b, size_t nb) {
    size_t n = LL_MAX(na, nb);
    unsigned char d = na != nb;
    for (size_t i = 0; i < n; i++) {
        unsigned char x = i < na ? (unsigned char)a[i] : 0, y = i < nb ? (unsigned char)b[i] : 0;
        d |= x ^ y;
    }
    return d == 0;
}

/* Index of the matching key, -1 when keys are configured and none matches, -2 when none are. */
static int check_key(ll_server *s, struct MHD_Connection *conn) {
    if (s->p.n_api_keys == 0) return -2;
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7)) return -1;
    const char *tok = h + 7;
    while (*tok == ' ') tok++;
    size_t nt = strlen(tok);
    int found = -1;
    for (int i = 0; i < s->p.n_api_keys; i++) /* no early exit: every key is compared */
        if (ct_equal(tok, nt, s->keys[i], strlen(s->keys[i])) && found < 0) found = i;
    return found;
}

static int retry_after_sec(ll_server *s) {
    pthread_mutex_lock(&s->mu);
    double avg = s->avg_job_sec > 0 ? s->avg_job_sec : 1;
    pthread_mutex_unlock(&s->mu);
    double t = avg * (double)(ll_jobq_len(&s->q) + 1);
    return (int)LL_MIN(LL_MAX(t + 0.5, 1), 600);
}

/* ------------------------------------------------------------------ streaming */

static ssize_t sse_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    job *j = cls;
    (void)pos;
    pthread_mutex_lock(&j->mu);
    while (j->out.len == 0 && j->state != JOB_DONE) {
        timed_wait(&j->cv, &j->mu, POLL_SEC);
        if (j->out.len == 0 && j->state != JOB_DONE && client_gone(j->conn_fd)) {
            atomic_store(&j->cancel, CANCEL_CLIENT);
            pthread_mutex_unlock(&j->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
    if (j->out.len == 0) { /* done and drained */
        pthread_mutex_unlock(&j->mu);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    size_t n = LL_MIN(max, j->out.len);
    memcpy(buf, j->out.data, n);
    ll_strbuf_consume(&j->out, n);
    pthread_mutex_unlock(&j->mu);
    return (ssize_t)n;
}

static void sse_free(void *cls) {
    job *j = cls;
    /* the response is gone: if the answer was not complete, the client went away */
    pthread_mutex_lock(&j->mu);
    if (j->state != JOB_DONE) atomic_store(&j->cancel, CANCEL_CLIENT);
    pthread_mutex_unlock(&j->mu);
    job_release(j);
}

/* Pushes the job and waits for its first output (stream) or its end; then answers. */
static enum MHD_Result run_job(reqctx *c, struct MHD_Connection *conn, job *j) {
    ll_server *s = c->srv;
    ll_api_error e;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    j->conn_fd = ci ? ci->connect_fd : -1;
    j->deadline = c->t0 + s->p.timeout_sec;
    atomic_fetch_add(&j->refs, 1); /* the queue's reference */
    int rc = ll_jobq_push(&s->q, j);
    if (rc != 0) {
        atomic_fetch_sub(&j->refs, 1); /* the queue never took it */
        job_release(j);                /* nor will the connection: c->job is not set */
        if (rc == -1) {
            ll_api_error_set(&e, 429, "rate_limit_error", "queue_full", NULL,
                             "the server is busy (%d requests queued); retry later", s->p.max_queue);
            return send_error_ex(c, conn, &e, NULL, retry_after_sec(s));
        }
        ll_api_error_set(&e, 503, "unavailable_error", NULL, NULL, "the server is shutting down");
        return send_error(c, conn, &e);
    }
    c->job = j;
    pthread_mutex_lock(&s->mu);
    s->m.queue_length = ll_jobq_len(&s->q);
    pthread_mutex_unlock(&s->mu);
    int stream = j->kind == JOB_GEN && j->req.stream;
    pthread_mutex_lock(&j->mu);
    while (j->state != JOB_DONE && !(stream && j->out.len > 0)) {
        timed_wait(&j->cv, &j->mu, POLL_SEC);
        if (j->state == JOB_DONE || (stream && j->out.len > 0)) break;
        pthread_mutex_unlock(&j->mu);
        if (client_gone(j->conn_fd)) {
            atomic_store(&j->cancel, CANCEL_CLIENT);
            ll_jobq_remove(&s->q, j) ? job_release(j) : (void)0; /* never started: drop the queue's ref */
            c->status = 499; /* nginx's "client closed request", for the access log */
            return MHD_NO;
        }
        if (ll_time_sec() > j->deadline && ll_jobq_remove(&s->q, j)) {
            job_release(j);
            pthread_mutex_lock(&s->mu);
            s->m.timeouts++;
            pthread_mutex_unlock(&s->mu);
            ll_api_error_set(&e, 504, "timeout_error", "timeout", NULL, "request timed out while queued (%.0f s)",
                             s->p.timeout_sec);
            return send_error(c, conn, &e);
        }
        pthread_mutex_lock(&j->mu);
    }
    int failed = j->failed;
    e = j->err;
    int done = j->state == JOB_DONE;
    pthread_mutex_unlock(&j->mu);
    if (failed) return send_error(c, conn, &e);
    if (!stream) {
        if (done && j->out.len == 0 && atomic_load(&j->cancel) != CANCEL_NONE) return MHD_NO;
        return send_json(c, conn, 200, &j->out);
    }
    if (done && j->out.len == 0) return MHD_NO; /* cancelled with nothing to say */
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, sse_reader, j, sse_free);
    if (!r) return MHD_NO;
    atomic_fetch_add(&j->refs, 1); /* the response's reference, dropped in sse_free */
    return send_stream(c, conn, r);
}

/* ------------------------------------------------------------------ handlers */

static void random_hex(char *out, size_t nbytes) {
    unsigned char b[32];
    LL_ASSERT(nbytes <= sizeof(b));
    if (getrandom(b, nbytes, 0) != (ssize_t)nbytes) { /* never expected; fall back to time */
        uint64_t t = (uint64_t)(ll_time_sec() * 1e9);
        for (size_t i = 0; i < nbytes; i++) b[i] = (unsigned char)(t >> (8 * (i % 8))) ^ (unsigned char)i;
    }
    for (size_t i = 0; i < nbytes; i++) sprintf(out + 2 * i, "%02x", b[i]);
}

static enum MHD_Result handle_gen(reqctx *c, struct MHD_Connection *conn) {
    ll_server *s = c->srv;
    ll_api_error e;
    job *j = job_new(JOB_GEN);
    if (!j) {
        ll_api_error_set(&e, 503, "server_error", NULL, NULL, "out of memory");
        return send_error(c, conn, &e);
    }
    uint64_t seed;
    if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed)) seed = (uint64_t)(ll_time_sec() * 1e9);
    ll_api_limits lim = {s->model_id, s->p.alias, s->n_ctx, seed, &s->sampling};
    ll_api_kind kind = c->route == R_CHAT ? LL_API_CHAT : LL_API_COMPLETION;
    if (ll_api_parse(kind, c->body.data ? c->body.data : "", c->body.len, &lim, &j->req, &e)) {
        job_release(j);
        return send_error(c, conn, &e);
    }
    if (c->key_index >= 0) snprintf(j->ns, sizeof(j->ns), "k%d", c->key_index);
    char hex[33];
    random_hex(hex, 12);
    ll_resp_init(&j->resp, &j->req, hex, (long long)time(NULL), token_bytes_cb, s->engine);
    pthread_mutex_lock(&s->mu);
    if (kind == LL_API_CHAT) s->m.chat_requests++;
    else s->m.completion_requests++;
    pthread_mutex_unlock(&s->mu);
    return run_job(c, conn, j);
}

static enum MHD_Result handle_tokenize(reqctx *c, struct MHD_Connection *conn) {
    ll_api_error e;
    job *j = job_new(c->route == R_TOKENIZE ? JOB_TOKENIZE : JOB_DETOKENIZE);
    if (!j) {
        ll_api_error_set(&e, 503, "server_error", NULL, NULL, "out of memory");
        return send_error(c, conn, &e);
    }
    const char *body = c->body.data ? c->body.data : "";
    int rc = c->route == R_TOKENIZE ? ll_api_parse_tokenize(body, c->body.len, &j->tok, &e)
                                    : ll_api_parse_detokenize(body, c->body.len, &j->ids, &j->n_ids, &e);
    if (rc) {
        job_release(j);
        return send_error(c, conn, &e);
    }
    pthread_mutex_lock(&c->srv->mu);
    c->srv->m.tokenize_requests++;
    pthread_mutex_unlock(&c->srv->mu);
    return run_job(c, conn, j);
}

static void model_object(ll_server *s, ll_strbuf *b, const char *id) {
    ll_strbuf_puts(b, "{\"id\":");
    ll_strbuf_json_cstr(b, id);
    ll_strbuf_printf(b, ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"lilac\",\"meta\":{\"n_ctx\":%d}}",
                     (long long)s->started, (int)s->n_ctx);
}

static enum MHD_Result handle_get(reqctx *c, struct MHD_Connection *conn, const char *url) {
    ll_server *s = c->srv;
    ll_strbuf b = {0};
    enum MHD_Result r;
    ll_api_error e;
    switch (c->route) {
    case R_INDEX:
        return send_body(c, conn, 200, "text/html; charset=utf-8", ll_web_index_html, strlen(ll_web_index_html), NULL, 0);
    case R_HEALTH:
        ll_strbuf_puts(&b, "{\"status\":\"ok\"}");
        break;
    case R_MODELS:
        ll_strbuf_puts(&b, "{\"object\":\"list\",\"data\":[");
        model_object(s, &b, s->model_id);
        if (s->p.alias) {
            ll_strbuf_putc(&b, ',');
            model_object(s, &b, s->p.alias);
        }
        ll_strbuf_puts(&b, "]}");
        break;
    case R_MODEL: {
        const char *id = url + strlen("/v1/models/");
        if (strcmp(id, s->model_id) && !(s->p.alias && !strcmp(id, s->p.alias))) {
            ll_api_error_set(&e, 404, "invalid_request_error", "model_not_found", "model",
                             "The model '%.128s' does not exist", id);
            return send_error(c, conn, &e);
        }
        model_object(s, &b, id);
        break;
    }
    case R_METRICS: {
        ll_metrics m;
        ll_engine_stats es;
        pthread_mutex_lock(&s->mu);
        s->m.queue_length = ll_jobq_len(&s->q);
        m = s->m;
        es = s->es;
        pthread_mutex_unlock(&s->mu);
        ll_metrics_format(&m, &es, &b);
        r = b.oom ? MHD_NO : send_body(c, conn, 200, "text/plain; version=0.0.4", b.data, b.len, NULL, 0);
        ll_strbuf_free(&b);
        return r;
    }
    default:
        LL_ABORT("unhandled GET route %d", (int)c->route);
    }
    r = send_json(c, conn, 200, &b);
    ll_strbuf_free(&b);
    return r;
}

/* ------------------------------------------------------------------ privacy gateway */

static ll_status gateway_setup(ll_server *s) {
    const char *u = s->p.upstream;
    if (strncmp(u, "http://", 7) && strncmp(u, "https://", 8))
        return ll_err(LL_ERR_INVALID, "--upstream %s: must start with http:// or https://", u);
    size_t n = strlen(u);
    while (n && u[n - 1] == '/') n--;
    /* a base URL (".../v1", OpenAI's base_url) gets the chat path; a full chat endpoint is used as
     * is, and its base gets the legacy completions path */
    static const char tail[] = "/chat/completions", ctail[] = "/completions";
    int full = n >= sizeof(tail) - 1 && !memcmp(u + n - (sizeof(tail) - 1), tail, sizeof(tail) - 1);
    size_t base = full ? n - (sizeof(tail) - 1) : n;
    s->upstream_chat = ll_malloc(base + sizeof(tail));
    s->upstream_cmpl = ll_malloc(base + sizeof(ctail));
    if (!s->upstream_chat || !s->upstream_cmpl) return ll_err(LL_ERR_OOM, "server: out of memory");
    memcpy(s->upstream_chat, u, base);
    strcpy(s->upstream_chat + base, tail);
    memcpy(s->upstream_cmpl, u, base);
    strcpy(s->upstream_cmpl + base, ctail);
    if (s->p.upstream_key) {
        size_t k = strlen(s->p.upstream_key) + 32;
        if (!(s->upstream_auth = ll_malloc(k))) return ll_err(LL_ERR_OOM, "server: out of memory");
        snprintf(s->upstream_auth, k, "Authorization: Bearer %s", s->p.upstream_key);
    }
    if (s->p.audit_log && !(s->audit = fopen(s->p.audit_log, "a")))
        return ll_err(LL_ERR_IO, "--audit-log %s: cannot open for appending: %s", s->p.audit_log, strerror(errno));
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return ll_err(LL_ERR_INTERNAL, "cannot initialise libcurl");
    return LL_OK;
}

/* Appends one audit line; -1 when it could not be written (the request is then not forwarded:
 * nothing leaves the machine unrecorded). */
static int audit_write(ll_server *s, const ll_strbuf *line) {
    if (!s->audit) return 0;
    if (line->oom) return -1;
    pthread_mutex_lock(&s->audit_mu);
    int ok = fwrite(line->data, 1, line->len, s->audit) == line->len && fflush(s->audit) == 0;
    pthread_mutex_unlock(&s->audit_mu);
    return ok ? 0 : -1;
}

static enum MHD_Result handle_privacy_scan(reqctx *c, struct MHD_Connection *conn) {
    ll_api_error e;
    const char *body = c->body.data ? c->body.data : "";
    cJSON *doc = ll_api_parse_object(body, c->body.len, &e);
    if (!doc) return send_error(c, conn, &e);
    ll_gw_scan sc;
    cJSON *text = cJSON_GetObjectItemCaseSensitive(doc, "text");
    int rc = text ? ll_gw_scan_text(text, &c->srv->policy, c->srv->pm, &sc, &e)
                  : ll_gw_scan_messages(doc, &c->srv->policy, c->srv->pm, &sc, &e);
    if (!text && rc && !cJSON_GetObjectItemCaseSensitive(doc, "messages"))
        ll_api_error_set(&e, 400, "invalid_request_error", NULL, "text", "send {\"text\": ...} or {\"messages\": [...]}");
    enum MHD_Result r;
    if (rc) r = send_error(c, conn, &e);
    else {
        ll_strbuf b = {0};
        ll_gw_scan_json(&sc, &c->srv->policy, &b);
        r = send_json(c, conn, 200, &b);
        ll_strbuf_free(&b);
    }
    ll_gw_scan_free(&sc);
    cJSON_Delete(doc);
    return r;
}

/* One forwarded request: libcurl's multi interface driven from the connection's thread, so a
 * streamed answer is pumped only as fast as the client reads it and no extra thread exists. */
typedef struct fwd {
    ll_server *srv;
    const char *url;      /* the upstream endpoint (one of the server's) */
    CURL *easy;
    CURLM *multi;
    struct curl_slist *hdrs;
    char *body;           /* the JSON sent (cJSON's allocator) */
    ll_strbuf in;         /* upstream bytes not yet processed */
    ll_strbuf out;        /* bytes for the client */
    int got_body;         /* the write callback ran at least once */
    int done, finished;   /* transfer over / everything handed to the client */
    CURLcode result;
    int masking;
    pii_masker masker;
    ll_gw_sse sse;
    int conn_fd;
    char errbuf[CURL_ERROR_SIZE];
} fwd;

static size_t fwd_write(char *ptr, size_t size, size_t nmemb, void *ud) {
    fwd *f = ud;
    ll_strbuf_append(&f->in, ptr, size * nmemb);
    f->got_body = 1;
    return f->in.oom ? 0 : size * nmemb;
}

static void fwd_free(fwd *f) {
    if (!f) return;
    if (f->multi && f->easy) curl_multi_remove_handle(f->multi, f->easy);
    if (f->easy) curl_easy_cleanup(f->easy);
    if (f->multi) curl_multi_cleanup(f->multi);
    curl_slist_free_all(f->hdrs);
    free(f->body);
    ll_strbuf_free(&f->in);
    ll_strbuf_free(&f->out);
    pii_masker_free(&f->masker);
    ll_gw_sse_free(&f->sse);
    ll_free(f);
}

/* Advances the transfer, waiting up to wait_ms for something to happen. */
static void fwd_pump(fwd *f, int wait_ms) {
    int running = 0;
    curl_multi_perform(f->multi, &running);
    int left;
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(f->multi, &left)))
        if (msg->msg == CURLMSG_DONE) {
            f->done = 1;
            f->result = msg->data.result;
        }
    if (!f->done && running == 0) { /* finished without a message: should not happen; be safe */
        f->done = 1;
        f->result = CURLE_RECV_ERROR;
    }
    if (!f->done) curl_multi_poll(f->multi, NULL, 0, wait_ms, NULL);
}

static void fwd_error(fwd *f, ll_api_error *e) {
    if (f->result == CURLE_OPERATION_TIMEDOUT)
        ll_api_error_set(e, 504, "timeout_error", "upstream_timeout", NULL,
                         "the upstream did not answer within %.0f s", f->srv->p.upstream_timeout_sec);
    else
        ll_api_error_set(e, 502, "upstream_error", "upstream_unavailable", NULL, "the upstream failed: %s",
                         f->errbuf[0] ? f->errbuf : curl_easy_strerror(f->result));
}

static ssize_t fwd_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    fwd *f = cls;
    (void)pos;
    while (f->out.len == 0 && !f->finished) {
        if (f->in.len) {
            if (f->masking) ll_gw_sse_feed(&f->sse, f->in.data, f->in.len, &f->out);
            else ll_strbuf_append(&f->out, f->in.data, f->in.len);
            ll_strbuf_clear(&f->in);
            continue;
        }
        if (f->done) {
            if (f->masking) ll_gw_sse_finish(&f->sse, &f->out);
            if (f->result != CURLE_OK) { /* cut off mid-stream: say so in-band and end the stream */
                ll_api_error e;
                fwd_error(f, &e);
                ll_strbuf_puts(&f->out, "\n\ndata: ");
                ll_api_error_json(&e, &f->out);
                ll_strbuf_puts(&f->out, "\n\ndata: [DONE]\n\n");
            }
            f->finished = 1;
            break;
        }
        fwd_pump(f, 50);
        if (client_gone(f->conn_fd)) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    if (f->out.oom) return MHD_CONTENT_READER_END_WITH_ERROR;
    if (f->out.len == 0) return MHD_CONTENT_READER_END_OF_STREAM;
    size_t n = LL_MIN(max, f->out.len);
    memcpy(buf, f->out.data, n);
    ll_strbuf_consume(&f->out, n);
    return (ssize_t)n;
}

static void fwd_reader_free(void *cls) { fwd_free(cls); }

/* Sends doc upstream and answers the client with what comes back (placeholders restored when
 * masking). Takes ownership of f. */
static enum MHD_Result forward(reqctx *c, struct MHD_Connection *conn, fwd *f, cJSON *doc, int stream) {
    ll_server *s = c->srv;
    ll_api_error e;
    f->srv = s;
    f->body = cJSON_PrintUnformatted(doc);
    f->easy = curl_easy_init();
    f->multi = curl_multi_init();
    f->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    if (f->hdrs) f->hdrs = curl_slist_append(f->hdrs, "Expect:"); /* no 100-continue round trip */
    if (f->hdrs && s->upstream_auth) f->hdrs = curl_slist_append(f->hdrs, s->upstream_auth);
    if (!f->body || !f->easy || !f->multi || !f->hdrs) {
        fwd_free(f);
        ll_api_error_set(&e, 503, "server_error", NULL, NULL, "out of memory preparing the upstream request");
        return send_error(c, conn, &e);
    }
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    f->conn_fd = ci ? ci->connect_fd : -1;
    long ms = (long)(s->p.upstream_timeout_sec * 1000);
    curl_easy_setopt(f->easy, CURLOPT_URL, f->url);
    curl_easy_setopt(f->easy, CURLOPT_POST, 1L);
    curl_easy_setopt(f->easy, CURLOPT_POSTFIELDS, f->body);
    curl_easy_setopt(f->easy, CURLOPT_POSTFIELDSIZE, (long)strlen(f->body));
    curl_easy_setopt(f->easy, CURLOPT_HTTPHEADER, f->hdrs);
    curl_easy_setopt(f->easy, CURLOPT_WRITEFUNCTION, fwd_write);
    curl_easy_setopt(f->easy, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(f->easy, CURLOPT_ERRORBUFFER, f->errbuf);
    curl_easy_setopt(f->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(f->easy, CURLOPT_TIMEOUT_MS, ms);
    curl_easy_setopt(f->easy, CURLOPT_CONNECTTIMEOUT_MS, LL_MIN(ms, 10000L));
    curl_easy_setopt(f->easy, CURLOPT_FOLLOWLOCATION, 0L); /* never re-send the body elsewhere */
    curl_easy_setopt(f->easy, CURLOPT_ACCEPT_ENCODING, "");
    curl_multi_add_handle(f->multi, f->easy);
    /* wait for the whole answer, or (streaming) its first bytes */
    while (!f->done && !(stream && f->got_body)) {
        fwd_pump(f, 50);
        if (client_gone(f->conn_fd)) {
            fwd_free(f);
            c->status = 499;
            return MHD_NO;
        }
    }
    long status = 0;
    curl_easy_getinfo(f->easy, CURLINFO_RESPONSE_CODE, &status);
    if (f->done && f->result != CURLE_OK) {
        pthread_mutex_lock(&s->mu);
        s->m.upstream_errors++;
        pthread_mutex_unlock(&s->mu);
        fwd_error(f, &e);
        ll_log(LL_LOG_WARN, "upstream %s: %s", f->url, e.message);
        fwd_free(f);
        return send_error(c, conn, &e);
    }
    if (status < 200 || status >= 300) {
        while (!f->done) fwd_pump(f, 50);
        cJSON *ed = cJSON_ParseWithLength(f->in.data ? f->in.data : "", f->in.len);
        int is_err = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(ed, "error"));
        cJSON_Delete(ed);
        enum MHD_Result r;
        if (is_err && status >= 400 && status < 600) /* the upstream's own OpenAI error: pass it on */
            r = send_json(c, conn, (int)status, &f->in);
        else {
            ll_api_error_set(&e, 502, "upstream_error", "upstream_bad_status", NULL, "the upstream answered HTTP %ld",
                             status);
            r = send_error(c, conn, &e);
        }
        fwd_free(f);
        return r;
    }
    if (!stream) {
        ll_strbuf b = {0};
        if (f->masking) ll_gw_unmask_body(&f->masker, f->in.data ? f->in.data : "", f->in.len, &b);
        else ll_strbuf_append(&b, f->in.data ? f->in.data : "", f->in.len);
        fwd_free(f);
        enum MHD_Result r = send_json(c, conn, 200, &b);
        ll_strbuf_free(&b);
        return r;
    }
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, fwd_reader, f, fwd_reader_free);
    if (!r) {
        fwd_free(f);
        return MHD_NO;
    }
    return send_stream(c, conn, r);
}

/* POST /v1/chat/completions or /v1/completions with an upstream: scan (messages or prompt),
 * decide, then answer locally, forward to the matching upstream endpoint, refuse or ask. */
static enum MHD_Result handle_gateway(reqctx *c, struct MHD_Connection *conn) {
    ll_server *s = c->srv;
    ll_api_error e;
    const char *body = c->body.data ? c->body.data : "";
    cJSON *doc = ll_api_parse_object(body, c->body.len, &e);
    if (!doc) return send_error(c, conn, &e);
    int choice;
    ll_gw_scan sc = {0};
    int legacy = c->route == R_COMPLETIONS;
    if (ll_gw_take_decision(doc, &choice, &e) ||
        (legacy ? ll_gw_scan_prompt(doc, &s->policy, s->pm, &sc, &e) : ll_gw_scan_messages(doc, &s->policy, s->pm, &sc, &e))) {
        ll_gw_scan_free(&sc);
        cJSON_Delete(doc);
        return send_error(c, conn, &e);
    }
    cJSON *sv = cJSON_GetObjectItemCaseSensitive(doc, "stream");
    int stream = cJSON_IsTrue(sv);
    pii_action act = sc.decision.action;
    /* the client's choice: anything stricter always; "upstream" only where the policy asked (then
     * the categories whose policy is mask are still masked: "upload anyway" is about the rest) */
    if (choice >= 0 && ((pii_action)choice > act || act == PII_ACT_ASK)) {
        act = (pii_action)choice;
        if (act == PII_ACT_UPSTREAM && sc.decision.mask_categories) act = PII_ACT_MASK;
    }
    char hex[33];
    random_hex(hex, 12);
    char id[48];
    snprintf(id, sizeof(id), "%s-%s", legacy ? "cmpl" : "chatcmpl", hex);
    pthread_mutex_lock(&s->mu);
    s->m.privacy_actions[act]++;
    pthread_mutex_unlock(&s->mu);
    enum MHD_Result r;
    ll_strbuf b = {0};
    switch (act) {
    case PII_ACT_LOCAL: {
        /* the local engine serves one model: drop the name meant for the upstream */
        cJSON_DeleteItemFromObjectCaseSensitive(doc, "model");
        char *js = cJSON_PrintUnformatted(doc);
        ll_strbuf_clear(&c->body);
        if (js) ll_strbuf_puts(&c->body, js);
        free(js);
        ll_gw_scan_free(&sc);
        cJSON_Delete(doc);
        if (!js || c->body.oom) {
            ll_api_error_set(&e, 503, "server_error", NULL, NULL, "out of memory");
            return send_error(c, conn, &e);
        }
        return handle_gen(c, conn);
    }
    case PII_ACT_SKIP: {
        cJSON *mv = cJSON_GetObjectItemCaseSensitive(doc, "model");
        ll_gw_refusal(&sc.decision, cJSON_IsString(mv) ? mv->valuestring : s->model_id, id, (long long)time(NULL), stream,
                      legacy, &b);
        r = b.oom ? MHD_NO
                  : send_body(c, conn, 200, stream ? "text/event-stream" : "application/json", b.data, b.len, NULL, 0);
        break;
    }
    case PII_ACT_ASK:
        ll_api_error_set(&e, 409, "privacy_decision_required", "privacy_ask", "privacy_decision",
                         "this request contains personal data; repeat it with \"privacy_decision\": \"local\" (process "
                         "locally), \"upstream\" (upload anyway) or \"skip\" (skip this step)");
        ll_api_error_json(&e, &b);
        if (b.len && b.data[b.len - 1] == '}') { /* add the findings beside "error" */
            b.len--;
            ll_strbuf_puts(&b, ",\"privacy\":");
            ll_gw_scan_json(&sc, &s->policy, &b);
            ll_strbuf_puts(&b, ",\"choices\":[\"local\",\"upstream\",\"skip\"]}");
        }
        r = send_json(c, conn, 409, &b);
        break;
    default: { /* PII_ACT_MASK, PII_ACT_UPSTREAM */
        fwd *f = ll_calloc(1, sizeof(*f));
        if (!f) {
            ll_api_error_set(&e, 503, "server_error", NULL, NULL, "out of memory");
            r = send_error(c, conn, &e);
            break;
        }
        pii_masker_init(&f->masker);
        uint32_t cats = act == PII_ACT_MASK ? sc.decision.mask_categories : 0;
        f->masking = cats != 0;
        ll_gw_sse_init(&f->sse, &f->masker);
        if (cats && ll_gw_mask(&sc, cats, &f->masker) != LL_OK) {
            fwd_free(f);
            ll_api_error_set(&e, 503, "server_error", NULL, NULL, "out of memory while masking");
            r = send_error(c, conn, &e);
            break;
        }
        /* the audit line is written before anything leaves: an upstream failing half-way may
         * still have received it */
        char *peek = cJSON_PrintUnformatted(doc);
        f->url = legacy ? s->upstream_cmpl : s->upstream_chat;
        ll_gw_audit_line(&sc, id, cats ? "mask" : "upstream", f->url, cats, peek ? strlen(peek) : 0, &b);
        free(peek);
        if (audit_write(s, &b)) {
            fwd_free(f);
            ll_log(LL_LOG_ERROR, "--audit-log %s: write failed; request not forwarded", s->p.audit_log);
            ll_api_error_set(&e, 503, "server_error", "audit_log_failed", NULL,
                             "the audit log cannot be written; the request was not forwarded");
            r = send_error(c, conn, &e);
            break;
        }
        r = forward(c, conn, f, doc, stream);
        break;
    }
    }
    ll_strbuf_free(&b);
    ll_gw_scan_free(&sc);
    cJSON_Delete(doc);
    return r;
}

/* ------------------------------------------------------------------ MHD callbacks */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    ll_server *s = cls;
    reqctx *c = *con_cls;
    ll_api_error e;
    if (!c) { /* first call: headers only */
        c = ll_calloc(1, sizeof(*c));
        if (!c) return MHD_NO;
        c->srv = s;
        c->t0 = ll_time_sec();
        c->key_index = -1;
        snprintf(c->method, sizeof(c->method), "%s", method);
        snprintf(c->path, sizeof(c->path), "%s", url);
        *con_cls = c;
        const route *rt = find_route(url);
        int is_get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
        if (!rt) {
            ll_api_error_set(&e, 404, "invalid_request_error", "not_found", NULL, "no route %.16s %.200s", method, url);
            return send_error(c, conn, &e);
        }
        c->route = rt->id;
        if (!strcmp(method, "OPTIONS")) { /* CORS preflight: no key (browsers never send one) */
            struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
            if (!r) return MHD_NO;
            add_common_headers(s, r);
            MHD_add_response_header(r, "Allow", !strcmp(rt->method, "GET") ? "GET, HEAD, OPTIONS" : "POST, OPTIONS");
            if (s->p.cors_origin) {
                MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
                MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type");
                MHD_add_response_header(r, "Access-Control-Max-Age", "600");
            }
            enum MHD_Result ok = MHD_queue_response(conn, 204, r);
            MHD_destroy_response(r);
            c->status = 204;
            return ok;
        }
        if (!strcmp(rt->method, "GET") ? !is_get : strcmp(method, "POST")) {
            ll_api_error_set(&e, 405, "invalid_request_error", "method_not_allowed", NULL, "%.16s is not allowed on %s",
                             method, rt->path);
            return send_error_ex(c, conn, &e, !strcmp(rt->method, "GET") ? "GET, HEAD, OPTIONS" : "POST, OPTIONS", 0);
        }
        if (rt->auth) {
            c->key_index = check_key(s, conn);
            if (c->key_index == -1) {
                ll_api_error_set(&e, 401, "authentication_error", "invalid_api_key", NULL,
                                 "Invalid or missing API key (send Authorization: Bearer <key>)");
                return send_error(c, conn, &e);
            }
        }
        if (is_get) return handle_get(c, conn, url);
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > s->p.max_body) {
            c->too_big = 1; /* answered at once: the body is never read */
            ll_api_error_set(&e, 413, "invalid_request_error", "request_too_large", NULL,
                             "request body of %.20s bytes exceeds the limit of %zu bytes", cl, s->p.max_body);
            return send_error(c, conn, &e);
        }
        return MHD_YES;
    }
    if (c->status) { /* already answered (rejected before the body): discard what still comes */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (!c->too_big && c->body.len + *upload_data_size > s->p.max_body) c->too_big = 1;
        if (!c->too_big) ll_strbuf_append(&c->body, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (c->too_big) {
        ll_api_error_set(&e, 413, "invalid_request_error", "request_too_large", NULL,
                         "request body exceeds the limit of %zu bytes", s->p.max_body);
        return send_error(c, conn, &e);
    }
    if (c->body.oom) {
        ll_api_error_set(&e, 503, "server_error", NULL, NULL, "out of memory reading the request");
        return send_error(c, conn, &e);
    }
    if (c->route == R_PRIVACY_SCAN) return handle_privacy_scan(c, conn);
    if ((c->route == R_CHAT || c->route == R_COMPLETIONS) && s->upstream_chat) return handle_gateway(c, conn);
    if (c->route == R_CHAT || c->route == R_COMPLETIONS) return handle_gen(c, conn);
    return handle_tokenize(c, conn);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
    ll_server *s = cls;
    reqctx *c = *con_cls;
    (void)conn;
    if (!c) return;
    *con_cls = NULL;
    int status = c->status ? c->status : 499;
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && status < 400) status = 499;
    job *j = c->job;
    int32_t pt = 0, ct = 0, cached = 0;
    if (j) {
        pthread_mutex_lock(&j->mu);
        int done = j->state == JOB_DONE;
        if (done) pt = j->res.prompt_tokens, ct = j->res.completion_tokens, cached = j->res.cached_tokens;
        pthread_mutex_unlock(&j->mu);
        if (!done && status == 499) {
            atomic_store(&j->cancel, CANCEL_CLIENT);
            if (ll_jobq_remove(&s->q, j)) job_release(j);
        }
        if (status == 499) {
            pthread_mutex_lock(&s->mu);
            s->m.cancelled++;
            pthread_mutex_unlock(&s->mu);
        }
        job_release(j);
    }
    count_status(s, status);
    /* access log: never the body (prompts stay private) */
    ll_log(LL_LOG_INFO, "%s %s %d %.0fms prompt=%d cached=%d completion=%d", c->method, c->path, status,
           (ll_time_sec() - c->t0) * 1e3, (int)pt, (int)cached, (int)ct);
    ll_strbuf_free(&c->body);
    ll_free(c);
}

/* ------------------------------------------------------------------ start / stop */

static void free_server(ll_server *s) {
    ll_free(s->upstream_chat);
    ll_free(s->upstream_cmpl);
    ll_free(s->upstream_auth);
    if (s->audit) fclose(s->audit);
    pthread_mutex_destroy(&s->audit_mu);
    if (s->pm) {
        pii_model_free(&s->pii);
        pthread_mutex_destroy(&s->gm.mu);
    }
    if (s->pii_tok) tok_free(s->pii_tok);
    for (int i = 0; i < s->p.n_api_keys && s->keys; i++) ll_free(s->keys[i]);
    ll_free(s->keys);
    ll_jobq_destroy(&s->q);
    pthread_mutex_destroy(&s->mu);
    ll_free(s);
}

ll_status ll_server_start(const ll_server_params *p, ll_engine *e, ll_server **out) {
    *out = NULL;
    ll_server *s = ll_calloc(1, sizeof(*s));
    if (!s) return ll_err(LL_ERR_OOM, "server: out of memory");
    s->p = *p;
    if (!s->p.host) s->p.host = "127.0.0.1";
    if (s->p.max_queue < 0) s->p.max_queue = 32;
    if (s->p.timeout_sec <= 0) s->p.timeout_sec = 600;
    if (!s->p.max_body) s->p.max_body = 16u << 20;
    if (s->p.max_connections <= 0) s->p.max_connections = 256;
    s->engine = e;
    s->model_id = ll_engine_model_id(e);
    s->n_ctx = ll_engine_n_ctx(e);
    s->sampling = ll_engine_default_sampling(e);
    s->started = (double)time(NULL);
    s->m.max_queue = (uint64_t)s->p.max_queue;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->audit_mu, NULL);
    if (p->policy) s->policy = *p->policy;
    else pii_policy_default(&s->policy);
    if (s->p.upstream_timeout_sec <= 0) s->p.upstream_timeout_sec = s->p.timeout_sec;
    ll_status st = ll_jobq_init(&s->q, (size_t)s->p.max_queue);
    if (st != LL_OK) {
        pthread_mutex_destroy(&s->mu);
        ll_free(s);
        return st;
    }
    if (p->pii_model_dir) {
        st = pii_model_load(&s->pii, p->pii_model_dir, NULL, p->pii_threads > 0 ? p->pii_threads : 2);
        if (st != LL_OK) {
            free_server(s);
            return st;
        }
        s->pm = &s->gm; /* from here on free_server frees the model */
        pthread_mutex_init(&s->gm.mu, NULL);
        s->gm.m = &s->pii;
        st = tok_load_file(p->pii_model_dir, &s->pii_tok);
        if (st != LL_OK) {
            free_server(s);
            return ll_err(st, "--pii-model %s: no usable tokenizer.json beside the model", p->pii_model_dir);
        }
        s->gm.tok = s->pii_tok;
    }
    if (p->upstream) {
        st = gateway_setup(s);
        if (st != LL_OK) {
            free_server(s);
            return st;
        }
    }
    if (p->n_api_keys) {
        s->keys = ll_calloc((size_t)p->n_api_keys, sizeof(char *));
        if (!s->keys) {
            free_server(s);
            return ll_err(LL_ERR_OOM, "server: out of memory");
        }
        for (int i = 0; i < p->n_api_keys; i++)
            if (!(s->keys[i] = ll_strdup(p->api_keys[i]))) {
                free_server(s);
                return ll_err(LL_ERR_OOM, "server: out of memory");
            }
        s->p.api_keys = (const char *const *)s->keys;
    }
    /* resolve the bind address (numeric or a name such as localhost) */
    char port[16];
    snprintf(port, sizeof(port), "%d", p->port);
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    int gai = getaddrinfo(s->p.host, port, &hints, &ai);
    if (gai) {
        free_server(s);
        return ll_err(LL_ERR_INVALID, "--host %s: %s", p->host ? p->host : "", gai_strerror(gai));
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | MHD_USE_AUTO;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    s->mhd = MHD_start_daemon(flags, (uint16_t)p->port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_CONNECTION_TIMEOUT,
                              (unsigned)s->p.timeout_sec, MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->p.max_connections,
                              MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->mhd) {
        free_server(s);
        return ll_err(LL_ERR_IO, "cannot listen on %s:%d (address in use, or not allowed)", s->p.host, p->port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : p->port;
    if (pthread_create(&s->worker, NULL, worker_main, s)) {
        MHD_stop_daemon(s->mhd);
        free_server(s);
        return ll_err(LL_ERR_INTERNAL, "cannot start the engine worker thread");
    }
    s->worker_started = 1;
    *out = s;
    return LL_OK;
}

int ll_server_port(const ll_server *s) { return s->port; }

void ll_server_stop(ll_server *s, double grace_sec) {
    if (!s) return;
    MHD_socket lfd = MHD_quiesce_daemon(s->mhd); /* no new connections; open ones continue */
    if (lfd != MHD_INVALID_SOCKET) close(lfd);   /* the listening socket is ours now */
    atomic_store(&s->stopping, 1);
    ll_jobq_close(&s->q);       /* queued jobs are answered 503 by the worker */
    double until = ll_time_sec() + grace_sec;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        job *cur = s->current;
        if (cur && ll_time_sec() > until) atomic_store(&cur->cancel, CANCEL_SHUTDOWN);
        pthread_mutex_unlock(&s->mu);
        if (!cur && ll_jobq_len(&s->q) == 0) break;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    pthread_join(s->worker, NULL);
    MHD_stop_daemon(s->mhd); /* waits for the connection threads, which all have their answers */
    free_server(s);
}
