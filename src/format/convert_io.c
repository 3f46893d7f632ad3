/* convert_io.c — see convert_io.h. */
#include "convert_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define A CONV_IO_ALIGN
#define STAGE_BYTES ((size_t)4 << 20) /* multiple of A */

void *conv_io_alloc(size_t n, void **raw) {
    *raw = n <= SIZE_MAX - A ? ll_malloc(n + A) : NULL;
    return *raw ? (void *)(((uintptr_t)*raw + A - 1) / A * A) : NULL;
}

/* ---------------------------------------------------------------- output */

struct conv_out {
    int fd;
    int direct;        /* O_DIRECT is set on fd */
    FILE *f;
    const char *label;
    uint8_t *stage;    /* [STAGE_BYTES], aligned; holds the stream's bytes [pos, pos + len) */
    void *stage_raw;
    size_t len;
    uint64_t pos;      /* file offset of stage[0]; a multiple of A while direct */
    uint64_t n_direct; /* bytes written with O_DIRECT */
    uint64_t n_staged; /* bytes copied into the stage */
};

/* Clears O_DIRECT (for the tail, or where the file system refuses an aligned direct write). */
static int out_plain(conv_out *o) {
    if (!o->direct) return 0;
    int fl = fcntl(o->fd, F_GETFL);
    if (fl < 0 || fcntl(o->fd, F_SETFL, fl & ~O_DIRECT) != 0) return -1;
    o->direct = 0;
    return 0;
}

static int out_pwrite(conv_out *o, const uint8_t *p, size_t n, uint64_t off) {
    while (n > 0) {
        int direct = o->direct;
        ssize_t r = pwrite(o->fd, p, n, (off_t)off);
        if (r > 0 && direct) o->n_direct += (uint64_t)r;
        if (r < 0) {
            if (errno == EINTR) continue;
            /* EINVAL from a direct write: this file system wants another alignment (or none) */
            if (errno == EINVAL && o->direct && out_plain(o) == 0) continue;
            return -1;
        }
        if (r == 0) {
            errno = EIO;
            return -1;
        }
        p += r, n -= (size_t)r, off += (uint64_t)r;
    }
    return 0;
}

/* Writes the staged bytes (a multiple of A unless this is the end of the stream). */
static int out_flush(conv_out *o) {
    if (o->len && out_pwrite(o, o->stage, o->len, o->pos) != 0) return -1;
    o->pos += o->len;
    o->len = 0;
    return 0;
}

/* The cookie's write: all n bytes, or 0 with errno set (fopencookie(3): never negative; glibc's
 * unbuffered fwrite miscounts a -1). */
static ssize_t out_write(void *cookie, const char *buf, size_t n) {
    conv_out *o = cookie;
    const uint8_t *b = (const uint8_t *)buf;
    size_t left = n;
    while (left > 0) {
        size_t fill = o->direct ? (A - o->len % A) % A : 0; /* bytes that complete the staged partial block */
        if (o->direct ? (((uintptr_t)b - o->len) % A == 0 && left >= fill + A) : (left >= STAGE_BYTES)) {
            /* direct: b sits where its bytes go within a block, and at least one whole block
             * follows: complete the staged partial block from b, write the stage, then b's
             * whole blocks straight from b. Plain: a large piece goes straight to the file. */
            memcpy(o->stage + o->len, b, fill);
            o->len += fill, b += fill, left -= fill;
            o->n_staged += fill;
            if (out_flush(o) != 0) return 0;
            size_t k = o->direct ? left / A * A : left;
            if (out_pwrite(o, b, k, o->pos) != 0) return 0;
            o->pos += k, b += k, left -= k;
            continue; /* the rest (less than a block) is staged */
        }
        size_t k = LL_MIN(left, STAGE_BYTES - o->len);
        memcpy(o->stage + o->len, b, k);
        o->len += k, b += k, left -= k;
        o->n_staged += k;
        if (o->len == STAGE_BYTES && out_flush(o) != 0) return 0;
    }
    return (ssize_t)n;
}

ll_status conv_out_open(conv_out **out, int fd, int direct, const char *label) {
    *out = NULL;
    conv_out *o = ll_calloc(1, sizeof(*o));
    if (o) o->stage = conv_io_alloc(STAGE_BYTES, &o->stage_raw);
    if (!o || !o->stage) {
        ll_free(o);
        close(fd);
        return ll_err(LL_ERR_OOM, "%s: out of memory", label);
    }
    o->fd = fd;
    o->label = label;
    if (direct) {
        int fl = fcntl(fd, F_GETFL);
        o->direct = fl >= 0 && fcntl(fd, F_SETFL, fl | O_DIRECT) == 0;
    }
    cookie_io_functions_t io = {.write = out_write};
    if (!(o->f = fopencookie(o, "w", io))) {
        ll_status st = ll_err(LL_ERR_IO, "%s: cannot open: %s", label, strerror(errno));
        conv_out_close(o);
        return st;
    }
    setvbuf(o->f, NULL, _IONBF, 0); /* every fwrite reaches out_write with the caller's pointer */
    *out = o;
    return LL_OK;
}

FILE *conv_out_stream(conv_out *o) { return o->f; }
uint64_t conv_out_tell(const conv_out *o) { return o->pos + o->len; }
int conv_out_is_direct(const conv_out *o) { return o->direct; }
uint64_t conv_out_direct_bytes(const conv_out *o) { return o->n_direct; }
uint64_t conv_out_staged_bytes(const conv_out *o) { return o->n_staged; }

ll_status conv_out_finish(conv_out *o) {
    if (fflush(o->f) != 0 || ferror(o->f)) return ll_err(LL_ERR_IO, "%s: write failed: %s", o->label, strerror(errno));
    size_t whole = o->len / A * A;
    if (whole) { /* whole blocks first (still direct), then the tail through the page cache */
        if (out_pwrite(o, o->stage, whole, o->pos) != 0) return ll_err(LL_ERR_IO, "%s: write failed: %s", o->label, strerror(errno));
        memmove(o->stage, o->stage + whole, o->len - whole);
        o->pos += whole, o->len -= whole;
    }
    if (o->len && out_plain(o) != 0) return ll_err(LL_ERR_IO, "%s: write failed: %s", o->label, strerror(errno));
    if (out_flush(o) != 0 || fsync(o->fd) != 0) return ll_err(LL_ERR_IO, "%s: write failed: %s", o->label, strerror(errno));
    return LL_OK;
}

void conv_out_close(conv_out *o) {
    if (!o) return;
    if (o->f) fclose(o->f); /* no close callback: the fd is closed here */
    close(o->fd);
    ll_free(o->stage_raw);
    ll_free(o);
}

/* ---------------------------------------------------------------- source */

typedef struct src_file {
    const uint8_t *base;
    size_t size;
    int fd; /* O_DIRECT; -1: not readable that way */
    const char *path;
} src_file;

struct conv_src {
    int n;
    int off;           /* direct reads given up */
    src_file *f;
};

conv_src *conv_src_open(int n, const uint8_t *const *base, const size_t *size, const char *const *path) {
    conv_src *s = ll_calloc(1, sizeof(*s));
    if (!s || !(s->f = ll_calloc((size_t)LL_MAX(n, 1), sizeof(*s->f)))) {
        ll_free(s);
        return NULL;
    }
    s->n = n;
    int any = 0;
    for (int i = 0; i < n; i++) {
        s->f[i] = (src_file){base[i], size[i], -1, path[i]};
        if (base[i] && path[i]) s->f[i].fd = open(path[i], O_RDONLY | O_DIRECT | O_CLOEXEC);
        any |= s->f[i].fd >= 0;
    }
    if (!any) {
        conv_src_close(s);
        return NULL;
    }
    return s;
}

void conv_src_close(conv_src *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++)
        if (s->f[i].fd >= 0) close(s->f[i].fd);
    ll_free(s->f);
    ll_free(s);
}

int conv_src_locate(const conv_src *s, const void *p, size_t n, uint64_t *off) {
    if (!s || s->off) return -1;
    uintptr_t a = (uintptr_t)p;
    for (int i = 0; i < s->n; i++) {
        uintptr_t b = (uintptr_t)s->f[i].base;
        if (s->f[i].fd >= 0 && a >= b && a - b <= s->f[i].size && n <= s->f[i].size - (a - b)) {
            *off = a - b;
            return i;
        }
    }
    return -1;
}

int conv_src_resident(const void *p, size_t n, unsigned char **vec, size_t *vec_cap) {
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0 || n == 0) return 1;
    uintptr_t a = (uintptr_t)p & ~((uintptr_t)pg - 1), b = (uintptr_t)p + n;
    size_t np = (b - a + (uintptr_t)pg - 1) / (uintptr_t)pg;
    if (np > *vec_cap) {
        unsigned char *v = ll_realloc(*vec, np);
        if (!v) return 0;
        *vec = v, *vec_cap = np;
    }
    if (mincore((void *)a, b - a, *vec) != 0) return 0;
    for (size_t i = 0; i < np; i++)
        if (!((*vec)[i] & 1)) return 0;
    return 1;
}

int conv_src_read(conv_src *s, int file, uint64_t a, uint64_t b, uint64_t need, uint8_t *dst, char *msg, size_t msg_cap) {
    src_file *f = &s->f[file];
    uint64_t got = 0;
    while (got < need) {
        ssize_t r = pread(f->fd, dst + got, (size_t)(b - a - got), (off_t)(a + got));
        if (r < 0) {
            if (errno == EINTR) continue;
            if (errno == EINVAL && got == 0) { /* O_DIRECT with this alignment does not work here */
                s->off = 1;
                return 1;
            }
            snprintf(msg, msg_cap, "%s: read failed: %s", f->path, strerror(errno));
            return -1;
        }
        if (r == 0) {
            snprintf(msg, msg_cap, "%s: read failed: the file ends at %llu bytes (it changed during the conversion?)", f->path,
                     (unsigned long long)(a + got));
            return -1;
        }
        got += (uint64_t)r;
        if (got < need && got % A) { /* a short read that is not at a block boundary: the end of the file */
            snprintf(msg, msg_cap, "%s: read failed: the file ends at %llu bytes (it changed during the conversion?)", f->path,
                     (unsigned long long)(a + got));
            return -1;
        }
    }
    return 0;
}
