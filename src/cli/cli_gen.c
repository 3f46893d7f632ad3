/* cli_gen.c — see cli_gen.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <unistd.h>

#include "cli.h"
#include "cli_gen.h"

enum { S_TEMP, S_TOPK, S_TOPP, S_MINP, S_REP, S_PRES, S_FREQ, S_SEED };

void cli_gen_init(cli_gen_opts *o) {
    memset(o, 0, sizeof(*o));
    o->ep.backend = "auto";
    o->rq.sampling = ll_sampler_defaults();
    o->rq.stop = o->stops;
    o->think = -1;
}

static int parse_f(const char *flag, const char *v, float lo, float hi, float *out) {
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !(d >= lo && d <= hi)) {
        ll_err(LL_ERR_INVALID, "%s: expected a number in [%g, %g], got '%s'", flag, lo, hi, v);
        return -1;
    }
    *out = (float)d;
    return 1;
}

static int parse_i(const char *flag, const char *v, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long d = strtoll(v, &end, 10);
    if (errno || end == v || *end || d < lo || d > hi) {
        ll_err(LL_ERR_INVALID, "%s: expected an integer in [%lld, %lld], got '%s'", flag, lo, hi, v);
        return -1;
    }
    *out = d;
    return 1;
}

int cli_gen_parse(cli_gen_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    static const char *const with_value[] = {"-m", "--model", "--tokenizer", "--template", "--backend", "--kv-cache", "--ctx",
                                             "--threads", "-n", "--max-tokens", "--temp", "--top-k", "--top-p",
                                             "--min-p", "--repeat-penalty", "--presence-penalty",
                                             "--frequency-penalty", "--seed", "--stop"};
    int known = 0;
    for (size_t k = 0; k < LL_ARRAY_LEN(with_value); k++) known |= !strcmp(a, with_value[k]);
    if (!strcmp(a, "--no-think")) { o->think = 0; return 1; }
    if (!strcmp(a, "--think")) { o->think = 1; return 1; }
    if (!known) return 0;
    if (*i + 1 >= argc) { ll_err(LL_ERR_INVALID, "%s: missing value", a); return -1; }
    const char *v = argv[++*i];
    long long n;
    ll_sampler_params *s = &o->rq.sampling;
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->ep.model_path = v;
    else if (!strcmp(a, "--tokenizer")) o->ep.tokenizer_path = v;
    else if (!strcmp(a, "--template")) o->ep.template_path = v;
    else if (!strcmp(a, "--backend")) o->ep.backend = v;
    else if (!strcmp(a, "--kv-cache")) {
        int k;
        if (cli_kv_cache(v, &k) < 0) { ll_err(LL_ERR_INVALID, "--kv-cache %s: auto, bf16 or q8", v); return -1; }
        o->ep.kv_q8 = k;
    }
    else if (!strcmp(a, "--ctx")) { if (parse_i(a, v, 1, 1 << 24, &n) < 0) return -1; o->ep.n_ctx = (int32_t)n; }
    else if (!strcmp(a, "--threads")) { if (parse_i(a, v, 1, 1024, &n) < 0) return -1; o->ep.n_threads = (int32_t)n; }
    else if (!strcmp(a, "-n") || !strcmp(a, "--max-tokens")) { if (parse_i(a, v, 1, 1 << 24, &n) < 0) return -1; o->rq.max_tokens = (int32_t)n; }
    else if (!strcmp(a, "--temp")) { o->sampling_set[S_TEMP] = 1; return parse_f(a, v, 0, 100, &s->temperature); }
    else if (!strcmp(a, "--top-k")) { if (parse_i(a, v, 0, 1 << 24, &n) < 0) return -1; s->top_k = (int32_t)n; o->sampling_set[S_TOPK] = 1; }
    else if (!strcmp(a, "--top-p")) { o->sampling_set[S_TOPP] = 1; return parse_f(a, v, 1e-6f, 1, &s->top_p); }
    else if (!strcmp(a, "--min-p")) { o->sampling_set[S_MINP] = 1; return parse_f(a, v, 0, 1, &s->min_p); }
    else if (!strcmp(a, "--repeat-penalty")) { o->sampling_set[S_REP] = 1; return parse_f(a, v, 1e-3f, 100, &s->repetition_penalty); }
    else if (!strcmp(a, "--presence-penalty")) { o->sampling_set[S_PRES] = 1; return parse_f(a, v, -2, 2, &s->presence_penalty); }
    else if (!strcmp(a, "--frequency-penalty")) { o->sampling_set[S_FREQ] = 1; return parse_f(a, v, -2, 2, &s->frequency_penalty); }
    else if (!strcmp(a, "--seed")) { if (parse_i(a, v, 0, INT64_MAX, &n) < 0) return -1; s->seed = (uint64_t)n; o->sampling_set[S_SEED] = 1; }
    else if (!strcmp(a, "--stop")) {
        if (o->rq.n_stop >= CLI_MAX_STOPS) { ll_err(LL_ERR_INVALID, "--stop: at most %d", CLI_MAX_STOPS); return -1; }
        if (!*v) { ll_err(LL_ERR_INVALID, "--stop: empty string"); return -1; }
        o->stops[o->rq.n_stop++] = v;
    }
    return 1;
}

void cli_gen_apply_defaults(cli_gen_opts *o, const ll_engine *e) {
    ll_sampler_params d = ll_engine_default_sampling(e), *s = &o->rq.sampling;
    if (!o->sampling_set[S_TEMP]) s->temperature = d.temperature;
    if (!o->sampling_set[S_TOPK]) s->top_k = d.top_k;
    if (!o->sampling_set[S_TOPP]) s->top_p = d.top_p;
    if (!o->sampling_set[S_MINP]) s->min_p = d.min_p;
}

void cli_gen_usage(FILE *f) {
    fprintf(f,
            "model:    -m MODEL [--tokenizer PATH] [--template FILE.jinja] [--backend cpu|cuda|auto]\n"
            "          [--ctx N] [--threads N] [--kv-cache auto|bf16|q8]\n"
            "          (no -m: $LILAC_MODEL, else the shipped demo model models/lilac-demo)\n"
            "sampling: [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p M] [--repeat-penalty R]\n"
            "          [--presence-penalty P] [--frequency-penalty F] [--seed S] [--stop STR]...\n"
            "          (unset sampling flags take the model's generation_config.json defaults)\n"
            "thinking: [--think | --no-think]  (chat template's enable_thinking)\n");
}

void cli_gen_print_stats(const ll_gen_result *r) {
    fprintf(stderr, "\n[prompt %d tok (cached %d) | prefill %.1f tok/s | decode %.1f tok/s (%d tok)]\n", r->prompt_tokens,
            r->cached_tokens, r->prefill_sec > 0 ? (r->prompt_tokens - r->cached_tokens) / r->prefill_sec : 0.0,
            r->decode_sec > 0 ? r->completion_tokens / r->decode_sec : 0.0, r->completion_tokens);
}

/* ---- progress bar ---- */

static int g_bar_open;
static char g_bar_stage[32];
static double g_bar_t0;

static void progress_bar(void *ud, const char *stage, double frac) {
    (void)ud;
    if (strncmp(g_bar_stage, stage, sizeof(g_bar_stage) - 1)) { /* a new stage starts a new line */
        if (g_bar_open) fputc('\n', stderr);
        snprintf(g_bar_stage, sizeof(g_bar_stage), "%s", stage);
        g_bar_t0 = ll_time_sec();
    }
    int w = 30, done = (int)(frac * w + 0.5);
    char bar[32];
    for (int i = 0; i < w; i++) bar[i] = i < done ? '#' : '.';
    bar[w] = 0;
    fprintf(stderr, "\r%-18s [%s] %3d%%  %.1f s", stage, bar, (int)(frac * 100 + 0.5), ll_time_sec() - g_bar_t0);
    g_bar_open = 1;
    if (frac >= 1.0) { fputc('\n', stderr); g_bar_open = 0; g_bar_stage[0] = 0; }
    fflush(stderr);
}

void cli_progress_install(void) {
    if (isatty(2)) ll_progress_set(progress_bar, NULL);
}

void cli_progress_done(void) {
    if (g_bar_open) { progress_bar(NULL, g_bar_stage, 1.0); }
    ll_progress_set(NULL, NULL);
}
