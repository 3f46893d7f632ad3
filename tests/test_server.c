/*
 * test_server.c — the server's pure layers: request parsing and validation (api.c), response and
 * SSE building (resp.c), the job queue, JSON escaping and the metrics text. The HTTP glue with a
 * real engine is covered end to end by tests/py/test_server.py.
 */
#include <math.h>
#include <pthread.h>

#include "testutil.h"

#include "server/api.h"
#include "server/jobq.h"
#include "server/metrics.h"
#include "server/resp.h"

static const ll_api_limits LIM = {"qwen-test", "alias-x", 4096, 1234, NULL};

/* ------------------------------------------------------------------ strbuf / UTF-8 */

static void test_json_escape(void **state) {
    (void)state;
    ll_strbuf b = {0};
    const char in[] = "a\"b\\c\n\t\x01\x7f" "é€😀";
    ll_strbuf_json_str(&b, in, sizeof(in) - 1);
    assert_string_equal(b.data, "\"a\\\"b\\\\c\\n\\t\\u0001\\u007f" "é€😀\"");
    /* invalid bytes become U+FFFD, so the output always parses */
    ll_strbuf_clear(&b);
    const char bad[] = "x\xff" "y\xc3" "z\xed\xa0\x80" "w\xe0\x80\x80";
    ll_strbuf_json_str(&b, bad, sizeof(bad) - 1);
    cJSON *v = cJSON_Parse(b.data);
    assert_non_null(v);
    assert_string_equal(v->valuestring, "x\xef\xbf\xbdy\xef\xbf\xbdz\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdw"
                                        "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    cJSON_Delete(v);
    ll_strbuf_free(&b);
}

static void test_utf8_validation(void **state) {
    (void)state;
    assert_int_equal(ll_utf8_find_invalid("abc", 3), 3);
    assert_int_equal(ll_utf8_find_invalid("a\xc3\xa9", 3), 3);
    assert_int_equal(ll_utf8_find_invalid("a\xc0\xaf", 3), 1);         /* overlong '/' */
    assert_int_equal(ll_utf8_find_invalid("ab\xed\xa0\x80", 5), 2);    /* surrogate */
    assert_int_equal(ll_utf8_find_invalid("\xf4\x90\x80\x80", 4), 0);  /* > U+10FFFF */
    assert_int_equal(ll_utf8_find_invalid("\xf0\x9f\x98", 3), 0);      /* truncated */
    assert_int_equal(ll_utf8_find_invalid("\xf0\x9f\x98\x80", 4), 4);
}

static void test_strbuf_ops(void **state) {
    (void)state;
    ll_strbuf b = {0};
    for (int i = 0; i < 1000; i++) ll_strbuf_printf(&b, "%d,", i);
    assert_int_equal(b.len, strlen(b.data));
    assert_memory_equal(b.data, "0,1,2,", 6);
    ll_strbuf_consume(&b, 4);
    assert_memory_equal(b.data, "2,3,", 4);
    ll_strbuf_clear(&b);
    ll_strbuf_json_num(&b, NAN, -9999);
    ll_strbuf_putc(&b, ' ');
    ll_strbuf_json_num(&b, -0.25, 0);
    ll_strbuf_putc(&b, ' ');
    ll_strbuf_json_num(&b, 42, 0);
    assert_string_equal(b.data, "-9999 -0.25 42");
    ll_strbuf_free(&b);
}

/* ------------------------------------------------------------------ request parsing */

static int parse(ll_api_kind kind, const char *body, ll_api_request *r, ll_api_error *e) {
    return ll_api_parse(kind, body, strlen(body), &LIM, r, e);
}

/* Asserts that `body` is rejected with `status` and the error's param equal to `param`. */
static void expect_error(ll_api_kind kind, const char *body, int status, const char *param) {
    ll_api_request r;
    ll_api_error e;
    memset(&e, 0, sizeof(e));
    int rc = parse(kind, body, &r, &e);
    if (rc != -1 || e.status != status || strcmp(e.param, param)) {
        print_error("body %s: rc %d status %d param '%s' message '%s'\n", body, rc, e.status, e.param, e.message);
        if (rc == 0) ll_api_request_free(&r);
        fail();
    }
    assert_true(strlen(e.message) > 0);
    if (param[0] && !strstr(e.message, param)) fail_msg("message '%s' does not name %s", e.message, param);
}

static void test_chat_minimal(void **state) {
    (void)state;
    ll_api_request r;
    ll_api_error e;
    assert_int_equal(parse(LL_API_CHAT, "{\"model\":\"qwen-test\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                                        "\"some_unknown_field\":{\"x\":[1,2]},\"user\":\"u1\",\"metadata\":null}",
                           &r, &e),
                     0);
    assert_string_equal(r.model, "qwen-test");
    assert_false(r.stream);
    assert_int_equal(r.gen.max_tokens, 0); /* chat: until EOS / context */
    assert_non_null(r.gen.messages);
    assert_int_equal(cJSON_GetArraySize(r.gen.messages), 1);
    assert_null(r.gen.prompt);
    assert_null(r.gen.tools);
    assert_int_equal(r.gen.sampling.seed, 1234); /* the caller's default seed */
    assert_float_equal(r.gen.sampling.temperature, 1.0, 0);
    assert_int_equal(r.gen.n_stop, 0);
    ll_api_request_free(&r);
    /* no model: served model echoed; alias accepted */
    assert_int_equal(parse(LL_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &r, &e), 0);
    assert_string_equal(r.model, "qwen-test");
    ll_api_request_free(&r);
    assert_int_equal(parse(LL_API_CHAT, "{\"model\":\"alias-x\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &r, &e), 0);
    assert_string_equal(r.model, "alias-x");
    ll_api_request_free(&r);
}

static void test_chat_messages_normalized(void **state) {
    (void)state;
    ll_api_request r;
    ll_api_error e;
    const char *body =
        "{\"messages\":[{\"role\":\"developer\",\"content\":\"be brief\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"one\"},{\"type\":\"text\",\"text\":\"two\"}]},"
        "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
        "\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"42\"}]}";
    assert_int_equal(parse(LL_API_CHAT, body, &r, &e), 0);
    const cJSON *m = r.gen.messages;
    assert_int_equal(cJSON_GetArraySize(m), 4);
    cJSON *m0 = cJSON_GetArrayItem(m, 0), *m1 = cJSON_GetArrayItem(m, 1), *m2 = cJSON_GetArrayItem(m, 2),
          *m3 = cJSON_GetArrayItem(m, 3);
    assert_string_equal(cJSON_GetObjectItem(m0, "role")->valuestring, "system");
    assert_string_equal(cJSON_GetObjectItem(m1, "content")->valuestring, "one\ntwo");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(m2, "content")));
    cJSON *call = cJSON_GetArrayItem(cJSON_GetObjectItem(m2, "tool_calls"), 0);
    assert_string_equal(cJSON_GetObjectItem(call, "id")->valuestring, "c1");
    /* arguments arrive as JSON text and reach the template as an object */
    cJSON *args = cJSON_GetObjectItem(cJSON_GetObjectItem(call, "function"), "arguments");
    assert_true(cJSON_IsObject(args));
    assert_int_equal(cJSON_GetObjectItem(args, "a")->valueint, 1);
    assert_string_equal(cJSON_GetObjectItem(m3, "tool_call_id")->valuestring, "c1");
    ll_api_request_free(&r);
}

static void test_chat_fields(void **state) {
    (void)state;
    ll_api_request r;
    ll_api_error e;
    const char *body =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true,\"stream_options\":{\"include_usage\":true},"
        "\"max_tokens\":100,\"max_completion_tokens\":50,\"temperature\":0.5,\"top_p\":0.9,\"top_k\":20,\"min_p\":0.05,"
        "\"presence_penalty\":0.5,\"frequency_penalty\":-0.5,\"repetition_penalty\":1.1,\"seed\":-1,"
        "\"stop\":[\"END\",\"\\n\\n\"],\"n\":1,\"logprobs\":true,\"top_logprobs\":3,\"logit_bias\":{\"42\":-100,\"7\":5},"
        "\"chat_template_kwargs\":{\"enable_thinking\":false},\"response_format\":{\"type\":\"text\"}}";
    assert_int_equal(parse(LL_API_CHAT, body, &r, &e), 0);
    assert_true(r.stream);
    assert_true(r.include_usage);
    assert_int_equal(r.gen.max_tokens, 50); /* max_completion_tokens wins */
    assert_float_equal(r.gen.sampling.temperature, 0.5, 1e-6);
    assert_float_equal(r.gen.sampling.top_p, 0.9, 1e-6);
    assert_int_equal(r.gen.sampling.top_k, 20);
    assert_float_equal(r.gen.sampling.min_p, 0.05, 1e-6);
    assert_float_equal(r.gen.sampling.presence_penalty, 0.5, 1e-6);
    assert_float_equal(r.gen.sampling.frequency_penalty, -0.5, 1e-6);
    assert_float_equal(r.gen.sampling.repetition_penalty, 1.1, 1e-6);
    assert_true(r.gen.sampling.seed == UINT64_MAX); /* -1 as a 64-bit pattern */
    assert_int_equal(r.gen.n_stop, 2);
    assert_string_equal(r.gen.stop[0], "END");
    assert_string_equal(r.gen.stop[1], "\n\n");
    assert_int_equal(r.gen.logprobs, 1);
    assert_int_equal(r.gen.top_logprobs, 3);
    assert_int_equal(r.gen.sampling.n_logit_bias, 2);
    int found42 = 0;
    for (int i = 0; i < 2; i++)
        if (r.gen.sampling.logit_bias[i].id == 42) {
            found42 = 1;
            assert_true(isinf(r.gen.sampling.logit_bias[i].bias) && r.gen.sampling.logit_bias[i].bias < 0);
        }
    assert_true(found42);
    assert_non_null(r.gen.template_kwargs);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(r.gen.template_kwargs, "enable_thinking")));
    ll_api_request_free(&r);
    /* single stop string; reasoning_effort none turns thinking off */
    assert_int_equal(parse(LL_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":\"###\","
                                        "\"reasoning_effort\":\"none\",\"seed\":7,\"max_tokens\":4096}",
                           &r, &e),
                     0);
    assert_int_equal(r.gen.n_stop, 1);
    assert_string_equal(r.gen.stop[0], "###");
    assert_int_equal(r.gen.sampling.seed, 7);
    assert_int_equal(r.gen.max_tokens, 4096);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(r.gen.template_kwargs, "enable_thinking")));
    ll_api_request_free(&r);
}

static void test_chat_tools(void **state) {
    (void)state;
    ll_api_request r;
    ll_api_error e;
    const char *tools = "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":"
                        "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}},"
                        "{\"type\":\"function\",\"function\":{\"name\":\"get_time\"}}]";
    char body[1024];
    snprintf(body, sizeof(body), "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s}", tools);
    assert_int_equal(parse(LL_API_CHAT, body, &r, &e), 0);
    assert_int_equal(cJSON_GetArraySize(r.gen.tools), 2); /* default tool_choice auto */
    ll_api_request_free(&r);
    snprintf(body, sizeof(body), "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s,\"tool_choice\":\"none\"}", tools);
    assert_int_equal(parse(LL_API_CHAT, body, &r, &e), 0);
    assert_null(r.gen.tools);
    ll_api_request_free(&r);
    snprintf(body, sizeof(body),
             "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s,\"tool_choice\":{\"type\":\"function\","
             "\"function\":{\"name\":\"get_time\"}}}",
             tools);
    assert_int_equal(parse(LL_API_CHAT, body, &r, &e), 0);
    assert_int_equal(cJSON_GetArraySize(r.gen.tools), 1);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(r.gen.tools, 0), "function"), "name")
                            ->valuestring,
                        "get_time");
    ll_api_request_free(&r);
    snprintf(body, sizeof(body),
             "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s,\"tool_choice\":{\"type\":\"function\","
             "\"function\":{\"name\":\"nope\"}}}",
             tools);
    expect_error(LL_API_CHAT, body, 400, "tool_choice.function.name");
    expect_error(LL_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"required\"}", 400,
                 "tool_choice");
    expect_error(LL_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\"}]}",
                 400, "tools[0].function");
    expect_error(LL_API_CHAT,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\",\"function\":"
                 "{\"name\":\"f\",\"parameters\":\"x\"}}]}",
                 400, "tools[0].function.parameters");
    expect_error(LL_API_CHAT,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"retrieval\",\"function\":"
                 "{\"name\":\"f\"}}]}",
                 400, "tools[0].type");
}

static void test_chat_errors(void **state) {
    (void)state;
    const ll_api_kind C = LL_API_CHAT;
    expect_error(C, "{\"messages\": [", 400, "");                  /* malformed */
    expect_error(C, "{\"messages\":[]} x", 400, "");               /* trailing data */
    expect_error(C, "[1,2]", 400, "");                             /* not an object */
    expect_error(C, "", 400, "");
    expect_error(C, "{}", 400, "messages");
    expect_error(C, "{\"messages\":[]}", 400, "messages");
    expect_error(C, "{\"messages\":\"hi\"}", 400, "messages");
    expect_error(C, "{\"messages\":[42]}", 400, "messages[0]");
    expect_error(C, "{\"messages\":[{\"content\":\"x\"}]}", 400, "messages[0].role");
    expect_error(C, "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", 400, "messages[0].role");
    expect_error(C, "{\"messages\":[{\"role\":\"user\"}]}", 400, "messages[0].content");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", 400, "messages[0].content");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":[{\"type\":"
                    "\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,AAAA\"}}]}]}",
                 400, "messages[1].content[0]");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}", 400,
                 "messages[0].content[0].text");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"model\":\"gpt-4\"}", 404, "model");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"model\":7}", 400, "model");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":\"hot\"}", 400, "temperature");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":3}", 400, "temperature");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_p\":0}", 400, "top_p");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_k\":1.5}", 400, "top_k");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":-5}", 400, "max_tokens");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":0}", 400, "max_tokens");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":1e12}", 400, "max_tokens");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_completion_tokens\":\"5\"}", 400,
                 "max_completion_tokens");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":2}", 400, "n");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":\"yes\"}", 400, "stream");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream_options\":{\"include_usage\":true}}",
                 400, "stream_options");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[\"a\",3]}", 400, "stop[1]");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":{}}", 400, "stop");
    expect_error(C,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\","
                 "\"7\",\"8\",\"9\",\"10\",\"11\",\"12\",\"13\",\"14\",\"15\",\"16\",\"17\"]}",
                 400, "stop");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}", 400, "top_logprobs");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,\"top_logprobs\":21}", 400,
                 "top_logprobs");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"abc\":1}}", 400,
                 "logit_bias.abc");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"5\":500}}", 400,
                 "logit_bias.5");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"seed\":1.5}", 400, "seed");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\"}}",
                 400, "response_format");
    expect_error(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"chat_template_kwargs\":[]}", 400,
                 "chat_template_kwargs");
    expect_error(C,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"chat_template_kwargs\":{\"enable_thinking\":\"no\"}}",
                 400, "chat_template_kwargs.enable_thinking");
    expect_error(C, "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"arguments\":\"{}\"}}]}]}",
                 400, "messages[0].tool_calls[0].function.name");
    expect_error(C, "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\","
                    "\"arguments\":\"{oops\"}}]}]}",
                 400, "messages[0].tool_calls[0].function.arguments");
}

static void test_body_checks(void **state) {
    (void)state;
    ll_api_error e;
    const char inv[] = "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}";
    assert_int_equal(ll_api_check_body(inv, sizeof(inv) - 1, &e), -1);
    assert_int_equal(e.status, 400);
    assert_non_null(strstr(e.message, "UTF-8"));
    assert_non_null(strstr(e.message, "offset 39"));
    const char nul_esc[] = "{\"a\":\"x\\u0000y\"}";
    assert_int_equal(ll_api_check_body(nul_esc, sizeof(nul_esc) - 1, &e), -1);
    assert_non_null(strstr(e.message, "NUL"));
    const char raw_nul[] = "{\"a\":\"x\0y\"}";
    assert_int_equal(ll_api_check_body(raw_nul, sizeof(raw_nul) - 1, &e), -1);
    /* an escaped backslash followed by the text u0000 is not a NUL */
    const char fine[] = "{\"a\":\"x\\\\u0000y\",\"b\":\"\\\"[[[[\"}";
    assert_int_equal(ll_api_check_body(fine, sizeof(fine) - 1, &e), 0);
    /* nesting: 64 levels fine, 65 refused (and brackets inside strings do not count) */
    char deep[256];
    size_t n = 0;
    for (int i = 0; i < 64; i++) deep[n++] = '[';
    for (int i = 0; i < 64; i++) deep[n++] = ']';
    assert_int_equal(ll_api_check_body(deep, n, &e), 0);
    n = 0;
    for (int i = 0; i < 65; i++) deep[n++] = '[';
    for (int i = 0; i < 65; i++) deep[n++] = ']';
    assert_int_equal(ll_api_check_body(deep, n, &e), -1);
    assert_non_null(strstr(e.message, "nested"));
    /* parse goes through the same checks */
    ll_api_request r;
    assert_int_equal(ll_api_parse(LL_API_CHAT, inv, sizeof(inv) - 1, &LIM, &r, &e), -1);
    assert_int_equal(e.status, 400);
}

static void test_completion_parse(void **state) {
    (void)state;
    ll_api_request r;
    ll_api_error e;
    const ll_api_kind P = LL_API_COMPLETION;
    assert_int_equal(parse(P, "{\"model\":\"qwen-test\",\"prompt\":\"Once upon\"}", &r, &e), 0);
    assert_string_equal(r.gen.prompt, "Once upon");
    assert_null(r.gen.messages);
    assert_int_equal(r.gen.max_tokens, 16); /* OpenAI's legacy default */
    ll_api_request_free(&r);
    assert_int_equal(parse(P, "{\"prompt\":[1,2,3],\"max_tokens\":5,\"logprobs\":2}", &r, &e), 0);
    assert_null(r.gen.prompt);
    assert_int_equal(r.gen.n_prompt_ids, 3);
    assert_int_equal(r.gen.prompt_ids[2], 3);
    assert_int_equal(r.gen.max_tokens, 5);
    assert_true(r.legacy_logprobs);
    assert_int_equal(r.gen.logprobs, 1);
    assert_int_equal(r.gen.top_logprobs, 2);
    ll_api_request_free(&r);
    assert_int_equal(parse(P, "{\"prompt\":[[9,8]]}", &r, &e), 0);
    assert_int_equal(r.gen.n_prompt_ids, 2);
    ll_api_request_free(&r);
    assert_int_equal(parse(P, "{\"prompt\":[\"only one\"]}", &r, &e), 0);
    assert_string_equal(r.gen.prompt, "only one");
    ll_api_request_free(&r);
    expect_error(P, "{}", 400, "prompt");
    expect_error(P, "{\"prompt\":\"\"}", 400, "prompt");
    expect_error(P, "{\"prompt\":[]}", 400, "prompt");
    expect_error(P, "{\"prompt\":[\"a\",\"b\"]}", 400, "prompt");
    expect_error(P, "{\"prompt\":[1,-2]}", 400, "prompt[1]");
    expect_error(P, "{\"prompt\":[1,\"x\"]}", 400, "prompt[1]");
    expect_error(P, "{\"prompt\":7}", 400, "prompt");
    expect_error(P, "{\"prompt\":\"x\",\"echo\":true}", 400, "echo");
    expect_error(P, "{\"prompt\":\"x\",\"suffix\":\"y\"}", 400, "suffix");
    expect_error(P, "{\"prompt\":\"x\",\"best_of\":3}", 400, "best_of");
    expect_error(P, "{\"prompt\":\"x\",\"logprobs\":6}", 400, "logprobs");
}

static void test_tokenize_parse(void **state) {
    (void)state;
    ll_api_tokenize t;
    ll_api_error e;
    const char *b = "{\"content\":\"hello\",\"with_pieces\":true}";
    assert_int_equal(ll_api_parse_tokenize(b, strlen(b), &t, &e), 0);
    assert_string_equal(t.content, "hello");
    assert_int_equal(t.len, 5);
    assert_true(t.with_pieces);
    cJSON_Delete(t.doc);
    b = "{\"content\":3}";
    assert_int_equal(ll_api_parse_tokenize(b, strlen(b), &t, &e), -1);
    assert_string_equal(e.param, "content");
    int32_t *ids;
    int32_t n;
    b = "{\"tokens\":[5,6]}";
    assert_int_equal(ll_api_parse_detokenize(b, strlen(b), &ids, &n, &e), 0);
    assert_int_equal(n, 2);
    assert_int_equal(ids[1], 6);
    ll_free(ids);
    b = "{\"tokens\":[5,\"x\"]}";
    assert_int_equal(ll_api_parse_detokenize(b, strlen(b), &ids, &n, &e), -1);
    assert_string_equal(e.param, "tokens[1]");
    b = "{\"tokens\":[]}";
    assert_int_equal(ll_api_parse_detokenize(b, strlen(b), &ids, &n, &e), 0);
    assert_int_equal(n, 0);
    ll_free(ids);
}

static void test_error_json(void **state) {
    (void)state;
    ll_api_error e;
    ll_api_error_set(&e, 400, "invalid_request_error", NULL, "messages[0].role", "messages[0].role: bad \"x\"");
    ll_strbuf b = {0};
    ll_api_error_json(&e, &b);
    cJSON *v = cJSON_Parse(b.data);
    assert_non_null(v);
    cJSON *err = cJSON_GetObjectItem(v, "error");
    assert_string_equal(cJSON_GetObjectItem(err, "message")->valuestring, "messages[0].role: bad \"x\"");
    assert_string_equal(cJSON_GetObjectItem(err, "type")->valuestring, "invalid_request_error");
    assert_string_equal(cJSON_GetObjectItem(err, "param")->valuestring, "messages[0].role");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(err, "code")));
    cJSON_Delete(v);
    ll_strbuf_free(&b);
    ll_api_error_from_status(&e, LL_ERR_OVERFLOW, "prompt (5000) + max_tokens (100) exceed the context (4096)");
    assert_int_equal(e.status, 400);
    assert_string_equal(e.code, "context_length_exceeded");
    ll_api_error_from_status(&e, LL_ERR_INTERNAL, "secret detail");
    assert_int_equal(e.status, 500);
    assert_null(strstr(e.message, "secret")); /* internal details stay in the log */
}

/* ------------------------------------------------------------------ responses */

/* token id -> bytes for the tests: id 1 "Hel", 2 "lo", 3 a lone 0xE2 (part of a character) */
static int test_token_bytes(void *ud, int32_t id, ll_strbuf *out) {
    (void)ud;
    static const char *pieces[] = {"", "Hel", "lo", "\xe2"};
    if (id < 0 || id > 3) return -1;
    ll_strbuf_puts(out, pieces[id]);
    return 0;
}

static ll_api_request req_of(ll_api_kind kind, const char *body) {
    ll_api_request r;
    ll_api_error e;
    if (ll_api_parse(kind, body, strlen(body), &LIM, &r, &e)) fail_msg("parse: %s", e.message);
    return r;
}

static ll_gen_event text_ev(ll_gen_event_kind k, const char *s) {
    ll_gen_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.kind = k;
    ev.text = s;
    ev.len = strlen(s);
    return ev;
}

static void test_resp_chat_full(void **state) {
    (void)state;
    ll_api_request req = req_of(LL_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,"
                                             "\"top_logprobs\":2}");
    ll_resp r;
    ll_resp_init(&r, &req, "abc123", 1700000000, test_token_bytes, NULL);
    ll_strbuf out = {0};
    ll_gen_event ev = text_ev(LL_GEN_REASONING, "let me think");
    ll_resp_event(&r, &ev, &out);
    ll_logprobs lp[2];
    memset(lp, 0, sizeof(lp));
    lp[0].chosen = (ll_token_logprob){1, -0.5f};
    lp[0].n_top = 3;
    lp[0].top[0] = (ll_token_logprob){1, -0.5f};
    lp[0].top[1] = (ll_token_logprob){2, -1.5f};
    lp[0].top[2] = (ll_token_logprob){3, -2.5f};
    lp[1].chosen = (ll_token_logprob){2, -INFINITY};
    ev = text_ev(LL_GEN_CONTENT, "Hello");
    ev.logprobs = lp;
    ev.n_logprobs = 2;
    ll_resp_event(&r, &ev, &out);
    ev = text_ev(LL_GEN_CONTENT, " \"world\"\n");
    ll_resp_event(&r, &ev, &out);
    assert_int_equal(out.len, 0); /* nothing is sent before the end when not streaming */
    ll_gen_result res = {LL_FINISH_LENGTH, 12, 4, 7, 0, 0};
    ll_resp_finish(&r, &res, &out);
    cJSON *v = cJSON_Parse(out.data);
    assert_non_null(v);
    assert_string_equal(cJSON_GetObjectItem(v, "id")->valuestring, "chatcmpl-abc123");
    assert_string_equal(cJSON_GetObjectItem(v, "object")->valuestring, "chat.completion");
    assert_int_equal(cJSON_GetObjectItem(v, "created")->valuedouble, 1700000000);
    assert_string_equal(cJSON_GetObjectItem(v, "model")->valuestring, "qwen-test");
    cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(v, "choices"), 0);
    assert_string_equal(cJSON_GetObjectItem(c0, "finish_reason")->valuestring, "length");
    cJSON *msg = cJSON_GetObjectItem(c0, "message");
    assert_string_equal(cJSON_GetObjectItem(msg, "role")->valuestring, "assistant");
    assert_string_equal(cJSON_GetObjectItem(msg, "content")->valuestring, "Hello \"world\"\n");
    assert_string_equal(cJSON_GetObjectItem(msg, "reasoning_content")->valuestring, "let me think");
    assert_null(cJSON_GetObjectItem(msg, "tool_calls"));
    cJSON *lpc = cJSON_GetObjectItem(cJSON_GetObjectItem(c0, "logprobs"), "content");
    assert_int_equal(cJSON_GetArraySize(lpc), 2);
    cJSON *t0 = cJSON_GetArrayItem(lpc, 0), *t1 = cJSON_GetArrayItem(lpc, 1);
    assert_string_equal(cJSON_GetObjectItem(t0, "token")->valuestring, "Hel");
    assert_float_equal(cJSON_GetObjectItem(t0, "logprob")->valuedouble, -0.5, 1e-9);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(t0, "bytes")), 3);
    assert_int_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(t0, "bytes"), 0)->valueint, 'H');
    cJSON *tops = cJSON_GetObjectItem(t0, "top_logprobs");
    assert_int_equal(cJSON_GetArraySize(tops), 2); /* capped at the requested top_logprobs */
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(tops, 1), "token")->valuestring, "lo");
    assert_float_equal(cJSON_GetObjectItem(t1, "logprob")->valuedouble, -9999.0, 0); /* -inf is not JSON */
    cJSON *u = cJSON_GetObjectItem(v, "usage");
    assert_int_equal(cJSON_GetObjectItem(u, "prompt_tokens")->valueint, 12);
    assert_int_equal(cJSON_GetObjectItem(u, "completion_tokens")->valueint, 7);
    assert_int_equal(cJSON_GetObjectItem(u, "total_tokens")->valueint, 19);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(u, "prompt_tokens_details"), "cached_tokens")->valueint, 4);
    cJSON_Delete(v);
    ll_strbuf_free(&out);
    ll_resp_free(&r);
    ll_api_request_free(&req);
}

static void test_resp_tool_calls(void **state) {
    (void)state;
    ll_api_request req = req_of(LL_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}");
    ll_resp r;
    ll_resp_init(&r, &req, "ff00", 1, NULL, NULL);
    ll_strbuf out = {0};
    ll_gen_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.kind = LL_GEN_TOOL_CALL;
    ev.tool_index = 0;
    ev.tool_name = "get_weather";
    ev.tool_arguments = "{\"city\": \"Paris\"}";
    ll_resp_event(&r, &ev, &out);
    ev.tool_index = 1;
    ev.tool_name = "get_time";
    ev.tool_arguments = "{}";
    ll_resp_event(&r, &ev, &out);
    ll_gen_result res = {LL_FINISH_TOOL_CALLS, 3, 0, 9, 0, 0};
    ll_resp_finish(&r, &res, &out);
    cJSON *v = cJSON_Parse(out.data);
    assert_non_null(v);
    cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(v, "choices"), 0);
    assert_string_equal(cJSON_GetObjectItem(c0, "finish_reason")->valuestring, "tool_calls");
    cJSON *msg = cJSON_GetObjectItem(c0, "message");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(msg, "content")));
    cJSON *tc = cJSON_GetObjectItem(msg, "tool_calls");
    assert_int_equal(cJSON_GetArraySize(tc), 2);
    cJSON *t0 = cJSON_GetArrayItem(tc, 0), *t1 = cJSON_GetArrayItem(tc, 1);
    assert_string_equal(cJSON_GetObjectItem(t0, "type")->valuestring, "function");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(t0, "function"), "name")->valuestring, "get_weather");
    /* arguments is a JSON *string* that parses to the object */
    cJSON *args = cJSON_Parse(cJSON_GetObjectItem(cJSON_GetObjectItem(t0, "function"), "arguments")->valuestring);
    assert_string_equal(cJSON_GetObjectItem(args, "city")->valuestring, "Paris");
    cJSON_Delete(args);
    assert_string_not_equal(cJSON_GetObjectItem(t0, "id")->valuestring, cJSON_GetObjectItem(t1, "id")->valuestring);
    assert_null(cJSON_GetObjectItem(t0, "index")); /* index only in stream deltas */
    cJSON_Delete(v);
    ll_strbuf_free(&out);
    ll_resp_free(&r);
    ll_api_request_free(&req);
}

/* Splits SSE text into the payloads of its `data: ` events; checks the framing. */
static int sse_split(const char *text, char **payloads, int cap) {
    int n = 0;
    const char *p = text;
    while (*p) {
        assert_memory_equal(p, "data: ", 6);
        const char *end = strstr(p, "\n\n");
        assert_non_null(end);
        assert_true(n < cap);
        size_t len = (size_t)(end - p - 6);
        payloads[n] = malloc(len + 1);
        memcpy(payloads[n], p + 6, len);
        payloads[n][len] = 0;
        assert_null(strchr(payloads[n], '\n')); /* one line per event */
        n++;
        p = end + 2;
    }
    return n;
}

static void test_resp_chat_stream(void **state) {
    (void)state;
    ll_api_request req = req_of(LL_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true,"
                                             "\"stream_options\":{\"include_usage\":true}}");
    ll_resp r;
    ll_resp_init(&r, &req, "s1", 42, NULL, NULL);
    ll_strbuf out = {0};
    ll_resp_begin(&r, &out);
    ll_gen_event ev = text_ev(LL_GEN_REASONING, "hmm");
    ll_resp_event(&r, &ev, &out);
    ev = text_ev(LL_GEN_CONTENT, "Hi");
    ll_resp_event(&r, &ev, &out);
    memset(&ev, 0, sizeof(ev));
    ev.kind = LL_GEN_TOOL_CALL;
    ev.tool_name = "f";
    ev.tool_arguments = "{\"a\":1}";
    ll_resp_event(&r, &ev, &out);
    ll_gen_result res = {LL_FINISH_TOOL_CALLS, 5, 2, 3, 0, 0};
    ll_resp_finish(&r, &res, &out);
    char *pl[16];
    int n = sse_split(out.data, pl, 16);
    assert_int_equal(n, 7); /* role, reasoning, content, tool call, finish, usage, [DONE] */
    assert_string_equal(pl[6], "[DONE]");
    for (int i = 0; i < 6; i++) {
        cJSON *v = cJSON_Parse(pl[i]);
        assert_non_null(v);
        assert_string_equal(cJSON_GetObjectItem(v, "id")->valuestring, "chatcmpl-s1"); /* same id throughout */
        assert_string_equal(cJSON_GetObjectItem(v, "object")->valuestring, "chat.completion.chunk");
        assert_int_equal(cJSON_GetObjectItem(v, "created")->valueint, 42);
        cJSON *choices = cJSON_GetObjectItem(v, "choices");
        cJSON *usage = cJSON_GetObjectItem(v, "usage");
        if (i < 5) {
            assert_true(cJSON_IsNull(usage)); /* include_usage: null on every chunk but the last */
            cJSON *c0 = cJSON_GetArrayItem(choices, 0);
            cJSON *d = cJSON_GetObjectItem(c0, "delta");
            cJSON *fin = cJSON_GetObjectItem(c0, "finish_reason");
            if (i == 0) {
                assert_string_equal(cJSON_GetObjectItem(d, "role")->valuestring, "assistant");
                assert_string_equal(cJSON_GetObjectItem(d, "content")->valuestring, "");
            }
            if (i == 1) assert_string_equal(cJSON_GetObjectItem(d, "reasoning_content")->valuestring, "hmm");
            if (i == 2) assert_string_equal(cJSON_GetObjectItem(d, "content")->valuestring, "Hi");
            if (i == 3) {
                cJSON *tc = cJSON_GetArrayItem(cJSON_GetObjectItem(d, "tool_calls"), 0);
                assert_int_equal(cJSON_GetObjectItem(tc, "index")->valueint, 0);
                assert_non_null(cJSON_GetObjectItem(tc, "id"));
                assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(tc, "function"), "arguments")->valuestring,
                                    "{\"a\":1}");
            }
            if (i < 4) assert_true(cJSON_IsNull(fin));
            else {
                assert_string_equal(fin->valuestring, "tool_calls");
                assert_int_equal(cJSON_GetArraySize(d), 0);
            }
        } else {
            assert_int_equal(cJSON_GetArraySize(choices), 0);
            assert_int_equal(cJSON_GetObjectItem(usage, "total_tokens")->valueint, 8);
            assert_int_equal(
                cJSON_GetObjectItem(cJSON_GetObjectItem(usage, "prompt_tokens_details"), "cached_tokens")->valueint, 2);
        }
        cJSON_Delete(v);
    }
    for (int i = 0; i < n; i++) free(pl[i]);
    /* without include_usage: no usage key at all, no usage chunk */
    ll_resp_free(&r);
    ll_api_request_free(&req);
    req = req_of(LL_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true}");
    ll_resp_init(&r, &req, "s2", 42, NULL, NULL);
    ll_strbuf_clear(&out);
    ll_resp_begin(&r, &out);
    ll_resp_finish(&r, &res, &out);
    n = sse_split(out.data, pl, 16);
    assert_int_equal(n, 3);
    assert_null(strstr(out.data, "usage"));
    for (int i = 0; i < n; i++) free(pl[i]);
    /* an error after the stream started: in-band, then [DONE] */
    ll_strbuf_clear(&out);
    ll_api_error e;
    ll_api_error_set(&e, 500, "server_error", NULL, NULL, "boom");
    ll_resp_stream_error(&r, &e, &out);
    n = sse_split(out.data, pl, 16);
    assert_int_equal(n, 2);
    cJSON *v = cJSON_Parse(pl[0]);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(v, "error"), "message")->valuestring, "boom");
    cJSON_Delete(v);
    assert_string_equal(pl[1], "[DONE]");
    for (int i = 0; i < n; i++) free(pl[i]);
    ll_strbuf_free(&out);
    ll_resp_free(&r);
    ll_api_request_free(&req);
}

static void test_resp_completion(void **state) {
    (void)state;
    ll_api_request req = req_of(LL_API_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":1}");
    ll_resp r;
    ll_resp_init(&r, &req, "c1", 5, test_token_bytes, NULL);
    ll_strbuf out = {0};
    ll_logprobs lp[2];
    memset(lp, 0, sizeof(lp));
    lp[0].chosen = (ll_token_logprob){1, -0.25f};
    lp[0].n_top = 1;
    lp[0].top[0] = (ll_token_logprob){1, -0.25f};
    lp[1].chosen = (ll_token_logprob){2, -1.0f};
    lp[1].n_top = 1;
    lp[1].top[0] = (ll_token_logprob){3, -0.75f};
    ll_gen_event ev = text_ev(LL_GEN_CONTENT, "Hello");
    ev.logprobs = lp;
    ev.n_logprobs = 2;
    ll_resp_event(&r, &ev, &out);
    ll_gen_result res = {LL_FINISH_STOP, 1, 0, 2, 0, 0};
    ll_resp_finish(&r, &res, &out);
    cJSON *v = cJSON_Parse(out.data);
    assert_non_null(v);
    assert_string_equal(cJSON_GetObjectItem(v, "object")->valuestring, "text_completion");
    assert_string_equal(cJSON_GetObjectItem(v, "id")->valuestring, "cmpl-c1");
    cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(v, "choices"), 0);
    assert_string_equal(cJSON_GetObjectItem(c0, "text")->valuestring, "Hello");
    assert_string_equal(cJSON_GetObjectItem(c0, "finish_reason")->valuestring, "stop");
    cJSON *l = cJSON_GetObjectItem(c0, "logprobs");
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(l, "tokens"), 1)->valuestring, "lo");
    assert_float_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(l, "token_logprobs"), 0)->valuedouble, -0.25, 1e-9);
    assert_int_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(l, "text_offset"), 1)->valueint, 3);
    cJSON *top1 = cJSON_GetArrayItem(cJSON_GetObjectItem(l, "top_logprobs"), 1);
    /* the top token of the second position is a lone 0xE2 byte: U+FFFD as a JSON key */
    assert_float_equal(cJSON_GetObjectItem(top1, "\xef\xbf\xbd")->valuedouble, -0.75, 1e-9);
    cJSON_Delete(v);
    ll_strbuf_free(&out);
    ll_resp_free(&r);
    ll_api_request_free(&req);
    /* streaming: text chunks, a finish chunk, [DONE] */
    req = req_of(LL_API_COMPLETION, "{\"prompt\":\"x\",\"stream\":true}");
    ll_resp_init(&r, &req, "c2", 5, NULL, NULL);
    ll_resp_begin(&r, &out);
    assert_int_equal(out.len, 0);
    ev = text_ev(LL_GEN_CONTENT, "ab");
    ll_resp_event(&r, &ev, &out);
    ll_resp_finish(&r, &res, &out);
    char *pl[8];
    int n = sse_split(out.data, pl, 8);
    assert_int_equal(n, 3);
    v = cJSON_Parse(pl[0]);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(v, "choices"), 0), "text")->valuestring,
                        "ab");
    cJSON_Delete(v);
    v = cJSON_Parse(pl[1]);
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(v, "choices"), 0), "finish_reason")->valuestring, "stop");
    cJSON_Delete(v);
    assert_string_equal(pl[2], "[DONE]");
    for (int i = 0; i < n; i++) free(pl[i]);
    ll_strbuf_free(&out);
    ll_resp_free(&r);
    ll_api_request_free(&req);
}

/* ------------------------------------------------------------------ queue */

static void test_jobq_fifo(void **state) {
    (void)state;
    ll_jobq q;
    assert_int_equal(ll_jobq_init(&q, 3), LL_OK);
    int items[5];
    for (int i = 0; i < 3; i++) assert_int_equal(ll_jobq_push(&q, &items[i]), 0);
    assert_int_equal(ll_jobq_push(&q, &items[3]), -1); /* full */
    assert_int_equal(ll_jobq_len(&q), 3);
    assert_int_equal(ll_jobq_remove(&q, &items[1]), 1);
    assert_int_equal(ll_jobq_remove(&q, &items[1]), 0);
    assert_int_equal(ll_jobq_push(&q, &items[3]), 0);
    assert_ptr_equal(ll_jobq_pop(&q), &items[0]);
    assert_int_equal(ll_jobq_push(&q, &items[4]), 0); /* wraps around the ring */
    assert_ptr_equal(ll_jobq_pop(&q), &items[2]);
    assert_ptr_equal(ll_jobq_pop(&q), &items[3]);
    ll_jobq_close(&q);
    assert_int_equal(ll_jobq_push(&q, &items[0]), -2);
    assert_ptr_equal(ll_jobq_pop(&q), &items[4]); /* drained after close */
    assert_null(ll_jobq_pop(&q));
    ll_jobq_destroy(&q);
    /* capacity 0: every push is refused */
    assert_int_equal(ll_jobq_init(&q, 0), LL_OK);
    assert_int_equal(ll_jobq_push(&q, &items[0]), -1);
    ll_jobq_destroy(&q);
}

typedef struct {
    ll_jobq *q;
    int got[64];
    int n;
} consumer;

static void *consume(void *arg) {
    consumer *c = arg;
    int *p;
    while ((p = ll_jobq_pop(c->q))) c->got[c->n++] = *p;
    return NULL;
}

static void test_jobq_threads(void **state) {
    (void)state;
    ll_jobq q;
    assert_int_equal(ll_jobq_init(&q, 4), LL_OK);
    consumer c = {&q, {0}, 0};
    pthread_t t;
    pthread_create(&t, NULL, consume, &c);
    int vals[64];
    for (int i = 0; i < 64; i++) {
        vals[i] = i;
        while (ll_jobq_push(&q, &vals[i]) == -1) { /* full: the consumer catches up */
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
    ll_jobq_close(&q);
    pthread_join(t, NULL);
    assert_int_equal(c.n, 64);
    for (int i = 0; i < 64; i++) assert_int_equal(c.got[i], i); /* FIFO across threads */
    ll_jobq_destroy(&q);
}

/* ------------------------------------------------------------------ metrics */

static void test_metrics_format(void **state) {
    (void)state;
    ll_metrics m = {0};
    m.http_requests = 10;
    m.status_2xx = 7;
    m.status_429 = 2;
    m.status_4xx = 3;
    m.queue_length = 4;
    ll_engine_stats es = {0};
    es.prompt_tokens = 1000;
    es.cached_tokens = 200;
    es.completion_tokens = 50;
    es.prefill_sec = 2;
    es.decode_sec = 5;
    ll_strbuf b = {0};
    ll_metrics_format(&m, &es, &b);
    assert_non_null(strstr(b.data, "\nlilac_http_requests_total 10\n"));
    assert_non_null(strstr(b.data, "lilac_http_responses_total{code=\"429\"} 2\n"));
    assert_non_null(strstr(b.data, "\nlilac_queue_length 4\n"));
    assert_non_null(strstr(b.data, "\nlilac_prefill_tokens_per_second 400\n")); /* (1000-200)/2 */
    assert_non_null(strstr(b.data, "\nlilac_decode_tokens_per_second 10\n"));
    assert_non_null(strstr(b.data, "# TYPE lilac_cached_tokens_total counter\n"));
    /* every line is a comment or `name[{labels}] value` */
    char *save = NULL, *copy = strdup(b.data);
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#') continue;
        char *sp = strrchr(line, ' ');
        assert_non_null(sp);
        char *end;
        strtod(sp + 1, &end);
        assert_true(*end == 0);
        assert_memory_equal(line, "lilac_", 6);
    }
    free(copy);
    ll_strbuf_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_escape),
        cmocka_unit_test(test_utf8_validation),
        cmocka_unit_test(test_strbuf_ops),
        cmocka_unit_test(test_chat_minimal),
        cmocka_unit_test(test_chat_messages_normalized),
        cmocka_unit_test(test_chat_fields),
        cmocka_unit_test(test_chat_tools),
        cmocka_unit_test(test_chat_errors),
        cmocka_unit_test(test_body_checks),
        cmocka_unit_test(test_completion_parse),
        cmocka_unit_test(test_tokenize_parse),
        cmocka_unit_test(test_error_json),
        cmocka_unit_test(test_resp_chat_full),
        cmocka_unit_test(test_resp_tool_calls),
        cmocka_unit_test(test_resp_chat_stream),
        cmocka_unit_test(test_resp_completion),
        cmocka_unit_test(test_jobq_fifo),
        cmocka_unit_test(test_jobq_threads),
        cmocka_unit_test(test_metrics_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
