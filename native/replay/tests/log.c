/* log.c: a test allocator (bumpcore.h underneath) that writes every call it
 * receives, and every site hint (it exports heaplab_site_hint), one line
 * each, to the file named by $HEAPLAB_TESTLOG:
 *
 *   malloc SIZE -> PTR          calloc N SIZE -> PTR       realloc PTR SIZE -> PTR
 *   memalign ALIGN SIZE -> PTR  (also posix_memalign, aligned_alloc)
 *   valloc SIZE -> PTR          pvalloc SIZE -> PTR        free PTR
 *   hint KIND SIZE ALIGN STACK_ID NFRAMES SITE_KEY KEY0 KEY1 ...
 *
 * Numbers are decimal, pointers and keys hex.  The replayer's tests check
 * the object mapping (each free gets the pointer its object's allocation
 * returned) and the site keys (against keys computed independently from the
 * trace's dump) from this log. */
#define BUMP_PREFIXED
#define BUMP_HOOK_MALLOC(p, n) ((void)0)
#include "bumpcore.h"
#include "heaplab_site.h"
#include "hl_fmt.h"
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

static int log_fd = -2;

typedef struct line {
    char b[8192];
    hl_str_t s;
} line_t;

static void put(line_t *l, const char *s) {
    hl_str_puts(&l->s, s);
}
static void put_u(line_t *l, unsigned long long v, int hex) {
    if (hex)
        hl_str_x(&l->s, v);
    else
        hl_str_u(&l->s, v);
}
static void emit(line_t *l) {
    if (log_fd == -2) {
        const char *p = getenv("HEAPLAB_TESTLOG");
        log_fd = p ? open(p, O_WRONLY | O_CREAT | O_APPEND, 0644) : -1;
    }
    put(l, "\n");
    if (log_fd >= 0 && write(log_fd, l->b, hl_str_held(&l->s)) < 0) {
    }
}

static void *logged(const char *what, uint64_t a, int has_a, uint64_t size, void *ptr, void *ret) {
    line_t l;
    l.s = hl_str(l.b, sizeof l.b);
    put(&l, what);
    if (ptr || !strcmp(what, "realloc")) {
        put(&l, " ");
        put_u(&l, (uintptr_t)ptr, 1);
    }
    if (has_a) {
        put(&l, " ");
        put_u(&l, a, 0);
    }
    put(&l, " ");
    put_u(&l, size, 0);
    put(&l, " -> ");
    put_u(&l, (uintptr_t)ret, 1);
    emit(&l);
    return ret;
}

EXPORT void *malloc(size_t n) {
    return logged("malloc", 0, 0, n, NULL, bump_malloc(n));
}
EXPORT void *calloc(size_t a, size_t b) {
    return logged("calloc", a, 1, b, NULL, bump_calloc(a, b));
}
EXPORT void *realloc(void *p, size_t n) {
    return logged("realloc", 0, 0, n, p, bump_realloc(p, n));
}
EXPORT void *memalign(size_t a, size_t n) {
    return logged("memalign", a, 1, n, NULL, bump_memalign(a, n));
}
EXPORT void *aligned_alloc(size_t a, size_t n) {
    return logged("aligned_alloc", a, 1, n, NULL, bump_aligned_alloc(a, n));
}
EXPORT void *valloc(size_t n) {
    return logged("valloc", 0, 0, n, NULL, bump_valloc(n));
}
EXPORT void *pvalloc(size_t n) {
    return logged("pvalloc", 0, 0, n, NULL, bump_pvalloc(n));
}
EXPORT int posix_memalign(void **out, size_t a, size_t n) {
    void *p = NULL;
    int rc = bump_posix_memalign(&p, a, n);
    logged("posix_memalign", a, 1, n, NULL, rc ? NULL : p);
    if (!rc) *out = p;
    return rc;
}
EXPORT void free(void *p) {
    line_t l;
    l.s = hl_str(l.b, sizeof l.b);
    put(&l, "free ");
    put_u(&l, (uintptr_t)p, 1);
    emit(&l);
}
EXPORT size_t malloc_usable_size(void *p) {
    return bump_malloc_usable_size(p);
}

EXPORT void heaplab_site_hint(const heaplab_site_t *s) {
    if (s->version != HEAPLAB_SITE_VERSION) return;
    line_t l;
    l.s = hl_str(l.b, sizeof l.b);
    put(&l, "hint ");
    put_u(&l, s->kind, 0);
    put(&l, " ");
    put_u(&l, s->size, 0);
    put(&l, " ");
    put_u(&l, s->align, 0);
    put(&l, " ");
    put_u(&l, s->stack_id, 0);
    put(&l, " ");
    put_u(&l, s->nframes, 0);
    put(&l, " ");
    put_u(&l, s->site_key, 1);
    for (uint32_t i = 0; i < s->nframes; i++) {
        put(&l, " ");
        put_u(&l, s->frame_keys[i], 1);
    }
    emit(&l);
}
