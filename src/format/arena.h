/* arena.h — bump allocator in chained chunks: many small allocations, one free. Used by the
 * GGUF reader (metadata strings/arrays) and the model loader (converted small tensors, repacked
 * MLX blocks). An arena is a `void *` that starts NULL. */
#ifndef LILAC_ARENA_H
#define LILAC_ARENA_H

#include "../base/base.h"

/* 64-byte aligned, uninitialised; NULL on OOM. */
void *fmt_arena_alloc(void **arena, size_t n);
void fmt_arena_free(void *arena);
/* Bytes handed out so far (for memory reports). */
size_t fmt_arena_used(const void *arena);

#endif
