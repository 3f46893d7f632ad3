/* fuzz_template.c — libFuzzer target for the chat-template lexer, parser and evaluator.
 * Input: template source, optionally followed by "\n@@REQUEST@@\n" and a request JSON (else a fixed
 * conversation with tools, tool calls, content parts and kwargs is used). Any input must give
 * LL_OK or an error status with a message: never a crash, leak or hang. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tokenizer/template.h"

static const char default_request[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": [{\"type\": "
    "\"text\", \"text\": \"hi\"}]}, {\"role\": \"assistant\", \"content\": \"<think>\\nr\\n</think>\\n\\na\", "
    "\"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1.5, \"y\": [true, null]}}}]}, "
    "{\"role\": \"tool\", \"content\": \"ok\"}], \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}], "
    "\"chat_template_kwargs\": {\"enable_thinking\": false}}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char sep[] = "\n@@REQUEST@@\n";
    const char *src = (const char *)data, *req_text = default_request;
    size_t src_len = size, req_len = sizeof(default_request) - 1;
    for (size_t i = 0; i + sizeof(sep) - 1 <= size; i++)
        if (!memcmp(data + i, sep, sizeof(sep) - 1)) {
            src_len = i;
            req_text = (const char *)data + i + sizeof(sep) - 1;
            req_len = size - i - (sizeof(sep) - 1);
            break;
        }
    tmpl *t;
    if (tmpl_parse(src, src_len, "fuzz.jinja", &t) != LL_OK) return 0;
    cJSON *req = cJSON_ParseWithLength(req_text, req_len);
    if (req) {
        char *out = NULL;
        size_t n;
        if (tmpl_render(t, req, NULL, &out, &n) == LL_OK && strlen(out) > n) abort();
        ll_free(out);
        cJSON_Delete(req);
    }
    tmpl_free(t);
    return 0;
}
