/*
 * test_gateway.c — the privacy gateway's pure parts (server/gateway.c): scanning every text of a
 * chat request, the client's decision field, masking in place, restoring placeholders in whole
 * answers and in SSE streams cut at every byte, the skip refusal, audit lines and SHA-256. The
 * forwarding itself is covered end to end by tests/py/test_gateway.py.
 */
#include "testutil.h"

#include "server/gateway.h"

#define EMAIL "marta.kowalska@gmail.com"
#define SECRET "ghp_4fT9kLm2Qx8Rz1Vb7Nc3Hd6Jw0Ys5Pa2Ek9U"

static const char *REQ =
    "{\"model\":\"m\",\"privacy_decision\":\"local\",\"messages\":["
    "{\"role\":\"system\",\"content\":\"user is " EMAIL "\"},"
    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"},{\"type\":\"text\",\"text\":\"mail " EMAIL
    " key " SECRET "\"}]},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\",\"function\":"
    "{\"name\":\"f\",\"arguments\":\"{\\\"to\\\":\\\"" EMAIL "\\\"}\"}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"c\",\"content\":\"sent to " EMAIL "\"}]}";

static void test_scan_messages(void **state) {
    (void)state;
    pii_policy p;
    pii_policy_default(&p);
    cJSON *doc = cJSON_Parse(REQ);
    assert_non_null(doc);
    ll_gw_scan sc;
    ll_api_error e;
    assert_int_equal(ll_gw_scan_messages(doc, &p, NULL, &sc, &e), 0);
    assert_int_equal(sc.n, 5); /* system, two parts, tool call arguments, tool result */
    assert_string_equal(sc.v[2].path, "messages[1].content[1].text");
    assert_string_equal(sc.v[3].path, "messages[2].tool_calls[0].function.arguments");
    assert_int_equal(sc.v[4].message, 3);
    assert_int_equal(sc.decision.counts[PII_EMAIL], 4);
    assert_int_equal(sc.decision.counts[PII_SECRET], 1);
    assert_int_equal(sc.decision.action, PII_ACT_LOCAL); /* the default keeps secrets local */
    assert_int_equal(sc.decision.mask_categories, 1u << PII_EMAIL);
    ll_strbuf b = {0};
    ll_gw_scan_json(&sc, &p, &b);
    cJSON *j = cJSON_Parse(b.data);
    assert_non_null(j);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "spans")), 5);
    cJSON *d = cJSON_GetObjectItem(j, "decision");
    assert_string_equal(cJSON_GetObjectItem(d, "action")->valuestring, "local");
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "categories"), "private_email")->valueint, 4);
    cJSON *s0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "spans"), 0);
    assert_int_equal(cJSON_GetObjectItem(s0, "start")->valueint, 8);
    assert_int_equal(cJSON_GetObjectItem(s0, "end")->valueint, 8 + (int)strlen(EMAIL));
    assert_null(strstr(b.data, EMAIL)); /* values never echoed */
    cJSON_Delete(j);
    ll_strbuf_free(&b);
    ll_gw_scan_free(&sc);
    /* malformed */
    cJSON_Delete(doc);
    const char *bad[] = {"{}", "{\"messages\":{}}", "{\"messages\":[1]}", "[]"};
    for (size_t i = 0; i < LL_ARRAY_LEN(bad); i++) {
        doc = cJSON_Parse(bad[i]);
        assert_int_equal(ll_gw_scan_messages(doc, &p, NULL, &sc, &e), -1);
        assert_int_equal(e.status, 400);
        ll_gw_scan_free(&sc);
        cJSON_Delete(doc);
    }
}

static void test_min_score_and_clean(void **state) {
    (void)state;
    pii_policy p;
    pii_policy_default(&p);
    cJSON *doc = cJSON_Parse("{\"messages\":[{\"role\":\"user\",\"content\":\"version 1.2.3, see https://example.com\"}]}");
    ll_gw_scan sc;
    ll_api_error e;
    assert_int_equal(ll_gw_scan_messages(doc, &p, NULL, &sc, &e), 0);
    assert_int_equal(sc.decision.action, PII_ACT_UPSTREAM); /* nothing found: forwarded as is */
    assert_int_equal(sc.decision.categories, 0);
    ll_gw_scan_free(&sc);
    cJSON_Delete(doc);
    /* a min_score above every finding ignores them all */
    p.min_score = 1.01f;
    doc = cJSON_Parse("{\"messages\":[{\"role\":\"user\",\"content\":\"" EMAIL "\"}]}");
    assert_int_equal(ll_gw_scan_messages(doc, &p, NULL, &sc, &e), 0);
    assert_int_equal(sc.v[0].spans.n, 0);
    assert_int_equal(sc.decision.action, PII_ACT_UPSTREAM);
    ll_gw_scan_free(&sc);
    cJSON_Delete(doc);
}

static void test_take_decision(void **state) {
    (void)state;
    ll_api_error e;
    int act;
    cJSON *doc = cJSON_Parse(REQ);
    assert_int_equal(ll_gw_take_decision(doc, &act, &e), 0);
    assert_int_equal(act, PII_ACT_LOCAL);
    assert_null(cJSON_GetObjectItem(doc, "privacy_decision")); /* removed: never forwarded */
    assert_int_equal(ll_gw_take_decision(doc, &act, &e), 0);
    assert_int_equal(act, -1);
    cJSON_Delete(doc);
    const char *bad[] = {"{\"privacy_decision\":\"mask\"}", "{\"privacy_decision\":\"ask\"}", "{\"privacy_decision\":1}"};
    for (size_t i = 0; i < LL_ARRAY_LEN(bad); i++) {
        doc = cJSON_Parse(bad[i]);
        assert_int_equal(ll_gw_take_decision(doc, &act, &e), -1);
        assert_string_equal(e.param, "privacy_decision");
        cJSON_Delete(doc);
    }
    doc = cJSON_Parse("{\"privacy_decision\":null}");
    assert_int_equal(ll_gw_take_decision(doc, &act, &e), 0);
    assert_int_equal(act, -1);
    cJSON_Delete(doc);
}

static void test_mask_and_audit(void **state) {
    (void)state;
    pii_policy p;
    pii_policy_default(&p);
    p.action[PII_SECRET] = PII_ACT_UPSTREAM; /* so that one value leaves raw and is hashed */
    cJSON *doc = cJSON_Parse(REQ);
    ll_gw_scan sc;
    ll_api_error e;
    assert_int_equal(ll_gw_scan_messages(doc, &p, NULL, &sc, &e), 0);
    assert_int_equal(sc.decision.action, PII_ACT_MASK);
    pii_masker m;
    pii_masker_init(&m);
    assert_int_equal(ll_gw_mask(&sc, sc.decision.mask_categories, &m), LL_OK);
    char *js = cJSON_PrintUnformatted(doc);
    assert_null(strstr(js, EMAIL));
    assert_non_null(strstr(js, SECRET)); /* not a masked category */
    /* one value, one placeholder, in every message */
    assert_string_equal(sc.v[0].item->valuestring, "user is [PRIVATE_EMAIL_1]");
    assert_string_equal(sc.v[3].item->valuestring, "{\"to\":\"[PRIVATE_EMAIL_1]\"}");
    assert_string_equal(sc.v[4].item->valuestring, "sent to [PRIVATE_EMAIL_1]");
    assert_int_equal(m.n, 1);
    /* the audit line: counts and the raw value's hash, never a value */
    ll_strbuf b = {0};
    ll_gw_audit_line(&sc, "chatcmpl-x", "mask", "http://up/v1/chat/completions", sc.decision.mask_categories,
                     strlen(js), &b);
    assert_true(b.len > 0 && b.data[b.len - 1] == '\n');
    assert_null(strstr(b.data, EMAIL));
    assert_null(strstr(b.data, SECRET));
    cJSON *a = cJSON_Parse(b.data);
    assert_non_null(a);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(a, "masked"), "private_email")->valueint, 4);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(a, "sent_raw"), "secret")->valueint, 1);
    assert_int_equal(cJSON_GetObjectItem(a, "bytes")->valueint, (int)strlen(js));
    cJSON *h = cJSON_GetArrayItem(cJSON_GetObjectItem(a, "raw_hashes"), 0);
    char want[65];
    ll_gw_sha256_hex("secret:" SECRET, strlen("secret:" SECRET), want);
    assert_string_equal(cJSON_GetObjectItem(h, "sha256")->valuestring, want);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(a, "raw_hashes")), 1);
    cJSON_Delete(a);
    ll_strbuf_free(&b);
    free(js);
    pii_masker_free(&m);
    ll_gw_scan_free(&sc);
    cJSON_Delete(doc);
}

static void test_sha256(void **state) {
    (void)state;
    char hex[65];
    ll_gw_sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    ll_gw_sha256_hex("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

/* A masker with one value that needs JSON escaping. */
static void masker_with(pii_masker *m, const char *value) {
    pii_masker_init(m);
    const pii_mask_entry *en;
    assert_int_equal(pii_masker_placeholder(m, PII_SECRET, value, strlen(value), &en), LL_OK);
    assert_string_equal(en->ph, "[SECRET_1]");
}

static void test_unmask_body(void **state) {
    (void)state;
    pii_masker m;
    masker_with(&m, "p\"w\\d\n");
    const char *body = "{\"id\":\"x\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":"
                       "\"use [SECRET_1] not [SECRET_2]\",\"tool_calls\":[{\"id\":\"t\",\"type\":\"function\","
                       "\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"k\\\":\\\"[SECRET_1]\\\"}\"}}]},"
                       "\"finish_reason\":\"stop\"}]}";
    ll_strbuf b = {0};
    ll_gw_unmask_body(&m, body, strlen(body), &b);
    cJSON *j = cJSON_Parse(b.data);
    assert_non_null(j);
    cJSON *msg = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "message");
    assert_string_equal(cJSON_GetObjectItem(msg, "content")->valuestring, "use p\"w\\d\n not [SECRET_2]");
    cJSON *args = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(msg, "tool_calls"), 0),
                                                          "function"), "arguments");
    /* the arguments are JSON text: the restored value is escaped inside it, and decodes back */
    assert_string_equal(args->valuestring, "{\"k\":\"p\\\"w\\\\d\\u000a\"}");
    cJSON *aj = cJSON_Parse(args->valuestring);
    assert_non_null(aj);
    assert_string_equal(cJSON_GetObjectItem(aj, "k")->valuestring, "p\"w\\d\n");
    cJSON_Delete(aj);
    cJSON_Delete(j);
    /* not a completion: unchanged */
    ll_strbuf_clear(&b);
    const char *err = "{\"error\":{\"message\":\"[SECRET_1]\"}}";
    ll_gw_unmask_body(&m, err, strlen(err), &b);
    assert_string_equal(b.data, err);
    ll_strbuf_clear(&b);
    ll_gw_unmask_body(&m, "not json", 8, &b);
    assert_string_equal(b.data, "not json");
    ll_strbuf_free(&b);
    pii_masker_free(&m);
}

/* logprobs.content of a chat completion: the entries covering an issued placeholder become one
 * entry with the value, the run's summed logprob and the value's bytes; an unissued placeholder
 * and the other entries stay as they were. */
static void test_unmask_logprobs_body(void **state) {
    (void)state;
    pii_masker m;
    masker_with(&m, "p\"w\xc3\xa9");
    const char *body = "{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"use [SECRET_1] not [SECRET_2]\"},"
                       "\"logprobs\":{\"content\":["
                       "{\"token\":\"use\",\"logprob\":-0.5,\"bytes\":[117,115,101],\"top_logprobs\":[]},"
                       "{\"token\":\" [\",\"logprob\":-0.25,\"bytes\":[32,91],\"top_logprobs\":[{\"token\":\" a\",\"logprob\":-2}]},"
                       "{\"token\":\"SECRET\",\"logprob\":-0.125,\"bytes\":[83,69,67,82,69,84],\"top_logprobs\":[]},"
                       "{\"token\":\"_1\",\"logprob\":-0.0625,\"bytes\":[95,49],\"top_logprobs\":[]},"
                       "{\"token\":\"] not\",\"logprob\":-1,\"bytes\":[93,32,110,111,116],\"top_logprobs\":[]},"
                       "{\"token\":\" [SECRET_2]\",\"logprob\":-3,\"bytes\":[],\"top_logprobs\":[]}],\"refusal\":null},"
                       "\"finish_reason\":\"stop\"}]}";
    ll_strbuf b = {0};
    ll_gw_unmask_body(&m, body, strlen(body), &b);
    cJSON *j = cJSON_Parse(b.data);
    assert_non_null(j);
    cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "message"), "content")->valuestring, "use p\"w\xc3\xa9 not [SECRET_2]");
    cJSON *lc = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "logprobs"), "content");
    assert_int_equal(cJSON_GetArraySize(lc), 3);
    cJSON *e0 = cJSON_GetArrayItem(lc, 0), *e1 = cJSON_GetArrayItem(lc, 1), *e2 = cJSON_GetArrayItem(lc, 2);
    assert_string_equal(cJSON_GetObjectItem(e0, "token")->valuestring, "use");
    /* " [" + "SECRET" + "_1" + "] not": the text around the placeholder stays in the merged entry */
    assert_string_equal(cJSON_GetObjectItem(e1, "token")->valuestring, " p\"w\xc3\xa9 not");
    assert_true(cJSON_GetObjectItem(e1, "logprob")->valuedouble == -1.4375);
    cJSON *by = cJSON_GetObjectItem(e1, "bytes");
    const unsigned char want[] = {' ', 'p', '"', 'w', 0xc3, 0xa9, ' ', 'n', 'o', 't'};
    assert_int_equal(cJSON_GetArraySize(by), (int)sizeof(want));
    for (int i = 0; i < (int)sizeof(want); i++) assert_int_equal(cJSON_GetArrayItem(by, i)->valueint, want[i]);
    /* the first entry's alternatives stay */
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(e1, "top_logprobs"), 0), "token")->valuestring, " a");
    assert_string_equal(cJSON_GetObjectItem(e2, "token")->valuestring, " [SECRET_2]"); /* never issued: kept */
    assert_true(cJSON_GetObjectItem(e2, "logprob")->valuedouble == -3);
    cJSON_Delete(j);
    ll_strbuf_free(&b);
    pii_masker_free(&m);
}

/* The same tokens streamed, one per event: the entries of a placeholder are held until it closes,
 * then sent as one; at the end, held entries of an unfinished "[SECRET_" go out as they are. Every
 * split of the byte stream gives the same entries. */
static void test_sse_logprobs_every_cut(void **state) {
    (void)state;
    pii_masker m;
    masker_with(&m, "hunter2");
    const char *toks[] = {"pw:", " [", "SECRET", "_1", "] ok", " [SECRET_"};
    const double lps[] = {-0.5, -0.25, -0.125, -0.0625, -1, -2};
    ll_strbuf in = {0};
    for (int t = 0; t < 6; t++)
        ll_strbuf_printf(&in, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"},\"logprobs\":{\"content\":"
                              "[{\"token\":\"%s\",\"logprob\":%g,\"bytes\":[],\"top_logprobs\":[]}]},\"finish_reason\":null}]}\n\n",
                         toks[t], toks[t], lps[t]);
    ll_strbuf_puts(&in, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
    for (size_t cut = 0; cut <= in.len; cut += 7) {
        ll_gw_sse sse;
        ll_gw_sse_init(&sse, &m);
        ll_strbuf out = {0};
        ll_gw_sse_feed(&sse, in.data, cut, &out);
        ll_gw_sse_feed(&sse, in.data + cut, in.len - cut, &out);
        ll_gw_sse_finish(&sse, &out);
        assert_false(out.oom);
        /* the entries in order across events */
        const char *want[] = {"pw:", " hunter2 ok", " [SECRET_"};
        const double wlp[] = {-0.5, -1.4375, -2};
        int k = 0;
        for (const char *p = out.data; (p = strstr(p, "data: {")) != NULL; p++) {
            const char *nl = strchr(p, '\n');
            cJSON *ev = cJSON_ParseWithLength(p + 6, (size_t)(nl - p - 6));
            assert_non_null(ev);
            cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(ev, "choices"), 0);
            cJSON *lc = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "logprobs"), "content");
            for (cJSON *e = cJSON_IsArray(lc) ? lc->child : NULL; e; e = e->next) {
                assert_true(k < 3);
                assert_string_equal(cJSON_GetObjectItem(e, "token")->valuestring, want[k]);
                assert_true(cJSON_GetObjectItem(e, "logprob")->valuedouble == wlp[k]);
                k++;
            }
            cJSON_Delete(ev);
        }
        assert_int_equal(k, 3);
        ll_strbuf_free(&out);
        ll_gw_sse_free(&sse);
    }
    ll_strbuf_free(&in);
    pii_masker_free(&m);
}

/* Parses SSE output into (content, finish_reason, [DONE] seen, fragments). */
static void sse_collect(const char *s, ll_strbuf *content, char *finish, int *done, int *events) {
    *done = 0;
    *events = 0;
    finish[0] = 0;
    const char *p = s;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n && p[n - 1] == '\r') n--;
        if (n >= 6 && !strncmp(p, "data: ", 6)) {
            if (n == 12 && !strncmp(p + 6, "[DONE]", 6)) *done = 1;
            else {
                cJSON *j = cJSON_ParseWithLength(p + 6, n - 6);
                assert_non_null(j);
                (*events)++;
                cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
                cJSON *ct = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "delta"), "content");
                cJSON *fr = cJSON_GetObjectItem(c, "finish_reason");
                if (cJSON_IsString(ct)) {
                    /* no fragment of a placeholder reaches the client before the stream's end
                     * (then an unissued "[SECRET_" is flushed as the text it is) */
                    if (!cJSON_IsString(fr)) assert_null(strstr(ct->valuestring, "[SE"));
                    if (!cJSON_IsString(fr)) assert_null(strstr(ct->valuestring, "CRET"));
                    ll_strbuf_puts(content, ct->valuestring);
                }
                if (cJSON_IsString(fr)) strcpy(finish, fr->valuestring);
                cJSON_Delete(j);
            }
        }
        p += nl ? (size_t)(nl - p) + 1 : strlen(p);
    }
}

static void test_sse_unmask_every_cut(void **state) {
    (void)state;
    pii_masker m;
    masker_with(&m, "hunter\"2");
    /* the placeholder is split over three events; the last one holds a prefix of another */
    const char *in = ": comment\r\n"
                     "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
                     "\"finish_reason\":null}]}\r\n\r\n"
                     "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"pw: [SE\"},\"finish_reason\":null}]}\n\n"
                     "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"CRET\"},\"finish_reason\":null}]}\n\n"
                     "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"_1] ok [SECRET_\"},\"finish_reason\":null}]}\n\n"
                     "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
                     "data: {\"choices\":[],\"usage\":{\"total_tokens\":3}}\n\n"
                     "data: [DONE]\n\n";
    size_t n = strlen(in);
    for (size_t cut = 0; cut <= n; cut += 1) { /* every split of the byte stream into two pieces */
        ll_gw_sse sse;
        ll_gw_sse_init(&sse, &m);
        ll_strbuf out = {0}, content = {0};
        ll_gw_sse_feed(&sse, in, cut, &out);
        ll_gw_sse_feed(&sse, in + cut, n - cut, &out);
        ll_gw_sse_finish(&sse, &out);
        assert_false(out.oom);
        char finish[32];
        int done, events;
        sse_collect(out.data, &content, finish, &done, &events);
        assert_string_equal(content.data, "pw: hunter\"2 ok [SECRET_");
        assert_string_equal(finish, "stop");
        assert_true(done);
        assert_int_equal(events, 6);
        assert_non_null(strstr(out.data, ": comment\r\n")); /* other lines pass through */
        assert_non_null(strstr(out.data, "\"usage\":{\"total_tokens\":3}"));
        ll_strbuf_free(&out);
        ll_strbuf_free(&content);
        ll_gw_sse_free(&sse);
    }
    /* byte by byte */
    ll_gw_sse sse;
    ll_gw_sse_init(&sse, &m);
    ll_strbuf out = {0}, content = {0};
    for (size_t i = 0; i < n; i++) ll_gw_sse_feed(&sse, in + i, 1, &out);
    ll_gw_sse_finish(&sse, &out);
    char finish[32];
    int done, events;
    sse_collect(out.data, &content, finish, &done, &events);
    assert_string_equal(content.data, "pw: hunter\"2 ok [SECRET_");
    ll_strbuf_free(&out);
    ll_strbuf_free(&content);
    ll_gw_sse_free(&sse);
    pii_masker_free(&m);
}


/* Accumulates the tool call arguments (per index) and legacy `text` of SSE output; fails if any
 * fragment carries a '[' (the restored answers below have none, so a '[' is a placeholder piece). */
static void sse_collect_calls(const char *s, ll_strbuf *args, int nargs, ll_strbuf *text, char *finish) {
    finish[0] = 0;
    for (const char *p = s; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n > 6 && !strncmp(p, "data: {", 7)) {
            cJSON *j = cJSON_ParseWithLength(p + 6, n - 6);
            assert_non_null(j);
            cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
            cJSON *calls = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "delta"), "tool_calls");
            for (cJSON *tc = calls ? calls->child : NULL; tc; tc = tc->next) {
                int k = cJSON_GetObjectItem(tc, "index")->valueint;
                assert_true(k >= 0 && k < nargs);
                cJSON *a = cJSON_GetObjectItem(cJSON_GetObjectItem(tc, "function"), "arguments");
                if (!a) continue;
                assert_null(strchr(a->valuestring, '['));
                ll_strbuf_puts(&args[k], a->valuestring);
            }
            cJSON *t = cJSON_GetObjectItem(c, "text");
            if (cJSON_IsString(t)) {
                assert_null(strchr(t->valuestring, '['));
                ll_strbuf_puts(text, t->valuestring);
            }
            cJSON *fr = cJSON_GetObjectItem(c, "finish_reason");
            if (cJSON_IsString(fr)) strcpy(finish, fr->valuestring);
            cJSON_Delete(j);
        }
        p += nl ? n + 1 : n;
    }
}

/* One tool call chunk event whose arguments fragment is frag (JSON-escaped here). */
static void put_call_event(ll_strbuf *b, int index, const char *frag, size_t n, int first) {
    char *tmp = ll_malloc(n + 1);
    memcpy(tmp, frag, n);
    tmp[n] = 0;
    cJSON *a = cJSON_CreateString(tmp);
    char *js = cJSON_PrintUnformatted(a);
    ll_strbuf_printf(b, "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":%d,%s\"function\":{%s"
                        "\"arguments\":%s}}]},\"finish_reason\":null}]}\n\n",
                     index, first ? "\"id\":\"call_1\",\"type\":\"function\"," : "", first ? "\"name\":\"send\"," : "", js);
    free(js);
    cJSON_Delete(a);
    ll_free(tmp);
}

static void feed_all(const pii_masker *m, const char *in, size_t n, ll_strbuf *out) {
    ll_gw_sse sse;
    ll_gw_sse_init(&sse, m);
    ll_gw_sse_feed(&sse, in, n, out);
    ll_gw_sse_finish(&sse, out);
    ll_gw_sse_free(&sse);
    assert_false(out->oom);
}

static void test_sse_tool_args_every_cut(void **state) {
    (void)state;
    pii_masker m;
    pii_masker_init(&m);
    const pii_mask_entry *en;
    /* a value with a '"': restored JSON-escaped, the arguments stay JSON */
    assert_int_equal(pii_masker_placeholder(&m, PII_EMAIL, "an\"na@firma.de", 14, &en), LL_OK);
    const char *masked = "{\"to\":\"[PRIVATE_EMAIL_1]\",\"cc\":\"[PRIVATE_EMAIL_1]\"}";
    const char *want = "{\"to\":\"an\\\"na@firma.de\",\"cc\":\"an\\\"na@firma.de\"}";
    size_t n = strlen(masked);
    /* the arguments cut into three events at every pair of byte positions (empty fragments
     * included), then a second tool call and the finish event */
    for (size_t a = 0; a <= n; a++)
        for (size_t b = a; b <= n; b++) {
            ll_strbuf in = {0}, out = {0}, args[2] = {{0}, {0}}, text = {0};
            put_call_event(&in, 0, masked, a, 1);
            put_call_event(&in, 0, masked + a, b - a, 0);
            put_call_event(&in, 0, masked + b, n - b, 0);
            put_call_event(&in, 1, "{\"x\":\"[PRIVATE_EMAIL_1]\"}", 25, 1);
            ll_strbuf_puts(&in, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n"
                                "data: [DONE]\n\n");
            feed_all(&m, in.data, in.len, &out);
            char finish[32];
            sse_collect_calls(out.data, args, 2, &text, finish);
            assert_string_equal(args[0].data, want);
            assert_string_equal(args[1].data, "{\"x\":\"an\\\"na@firma.de\"}");
            assert_string_equal(finish, "tool_calls");
            for (int k = 0; k < 2; k++) ll_strbuf_free(&args[k]);
            ll_strbuf_free(&in);
            ll_strbuf_free(&out);
            ll_strbuf_free(&text);
        }
    /* a call that ends on an open prefix of a placeholder: flushed as text when the next call
     * starts (before it, under its own index), and at the finish for the last call */
    ll_strbuf in = {0}, out = {0};
    put_call_event(&in, 0, "{\"a\":\"[PRIVATE_EM", 17, 1);
    put_call_event(&in, 1, "{\"b\":\"[PRIVATE_", 15, 1);
    ll_strbuf_puts(&in, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n");
    feed_all(&m, in.data, in.len, &out);
    const char *flush0 = strstr(out.data, "{\"index\":0,\"function\":{\"arguments\":\"[PRIVATE_EM\"}}");
    assert_non_null(flush0);
    assert_true(flush0 < strstr(out.data, "\"index\":1"));
    assert_non_null(strstr(out.data, "\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"[PRIVATE_\"}}]"));
    ll_strbuf_free(&in);
    ll_strbuf_free(&out);
    pii_masker_free(&m);
}

/* Legacy /v1/completions chunks carry `text` in the choice: restored across events too. */
static void test_sse_text_completion_every_cut(void **state) {
    (void)state;
    pii_masker m;
    pii_masker_init(&m);
    const pii_mask_entry *en;
    assert_int_equal(pii_masker_placeholder(&m, PII_EMAIL, "anna@firma.de", 13, &en), LL_OK);
    const char *masked = "mail [PRIVATE_EMAIL_1] now";
    size_t n = strlen(masked);
    for (size_t a = 0; a <= n; a++) {
        ll_strbuf in = {0}, out = {0}, text = {0};
        for (int part = 0; part < 2; part++) {
            cJSON *t = cJSON_CreateString("");
            char buf[64];
            size_t from = part ? a : 0, to = part ? n : a;
            memcpy(buf, masked + from, to - from);
            buf[to - from] = 0;
            cJSON_SetValuestring(t, buf);
            char *js = cJSON_PrintUnformatted(t);
            ll_strbuf_printf(&in, "data: {\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":%s,"
                                  "\"finish_reason\":null}]}\n\n", js);
            free(js);
            cJSON_Delete(t);
        }
        ll_strbuf_puts(&in, "data: {\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"\","
                            "\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n");
        feed_all(&m, in.data, in.len, &out);
        char finish[32];
        sse_collect_calls(out.data, NULL, 0, &text, finish);
        assert_string_equal(text.data, "mail anna@firma.de now");
        assert_string_equal(finish, "length");
        ll_strbuf_free(&in);
        ll_strbuf_free(&out);
        ll_strbuf_free(&text);
    }
    pii_masker_free(&m);
}

/* Checks a legacy logprobs object against the restored text it belongs to: the four arrays line up
 * and each token lies in text at its text_offset (offset0: the first position's offset). Returns
 * the number of positions. */
static int legacy_lp_check(const cJSON *lp, const char *text, int offset0) {
    cJSON *toks = cJSON_GetObjectItem(lp, "tokens"), *offs = cJSON_GetObjectItem(lp, "text_offset");
    int n = cJSON_GetArraySize(toks);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(lp, "token_logprobs")), n);
    assert_int_equal(cJSON_GetArraySize(offs), n);
    for (int k = 0; k < n; k++) {
        const char *t = cJSON_GetArrayItem(toks, k)->valuestring;
        int o = cJSON_GetArrayItem(offs, k)->valueint - offset0;
        assert_true(o >= 0 && (size_t)o + strlen(t) <= strlen(text));
        assert_memory_equal(text + o, t, strlen(t));
    }
    return n;
}

/* A legacy text_completion body: its logprobs are parallel arrays. The tokens covering an issued
 * placeholder become one position (value, summed or null logprob, the first position's
 * top_logprobs and text_offset), and every later text_offset moves by what the value changed. */
static void test_unmask_legacy_logprobs_body(void **state) {
    (void)state;
    pii_masker m;
    masker_with(&m, "hunter2"); /* 7 bytes for the 10 of [SECRET_1]: later offsets move by -3 each */
    const char *body =
        "{\"object\":\"text_completion\",\"choices\":["
        "{\"index\":0,\"text\":\"pw: [SECRET_1] ok [SECRET_1] [SECRET_2] done\",\"logprobs\":{"
        "\"tokens\":[\"pw:\",\" [SEC\",\"RET_1\",\"] ok\",\" [SECRET_1]\",\" [SECRET_2]\",\" done\"],"
        "\"token_logprobs\":[-0.5,-0.25,-0.125,-0.0625,-1,-2,-4],"
        "\"top_logprobs\":[{\"pw:\":-0.5},{\" a\":-2,\" [SEC\":-0.25},{\"RET_1\":-0.125},{\"] ok\":-0.0625},null,{},{}],"
        "\"text_offset\":[0,3,8,13,17,28,39]},\"finish_reason\":\"stop\"},"
        "{\"index\":1,\"text\":\"[SECRET_1]\",\"logprobs\":{\"tokens\":[\"[\",\"SECRET_1\",\"]\"],"
        "\"token_logprobs\":[null,-1,-2],\"top_logprobs\":null,\"text_offset\":[5,6,14]},\"finish_reason\":\"stop\"}]}";
    ll_strbuf b = {0};
    ll_gw_unmask_body(&m, body, strlen(body), &b);
    cJSON *j = cJSON_Parse(b.data);
    assert_non_null(j);
    cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    const char *text = cJSON_GetObjectItem(c0, "text")->valuestring;
    assert_string_equal(text, "pw: hunter2 ok hunter2 [SECRET_2] done");
    cJSON *lp = cJSON_GetObjectItem(c0, "logprobs");
    assert_int_equal(legacy_lp_check(lp, text, 0), 5);
    char *toks = cJSON_PrintUnformatted(cJSON_GetObjectItem(lp, "tokens"));
    assert_null(strstr(toks, "SEC\"")); /* no piece of the issued placeholder left among the tokens */
    free(toks);
    const char *want[] = {"pw:", " hunter2 ok", " hunter2", " [SECRET_2]", " done"};
    const double wlp[] = {-0.5, -0.4375, -1, -2, -4};
    const int woff[] = {0, 3, 14, 22, 33};
    for (int k = 0; k < 5; k++) {
        assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(lp, "tokens"), k)->valuestring, want[k]);
        assert_true(cJSON_GetArrayItem(cJSON_GetObjectItem(lp, "token_logprobs"), k)->valuedouble == wlp[k]);
        assert_int_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(lp, "text_offset"), k)->valueint, woff[k]);
    }
    /* the first position's alternatives stay with the merged one; the others go with theirs */
    cJSON *top = cJSON_GetObjectItem(lp, "top_logprobs");
    assert_int_equal(cJSON_GetArraySize(top), 5);
    assert_true(cJSON_GetObjectItem(cJSON_GetArrayItem(top, 1), " a")->valuedouble == -2);
    assert_true(cJSON_IsNull(cJSON_GetArrayItem(top, 2)));
    assert_null(cJSON_GetArrayItem(top, 3)->child);
    /* a run with an unscored token has no sum; top_logprobs null stays null; the first offset stays */
    cJSON *c1 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 1);
    assert_string_equal(cJSON_GetObjectItem(c1, "text")->valuestring, "hunter2");
    lp = cJSON_GetObjectItem(c1, "logprobs");
    assert_int_equal(legacy_lp_check(lp, "hunter2", 5), 1);
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(lp, "tokens"), 0)->valuestring, "hunter2");
    assert_true(cJSON_IsNull(cJSON_GetArrayItem(cJSON_GetObjectItem(lp, "token_logprobs"), 0)));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(lp, "top_logprobs")));
    assert_int_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(lp, "text_offset"), 0)->valueint, 5);
    cJSON_Delete(j);
    ll_strbuf_free(&b);
    pii_masker_free(&m);
}

/* Feeds in[n] to a fresh stream as in[0, cut) and then the rest in pieces of step bytes. */
static void feed_pieces(const pii_masker *m, const char *in, size_t n, size_t cut, size_t step, ll_strbuf *out) {
    ll_gw_sse sse;
    ll_gw_sse_init(&sse, m);
    ll_gw_sse_feed(&sse, in, cut, out);
    for (size_t i = cut; i < n; i += step) ll_gw_sse_feed(&sse, in + i, LL_MIN(step, n - i), out);
    ll_gw_sse_finish(&sse, out);
    ll_gw_sse_free(&sse);
    assert_false(out->oom);
}

/* Legacy text_completion events of tokens [from, to), one logprobs position each. */
static const char *const LEG_TOKS[] = {"pw:", " [", "SECRET", "_1", "] ok", " done", " [SECRET_"};
static const double LEG_LPS[] = {-0.5, -0.25, -0.125, -0.0625, -1, -2, -4};
static void put_legacy_event(ll_strbuf *b, int from, int to) {
    cJSON *ev = cJSON_CreateObject(), *c = cJSON_CreateObject(), *choices = cJSON_CreateArray();
    cJSON *toks = cJSON_CreateArray(), *lps = cJSON_CreateArray(), *tops = cJSON_CreateArray(), *offs = cJSON_CreateArray();
    ll_strbuf text = {0};
    int off = 0;
    for (int t = 0; t < from; t++) off += (int)strlen(LEG_TOKS[t]);
    for (int t = from; t < to; t++) {
        ll_strbuf_puts(&text, LEG_TOKS[t]);
        cJSON_AddItemToArray(toks, cJSON_CreateString(LEG_TOKS[t]));
        cJSON_AddItemToArray(lps, cJSON_CreateNumber(LEG_LPS[t]));
        cJSON *top = cJSON_CreateObject();
        cJSON_AddNumberToObject(top, LEG_TOKS[t], LEG_LPS[t]);
        cJSON_AddItemToArray(tops, top);
        cJSON_AddItemToArray(offs, cJSON_CreateNumber(off));
        off += (int)strlen(LEG_TOKS[t]);
    }
    cJSON_AddStringToObject(ev, "object", "text_completion");
    cJSON_AddItemToObject(ev, "choices", choices);
    cJSON_AddItemToArray(choices, c);
    cJSON_AddNumberToObject(c, "index", 0);
    cJSON_AddStringToObject(c, "text", text.data ? text.data : "");
    cJSON *lp = cJSON_AddObjectToObject(c, "logprobs");
    cJSON_AddItemToObject(lp, "tokens", toks);
    cJSON_AddItemToObject(lp, "token_logprobs", lps);
    cJSON_AddItemToObject(lp, "top_logprobs", tops);
    cJSON_AddItemToObject(lp, "text_offset", offs);
    cJSON_AddNullToObject(c, "finish_reason");
    char *js = cJSON_PrintUnformatted(ev);
    ll_strbuf_printf(b, "data: %s\n\n", js);
    free(js);
    cJSON_Delete(ev);
    ll_strbuf_free(&text);
}

/* Checks restored legacy SSE output: the positions in order across events, the arrays of each
 * event lined up, no piece of the issued placeholder before the end, offsets into the restored
 * text. */
static void legacy_sse_check(const char *out) {
    const char *want[] = {"pw:", " hunter2 ok", " done", " [SECRET_"};
    const double wlp[] = {-0.5, -1.4375, -2, -4};
    const int woff[] = {0, 3, 14, 19};
    ll_strbuf text = {0};
    int k = 0, fin = 0;
    for (const char *p = out; (p = strstr(p, "data: {")) != NULL; p++) {
        const char *nl = strchr(p, '\n');
        cJSON *ev = cJSON_ParseWithLength(p + 6, (size_t)(nl - p - 6));
        assert_non_null(ev);
        cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(ev, "choices"), 0);
        assert_false(fin); /* nothing after the finish event */
        fin = cJSON_IsString(cJSON_GetObjectItem(c, "finish_reason"));
        ll_strbuf_puts(&text, cJSON_GetObjectItem(c, "text")->valuestring);
        cJSON *lp = cJSON_GetObjectItem(c, "logprobs");
        cJSON *toks = cJSON_GetObjectItem(lp, "tokens");
        int n = cJSON_GetArraySize(toks);
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(lp, "token_logprobs")), n);
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(lp, "top_logprobs")), n);
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(lp, "text_offset")), n);
        for (int q = 0; q < n; q++, k++) {
            assert_true(k < 4);
            assert_string_equal(cJSON_GetArrayItem(toks, q)->valuestring, want[k]);
            assert_true(cJSON_GetArrayItem(cJSON_GetObjectItem(lp, "token_logprobs"), q)->valuedouble == wlp[k]);
            assert_int_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(lp, "text_offset"), q)->valueint, woff[k]);
            /* the merged position keeps the alternatives of its first token */
            cJSON *top = cJSON_GetArrayItem(cJSON_GetObjectItem(lp, "top_logprobs"), q);
            assert_non_null(cJSON_GetObjectItem(top, k == 1 ? " [" : want[k]));
            if (!fin) assert_null(strstr(want[k], "SEC"));
        }
        cJSON_Delete(ev);
    }
    assert_true(fin);
    assert_int_equal(k, 4);
    assert_string_equal(text.data, "pw: hunter2 ok done [SECRET_");
    ll_strbuf_free(&text);
}

/* The legacy tokens streamed, grouped into three events at every pair of token positions (empty
 * events included), then one token per event cut at every byte and fed byte by byte. */
static void test_sse_legacy_logprobs_every_cut(void **state) {
    (void)state;
    pii_masker m;
    masker_with(&m, "hunter2");
    const char *fin = "data: {\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"\","
                      "\"logprobs\":null,\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n";
    const int nt = (int)LL_ARRAY_LEN(LEG_TOKS);
    for (int a = 0; a <= nt; a++)
        for (int b = a; b <= nt; b++) {
            ll_strbuf in = {0}, out = {0};
            put_legacy_event(&in, 0, a);
            put_legacy_event(&in, a, b);
            put_legacy_event(&in, b, nt);
            ll_strbuf_puts(&in, fin);
            feed_all(&m, in.data, in.len, &out);
            legacy_sse_check(out.data);
            ll_strbuf_free(&in);
            ll_strbuf_free(&out);
        }
    ll_strbuf in = {0};
    for (int t = 0; t < nt; t++) put_legacy_event(&in, t, t + 1);
    ll_strbuf_puts(&in, fin);
    for (size_t cut = 0; cut <= in.len + 1; cut++) {
        /* cut <= in.len: two pieces at cut; then once byte by byte */
        ll_strbuf out = {0};
        feed_pieces(&m, in.data, in.len, cut <= in.len ? cut : 0, cut <= in.len ? in.len : 1, &out);
        legacy_sse_check(out.data);
        assert_non_null(strstr(out.data, "data: [DONE]\n\n"));
        ll_strbuf_free(&out);
    }
    ll_strbuf_free(&in);
    pii_masker_free(&m);
}

static void test_refusal(void **state) {
    (void)state;
    pii_decision d = {0};
    d.action = PII_ACT_SKIP;
    d.categories = (1u << PII_PHONE) | (1u << PII_EMAIL);
    ll_strbuf b = {0};
    ll_gw_refusal(&d, "gpt-x", "chatcmpl-1", 7, 0, 0, &b);
    cJSON *j = cJSON_Parse(b.data);
    assert_non_null(j);
    cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    assert_string_equal(cJSON_GetObjectItem(c, "finish_reason")->valuestring, "content_filter");
    const char *text = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "message"), "content")->valuestring;
    assert_non_null(strstr(text, "private_email, private_phone"));
    assert_string_equal(cJSON_GetObjectItem(j, "model")->valuestring, "gpt-x");
    cJSON_Delete(j);
    ll_strbuf_clear(&b);
    ll_gw_refusal(&d, "gpt-x", "chatcmpl-1", 7, 1, 0, &b);
    ll_strbuf content = {0};
    char finish[32];
    int done, events;
    sse_collect(b.data, &content, finish, &done, &events);
    assert_true(done);
    assert_int_equal(events, 3);
    assert_string_equal(finish, "content_filter");
    assert_non_null(strstr(content.data, "not processed"));
    ll_strbuf_free(&content);
    /* legacy completions: text_completion objects with the explanation as text */
    ll_strbuf_clear(&b);
    ll_gw_refusal(&d, "gpt-x", "cmpl-1", 7, 0, 1, &b);
    j = cJSON_Parse(b.data);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "object")->valuestring, "text_completion");
    c = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    assert_non_null(strstr(cJSON_GetObjectItem(c, "text")->valuestring, "private_email, private_phone"));
    assert_string_equal(cJSON_GetObjectItem(c, "finish_reason")->valuestring, "content_filter");
    cJSON_Delete(j);
    ll_strbuf_clear(&b);
    ll_gw_refusal(&d, "gpt-x", "cmpl-1", 7, 1, 1, &b);
    ll_strbuf said = {0};
    sse_collect_calls(b.data, NULL, 0, &said, finish);
    assert_non_null(strstr(said.data, "not processed"));
    assert_string_equal(finish, "content_filter");
    assert_non_null(strstr(b.data, "\"object\":\"text_completion\""));
    assert_non_null(strstr(b.data, "data: [DONE]\n\n"));
    ll_strbuf_free(&said);
    ll_strbuf_free(&b);
}

static void test_scan_prompt(void **state) {
    (void)state;
    pii_policy p;
    pii_policy_default(&p);
    ll_api_error e;
    ll_gw_scan sc;
    cJSON *doc = cJSON_Parse("{\"prompt\":[\"mail " EMAIL "\",\"clean text\"],\"suffix\":\"cc " EMAIL "\"}");
    assert_int_equal(ll_gw_scan_prompt(doc, &p, NULL, &sc, &e), 0);
    assert_int_equal(sc.n, 3);
    assert_string_equal(sc.v[0].path, "prompt[0]");
    assert_string_equal(sc.v[2].path, "suffix");
    assert_int_equal(sc.decision.counts[PII_EMAIL], 2);
    assert_int_equal(sc.decision.action, PII_ACT_MASK);
    pii_masker m;
    pii_masker_init(&m);
    assert_int_equal(ll_gw_mask(&sc, sc.decision.mask_categories, &m), LL_OK);
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "prompt"), 0)->valuestring, "mail [PRIVATE_EMAIL_1]");
    assert_string_equal(cJSON_GetObjectItem(doc, "suffix")->valuestring, "cc [PRIVATE_EMAIL_1]");
    pii_masker_free(&m);
    ll_gw_scan_free(&sc);
    cJSON_Delete(doc);
    const char *bad[] = {"{\"prompt\":[1,2,3]}", "{\"prompt\":7}", "{}"};
    for (size_t i = 0; i < LL_ARRAY_LEN(bad); i++) {
        doc = cJSON_Parse(bad[i]);
        assert_int_equal(ll_gw_scan_prompt(doc, &p, NULL, &sc, &e), -1);
        assert_int_equal(e.status, 400);
        assert_string_equal(e.param, "prompt");
        ll_gw_scan_free(&sc);
        cJSON_Delete(doc);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan_messages),   cmocka_unit_test(test_min_score_and_clean),
        cmocka_unit_test(test_take_decision),   cmocka_unit_test(test_mask_and_audit),
        cmocka_unit_test(test_sha256),          cmocka_unit_test(test_unmask_body),
        cmocka_unit_test(test_sse_unmask_every_cut), cmocka_unit_test(test_refusal),
        cmocka_unit_test(test_unmask_logprobs_body), cmocka_unit_test(test_sse_logprobs_every_cut),
        cmocka_unit_test(test_sse_tool_args_every_cut), cmocka_unit_test(test_sse_text_completion_every_cut),
        cmocka_unit_test(test_scan_prompt),
        cmocka_unit_test(test_unmask_legacy_logprobs_body), cmocka_unit_test(test_sse_legacy_logprobs_every_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
