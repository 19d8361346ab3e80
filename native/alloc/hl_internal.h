/*
 * hl_internal.h: what shim.c, pad.c and platform.c share and algorithms do not
 * see.  Algorithms include only hl_alloc.h.
 */
#ifndef HL_INTERNAL_H
#define HL_INTERNAL_H

#include "hl_alloc.h"

#define HL_EXPORT __attribute__((visibility("default")))

/* ---- the lock: a three-state futex mutex (Drepper, "Futexes are tricky") ----
 * 0 free, 1 held, 2 held with waiters.  Uncontended cost: one CAS to take,
 * one XCHG to give back.  Statically initialised to zero.  The slow path
 * (a take that found the lock held) counts what contention cost, under the
 * lock once it has it: nothing is counted on the uncontended path. */
typedef struct hl_lock {
    int state;
    uint64_t contended; /* takes that found the lock held */
    uint64_t sleeps;    /* futex waits among them */
    uint64_t wait_ns;   /* time from finding it held to holding it (CLOCK_MONOTONIC) */
} hl_lock_t;

void hl_futex_wait(int *addr, int val); /* platform.c */
void hl_futex_wake(int *addr, int n);   /* platform.c */
void hl_lock_slow(hl_lock_t *l);        /* platform.c */

static inline void hl_lock_acquire(hl_lock_t *l) {
    int c = 0;
    if (HL_LIKELY(
            __atomic_compare_exchange_n(&l->state, &c, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)))
        return;
    hl_lock_slow(l);
}

static inline void hl_lock_release(hl_lock_t *l) {
    if (HL_UNLIKELY(__atomic_exchange_n(&l->state, 0, __ATOMIC_RELEASE) == 2))
        hl_futex_wake(&l->state, 1);
}

static inline void hl_lock_reset(hl_lock_t *l) {
    __atomic_store_n(&l->state, 0, __ATOMIC_RELAXED);
}

/* ---- platform services for the shim ---- */

/* Read platform tunables and the page size; name the allocator for messages. */
void hl_platform_init(const char *alloc_name);

/* Register fork handlers (pthread_atfork). */
void hl_platform_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void));

/* Fill the footprint fields of *st (the shim fills the operation counters). */
void hl_platform_footprint(heaplab_alloc_stats_t *st);
void hl_platform_reset_peak(void);

/* Append one line to the file named by `path` ("stderr" = fd 2). */
void hl_platform_append(const char *path, const char *line, size_t len);

/* The process id (for the exit report). */
int hl_platform_pid(void);

/* Tiny formatter (the subset hl_fatal documents) into buf; returns length. */
size_t hl_format(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Run fn(arg) when the calling thread exits (a pthread key destructor): up
 * to 8 hooks per thread (a segmented allocator's fast cores register one
 * each), run the last registered first; registering the same (fn, arg) again
 * does nothing.  Returns 0, or -1 if the key cannot be made or the thread has
 * 8 already.  May allocate: never call it under the shim's lock. */
int hl_platform_thread_exit(void (*fn)(void *), void *arg);

/* For a lock-free front end (shim.c, HL_FRONT_H): take and give back the
 * shim's lock from its cold paths; hl_front_enter also initialises. */
void hl_front_enter(void);
void hl_front_leave(void);
/* malloc's locked path, for a front end that defines HL_FRONT_MALLOC_WHOLE
 * (shim.c): the tail of each of its misses. */
__attribute__((visibility("hidden"))) void *hl_front_malloc_locked(size_t size);

/* The pad layer (pad.c): `inner` with every object padded by `pad` bytes. */
const hl_alloc_t *hl_pad_layer(const hl_alloc_t *inner, size_t pad);

#endif /* HL_INTERNAL_H */
