/* fuzz_gateway.c — libFuzzer target for the privacy gateway's pure parts: a request body is
 * scanned, masked and its audit line built (first byte even), or an upstream answer is restored,
 * whole and as an SSE stream cut at a fuzzer-chosen point (first byte odd). The masker knows one
 * placeholder per category so that restores actually happen. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "server/gateway.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const char *body = (const char *)data + 2;
    size_t len = size - 2;
    pii_masker m;
    pii_masker_init(&m);
    ll_strbuf out = {0};
    if (data[0] % 2 == 0) {
        pii_policy p;
        pii_policy_default(&p);
        ll_api_error e;
        ll_gw_scan sc = {0};
        cJSON *doc = cJSON_ParseWithLength(body, len);
        int act;
        if (doc && ll_gw_take_decision(doc, &act, &e) == 0 && ll_gw_scan_messages(doc, &p, NULL, &sc, &e) == 0) {
            ll_gw_scan_json(&sc, &p, &out);
            ll_gw_mask(&sc, sc.decision.mask_categories, &m);
            ll_gw_audit_line(&sc, "id", "mask", "http://u", sc.decision.mask_categories, 1, &out);
            ll_gw_refusal(&sc.decision, "m", "id", 0, data[1] & 1, (data[1] >> 1) & 1, &out);
        }
        ll_gw_scan_free(&sc);
        cJSON_Delete(doc);
    } else {
        for (int c = 0; c < PII_N_CAT; c++) {
            const pii_mask_entry *en;
            pii_masker_placeholder(&m, c, "v\"\\\n", 4, &en);
        }
        ll_gw_unmask_body(&m, body, len, &out);
        ll_gw_sse sse;
        ll_gw_sse_init(&sse, &m);
        size_t cut = len ? data[1] % (len + 1) : 0;
        ll_gw_sse_feed(&sse, body, cut, &out);
        ll_gw_sse_feed(&sse, body + cut, len - cut, &out);
        ll_gw_sse_finish(&sse, &out);
        ll_gw_sse_free(&sse);
    }
    ll_strbuf_free(&out);
    pii_masker_free(&m);
    return 0;
}
