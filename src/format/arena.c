/* arena.c — see arena.h. */
#include "arena.h"

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    unsigned char *mem;   /* 64-byte aligned start inside the allocation */
} arena_chunk;

#define ARENA_CHUNK (1u << 20)

void *fmt_arena_alloc(void **arena, size_t n) {
    arena_chunk *c = *arena;
    n = (n + 63) & ~(size_t)63;
    if (!c || c->cap - c->used < n) {
        /* big requests get a chunk of their own, inserted behind the current one so the
         * current chunk's free space is not wasted */
        size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
        arena_chunk *nc = ll_malloc(sizeof(arena_chunk) + cap + 63);
        if (!nc) return NULL;
        nc->mem = (unsigned char *)(((uintptr_t)(nc + 1) + 63) & ~(uintptr_t)63);
        nc->used = 0;
        nc->cap = cap;
        if (c && n > ARENA_CHUNK) {
            nc->next = c->next;
            c->next = nc;
            nc->used = n;
            return nc->mem;
        }
        nc->next = c;
        *arena = c = nc;
    }
    void *p = c->mem + c->used;
    c->used += n;
    return p;
}

void fmt_arena_free(void *arena) {
    arena_chunk *c = arena;
    while (c) {
        arena_chunk *n = c->next;
        ll_free(c);
        c = n;
    }
}

size_t fmt_arena_used(const void *arena) {
    size_t n = 0;
    for (const arena_chunk *c = arena; c; c = c->next) n += c->used;
    return n;
}
