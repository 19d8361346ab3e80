/* t_threads: many threads at once, threads that exit, and objects freed by
 * another thread than the one that allocated them. The sizes are chosen so
 * the test can pick these events out of the trace: workers allocate
 * 3000..3199 bytes, short-lived threads malloc 4001, calloc 5001 and
 * realloc to 6001. Prints the counts the trace must hold.
 *
 *  - WORKERS threads each do ROUNDS rounds of: allocate a batch, free half,
 *    hand the other half to the next worker through a lock-protected queue,
 *    free what the previous worker handed over. Addresses are reused across
 *    threads all the time, which is what the seq ordering must get right
 *    (a wrong order shows up as unknown frees or as a reader error).
 *  - then SHORT batches of short-lived threads, each allocating and freeing a
 *    few objects and exiting (their states are recycled).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WORKERS 6
#define ROUNDS  4000
#define BATCH   8
#define SHORT   40

typedef struct queue {
    pthread_mutex_t lock;
    void *items[1 << 16];
    size_t head, tail;
} queue_t;

static queue_t queues[WORKERS];
static _Atomic long mallocs, frees;

static void put(queue_t *q, void *p) {
    pthread_mutex_lock(&q->lock);
    q->items[q->tail++ & 0xffff] = p;
    pthread_mutex_unlock(&q->lock);
}

static void *get(queue_t *q) {
    void *p = NULL;
    pthread_mutex_lock(&q->lock);
    if (q->head != q->tail) p = q->items[q->head++ & 0xffff];
    pthread_mutex_unlock(&q->lock);
    return p;
}

static void *worker(void *arg) {
    long me = (long)arg;
    queue_t *out = &queues[(me + 1) % WORKERS], *in = &queues[me];
    unsigned seed = (unsigned)me * 7919u + 1;
    for (int r = 0; r < ROUNDS; r++) {
        void *batch[BATCH];
        for (int i = 0; i < BATCH; i++) {
            seed = seed * 1103515245u + 12345u;
            batch[i] = malloc(3000 + (seed >> 16) % 200);
            memset(batch[i], (int)me, 16);
            atomic_fetch_add(&mallocs, 1);
        }
        for (int i = 0; i < BATCH; i += 2) {
            free(batch[i]);
            atomic_fetch_add(&frees, 1);
            put(out, batch[i + 1]);
        }
        void *p;
        while ((p = get(in))) {
            free(p);
            atomic_fetch_add(&frees, 1);
        }
    }
    return NULL;
}

static void *short_lived(void *arg) {
    (void)arg;
    void *a = malloc(4001), *b = calloc(3, 1667);
    a = realloc(a, 6001);
    free(a);
    free(b);
    atomic_fetch_add(&mallocs, 3);
    atomic_fetch_add(&frees, 3);
    return NULL;
}

int main(void) {
    for (int i = 0; i < WORKERS; i++)
        pthread_mutex_init(&queues[i].lock, NULL);
    pthread_t t[WORKERS];
    for (long i = 0; i < WORKERS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(t[i], NULL);
    /* what is still queued is freed by the main thread */
    for (int i = 0; i < WORKERS; i++) {
        void *p;
        while ((p = get(&queues[i]))) {
            free(p);
            atomic_fetch_add(&frees, 1);
        }
    }
    for (int round = 0; round < SHORT; round++) {
        pthread_t s[4];
        for (int i = 0; i < 4; i++)
            pthread_create(&s[i], NULL, short_lived, NULL);
        for (int i = 0; i < 4; i++)
            pthread_join(s[i], NULL);
    }
    char line[128];
    int n = snprintf(line, sizeof line, "worker_allocs=%d short=%d threads=%d\n",
                     WORKERS * ROUNDS * BATCH, 4 * SHORT, 1 + WORKERS + 4 * SHORT);
    if (write(1, line, (size_t)n) != n) return 1;
    return 0;
}
