/* test_gguf.c — GGUF writer → reader round trip (every metadata type, arrays, alignment,
 * tensor shapes in PyTorch order) and malformed files: bad magic, version, alignment, unknown
 * tensor type, truncated directory, counts and lengths past the end. */
#include "format/gguf.h"
#include "st_testutil.h"

static uint8_t *read_all(const char *path, size_t *len) {
    char *buf;
    assert_int_equal(ll_read_file(path, &buf, len), LL_OK);
    uint8_t *out = malloc(*len + 1);
    memcpy(out, buf, *len);
    ll_free(buf);
    return out;
}

/* A file with one KV and one tensor; returns its bytes. */
static uint8_t *small_gguf(const char *dir, size_t *len, uint32_t alignment) {
    gguf_writer *w = gguf_writer_new();
    assert_non_null(w);
    static float data[2][64];
    for (int i = 0; i < 128; i++) data[i / 64][i % 64] = (float)i;
    if (alignment) assert_int_equal(gguf_writer_set_u32(w, "general.alignment", alignment), LL_OK);
    assert_int_equal(gguf_writer_set_str(w, "general.architecture", "test"), LL_OK);
    int64_t shape[2] = {2, 64};
    assert_int_equal(gguf_writer_add_tensor(w, "t", LL_TYPE_F32, 2, shape, data), LL_OK);
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/small.gguf", dir);
    assert_int_equal(gguf_writer_write(w, p), LL_OK);
    gguf_writer_free(w);
    return read_all(p, len);
}

static void test_round_trip(void **state) {
    (void)state;
    const char *dir = tu_tmpdir();
    gguf_writer *w = gguf_writer_new();
    assert_non_null(w);
    const char *toks[] = {"hello", "", "wörld", "<|im_end|>"};
    int32_t ids[] = {-5, 0, 7, 248044};
    float sc[] = {0.5f, -1.25f, 3.0f};
    static float mat[3][64];
    static uint16_t bmat[2][32];
    static ll_block_q8_0 q8[2][2];
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 64; k++) mat[r][k] = (float)(r * 100 + k);
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 32; k++) bmat[r][k] = ll_f32_to_bf16((float)(r - k));
    memset(q8, 7, sizeof(q8));
    assert_int_equal(gguf_writer_set_str(w, "general.architecture", "qwen35moe"), LL_OK);
    assert_int_equal(gguf_writer_set_u32(w, "general.alignment", 64), LL_OK);
    assert_int_equal(gguf_writer_set_u32(w, "a.u32", 4000000000u), LL_OK);
    assert_int_equal(gguf_writer_set_i32(w, "a.i32", -42), LL_OK);
    assert_int_equal(gguf_writer_set_u64(w, "a.u64", 1ull << 40), LL_OK);
    assert_int_equal(gguf_writer_set_f32(w, "a.f32", 1e-6f), LL_OK);
    assert_int_equal(gguf_writer_set_bool(w, "a.bool", 1), LL_OK);
    assert_int_equal(gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 4), LL_OK);
    assert_int_equal(gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", ids, 4), LL_OK);
    assert_int_equal(gguf_writer_set_arr_f32(w, "tokenizer.ggml.scores", sc, 3), LL_OK);
    assert_int_equal(gguf_writer_set_u32(w, "a.u32", 1), LL_ERR_INVALID); /* duplicate key */
    assert_int_equal(gguf_writer_set_u32(w, "general.alignment2", 3), LL_OK);
    int64_t s1[2] = {3, 64}, s2[2] = {2, 32}, s3[3] = {1, 2, 64}, sbad[2] = {2, 33};
    assert_int_equal(gguf_writer_add_tensor(w, "mat", LL_TYPE_F32, 2, s1, mat), LL_OK);
    assert_int_equal(gguf_writer_add_tensor(w, "bmat", LL_TYPE_BF16, 2, s2, bmat), LL_OK);
    assert_int_equal(gguf_writer_add_tensor(w, "q8", LL_TYPE_Q8_0, 3, s3, q8), LL_OK);
    assert_int_equal(gguf_writer_add_tensor(w, "q8bad", LL_TYPE_Q8_0, 2, sbad, q8), LL_ERR_INVALID);
    assert_int_equal(gguf_writer_add_tensor(w, "mat", LL_TYPE_F32, 2, s1, mat), LL_ERR_INVALID);
    assert_int_equal(gguf_writer_add_tensor(w, "u", LL_TYPE_MLX4, 2, s1, mat), LL_ERR_INVALID);
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/rt.gguf", dir);
    assert_int_equal(gguf_writer_write(w, p), LL_OK);
    gguf_writer_free(w);

    gguf_file *g;
    assert_int_equal(gguf_open(&g, p), LL_OK);
    assert_int_equal(g->version, 3);
    assert_int_equal(g->alignment, 64);
    assert_int_equal(g->n_kv, 11);
    const char *s;
    assert_int_equal(gguf_get_str(g, "general.architecture", &s), LL_OK);
    assert_string_equal(s, "qwen35moe");
    uint32_t u;
    assert_int_equal(gguf_get_u32(g, "a.u32", &u), LL_OK);
    assert_int_equal(u, 4000000000u);
    int64_t i64;
    assert_int_equal(gguf_get_i64(g, "a.i32", &i64), LL_OK);
    assert_int_equal(i64, -42);
    assert_int_equal(gguf_get_u32(g, "a.i32", &u), LL_ERR_FORMAT); /* negative → u32 */
    tu_assert_err_has("rt.gguf", "a.i32", "out of range");
    assert_int_equal(gguf_get_i64(g, "a.u64", &i64), LL_OK);
    assert_int_equal(i64, 1ll << 40);
    float f;
    assert_int_equal(gguf_get_f32(g, "a.f32", &f), LL_OK);
    assert_true(f == 1e-6f);
    int b;
    assert_int_equal(gguf_get_bool(g, "a.bool", &b), LL_OK);
    assert_int_equal(b, 1);
    assert_int_equal(gguf_get_str(g, "a.bool", &s), LL_ERR_FORMAT);
    tu_assert_err_has("a.bool", "bool", "string expected");
    assert_int_equal(gguf_get_u32(g, "nope", &u), LL_ERR_FORMAT);
    tu_assert_err_has("rt.gguf", "'nope'", "missing");
    const char *const *ts;
    uint64_t n;
    assert_int_equal(gguf_get_arr_str(g, "tokenizer.ggml.tokens", &ts, &n), LL_OK);
    assert_int_equal(n, 4);
    assert_string_equal(ts[0], "hello");
    assert_string_equal(ts[1], "");
    assert_string_equal(ts[2], "wörld");
    assert_string_equal(ts[3], "<|im_end|>");
    const int32_t *iv;
    assert_int_equal(gguf_get_arr_i32(g, "tokenizer.ggml.token_type", &iv, &n), LL_OK);
    assert_int_equal(n, 4);
    assert_int_equal(iv[0], -5);
    assert_int_equal(iv[3], 248044);
    const float *fv;
    assert_int_equal(gguf_get_arr_f32(g, "tokenizer.ggml.scores", &fv, &n), LL_OK);
    assert_int_equal(n, 3);
    assert_true(fv[1] == -1.25f);
    assert_int_equal(gguf_get_arr_i32(g, "tokenizer.ggml.scores", &iv, &n), LL_ERR_FORMAT);
    tu_assert_err_has("scores", "array of f32");
    assert_int_equal(g->n_tensors, 3);
    const ll_tensor *t = gguf_find_tensor(g, "mat");
    assert_non_null(t);
    assert_int_equal(t->type, LL_TYPE_F32);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->shape[0], 3);
    assert_int_equal(t->shape[1], 64);
    assert_memory_equal(t->data, mat, sizeof(mat));
    t = gguf_find_tensor(g, "bmat");
    assert_int_equal(t->type, LL_TYPE_BF16);
    assert_memory_equal(t->data, bmat, sizeof(bmat));
    assert_int_equal(((const uint8_t *)t->data - g->data) % 64, 0);
    t = gguf_find_tensor(g, "q8");
    assert_int_equal(t->type, LL_TYPE_Q8_0);
    assert_int_equal(t->n_dims, 3);
    assert_int_equal(t->shape[0], 1);
    assert_int_equal(t->shape[1], 2);
    assert_int_equal(t->shape[2], 64);
    assert_int_equal(t->nbytes, sizeof(q8));
    assert_memory_equal(t->data, q8, sizeof(q8));
    assert_null(gguf_find_tensor(g, "nope"));
    gguf_close(g);
    tu_rmdir(dir);
}

/* Parses a patched image; expects `want` and message fragments. */
static void expect_bad(const uint8_t *img, size_t len, ll_status want, const char *f1, const char *f2) {
    gguf_file *g = (gguf_file *)1;
    ll_status st = gguf_parse(&g, img, len, "bad.gguf");
    if (st != want) fail_msg("status %s (want %s): %s", ll_status_name(st), ll_status_name(want), ll_errmsg());
    assert_null(g);
    tu_assert_err_has("bad.gguf", f1, f2);
}

static void test_bad_files(void **state) {
    (void)state;
    const char *dir = tu_tmpdir();
    size_t len;
    uint8_t *img = small_gguf(dir, &len, 0);
    gguf_file *g;
    assert_int_equal(gguf_parse(&g, img, len, "ok.gguf"), LL_OK);
    gguf_close(g);
    uint8_t *b = malloc(len);
    /* bad magic */
    memcpy(b, img, len);
    b[0] = 'X';
    expect_bad(b, len, LL_ERR_FORMAT, "bad magic", "");
    /* bad version */
    memcpy(b, img, len);
    b[4] = 7;
    expect_bad(b, len, LL_ERR_UNSUPPORTED, "version 7", "");
    /* version 2 is accepted */
    memcpy(b, img, len);
    b[4] = 2;
    assert_int_equal(gguf_parse(&g, b, len, "v2.gguf"), LL_OK);
    gguf_close(g);
    /* absurd counts are rejected before allocating */
    memcpy(b, img, len);
    uint64_t huge = 1ull << 60;
    memcpy(b + 16, &huge, 8);
    expect_bad(b, len, LL_ERR_FORMAT, "metadata count", "cannot fit");
    memcpy(b, img, len);
    memcpy(b + 8, &huge, 8);
    expect_bad(b, len, LL_ERR_FORMAT, "tensor count", "cannot fit");
    /* key string length past the end (first key's length at byte 24) */
    memcpy(b, img, len);
    memcpy(b + 24, &huge, 8);
    expect_bad(b, len, LL_ERR_FORMAT, "metadata key 0", "past the end");
    /* unknown value type: key "general.architecture" (20 bytes) → type at 24 + 8 + 20 */
    memcpy(b, img, len);
    b[52] = 99;
    expect_bad(b, len, LL_ERR_FORMAT, "general.architecture", "unknown value type 99");
    /* tensor info: after KV (key 8+20, type 4, str 8+4 "test") at 24+28+4+12 = 68:
     * name len 8 + "t" 1, n_dims 4, ne 2×8, type 4, offset 8 */
    size_t ti = 68;
    memcpy(b, img, len);
    b[ti + 9] = 5; /* n_dims = 5 */
    expect_bad(b, len, LL_ERR_FORMAT, "tensor 't'", "5 dimensions");
    memcpy(b, img, len);
    b[ti + 9 + 4 + 16] = 99; /* type id 99 */
    expect_bad(b, len, LL_ERR_UNSUPPORTED, "tensor 't'", "ggml type id 99");
    memcpy(b, img, len);
    b[ti + 9 + 4 + 16] = 12; /* q4_K: row of 64 is not a multiple of 256 */
    expect_bad(b, len, LL_ERR_FORMAT, "tensor 't'", "not a multiple");
    memcpy(b, img, len);
    b[ti + 9 + 4 + 16 + 4] = 4; /* offset 4: misaligned */
    expect_bad(b, len, LL_ERR_FORMAT, "tensor 't'", "not a multiple of the alignment");
    memcpy(b, img, len);
    b[ti + 9 + 4 + 8] = 9; /* ne[1] = 9 rows: data past the end */
    expect_bad(b, len, LL_ERR_FORMAT, "tensor 't'", "past the end");
    /* truncated directory: cut inside the tensor info, and right after the header */
    expect_bad(img, ti + 12, LL_ERR_FORMAT, "tensor count 1", "cannot fit");
    expect_bad(img, len - 8, LL_ERR_FORMAT, "tensor 't'", "past the end");
    expect_bad(img, 30, LL_ERR_FORMAT, "", "");
    expect_bad(img, 3, LL_ERR_FORMAT, "bad magic", "");
    free(img);
    free(b);
    /* alignment: not a power of two, and not a u32 */
    img = small_gguf(dir, &len, 32);
    b = malloc(len);
    memcpy(b, img, len);
    /* first KV is general.alignment: key len 8 + 17 bytes, type 4, value u32 at 24 + 25 + 4 */
    b[53] = 24;
    expect_bad(b, len, LL_ERR_FORMAT, "general.alignment = 24", "power of two");
    memcpy(b, img, len);
    b[53] = 0;
    expect_bad(b, len, LL_ERR_FORMAT, "general.alignment = 0", "power of two");
    memcpy(b, img, len);
    b[49] = GGUF_TYPE_INT32;
    expect_bad(b, len, LL_ERR_FORMAT, "general.alignment", "u32 expected");
    free(img);
    free(b);
    tu_rmdir(dir);
}

static void test_nested_arrays(void **state) {
    (void)state;
    /* hand-built: 0 tensors, 1 KV "n" = array of 2 arrays of strings ["a"], ["bc", "d"] */
    uint8_t buf[256];
    size_t p = 0;
#define PUT(v, n) do { memcpy(buf + p, (v), (n)); p += (n); } while (0)
    uint32_t ver = 3, t_arr = GGUF_TYPE_ARRAY, t_str = GGUF_TYPE_STRING;
    uint64_t zero = 0, one = 1, two = 2, klen = 1;
    PUT("GGUF", 4);
    PUT(&ver, 4);
    PUT(&zero, 8);
    PUT(&one, 8);
    PUT(&klen, 8);
    PUT("n", 1);
    PUT(&t_arr, 4);
    PUT(&t_arr, 4);
    PUT(&two, 8);
    PUT(&t_str, 4);
    PUT(&one, 8);
    PUT(&one, 8);
    PUT("a", 1);
    PUT(&t_str, 4);
    PUT(&two, 8);
    PUT(&two, 8);
    PUT("bc", 2);
    PUT(&one, 8);
    PUT("d", 1);
#undef PUT
    gguf_file *g;
    assert_int_equal(gguf_parse(&g, buf, p, "nested.gguf"), LL_OK);
    const gguf_value *v;
    assert_int_equal(gguf_get_arr(g, "n", &v), LL_OK);
    assert_int_equal(v->arr_type, GGUF_TYPE_ARRAY);
    assert_int_equal(v->n, 2);
    assert_int_equal(v->sub[0].n, 1);
    assert_string_equal(v->sub[0].strs[0], "a");
    assert_int_equal(v->sub[1].n, 2);
    assert_string_equal(v->sub[1].strs[0], "bc");
    assert_string_equal(v->sub[1].strs[1], "d");
    gguf_close(g);
    /* every truncation of it fails cleanly */
    for (size_t n = 0; n < p; n++) {
        assert_int_not_equal(gguf_parse(&g, buf, n, "cut.gguf"), LL_OK);
        assert_null(g);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_nested_arrays),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
