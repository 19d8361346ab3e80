/*
 * prodcons: producer/consumer pairs; everything a producer allocates its
 * consumer frees (cross-thread frees), for benchmarks (not a test). About
 * 10-20 million calls a second natively on the reference VM.
 *
 *   prodcons [ITEMS [THREADS]]   default 2000000 items per producer, 4 threads
 *                                (2 pairs): ~8 M calls
 *
 * THREADS is 1 or an even number up to 128: THREADS / 2 pairs, each pair
 * doing the same work (so the calls grow with the pairs: weak scaling). With
 * 1 the one thread produces each batch and consumes it itself: the same
 * calls, no cross-thread frees.
 *
 * Producer p allocates ITEMS items of 16..264 bytes, writes a value into
 * each, and hands them to consumer p in batches of 256 pointers (the batch
 * array is itself allocated by the producer and freed by the consumer),
 * through a queue under a mutex and a condition variable, blocking when 64
 * batches wait. The consumer frees every item and batch. Sizes and values
 * come from a fixed formula; the checksum printed is a sum of values, the
 * same in every run whatever the interleaving, and depends on no address.
 *
 *   calls: 2 * ITEMS * pairs (malloc + free of items) + the batches' 2 *
 *   pairs * ITEMS / 256, plus what pthread_create allocates
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define BATCH    256
#define MAXQUEUE 64
#define MAXPAIRS 64

typedef struct queue {
    pthread_mutex_t lock;
    pthread_cond_t more, room;
    uint64_t **q[MAXQUEUE];
    unsigned head, tail; /* q[head % MAXQUEUE] .. q[tail % MAXQUEUE) wait */
} queue_t;

static queue_t queues[MAXPAIRS];
static unsigned long items = 2000000;
static uint64_t sums[MAXPAIRS];
static int alone; /* one thread: produce a batch, then consume it */

static void put(queue_t *q, uint64_t **b) {
    pthread_mutex_lock(&q->lock);
    while (q->tail - q->head == MAXQUEUE)
        pthread_cond_wait(&q->room, &q->lock);
    q->q[q->tail++ % MAXQUEUE] = b;
    pthread_cond_signal(&q->more);
    pthread_mutex_unlock(&q->lock);
}

static uint64_t **get(queue_t *q) {
    pthread_mutex_lock(&q->lock);
    while (q->tail == q->head)
        pthread_cond_wait(&q->more, &q->lock);
    uint64_t **b = q->q[q->head++ % MAXQUEUE];
    pthread_cond_signal(&q->room);
    pthread_mutex_unlock(&q->lock);
    return b;
}

static void *producer(void *arg) {
    unsigned p = (unsigned)(uintptr_t)arg;
    uint64_t **b = NULL;
    unsigned n = 0;
    for (unsigned long i = 0; i < items; i++) {
        if (!b) {
            b = malloc((BATCH + 1) * sizeof *b);
            if (!b) exit(1);
            n = 0;
        }
        uint64_t *o = malloc(16 + 8 * ((i * 7 + p * 3) % 32));
        if (!o) exit(1);
        o[0] = i * 2654435761u + p;
        b[n++] = o;
        if (n == BATCH || i + 1 == items) {
            b[n] = NULL;
            if (alone) {
                for (unsigned k = 0; b[k]; k++) {
                    sums[p] += b[k][0];
                    free(b[k]);
                }
                free(b);
            } else {
                put(&queues[p], b);
            }
            b = NULL;
        }
    }
    return NULL;
}

static void *consumer(void *arg) {
    unsigned p = (unsigned)(uintptr_t)arg;
    unsigned long seen = 0;
    uint64_t sum = 0;
    while (seen < items) {
        uint64_t **b = get(&queues[p]);
        for (unsigned k = 0; b[k]; k++, seen++) {
            sum += b[k][0];
            free(b[k]);
        }
        free(b);
    }
    sums[p] = sum;
    return NULL;
}

int main(int argc, char **argv) {
    unsigned threads = 4;
    if (argc > 1) items = strtoul(argv[1], NULL, 10);
    if (argc > 2) threads = (unsigned)strtoul(argv[2], NULL, 10);
    if (argc > 3 || !(threads == 1 || (threads % 2 == 0 && threads >= 2 && threads <= 2 * MAXPAIRS))) {
        fprintf(stderr, "usage: prodcons [ITEMS [THREADS]]: THREADS is 1 or even, up to %d\n",
                2 * MAXPAIRS);
        return 2;
    }
    unsigned pairs = threads == 1 ? 1 : threads / 2;
    if (threads == 1) {
        alone = 1;
        producer((void *)0);
    } else {
        pthread_t t[2 * MAXPAIRS];
        for (unsigned p = 0; p < pairs; p++) {
            pthread_mutex_init(&queues[p].lock, NULL);
            pthread_cond_init(&queues[p].more, NULL);
            pthread_cond_init(&queues[p].room, NULL);
        }
        for (uintptr_t p = 0; p < pairs; p++) {
            if (pthread_create(&t[2 * p], NULL, producer, (void *)p)) return 1;
            if (pthread_create(&t[2 * p + 1], NULL, consumer, (void *)p)) return 1;
        }
        for (unsigned k = 0; k < 2 * pairs; k++)
            pthread_join(t[k], NULL);
    }
    uint64_t sum = 0;
    for (unsigned p = 0; p < pairs; p++)
        sum += (2 * p + 1) * sums[p];
    printf("prodcons %ux%lu items, checksum %016llx\n", pairs, items, (unsigned long long)sum);
    return 0;
}
