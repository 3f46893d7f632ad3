/* api.c — OpenAI request parsing and validation, error objects. See api.h. */
#include "server/api.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define BAD "invalid_request_error"

void ll_api_error_set(ll_api_error *e, int status, const char *type, const char *code, const char *param,
                      const char *fmt, ...) {
    e->status = status;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof(e->param), "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof(e->message), fmt, ap);
    va_end(ap);
}

void ll_api_error_json(const ll_api_error *e, ll_strbuf *out) {
    ll_strbuf_puts(out, "{\"error\":{\"message\":");
    ll_strbuf_json_cstr(out, e->message);
    ll_strbuf_puts(out, ",\"type\":");
    ll_strbuf_json_cstr(out, e->type ? e->type : "server_error");
    ll_strbuf_puts(out, ",\"param\":");
    ll_strbuf_json_cstr(out, e->param[0] ? e->param : NULL);
    ll_strbuf_puts(out, ",\"code\":");
    ll_strbuf_json_cstr(out, e->code);
    ll_strbuf_puts(out, "}}");
}

void ll_api_error_from_status(ll_api_error *e, ll_status st, const char *msg) {
    switch (st) {
    case LL_ERR_INVALID:
        ll_api_error_set(e, 400, BAD, NULL, NULL, "%s", msg);
        break;
    case LL_ERR_OVERFLOW:
        ll_api_error_set(e, 400, BAD, "context_length_exceeded", "messages", "%s", msg);
        break;
    case LL_ERR_UNSUPPORTED:
        ll_api_error_set(e, 400, BAD, "unsupported_value", NULL, "%s", msg);
        break;
    case LL_ERR_OOM:
        ll_api_error_set(e, 503, "server_error", NULL, NULL, "the server is out of memory; retry later");
        break;
    default:
        /* internal details stay in the server log, not in the response */
        ll_api_error_set(e, 500, "server_error", NULL, NULL, "internal error (%s)", ll_status_name(st));
    }
}

/* ------------------------------------------------------------------ body pre-check */

int ll_api_check_body(const char *body, size_t len, ll_api_error *err) {
    size_t bad = ll_utf8_find_invalid(body, len);
    if (bad < len) {
        ll_api_error_set(err, 400, BAD, "invalid_json", NULL, "request body is not valid UTF-8 (byte offset %zu)", bad);
        return -1;
    }
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < len; i++) {
        char c = body[i];
        if (c == 0) {
            ll_api_error_set(err, 400, BAD, "invalid_json", NULL, "NUL byte in the request body (byte offset %zu)", i);
            return -1;
        }
        if (in_str) {
            if (c == '"') in_str = 0;
            else if (c == '\\' && i + 1 < len) {
                if (body[i + 1] == 'u' && i + 5 < len && !memcmp(body + i + 2, "0000", 4)) {
                    ll_api_error_set(err, 400, BAD, "invalid_json", NULL,
                                     "NUL character (\\u0000) in a string (byte offset %zu) is not supported", i);
                    return -1;
                }
                i++; /* skip the escaped character (so \" does not end the string) */
            }
            continue;
        }
        if (c == '"') in_str = 1;
        else if (c == '{' || c == '[') {
            if (++depth > LL_API_MAX_DEPTH) {
                ll_api_error_set(err, 400, BAD, "invalid_json", NULL,
                                 "JSON nested deeper than %d levels (byte offset %zu)", LL_API_MAX_DEPTH, i);
                return -1;
            }
        } else if (c == '}' || c == ']')
            depth--;
    }
    return 0;
}

/* Parses a JSON object body; on failure a 400 naming the byte offset. */
cJSON *ll_api_parse_object(const char *body, size_t len, ll_api_error *err) {
    if (ll_api_check_body(body, len, err)) return NULL;
    if (len == 0) {
        ll_api_error_set(err, 400, BAD, "invalid_json", NULL, "empty request body (expected a JSON object)");
        return NULL;
    }
    const char *end = NULL;
    cJSON *doc = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!doc) {
        size_t off = end && end >= body && end <= body + len ? (size_t)(end - body) : 0;
        ll_api_error_set(err, 400, BAD, "invalid_json", NULL, "malformed JSON in the request body (near byte offset %zu)",
                         off);
        return NULL;
    }
    /* only whitespace may follow the value */
    for (const char *p = end; p && p < body + len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            cJSON_Delete(doc);
            ll_api_error_set(err, 400, BAD, "invalid_json", NULL, "trailing data after the JSON value (byte offset %zu)",
                             (size_t)(p - body));
            return NULL;
        }
    if (!cJSON_IsObject(doc)) {
        cJSON_Delete(doc);
        ll_api_error_set(err, 400, BAD, "invalid_json", NULL, "the request body must be a JSON object");
        return NULL;
    }
    return doc;
}

/* ------------------------------------------------------------------ typed field access */

/* The member `key`, or NULL when absent or JSON null (both mean "not given"). */
static cJSON *field(const cJSON *obj, const char *key) {
    cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static const char *json_type_name(const cJSON *v) {
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    return "null";
}

static int type_error(ll_api_error *err, const char *param, const char *want, const cJSON *got) {
    ll_api_error_set(err, 400, BAD, "invalid_type", param, "%s: expected %s, got %s", param, want, json_type_name(got));
    return -1;
}

static int get_bool(const cJSON *obj, const char *key, int *out, ll_api_error *err) {
    cJSON *v = field(obj, key);
    if (!v) return 0;
    if (!cJSON_IsBool(v)) return type_error(err, key, "a boolean", v);
    *out = cJSON_IsTrue(v);
    return 0;
}

/* Integer in [lo, hi]; *present set to 1 when given. */
static int get_int(const cJSON *obj, const char *key, double lo, double hi, int64_t *out, int *present,
                   ll_api_error *err) {
    cJSON *v = field(obj, key);
    if (present) *present = 0;
    if (!v) return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble)) return type_error(err, key, "an integer", v);
    double d = v->valuedouble;
    if (d < lo || d > hi) {
        ll_api_error_set(err, 400, BAD, "invalid_value", key, "%s: %.0f is out of range [%.0f, %.0f]", key, d, lo, hi);
        return -1;
    }
    *out = (int64_t)d;
    if (present) *present = 1;
    return 0;
}

static int get_num(const cJSON *obj, const char *key, double lo, double hi, float *out, ll_api_error *err) {
    cJSON *v = field(obj, key);
    if (!v) return 0;
    if (!cJSON_IsNumber(v)) return type_error(err, key, "a number", v);
    double d = v->valuedouble;
    if (!(d >= lo && d <= hi)) {
        ll_api_error_set(err, 400, BAD, "invalid_value", key, "%s: %g is out of range [%g, %g]", key, d, lo, hi);
        return -1;
    }
    *out = (float)d;
    return 0;
}

/* ------------------------------------------------------------------ shared fields */

static int parse_model(const cJSON *doc, const ll_api_limits *lim, ll_api_request *r, ll_api_error *err) {
    cJSON *v = field(doc, "model");
    r->model = lim->model_id;
    if (!v) return 0; /* local servers accept a missing model: there is only one */
    if (!cJSON_IsString(v)) return type_error(err, "model", "a string", v);
    const char *m = v->valuestring;
    if (strcmp(m, lim->model_id) && !(lim->alias && !strcmp(m, lim->alias))) {
        ll_api_error_set(err, 404, BAD, "model_not_found", "model", "The model '%s' does not exist (this server serves '%s')",
                         m, lim->model_id);
        return -1;
    }
    r->model = m;
    return 0;
}

static int parse_stop(const cJSON *doc, ll_api_request *r, ll_api_error *err) {
    cJSON *v = field(doc, "stop");
    if (!v) return 0;
    if (cJSON_IsString(v)) {
        if (!v->valuestring[0]) return 0; /* "" stops nothing; treat as absent */
        r->stop[0] = v->valuestring;
        r->gen.n_stop = 1;
    } else if (cJSON_IsArray(v)) {
        int n = cJSON_GetArraySize(v);
        if (n > LL_API_MAX_STOP) {
            ll_api_error_set(err, 400, BAD, "invalid_value", "stop", "stop: at most %d stop strings, got %d", LL_API_MAX_STOP,
                             n);
            return -1;
        }
        int i = 0;
        cJSON *s;
        cJSON_ArrayForEach(s, v) {
            char p[32];
            snprintf(p, sizeof(p), "stop[%d]", i);
            if (!cJSON_IsString(s)) return type_error(err, p, "a string", s);
            if (!s->valuestring[0]) {
                ll_api_error_set(err, 400, BAD, "invalid_value", p, "%s: must not be empty", p);
                return -1;
            }
            r->stop[i++] = s->valuestring;
        }
        r->gen.n_stop = i;
    } else
        return type_error(err, "stop", "a string or an array of strings", v);
    r->gen.stop = r->stop;
    return 0;
}

static int parse_logit_bias(const cJSON *doc, ll_api_request *r, ll_api_error *err) {
    cJSON *v = field(doc, "logit_bias");
    if (!v) return 0;
    if (!cJSON_IsObject(v)) return type_error(err, "logit_bias", "an object", v);
    int n = cJSON_GetArraySize(v);
    if (n == 0) return 0;
    if (n > LL_API_MAX_LOGIT_BIAS) {
        ll_api_error_set(err, 400, BAD, "invalid_value", "logit_bias", "logit_bias: at most %d entries", LL_API_MAX_LOGIT_BIAS);
        return -1;
    }
    r->bias = ll_calloc((size_t)n, sizeof(*r->bias));
    if (!r->bias) {
        ll_api_error_set(err, 503, "server_error", NULL, NULL, "out of memory");
        return -1;
    }
    int i = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, v) {
        char p[160];
        snprintf(p, sizeof(p), "logit_bias.%.100s", e->string);
        char *end;
        errno = 0;
        long id = strtol(e->string, &end, 10);
        if (!e->string[0] || *end || errno || id < 0 || id > INT32_MAX) {
            ll_api_error_set(err, 400, BAD, "invalid_value", p, "%s: keys must be token ids (non-negative integers)", p);
            return -1;
        }
        if (!cJSON_IsNumber(e)) return type_error(err, p, "a number", e);
        if (!(e->valuedouble >= -100 && e->valuedouble <= 100)) {
            ll_api_error_set(err, 400, BAD, "invalid_value", p, "%s: bias must be in [-100, 100]", p);
            return -1;
        }
        /* OpenAI: -100 effectively bans a token */
        r->bias[i].id = (int32_t)id;
        r->bias[i].bias = e->valuedouble <= -100 ? -INFINITY : (float)e->valuedouble;
        i++;
    }
    r->gen.sampling.logit_bias = r->bias;
    r->gen.sampling.n_logit_bias = i;
    return 0;
}

/* Sampling fields shared by chat and completions. */
static int parse_sampling(const cJSON *doc, const ll_api_limits *lim, ll_api_request *r, ll_api_error *err) {
    ll_sampler_params *s = &r->gen.sampling;
    *s = lim->defaults ? *lim->defaults : ll_sampler_defaults();
    s->logit_bias = NULL;
    s->n_logit_bias = 0;
    if (get_num(doc, "temperature", 0, 2, &s->temperature, err)) return -1;
    if (get_num(doc, "top_p", 0, 1, &s->top_p, err)) return -1;
    if (field(doc, "top_p") && s->top_p <= 0) {
        ll_api_error_set(err, 400, BAD, "invalid_value", "top_p", "top_p: must be greater than 0");
        return -1;
    }
    int64_t k = 0;
    int have = 0;
    if (get_int(doc, "top_k", -1, INT32_MAX, &k, &have, err)) return -1;
    if (have) s->top_k = k > 0 ? (int32_t)k : 0; /* -1 and 0 both mean "off" (vLLM / llama.cpp) */
    if (get_num(doc, "min_p", 0, 1, &s->min_p, err)) return -1;
    if (get_num(doc, "presence_penalty", -2, 2, &s->presence_penalty, err)) return -1;
    if (get_num(doc, "frequency_penalty", -2, 2, &s->frequency_penalty, err)) return -1;
    const char *rp = field(doc, "repetition_penalty") ? "repetition_penalty" : "repeat_penalty"; /* llama.cpp name */
    if (get_num(doc, rp, 0, 10, &s->repetition_penalty, err)) return -1;
    if (field(doc, rp) && s->repetition_penalty <= 0) {
        ll_api_error_set(err, 400, BAD, "invalid_value", rp, "%s: must be greater than 0", rp);
        return -1;
    }
    /* OpenAI takes any 64-bit integer (doubles hold them exactly only up to 2^53) */
    cJSON *sd = field(doc, "seed");
    s->seed = lim->default_seed;
    if (sd) {
        if (!cJSON_IsNumber(sd) || sd->valuedouble != floor(sd->valuedouble)) return type_error(err, "seed", "an integer", sd);
        double d = sd->valuedouble;
        if (d < -9223372036854775808.0 || d >= 18446744073709551616.0) {
            ll_api_error_set(err, 400, BAD, "invalid_value", "seed", "seed: must fit in 64 bits");
            return -1;
        }
        s->seed = d < 0 ? (uint64_t)(int64_t)d : (uint64_t)d;
    }
    if (parse_logit_bias(doc, r, err)) return -1;
    int64_t n = 1;
    if (get_int(doc, "n", -1e18, 1e18, &n, NULL, err)) return -1;
    if (n != 1) {
        ll_api_error_set(err, 400, BAD, "unsupported_value", "n", "n: only n=1 is supported (got %lld)", (long long)n);
        return -1;
    }
    return 0;
}

static int parse_max_tokens(const cJSON *doc, const ll_api_limits *lim, int32_t dflt, ll_api_request *r,
                            ll_api_error *err) {
    /* max_completion_tokens is the current name and wins over the deprecated max_tokens */
    const char *key = field(doc, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    int64_t v = 0;
    int have = 0;
    if (get_int(doc, key, -1e18, 1e18, &v, &have, err)) return -1;
    r->gen.max_tokens = dflt;
    if (!have) return 0;
    if (v < 1) {
        ll_api_error_set(err, 400, BAD, "invalid_value", key, "%s: must be at least 1 (got %lld)", key, (long long)v);
        return -1;
    }
    if (v > lim->n_ctx) {
        ll_api_error_set(err, 400, BAD, "context_length_exceeded", key,
                         "%s: %lld exceeds the context size of this server (%d tokens)", key, (long long)v, (int)lim->n_ctx);
        return -1;
    }
    r->gen.max_tokens = (int32_t)v;
    return 0;
}

static int parse_stream(const cJSON *doc, ll_api_request *r, ll_api_error *err) {
    if (get_bool(doc, "stream", &r->stream, err)) return -1;
    cJSON *so = field(doc, "stream_options");
    if (!so) return 0;
    if (!cJSON_IsObject(so)) return type_error(err, "stream_options", "an object", so);
    if (!r->stream) {
        ll_api_error_set(err, 400, BAD, "invalid_value", "stream_options",
                         "stream_options: only allowed when stream is true");
        return -1;
    }
    cJSON *iu = field(so, "include_usage");
    if (iu && !cJSON_IsBool(iu)) return type_error(err, "stream_options.include_usage", "a boolean", iu);
    r->include_usage = iu && cJSON_IsTrue(iu);
    return 0;
}

/* ------------------------------------------------------------------ chat */

static int oom(ll_api_error *err) {
    ll_api_error_set(err, 503, "server_error", NULL, NULL, "out of memory");
    return -1;
}

/* Copies `key` of src into dst when present (any JSON type; validated by the caller). */
static int copy_member(cJSON *dst, const cJSON *src, const char *key) {
    cJSON *v = field(src, key);
    if (!v) return 0;
    cJSON *d = cJSON_Duplicate(v, 1);
    if (!d) return -1;
    cJSON_AddItemToObject(dst, key, d);
    return 0;
}

/* Joins the text parts of a content array; images and other media are refused. */
static int content_text(const cJSON *content, const char *pm, ll_strbuf *out, ll_api_error *err) {
    char p[96];
    if (cJSON_IsString(content)) {
        ll_strbuf_puts(out, content->valuestring);
        return 0;
    }
    snprintf(p, sizeof(p), "%s.content", pm);
    if (!cJSON_IsArray(content)) return type_error(err, p, "a string or an array of content parts", content);
    int j = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, content) {
        snprintf(p, sizeof(p), "%s.content[%d]", pm, j);
        if (!cJSON_IsObject(part)) return type_error(err, p, "an object", part);
        cJSON *t = field(part, "type");
        char pt[112];
        snprintf(pt, sizeof(pt), "%s.type", p);
        if (!t) {
            ll_api_error_set(err, 400, BAD, "missing_required_parameter", pt, "%s: required", pt);
            return -1;
        }
        if (!cJSON_IsString(t)) return type_error(err, pt, "a string", t);
        const char *ty = t->valuestring;
        if (!strcmp(ty, "text")) {
            cJSON *tx = field(part, "text");
            snprintf(pt, sizeof(pt), "%s.text", p);
            if (!tx || !cJSON_IsString(tx)) return type_error(err, pt, "a string", tx ? tx : part);
            if (j > 0 && out->len) ll_strbuf_putc(out, '\n');
            ll_strbuf_puts(out, tx->valuestring);
        } else if (!strcmp(ty, "image_url") || !strcmp(ty, "input_image") || !strcmp(ty, "image")) {
            ll_api_error_set(err, 400, BAD, "unsupported_value", p,
                             "%s: images are not supported (this server runs a text-only model)", p);
            return -1;
        } else if (!strcmp(ty, "input_audio") || !strcmp(ty, "file") || !strcmp(ty, "audio")) {
            ll_api_error_set(err, 400, BAD, "unsupported_value", p, "%s: '%.32s' content is not supported (text only)", p, ty);
            return -1;
        } else {
            ll_api_error_set(err, 400, BAD, "invalid_value", pt, "%s: unknown content part type '%.64s'", p, ty);
            return -1;
        }
        j++;
    }
    return 0;
}

static int validate_tool_calls(const cJSON *tc, const char *pm, ll_api_error *err) {
    char p[128];
    snprintf(p, sizeof(p), "%s.tool_calls", pm);
    if (!cJSON_IsArray(tc)) return type_error(err, p, "an array", tc);
    int k = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, tc) {
        snprintf(p, sizeof(p), "%s.tool_calls[%d]", pm, k);
        if (!cJSON_IsObject(c)) return type_error(err, p, "an object", c);
        cJSON *fn = field(c, "function");
        char pf[160];
        snprintf(pf, sizeof(pf), "%s.function", p);
        if (!fn || !cJSON_IsObject(fn)) return type_error(err, pf, "an object", fn ? fn : c);
        cJSON *name = field(fn, "name");
        snprintf(pf, sizeof(pf), "%s.function.name", p);
        if (!name || !cJSON_IsString(name)) return type_error(err, pf, "a string", name ? name : fn);
        cJSON *args = field(fn, "arguments");
        snprintf(pf, sizeof(pf), "%s.function.arguments", p);
        if (args && !cJSON_IsString(args) && !cJSON_IsObject(args))
            return type_error(err, pf, "a string (JSON text)", args);
        if (cJSON_IsString(args)) {
            cJSON *obj = cJSON_Parse(args->valuestring);
            int ok = cJSON_IsObject(obj);
            cJSON_Delete(obj);
            if (!ok) {
                ll_api_error_set(err, 400, BAD, "invalid_value", pf, "%s: must be a JSON object (as text)", pf);
                return -1;
            }
        }
        k++;
    }
    return 0;
}

/* Copies validated tool_calls into dst with each function.arguments as a JSON object: OpenAI sends
 * the arguments as JSON text, and the Qwen templates iterate them as a mapping. */
static int copy_tool_calls(cJSON *dst, const cJSON *tc) {
    cJSON *d = cJSON_Duplicate(tc, 1);
    if (!d) return -1;
    cJSON_AddItemToObject(dst, "tool_calls", d);
    cJSON *c;
    cJSON_ArrayForEach(c, d) {
        cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        if (!cJSON_IsString(args)) continue;
        cJSON *obj = cJSON_Parse(args->valuestring); /* validated above: an object */
        if (!obj || !cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", obj)) {
            cJSON_Delete(obj);
            return -1;
        }
    }
    return 0;
}

static int parse_messages(const cJSON *doc, ll_api_request *r, ll_api_error *err) {
    cJSON *msgs = field(doc, "messages");
    if (!msgs) {
        ll_api_error_set(err, 400, BAD, "missing_required_parameter", "messages", "messages: required");
        return -1;
    }
    if (!cJSON_IsArray(msgs)) return type_error(err, "messages", "an array", msgs);
    if (cJSON_GetArraySize(msgs) == 0) {
        ll_api_error_set(err, 400, BAD, "invalid_value", "messages", "messages: must contain at least one message");
        return -1;
    }
    r->messages = cJSON_CreateArray();
    if (!r->messages) return oom(err);
    ll_strbuf text = {0};
    int i = 0, rc = -1;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        char pm[48], p[96];
        snprintf(pm, sizeof(pm), "messages[%d]", i);
        if (!cJSON_IsObject(m)) {
            type_error(err, pm, "an object", m);
            goto out;
        }
        cJSON *role = field(m, "role");
        snprintf(p, sizeof(p), "%s.role", pm);
        if (!role) {
            ll_api_error_set(err, 400, BAD, "missing_required_parameter", p, "%s: required", p);
            goto out;
        }
        if (!cJSON_IsString(role)) {
            type_error(err, p, "a string", role);
            goto out;
        }
        const char *ro = role->valuestring;
        if (strcmp(ro, "system") && strcmp(ro, "developer") && strcmp(ro, "user") && strcmp(ro, "assistant") &&
            strcmp(ro, "tool")) {
            ll_api_error_set(err, 400, BAD, "invalid_value", p,
                             "%s: '%.32s' is not one of system, developer, user, assistant, tool", p, ro);
            goto out;
        }
        int is_asst = !strcmp(ro, "assistant");
        cJSON *content = field(m, "content");
        cJSON *tc = is_asst ? field(m, "tool_calls") : NULL;
        snprintf(p, sizeof(p), "%s.content", pm);
        if (!content && !is_asst) {
            ll_api_error_set(err, 400, BAD, "missing_required_parameter", p, "%s: required", p);
            goto out;
        }
        ll_strbuf_clear(&text);
        if (content && content_text(content, pm, &text, err)) goto out;
        if (tc && validate_tool_calls(tc, pm, err)) goto out;
        static const char *const str_keys[] = {"name", "tool_call_id", "reasoning_content"};
        for (size_t k = 0; k < LL_ARRAY_LEN(str_keys); k++) {
            cJSON *v = field(m, str_keys[k]);
            snprintf(p, sizeof(p), "%s.%s", pm, str_keys[k]);
            if (v && !cJSON_IsString(v)) {
                type_error(err, p, "a string", v);
                goto out;
            }
        }
        /* the normalized message the chat template sees */
        cJSON *nm = cJSON_CreateObject();
        if (!nm) goto nomem;
        cJSON_AddItemToArray(r->messages, nm);
        /* developer is the newer name of system (OpenAI); the template knows only system */
        if (!cJSON_AddStringToObject(nm, "role", strcmp(ro, "developer") ? ro : "system")) goto nomem;
        if (text.oom) goto nomem;
        if (content || !tc) {
            if (!cJSON_AddStringToObject(nm, "content", text.data ? text.data : "")) goto nomem;
        } else if (!cJSON_AddNullToObject(nm, "content"))
            goto nomem;
        if (copy_member(nm, m, "name") || copy_member(nm, m, "tool_call_id") || copy_member(nm, m, "reasoning_content") ||
            (tc && copy_tool_calls(nm, tc)))
            goto nomem;
        i++;
    }
    rc = 0;
    goto out;
nomem:
    oom(err);
out:
    ll_strbuf_free(&text);
    return rc;
}

static int parse_tools(const cJSON *doc, ll_api_request *r, ll_api_error *err) {
    cJSON *tools = field(doc, "tools");
    cJSON *choice = field(doc, "tool_choice");
    if (tools) {
        if (!cJSON_IsArray(tools)) return type_error(err, "tools", "an array", tools);
        int i = 0;
        const cJSON *t;
        cJSON_ArrayForEach(t, tools) {
            char p[64], pf[96];
            snprintf(p, sizeof(p), "tools[%d]", i);
            if (!cJSON_IsObject(t)) return type_error(err, p, "an object", t);
            cJSON *ty = field(t, "type");
            snprintf(pf, sizeof(pf), "%s.type", p);
            if (ty && (!cJSON_IsString(ty) || strcmp(ty->valuestring, "function"))) {
                ll_api_error_set(err, 400, BAD, "invalid_value", pf, "%s: only \"function\" tools are supported", pf);
                return -1;
            }
            cJSON *fn = field(t, "function");
            snprintf(pf, sizeof(pf), "%s.function", p);
            if (!fn || !cJSON_IsObject(fn)) return type_error(err, pf, "an object", fn ? fn : t);
            cJSON *name = field(fn, "name");
            snprintf(pf, sizeof(pf), "%s.function.name", p);
            if (!name || !cJSON_IsString(name) || !name->valuestring[0])
                return type_error(err, pf, "a non-empty string", name ? name : fn);
            cJSON *desc = field(fn, "description");
            snprintf(pf, sizeof(pf), "%s.function.description", p);
            if (desc && !cJSON_IsString(desc)) return type_error(err, pf, "a string", desc);
            cJSON *params = field(fn, "parameters");
            snprintf(pf, sizeof(pf), "%s.function.parameters", p);
            if (params && !cJSON_IsObject(params)) return type_error(err, pf, "an object (JSON Schema)", params);
            i++;
        }
        if (i == 0) tools = NULL; /* an empty list means no tools */
    }
    const char *mode = tools ? "auto" : "none";
    const char *only = NULL; /* tool_choice naming one function */
    if (choice) {
        if (cJSON_IsString(choice)) {
            mode = choice->valuestring;
            if (strcmp(mode, "none") && strcmp(mode, "auto") && strcmp(mode, "required")) {
                ll_api_error_set(err, 400, BAD, "invalid_value", "tool_choice",
                                 "tool_choice: must be \"none\", \"auto\", \"required\" or {\"type\":\"function\",...}");
                return -1;
            }
        } else if (cJSON_IsObject(choice)) {
            cJSON *fn = field(choice, "function");
            cJSON *name = fn && cJSON_IsObject(fn) ? field(fn, "name") : NULL;
            if (!name || !cJSON_IsString(name))
                return type_error(err, "tool_choice.function.name", "a string", name ? name : choice);
            only = name->valuestring;
            mode = "function";
        } else
            return type_error(err, "tool_choice", "a string or an object", choice);
        if (strcmp(mode, "none") && strcmp(mode, "auto") && !tools) {
            ll_api_error_set(err, 400, BAD, "invalid_value", "tool_choice", "tool_choice: '%s' requires tools",
                             only ? only : mode);
            return -1;
        }
    }
    if (!tools || !strcmp(mode, "none")) return 0; /* the template then never mentions tools */
    /* "required" cannot be enforced without constrained decoding; the model sees the tools, as
     * with "auto". A named function is honoured by offering only that function. */
    r->tools = cJSON_CreateArray();
    if (!r->tools) return oom(err);
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const char *name = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "function"), "name")->valuestring;
        if (only && strcmp(name, only)) continue;
        cJSON *d = cJSON_Duplicate(t, 1);
        if (!d) return oom(err);
        cJSON_AddItemToArray(r->tools, d);
    }
    if (only && cJSON_GetArraySize(r->tools) == 0) {
        ll_api_error_set(err, 400, BAD, "invalid_value", "tool_choice.function.name",
                         "tool_choice.function.name: no tool named '%.64s' in tools", only);
        return -1;
    }
    r->gen.tools = r->tools;
    return 0;
}

static int parse_kwargs(const cJSON *doc, ll_api_request *r, ll_api_error *err) {
    cJSON *kw = field(doc, "chat_template_kwargs");
    if (kw && !cJSON_IsObject(kw)) return type_error(err, "chat_template_kwargs", "an object", kw);
    if (kw) {
        static const char *bools[] = {"enable_thinking", "preserve_thinking"};
        for (size_t i = 0; i < LL_ARRAY_LEN(bools); i++) {
            cJSON *b = field(kw, bools[i]);
            char p[64];
            snprintf(p, sizeof(p), "chat_template_kwargs.%s", bools[i]);
            if (b && !cJSON_IsBool(b)) return type_error(err, p, "a boolean", b);
        }
    }
    /* reasoning_effort "none" (llama-server, OpenAI) turns thinking off unless the kwargs say */
    cJSON *re = field(doc, "reasoning_effort");
    if (re && !cJSON_IsString(re)) return type_error(err, "reasoning_effort", "a string", re);
    int think_off = re && !strcmp(re->valuestring, "none") && !(kw && field(kw, "enable_thinking"));
    if (!kw && !think_off) return 0;
    r->kwargs = kw ? cJSON_Duplicate(kw, 1) : cJSON_CreateObject();
    if (!r->kwargs) return oom(err);
    if (think_off && !cJSON_AddFalseToObject(r->kwargs, "enable_thinking")) return oom(err);
    r->gen.template_kwargs = r->kwargs;
    return 0;
}

static int parse_chat(const cJSON *doc, const ll_api_limits *lim, ll_api_request *r, ll_api_error *err) {
    if (parse_messages(doc, r, err)) return -1;
    r->gen.messages = r->messages;
    if (parse_tools(doc, r, err) || parse_kwargs(doc, r, err)) return -1;
    if (parse_max_tokens(doc, lim, 0, r, err)) return -1; /* chat default: until EOS or context */
    int lp = 0;
    if (get_bool(doc, "logprobs", &lp, err)) return -1;
    int64_t top = 0;
    int have = 0;
    if (get_int(doc, "top_logprobs", 0, 20, &top, &have, err)) return -1;
    if (have && top > 0 && !lp) {
        ll_api_error_set(err, 400, BAD, "invalid_value", "top_logprobs", "top_logprobs: requires logprobs to be true");
        return -1;
    }
    r->gen.logprobs = lp;
    r->gen.top_logprobs = (int32_t)top;
    cJSON *rf = field(doc, "response_format");
    if (rf) {
        cJSON *ty = cJSON_IsObject(rf) ? field(rf, "type") : NULL;
        if (!ty || !cJSON_IsString(ty)) return type_error(err, "response_format.type", "a string", ty ? ty : rf);
        if (strcmp(ty->valuestring, "text")) {
            /* fail closed: an unenforced schema would return unvalidated text with a 200 */
            ll_api_error_set(err, 400, BAD, "unsupported_value", "response_format",
                             "response_format: '%.32s' (structured output) is not supported; only 'text'",
                             ty->valuestring);
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ completions */

static int parse_token_ids(const cJSON *arr, const char *param, ll_api_request *r, ll_api_error *err) {
    int n = cJSON_GetArraySize(arr);
    r->prompt_ids = ll_malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
    if (!r->prompt_ids) return oom(err);
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, arr) {
        char p[64];
        snprintf(p, sizeof(p), "%s[%d]", param, i);
        if (!cJSON_IsNumber(t) || t->valuedouble != floor(t->valuedouble)) return type_error(err, p, "a token id (integer)", t);
        if (t->valuedouble < 0 || t->valuedouble > INT32_MAX) {
            ll_api_error_set(err, 400, BAD, "invalid_value", p, "%s: %.0f is not a token id", p, t->valuedouble);
            return -1;
        }
        r->prompt_ids[i++] = (int32_t)t->valuedouble;
    }
    r->gen.prompt_ids = r->prompt_ids;
    r->gen.n_prompt_ids = i;
    return 0;
}

static int parse_completion(const cJSON *doc, const ll_api_limits *lim, ll_api_request *r, ll_api_error *err) {
    cJSON *pr = field(doc, "prompt");
    if (!pr) {
        ll_api_error_set(err, 400, BAD, "missing_required_parameter", "prompt", "prompt: required");
        return -1;
    }
    const char *param = "prompt";
    if (cJSON_IsArray(pr)) {
        int n = cJSON_GetArraySize(pr);
        cJSON *first = cJSON_GetArrayItem(pr, 0);
        if (n >= 1 && (cJSON_IsString(first) || cJSON_IsArray(first))) {
            /* a batch of prompts: only a batch of one is served (n > 1 would be n choices) */
            if (n > 1) {
                ll_api_error_set(err, 400, BAD, "unsupported_value", "prompt",
                                 "prompt: only one prompt per request is supported (got %d)", n);
                return -1;
            }
            pr = first;
            param = "prompt[0]";
        }
    }
    if (cJSON_IsString(pr)) {
        if (!pr->valuestring[0]) {
            ll_api_error_set(err, 400, BAD, "invalid_value", param, "%s: must not be empty", param);
            return -1;
        }
        r->gen.prompt = pr->valuestring;
    } else if (cJSON_IsArray(pr)) {
        if (parse_token_ids(pr, param, r, err)) return -1;
        if (r->gen.n_prompt_ids == 0) {
            ll_api_error_set(err, 400, BAD, "invalid_value", param, "%s: must not be empty", param);
            return -1;
        }
    } else
        return type_error(err, param, "a string or an array of token ids", pr);
    if (parse_max_tokens(doc, lim, 16, r, err)) return -1; /* 16: OpenAI's default for completions */
    int echo = 0;
    if (get_bool(doc, "echo", &echo, err)) return -1;
    if (echo) {
        ll_api_error_set(err, 400, BAD, "unsupported_value", "echo", "echo: not supported");
        return -1;
    }
    cJSON *suffix = field(doc, "suffix");
    if (suffix && (!cJSON_IsString(suffix) || suffix->valuestring[0])) {
        ll_api_error_set(err, 400, BAD, "unsupported_value", "suffix", "suffix: not supported");
        return -1;
    }
    int64_t best = 1;
    if (get_int(doc, "best_of", -1e18, 1e18, &best, NULL, err)) return -1;
    if (best != 1) {
        ll_api_error_set(err, 400, BAD, "unsupported_value", "best_of", "best_of: only 1 is supported");
        return -1;
    }
    int64_t lp = 0;
    int have = 0;
    if (get_int(doc, "logprobs", 0, 5, &lp, &have, err)) return -1; /* legacy: an integer, max 5 */
    if (have) {
        r->gen.logprobs = 1;
        r->gen.top_logprobs = (int32_t)lp;
        r->legacy_logprobs = 1;
    }
    return 0;
}

/* ------------------------------------------------------------------ entry points */

void ll_api_request_free(ll_api_request *r) {
    cJSON_Delete(r->doc);
    cJSON_Delete(r->messages);
    cJSON_Delete(r->tools);
    cJSON_Delete(r->kwargs);
    ll_free(r->prompt_ids);
    ll_free(r->bias);
    memset(r, 0, sizeof(*r));
}

int ll_api_parse(ll_api_kind kind, const char *body, size_t len, const ll_api_limits *lim, ll_api_request *out,
                 ll_api_error *err) {
    memset(out, 0, sizeof(*out));
    out->kind = kind;
    out->doc = ll_api_parse_object(body, len, err);
    if (!out->doc) return -1;
    const cJSON *doc = out->doc;
    int rc = parse_model(doc, lim, out, err);
    if (!rc) rc = parse_stream(doc, out, err);
    if (!rc) rc = parse_sampling(doc, lim, out, err);
    if (!rc) rc = parse_stop(doc, out, err);
    if (!rc) rc = kind == LL_API_CHAT ? parse_chat(doc, lim, out, err) : parse_completion(doc, lim, out, err);
    if (rc) ll_api_request_free(out);
    return rc;
}

int ll_api_parse_tokenize(const char *body, size_t len, ll_api_tokenize *out, ll_api_error *err) {
    memset(out, 0, sizeof(*out));
    cJSON *doc = ll_api_parse_object(body, len, err);
    if (!doc) return -1;
    cJSON *c = field(doc, "content");
    int add_special = 0;
    if (!c) {
        ll_api_error_set(err, 400, BAD, "missing_required_parameter", "content", "content: required");
        goto fail;
    }
    if (!cJSON_IsString(c)) {
        type_error(err, "content", "a string", c);
        goto fail;
    }
    if (get_bool(doc, "add_special", &add_special, err) || get_bool(doc, "parse_special", &out->parse_special, err) ||
        get_bool(doc, "with_pieces", &out->with_pieces, err))
        goto fail;
    out->doc = doc;
    out->content = c->valuestring;
    out->len = strlen(c->valuestring);
    return 0;
fail:
    cJSON_Delete(doc);
    return -1;
}

int ll_api_parse_detokenize(const char *body, size_t len, int32_t **ids, int32_t *n, ll_api_error *err) {
    *ids = NULL;
    *n = 0;
    cJSON *doc = ll_api_parse_object(body, len, err);
    if (!doc) return -1;
    ll_api_request tmp;
    memset(&tmp, 0, sizeof(tmp));
    int rc = -1;
    cJSON *t = field(doc, "tokens");
    if (!t) ll_api_error_set(err, 400, BAD, "missing_required_parameter", "tokens", "tokens: required");
    else if (!cJSON_IsArray(t)) type_error(err, "tokens", "an array of token ids", t);
    else if (!parse_token_ids(t, "tokens", &tmp, err)) {
        *ids = tmp.prompt_ids;
        *n = tmp.gen.n_prompt_ids;
        tmp.prompt_ids = NULL;
        rc = 0;
    }
    ll_free(tmp.prompt_ids);
    cJSON_Delete(doc);
    return rc;
}
