/*
 * unwind_preload.c: libheaplab-unwind-check.so, a test tool. Preloaded into a
 * real program, its malloc compares hl_unwind with libunwind from the same
 * point on every Nth call (tests/unwind_check.h) and serves the call from
 * glibc (__libc_malloc).
 *
 *   HEAPLAB_UNWIND_CHECK_OUT=FILE    at exit, append "pid walks frames fallbacks mismatches"
 *   HEAPLAB_UNWIND_CHECK_EVERY=N     compare on every Nth malloc (default 7)
 */
#include "unwind_check.h"

#include <fcntl.h>
#include <stdlib.h>

extern void *__libc_malloc(size_t);

static __thread int busy __attribute__((tls_model("initial-exec")));
static __thread unsigned long calls __attribute__((tls_model("initial-exec")));
static __thread uc_result_t mine __attribute__((tls_model("initial-exec")));
static unsigned long every = 7;
static unsigned long tot[4]; /* walks, frames, fallbacks, mismatches */

__attribute__((constructor)) static void start(void) {
    const char *e = getenv("HEAPLAB_UNWIND_CHECK_EVERY");
    if (e && atol(e) > 0) every = (unsigned long)atol(e);
}

__attribute__((visibility("default"))) void *malloc(size_t n) {
    if (!busy && ++calls % every == 0) {
        busy = 1;
        uc_result_t before = mine;
        uc_compare(UC_MAX, &mine);
        __atomic_fetch_add(&tot[0], mine.walks - before.walks, __ATOMIC_RELAXED);
        __atomic_fetch_add(&tot[1], mine.frames - before.frames, __ATOMIC_RELAXED);
        __atomic_fetch_add(&tot[2], mine.fallbacks - before.fallbacks, __ATOMIC_RELAXED);
        __atomic_fetch_add(&tot[3], mine.mismatches - before.mismatches, __ATOMIC_RELAXED);
        busy = 0;
    }
    return __libc_malloc(n);
}

__attribute__((destructor)) static void report(void) {
    const char *path = getenv("HEAPLAB_UNWIND_CHECK_OUT");
    if (!path || !*path) return;
    char line[160];
    int n = snprintf(line, sizeof line, "%d %lu %lu %lu %lu\n", (int)getpid(), tot[0], tot[1],
                     tot[2], tot[3]);
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    ssize_t w = write(fd, line, (size_t)n);
    (void)w;
    close(fd);
}
