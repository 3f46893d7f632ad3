/* cli_io.h — small helpers shared by the subcommands: whole inputs, token-id lists. */
#ifndef LILAC_CLI_IO_H
#define LILAC_CLI_IO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Reads all of `f` into an ll_malloc'd, NUL-terminated buffer; NULL on failure. */
char *cli_read_stream(FILE *f, size_t *len);
/* The same for a file path; NULL (and errno) on failure. */
char *cli_read_path(const char *path, size_t *len);

/* Parses a comma-separated list of decimal token ids ("1,2,3"; one trailing comma allowed) into a
 * new ll_malloc'd array. Returns the count (0 for an empty list, with *out NULL), or -1 with the
 * error message set, naming `flag` and the byte offset of the first bad character. */
int cli_parse_ids(const char *flag, const char *s, int32_t **out);

#endif
