/*
 * threads.c: four threads allocate, fill, and hand half their blocks to the
 * next thread, which verifies and frees them (cross-thread frees); the rest
 * they realloc and free themselves (not a benchmark).
 *
 *   alloc-threads [ITERATIONS]        default 60000 per thread
 *
 * What each thread does depends on its own random sequence only, never on
 * the scheduling: a hand-over waits while the next thread's mailbox is full
 * (draining its own meanwhile), a thread takes at most two blocks from its
 * mailbox per iteration without drawing from its sequence, and a thread that
 * is done keeps draining its mailbox until every thread is.  So every block
 * handed over is freed by another thread, whatever the load of the machine,
 * and the test checks exactly that.
 */
#include "testlib.h"

#include <pthread.h>
#include <sched.h>

#define NT    4
#define QCAP  1024
#define LOCAL 256

typedef struct msg {
    char *p;
    size_t n;
    uint64_t seed;
} msg_t;

typedef struct mailbox {
    pthread_mutex_t mu;
    msg_t q[QCAP];
    size_t head, count;
} mailbox_t;

static mailbox_t box[NT];
static long iters = 60000;
static unsigned long errors[NT], cross_frees[NT], handed[NT];
static int done; /* threads that finished their iterations */

static int post(mailbox_t *b, msg_t m) {
    pthread_mutex_lock(&b->mu);
    int ok = b->count < QCAP;
    if (ok) {
        b->q[(b->head + b->count) % QCAP] = m;
        b->count++;
    }
    pthread_mutex_unlock(&b->mu);
    return ok;
}

static int take(mailbox_t *b, msg_t *m) {
    pthread_mutex_lock(&b->mu);
    int ok = b->count > 0;
    if (ok) {
        *m = b->q[b->head];
        b->head = (b->head + 1) % QCAP;
        b->count--;
    }
    pthread_mutex_unlock(&b->mu);
    return ok;
}

static void consume(int id, msg_t m) {
    if (t_verify(m.p, m.n, m.seed) >= 0) errors[id]++;
    free(m.p);
    cross_frees[id]++;
}

/* Hand m to the next thread, waiting while its mailbox is full. */
static void hand_over(int id, msg_t m) {
    while (!post(&box[(id + 1) % NT], m)) {
        msg_t in;
        while (take(&box[id], &in))
            consume(id, in);
        sched_yield();
    }
    handed[id]++;
}

static void *worker(void *arg) {
    int id = (int)(intptr_t)arg;
    t_rng_t r = {(uint64_t)id * 7919 + 17};
    msg_t mine[LOCAL] = {{0}};
    uint64_t gen = (uint64_t)id << 40;
    for (long i = 0; i < iters; i++) {
        size_t n = t_below(&r, 8) ? t_below(&r, 200) + 1 : t_below(&r, 20000) + 1;
        char *p;
        uint64_t k = t_below(&r, 10);
        if (k < 7)
            p = malloc(n);
        else if (k < 9)
            p = calloc(n, 1);
        else if (posix_memalign((void **)&p, 64, n))
            p = NULL;
        if (!p) {
            errors[id]++;
            continue;
        }
        msg_t m = {p, n, ++gen};
        t_fill(p, n, m.seed);
        if (t_below(&r, 2)) {
            hand_over(id, m);
        } else {
            msg_t *s = &mine[t_below(&r, LOCAL)];
            if (s->p) {
                if (t_verify(s->p, s->n, s->seed) >= 0) errors[id]++;
                if (t_below(&r, 2)) {
                    size_t nn = t_below(&r, 4000) + 1;
                    char *q = realloc(s->p, nn);
                    if (!q || t_verify(q, nn < s->n ? nn : s->n, s->seed) >= 0) errors[id]++;
                    free(q);
                } else {
                    free(s->p);
                }
            }
            *s = m;
        }
        msg_t in;
        for (int k = 0; k < 2 && take(&box[id], &in); k++)
            consume(id, in);
    }
    __atomic_add_fetch(&done, 1, __ATOMIC_RELEASE);
    for (;;) { /* the previous thread may still be handing blocks over */
        msg_t in;
        int all = __atomic_load_n(&done, __ATOMIC_ACQUIRE) == NT;
        while (take(&box[id], &in))
            consume(id, in);
        if (all) break;
        sched_yield();
    }
    for (int s = 0; s < LOCAL; s++)
        if (mine[s].p) {
            if (t_verify(mine[s].p, mine[s].n, mine[s].seed) >= 0) errors[id]++;
            free(mine[s].p);
        }
    return NULL;
}

int main(int argc, char **argv) {
    t_prog = "threads";
    t_lookup();
    if (argc > 1) iters = strtol(argv[1], NULL, 0);
    pthread_t th[NT];
    for (int i = 0; i < NT; i++)
        pthread_mutex_init(&box[i].mu, NULL);
    for (int i = 0; i < NT; i++)
        pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < NT; i++)
        pthread_join(th[i], NULL);
    unsigned long total_cross = 0, total_handed = 0;
    for (int i = 0; i < NT; i++) {
        msg_t m;
        while (take(&box[i], &m)) /* (none left: every thread drained its own) */
            consume(i, m);
        EXPECT(errors[i] == 0, "thread %d saw %lu corrupted or failed blocks", i, errors[i]);
        EXPECT(cross_frees[(i + 1) % NT] == handed[i],
               "thread %d handed %lu blocks over, thread %d freed %lu", i, handed[i], (i + 1) % NT,
               cross_frees[(i + 1) % NT]);
        total_cross += cross_frees[i];
        total_handed += handed[i];
    }
    /* about half of the blocks, whatever the scheduling (each thread's own sequence) */
    EXPECT(total_handed > (unsigned long)(NT * iters) * 2 / 5,
           "only %lu blocks handed over in %ld iterations", total_handed, NT * iters);
    t_check_heap();
    printf("threads: %d threads x %ld iterations, %lu cross-thread frees\n", NT, iters,
           total_cross);
    return t_finish();
}
