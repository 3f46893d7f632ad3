/* cmd_tokenize.c — `lilac tokenize -t TOKENIZER [--tokens] [--special-as-text] < text`:
 * prints the ids (or with --tokens the token strings) of stdin as a JSON array. With --jsonl each
 * stdin line is a JSON string and each output line its array (for batch tests); --stats reports
 * encode throughput on stderr (single thread, load time excluded). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "cli/cli.h"
#include "cli/cli_io.h"
#include "tokenizer/tokenizer.h"

static void usage(FILE *f) {
    fprintf(f, "usage: lilac tokenize -t TOKENIZER [--tokens] [--special-as-text] < text\n"
               "  -t PATH             tokenizer.json or a model directory holding one\n"
               "  --tokens            print the token strings instead of the ids\n"
               "  --special-as-text   encode special-token text (<|im_start|>...) as plain text\n"
               "  --jsonl             stdin lines are JSON strings; print one array per line\n"
               "  --stats             print encode time and throughput to stderr\n");
}

int cmd_tokenize(int argc, char **argv) {
    const char *path = NULL;
    int tokens = 0, jsonl = 0, stats = 0;
    unsigned flags = 0;
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "-t") || !strcmp(argv[i], "--tokenizer")) && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "--tokens")) tokens = 1;
        else if (!strcmp(argv[i], "--special-as-text")) flags |= TOK_ENC_SPECIAL_AS_TEXT;
        else if (!strcmp(argv[i], "--jsonl")) jsonl = 1;
        else if (!strcmp(argv[i], "--stats")) stats = 1;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(stdout); return 0; }
        else { usage(stderr); return 2; }
    }
    if (!path) { usage(stderr); return 2; }
    tok_tokenizer *t;
    if (tok_load_file(path, &t) != LL_OK) return cli_fail("tokenize", ll_errmsg());
    size_t len;
    char *text = cli_read_stream(stdin, &len);
    if (!text) { tok_free(t); return cli_fail("tokenize", "cannot read stdin"); }
    tok_ids ids = {0};
    int rc = 0;
    char *line = text, *end = text + len;
    double secs = 0;
    size_t bytes = 0;
    while (!rc && line <= end) {
        const char *in = text;
        size_t in_len = len;
        cJSON *js = NULL;
        char *nl = NULL;
        if (jsonl) {
            nl = memchr(line, '\n', (size_t)(end - line));
            if (nl) *nl = 0;
            if (line == end || !*line) { line = nl ? nl + 1 : end + 1; continue; }
            js = cJSON_Parse(line);
            if (!cJSON_IsString(js)) { cJSON_Delete(js); rc = cli_fail("tokenize", "--jsonl: a line is not a JSON string"); break; }
            in = js->valuestring;
            in_len = strlen(in);
        }
        ids.n = 0;
        double t0 = ll_time_sec();
        if (tok_encode(t, in, in_len, flags, &ids) != LL_OK) rc = cli_fail("tokenize", ll_errmsg());
        secs += ll_time_sec() - t0;
        bytes += in_len;
        cJSON_Delete(js);
        if (!rc) {
            cJSON *arr = cJSON_CreateArray();
            for (size_t i = 0; arr && i < ids.n; i++)
                cJSON_AddItemToArray(arr, tokens ? cJSON_CreateString(tok_piece(t, ids.ids[i])) : cJSON_CreateNumber(ids.ids[i]));
            char *s = arr ? cJSON_PrintUnformatted(arr) : NULL;
            if (s) printf("%s\n", s);
            else rc = cli_fail("tokenize", "out of memory");
            cJSON_free(s);
            cJSON_Delete(arr);
        }
        if (!jsonl) break;
        line = nl ? nl + 1 : end + 1;
    }
    if (stats && !rc)
        fprintf(stderr, "encode: %zu bytes, %zu tokens (last input), %.4f s, %.2f MB/s\n", bytes, ids.n, secs,
                secs > 0 ? (double)bytes / secs / 1e6 : 0.0);
    tok_ids_free(&ids);
    ll_free(text);
    tok_free(t);
    return rc;
}
