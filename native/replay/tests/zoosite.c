/*
 * zoosite.c: a test algorithm behind heaplab's own shim (native/alloc), to
 * check the site-hint path end to end: heaplab-replay --site-hints calls the
 * shim's exported heaplab_site_hint, the shim (and the pad layer, under
 * HEAPLAB_PAD) hands the struct to hl_alloc_t.site_hint, and this algorithm
 * writes what it received to $HEAPLAB_TESTLOG, in log.c's "hint" format,
 * followed by "alloc SIZE" for the allocation that comes next.
 *
 *   | size (8) | pad (8) | payload ...      bump over hl_sbrk; free keeps the block
 *
 * Not an allocator anyone should use, and not in the registry.  Unlike a
 * real algorithm it talks to the OS (open, write) to keep its log.
 */
#include "hl_alloc.h"
#include "heaplab_site.h"
#include "hl_fmt.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int log_fd = -2;

static void emit(const char *s, size_t n) {
    if (log_fd == -2) {
        const char *p = getenv("HEAPLAB_TESTLOG");
        log_fd = p ? open(p, O_WRONLY | O_CREAT | O_APPEND, 0644) : -1;
    }
    if (log_fd >= 0 && write(log_fd, s, n) < 0) {
    }
}

static size_t put_u(char *b, size_t n, unsigned long long v, int hex) {
    if (hex) {
        b[n++] = '0';
        b[n++] = 'x';
    }
    return n + (hex ? hl_fmt_x(b + n, v) : hl_fmt_u(b + n, v));
}

static void zs_site_hint(const heaplab_site_t *s) {
    char b[8192];
    size_t n = 0;
    memcpy(b, "hint", 4);
    n = 4;
    unsigned long long f[5] = {s->kind, s->size, s->align, s->stack_id, s->nframes};
    for (int i = 0; i < 5; i++) {
        b[n++] = ' ';
        n = put_u(b, n, f[i], 0);
    }
    b[n++] = ' ';
    n = put_u(b, n, s->site_key, 1);
    for (uint32_t i = 0; i < s->nframes && n < sizeof b - 40; i++) {
        b[n++] = ' ';
        n = put_u(b, n, s->frame_keys[i], 1);
    }
    b[n++] = '\n';
    emit(b, n);
}

static void *zs_malloc(size_t size) {
    char *p = hl_sbrk((intptr_t)HL_ALIGN_UP(size + 16, 16));
    if (!p) return NULL;
    *(size_t *)p = size;
    char b[40];
    memcpy(b, "alloc ", 6);
    size_t n = put_u(b, 6, size, 0);
    b[n++] = '\n';
    emit(b, n);
    return p + 16;
}

static void zs_free(void *p) {
    (void)p;
}
static size_t zs_usable_size(void *p) {
    return *(size_t *)((char *)p - 16);
}

const hl_alloc_t hl_alloc_zoosite = {
    .info = {"zoosite", "test: logs the site hints the shim hands over", "none"},
    .malloc = zs_malloc,
    .free = zs_free,
    .usable_size = zs_usable_size,
    .site_hint = zs_site_hint,
};
