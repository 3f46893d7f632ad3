/*
 * template.c — a Jinja-subset interpreter for chat templates (see template.h for what it covers).
 *
 * Three stages: the lexer turns the source into text and expression tokens, applying Jinja's
 * whitespace control (trim_blocks, lstrip_blocks, -/+ modifiers) to the text; a recursive-descent
 * parser builds an AST (precedence as in jinja2/parser.py); the evaluator walks it with Python
 * value semantics. Parse and render each use one arena, freed at once; errors unwind with longjmp
 * to the public entry point, which turns them into an ll_status and a one-line message.
 */
#include "tokenizer/template.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tokenizer/tokenizer.h"

/* ================================================================== arena */

typedef struct arena_blk {
    struct arena_blk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} arena_blk;

typedef struct ctx {
    arena_blk *blk;
    jmp_buf jb;
    ll_status st;
    int raised;          /* raise_exception: message is the template's own */
    char msg[512];
    const char *name;    /* template name for messages */
    int depth;           /* recursion guard (macros, nesting) */
    size_t mem;          /* arena bytes so far, bounded: a template must not eat the server */
    uint64_t steps;      /* loop iterations and macro calls so far, bounded likewise */
} ctx;

enum { TMPL_MAX_MEM = 256u << 20, TMPL_MAX_STEPS = 5000000 };

static _Noreturn void fail(ctx *c, ll_status st, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static _Noreturn void fail(ctx *c, ll_status st, int line, const char *fmt, ...) {
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (line > 0) snprintf(c->msg, sizeof(c->msg), "%s:%d: %s", c->name, line, buf);
    else snprintf(c->msg, sizeof(c->msg), "%s: %s", c->name, buf);
    c->st = st;
    longjmp(c->jb, 1);
}

static void *amalloc(ctx *c, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (!c->blk || c->blk->used + n > c->blk->cap) {
        size_t cap = LL_MAX(n, (size_t)64 * 1024);
        if (c->mem + cap > TMPL_MAX_MEM) fail(c, LL_ERR_OVERFLOW, 0, "template needs more than %u MiB", TMPL_MAX_MEM >> 20);
        c->mem += cap;
        arena_blk *b = ll_malloc(sizeof(arena_blk) + cap);
        if (!b) fail(c, LL_ERR_OOM, 0, "out of memory");
        b->next = c->blk;
        b->used = 0;
        b->cap = cap;
        c->blk = b;
    }
    void *p = c->blk->data + c->blk->used;
    c->blk->used += n;
    return p;
}

static void arena_free(arena_blk *b) {
    while (b) {
        arena_blk *n = b->next;
        ll_free(b);
        b = n;
    }
}

static char *astrndup(ctx *c, const char *s, size_t n) {
    char *p = amalloc(c, n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

/* growable byte buffer in the arena */
typedef struct buf {
    char *s;
    size_t n, cap;
} buf;

static void buf_put(ctx *c, buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = amalloc(c, cap);
        if (b->n) memcpy(p, b->s, b->n);
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}
static void buf_puts(ctx *c, buf *b, const char *s) { buf_put(c, b, s, strlen(s)); }

/* ================================================================== lexer */

enum { T_TEXT, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END, T_NAME, T_STRING, T_INT, T_FLOAT, T_OP, T_EOF };

typedef struct tok {
    int type, line;
    const char *s; /* text, name, string value, operator */
    size_t n;
    int64_t i;
    double f;
    size_t src;    /* source offset (text tokens) */
} tok;

typedef struct lexer {
    ctx *c;
    const char *src;
    size_t len, pos;
    int line;
    tok *toks;
    size_t n, cap;
} lexer;

static tok *lex_push(lexer *L, int type) {
    if (L->n == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        tok *p = amalloc(L->c, cap * sizeof(tok));
        if (L->n) memcpy(p, L->toks, L->n * sizeof(tok));
        L->toks = p;
        L->cap = cap;
    }
    tok *t = &L->toks[L->n++];
    memset(t, 0, sizeof(*t));
    t->type = type;
    t->line = L->line;
    return t;
}

static int is_ws(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v'; }
static int is_ident(char ch, int first) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || (!first && ch >= '0' && ch <= '9');
}

static void count_lines(lexer *L, size_t from, size_t to) {
    for (size_t i = from; i < to; i++) L->line += L->src[i] == '\n';
}

/* Python string literal escapes (jinja decodes literals with "unicode-escape"). */
static void lex_string(lexer *L) {
    char q = L->src[L->pos];
    size_t i = L->pos + 1;
    buf b = {0};
    int line = L->line;
    while (i < L->len && L->src[i] != q) {
        char ch = L->src[i];
        if (ch == '\n') L->line++;
        if (ch != '\\' || i + 1 >= L->len) { buf_put(L->c, &b, &ch, 1); i++; continue; }
        char e = L->src[i + 1];
        i += 2;
        const char *rep = NULL;
        switch (e) {
        case 'n': rep = "\n"; break;
        case 't': rep = "\t"; break;
        case 'r': rep = "\r"; break;
        case '\\': rep = "\\"; break;
        case '\'': rep = "'"; break;
        case '"': rep = "\""; break;
        case 'a': rep = "\a"; break;
        case 'b': rep = "\b"; break;
        case 'f': rep = "\f"; break;
        case 'v': rep = "\v"; break;
        case '\n': rep = ""; L->line++; break;
        case 'x': case 'u': case 'U': {
            int nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t cp = 0;
            for (int k = 0; k < nd; k++, i++) {
                char h = i < L->len ? L->src[i] : 0;
                int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                if (v < 0) fail(L->c, LL_ERR_FORMAT, L->line, "bad \\%c escape in a string literal", e);
                cp = cp * 16 + (uint32_t)v;
            }
            char u[4];
            int k = 0;
            if (cp < 0x80) u[k++] = (char)cp;
            else if (cp < 0x800) { u[k++] = (char)(0xC0 | cp >> 6); u[k++] = (char)(0x80 | (cp & 63)); }
            else if (cp < 0x10000) { u[k++] = (char)(0xE0 | cp >> 12); u[k++] = (char)(0x80 | ((cp >> 6) & 63)); u[k++] = (char)(0x80 | (cp & 63)); }
            else if (cp < 0x110000) { u[k++] = (char)(0xF0 | cp >> 18); u[k++] = (char)(0x80 | ((cp >> 12) & 63)); u[k++] = (char)(0x80 | ((cp >> 6) & 63)); u[k++] = (char)(0x80 | (cp & 63)); }
            else fail(L->c, LL_ERR_FORMAT, L->line, "escape beyond U+10FFFF in a string literal");
            buf_put(L->c, &b, u, (size_t)k);
            continue;
        }
        default:
            if (e >= '0' && e <= '7') {
                int v = e - '0';
                for (int k = 0; k < 2 && i < L->len && L->src[i] >= '0' && L->src[i] <= '7'; k++, i++) v = v * 8 + (L->src[i] - '0');
                char ch2 = (char)v;
                buf_put(L->c, &b, &ch2, 1);
                continue;
            }
            buf_put(L->c, &b, "\\", 1); /* unknown escapes stay as written */
            buf_put(L->c, &b, &e, 1);
            continue;
        }
        buf_puts(L->c, &b, rep);
    }
    if (i >= L->len) fail(L->c, LL_ERR_FORMAT, line, "unterminated string literal");
    tok *t = lex_push(L, T_STRING);
    t->line = line;
    t->s = b.s ? b.s : "";
    t->n = b.n;
    L->pos = i + 1;
}

/* Lexes the inside of {{ }} or {% %} up to its end; returns the right modifier ('-', '+', 0). */
static int lex_expr(lexer *L, int block) {
    const char *end = block ? "%}" : "}}";
    for (;;) {
        while (L->pos < L->len && is_ws(L->src[L->pos])) {
            if (L->src[L->pos] == '\n') L->line++;
            L->pos++;
        }
        if (L->pos >= L->len) fail(L->c, LL_ERR_FORMAT, L->line, "unclosed '%s'", block ? "{%" : "{{");
        const char *p = L->src + L->pos;
        size_t rest = L->len - L->pos;
        if (rest >= 2 && !memcmp(p, end, 2)) { L->pos += 2; return 0; }
        if (rest >= 3 && (p[0] == '-' || p[0] == '+') && !memcmp(p + 1, end, 2)) { L->pos += 3; return p[0]; }
        char ch = *p;
        if (ch == '\'' || ch == '"') { lex_string(L); continue; }
        if (is_ident(ch, 1)) {
            size_t k = 1;
            while (k < rest && is_ident(p[k], 0)) k++;
            tok *t = lex_push(L, T_NAME);
            t->s = astrndup(L->c, p, k);
            t->n = k;
            L->pos += k;
            continue;
        }
        if (ch >= '0' && ch <= '9') {
            size_t k = 0;
            int isf = 0;
            while (k < rest && ((p[k] >= '0' && p[k] <= '9') || p[k] == '_')) k++;
            if (k + 1 < rest && p[k] == '.' && p[k + 1] >= '0' && p[k + 1] <= '9') {
                isf = 1;
                k++;
                while (k < rest && p[k] >= '0' && p[k] <= '9') k++;
            }
            if (k < rest && (p[k] == 'e' || p[k] == 'E')) {
                size_t j = k + 1;
                if (j < rest && (p[j] == '+' || p[j] == '-')) j++;
                if (j < rest && p[j] >= '0' && p[j] <= '9') {
                    isf = 1;
                    k = j;
                    while (k < rest && p[k] >= '0' && p[k] <= '9') k++;
                }
            }
            char num[64];
            size_t m = 0;
            for (size_t j = 0; j < k && m < sizeof(num) - 1; j++)
                if (p[j] != '_') num[m++] = p[j];
            num[m] = 0;
            tok *t = lex_push(L, isf ? T_FLOAT : T_INT);
            if (isf) t->f = strtod(num, NULL);
            else t->i = strtoll(num, NULL, 10);
            L->pos += k;
            continue;
        }
        static const char *ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "=",
                                    "(", ")", "[", "]", "{", "}", ",", ".", ":", "|"};
        size_t k = 0;
        for (size_t j = 0; j < LL_ARRAY_LEN(ops); j++) {
            size_t ol = strlen(ops[j]);
            if (ol <= rest && !memcmp(p, ops[j], ol)) { k = ol; tok *t = lex_push(L, T_OP); t->s = ops[j]; t->n = ol; break; }
        }
        if (!k) fail(L->c, LL_ERR_FORMAT, L->line, "unexpected character '%c'", ch);
        L->pos += k;
    }
}

static void rstrip_text(tok *t) { while (t->n && is_ws(t->s[t->n - 1])) t->n--; }

static void lex_all(lexer *L) {
    tok *prev_text = NULL;
    int strip_next = 0, trim_nl = 0; /* pending effects on the next text token */
    while (L->pos < L->len) {
        /* text up to the next tag */
        size_t i = L->pos;
        const char *tag = NULL;
        while (i + 1 < L->len) {
            if (L->src[i] == '{' && (L->src[i + 1] == '{' || L->src[i + 1] == '%' || L->src[i + 1] == '#')) { tag = L->src + i; break; }
            i++;
        }
        if (!tag) i = L->len;
        tok *t = NULL;
        if (i > L->pos) {
            t = lex_push(L, T_TEXT);
            t->s = L->src + L->pos;
            t->n = i - L->pos;
            t->src = L->pos;
            if (strip_next) { while (t->n && is_ws(*t->s)) { t->s++; t->n--; } }
            else if (trim_nl && t->n && *t->s == '\n') { t->s++; t->n--; }
            count_lines(L, L->pos, i);
        }
        prev_text = t;
        strip_next = trim_nl = 0;
        L->pos = i;
        if (!tag) break;
        char kind = tag[1];
        char lmod = L->pos + 2 < L->len ? L->src[L->pos + 2] : 0;
        if (lmod != '-' && lmod != '+') lmod = 0;
        /* left side: {%- / {{- strip all whitespace before; lstrip_blocks for plain {% and {# */
        if (prev_text) {
            if (lmod == '-') rstrip_text(prev_text);
            else if (!lmod && kind != '{') {
                size_t k = prev_text->n;
                while (k && (prev_text->s[k - 1] == ' ' || prev_text->s[k - 1] == '\t')) k--;
                int line_start = k == 0 ? (prev_text->src == 0 || L->src[prev_text->src - 1] == '\n') : prev_text->s[k - 1] == '\n';
                if (line_start) prev_text->n = k;
            }
        }
        L->pos += 2 + (lmod ? 1 : 0);
        int rmod;
        if (kind == '#') {
            const char *e = NULL;
            for (size_t j = L->pos; j + 1 < L->len; j++)
                if (L->src[j] == '#' && L->src[j + 1] == '}') { e = L->src + j; break; }
            if (!e) fail(L->c, LL_ERR_FORMAT, L->line, "unclosed comment");
            size_t epos = (size_t)(e - L->src);
            rmod = epos > L->pos && (e[-1] == '-' || e[-1] == '+') ? e[-1] : 0;
            count_lines(L, L->pos, epos);
            L->pos = epos + 2;
        } else {
            /* {% raw %} keeps its body as text */
            size_t save = L->pos;
            while (L->pos < L->len && is_ws(L->src[L->pos])) L->pos++;
            if (kind == '%' && L->len - L->pos >= 3 && !memcmp(L->src + L->pos, "raw", 3) && !is_ident(L->src[L->pos + 3], 0))
                fail(L->c, LL_ERR_UNSUPPORTED, L->line, "unsupported construct '{%% raw %%}'");
            L->pos = save;
            lex_push(L, kind == '{' ? T_VAR_BEGIN : T_BLOCK_BEGIN);
            rmod = lex_expr(L, kind == '%');
            lex_push(L, kind == '{' ? T_VAR_END : T_BLOCK_END);
        }
        prev_text = NULL;
        if (rmod == '-') strip_next = 1;
        else if (!rmod && kind != '{') trim_nl = 1; /* trim_blocks */
    }
    lex_push(L, T_EOF);
}

/* ================================================================== values */

enum { V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_MACRO, V_FUNC, V_METHOD };

typedef struct node node;
typedef struct vlist vlist;
typedef struct vdict vdict;
typedef struct val val;

struct val {
    uint8_t t;
    uint8_t ns;      /* V_DICT: a namespace() (assignable with set ns.x); V_LIST: a tuple (repr) */
    size_t n;        /* V_STR length */
    union {
        int64_t i;   /* V_INT, V_BOOL */
        double f;
        const char *s; /* V_STR; V_UNDEF: the name, for messages; V_FUNC / V_METHOD: the name */
        vlist *l;
        vdict *d;
        const node *m; /* V_MACRO */
    };
    val *self;       /* V_METHOD: the object */
};

struct vlist {
    val *v;
    size_t n, cap;
};
struct vdict {
    const char **k; /* [n] */
    size_t *kn;
    val *v;
    size_t n, cap;
};

static val mk_undef(const char *name) { val v = {0}; v.t = V_UNDEF; v.s = name; return v; }
static val mk_none(void) { val v = {0}; v.t = V_NONE; return v; }
static val mk_bool(int b) { val v = {0}; v.t = V_BOOL; v.i = !!b; return v; }
static val mk_int(int64_t i) { val v = {0}; v.t = V_INT; v.i = i; return v; }
static val mk_float(double f) { val v = {0}; v.t = V_FLOAT; v.f = f; return v; }
static val mk_str(const char *s, size_t n) { val v = {0}; v.t = V_STR; v.s = s; v.n = n; return v; }
static val mk_cstr(const char *s) { return mk_str(s, strlen(s)); }

static vlist *list_new(ctx *c, size_t cap) {
    vlist *l = amalloc(c, sizeof(vlist));
    l->cap = cap ? cap : 4;
    l->n = 0;
    l->v = amalloc(c, l->cap * sizeof(val));
    return l;
}
static void list_push(ctx *c, vlist *l, val v) {
    if (l->n == l->cap) {
        val *p = amalloc(c, l->cap * 2 * sizeof(val));
        memcpy(p, l->v, l->n * sizeof(val));
        l->v = p;
        l->cap *= 2;
    }
    l->v[l->n++] = v;
}
static val mk_list(vlist *l) { val v = {0}; v.t = V_LIST; v.l = l; return v; }

static vdict *dict_new(ctx *c) {
    vdict *d = amalloc(c, sizeof(vdict));
    memset(d, 0, sizeof(*d));
    return d;
}
static val *dict_get(const vdict *d, const char *k, size_t kn) {
    for (size_t i = 0; i < d->n; i++)
        if (d->kn[i] == kn && !memcmp(d->k[i], k, kn)) return &d->v[i];
    return NULL;
}
static void dict_set(ctx *c, vdict *d, const char *k, size_t kn, val v) {
    val *p = dict_get(d, k, kn);
    if (p) { *p = v; return; }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        const char **nk = amalloc(c, cap * sizeof(char *));
        size_t *nkn = amalloc(c, cap * sizeof(size_t));
        val *nv = amalloc(c, cap * sizeof(val));
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof(char *));
            memcpy(nkn, d->kn, d->n * sizeof(size_t));
            memcpy(nv, d->v, d->n * sizeof(val));
        }
        d->k = nk;
        d->kn = nkn;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->kn[d->n] = kn;
    d->v[d->n++] = v;
}
static val mk_dict(vdict *d) { val v = {0}; v.t = V_DICT; v.d = d; return v; }

static val from_json(ctx *c, const cJSON *j) {
    if (!j || cJSON_IsNull(j)) return mk_none();
    if (cJSON_IsBool(j)) return mk_bool(cJSON_IsTrue(j));
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (d == floor(d) && fabs(d) < 9007199254740992.0) return mk_int((int64_t)d);
        return mk_float(d);
    }
    if (cJSON_IsString(j)) return mk_cstr(j->valuestring);
    if (cJSON_IsArray(j)) {
        vlist *l = list_new(c, (size_t)cJSON_GetArraySize(j));
        const cJSON *e;
        cJSON_ArrayForEach(e, j) list_push(c, l, from_json(c, e));
        return mk_list(l);
    }
    if (cJSON_IsObject(j)) {
        vdict *d = dict_new(c);
        const cJSON *e;
        cJSON_ArrayForEach(e, j) {
            if (e->string) dict_set(c, d, e->string, strlen(e->string), from_json(c, e));
        }
        return mk_dict(d);
    }
    return mk_none();
}

static const char *type_name(const val *v) {
    switch (v->t) {
    case V_UNDEF: return "Undefined";
    case V_NONE: return "NoneType";
    case V_BOOL: return "bool";
    case V_INT: return "int";
    case V_FLOAT: return "float";
    case V_STR: return "str";
    case V_LIST: return "list";
    case V_DICT: return v->ns ? "Namespace" : "dict";
    case V_MACRO: return "Macro";
    default: return "function";
    }
}

static int truthy(const val *v) {
    switch (v->t) {
    case V_UNDEF: case V_NONE: return 0;
    case V_BOOL: case V_INT: return v->i != 0;
    case V_FLOAT: return v->f != 0;
    case V_STR: return v->n != 0;
    case V_LIST: return v->l->n != 0;
    case V_DICT: return v->ns || v->d->n != 0;
    default: return 1;
    }
}

/* Python float repr: shortest round-trip digits; fixed notation for 1e-4 <= |x| < 1e16. */
static void fmt_float(char *out, size_t cap, double f) {
    if (isnan(f)) { snprintf(out, cap, "nan"); return; }
    if (isinf(f)) { snprintf(out, cap, f < 0 ? "-inf" : "inf"); return; }
    char e[40];
    int p;
    for (p = 1; p <= 17; p++) {
        snprintf(e, sizeof(e), "%.*e", p - 1, f);
        if (strtod(e, NULL) == f) break;
    }
    /* e = [-]d.ddde[+-]XX */
    char digits[24];
    int nd = 0, neg = e[0] == '-';
    const char *q = e + neg;
    for (; *q && *q != 'e'; q++)
        if (*q != '.') digits[nd++] = *q;
    int ex = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    char *o = out;
    size_t rem = cap;
#define PUT(...) do { int w_ = snprintf(o, rem, __VA_ARGS__); if (w_ > 0 && (size_t)w_ < rem) { o += w_; rem -= (size_t)w_; } } while (0)
    if (neg) PUT("-");
    if (ex >= 16 || ex < -4) {
        PUT("%c", digits[0]);
        if (nd > 1) PUT(".%s", digits + 1);
        PUT("e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
    } else if (ex < 0) {
        PUT("0.");
        for (int k = 0; k < -ex - 1; k++) PUT("0");
        PUT("%s", digits);
    } else {
        for (int k = 0; k <= ex; k++) PUT("%c", k < nd ? digits[k] : '0');
        PUT(".");
        if (nd > ex + 1) PUT("%s", digits + ex + 1);
        else PUT("0");
    }
#undef PUT
}

static void repr_str(ctx *c, buf *b, const char *s, size_t n) {
    int has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    buf_put(c, b, &q, 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char tmp[8];
        if (ch == (unsigned char)q || ch == '\\') { tmp[0] = '\\'; tmp[1] = (char)ch; buf_put(c, b, tmp, 2); }
        else if (ch == '\n') buf_puts(c, b, "\\n");
        else if (ch == '\r') buf_puts(c, b, "\\r");
        else if (ch == '\t') buf_puts(c, b, "\\t");
        else if (ch < 0x20 || ch == 0x7f) { snprintf(tmp, sizeof(tmp), "\\x%02x", ch); buf_puts(c, b, tmp); }
        else buf_put(c, b, (const char *)&ch, 1);
    }
    buf_put(c, b, &q, 1);
}

static void to_str(ctx *c, buf *b, const val *v, int repr);

static void repr_seq(ctx *c, buf *b, const val *v) {
    if (v->t == V_LIST) {
        buf_puts(c, b, v->ns ? "(" : "[");
        for (size_t i = 0; i < v->l->n; i++) {
            if (i) buf_puts(c, b, ", ");
            to_str(c, b, &v->l->v[i], 1);
        }
        if (v->ns && v->l->n == 1) buf_puts(c, b, ",");
        buf_puts(c, b, v->ns ? ")" : "]");
    } else {
        if (v->ns) buf_puts(c, b, "<Namespace ");
        buf_puts(c, b, "{");
        for (size_t i = 0; i < v->d->n; i++) {
            if (i) buf_puts(c, b, ", ");
            repr_str(c, b, v->d->k[i], v->d->kn[i]);
            buf_puts(c, b, ": ");
            to_str(c, b, &v->d->v[i], 1);
        }
        buf_puts(c, b, v->ns ? "}>" : "}");
    }
}

/* str(v) (repr=0) or repr(v) (repr=1), as Python prints them. */
static void to_str(ctx *c, buf *b, const val *v, int repr) {
    char tmp[64];
    switch (v->t) {
    case V_UNDEF: break;
    case V_NONE: buf_puts(c, b, "None"); break;
    case V_BOOL: buf_puts(c, b, v->i ? "True" : "False"); break;
    case V_INT: snprintf(tmp, sizeof(tmp), "%lld", (long long)v->i); buf_puts(c, b, tmp); break;
    case V_FLOAT: fmt_float(tmp, sizeof(tmp), v->f); buf_puts(c, b, tmp); break;
    case V_STR: if (repr) repr_str(c, b, v->s, v->n); else buf_put(c, b, v->s, v->n); break;
    case V_LIST: case V_DICT: repr_seq(c, b, v); break;
    case V_MACRO: buf_puts(c, b, "<Macro>"); break;
    default: buf_puts(c, b, "<function>"); break;
    }
}

static val str_of(ctx *c, const val *v) {
    if (v->t == V_STR) return *v;
    buf b = {0};
    to_str(c, &b, v, 0);
    return mk_str(b.s ? b.s : "", b.n);
}

/* json.dumps(ensure_ascii=False), separators (", ", ": ") or with indent ("," and newlines). */
static void to_json(ctx *c, buf *b, const val *v, int indent, int level, int line) {
    char tmp[64];
    switch (v->t) {
    case V_NONE: buf_puts(c, b, "null"); return;
    case V_BOOL: buf_puts(c, b, v->i ? "true" : "false"); return;
    case V_INT: snprintf(tmp, sizeof(tmp), "%lld", (long long)v->i); buf_puts(c, b, tmp); return;
    case V_FLOAT:
        if (isnan(v->f)) buf_puts(c, b, "NaN");
        else if (isinf(v->f)) buf_puts(c, b, v->f < 0 ? "-Infinity" : "Infinity");
        else { fmt_float(tmp, sizeof(tmp), v->f); buf_puts(c, b, tmp); }
        return;
    case V_STR:
        buf_puts(c, b, "\"");
        for (size_t i = 0; i < v->n; i++) {
            unsigned char ch = (unsigned char)v->s[i];
            if (ch == '"') buf_puts(c, b, "\\\"");
            else if (ch == '\\') buf_puts(c, b, "\\\\");
            else if (ch == '\n') buf_puts(c, b, "\\n");
            else if (ch == '\r') buf_puts(c, b, "\\r");
            else if (ch == '\t') buf_puts(c, b, "\\t");
            else if (ch == '\b') buf_puts(c, b, "\\b");
            else if (ch == '\f') buf_puts(c, b, "\\f");
            else if (ch < 0x20) { snprintf(tmp, sizeof(tmp), "\\u%04x", ch); buf_puts(c, b, tmp); }
            else buf_put(c, b, (const char *)&ch, 1);
        }
        buf_puts(c, b, "\"");
        return;
    case V_LIST: case V_DICT: {
        int isl = v->t == V_LIST;
        size_t n = isl ? v->l->n : v->d->n;
        if (!n) { buf_puts(c, b, isl ? "[]" : "{}"); return; }
        buf_puts(c, b, isl ? "[" : "{");
        for (size_t i = 0; i < n; i++) {
            if (i) buf_puts(c, b, indent >= 0 ? "," : ", ");
            if (indent >= 0) {
                buf_puts(c, b, "\n");
                for (int k = 0; k < indent * (level + 1); k++) buf_puts(c, b, " ");
            }
            if (!isl) {
                val k = mk_str(v->d->k[i], v->d->kn[i]);
                to_json(c, b, &k, indent, level + 1, line);
                buf_puts(c, b, ": ");
            }
            to_json(c, b, isl ? &v->l->v[i] : &v->d->v[i], indent, level + 1, line);
        }
        if (indent >= 0) {
            buf_puts(c, b, "\n");
            for (int k = 0; k < indent * level; k++) buf_puts(c, b, " ");
        }
        buf_puts(c, b, isl ? "]" : "}");
        return;
    }
    default:
        fail(c, LL_ERR_INVALID, line, "Object of type %s is not JSON serializable", type_name(v));
    }
}

static int num_val(const val *v, double *f) {
    if (v->t == V_INT || v->t == V_BOOL) { *f = (double)v->i; return 1; }
    if (v->t == V_FLOAT) { *f = v->f; return 1; }
    return 0;
}

static int vequal(const val *a, const val *b) {
    double x = 0, y = 0;
    if (num_val(a, &x) && num_val(b, &y)) {
        if (a->t != V_FLOAT && b->t != V_FLOAT) return a->i == b->i;
        return x == y;
    }
    if (a->t != b->t) return 0;
    switch (a->t) {
    case V_UNDEF: case V_NONE: return 1;
    case V_STR: return a->n == b->n && !memcmp(a->s, b->s, a->n);
    case V_LIST:
        if (a->l->n != b->l->n) return 0;
        for (size_t i = 0; i < a->l->n; i++)
            if (!vequal(&a->l->v[i], &b->l->v[i])) return 0;
        return 1;
    case V_DICT:
        if (a->ns || b->ns) return a->d == b->d;
        if (a->d->n != b->d->n) return 0;
        for (size_t i = 0; i < a->d->n; i++) {
            val *o = dict_get(b->d, a->d->k[i], a->d->kn[i]);
            if (!o || !vequal(&a->d->v[i], o)) return 0;
        }
        return 1;
    default: return a->m == b->m && a->s == b->s;
    }
}

/* ================================================================== AST */

enum {
    /* statements */
    N_TEXT, N_OUT, N_IF, N_FOR, N_SET, N_SET_ATTR, N_SET_BLOCK, N_MACRO, N_BREAK, N_CONTINUE, N_BLOCK,
    /* expressions */
    E_LIT, E_NAME, E_ATTR, E_ITEM, E_SLICE, E_CALL, E_FILTER, E_TEST, E_BIN, E_NEG, E_POS, E_AND, E_OR, E_NOT,
    E_COND, E_LIST, E_DICT, E_CONCAT,
};

struct node {
    int kind, line;
    node *a, *b, *c;
    node **list;      /* body / args / elements / dict keys */
    int nlist;
    node **list2;     /* else body / kwarg values / dict values */
    int nlist2;
    const char **names; /* targets / params / kwarg names */
    int nnames;
    const char *s;    /* name, attribute, operator, filter or test */
    size_t sn;
    val lit;
    int neg;          /* E_TEST: is not; E_BIN: op code */
};

typedef struct parser {
    ctx *c;
    tok *t;
    size_t i;
} parser;

static node *nnew(parser *P, int kind) {
    node *n = amalloc(P->c, sizeof(node));
    memset(n, 0, sizeof(*n));
    n->kind = kind;
    n->line = P->t[P->i].line;
    return n;
}

typedef struct nvec {
    node **v;
    int n, cap;
} nvec;
static void nvec_push(ctx *c, nvec *v, node *n) {
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 8;
        node **p = amalloc(c, (size_t)cap * sizeof(node *));
        if (v->n) memcpy(p, v->v, (size_t)v->n * sizeof(node *));
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = n;
}

static tok *peek(parser *P) { return &P->t[P->i]; }
static int is_op(parser *P, const char *op) { tok *t = peek(P); return t->type == T_OP && !strcmp(t->s, op); }
static int is_name(parser *P, const char *nm) { tok *t = peek(P); return t->type == T_NAME && !strcmp(t->s, nm); }
static const char *tok_desc(tok *t) {
    switch (t->type) {
    case T_NAME: case T_OP: return t->s;
    case T_STRING: return "string";
    case T_INT: case T_FLOAT: return "number";
    case T_VAR_END: return "}}";
    case T_BLOCK_END: return "%}";
    case T_EOF: return "end of template";
    default: return "text";
    }
}
static void expect_op(parser *P, const char *op) {
    if (!is_op(P, op)) fail(P->c, LL_ERR_FORMAT, peek(P)->line, "expected '%s', found '%s'", op, tok_desc(peek(P)));
    P->i++;
}
static const char *expect_name(parser *P) {
    tok *t = peek(P);
    if (t->type != T_NAME) fail(P->c, LL_ERR_FORMAT, t->line, "expected a name, found '%s'", tok_desc(t));
    P->i++;
    return t->s;
}
static void expect_type(parser *P, int type, const char *what) {
    if (peek(P)->type != type) fail(P->c, LL_ERR_FORMAT, peek(P)->line, "expected '%s', found '%s'", what, tok_desc(peek(P)));
    P->i++;
}

static node *parse_expr(parser *P);
static node *parse_or(parser *P);
static node *parse_unary(parser *P, int with_filter);

/* call arguments after '(' : positional, then name=value */
static void parse_args(parser *P, node *n) {
    nvec args = {0}, kwv = {0};
    const char **kn = NULL;
    int nk = 0, capk = 0;
    while (!is_op(P, ")")) {
        if (args.n + nk) expect_op(P, ",");
        if (is_op(P, ")")) break;
        if (peek(P)->type == T_NAME && P->t[P->i + 1].type == T_OP && !strcmp(P->t[P->i + 1].s, "=")) {
            const char *k = expect_name(P);
            P->i++;
            if (nk == capk) {
                capk = capk ? capk * 2 : 4;
                const char **p = amalloc(P->c, (size_t)capk * sizeof(char *));
                if (nk) memcpy(p, kn, (size_t)nk * sizeof(char *));
                kn = p;
            }
            kn[nk++] = k;
            nvec_push(P->c, &kwv, parse_expr(P));
        } else {
            if (nk) fail(P->c, LL_ERR_FORMAT, peek(P)->line, "positional argument after keyword argument");
            if (is_op(P, "*") || is_op(P, "**")) fail(P->c, LL_ERR_UNSUPPORTED, peek(P)->line, "unsupported construct '*args'");
            nvec_push(P->c, &args, parse_expr(P));
        }
    }
    expect_op(P, ")");
    n->list = args.v;
    n->nlist = args.n;
    n->list2 = kwv.v;
    n->nlist2 = nk;
    n->names = kn;
    n->nnames = nk;
}

static node *parse_primary(parser *P) {
    tok *t = peek(P);
    node *n;
    if (t->type == T_NAME) {
        P->i++;
        n = nnew(P, E_LIT);
        n->line = t->line;
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True")) n->lit = mk_bool(1);
        else if (!strcmp(t->s, "false") || !strcmp(t->s, "False")) n->lit = mk_bool(0);
        else if (!strcmp(t->s, "none") || !strcmp(t->s, "None")) n->lit = mk_none();
        else { n->kind = E_NAME; n->s = t->s; n->sn = t->n; }
        return n;
    }
    if (t->type == T_STRING) {
        /* adjacent literals concatenate, as in Python */
        buf b = {0};
        int line = t->line;
        while (peek(P)->type == T_STRING) { buf_put(P->c, &b, peek(P)->s, peek(P)->n); P->i++; }
        n = nnew(P, E_LIT);
        n->line = line;
        n->lit = mk_str(b.s ? b.s : "", b.n);
        return n;
    }
    if (t->type == T_INT || t->type == T_FLOAT) {
        P->i++;
        n = nnew(P, E_LIT);
        n->lit = t->type == T_INT ? mk_int(t->i) : mk_float(t->f);
        return n;
    }
    if (is_op(P, "(")) {
        P->i++;
        if (is_op(P, ")")) { P->i++; n = nnew(P, E_LIST); n->neg = 1; return n; } /* () */
        node *e = parse_expr(P);
        if (is_op(P, ",")) { /* tuple: behaves as a list here */
            nvec v = {0};
            nvec_push(P->c, &v, e);
            while (is_op(P, ",")) {
                P->i++;
                if (is_op(P, ")")) break;
                nvec_push(P->c, &v, parse_expr(P));
            }
            e = nnew(P, E_LIST);
            e->list = v.v;
            e->nlist = v.n;
            e->neg = 1; /* tuple */
        }
        if (e->kind == E_BIN && e->neg == 2) e->neg = 3; /* (a < b) < c does not chain */
        expect_op(P, ")");
        return e;
    }
    if (is_op(P, "[")) {
        P->i++;
        n = nnew(P, E_LIST);
        nvec v = {0};
        while (!is_op(P, "]")) {
            if (v.n) expect_op(P, ",");
            if (is_op(P, "]")) break;
            nvec_push(P->c, &v, parse_expr(P));
        }
        P->i++;
        n->list = v.v;
        n->nlist = v.n;
        return n;
    }
    if (is_op(P, "{")) {
        P->i++;
        n = nnew(P, E_DICT);
        nvec k = {0}, v = {0};
        while (!is_op(P, "}")) {
            if (k.n) expect_op(P, ",");
            if (is_op(P, "}")) break;
            nvec_push(P->c, &k, parse_expr(P));
            expect_op(P, ":");
            nvec_push(P->c, &v, parse_expr(P));
        }
        P->i++;
        n->list = k.v;
        n->nlist = k.n;
        n->list2 = v.v;
        n->nlist2 = v.n;
        return n;
    }
    fail(P->c, LL_ERR_FORMAT, t->line, "unexpected '%s' in an expression", tok_desc(t));
}

static node *parse_postfix(parser *P, node *n) {
    for (;;) {
        if (is_op(P, ".")) {
            P->i++;
            node *a = nnew(P, E_ATTR);
            tok *t = peek(P);
            if (t->type == T_INT) { /* x.0 → item 0 */
                P->i++;
                a->kind = E_ITEM;
                a->a = n;
                a->b = nnew(P, E_LIT);
                a->b->lit = mk_int(t->i);
            } else {
                a->a = n;
                a->s = expect_name(P);
                a->sn = strlen(a->s);
            }
            n = a;
        } else if (is_op(P, "[")) {
            P->i++;
            node *start = NULL, *stop = NULL, *step = NULL;
            int slice = 0;
            if (!is_op(P, ":")) start = parse_expr(P);
            if (is_op(P, ":")) {
                slice = 1;
                P->i++;
                if (!is_op(P, "]") && !is_op(P, ":")) stop = parse_expr(P);
                if (is_op(P, ":")) {
                    P->i++;
                    if (!is_op(P, "]")) step = parse_expr(P);
                }
            }
            expect_op(P, "]");
            node *a = nnew(P, slice ? E_SLICE : E_ITEM);
            a->a = n;
            a->b = start;
            if (slice) {
                a->list = amalloc(P->c, 3 * sizeof(node *));
                a->list[0] = start;
                a->list[1] = stop;
                a->list[2] = step;
            }
            n = a;
        } else if (is_op(P, "(")) {
            P->i++;
            node *a = nnew(P, E_CALL);
            a->a = n;
            parse_args(P, a);
            n = a;
        } else {
            return n;
        }
    }
}

static node *parse_filters(parser *P, node *n) {
    for (;;) {
        if (is_op(P, "|")) {
            P->i++;
            node *f = nnew(P, E_FILTER);
            f->a = n;
            f->s = expect_name(P);
            while (is_op(P, ".")) { /* dotted filter names are not a thing we know */
                fail(P->c, LL_ERR_UNSUPPORTED, peek(P)->line, "unsupported filter name '%s.'", f->s);
            }
            if (is_op(P, "(")) { P->i++; parse_args(P, f); }
            n = f;
        } else if (is_name(P, "is")) {
            P->i++;
            node *t = nnew(P, E_TEST);
            t->a = n;
            if (is_name(P, "not")) { P->i++; t->neg = 1; }
            t->s = expect_name(P);
            if (is_op(P, "(")) { P->i++; parse_args(P, t); }
            else {
                /* one bare argument: `is sameas x`, `is divisibleby 3` */
                tok *k = peek(P);
                if (k->type == T_STRING || k->type == T_INT || k->type == T_FLOAT ||
                    (k->type == T_NAME && strcmp(k->s, "and") && strcmp(k->s, "or") && strcmp(k->s, "if") &&
                     strcmp(k->s, "else") && strcmp(k->s, "is") && strcmp(k->s, "in") && strcmp(k->s, "not"))) {
                    t->list = amalloc(P->c, sizeof(node *));
                    t->list[0] = parse_primary(P);
                    t->list[0] = parse_postfix(P, t->list[0]);
                    t->nlist = 1;
                }
            }
            n = t;
        } else {
            return n;
        }
    }
}

static node *parse_unary(parser *P, int with_filter) {
    node *n;
    if (is_op(P, "-") || is_op(P, "+")) {
        int neg = is_op(P, "-");
        P->i++;
        n = nnew(P, neg ? E_NEG : E_POS);
        n->a = parse_unary(P, 0);
    } else {
        n = parse_postfix(P, parse_primary(P));
    }
    return with_filter ? parse_filters(P, n) : n;
}

static node *mkbin(parser *P, const char *op, node *a, node *b) {
    node *n = nnew(P, E_BIN);
    n->s = op;
    n->a = a;
    n->b = b;
    return n;
}

static node *parse_pow(parser *P) {
    node *n = parse_unary(P, 1);
    while (is_op(P, "**")) { P->i++; n = mkbin(P, "**", n, parse_unary(P, 1)); }
    return n;
}
static node *parse_math2(parser *P) {
    node *n = parse_pow(P);
    while (is_op(P, "*") || is_op(P, "/") || is_op(P, "//") || is_op(P, "%")) {
        const char *op = peek(P)->s;
        P->i++;
        n = mkbin(P, op, n, parse_pow(P));
    }
    return n;
}
static node *parse_concat(parser *P) {
    node *n = parse_math2(P);
    while (is_op(P, "~")) { P->i++; node *c = nnew(P, E_CONCAT); c->a = n; c->b = parse_math2(P); n = c; }
    return n;
}
static node *parse_math1(parser *P) {
    node *n = parse_concat(P);
    while (is_op(P, "+") || is_op(P, "-")) {
        const char *op = peek(P)->s;
        P->i++;
        n = mkbin(P, op, n, parse_concat(P));
    }
    return n;
}
static node *parse_compare(parser *P) {
    node *n = parse_math1(P);
    for (;;) {
        const char *op = NULL;
        if (is_op(P, "==") || is_op(P, "!=") || is_op(P, "<") || is_op(P, "<=") || is_op(P, ">") || is_op(P, ">=")) {
            op = peek(P)->s;
            P->i++;
        } else if (is_name(P, "in")) {
            op = "in";
            P->i++;
        } else if (is_name(P, "not") && P->t[P->i + 1].type == T_NAME && !strcmp(P->t[P->i + 1].s, "in")) {
            op = "not in";
            P->i += 2;
        } else {
            return n;
        }
        int chained = n->kind == E_BIN && n->neg == 2;
        n = mkbin(P, op, n, parse_math1(P));
        n->neg = 2;        /* a comparison: a < b < c means a < b and b < c */
        n->c = chained ? n->a : NULL;
    }
}
static node *parse_not(parser *P) {
    if (is_name(P, "not")) {
        P->i++;
        node *n = nnew(P, E_NOT);
        n->a = parse_not(P);
        return n;
    }
    return parse_compare(P);
}
static node *parse_and(parser *P) {
    node *n = parse_not(P);
    while (is_name(P, "and")) { P->i++; node *a = nnew(P, E_AND); a->a = n; a->b = parse_not(P); n = a; }
    return n;
}
static node *parse_or(parser *P) {
    node *n = parse_and(P);
    while (is_name(P, "or")) { P->i++; node *a = nnew(P, E_OR); a->a = n; a->b = parse_and(P); n = a; }
    return n;
}
static node *parse_expr(parser *P) {
    if (++P->c->depth > 200) fail(P->c, LL_ERR_FORMAT, peek(P)->line, "expression nested too deeply");
    node *n = parse_or(P);
    while (is_name(P, "if")) {
        P->i++;
        node *c = nnew(P, E_COND);
        c->a = parse_or(P);
        c->b = n;
        if (is_name(P, "else")) { P->i++; c->c = parse_expr(P); }
        n = c;
    }
    P->c->depth--;
    return n;
}

/* ---- statements */

static node **parse_body(parser *P, int *count, const char *const *ends, const char **which);

/* target list: a | a, b | (a, b) */
static void parse_targets(parser *P, node *n) {
    const char **names = amalloc(P->c, 16 * sizeof(char *));
    int k = 0, paren = is_op(P, "(");
    if (paren) P->i++;
    do {
        if (k && is_op(P, ",")) P->i++;
        if (k == 16) fail(P->c, LL_ERR_UNSUPPORTED, peek(P)->line, "too many targets");
        names[k++] = expect_name(P);
    } while (is_op(P, ","));
    if (paren) expect_op(P, ")");
    n->names = names;
    n->nnames = k;
}

static node *parse_stmt(parser *P) {
    tok *kw = peek(P);
    int line = kw->line;
    if (kw->type != T_NAME) fail(P->c, LL_ERR_FORMAT, line, "expected a statement after '{%%'");
    const char *k = kw->s;
    P->i++;
    node *n;
    if (!strcmp(k, "if")) {
        n = nnew(P, N_IF);
        n->line = line;
        n->a = parse_expr(P);
        expect_type(P, T_BLOCK_END, "%}");
        static const char *const ends[] = {"elif", "else", "endif", NULL};
        const char *which;
        n->list = parse_body(P, &n->nlist, ends, &which);
        node *cur = n;
        while (!strcmp(which, "elif")) {
            node *e = nnew(P, N_IF);
            e->a = parse_expr(P);
            expect_type(P, T_BLOCK_END, "%}");
            e->list = parse_body(P, &e->nlist, ends, &which);
            cur->list2 = amalloc(P->c, sizeof(node *));
            cur->list2[0] = e;
            cur->nlist2 = 1;
            cur = e;
        }
        if (!strcmp(which, "else")) {
            expect_type(P, T_BLOCK_END, "%}");
            static const char *const ends2[] = {"endif", NULL};
            cur->list2 = parse_body(P, &cur->nlist2, ends2, &which);
        }
        expect_type(P, T_BLOCK_END, "%}");
        return n;
    }
    if (!strcmp(k, "for")) {
        n = nnew(P, N_FOR);
        n->line = line;
        parse_targets(P, n);
        if (!is_name(P, "in")) fail(P->c, LL_ERR_FORMAT, line, "expected 'in' in a for loop");
        P->i++;
        n->a = parse_or(P); /* no conditional expression here: `if` filters the loop */
        if (is_name(P, "if")) { P->i++; n->b = parse_or(P); }
        if (is_name(P, "recursive")) fail(P->c, LL_ERR_UNSUPPORTED, line, "unsupported construct 'for ... recursive'");
        expect_type(P, T_BLOCK_END, "%}");
        static const char *const ends[] = {"else", "endfor", NULL};
        const char *which;
        n->list = parse_body(P, &n->nlist, ends, &which);
        if (!strcmp(which, "else")) {
            expect_type(P, T_BLOCK_END, "%}");
            static const char *const ends2[] = {"endfor", NULL};
            n->list2 = parse_body(P, &n->nlist2, ends2, &which);
        }
        expect_type(P, T_BLOCK_END, "%}");
        return n;
    }
    if (!strcmp(k, "set")) {
        if (peek(P)->type == T_NAME && P->t[P->i + 1].type == T_OP && !strcmp(P->t[P->i + 1].s, ".")) {
            n = nnew(P, N_SET_ATTR);
            n->line = line;
            n->s = expect_name(P);
            P->i++;
            n->names = amalloc(P->c, sizeof(char *));
            n->names[0] = expect_name(P);
            n->nnames = 1;
            expect_op(P, "=");
            n->a = parse_expr(P);
            expect_type(P, T_BLOCK_END, "%}");
            return n;
        }
        n = nnew(P, N_SET);
        n->line = line;
        parse_targets(P, n);
        if (peek(P)->type == T_BLOCK_END) { /* {% set x %}...{% endset %} */
            if (n->nnames != 1) fail(P->c, LL_ERR_FORMAT, line, "block set takes one name");
            n->kind = N_SET_BLOCK;
            P->i++;
            static const char *const ends[] = {"endset", NULL};
            const char *which;
            n->list = parse_body(P, &n->nlist, ends, &which);
            expect_type(P, T_BLOCK_END, "%}");
            return n;
        }
        if (is_op(P, "|")) fail(P->c, LL_ERR_UNSUPPORTED, line, "unsupported construct 'filtered block set'");
        expect_op(P, "=");
        n->a = parse_expr(P);
        if (is_op(P, ",")) { /* set a, b = x, y */
            nvec v = {0};
            nvec_push(P->c, &v, n->a);
            while (is_op(P, ",")) { P->i++; nvec_push(P->c, &v, parse_expr(P)); }
            n->a = nnew(P, E_LIST);
            n->a->list = v.v;
            n->a->nlist = v.n;
        }
        expect_type(P, T_BLOCK_END, "%}");
        return n;
    }
    if (!strcmp(k, "macro")) {
        n = nnew(P, N_MACRO);
        n->line = line;
        n->s = expect_name(P);
        expect_op(P, "(");
        const char **names = amalloc(P->c, 32 * sizeof(char *));
        node **defs = amalloc(P->c, 32 * sizeof(node *));
        int np = 0;
        while (!is_op(P, ")")) {
            if (np) expect_op(P, ",");
            if (np == 32) fail(P->c, LL_ERR_UNSUPPORTED, line, "too many macro parameters");
            names[np] = expect_name(P);
            defs[np] = NULL;
            if (is_op(P, "=")) { P->i++; defs[np] = parse_expr(P); }
            np++;
        }
        P->i++;
        expect_type(P, T_BLOCK_END, "%}");
        n->names = names;
        n->nnames = np;
        n->list2 = defs;
        n->nlist2 = np;
        static const char *const ends[] = {"endmacro", NULL};
        const char *which;
        n->list = parse_body(P, &n->nlist, ends, &which);
        if (peek(P)->type == T_NAME) P->i++; /* {% endmacro name %} */
        expect_type(P, T_BLOCK_END, "%}");
        return n;
    }
    if (!strcmp(k, "break") || !strcmp(k, "continue")) {
        n = nnew(P, !strcmp(k, "break") ? N_BREAK : N_CONTINUE);
        n->line = line;
        expect_type(P, T_BLOCK_END, "%}");
        return n;
    }
    if (!strcmp(k, "generation")) { /* transformers' AssistantTracker: renders its body */
        n = nnew(P, N_BLOCK);
        n->line = line;
        expect_type(P, T_BLOCK_END, "%}");
        static const char *const ends[] = {"endgeneration", NULL};
        const char *which;
        n->list = parse_body(P, &n->nlist, ends, &which);
        expect_type(P, T_BLOCK_END, "%}");
        return n;
    }
    fail(P->c, LL_ERR_UNSUPPORTED, line, "unsupported construct '{%% %s %%}'", k);
}

static node **parse_body(parser *P, int *count, const char *const *ends, const char **which) {
    nvec v = {0};
    if (++P->c->depth > 200) fail(P->c, LL_ERR_FORMAT, peek(P)->line, "blocks nested too deeply");
    for (;;) {
        tok *t = peek(P);
        if (t->type == T_EOF) {
            if (ends) {
                int k = 0;
                while (ends[k + 1]) k++; /* the closing keyword is listed last */
                fail(P->c, LL_ERR_FORMAT, t->line, "missing '{%% %s %%}' at end of template", ends[k]);
            }
            break;
        }
        if (t->type == T_TEXT) {
            P->i++;
            if (!t->n) continue;
            node *n = nnew(P, N_TEXT);
            n->s = t->s;
            n->sn = t->n;
            nvec_push(P->c, &v, n);
            continue;
        }
        if (t->type == T_VAR_BEGIN) {
            P->i++;
            node *n = nnew(P, N_OUT);
            n->a = parse_expr(P);
            expect_type(P, T_VAR_END, "}}");
            nvec_push(P->c, &v, n);
            continue;
        }
        if (t->type == T_BLOCK_BEGIN) {
            tok *k = &P->t[P->i + 1];
            if (k->type == T_NAME && ends) {
                int hit = 0;
                for (int j = 0; ends[j]; j++)
                    if (!strcmp(k->s, ends[j])) { *which = ends[j]; hit = 1; }
                if (hit) { P->i += 2; break; }
            }
            if (k->type == T_NAME && (!strncmp(k->s, "end", 3) || !strcmp(k->s, "else") || !strcmp(k->s, "elif")))
                fail(P->c, LL_ERR_FORMAT, k->line, "unexpected '{%% %s %%}'", k->s);
            P->i++;
            nvec_push(P->c, &v, parse_stmt(P));
            continue;
        }
        fail(P->c, LL_ERR_FORMAT, t->line, "unexpected '%s'", tok_desc(t));
    }
    P->c->depth--;
    *count = v.n;
    return v.v;
}

struct tmpl {
    arena_blk *arena;
    node **body;
    int nbody;
    char *name;
};

ll_status tmpl_parse(const char *src, size_t len, const char *name, tmpl **out) {
    *out = NULL;
    ctx c = {0};
    c.name = name ? name : "template";
    tmpl *t = ll_calloc(1, sizeof(tmpl));
    if (!t) return ll_err(LL_ERR_OOM, "%s: out of memory", c.name);
    t->name = ll_strdup(c.name);
    if (!t->name) { ll_free(t); return ll_err(LL_ERR_OOM, "%s: out of memory", c.name); }
    c.name = t->name;
    if (setjmp(c.jb)) {
        arena_free(c.blk);
        ll_free(t->name);
        ll_free(t);
        return ll_err(c.st, "%s", c.msg);
    }
    /* Jinja reads the source with newlines normalised to \n and drops one trailing newline */
    char *s = amalloc(&c, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') { s[n++] = '\n'; if (i + 1 < len && src[i + 1] == '\n') i++; }
        else s[n++] = src[i];
    }
    if (n && s[n - 1] == '\n') n--;
    s[n] = 0;
    lexer L = {.c = &c, .src = s, .len = n, .line = 1};
    lex_all(&L);
    parser P = {.c = &c, .t = L.toks, .i = 0};
    t->body = parse_body(&P, &t->nbody, NULL, NULL);
    t->arena = c.blk;
    *out = t;
    return LL_OK;
}

void tmpl_free(tmpl *t) {
    if (!t) return;
    arena_free(t->arena);
    ll_free(t->name);
    ll_free(t);
}

/* ================================================================== evaluation */

typedef struct scope {
    struct scope *parent;
    vdict *vars;
} scope;

typedef struct rstate {
    ctx *c;
    scope *root;
} rstate;

static val eval(rstate *R, scope *S, const node *n);
enum { FLOW_NORMAL, FLOW_BREAK, FLOW_CONTINUE };
static int exec_body(rstate *R, scope *S, node **body, int n, buf *out);

static scope *scope_new(rstate *R, scope *parent) {
    scope *s = amalloc(R->c, sizeof(scope));
    s->parent = parent;
    s->vars = dict_new(R->c);
    return s;
}

static val lookup(rstate *R, scope *S, const char *name, size_t n) {
    for (scope *s = S; s; s = s->parent) {
        val *v = dict_get(s->vars, name, n);
        if (v) return *v;
    }
    static const char *const funcs[] = {"raise_exception", "namespace", "range", "strftime_now", "dict", NULL};
    for (int i = 0; funcs[i]; i++)
        if (strlen(funcs[i]) == n && !memcmp(funcs[i], name, n)) {
            val f = {0};
            f.t = V_FUNC;
            f.s = funcs[i];
            return f;
        }
    (void)R;
    return mk_undef(name);
}

static void scope_set(rstate *R, scope *S, const char *name, val v) { dict_set(R->c, S->vars, name, strlen(name), v); }

/* ---- UTF-8 code point helpers for Python string indexing */

static size_t cp_count(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}
/* byte offset of code point index i (clamped to n) */
static size_t cp_offset(const char *s, size_t n, size_t i) {
    size_t b = 0;
    while (b < n && i) {
        b++;
        while (b < n && ((unsigned char)s[b] & 0xC0) == 0x80) b++;
        i--;
    }
    return b;
}

/* Python's str.isspace set, for strip/split without arguments */
static size_t space_at(const char *s, size_t n, size_t i) {
    unsigned char ch = (unsigned char)s[i];
    if (ch == ' ' || (ch >= 0x09 && ch <= 0x0D) || (ch >= 0x1C && ch <= 0x1F)) return 1;
    if (ch < 0x80) return 0;
    int k = tok_utf8_seq_len((const uint8_t *)s + i, n - i);
    if (!k) return 0;
    uint32_t cp = 0;
    if (k == 2) cp = ((ch & 0x1Fu) << 6) | ((unsigned char)s[i + 1] & 0x3Fu);
    else if (k == 3) cp = ((ch & 0x0Fu) << 12) | (((unsigned char)s[i + 1] & 0x3Fu) << 6) | ((unsigned char)s[i + 2] & 0x3Fu);
    else return 0;
    if (cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
        cp == 0x202F || cp == 0x205F || cp == 0x3000)
        return (size_t)k;
    return 0;
}
static size_t space_before(const char *s, size_t n, size_t end) { /* space ending at `end`? its length */
    for (size_t k = 1; k <= 3 && k <= end; k++) {
        size_t l = space_at(s, n, end - k);
        if (l == k) return k;
    }
    return 0;
}

/* strip chars: NULL = whitespace; else any code point of `chars` */
static int in_chars(const char *chars, size_t cn, const char *s, size_t n, size_t i, size_t *len) {
    int k = tok_utf8_seq_len((const uint8_t *)s + i, n - i);
    if (!k) k = 1;
    for (size_t j = 0; j < cn;) {
        int l = tok_utf8_seq_len((const uint8_t *)chars + j, cn - j);
        if (!l) l = 1;
        if (l == k && !memcmp(chars + j, s + i, (size_t)k)) { *len = (size_t)k; return 1; }
        j += (size_t)l;
    }
    return 0;
}

static val do_strip(const val *v, const val *chars, int left, int right) {
    const char *s = v->s;
    size_t a = 0, b = v->n, l;
    int ws = !chars || chars->t == V_NONE;
    if (left)
        while (a < b) {
            if (ws) { l = space_at(s, b, a); if (!l) break; }
            else if (!in_chars(chars->s, chars->n, s, b, a, &l)) break;
            a += l;
        }
    if (right)
        while (b > a) {
            if (ws) { l = space_before(s, b, b); if (!l) break; }
            else {
                size_t st = b - 1;
                while (st > a && ((unsigned char)s[st] & 0xC0) == 0x80) st--;
                if (!in_chars(chars->s, chars->n, s, b, st, &l) || st + l != b) break;
                l = b - st;
            }
            b -= l;
        }
    return mk_str(s + a, b - a);
}

static const char *memfind(const char *h, size_t hn, const char *nd, size_t nn) {
    if (!nn) return h;
    if (nn > hn) return NULL;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == nd[0] && !memcmp(h + i, nd, nn)) return h + i;
    return NULL;
}

/* ---- arguments */

typedef struct args {
    val *pos;
    int npos;
    const char **kn;
    val *kv;
    int nkw;
} args;

static void eval_args(rstate *R, scope *S, const node *n, args *a) {
    a->npos = n->nlist;
    a->nkw = n->nnames;
    a->pos = a->npos ? amalloc(R->c, (size_t)a->npos * sizeof(val)) : NULL;
    a->kv = a->nkw ? amalloc(R->c, (size_t)a->nkw * sizeof(val)) : NULL;
    a->kn = n->names;
    for (int i = 0; i < a->npos; i++) a->pos[i] = eval(R, S, n->list[i]);
    for (int i = 0; i < a->nkw; i++) a->kv[i] = eval(R, S, n->list2[i]);
}

/* positional i, else keyword `name`, else NULL */
static const val *arg(const args *a, int i, const char *name) {
    if (i >= 0 && i < a->npos) return &a->pos[i];
    for (int k = 0; k < a->nkw; k++)
        if (name && !strcmp(a->kn[k], name)) return &a->kv[k];
    return NULL;
}

static void need_str(rstate *R, const val *v, int line, const char *what) {
    if (!v || v->t != V_STR) fail(R->c, LL_ERR_INVALID, line, "%s expects a string, got %s", what, v ? type_name(v) : "nothing");
}

static int64_t need_int(rstate *R, const val *v, int line, const char *what) {
    if (!v || (v->t != V_INT && v->t != V_BOOL)) fail(R->c, LL_ERR_INVALID, line, "%s expects an integer, got %s", what, v ? type_name(v) : "nothing");
    return v->i;
}

static val items_of(rstate *R, const val *v, int line) {
    if (v->t == V_UNDEF) return mk_list(list_new(R->c, 1));
    if (v->t != V_DICT) fail(R->c, LL_ERR_INVALID, line, "Can only get item pairs from a mapping.");
    vlist *l = list_new(R->c, v->d->n);
    for (size_t i = 0; i < v->d->n; i++) {
        vlist *p = list_new(R->c, 2);
        list_push(R->c, p, mk_str(v->d->k[i], v->d->kn[i]));
        list_push(R->c, p, v->d->v[i]);
        val pv = mk_list(p);
        pv.ns = 1; /* a tuple */
        list_push(R->c, l, pv);
    }
    return mk_list(l);
}

/* iterable → list of items (dict: keys; string: characters; undefined: empty) */
static vlist *iter_list(rstate *R, const val *v, int line) {
    if (v->t == V_LIST) return v->l;
    vlist *l = list_new(R->c, 4);
    if (v->t == V_UNDEF) return l;
    if (v->t == V_DICT) {
        for (size_t i = 0; i < v->d->n; i++) list_push(R->c, l, mk_str(v->d->k[i], v->d->kn[i]));
        return l;
    }
    if (v->t == V_STR) {
        for (size_t i = 0; i < v->n;) {
            size_t k = cp_offset(v->s + i, v->n - i, 1);
            list_push(R->c, l, mk_str(v->s + i, k));
            i += k;
        }
        return l;
    }
    fail(R->c, LL_ERR_INVALID, line, "'%s' object is not iterable", type_name(v));
}

static val call_method(rstate *R, const val *self, const char *name, const args *a, int line) {
    ctx *c = R->c;
    if (self->t == V_STR) {
        const val *x = arg(a, 0, NULL);
        if (!strcmp(name, "strip") || !strcmp(name, "lstrip") || !strcmp(name, "rstrip")) {
            if (x && x->t != V_STR && x->t != V_NONE) need_str(R, x, line, name);
            return do_strip(self, x, name[0] != 'r', name[0] != 'l');
        }
        if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) {
            int ends = name[0] == 'e';
            vlist one = {0};
            const vlist *opts;
            if (x && x->t == V_LIST) opts = x->l;
            else { need_str(R, x, line, name); one.v = (val *)x; one.n = 1; opts = &one; }
            for (size_t i = 0; i < opts->n; i++) {
                const val *p = &opts->v[i];
                need_str(R, p, line, name);
                if (p->n <= self->n && !memcmp(self->s + (ends ? self->n - p->n : 0), p->s, p->n)) return mk_bool(1);
            }
            return mk_bool(0);
        }
        if (!strcmp(name, "split") || !strcmp(name, "rsplit")) {
            const val *sep = arg(a, 0, "sep"), *mx = arg(a, 1, "maxsplit");
            int64_t maxs = mx ? need_int(R, mx, line, "split") : -1;
            vlist *l = list_new(c, 4);
            if (!sep || sep->t == V_NONE) { /* runs of whitespace */
                size_t i = 0, n = self->n;
                int64_t done = 0;
                if (!strcmp(name, "rsplit") && maxs >= 0) fail(c, LL_ERR_UNSUPPORTED, line, "unsupported: rsplit() with maxsplit");
                for (;;) {
                    size_t l2;
                    while (i < n && (l2 = space_at(self->s, n, i))) i += l2;
                    if (i >= n) break;
                    if (maxs >= 0 && done == maxs) {
                        val r = do_strip(&(val){.t = V_STR, .s = self->s + i, .n = n - i}, NULL, 0, 1);
                        list_push(c, l, r);
                        break;
                    }
                    size_t j = i;
                    while (j < n && !space_at(self->s, n, j)) j++;
                    list_push(c, l, mk_str(self->s + i, j - i));
                    done++;
                    i = j;
                }
                return mk_list(l);
            }
            need_str(R, sep, line, "split");
            if (!sep->n) fail(c, LL_ERR_INVALID, line, "empty separator");
            if (!strcmp(name, "rsplit")) {
                /* from the right; collected reversed then flipped */
                size_t end = self->n;
                int64_t done = 0;
                vlist *r = list_new(c, 4);
                for (;;) {
                    const char *hit = NULL;
                    if (maxs < 0 || done < maxs)
                        for (size_t i = end; i >= sep->n; i--)
                            if (!memcmp(self->s + i - sep->n, sep->s, sep->n)) { hit = self->s + i - sep->n; break; }
                    if (!hit) { list_push(c, r, mk_str(self->s, end)); break; }
                    list_push(c, r, mk_str(hit + sep->n, (size_t)(self->s + end - hit - (ptrdiff_t)sep->n)));
                    end = (size_t)(hit - self->s);
                    done++;
                }
                for (size_t i = r->n; i-- > 0;) list_push(c, l, r->v[i]);
                return mk_list(l);
            }
            size_t i = 0;
            int64_t done = 0;
            for (;;) {
                const char *hit = (maxs < 0 || done < maxs) ? memfind(self->s + i, self->n - i, sep->s, sep->n) : NULL;
                if (!hit) { list_push(c, l, mk_str(self->s + i, self->n - i)); break; }
                list_push(c, l, mk_str(self->s + i, (size_t)(hit - self->s) - i));
                i = (size_t)(hit - self->s) + sep->n;
                done++;
            }
            return mk_list(l);
        }
        if (!strcmp(name, "upper") || !strcmp(name, "lower")) {
            char *o = astrndup(c, self->s, self->n);
            for (size_t i = 0; i < self->n; i++) {
                if (name[0] == 'u' && o[i] >= 'a' && o[i] <= 'z') o[i] = (char)(o[i] - 32);
                if (name[0] == 'l' && o[i] >= 'A' && o[i] <= 'Z') o[i] = (char)(o[i] + 32);
            }
            return mk_str(o, self->n);
        }
        if (!strcmp(name, "replace")) {
            const val *old = arg(a, 0, NULL), *nw = arg(a, 1, NULL), *cnt = arg(a, 2, NULL);
            need_str(R, old, line, "replace");
            need_str(R, nw, line, "replace");
            int64_t maxr = cnt ? need_int(R, cnt, line, "replace") : -1;
            buf b = {0};
            size_t i = 0;
            int64_t done = 0;
            if (!old->n) fail(c, LL_ERR_UNSUPPORTED, line, "unsupported: replace() of an empty string");
            for (;;) {
                const char *hit = (maxr < 0 || done < maxr) ? memfind(self->s + i, self->n - i, old->s, old->n) : NULL;
                if (!hit) { buf_put(c, &b, self->s + i, self->n - i); break; }
                buf_put(c, &b, self->s + i, (size_t)(hit - self->s) - i);
                buf_put(c, &b, nw->s, nw->n);
                i = (size_t)(hit - self->s) + old->n;
                done++;
            }
            return mk_str(b.s ? b.s : "", b.n);
        }
        if (!strcmp(name, "find") || !strcmp(name, "count")) {
            need_str(R, x, line, name);
            if (name[0] == 'f') {
                const char *hit = memfind(self->s, self->n, x->s, x->n);
                return mk_int(hit ? (int64_t)cp_count(self->s, (size_t)(hit - self->s)) : -1);
            }
            int64_t k = 0;
            if (!x->n) return mk_int((int64_t)cp_count(self->s, self->n) + 1);
            for (const char *p = self->s, *h; (h = memfind(p, self->n - (size_t)(p - self->s), x->s, x->n)); p = h + x->n) k++;
            return mk_int(k);
        }
        if (!strcmp(name, "join")) {
            vlist *l = iter_list(R, x ? x : &(val){.t = V_UNDEF}, line);
            buf b = {0};
            buf_put(c, &b, "", 0);
            for (size_t i = 0; i < l->n; i++) {
                if (i) buf_put(c, &b, self->s, self->n);
                need_str(R, &l->v[i], line, "join");
                buf_put(c, &b, l->v[i].s, l->v[i].n);
            }
            return mk_str(b.s, b.n);
        }
        if (!strcmp(name, "title") || !strcmp(name, "capitalize")) {
            char *o = astrndup(c, self->s, self->n);
            int start = 1;
            for (size_t i = 0; i < self->n; i++) {
                char ch = o[i];
                int alpha = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
                if (alpha && start && ch >= 'a') o[i] = (char)(ch - 32);
                else if (alpha && !start && ch <= 'Z') o[i] = (char)(ch + 32);
                if (name[0] == 't') start = !alpha;
                else start = 0;
            }
            return mk_str(o, self->n);
        }
    } else if (self->t == V_DICT && !self->ns) {
        if (!strcmp(name, "items")) return items_of(R, self, line);
        if (!strcmp(name, "keys") || !strcmp(name, "values")) {
            vlist *l = list_new(c, self->d->n);
            for (size_t i = 0; i < self->d->n; i++)
                list_push(c, l, name[0] == 'k' ? mk_str(self->d->k[i], self->d->kn[i]) : self->d->v[i]);
            return mk_list(l);
        }
        if (!strcmp(name, "get")) {
            const val *k = arg(a, 0, NULL), *d = arg(a, 1, NULL);
            if (k && k->t == V_STR) {
                val *v = dict_get(self->d, k->s, k->n);
                if (v) return *v;
            }
            return d ? *d : mk_none();
        }
    }
    fail(c, LL_ERR_UNSUPPORTED, line, "unsupported method '%s' of '%s'", name, type_name(self));
}

static val get_attr(rstate *R, const val *obj, const char *name, size_t n, int line) {
    if (obj->t == V_DICT) {
        static const char *const dm[] = {"items", "keys", "values", "get", NULL};
        if (!obj->ns)
            for (int i = 0; dm[i]; i++)
                if (strlen(dm[i]) == n && !memcmp(dm[i], name, n)) goto method;
        val *v = dict_get(obj->d, name, n);
        return v ? *v : mk_undef(name);
    }
    if (obj->t == V_STR) {
        static const char *const sm[] = {"strip", "lstrip", "rstrip", "startswith", "endswith", "split", "rsplit", "upper",
                                         "lower", "replace", "find", "count", "join", "title", "capitalize", NULL};
        for (int i = 0; sm[i]; i++)
            if (strlen(sm[i]) == n && !memcmp(sm[i], name, n)) goto method;
    }
    if (obj->t == V_UNDEF)
        fail(R->c, LL_ERR_INVALID, line, "'%s' is undefined", obj->s ? obj->s : "value");
    return mk_undef(name);
method:;
    val m = {0};
    m.t = V_METHOD;
    m.s = astrndup(R->c, name, n);
    m.self = amalloc(R->c, sizeof(val));
    *m.self = *obj;
    return m;
}

static val get_item(rstate *R, const val *obj, const val *key, int line) {
    if (obj->t == V_LIST || obj->t == V_STR) {
        if (key->t != V_INT && key->t != V_BOOL) {
            if (key->t == V_STR) return get_attr(R, obj, key->s, key->n, line);
            fail(R->c, LL_ERR_INVALID, line, "%s indices must be integers", type_name(obj));
        }
        int64_t len = obj->t == V_LIST ? (int64_t)obj->l->n : (int64_t)cp_count(obj->s, obj->n), i = key->i;
        if (i < 0) i += len;
        if (i < 0 || i >= len) return mk_undef("item");
        if (obj->t == V_LIST) return obj->l->v[i];
        size_t a = cp_offset(obj->s, obj->n, (size_t)i);
        return mk_str(obj->s + a, cp_offset(obj->s + a, obj->n - a, 1));
    }
    if (obj->t == V_DICT) {
        if (key->t == V_STR) {
            val *v = dict_get(obj->d, key->s, key->n);
            return v ? *v : mk_undef(key->s);
        }
        return mk_undef("item");
    }
    if (obj->t == V_UNDEF) fail(R->c, LL_ERR_INVALID, line, "'%s' is undefined", obj->s ? obj->s : "value");
    return mk_undef("item");
}

static val do_slice(rstate *R, const val *obj, const val *st, const val *sp, const val *stepv, int line) {
    if (obj->t != V_LIST && obj->t != V_STR) fail(R->c, LL_ERR_INVALID, line, "cannot slice '%s'", type_name(obj));
    int64_t len = obj->t == V_LIST ? (int64_t)obj->l->n : (int64_t)cp_count(obj->s, obj->n);
    int64_t step = stepv && stepv->t != V_NONE ? need_int(R, stepv, line, "slice step") : 1;
    if (!step) fail(R->c, LL_ERR_INVALID, line, "slice step cannot be zero");
    int64_t a, b;
    /* Python's PySlice_AdjustIndices */
    if (!st || st->t == V_NONE) a = step < 0 ? len - 1 : 0;
    else {
        a = need_int(R, st, line, "slice");
        if (a < 0) { a += len; if (a < 0) a = step < 0 ? -1 : 0; }
        else if (a >= len) a = step < 0 ? len - 1 : len;
    }
    if (!sp || sp->t == V_NONE) b = step < 0 ? -1 : len;
    else {
        b = need_int(R, sp, line, "slice");
        if (b < 0) { b += len; if (b < 0) b = step < 0 ? -1 : 0; }
        else if (b >= len) b = step < 0 ? len - 1 : len;
    }
    vlist *l = list_new(R->c, 4);
    buf sb = {0};
    buf_put(R->c, &sb, "", 0);
    for (int64_t i = a; step > 0 ? i < b : i > b; i += step) {
        if (obj->t == V_LIST) list_push(R->c, l, obj->l->v[i]);
        else {
            size_t o = cp_offset(obj->s, obj->n, (size_t)i);
            buf_put(R->c, &sb, obj->s + o, cp_offset(obj->s + o, obj->n - o, 1));
        }
    }
    return obj->t == V_LIST ? mk_list(l) : mk_str(sb.s, sb.n);
}

static val call_macro(rstate *R, const node *m, const args *a, int line);

static val call_func(rstate *R, const val *f, const args *a, int line) {
    ctx *c = R->c;
    if (f->t == V_MACRO) return call_macro(R, f->m, a, line);
    if (f->t == V_METHOD) return call_method(R, f->self, f->s, a, line);
    if (f->t != V_FUNC) fail(c, LL_ERR_INVALID, line, "'%s' is not callable", f->t == V_UNDEF && f->s ? f->s : type_name(f));
    if (!strcmp(f->s, "raise_exception")) {
        const val *m = arg(a, 0, NULL);
        val s = m ? str_of(c, m) : mk_cstr("");
        snprintf(c->msg, sizeof(c->msg), "%.*s", (int)LL_MIN(s.n, sizeof(c->msg) - 1), s.s);
        c->raised = 1;
        c->st = LL_ERR_INVALID;
        longjmp(c->jb, 1);
    }
    if (!strcmp(f->s, "namespace") || !strcmp(f->s, "dict")) {
        vdict *d = dict_new(c);
        for (int i = 0; i < a->npos; i++) { /* namespace(mapping) */
            if (a->pos[i].t != V_DICT) fail(c, LL_ERR_INVALID, line, "%s() takes a mapping or keyword arguments", f->s);
            for (size_t k = 0; k < a->pos[i].d->n; k++) dict_set(c, d, a->pos[i].d->k[k], a->pos[i].d->kn[k], a->pos[i].d->v[k]);
        }
        for (int i = 0; i < a->nkw; i++) dict_set(c, d, a->kn[i], strlen(a->kn[i]), a->kv[i]);
        val v = mk_dict(d);
        v.ns = f->s[0] == 'n';
        return v;
    }
    if (!strcmp(f->s, "range")) {
        int64_t st = 0, en, sp = 1;
        if (a->npos == 1) en = need_int(R, &a->pos[0], line, "range");
        else if (a->npos == 2 || a->npos == 3) {
            st = need_int(R, &a->pos[0], line, "range");
            en = need_int(R, &a->pos[1], line, "range");
            if (a->npos == 3) sp = need_int(R, &a->pos[2], line, "range");
        } else fail(c, LL_ERR_INVALID, line, "range() takes 1 to 3 arguments");
        if (!sp) fail(c, LL_ERR_INVALID, line, "range() step must not be zero");
        vlist *l = list_new(c, 8);
        for (int64_t i = st; sp > 0 ? i < en : i > en;) {
            if (l->n >= 1000000) fail(c, LL_ERR_OVERFLOW, line, "range() too long");
            list_push(c, l, mk_int(i));
            if (__builtin_add_overflow(i, sp, &i)) break;
        }
        return mk_list(l);
    }
    if (!strcmp(f->s, "strftime_now")) {
        const val *fmt = arg(a, 0, NULL);
        need_str(R, fmt, line, "strftime_now");
        char out[256];
        time_t now = time(NULL);
        struct tm tmv;
        localtime_r(&now, &tmv);
        size_t k = strftime(out, sizeof(out), astrndup(c, fmt->s, fmt->n), &tmv);
        return mk_str(astrndup(c, out, k), k);
    }
    fail(c, LL_ERR_INTERNAL, line, "unknown function");
}

static val apply_filter(rstate *R, const node *n, val v, const args *a) {
    ctx *c = R->c;
    const char *f = n->s;
    int line = n->line;
    if (!strcmp(f, "length") || !strcmp(f, "count")) {
        switch (v.t) {
        case V_STR: return mk_int((int64_t)cp_count(v.s, v.n));
        case V_LIST: return mk_int((int64_t)v.l->n);
        case V_DICT: return mk_int((int64_t)v.d->n);
        case V_UNDEF: return mk_int(0);
        default: fail(c, LL_ERR_INVALID, line, "object of type '%s' has no len()", type_name(&v));
        }
    }
    if (!strcmp(f, "trim")) {
        val s = str_of(c, &v);
        return do_strip(&s, arg(a, 0, "chars"), 1, 1);
    }
    if (!strcmp(f, "tojson")) {
        const val *ind = arg(a, 0, "indent");
        int indent = ind && ind->t != V_NONE ? (int)need_int(R, ind, line, "tojson indent") : -1;
        buf b = {0};
        buf_put(c, &b, "", 0);
        to_json(c, &b, &v, indent, 0, line);
        return mk_str(b.s, b.n);
    }
    if (!strcmp(f, "safe") || !strcmp(f, "e") || !strcmp(f, "escape") || !strcmp(f, "forceescape")) {
        if (f[0] == 's') return v;
        val s = str_of(c, &v);
        buf b = {0};
        buf_put(c, &b, "", 0);
        for (size_t i = 0; i < s.n; i++) {
            switch (s.s[i]) {
            case '&': buf_puts(c, &b, "&amp;"); break;
            case '<': buf_puts(c, &b, "&lt;"); break;
            case '>': buf_puts(c, &b, "&gt;"); break;
            case '"': buf_puts(c, &b, "&#34;"); break;
            case '\'': buf_puts(c, &b, "&#39;"); break;
            default: buf_put(c, &b, s.s + i, 1);
            }
        }
        return mk_str(b.s, b.n);
    }
    if (!strcmp(f, "string")) return v.t == V_UNDEF ? mk_cstr("") : str_of(c, &v);
    if (!strcmp(f, "items")) return items_of(R, &v, line);
    if (!strcmp(f, "list")) return mk_list(iter_list(R, &v, line));
    if (!strcmp(f, "first") || !strcmp(f, "last")) {
        vlist *l = iter_list(R, &v, line);
        if (!l->n) return mk_undef(f);
        return l->v[f[0] == 'f' ? 0 : l->n - 1];
    }
    if (!strcmp(f, "reverse")) {
        if (v.t == V_STR) return do_slice(R, &v, NULL, NULL, &(val){.t = V_INT, .i = -1}, line);
        vlist *l = iter_list(R, &v, line), *r = list_new(c, l->n);
        for (size_t i = l->n; i-- > 0;) list_push(c, r, l->v[i]);
        return mk_list(r);
    }
    if (!strcmp(f, "join")) {
        const val *sep = arg(a, 0, "d"), *attr = arg(a, 1, "attribute");
        vlist *l = iter_list(R, &v, line);
        buf b = {0};
        buf_put(c, &b, "", 0);
        for (size_t i = 0; i < l->n; i++) {
            if (i && sep) { val s = str_of(c, sep); buf_put(c, &b, s.s, s.n); }
            val item = l->v[i];
            if (attr) { val an = str_of(c, attr); item = get_attr(R, &item, an.s, an.n, line); }
            to_str(c, &b, &item, 0);
        }
        return mk_str(b.s, b.n);
    }
    if (!strcmp(f, "default") || !strcmp(f, "d")) {
        const val *dv = arg(a, 0, "default_value"), *bo = arg(a, 1, "boolean");
        int use = v.t == V_UNDEF || (bo && truthy(bo) && !truthy(&v));
        return use ? (dv ? *dv : mk_cstr("")) : v;
    }
    if (!strcmp(f, "upper") || !strcmp(f, "lower") || !strcmp(f, "title") || !strcmp(f, "capitalize") ||
        !strcmp(f, "replace")) {
        val s = str_of(c, &v);
        return call_method(R, &s, f, a, line);
    }
    if (!strcmp(f, "int")) {
        if (v.t == V_INT || v.t == V_BOOL) return mk_int(v.i);
        if (v.t == V_FLOAT) {
            if (!(fabs(v.f) < 9.2e18)) fail(c, LL_ERR_UNSUPPORTED, line, "float %g does not fit an integer", v.f);
            return mk_int((int64_t)v.f);
        }
        if (v.t == V_STR) {
            char *e, *s = astrndup(c, v.s, v.n);
            long long x = strtoll(s, &e, 10);
            if (*s && !*e) return mk_int(x);
            double d = strtod(s, &e);
            if (*s && !*e && fabs(d) < 9.2e18) return mk_int((int64_t)d);
        }
        return a->npos ? a->pos[0] : mk_int(0);
    }
    if (!strcmp(f, "float")) {
        double d;
        if (num_val(&v, &d)) return mk_float(d);
        if (v.t == V_STR) {
            char *e, *s = astrndup(c, v.s, v.n);
            d = strtod(s, &e);
            if (*s && !*e) return mk_float(d);
        }
        return a->npos ? a->pos[0] : mk_float(0);
    }
    if (!strcmp(f, "abs")) {
        if (v.t == V_INT || v.t == V_BOOL) {
            if (v.i == INT64_MIN) fail(c, LL_ERR_UNSUPPORTED, line, "integer overflow");
            return mk_int(v.i < 0 ? -v.i : v.i);
        }
        if (v.t == V_FLOAT) return mk_float(fabs(v.f));
        fail(c, LL_ERR_INVALID, line, "bad operand type for abs(): '%s'", type_name(&v));
    }
    if (!strcmp(f, "map") || !strcmp(f, "selectattr") || !strcmp(f, "rejectattr")) {
        vlist *l = iter_list(R, &v, line), *r = list_new(c, l->n);
        if (f[0] == 'm') {
            const val *at = arg(a, -1, "attribute");
            if (!at) fail(c, LL_ERR_UNSUPPORTED, line, "unsupported: map() without attribute=");
            val an = str_of(c, at);
            const val *dflt = arg(a, -1, "default");
            for (size_t i = 0; i < l->n; i++) {
                val x = get_attr(R, &l->v[i], an.s, an.n, line);
                list_push(c, r, x.t == V_UNDEF && dflt ? *dflt : x);
            }
            return mk_list(r);
        }
        const val *at = arg(a, 0, NULL);
        if (!at) fail(c, LL_ERR_INVALID, line, "%s() needs an attribute name", f);
        val an = str_of(c, at);
        const val *test = arg(a, 1, NULL);
        for (size_t i = 0; i < l->n; i++) {
            val x = get_attr(R, &l->v[i], an.s, an.n, line);
            int ok;
            if (!test) ok = truthy(&x);
            else {
                val tn = str_of(c, test);
                const val *rhs = arg(a, 2, NULL);
                if ((tn.n == 7 && !memcmp(tn.s, "equalto", 7)) || (tn.n == 2 && !memcmp(tn.s, "eq", 2)) ||
                    (tn.n == 2 && !memcmp(tn.s, "==", 2)))
                    ok = rhs && vequal(&x, rhs);
                else if ((tn.n == 2 && !memcmp(tn.s, "ne", 2)) || (tn.n == 2 && !memcmp(tn.s, "!=", 2)))
                    ok = !rhs || !vequal(&x, rhs);
                else if (tn.n == 7 && !memcmp(tn.s, "defined", 7)) ok = x.t != V_UNDEF;
                else if (tn.n == 9 && !memcmp(tn.s, "undefined", 9)) ok = x.t == V_UNDEF;
                else if (tn.n == 4 && !memcmp(tn.s, "none", 4)) ok = x.t == V_NONE;
                else if (tn.n == 6 && !memcmp(tn.s, "string", 6)) ok = x.t == V_STR;
                else fail(c, LL_ERR_UNSUPPORTED, line, "unsupported test '%.*s' in %s()", (int)tn.n, tn.s, f);
            }
            if (ok == (f[0] == 's')) list_push(c, r, l->v[i]);
        }
        return mk_list(r);
    }
    if (!strcmp(f, "unique")) {
        vlist *l = iter_list(R, &v, line), *r = list_new(c, l->n);
        for (size_t i = 0; i < l->n; i++) {
            int seen = 0;
            for (size_t j = 0; j < r->n && !seen; j++) seen = vequal(&r->v[j], &l->v[i]);
            if (!seen) list_push(c, r, l->v[i]);
        }
        return mk_list(r);
    }
    if (!strcmp(f, "indent")) {
        const val *w = arg(a, 0, "width"), *first = arg(a, 1, "first"), *blank = arg(a, 2, "blank");
        val s = str_of(c, &v);
        val pad = w && w->t == V_STR ? *w : mk_cstr("    ");
        if (w && w->t != V_STR) {
            int64_t k = need_int(R, w, line, "indent");
            char *p = amalloc(c, (size_t)LL_MAX(k, 0) + 1);
            memset(p, ' ', (size_t)LL_MAX(k, 0));
            pad = mk_str(p, (size_t)LL_MAX(k, 0));
        }
        buf b = {0};
        buf_put(c, &b, "", 0);
        int at_start = 1, is_first = 1;
        for (size_t i = 0; i <= s.n; i++) {
            if (at_start && i < s.n) {
                int blank_line = s.s[i] == '\n';
                if ((!is_first || (first && truthy(first))) && (!blank_line || (blank && truthy(blank)))) buf_put(c, &b, pad.s, pad.n);
                at_start = 0;
            }
            if (i == s.n) break;
            buf_put(c, &b, s.s + i, 1);
            if (s.s[i] == '\n') { at_start = 1; is_first = 0; }
        }
        return mk_str(b.s, b.n);
    }
    fail(c, LL_ERR_UNSUPPORTED, line, "unsupported filter '%s'", f);
}

static int apply_test(rstate *R, const node *n, const val *v, const args *a) {
    const char *t = n->s;
    int line = n->line;
    if (!strcmp(t, "defined")) return v->t != V_UNDEF;
    if (!strcmp(t, "undefined")) return v->t == V_UNDEF;
    if (!strcmp(t, "none")) return v->t == V_NONE;
    if (!strcmp(t, "string")) return v->t == V_STR;
    if (!strcmp(t, "number")) return v->t == V_INT || v->t == V_FLOAT || v->t == V_BOOL;
    if (!strcmp(t, "integer")) return v->t == V_INT;
    if (!strcmp(t, "float")) return v->t == V_FLOAT;
    if (!strcmp(t, "boolean")) return v->t == V_BOOL;
    if (!strcmp(t, "true")) return v->t == V_BOOL && v->i;
    if (!strcmp(t, "false")) return v->t == V_BOOL && !v->i;
    if (!strcmp(t, "mapping")) return v->t == V_DICT && !v->ns;
    if (!strcmp(t, "iterable")) return v->t == V_STR || v->t == V_LIST || v->t == V_DICT || v->t == V_UNDEF;
    if (!strcmp(t, "sequence")) return v->t == V_STR || v->t == V_LIST || (v->t == V_DICT && !v->ns) || v->t == V_UNDEF;
    if (!strcmp(t, "callable")) return v->t == V_MACRO || v->t == V_FUNC || v->t == V_METHOD;
    if (!strcmp(t, "lower") || !strcmp(t, "upper")) {
        if (v->t != V_STR) return 0;
        for (size_t i = 0; i < v->n; i++) {
            char ch = v->s[i];
            if (t[0] == 'l' && ch >= 'A' && ch <= 'Z') return 0;
            if (t[0] == 'u' && ch >= 'a' && ch <= 'z') return 0;
        }
        return 1;
    }
    if (!strcmp(t, "odd") || !strcmp(t, "even")) {
        int64_t x = need_int(R, v, line, t);
        return (x % 2 != 0) == (t[0] == 'o');
    }
    if (!strcmp(t, "divisibleby")) {
        int64_t x = need_int(R, v, line, t), d = need_int(R, arg(a, 0, NULL), line, t);
        if (!d) fail(R->c, LL_ERR_INVALID, line, "division by zero");
        return x % d == 0;
    }
    const val *o = arg(a, 0, NULL);
    if (!strcmp(t, "eq") || !strcmp(t, "equalto") || !strcmp(t, "==")) return o && vequal(v, o);
    if (!strcmp(t, "ne") || !strcmp(t, "!=")) return !o || !vequal(v, o);
    if (!strcmp(t, "sameas")) return o && v->t == o->t && (v->t == V_NONE || v->t == V_UNDEF || ((v->t == V_BOOL || v->t == V_INT) && v->i == o->i) || (v->t == V_LIST && v->l == o->l) || (v->t == V_DICT && v->d == o->d));
    if (!strcmp(t, "in")) {
        if (!o) fail(R->c, LL_ERR_INVALID, line, "test 'in' needs an argument");
        if (o->t == V_STR) { need_str(R, v, line, "in"); return memfind(o->s, o->n, v->s, v->n) != NULL; }
        vlist *l = iter_list(R, o, line);
        for (size_t i = 0; i < l->n; i++)
            if (vequal(&l->v[i], v)) return 1;
        return 0;
    }
    fail(R->c, LL_ERR_UNSUPPORTED, line, "unsupported test '%s'", t);
}

static int vcompare(rstate *R, const val *a, const val *b, int line, const char *op) {
    double x = 0, y = 0;
    if (num_val(a, &x) && num_val(b, &y)) return x < y ? -1 : x > y ? 1 : 0;
    if (a->t == V_STR && b->t == V_STR) {
        int r = memcmp(a->s, b->s, LL_MIN(a->n, b->n));
        if (r) return r < 0 ? -1 : 1;
        return a->n < b->n ? -1 : a->n > b->n ? 1 : 0;
    }
    fail(R->c, LL_ERR_INVALID, line, "'%s' not supported between instances of '%s' and '%s'", op, type_name(a), type_name(b));
}

static val binop(rstate *R, const node *n, val a, val b) {
    ctx *c = R->c;
    const char *op = n->s;
    int line = n->line;
    if (!strcmp(op, "==")) return mk_bool(vequal(&a, &b));
    if (!strcmp(op, "!=")) return mk_bool(!vequal(&a, &b));
    if (!strcmp(op, "<")) return mk_bool(vcompare(R, &a, &b, line, op) < 0);
    if (!strcmp(op, "<=")) return mk_bool(vcompare(R, &a, &b, line, op) <= 0);
    if (!strcmp(op, ">")) return mk_bool(vcompare(R, &a, &b, line, op) > 0);
    if (!strcmp(op, ">=")) return mk_bool(vcompare(R, &a, &b, line, op) >= 0);
    if (!strcmp(op, "in") || !strcmp(op, "not in")) {
        int neg = op[0] == 'n', r = 0;
        if (b.t == V_STR) {
            if (a.t != V_STR) fail(c, LL_ERR_INVALID, line, "'in <string>' requires string as left operand, not %s", type_name(&a));
            r = memfind(b.s, b.n, a.s, a.n) != NULL;
        } else if (b.t == V_DICT) {
            r = a.t == V_STR && dict_get(b.d, a.s, a.n) != NULL;
        } else if (b.t == V_LIST) {
            for (size_t i = 0; i < b.l->n && !r; i++) r = vequal(&b.l->v[i], &a);
        } else {
            fail(c, LL_ERR_INVALID, line, "argument of type '%s' is not iterable", type_name(&b));
        }
        return mk_bool(r != neg);
    }
    if (a.t == V_UNDEF || b.t == V_UNDEF)
        fail(c, LL_ERR_INVALID, line, "'%s' is undefined", a.t == V_UNDEF ? (a.s ? a.s : "value") : (b.s ? b.s : "value"));
    double x = 0, y = 0;
    int na = num_val(&a, &x), nb = num_val(&b, &y);
    int ints = na && nb && a.t != V_FLOAT && b.t != V_FLOAT;
    int64_t r64;
    if (!strcmp(op, "+")) {
        if (ints) {
            if (__builtin_add_overflow(a.i, b.i, &r64)) fail(c, LL_ERR_UNSUPPORTED, line, "integer overflow");
            return mk_int(r64);
        }
        if (na && nb) return mk_float(x + y);
        if (a.t == V_STR && b.t == V_STR) {
            char *p = amalloc(c, a.n + b.n + 1);
            memcpy(p, a.s, a.n);
            memcpy(p + a.n, b.s, b.n);
            p[a.n + b.n] = 0;
            return mk_str(p, a.n + b.n);
        }
        if (a.t == V_LIST && b.t == V_LIST) {
            vlist *l = list_new(c, a.l->n + b.l->n);
            for (size_t i = 0; i < a.l->n; i++) list_push(c, l, a.l->v[i]);
            for (size_t i = 0; i < b.l->n; i++) list_push(c, l, b.l->v[i]);
            return mk_list(l);
        }
        if (a.t == V_STR) fail(c, LL_ERR_INVALID, line, "can only concatenate str (not \"%s\") to str", type_name(&b));
        fail(c, LL_ERR_INVALID, line, "unsupported operand type(s) for +: '%s' and '%s'", type_name(&a), type_name(&b));
    }
    if (!strcmp(op, "*") && ((a.t == V_STR && (b.t == V_INT || b.t == V_BOOL)) || (b.t == V_STR && (a.t == V_INT || a.t == V_BOOL)))) {
        const val *s = a.t == V_STR ? &a : &b;
        int64_t k = a.t == V_STR ? b.i : a.i;
        if (k <= 0) return mk_cstr("");
        if ((uint64_t)k * s->n > (1u << 26)) fail(c, LL_ERR_OVERFLOW, line, "string repetition too long");
        buf bb = {0};
        for (int64_t i = 0; i < k; i++) buf_put(c, &bb, s->s, s->n);
        return mk_str(bb.s ? bb.s : "", bb.n);
    }
    if (!na || !nb) fail(c, LL_ERR_INVALID, line, "unsupported operand type(s) for %s: '%s' and '%s'", op, type_name(&a), type_name(&b));
    if (ints && (!strcmp(op, "-") || !strcmp(op, "*"))) {
        if (op[0] == '-' ? __builtin_sub_overflow(a.i, b.i, &r64) : __builtin_mul_overflow(a.i, b.i, &r64))
            fail(c, LL_ERR_UNSUPPORTED, line, "integer overflow");
        return mk_int(r64);
    }
    if (!strcmp(op, "-")) return mk_float(x - y);
    if (!strcmp(op, "*")) return mk_float(x * y);
    if (!strcmp(op, "/")) {
        if (y == 0) fail(c, LL_ERR_INVALID, line, "division by zero");
        return mk_float(x / y);
    }
    if (!strcmp(op, "//") || !strcmp(op, "%")) {
        if (y == 0) fail(c, LL_ERR_INVALID, line, "integer division or modulo by zero");
        if (ints) {
            if (a.i == INT64_MIN && b.i == -1) fail(c, LL_ERR_UNSUPPORTED, line, "integer overflow");
            int64_t q = a.i / b.i, r = a.i % b.i;
            if (r && ((r < 0) != (b.i < 0))) { q--; r += b.i; }
            return op[0] == '/' ? mk_int(q) : mk_int(r);
        }
        double q = floor(x / y);
        return op[0] == '/' ? mk_float(q) : mk_float(x - q * y);
    }
    if (!strcmp(op, "**")) {
        if (ints && b.i >= 0) {
            int64_t r = 1;
            if (a.i == 0 || a.i == 1) return mk_int(b.i == 0 ? 1 : a.i);
            if (a.i == -1) return mk_int(b.i % 2 ? -1 : 1);
            for (int64_t i = 0; i < b.i; i++) /* |a| >= 2: overflows within 63 steps */
                if (__builtin_mul_overflow(r, a.i, &r)) fail(c, LL_ERR_UNSUPPORTED, line, "integer overflow");
            return mk_int(r);
        }
        return mk_float(pow(x, y));
    }
    fail(c, LL_ERR_INTERNAL, line, "unknown operator '%s'", op);
}

static val eval(rstate *R, scope *S, const node *n) {
    ctx *c = R->c;
    switch (n->kind) {
    case E_LIT: return n->lit;
    case E_NAME: return lookup(R, S, n->s, n->sn);
    case E_ATTR: {
        val o = eval(R, S, n->a);
        return get_attr(R, &o, n->s, n->sn, n->line);
    }
    case E_ITEM: {
        val o = eval(R, S, n->a), k = eval(R, S, n->b);
        return get_item(R, &o, &k, n->line);
    }
    case E_SLICE: {
        val o = eval(R, S, n->a), v[3];
        for (int i = 0; i < 3; i++) v[i] = n->list[i] ? eval(R, S, n->list[i]) : mk_none();
        return do_slice(R, &o, &v[0], &v[1], &v[2], n->line);
    }
    case E_CALL: {
        val f = eval(R, S, n->a);
        args a;
        eval_args(R, S, n, &a);
        return call_func(R, &f, &a, n->line);
    }
    case E_FILTER: {
        val v = eval(R, S, n->a);
        args a;
        eval_args(R, S, n, &a);
        return apply_filter(R, n, v, &a);
    }
    case E_TEST: {
        val v = eval(R, S, n->a);
        args a;
        eval_args(R, S, n, &a);
        return mk_bool(apply_test(R, n, &v, &a) != n->neg);
    }
    case E_BIN: {
        if (n->c) { /* chained comparison: n->a is the previous link, n->a->b its right side */
            val prev = eval(R, S, n->a);
            if (!truthy(&prev)) return prev;
            val a = eval(R, S, n->a->b), b = eval(R, S, n->b);
            return binop(R, n, a, b);
        }
        val a = eval(R, S, n->a), b = eval(R, S, n->b);
        return binop(R, n, a, b);
    }
    case E_CONCAT: {
        val a = eval(R, S, n->a), b = eval(R, S, n->b);
        buf bb = {0};
        buf_put(c, &bb, "", 0);
        to_str(c, &bb, &a, 0);
        to_str(c, &bb, &b, 0);
        return mk_str(bb.s, bb.n);
    }
    case E_NEG: case E_POS: {
        val a = eval(R, S, n->a);
        if (a.t == V_INT || a.t == V_BOOL) {
            if (n->kind == E_NEG && a.i == INT64_MIN) fail(c, LL_ERR_UNSUPPORTED, n->line, "integer overflow");
            return mk_int(n->kind == E_NEG ? -a.i : a.i);
        }
        if (a.t == V_FLOAT) return mk_float(n->kind == E_NEG ? -a.f : a.f);
        fail(c, LL_ERR_INVALID, n->line, "bad operand type for unary -: '%s'", type_name(&a));
    }
    case E_AND: {
        val a = eval(R, S, n->a);
        return truthy(&a) ? eval(R, S, n->b) : a;
    }
    case E_OR: {
        val a = eval(R, S, n->a);
        return truthy(&a) ? a : eval(R, S, n->b);
    }
    case E_NOT: {
        val a = eval(R, S, n->a);
        return mk_bool(!truthy(&a));
    }
    case E_COND: {
        val cnd = eval(R, S, n->a);
        if (truthy(&cnd)) return eval(R, S, n->b);
        return n->c ? eval(R, S, n->c) : mk_undef("conditional");
    }
    case E_LIST: {
        vlist *l = list_new(c, (size_t)n->nlist);
        for (int i = 0; i < n->nlist; i++) list_push(c, l, eval(R, S, n->list[i]));
        val lv = mk_list(l);
        lv.ns = (uint8_t)n->neg;
        return lv;
    }
    case E_DICT: {
        vdict *d = dict_new(c);
        for (int i = 0; i < n->nlist; i++) {
            val k = eval(R, S, n->list[i]);
            if (k.t != V_STR) fail(c, LL_ERR_UNSUPPORTED, n->line, "unsupported: dict keys that are not strings");
            dict_set(c, d, k.s, k.n, eval(R, S, n->list2[i]));
        }
        return mk_dict(d);
    }
    default: fail(c, LL_ERR_INTERNAL, n->line, "bad expression node %d", n->kind);
    }
}

static val call_macro(rstate *R, const node *m, const args *a, int line) {
    ctx *c = R->c;
    if (++c->depth > 100) fail(c, LL_ERR_OVERFLOW, line, "macro recursion too deep");
    if (a->npos > m->nnames) fail(c, LL_ERR_INVALID, line, "macro '%s' takes at most %d arguments", m->s, m->nnames);
    scope *S = scope_new(R, R->root);
    for (int i = 0; i < m->nnames; i++) {
        const val *v = arg(a, i, m->names[i]);
        val x = v ? *v : m->list2[i] ? eval(R, S, m->list2[i]) : mk_undef(m->names[i]);
        scope_set(R, S, m->names[i], x);
    }
    for (int k = 0; k < a->nkw; k++) {
        int ok = 0;
        for (int i = 0; i < m->nnames; i++) ok |= !strcmp(a->kn[k], m->names[i]);
        if (!ok) fail(c, LL_ERR_INVALID, line, "macro '%s' has no parameter '%s'", m->s, a->kn[k]);
    }
    buf out = {0};
    buf_put(c, &out, "", 0);
    exec_body(R, S, m->list, m->nlist, &out);
    c->depth--;
    return mk_str(out.s, out.n);
}

static void assign_targets(rstate *R, scope *S, const node *n, val v) {
    if (n->nnames == 1) { scope_set(R, S, n->names[0], v); return; }
    vlist *l = iter_list(R, &v, n->line);
    if ((int)l->n != n->nnames)
        fail(R->c, LL_ERR_INVALID, n->line, "cannot unpack %zu values into %d names", l->n, n->nnames);
    for (int i = 0; i < n->nnames; i++) scope_set(R, S, n->names[i], l->v[i]);
}

static int exec_body(rstate *R, scope *S, node **body, int nb, buf *out) {
    ctx *c = R->c;
    for (int i = 0; i < nb; i++) {
        const node *n = body[i];
        switch (n->kind) {
        case N_TEXT: buf_put(c, out, n->s, n->sn); break;
        case N_OUT: {
            val v = eval(R, S, n->a);
            to_str(c, out, &v, 0);
            break;
        }
        case N_IF: {
            val cnd = eval(R, S, n->a);
            int f = truthy(&cnd) ? exec_body(R, S, n->list, n->nlist, out) : exec_body(R, S, n->list2, n->nlist2, out);
            if (f != FLOW_NORMAL) return f;
            break;
        }
        case N_FOR: {
            val it = eval(R, S, n->a);
            vlist *all = iter_list(R, &it, n->line), *items = all;
            if (n->b) { /* the loop filter runs before loop.* is computed */
                items = list_new(c, all->n);
                scope *fs = scope_new(R, S);
                for (size_t k = 0; k < all->n; k++) {
                    if (++c->steps > TMPL_MAX_STEPS) fail(c, LL_ERR_OVERFLOW, n->line, "template runs too long (loop iterations)");
                    fs->vars->n = 0;
                    assign_targets(R, fs, n, all->v[k]);
                    val ok = eval(R, fs, n->b);
                    if (truthy(&ok)) list_push(c, items, all->v[k]);
                }
            }
            size_t len = items->n;
            /* one scope and one loop object per loop, reset each iteration: a fresh scope per
             * iteration is the semantics, without an allocation per iteration */
            scope *ls = scope_new(R, S);
            vdict *lp = dict_new(c);
            static const char *const lk[] = {"index", "index0", "revindex", "revindex0", "first", "last", "length",
                                             "previtem", "nextitem", "depth", "depth0"};
            for (size_t q = 0; q < LL_ARRAY_LEN(lk); q++) dict_set(c, lp, lk[q], strlen(lk[q]), mk_none());
            val lv = mk_dict(lp);
            lv.ns = 1; /* attributes only, no dict methods */
            for (size_t k = 0; k < len; k++) {
                if (++c->steps > TMPL_MAX_STEPS) fail(c, LL_ERR_OVERFLOW, n->line, "template runs too long (loop iterations)");
                lp->v[0] = mk_int((int64_t)k + 1);
                lp->v[1] = mk_int((int64_t)k);
                lp->v[2] = mk_int((int64_t)(len - k));
                lp->v[3] = mk_int((int64_t)(len - k - 1));
                lp->v[4] = mk_bool(k == 0);
                lp->v[5] = mk_bool(k + 1 == len);
                lp->v[6] = mk_int((int64_t)len);
                lp->v[7] = k ? items->v[k - 1] : mk_undef("previtem");
                lp->v[8] = k + 1 < len ? items->v[k + 1] : mk_undef("nextitem");
                lp->v[9] = mk_int(1);
                lp->v[10] = mk_int(0);
                ls->vars->n = 0;
                scope_set(R, ls, "loop", lv);
                assign_targets(R, ls, n, items->v[k]);
                int f = exec_body(R, ls, n->list, n->nlist, out);
                if (f == FLOW_BREAK) break;
            }
            if (!len && n->nlist2) {
                int f = exec_body(R, S, n->list2, n->nlist2, out);
                if (f != FLOW_NORMAL) return f;
            }
            break;
        }
        case N_SET: assign_targets(R, S, n, eval(R, S, n->a)); break;
        case N_SET_ATTR: {
            val ns = lookup(R, S, n->s, strlen(n->s));
            if (ns.t != V_DICT || !ns.ns)
                fail(c, LL_ERR_INVALID, n->line, "cannot assign attribute on non-namespace object '%s'", n->s);
            dict_set(c, ns.d, n->names[0], strlen(n->names[0]), eval(R, S, n->a));
            break;
        }
        case N_SET_BLOCK: {
            buf b = {0};
            buf_put(c, &b, "", 0);
            exec_body(R, S, n->list, n->nlist, &b);
            scope_set(R, S, n->names[0], mk_str(b.s, b.n));
            break;
        }
        case N_MACRO: {
            val m = {0};
            m.t = V_MACRO;
            m.m = n;
            scope_set(R, S, n->s, m);
            break;
        }
        case N_BREAK: return FLOW_BREAK;
        case N_CONTINUE: return FLOW_CONTINUE;
        case N_BLOCK: {
            int f = exec_body(R, S, n->list, n->nlist, out);
            if (f != FLOW_NORMAL) return f;
            break;
        }
        default: fail(c, LL_ERR_INTERNAL, n->line, "bad statement node %d", n->kind);
        }
    }
    return FLOW_NORMAL;
}

ll_status tmpl_render(const tmpl *t, const cJSON *request, const cJSON *vars, char **out, size_t *out_len) {
    LL_ASSERT(t && out);
    *out = NULL;
    if (out_len) *out_len = 0;
    ctx c = {0};
    c.name = t->name;
    if (setjmp(c.jb)) {
        arena_free(c.blk);
        if (c.raised) return ll_err(c.st, "%s", c.msg);
        return ll_err(c.st, "%s", c.msg);
    }
    if (!cJSON_IsObject(request)) fail(&c, LL_ERR_INVALID, 0, "the request must be a JSON object");
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(request, "messages");
    if (!cJSON_IsArray(msgs)) fail(&c, LL_ERR_INVALID, 0, "the request needs a \"messages\" array");
    rstate R = {.c = &c};
    R.root = scope_new(&R, NULL);
    const cJSON *e;
    if (cJSON_IsObject(vars)) cJSON_ArrayForEach(e, vars) if (e->string) scope_set(&R, R.root, e->string, from_json(&c, e));
    scope_set(&R, R.root, "messages", from_json(&c, msgs));
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(request, "tools");
    scope_set(&R, R.root, "tools", from_json(&c, tools));
    scope_set(&R, R.root, "documents", mk_none());
    const cJSON *agp = cJSON_GetObjectItemCaseSensitive(request, "add_generation_prompt");
    scope_set(&R, R.root, "add_generation_prompt", mk_bool(agp ? cJSON_IsTrue(agp) : 1));
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(request, "chat_template_kwargs");
    if (kw && !cJSON_IsObject(kw) && !cJSON_IsNull(kw)) fail(&c, LL_ERR_INVALID, 0, "chat_template_kwargs must be an object");
    if (cJSON_IsObject(kw)) cJSON_ArrayForEach(e, kw) if (e->string) scope_set(&R, R.root, e->string, from_json(&c, e));
    buf b = {0};
    buf_put(&c, &b, "", 0);
    exec_body(&R, R.root, t->body, t->nbody, &b);
    char *res = ll_malloc(b.n + 1);
    if (!res) fail(&c, LL_ERR_OOM, 0, "out of memory");
    memcpy(res, b.s, b.n + 1);
    if (out_len) *out_len = b.n;
    *out = res;
    arena_free(c.blk);
    return LL_OK;
}

int tmpl_normalize_tool_args(cJSON *request) {
    int k = 0;
    cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(request, "messages")) {
        cJSON *tc;
        cJSON_ArrayForEach(tc, cJSON_GetObjectItemCaseSensitive(m, "tool_calls")) {
            cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
            cJSON *av = cJSON_GetObjectItemCaseSensitive(fn ? fn : tc, "arguments");
            if (!cJSON_IsString(av)) continue;
            cJSON *obj = cJSON_Parse(av->valuestring);
            if (!cJSON_IsObject(obj)) { cJSON_Delete(obj); continue; }
            cJSON_ReplaceItemInObjectCaseSensitive(fn ? fn : tc, "arguments", obj);
            k++;
        }
    }
    return k;
}
