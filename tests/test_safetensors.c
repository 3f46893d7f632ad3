/* test_safetensors.c — safetensors reader: fixtures (single file, 3 shards + index) and every
 * kind of malformed file, each error checked for the file name and the problem. */
#include "st_testutil.h"

static void test_tiny_file(void **state) {
    (void)state;
    st_file f;
    const char *p = tu_shared_path("fixtures/tiny/model.safetensors");
    assert_int_equal(st_open(&f, p), LL_OK);
    assert_int_equal(f.n_tensors, 78); /* as listed by the Python safetensors package */
    const ll_tensor *t = st_find(&f, "model.language_model.layers.0.mlp.experts.gate_up_proj");
    assert_non_null(t);
    assert_int_equal(t->type, LL_TYPE_F32);
    assert_int_equal(t->n_dims, 3);
    assert_int_equal(t->shape[0], 8);
    assert_int_equal(t->shape[1], 128);
    assert_int_equal(t->shape[2], 128);
    assert_int_equal(t->nbytes, 8 * 128 * 128 * 4);
    /* the 5-D vision conv is read (and later skipped by the loader) */
    t = st_find(&f, "model.visual.patch_embed.proj.weight");
    assert_non_null(t);
    assert_int_equal(t->n_dims, 5);
    assert_null(st_find(&f, "model.language_model.nope"));
    /* sorted, and every tensor inside the file */
    for (int64_t i = 0; i < f.n_tensors; i++) {
        if (i) assert_true(strcmp(f.tensors[i - 1].name, f.tensors[i].name) < 0);
        assert_true((const uint8_t *)f.tensors[i].data + f.tensors[i].nbytes <= f.data + f.size);
    }
    st_close(&f);
}

static void test_small_sharded(void **state) {
    (void)state;
    st_set s;
    assert_int_equal(st_set_open(&s, tu_shared_path("fixtures/small")), LL_OK);
    assert_int_equal(s.n_files, 3);
    int64_t total = 0;
    for (int i = 0; i < s.n_files; i++) total += s.files[i].n_tensors;
    assert_int_equal(s.n_tensors, total);
    const ll_tensor *t = st_set_find(&s, "model.language_model.embed_tokens.weight");
    assert_non_null(t);
    assert_int_equal(t->type, LL_TYPE_BF16);
    t = st_set_find(&s, "model.language_model.layers.0.linear_attn.A_log");
    assert_non_null(t);
    assert_int_equal(t->type, LL_TYPE_F32);
    /* a tensor from the last shard */
    t = st_set_find(&s, "lm_head.weight");
    assert_non_null(t);
    int64_t i = st_set_lookup(&s, "lm_head.weight");
    assert_true(strstr(st_set_file_of(&s, i), "model-0000") != NULL);
    st_set_close(&s);
}

/* A safetensors image from a literal header and `dlen` data bytes. */
static uint8_t *make_img(const char *header, size_t dlen, size_t *len) {
    size_t hl = strlen(header);
    uint8_t *img = calloc(1, 8 + hl + dlen + 1);
    uint64_t h = hl;
    memcpy(img, &h, 8);
    memcpy(img + 8, header, hl);
    *len = 8 + hl + dlen;
    return img;
}

/* Parses header + data and expects `want` with message fragments. */
static void expect_bad(const char *header, size_t dlen, ll_status want, const char *frag1, const char *frag2) {
    size_t len;
    uint8_t *img = make_img(header, dlen, &len);
    st_file f;
    ll_status st = st_parse(&f, img, len, "bad.safetensors");
    if (st != want) fail_msg("status %s (want %s) for header %s: %s", ll_status_name(st), ll_status_name(want), header, ll_errmsg());
    tu_assert_err_has("bad.safetensors", frag1, frag2);
    assert_int_equal(f.n_tensors, 0);
    st_close(&f);
    free(img);
}

static void test_bad_headers(void **state) {
    (void)state;
    /* truncated: fewer than 8 bytes */
    {
        uint8_t b[5] = {1, 2, 3, 4, 5};
        st_file f;
        assert_int_equal(st_parse(&f, b, sizeof(b), "bad.safetensors"), LL_ERR_FORMAT);
        tu_assert_err_has("bad.safetensors", "too short");
    }
    /* header length past the end */
    {
        uint8_t b[16] = {0};
        uint64_t h = 1000;
        memcpy(b, &h, 8);
        st_file f;
        assert_int_equal(st_parse(&f, b, sizeof(b), "bad.safetensors"), LL_ERR_FORMAT);
        tu_assert_err_has("bad.safetensors", "header length 1000", "past the end");
    }
    expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], ", 4, LL_ERR_FORMAT, "malformed JSON", "offset");
    expect_bad("[1, 2]", 0, LL_ERR_FORMAT, "not an object", "");
    expect_bad("{\"a\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4, LL_ERR_FORMAT, "'a'", "missing \"dtype\"");
    expect_bad("{\"a\": {\"dtype\": 5, \"shape\": [1], \"data_offsets\": [0, 4]}}", 4, LL_ERR_FORMAT, "'a'", "\"dtype\" is not a string");
    expect_bad("{\"a\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}}", 4, LL_ERR_FORMAT, "'a'", "missing \"shape\"");
    expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": 4, \"data_offsets\": [0, 4]}}", 4, LL_ERR_FORMAT, "'a'", "\"shape\" is not an array");
    expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}", 4, LL_ERR_FORMAT, "'a'", "shape[0]");
    expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 4]}}", 4, LL_ERR_FORMAT, "'a'", "shape[0]");
    expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4, LL_ERR_FORMAT, "'a'", "missing \"data_offsets\"");
    expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0]}}", 4, LL_ERR_FORMAT, "'a'", "data_offsets");
    expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [\"0\", 4]}}", 4, LL_ERR_FORMAT, "'a'", "data_offsets");
    expect_bad("{\"a\": {\"dtype\": \"F8_E4M3\", \"shape\": [4], \"data_offsets\": [0, 4]}}", 4, LL_ERR_UNSUPPORTED, "'a'", "dtype F8_E4M3");
    /* offsets out of range, end < begin, size mismatch, overlap, duplicates */
    expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 4, LL_ERR_FORMAT, "'a'", "out of range");
    expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 4]}}", 8, LL_ERR_FORMAT, "'a'", "end 4 < begin 8");
    expect_bad("{\"a\": {\"dtype\": \"BF16\", \"shape\": [3], \"data_offsets\": [0, 8]}}", 8, LL_ERR_FORMAT, "'a'", "needs 6");
    expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
               "\"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}",
               12, LL_ERR_FORMAT, "'a' and 'b' overlap", "");
    expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
               "\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}",
               8, LL_ERR_FORMAT, "'a' appears twice", "");
    expect_bad("{\"__metadata__\": 3}", 0, LL_ERR_FORMAT, "__metadata__", "");
    expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 4]}}", 4, LL_ERR_UNSUPPORTED, "'a'",
               "dimensions");
    expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], \"data_offsets\": [0, 4]}}", 4, LL_ERR_FORMAT, "'a'",
               "too large");
}

static void test_good_edge_cases(void **state) {
    (void)state;
    /* empty header, zero-size tensors sharing an offset, unordered data */
    size_t len;
    uint8_t *img = make_img("{\"z\": {\"dtype\": \"U8\", \"shape\": [0], \"data_offsets\": [4, 4]}, "
                            "\"b\": {\"dtype\": \"U32\", \"shape\": [1], \"data_offsets\": [4, 8]}, "
                            "\"a\": {\"dtype\": \"I32\", \"shape\": [1], \"data_offsets\": [0, 4]}}",
                            8, &len);
    st_file f;
    assert_int_equal(st_parse(&f, img, len, "ok.safetensors"), LL_OK);
    assert_int_equal(f.n_tensors, 3);
    assert_string_equal(f.tensors[0].name, "a");
    assert_int_equal(f.tensors[0].type, LL_TYPE_I32);
    assert_int_equal(st_find(&f, "b")->type, LL_TYPE_U32);
    assert_int_equal(st_find(&f, "z")->nbytes, 0);
    st_close(&f);
    free(img);
    img = make_img("{}", 0, &len);
    assert_int_equal(st_parse(&f, img, len, "empty.safetensors"), LL_OK);
    assert_int_equal(f.n_tensors, 0);
    st_close(&f);
    free(img);
}

static void test_truncated_file_on_disk(void **state) {
    (void)state;
    const char *dir = tu_tmpdir();
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/trunc.safetensors", dir);
    ll_mapfile m;
    assert_int_equal(ll_mapfile_open(&m, tu_shared_path("fixtures/tiny/model.safetensors")), LL_OK);
    tu_write_file(path, m.data, m.size - 100); /* cut inside the last tensor */
    ll_mapfile_close(&m);
    st_file f;
    assert_int_equal(st_open(&f, path), LL_ERR_FORMAT);
    tu_assert_err_has(path, "out of range");
    snprintf(path, sizeof(path), "%s/missing.safetensors", dir);
    assert_int_equal(st_open(&f, path), LL_ERR_IO);
    tu_assert_err_has(path);
    tu_rmdir(dir);
}

static void write_text(const char *dir, const char *name, const char *text) {
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    tu_write_file(p, text, strlen(text));
}

static void test_bad_index(void **state) {
    (void)state;
    const char *dir = tu_tmpdir();
    float v[2] = {1, 2};
    int64_t one[1] = {1};
    tu_st a = {0}, b = {0};
    tu_st_add(&a, "x", "F32", 1, one, &v[0], 4);
    tu_st_add(&b, "y", "F32", 1, one, &v[1], 4);
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/a.safetensors", dir);
    tu_st_write(&a, p);
    snprintf(p, sizeof(p), "%s/b.safetensors", dir);
    tu_st_write(&b, p);
    st_set s;
    /* a good index */
    write_text(dir, "model.safetensors.index.json", "{\"weight_map\": {\"x\": \"a.safetensors\", \"y\": \"b.safetensors\"}}");
    assert_int_equal(st_set_open(&s, dir), LL_OK);
    assert_int_equal(s.n_tensors, 2);
    assert_non_null(st_set_find(&s, "y"));
    st_set_close(&s);
    /* the index names a shard that does not hold the tensor */
    write_text(dir, "model.safetensors.index.json", "{\"weight_map\": {\"x\": \"b.safetensors\", \"y\": \"b.safetensors\"}}");
    assert_int_equal(st_set_open(&s, dir), LL_ERR_FORMAT);
    tu_assert_err_has("model.safetensors.index.json", "'x'", "b.safetensors", "does not hold it");
    /* a shard that is not a plain file name */
    write_text(dir, "model.safetensors.index.json", "{\"weight_map\": {\"x\": \"../a.safetensors\"}}");
    assert_int_equal(st_set_open(&s, dir), LL_ERR_FORMAT);
    tu_assert_err_has("index.json", "not a plain file name");
    /* a missing shard */
    write_text(dir, "model.safetensors.index.json", "{\"weight_map\": {\"x\": \"c.safetensors\"}}");
    assert_int_equal(st_set_open(&s, dir), LL_ERR_IO);
    tu_assert_err_has("c.safetensors");
    /* malformed index JSON */
    write_text(dir, "model.safetensors.index.json", "{\"weight_map\": ");
    assert_int_equal(st_set_open(&s, dir), LL_ERR_FORMAT);
    tu_assert_err_has("model.safetensors.index.json", "malformed");
    /* duplicated across shards */
    tu_st_add(&b, "x", "F32", 1, one, &v[0], 4);
    snprintf(p, sizeof(p), "%s/b.safetensors", dir);
    tu_st_write(&b, p);
    write_text(dir, "model.safetensors.index.json", "{\"weight_map\": {\"x\": \"a.safetensors\", \"y\": \"b.safetensors\"}}");
    assert_int_equal(st_set_open(&s, dir), LL_ERR_FORMAT);
    tu_assert_err_has("tensor 'x'", "duplicate across shards", "a.safetensors", "b.safetensors");
    tu_st_free(&a);
    tu_st_free(&b);
    tu_rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_file),         cmocka_unit_test(test_small_sharded), cmocka_unit_test(test_bad_headers),
        cmocka_unit_test(test_good_edge_cases),   cmocka_unit_test(test_truncated_file_on_disk),
        cmocka_unit_test(test_bad_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
