/* test_snapshot.c — snapshot store (longest-prefix lookup, namespace isolation, LRU order, byte
 * budget) and snapshot files (round trip, wrong version/model, truncation at every length and
 * corruption at every byte detected), plus CRC-32 against a bitwise reference. */
#include "testutil.h"

#include "runtime/snapshot.h"

static uint32_t crc_bitwise(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
    }
    return ~c;
}

static void test_crc32(void **state) {
    (void)state;
    assert_int_equal(ll_crc32(0, "123456789", 9), 0xCBF43926u);
    assert_int_equal(ll_crc32(0, "", 0), 0);
    uint8_t buf[1000];
    for (int i = 0; i < 1000; i++) buf[i] = (uint8_t)(i * 131 + 7);
    for (size_t n = 0; n <= 1000; n += 37) {
        assert_int_equal(ll_crc32(0, buf, n), crc_bitwise(buf, n));
        /* chaining at any split gives the same value */
        size_t h = n / 3;
        assert_int_equal(ll_crc32(ll_crc32(0, buf, h), buf + h, n - h), crc_bitwise(buf, n));
    }
}

static void put(ll_snap_store *st, const char *ns, const int32_t *t, size_t n, const char *blob) {
    ll_status s = ll_snap_store_put(st, ns, t, n, blob, strlen(blob) + 1);
    if (s != LL_OK) fail_msg("put: %s", ll_errmsg());
}

static void test_longest_prefix(void **state) {
    (void)state;
    ll_snap_store *st = ll_snap_store_new(1 << 20);
    const int32_t a[] = {1, 2, 3}, b[] = {1, 2, 3, 4, 5}, c[] = {1, 2, 9};
    put(st, "k", a, 3, "A");
    put(st, "k", b, 5, "B");
    put(st, "k", c, 3, "C");
    const int32_t p1[] = {1, 2, 3, 4, 5, 6};
    const ll_snap *s = ll_snap_store_lookup(st, "k", p1, 6);
    assert_non_null(s);
    assert_string_equal(s->blob, "B");
    assert_int_equal(s->n_tokens, 5);
    s = ll_snap_store_lookup(st, "k", p1, 5); /* equal length counts as a prefix */
    assert_string_equal(s->blob, "B");
    s = ll_snap_store_lookup(st, "k", p1, 4); /* B is longer than the prompt */
    assert_string_equal(s->blob, "A");
    const int32_t p2[] = {1, 2, 9, 9};
    assert_string_equal(ll_snap_store_lookup(st, "k", p2, 4)->blob, "C");
    const int32_t p3[] = {1, 2};
    assert_null(ll_snap_store_lookup(st, "k", p3, 2));
    const int32_t p4[] = {2, 2, 3, 4};
    assert_null(ll_snap_store_lookup(st, "k", p4, 4));
    /* an empty snapshot (the state before any token) matches every prompt */
    put(st, "k", NULL, 0, "E");
    assert_string_equal(ll_snap_store_lookup(st, "k", p4, 4)->blob, "E");
    assert_string_equal(ll_snap_store_lookup(st, "k", p1, 6)->blob, "B");
    /* re-putting the same key replaces the blob, not adds an entry */
    assert_int_equal(ll_snap_store_count(st), 4);
    put(st, "k", b, 5, "B2");
    assert_int_equal(ll_snap_store_count(st), 4);
    assert_string_equal(ll_snap_store_lookup(st, "k", p1, 6)->blob, "B2");
    assert_int_equal(ll_snap_store_remove(st, "k", b, 5), 1);
    assert_int_equal(ll_snap_store_remove(st, "k", b, 5), 0);
    assert_string_equal(ll_snap_store_lookup(st, "k", p1, 6)->blob, "A");
    ll_snap_store_free(st);
}

static void test_namespace_isolation(void **state) {
    (void)state;
    ll_snap_store *st = ll_snap_store_new(1 << 20);
    const int32_t t[] = {10, 11, 12, 13};
    put(st, "key-alice", t, 2, "alice2");
    put(st, "key-bob", t, 4, "bob4");
    put(st, "key-bob", t, 2, "bob2");
    const ll_snap *s = ll_snap_store_lookup(st, "key-alice", t, 4);
    assert_non_null(s);
    assert_string_equal(s->blob, "alice2"); /* bob's longer snapshot is invisible to alice */
    assert_string_equal(s->ns, "key-alice");
    assert_string_equal(ll_snap_store_lookup(st, "key-bob", t, 4)->blob, "bob4");
    assert_null(ll_snap_store_lookup(st, "key-carol", t, 4));
    assert_null(ll_snap_store_lookup(st, "key-bo", t, 4)); /* no prefix matching on names */
    assert_null(ll_snap_store_lookup(st, "", t, 4));
    assert_int_equal(ll_snap_store_remove(st, "key-alice", t, 4), 0);
    ll_snap_store_free(st);
}

static void test_lru_and_budget(void **state) {
    (void)state;
    /* each entry: 100-byte blob + 2 tokens * 4 + "ns" + 1 = 111 bytes */
    ll_snap_store *st = ll_snap_store_new(340);
    char blob[100];
    const int32_t ta[] = {1, 1}, tb[] = {2, 2}, tc[] = {3, 3}, td[] = {4, 4};
    memset(blob, 'a', sizeof(blob));
    assert_int_equal(ll_snap_store_put(st, "ns", ta, 2, blob, 100), LL_OK);
    memset(blob, 'b', sizeof(blob));
    assert_int_equal(ll_snap_store_put(st, "ns", tb, 2, blob, 100), LL_OK);
    memset(blob, 'c', sizeof(blob));
    assert_int_equal(ll_snap_store_put(st, "ns", tc, 2, blob, 100), LL_OK);
    assert_int_equal(ll_snap_store_bytes(st), 333);
    assert_int_equal(ll_snap_store_count(st), 3);
    /* most recent first: c b a */
    assert_int_equal(ll_snap_store_at(st, 0)->tokens[0], 3);
    assert_int_equal(ll_snap_store_at(st, 1)->tokens[0], 2);
    assert_int_equal(ll_snap_store_at(st, 2)->tokens[0], 1);
    assert_null(ll_snap_store_at(st, 3));
    /* a hit refreshes a: a c b */
    assert_non_null(ll_snap_store_lookup(st, "ns", ta, 2));
    assert_int_equal(ll_snap_store_at(st, 0)->tokens[0], 1);
    assert_int_equal(ll_snap_store_at(st, 2)->tokens[0], 2);
    /* d needs room: b (least recent) goes */
    memset(blob, 'd', sizeof(blob));
    assert_int_equal(ll_snap_store_put(st, "ns", td, 2, blob, 100), LL_OK);
    assert_int_equal(ll_snap_store_count(st), 3);
    assert_null(ll_snap_store_lookup(st, "ns", tb, 2));
    assert_non_null(ll_snap_store_lookup(st, "ns", tc, 2));
    assert_non_null(ll_snap_store_lookup(st, "ns", td, 2));
    assert_true(ll_snap_store_bytes(st) <= ll_snap_store_budget(st));
    /* order is now d c a; a 218-byte blob (229 accounted) must evict a and c, keeping d: 340 */
    char big[400];
    memset(big, 'x', sizeof(big));
    const int32_t tx[] = {9, 9};
    assert_int_equal(ll_snap_store_put(st, "ns", tx, 2, big, 218), LL_OK);
    assert_int_equal(ll_snap_store_count(st), 2);
    assert_int_equal(ll_snap_store_at(st, 0)->tokens[0], 9);
    assert_int_equal(ll_snap_store_at(st, 1)->tokens[0], 4);
    assert_int_equal(ll_snap_store_bytes(st), 340);
    /* an entry larger than the whole budget is refused and changes nothing */
    assert_int_equal(ll_snap_store_put(st, "ns", ta, 2, big, 400), LL_ERR_OOM);
    assert_non_null(strstr(ll_errmsg(), "budget"));
    assert_int_equal(ll_snap_store_count(st), 2);
    /* out of memory while copying leaves the store consistent */
    ll_alloc_fail_after(1);
    assert_int_equal(ll_snap_store_put(st, "ns", tc, 2, blob, 10), LL_ERR_OOM);
    ll_alloc_fail_after(-1);
    assert_int_equal(ll_snap_store_count(st), 2);
    assert_int_equal(ll_snap_store_bytes(st), 340);
    ll_snap_store_clear(st);
    assert_int_equal(ll_snap_store_count(st), 0);
    assert_int_equal(ll_snap_store_bytes(st), 0);
    ll_snap_store_free(st);
}

/* ---------------------------------------------------------------- files */

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)sz + 1);
    assert_int_equal(fread(b, 1, (size_t)sz, f), (size_t)sz);
    fclose(f);
    *n = (size_t)sz;
    return b;
}

static void test_file_round_trip(void **state) {
    (void)state;
    const char *dir = tu_tmpdir();
    char path[128], tmp[140];
    snprintf(path, sizeof(path), "%s/s.snap", dir);
    int32_t toks[1000];
    for (int i = 0; i < 1000; i++) toks[i] = i * 248 + 3;
    size_t bn = 100003;
    uint8_t *blob = malloc(bn);
    for (size_t i = 0; i < bn; i++) blob[i] = (uint8_t)(i * 2654435761u >> 13);
    assert_int_equal(ll_snap_save(path, "qwen3_5_moe:abc123", toks, 1000, blob, bn), LL_OK);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    assert_int_not_equal(access(tmp, F_OK), 0); /* renamed into place */
    ll_snap_file f;
    assert_int_equal(ll_snap_load(path, "qwen3_5_moe:abc123", &f), LL_OK);
    assert_int_equal(f.snap.n_tokens, 1000);
    assert_memory_equal(f.snap.tokens, toks, sizeof(toks));
    assert_int_equal(f.snap.blob_size, bn);
    assert_memory_equal(f.snap.blob, blob, bn);
    ll_snap_file_free(&f);

    /* into a store, under a namespace chosen by the loader */
    ll_snap_store *st = ll_snap_store_new(1 << 22);
    assert_int_equal(ll_snap_store_load(st, "key1", path, "qwen3_5_moe:abc123"), LL_OK);
    const ll_snap *s = ll_snap_store_lookup(st, "key1", toks, 1000);
    assert_non_null(s);
    assert_memory_equal(s->blob, blob, bn);
    assert_null(ll_snap_store_lookup(st, "key2", toks, 1000));
    /* an entry saved from the store loads back identically */
    char p2[140];
    snprintf(p2, sizeof(p2), "%s/t.snap", dir);
    assert_int_equal(ll_snap_save(p2, "m", s->tokens, s->n_tokens, s->blob, s->blob_size), LL_OK);
    assert_int_equal(ll_snap_load(p2, "m", &f), LL_OK);
    assert_memory_equal(f.snap.blob, blob, bn);
    ll_snap_file_free(&f);
    ll_snap_store_free(st);

    /* empty snapshot */
    assert_int_equal(ll_snap_save(p2, "m", NULL, 0, NULL, 0), LL_OK);
    assert_int_equal(ll_snap_load(p2, "m", &f), LL_OK);
    assert_int_equal(f.snap.n_tokens, 0);
    assert_int_equal(f.snap.blob_size, 0);
    ll_snap_file_free(&f);
    free(blob);
}

static void test_file_rejects(void **state) {
    (void)state;
    const char *dir = tu_tmpdir();
    char path[128], bad[140];
    snprintf(path, sizeof(path), "%s/s.snap", dir);
    snprintf(bad, sizeof(bad), "%s/bad.snap", dir);
    const int32_t toks[5] = {1, 22, 333, 4444, 55555};
    const char blob[] = "state bytes \x01\x02\x03";
    assert_int_equal(ll_snap_save(path, "model-A", toks, 5, blob, sizeof(blob)), LL_OK);
    size_t n;
    uint8_t *good = slurp(path, &n);
    assert_int_equal(n, 32 + 7 + 20 + sizeof(blob) + 4);
    ll_snap_file f;

    assert_int_equal(ll_snap_load(path, "model-B", &f), LL_ERR_INVALID);
    assert_non_null(strstr(ll_errmsg(), "model-A"));
    assert_null(f.blob);

    char missing[160];
    snprintf(missing, sizeof(missing), "%s/none.snap", dir);
    assert_int_equal(ll_snap_load(missing, "model-A", &f), LL_ERR_IO);

    uint8_t *b = malloc(n + 1);
    memcpy(b, good, n);
    b[8] = 2; /* version 2 */
    tu_write_file(bad, b, n);
    assert_int_equal(ll_snap_load(bad, "model-A", &f), LL_ERR_UNSUPPORTED);
    assert_non_null(strstr(ll_errmsg(), "version 2"));

    tu_write_file(bad, "hello, world, this is text and not a snapshot at all....", 56);
    assert_int_equal(ll_snap_load(bad, "model-A", &f), LL_ERR_FORMAT);
    assert_non_null(strstr(ll_errmsg(), "not a lilac snapshot"));

    /* truncated at every length */
    for (size_t len = 0; len < n; len++) {
        tu_write_file(bad, good, len);
        ll_status st = ll_snap_load(bad, "model-A", &f);
        if (st == LL_OK) fail_msg("truncation to %zu bytes accepted", len);
        assert_null(f.blob);
    }
    /* one trailing byte */
    memcpy(b, good, n);
    b[n] = 0;
    tu_write_file(bad, b, n + 1);
    assert_int_equal(ll_snap_load(bad, "model-A", &f), LL_ERR_FORMAT);
    assert_non_null(strstr(ll_errmsg(), "trailing"));
    /* every single-byte corruption, each bit pattern class: flip one bit and all bits */
    const uint8_t flips[] = {0x01, 0x80, 0xFF};
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < LL_ARRAY_LEN(flips); k++) {
            memcpy(b, good, n);
            b[i] ^= flips[k];
            tu_write_file(bad, b, n);
            ll_status st = ll_snap_load(bad, "model-A", &f);
            if (st == LL_OK) fail_msg("corruption of byte %zu (xor %02x) accepted", i, flips[k]);
            assert_true(strlen(ll_errmsg()) > 0);
            assert_null(f.blob);
        }
    }
    /* and the original is still fine */
    tu_write_file(bad, good, n);
    assert_int_equal(ll_snap_load(bad, "model-A", &f), LL_OK);
    ll_snap_file_free(&f);
    free(b);
    free(good);

    /* unwritable destination */
    char nodir[200];
    snprintf(nodir, sizeof(nodir), "%s/no/such/dir.snap", dir);
    assert_int_equal(ll_snap_save(nodir, "m", toks, 5, blob, 4), LL_ERR_IO);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32),
        cmocka_unit_test(test_longest_prefix),
        cmocka_unit_test(test_namespace_isolation),
        cmocka_unit_test(test_lru_and_budget),
        cmocka_unit_test(test_file_round_trip),
        cmocka_unit_test(test_file_rejects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
