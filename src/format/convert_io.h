/*
 * convert_io.h — the converter's file I/O around the page cache (see convert_io.c).
 *
 * Source: a cold model file is read with O_DIRECT into the converter's own reused buffers
 * (conv_src_*), which costs about a third of the CPU time of faulting the same bytes in through
 * the memory mapping: no page-cache pages to allocate, insert, map and free, and the buffer's
 * pages are warm in the TLB (and, in a virtual machine, in the host's page tables), where freshly
 * read page-cache pages are touched for the first time. Pages already in the page cache are
 * still read through the mapping (that is cheaper than reading them again from the disk).
 *
 * Output: a stdio stream whose whole 4 KiB blocks go to the file with O_DIRECT (no copy into the
 * page cache); the last partial block is written normally before the fsync (conv_out_*).
 *
 * Both fall back to ordinary I/O where O_DIRECT is not available (tmpfs, some network file
 * systems) and can be turned off with LILAC_CONVERT_DIRECT (see convert.h).
 */
#ifndef LILAC_CONVERT_IO_H
#define LILAC_CONVERT_IO_H

#include <stdio.h>

#include "../base/base.h"

#define CONV_IO_ALIGN 4096 /* file offset / length / memory alignment used for O_DIRECT */

/* An accounted (ll_malloc) buffer of n bytes aligned to CONV_IO_ALIGN; *raw is what to ll_free. */
void *conv_io_alloc(size_t n, void **raw);

/* ---- output */

typedef struct conv_out conv_out;

/* Takes ownership of `fd` (open for writing at offset 0, empty); with `direct`, tries O_DIRECT
 * (silently plain writes where the file system refuses it). `label` names the file in messages
 * and must outlive the object. */
ll_status conv_out_open(conv_out **out, int fd, int direct, const char *label);
/* The stream to write to (unbuffered: every fwrite reaches the object; errors set errno and
 * make fwrite fail, as a full disk does). A buffer whose address is congruent to the stream
 * position modulo CONV_IO_ALIGN is written without a copy (apart from its first and last partial
 * block); any other buffer is copied through a staging buffer first. */
FILE *conv_out_stream(conv_out *o);
/* Bytes written through the stream so far. */
uint64_t conv_out_tell(const conv_out *o);
/* Whether whole blocks currently go out with O_DIRECT. */
int conv_out_is_direct(const conv_out *o);
/* Bytes written to the file with O_DIRECT so far, and bytes copied into the staging buffer. */
uint64_t conv_out_direct_bytes(const conv_out *o);
uint64_t conv_out_staged_bytes(const conv_out *o);
/* Writes what is still staged and fsyncs; on failure LL_ERR_IO "LABEL: write failed: ...". */
ll_status conv_out_finish(conv_out *o);
/* Closes the stream and the file (after conv_out_finish, or to give up). NULL is fine. */
void conv_out_close(conv_out *o);

/* ---- source */

typedef struct conv_src conv_src;

/* Opens `n` memory-mapped files again for O_DIRECT reads: base[i] / size[i] is file i's mapping
 * and path[i] its path (NULL: not a file; never read directly). Returns NULL (no error) when no
 * file can be opened that way. */
conv_src *conv_src_open(int n, const uint8_t *const *base, const size_t *size, const char *const *path);
void conv_src_close(conv_src *s);
/* The file holding the mapped bytes [p, p + n), and their offset in it; -1 if none does (or
 * direct reads were given up). */
int conv_src_locate(const conv_src *s, const void *p, size_t n, uint64_t *off);
/* Whether every page of the mapped bytes [p, p + n) is in the page cache (mincore); `vec` is a
 * scratch buffer the function grows as needed (free with ll_free). */
int conv_src_resident(const void *p, size_t n, unsigned char **vec, size_t *vec_cap);
/* Reads file bytes [a, b) (a and b multiples of CONV_IO_ALIGN, or b at most CONV_IO_ALIGN - 1
 * past the end of the file) into dst (aligned); at least `need` bytes must arrive. Returns 0,
 * 1 when O_DIRECT reads turn out not to work here (the caller then uses the mapping; further
 * calls to conv_src_locate return -1), or -1 on a read error (message in msg). */
int conv_src_read(conv_src *s, int file, uint64_t a, uint64_t b, uint64_t need, uint8_t *dst, char *msg, size_t msg_cap);

#endif
