/* test_outparse.c — reasoning/content splitting and Qwen XML tool calls: well-formed single and
 * multiple calls, schema-typed arguments, multi-line values, every two-piece split and byte-by-byte
 * feeding giving identical results, malformed and truncated outputs, and a random tag-soup test
 * (no crash, split-independent results, never half a tag in the output). */
#include "testutil.h"

#include "runtime/outparse.h"
#include "runtime/sampler.h" /* ll_rng */

typedef struct {
    char reasoning[8192];
    char content[8192];
    size_t rl, cl;
    int n_calls;
    char names[16][64];
    char args[16][1024];
    int n_events;
} collected;

static void on_event(void *ud, const ll_out_event *ev) {
    collected *c = ud;
    c->n_events++;
    if (ev->kind == LL_OUT_TOOL_CALL) {
        assert_true(c->n_calls < 16);
        assert_int_equal(ev->call->index, c->n_calls);
        snprintf(c->names[c->n_calls], 64, "%s", ev->call->name);
        snprintf(c->args[c->n_calls], 1024, "%s", ev->call->arguments);
        c->n_calls++;
        return;
    }
    assert_true(ev->len > 0); /* no empty deltas */
    char *dst = ev->kind == LL_OUT_REASONING ? c->reasoning : c->content;
    size_t *l = ev->kind == LL_OUT_REASONING ? &c->rl : &c->cl;
    assert_true(*l + ev->len < 8192);
    memcpy(dst + *l, ev->text, ev->len);
    *l += ev->len;
    dst[*l] = 0;
}

/* Parses `text` fed in pieces cut at the given offsets (sorted, within the text). */
static void parse_cuts(const char *text, const size_t *cuts, int n_cuts, int think, const cJSON *tools,
                       collected *c) {
    memset(c, 0, sizeof(*c));
    ll_outparse_params p = {think, 1, tools};
    ll_outparse *op = NULL;
    assert_int_equal(ll_outparse_new(&p, on_event, c, &op), LL_OK);
    size_t prev = 0, n = strlen(text);
    for (int i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : n;
        assert_int_equal(ll_outparse_feed(op, text + prev, end - prev), LL_OK);
        prev = end;
    }
    assert_int_equal(ll_outparse_finish(op), LL_OK);
    int32_t nc;
    ll_outparse_calls(op, &nc);
    assert_int_equal(nc, c->n_calls);
    ll_outparse_free(op);
}

static void parse_all(const char *text, int think, const cJSON *tools, collected *c) {
    parse_cuts(text, NULL, 0, think, tools, c);
}

static void assert_same(const collected *a, const collected *b, const char *what) {
    if (strcmp(a->reasoning, b->reasoning) || strcmp(a->content, b->content) || a->n_calls != b->n_calls)
        fail_msg("%s: reasoning [%s] vs [%s], content [%s] vs [%s], calls %d vs %d", what, a->reasoning,
                 b->reasoning, a->content, b->content, a->n_calls, b->n_calls);
    for (int i = 0; i < a->n_calls; i++) {
        assert_string_equal(a->names[i], b->names[i]);
        assert_string_equal(a->args[i], b->args[i]);
    }
}

/* Every single cut position and byte-by-byte feeding give the same result as one piece. */
static void check_split_invariance(const char *text, int think, const cJSON *tools) {
    collected whole, part;
    parse_all(text, think, tools, &whole);
    size_t n = strlen(text);
    for (size_t cut = 1; cut < n; cut++) {
        parse_cuts(text, &cut, 1, think, tools, &part);
        char what[64];
        snprintf(what, sizeof(what), "cut at %zu", cut);
        assert_same(&whole, &part, what);
    }
    size_t *cuts = malloc(n * sizeof(size_t));
    for (size_t i = 0; i + 1 < n; i++) cuts[i] = i + 1;
    parse_cuts(text, cuts, (int)n - 1, think, tools, &part);
    assert_same(&whole, &part, "byte by byte");
    free(cuts);
}

static cJSON *tools_json(void) {
    const char *js =
        "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"},"
        "\"scale\":{\"type\":\"number\"},\"metric\":{\"type\":\"boolean\"},"
        "\"opts\":{\"type\":\"object\"},\"hours\":{\"type\":\"array\"},"
        "\"note\":{\"type\":[\"string\",\"null\"]},\"label\":{\"type\":\"string\"},"
        "\"limit\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"null\"}]},"
        "\"ratio\":{\"type\":[\"number\",\"null\"]}}}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"write_file\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"path\":{\"type\":\"string\"},\"content\":{\"type\":\"string\"}}}}}]";
    cJSON *j = cJSON_Parse(js);
    assert_non_null(j);
    return j;
}

/* ---------------------------------------------------------------- reasoning */

static void test_reasoning_split(void **state) {
    (void)state;
    collected c;
    const char *t1 = "Let me think.\nStep 2.\n</think>\n\nThe answer is 4.";
    parse_all(t1, 1, NULL, &c);
    assert_string_equal(c.reasoning, "Let me think.\nStep 2.");
    assert_string_equal(c.content, "The answer is 4.");
    check_split_invariance(t1, 1, NULL);

    const char *t2 = "\n<think>\nfoo bar\n</think>\n\nbaz";
    parse_all(t2, 0, NULL, &c); /* the model opened the reasoning itself */
    assert_string_equal(c.reasoning, "foo bar");
    assert_string_equal(c.content, "baz");
    check_split_invariance(t2, 0, NULL);

    parse_all("Answer: <think> is a tag. </think> too", 0, NULL, &c);
    assert_string_equal(c.reasoning, "");
    assert_string_equal(c.content, "Answer: <think> is a tag. </think> too");

    parse_all("cut off while thinking </thi", 1, NULL, &c); /* no </think>: all reasoning */
    assert_string_equal(c.reasoning, "cut off while thinking </thi");
    assert_string_equal(c.content, "");

    parse_all("a < b and c <th and </think", 0, NULL, &c);
    assert_string_equal(c.content, "a < b and c <th and </think");
}

static void test_no_half_tags_streamed(void **state) {
    (void)state;
    /* feed the closing tag in pieces: nothing after "reason" may appear before it resolves */
    collected c;
    memset(&c, 0, sizeof(c));
    ll_outparse_params p = {1, 1, NULL};
    ll_outparse *op;
    assert_int_equal(ll_outparse_new(&p, on_event, &c, &op), LL_OK);
    assert_int_equal(ll_outparse_feed(op, "reason </th", 11), LL_OK);
    assert_string_equal(c.reasoning, "reason");
    assert_int_equal(ll_outparse_feed(op, "ink>\nHi <tool_", 14), LL_OK);
    assert_string_equal(c.reasoning, "reason");
    assert_string_equal(c.content, "Hi");
    assert_int_equal(ll_outparse_feed(op, "callx", 5), LL_OK); /* not a tag after all */
    assert_string_equal(c.content, "Hi <tool_callx");
    ll_outparse_free(op);
}

/* ---------------------------------------------------------------- tool calls */

static const char *CALL1 =
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";

static void test_single_call(void **state) {
    (void)state;
    cJSON *tools = tools_json();
    collected c;
    parse_all(CALL1, 0, tools, &c);
    assert_int_equal(c.n_calls, 1);
    assert_string_equal(c.names[0], "get_weather");
    assert_string_equal(c.args[0], "{\"city\":\"Paris\",\"days\":3}");
    assert_string_equal(c.content, "");
    check_split_invariance(CALL1, 0, tools);
    /* without a schema every value is a string */
    parse_all(CALL1, 0, NULL, &c);
    assert_string_equal(c.args[0], "{\"city\":\"Paris\",\"days\":\"3\"}");
    cJSON_Delete(tools);
}

static void test_multiple_calls_with_reasoning(void **state) {
    (void)state;
    cJSON *tools = tools_json();
    char text[2048];
    snprintf(text, sizeof(text),
             "I should look it up.\n</think>\n\nLet me check.\n\n%s\n%s\n<tool_call>\n<function=write_file>\n"
             "<parameter=path>\n/tmp/a.txt\n</parameter>\n<parameter=content>\nline 1\n\n  line 3 <b>x</b>\n"
             "</tool_call> inside is fine\n</parameter>\n</function>\n</tool_call>\n",
             CALL1, CALL1);
    collected c;
    parse_all(text, 1, tools, &c);
    assert_string_equal(c.reasoning, "I should look it up.");
    assert_string_equal(c.content, "Let me check.");
    assert_int_equal(c.n_calls, 3);
    assert_string_equal(c.args[1], "{\"city\":\"Paris\",\"days\":3}");
    assert_string_equal(c.names[2], "write_file");
    assert_string_equal(c.args[2], "{\"path\":\"/tmp/a.txt\",\"content\":\"line 1\\n\\n  line 3 <b>x</b>\\n"
                                   "</tool_call> inside is fine\"}");
    check_split_invariance(text, 1, tools);
    cJSON_Delete(tools);
}

static void test_typed_arguments(void **state) {
    (void)state;
    cJSON *tools = tools_json();
    const char *text =
        "<tool_call>\n<function=get_weather>\n"
        "<parameter=days>\n 0042 \n</parameter>\n"
        "<parameter=scale>\n2.5\n</parameter>\n"
        "<parameter=metric>\nTrue\n</parameter>\n"
        "<parameter=opts>\n{\"a\": [1, 2], \"b\": null}\n</parameter>\n"
        "<parameter=hours>\n[1,2,3]\n</parameter>\n"
        "<parameter=note>\nNone\n</parameter>\n"
        "<parameter=label>\nnull\n</parameter>\n"
        "<parameter=limit>\n12345678901234567890123\n</parameter>\n"
        "<parameter=ratio>\n3.0\n</parameter>\n"
        "<parameter=city>\n\n  two leading newlines\n\n</parameter>\n"
        "<parameter=unknown>\n7\n</parameter>\n"
        "</function>\n</tool_call>";
    collected c;
    parse_all(text, 0, tools, &c);
    assert_int_equal(c.n_calls, 1);
    assert_string_equal(c.args[0], "{\"days\":42,\"scale\":2.5,\"metric\":true,\"opts\":{\"a\":[1,2],\"b\":null},"
                                   "\"hours\":[1,2,3],\"note\":null,\"label\":\"null\","
                                   "\"limit\":12345678901234567890123,\"ratio\":3,"
                                   "\"city\":\"\\n  two leading newlines\\n\",\"unknown\":\"7\"}");
    /* values that do not parse as their type stay strings */
    const char *bad =
        "<tool_call>\n<function=get_weather>\n"
        "<parameter=days>\n3 days\n</parameter>\n<parameter=scale>\n0x10\n</parameter>\n"
        "<parameter=metric>\nyes\n</parameter>\n<parameter=opts>\n{broken\n</parameter>\n"
        "<parameter=limit>\nnull\n</parameter>\n<parameter=scale>\nnan\n</parameter>\n"
        "<parameter=days>\n-0\n</parameter>\n"
        "</function>\n</tool_call>";
    parse_all(bad, 0, tools, &c);
    assert_int_equal(c.n_calls, 1);
    /* repeated names: the last wins (and moves to the end) */
    assert_string_equal(c.args[0], "{\"metric\":\"yes\",\"opts\":\"{broken\",\"limit\":null,\"scale\":\"nan\","
                                   "\"days\":0}");
    /* the result is valid JSON */
    cJSON *j = cJSON_Parse(c.args[0]);
    assert_non_null(j);
    cJSON_Delete(j);
    cJSON_Delete(tools);
}

/* ---------------------------------------------------------------- malformed */

static void test_malformed(void **state) {
    (void)state;
    cJSON *tools = tools_json();
    collected c;
    struct {
        const char *text;
        const char *content;
        int n_calls;
        const char *args0;
    } cases[] = {
        /* no <function=: the tag is text */
        {"<tool_call>\nhello world</tool_call> after", "<tool_call>\nhello world</tool_call> after", 0, NULL},
        /* missing </function> */
        {"<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</tool_call>", "", 1, "{\"a\":\"1\"}"},
        /* missing </parameter>, then another parameter */
        {"<tool_call>\n<function=f>\n<parameter=a>\n1\n<parameter=b>\n2\n</parameter>\n</function>\n</tool_call>",
         "", 1, "{\"a\":\"1\",\"b\":\"2\"}"},
        /* missing </parameter> at the end of the call */
        {"<tool_call>\n<function=f>\n<parameter=a>\nx y\n</function>\n</tool_call>\nbye", "bye", 1,
         "{\"a\":\"x y\"}"},
        /* cut inside a value: never a call */
        {"ok <tool_call>\n<function=f>\n<parameter=a>\nsome partial",
         "ok<tool_call>\n<function=f>\n<parameter=a>\nsome partial", 0, NULL},
        /* cut inside a tag name */
        {"<tool_call>\n<function=get_wea", "<tool_call>\n<function=get_wea", 0, NULL},
        /* cut between parameters: every parameter complete, so it is a call */
        {"<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n", "", 1, "{\"a\":\"1\"}"},
        {"<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</func", "", 1, "{\"a\":\"1\"}"},
        /* junk between calls is content */
        {"<tool_call>\n<function=f>\n</function>\n</tool_call>\nblah blah\n<tool_call>\n<function=g>\n</function>\n"
         "</tool_call>",
         "blah blah", 2, "{}"},
        /* text after </function> that is not </tool_call> */
        {"<tool_call>\n<function=f>\n</function> trailing", "trailing", 1, "{}"},
        /* template junk as a name */
        {"<tool_call>\n<function={{ tc.name }}>\n</function>\n</tool_call>",
         "<tool_call>\n<function={{ tc.name }}>\n</function>\n</tool_call>", 0, NULL},
        /* junk inside the function body */
        {"<tool_call>\n<function=f>\nrandom words\n</function>\n</tool_call>",
         "<tool_call>\n<function=f>\nrandom words\n</function>\n</tool_call>", 0, NULL},
        /* a lone tag at the end */
        {"text <tool_call>", "text<tool_call>", 0, NULL},
        {"<tool_call>", "<tool_call>", 0, NULL},
        /* empty names */
        {"<tool_call><function=></function></tool_call>", "<tool_call><function=></function></tool_call>", 0, NULL},
        {"<tool_call><function=f><parameter=>1</parameter></function></tool_call>",
         "<tool_call><function=f><parameter=>1</parameter></function></tool_call>", 0, NULL},
        /* a second <tool_call> inside a bad one is parsed on its own */
        {"<tool_call> oops <tool_call><function=f></function></tool_call>", "<tool_call> oops", 1, "{}"},
        /* no newlines at all */
        {"<tool_call><function=f><parameter=a>v</parameter></function></tool_call>", "", 1, "{\"a\":\"v\"}"},
    };
    for (size_t i = 0; i < LL_ARRAY_LEN(cases); i++) {
        parse_all(cases[i].text, 0, tools, &c);
        if (strcmp(c.content, cases[i].content) != 0 || c.n_calls != cases[i].n_calls)
            fail_msg("case %zu: content [%s] (want [%s]), %d calls (want %d)", i, c.content, cases[i].content,
                     c.n_calls, cases[i].n_calls);
        if (cases[i].args0) assert_string_equal(c.args[0], cases[i].args0);
        check_split_invariance(cases[i].text, 0, tools);
    }
    /* tools disabled: everything is content */
    memset(&c, 0, sizeof(c));
    ll_outparse_params p = {0, 0, NULL};
    ll_outparse *op;
    assert_int_equal(ll_outparse_new(&p, on_event, &c, &op), LL_OK);
    assert_int_equal(ll_outparse_feed(op, CALL1, strlen(CALL1)), LL_OK);
    assert_int_equal(ll_outparse_finish(op), LL_OK);
    assert_string_equal(c.content, CALL1);
    assert_int_equal(c.n_calls, 0);
    ll_outparse_free(op);
    cJSON_Delete(tools);
}

static void test_long_value_streams_linearly(void **state) {
    (void)state;
    /* a 200 KB value fed 3 bytes at a time: must not re-scan the value on every delta */
    const char *head = "<tool_call>\n<function=write_file>\n<parameter=content>\n";
    const char *tail = "\n</parameter>\n</function>\n</tool_call>";
    size_t vn = 200000, hn = strlen(head), tn = strlen(tail);
    char *text = malloc(hn + vn + tn + 1);
    memcpy(text, head, hn);
    for (size_t i = 0; i < vn; i++) text[hn + i] = "abc <x>\n"[i % 8];
    memcpy(text + hn + vn, tail, tn + 1);
    collected *c = calloc(1, sizeof(collected));
    ll_outparse_params p = {0, 1, NULL};
    ll_outparse *op;
    assert_int_equal(ll_outparse_new(&p, on_event, c, &op), LL_OK);
    double t0 = ll_time_sec();
    size_t n = strlen(text);
    for (size_t i = 0; i < n; i += 3) assert_int_equal(ll_outparse_feed(op, text + i, LL_MIN(3, n - i)), LL_OK);
    assert_int_equal(ll_outparse_finish(op), LL_OK);
    double sec = ll_time_sec() - t0;
    int32_t nc;
    const ll_tool_call *calls = ll_outparse_calls(op, &nc);
    assert_int_equal(nc, 1);
    cJSON *j = cJSON_Parse(calls[0].arguments);
    assert_non_null(j);
    const cJSON *v = cJSON_GetObjectItem(j, "content");
    assert_int_equal(strlen(v->valuestring), vn);
    assert_memory_equal(v->valuestring, text + hn, vn);
    cJSON_Delete(j);
    print_message("200 KB value in 3-byte deltas: %.3f s\n", sec);
    assert_true(sec < 5.0); /* quadratic re-scanning would take minutes */
    ll_outparse_free(op);
    free(c);
    free(text);
}

/* ---------------------------------------------------------------- tag soup */

static void test_tag_soup(void **state) {
    (void)state;
    static const char *frags[] = {"<tool_call>", "</tool_call>", "<function=f>", "<function=g h>", "</function>",
                                  "<parameter=x>", "<parameter=y>", "</parameter>", "<think>", "</think>",
                                  "\n", " ", "abc", "<", ">", "</", "<tool_", "3", "\xc3\xa9", "{\"k\":1}"};
    cJSON *tools = cJSON_Parse("[{\"function\":{\"name\":\"f\",\"parameters\":{\"properties\":"
                               "{\"x\":{\"type\":\"integer\"},\"y\":{\"type\":\"object\"}}}}}]");
    ll_rng r;
    ll_rng_seed(&r, 2024);
    char text[512];
    collected whole, part;
    int with_calls = 0, with_reasoning = 0;
    for (int trial = 0; trial < 1500; trial++) {
        /* half the trials: random fragments; the other half: a well-formed output (reasoning,
         * content, calls) with up to three random edits (delete, insert, swap a fragment) */
        const char *seq[64];
        int k = 0;
        if (trial & 1) {
            static const char *skel[] = {"abc", "</think>", "\n", "abc", "<tool_call>", "\n", "<function=f>", "\n",
                                         "<parameter=x>", "\n", "3", "\n", "</parameter>", "\n", "<parameter=y>",
                                         "{\"k\":1}", "</parameter>", "</function>", "\n", "</tool_call>", "abc",
                                         "<tool_call>", "<function=f>", "<parameter=x>", "abc", "</parameter>",
                                         "</function>", "</tool_call>"};
            for (size_t i = 0; i < LL_ARRAY_LEN(skel); i++) seq[k++] = skel[i];
            int edits = (int)(ll_rng_next(&r) % 4);
            for (int e = 0; e < edits; e++) {
                int a = (int)(ll_rng_next(&r) % (uint64_t)k), b = (int)(ll_rng_next(&r) % (uint64_t)k);
                switch (ll_rng_next(&r) % 3) {
                case 0: memmove(&seq[a], &seq[a + 1], (size_t)(k - a - 1) * sizeof(seq[0])); k--; break;
                case 1:
                    if (k < 63) {
                        memmove(&seq[a + 1], &seq[a], (size_t)(k - a) * sizeof(seq[0]));
                        seq[a] = frags[ll_rng_next(&r) % LL_ARRAY_LEN(frags)];
                        k++;
                    }
                    break;
                default: { const char *t = seq[a]; seq[a] = seq[b]; seq[b] = t; }
                }
            }
        } else {
            k = 1 + (int)(ll_rng_next(&r) % 24);
            for (int i = 0; i < k; i++) seq[i] = frags[ll_rng_next(&r) % LL_ARRAY_LEN(frags)];
        }
        size_t n = 0;
        for (int i = 0; i < k; i++) {
            size_t fl = strlen(seq[i]);
            if (n + fl >= sizeof(text)) break;
            memcpy(text + n, seq[i], fl);
            n += fl;
        }
        text[n] = 0;
        int think = (int)(ll_rng_next(&r) & 1);
        parse_all(text, think, tools, &whole);
        with_calls += whole.n_calls > 0;
        with_reasoning += whole.rl > 0;
        for (int s = 0; s < 4; s++) {
            size_t cuts[8];
            int nc = 0;
            for (int i = 0; i < 8 && n > 1; i++) {
                size_t cpos = 1 + ll_rng_next(&r) % (n - 1);
                if (nc == 0 || cpos > cuts[nc - 1]) cuts[nc++] = cpos;
            }
            parse_cuts(text, cuts, nc, think, tools, &part);
            assert_same(&whole, &part, text);
        }
        /* every call's arguments are a JSON object */
        for (int i = 0; i < whole.n_calls; i++) {
            cJSON *j = cJSON_Parse(whole.args[i]);
            if (!cJSON_IsObject(j)) fail_msg("arguments [%s] from [%s]", whole.args[i], text);
            cJSON_Delete(j);
        }
        /* nothing is lost except tags and whitespace: every non-space, non-tag byte of the input
         * shows up somewhere (reasoning, content or a call) — checked via the 'abc' fragments */
        size_t in_abc = 0, out_abc = 0;
        for (const char *p = text; (p = strstr(p, "abc")); p += 3) in_abc++;
        for (const char *p = whole.content; (p = strstr(p, "abc")); p += 3) out_abc++;
        for (const char *p = whole.reasoning; (p = strstr(p, "abc")); p += 3) out_abc++;
        for (int i = 0; i < whole.n_calls; i++)
            for (const char *p = whole.args[i]; (p = strstr(p, "abc")); p += 3) out_abc++;
        if (out_abc != in_abc) fail_msg("'abc' count changed: %zu -> %zu in [%s]", in_abc, out_abc, text);
    }
    print_message("tag soup: %d of 1500 outputs had tool calls, %d reasoning\n", with_calls, with_reasoning);
    assert_true(with_calls > 300 && with_reasoning > 300); /* the soup does exercise the parser */
    cJSON_Delete(tools);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reasoning_split),
        cmocka_unit_test(test_no_half_tags_streamed),
        cmocka_unit_test(test_single_call),
        cmocka_unit_test(test_multiple_calls_with_reasoning),
        cmocka_unit_test(test_typed_arguments),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_long_value_streams_linearly),
        cmocka_unit_test(test_tag_soup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
