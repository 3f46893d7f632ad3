/* mapfile.c — see mapfile.h. */
#include "mapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

ll_status ll_mapfile_open(ll_mapfile *m, const char *path) {
    memset(m, 0, sizeof(*m));
    int fd = open(path, O_RDONLY);
    if (fd < 0) return ll_err(LL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return ll_err(LL_ERR_IO, "%s: not a regular file", path);
    }
    m->path = ll_strdup(path);
    if (!m->path) { close(fd); return ll_err(LL_ERR_OOM, "%s: out of memory", path); }
    m->size = (size_t)st.st_size;
    if (m->size > 0) {
        void *p = mmap(NULL, m->size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            close(fd);
            ll_free(m->path);
            m->path = NULL;
            return ll_err(LL_ERR_IO, "%s: mmap failed: %s", path, strerror(errno));
        }
        m->data = p;
    }
    close(fd);
    return LL_OK;
}

void ll_mapfile_close(ll_mapfile *m) {
    if (m->data) munmap((void *)m->data, m->size);
    ll_free(m->path);
    memset(m, 0, sizeof(*m));
}

ll_status ll_read_file(const char *path, char **out, size_t *len) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return ll_err(LL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = ll_malloc(cap);
    if (!buf) { fclose(f); return ll_err(LL_ERR_OOM, "%s: out of memory", path); }
    for (;;) {
        if (n + 1 >= cap) {
            char *nb = ll_realloc(buf, cap * 2);
            if (!nb) { ll_free(buf); fclose(f); return ll_err(LL_ERR_OOM, "%s: out of memory", path); }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) { ll_free(buf); return ll_err(LL_ERR_IO, "%s: read error", path); }
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return LL_OK;
}
