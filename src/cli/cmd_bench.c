/*
 * cmd_bench.c — `lilac bench`: batch-1 prefill and decode throughput.
 *
 *   lilac bench --synthetic qwen3.6-35b-a3b [--backend cuda|cpu|auto] [--quick] [-o DIR]
 *   lilac bench -m MODEL [...]
 *
 * For each prompt length L in 256 … 128K (10 lengths; --quick: 256, 4K, 32K): prefill L random tokens
 * into a fresh sequence (timed: prefill tok/s and TFLOP/s), then time N greedy decode steps at
 * context L (decode tok/s and weight GB/s = weight bytes one step reads / step time). The two means
 * weight every length equally. Then the 4K/4K point (4,096-token prompt, 4,096 greedy tokens; the
 * FNV-1a digest of the generated ids is printed so runs can be compared), the device's read
 * bandwidth measured in the same process, the peak device memory, and (cuda) a per-kernel
 * breakdown of one decode step at 4K context and of one 4K prefill chunk. Results go to stdout as
 * Markdown and, with -o DIR, to DIR/bench.json, DIR/bench.md and DIR/bench.svg (a plot).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/backend.h"
#include "base/base.h"
#include "backend/cpu/cpu_ops.h"
#include "cli.h"
#include "model/qwen35_synth.h"
#ifdef LILAC_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

#define BENCH_MAX_LEN 10

typedef struct bench_point {
    int len;
    double prefill_s, prefill_tps, prefill_tflops;
    double decode_s, decode_tps, decode_gbps;
    int decode_steps;
} bench_point;

typedef struct bench_cfg {
    const char *synthetic, *model_path, *backend, *outdir;
    int quick, decode_steps, chunk, long_decode, max_len, mem_ctx, kv_q8, det;
    uint64_t seed;
} bench_cfg;

static void bench_usage(FILE *f) {
    fprintf(f,
            "usage: lilac bench (--synthetic PRESET | -m MODEL) [options]\n"
            "  --synthetic P     random weights of preset P (qwen3.6-35b-a3b, qwen3.6-35b-a3b-L4, tiny)\n"
            "  -m MODEL          benchmark a model file or directory\n"
            "  --backend B       cuda, cpu or auto (default auto)\n"
            "  --kv-cache T      (cuda) auto (default: q8 where the model's shapes have its kernels),\n"
            "                    q8 (int8 with an fp16 scale per 32 values) or bf16\n"
            "  --deterministic   (cuda) a prefill that is the same bits on every run, so the digest\n"
            "                    repeats (about 5 %% slower prefill; without it near-ties may differ)\n"
            "  --quick           3 lengths (256, 4K, 32K) and a 4K/1K point instead of 10 lengths and 4K/4K\n"
            "  --decode-steps N  decode steps timed per length (default 64)\n"
            "  --chunk N         prefill chunk (tokens per forward chunk, default 4096)\n"
            "  --max-len N       skip lengths above N\n"
            "  --mem-ctx N       (cuda) also open a sequence of N context tokens for the peak-memory\n"
            "                    figure and its breakdown (default 131072; 0: only what the run used)\n"
            "  --seed N          synthetic weights / prompt seed (default 1)\n"
            "  -o DIR            write DIR/bench.json and DIR/bench.md\n");
}

/* Multiply-add FLOPs of a forward over n tokens starting at position p0 (matrix products with the
 * routed top-k experts + attention scores/values + the GDN recurrence; lm_head for one token). */
static double bench_flops(const qwen_model *m, double p0, double n) {
    const qwen_hparams *hp = &m->hp;
    double H = hp->n_embd, per_tok = 0, attn = 0;
    for (int l = 0; l < hp->n_layer; l++) {
        const qwen_layer *ly = &m->layers[l];
        if (hp->is_attn[l]) {
            per_tok += (double)ly->wq.rows * H + (double)ly->wk.rows * H + (double)ly->wv.rows * H + (double)ly->wo.rows * ly->wo.cols;
            attn += 2.0 * hp->n_head * hp->head_dim; /* per (query, key) pair: q·k and p·v */
        } else {
            per_tok += ((double)ly->wqkv.rows + ly->wz.rows + ly->wa.rows + ly->wb.rows) * H + (double)ly->wout.rows * ly->wout.cols;
            per_tok += 3.0 * hp->gdn_n_v_heads * hp->gdn_k_dim * hp->gdn_v_dim;
        }
        per_tok += (double)hp->n_expert * H + (double)hp->n_expert_used * 3 * hp->n_ff_exp * H + 3.0 * hp->n_ff_shexp * H;
    }
    double pairs = n * p0 + n * (n + 1) / 2;
    return 2.0 * (per_tok * n + attn * pairs + (double)hp->n_vocab * H);
}

static uint64_t bench_rng(uint64_t *s) {
    *s += 0x9e3779b97f4a7c15ull;
    return qsyn_mix(*s);
}

static int bench_argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* Prefill `len` tokens into a fresh sequence, then `steps` greedy decode steps. */
static ll_status bench_run(ll_backend *be, const qwen_model *m, int is_cuda, int len, int steps, uint64_t seed, bench_point *pt,
                           int32_t *gen_out, float *logits) {
    const qwen_hparams *hp = &m->hp;
    ll_seq *s = NULL;
    LL_TRY(be->v->seq_new(be, len + steps + 8, &s));
    int32_t *tok = ll_malloc((size_t)len * sizeof(int32_t));
    if (!tok) { be->v->seq_free(be, s); return ll_err(LL_ERR_OOM, "bench: out of memory"); }
    uint64_t r = seed ^ (uint64_t)len;
    int vocab = hp->n_vocab < 248077 ? hp->n_vocab : 248077;
    for (int i = 0; i < len; i++) tok[i] = (int32_t)(bench_rng(&r) % (uint64_t)vocab);
    double t0 = ll_time_sec();
    ll_status st = be->v->forward(be, s, tok, len, LL_LOGITS_LAST, logits);
    double t1 = ll_time_sec();
    memset(pt, 0, sizeof(*pt));
    pt->len = len;
    pt->prefill_s = t1 - t0;
    pt->prefill_tps = len / pt->prefill_s;
    pt->prefill_tflops = bench_flops(m, 0, len) / pt->prefill_s / 1e12;
    if (st == LL_OK && steps > 0) {
        double d0 = ll_time_sec();
#ifdef LILAC_CUDA
        if (is_cuda) st = cuda_backend_generate(be, s, -1, steps, gen_out);
#endif
        if (!is_cuda) {
            int32_t t = bench_argmax(logits, hp->n_vocab);
            for (int i = 0; i < steps && st == LL_OK; i++) {
                st = be->v->forward(be, s, &t, 1, LL_LOGITS_LAST, logits);
                t = bench_argmax(logits, hp->n_vocab);
                if (gen_out) gen_out[i] = t;
            }
        }
        double d1 = ll_time_sec();
        pt->decode_steps = steps;
        pt->decode_s = d1 - d0;
        pt->decode_tps = steps / pt->decode_s;
    }
    ll_free(tok);
    be->v->seq_free(be, s);
    return st;
}

static int bench_parse(int argc, char **argv, bench_cfg *c) {
    *c = (bench_cfg){.backend = "auto", .decode_steps = 64, .chunk = 4096, .seed = 1, .long_decode = 4096, .max_len = 1 << 30,
                   .mem_ctx = 131072};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { bench_usage(stdout); return 1; }
        if (!strcmp(a, "--quick")) { c->quick = 1; continue; }
        if (!strcmp(a, "--deterministic")) { c->det = 1; continue; }
        if (!v) { fprintf(stderr, "lilac bench: %s needs a value\n", a); return 2; }
        if (!strcmp(a, "--synthetic")) c->synthetic = v;
        else if (!strcmp(a, "-m")) c->model_path = v;
        else if (!strcmp(a, "--backend")) c->backend = v;
        else if (!strcmp(a, "--kv-cache")) {
            if (cli_kv_cache(v, &c->kv_q8) < 0) { fprintf(stderr, "lilac bench: --kv-cache %s: auto, bf16 or q8\n", v); return 2; }
        }
        else if (!strcmp(a, "-o")) c->outdir = v;
        else if (!strcmp(a, "--decode-steps")) c->decode_steps = atoi(v);
        else if (!strcmp(a, "--chunk")) c->chunk = atoi(v);
        else if (!strcmp(a, "--max-len")) c->max_len = atoi(v);
        else if (!strcmp(a, "--mem-ctx")) c->mem_ctx = atoi(v);
        else if (!strcmp(a, "--seed")) c->seed = strtoull(v, NULL, 10);
        else { fprintf(stderr, "lilac bench: unknown option %s\n", a); bench_usage(stderr); return 2; }
        i++;
    }
    if (!!c->synthetic == !!c->model_path) { fprintf(stderr, "lilac bench: give exactly one of --synthetic and -m\n"); return 2; }
    if (c->decode_steps < 1 || c->chunk < 16) { fprintf(stderr, "lilac bench: bad --decode-steps / --chunk\n"); return 2; }
    return 0;
}

static void bench_write(FILE *md, FILE *js, const bench_cfg *c, const char *devname, const char *bname, const qwen_model *m,
                        bench_point *pts, int np, bench_point *ll, uint64_t digest, double bw, double mem_peak,
                        double wbytes, double dbytes, const void *kd, int nkd, const void *kp, int nkp, const double *mem) {
    double mp = 0, md_ = 0;
    for (int i = 0; i < np; i++) { mp += pts[i].prefill_tps; md_ += pts[i].decode_tps; }
    mp /= np; md_ /= np;
    if (md) {
        fprintf(md, "# lilac bench\n\n");
        fprintf(md, "- model: %s (%s), weights %.2f GB on the device, %.3f GB read per decode step\n",
                c->synthetic ? c->synthetic : c->model_path, m->format_name ? m->format_name : "?", wbytes / 1e9, dbytes / 1e9);
        fprintf(md, "- backend: %s on %s; batch 1; prefill chunk %d; %d decode steps per length; KV cache %s%s\n", bname, devname,
                c->chunk, c->decode_steps, c->kv_q8 ? "q8 (int8, fp16 scale per 32)" : strcmp(bname, "cuda") ? "fp32" : "bf16",
                c->det && !strcmp(bname, "cuda") ? "; deterministic prefill (--deterministic)" : "");
        fprintf(md, "- measured read bandwidth: %.0f GB/s; peak device memory in use: %.2f GB (%.2f GiB)\n", bw, mem_peak / 1e9,
                mem_peak / 1073741824.0);
        if (mem) /* mem: weights, scratch, sequences, host-resident weights, largest context opened */
            fprintf(md, "- peak memory breakdown (GB): weights %.3f + forward scratch %.3f (decode buffers and the %d-token prefill "
                        "workspace) + sequences %.3f (KV cache, GDN state; largest %d-token context) + CUDA context and other %.3f; "
                        "kept in pinned host memory: %.3f (token embedding table)\n",
                    mem[0] / 1e9, mem[1] / 1e9, c->chunk, mem[2] / 1e9, (int)mem[4], (mem_peak - mem[0] - mem[1] - mem[2]) / 1e9,
                    mem[3] / 1e9);
        fprintf(md, "\n");
        fprintf(md, "| length | prefill tok/s | prefill TFLOP/s | decode tok/s | decode ms/token | decode weight GB/s | %% of read BW |\n");
        fprintf(md, "|---:|---:|---:|---:|---:|---:|---:|\n");
        for (int i = 0; i < np; i++) {
            double gbps = dbytes * pts[i].decode_tps / 1e9;
            fprintf(md, "| %d | %.0f | %.1f | %.1f | %.3f | %.0f | %.0f %% |\n", pts[i].len, pts[i].prefill_tps, pts[i].prefill_tflops,
                    pts[i].decode_tps, 1e3 / pts[i].decode_tps, gbps, bw > 0 ? 100 * gbps / bw : 0);
        }
        fprintf(md, "| **mean** | **%.0f** | | **%.1f** | | | |\n\n", mp, md_);
        if (ll)
            fprintf(md, "**%d/%d point:** prefill %.0f tok/s, decode %.1f tok/s over %d greedy tokens (digest %016llx)\n\n", ll->len,
                    ll->decode_steps, ll->prefill_tps, ll->decode_tps, ll->decode_steps, (unsigned long long)digest);
#ifdef LILAC_CUDA
        for (int pass = 0; pass < 2; pass++) {
            const cuda_kernel_time *k = pass ? kp : kd;
            int nk = pass ? nkp : nkd;
            if (!nk) continue;
            double tot = 0;
            for (int i = 0; i < nk; i++) tot += k[i].ms;
            fprintf(md, "### Per-kernel time, %s (un-graphed, CUDA events; total %.3f ms)\n\n", pass ? "one 4K prefill chunk" : "one decode step at 4K context", tot);
            fprintf(md, "| kernel | calls | ms | %% | GB/s | TFLOP/s |\n|---|---:|---:|---:|---:|---:|\n");
            for (int i = 0; i < nk; i++)
                fprintf(md, "| %s | %d | %.4f | %.1f | %.0f | %.2f |\n", k[i].name, k[i].calls, k[i].ms, 100 * k[i].ms / tot,
                        k[i].bytes / (k[i].ms * 1e-3) / 1e9, k[i].flops / (k[i].ms * 1e-3) / 1e12);
            fprintf(md, "\n");
        }
#else
        (void)kd; (void)nkd; (void)kp; (void)nkp;
#endif
    }
    if (js) {
        fprintf(js, "{\n  \"model\": \"%s\",\n  \"backend\": \"%s\",\n  \"device\": \"%s\",\n", c->synthetic ? c->synthetic : c->model_path,
                bname, devname);
        fprintf(js, "  \"weight_bytes\": %.0f,\n  \"decode_bytes_per_token\": %.0f,\n  \"read_bw_gbps\": %.1f,\n  \"mem_peak_bytes\": %.0f,\n",
                wbytes, dbytes, bw, mem_peak);
        if (mem)
            fprintf(js, "  \"mem_weights_bytes\": %.0f,\n  \"mem_scratch_bytes\": %.0f,\n  \"mem_seq_bytes\": %.0f,\n"
                        "  \"mem_host_weight_bytes\": %.0f,\n  \"mem_ctx\": %.0f,\n",
                    mem[0], mem[1], mem[2], mem[3], mem[4]);
        fprintf(js, "  \"prefill_chunk\": %d,\n  \"kv_cache\": \"%s\",\n  \"deterministic\": %s,\n  \"points\": [\n", c->chunk,
                c->kv_q8 ? "q8" : strcmp(bname, "cuda") ? "fp32" : "bf16", c->det && !strcmp(bname, "cuda") ? "true" : "false");
        for (int i = 0; i < np; i++)
            fprintf(js, "    {\"len\": %d, \"prefill_tps\": %.1f, \"prefill_tflops\": %.2f, \"decode_tps\": %.2f, \"decode_gbps\": %.1f}%s\n",
                    pts[i].len, pts[i].prefill_tps, pts[i].prefill_tflops, pts[i].decode_tps, dbytes * pts[i].decode_tps / 1e9,
                    i + 1 < np ? "," : "");
        fprintf(js, "  ],\n  \"mean_prefill_tps\": %.1f,\n  \"mean_decode_tps\": %.2f", mp, md_);
        if (ll)
            fprintf(js, ",\n  \"long\": {\"prompt\": %d, \"generated\": %d, \"prefill_tps\": %.1f, \"decode_tps\": %.2f, \"digest\": \"%016llx\"}",
                    ll->len, ll->decode_steps, ll->prefill_tps, ll->decode_tps, (unsigned long long)digest);
        fprintf(js, "\n}\n");
    }
}

/* bench.svg: prefill and decode tok/s against length (log2 x axis), one panel each. */
static void bench_svg(FILE *f, const bench_point *pts, int np, const char *title) {
    const int W = 420, H = 260, L = 60, B = 40, T = 30;
    fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' font-family='sans-serif' font-size='11'>\n", 2 * W, H + 20);
    fprintf(f, "<text x='10' y='16' font-size='13'>%s</text>\n", title);
    for (int panel = 0; panel < 2; panel++) {
        double ymax = 1;
        for (int i = 0; i < np; i++) {
            double v = panel ? pts[i].decode_tps : pts[i].prefill_tps;
            if (v > ymax) ymax = v;
        }
        ymax *= 1.1;
        double x0 = log2(pts[0].len), x1 = log2(pts[np - 1].len);
        if (x1 <= x0) x1 = x0 + 1;
        int ox = panel * W + L, pw = W - L - 20, ph = H - T - B;
        fprintf(f, "<rect x='%d' y='%d' width='%d' height='%d' fill='none' stroke='#888'/>\n", ox, T, pw, ph);
        fprintf(f, "<text x='%d' y='%d'>%s (tok/s; max %.0f)</text>\n", ox, T - 6, panel ? "decode at context length" : "prefill of a prompt",
                ymax / 1.1);
        fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='2' points='", panel ? "#c0392b" : "#2c7fb8");
        for (int i = 0; i < np; i++) {
            double v = panel ? pts[i].decode_tps : pts[i].prefill_tps;
            double x = ox + (log2(pts[i].len) - x0) / (x1 - x0) * pw, y = T + ph - v / ymax * ph;
            fprintf(f, "%.1f,%.1f ", x, y);
        }
        fprintf(f, "'/>\n");
        for (int i = 0; i < np; i++) {
            double x = ox + (log2(pts[i].len) - x0) / (x1 - x0) * pw;
            if (pts[i].len < 1024) fprintf(f, "<text x='%.1f' y='%d' text-anchor='middle'>%d</text>\n", x, T + ph + 14, pts[i].len);
            else fprintf(f, "<text x='%.1f' y='%d' text-anchor='middle'>%dK</text>\n", x, T + ph + 14, pts[i].len / 1024);
        }
        for (int k = 0; k <= 4; k++)
            fprintf(f, "<text x='%d' y='%.1f' text-anchor='end'>%.0f</text>\n", ox - 4, T + ph - k * ph / 4.0 + 4, ymax * k / 4);
    }
    fprintf(f, "</svg>\n");
}

int cmd_bench(int argc, char **argv) {
    bench_cfg c;
    int pr = bench_parse(argc, argv, &c);
    if (pr) return pr == 1 ? 0 : 2;
    int max_len = c.max_len;
    static const int full[BENCH_MAX_LEN] = {256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072};
    static const int quick[3] = {256, 4096, 32768};
    const int *lens = c.quick ? quick : full;
    int nl = c.quick ? 3 : BENCH_MAX_LEN;
    if (c.quick) c.long_decode = 1024;

    qwen_model *m = NULL;
    ll_status st;
    int want_cuda = strcmp(c.backend, "cpu") != 0;
#ifndef LILAC_CUDA
    want_cuda = 0;
#endif
    if (c.synthetic) st = qwen_model_synthetic_ex(c.synthetic, c.seed, want_cuda, &m);
    else st = qwen_model_load(c.model_path, &m);
    if (st != LL_OK) return cli_fail("bench", ll_errmsg());
    ll_backend_params bp = {.n_threads = 0, .max_batch = c.chunk, .device = 0, .kv_q8 = c.kv_q8, .deterministic = c.det};
    ll_backend *be = NULL;
    double t0 = ll_time_sec();
    st = ll_backend_new(want_cuda ? c.backend : "cpu", m, &bp, &be);
    if (st != LL_OK) {
        char msg[1200];
        snprintf(msg, sizeof(msg), "%s", ll_errmsg());
        if (c.synthetic) qwen_model_free_synthetic(m); else qwen_model_free(m);
        return cli_fail("bench", msg);
    }
    fprintf(stderr, "lilac bench: backend %s ready in %.1f s\n", be->v->name, ll_time_sec() - t0);
    int is_cuda = !strcmp(be->v->name, "cuda");
    if (c.kv_q8 > 0 && !is_cuda) /* the report must say what ran */
        fprintf(stderr, "lilac bench: --kv-cache q8 applies to the cuda backend; the %s backend keeps its own cache\n", be->v->name);
    c.kv_q8 = is_cuda && be->params.kv_q8 > 0; /* the backend's resolved choice (auto) */
    double bw = 0, mem_peak = 0, wbytes = (double)m->weight_bytes, dbytes = 0;
    char devname[256] = "cpu";
    if (!is_cuda) { /* the reference for CPU decode: streaming read bandwidth of all cores, same run */
        dbytes = qwen_decode_weight_bytes(m);
        ll_pool *pool = ll_pool_new(0);
        if (!pool || cpu_measure_read_bw(pool, (size_t)1 << 30, &bw) != LL_OK) fprintf(stderr, "lilac bench: %s\n", ll_errmsg());
        ll_pool_free(pool);
        snprintf(devname, sizeof(devname), "cpu");
    }
#ifdef LILAC_CUDA
    cuda_info ci;
    if (is_cuda) {
        cuda_backend_info(be, &ci);
        snprintf(devname, sizeof(devname), "%s", ci.device);
        wbytes = ci.weight_bytes;
        dbytes = ci.decode_bytes_per_token;
        if (cuda_measure_read_bw(0, (size_t)4 << 30, &bw) != LL_OK) fprintf(stderr, "lilac bench: %s\n", ll_errmsg());
    }
#endif
    float *logits = ll_malloc((size_t)m->hp.n_vocab * sizeof(float));
    int32_t *gen = ll_malloc((size_t)(c.long_decode > c.decode_steps ? c.long_decode : c.decode_steps) * sizeof(int32_t));
    bench_point pts[BENCH_MAX_LEN], ll;
    int np = 0, rc = 0;
    uint64_t digest = 0xcbf29ce484222325ull;
    if (!logits || !gen) { st = ll_err(LL_ERR_OOM, "bench: out of memory"); goto done; }
    /* warm-up: module load, graph capture */
    if ((st = bench_run(be, m, is_cuda, 256, 8, c.seed, &pts[0], gen, logits)) != LL_OK) goto done;
    for (int i = 0; i < nl; i++) {
        if (lens[i] > max_len) continue;
        if ((st = bench_run(be, m, is_cuda, lens[i], c.decode_steps, c.seed, &pts[np], gen, logits)) != LL_OK) goto done;
        fprintf(stderr, "lilac bench: len %6d: prefill %8.0f tok/s (%.1f TFLOP/s), decode %7.1f tok/s\n", lens[i], pts[np].prefill_tps,
                pts[np].prefill_tflops, pts[np].decode_tps);
        np++;
    }
    memset(&ll, 0, sizeof(ll));
    if (4096 <= max_len) { /* the 4K/4K point; --max-len below 4096 (slow CPU runs) skips it */
        if ((st = bench_run(be, m, is_cuda, 4096, c.long_decode, c.seed, &ll, gen, logits)) != LL_OK) goto done;
        for (int i = 0; i < c.long_decode; i++) digest = (digest ^ (uint64_t)(uint32_t)gen[i]) * 0x100000001b3ull;
        fprintf(stderr, "lilac bench: 4096/%d: decode %.1f tok/s\n", c.long_decode, ll.decode_tps);
    } else {
        fprintf(stderr, "lilac bench: 4096/%d point skipped (--max-len %d)\n", c.long_decode, max_len);
    }
    {
        void *kd = NULL, *kp = NULL;
        int nkd = 0, nkp = 0;
        double memb[5] = {0};
        const double *mem = NULL;
        (void)memb;
#ifdef LILAC_CUDA
        cuda_kernel_time *kdt = NULL, *kpt = NULL;
        if (is_cuda) {
            kdt = ll_calloc(64, sizeof(*kdt));
            kpt = ll_calloc(64, sizeof(*kpt));
            ll_seq *s = NULL;
            int T = c.chunk < 4096 ? c.chunk : 4096;
            int32_t *tok = ll_malloc(4096 * sizeof(int32_t));
            if (kdt && kpt && tok && be->v->seq_new(be, 4096 + 64, &s) == LL_OK) {
                uint64_t r = c.seed;
                for (int i = 0; i < 4096; i++) tok[i] = (int32_t)(bench_rng(&r) % 1000);
                if (cuda_backend_profile(be, s, tok, T, kpt, 64, &nkp) != LL_OK) fprintf(stderr, "lilac bench: %s\n", ll_errmsg());
                if (T < 4096) be->v->forward(be, s, tok + T, 4096 - T, LL_LOGITS_NONE, NULL);
                if (cuda_backend_profile(be, s, tok, 1, kdt, 64, &nkd) != LL_OK) fprintf(stderr, "lilac bench: %s\n", ll_errmsg());
                be->v->seq_free(be, s);
            }
            ll_free(tok);
            /* the memory target is stated for a 128K context: open one (no forward allocates) */
            int mctx = 0;
            for (int i = 0; i < np; i++) mctx = pts[i].len + c.decode_steps + 8 > mctx ? pts[i].len + c.decode_steps + 8 : mctx;
            if (c.mem_ctx > mctx) {
                ll_seq *ms = NULL;
                if (be->v->seq_new(be, c.mem_ctx, &ms) == LL_OK) { be->v->seq_free(be, ms); mctx = c.mem_ctx; }
                else fprintf(stderr, "lilac bench: %s\n", ll_errmsg());
            }
            cuda_backend_info(be, &ci);
            fprintf(stderr, "lilac bench: %d decode graphs built, %.2f ms of host time each (%s)\n", ci.graph_builds, ci.graph_build_ms,
                    getenv("LILAC_CUDA_EAGER_GRAPH") && !atoi(getenv("LILAC_CUDA_EAGER_GRAPH")) ? "at the first decode step, inside its time"
                                                                                               : "while the first prefill chunk runs");
            mem_peak = ci.mem_peak_bytes;
            memb[0] = ci.mem_weights_bytes; memb[1] = ci.mem_scratch_bytes; memb[2] = ci.mem_seq_peak_bytes;
            memb[3] = ci.host_weight_bytes; memb[4] = mctx;
            mem = memb;
            kd = kdt; kp = kpt;
        }
#endif
        bench_write(stdout, NULL, &c, devname, be->v->name, m, pts, np, &ll, digest, bw, mem_peak, wbytes, dbytes, kd, nkd, kp, nkp, mem);
        if (c.outdir) {
            char p1[1024], p2[1024];
            mkdir(c.outdir, 0755);
            snprintf(p1, sizeof(p1), "%s/bench.md", c.outdir);
            snprintf(p2, sizeof(p2), "%s/bench.json", c.outdir);
            FILE *f1 = fopen(p1, "w"), *f2 = fopen(p2, "w");
            if (!f1 || !f2) { fprintf(stderr, "lilac bench: cannot write %s\n", p1); rc = 1; }
            else bench_write(f1, f2, &c, devname, be->v->name, m, pts, np, &ll, digest, bw, mem_peak, wbytes, dbytes, kd, nkd, kp, nkp, mem);
            if (f1) fclose(f1);
            if (f2) fclose(f2);
            snprintf(p1, sizeof(p1), "%s/bench.svg", c.outdir);
            FILE *f3 = np > 0 ? fopen(p1, "w") : NULL;
            if (f3) {
                char title[512];
                snprintf(title, sizeof(title), "lilac bench: %s, %s on %s, batch 1", c.synthetic ? c.synthetic : c.model_path, be->v->name, devname);
                bench_svg(f3, pts, np, title);
                fclose(f3);
            }
        }
        ll_free(kd);
        ll_free(kp);
    }
done:
    if (st != LL_OK) rc = cli_fail("bench", ll_errmsg());
    ll_free(logits);
    ll_free(gen);
    ll_backend_free(be);
    if (c.synthetic) qwen_model_free_synthetic(m); else qwen_model_free(m);
    return rc;
}
