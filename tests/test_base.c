/* test_base.c — base layer: errors, accounted allocation, fp16/bf16, thread pool. */
#include "testutil.h"

#include <math.h>

#include "base/base.h"
#include "base/threadpool.h"

static void test_error_message(void **state) {
    (void)state;
    ll_status st = ll_err(LL_ERR_FORMAT, "%s: bad %d", "file.bin", 7);
    assert_int_equal(st, LL_ERR_FORMAT);
    assert_string_equal(ll_errmsg(), "file.bin: bad 7");
}

static void test_alloc_accounting(void **state) {
    (void)state;
    size_t before = ll_alloc_used();
    void *p = ll_malloc(1000);
    assert_non_null(p);
    assert_int_equal(ll_alloc_used(), before + 1000);
    p = ll_realloc(p, 3000);
    assert_int_equal(ll_alloc_used(), before + 3000);
    ll_free(p);
    assert_int_equal(ll_alloc_used(), before);
    ll_alloc_fail_after(1);
    void *a = ll_malloc(8), *b = ll_malloc(8);
    ll_alloc_fail_after(-1);
    assert_non_null(a);
    assert_null(b);
    ll_free(a);
}

static void test_half_conversions(void **state) {
    (void)state;
    const float vals[] = {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.333251953125f};
    for (size_t i = 0; i < LL_ARRAY_LEN(vals); i++) {
        assert_float_equal(ll_f16_to_f32(ll_f32_to_f16(vals[i])), vals[i], 0.0);
        assert_float_equal(ll_bf16_to_f32(ll_f32_to_bf16(vals[i])), vals[i], fabsf(vals[i]) * 0.004f);
    }
    assert_int_equal(ll_f32_to_f16(1e6f), 0x7c00);           /* overflow -> inf */
    assert_int_equal(ll_f32_to_bf16(1.00390625f), 0x3f80);    /* tie rounds to even */
    assert_int_equal(ll_f32_to_bf16(1.01171875f), 0x3f82);
    assert_true(isnan(ll_bf16_to_f32(ll_f32_to_bf16(NAN))));
}

typedef struct { int64_t n; long long *sums; } sum_ctx;
static void sum_worker(void *ctx, int ith, int nth) {
    sum_ctx *c = ctx;
    int64_t lo, hi;
    ll_split_range(c->n, ith, nth, &lo, &hi);
    long long s = 0;
    for (int64_t i = lo; i < hi; i++) s += i;
    c->sums[ith] = s;
}

static void test_threadpool(void **state) {
    (void)state;
    ll_pool *p = ll_pool_new(4);
    assert_non_null(p);
    long long sums[4];
    for (int rep = 0; rep < 200; rep++) {
        sum_ctx c = {100000 + rep, sums};
        ll_pool_run(p, sum_worker, &c);
        long long tot = sums[0] + sums[1] + sums[2] + sums[3];
        assert_true(tot == (long long)c.n * (c.n - 1) / 2);
    }
    ll_pool_free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_message),
        cmocka_unit_test(test_alloc_accounting),
        cmocka_unit_test(test_half_conversions),
        cmocka_unit_test(test_threadpool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
