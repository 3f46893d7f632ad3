/*
 * privacy_eval.c — evaluation of the privacy detectors on the synthetic labelled set written by
 * bench/privacy_gen.py, and the scan-time bound on MB-sized and pathological inputs.
 *
 *   build/bench/privacy_eval SET.jsonl [--md OUT.md] [--errors N] [--pii-model DIR] [--clean FILE]...
 *
 * --clean FILE (repeatable): real PII-free text (documentation); every paragraph (blank-line
 * separated) is scanned and the fraction flagged is reported as a second, non-synthetic FP0.
 *
 * With --pii-model (a PII-Tracer checkpoint directory with its tokenizer) the scan is rules +
 * model (pii_scan); otherwise rules alone.
 *
 * Metrics (per category, character level, summed over all documents): a code point counts as a
 * true positive when gold and prediction give it the same category, a false positive when the
 * prediction gives it a category the gold does not, a false negative when the gold category is
 * not predicted. FP0 = fraction of clean (PII-free) documents with at least one predicted span.
 * Timing: MB/s over the whole set, over a 4 MiB document made of the set's texts, and over 1 MiB
 * pathological inputs (long runs that stress backtracking in the patterns).
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/mapfile.h"
#include "privacy/privacy.h"
#include "privacy/scan.h"

typedef struct {
    double tp[PII_N_CAT], fp[PII_N_CAT], fn[PII_N_CAT];
    int clean_docs, clean_flagged, docs;
    int flagged_by[PII_N_CAT]; /* clean docs flagged, by category */
} stats;

static void doc_labels(int8_t *lab, int64_t n, const pii_span *v, size_t k, int64_t (*get)(const pii_span *, int)) {
    memset(lab, -1, (size_t)n);
    for (size_t i = 0; i < k; i++)
        for (int64_t c = get(&v[i], 0); c < get(&v[i], 1) && c < n; c++)
            if (c >= 0) lab[c] = (int8_t)v[i].label;
}

static int64_t span_get(const pii_span *s, int which) { return which ? s->end : s->start; }

static double f1(double p, double r) { return p + r > 0 ? 2 * p * r / (p + r) : 0; }

static void time_text(const char *label, const char *text, size_t n, FILE *md) {
    pii_spans sp = {0};
    double t0 = ll_time_sec();
    ll_status st = pii_rules_scan(text, n, &sp);
    double dt = ll_time_sec() - t0;
    printf("%-44s %8.2f MiB %8.3f s %8.2f MiB/s  %zu spans%s\n", label, n / 1048576.0, dt, n / 1048576.0 / dt, sp.n,
           st ? " (error)" : "");
    if (md) fprintf(md, "| %s | %.2f | %.3f | %.2f | %zu |\n", label, n / 1048576.0, dt, n / 1048576.0 / dt, sp.n);
    pii_spans_free(&sp);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: privacy_eval SET.jsonl [--md OUT.md] [--errors N]\n");
        return 2;
    }
    const char *md_path = NULL, *model_dir = NULL;
    const char *clean_files[32];
    int n_clean = 0;
    int show_errors = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--md") && i + 1 < argc) md_path = argv[++i];
        else if (!strcmp(argv[i], "--errors") && i + 1 < argc) show_errors = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--pii-model") && i + 1 < argc) model_dir = argv[++i];
        else if (!strcmp(argv[i], "--clean") && i + 1 < argc && n_clean < 32) clean_files[n_clean++] = argv[++i];
    }
    pii_model model;
    tok_tokenizer *tok = NULL;
    if (model_dir && (pii_model_load(&model, model_dir, NULL, 0) || tok_load_file(model_dir, &tok))) {
        fprintf(stderr, "privacy_eval: %s\n", ll_errmsg());
        return 1;
    }
    char *data;
    size_t len;
    if (ll_read_file(argv[1], &data, &len)) {
        fprintf(stderr, "privacy_eval: %s\n", ll_errmsg());
        return 1;
    }
    stats S = {0};
    size_t total_bytes = 0;
    double total_time = 0;
    char *big = ll_malloc(4 << 20); /* the set concatenated (up to 4 MiB) */
    size_t big_n = 0;
    int8_t *gl = NULL, *pl = NULL;
    int64_t lab_cap = 0;
    char *line = data;
    while (line < data + len) {
        char *nl = memchr(line, '\n', (size_t)(data + len - line));
        size_t ll = nl ? (size_t)(nl - line) : (size_t)(data + len - line);
        cJSON *doc = cJSON_ParseWithLength(line, ll);
        line += ll + 1;
        if (!doc) continue;
        const char *text = cJSON_GetStringValue(cJSON_GetObjectItem(doc, "text"));
        const char *kind = cJSON_GetStringValue(cJSON_GetObjectItem(doc, "kind"));
        const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(doc, "id"));
        if (!text || !kind) { cJSON_Delete(doc); continue; }
        size_t n = strlen(text);
        if (big && big_n + n + 1 < (4u << 20)) { memcpy(big + big_n, text, n); big_n += n; big[big_n++] = '\n'; }
        pii_spans gold = {0}, pred = {0};
        const cJSON *sp;
        cJSON_ArrayForEach(sp, cJSON_GetObjectItem(doc, "spans")) {
            pii_span g = {0};
            g.start = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(sp, "start"));
            g.end = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(sp, "end"));
            g.label = pii_category_from_name(cJSON_GetStringValue(cJSON_GetObjectItem(sp, "label")));
            if (g.label >= 0) pii_spans_push(&gold, g);
        }
        double t0 = ll_time_sec();
        if (model_dir ? pii_scan(text, n, &model, tok, &pred, NULL) : pii_rules_scan(text, n, &pred)) { fprintf(stderr, "scan %s: %s\n", id, ll_errmsg()); return 1; }
        total_time += ll_time_sec() - t0;
        total_bytes += n;
        int64_t ncp = pii_cp_count(text, n);
        if (ncp > lab_cap) {
            lab_cap = ncp;
            gl = realloc(gl, (size_t)ncp);
            pl = realloc(pl, (size_t)ncp);
        }
        doc_labels(gl, ncp, gold.v, gold.n, span_get);
        doc_labels(pl, ncp, pred.v, pred.n, span_get);
        for (int64_t c = 0; c < ncp; c++) {
            if (gl[c] >= 0 && pl[c] == gl[c]) S.tp[gl[c]]++;
            else {
                if (gl[c] >= 0) S.fn[gl[c]]++;
                if (pl[c] >= 0) S.fp[pl[c]]++;
            }
        }
        S.docs++;
        if (!strcmp(kind, "clean")) {
            S.clean_docs++;
            if (pred.n) S.clean_flagged++;
            int seen[PII_N_CAT] = {0};
            for (size_t i = 0; i < pred.n; i++) seen[pred.v[i].label] = 1;
            for (int c = 0; c < PII_N_CAT; c++) S.flagged_by[c] += seen[c];
        }
        if (show_errors > 0) {
            /* print predicted spans that are not exactly gold, and gold spans not found */
            for (size_t i = 0; i < pred.n; i++) {
                int ok = 0;
                for (size_t j = 0; j < gold.n; j++)
                    ok |= gold.v[j].start == pred.v[i].start && gold.v[j].end == pred.v[i].end && gold.v[j].label == pred.v[i].label;
                if (!ok && show_errors-- > 0)
                    printf("FP %s %-16s «%.*s»\n", id, pii_category_name(pred.v[i].label),
                           (int)(pred.v[i].bend - pred.v[i].bstart), text + pred.v[i].bstart);
            }
            for (size_t j = 0; j < gold.n; j++) {
                int ok = 0;
                for (size_t i = 0; i < pred.n; i++)
                    ok |= gold.v[j].start == pred.v[i].start && gold.v[j].end == pred.v[i].end && gold.v[j].label == pred.v[i].label;
                if (!ok && show_errors-- > 0) {
                    /* code-point offsets to bytes for printing */
                    const unsigned char *u = (const unsigned char *)text;
                    size_t b = 0, bs = 0, be = 0;
                    for (int64_t cp = 0; b <= n; cp++) {
                        if (cp == gold.v[j].start) bs = b;
                        if (cp == gold.v[j].end) { be = b; break; }
                        if (b == n) break;
                        int l = pii_utf8_len(u + b, n - b);
                        b += l ? (size_t)l : 1;
                    }
                    printf("FN %s %-16s «%.*s»\n", id, pii_category_name(gold.v[j].label), (int)(be - bs), text + bs);
                }
            }
        }
        pii_spans_free(&gold);
        pii_spans_free(&pred);
        cJSON_Delete(doc);
    }
    FILE *md = md_path ? fopen(md_path, "w") : NULL;
    if (md) {
        fprintf(md, "# Privacy gate: evaluation of the rule recognizers\n\n");
        fprintf(md, "Set: `bench/privacy_gen.py` (default seed), %d documents in 13 languages, %d of them clean "
                    "hard negatives. Character-level metrics; FP0 = clean documents with any finding.\n"
                    "Reproduce with `make bench-privacy`.\n\n", S.docs, S.clean_docs);
        fprintf(md, "## %s\n\n", model_dir ? "Rules + model" : "Rules alone");
        fprintf(md, "| category | precision | recall | F1 | gold chars |\n|---|---|---|---|---|\n");
    }
    printf("%-16s %9s %9s %9s %10s\n", "category", "precision", "recall", "F1", "gold chars");
    double ttp = 0, tfp = 0, tfn = 0;
    for (int c = 0; c < PII_N_CAT; c++) {
        double p = S.tp[c] + S.fp[c] > 0 ? S.tp[c] / (S.tp[c] + S.fp[c]) : 0;
        double r = S.tp[c] + S.fn[c] > 0 ? S.tp[c] / (S.tp[c] + S.fn[c]) : 0;
        ttp += S.tp[c], tfp += S.fp[c], tfn += S.fn[c];
        printf("%-16s %9.3f %9.3f %9.3f %10.0f\n", pii_category_name(c), p, r, f1(p, r), S.tp[c] + S.fn[c]);
        if (md) fprintf(md, "| %s | %.3f | %.3f | %.3f | %.0f |\n", pii_category_name(c), p, r, f1(p, r), S.tp[c] + S.fn[c]);
    }
    double P = ttp / (ttp + tfp + 1e-9), R = ttp / (ttp + tfn + 1e-9);
    printf("%-16s %9.3f %9.3f %9.3f\n", "micro (all)", P, R, f1(P, R));
    double fp0 = S.clean_docs ? (double)S.clean_flagged / S.clean_docs : 0;
    printf("FP0: %d of %d clean documents flagged = %.3f\n", S.clean_flagged, S.clean_docs, fp0);
    for (int c = 0; c < PII_N_CAT; c++)
        if (S.flagged_by[c]) printf("  flagged by %s: %d\n", pii_category_name(c), S.flagged_by[c]);
    if (md) {
        fprintf(md, "| **micro (all)** | %.3f | %.3f | %.3f | |\n\n", P, R, f1(P, R));
        fprintf(md, "**FP0** = %d / %d = **%.3f**\n\n", S.clean_flagged, S.clean_docs, fp0);
        fprintf(md, "## Scan time (rules, one thread)\n\n| input | MiB | seconds | MiB/s | spans |\n|---|---|---|---|---|\n");
        fprintf(md, "| whole set, per document | %.2f | %.3f | %.2f | |\n", total_bytes / 1048576.0, total_time,
                total_bytes / 1048576.0 / total_time);
    }
    printf("whole set: %.2f MiB in %.3f s = %.2f MiB/s\n", total_bytes / 1048576.0, total_time,
           total_bytes / 1048576.0 / total_time);
    if (big) time_text("the whole set as one document", big, big_n, md);
    /* pathological inputs, 1 MiB each */
    size_t pn = 1 << 20;
    char *p = ll_malloc(pn + 1);
    struct { const char *label, *unit; } path[] = {
        {"1 MiB of 'a@'", "a@"},
        {"1 MiB of '1 '", "1 "},
        {"1 MiB of '1-'", "1-"},
        {"1 MiB of 'Aa1'", "Aa1"},
        {"1 MiB of '-----BEGIN '", "-----BEGIN "},
        {"1 MiB of 'eyJhbGciOi.'", "eyJhbGciOi."},
        {"1 MiB of 'http://a'", "http://a"},
        {"1 MiB of 'x.'", "x."},
        {"1 MiB of invalid UTF-8 (0xff 0xc3)", "\xff\xc3"},
        {"1 MiB of 'Mr. Aa '", "Mr. Aa "},
        {"1 MiB of 'password: '", "password: "},
    };
    for (size_t k = 0; p && k < LL_ARRAY_LEN(path); k++) {
        size_t ul = strlen(path[k].unit);
        for (size_t i = 0; i < pn; i++) p[i] = path[k].unit[i % ul];
        time_text(path[k].label, p, pn, md);
    }
    if (n_clean) {
        /* real clean text: paragraphs of documentation files */
        int paras = 0, flagged = 0;
        for (int f = 0; f < n_clean; f++) {
            char *t;
            size_t tl;
            if (ll_read_file(clean_files[f], &t, &tl)) continue;
            size_t pos = 0;
            while (pos < tl) {
                const char *end = memmem(t + pos, tl - pos, "\n\n", 2);
                size_t pe = end ? (size_t)(end - t) : tl;
                if (pe > pos + 1) {
                    pii_spans sp = {0};
                    if (model_dir ? pii_scan(t + pos, pe - pos, &model, tok, &sp, NULL) : pii_rules_scan(t + pos, pe - pos, &sp)) break;
                    paras++;
                    if (sp.n) {
                        flagged++;
                        if (show_errors-- > 0)
                            printf("FP-real %s %s «%.*s»\n", clean_files[f], pii_category_name(sp.v[0].label),
                                   (int)(sp.v[0].bend - sp.v[0].bstart), t + pos + sp.v[0].bstart);
                    }
                    pii_spans_free(&sp);
                }
                pos = pe + 2;
            }
            ll_free(t);
        }
        printf("FP0 on real documentation: %d of %d paragraphs flagged = %.3f\n", flagged, paras,
               paras ? (double)flagged / paras : 0);
        if (md)
            fprintf(md, "\n## FP0 on real text\n\n%d of %d paragraphs of real, PII-free documentation (the project's design "
                        "and reference notes: model specs, benchmarks, API notes full of ids, versions, URLs and numbers) "
                        "flagged = **%.3f**. (Not a held-out number either: the rules were checked against these notes once, "
                        "and the four false positives found then, token ids after \"id\" and in `token_id=`, a model name "
                        "near \"token\", \"tokens: llama-server\", were fixed.)\n", flagged, paras, paras ? (double)flagged / paras : 0);
    }
    if (md) {
        fprintf(md, "\n## Notes\n\n"
                    "- The set is synthetic and was written together with the rules, and the rules were tuned on it "
                    "(default seed). The templates and hard negatives are a few hundred sentences in 13 languages; real "
                    "conversations are more varied, so these numbers are an upper bound for the rules, not an estimate "
                    "of field accuracy. A second seed (`--seed 7`, new values, same templates) is reported below the "
                    "first when `make bench-privacy` runs.\n"
                    "- Rules + model is not reported: no real PII-Tracer checkpoint is available on this machine "
                    "(`pii-tiny` has random weights and a random 512-token vocabulary). `lilac scan --pii-model DIR` "
                    "runs the combination when a checkpoint with its tokenizer is given.\n"
                    "- Scan time is one thread, all rules, on the development machine (2 cores, shared); the "
                    "pathological inputs bound the cost per MiB of adversarial text (no pattern backtracks "
                    "catastrophically; PCRE2 match/depth/heap limits cap any single match).\n");
        fclose(md);
    }
    ll_free(p);
    ll_free(big);
    free(gl);
    free(pl);
    ll_free(data);
    if (model_dir) {
        pii_model_free(&model);
        tok_free(tok);
    }
    return 0;
}
