/*
 * platform.c: the only file of native/alloc that talks to the OS.
 *
 * Emulated sbrk heaps
 * -------------------
 *
 *   base                 brk          committed                    base + reserve
 *    |<-- in use by the   |<-- RW, not yet |<-- PROT_NONE, reserved -->|
 *    |    allocator ----->|    touched --->|    address space only     |
 *
 * Each heap reserves `reserve` bytes (HEAPLAB_HEAP_RESERVE) of address space
 * with one PROT_NONE mmap at its first growth, and mprotects it read-write in
 * HL_COMMIT_GRANULE steps as its break moves up.  Giving memory back (a
 * negative increment) madvises the freed pages away, so they read as zero when
 * the break grows over them again.  Invariants: base <= brk <= committed <=
 * base + reserve; base and committed are page aligned.
 *
 * Footprint: for each heap, brk - base rounded up to a page, plus every live
 * hl_pages_alloc mapping.  That is the memory the process asked the OS for, as
 * sbrk-based allocators of the papers did; committed-but-unused granule tails
 * are not counted (they are untouched and cost nothing).
 *
 * Everything here is called under the shim's lock, except the lock's own slow
 * path and the fatal-error path.
 */
#define _GNU_SOURCE
#include "hl_fmt.h"
#include "hl_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HL_COMMIT_GRANULE ((size_t)256 << 10)

struct hl_heap {
    const char *name;
    char *base;      /* NULL until the first growth reserves the region */
    char *brk;       /* current break */
    char *committed; /* end of the read-write part */
    size_t reserve;  /* size of the reservation */
};

static hl_heap_t heaps[HL_MAX_HEAPS];
static int nheaps;
static size_t page_size;
static size_t heap_reserve = (size_t)64 << 30;
static const char *alloc_name = "heaplab";

static uint64_t heap_bytes, heap_peak, mapped_bytes, mapped_peak, foot_peak, os_calls;

/* ------------------------------------------------------------------------ */
/* Messages                                                                  */
/* ------------------------------------------------------------------------ */

/* The few conversions hl_fatal needs, into buf (at most cap - 1 bytes and a
 * NUL); returns the length written. */
static size_t vformat(char *buf, size_t cap, const char *fmt, va_list ap) {
    hl_str_t s = hl_str(buf, cap);
    for (const char *f = fmt; *f && s.len + 1 < cap; f++) {
        if (*f != '%') {
            hl_str_c(&s, *f);
            continue;
        }
        f++;
        int lng = 0, sz = 0;
        while (*f == 'l') {
            lng++;
            f++;
        }
        if (*f == 'z') {
            sz = 1;
            f++;
        }
        switch (*f) {
        case 's': {
            const char *a = va_arg(ap, const char *);
            hl_str_puts(&s, a ? a : "(null)");
            break;
        }
        case 'c':
            hl_str_c(&s, (char)va_arg(ap, int));
            break;
        case 'd': {
            long long v = sz    ? (long long)va_arg(ap, ssize_t)
                          : lng ? (long long)va_arg(ap, long)
                                : (long long)va_arg(ap, int);
            if (v < 0) hl_str_c(&s, '-');
            hl_str_u(&s, v < 0 ? -(unsigned long long)v : (unsigned long long)v);
            break;
        }
        case 'u':
        case 'x': {
            unsigned long long v = sz    ? (unsigned long long)va_arg(ap, size_t)
                                   : lng ? (unsigned long long)va_arg(ap, unsigned long)
                                         : (unsigned long long)va_arg(ap, unsigned);
            char t[HL_FMT_MAX];
            hl_str_putn(&s, t, *f == 'u' ? hl_fmt_u(t, v) : hl_fmt_x(t, v));
            break;
        }
        case 'p':
            hl_str_x(&s, (uintptr_t)va_arg(ap, void *));
            break;
        case '%':
            hl_str_c(&s, '%');
            break;
        default:
            hl_str_puts(&s, "%?");
            if (!*f) f--;
            break;
        }
    }
    return hl_str_held(&s);
}

size_t hl_format(char *buf, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t n = vformat(buf, cap, fmt, ap);
    va_end(ap);
    return n;
}

static void write_all(int fd, const char *s, size_t n) {
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

void hl_fatal(const char *fmt, ...) {
    char buf[512];
    size_t n = hl_format(buf, sizeof buf, "heaplab[%s]: ", alloc_name);
    va_list ap;
    va_start(ap, fmt);
    n += vformat(buf + n, sizeof buf - n - 1, fmt, ap);
    va_end(ap);
    buf[n++] = '\n';
    write_all(2, buf, n);
    abort();
}

void hl_check_failed(const char *file, int line, const char *cond) {
    hl_fatal("check failed: %s:%d: %s", file, line, cond);
}

/* ------------------------------------------------------------------------ */
/* Tunables                                                                  */
/* ------------------------------------------------------------------------ */

size_t hl_tunable(const char *name, size_t dflt) {
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    const char *p = s;
    size_t v = 0;
    int base = 10, digits = 0;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        base = 16;
        p += 2;
    }
    for (;; p++) {
        int d;
        if (*p >= '0' && *p <= '9')
            d = *p - '0';
        else if (base == 16 && *p >= 'a' && *p <= 'f')
            d = *p - 'a' + 10;
        else if (base == 16 && *p >= 'A' && *p <= 'F')
            d = *p - 'A' + 10;
        else
            break;
        if (v > (SIZE_MAX - (size_t)d) / (size_t)base) hl_fatal("%s=%s: value too large", name, s);
        v = v * (size_t)base + (size_t)d;
        digits++;
    }
    int shift = 0;
    switch (*p) {
    case 'k':
    case 'K':
        shift = 10;
        p++;
        break;
    case 'm':
    case 'M':
        shift = 20;
        p++;
        break;
    case 'g':
    case 'G':
        shift = 30;
        p++;
        break;
    }
    if (!digits || *p)
        hl_fatal("%s=%s: expected a size such as 4096, 0x1000, 64k, 16m or 2g", name, s);
    if (shift && v > (SIZE_MAX >> shift)) hl_fatal("%s=%s: value too large", name, s);
    return v << shift;
}

/* ------------------------------------------------------------------------ */
/* Footprint counters                                                        */
/* ------------------------------------------------------------------------ */

static void note_footprint(void) {
    if (heap_bytes > heap_peak) heap_peak = heap_bytes;
    if (mapped_bytes > mapped_peak) mapped_peak = mapped_bytes;
    if (heap_bytes + mapped_bytes > foot_peak) foot_peak = heap_bytes + mapped_bytes;
}

void hl_platform_footprint(heaplab_alloc_stats_t *st) {
    st->heap_bytes = heap_bytes;
    st->heap_peak_bytes = heap_peak;
    st->mapped_bytes = mapped_bytes;
    st->mapped_peak_bytes = mapped_peak;
    st->footprint_bytes = heap_bytes + mapped_bytes;
    st->footprint_peak_bytes = foot_peak;
    st->os_calls = os_calls;
}

void hl_platform_reset_peak(void) {
    heap_peak = heap_bytes;
    mapped_peak = mapped_bytes;
    foot_peak = heap_bytes + mapped_bytes;
}

/* ------------------------------------------------------------------------ */
/* Heaps                                                                     */
/* ------------------------------------------------------------------------ */

size_t hl_page_size(void) {
    if (!page_size) page_size = (size_t)sysconf(_SC_PAGESIZE);
    return page_size;
}

void hl_platform_init(const char *name) {
    alloc_name = name;
    hl_page_size();
    heap_reserve = HL_ALIGN_UP(hl_tunable("HEAPLAB_HEAP_RESERVE", heap_reserve), HL_COMMIT_GRANULE);
    if (heap_reserve < HL_COMMIT_GRANULE) heap_reserve = HL_COMMIT_GRANULE;
}

/* Slot 0 is always the default heap (hl_sbrk's), whether or not anything has
 * used it yet, so that a heap taken first with hl_heap_new is never mistaken
 * for it. */
static void claim_default_slot(void) {
    if (!nheaps) {
        heaps[0].name = "default";
        nheaps = 1;
    }
}

hl_heap_t *hl_heap_new(const char *name) {
    claim_default_slot();
    if (nheaps == HL_MAX_HEAPS) return NULL;
    hl_heap_t *h = &heaps[nheaps++];
    h->name = name;
    return h;
}

hl_heap_t *hl_default_heap(void) {
    claim_default_slot();
    return &heaps[0];
}

static int heap_reserve_region(hl_heap_t *h) {
    size_t reserve = heap_reserve;
    void *p = MAP_FAILED;
    /* Halve the reservation until the kernel agrees (e.g. under ulimit -v). */
    while (reserve >= HL_COMMIT_GRANULE) {
        os_calls++;
        p = mmap(NULL, reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) break;
        reserve /= 2;
    }
    if (p == MAP_FAILED) return -1;
    h->base = h->brk = h->committed = p;
    h->reserve = reserve;
    return 0;
}

void *hl_heap_sbrk(hl_heap_t *h, intptr_t incr) {
    if (!h->base && heap_reserve_region(h) < 0) return NULL;
    char *old = h->brk;
    size_t ps = hl_page_size();
    size_t old_used = HL_ALIGN_UP((size_t)(old - h->base), ps);
    if (incr > 0) {
        if ((size_t)incr > (size_t)(h->base + h->reserve - old)) return NULL;
        char *nbrk = old + incr;
        if (nbrk > h->committed) {
            size_t want = HL_ALIGN_UP((size_t)(nbrk - h->base), HL_COMMIT_GRANULE);
            if (want > h->reserve) want = h->reserve;
            char *ncommit = h->base + want;
            os_calls++;
            if (mprotect(h->committed, (size_t)(ncommit - h->committed), PROT_READ | PROT_WRITE))
                return NULL;
            h->committed = ncommit;
        }
        h->brk = nbrk;
    } else if (incr < 0) {
        if ((size_t)-incr > (size_t)(old - h->base)) return NULL;
        h->brk = old + incr;
        size_t new_used = HL_ALIGN_UP((size_t)(h->brk - h->base), ps);
        if (new_used < old_used) {
            os_calls++;
            madvise(h->base + new_used, old_used - new_used, MADV_DONTNEED);
        }
    }
    size_t new_used = HL_ALIGN_UP((size_t)(h->brk - h->base), ps);
    heap_bytes = heap_bytes - old_used + new_used;
    note_footprint();
    return old;
}

void *hl_heap_base(hl_heap_t *h) {
    return h->base;
}
void *hl_heap_brk(hl_heap_t *h) {
    return h->brk;
}
void *hl_sbrk(intptr_t incr) {
    return hl_heap_sbrk(hl_default_heap(), incr);
}

/* ------------------------------------------------------------------------ */
/* Pages                                                                     */
/* ------------------------------------------------------------------------ */

void *hl_pages_alloc(size_t bytes, size_t align) {
    size_t ps = hl_page_size();
    if (bytes == 0 || bytes > HL_MAX_REQUEST + HL_MAX_ALIGN) return NULL;
    bytes = HL_ALIGN_UP(bytes, ps);
    if (align < ps) align = ps;
    size_t span = bytes + (align > ps ? align - ps : 0);
    os_calls++;
    char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    if (align > ps) {
        char *q = (char *)HL_ALIGN_UP((uintptr_t)p, align);
        if (q > p) {
            os_calls++;
            munmap(p, (size_t)(q - p));
        }
        char *end = p + span;
        if (end > q + bytes) {
            os_calls++;
            munmap(q + bytes, (size_t)(end - (q + bytes)));
        }
        p = q;
    }
    mapped_bytes += bytes;
    note_footprint();
    return p;
}

void *hl_pages_resize(void *p, size_t old_bytes, size_t new_bytes) {
    size_t ps = hl_page_size();
    old_bytes = HL_ALIGN_UP(old_bytes, ps);
    if (new_bytes == 0 || new_bytes > HL_MAX_REQUEST + HL_MAX_ALIGN) return NULL;
    new_bytes = HL_ALIGN_UP(new_bytes, ps);
    os_calls++;
    void *q = mremap(p, old_bytes, new_bytes, MREMAP_MAYMOVE);
    if (q == MAP_FAILED) return NULL;
    mapped_bytes = mapped_bytes - old_bytes + new_bytes;
    note_footprint();
    return q;
}

void hl_pages_free(void *p, size_t bytes) {
    bytes = HL_ALIGN_UP(bytes, hl_page_size());
    os_calls++;
    if (munmap(p, bytes)) hl_fatal("hl_pages_free(%p, %zu): munmap failed", p, bytes);
    mapped_bytes -= bytes;
}

/* ------------------------------------------------------------------------ */
/* Reservations (allocators that place blocks by address: fastcore.h)        */
/* ------------------------------------------------------------------------ */

void *hl_reserve(size_t bytes, size_t align) {
    size_t ps = hl_page_size();
    if (align < ps) align = ps;
    bytes = HL_ALIGN_UP(bytes, ps);
    if (bytes == 0 || bytes + align < bytes) return NULL;
    size_t span = bytes + align - ps;
    os_calls++;
    char *p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return NULL;
    char *q = (char *)HL_ALIGN_UP((uintptr_t)p, align);
    if (q > p) {
        os_calls++;
        munmap(p, (size_t)(q - p));
    }
    if (p + span > q + bytes) {
        os_calls++;
        munmap(q + bytes, (size_t)(p + span - (q + bytes)));
    }
    return q;
}

int hl_commit(void *p, size_t bytes) {
    os_calls++;
    return mprotect(p, bytes, PROT_READ | PROT_WRITE) ? -1 : 0;
}

void hl_decommit(void *p, size_t bytes) {
    os_calls++;
    madvise(p, bytes, MADV_DONTNEED);
}

void hl_footprint_add(intptr_t bytes) {
    mapped_bytes += (uint64_t)bytes;
    note_footprint();
}

/* ------------------------------------------------------------------------ */
/* The lock's slow path, fork handlers, files                                */
/* ------------------------------------------------------------------------ */

void hl_futex_wait(int *addr, int val) {
    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

void hl_futex_wake(int *addr, int n) {
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static uint64_t lock_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void hl_lock_slow(hl_lock_t *l) {
    int saved = errno;
    uint64_t t0 = lock_now_ns(), sleeps = 0;
    /* Spin briefly: critical sections are short and the holder is usually
     * running on the other core.  Then sleep on the futex. */
    for (int i = 0; i < 100; i++) {
        int c = 0;
        if (__atomic_load_n(&l->state, __ATOMIC_RELAXED) == 0 &&
            __atomic_compare_exchange_n(&l->state, &c, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            goto held;
        __builtin_ia32_pause();
    }
    while (__atomic_exchange_n(&l->state, 2, __ATOMIC_ACQUIRE) != 0) {
        sleeps++;
        hl_futex_wait(&l->state, 2);
    }
held: /* the counts are the lock's: written only by its holder */
    l->contended++;
    l->sleeps += sleeps;
    l->wait_ns += lock_now_ns() - t0;
    errno = saved;
}

void hl_platform_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void)) {
    pthread_atfork(prepare, parent, child);
}

/* Thread exit: one key whose destructor runs every hook the thread
 * registered, the last first.  A thread may register several: a segmented
 * allocator owns one fast core per segment (fastcore.c registers one hook per
 * instance) besides its own.
 *
 *   exit_hooks[0 .. exit_nhooks)   this thread's (fn, arg) pairs, in order
 *   the key's value                &exit_hooks while there is one (non-NULL, so
 *                                  that the destructor runs)
 */
#define EXIT_HOOKS 8
typedef struct exit_hook {
    void (*fn)(void *);
    void *arg;
} exit_hook_t;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static int exit_key_made;
static __thread exit_hook_t exit_hooks[EXIT_HOOKS];
static __thread unsigned exit_nhooks;

static void exit_run(void *arg) {
    (void)arg;
    while (exit_nhooks) { /* a hook that registers another (it should not) runs it too */
        exit_hook_t h = exit_hooks[--exit_nhooks];
        h.fn(h.arg);
    }
}

static void exit_key_make(void) {
    exit_key_made = pthread_key_create(&exit_key, exit_run) == 0;
}

int hl_platform_thread_exit(void (*fn)(void *), void *arg) {
    pthread_once(&exit_once, exit_key_make);
    if (!exit_key_made) return -1;
    for (unsigned i = 0; i < exit_nhooks; i++)
        if (exit_hooks[i].fn == fn && exit_hooks[i].arg == arg) return 0;
    if (exit_nhooks == EXIT_HOOKS || pthread_setspecific(exit_key, exit_hooks) != 0) return -1;
    exit_hooks[exit_nhooks++] = (exit_hook_t){fn, arg};
    return 0;
}

void hl_platform_append(const char *path, const char *line, size_t len) {
    int saved = errno;
    if (!strcmp(path, "stderr")) {
        write_all(2, line, len);
    } else {
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) {
            write_all(fd, line, len);
            close(fd);
        }
    }
    errno = saved;
}

int hl_platform_pid(void) {
    return (int)getpid();
}
