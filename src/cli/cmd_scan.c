/*
 * cmd_scan.c — the privacy gate on the command line:
 *   lilac scan   [FILE|-] [--json] [--pii-model DIR] [--threads N]
 *       prints the found spans and a document sensitivity; --json prints
 *       {"spans":[{"start":S,"end":E,"label":L,"score":X,"source":"rule|model"}],"sensitivity":Y}
 *       with start/end in Unicode code points (end exclusive).
 *   lilac mask   [FILE|-] [--map OUT.json] [--pii-model DIR] [--only CAT,CAT]
 *       writes the text with every finding replaced by a numbered placeholder ([PRIVATE_EMAIL_1];
 *       the same value always gets the same one); --map saves {"placeholder": "value"} so that
 *   lilac unmask [FILE|-] --map MAP.json
 *       can restore it.
 * Without --pii-model only the rule recognizers run. DIR is a PII-Tracer checkpoint directory
 * holding config.json, model.safetensors and the tokenizer (tokenizer.json).
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "cli_io.h"
#include "privacy/mask.h"
#include "privacy/scan.h"

typedef struct scan_opts {
    const char *input, *model_dir, *map_path, *only;
    int json, threads;
} scan_opts;

static int parse_opts(const char *cmd, int argc, char **argv, scan_opts *o) {
    memset(o, 0, sizeof(*o));
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_v = i + 1 < argc;
        if (!strcmp(a, "--json")) o->json = 1;
        else if (!strcmp(a, "--pii-model") && has_v) o->model_dir = argv[++i];
        else if (!strcmp(a, "--map") && has_v) o->map_path = argv[++i];
        else if (!strcmp(a, "--only") && has_v) o->only = argv[++i];
        else if (!strcmp(a, "--threads") && has_v) o->threads = atoi(argv[++i]);
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) return 2;
        else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "lilac %s: unknown option '%s'\n", cmd, a);
            return 1;
        } else if (!o->input) o->input = a;
        else {
            fprintf(stderr, "lilac %s: more than one input file\n", cmd);
            return 1;
        }
    }
    return 0;
}

static char *read_input(const char *path, size_t *n) {
    if (!path || !strcmp(path, "-")) return cli_read_stream(stdin, n);
    return cli_read_path(path, n);
}

/* Loads the optional model + tokenizer; returns nonzero on failure (message printed). */
static int load_model(const char *cmd, const scan_opts *o, pii_model *m, tok_tokenizer **tok, int *have) {
    *have = 0;
    if (!o->model_dir) return 0;
    if (pii_model_load(m, o->model_dir, NULL, o->threads)) return cli_fail(cmd, ll_errmsg());
    if (tok_load_file(o->model_dir, tok)) {
        char msg[1024];
        snprintf(msg, sizeof(msg), "%s (the PII model directory needs its tokenizer.json)", ll_errmsg());
        pii_model_free(m);
        return cli_fail(cmd, msg);
    }
    *have = 1;
    return 0;
}

static void print_text_span(const char *text, const pii_span *s) {
    printf("%lld\t%lld\t%s\t%.3f\t%s\t", (long long)s->start, (long long)s->end, pii_category_name(s->label), s->score,
           s->source == PII_SRC_MODEL ? "model" : "rule");
    /* the value, with control characters escaped so each span stays on one line */
    for (int64_t i = s->bstart; i < s->bend; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c < 0x20) printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('\n');
}

int cmd_scan(int argc, char **argv) {
    scan_opts o;
    int rc = parse_opts("scan", argc, argv, &o);
    if (rc) {
        fprintf(rc == 2 ? stdout : stderr, "usage: lilac scan [FILE|-] [--json] [--pii-model DIR] [--threads N]\n");
        return rc == 2 ? 0 : 2;
    }
    size_t n;
    char *text = read_input(o.input, &n);
    if (!text) return cli_fail("scan", "cannot read the input");
    pii_model m;
    tok_tokenizer *tok = NULL;
    int have;
    if (load_model("scan", &o, &m, &tok, &have)) { ll_free(text); return 1; }
    pii_spans spans = {0};
    float sens = 0;
    ll_status st = pii_scan(text, n, have ? &m : NULL, tok, &spans, &sens);
    if (st) {
        rc = cli_fail("scan", ll_errmsg());
    } else if (o.json) {
        cJSON *root = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(root, "spans");
        for (size_t i = 0; i < spans.n; i++) {
            cJSON *s = cJSON_CreateObject();
            cJSON_AddNumberToObject(s, "start", (double)spans.v[i].start);
            cJSON_AddNumberToObject(s, "end", (double)spans.v[i].end);
            cJSON_AddStringToObject(s, "label", pii_category_name(spans.v[i].label));
            cJSON_AddNumberToObject(s, "score", (double)(int)(spans.v[i].score * 10000 + 0.5f) / 10000.0);
            cJSON_AddStringToObject(s, "source", spans.v[i].source == PII_SRC_MODEL ? "model" : "rule");
            cJSON_AddItemToArray(arr, s);
        }
        cJSON_AddNumberToObject(root, "sensitivity", (double)(int)(sens * 10000 + 0.5f) / 10000.0);
        char *js = cJSON_PrintUnformatted(root);
        if (js) puts(js);
        free(js);
        cJSON_Delete(root);
    } else {
        for (size_t i = 0; i < spans.n; i++) print_text_span(text, &spans.v[i]);
        printf("sensitivity\t%.3f\n", sens);
    }
    pii_spans_free(&spans);
    if (have) { pii_model_free(&m); tok_free(tok); }
    ll_free(text);
    return rc;
}

static int write_map(const char *path, const pii_masker *mk) {
    cJSON *root = cJSON_CreateObject();
    for (size_t i = 0; i < mk->n; i++) cJSON_AddStringToObject(root, mk->v[i].ph, mk->v[i].value);
    char *js = cJSON_Print(root);
    cJSON_Delete(root);
    FILE *f = js ? fopen(path, "wb") : NULL;
    int ok = f && fputs(js, f) >= 0;
    if (f && fclose(f)) ok = 0;
    free(js);
    return ok ? 0 : 1;
}

int cmd_mask(int argc, char **argv) {
    scan_opts o;
    int rc = parse_opts("mask", argc, argv, &o);
    if (rc) {
        fprintf(rc == 2 ? stdout : stderr, "usage: lilac mask [FILE|-] [--map OUT.json] [--pii-model DIR] [--only CAT,CAT]\n");
        return rc == 2 ? 0 : 2;
    }
    uint32_t cats = (1u << PII_N_CAT) - 1;
    if (o.only) {
        cats = 0;
        char buf[512];
        snprintf(buf, sizeof(buf), "%s", o.only);
        for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
            int c = pii_category_from_name(t);
            if (c < 0) {
                fprintf(stderr, "lilac mask: unknown category '%s'\n", t);
                return 2;
            }
            cats |= 1u << c;
        }
    }
    size_t n;
    char *text = read_input(o.input, &n);
    if (!text) return cli_fail("mask", "cannot read the input");
    pii_model m;
    tok_tokenizer *tok = NULL;
    int have;
    if (load_model("mask", &o, &m, &tok, &have)) { ll_free(text); return 1; }
    pii_spans spans = {0};
    pii_masker mk;
    pii_masker_init(&mk);
    pii_buf out = {0};
    ll_status st = pii_scan(text, n, have ? &m : NULL, tok, &spans, NULL);
    if (!st) st = pii_mask_text(&mk, text, n, spans.v, spans.n, cats, &out);
    if (st) rc = cli_fail("mask", ll_errmsg());
    else {
        fwrite(out.s, 1, out.n, stdout);
        if (o.map_path && write_map(o.map_path, &mk)) rc = cli_fail("mask", "cannot write the --map file");
    }
    pii_buf_free(&out);
    pii_masker_free(&mk);
    pii_spans_free(&spans);
    if (have) { pii_model_free(&m); tok_free(tok); }
    ll_free(text);
    return rc;
}

int cmd_unmask(int argc, char **argv) {
    scan_opts o;
    int rc = parse_opts("unmask", argc, argv, &o);
    if (rc || !o.map_path) {
        fprintf(rc == 2 ? stdout : stderr, "usage: lilac unmask [FILE|-] --map MAP.json\n");
        return rc == 2 ? 0 : 2;
    }
    size_t mn;
    char *mt = cli_read_path(o.map_path, &mn);
    if (!mt) return cli_fail("unmask", "cannot read the --map file");
    cJSON *map = cJSON_ParseWithLength(mt, mn);
    ll_free(mt);
    if (!cJSON_IsObject(map)) {
        cJSON_Delete(map);
        return cli_fail("unmask", "the --map file is not a JSON object");
    }
    /* rebuild a masker from the saved mapping: each placeholder names its category and number */
    pii_masker mk;
    pii_masker_init(&mk);
    const cJSON *it;
    rc = 0;
    cJSON_ArrayForEach(it, map) {
        const char *ph = it->string, *val = cJSON_GetStringValue(it);
        char stem[40];
        int idx = 0;
        size_t pl = ph ? strlen(ph) : 0;
        const char *us = ph && pl > 2 ? strrchr(ph, '_') : NULL;
        if (!val || !us || ph[0] != '[' || ph[pl - 1] != ']' || (size_t)(us - ph - 1) >= sizeof(stem)) { rc = 1; break; }
        memcpy(stem, ph + 1, (size_t)(us - ph - 1));
        stem[us - ph - 1] = 0;
        idx = atoi(us + 1);
        int c = pii_category_from_name(stem);
        if (c < 0 || idx <= 0) { rc = 1; break; }
        /* placeholders are issued in order, so re-issuing in numeric order rebuilds the same ones */
        mk.next_index[c] = idx - 1;
        const pii_mask_entry *e;
        if (pii_masker_placeholder(&mk, c, val, strlen(val), &e) || strcmp(e->ph, ph)) { rc = 1; break; }
    }
    cJSON_Delete(map);
    if (rc) {
        pii_masker_free(&mk);
        return cli_fail("unmask", "the --map file holds an entry that is not a lilac placeholder");
    }
    size_t n;
    char *text = read_input(o.input, &n);
    if (!text) { pii_masker_free(&mk); return cli_fail("unmask", "cannot read the input"); }
    pii_buf out = {0};
    if (pii_unmask_text(&mk, text, n, &out)) rc = cli_fail("unmask", ll_errmsg());
    else fwrite(out.s, 1, out.n, stdout);
    pii_buf_free(&out);
    pii_masker_free(&mk);
    ll_free(text);
    return rc;
}
