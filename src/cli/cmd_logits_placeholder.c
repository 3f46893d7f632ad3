/*
 * cmd_logits_placeholder.c — a weak stand-in for `lilac logits` so the binary links on
 * branches without the forward pass. The real cmd_logits (src/cli/cmd_logits.c, strong symbol)
 * replaces it at link time; delete this file once that is merged.
 */
#include "cli.h"

__attribute__((weak)) int cmd_logits(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail("logits", "not available in this build (the forward pass is not linked)");
}
