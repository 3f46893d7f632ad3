/* test_config.c — config.json parsing (nested release layout and flat text layout), derived
 * layer pattern, rope fields, MLX quantization block, and validation messages. */
#include <cjson/cJSON.h>

#include "format/hfconfig.h"
#include "st_testutil.h"

static cJSON *load_tiny_config(void) {
    char *txt;
    size_t len;
    assert_int_equal(ll_read_file(tu_shared_path("fixtures/tiny/config.json"), &txt, &len), LL_OK);
    cJSON *j = cJSON_ParseWithLength(txt, len);
    ll_free(txt);
    assert_non_null(j);
    return j;
}

static ll_status parse_json(const cJSON *j, qwen_hparams *hp, hf_quant *q) {
    char *s = cJSON_PrintUnformatted(j);
    ll_status st = hfconfig_parse(s, strlen(s), "config.json", hp, q);
    free(s);
    return st;
}

static void test_tiny_nested(void **state) {
    (void)state;
    cJSON *j = load_tiny_config();
    qwen_hparams hp;
    hf_quant q;
    assert_int_equal(parse_json(j, &hp, &q), LL_OK);
    assert_int_equal(hp.n_vocab, 512);
    assert_int_equal(hp.n_embd, 128);
    assert_int_equal(hp.n_layer, 4);
    assert_int_equal(hp.is_attn[0], 0);
    assert_int_equal(hp.is_attn[2], 0);
    assert_int_equal(hp.is_attn[3], 1);
    assert_int_equal(hp.n_head, 4);
    assert_int_equal(hp.n_head_kv, 2);
    assert_int_equal(hp.head_dim, 64);
    assert_int_equal(hp.n_rot, 16);
    assert_true(hp.rope_theta == 1e7f);
    assert_int_equal(hp.gdn_n_k_heads, 2);
    assert_int_equal(hp.gdn_n_v_heads, 4);
    assert_int_equal(hp.gdn_k_dim, 32);
    assert_int_equal(hp.gdn_v_dim, 32);
    assert_int_equal(hp.gdn_conv_k, 4);
    assert_int_equal(hp.gdn_v_tiled, 0);
    assert_int_equal(hp.n_expert, 8);
    assert_int_equal(hp.n_expert_used, 2);
    assert_int_equal(hp.n_ff_exp, 64);
    assert_int_equal(hp.n_ff_shexp, 64);
    assert_true(hp.rms_eps == 1e-6f);
    assert_int_equal(hp.n_ctx_train, 262144);
    assert_int_equal(hp.tie_embeddings, 0);
    assert_int_equal(hp.eos_token_id, 510);
    assert_int_equal(q.present, 0);
    assert_int_equal(qwen_gdn_conv_dim(&hp), 256);
    assert_int_equal(qwen_n_attn_layers(&hp), 1);
    assert_int_equal(qwen_hparams_validate(&hp, "x"), LL_OK);
    cJSON_Delete(j);
}

static void test_flat_layout(void **state) {
    (void)state;
    /* flat text config, no layer_types (derived from the interval), rope_theta at top level */
    const char *js = "{\"model_type\": \"qwen3_5_moe_text\", \"vocab_size\": 100, \"hidden_size\": 64, \"num_hidden_layers\": 6,"
                     " \"full_attention_interval\": 3, \"num_attention_heads\": 4, \"num_key_value_heads\": 1, \"head_dim\": 32,"
                     " \"linear_num_key_heads\": 2, \"linear_num_value_heads\": 6, \"linear_key_head_dim\": 16,"
                     " \"linear_value_head_dim\": 8, \"linear_conv_kernel_dim\": 4, \"num_experts\": 4, \"num_experts_per_tok\": 4,"
                     " \"moe_intermediate_size\": 32, \"shared_expert_intermediate_size\": 0, \"rope_theta\": 5000,"
                     " \"rope_parameters\": {\"partial_rotary_factor\": 0.5}, \"tie_word_embeddings\": true,"
                     " \"eos_token_id\": [7, 9], \"rms_norm_eps\": 1e-5}";
    qwen_hparams hp;
    assert_int_equal(hfconfig_parse(js, strlen(js), "flat.json", &hp, NULL), LL_OK);
    const uint8_t want[6] = {0, 0, 1, 0, 0, 1};
    assert_memory_equal(hp.is_attn, want, 6);
    assert_true(hp.rope_theta == 5000.f);
    assert_int_equal(hp.n_rot, 16);
    assert_int_equal(hp.tie_embeddings, 1);
    assert_int_equal(hp.eos_token_id, 7);
    assert_int_equal(hp.n_ff_shexp, 0);
    assert_int_equal(hp.n_ctx_train, 32768); /* transformers' default */
    assert_true(hp.rms_eps == 1e-5f);
}

/* Sets text_config.<field> = v (NULL: delete) in a copy of tiny's config and expects failure. */
static void expect_field_error(const char *field, cJSON *v, ll_status want, const char *f1, const char *f2) {
    cJSON *j = load_tiny_config();
    cJSON *tc = cJSON_GetObjectItem(j, "text_config");
    if (v) cJSON_ReplaceItemInObject(tc, field, v);
    else cJSON_DeleteItemFromObject(tc, field);
    qwen_hparams hp;
    ll_status st = parse_json(j, &hp, NULL);
    if (st != want) fail_msg("%s: status %s (want %s): %s", field, ll_status_name(st), ll_status_name(want), ll_errmsg());
    tu_assert_err_has("config.json: ", f1, f2);
    cJSON_Delete(j);
}

static void test_errors(void **state) {
    (void)state;
    expect_field_error("num_experts", NULL, LL_ERR_FORMAT, "text_config.num_experts is missing", "");
    expect_field_error("hidden_size", cJSON_CreateString("128"), LL_ERR_FORMAT, "text_config.hidden_size is not an integer", "");
    expect_field_error("num_key_value_heads", cJSON_CreateNumber(3), LL_ERR_FORMAT,
                       "text_config.num_key_value_heads = 3 does not divide num_attention_heads = 4", "");
    expect_field_error("linear_num_value_heads", cJSON_CreateNumber(5), LL_ERR_FORMAT, "linear_num_key_heads = 2 does not divide",
                       "linear_num_value_heads = 5");
    expect_field_error("num_experts_per_tok", cJSON_CreateNumber(9), LL_ERR_FORMAT, "num_experts_per_tok = 9 exceeds num_experts = 8", "");
    expect_field_error("num_attention_heads", cJSON_CreateNumber(0), LL_ERR_FORMAT, "num_attention_heads = 0", "positive");
    expect_field_error("partial_rotary_factor", cJSON_CreateNumber(0.5), LL_ERR_FORMAT,
                       "text_config.partial_rotary_factor = 0.5 contradicts text_config.rope_parameters.partial_rotary_factor = 0.25", "");
    expect_field_error("layer_types", cJSON_CreateStringArray((const char *[]){"linear_attention", "full_attention"}, 2), LL_ERR_FORMAT,
                       "text_config.layer_types has 2 entries but num_hidden_layers = 4", "");
    expect_field_error("layer_types",
                       cJSON_CreateStringArray((const char *[]){"linear_attention", "sliding_attention", "linear_attention", "full_attention"}, 4),
                       LL_ERR_UNSUPPORTED, "layer_types[1] = \"sliding_attention\"", "not a known layer type");
    expect_field_error("num_hidden_layers", cJSON_CreateNumber(1000), LL_ERR_FORMAT, "num_hidden_layers = 1000", "out of range");
    expect_field_error("rms_norm_eps", cJSON_CreateNumber(-1), LL_ERR_FORMAT, "rms_norm_eps", "");
    expect_field_error("eos_token_id", cJSON_CreateNumber(600), LL_ERR_FORMAT, "eos_token_id = 600", "vocab_size = 512");
    expect_field_error("hidden_act", cJSON_CreateString("gelu"), LL_ERR_UNSUPPORTED, "hidden_act \"gelu\"", "");
    expect_field_error("tie_word_embeddings", cJSON_CreateTrue(), LL_ERR_FORMAT, "text_config.tie_word_embeddings = true contradicts",
                       "");
    /* rope: yarn is unsupported; odd rotary dims; theta contradiction */
    cJSON *rp = cJSON_CreateObject();
    cJSON_AddStringToObject(rp, "rope_type", "yarn");
    cJSON_AddNumberToObject(rp, "rope_theta", 1e7);
    expect_field_error("rope_parameters", rp, LL_ERR_UNSUPPORTED, "rope_type \"yarn\"", "not supported");
    rp = cJSON_CreateObject();
    cJSON_AddNumberToObject(rp, "rope_theta", 1e7);
    cJSON_AddNumberToObject(rp, "partial_rotary_factor", 0.015625); /* 64 × 1/64 = 1 rotary dim */
    cJSON *j = load_tiny_config();
    cJSON *tc = cJSON_GetObjectItem(j, "text_config");
    cJSON_DeleteItemFromObject(tc, "partial_rotary_factor");
    cJSON_ReplaceItemInObject(tc, "rope_parameters", rp);
    qwen_hparams hp;
    assert_int_equal(parse_json(j, &hp, NULL), LL_ERR_FORMAT);
    tu_assert_err_has("config.json", "rotary dims = 1", "even");
    cJSON_AddNumberToObject(tc, "rope_theta", 1e6);
    assert_int_equal(parse_json(j, &hp, NULL), LL_ERR_FORMAT);
    tu_assert_err_has("config.json", "rope_theta = 1e+06 contradicts", "rope_parameters.rope_theta = 1e+07");
    cJSON_Delete(j);
    /* wrong model type, malformed JSON */
    const char *bad = "{\"model_type\": \"llama\"}";
    assert_int_equal(hfconfig_parse(bad, strlen(bad), "config.json", &hp, NULL), LL_ERR_UNSUPPORTED);
    tu_assert_err_has("config.json", "model_type \"llama\"");
    bad = "{\"model_type\": ";
    assert_int_equal(hfconfig_parse(bad, strlen(bad), "config.json", &hp, NULL), LL_ERR_FORMAT);
    tu_assert_err_has("config.json", "malformed JSON");
}

static void test_validate_direct(void **state) {
    (void)state;
    cJSON *j = load_tiny_config();
    qwen_hparams hp;
    assert_int_equal(parse_json(j, &hp, NULL), LL_OK);
    cJSON_Delete(j);
    qwen_hparams h2 = hp;
    h2.n_expert_used = 17;
    h2.n_expert = 32;
    assert_int_equal(qwen_hparams_validate(&h2, "m.gguf"), LL_ERR_UNSUPPORTED);
    tu_assert_err_has("m.gguf", "num_experts_per_tok = 17");
    h2 = hp;
    h2.n_rot = 66;
    assert_int_equal(qwen_hparams_validate(&h2, "m.gguf"), LL_ERR_FORMAT);
    tu_assert_err_has("m.gguf", "rotary dims = 66");
    h2 = hp;
    h2.rope_theta = 0;
    assert_int_equal(qwen_hparams_validate(&h2, "m.gguf"), LL_ERR_FORMAT);
    tu_assert_err_has("rope_theta");
    h2 = hp;
    h2.gdn_conv_k = 0;
    assert_int_equal(qwen_hparams_validate(&h2, "m.gguf"), LL_ERR_FORMAT);
    tu_assert_err_has("linear_conv_kernel_dim = 0");
}

static void test_mlx_quantization(void **state) {
    (void)state;
    cJSON *j = load_tiny_config();
    cJSON *q = cJSON_AddObjectToObject(j, "quantization");
    cJSON_AddNumberToObject(q, "group_size", 64);
    cJSON_AddNumberToObject(q, "bits", 4);
    cJSON *o = cJSON_AddObjectToObject(q, "language_model.model.layers.0.mlp.gate");
    cJSON_AddNumberToObject(o, "group_size", 64);
    cJSON_AddNumberToObject(o, "bits", 8);
    cJSON_AddFalseToObject(q, "language_model.model.layers.1.mlp.gate");
    qwen_hparams hp;
    hf_quant hq;
    assert_int_equal(parse_json(j, &hp, &hq), LL_OK);
    assert_int_equal(hq.present, 1);
    assert_int_equal(hq.bits, 4);
    assert_int_equal(hq.group_size, 64);
    const hf_quant_entry *e = hf_quant_find(&hq, "language_model.model.layers.0.mlp.gate");
    assert_non_null(e);
    assert_int_equal(e->bits, 8);
    assert_int_equal(e->quantized, 1);
    e = hf_quant_find(&hq, "language_model.model.layers.1.mlp.gate");
    assert_non_null(e);
    assert_int_equal(e->quantized, 0);
    assert_null(hf_quant_find(&hq, "language_model.model.layers.2.mlp.gate"));
    hf_quant_free(&hq);
    cJSON_AddStringToObject(q, "mode", "mxfp4");
    assert_int_equal(parse_json(j, &hp, &hq), LL_ERR_UNSUPPORTED);
    tu_assert_err_has("config.json", "quantization.mode \"mxfp4\"");
    cJSON_DeleteItemFromObject(q, "mode");
    cJSON_DeleteItemFromObject(q, "bits");
    assert_int_equal(parse_json(j, &hp, &hq), LL_ERR_FORMAT);
    tu_assert_err_has("config.json", "quantization.bits is missing");
    cJSON_Delete(j);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_nested),     cmocka_unit_test(test_flat_layout),     cmocka_unit_test(test_errors),
        cmocka_unit_test(test_validate_direct), cmocka_unit_test(test_mlx_quantization),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
