/*
 * libheaplab-count.so: a tiny counting preload, the independent oracle for
 * the agent's event counts. It counts malloc-API calls the way the trace
 * classifies them and appends one line per process to $HEAPLAB_COUNT_OUT at
 * exit (from an on_exit handler registered on the first call, as the agent
 * does, so both stop counting at the same point):
 *
 *   pid=P ppid=P malloc=N calloc=N realloc=N memalign=N posix_memalign=N
 *   aligned_alloc=N valloc=N pvalloc=N free=N realloc_free=N
 *
 * realloc(p, 0) that returns NULL counts as realloc_free; free(NULL) is not
 * counted. A fork child starts from zero. Shares no code with the agent.
 */
#define _GNU_SOURCE
#include "hl_fmt.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    C_MALLOC,
    C_CALLOC,
    C_REALLOC,
    C_MEMALIGN,
    C_POSIX_MEMALIGN,
    C_ALIGNED_ALLOC,
    C_VALLOC,
    C_PVALLOC,
    C_FREE,
    C_REALLOC_FREE,
    C_N
};
static const char *const names[C_N] = {"malloc",         "calloc",        "realloc", "memalign",
                                       "posix_memalign", "aligned_alloc", "valloc",  "pvalloc",
                                       "free",           "realloc_free"};
static _Atomic uint64_t counts[C_N];

static void *(*r_malloc)(size_t);
static void (*r_free)(void *);
static void *(*r_calloc)(size_t, size_t);
static void *(*r_realloc)(void *, size_t);
static int (*r_posix_memalign)(void **, size_t, size_t);
static void *(*r_aligned_alloc)(size_t, size_t);
static void *(*r_memalign)(size_t, size_t);
static void *(*r_valloc)(size_t);
static void *(*r_pvalloc)(size_t);
static int (*r_execve)(const char *, char *const[], char *const[]);

static char boot[65536];
static size_t boot_used;
static _Atomic int state; /* 0 none, 1 resolving, 2 ready */

static __thread int busy; /* this library's own calls (on_exit, atfork) are not counted */

static int is_boot(void *p) {
    return (char *)p >= boot && (char *)p < boot + sizeof boot;
}

static void *boot_alloc(size_t total) {
    size_t at = boot_used;
    boot_used += (total + 15) & ~(size_t)15;
    return boot_used <= sizeof boot ? boot + at : NULL;
}

static void dump(void) {
    const char *out = getenv("HEAPLAB_COUNT_OUT");
    if (!out) return;
    char line[512];
    size_t n = 0;
    uint64_t v = (uint64_t)getpid();
    for (int i = -2; i < C_N; i++) {
        const char *k = i == -2 ? "pid" : i == -1 ? "ppid" : names[i];
        if (i == -1) v = (uint64_t)getppid();
        if (i >= -1) line[n++] = ' ';
        if (i >= 0) v = atomic_load(&counts[i]);
        while (*k)
            line[n++] = *k++;
        line[n++] = '=';
        n += hl_fmt_u(line + n, v);
    }
    line[n++] = '\n';
    int fd = open(out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
        ssize_t w = write(fd, line, n);
        (void)w;
        close(fd);
    }
}

static void on_exit_dump(int status, void *arg) {
    (void)status;
    (void)arg;
    dump();
}

static void child(void) {
    for (int i = 0; i < C_N; i++)
        atomic_store(&counts[i], 0);
}

static void resolve(void) {
    int s = 0;
    if (!atomic_compare_exchange_strong(&state, &s, 1)) return;
    r_malloc = dlsym(RTLD_NEXT, "malloc");
    r_free = dlsym(RTLD_NEXT, "free");
    r_calloc = dlsym(RTLD_NEXT, "calloc");
    r_realloc = dlsym(RTLD_NEXT, "realloc");
    r_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
    r_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
    r_memalign = dlsym(RTLD_NEXT, "memalign");
    r_valloc = dlsym(RTLD_NEXT, "valloc");
    r_pvalloc = dlsym(RTLD_NEXT, "pvalloc");
    r_execve = dlsym(RTLD_NEXT, "execve");
    atomic_store(&state, 2);
    busy = 1;
    pthread_atfork(NULL, NULL, child);
    on_exit(on_exit_dump, NULL);
    busy = 0;
}

static int ready(void) {
    if (atomic_load(&state) != 2) resolve();
    return atomic_load(&state) == 2;
}

#define COUNT(c) (busy ? 0 : atomic_fetch_add_explicit(&counts[c], 1, memory_order_relaxed))

void *malloc(size_t n) {
    if (atomic_load(&state) == 1) return boot_alloc(n);
    if (!ready()) return NULL;
    COUNT(C_MALLOC);
    return r_malloc(n);
}

void *calloc(size_t n, size_t s) {
    if (atomic_load(&state) == 1) return boot_alloc(n * s); /* dlsym's own calloc */
    if (!ready()) return NULL;
    COUNT(C_CALLOC);
    return r_calloc(n, s);
}

void free(void *p) {
    if (!p || is_boot(p)) return;
    if (!ready()) return;
    COUNT(C_FREE);
    r_free(p);
}

void *realloc(void *p, size_t n) {
    if (!ready()) return NULL;
    void *q = r_realloc(p, n);
    COUNT(p && n == 0 && !q ? C_REALLOC_FREE : C_REALLOC);
    return q;
}

void *reallocarray(void *p, size_t n, size_t s) {
    size_t total;
    if (__builtin_mul_overflow(n, s, &total)) {
        if (ready()) COUNT(C_REALLOC);
        return NULL;
    }
    return realloc(p, total);
}

int posix_memalign(void **out, size_t a, size_t n) {
    if (!ready()) return 12;
    COUNT(C_POSIX_MEMALIGN);
    return r_posix_memalign(out, a, n);
}

void *aligned_alloc(size_t a, size_t n) {
    if (!ready()) return NULL;
    COUNT(C_ALIGNED_ALLOC);
    return r_aligned_alloc(a, n);
}

void *memalign(size_t a, size_t n) {
    if (!ready()) return NULL;
    COUNT(C_MEMALIGN);
    return r_memalign(a, n);
}

void *valloc(size_t n) {
    if (!ready()) return NULL;
    COUNT(C_VALLOC);
    return r_valloc(n);
}

void *pvalloc(size_t n) {
    if (!ready()) return NULL;
    COUNT(C_PVALLOC);
    return r_pvalloc(n);
}

int execve(const char *path, char *const argv[], char *const envp[]) {
    if (!ready()) return -1;
    dump();
    child();
    return r_execve(path, argv, envp);
}
