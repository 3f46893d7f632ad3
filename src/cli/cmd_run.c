/*
 * cmd_run.c — `lilac run -m MODEL (-p PROMPT | --prompt-ids 1,2,3) [--chat] [--output-ids] ...`
 *
 * One generation, streamed to stdout as it is produced. Without --chat the prompt is raw text
 * (or ids); with --chat it is one user message rendered through the model's chat template, and
 * reasoning goes to stderr. --output-ids prints the generated ids as one comma-separated line
 * (works without a tokenizer). Timing summary on stderr at the end.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "cli/cli_io.h"
#include "cli_gen.h"

static void usage(FILE *f) {
    fprintf(f, "usage: lilac run -m MODEL (-p PROMPT | --prompt-ids 1,2,3) [--chat] [--system TEXT] [--output-ids] [--quiet]\n");
    cli_gen_usage(f);
}

typedef struct {
    int output_ids, quiet, n_ids, in_reasoning;
} run_ctx;

static int on_event(void *ud, const ll_gen_event *ev) {
    run_ctx *c = ud;
    switch (ev->kind) {
    case LL_GEN_TOKEN:
        if (c->output_ids) printf("%s%d", c->n_ids++ ? "," : "", ev->token);
        break;
    case LL_GEN_REASONING:
        if (!c->quiet) { fwrite(ev->text, 1, ev->len, stderr); fflush(stderr); }
        break;
    case LL_GEN_CONTENT:
        if (!c->output_ids) { fwrite(ev->text, 1, ev->len, stdout); fflush(stdout); }
        break;
    case LL_GEN_TOOL_CALL:
        if (!c->output_ids) printf("\n[tool call %d] %s(%s)\n", ev->tool_index, ev->tool_name, ev->tool_arguments);
        break;
    }
    return 0;
}

int cmd_run(int argc, char **argv) {
    cli_gen_opts o;
    cli_gen_init(&o);
    const char *prompt = NULL, *prompt_ids = NULL, *system = NULL;
    int chat = 0;
    run_ctx rc = {0};
    for (int i = 1; i < argc; i++) {
        int r = cli_gen_parse(&o, argc, argv, &i);
        if (r < 0) return cli_fail("run", ll_errmsg());
        if (r > 0) continue;
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        if (!strcmp(a, "--chat")) chat = 1;
        else if (!strcmp(a, "--output-ids")) rc.output_ids = 1;
        else if (!strcmp(a, "--quiet")) rc.quiet = 1;
        else if ((!strcmp(a, "-p") || !strcmp(a, "--prompt")) && i + 1 < argc) prompt = argv[++i];
        else if (!strcmp(a, "--prompt-ids") && i + 1 < argc) prompt_ids = argv[++i];
        else if (!strcmp(a, "--system") && i + 1 < argc) system = argv[++i];
        else {
            usage(stderr);
            fprintf(stderr, "lilac run: unknown or incomplete option '%s'\n", a);
            return 2;
        }
    }
    if (!o.ep.model_path) o.ep.model_path = cli_default_model();
    if (!o.ep.model_path || (!prompt == !prompt_ids)) {
        usage(stderr);
        return cli_fail("run", "need -m MODEL and exactly one of -p PROMPT or --prompt-ids");
    }
    if (chat && !prompt) return cli_fail("run", "--chat needs a text prompt (-p)");
    int32_t *ids = NULL;
    int n_ids = 0;
    if (prompt_ids && (n_ids = cli_parse_ids("--prompt-ids", prompt_ids, &ids)) <= 0)
        return cli_fail("run", n_ids == 0 ? "--prompt-ids: empty" : ll_errmsg());
    ll_engine *e = NULL;
    cJSON *msgs = NULL, *kw = NULL;
    int status = 1;
    cli_progress_install();
    ll_status ost = ll_engine_open(&o.ep, &e);
    cli_progress_done();
    if (ost != LL_OK) { cli_fail("run", ll_errmsg()); goto done; }
    cli_gen_apply_defaults(&o, e);
    o.rq.emit_token_ids = rc.output_ids;
    if (chat) {
        msgs = cJSON_CreateArray();
        if (system) {
            cJSON *m = cJSON_CreateObject();
            cJSON_AddStringToObject(m, "role", "system");
            cJSON_AddStringToObject(m, "content", system);
            cJSON_AddItemToArray(msgs, m);
        }
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", prompt);
        cJSON_AddItemToArray(msgs, m);
        o.rq.messages = msgs;
        if (o.think >= 0) {
            kw = cJSON_CreateObject();
            cJSON_AddBoolToObject(kw, "enable_thinking", o.think);
            o.rq.template_kwargs = kw;
        }
    } else if (prompt) {
        o.rq.prompt = prompt;
    } else {
        o.rq.prompt_ids = ids;
        o.rq.n_prompt_ids = n_ids;
    }
    ll_gen_result res;
    if (ll_engine_generate(e, &o.rq, on_event, &rc, &res) != LL_OK) { cli_fail("run", ll_errmsg()); goto done; }
    if (rc.output_ids || !rc.quiet) printf("\n");
    if (!rc.quiet) cli_gen_print_stats(&res);
    status = 0;
done:
    cJSON_Delete(msgs);
    cJSON_Delete(kw);
    ll_engine_close(e);
    ll_free(ids);
    return status;
}
