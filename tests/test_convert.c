/*
 * test_convert.c — `lilac convert` / `quantize` (format/convert.h) and `lilac synth`
 * (format/synth.h).
 *
 *  - the `small` fixture (BF16, 3 shards) converted to bf16 GGUF and loaded back reproduces the
 *    transformers golden logits to 1e-3 on the CPU backend (fp32 compute);
 *  - q8_0 / q6_k / q4_k_m / q4_k_s files agree with the golden top-1 and KL at the documented
 *    rates (table in `qcases`; measured values are printed);
 *  - re-quantizing the bf16 GGUF (`lilac quantize`) gives byte-identical tensors to converting
 *    the HF folder directly, and copies the metadata;
 *  - the per-tensor type rule for the real 40-layer model (llama.cpp's Q4_K_M / Q4_K_S mix);
 *  - O_DIRECT reads and writes give the same bytes as the mapping and the page cache;
 *  - bad input (missing shard, truncated shard, wrong shape, unsupported dtype, full disk,
 *    interruption, existing output) fails with a clear error and leaves no output file;
 *  - synth: a model that loads, gives finite and varied logits, GGUF and safetensors agree for a
 *    seed, seeds differ, and the real Qwen3 tokenizer sets the vocabulary.
 */
#include "testutil.h"
#include "tu_logits.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <sys/resource.h>

#include "backend/backend.h"
#include "format/convert.h"
#include "format/gguf.h"
#include "format/safetensors.h"
#include "format/synth.h"
#include "quant/quant.h"
#include "tokenizer/tokenizer.h"

/* ---------------------------------------------------------------- helpers */

typedef struct golden {
    st_file f;
    const int32_t *tok;
    const float *logits;
    int32_t T, V;
} golden;

static void golden_open(golden *g, const char *fixture) {
    char rel[96];
    snprintf(rel, sizeof(rel), "tests/fixtures/%s/golden.safetensors", fixture); /* the project's own first */
    if (access(rel, R_OK) != 0) snprintf(rel, sizeof(rel), "%s", tu_shared_path(strstr(rel, "fixtures/")));
    if (st_open(&g->f, rel) != LL_OK) fail_msg("%s", ll_errmsg());
    const ll_tensor *t = st_find(&g->f, "tokens"), *l = st_find(&g->f, "logits");
    assert_non_null(t);
    assert_non_null(l);
    g->tok = t->data;
    g->logits = l->data;
    g->T = (int32_t)t->shape[0];
    g->V = (int32_t)l->shape[1];
}

static int exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* Number of entries in dir whose name contains `part` (leftover temporary files). */
static int count_matching(const char *dir, const char *part) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) n += strstr(e->d_name, part) != NULL;
    closedir(d);
    return n;
}

static void path(char *buf, size_t cap, const char *dir, const char *name) { snprintf(buf, cap, "%s/%s", dir, name); }

static void convert_ok(const char *src, const char *dst, convert_type ty) {
    convert_opts o = {.type = ty, .threads = 2, .force = 1};
    if (convert_model(src, dst, &o, NULL) != LL_OK) fail_msg("convert %s: %s", src, ll_errmsg());
}

static const char *g_tmp; /* one temp dir for the whole program */

/* ---------------------------------------------------------------- golden logits */

static void test_convert_bf16_golden(void **st) {
    (void)st;
    golden g;
    golden_open(&g, "small");
    char out[512];
    path(out, sizeof(out), g_tmp, "small-bf16.gguf");
    convert_ok(tu_shared_path("fixtures/small"), out, CONVERT_BF16);
    qwen_model *m;
    if (qwen_model_load(out, &m) != LL_OK) fail_msg("%s", ll_errmsg());
    assert_string_equal(m->format_name, "gguf");
    assert_int_equal(m->hp.gdn_v_tiled, 1);
    assert_int_equal(m->hp.n_vocab, g.V);
    float *lg = tu_run_logits(m, g.tok, g.T);
    double mx = 0;
    for (int64_t i = 0; i < (int64_t)g.T * g.V; i++) mx = fmax(mx, fabs((double)lg[i] - g.logits[i]));
    print_message("small → bf16 GGUF: max |logit - golden| = %.3g\n", mx);
    assert_true(mx <= 1e-3);
    free(lg);
    qwen_model_free(m);

    /* the file itself: llama.cpp's keys and types */
    gguf_file *gf;
    assert_int_equal(gguf_open(&gf, out), LL_OK);
    const char *arch;
    assert_int_equal(gguf_get_str(gf, "general.architecture", &arch), LL_OK);
    assert_string_equal(arch, "qwen35moe");
    uint32_t v;
    assert_int_equal(gguf_get_u32(gf, "general.file_type", &v), LL_OK);
    assert_int_equal(v, 32);
    assert_int_equal(gguf_get_u32(gf, "qwen35moe.full_attention_interval", &v), LL_OK);
    assert_int_equal(v, 2); /* L F L */
    assert_int_equal(gguf_get_u32(gf, "qwen35moe.ssm.inner_size", &v), LL_OK);
    assert_int_equal(v, 8 * 64);
    const int32_t *sec;
    uint64_t n;
    assert_int_equal(gguf_get_arr_i32(gf, "qwen35moe.rope.dimension_sections", &sec, &n), LL_OK);
    assert_int_equal(n, 4);
    assert_int_equal(sec[0] + sec[1] + sec[2], 16); /* n_rot / 2 pairs, from config.json [6, 5, 5] */
    assert_int_equal(gguf_find_tensor(gf, "blk.0.ffn_gate_exps.weight")->type, LL_TYPE_BF16);
    assert_int_equal(gguf_find_tensor(gf, "blk.0.ffn_gate_inp.weight")->type, LL_TYPE_F32);
    assert_int_equal(gguf_find_tensor(gf, "blk.0.ssm_conv1d.weight")->type, LL_TYPE_F32);
    assert_int_equal(gguf_find_tensor(gf, "blk.0.ssm_conv1d.weight")->n_dims, 2);
    assert_int_equal(gguf_find_tensor(gf, "blk.1.attn_norm.weight")->type, LL_TYPE_F32);
    assert_null(gguf_find_tensor(gf, "blk.1.ssm_a")); /* attention layer */
    gguf_close(gf);
    st_close(&g.f);
}

typedef struct {
    convert_type type;
    double min_top1, max_kl;
} qcase;

/* Measured when written (small, 300-token golden prompt, vs the transformers fp32 logits):
 *   q8_0   5.27 MiB  top-1 0.963  mean KL 0.0071
 *   q6_k   4.07 MiB  top-1 0.887  mean KL 0.035
 *   q4_k_m 2.97 MiB  top-1 0.593  mean KL 0.33
 *   q4_k_s 2.90 MiB  top-1 0.607  mean KL 0.30
 * and after the faster K-quant scale search (docs/quality.md): q6_k 0.877 / 0.032, q4_k_m
 * 0.610 / 0.32, q4_k_s 0.630 / 0.30
 * (random weights with peaky routing are far more sensitive than a trained model; the same
 * orders as test_quantized's in-memory figures). On this 3-layer model q4_k_m gives Q6_K only
 * to layer 2's attn_qkv / ffn_down while q4_k_s gives Q5_K to every attn_qkv / attn_v, hence
 * q4_k_s ≈ q4_k_m here. Bounds leave about 2x margin on KL. */
static const qcase qcases[] = {
    {CONVERT_Q8_0, 0.93, 0.015}, {CONVERT_Q6_K, 0.82, 0.07}, {CONVERT_Q4_K_M, 0.50, 0.65}, {CONVERT_Q4_K_S, 0.50, 0.65},
};

static void test_convert_quantized_quality(void **st) {
    (void)st;
    golden g;
    golden_open(&g, "small");
    double kl[LL_ARRAY_LEN(qcases)];
    for (size_t c = 0; c < LL_ARRAY_LEN(qcases); c++) {
        char out[512], nm[64];
        snprintf(nm, sizeof(nm), "small-%s.gguf", convert_type_name(qcases[c].type));
        path(out, sizeof(out), g_tmp, nm);
        convert_ok(tu_shared_path("fixtures/small"), out, qcases[c].type);
        qwen_model *m;
        if (qwen_model_load(out, &m) != LL_OK) fail_msg("%s", ll_errmsg());
        float *lg = tu_run_logits(m, g.tok, g.T);
        double top1;
        tu_compare_logits(g.logits, lg, g.T, g.V, &top1, &kl[c]);
        print_message("small → %-6s %7.3f MiB weights  top-1 %.4f  mean KL %.5f\n", convert_type_name(qcases[c].type),
                      m->weight_bytes / 1048576.0, top1, kl[c]);
        free(lg);
        qwen_model_free(m);
        if (getenv("QMEASURE")) continue;
        if (!(top1 >= qcases[c].min_top1 && kl[c] <= qcases[c].max_kl))
            fail_msg("%s: top-1 %.4f (min %.2f), KL %.5f (max %.3g)", convert_type_name(qcases[c].type), top1, qcases[c].min_top1, kl[c],
                     qcases[c].max_kl);
    }
    assert_true(kl[0] < kl[1] && kl[1] < kl[2]); /* more bits, less divergence */
    st_close(&g.f);
}

/* `quantize` (GGUF source) = converting the HF folder directly, byte for byte. */
static void test_quantize_gguf_matches_direct(void **st) {
    (void)st;
    char bf[512], a[512], b[512];
    path(bf, sizeof(bf), g_tmp, "q-src-bf16.gguf");
    path(a, sizeof(a), g_tmp, "q-direct.gguf");
    path(b, sizeof(b), g_tmp, "q-requant.gguf");
    convert_ok(tu_shared_path("fixtures/small"), bf, CONVERT_BF16);
    convert_ok(tu_shared_path("fixtures/small"), a, CONVERT_Q4_K_M);
    convert_ok(bf, b, CONVERT_Q4_K_M);
    gguf_file *ga, *gb, *gs;
    assert_int_equal(gguf_open(&ga, a), LL_OK);
    assert_int_equal(gguf_open(&gb, b), LL_OK);
    assert_int_equal(gguf_open(&gs, bf), LL_OK);
    assert_int_equal(ga->n_tensors, gb->n_tensors);
    for (int64_t i = 0; i < ga->n_tensors; i++) {
        const ll_tensor *x = &ga->tensors[i], *y = gguf_find_tensor(gb, x->name);
        assert_non_null(y);
        assert_int_equal(x->type, y->type);
        assert_int_equal(x->nbytes, y->nbytes);
        if (memcmp(x->data, y->data, x->nbytes) != 0) fail_msg("tensor %s differs", x->name);
    }
    uint32_t v;
    assert_int_equal(gguf_get_u32(gb, "general.file_type", &v), LL_OK);
    assert_int_equal(v, 15);
    /* every other key comes from the source */
    for (int64_t i = 0; i < gs->n_kv; i++) {
        const char *k = gs->kv[i].key;
        if (!strcmp(k, "general.file_type")) continue;
        assert_non_null(gguf_find_kv(gb, k));
        assert_int_equal(gguf_find_kv(gb, k)->val.type, gs->kv[i].val.type);
    }
    gguf_close(ga);
    gguf_close(gb);
    gguf_close(gs);
}

/* The file must not depend on the CPU or the thread count: the SIMD quantizers write the same
 * bytes as the scalar reference, and rows are independent of how they are shared out. */
static void test_output_independent_of_simd_and_threads(void **st) {
    (void)st;
    static const convert_type types[] = {CONVERT_Q4_K_M, CONVERT_Q4_K_S, CONVERT_Q6_K, CONVERT_Q8_0};
    for (size_t k = 0; k < LL_ARRAY_LEN(types); k++) {
        char a[512], b[512];
        path(a, sizeof(a), g_tmp, "simd.gguf");
        path(b, sizeof(b), g_tmp, "scalar.gguf");
        convert_ok(tu_shared_path("fixtures/small"), a, types[k]); /* SIMD kernels, 2 threads */
        quant_force_scalar(1);
        convert_opts o = {.type = types[k], .threads = 1, .force = 1};
        ll_status rc = convert_model(tu_shared_path("fixtures/small"), b, &o, NULL);
        quant_force_scalar(0);
        if (rc != LL_OK) fail_msg("convert (scalar): %s", ll_errmsg());
        char *da = NULL, *db = NULL;
        size_t na = 0, nb = 0;
        assert_int_equal(ll_read_file(a, &da, &na), LL_OK);
        assert_int_equal(ll_read_file(b, &db, &nb), LL_OK);
        assert_int_equal(na, nb);
        if (memcmp(da, db, na) != 0) fail_msg("%s: the SIMD / 2-thread file differs from the scalar / 1-thread one", convert_type_name(types[k]));
        ll_free(da);
        ll_free(db);
    }
}

/* O_DIRECT reads and writes (forced for the cached fixture: LILAC_CONVERT_DIRECT=all) write the
 * same bytes as the mapping and the page cache (LILAC_CONVERT_DIRECT=0), and are really used
 * where the file systems allow them. bf16 copies rows, the others quantize; the `small` fixture
 * has 3 shards and V heads to reorder (rows and columns). */
static int direct_ok(const char *path, int flags) {
    int fd = open(path, flags | O_DIRECT, 0644);
    if (fd >= 0) close(fd);
    return fd >= 0;
}

static void test_direct_io_same_bytes(void **st) {
    (void)st;
    static const convert_type types[] = {CONVERT_Q4_K_M, CONVERT_Q6_K, CONVERT_BF16, CONVERT_Q8_0};
    char shard[PATH_MAX], probe[512];
    snprintf(shard, sizeof(shard), "%s/model-00001-of-00003.safetensors", tu_shared_path("fixtures/small"));
    path(probe, sizeof(probe), g_tmp, "probe.bin");
    int can_read = direct_ok(shard, O_RDONLY), can_write = direct_ok(probe, O_WRONLY | O_CREAT);
    remove(probe);
    for (size_t k = 0; k < LL_ARRAY_LEN(types); k++) {
        char a[512], b[512];
        path(a, sizeof(a), g_tmp, "plain-io.gguf");
        path(b, sizeof(b), g_tmp, "direct-io.gguf");
        convert_opts o = {.type = types[k], .threads = 2, .force = 1};
        convert_stats sa, sb;
        setenv("LILAC_CONVERT_DIRECT", "0", 1);
        ll_status ra = convert_model(tu_shared_path("fixtures/small"), a, &o, &sa);
        setenv("LILAC_CONVERT_DIRECT", "all", 1);
        ll_status rb = convert_model(tu_shared_path("fixtures/small"), b, &o, &sb);
        unsetenv("LILAC_CONVERT_DIRECT");
        if (ra != LL_OK || rb != LL_OK) fail_msg("convert: %s", ll_errmsg());
        print_message("%s: O_DIRECT read %llu of %llu source bytes, wrote %llu of %llu\n", convert_type_name(types[k]),
                      (unsigned long long)sb.read_direct, (unsigned long long)sb.src_bytes, (unsigned long long)sb.written_direct,
                      (unsigned long long)sb.out_bytes);
        assert_int_equal(sa.read_direct, 0);
        assert_int_equal(sa.written_direct, 0);
        if (can_read) assert_true(sb.read_direct >= sb.src_bytes / 2); /* the matrices; small fp32 vectors are in memory */
        if (can_write) assert_true(sb.written_direct >= sb.out_bytes / 2);
        assert_int_equal(sa.out_bytes, sb.out_bytes);
        char *da = NULL, *db = NULL;
        size_t na = 0, nb = 0;
        assert_int_equal(ll_read_file(a, &da, &na), LL_OK);
        assert_int_equal(ll_read_file(b, &db, &nb), LL_OK);
        assert_int_equal(na, nb);
        assert_int_equal(na, sa.out_bytes);
        if (memcmp(da, db, na) != 0) fail_msg("%s: the O_DIRECT file differs from the page-cache one", convert_type_name(types[k]));
        ll_free(da);
        ll_free(db);
        remove(a);
        remove(b);
    }
    if (!can_read || !can_write) print_message("O_DIRECT unavailable here for %s\n", !can_read ? "reads" : "writes");
}

/* ---------------------------------------------------------------- type rule */

static void test_type_rule(void **st) {
    (void)st;
    qwen_hparams hp;
    assert_int_equal(synth_preset("qwen3.6-35b-a3b", &hp), LL_OK);
    const convert_type M = CONVERT_Q4_K_M, S = CONVERT_Q4_K_S;
    /* use_more_bits(i, 40): i < 5, i >= 35, or (i - 5) % 3 == 2 */
    static const int more[] = {0, 1, 2, 3, 4, 7, 10, 13, 16, 19, 22, 25, 28, 31, 34, 35, 36, 37, 38, 39};
    for (int i = 0; i < 40; i++) {
        int m = 0;
        for (size_t k = 0; k < LL_ARRAY_LEN(more); k++) m |= more[k] == i;
        char nm[64];
        snprintf(nm, sizeof(nm), "blk.%d.%s", i, hp.is_attn[i] ? "attn_v.weight" : "attn_qkv.weight");
        assert_int_equal(convert_tensor_type(M, &hp, nm, 2, 2048), m ? LL_TYPE_Q6_K : LL_TYPE_Q4_K);
        assert_int_equal(convert_tensor_type(S, &hp, nm, 2, 2048), i < 4 ? LL_TYPE_Q5_K : LL_TYPE_Q4_K);
        snprintf(nm, sizeof(nm), "blk.%d.ffn_down_exps.weight", i);
        assert_int_equal(convert_tensor_type(M, &hp, nm, 3, 512), m ? LL_TYPE_Q6_K : LL_TYPE_Q4_K);
        assert_int_equal(convert_tensor_type(S, &hp, nm, 3, 512), i < 5 ? LL_TYPE_Q5_K : LL_TYPE_Q4_K);
        snprintf(nm, sizeof(nm), "blk.%d.ffn_down_shexp.weight", i);
        assert_int_equal(convert_tensor_type(M, &hp, nm, 2, 512), m ? LL_TYPE_Q6_K : LL_TYPE_Q4_K);
        snprintf(nm, sizeof(nm), "blk.%d.ffn_gate_exps.weight", i);
        assert_int_equal(convert_tensor_type(M, &hp, nm, 3, 2048), LL_TYPE_Q4_K);
        snprintf(nm, sizeof(nm), "blk.%d.ffn_gate_inp.weight", i);
        assert_int_equal(convert_tensor_type(M, &hp, nm, 2, 2048), LL_TYPE_F32);
        snprintf(nm, sizeof(nm), "blk.%d.ssm_conv1d.weight", i);
        assert_int_equal(convert_tensor_type(M, &hp, nm, 2, 4), LL_TYPE_F32);
        snprintf(nm, sizeof(nm), "blk.%d.attn_norm.weight", i);
        assert_int_equal(convert_tensor_type(CONVERT_BF16, &hp, nm, 1, 2048), LL_TYPE_F32);
    }
    assert_int_equal(convert_tensor_type(M, &hp, "output.weight", 2, 2048), LL_TYPE_Q6_K);
    assert_int_equal(convert_tensor_type(S, &hp, "output.weight", 2, 2048), LL_TYPE_Q6_K);
    assert_int_equal(convert_tensor_type(M, &hp, "token_embd.weight", 2, 2048), LL_TYPE_Q4_K);
    assert_int_equal(convert_tensor_type(CONVERT_Q8_0, &hp, "output.weight", 2, 2048), LL_TYPE_Q8_0);
    assert_int_equal(convert_tensor_type(CONVERT_Q6_K, &hp, "blk.0.ssm_alpha.weight", 2, 2048), LL_TYPE_Q6_K);
    assert_int_equal(convert_tensor_type(CONVERT_BF16, &hp, "blk.0.ffn_up_exps.weight", 3, 2048), LL_TYPE_BF16);
    /* rows that are not whole blocks fall back */
    assert_int_equal(convert_tensor_type(M, &hp, "blk.3.attn_gate.weight", 2, 128), LL_TYPE_Q8_0);
    assert_int_equal(convert_tensor_type(M, &hp, "blk.3.attn_gate.weight", 2, 48), LL_TYPE_F16);
    hp.tie_embeddings = 1;
    assert_int_equal(convert_tensor_type(M, &hp, "token_embd.weight", 2, 2048), LL_TYPE_Q6_K);
    convert_type t;
    assert_int_equal(convert_type_from_name("Q4_K_M", &t), 0);
    assert_int_equal(t, CONVERT_Q4_K_M);
    assert_int_equal(convert_type_from_name("q3_k", &t), -1);
}

/* ---------------------------------------------------------------- bad input */

static void copy_file(const char *from, const char *to, long limit) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    assert_non_null(a);
    assert_non_null(b);
    char buf[65536];
    size_t n;
    long tot = 0;
    while ((n = fread(buf, 1, sizeof(buf), a)) > 0) {
        if (limit >= 0 && tot + (long)n > limit) n = (size_t)(limit - tot);
        assert_int_equal(fwrite(buf, 1, n, b), n);
        tot += (long)n;
        if (limit >= 0 && tot >= limit) break;
    }
    fclose(a);
    fclose(b);
}

/* A copy of fixtures/small in dir/name, shard k (1..3) truncated to `keep` bytes (keep == -2:
 * absent). */
static void small_copy(char *dir, size_t cap, const char *name, int k, long keep) {
    path(dir, cap, g_tmp, name);
    assert_int_equal(mkdir(dir, 0755), 0);
    static const char *files[] = {"config.json", "model.safetensors.index.json", "model-00001-of-00003.safetensors",
                                  "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"};
    for (int i = 0; i < 5; i++) {
        char rel[128], to[600];
        snprintf(rel, sizeof(rel), "fixtures/small/%s", files[i]);
        path(to, sizeof(to), dir, files[i]);
        if (i == k + 1 && keep == -2) continue;
        copy_file(tu_shared_path(rel), to, i == k + 1 ? keep : -1);
    }
}

static void expect_fail(const char *src, const char *out_name, ll_status want, const char *msg_part) {
    char out[512];
    path(out, sizeof(out), g_tmp, out_name);
    convert_opts o = {.type = CONVERT_Q8_0, .threads = 2};
    ll_status s = convert_model(src, out, &o, NULL);
    print_message("%s: %s\n", out_name, ll_errmsg());
    assert_int_equal(s, want);
    if (msg_part && !strstr(ll_errmsg(), msg_part)) fail_msg("message '%s' lacks '%s'", ll_errmsg(), msg_part);
    assert_false(exists(out));
    assert_int_equal(count_matching(g_tmp, ".part."), 0);
}

static void test_bad_missing_shard(void **st) {
    (void)st;
    char d[512];
    small_copy(d, sizeof(d), "missing-shard", 2, -2);
    expect_fail(d, "missing-shard.gguf", LL_ERR_IO, "model-00002-of-00003.safetensors");
}

static void test_bad_truncated_shard(void **st) {
    (void)st;
    char d[512];
    small_copy(d, sizeof(d), "trunc-shard", 3, 100000);
    expect_fail(d, "trunc-shard.gguf", LL_ERR_FORMAT, "model-00003-of-00003.safetensors");
}

/* A synth tiny (F32) folder, then config.json / tensor header edited. */
static void tiny_synth(char *dir, size_t cap, const char *name) {
    path(dir, cap, g_tmp, name);
    qwen_hparams hp;
    assert_int_equal(synth_preset("tiny", &hp), LL_OK);
    synth_opts so = {.type = "f32", .seed = 3, .threads = 2, .quiet = 1};
    if (synth_write(&hp, &so, dir) != LL_OK) fail_msg("%s", ll_errmsg());
}

/* Replaces the first `from` after `after` in the file with `to` (same length). */
static void patch_file(const char *p, const char *after, const char *from, const char *to) {
    assert_int_equal(strlen(from), strlen(to));
    char *buf;
    size_t len;
    assert_int_equal(ll_read_file(p, &buf, &len), LL_OK);
    size_t hl = len > 1 << 20 ? 1 << 20 : len; /* headers are at the front */
    char *a = memmem(buf, hl, after, strlen(after));
    assert_non_null(a);
    char *f = memmem(a, hl - (size_t)(a - buf), from, strlen(from));
    assert_non_null(f);
    memcpy(f, to, strlen(to));
    FILE *fp = fopen(p, "wb");
    assert_int_equal(fwrite(buf, 1, len, fp), len);
    fclose(fp);
    ll_free(buf);
}

static void test_bad_wrong_shape(void **st) {
    (void)st;
    char d[512], cfg[600];
    tiny_synth(d, sizeof(d), "wrong-shape");
    path(cfg, sizeof(cfg), d, "config.json");
    /* the experts are 64 wide; the config now says 32 */
    patch_file(cfg, "moe_intermediate_size", "64", "32");
    expect_fail(d, "wrong-shape.gguf", LL_ERR_FORMAT, "layers.0.mlp.experts.gate_up_proj");
}

static void test_bad_dtype(void **st) {
    (void)st;
    char d[512], mf[600];
    tiny_synth(d, sizeof(d), "bad-dtype");
    path(mf, sizeof(mf), d, "model.safetensors");
    /* a weight matrix declared I32 (same size as F32, so the file stays consistent) */
    patch_file(mf, "layers.0.linear_attn.in_proj_z.weight", "\"F32\"", "\"I32\"");
    expect_fail(d, "bad-dtype.gguf", LL_ERR_FORMAT, "in_proj_z");
}

static void test_bad_full_disk(void **st) {
    (void)st;
    for (int direct = 0; direct < 2; direct++) { /* through the page cache, and with O_DIRECT */
        struct rlimit old, lim;
        assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
        lim = old;
        lim.rlim_cur = 1 << 20; /* a 1 MiB "disk": the small model needs ~6 MiB at q8_0 */
        void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
        setenv("LILAC_CONVERT_DIRECT", direct ? "all" : "0", 1);
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
        char out[512];
        path(out, sizeof(out), g_tmp, "full-disk.gguf");
        convert_opts o = {.type = CONVERT_Q8_0, .threads = 2};
        ll_status s = convert_model(tu_shared_path("fixtures/small"), out, &o, NULL);
        setrlimit(RLIMIT_FSIZE, &old);
        signal(SIGXFSZ, prev);
        unsetenv("LILAC_CONVERT_DIRECT");
        print_message("full disk: %s\n", ll_errmsg());
        assert_int_equal(s, LL_ERR_IO);
        assert_non_null(strstr(ll_errmsg(), "write failed"));
        assert_non_null(strstr(ll_errmsg(), strerror(EFBIG))); /* the cause, not a stale errno */
        assert_false(exists(out));
        assert_int_equal(count_matching(g_tmp, ".part."), 0);
    }
}

typedef struct { volatile int flag; int calls; } cancel_ctx;
static cancel_ctx g_cc;
static void cancel_after_first(void *ud, uint64_t done, uint64_t total) {
    (void)ud;
    (void)total;
    if (done > 0 && ++g_cc.calls == 3) g_cc.flag = 1; /* as the SIGINT handler does */
}

static void test_bad_interrupted(void **st) {
    (void)st;
    char out[512];
    path(out, sizeof(out), g_tmp, "interrupted.gguf");
    convert_opts o = {.type = CONVERT_Q4_K_M, .threads = 2, .progress = cancel_after_first, .cancel = &g_cc.flag};
    ll_status s = convert_model(tu_shared_path("fixtures/small"), out, &o, NULL);
    assert_int_equal(s, LL_ERR_CANCELLED);
    assert_false(exists(out));
    assert_int_equal(count_matching(g_tmp, ".part."), 0);
}

static void test_refuses_overwrite(void **st) {
    (void)st;
    char out[512];
    path(out, sizeof(out), g_tmp, "existing.gguf");
    FILE *f = fopen(out, "wb");
    fputs("keep me", f);
    fclose(f);
    convert_opts o = {.type = CONVERT_Q8_0, .threads = 2};
    assert_int_equal(convert_model(tu_shared_path("fixtures/small"), out, &o, NULL), LL_ERR_INVALID);
    assert_non_null(strstr(ll_errmsg(), "--force"));
    char *buf;
    size_t len;
    assert_int_equal(ll_read_file(out, &buf, &len), LL_OK);
    assert_string_equal(buf, "keep me");
    ll_free(buf);
    o.force = 1;
    assert_int_equal(convert_model(tu_shared_path("fixtures/small"), out, &o, NULL), LL_OK);
    gguf_file *g;
    assert_int_equal(gguf_open(&g, out), LL_OK);
    gguf_close(g);
}

/* ---------------------------------------------------------------- synth */

static const int32_t k_prompt[] = {1, 5, 9, 77, 100, 3, 250, 17, 42, 99, 128, 64, 7, 300, 12, 8};
#define NP ((int32_t)LL_ARRAY_LEN(k_prompt))

static float *synth_logits(const char *out, int *n_distinct_argmax, int32_t *V) {
    qwen_model *m;
    if (qwen_model_load(out, &m) != LL_OK) fail_msg("%s: %s", out, ll_errmsg());
    float *lg = tu_run_logits(m, k_prompt, NP);
    *V = m->hp.n_vocab;
    int32_t am[NP];
    int nd = 0;
    for (int32_t t = 0; t < NP; t++) {
        const float *r = lg + (int64_t)t * *V;
        int32_t a = 0;
        double mean = 0, var = 0;
        for (int32_t v = 0; v < *V; v++) {
            if (!isfinite(r[v])) fail_msg("%s: non-finite logit at %d,%d", out, t, v);
            if (r[v] > r[a]) a = v;
            mean += r[v];
        }
        mean /= *V;
        for (int32_t v = 0; v < *V; v++) var += (r[v] - mean) * (r[v] - mean);
        assert_true(sqrt(var / *V) > 0.5); /* not flat */
        int seen = 0;
        for (int k = 0; k < t; k++) seen |= am[k] == a;
        nd += !seen;
        am[t] = a;
    }
    *n_distinct_argmax = nd;
    qwen_model_free(m);
    return lg;
}

static void test_synth_round_trip(void **st) {
    (void)st;
    qwen_hparams hp;
    assert_int_equal(synth_preset("tiny", &hp), LL_OK);
    char d1[512], g1[512], d2[512];
    path(d1, sizeof(d1), g_tmp, "syn-st");
    path(g1, sizeof(g1), g_tmp, "syn.gguf");
    path(d2, sizeof(d2), g_tmp, "syn-st-seed2");
    synth_opts so = {.seed = 7, .threads = 2, .quiet = 1};
    if (synth_write(&hp, &so, d1) != LL_OK) fail_msg("%s", ll_errmsg());
    so.gguf = 1;
    if (synth_write(&hp, &so, g1) != LL_OK) fail_msg("%s", ll_errmsg());
    so.gguf = 0;
    so.seed = 8;
    if (synth_write(&hp, &so, d2) != LL_OK) fail_msg("%s", ll_errmsg());
    int nd1, nd2, nd3;
    int32_t V;
    float *a = synth_logits(d1, &nd1, &V), *b = synth_logits(g1, &nd2, &V), *c = synth_logits(d2, &nd3, &V);
    print_message("synth tiny: %d / %d / %d distinct argmax over %d positions\n", nd1, nd2, nd3, NP);
    assert_true(nd1 >= NP / 2 && nd3 >= NP / 2);
    double mx = 0, diff = 0;
    for (int64_t i = 0; i < (int64_t)NP * V; i++) {
        mx = fmax(mx, fabs((double)a[i] - b[i]));
        diff = fmax(diff, fabs((double)a[i] - c[i]));
    }
    print_message("synth tiny: |safetensors - gguf| max %.3g, |seed 7 - seed 8| max %.3g\n", mx, diff);
    assert_true(mx <= 1e-4); /* same weights; only the V-head order (sum order) differs */
    assert_true(diff > 1.0);
    free(a);
    free(b);
    free(c);
    /* refuses to overwrite */
    assert_int_equal(synth_write(&hp, &so, d1), LL_ERR_INVALID);
    /* the generated tokenizer loads and knows the chat tokens */
    tok_tokenizer *t;
    assert_int_equal(tok_load_file(d1, &t), LL_OK);
    assert_int_equal(tok_n_vocab(t), hp.n_vocab);
    assert_true(tok_find(t, "<|im_start|>") >= 0);
    assert_int_equal(tok_eos(t), tok_find(t, "<|im_end|>"));
    assert_non_null(tok_chat_template(t));
    tok_free(t);
}

static void test_synth_real_tokenizer(void **st) {
    (void)st;
    const char *gz = tu_shared_path("reference/tokenizers/qwen3/tokenizer.json.gz");
    char tj[512], cmd[1200], d[512];
    path(tj, sizeof(tj), g_tmp, "tokenizer.json");
    snprintf(cmd, sizeof(cmd), "gzip -dc '%s' > '%s'", gz, tj);
    if (system(cmd) != 0) skip();
    qwen_hparams hp;
    assert_int_equal(synth_preset("tiny", &hp), LL_OK);
    path(d, sizeof(d), g_tmp, "syn-qwen3tok");
    synth_opts so = {.tokenizer = tj, .seed = 1, .threads = 2, .quiet = 1,
                     .chat_template = tu_shared_path("reference/templates/qwen3.6-35b-a3b.chat_template.jinja")};
    if (synth_write(&hp, &so, d) != LL_OK) fail_msg("%s", ll_errmsg());
    qwen_model *m;
    if (qwen_model_load(d, &m) != LL_OK) fail_msg("%s", ll_errmsg());
    tok_tokenizer *t;
    assert_int_equal(tok_load_file(d, &t), LL_OK);
    assert_int_equal(m->hp.n_vocab, tok_n_vocab(t)); /* 151643 BPE + 26 added */
    assert_int_equal(m->hp.n_vocab, 151669);
    assert_int_equal(m->hp.eos_token_id, tok_find(t, "<|im_end|>"));
    assert_non_null(strstr(tok_chat_template(t), "<|im_start|>"));
    tok_free(t);
    qwen_model_free(m);
    /* converting it keeps the tokenizer in GGUF form */
    char g[512];
    path(g, sizeof(g), g_tmp, "syn-qwen3tok.gguf");
    convert_ok(d, g, CONVERT_Q8_0);
    gguf_file *gf;
    assert_int_equal(gguf_open(&gf, g), LL_OK);
    const char *const *toks;
    uint64_t n;
    assert_int_equal(gguf_get_arr_str(gf, "tokenizer.ggml.tokens", &toks, &n), LL_OK);
    assert_int_equal(n, 151669);
    assert_string_equal(toks[151644], "<|im_start|>");
    const char *pre, *model;
    assert_int_equal(gguf_get_str(gf, "tokenizer.ggml.pre", &pre), LL_OK);
    assert_string_equal(pre, "qwen2");
    assert_int_equal(gguf_get_str(gf, "tokenizer.ggml.model", &model), LL_OK);
    assert_string_equal(model, "gpt2");
    assert_int_equal(gguf_get_arr_str(gf, "tokenizer.ggml.merges", &toks, &n), LL_OK);
    assert_int_equal(n, 151387);
    const int32_t *types;
    assert_int_equal(gguf_get_arr_i32(gf, "tokenizer.ggml.token_type", &types, &n), LL_OK);
    assert_int_equal(types[151644], TOK_TYPE_CONTROL);
    assert_int_equal(types[100], TOK_TYPE_NORMAL);
    uint32_t eos;
    assert_int_equal(gguf_get_u32(gf, "tokenizer.ggml.eos_token_id", &eos), LL_OK);
    assert_int_equal(eos, 151645);
    assert_true(gguf_has(gf, "tokenizer.chat_template"));
    gguf_close(gf);
    /* and the GGUF's tokenizer encodes exactly as the HF files do */
    tok_tokenizer *th, *tg;
    assert_int_equal(tok_load_file(d, &th), LL_OK);
    if (tok_load_file(g, &tg) != LL_OK) fail_msg("%s", ll_errmsg());
    assert_int_equal(tok_n_vocab(th), tok_n_vocab(tg));
    assert_int_equal(tok_eos(th), tok_eos(tg));
    assert_string_equal(tok_chat_template(th), tok_chat_template(tg));
    static const char *texts[] = {"Hello, world! <|im_start|>user\nCafé naïve 東京 123456 <think>x</think>",
                                  "  leading spaces\t\ttabs\n\n\nnewlines ☃️🎉 e\xcc\x81 (NFC)", "def f(x):\n    return x**2  # ok"};
    for (size_t i = 0; i < LL_ARRAY_LEN(texts); i++) {
        tok_ids a = {0}, b = {0};
        assert_int_equal(tok_encode(th, texts[i], strlen(texts[i]), 0, &a), LL_OK);
        assert_int_equal(tok_encode(tg, texts[i], strlen(texts[i]), 0, &b), LL_OK);
        assert_int_equal(a.n, b.n);
        assert_memory_equal(a.ids, b.ids, a.n * sizeof(int32_t));
        tok_ids_free(&a);
        tok_ids_free(&b);
    }
    tok_free(th);
    tok_free(tg);
}

/* ---------------------------------------------------------------- MLX fixture */

/* tests/fixtures/small-mlx4, made from shared/fixtures/small by tests/gen/gen_mlx_fixture.py on the
 * GPU machine (torch + transformers; run 2026-11-30) and committed: MLX loading against
 * transformers on the dequantized weights, and `lilac convert` from the MLX folder (f32 keeps the
 * dequantized values exactly). */
static void test_mlx_fixture(void **st) {
    (void)st;
    const char *dir = "tests/fixtures/small-mlx4";
    if (!tu_is_dir(dir)) {
        print_message("fixtures/small-mlx4 is absent: run tests/gen/gen_mlx_fixture.py on the GPU machine (torch + transformers)\n");
        skip();
    }
    golden g;
    golden_open(&g, "small-mlx4");
    qwen_model *m;
    if (qwen_model_load(dir, &m) != LL_OK) fail_msg("%s", ll_errmsg());
    assert_string_equal(m->format_name, "mlx");
    float *lg = tu_run_logits(m, g.tok, g.T);
    double mx = 0;
    for (int64_t i = 0; i < (int64_t)g.T * g.V; i++) mx = fmax(mx, fabs((double)lg[i] - g.logits[i]));
    print_message("small-mlx4: max |logit - golden| = %.3g\n", mx);
    assert_true(mx <= 1e-3);
    free(lg);
    qwen_model_free(m);
    char out[512];
    path(out, sizeof(out), g_tmp, "mlx-f32.gguf");
    convert_ok(dir, out, CONVERT_F32);
    if (qwen_model_load(out, &m) != LL_OK) fail_msg("%s", ll_errmsg());
    lg = tu_run_logits(m, g.tok, g.T);
    mx = 0;
    for (int64_t i = 0; i < (int64_t)g.T * g.V; i++) mx = fmax(mx, fabs((double)lg[i] - g.logits[i]));
    print_message("small-mlx4 → f32 GGUF: max |logit - golden| = %.3g\n", mx);
    assert_true(mx <= 1e-3);
    free(lg);
    qwen_model_free(m);
    st_close(&g.f);
}

static int setup(void **st) {
    (void)st;
    g_tmp = tu_tmpdir();
    return 0;
}

static int teardown(void **st) {
    (void)st;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_tmp);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_type_rule),
        cmocka_unit_test(test_convert_bf16_golden),
        cmocka_unit_test(test_convert_quantized_quality),
        cmocka_unit_test(test_quantize_gguf_matches_direct),
        cmocka_unit_test(test_output_independent_of_simd_and_threads),
        cmocka_unit_test(test_direct_io_same_bytes),
        cmocka_unit_test(test_bad_missing_shard),
        cmocka_unit_test(test_bad_truncated_shard),
        cmocka_unit_test(test_bad_wrong_shape),
        cmocka_unit_test(test_bad_dtype),
        cmocka_unit_test(test_bad_full_disk),
        cmocka_unit_test(test_bad_interrupted),
        cmocka_unit_test(test_refuses_overwrite),
        cmocka_unit_test(test_synth_round_trip),
        cmocka_unit_test(test_synth_real_tokenizer),
        cmocka_unit_test(test_mlx_fixture),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
