/* cmd_weak.c — weak fallbacks for subcommands whose cmd_<name>.c lives on another branch, so that
 * this branch links on its own. A real (strong) definition replaces these at link time; delete
 * this file once every command in main.c's table is defined on main. */
#include <stdio.h>

#include "cli/cli.h"

__attribute__((weak)) int cmd_info(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail("info", "not built into this binary");
}

__attribute__((weak)) int cmd_logits(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail("logits", "not built into this binary");
}
