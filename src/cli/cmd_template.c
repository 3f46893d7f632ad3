/* cmd_template.c — `lilac template --template FILE.jinja --request REQUEST.json`: prints the
 * prompt a chat template renders for an OpenAI-style request body (messages, tools,
 * chat_template_kwargs, add_generation_prompt). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "cli/cli.h"
#include "cli/cli_io.h"
#include "tokenizer/template.h"

static void usage(FILE *f) {
    fprintf(f, "usage: lilac template --template FILE.jinja --request REQUEST.json\n"
               "  --template FILE   the chat template (Jinja source)\n"
               "  --request FILE    OpenAI-style request JSON ('-' for stdin)\n");
}

int cmd_template(int argc, char **argv) {
    const char *tpath = NULL, *rpath = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--template") && i + 1 < argc) tpath = argv[++i];
        else if (!strcmp(argv[i], "--request") && i + 1 < argc) rpath = argv[++i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(stdout); return 0; }
        else { usage(stderr); return 2; }
    }
    if (!tpath || !rpath) { usage(stderr); return 2; }
    size_t tlen, rlen;
    char *src = cli_read_path(tpath, &tlen);
    if (!src) return cli_fail("template", "cannot read the template file");
    char *req = !strcmp(rpath, "-") ? cli_read_stream(stdin, &rlen) : cli_read_path(rpath, &rlen);
    if (!req) { ll_free(src); return cli_fail("template", "cannot read the request file"); }
    int rc = 0;
    tmpl *t = NULL;
    cJSON *body = cJSON_ParseWithLength(req, rlen);
    char *out = NULL;
    size_t n = 0;
    if (!body) rc = cli_fail("template", "the request is not valid JSON");
    else if (tmpl_parse(src, tlen, tpath, &t) != LL_OK) rc = cli_fail("template", ll_errmsg());
    else if (tmpl_render(t, body, NULL, &out, &n) != LL_OK) rc = cli_fail("template", ll_errmsg());
    else fwrite(out, 1, n, stdout);
    ll_free(out);
    tmpl_free(t);
    cJSON_Delete(body);
    ll_free(req);
    ll_free(src);
    return rc;
}
