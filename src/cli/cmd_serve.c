/*
 * cmd_serve.c — `lilac serve -m MODEL [options]`: loads the engine and runs the OpenAI-compatible
 * server (src/server/) until SIGINT or SIGTERM, then shuts down gracefully.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "server/server.h"

#define MAX_KEYS 64

static void usage(FILE *f) {
    fprintf(f,
            "usage: lilac serve -m MODEL [options]\n"
            "  -m, --model PATH        model directory or file (tokenizer and chat template beside it)\n"
            "  --tokenizer PATH        tokenizer.json (or its directory) to use instead\n"
            "  --chat-template FILE    a .jinja chat template to use instead\n"
            "  --backend NAME          cpu, cuda or auto (default auto)\n"
            "  --kv-cache TYPE         cuda: auto (default: q8 where the model's shapes have its kernels, else bf16),\n"
            "                          q8 (int8, an fp16 scale per 32 values: half the memory) or bf16\n"
            "  --host ADDR             bind address (default 127.0.0.1; 0.0.0.0 exposes the server)\n"
            "  --port N                port (default 8080; 0 picks a free one)\n"
            "  --api-key KEY           require 'Authorization: Bearer KEY' (also $LILAC_API_KEY)\n"
            "  --api-key-file FILE     accepted keys, one per line (sessions are isolated per key)\n"
            "  --alias NAME            a second model name that requests may use\n"
            "  --ctx N                 context length per request (default: model max, at most 32768)\n"
            "  --threads N             CPU threads (default: all)\n"
            "  --parallel N            concurrent sequences (only 1 is supported: one engine worker)\n"
            "  --max-queue N           requests waiting behind the running one; beyond: 429 (default 32)\n"
            "  --timeout S             per-request time limit and HTTP idle timeout in seconds (default 600)\n"
            "  --max-body BYTES        request body limit (default 16777216); beyond: 413\n"
            "  --cors ORIGIN           allow browser calls from ORIGIN ('*' for any)\n"
            "  --snapshot-mb N         memory for prefix snapshots in MiB\n"
            "  --grace S               on shutdown, how long the running request may finish (default 5)\n"
            "privacy gateway (README \"Privacy gateway\"):\n"
            "  --upstream URL          forward chat requests to this OpenAI-compatible base URL (.../v1)\n"
            "                          after the privacy scan: local, upstream, mask, skip or ask\n"
            "  --upstream-key-file F   the upstream's API key (first non-comment line of F)\n"
            "  --upstream-timeout S    limit for one upstream exchange (default: --timeout); past it: 504\n"
            "  --policy FILE           privacy policy (default: secret/account_number local, other_pii\n"
            "                          ask, everything else mask)\n"
            "  --audit-log FILE        append one JSON line per forwarded request (categories, counts,\n"
            "                          hashes; never values)\n"
            "  --pii-model DIR         PII encoder checkpoint (with its tokenizer.json) used beside the\n"
            "                          rules by the gateway and /v1/privacy/scan (default: rules only)\n"
            "  --pii-threads N         CPU threads of the PII encoder (default 2)\n");
}

/* Reads one key per line (blank lines and lines starting with '#' skipped) into keys[]; at most
 * max keys. */
static int read_key_file_n(const char *path, char **keys, int *n, int max) {
    FILE *f = fopen(path, "r");
    if (!f) return ll_err(LL_ERR_IO, "%s: cannot open", path), -1;
    char line[1024];
    int lineno = 0;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        size_t len = strlen(line);
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' ')) line[--len] = 0;
        char *k = line;
        while (*k == ' ' || *k == '\t') k++;
        if (!*k || *k == '#') continue;
        if (*n >= max) {
            fclose(f);
            return ll_err(LL_ERR_INVALID, "%s: more than %d key%s", path, max, max == 1 ? "" : "s"), -1;
        }
        if (!(keys[(*n)++] = ll_strdup(k))) {
            fclose(f);
            return ll_err(LL_ERR_OOM, "out of memory"), -1;
        }
    }
    fclose(f);
    if (*n == 0) return ll_err(LL_ERR_INVALID, "%s: no keys in it", path), -1;
    return 0;
}


static int parse_int(const char *opt, const char *v, long lo, long hi, long *out) {
    char *end;
    long x = strtol(v, &end, 10);
    if (!*v || *end || x < lo || x > hi) {
        ll_err(LL_ERR_INVALID, "%s: '%s' is not an integer in [%ld, %ld]", opt, v, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

int cmd_serve(int argc, char **argv) {
    ll_engine_params ep = {0};
    ll_server_params sp = {0};
    sp.port = 8080;
    sp.max_queue = 32;
    sp.timeout_sec = 600;
    char *keys[MAX_KEYS];
    int n_keys = 0, rc = 1;
    const char *key_file = NULL, *upstream_key_file = NULL, *policy_file = NULL;
    char *upstream_key[1] = {NULL};
    int n_upstream_key = 0;
    pii_policy policy;
    pii_policy_default(&policy);
    double grace = 5;
    long x;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!v) {
            usage(stderr);
            fprintf(stderr, "lilac serve: %s needs a value\n", a);
            return 2;
        }
        int bad = 0;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) ep.model_path = v;
        else if (!strcmp(a, "--tokenizer")) ep.tokenizer_path = v;
        else if (!strcmp(a, "--chat-template")) ep.template_path = v;
        else if (!strcmp(a, "--backend")) ep.backend = v;
        else if (!strcmp(a, "--kv-cache")) {
            int k = 0;
            if (cli_kv_cache(v, &k) < 0) bad = -1, fprintf(stderr, "lilac serve: --kv-cache %s: auto, bf16 or q8\n", v);
            ep.kv_q8 = k;
        }
        else if (!strcmp(a, "--host")) sp.host = v;
        else if (!strcmp(a, "--port")) bad = parse_int(a, v, 0, 65535, &x), sp.port = (int)x;
        else if (!strcmp(a, "--api-key")) {
            if (n_keys < MAX_KEYS && !(keys[n_keys++] = ll_strdup(v))) bad = -1;
        } else if (!strcmp(a, "--api-key-file")) key_file = v;
        else if (!strcmp(a, "--alias")) sp.alias = v;
        else if (!strcmp(a, "--ctx")) bad = parse_int(a, v, 0, 1 << 24, &x), ep.n_ctx = (int32_t)x;
        else if (!strcmp(a, "--threads")) bad = parse_int(a, v, 0, 4096, &x), ep.n_threads = (int32_t)x;
        else if (!strcmp(a, "--parallel")) {
            bad = parse_int(a, v, 1, 1024, &x);
            if (!bad && x > 1) ll_log(LL_LOG_WARN, "--parallel %ld: requests run one at a time (one engine worker)", x);
        } else if (!strcmp(a, "--max-queue")) bad = parse_int(a, v, 0, 1 << 20, &x), sp.max_queue = (int)x;
        else if (!strcmp(a, "--timeout")) bad = parse_int(a, v, 1, 1 << 24, &x), sp.timeout_sec = (double)x;
        else if (!strcmp(a, "--max-body")) bad = parse_int(a, v, 1024, 1L << 32, &x), sp.max_body = (size_t)x;
        else if (!strcmp(a, "--cors")) sp.cors_origin = v;
        else if (!strcmp(a, "--snapshot-mb")) bad = parse_int(a, v, 0, 1L << 24, &x), ep.snapshot_budget = (size_t)x << 20;
        else if (!strcmp(a, "--grace")) bad = parse_int(a, v, 0, 3600, &x), grace = (double)x;
        else if (!strcmp(a, "--upstream")) sp.upstream = v;
        else if (!strcmp(a, "--upstream-key-file")) upstream_key_file = v;
        else if (!strcmp(a, "--upstream-timeout")) bad = parse_int(a, v, 1, 1 << 24, &x), sp.upstream_timeout_sec = (double)x;
        else if (!strcmp(a, "--policy")) policy_file = v;
        else if (!strcmp(a, "--audit-log")) sp.audit_log = v;
        else if (!strcmp(a, "--pii-model")) sp.pii_model_dir = v;
        else if (!strcmp(a, "--pii-threads")) bad = parse_int(a, v, 1, 4096, &x), sp.pii_threads = (int)x;
        else {
            usage(stderr);
            fprintf(stderr, "lilac serve: unknown option %s\n", a);
            goto out;
        }
        if (bad) {
            cli_fail("serve", ll_errmsg()[0] ? ll_errmsg() : "out of memory");
            goto out;
        }
        i++;
    }
    if (!ep.model_path) ep.model_path = cli_default_model(); /* $LILAC_MODEL or the shipped demo model */
    if (!ep.model_path) {
        usage(stderr);
        fprintf(stderr, "lilac serve: -m MODEL is required (no $LILAC_MODEL and no models/lilac-demo found)\n");
        rc = 2;
        goto out;
    }
    if (key_file && read_key_file_n(key_file, keys, &n_keys, MAX_KEYS)) {
        cli_fail("serve", ll_errmsg());
        goto out;
    }
    if (policy_file && pii_policy_load(&policy, policy_file) != LL_OK) {
        cli_fail("serve", ll_errmsg());
        goto out;
    }
    sp.policy = &policy;
    if (upstream_key_file) {
        if (!sp.upstream) {
            cli_fail("serve", "--upstream-key-file needs --upstream");
            goto out;
        }
        if (read_key_file_n(upstream_key_file, upstream_key, &n_upstream_key, 1)) {
            cli_fail("serve", ll_errmsg());
            goto out;
        }
        sp.upstream_key = upstream_key[0];
    }
    const char *env_key = getenv("LILAC_API_KEY");
    if (n_keys == 0 && env_key && *env_key && !(keys[n_keys++] = ll_strdup(env_key))) goto out;
    sp.api_keys = (const char *const *)keys;
    sp.n_api_keys = n_keys;

    /* SIGINT/SIGTERM are taken by sigwait below. They are blocked before any thread exists (the
     * engine's CPU pool, the HTTP threads, the worker), so every thread inherits the mask and a
     * second signal during shutdown cannot land on a thread with the default (fatal) action. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    ll_engine *e = NULL;
    ll_status st = ll_engine_open(&ep, &e);
    if (st != LL_OK) {
        cli_fail("serve", ll_errmsg());
        goto out;
    }
    ll_server *srv = NULL;
    st = ll_server_start(&sp, e, &srv);
    if (st != LL_OK) {
        cli_fail("serve", ll_errmsg());
        ll_engine_close(e);
        goto out;
    }
    ll_log(LL_LOG_INFO, "serving %s on http://%s:%d (context %d, %s, queue %d)", ll_engine_model_id(e),
           sp.host ? sp.host : "127.0.0.1", ll_server_port(srv), (int)ll_engine_n_ctx(e),
           n_keys ? "API key required" : "no API key", sp.max_queue);
    int sig = 0;
    sigwait(&sigs, &sig);
    ll_log(LL_LOG_INFO, "%s: shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
    ll_server_stop(srv, grace);
    ll_engine_close(e);
    rc = 0;
out:
    for (int i = 0; i < n_keys; i++) ll_free(keys[i]);
    ll_free(upstream_key[0]);
    return rc;
}
