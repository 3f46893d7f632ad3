/*
 * webpage.c — embeds web/index.html (the chat page served at /) in the binary, NUL-terminated,
 * as ll_web_index_html. The page stays a plain HTML file in the tree so that it can be edited and
 * opened as such; the assembler includes its bytes at build time (paths are relative to the
 * repository root, where make runs; the Makefile lists the page as a prerequisite of this object).
 */
#include "server/server.h"

__asm__(".pushsection .rodata\n"
        ".global ll_web_index_html\n"
        ".type ll_web_index_html, @object\n"
        ".balign 16\n"
        "ll_web_index_html:\n"
        ".incbin \"web/index.html\"\n"
        ".byte 0\n"
        ".size ll_web_index_html, . - ll_web_index_html\n"
        ".popsection\n");
