/* cmd_detokenize.c — `lilac detokenize -t TOKENIZER [--skip-special] < ids.json`: prints the text
 * of a JSON array of ids (invalid UTF-8 repaired with U+FFFD, as HF's decode does). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "cli/cli.h"
#include "cli/cli_io.h"
#include "tokenizer/tokenizer.h"

static void usage(FILE *f) {
    fprintf(f, "usage: lilac detokenize -t TOKENIZER [--skip-special] < ids.json\n"
               "  -t PATH          tokenizer.json or a model directory holding one\n"
               "  --skip-special   drop special tokens (<|im_end|> ...)\n");
}

int cmd_detokenize(int argc, char **argv) {
    const char *path = NULL;
    unsigned flags = 0;
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "-t") || !strcmp(argv[i], "--tokenizer")) && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "--skip-special")) flags |= TOK_DEC_SKIP_SPECIAL;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(stdout); return 0; }
        else { usage(stderr); return 2; }
    }
    if (!path) { usage(stderr); return 2; }
    size_t len;
    char *text = cli_read_stream(stdin, &len);
    if (!text) return cli_fail("detokenize", "cannot read stdin");
    cJSON *arr = cJSON_ParseWithLength(text, len);
    ll_free(text);
    if (!cJSON_IsArray(arr)) { cJSON_Delete(arr); return cli_fail("detokenize", "stdin is not a JSON array of ids"); }
    int n = cJSON_GetArraySize(arr), i = 0, rc = 0;
    int32_t *ids = ll_malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        if (!ids || !cJSON_IsNumber(e) || e->valuedouble != (int32_t)e->valuedouble) {
            rc = cli_fail("detokenize", ids ? "the array holds something other than an integer id" : "out of memory");
            break;
        }
        ids[i++] = (int32_t)e->valuedouble;
    }
    cJSON_Delete(arr);
    tok_tokenizer *t = NULL;
    if (!rc && tok_load_file(path, &t) != LL_OK) rc = cli_fail("detokenize", ll_errmsg());
    tok_str out = {0};
    if (!rc && tok_decode(t, ids, (size_t)n, flags, &out) != LL_OK) rc = cli_fail("detokenize", ll_errmsg());
    if (!rc) fwrite(out.s, 1, out.n, stdout);
    tok_str_free(&out);
    ll_free(ids);
    tok_free(t);
    return rc;
}
