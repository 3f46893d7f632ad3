/* jobq.c — bounded FIFO of pointers with removal. See jobq.h. */
#include "server/jobq.h"

ll_status ll_jobq_init(ll_jobq *q, size_t cap) {
    memset(q, 0, sizeof(*q));
    q->items = ll_calloc(cap ? cap : 1, sizeof(void *));
    if (!q->items) return ll_err(LL_ERR_OOM, "jobq: cannot allocate %zu slots", cap);
    q->cap = cap;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    return LL_OK;
}

void ll_jobq_destroy(ll_jobq *q) {
    if (!q->items) return;
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    ll_free(q->items);
    memset(q, 0, sizeof(*q));
}

int ll_jobq_push(ll_jobq *q, void *item) {
    LL_ASSERT(item);
    pthread_mutex_lock(&q->mu);
    int rc = q->closed ? -2 : q->len >= q->cap ? -1 : 0;
    if (rc == 0) {
        q->items[(q->head + q->len) % q->cap] = item;
        q->len++;
        pthread_cond_signal(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

void *ll_jobq_pop(ll_jobq *q) {
    pthread_mutex_lock(&q->mu);
    while (q->len == 0 && !q->closed) pthread_cond_wait(&q->cv, &q->mu);
    void *item = NULL;
    if (q->len) {
        item = q->items[q->head];
        q->head = (q->head + 1) % q->cap;
        q->len--;
    }
    pthread_mutex_unlock(&q->mu);
    return item;
}

int ll_jobq_remove(ll_jobq *q, void *item) {
    pthread_mutex_lock(&q->mu);
    int found = 0;
    for (size_t i = 0; i < q->len; i++) {
        if (q->items[(q->head + i) % q->cap] != item) continue;
        /* close the gap, keeping the order of the others */
        for (size_t j = i; j + 1 < q->len; j++) q->items[(q->head + j) % q->cap] = q->items[(q->head + j + 1) % q->cap];
        q->len--;
        found = 1;
        break;
    }
    pthread_mutex_unlock(&q->mu);
    return found;
}

size_t ll_jobq_len(ll_jobq *q) {
    pthread_mutex_lock(&q->mu);
    size_t n = q->len;
    pthread_mutex_unlock(&q->mu);
    return n;
}

void ll_jobq_close(ll_jobq *q) {
    pthread_mutex_lock(&q->mu);
    q->closed = 1;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}
