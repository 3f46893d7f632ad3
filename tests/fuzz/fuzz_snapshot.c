/* fuzz_snapshot.c — libFuzzer target for snapshot files: any bytes loaded as a snapshot must give
 * LL_OK or a clean error, never a crash, a leak or an absurd allocation. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "runtime/snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    snprintf(path, sizeof(path), "/tmp/fuzz-snap-%d", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    ll_snap_file sf;
    if (ll_snap_load(path, "m", &sf) == LL_OK) {
        ll_snap_store *st = ll_snap_store_new(1 << 20);
        if (st) {
            (void)ll_snap_store_put(st, "ns", sf.snap.tokens, sf.snap.n_tokens, sf.snap.blob, sf.snap.blob_size);
            (void)ll_snap_store_lookup(st, "ns", sf.snap.tokens, sf.snap.n_tokens);
            ll_snap_store_free(st);
        }
        ll_snap_file_free(&sf);
    }
    unlink(path);
    return 0;
}
