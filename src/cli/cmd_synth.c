/* cmd_synth.c — `lilac synth (--preset NAME | --config FILE) [--tokenizer TOK] [--format
 * gguf|safetensors] [--type TYPE] [--seed N] -o OUT`: a random-weight model (format/synth.h). */
#include <stdio.h>
#include <stdlib.h>

#include "base/base.h"
#include "cli.h"
#include "base/mapfile.h"
#include "format/hfconfig.h"
#include "format/synth.h"

static void usage(FILE *f) {
    fprintf(f, "usage: lilac synth (--preset NAME | --config FILE) [--tokenizer TOKENIZER] [--chat-template FILE]\n"
               "                   [--format safetensors|gguf] [--type TYPE] [--seed N] [--threads N] [--force] -o OUT\n\n"
               "Writes a qwen3_5_moe model with random weights (scaled so it produces varied tokens).\n"
               "  --preset       tiny | small | qwen3.6-35b-a3b\n"
               "  --config       an HF config.json (nested qwen3_5_moe or flat qwen3_5_moe_text)\n"
               "  --tokenizer    tokenizer.json (or a folder holding it); the vocabulary follows it. Without it a\n"
               "                 byte-level tokenizer with the Qwen control tokens is generated.\n"
               "  --chat-template  a .jinja file (default: the tokenizer's own, else ChatML)\n"
               "  --format       safetensors (default; OUT is a directory: config.json, model.safetensors,\n"
               "                 tokenizer files, generation_config.json) or gguf (OUT is a file)\n"
               "  --type         safetensors: bf16 (default) or f32; gguf: f32, bf16, q8_0, q6_k, q4_k_m, q4_k_s\n");
}

int cmd_synth(int argc, char **argv) {
    const char *preset = NULL, *config = NULL, *out = NULL, *format = "safetensors";
    synth_opts o = {0};
    o.seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--preset") && more) preset = argv[++i];
        else if (!strcmp(a, "--config") && more) config = argv[++i];
        else if (!strcmp(a, "--tokenizer") && more) o.tokenizer = argv[++i];
        else if (!strcmp(a, "--chat-template") && more) o.chat_template = argv[++i];
        else if (!strcmp(a, "--format") && more) format = argv[++i];
        else if (!strcmp(a, "--type") && more) o.type = argv[++i];
        else if (!strcmp(a, "--seed") && more) {
            char *end;
            o.seed = strtoull(argv[++i], &end, 10);
            if (*end) { fprintf(stderr, "lilac synth: --seed '%s' is not a number\n", argv[i]); return 2; }
        } else if (!strcmp(a, "--threads") && more) o.threads = atoi(argv[++i]);
        else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && more) out = argv[++i];
        else if (!strcmp(a, "-f") || !strcmp(a, "--force")) o.force = 1;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) o.quiet = 1;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else { fprintf(stderr, "lilac synth: unexpected argument '%s'\n", a); usage(stderr); return 2; }
    }
    if (!out || (!preset) == (!config)) { usage(stderr); return 2; }
    if (!strcmp(format, "gguf")) o.gguf = 1;
    else if (strcmp(format, "safetensors") != 0) {
        fprintf(stderr, "lilac synth: unknown --format '%s' (safetensors or gguf)\n", format);
        return 2;
    }
    qwen_hparams hp;
    if (preset) {
        if (synth_preset(preset, &hp) != LL_OK) return cli_fail("synth", ll_errmsg());
    } else {
        char *txt;
        size_t len;
        if (ll_read_file(config, &txt, &len) != LL_OK) return cli_fail("synth", ll_errmsg());
        ll_status st = hfconfig_parse(txt, len, config, &hp, NULL);
        ll_free(txt);
        if (st != LL_OK) return cli_fail("synth", ll_errmsg());
    }
    if (synth_write(&hp, &o, out) != LL_OK) return cli_fail("synth", ll_errmsg());
    if (!o.quiet) fprintf(stderr, "wrote %s\n", out);
    return 0;
}
