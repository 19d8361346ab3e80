/*
 * shim.c: the whole malloc API over one hl_alloc_t.
 *
 * Compiled once per allocator with -DHL_ALLOC_SYM=hl_alloc_NAME.  Every entry
 * point below:
 *
 *   1. settles the edge cases the C library defines (size 0, NULL, overflow,
 *      sizes over HL_MAX_REQUEST, alignment arguments), so an algorithm only
 *      sees 1 <= size <= HL_MAX_REQUEST;
 *   2. takes the one global lock, initialises on first use, calls the active
 *      hl_alloc_t (the algorithm, or the pad layer wrapped round it), runs the
 *      checker every HEAPLAB_CHECK operations, counts, and gives the lock back;
 *   3. sets errno = ENOMEM when the answer is NULL for lack of memory.
 *
 * Over-aligned blocks for algorithms without a memalign
 * -----------------------------------------------------
 *
 *   base (from malloc(size + align))        q = align_up(base, align)
 *    |<------------ gap ----------------->|<------- size ------->|
 *
 * q is recorded in `atab`, an open-addressing table (linear probing, keys are
 * q, values base) in pages from the platform.  free, usable_size and realloc
 * consult it only while it holds an entry (`atab_count != 0`), so algorithms
 * that implement memalign never pay for it.  Invariant: every key in atab is a
 * live pointer handed to the program, with its base live in the algorithm.
 */
#define _GNU_SOURCE
#include "hl_internal.h"
#include "heaplab_site.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#ifndef HL_ALLOC_SYM
#error "compile shim.c with -DHL_ALLOC_SYM=hl_alloc_NAME"
#endif

extern const hl_alloc_t HL_ALLOC_SYM;

static hl_lock_t lock;
static const hl_alloc_t *ops; /* the active allocator: the algorithm or the pad layer */
static int ready;             /* set with release order once ops is valid */
static size_t pad;
static size_t check_every, since_check;
static const char *stats_path;
static heaplab_alloc_stats_t st;

/* ------------------------------------------------------------------------ */
/* An optional lock-free front end (HL_FRONT_H)                              */
/* ------------------------------------------------------------------------ */
/* A synthesized allocator (crates/heaplab-synth) compiles this file with
 * -DHL_FRONT_H='"NAME.h"'.  That header defines
 *
 *   HL_FRONT_MALLOC(size)  a block served without the lock, or NULL: take the
 *                          locked path.  Any size arrives (0, huge): the front
 *                          end serves only the sizes it has classes for.
 *   HL_FRONT_MALLOC_WHOLE(size)  (optional) the whole answer of malloc,
 *                          realloc(NULL, n) and calloc's fallback after an
 *                          HL_FRONT_CALLOC miss (so it may run again for the
 *                          same call): the front end finishes each of its
 *                          misses in the function it calls, ending in
 *                          hl_front_malloc_locked(size) (hl_internal.h), so
 *                          that no call returns into malloc with work left and
 *                          its hit path saves no register
 *   HL_FRONT_CALLOC(size)  as HL_FRONT_MALLOC, with the first `size` bytes zero
 *                          (a block never used needs no memset)
 *   HL_FRONT_FREE(p)       p != NULL; 1 if served without the lock, 0: take the
 *                          locked path.  It must take only its own blocks.
 *   HL_FRONT_SLOW()        after a miss of either, before the locked path:
 *                          work the front end must do outside the lock
 *   HL_FRONT_STATS(s)      add the calls it served to *s (under the lock)
 *   HL_FRONT_FORK_CHILD()  in the child of a fork, under the lock
 *
 * and its cold paths take this file's lock with hl_front_enter() and
 * hl_front_leave() (hl_internal.h).  Every other entry point (realloc, the
 * memalign family, usable_size, the checker) and every edge case stay here. */
#ifdef HL_FRONT_H
#include HL_FRONT_H
#else
#define HL_FRONT_MALLOC(size) ((void)(size), (void *)0)
#define HL_FRONT_CALLOC(size) ((void)(size), (void *)0)
#define HL_FRONT_FREE(p)      ((void)(p), 0)
#define HL_FRONT_SLOW()       ((void)0)
#define HL_FRONT_STATS(s)     ((void)(s))
#define HL_FRONT_FORK_CHILD() ((void)0)
#endif

/* An allocator that defines the hottest entry points itself, with its fast
 * path compiled into them (a synthesized one: crates/heaplab-synth), has the
 * shim's versions exported under other names, which its slow paths call:
 * -DHL_API_malloc=NAME_locked_malloc, and likewise HL_API_free,
 * HL_API_calloc, HL_API_realloc and HL_API_malloc_usable_size.  By default
 * each is the C library's name. */
#ifndef HL_API_malloc
#define HL_API_malloc malloc
#endif
#ifndef HL_API_free
#define HL_API_free free
#endif
#ifndef HL_API_calloc
#define HL_API_calloc calloc
#endif
#ifndef HL_API_realloc
#define HL_API_realloc realloc
#endif
#ifndef HL_API_malloc_usable_size
#define HL_API_malloc_usable_size malloc_usable_size
#endif

/* ------------------------------------------------------------------------ */
/* Initialisation and the checker                                            */
/* ------------------------------------------------------------------------ */

static void __attribute__((noinline, cold)) init_locked(void) {
    if (ready) return;
    const hl_alloc_t *a = &HL_ALLOC_SYM;
    hl_platform_init(a->info.name);
    check_every = hl_tunable("HEAPLAB_CHECK", 0);
    pad = hl_tunable("HEAPLAB_PAD", 0);
    if (pad > 4096) hl_fatal("HEAPLAB_PAD=%zu: the pad layer takes 0 to 4096 bytes", pad);
    stats_path = getenv("HEAPLAB_STATS");
    if (stats_path && !*stats_path) stats_path = NULL;
    if (!a->malloc || !a->free || !a->usable_size)
        hl_fatal("allocator %s lacks malloc, free or usable_size", a->info.name);
    if (a->init && a->init() != 0) hl_fatal("allocator %s failed to initialise", a->info.name);
    if (hl_tunable("HEAPLAB_GENERIC", 0)) { /* test the shim's own realloc and memalign */
        static hl_alloc_t generic;
        generic = *a;
        generic.realloc = NULL;
        generic.memalign = NULL;
        a = &generic;
    }
    ops = pad ? hl_pad_layer(a, pad) : a;
    st.version = HEAPLAB_STATS_VERSION;
    st.name = a->info.name;
    st.pad = pad;
    __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
}

static inline void enter(void) {
    hl_lock_acquire(&lock);
    if (HL_UNLIKELY(!__atomic_load_n(&ready, __ATOMIC_RELAXED))) init_locked();
}

static void __attribute__((noinline)) run_check(void) {
    since_check = 0;
    if (ops->check) {
        st.checks++;
        ops->check();
    }
}

static inline void leave(void) {
    if (HL_UNLIKELY(check_every) && ++since_check >= check_every) run_check();
    hl_lock_release(&lock);
}

#ifdef HL_FRONT_H
void hl_front_enter(void) {
    enter();
}
void hl_front_leave(void) {
    leave();
}
#endif

static inline void *fail_nomem(void) {
    errno = ENOMEM;
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* The side table of over-aligned blocks                                     */
/* ------------------------------------------------------------------------ */

typedef struct atab_slot {
    uintptr_t key; /* 0 = empty */
    uintptr_t base;
} atab_slot_t;

static atab_slot_t *atab;
static size_t atab_cap, atab_count; /* cap is a power of two */

static inline size_t atab_hash(uintptr_t k) {
    return (size_t)((k >> 4) * 0x9E3779B97F4A7C15ull >> 20);
}

static atab_slot_t *atab_find(uintptr_t k) {
    size_t m = atab_cap - 1;
    for (size_t i = atab_hash(k) & m;; i = (i + 1) & m) {
        if (atab[i].key == k) return &atab[i];
        if (!atab[i].key) return NULL;
    }
}

static int atab_insert(uintptr_t k, uintptr_t base) {
    if ((atab_count + 1) * 2 > atab_cap) {
        size_t ncap = atab_cap ? atab_cap * 2 : 256;
        atab_slot_t *n = hl_pages_alloc(ncap * sizeof *n, 0);
        if (!n) return -1;
        atab_slot_t *old = atab;
        size_t ocap = atab_cap;
        atab = n;
        atab_cap = ncap;
        for (size_t i = 0; i < ocap; i++)
            if (old[i].key) {
                size_t j = atab_hash(old[i].key) & (ncap - 1);
                while (atab[j].key)
                    j = (j + 1) & (ncap - 1);
                atab[j] = old[i];
            }
        if (old) hl_pages_free(old, ocap * sizeof *old);
    }
    size_t m = atab_cap - 1, i = atab_hash(k) & m;
    while (atab[i].key)
        i = (i + 1) & m;
    atab[i].key = k;
    atab[i].base = base;
    atab_count++;
    return 0;
}

/* Backward-shift deletion keeps probe sequences unbroken without tombstones. */
static void atab_remove(atab_slot_t *s) {
    size_t m = atab_cap - 1, i = (size_t)(s - atab), j = i;
    atab[i].key = 0;
    for (;;) {
        j = (j + 1) & m;
        if (!atab[j].key) break;
        size_t h = atab_hash(atab[j].key) & m;
        /* move j to i if h is not cyclically in (i, j] */
        if ((j > i && (h <= i || h > j)) || (j < i && (h <= i && h > j))) {
            atab[i] = atab[j];
            atab[j].key = 0;
            i = j;
        }
    }
    atab_count--;
}

static inline atab_slot_t *atab_lookup(void *p) {
    return HL_UNLIKELY(atab_count) ? atab_find((uintptr_t)p) : NULL;
}

/* ------------------------------------------------------------------------ */
/* Locked helpers                                                            */
/* ------------------------------------------------------------------------ */

static size_t usable_locked(void *p) {
    atab_slot_t *s = atab_lookup(p);
    if (s) return ops->usable_size((void *)s->base) - ((uintptr_t)p - s->base);
    return ops->usable_size(p);
}

static void free_locked(void *p) {
    atab_slot_t *s = atab_lookup(p);
    if (s) {
        void *base = (void *)s->base;
        atab_remove(s);
        p = base;
    }
    st.frees++;
    ops->free(p);
}

static void *memalign_locked(size_t align, size_t size) {
    if (align <= HL_ALIGN) {
        st.mallocs++;
        return ops->malloc(size);
    }
    st.memaligns++;
    if (ops->memalign) return ops->memalign(align, size);
    if (size + align > HL_MAX_REQUEST) return NULL;
    st.mallocs++;
    char *base = ops->malloc(size + align);
    if (!base) return NULL;
    char *q = (char *)HL_ALIGN_UP((uintptr_t)base, align);
    if (q != base && atab_insert((uintptr_t)q, (uintptr_t)base) < 0) {
        st.frees++;
        ops->free(base);
        return NULL;
    }
    return q;
}

static void *realloc_locked(void *p, size_t size) {
    st.reallocs++;
    atab_slot_t *s = atab_lookup(p);
    if (!s && ops->realloc) return ops->realloc(p, size);
    size_t old = usable_locked(p);
    if (!s && size <= old && size >= old / 2) return p;
    st.mallocs++;
    void *n = ops->malloc(size);
    if (!n) return NULL;
    memcpy(n, p, size < old ? size : old);
    free_locked(p);
    return n;
}

/* ------------------------------------------------------------------------ */
/* The malloc API                                                            */
/* ------------------------------------------------------------------------ */

static inline void *malloc_locked_path(size_t size) {
    if (HL_UNLIKELY(size > HL_MAX_REQUEST)) {
        enter();
        st.failures++;
        leave();
        return fail_nomem();
    }
    if (HL_UNLIKELY(size == 0)) size = 1;
    enter();
    st.mallocs++;
    void *p = ops->malloc(size);
    if (HL_UNLIKELY(!p)) st.failures++;
    leave();
    return p ? p : fail_nomem();
}

static inline void free_locked_path(void *p) {
    enter();
    free_locked(p);
    leave();
}

#ifdef HL_FRONT_H
/* What follows a front end's miss is kept out of line, so that its hit keeps
 * no stack frame; HL_FRONT_SLOW() may do work outside the lock first. */
void *__attribute__((noinline)) hl_front_malloc_locked(size_t size) {
    HL_FRONT_SLOW();
    return malloc_locked_path(size);
}
static void __attribute__((noinline)) free_after_front(void *p) {
    HL_FRONT_SLOW();
    free_locked_path(p);
}
/* Inlined into every entry point, so that a front end sees the program's
 * frame (the segmented allocator's identifies the call site from it). */
static inline __attribute__((always_inline)) void *do_malloc(size_t size) {
#ifdef HL_FRONT_MALLOC_WHOLE
    return HL_FRONT_MALLOC_WHOLE(size);
#else
    void *f = HL_FRONT_MALLOC(size);
    return HL_LIKELY(f != NULL) ? f : hl_front_malloc_locked(size);
#endif
}
static inline void do_free(void *p) {
    if (HL_UNLIKELY(!p) || HL_FRONT_FREE(p)) return;
    free_after_front(p);
}
#else
static inline void *do_malloc(size_t size) {
    return malloc_locked_path(size);
}
static inline void do_free(void *p) {
    if (HL_UNLIKELY(!p)) return;
    free_locked_path(p);
}
#endif

HL_EXPORT void *HL_API_malloc(size_t size) {
    return do_malloc(size);
}

HL_EXPORT void HL_API_free(void *p) {
    do_free(p);
}

HL_EXPORT void *HL_API_calloc(size_t n, size_t m) {
    size_t size;
    if (HL_UNLIKELY(__builtin_mul_overflow(n, m, &size) || size > HL_MAX_REQUEST)) {
        enter();
        st.failures++;
        leave();
        return fail_nomem();
    }
    void *p = HL_FRONT_CALLOC(size);
    if (HL_LIKELY(p != NULL)) return p;
    p = do_malloc(size);
    if (p) memset(p, 0, size);
    return p;
}

static inline __attribute__((always_inline)) void *realloc_api(void *p, size_t size) {
    if (!p) return do_malloc(size);
    if (size == 0) { /* glibc: frees and returns NULL */
        do_free(p);
        return NULL;
    }
    if (size > HL_MAX_REQUEST) {
        enter();
        st.failures++;
        leave();
        return fail_nomem();
    }
    enter();
    void *n = realloc_locked(p, size);
    if (!n) st.failures++;
    leave();
    return n ? n : fail_nomem();
}

HL_EXPORT void *HL_API_realloc(void *p, size_t size) {
    return realloc_api(p, size);
}

HL_EXPORT void *reallocarray(void *p, size_t n, size_t m) {
    size_t size;
    if (__builtin_mul_overflow(n, m, &size)) return fail_nomem();
    return realloc_api(p, size);
}

/* The common path of the memalign family: align is a power of two. */
static void *aligned(size_t align, size_t size) {
    if (size == 0) size = 1;
    if (size > HL_MAX_REQUEST || align > HL_MAX_ALIGN) {
        enter();
        st.failures++;
        leave();
        return fail_nomem();
    }
    enter();
    void *p = memalign_locked(align, size);
    if (!p) st.failures++;
    leave();
    return p ? p : fail_nomem();
}

HL_EXPORT int posix_memalign(void **out, size_t align, size_t size) {
    if (!HL_IS_POW2(align) || align % sizeof(void *)) return EINVAL;
    int saved = errno;
    void *p = aligned(align, size);
    if (!p) {
        errno = saved;
        return ENOMEM;
    }
    *out = p;
    return 0;
}

/* As glibc 2.36 (Debian 12) does for both: an alignment that is not a power
 * of two is rounded up to one (glibc 2.38 makes aligned_alloc fail with EINVAL
 * instead); an alignment above HL_MAX_ALIGN fails with ENOMEM. */
static void *memalign_api(size_t align, size_t size) {
    if (!HL_IS_POW2(align) && align <= HL_MAX_ALIGN) {
        size_t a = 1;
        while (a < align)
            a <<= 1;
        align = a;
    }
    return aligned(align, size);
}

HL_EXPORT void *aligned_alloc(size_t align, size_t size) {
    return memalign_api(align, size);
}

HL_EXPORT void *memalign(size_t align, size_t size) {
    return memalign_api(align, size);
}

HL_EXPORT void *valloc(size_t size) {
    return aligned(hl_page_size(), size);
}

HL_EXPORT void *pvalloc(size_t size) {
    size_t ps = hl_page_size();
    if (size > HL_MAX_REQUEST) return fail_nomem();
    return aligned(ps, size ? HL_ALIGN_UP(size, ps) : ps);
}

HL_EXPORT size_t HL_API_malloc_usable_size(void *p) {
    if (!p) return 0;
    enter();
    size_t n = usable_locked(p);
    leave();
    return n;
}

/* glibc extras a program may call: accepted and ignored, so that glibc's own
 * versions never run on its (unused) arena. */
HL_EXPORT int malloc_trim(size_t pad_) {
    (void)pad_;
    return 0;
}

HL_EXPORT int mallopt(int param, int value) {
    (void)param;
    (void)value;
    return 1;
}

/* ------------------------------------------------------------------------ */
/* heaplab's own exports                                                     */
/* ------------------------------------------------------------------------ */

HL_EXPORT int heaplab_alloc_stats(heaplab_alloc_stats_t *out, size_t size) {
    heaplab_alloc_stats_t s;
    enter();
    s = st;
    s.lock_contended = lock.contended;
    s.lock_sleeps = lock.sleeps;
    s.lock_wait_ns = lock.wait_ns;
    hl_platform_footprint(&s);
    HL_FRONT_STATS(&s);
    leave();
    s.size = (uint32_t)(size < sizeof s ? size : sizeof s);
    memcpy(out, &s, s.size);
    return 0;
}

HL_EXPORT void heaplab_alloc_stats_reset_peak(void) {
    enter();
    hl_platform_reset_peak();
    leave();
}

HL_EXPORT int heaplab_alloc_check(void) {
    enter();
    int ran = ops->check != NULL;
    if (ran) {
        st.checks++;
        ops->check();
    }
    hl_lock_release(&lock);
    return ran;
}

/* The site-hint ABI (native/common/heaplab_site.h): exported by every heaplab
 * allocator; a no-op unless the algorithm sets hl_alloc_t.site_hint. */
HL_EXPORT void heaplab_site_hint(const heaplab_site_t *site) {
    if (!site || (__atomic_load_n(&ready, __ATOMIC_ACQUIRE) && !ops->site_hint))
        return; /* the common case: no lock taken */
    enter();
    if (ops->site_hint) ops->site_hint(site);
    hl_lock_release(&lock);
}

HL_EXPORT const hl_alloc_info_t *heaplab_alloc_info(void) {
    return &HL_ALLOC_SYM.info;
}

/* ------------------------------------------------------------------------ */
/* Fork handlers and the exit report                                         */
/* ------------------------------------------------------------------------ */

static void fork_prepare(void) {
    hl_lock_acquire(&lock);
}
static void fork_parent(void) {
    hl_lock_release(&lock);
}
static void fork_child(void) {
    HL_FRONT_FORK_CHILD();
    hl_lock_reset(&lock);
}

static void __attribute__((constructor)) shim_ctor(void) {
    /* pthread_atfork may allocate, so it is called here and not under the lock. */
    hl_platform_atfork(fork_prepare, fork_parent, fork_child);
    enter();
    leave();
}

static void __attribute__((destructor)) shim_dtor(void) {
    if (!stats_path) return;
    heaplab_alloc_stats_t s;
    heaplab_alloc_stats(&s, sizeof s);
    char line[1024];
    size_t n = hl_format(
        line, sizeof line,
        "{\"pid\":%d,\"allocator\":\"%s\",\"pad\":%zu,\"footprint_bytes\":%lu,"
        "\"footprint_peak_bytes\":%lu,\"heap_bytes\":%lu,\"heap_peak_bytes\":%lu,"
        "\"mapped_bytes\":%lu,\"mapped_peak_bytes\":%lu,\"os_calls\":%lu,\"mallocs\":%lu,"
        "\"frees\":%lu,\"reallocs\":%lu,\"memaligns\":%lu,\"checks\":%lu,\"failures\":%lu}\n",
        hl_platform_pid(), s.name, s.pad, (unsigned long)s.footprint_bytes,
        (unsigned long)s.footprint_peak_bytes, (unsigned long)s.heap_bytes,
        (unsigned long)s.heap_peak_bytes, (unsigned long)s.mapped_bytes,
        (unsigned long)s.mapped_peak_bytes, (unsigned long)s.os_calls, (unsigned long)s.mallocs,
        (unsigned long)s.frees, (unsigned long)s.reallocs, (unsigned long)s.memaligns,
        (unsigned long)s.checks, (unsigned long)s.failures);
    hl_platform_append(stats_path, line, n);
}
