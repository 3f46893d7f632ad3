/* threadpool.c — see threadpool.h. Workers spin briefly and then sleep on a condition
 * variable, so decode (many short parallel regions per token) pays little wake-up latency. */
#include "threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

struct ll_pool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ll_pool_fn fn;
    void *ctx;
    atomic_uint generation; /* bumped for each job */
    atomic_int pending;     /* workers still running the current job */
    atomic_int stop;
    atomic_int waiting;     /* the caller sleeps on done_cv until pending reaches 0 */
    pthread_cond_t done_cv;
};

typedef struct { ll_pool *p; int ith; } worker_arg;

static void *worker_main(void *arg) {
    worker_arg wa = *(worker_arg *)arg;
    ll_free(arg);
    ll_pool *p = wa.p;
    unsigned seen = 0;
    for (;;) {
        unsigned gen;
        int spins = 0;
        while ((gen = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen) {
            if (atomic_load(&p->stop)) return NULL;
            if (++spins < 20000) continue;
            pthread_mutex_lock(&p->mu);
            while (atomic_load(&p->generation) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->cv, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        seen = gen;
        p->fn(p->ctx, wa.ith, p->n);
        /* seq_cst, pairing with the caller's store to waiting / load of pending (ll_pool_run):
         * either the caller sees pending at 0 or this sees it waiting and wakes it */
        if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->waiting)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_broadcast(&p->done_cv);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

ll_pool *ll_pool_new(int n_threads) {
    if (n_threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = c > 0 ? (int)c : 1;
    }
    ll_pool *p = ll_calloc(1, sizeof(*p));
    if (!p) { ll_err(LL_ERR_OOM, "thread pool: out of memory"); return NULL; }
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    p->threads = ll_calloc((size_t)n_threads, sizeof(pthread_t));
    if (!p->threads) { ll_pool_free(p); ll_err(LL_ERR_OOM, "thread pool: out of memory"); return NULL; }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = ll_malloc(sizeof(*wa));
        if (!wa) { p->n = i; ll_pool_free(p); ll_err(LL_ERR_OOM, "thread pool: out of memory"); return NULL; }
        wa->p = p;
        wa->ith = i;
        if (pthread_create(&p->threads[i], NULL, worker_main, wa) != 0) {
            ll_free(wa);
            p->n = i;
            ll_pool_free(p);
            ll_err(LL_ERR_INTERNAL, "thread pool: pthread_create failed");
            return NULL;
        }
    }
    return p;
}

void ll_pool_free(ll_pool *p) {
    if (!p) return;
    atomic_store(&p->stop, 1);
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    pthread_cond_destroy(&p->done_cv);
    ll_free(p->threads);
    ll_free(p);
}

int ll_pool_size(const ll_pool *p) { return p ? p->n : 1; }

void ll_pool_run(ll_pool *p, ll_pool_fn fn, void *ctx) {
    if (!p || p->n == 1) { fn(ctx, 0, 1); return; }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store(&p->pending, p->n - 1);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, p->n);
    /* Spin (decode's regions are short), then sleep once the wait gets long: on a loaded machine
     * the worker we wait for may be descheduled or blocked on a page fault, and a caller spinning
     * all that time burns a core that worker (or another thread of ours, e.g. convert's writer)
     * could use. */
    for (int spins = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0;) {
        if (++spins < 20000) continue;
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->waiting, 1);
        while (atomic_load(&p->pending) > 0) pthread_cond_wait(&p->done_cv, &p->mu);
        atomic_store(&p->waiting, 0);
        pthread_mutex_unlock(&p->mu);
    }
}
