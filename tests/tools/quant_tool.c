/*
 * quant_tool.c — test tool that exposes lilac's block formats on raw files, so independent
 * implementations (tests/py/test_quant_gguf.py, via the gguf package) can check them.
 *
 *   quant_tool dequant TYPE IN OUT     IN: whole blocks of TYPE; OUT: float32 values
 *   quant_tool quant   TYPE IN OUT     IN: float32 values;      OUT: blocks of TYPE
 *   quant_tool dot     TYPE ROW X      prints dot(row, x) with fp32 x, then with the quantized
 *                                      activation (quant_dot_row_q), one per line
 * A path of "-" means stdin / stdout. Exit status 2 on bad arguments or input.
 */
#include <stdio.h>
#include <stdlib.h>

#include "base/base.h"
#include "quant/quant.h"

static int read_all(const char *path, uint8_t **data, size_t *len) {
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) { fprintf(stderr, "quant_tool: cannot open %s\n", path); return -1; }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = ll_malloc(cap);
    for (;;) {
        if (!buf) { fprintf(stderr, "quant_tool: out of memory reading %s\n", path); return -1; }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
        if (n == cap) { cap *= 2; buf = ll_realloc(buf, cap); }
    }
    if (f != stdin) fclose(f);
    *data = buf;
    *len = n;
    return 0;
}

static int write_all(const char *path, const void *data, size_t len) {
    FILE *f = strcmp(path, "-") ? fopen(path, "wb") : stdout;
    if (!f) { fprintf(stderr, "quant_tool: cannot create %s\n", path); return -1; }
    int ok = fwrite(data, 1, len, f) == len;
    if (f != stdout) ok = (fclose(f) == 0) && ok;
    else fflush(f);
    if (!ok) fprintf(stderr, "quant_tool: write to %s failed\n", path);
    return ok ? 0 : -1;
}

/* Element count for `len` bytes of type t, or -1 if not a whole number of blocks. */
static int64_t elems_of(ll_type t, size_t len, const char *path) {
    size_t bb = quant_block_bytes(t);
    if (len % bb) {
        fprintf(stderr, "quant_tool: %s: %zu bytes is not a whole number of %s blocks (%zu B)\n", path, len,
                quant_type_name(t), bb);
        return -1;
    }
    return (int64_t)(len / bb) * quant_block_elems(t);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: quant_tool dequant|quant|dot TYPE IN OUT|X\n");
        return 2;
    }
    ll_type t;
    if (quant_type_from_name(argv[2], &t) || (!quant_type_is_weight(t) && t != LL_TYPE_Q8_K)) {
        fprintf(stderr, "quant_tool: unknown or unsupported type '%s'\n", argv[2]);
        return 2;
    }
    quant_init();
    if (getenv("LILAC_QUANT_SCALAR")) quant_force_scalar(1);
    uint8_t *in = NULL;
    size_t len = 0;
    if (read_all(argv[3], &in, &len)) return 2;
    int rc = 2;
    if (!strcmp(argv[1], "dequant")) {
        int64_t n = elems_of(t, len, argv[3]);
        if (n >= 0) {
            float *y = ll_malloc((size_t)n * sizeof(float) + 1);
            if (y) {
                quant_dequant_row(t, in, y, n);
                rc = write_all(argv[4], y, (size_t)n * sizeof(float)) ? 2 : 0;
            }
            ll_free(y);
        }
    } else if (!strcmp(argv[1], "quant")) {
        int64_t qk = quant_block_elems(t), n = (int64_t)(len / sizeof(float));
        if (len % sizeof(float) || n % qk) {
            fprintf(stderr, "quant_tool: %s: %zu bytes is not a whole number of %lld float32 values\n", argv[3],
                    len, (long long)qk);
        } else {
            size_t ob = quant_row_bytes(t, n);
            void *q = ll_malloc(ob + 1);
            if (q) {
                quant_quantize_row(t, (const float *)in, q, n);
                rc = write_all(argv[4], q, ob) ? 2 : 0;
            }
            ll_free(q);
        }
    } else if (!strcmp(argv[1], "dot")) {
        uint8_t *x = NULL;
        size_t xl = 0;
        int64_t n = elems_of(t, len, argv[3]);
        if (n >= 0 && !read_all(argv[4], &x, &xl)) {
            if (xl != (size_t)n * sizeof(float)) {
                fprintf(stderr, "quant_tool: %s has %zu bytes, want %lld float32 values\n", argv[4], xl, (long long)n);
            } else {
                void *act = ll_malloc(quant_act_bytes(t, n) + 1);
                if (act) {
                    quant_quantize_act(t, (const float *)x, act, n);
                    printf("%.9g\n%.9g\n", quant_dot_row(t, in, (const float *)x, n), quant_dot_row_q(t, in, act, n));
                    rc = 0;
                }
                ll_free(act);
            }
        }
        ll_free(x);
    } else {
        fprintf(stderr, "quant_tool: unknown command '%s'\n", argv[1]);
    }
    ll_free(in);
    return rc;
}
