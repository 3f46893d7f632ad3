/* cmd_convert.c — `lilac convert SRC -o OUT.gguf --type TYPE` and `lilac quantize IN.gguf -o
 * OUT.gguf --type TYPE`: one converter (format/convert.h) behind both, with a progress bar
 * (rate and ETA) on stderr and Ctrl-C / SIGTERM leaving no partial output. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/base.h"
#include "cli.h"
#include "format/convert.h"

static volatile int g_cancel;

static void on_signal(int sig) {
    (void)sig;
    g_cancel = 1;
}

typedef struct bar {
    double t0, last;
    int tty;
} bar;

static void progress(void *ud, uint64_t done, uint64_t total) {
    bar *b = ud;
    double now = ll_time_sec();
    if (done < total && now - b->last < (b->tty ? 0.2 : 5.0)) return;
    b->last = now;
    double el = now - b->t0, frac = total ? (double)done / (double)total : 1.0;
    double rate = el > 0 ? (double)done / el : 0, eta = rate > 0 ? (double)(total - done) / rate : 0;
    char fill[31];
    int k = (int)(frac * 30);
    for (int i = 0; i < 30; i++) fill[i] = i < k ? '#' : '.';
    fill[30] = '\0';
    fprintf(stderr, "%s[%s] %5.1f%%  %.2f / %.2f GB  %.0f MB/s  ETA %02d:%02d%s", b->tty ? "\r" : "", fill, 100 * frac, done / 1e9,
            total / 1e9, rate / 1e6, (int)eta / 60, (int)eta % 60, b->tty ? "" : "\n");
    if (b->tty && done >= total) fputc('\n', stderr);
    fflush(stderr);
}

static void usage(FILE *f, const char *cmd) {
    if (!strcmp(cmd, "quantize"))
        fprintf(f, "usage: lilac quantize IN.gguf -o OUT.gguf --type TYPE [--force] [--threads N]\n\n");
    else
        fprintf(f, "usage: lilac convert SRC -o OUT.gguf --type TYPE [--force] [--threads N] [--name NAME]\n\n"
                   "SRC: an HF safetensors directory (sharded or not), an MLX directory, or a GGUF file.\n");
    fprintf(f, "TYPE: f32, bf16, q8_0, q6_k, q4_k_m (Q4_K with Q6_K for output, half of attn_v/attn_qkv and\n"
               "      ffn_down, as llama.cpp), q4_k_s. Norms, router, conv and other vectors stay F32.\n"
               "The output is written to OUT.part.* and renamed when complete; an existing OUT is kept\n"
               "unless --force is given.\n");
}

int cmd_convert(int argc, char **argv) {
    const char *cmd = argv[0], *src = NULL, *dst = NULL, *type = NULL, *name = NULL;
    convert_opts o = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && i + 1 < argc) dst = argv[++i];
        else if ((!strcmp(a, "-t") || !strcmp(a, "--type") || !strcmp(a, "--outtype")) && i + 1 < argc) type = argv[++i];
        else if (!strcmp(a, "--threads") && i + 1 < argc) o.threads = atoi(argv[++i]);
        else if (!strcmp(a, "--name") && i + 1 < argc) name = argv[++i];
        else if (!strcmp(a, "-f") || !strcmp(a, "--force")) o.force = 1;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout, cmd); return 0; }
        else if (a[0] != '-' && !src) src = a;
        else { fprintf(stderr, "lilac %s: unexpected argument '%s'\n", cmd, a); usage(stderr, cmd); return 2; }
    }
    if (!src || !dst || !type) { usage(stderr, cmd); return 2; }
    if (convert_type_from_name(type, &o.type) != 0) {
        fprintf(stderr, "lilac %s: unknown --type '%s' (f32, bf16, q8_0, q6_k, q4_k_m, q4_k_s)\n", cmd, type);
        return 2;
    }
    if (!strcmp(cmd, "quantize")) {
        FILE *fp = fopen(src, "rb");
        char mg[4] = {0};
        int is_gguf = fp && fread(mg, 1, 4, fp) == 4 && !memcmp(mg, "GGUF", 4);
        if (fp) fclose(fp);
        if (!is_gguf) return cli_fail(cmd, "the input is not a GGUF file (use `lilac convert` for safetensors / MLX folders)");
    }
    o.name = name;
    bar b = {ll_time_sec(), 0, isatty(2)};
    o.progress = progress;
    o.progress_ud = &b;
    o.cancel = &g_cancel;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    /* a closed stderr pipe (`lilac convert ... 2>&1 | head`) must not kill us mid-file and leave
     * the .part behind: the progress write just fails */
    signal(SIGPIPE, SIG_IGN);
    /* a file-size limit must be an error we report (and clean up after), not a signal that kills */
    signal(SIGXFSZ, SIG_IGN);
    convert_stats s;
    if (convert_model(src, dst, &o, &s) != LL_OK) {
        if (b.tty) fputc('\n', stderr);
        return cli_fail(cmd, ll_errmsg());
    }
    fprintf(stderr, "%s: %lld tensors, %.2f GB read, %.2f GB written (%s) in %.1f s: %.2f GB/s of source (O_DIRECT: %.2f GB read, %.2f GB written)\n",
            dst, (long long)s.n_tensors, s.src_bytes / 1e9, s.out_bytes / 1e9, convert_type_name(o.type), s.seconds,
            s.seconds > 0 ? s.src_bytes / 1e9 / s.seconds : 0.0, s.read_direct / 1e9, s.written_direct / 1e9);
    return 0;
}
