/* test_tokenizer.c — the BPE tokenizer against the HF reference encodings (real Qwen3 tokenizer,
 * both split regexes), the Qwen3.5 added-token table and merges, round-trip properties on random and
 * invalid input, the streaming decoder at every split point, and the builder's error paths. */
/* testutil.h's path helpers trip GCC's truncation analysis when inlined with literal paths */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "testutil.h"

#include <cjson/cJSON.h>
#include <utf8proc.h>

#include "base/base.h"
#include "tokenizer/tokenizer.h"

static tok_tokenizer *g_qwen3, *g_qwen35re;
static char *g_json; /* decompressed qwen3 tokenizer.json */
static size_t g_json_len;

/* ------------------------------------------------------------------ helpers */

static char *gunzip(const char *path, size_t *len) {
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof(cmd), "gzip -dc '%s'", path);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 1 << 20, n = 0;
    char *b = malloc(cap);
    for (;;) {
        n += fread(b + n, 1, cap - n - 1, p);
        if (n < cap - 1) break;
        cap *= 2;
        b = realloc(b, cap);
    }
    int rc = pclose(p);
    if (rc != 0) { free(b); return NULL; }
    b[n] = 0;
    *len = n;
    return b;
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    b[*len] = 0;
    fclose(f);
    return b;
}

static const char *build_dir(void) {
    const char *b = getenv("BUILD");
    return b && *b ? b : "build";
}

/* The real Qwen3 tokenizer, decompressed into the build folder and loaded as a model directory
 * (tokenizer.json + tokenizer_config.json), once per process. */
static tok_tokenizer *qwen3(void) {
    if (g_qwen3) return g_qwen3;
    const char *gz = tu_shared_path("reference/tokenizers/qwen3/tokenizer.json.gz");
    const char *cfg = tu_shared_path("reference/tokenizers/qwen3/tokenizer_config.json");
    g_json = gunzip(gz, &g_json_len);
    if (!g_json) { print_message("cannot decompress %s\n", gz); skip(); }
    char dir[PATH_MAX], p[PATH_MAX + 64];
    snprintf(dir, sizeof(dir), "%s/testdata/qwen3", build_dir());
    snprintf(p, sizeof(p), "mkdir -p '%s'", dir);
    assert_int_equal(system(p), 0);
    snprintf(p, sizeof(p), "%s/tokenizer.json", dir);
    tu_write_file(p, g_json, g_json_len);
    size_t cl;
    char *ctext = slurp(cfg, &cl);
    assert_non_null(ctext);
    snprintf(p, sizeof(p), "%s/tokenizer_config.json", dir);
    tu_write_file(p, ctext, cl);
    free(ctext);
    double t0 = ll_time_sec();
    ll_status st = tok_load_file(dir, &g_qwen3);
    if (st != LL_OK) fail_msg("load: %s", ll_errmsg());
    print_message("# qwen3 tokenizer loaded in %.2f s\n", ll_time_sec() - t0);
    return g_qwen3;
}

/* The same vocabulary with the Qwen3.5/3.6 split regex substituted in the JSON. */
static tok_tokenizer *qwen35re(void) {
    if (g_qwen35re) return g_qwen35re;
    qwen3();
    cJSON *root = cJSON_ParseWithLength(g_json, g_json_len);
    assert_non_null(root);
    cJSON *pts = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "pre_tokenizer"), "pretokenizers"), *e;
    int replaced = 0;
    cJSON_ArrayForEach(e, pts) {
        if (strcmp(cJSON_GetObjectItem(e, "type")->valuestring, "Split")) continue;
        cJSON *pat = cJSON_GetObjectItem(e, "pattern");
        cJSON_ReplaceItemInObject(pat, "Regex", cJSON_CreateString(tok_pre_regex("qwen35")));
        replaced++;
    }
    assert_int_equal(replaced, 1);
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    ll_status st = tok_load_json(text, strlen(text), NULL, 0, "qwen35re", &g_qwen35re);
    free(text);
    if (st != LL_OK) fail_msg("load: %s", ll_errmsg());
    return g_qwen35re;
}

static void check_fixture(tok_tokenizer *t, const char *rel) {
    size_t n;
    char *text = slurp(tu_shared_path(rel), &n);
    assert_non_null(text);
    cJSON *root = cJSON_Parse(text);
    free(text);
    assert_non_null(root);
    cJSON *cases = cJSON_GetObjectItem(root, "cases"), *c;
    int count = 0;
    tok_ids ids = {0};
    tok_str s = {0};
    cJSON_ArrayForEach(c, cases) {
        const char *txt = cJSON_GetObjectItem(c, "text")->valuestring;
        cJSON *want = cJSON_GetObjectItem(c, "ids"), *toks = cJSON_GetObjectItem(c, "tokens");
        size_t tlen = strlen(txt);
        char nulbuf[4096];
        /* cJSON strings stop at U+0000: rebuild such a text from its reference token bytes
         * (the tokens of a NUL are byte-level, never NUL themselves) */
        tok_str whole = {0};
        int k = 0;
        cJSON *tk;
        cJSON_ArrayForEach(tk, toks) {
            size_t bl;
            const char *b = tok_bytes(t, (int32_t)cJSON_GetArrayItem(want, k++)->valuedouble, &bl);
            assert_non_null(b);
            tok_str_append(&whole, b, bl);
        }
        if (whole.n > tlen && memchr(whole.s, 0, whole.n) && whole.n < sizeof(nulbuf)) {
            memcpy(nulbuf, whole.s, whole.n);
            txt = nulbuf;
            tlen = whole.n;
        }
        tok_str_free(&whole);
        ids.n = 0;
        assert_int_equal(tok_encode(t, txt, tlen, 0, &ids), LL_OK);
        if ((int)ids.n != cJSON_GetArraySize(want)) fail_msg("case %d '%s': %zu ids, want %d", count, txt, ids.n, cJSON_GetArraySize(want));
        for (size_t i = 0; i < ids.n; i++) {
            assert_int_equal(ids.ids[i], (int32_t)cJSON_GetArrayItem(want, (int)i)->valuedouble);
            assert_string_equal(tok_piece(t, ids.ids[i]), cJSON_GetArrayItem(toks, (int)i)->valuestring);
        }
        s.n = 0;
        assert_int_equal(tok_decode(t, ids.ids, ids.n, 0, &s), LL_OK);
        if (txt == nulbuf) assert_memory_equal(s.s, nulbuf, tlen);
        else assert_string_equal(s.s, cJSON_GetObjectItem(c, "decoded")->valuestring);
        count++;
    }
    assert_true(count >= 50);
    tok_ids_free(&ids);
    tok_str_free(&s);
    cJSON_Delete(root);
}

/* ------------------------------------------------------------------ fixtures */

static void test_fixture_qwen3(void **state) {
    (void)state;
    check_fixture(qwen3(), "fixtures/tokenizer/qwen3.public.json");
}

static void test_fixture_qwen35re(void **state) {
    (void)state;
    check_fixture(qwen35re(), "fixtures/tokenizer/qwen35re.public.json");
}

/* The two regexes differ exactly on combining marks after letters. */
static void test_regexes_differ_on_marks(void **state) {
    (void)state;
    /* Thai vowel marks are \p{Mn}: the Qwen3.5 regex keeps "กิน" one piece (one token), Qwen2's
     * splits it; the ids were checked with HF tokenizers */
    const char *txt = "\xE0\xB8\x81\xE0\xB8\xB4\xE0\xB8\x99"; /* กิน */
    tok_ids a = {0}, b = {0};
    assert_int_equal(tok_encode(qwen3(), txt, strlen(txt), 0, &a), LL_OK);
    assert_int_equal(tok_encode(qwen35re(), txt, strlen(txt), 0, &b), LL_OK);
    assert_int_equal(a.n, 2);
    assert_int_equal(a.ids[0], 25200);
    assert_int_equal(a.ids[1], 85045);
    assert_int_equal(b.n, 1);
    assert_int_equal(b.ids[0], 129454);
    tok_ids_free(&a);
    tok_ids_free(&b);
}

/* ------------------------------------------------------------------ added tokens */

static void encode_str(tok_tokenizer *t, const char *s, unsigned flags, tok_ids *ids) {
    ids->n = 0;
    assert_int_equal(tok_encode(t, s, strlen(s), flags, ids), LL_OK);
}

static int has_id(const tok_ids *ids, int32_t id) {
    for (size_t i = 0; i < ids->n; i++)
        if (ids->ids[i] == id) return 1;
    return 0;
}

static void test_added_tokens(void **state) {
    (void)state;
    tok_tokenizer *t = qwen3();
    tok_ids ids = {0};
    tok_str s = {0};
    int32_t im_start = tok_find(t, "<|im_start|>"), think = tok_find(t, "<think>");
    assert_int_equal(im_start, 151644);
    assert_int_equal(think, 151667);
    assert_int_equal(tok_type(t, im_start), TOK_TYPE_CONTROL);
    assert_int_equal(tok_type(t, think), TOK_TYPE_USER);
    assert_int_equal(tok_eos(t), 151645); /* <|im_end|> from tokenizer_config.json */
    assert_int_equal(tok_pad(t), 151643);
    assert_non_null(tok_chat_template(t));

    const char *txt = "x<|im_start|>user<think>hi</think><|im_end";
    encode_str(t, txt, 0, &ids);
    assert_true(has_id(&ids, im_start) && has_id(&ids, think) && has_id(&ids, 151668));
    assert_false(has_id(&ids, 151645)); /* "<|im_end" is cut short: plain text */

    /* special-token text as plain text: <|im_start|> is split into ordinary tokens, <think> stays */
    encode_str(t, txt, TOK_ENC_SPECIAL_AS_TEXT, &ids);
    assert_false(has_id(&ids, im_start));
    assert_true(has_id(&ids, think));
    for (size_t i = 0; i < ids.n; i++) assert_int_not_equal(tok_type(t, ids.ids[i]), TOK_TYPE_CONTROL);
    s.n = 0;
    assert_int_equal(tok_decode(t, ids.ids, ids.n, 0, &s), LL_OK);
    assert_string_equal(s.s, txt);

    encode_str(t, txt, TOK_ENC_ADDED_AS_TEXT, &ids);
    assert_false(has_id(&ids, im_start) || has_id(&ids, think));
    s.n = 0;
    assert_int_equal(tok_decode(t, ids.ids, ids.n, 0, &s), LL_OK);
    assert_string_equal(s.s, txt);

    /* decode skipping special tokens keeps the non-special added ones */
    encode_str(t, "<|im_start|>assistant\n<think>\nok</think><|im_end|>", 0, &ids);
    s.n = 0;
    assert_int_equal(tok_decode(t, ids.ids, ids.n, TOK_DEC_SKIP_SPECIAL, &s), LL_OK);
    assert_string_equal(s.s, "assistant\n<think>\nok</think>");
    int32_t bad = 999999;
    assert_int_equal(tok_decode(t, &bad, 1, 0, &s), LL_ERR_INVALID);
    assert_non_null(strstr(ll_errmsg(), "999999"));
    tok_ids_free(&ids);
    tok_str_free(&s);
}

/* ------------------------------------------------------------------ properties */

static uint64_t g_rng = 0x1234567;
static uint32_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 11);
}

static size_t put_cp(char *o, uint32_t cp) { return (size_t)utf8proc_encode_char((utf8proc_int32_t)cp, (utf8proc_uint8_t *)o); }

/* Random text over scripts and the awkward corners: combining marks (NFC changes), Hangul jamo
 * (compose), whitespace of every kind, emoji with ZWJ and modifiers, digits, control characters. */
static size_t random_text(char *o, size_t max_cps) {
    static const uint32_t ranges[][2] = {
        {0x20, 0x7E}, {0x20, 0x7E}, {0x20, 0x7E}, {0x61, 0x7A}, {0x09, 0x0D}, {0x300, 0x36F}, {0xC0, 0x17F},
        {0x1100, 0x1112}, {0x1161, 0x1175}, {0xAC00, 0xD7A3}, {0x4E00, 0x9FFF}, {0x3040, 0x30FF}, {0x0600, 0x06FF},
        {0x0900, 0x097F}, {0x1F300, 0x1F6FF}, {0x1F3FB, 0x1F3FF}, {0x200B, 0x200D}, {0x2000, 0x200A}, {0x3000, 0x3000},
        {0xA0, 0xA0}, {0x85, 0x85}, {0x2028, 0x2029}, {0x30, 0x39}, {0x660, 0x669}, {0x1, 0x1F}, {0xFFF0, 0xFFFD},
        {0x10000, 0x10FFFF}, {0xE000, 0xF8FF}, {0x0370, 0x03FF}, {0x0400, 0x04FF}, {0x1E00, 0x1EFF}, {0x27, 0x27},
    };
    size_t n = 0, k = rnd() % max_cps;
    for (size_t i = 0; i < k; i++) {
        const uint32_t *r = ranges[rnd() % LL_ARRAY_LEN(ranges)];
        uint32_t cp = r[0] + rnd() % (r[1] - r[0] + 1);
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0x41;
        n += put_cp(o + n, cp);
    }
    o[n] = 0;
    return n;
}

static void test_roundtrip_random_unicode(void **state) {
    (void)state;
    tok_tokenizer *ts[2] = {qwen3(), qwen35re()};
    char *text = malloc(4 * 400 + 8);
    tok_ids ids = {0};
    tok_str s = {0};
    for (int it = 0; it < 3000; it++) {
        size_t n = random_text(text, 400);
        utf8proc_uint8_t *nfc = utf8proc_NFC((const utf8proc_uint8_t *)text);
        assert_non_null(nfc);
        tok_tokenizer *t = ts[it & 1];
        ids.n = 0;
        s.n = 0;
        assert_int_equal(tok_encode(t, text, n, 0, &ids), LL_OK);
        assert_int_equal(tok_decode(t, ids.ids, ids.n, 0, &s), LL_OK);
        if (strcmp(s.s ? s.s : "", (const char *)nfc)) {
            FILE *f = fopen("/tmp/lilac-roundtrip-fail.txt", "wb");
            if (f) { fwrite(text, 1, n, f); fclose(f); }
            fail_msg("round trip differs at iteration %d (input in /tmp/lilac-roundtrip-fail.txt)", it);
        }
        free(nfc);
    }
    free(text);
    tok_ids_free(&ids);
    tok_str_free(&s);
}

/* Invalid UTF-8: valid runs are NFC'd, invalid bytes come back exactly (TOK_DEC_RAW); the default
 * decode replaces maximal invalid subparts with U+FFFD. */
static void test_invalid_utf8(void **state) {
    (void)state;
    tok_tokenizer *t = qwen3();
    static const char *const bad[] = {"\x80", "\xFF", "\xC0\xAF", "\xE4\xBD", "\xED\xA0\x80", "\xE0\x80\x80", "\xF0\x9F\x98",
                                      "\xF5\x80", "\xC3", "\xF4\x90\x80\x80"};
    char *text = malloc(8192);
    tok_ids ids = {0};
    tok_str raw = {0}, lossy = {0};
    for (int it = 0; it < 2000; it++) {
        /* segments of random valid text and invalid bytes; expected raw = NFC(valid) + bytes */
        size_t n = 0, en = 0;
        char expect[8192];
        int segs = 1 + (int)(rnd() % 6);
        for (int k = 0; k < segs; k++) {
            if (rnd() & 1) {
                char seg[2048];
                random_text(seg, 40);
                /* a valid run must not start with a continuation that could glue to a dangling lead */
                utf8proc_uint8_t *nfc = utf8proc_NFC((const utf8proc_uint8_t *)seg);
                size_t l = strlen(seg);
                memcpy(text + n, seg, l);
                n += l;
                l = strlen((const char *)nfc);
                memcpy(expect + en, nfc, l);
                en += l;
                free(nfc);
            } else {
                const char *b = bad[rnd() % LL_ARRAY_LEN(bad)];
                size_t l = strlen(b);
                memcpy(text + n, b, l);
                n += l;
                memcpy(expect + en, b, l);
                en += l;
            }
        }
        ids.n = raw.n = lossy.n = 0;
        assert_int_equal(tok_encode(t, text, n, 0, &ids), LL_OK);
        assert_int_equal(tok_decode(t, ids.ids, ids.n, TOK_DEC_RAW, &raw), LL_OK);
        assert_int_equal(tok_decode(t, ids.ids, ids.n, 0, &lossy), LL_OK);
        /* expectation: NFC over each maximal valid run of the input (utf8proc decides validity) */
        {
            size_t i = 0, e2 = 0;
            while (i < n) {
                size_t a = i;
                utf8proc_int32_t cp;
                utf8proc_ssize_t l;
                while (i < n && (l = utf8proc_iterate((const utf8proc_uint8_t *)text + i, (utf8proc_ssize_t)(n - i), &cp)) > 0) i += (size_t)l;
                if (i > a) {
                    char *run = strndup(text + a, i - a);
                    utf8proc_uint8_t *nf = utf8proc_NFC((const utf8proc_uint8_t *)run);
                    size_t l2 = strlen((const char *)nf);
                    memcpy(expect + e2, nf, l2);
                    e2 += l2;
                    free(nf);
                    free(run);
                }
                while (i < n && utf8proc_iterate((const utf8proc_uint8_t *)text + i, (utf8proc_ssize_t)(n - i), &cp) <= 0) expect[e2++] = text[i++];
            }
            en = e2;
        }
        assert_int_equal(raw.n, en);
        assert_memory_equal(raw.s, expect, en);
        /* the lossy decode is valid UTF-8 */
        for (size_t i = 0; i < lossy.n;) {
            utf8proc_int32_t cp;
            utf8proc_ssize_t l = utf8proc_iterate((const utf8proc_uint8_t *)lossy.s + i, (utf8proc_ssize_t)(lossy.n - i), &cp);
            assert_true(l > 0);
            i += (size_t)l;
        }
    }
    /* pinned replacement behaviour (same as Python's errors="replace" and HF's decode) */
    static const struct { const char *in, *out; } pins[] = {
        {"\xE4\xBD" "a", "\xEF\xBF\xBD" "a"},
        {"\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xF0\x9F\x98" "A", "\xEF\xBF\xBD" "A"},
        {"\xC0\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"ok\xFF", "ok\xEF\xBF\xBD"},
    };
    for (size_t i = 0; i < LL_ARRAY_LEN(pins); i++) {
        ids.n = lossy.n = 0;
        assert_int_equal(tok_encode(t, pins[i].in, strlen(pins[i].in), 0, &ids), LL_OK);
        assert_int_equal(tok_decode(t, ids.ids, ids.n, 0, &lossy), LL_OK);
        assert_string_equal(lossy.s, pins[i].out);
    }
    free(text);
    tok_ids_free(&ids);
    tok_str_free(&raw);
    tok_str_free(&lossy);
}

/* ------------------------------------------------------------------ streaming */

static void stream_all(tok_tokenizer *t, const int32_t *ids, size_t n, unsigned flags, tok_str *out) {
    tok_stream st;
    tok_stream_init(&st, t, flags);
    for (size_t i = 0; i < n; i++) {
        size_t before = out->n;
        assert_int_equal(tok_stream_push(&st, ids[i], out), LL_OK);
        /* every push leaves whole, valid UTF-8 */
        for (size_t k = before; k < out->n;) {
            utf8proc_int32_t cp;
            utf8proc_ssize_t l = utf8proc_iterate((const utf8proc_uint8_t *)out->s + k, (utf8proc_ssize_t)(out->n - k), &cp);
            assert_true(l > 0);
            k += (size_t)l;
        }
    }
    assert_int_equal(tok_stream_flush(&st, out), LL_OK);
}

static int32_t byte_token(tok_tokenizer *t, uint8_t b) {
    tok_ids ids = {0};
    char c = (char)b;
    assert_int_equal(tok_encode(t, &c, 1, 0, &ids), LL_OK);
    assert_int_equal(ids.n, 1);
    int32_t id = ids.ids[0];
    tok_ids_free(&ids);
    return id;
}

static void test_stream_split_multibyte(void **state) {
    (void)state;
    tok_tokenizer *t = qwen3();
    const uint8_t ni[] = {0xE4, 0xBD, 0xA0}; /* 你 */
    tok_stream st;
    tok_str out = {0};
    tok_stream_init(&st, t, 0);
    assert_int_equal(tok_stream_push(&st, byte_token(t, ni[0]), &out), LL_OK);
    assert_int_equal(out.n, 0);
    assert_int_equal(tok_stream_push(&st, byte_token(t, ni[1]), &out), LL_OK);
    assert_int_equal(out.n, 0);
    assert_int_equal(tok_stream_push(&st, byte_token(t, ni[2]), &out), LL_OK);
    assert_string_equal(out.s, "\xE4\xBD\xA0");
    /* 😀 = F0 9F 98 80 in four pushes, then a broken sequence completed by a plain letter */
    const uint8_t em[] = {0xF0, 0x9F, 0x98, 0x80};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(tok_stream_push(&st, byte_token(t, em[i]), &out), LL_OK);
        assert_int_equal(out.n, i < 3 ? 3u : 7u);
    }
    tok_ids a = {0};
    encode_str(t, "a", 0, &a);
    assert_int_equal(tok_stream_push(&st, byte_token(t, 0xE4), &out), LL_OK);
    assert_int_equal(tok_stream_push(&st, a.ids[0], &out), LL_OK);
    assert_string_equal(out.s + 7, "\xEF\xBF\xBD" "a");
    /* a dangling lead at the end becomes one U+FFFD at flush */
    assert_int_equal(tok_stream_push(&st, byte_token(t, 0xF0), &out), LL_OK);
    assert_int_equal(tok_stream_push(&st, byte_token(t, 0x9F), &out), LL_OK);
    size_t before = out.n;
    assert_int_equal(tok_stream_flush(&st, &out), LL_OK);
    assert_string_equal(out.s + before, "\xEF\xBF\xBD");
    assert_int_equal(tok_stream_push(&st, -1, &out), LL_ERR_INVALID);
    tok_ids_free(&a);
    tok_str_free(&out);
}

/* The stream equals decode(all ids) for random id sequences rich in partial characters. */
static void test_stream_equals_decode(void **state) {
    (void)state;
    tok_tokenizer *t = qwen3();
    int32_t ids[200];
    tok_str a = {0}, b = {0};
    int32_t special = tok_find(t, "<|im_end|>");
    for (int it = 0; it < 3000; it++) {
        size_t n = 1 + rnd() % 60;
        for (size_t i = 0; i < n; i++) {
            uint32_t r = rnd() % 10;
            if (r < 5) ids[i] = byte_token(t, (uint8_t)(0x80 + rnd() % 0x78)); /* lead/continuation bytes */
            else if (r < 9) ids[i] = (int32_t)(rnd() % 151643);               /* any ordinary token */
            else ids[i] = special;
        }
        for (unsigned flags = 0; flags < 2; flags++) {
            a.n = b.n = 0;
            assert_int_equal(tok_decode(t, ids, n, flags ? TOK_DEC_SKIP_SPECIAL : 0, &a), LL_OK);
            stream_all(t, ids, n, flags ? TOK_DEC_SKIP_SPECIAL : 0, &b);
            assert_int_equal(a.n, b.n);
            assert_memory_equal(a.s, b.s, a.n);
        }
    }
    tok_str_free(&a);
    tok_str_free(&b);
}

/* ------------------------------------------------------------------ long inputs */

static void test_long_inputs_fast(void **state) {
    (void)state;
    tok_tokenizer *t = qwen3();
    size_t n = 1 << 20;
    char *text = malloc(n + 1);
    tok_ids ids = {0};
    tok_str s = {0};
    const char fills[] = {'a', ' ', '\n', '7'};
    for (size_t f = 0; f < sizeof(fills); f++) {
        memset(text, fills[f], n);
        ids.n = s.n = 0;
        double t0 = ll_time_sec();
        assert_int_equal(tok_encode(t, text, n, 0, &ids), LL_OK);
        double dt = ll_time_sec() - t0;
        assert_true(dt < 5.0); /* quadratic BPE takes hours here */
        assert_int_equal(tok_decode(t, ids.ids, ids.n, 0, &s), LL_OK);
        assert_int_equal(s.n, n);
        assert_memory_equal(s.s, text, n);
        print_message("# 1 MiB of '%s': %zu tokens in %.3f s\n", fills[f] == '\n' ? "\\n" : (char[]){fills[f], 0}, ids.n, dt);
    }
    free(text);
    tok_ids_free(&ids);
    tok_str_free(&s);
}

/* ------------------------------------------------------------------ Qwen3.5 files */

/* The published Qwen3.5/3.6 merges.txt and tokenizer_config.json (no vocab.json is available): the
 * merges parse, and a "slow" directory (vocab.json + merges.txt + config) built on them loads with
 * the 33 added tokens at ids 248044-248076 and the split regex from the config. */
static void test_qwen35_files(void **state) {
    (void)state;
    size_t ml, cl;
    char *merges_txt = gunzip(tu_shared_path("reference/tokenizers/qwen3.5/merges.txt.gz"), &ml);
    char *cfg = slurp(tu_shared_path("reference/tokenizers/qwen3.5/tokenizer_config.json"), &cl);
    assert_non_null(merges_txt);
    assert_non_null(cfg);
    char **merges, *storage;
    int32_t nm;
    assert_int_equal(tok_parse_merges_txt(merges_txt, ml, &merges, &nm, &storage), LL_OK);
    assert_int_equal(nm, 247587);
    assert_string_equal(merges[0], "\xC4\xA0 \xC4\xA0"); /* "Ġ Ġ" */

    /* a stand-in vocabulary: the 256 byte symbols, then every merge result in merge order */
    uint16_t byte_cp[256];
    {
        int k = 0;
        for (int b = 0; b < 256; b++) {
            int keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            byte_cp[b] = (uint16_t)(keep ? b : 256 + k++);
        }
    }
    cJSON *vocab = cJSON_CreateObject();
    int32_t id = 0;
    for (int b = 0; b < 256; b++) {
        char s[4];
        s[put_cp(s, byte_cp[b])] = 0;
        cJSON_AddNumberToObject(vocab, s, id++);
    }
    /* dedupe merge results with a small hash set (cJSON lookups are linear) */
    size_t cap = 1 << 20;
    char **set = calloc(cap, sizeof(char *));
    for (int b = 0; b < 256; b++) {
        char s[4];
        s[put_cp(s, byte_cp[b])] = 0;
        size_t h = 0;
        for (const char *q = s; *q; q++) h = h * 131 + (unsigned char)*q;
        for (h &= cap - 1; set[h]; h = (h + 1) & (cap - 1)) {}
        set[h] = strdup(s);
    }
    for (int32_t i = 0; i < nm; i++) {
        const char *sp = strchr(merges[i], ' ');
        char joined[1024];
        snprintf(joined, sizeof(joined), "%.*s%s", (int)(sp - merges[i]), merges[i], sp + 1);
        size_t h = 0;
        for (const char *q = joined; *q; q++) h = h * 131 + (unsigned char)*q;
        int dup = 0;
        for (h &= cap - 1; set[h]; h = (h + 1) & (cap - 1))
            if (!strcmp(set[h], joined)) { dup = 1; break; }
        if (dup) continue;
        set[h] = strdup(joined);
        cJSON_AddNumberToObject(vocab, joined, id++);
    }
    for (size_t i = 0; i < cap; i++) free(set[i]);
    free(set);
    assert_true(id < 248044);
    char *vtext = cJSON_PrintUnformatted(vocab);
    cJSON_Delete(vocab);
    const char *dir = tu_tmpdir();
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/vocab.json", dir);
    tu_write_file(p, vtext, strlen(vtext));
    snprintf(p, sizeof(p), "%s/merges.txt", dir);
    tu_write_file(p, merges_txt, ml);
    snprintf(p, sizeof(p), "%s/tokenizer_config.json", dir);
    tu_write_file(p, cfg, cl);
    free(vtext);

    tok_tokenizer *t;
    if (tok_load_file(dir, &t) != LL_OK) fail_msg("load: %s", ll_errmsg());
    assert_int_equal(tok_n_vocab(t), 248077);
    int32_t n_control = 0, n_user = 0;
    for (int32_t i = 248044; i <= 248076; i++) {
        n_control += tok_type(t, i) == TOK_TYPE_CONTROL;
        n_user += tok_type(t, i) == TOK_TYPE_USER;
    }
    assert_int_equal(n_control + n_user, 33);
    assert_int_equal(n_user, 12); /* tool_call, fim, repo/file, tool_response, think */
    assert_int_equal(tok_find(t, "<|im_start|>"), 248045);
    assert_int_equal(tok_find(t, "<think>"), 248068);
    assert_int_equal(tok_find(t, "<|audio_pad|>"), 248076);
    assert_int_equal(tok_eos(t), 248046);
    assert_int_equal(tok_pad(t), 248044);
    assert_non_null(tok_chat_template(t));

    tok_ids ids = {0};
    tok_str s = {0};
    const char *txt = "<|im_start|>user\nGrüße, Ünïcödé à̖ naïve! 你好 <think>x</think><|im_end|>";
    assert_int_equal(tok_encode(t, txt, strlen(txt), 0, &ids), LL_OK);
    assert_int_equal(ids.ids[0], 248045);
    assert_int_equal(ids.ids[ids.n - 1], 248046);
    assert_true(has_id(&ids, 248068) && has_id(&ids, 248069));
    assert_int_equal(tok_decode(t, ids.ids, ids.n, 0, &s), LL_OK);
    utf8proc_uint8_t *nfc = utf8proc_NFC((const utf8proc_uint8_t *)txt);
    assert_string_equal(s.s, (const char *)nfc);
    free(nfc);
    tok_ids_free(&ids);
    tok_str_free(&s);
    tok_free(t);
    snprintf(p, sizeof(p), "rm -rf '%s'", dir);
    assert_int_equal(system(p), 0);
    ll_free(merges);
    ll_free(storage);
    free(merges_txt);
    free(cfg);
}

/* ------------------------------------------------------------------ small built tokenizers */

/* 256 byte tokens (byte-level spelled) + merges, built from arrays as a GGUF loader would. */
typedef struct mini {
    char *tok[300];
    int32_t types[300];
    int n;
} mini;

static void mini_init(mini *m) {
    memset(m, 0, sizeof(*m));
    int k = 0;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        char s[4];
        s[put_cp(s, keep ? (uint32_t)b : (uint32_t)(256 + k++))] = 0;
        m->tok[m->n] = strdup(s);
        m->types[m->n++] = TOK_TYPE_NORMAL;
    }
}
static void mini_add(mini *m, const char *s, int type) {
    m->tok[m->n] = strdup(s);
    m->types[m->n++] = type;
}
static void mini_free(mini *m) {
    for (int i = 0; i < m->n; i++) free(m->tok[i]);
}

static void test_build_from_arrays(void **state) {
    (void)state;
    mini m;
    mini_init(&m);
    mini_add(&m, "ab", TOK_TYPE_NORMAL);    /* 256 */
    mini_add(&m, "abc", TOK_TYPE_NORMAL);   /* 257 */
    mini_add(&m, "bc", TOK_TYPE_NORMAL);    /* 258 */
    mini_add(&m, "<x>", TOK_TYPE_CONTROL);  /* 259 */
    mini_add(&m, "<x>y", TOK_TYPE_USER);    /* 260: longer match wins */
    const char *merges[] = {"b c", "a b", "ab c"};
    tok_spec sp = {.tokens = (const char *const *)m.tok, .types = m.types, .n_tokens = m.n, .merges = merges,
                   .n_merges = 3, .split_regex = tok_pre_regex("qwen2"), .nfc = 1};
    tok_tokenizer *t;
    assert_int_equal(tok_build(&sp, &t), LL_OK);
    tok_ids ids = {0};
    /* "bc" has rank 0, so "abc" → a + bc (no "ab c" path) */
    encode_str(t, "abc", 0, &ids);
    assert_int_equal(ids.n, 2);
    assert_int_equal(ids.ids[0], 'a'); /* byte tokens are ids 0..255 in byte order here */
    assert_int_equal(ids.ids[1], 258);
    encode_str(t, "z<x>y<x>", 0, &ids);
    assert_int_equal(ids.n, 3);
    assert_int_equal(ids.ids[1], 260);
    assert_int_equal(ids.ids[2], 259);
    encode_str(t, "<x>y", TOK_ENC_ADDED_AS_TEXT, &ids);
    assert_int_equal(ids.n, 4);
    tok_free(t);

    /* error paths name what is wrong */
    const char *bad_merge[] = {"a q"};
    sp.merges = bad_merge;
    sp.n_merges = 1;
    assert_int_equal(tok_build(&sp, &t), LL_ERR_FORMAT); /* "aq" is not in the vocabulary */
    assert_non_null(strstr(ll_errmsg(), "merge 0"));
    const char *bad_merge2[] = {"x zz"};
    sp.merges = bad_merge2;
    assert_int_equal(tok_build(&sp, &t), LL_ERR_FORMAT);
    assert_non_null(strstr(ll_errmsg(), "merge 0"));
    const char *bad_merge3[] = {"nospace"};
    sp.merges = bad_merge3;
    assert_int_equal(tok_build(&sp, &t), LL_ERR_FORMAT);
    sp.n_merges = 0;
    sp.split_regex = "(unclosed";
    assert_int_equal(tok_build(&sp, &t), LL_ERR_FORMAT);
    assert_non_null(strstr(ll_errmsg(), "regex"));
    sp.split_regex = tok_pre_regex("qwen2");
    free(m.tok['q']);
    m.tok['q'] = NULL; /* no token for byte 'q' */
    assert_int_equal(tok_build(&sp, &t), LL_ERR_FORMAT);
    assert_non_null(strstr(ll_errmsg(), "0x71"));
    assert_null(tok_pre_regex("llama3"));
    tok_ids_free(&ids);
    mini_free(&m);
}

static void test_bad_json(void **state) {
    (void)state;
    tok_tokenizer *t;
    static const char *const docs[] = {
        "", "{", "[]", "{\"model\": 3}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"Whitespace\"}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -1}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"use_regex\": true}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"use_regex\": true}}",
        "{\"normalizer\": {\"type\": \"NFKC\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}",
    };
    for (size_t i = 0; i < LL_ARRAY_LEN(docs); i++) {
        ll_status st = tok_load_json(docs[i], strlen(docs[i]), NULL, 0, "t.json", &t);
        assert_int_not_equal(st, LL_OK);
        assert_null(t);
        assert_non_null(strstr(ll_errmsg(), "t.json"));
    }
    assert_int_equal(tok_load_file("/nonexistent/tokenizer.json", &t), LL_ERR_IO);
    assert_int_equal(tok_load_file("/tmp/model.gguf", &t), LL_ERR_UNSUPPORTED);
}

static int teardown(void **state) {
    (void)state;
    tok_free(g_qwen3);
    tok_free(g_qwen35re);
    free(g_json);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_qwen3),
        cmocka_unit_test(test_fixture_qwen35re),
        cmocka_unit_test(test_regexes_differ_on_marks),
        cmocka_unit_test(test_added_tokens),
        cmocka_unit_test(test_roundtrip_random_unicode),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_stream_split_multibyte),
        cmocka_unit_test(test_stream_equals_decode),
        cmocka_unit_test(test_long_inputs_fast),
        cmocka_unit_test(test_qwen35_files),
        cmocka_unit_test(test_build_from_arrays),
        cmocka_unit_test(test_bad_json),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
