/* main.c — `lilac <command> ...`: dispatch to the subcommands. */
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "cli.h"

static const struct {
    const char *name;
    cli_cmd_fn fn;
    const char *help;
} commands[] = {
    /* keep one line per command; each helper adds its own line */
    {"info", cmd_info, "show a model's architecture, tensors, types and memory"},
    {"logits", cmd_logits, "write the logits of a token sequence to a safetensors file"},
    {"serve", cmd_serve, "OpenAI-compatible HTTP server (chat, completions, models, metrics, web page)"},
    {"run", cmd_run, "generate from a prompt (raw text, token ids, or --chat)"},
    {"chat", cmd_chat, "interactive multi-turn chat with session save/load"},
    {"tokenize", cmd_tokenize, "print the token ids (or strings) of stdin as a JSON array"},
    {"detokenize", cmd_detokenize, "print the text of a JSON array of token ids"},
    {"template", cmd_template, "render a chat template for an OpenAI-style request"},
    {"convert", cmd_convert, "convert an HF / MLX / GGUF model to a llama.cpp GGUF (bf16, q8_0, q6_k, q4_k_m, ...)"},
    {"quantize", cmd_convert, "re-quantize a GGUF to another type"},
    {"synth", cmd_synth, "write a model with random weights (any configuration, real tokenizer)"},
    {"bench", cmd_bench, "batch-1 prefill/decode throughput (synthetic or real model)"},
    {"scan", cmd_scan, "find personal data and secrets in a text (spans, sensitivity)"},
    {"mask", cmd_mask, "replace personal data with numbered placeholders (--map saves the mapping)"},
    {"unmask", cmd_unmask, "restore placeholders from a --map file"},
};

int cli_kv_cache(const char *v, int *kv_q8) {
    if (!strcmp(v, "auto")) *kv_q8 = 0;
    else if (!strcmp(v, "q8")) *kv_q8 = 1;
    else if (!strcmp(v, "bf16")) *kv_q8 = -1;
    else return -1;
    return 0;
}

int cli_fail(const char *cmd, const char *msg) {
    fprintf(stderr, "lilac %s: %s\n", cmd, msg);
    return 1;
}

static void usage(FILE *f) {
    fprintf(f, "usage: lilac <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < LL_ARRAY_LEN(commands); i++) fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n`lilac <command> --help` describes a command's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < LL_ARRAY_LEN(commands); i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "lilac: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
