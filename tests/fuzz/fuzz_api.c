/* fuzz_api.c — libFuzzer target for the server's request parsing (chat, completions, tokenize,
 * detokenize) and for building a response from the parsed request. The first input byte picks the
 * parser; the rest is the body. */
#include <stddef.h>
#include <stdint.h>

#include "server/resp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    ll_api_error err;
    ll_api_limits lim = {"m", "a", 4096, 1, NULL};
    switch (data[0] % 4) {
    case 0:
    case 1: {
        ll_api_request r;
        if (ll_api_parse(data[0] % 4 ? LL_API_COMPLETION : LL_API_CHAT, body, len, &lim, &r, &err) == 0) {
            /* a response for it: every text that came in must go out as valid JSON */
            ll_resp resp;
            ll_strbuf out = {0};
            ll_resp_init(&resp, &r, "f", 0, NULL, NULL);
            if (r.stream) ll_resp_begin(&resp, &out);
            for (int i = 0; i < r.gen.n_stop; i++) {
                ll_gen_event ev = {.kind = (ll_gen_event_kind)(i % 2), .text = r.gen.stop[i], .len = strlen(r.gen.stop[i])};
                ll_resp_event(&resp, &ev, &out);
            }
            ll_gen_result res = {LL_FINISH_STOP, 1, 0, 1, 0, 0};
            ll_resp_finish(&resp, &res, &out);
            ll_strbuf_free(&out);
            ll_resp_free(&resp);
            ll_api_request_free(&r);
        }
        break;
    }
    case 2: {
        ll_api_tokenize t;
        if (ll_api_parse_tokenize(body, len, &t, &err) == 0) cJSON_Delete(t.doc);
        break;
    }
    default: {
        int32_t *ids;
        int32_t n;
        if (ll_api_parse_detokenize(body, len, &ids, &n, &err) == 0) ll_free(ids);
    }
    }
    return 0;
}
