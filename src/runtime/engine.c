/*
 * engine.c — the generation loop. See engine.h for the contract.
 *
 * One request:
 *   1. prompt ids: render the chat template (or take the raw prompt / ids) and tokenize;
 *   2. prefix reuse: resume from the longest snapshot (same namespace) whose tokens prefix the
 *      prompt, else start empty; prefill the rest up to the last prompt token; snapshot there
 *      (the recurrent GDN state cannot be rolled back, so the snapshot is the only way back);
 *   3. decode: feed the last prompt token, then loop sample -> detokenize (incremental, UTF-8
 *      safe) -> stop matcher (ids, strings across tokens, max tokens) -> output parser (reasoning,
 *      content, tool calls) -> callback, until a stop, the limit, or a cancel.
 * Everything per request is allocated at its start; the per-token path allocates nothing once the
 * growable text buffers have reached their size.
 */
#include "engine.h"

#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <sys/stat.h>

#include "backend/backend.h"
#include "base/mapfile.h"
#include "runtime/outparse.h"
#include "runtime/snapshot.h"
#include "runtime/stop.h"
#include "tokenizer/template.h"
#include "tokenizer/tokenizer.h"

#define MAX_EOS 8

struct ll_engine {
    qwen_model *model;
    ll_backend *be;
    ll_seq *seq;
    tok_tokenizer *tok;
    tmpl *chat;               /* NULL: the model has no chat template (completions only) */
    ll_snap_store *snaps;
    int32_t n_ctx;
    int32_t eos[MAX_EOS];
    int32_t n_eos;
    ll_sampler_params defaults;
    char model_id[256];
    char identity[512];
    int32_t *last_prompt;     /* tokens of the last snapshot taken (for session save) */
    size_t n_last_prompt;
    char *last_ns;
    float *logits;            /* [V] */
    ll_engine_stats stats;
};

/* ================================================================ open / close */

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static void add_eos(ll_engine *e, int32_t id) {
    if (id < 0) return;
    for (int32_t i = 0; i < e->n_eos; i++) if (e->eos[i] == id) return;
    if (e->n_eos < MAX_EOS) e->eos[e->n_eos++] = id;
}

/* generation_config.json beside the weights: eos ids and sampling defaults (optional file). */
static ll_status read_generation_config(ll_engine *e, const char *dir) {
    char path[4200];
    snprintf(path, sizeof(path), "%s/generation_config.json", dir);
    char *txt = NULL;
    size_t len;
    struct stat st;
    if (stat(path, &st) != 0) return LL_OK;
    LL_TRY(ll_read_file(path, &txt, &len));
    cJSON *j = cJSON_ParseWithLength(txt, len);
    ll_free(txt);
    if (!j) return ll_err(LL_ERR_FORMAT, "%s: malformed JSON", path);
    const cJSON *eos = cJSON_GetObjectItemCaseSensitive(j, "eos_token_id");
    if (cJSON_IsNumber(eos)) add_eos(e, (int32_t)eos->valuedouble);
    else if (cJSON_IsArray(eos)) {
        const cJSON *it;
        cJSON_ArrayForEach(it, eos) if (cJSON_IsNumber(it)) add_eos(e, (int32_t)it->valuedouble);
    }
    const cJSON *v;
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(j, "temperature"))) e->defaults.temperature = (float)v->valuedouble;
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(j, "top_k"))) e->defaults.top_k = (int32_t)v->valuedouble;
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(j, "top_p"))) e->defaults.top_p = (float)v->valuedouble;
    if (cJSON_IsBool(v = cJSON_GetObjectItemCaseSensitive(j, "do_sample")) && cJSON_IsFalse(v)) e->defaults.temperature = 0;
    cJSON_Delete(j);
    return LL_OK;
}

static ll_status load_template(ll_engine *e, const char *path) {
    char *txt = NULL;
    size_t len = 0;
    if (path) LL_TRY(ll_read_file(path, &txt, &len));
    const char *src = path ? txt : tok_chat_template(e->tok);
    if (!src) return LL_OK;
    ll_status st = tmpl_parse(src, path ? len : strlen(src), path ? path : "chat template", &e->chat);
    ll_free(txt);
    return st;
}

ll_status ll_engine_open(const ll_engine_params *p, ll_engine **out) {
    *out = NULL;
    ll_engine *e = ll_calloc(1, sizeof(*e));
    if (!e) return ll_err(LL_ERR_OOM, "engine: out of memory");
    e->defaults = ll_sampler_defaults();
    ll_status st;
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", p->model_path);
    if (!is_dir(dir)) { /* a file: its directory holds the tokenizer and configs */
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s", p->model_path);
        snprintf(dir, sizeof(dir), "%s", dirname(tmp));
    }
    {
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s", p->model_path);
        size_t n = strlen(tmp);
        while (n > 1 && tmp[n - 1] == '/') tmp[--n] = 0;
        snprintf(e->model_id, sizeof(e->model_id), "%s", basename(tmp));
    }
    if ((st = qwen_model_load(p->model_path, &e->model)) != LL_OK) goto fail;
    size_t mlen = strlen(p->model_path);
    int is_gguf = mlen > 5 && !strcmp(p->model_path + mlen - 5, ".gguf");
    /* a GGUF carries its tokenizer; a directory has tokenizer.json beside the weights */
    const char *tp = p->tokenizer_path ? p->tokenizer_path : is_gguf ? p->model_path : dir;
    char tj[4200];
    snprintf(tj, sizeof(tj), "%s/tokenizer.json", dir);
    struct stat tst;
    if (!p->tokenizer_path && !is_gguf && stat(tj, &tst) != 0) {
        ll_log(LL_LOG_WARN, "%s: no tokenizer.json: only token-id prompts and outputs are possible", dir);
    } else if ((st = tok_load_file(tp, &e->tok)) != LL_OK) {
        goto fail;
    } else if (tok_n_vocab(e->tok) > e->model->hp.n_vocab) {
        st = ll_err(LL_ERR_FORMAT, "%s: tokenizer has %d ids but the model's vocabulary is %d", tp, tok_n_vocab(e->tok),
                    e->model->hp.n_vocab);
        goto fail;
    }
    if (e->tok && (st = load_template(e, p->template_path)) != LL_OK) goto fail;
    if ((st = read_generation_config(e, dir)) != LL_OK) goto fail;
    add_eos(e, e->model->hp.eos_token_id);
    if (e->tok) {
        add_eos(e, tok_eos(e->tok));
        add_eos(e, tok_find(e->tok, "<|im_end|>"));
        add_eos(e, tok_find(e->tok, "<|endoftext|>"));
    }
    {
        const qwen_hparams *hp = &e->model->hp;
        snprintf(e->identity, sizeof(e->identity), "lilac/qwen3_5_moe;%s;%s;L=%d;H=%d;V=%d;E=%d;bytes=%zu", e->model_id,
                 e->model->format_name ? e->model->format_name : "?", hp->n_layer, hp->n_embd, hp->n_vocab, hp->n_expert,
                 e->model->weight_bytes);
    }
    ll_backend_params bp = {.n_threads = p->n_threads, .kv_q8 = p->kv_q8};
    if ((st = ll_backend_new(p->backend ? p->backend : "auto", e->model, &bp, &e->be)) != LL_OK) goto fail;
    if (p->kv_q8 > 0 && strcmp(e->be->v->name, "cuda"))
        ll_log(LL_LOG_WARN, "--kv-cache q8 applies to the cuda backend; the %s backend keeps its own cache", e->be->v->name);
    else if (!strcmp(e->be->v->name, "cuda") && e->be->params.kv_q8 > 0) {
        /* the backend's resolved choice (auto included): a q8 snapshot is another format, sessions
         * saved with the bf16 cache must not match */
        size_t n = strlen(e->identity);
        snprintf(e->identity + n, sizeof(e->identity) - n, ";kv=q8");
    }
    e->n_ctx = p->n_ctx > 0 ? p->n_ctx : LL_MIN(e->model->hp.n_ctx_train > 0 ? e->model->hp.n_ctx_train : 32768, 32768);
    if ((st = e->be->v->seq_new(e->be, e->n_ctx, &e->seq)) != LL_OK) goto fail;
    e->snaps = ll_snap_store_new(p->snapshot_budget ? p->snapshot_budget : (size_t)1 << 30);
    e->logits = ll_malloc(sizeof(float) * (size_t)e->model->hp.n_vocab);
    if (!e->snaps || !e->logits) { st = ll_err(LL_ERR_OOM, "engine: out of memory"); goto fail; }
    *out = e;
    return LL_OK;
fail:
    ll_engine_close(e);
    return st;
}

void ll_engine_close(ll_engine *e) {
    if (!e) return;
    if (e->seq) e->be->v->seq_free(e->be, e->seq);
    ll_backend_free(e->be);
    ll_snap_store_free(e->snaps);
    tmpl_free(e->chat);
    tok_free(e->tok);
    qwen_model_free(e->model);
    ll_free(e->logits);
    ll_free(e->last_prompt);
    ll_free(e->last_ns);
    ll_free(e);
}

const char *ll_engine_model_identity(const ll_engine *e) { return e->identity; }
int ll_engine_has_tokenizer(const ll_engine *e) { return e->tok != NULL; }

ll_status ll_engine_session_save(ll_engine *e, const char *ns, const char *path) {
    ns = ns ? ns : "";
    if (!e->last_prompt || !e->last_ns || strcmp(e->last_ns, ns))
        return ll_err(LL_ERR_INVALID, "session save: nothing to save yet (no prompt processed)");
    const ll_snap *sn = ll_snap_store_lookup(e->snaps, ns, e->last_prompt, e->n_last_prompt);
    if (!sn || sn->n_tokens != e->n_last_prompt)
        return ll_err(LL_ERR_INVALID, "session save: the last state was evicted from the snapshot store");
    return ll_snap_save(path, e->identity, sn->tokens, sn->n_tokens, sn->blob, sn->blob_size);
}

ll_status ll_engine_session_load(ll_engine *e, const char *ns, const char *path) {
    return ll_snap_store_load(e->snaps, ns ? ns : "", path, e->identity);
}

const char *ll_engine_model_id(const ll_engine *e) { return e->model_id; }
int32_t ll_engine_n_ctx(const ll_engine *e) { return e->n_ctx; }
ll_sampler_params ll_engine_default_sampling(const ll_engine *e) { return e->defaults; }
void ll_engine_get_stats(const ll_engine *e, ll_engine_stats *out) { *out = e->stats; }

/* ================================================================ tokenizer access */

ll_status ll_engine_tokenize(ll_engine *e, const char *text, size_t len, int parse_special, int32_t **ids, int32_t *n) {
    if (!e->tok) return ll_err(LL_ERR_INVALID, "this model has no tokenizer");
    tok_ids v = {0};
    ll_status st = tok_encode(e->tok, text, len, parse_special ? 0 : TOK_ENC_ADDED_AS_TEXT, &v);
    if (st != LL_OK) { tok_ids_free(&v); return st; }
    *ids = v.ids; /* tok_ids storage comes from ll_malloc: the caller frees with ll_free */
    *n = (int32_t)v.n;
    if (!*ids) { *ids = ll_malloc(sizeof(int32_t)); if (!*ids) return ll_err(LL_ERR_OOM, "out of memory"); }
    return LL_OK;
}

ll_status ll_engine_detokenize(ll_engine *e, const int32_t *ids, int32_t n, char **text, size_t *len) {
    if (!e->tok) return ll_err(LL_ERR_INVALID, "this model has no tokenizer");
    tok_str s = {0};
    ll_status st = tok_decode(e->tok, ids, (size_t)n, 0, &s);
    if (st != LL_OK) { tok_str_free(&s); return st; }
    if (!s.s && tok_str_append(&s, "", 0) != LL_OK) return ll_err(LL_ERR_OOM, "out of memory");
    *text = s.s;
    *len = s.n;
    return LL_OK;
}

/* ================================================================ generation */

typedef struct gen_ctx {
    ll_engine *e;
    const ll_gen_request *req;
    ll_gen_cb cb;
    void *ud;
    int cancelled;
    int n_tool_calls;
    ll_logprobs *lp;          /* [max_tokens] pending logprobs, attached to the next delta */
    int32_t n_lp;
} gen_ctx;

static void on_parsed(void *ud, const ll_out_event *ev) {
    gen_ctx *g = ud;
    if (g->cancelled) return;
    ll_gen_event out = {0};
    switch (ev->kind) {
    case LL_OUT_REASONING: out.kind = LL_GEN_REASONING; out.text = ev->text; out.len = ev->len; break;
    case LL_OUT_CONTENT: out.kind = LL_GEN_CONTENT; out.text = ev->text; out.len = ev->len; break;
    case LL_OUT_TOOL_CALL:
        out.kind = LL_GEN_TOOL_CALL;
        out.tool_index = ev->call->index;
        out.tool_name = ev->call->name;
        out.tool_arguments = ev->call->arguments;
        g->n_tool_calls++;
        break;
    }
    if (g->n_lp > 0 && out.kind != LL_GEN_TOOL_CALL) {
        out.logprobs = g->lp;
        out.n_logprobs = g->n_lp;
        g->n_lp = 0;
    }
    if (g->cb(g->ud, &out)) g->cancelled = 1;
}

/* Renders the chat request; sets *in_reasoning when the prompt leaves the model inside <think>. */
static ll_status render_chat(ll_engine *e, const ll_gen_request *r, char **text, size_t *len, int *in_reasoning) {
    if (!e->chat) return ll_err(LL_ERR_INVALID, "this model has no chat template; use /v1/completions");
    if (!cJSON_IsArray(r->messages)) return ll_err(LL_ERR_INVALID, "messages: must be an array");
    cJSON *req = cJSON_CreateObject();
    cJSON *msgs = cJSON_Duplicate(r->messages, 1); /* normalised below; the caller's stays intact */
    if (!req || !msgs) { cJSON_Delete(req); cJSON_Delete(msgs); return ll_err(LL_ERR_OOM, "out of memory"); }
    cJSON_AddItemToObject(req, "messages", msgs);
    if (r->tools) cJSON_AddItemReferenceToObject(req, "tools", (cJSON *)r->tools);
    if (r->template_kwargs) cJSON_AddItemReferenceToObject(req, "chat_template_kwargs", (cJSON *)r->template_kwargs);
    cJSON_AddBoolToObject(req, "add_generation_prompt", 1);
    /* OpenAI clients send tool-call arguments as JSON text; the Qwen templates iterate them as
     * objects (as vLLM and llama.cpp also convert) */
    tmpl_normalize_tool_args(req);
    ll_status st = tmpl_render(e->chat, req, NULL, text, len);
    cJSON_Delete(req);
    if (st != LL_OK) return st;
    /* inside reasoning iff the last "<think>" of the prompt is not closed */
    const char *open = NULL, *p = *text;
    while ((p = strstr(p, "<think>"))) open = p++;
    *in_reasoning = open && !strstr(open, "</think>");
    return LL_OK;
}

static ll_status build_prompt(ll_engine *e, const ll_gen_request *r, tok_ids *ids, int *in_reasoning) {
    *in_reasoning = 0;
    if (!e->tok && !r->prompt_ids) return ll_err(LL_ERR_INVALID, "this model has no tokenizer: give the prompt as token ids");
    if (r->messages) {
        char *text = NULL;
        size_t len = 0;
        LL_TRY(render_chat(e, r, &text, &len, in_reasoning));
        ll_status st = tok_encode(e->tok, text, len, 0, ids);
        ll_free(text);
        return st;
    }
    if (r->prompt_ids) {
        for (int32_t i = 0; i < r->n_prompt_ids; i++) {
            if (r->prompt_ids[i] < 0 || r->prompt_ids[i] >= e->model->hp.n_vocab)
                return ll_err(LL_ERR_INVALID, "prompt[%d]: token id %d is outside the vocabulary [0, %d)", i,
                              r->prompt_ids[i], e->model->hp.n_vocab);
            if (ids->n == ids->cap) {
                size_t nc = ids->cap ? ids->cap * 2 : 64;
                int32_t *nn = ll_realloc(ids->ids, nc * sizeof(int32_t));
                if (!nn) return ll_err(LL_ERR_OOM, "out of memory");
                ids->ids = nn;
                ids->cap = nc;
            }
            ids->ids[ids->n++] = r->prompt_ids[i];
        }
        return LL_OK;
    }
    if (r->prompt) return tok_encode(e->tok, r->prompt, strlen(r->prompt), 0, ids);
    return ll_err(LL_ERR_INVALID, "request has neither messages nor a prompt");
}

static void snapshot_here(ll_engine *e, const char *ns, const int32_t *ids, int32_t pos) {
    ll_backend *be = e->be;
    size_t bytes = be->v->seq_state_bytes(be, e->seq);
    void *blob = ll_malloc(bytes);
    if (!blob) return; /* a snapshot is an optimisation: failing to take one is not an error */
    if (be->v->seq_save(be, e->seq, blob, bytes) == LL_OK) (void)ll_snap_store_put(e->snaps, ns, ids, (size_t)pos, blob, bytes);
    ll_free(blob);
}

/* Brings the sequence to the state after prompt[0..n-1), resuming from the best snapshot, and
 * snapshots on the way at `keep` (the start of a chat prompt's generation turn, or 0) and at n-1.
 * Why two: a chat template re-renders the previous assistant turn differently from how the
 * generation prompt began (Qwen3.5/3.6 drop the empty <think></think> of earlier turns), so the
 * next turn's prompt extends the state *before* "<|im_start|>assistant", not the one at n-1; a
 * repeated or extended raw prompt extends n-1. Returns the number of tokens reused. */
static ll_status prefill_prompt(ll_engine *e, const char *ns, const int32_t *ids, int32_t n, int32_t keep,
                                int32_t *reused) {
    ll_backend *be = e->be;
    *reused = 0;
    const ll_snap *sn = n > 1 ? ll_snap_store_lookup(e->snaps, ns, ids, (size_t)n - 1) : NULL;
    if (sn && sn->n_tokens > 0 && be->v->seq_load(be, e->seq, sn->blob, sn->blob_size) == LL_OK) {
        *reused = (int32_t)sn->n_tokens;
        e->stats.snapshot_hits++;
    } else {
        be->v->seq_reset(be, e->seq);
        e->stats.snapshot_misses++;
    }
    int32_t marks[2] = {keep, n - 1}, pos = *reused;
    for (int i = 0; i < 2; i++) {
        if (marks[i] <= pos) continue;
        LL_TRY(be->v->forward(be, e->seq, ids + pos, marks[i] - pos, LL_LOGITS_NONE, NULL));
        pos = marks[i];
        snapshot_here(e, ns, ids, pos);
    }
    /* remember the most reusable state's tokens for ll_engine_session_save */
    int32_t save_at = keep > 0 ? keep : n - 1;
    if (save_at > 0) {
        int32_t *cp = ll_malloc(sizeof(int32_t) * (size_t)save_at);
        char *nsc = ll_strdup(ns);
        if (cp && nsc) {
            memcpy(cp, ids, sizeof(int32_t) * (size_t)save_at);
            ll_free(e->last_prompt);
            ll_free(e->last_ns);
            e->last_prompt = cp;
            e->n_last_prompt = (size_t)save_at;
            e->last_ns = nsc;
        } else {
            ll_free(cp);
            ll_free(nsc);
        }
    }
    return LL_OK;
}

ll_status ll_engine_generate(ll_engine *e, const ll_gen_request *r, ll_gen_cb cb, void *ud, ll_gen_result *res) {
    memset(res, 0, sizeof(*res));
    const char *ns = r->ns ? r->ns : "";
    tok_ids ids = {0};
    tok_str piece = {0};
    ll_sampler *smp = NULL;
    ll_stop *stop = NULL;
    ll_outparse *op = NULL;
    gen_ctx g = {.e = e, .req = r, .cb = cb, .ud = ud};
    int in_reasoning = 0;
    ll_status st = build_prompt(e, r, &ids, &in_reasoning);
    if (st != LL_OK) goto done;
    const int32_t n = (int32_t)ids.n;
    if (n == 0) { st = ll_err(LL_ERR_INVALID, "the prompt is empty"); goto done; }
    if (r->max_tokens < 0) { st = ll_err(LL_ERR_INVALID, "max_tokens: must be positive"); goto done; }
    int32_t max_new = r->max_tokens > 0 ? r->max_tokens : e->n_ctx - n;
    if ((int64_t)n + max_new > e->n_ctx || max_new <= 0) {
        st = ll_err(LL_ERR_OVERFLOW, "this model's context is %d tokens; the prompt has %d tokens and %d were requested for the completion",
                    e->n_ctx, n, r->max_tokens > 0 ? r->max_tokens : 1);
        goto done;
    }
    res->prompt_tokens = n;
    if ((st = ll_sampler_new(&r->sampling, e->model->hp.n_vocab, e->tok ? tok_n_vocab(e->tok) : e->model->hp.n_vocab,
                             &smp)) != LL_OK)
        goto done;
    if ((st = ll_sampler_set_prompt(smp, ids.ids, ids.n)) != LL_OK) goto done;
    ll_stop_params sp = {.stop_ids = e->eos, .n_stop_ids = e->n_eos, .stop_strs = r->stop, .n_stop_strs = r->n_stop,
                         .max_tokens = max_new};
    if ((st = ll_stop_new(&sp, &stop)) != LL_OK) goto done;
    ll_outparse_params opp = {.start_in_reasoning = in_reasoning,
                              .parse_tools = r->tools && cJSON_GetArraySize(r->tools) > 0, .tools = r->tools};
    if ((st = ll_outparse_new(&opp, on_parsed, &g, &op)) != LL_OK) goto done;
    if (r->logprobs && !(g.lp = ll_calloc((size_t)max_new, sizeof(ll_logprobs)))) { st = ll_err(LL_ERR_OOM, "out of memory"); goto done; }

    double t0 = ll_time_sec();
    int32_t keep = 0; /* chat: the position where the generation turn starts (last <|im_start|>) */
    if (r->messages && e->tok) {
        int32_t im_start = tok_find(e->tok, "<|im_start|>");
        for (int32_t i = n - 1; i > 0 && im_start >= 0; i--)
            if (ids.ids[i] == im_start) { keep = i; break; }
    }
    if ((st = prefill_prompt(e, ns, ids.ids, n, keep, &res->cached_tokens)) != LL_OK) goto done;
    if ((st = e->be->v->forward(e->be, e->seq, ids.ids + n - 1, 1, LL_LOGITS_LAST, e->logits)) != LL_OK) goto done;
    double t1 = ll_time_sec();
    res->prefill_sec = t1 - t0;

    tok_stream ds;
    if (e->tok) tok_stream_init(&ds, e->tok, TOK_DEC_SKIP_SPECIAL);
    ll_stop_out so = {0};
    res->finish = LL_FINISH_LENGTH;
    for (;;) {
        int32_t id;
        if ((st = ll_sampler_sample(smp, e->logits, &id)) != LL_OK) goto done;
        if (g.lp) {
            int32_t k = LL_MIN(r->top_logprobs, LL_SAMPLER_MAX_TOP_LOGPROBS);
            if ((st = ll_sampler_logprobs(smp, e->logits, id, k, &g.lp[g.n_lp])) != LL_OK) goto done;
            g.n_lp++;
        }
        ll_sampler_accept(smp, id);
        res->completion_tokens++;
        if (r->emit_token_ids) {
            ll_gen_event te = {.kind = LL_GEN_TOKEN, .token = id};
            if (cb(ud, &te)) g.cancelled = 1;
        }
        piece.n = 0;
        if (e->tok && (st = tok_stream_push(&ds, id, &piece)) != LL_OK) goto done;
        if ((st = ll_stop_feed(stop, id, piece.s ? piece.s : "", piece.n, &so)) != LL_OK) goto done;
        if (so.len && (st = ll_outparse_feed(op, so.text, so.len)) != LL_OK) goto done;
        if (g.cancelled) { res->finish = LL_FINISH_CANCELLED; break; }
        if (so.reason != LL_STOP_NONE) {
            res->finish = so.reason == LL_STOP_LENGTH ? LL_FINISH_LENGTH : LL_FINISH_STOP;
            if (so.reason == LL_STOP_LENGTH && e->tok) { /* the decoder may still hold a partial character */
                piece.n = 0;
                tok_stream_flush(&ds, &piece);
                if (piece.n && (st = ll_outparse_feed(op, piece.s, piece.n)) != LL_OK) goto done;
            }
            break;
        }
        if ((st = e->be->v->forward(e->be, e->seq, &id, 1, LL_LOGITS_LAST, e->logits)) != LL_OK) goto done;
    }
    if (!g.cancelled && (st = ll_outparse_finish(op)) != LL_OK) goto done;
    if (g.cancelled) res->finish = LL_FINISH_CANCELLED;
    else if (g.n_tool_calls > 0 && res->finish == LL_FINISH_STOP) res->finish = LL_FINISH_TOOL_CALLS;
    res->decode_sec = ll_time_sec() - t1;
    if (g.cancelled) st = ll_err(LL_ERR_CANCELLED, "request cancelled");
done:
    e->stats.requests++;
    e->stats.prompt_tokens += (uint64_t)res->prompt_tokens;
    e->stats.cached_tokens += (uint64_t)res->cached_tokens;
    e->stats.completion_tokens += (uint64_t)res->completion_tokens;
    e->stats.prefill_sec += res->prefill_sec;
    e->stats.decode_sec += res->decode_sec;
    ll_free(g.lp);
    ll_outparse_free(op);
    ll_stop_free(stop);
    ll_sampler_free(smp);
    tok_str_free(&piece);
    tok_ids_free(&ids);
    return st;
}
