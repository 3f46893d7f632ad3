/*
 * cmd_chat.c — `lilac chat -m MODEL`: an interactive multi-turn session.
 *
 * Each turn re-renders the whole conversation through the chat template; the engine's snapshot
 * store resumes from the state at the end of the previous prompt, so only the new tokens are
 * prefilled (the stats line shows the cached count). Reasoning is shown apart from the answer
 * (on stderr, dimmed on a terminal). Commands: /save FILE, /load FILE, /reset, /help, /exit.
 * A session file is the engine's snapshot file (FILE) plus the conversation (FILE.json).
 */
#include <stdio.h>
#include <unistd.h>

#include "cli.h"
#include "cli_gen.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    tok_str content, reasoning;
    int tty;
} chat_ctx;

static int on_event(void *ud, const ll_gen_event *ev) {
    chat_ctx *c = ud;
    if (ev->kind == LL_GEN_REASONING) {
        tok_str_append(&c->reasoning, ev->text, ev->len);
        fprintf(stderr, "%s%.*s%s", c->tty ? "\x1b[2m" : "", (int)ev->len, ev->text, c->tty ? "\x1b[0m" : "");
        fflush(stderr);
    } else if (ev->kind == LL_GEN_CONTENT) {
        tok_str_append(&c->content, ev->text, ev->len);
        fwrite(ev->text, 1, ev->len, stdout);
        fflush(stdout);
    } else if (ev->kind == LL_GEN_TOOL_CALL) {
        printf("\n[tool call] %s(%s)\n", ev->tool_name, ev->tool_arguments);
    }
    return 0;
}

static void add_msg(cJSON *msgs, const char *role, const char *content, const char *reasoning) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddStringToObject(m, "content", content);
    if (reasoning && *reasoning) cJSON_AddStringToObject(m, "reasoning_content", reasoning);
    cJSON_AddItemToArray(msgs, m);
}

static int save_session(ll_engine *e, const char *path, const cJSON *msgs) {
    if (ll_engine_session_save(e, NULL, path) != LL_OK) return -1;
    char jp[4200];
    if (snprintf(jp, sizeof(jp), "%s.json", path) >= (int)sizeof(jp)) { ll_err(LL_ERR_INVALID, "path too long"); return -1; }
    char *txt = cJSON_Print(msgs);
    FILE *f = fopen(jp, "w");
    int ok = f && txt && fputs(txt, f) >= 0;
    if (f && fclose(f) != 0) ok = 0;
    cJSON_free(txt);
    if (!ok) { ll_err(LL_ERR_IO, "%s: cannot write the conversation", jp); return -1; }
    return 0;
}

static cJSON *load_session(ll_engine *e, const char *path) {
    char jp[4200];
    if (snprintf(jp, sizeof(jp), "%s.json", path) >= (int)sizeof(jp)) { ll_err(LL_ERR_INVALID, "path too long"); return NULL; }
    FILE *f = fopen(jp, "rb");
    if (!f) { ll_err(LL_ERR_IO, "%s: cannot open the conversation file", jp); return NULL; }
    char buf[1 << 16];
    tok_str s = {0};
    size_t r;
    while ((r = fread(buf, 1, sizeof(buf), f)) > 0) tok_str_append(&s, buf, r);
    fclose(f);
    cJSON *msgs = s.s ? cJSON_Parse(s.s) : NULL;
    tok_str_free(&s);
    if (!cJSON_IsArray(msgs)) { cJSON_Delete(msgs); ll_err(LL_ERR_FORMAT, "%s: not a JSON array of messages", jp); return NULL; }
    if (ll_engine_session_load(e, NULL, path) != LL_OK) { cJSON_Delete(msgs); return NULL; }
    return msgs;
}

int cmd_chat(int argc, char **argv) {
    cli_gen_opts o;
    cli_gen_init(&o);
    const char *system = NULL;
    for (int i = 1; i < argc; i++) {
        int r = cli_gen_parse(&o, argc, argv, &i);
        if (r < 0) return cli_fail("chat", ll_errmsg());
        if (r > 0) continue;
        if (!strcmp(argv[i], "--system") && i + 1 < argc) { system = argv[++i]; continue; }
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: lilac chat -m MODEL [--system TEXT]\n");
            cli_gen_usage(stdout);
            return 0;
        }
        fprintf(stderr, "lilac chat: unknown or incomplete option '%s'\n", argv[i]);
        return 2;
    }
    if (!o.ep.model_path) o.ep.model_path = cli_default_model();
    if (!o.ep.model_path) return cli_fail("chat", "need -m MODEL (no default model found: set LILAC_MODEL)");
    ll_engine *e;
    cli_progress_install();
    ll_status ost = ll_engine_open(&o.ep, &e);
    cli_progress_done();
    if (ost != LL_OK) return cli_fail("chat", ll_errmsg());
    if (!ll_engine_has_tokenizer(e)) { ll_engine_close(e); return cli_fail("chat", "this model has no tokenizer"); }
    cli_gen_apply_defaults(&o, e);
    cJSON *kw = NULL;
    if (o.think >= 0) { kw = cJSON_CreateObject(); cJSON_AddBoolToObject(kw, "enable_thinking", o.think); }
    cJSON *msgs = cJSON_CreateArray();
    if (system) add_msg(msgs, "system", system, NULL);
    chat_ctx c = {.tty = isatty(1)};
    char line[1 << 16];
    for (;;) {
        if (c.tty) { printf("> "); fflush(stdout); }
        if (!fgets(line, sizeof(line), stdin)) break;
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (!n) continue;
        if (line[0] == '/') {
            if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
            if (!strcmp(line, "/reset")) {
                cJSON_Delete(msgs);
                msgs = cJSON_CreateArray();
                if (system) add_msg(msgs, "system", system, NULL);
                printf("[conversation cleared]\n");
            } else if (!strncmp(line, "/save ", 6)) {
                if (save_session(e, line + 6, msgs) == 0) printf("[saved %s]\n", line + 6);
                else fprintf(stderr, "lilac chat: %s\n", ll_errmsg());
            } else if (!strncmp(line, "/load ", 6)) {
                cJSON *m = load_session(e, line + 6);
                if (m) { cJSON_Delete(msgs); msgs = m; printf("[loaded %s: %d messages]\n", line + 6, cJSON_GetArraySize(msgs)); }
                else fprintf(stderr, "lilac chat: %s\n", ll_errmsg());
            } else {
                printf("commands: /save FILE  /load FILE  /reset  /exit\n");
            }
            continue;
        }
        add_msg(msgs, "user", line, NULL);
        o.rq.messages = msgs;
        o.rq.template_kwargs = kw;
        c.content.n = c.reasoning.n = 0;
        ll_gen_result res;
        ll_status st = ll_engine_generate(e, &o.rq, on_event, &c, &res);
        printf("\n");
        if (st != LL_OK) {
            fprintf(stderr, "lilac chat: %s\n", ll_errmsg());
            cJSON_DeleteItemFromArray(msgs, cJSON_GetArraySize(msgs) - 1); /* the turn did not happen */
            continue;
        }
        tok_str_append(&c.content, "", 0);
        tok_str_append(&c.reasoning, "", 0);
        add_msg(msgs, "assistant", c.content.s, c.reasoning.s);
        cli_gen_print_stats(&res);
    }
    tok_str_free(&c.content);
    tok_str_free(&c.reasoning);
    cJSON_Delete(msgs);
    cJSON_Delete(kw);
    ll_engine_close(e);
    return 0;
}
