/* fuzz_config.c — libFuzzer target for config.json parsing (hfconfig_parse) incl. the MLX
 * quantization block. */
#include <stddef.h>
#include <stdint.h>

#include "format/hfconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    qwen_hparams hp;
    hf_quant q;
    if (hfconfig_parse((const char *)data, size, "fuzz/config.json", &hp, &q) == LL_OK) {
        (void)hf_quant_find(&q, "language_model.model.layers.0.mlp.gate");
        hf_quant_free(&q);
    }
    return 0;
}
