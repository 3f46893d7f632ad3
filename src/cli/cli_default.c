/* cli_default.c — the model lilac uses when none is given: $LILAC_MODEL if set, else the shipped
 * demonstration model (models/lilac-demo) found beside the binary (build/lilac -> ../models) or
 * under the current directory. See models/README.md. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#define DEMO_DIR "models/lilac-demo"

static int has_config(const char *dir) {
    char p[2 * PATH_MAX]; /* dir is at most PATH_MAX + 64 bytes (see below) */
    struct stat st;
    int n = snprintf(p, sizeof(p), "%s/config.json", dir);
    return n > 0 && (size_t)n < sizeof(p) && stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

const char *cli_default_model(void) {
    static char buf[PATH_MAX + 64];
    const char *env = getenv("LILAC_MODEL");
    if (env && *env) return env;
    /* the binary's own folder: build/lilac (or an installed bin/lilac) -> ../models/lilac-demo */
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            int k = snprintf(buf, sizeof(buf), "%s/../%s", exe, DEMO_DIR);
            if (k > 0 && (size_t)k < sizeof(buf) && has_config(buf)) return buf;
        }
    }
    if (has_config(DEMO_DIR)) return DEMO_DIR;
    return NULL;
}
