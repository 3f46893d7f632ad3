/* cli_io.h — small helpers shared by the text-side subcommands (tokenize, detokenize, template). */
#ifndef LILAC_CLI_IO_H
#define LILAC_CLI_IO_H

#include <stddef.h>
#include <stdio.h>

/* Reads all of `f` into an ll_malloc'd, NUL-terminated buffer; NULL on failure. */
char *cli_read_stream(FILE *f, size_t *len);
/* The same for a file path; NULL (and errno) on failure. */
char *cli_read_path(const char *path, size_t *len);

#endif
