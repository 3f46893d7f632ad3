/*
 * test_convert_io.c — the converter's O_DIRECT output stream and source reads
 * (format/convert_io.h).
 *
 *  - a stream of random bytes written in random pieces (1 B to 3 MiB; the buffers either placed
 *    like their stream position within a 4 KiB block, as the converter places its chunks, or
 *    anywhere) comes back byte for byte, with and without O_DIRECT; with O_DIRECT every whole
 *    block goes out directly and only the partial blocks at the pieces' ends are copied;
 *  - a full disk (RLIMIT_FSIZE) is a "write failed" error;
 *  - direct source reads return the file's bytes at unaligned offsets and report a file that
 *    ends early.
 */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "base/mapfile.h"
#include "format/convert_io.h"

static const char *g_tmp;

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return g_rng;
}

static int open_tmp(char *p, size_t cap, const char *name) {
    snprintf(p, cap, "%s/%s", g_tmp, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    return fd;
}

static void stream_round_trip(int direct) {
    const size_t N = ((size_t)9 << 20) + 123, A = CONV_IO_ALIGN;
    uint8_t *want = malloc(N), *scratch = malloc(((size_t)3 << 20) + 2 * A);
    assert_non_null(want);
    assert_non_null(scratch);
    uint8_t *sbase = (uint8_t *)(((uintptr_t)scratch + A - 1) / A * A);
    for (size_t i = 0; i < N; i++) want[i] = (uint8_t)(rnd() >> 24);
    char p[600];
    int fd = open_tmp(p, sizeof(p), direct ? "direct.bin" : "plain.bin");
    conv_out *o;
    assert_int_equal(conv_out_open(&o, fd, direct, p), LL_OK);
    int was_direct = conv_out_is_direct(o);
    if (direct && !was_direct) print_message("O_DIRECT not available in %s: plain writes only\n", g_tmp);
    FILE *f = conv_out_stream(o);
    size_t pos = 0, n_pieces = 0, bound = 0; /* bound: most bytes that may be staged */
    while (pos < N) {
        uint64_t r = rnd();
        size_t n = r % 3 == 0 ? 1 + rnd() % 64 : r % 3 == 1 ? 1 + rnd() % 20000 : 1 + rnd() % ((size_t)1 << 20);
        n = LL_MIN(n, N - pos);
        int placed = (rnd() & 1) != 0; /* like the converter's chunks */
        size_t at = placed ? pos % A : rnd() % A;
        memcpy(sbase + at, want + pos, n);
        assert_int_equal(fwrite(sbase + at, 1, n, f), n);
        bound += placed ? LL_MIN(n, 2 * A) : n;
        if (rnd() % 8 == 0) assert_int_equal(fwrite(sbase, 1, 0, f), 0);
        pos += n;
        n_pieces++;
        assert_int_equal(conv_out_tell(o), pos);
    }
    int still_direct = conv_out_is_direct(o); /* no fallback to plain writes on the way */
    assert_int_equal(conv_out_finish(o), LL_OK);
    if (was_direct) {
        assert_true(still_direct);
        assert_int_equal(conv_out_direct_bytes(o), N / A * A); /* every whole block, directly */
        assert_true(conv_out_staged_bytes(o) <= bound);
        print_message("%zu pieces: %llu of %zu bytes staged (at most %zu allowed)\n", n_pieces,
                      (unsigned long long)conv_out_staged_bytes(o), N, bound);
    } else {
        assert_int_equal(conv_out_direct_bytes(o), 0);
    }
    conv_out_close(o);
    char *got = NULL;
    size_t len = 0;
    assert_int_equal(ll_read_file(p, &got, &len), LL_OK);
    assert_int_equal(len, N);
    if (memcmp(got, want, N) != 0) fail_msg("%s: the file differs from the bytes written", p);
    ll_free(got);
    remove(p);
    free(want);
    free(scratch);
}

static void test_out_plain(void **st) {
    (void)st;
    for (int rep = 0; rep < 3; rep++) stream_round_trip(0);
}

static void test_out_direct(void **st) {
    (void)st;
    for (int rep = 0; rep < 6; rep++) stream_round_trip(1);
}

static void test_out_full_disk(void **st) {
    (void)st;
    for (int direct = 0; direct < 2; direct++) {
        struct rlimit old, lim;
        assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
        lim = old;
        lim.rlim_cur = (1 << 20) + 100; /* not a block boundary */
        void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
        char p[600];
        int fd = open_tmp(p, sizeof(p), "full.bin");
        conv_out *o;
        assert_int_equal(conv_out_open(&o, fd, direct, p), LL_OK);
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
        static uint8_t buf[(3 << 20) + CONV_IO_ALIGN];
        uint8_t *b = (uint8_t *)(((uintptr_t)buf + CONV_IO_ALIGN - 1) / CONV_IO_ALIGN * CONV_IO_ALIGN);
        int failed = 0;
        for (int k = 0; k < 3 && !failed; k++) failed = fwrite(b, 1, (size_t)1 << 20, conv_out_stream(o)) != (size_t)1 << 20;
        ll_status s = failed ? LL_ERR_IO : conv_out_finish(o);
        if (failed) ll_err(LL_ERR_IO, "%s: write failed: %s", p, strerror(errno));
        setrlimit(RLIMIT_FSIZE, &old);
        signal(SIGXFSZ, prev);
        print_message("full disk (%s): %s\n", direct ? "direct" : "plain", ll_errmsg());
        assert_int_equal(s, LL_ERR_IO);
        assert_non_null(strstr(ll_errmsg(), "write failed"));
        assert_true(failed ? errno == EFBIG : 1);
        conv_out_close(o);
        remove(p);
    }
}

static void test_src_read(void **st) {
    (void)st;
    const size_t N = ((size_t)5 << 20) + 777, A = CONV_IO_ALIGN;
    uint8_t *want = malloc(N);
    assert_non_null(want);
    for (size_t i = 0; i < N; i++) want[i] = (uint8_t)(rnd() >> 24);
    char p[600];
    snprintf(p, sizeof(p), "%s/src.bin", g_tmp);
    tu_write_file(p, want, N);
    int fd = open(p, O_RDONLY);
    assert_true(fd >= 0);
    const uint8_t *map = mmap(NULL, N, PROT_READ, MAP_SHARED, fd, 0);
    assert_true(map != MAP_FAILED);
    close(fd);
    const uint8_t *base[1] = {map};
    size_t size[1] = {N};
    const char *path[1] = {p};
    conv_src *s = conv_src_open(1, base, size, path);
    if (!s) {
        print_message("O_DIRECT reads not available in %s\n", g_tmp);
        munmap((void *)map, N);
        remove(p);
        free(want);
        skip();
    }
    uint64_t off;
    assert_int_equal(conv_src_locate(s, map + 1000, 5000, &off), 0);
    assert_int_equal(off, 1000);
    assert_int_equal(conv_src_locate(s, map + N - 10, 11, &off), -1); /* past the end */
    assert_int_equal(conv_src_locate(s, want, 10, &off), -1);          /* not in the file */
    void *raw;
    uint8_t *dst = conv_io_alloc(N + 2 * A, &raw);
    assert_non_null(dst);
    char msg[512];
    for (int k = 0; k < 50; k++) {
        uint64_t lo = rnd() % N, hi = lo + 1 + rnd() % (N - lo);
        uint64_t a = lo / A * A, b = (hi + A - 1) / A * A;
        memset(dst, 0xA5, (size_t)(b - a));
        int rc = conv_src_read(s, 0, a, b, hi - a, dst, msg, sizeof(msg));
        if (rc == 1) {
            print_message("O_DIRECT reads refused here\n");
            break;
        }
        assert_int_equal(rc, 0);
        if (memcmp(dst + (lo - a), want + lo, (size_t)(hi - lo)) != 0) fail_msg("bytes [%llu, %llu) differ", (unsigned long long)lo, (unsigned long long)hi);
    }
    /* the file shrinks under us: a clear error, not garbage */
    assert_int_equal(truncate(p, (off_t)(N / 2)), 0);
    int rc = conv_src_read(s, 0, 0, (N + A - 1) / A * A, N, dst, msg, sizeof(msg));
    print_message("shrunk file: %s\n", rc < 0 ? msg : "(no error)");
    if (rc != 1) {
        assert_int_equal(rc, -1);
        assert_non_null(strstr(msg, "read failed"));
    }
    ll_free(raw);
    conv_src_close(s);
    munmap((void *)map, N);
    remove(p);
    free(want);
}

static int setup(void **st) {
    (void)st;
    g_tmp = tu_tmpdir();
    return 0;
}

static int teardown(void **st) {
    (void)st;
    rmdir(g_tmp);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_out_plain),
        cmocka_unit_test(test_out_direct),
        cmocka_unit_test(test_out_full_disk),
        cmocka_unit_test(test_src_read),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
