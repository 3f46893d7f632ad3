/*
 * host_tap.h — the TAP lines of the CUDA host tests (tests/cuda_host/test_*.cu): check() prints
 * "ok N - ..." or "not ok N - ..." and counts; main prints "1..n_test" and returns n_fail != 0.
 * tests/run.sh counts the lines.
 */
#ifndef LILAC_HOST_TAP_H
#define LILAC_HOST_TAP_H

#include <stdarg.h>
#include <stdio.h>

static int n_test = 0, n_fail = 0;
static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s %d - ", ok ? "ok" : "not ok", ++n_test);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (!ok) n_fail++;
}

#endif
