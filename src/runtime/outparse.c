/*
 * outparse.c — streaming reasoning / content / Qwen XML tool-call splitter. Behaviour and the
 * robustness rules are documented in outparse.h.
 *
 * Structure: unprocessed text accumulates in `pend`; a small state machine (reasoning, content,
 * tool) consumes from its front. In the tool state `pend` starts right after "<tool_call>" and the
 * whole call is re-parsed from there whenever text arrives, until it is complete (a call is at
 * most a few KiB, so re-parsing is cheap); the one part that can grow large, a parameter value,
 * remembers how far it has already been searched so that long values stay linear.
 */
#include "runtime/outparse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define TAG_THINK "<think>"
#define TAG_THINK_END "</think>"
#define TAG_CALL "<tool_call>"
#define TAG_CALL_END "</tool_call>"
#define TAG_FUNC "<function="
#define TAG_FUNC_END "</function>"
#define TAG_PARAM "<parameter="
#define TAG_PARAM_END "</parameter>"
#define MAX_NAME 256

typedef enum { ST_REASONING, ST_CONTENT, ST_TOOL } pstate;

struct ll_outparse {
    ll_out_fn fn;
    void *ud;
    int parse_tools;
    cJSON *tools;          /* own copy, or NULL */
    pstate state;
    int skip_ws;           /* drop leading whitespace (start of reasoning / content after a tag) */
    int think_allowed;     /* "<think>" may still open reasoning (nothing but whitespace so far) */
    int finished;
    char *pend;            /* [cap] unprocessed text */
    size_t n, cap;
    /* value search memo for the tool state: the value starting at val_start was searched for its
     * end tags up to val_scanned (offsets into pend) */
    size_t val_start, val_scanned;
    ll_tool_call *calls;   /* [n_calls] */
    int32_t n_calls, cap_calls;
};

/* ---------------------------------------------------------------- small helpers */

static int is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

/* 2: s[0, n) starts with tag; 1: s[0, n) is a proper prefix of tag; 0: neither. */
static int match_tag(const char *s, size_t n, const char *tag) {
    size_t tl = strlen(tag);
    if (n >= tl) return memcmp(s, tag, tl) == 0 ? 2 : 0;
    return memcmp(s, tag, n) == 0 ? 1 : 0;
}

/* First occurrence of needle in s[from, n), or SIZE_MAX. */
static size_t find(const char *s, size_t from, size_t n, const char *needle) {
    size_t nl = strlen(needle);
    if (n < nl) return SIZE_MAX;
    for (size_t i = from; i + nl <= n; i++) {
        const char *p = memchr(s + i, needle[0], n - nl + 1 - i);
        if (!p) return SIZE_MAX;
        i = (size_t)(p - s);
        if (memcmp(p, needle, nl) == 0) return i;
    }
    return SIZE_MAX;
}

/* Length of the longest suffix of s[0, n) that is a proper prefix of tag. */
static size_t partial_suffix(const char *s, size_t n, const char *tag) {
    size_t tl = strlen(tag);
    for (size_t k = LL_MIN(tl - 1, n); k > 0; k--)
        if (memcmp(s + n - k, tag, k) == 0) return k;
    return 0;
}

static size_t trailing_ws(const char *s, size_t n) {
    size_t k = 0;
    while (k < n && is_ws(s[n - 1 - k])) k++;
    return k;
}

static void emit_text(ll_outparse *op, ll_out_kind kind, const char *s, size_t len) {
    if (len == 0) return;
    if (kind == LL_OUT_CONTENT) op->think_allowed = 0;
    ll_out_event ev = {kind, s, len, NULL};
    op->fn(op->ud, &ev);
}

static void consume(ll_outparse *op, size_t k) {
    LL_ASSERT(k <= op->n);
    memmove(op->pend, op->pend + k, op->n - k);
    op->n -= k;
}

/* ---------------------------------------------------------------- schema typing */

/* The parameter schema of `pname` in tool `fname`, or NULL. */
static const cJSON *param_schema(const ll_outparse *op, const char *fname, const char *pname) {
    if (!op->tools || !cJSON_IsArray(op->tools)) return NULL;
    const cJSON *t;
    cJSON_ArrayForEach(t, op->tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        if (!cJSON_IsObject(fn)) fn = t; /* also accept bare {name, parameters} */
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (!cJSON_IsString(nm) || strcmp(nm->valuestring, fname) != 0) continue;
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
        return cJSON_GetObjectItemCaseSensitive(props, pname);
    }
    return NULL;
}

/* Lower-cased schema type of a parameter into buf ("string" if none), and whether null is allowed. */
static void schema_type(const cJSON *sch, char *buf, size_t cap, int *nullable) {
    *nullable = 0;
    const char *ty = NULL;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(sch, "type");
    if (cJSON_IsString(t)) {
        ty = t->valuestring;
    } else if (cJSON_IsArray(t)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, t) {
            if (!cJSON_IsString(e)) continue;
            if (strcasecmp(e->valuestring, "null") == 0) *nullable = 1;
            else if (!ty) ty = e->valuestring;
        }
    } else {
        const cJSON *alts = cJSON_GetObjectItemCaseSensitive(sch, "anyOf");
        if (!cJSON_IsArray(alts)) alts = cJSON_GetObjectItemCaseSensitive(sch, "oneOf");
        const cJSON *o;
        cJSON_ArrayForEach(o, alts) {
            const cJSON *ot = cJSON_GetObjectItemCaseSensitive(o, "type");
            if (!cJSON_IsString(ot)) continue;
            if (strcasecmp(ot->valuestring, "null") == 0) *nullable = 1;
            else if (!ty) ty = ot->valuestring;
        }
    }
    if (!ty) ty = "string";
    if (strcasecmp(ty, "null") == 0) *nullable = 1;
    size_t i = 0;
    for (; ty[i] && i + 1 < cap; i++) buf[i] = (char)tolower((unsigned char)ty[i]);
    buf[i] = 0;
}

static int starts(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* Value text with surrounding whitespace removed, NUL-terminated in buf (cap >= n + 1). */
static const char *trimmed(const char *v, size_t n, char *buf) {
    while (n && is_ws(*v)) v++, n--;
    while (n && is_ws(v[n - 1])) n--;
    memcpy(buf, v, n);
    buf[n] = 0;
    return buf;
}

/* An exact JSON integer from decimal text: optional sign, digits; leading zeros dropped. */
static cJSON *parse_int(const char *t) {
    const char *p = t;
    int neg = 0;
    if (*p == '+' || *p == '-') neg = *p++ == '-';
    if (!isdigit((unsigned char)*p)) return NULL;
    for (const char *q = p; *q; q++)
        if (!isdigit((unsigned char)*q)) return NULL;
    while (p[0] == '0' && p[1]) p++;
    size_t len = strlen(p);
    char *raw = ll_malloc(len + 2);
    if (!raw) return NULL;
    snprintf(raw, len + 2, "%s%s", neg && strcmp(p, "0") != 0 ? "-" : "", p);
    cJSON *j = cJSON_CreateRaw(raw); /* raw keeps integers beyond 2^53 exact */
    ll_free(raw);
    return j;
}

static cJSON *parse_number(const char *t) {
    if (!*t) return NULL;
    for (const char *q = t; *q; q++) /* decimal only: strtod would also take hex, inf, nan */
        if (!isdigit((unsigned char)*q) && !strchr("+-.eE", *q)) return NULL;
    char *end;
    errno = 0;
    double d = strtod(t, &end);
    if (*end || errno == ERANGE || !isfinite(d)) return NULL;
    if (d == floor(d) && fabs(d) < 9007199254740992.0) {
        char buf[32];
        snprintf(buf, sizeof(buf), "%.0f", d);
        return cJSON_CreateRaw(strcmp(buf, "-0") == 0 ? "0" : buf);
    }
    return cJSON_CreateNumber(d);
}

/* The JSON value for a parameter (see outparse.h); NULL only on OOM. */
static cJSON *typed_value(const ll_outparse *op, const char *fname, const char *pname, const char *v, size_t n) {
    const cJSON *sch = param_schema(op, fname, pname);
    char *s = ll_malloc(n + 1);
    if (!s) return NULL;
    memcpy(s, v, n);
    s[n] = 0;
    cJSON *out = NULL;
    if (sch) {
        char ty[32];
        int nullable;
        schema_type(sch, ty, sizeof(ty), &nullable);
        char *tb = ll_malloc(n + 1);
        if (!tb) {
            ll_free(s);
            return NULL;
        }
        const char *t = trimmed(v, n, tb);
        int is_null = strcasecmp(t, "null") == 0 || strcasecmp(t, "none") == 0;
        int stringy = !strcmp(ty, "string") || !strcmp(ty, "str") || !strcmp(ty, "text") ||
                      !strcmp(ty, "varchar") || !strcmp(ty, "char") || !strcmp(ty, "enum");
        if (is_null && (nullable || !stringy)) out = cJSON_CreateNull();
        else if (stringy) out = NULL;
        else if (starts(ty, "int") || starts(ty, "uint") || starts(ty, "long") || starts(ty, "short") ||
                 starts(ty, "unsigned"))
            out = parse_int(t);
        else if (starts(ty, "num") || starts(ty, "float") || starts(ty, "double"))
            out = parse_number(t);
        else if (!strcmp(ty, "boolean") || !strcmp(ty, "bool") || !strcmp(ty, "binary")) {
            if (strcasecmp(t, "true") == 0) out = cJSON_CreateTrue();
            else if (strcasecmp(t, "false") == 0) out = cJSON_CreateFalse();
        } else {
            /* object, array and anything else: JSON text, all of it */
            const char *end = NULL;
            out = cJSON_ParseWithOpts(t, &end, 1); /* 1: nothing may follow the value */
        }
        ll_free(tb);
    }
    if (!out) out = cJSON_CreateString(s);
    ll_free(s);
    return out;
}

/* ---------------------------------------------------------------- tool-call parsing */

typedef enum { P_NEED, P_DONE, P_BAD } presult;

static int name_char_ok(char c) {
    return !is_ws(c) && c != '<' && c != '>' && c != '{' && c != '}' && c != '"' && c != '\'';
}

/* Parses a tag name "NAME>" at s[pos, n): on P_DONE *name_end is the '>' index. */
static presult parse_name(const char *s, size_t pos, size_t n, int strict_chars, size_t *name_end) {
    size_t i = pos;
    for (; i < n && s[i] != '>'; i++) {
        if (i - pos >= MAX_NAME) return P_BAD;
        if (strict_chars ? !name_char_ok(s[i]) : (s[i] == '<' || s[i] == '\n')) return P_BAD;
    }
    if (i == n) return P_NEED;
    if (i == pos) return P_BAD;
    *name_end = i;
    return P_DONE;
}

/* Adds name=value to args (the last of repeated names wins). */
static int add_arg(cJSON *args, const char *key, cJSON *val) {
    if (!val) return 0;
    if (cJSON_GetObjectItemCaseSensitive(args, key)) cJSON_DeleteItemFromObjectCaseSensitive(args, key);
    cJSON_AddItemToObject(args, key, val);
    return 1;
}

/* Where a value that starts at vs and has no "</parameter>" ends when its call is closed anyway:
 * the first line-initial "<parameter=" before `limit`, else `limit`. */
static size_t implicit_value_end(const char *s, size_t vs, size_t limit) {
    size_t p = find(s, vs, limit, "\n" TAG_PARAM);
    return p != SIZE_MAX ? p : limit;
}

/* Parses the call at the front of op->pend (text after "<tool_call>"). On P_DONE *consumed is how
 * much of pend the call used and the call name and arguments are filled (caller owns them). `final`: the
 * output has ended, so P_NEED is not an option. */
static presult parse_call(ll_outparse *op, int final, size_t *consumed, char **call_name, cJSON **call_args) {
    const char *s = op->pend;
    const size_t n = op->n;
    size_t pos = 0;
    while (pos < n && is_ws(s[pos])) pos++;
    int m = match_tag(s + pos, n - pos, TAG_FUNC);
    if (m == 0 || (m == 1 && final)) return P_BAD;
    if (m == 1 || pos == n) return final ? P_BAD : P_NEED;
    pos += strlen(TAG_FUNC);
    size_t fe;
    presult r = parse_name(s, pos, n, 1, &fe);
    if (r != P_DONE) return (r == P_NEED && !final) ? P_NEED : P_BAD;
    size_t fname_len = fe - pos;
    char fname[MAX_NAME + 1];
    memcpy(fname, s + pos, fname_len);
    fname[fname_len] = 0;
    pos = fe + 1;

    cJSON *args = cJSON_CreateObject();
    if (!args) return P_BAD;
    presult res = P_BAD;
    size_t used = 0;
    for (;;) {
        while (pos < n && is_ws(s[pos])) pos++;
        if (pos == n) { /* between parameters */
            if (!final) { res = P_NEED; break; }
            res = P_DONE, used = n;
            break;
        }
        const char *p = s + pos;
        size_t rest = n - pos;
        int mf = match_tag(p, rest, TAG_FUNC_END), mc = match_tag(p, rest, TAG_CALL_END),
            mp = match_tag(p, rest, TAG_PARAM);
        if (mf == 2) {
            size_t q = pos + strlen(TAG_FUNC_END);
            while (q < n && is_ws(s[q])) q++;
            int me = match_tag(s + q, n - q, TAG_CALL_END);
            if (me == 2) res = P_DONE, used = q + strlen(TAG_CALL_END);
            else if (me == 1 || q == n) {
                if (!final) { res = P_NEED; break; }
                res = P_DONE, used = n; /* output ended while closing: the call is whole */
            } else {
                res = P_DONE, used = pos + strlen(TAG_FUNC_END); /* text after </function> is content */
            }
            break;
        }
        if (mc == 2) { /* missing </function> */
            res = P_DONE, used = pos + strlen(TAG_CALL_END);
            break;
        }
        if (mp == 2) {
            size_t ns = pos + strlen(TAG_PARAM), ne;
            r = parse_name(s, ns, n, 0, &ne);
            if (r == P_NEED && !final) { res = P_NEED; break; }
            if (r != P_DONE) { res = P_BAD; break; }
            size_t vs = ne + 1;
            if (vs == n && !final) { res = P_NEED; break; } /* is the next byte the newline? */
            if (vs < n && s[vs] == '\n') vs++;
            /* search for the end of the value, resuming where an earlier pass stopped */
            size_t from = vs;
            if (op->val_start == vs && op->val_scanned > vs + 16) from = op->val_scanned - 16;
            /* The value ends at whichever completes first: its "</parameter>", or a
             * "</function>" + "</tool_call>" that closes the call without one. Taking the earliest
             * completion keeps the result independent of how the text arrived. */
            size_t pe = find(s, from, n, TAG_PARAM_END), fe_at = SIZE_MAX;
            size_t lim = pe == SIZE_MAX ? n : pe + strlen(TAG_PARAM_END);
            for (size_t t = from; (t = find(s, t, lim, TAG_CALL_END)) != SIZE_MAX; t++) {
                size_t b = t, fl = strlen(TAG_FUNC_END);
                while (b > vs && is_ws(s[b - 1])) b--;
                if (b >= vs + fl && memcmp(s + b - fl, TAG_FUNC_END, fl) == 0) {
                    fe_at = b - fl;
                    break;
                }
            }
            size_t ve, next;
            if (fe_at != SIZE_MAX) {
                ve = next = implicit_value_end(s, vs, fe_at); /* the loop goes on at that tag */
            } else if (pe != SIZE_MAX) {
                /* a line-initial "<parameter=" inside the value means its "</parameter>" is missing */
                ve = implicit_value_end(s, vs, pe);
                next = ve == pe ? pe + strlen(TAG_PARAM_END) : ve;
            } else if (final) {
                size_t cut = LL_MIN(find(s, vs, n, TAG_FUNC_END), find(s, vs, n, TAG_CALL_END));
                if (cut == SIZE_MAX && find(s, vs, n, "\n" TAG_PARAM) == SIZE_MAX) {
                    res = P_BAD; /* cut inside a value: not a call */
                    break;
                }
                ve = next = implicit_value_end(s, vs, cut != SIZE_MAX ? cut : n);
            } else {
                op->val_start = vs;
                op->val_scanned = n;
                res = P_NEED;
                break;
            }
            size_t vlen = ve - vs;
            if (vlen && s[vs + vlen - 1] == '\n') vlen--;
            char key[MAX_NAME + 1];
            memcpy(key, s + ns, ne - ns);
            key[ne - ns] = 0;
            if (!add_arg(args, key, typed_value(op, fname, key, s + vs, vlen))) {
                res = P_BAD;
                break;
            }
            pos = next;
            continue;
        }
        /* a partial closing/parameter tag at the end of what we have */
        if ((mf == 1 || mc == 1 || mp == 1) && !final) { res = P_NEED; break; }
        if ((mf == 1 || mc == 1) && final) { res = P_DONE, used = n; break; }
        res = P_BAD; /* junk inside the function */
        break;
    }
    if (res == P_DONE) {
        *consumed = used;
        *call_name = ll_strdup(fname);
        *call_args = args;
        if (!*call_name) {
            cJSON_Delete(args);
            return P_BAD;
        }
    } else {
        cJSON_Delete(args);
    }
    return res;
}

static ll_status add_call(ll_outparse *op, char *name, cJSON *args) {
    char *js = cJSON_PrintUnformatted(args);
    cJSON_Delete(args);
    char *a = js ? ll_strdup(js) : NULL;
    if (js) cJSON_free(js);
    if (!a) {
        ll_free(name);
        return ll_err(LL_ERR_OOM, "outparse: out of memory for tool call arguments");
    }
    if (op->n_calls == op->cap_calls) {
        int32_t cap = op->cap_calls ? op->cap_calls * 2 : 4;
        ll_tool_call *nc = ll_realloc(op->calls, (size_t)cap * sizeof(*nc));
        if (!nc) {
            ll_free(name);
            ll_free(a);
            return ll_err(LL_ERR_OOM, "outparse: out of memory for tool calls");
        }
        op->calls = nc;
        op->cap_calls = cap;
    }
    ll_tool_call *c = &op->calls[op->n_calls];
    *c = (ll_tool_call){op->n_calls, name, a};
    op->n_calls++;
    ll_out_event ev = {LL_OUT_TOOL_CALL, NULL, 0, c};
    op->fn(op->ud, &ev);
    return LL_OK;
}

/* ---------------------------------------------------------------- state machine */

/* Consumes as much of pend as can be decided. */
static ll_status process(ll_outparse *op, int final) {
    for (;;) {
        if (op->skip_ws && op->state != ST_TOOL) {
            size_t k = 0;
            while (k < op->n && is_ws(op->pend[k])) k++;
            consume(op, k);
            if (op->n == 0) return LL_OK;
            op->skip_ws = 0;
        }
        const char *s = op->pend;
        size_t n = op->n;
        if (n == 0 && !(final && op->state == ST_TOOL)) return LL_OK;

        if (op->state == ST_REASONING) {
            size_t e = find(s, 0, n, TAG_THINK_END);
            if (e != SIZE_MAX) {
                emit_text(op, LL_OUT_REASONING, s, e - trailing_ws(s, e));
                consume(op, e + strlen(TAG_THINK_END));
                op->state = ST_CONTENT;
                op->skip_ws = 1;
                op->think_allowed = 0;
                continue;
            }
            size_t keep = final ? 0 : partial_suffix(s, n, TAG_THINK_END);
            size_t out = n - keep;
            out -= trailing_ws(s, out); /* trimmed if "</think>" follows; at the end, dropped */
            emit_text(op, LL_OUT_REASONING, s, out);
            consume(op, final ? n : out);
            return LL_OK;
        }

        if (op->state == ST_CONTENT) {
            size_t ec = op->parse_tools ? find(s, 0, n, TAG_CALL) : SIZE_MAX;
            size_t et = op->think_allowed ? find(s, 0, n, TAG_THINK) : SIZE_MAX;
            if (ec != SIZE_MAX || et != SIZE_MAX) {
                int is_call = ec < et;
                size_t at = is_call ? ec : et;
                /* the "<think>" check happens before any content is emitted */
                if (!is_call && trailing_ws(s, at) < at) { /* text before "<think>": it is content */
                    op->think_allowed = 0;
                    if (ec == SIZE_MAX) continue;
                    is_call = 1;
                    at = ec;
                }
                emit_text(op, LL_OUT_CONTENT, s, at - trailing_ws(s, at));
                consume(op, at + strlen(is_call ? TAG_CALL : TAG_THINK));
                op->think_allowed = 0;
                if (is_call) {
                    op->state = ST_TOOL;
                    op->val_start = op->val_scanned = 0;
                } else {
                    op->state = ST_REASONING;
                    op->skip_ws = 1;
                }
                continue;
            }
            size_t keep = 0;
            if (!final) {
                if (op->parse_tools) keep = partial_suffix(s, n, TAG_CALL);
                if (op->think_allowed) keep = LL_MAX(keep, partial_suffix(s, n, TAG_THINK));
                keep += trailing_ws(s, n - keep); /* trimmed if a tool call follows */
            }
            emit_text(op, LL_OUT_CONTENT, s, n - keep);
            consume(op, n - keep);
            return LL_OK;
        }

        /* ST_TOOL */
        size_t used = 0;
        char *name = NULL;
        cJSON *args = NULL;
        presult r = parse_call(op, final, &used, &name, &args);
        if (r == P_NEED) return LL_OK;
        if (r == P_DONE) {
            consume(op, used);
            op->state = ST_CONTENT;
            op->skip_ws = 1;
            LL_TRY(add_call(op, name, args));
            continue;
        }
        /* malformed: the tag is text, and what follows is scanned as content again */
        emit_text(op, LL_OUT_CONTENT, TAG_CALL, strlen(TAG_CALL));
        op->state = ST_CONTENT;
    }
}

/* ---------------------------------------------------------------- API */

ll_status ll_outparse_new(const ll_outparse_params *p, ll_out_fn fn, void *ud, ll_outparse **out) {
    *out = NULL;
    LL_ASSERT(fn);
    ll_outparse *op = ll_calloc(1, sizeof(*op));
    if (!op) return ll_err(LL_ERR_OOM, "outparse: out of memory");
    op->fn = fn;
    op->ud = ud;
    op->parse_tools = p->parse_tools;
    op->state = p->start_in_reasoning ? ST_REASONING : ST_CONTENT;
    op->skip_ws = p->start_in_reasoning;
    op->think_allowed = !p->start_in_reasoning;
    op->cap = 256;
    op->pend = ll_malloc(op->cap);
    if (p->tools) op->tools = cJSON_Duplicate(p->tools, 1);
    if (!op->pend || (p->tools && !op->tools)) {
        ll_outparse_free(op);
        return ll_err(LL_ERR_OOM, "outparse: out of memory");
    }
    *out = op;
    return LL_OK;
}

void ll_outparse_free(ll_outparse *op) {
    if (!op) return;
    for (int32_t i = 0; i < op->n_calls; i++) {
        ll_free(op->calls[i].name);
        ll_free(op->calls[i].arguments);
    }
    ll_free(op->calls);
    ll_free(op->pend);
    cJSON_Delete(op->tools);
    ll_free(op);
}

ll_status ll_outparse_feed(ll_outparse *op, const char *text, size_t len) {
    LL_ASSERT(!op->finished);
    if (op->n + len > op->cap) {
        size_t cap = LL_MAX(op->cap * 2, op->n + len);
        char *np = ll_realloc(op->pend, cap);
        if (!np) return ll_err(LL_ERR_OOM, "outparse: out of memory for %zu bytes of output", op->n + len);
        op->pend = np;
        op->cap = cap;
    }
    memcpy(op->pend + op->n, text, len);
    op->n += len;
    return process(op, 0);
}

ll_status ll_outparse_finish(ll_outparse *op) {
    LL_ASSERT(!op->finished);
    op->finished = 1;
    return process(op, 1);
}

const ll_tool_call *ll_outparse_calls(const ll_outparse *op, int32_t *n) {
    *n = op->n_calls;
    return op->calls;
}
