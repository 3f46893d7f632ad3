/* test_template.c — the chat-template interpreter: every official chat fixture byte for byte
 * (and the template's own errors), the Jinja semantics cases of tests/data/template_cases.json
 * (expected output made by Jinja2 configured as transformers does), and the parse/render errors. */
#pragma GCC diagnostic ignored "-Wformat-truncation" /* testutil.h path helpers, inlined */
#include "testutil.h"

#include <cjson/cJSON.h>

#include "base/base.h"
#include "tokenizer/template.h"

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

static tmpl *parse_file(const char *path) {
    size_t n;
    char *src = slurp(path, &n);
    if (!src) fail_msg("cannot read %s", path);
    tmpl *t;
    if (tmpl_parse(src, n, path, &t) != LL_OK) fail_msg("parse %s: %s", path, ll_errmsg());
    free(src);
    return t;
}

/* Renders a fixture case as the server would get it: an OpenAI body with chat_template_kwargs. */
static int render_case(tmpl *t, const cJSON *c, char **out) {
    cJSON *req = cJSON_CreateObject();
    cJSON_AddItemToObject(req, "messages", cJSON_Duplicate(cJSON_GetObjectItem(c, "messages"), 1));
    cJSON *tools = cJSON_GetObjectItem(c, "tools");
    if (tools && !cJSON_IsNull(tools)) cJSON_AddItemToObject(req, "tools", cJSON_Duplicate(tools, 1));
    cJSON_AddItemToObject(req, "add_generation_prompt", cJSON_Duplicate(cJSON_GetObjectItem(c, "add_generation_prompt"), 1));
    cJSON_AddItemToObject(req, "chat_template_kwargs", cJSON_Duplicate(cJSON_GetObjectItem(c, "kwargs"), 1));
    size_t n;
    ll_status st = tmpl_render(t, req, NULL, out, &n);
    cJSON_Delete(req);
    return st;
}

static void check_chat_fixture(const char *fixture, const char *template_file) {
    size_t n;
    char *text = slurp(tu_shared_path(fixture), &n);
    assert_non_null(text);
    cJSON *root = cJSON_Parse(text);
    free(text);
    tmpl *t = parse_file(tu_shared_path(template_file));
    cJSON *c;
    int count = 0, errors = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) {
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
        cJSON *want = cJSON_GetObjectItem(c, "rendered"), *err = cJSON_GetObjectItem(c, "error");
        char *out = NULL;
        ll_status st = render_case(t, c, &out);
        if (err) {
            if (st != LL_ERR_INVALID) fail_msg("%s/%s: rendered, want error '%s'", fixture, name, err->valuestring);
            assert_string_equal(ll_errmsg(), err->valuestring);
            errors++;
        } else {
            if (st != LL_OK) fail_msg("%s/%s: %s", fixture, name, ll_errmsg());
            if (strcmp(out, want->valuestring)) fail_msg("%s/%s: rendering differs:\n%s\n--- want\n%s", fixture, name, out, want->valuestring);
        }
        ll_free(out);
        count++;
    }
    assert_true(count >= 16);
    print_message("# %s: %d cases (%d errors)\n", fixture, count, errors);
    tmpl_free(t);
    cJSON_Delete(root);
}

static void test_chat_qwen36(void **state) {
    (void)state;
    check_chat_fixture("fixtures/chat/qwen3.6-35b-a3b.public.json", "reference/templates/qwen3.6-35b-a3b.chat_template.jinja");
}
static void test_chat_qwen35(void **state) {
    (void)state;
    check_chat_fixture("fixtures/chat/qwen3.5-35b-a3b.public.json", "reference/templates/qwen3.5-35b-a3b.chat_template.jinja");
}
static void test_chat_qwen3(void **state) {
    (void)state;
    check_chat_fixture("fixtures/chat/qwen3.public.json", "reference/templates/qwen3.chat_template.jinja");
}

/* The template embedded in tokenizer_config.json renders exactly as the .jinja file does. */
static void test_config_embedded_templates(void **state) {
    (void)state;
    static const char *const pairs[][2] = {
        {"reference/templates/qwen3.6-35b-a3b.tokenizer_config.json", "reference/templates/qwen3.6-35b-a3b.chat_template.jinja"},
        {"reference/templates/qwen3.5.tokenizer_config.json", "reference/templates/qwen3.5-35b-a3b.chat_template.jinja"},
        {"reference/templates/qwen3.5-0.8b.tokenizer_config.json", "reference/templates/qwen3.5-0.8b.chat_template.jinja"},
    };
    size_t n;
    char *fx = slurp(tu_shared_path("fixtures/chat/qwen3.5-35b-a3b.public.json"), &n);
    cJSON *cases = cJSON_Parse(fx);
    free(fx);
    for (size_t i = 0; i < LL_ARRAY_LEN(pairs); i++) {
        char *cfg = slurp(tu_shared_path(pairs[i][0]), &n);
        assert_non_null(cfg);
        cJSON *root = cJSON_Parse(cfg);
        free(cfg);
        const char *src = cJSON_GetObjectItem(root, "chat_template")->valuestring;
        tmpl *a, *b = parse_file(tu_shared_path(pairs[i][1]));
        assert_int_equal(tmpl_parse(src, strlen(src), pairs[i][0], &a), LL_OK);
        cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(cases, "cases")) {
            char *x = NULL, *y = NULL;
            int sa = render_case(a, c, &x), sb = render_case(b, c, &y);
            assert_int_equal(sa, sb);
            if (sa == LL_OK) assert_string_equal(x, y);
            ll_free(x);
            ll_free(y);
        }
        tmpl_free(a);
        tmpl_free(b);
        cJSON_Delete(root);
    }
    /* the first Qwen3 template also parses and renders a plain conversation */
    tmpl *t = parse_file(tu_shared_path("reference/templates/qwen3.chat_template.2025-04-initial.jinja"));
    cJSON *req = cJSON_Parse("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}");
    char *out;
    assert_int_equal(tmpl_render(t, req, NULL, &out, &n), LL_OK);
    assert_string_equal(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    ll_free(out);
    cJSON_Delete(req);
    tmpl_free(t);
    cJSON_Delete(cases);
}

/* Jinja semantics, against renderings made by Jinja2 itself (tests/py/gen_template_cases.py). */
static void test_jinja_semantics(void **state) {
    (void)state;
    size_t n;
    char *text = slurp("tests/data/template_cases.json", &n);
    assert_non_null(text);
    cJSON *root = cJSON_Parse(text);
    free(text);
    assert_non_null(root);
    cJSON *c;
    int count = 0;
    cJSON_ArrayForEach(c, root) {
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
        const char *src = cJSON_GetObjectItem(c, "template")->valuestring;
        cJSON *want = cJSON_GetObjectItem(c, "rendered"), *err = cJSON_GetObjectItem(c, "error");
        tmpl *t;
        if (tmpl_parse(src, strlen(src), name, &t) != LL_OK) fail_msg("%s: %s", name, ll_errmsg());
        cJSON *req = cJSON_CreateObject();
        cJSON_AddItemToObject(req, "messages", cJSON_CreateArray());
        char *out = NULL;
        ll_status st = tmpl_render(t, req, cJSON_GetObjectItem(c, "vars"), &out, &n);
        if (err) {
            assert_int_equal(st, LL_ERR_INVALID);
            assert_string_equal(ll_errmsg(), err->valuestring);
        } else {
            if (st != LL_OK) fail_msg("%s: %s", name, ll_errmsg());
            if (strcmp(out, want->valuestring)) fail_msg("%s: got\n[%s]\nwant\n[%s]", name, out, want->valuestring);
        }
        ll_free(out);
        cJSON_Delete(req);
        tmpl_free(t);
        count++;
    }
    assert_true(count >= 40);
    cJSON_Delete(root);
}

/* Unsupported constructs and malformed templates fail at parse time, naming the construct and line. */
static void test_parse_errors(void **state) {
    (void)state;
    static const struct { const char *src, *want; } cases[] = {
        {"a\nb\n{% include 'x.jinja' %}", ":3: unsupported construct '{% include %}'"},
        {"{% extends 'base' %}", "unsupported construct '{% extends %}'"},
        {"{% raw %}x{% endraw %}", "unsupported construct '{% raw %}'"},
        {"{% for x in y recursive %}{% endfor %}", "unsupported construct 'for ... recursive'"},
        {"{% call foo() %}{% endcall %}", "unsupported construct '{% call %}'"},
        {"{% filter upper %}x{% endfilter %}", "unsupported construct '{% filter %}'"},
        {"{% if x %}", "missing '{% endif %}'"},
        {"{% endif %}", "unexpected '{% endif %}'"},
        {"{{ x ", "unclosed '{{'"},
        {"{{ 'abc }}", "unterminated string literal"},
        {"{# c", "unclosed comment"},
        {"{{ x + }}", "unexpected '}}'"},
        {"{{ f(a=1, 2) }}", "positional argument after keyword argument"},
        {"{{ x $ y }}", "unexpected character '$'"},
        {"{% set %}", "expected a name"},
    };
    for (size_t i = 0; i < LL_ARRAY_LEN(cases); i++) {
        tmpl *t = NULL;
        ll_status st = tmpl_parse(cases[i].src, strlen(cases[i].src), "t.jinja", &t);
        if (st == LL_OK) fail_msg("'%s' parsed", cases[i].src);
        assert_null(t);
        if (!strstr(ll_errmsg(), cases[i].want)) fail_msg("'%s': message '%s' lacks '%s'", cases[i].src, ll_errmsg(), cases[i].want);
        assert_non_null(strstr(ll_errmsg(), "t.jinja:"));
    }
}

/* Run-time errors: unknown filters/tests/methods, type errors, bad requests. */
static void test_render_errors(void **state) {
    (void)state;
    static const struct { const char *src, *want; } cases[] = {
        {"\n{{ x|frobnicate }}", ":2: unsupported filter 'frobnicate'"},
        {"{{ x is frob }}", "unsupported test 'frob'"},
        {"{{ 'a'.zfill(3) }}", "'zfill' is not callable"},
        {"{{ 'a' + 1 }}", "can only concatenate str (not \"int\") to str"},
        {"{{ undefined_thing.attr }}", "'undefined_thing' is undefined"},
        {"{{ 1 // 0 }}", "division or modulo by zero"},
        {"{% set x = 1 %}{% set x.y = 2 %}", "cannot assign attribute on non-namespace object 'x'"},
        {"{{ 5|items }}", "Can only get item pairs from a mapping."},
        {"{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", "macro 'm' takes at most 1 arguments"},
        {"{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", "macro recursion too deep"},
        {"{{ 'x' * 100000000 }}", "string repetition too long"},
        {"{% set r = range(3000) %}{% for a in r %}{% for b in r %}{% endfor %}{% endfor %}", "template runs too long"},
        {"{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for a in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
         "template needs more than 256 MiB"},
    };
    cJSON *req = cJSON_Parse("{\"messages\": []}");
    for (size_t i = 0; i < LL_ARRAY_LEN(cases); i++) {
        tmpl *t;
        if (tmpl_parse(cases[i].src, strlen(cases[i].src), "t.jinja", &t) != LL_OK) fail_msg("%s: %s", cases[i].src, ll_errmsg());
        char *out = NULL;
        size_t n;
        ll_status st = tmpl_render(t, req, NULL, &out, &n);
        assert_int_not_equal(st, LL_OK);
        assert_null(out);
        if (!strstr(ll_errmsg(), cases[i].want)) fail_msg("'%s': message '%s' lacks '%s'", cases[i].src, ll_errmsg(), cases[i].want);
        tmpl_free(t);
    }
    cJSON_Delete(req);
    /* requests without messages, or with kwargs that are not an object */
    tmpl *t;
    assert_int_equal(tmpl_parse("x", 1, "t.jinja", &t), LL_OK);
    char *out;
    size_t n;
    cJSON *bad = cJSON_Parse("{\"msgs\": []}");
    assert_int_equal(tmpl_render(t, bad, NULL, &out, &n), LL_ERR_INVALID);
    cJSON_Delete(bad);
    bad = cJSON_Parse("{\"messages\": [], \"chat_template_kwargs\": 3}");
    assert_int_equal(tmpl_render(t, bad, NULL, &out, &n), LL_ERR_INVALID);
    cJSON_Delete(bad);
    tmpl_free(t);
}

/* add_generation_prompt defaults to true; kwargs reach the template; extra vars too. */
static void test_request_defaults(void **state) {
    (void)state;
    const char *src = "{{ add_generation_prompt }} {{ enable_thinking is defined }} {{ tools is none }} {{ eos_token }}";
    tmpl *t;
    assert_int_equal(tmpl_parse(src, strlen(src), "t", &t), LL_OK);
    cJSON *req = cJSON_Parse("{\"messages\": []}"), *vars = cJSON_Parse("{\"eos_token\": \"<|im_end|>\"}");
    char *out;
    size_t n;
    assert_int_equal(tmpl_render(t, req, vars, &out, &n), LL_OK);
    assert_string_equal(out, "True False True <|im_end|>");
    ll_free(out);
    cJSON_Delete(req);
    req = cJSON_Parse("{\"messages\": [], \"add_generation_prompt\": false, \"tools\": [], \"chat_template_kwargs\": {\"enable_thinking\": false}}");
    assert_int_equal(tmpl_render(t, req, NULL, &out, &n), LL_OK);
    assert_string_equal(out, "False True False ");
    assert_int_equal(n, strlen(out));
    ll_free(out);
    cJSON_Delete(req);
    cJSON_Delete(vars);
    tmpl_free(t);
}

/* OpenAI-style string arguments: refused by the Qwen3.6 template as transformers would, rendered
 * as XML parameters once tmpl_normalize_tool_args has parsed them. */
static void test_string_tool_arguments(void **state) {
    (void)state;
    tmpl *t = parse_file(tu_shared_path("reference/templates/qwen3.6-35b-a3b.chat_template.jinja"));
    cJSON *req = cJSON_Parse("{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", "
                             "\"content\": \"\", \"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", "
                             "\"arguments\": \"{\\\"city\\\": \\\"Paris\\\", \\\"n\\\": 2}\"}}]}]}");
    assert_non_null(req);
    char *out = NULL;
    size_t n;
    assert_int_equal(tmpl_render(t, req, NULL, &out, &n), LL_ERR_INVALID);
    assert_string_equal(strchr(ll_errmsg(), ' ') + 1, "Can only get item pairs from a mapping.");
    assert_int_equal(tmpl_normalize_tool_args(req), 1);
    assert_int_equal(tmpl_render(t, req, NULL, &out, &n), LL_OK);
    assert_non_null(strstr(out, "<tool_call>\n<function=f>\n<parameter=city>\nParis\n</parameter>\n<parameter=n>\n2\n</parameter>"));
    ll_free(out);
    cJSON_Delete(req);
    tmpl_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat_qwen36),
        cmocka_unit_test(test_chat_qwen35),
        cmocka_unit_test(test_chat_qwen3),
        cmocka_unit_test(test_config_embedded_templates),
        cmocka_unit_test(test_jinja_semantics),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_render_errors),
        cmocka_unit_test(test_request_defaults),
        cmocka_unit_test(test_string_tool_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
