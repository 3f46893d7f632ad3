/*
 * cmd_logits.c — `lilac logits -m MODEL --tokens 1,2,3 [--decode-from P] -o OUT.safetensors`
 *
 * Writes an F32 tensor `logits` [T, V] (row i = logits after token i). Without --decode-from the
 * T tokens are one prefill; with --decode-from P, tokens 0..P-1 are one prefill and the rest are
 * fed one at a time on the same state (the golden fixtures' `decode.logits` protocol).
 */
#include <stdio.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "cli.h"
#include "cli/cli_io.h"
#include "format/st_write.h"

static void usage(void) {
    fprintf(stderr,
            "usage: lilac logits -m MODEL --tokens 1,2,3 [--decode-from P] -o OUT.safetensors\n"
            "                    [--backend cpu|cuda|auto] [--threads N] [--batch N]\n");
}

int cmd_logits(int argc, char **argv) {
    const char *model_path = NULL, *tokens = NULL, *out = NULL, *backend = "cpu";
    int decode_from = -1, threads = 0, batch = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(); return 0; }
        if (!v) { usage(); return cli_fail("logits", "missing value after an option"); }
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model_path = v;
        else if (!strcmp(a, "--tokens")) tokens = v;
        else if (!strcmp(a, "-o")) out = v;
        else if (!strcmp(a, "--decode-from")) decode_from = atoi(v);
        else if (!strcmp(a, "--backend")) backend = v;
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--batch")) batch = atoi(v);
        else { usage(); return cli_fail("logits", "unknown option"); }
        i++;
    }
    if (!model_path || !tokens || !out) { usage(); return 2; }
    int32_t *ids = NULL;
    int n = cli_parse_ids("--tokens", tokens, &ids);
    if (n < 0) return cli_fail("logits", ll_errmsg());
    if (n == 0) { ll_free(ids); return cli_fail("logits", "--tokens: empty"); }
    if (decode_from == 0 || decode_from > n) {
        ll_free(ids);
        return cli_fail("logits", "--decode-from must be in [1, number of tokens]");
    }
    qwen_model *m = NULL;
    ll_backend *be = NULL;
    ll_seq *s = NULL;
    float *logits = NULL;
    int rc = 1;
    ll_backend_params bp = {.n_threads = threads, .max_batch = batch};
    if (qwen_model_load(model_path, &m) != LL_OK) goto done;
    if (ll_backend_new(backend, m, &bp, &be) != LL_OK) goto done;
    if (be->v->seq_new(be, n, &s) != LL_OK) goto done;
    const int64_t V = m->hp.n_vocab;
    logits = ll_malloc(sizeof(float) * (size_t)n * (size_t)V);
    if (!logits) { ll_err(LL_ERR_OOM, "out of memory for %d x %lld logits", n, (long long)V); goto done; }
    int P = decode_from > 0 ? decode_from : n;
    if (be->v->forward(be, s, ids, P, LL_LOGITS_ALL, logits) != LL_OK) goto done;
    for (int i = P; i < n; i++)
        if (be->v->forward(be, s, ids + i, 1, LL_LOGITS_LAST, logits + (int64_t)i * V) != LL_OK) goto done;
    st_out_tensor t = {"logits", LL_TYPE_F32, 2, {n, V}, logits};
    if (st_write_file(out, &t, 1) != LL_OK) goto done;
    rc = 0;
done:
    if (rc) cli_fail("logits", ll_errmsg());
    ll_free(logits);
    if (s) be->v->seq_free(be, s);
    ll_backend_free(be);
    qwen_model_free(m);
    ll_free(ids);
    return rc;
}
