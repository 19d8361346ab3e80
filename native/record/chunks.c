/*
 * chunks.c: where rows are written. Each thread writes into 64 KiB chunks
 * (agent.h) that the writer copies out and gives back; chunks come from a
 * pool, or from mmap while the totals allow, and go back to the OS beyond
 * what the pool keeps.
 *
 *   producer: chunk full -> hl_chunk_get: pool -> mmap (if under both caps)
 *             -> else wait: help the writer (hl_writer_help), or sleep 20 us;
 *             the time spent waiting goes into t->waited_ns (END: waited_ns)
 *   writer:   chunk copied and `next` set -> hl_chunk_put -> pool (up to
 *             POOL_KEEP) or munmap
 *
 * Memory: an idle thread holds one chunk (64 KiB); a thread holds at most
 * hl_cfg.thread_cap bytes of chunks (two at least: it gets the next before
 * the writer may give back the last), all threads hl_cfg.total_cap beyond
 * those two each. Nothing
 * is ever dropped for lack of room: the producer waits (backpressure). A
 * chunk is lost only when recording stopped (END written, or the trace
 * could not be written: then hl_lost counts what was lost).
 */
#include "agent.h"

#include <string.h>

#define POOL_KEEP 32 /* chunks kept for reuse: 2 MiB */

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static hl_chunk_t *pool;
static size_t pool_n;
static uint64_t mapped; /* chunk bytes mapped, in use or pooled */

/* A chunk from the pool, or a new one if the total allows (`must`: a
 * thread that holds fewer than two chunks gets one whatever the total, so
 * that threads idling on their one chunk can never starve a working one). */
static hl_chunk_t *take(int must) {
    pthread_mutex_lock(&pool_lock);
    hl_chunk_t *c = pool;
    if (c) {
        pool = c->free_next;
        pool_n--;
    } else if (must || mapped + HL_CHUNK_BYTES <= hl_cfg.total_cap) {
        mapped += HL_CHUNK_BYTES; /* mapped below, outside the lock */
    } else {
        pthread_mutex_unlock(&pool_lock);
        return NULL;
    }
    pthread_mutex_unlock(&pool_lock);
    if (!c) {
        c = hl_os_alloc(HL_CHUNK_BYTES);
        if (!c) {
            pthread_mutex_lock(&pool_lock);
            mapped -= HL_CHUNK_BYTES;
            pthread_mutex_unlock(&pool_lock);
            return NULL;
        }
    }
    atomic_store_explicit(&c->pub, (uintptr_t)c->data, memory_order_relaxed);
    atomic_store_explicit(&c->next, NULL, memory_order_relaxed);
    c->free_next = NULL;
    return c;
}

hl_chunk_t *hl_chunk_get(hl_thread_t *t) {
    uint64_t t0 = 0;
    for (;;) {
        if (atomic_load_explicit(&hl_off, memory_order_relaxed)) break;
        uint32_t held = atomic_load_explicit(&t->nchunks, memory_order_relaxed);
        if (held < 2 || (uint64_t)held * HL_CHUNK_BYTES < hl_cfg.thread_cap) {
            hl_chunk_t *c = take(held < 2);
            if (c) {
                atomic_fetch_add_explicit(&t->nchunks, 1, memory_order_relaxed);
                if (t0) atomic_fetch_add(&t->waited_ns, hl_now_ns() - t0);
                return c;
            }
        }
        /* full: the program waits until the writer has copied some out */
        if (!t0) t0 = hl_now_ns();
        hl_writer_ensure_running();
        if (!hl_writer_help()) hl_os_sleep_ns(20000);
    }
    if (t0) atomic_fetch_add(&t->waited_ns, hl_now_ns() - t0);
    return NULL;
}

void hl_chunk_put(hl_chunk_t *c) {
    pthread_mutex_lock(&pool_lock);
    if (pool_n < POOL_KEEP) {
        c->free_next = pool;
        pool = c;
        pool_n++;
        c = NULL;
    } else {
        mapped -= HL_CHUNK_BYTES;
    }
    pthread_mutex_unlock(&pool_lock);
    if (c) hl_os_free(c, HL_CHUNK_BYTES);
}

uint64_t hl_chunk_bytes(void) {
    pthread_mutex_lock(&pool_lock);
    uint64_t m = mapped;
    pthread_mutex_unlock(&pool_lock);
    return m;
}

void hl_chunks_fork_prepare(void) {
    pthread_mutex_lock(&pool_lock);
}
void hl_chunks_fork_parent(void) {
    pthread_mutex_unlock(&pool_lock);
}
void hl_chunks_fork_child(void) {
    pthread_mutex_init(&pool_lock, NULL);
}
