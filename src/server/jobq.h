/*
 * jobq.h — the bounded FIFO between the HTTP threads and the one engine worker. It holds opaque
 * pointers; a push past the capacity fails at once (the server answers 429), and a waiting item
 * can be taken out again (its client went away before it started).
 */
#ifndef LILAC_SERVER_JOBQ_H
#define LILAC_SERVER_JOBQ_H

#include <pthread.h>

#include "base/base.h"

typedef struct ll_jobq {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    void **items; /* [cap] ring buffer */
    size_t cap, head, len;
    int closed;
} ll_jobq;

ll_status ll_jobq_init(ll_jobq *q, size_t cap); /* cap 0 is allowed: every push fails */
void ll_jobq_destroy(ll_jobq *q);
/* 0: queued; -1: full; -2: closed. */
int ll_jobq_push(ll_jobq *q, void *item);
/* Blocks until an item is available (FIFO) and removes it; NULL once closed and drained. */
void *ll_jobq_pop(ll_jobq *q);
/* Takes `item` out if it is still waiting; 1 if it was, 0 if not (already popped). */
int ll_jobq_remove(ll_jobq *q, void *item);
size_t ll_jobq_len(ll_jobq *q);
/* After close, pushes fail and pop returns what is left, then NULL. */
void ll_jobq_close(ll_jobq *q);

#endif
