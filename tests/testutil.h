/*
 * testutil.h — shared helpers for the cmocka test programs.
 *
 * Fixtures are read in place from the project's `shared/` folder: $LILAC_SHARED, else
 * ../shared beside the repository, else /work/shared. A test that needs fixtures and finds none
 * calls skip() (reported as skipped by tests/run.sh, never as passed).
 */
#ifndef LILAC_TESTUTIL_H
#define LILAC_TESTUTIL_H

#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static inline int tu_is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Returns the shared folder (static buffer) or NULL. */
static inline const char *tu_shared_dir(void) {
    static char buf[PATH_MAX];
    const char *env = getenv("LILAC_SHARED");
    if (env && tu_is_dir(env)) return env;
    /* tests run from the repository root (tests/run.sh cds there) */
    if (realpath("../shared", buf) && tu_is_dir(buf)) return buf;
    if (tu_is_dir("/work/shared")) return "/work/shared";
    return NULL;
}

/* Path under shared/ (static rotating buffers), or skip() the test if shared/ is missing. */
static inline const char *tu_shared_path(const char *rel) {
    static char bufs[8][PATH_MAX];
    static int k;
    const char *d = tu_shared_dir();
    if (!d) {
        print_message("shared/ fixtures not found (set LILAC_SHARED)\n");
        skip();
    }
    char *b = bufs[k++ & 7];
    int n = snprintf(b, PATH_MAX, "%s/%s", d, rel); /* checked: also keeps gcc's truncation warning quiet */
    if (n < 0 || n >= PATH_MAX) fail_msg("fixture path too long: %s/%s", d, rel);
    return b;
}

/* A fresh temporary directory for a test (static buffer). */
static inline const char *tu_tmpdir(void) {
    static char buf[64];
    snprintf(buf, sizeof(buf), "/tmp/lilac-test-XXXXXX");
    if (!mkdtemp(buf)) fail_msg("mkdtemp failed");
    return buf;
}

static inline void tu_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

#endif
