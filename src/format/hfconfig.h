/*
 * hfconfig.h — HuggingFace config.json for qwen3_5_moe: the nested release layout (top-level
 * model_type "qwen3_5_moe" with "text_config") and the flat "qwen3_5_moe_text" one, into
 * qwen_hparams; plus MLX's "quantization" block (default bits/group size and per-module
 * overrides such as the 8-bit router).
 */
#ifndef LILAC_HFCONFIG_H
#define LILAC_HFCONFIG_H

#include "../model/qwen35.h"

typedef struct hf_quant_entry {
    char *module;       /* MLX module path, e.g. "language_model.model.layers.0.mlp.gate" */
    int quantized;      /* 0: the config says this module is not quantized */
    int bits, group_size;
} hf_quant_entry;

typedef struct hf_quant {
    int present;        /* config.json has "quantization" (MLX) */
    int bits, group_size;
    int n;
    hf_quant_entry *e;  /* [n] per-module overrides */
} hf_quant;

/* Parses config JSON text (`src` names it in messages) into *hp (validated) and, if q is not
 * NULL, the MLX quantization block (free with hf_quant_free). */
ll_status hfconfig_parse(const char *json, size_t len, const char *src, qwen_hparams *hp, hf_quant *q);
void hf_quant_free(hf_quant *q);
/* The override for `module`, or NULL. */
const hf_quant_entry *hf_quant_find(const hf_quant *q, const char *module);

/* qwen_hparams_validate with a field-name prefix ("text_config." for the nested layout). */
ll_status hfconfig_check(const qwen_hparams *hp, const char *src, const char *prefix);

#endif
