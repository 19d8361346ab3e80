/*
 * inherit.c: a fork child's trace starts with the objects its parent had
 * live at the fork (the INHERITED block), so that its frees and reallocs of
 * them name known objects, and a replay starts from the same heap.
 *
 *   parent, fork prepare: every published row goes to the parent's trace
 *   child, first round:   read that trace up to the length it had at the
 *     fork (through a read-only descriptor of the same file, so a rename or
 *     an unlink does not matter) with the trace reader, as any reader would:
 *     merged, addresses to objects -> the live objects, oldest first ->
 *     (kind, size, alignment, address, stack) each -> INHERITED
 *
 * The work is proportional to the parent's trace so far, and runs in the
 * child's writer thread, in the background; a child that execs before it
 * makes a call leaves no trace and reads nothing. The parent's stack ids
 * are the child's (the stack table is inherited too), defined before.
 * Rows that other threads of the parent published while the fork was under
 * way are not in the file: objects they made are missing (README.md).
 */
#include "agent.h"

#include <unistd.h>

typedef struct src {
    int fd;
    uint64_t off, len;
} src_t;

static ssize_t rd(void *ctx, void *buf, size_t n) {
    src_t *s = ctx;
    if (s->off >= s->len) return 0;
    if (n > s->len - s->off) n = (size_t)(s->len - s->off);
    ssize_t k = pread(s->fd, buf, n, (off_t)s->off);
    if (k > 0) s->off += (uint64_t)k;
    return k;
}

typedef struct acc {
    uint8_t *p;
    size_t len, cap;
    uint64_t n;
    int failed;
} acc_t;

static void collect(void *ctx, const hl_live_t *o) {
    acc_t *a = ctx;
    if (a->failed) return;
    if (a->len + 64 > a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 1 << 16;
        uint8_t *p = hl_os_grow(a->p, a->cap, cap);
        if (!p) {
            a->failed = 1;
            return;
        }
        a->p = p;
        a->cap = cap;
    }
    uint8_t *e = hl_enc_inherited(a->p + a->len, o->kind, o->size, o->align, o->addr, o->stack);
    a->len = (size_t)(e - a->p);
    a->n++;
}

int hl_inherit(hl_writer_t *w, int fd, uint64_t len, uint64_t time_ns) {
    src_t s = {fd, 0, len};
    hl_error_t err;
    hl_reader_t *r = hl_reader_new(&hl_os_mem, rd, &s, "the parent's trace", &err);
    if (!r) return -1;
    hl_item_t it;
    int rc;
    while ((rc = hl_reader_next(r, &it)) == 1) {
    }
    /* the parent's trace has no END yet: cut short is what it should read as */
    if (rc < 0 && !hl_error_is_cut_short(hl_reader_error(r))) {
        hl_reader_free(r);
        return -1;
    }
    acc_t a = {0};
    int64_t k = hl_reader_live_each(r, collect, &a);
    hl_reader_free(r);
    int ret = -1;
    if (k >= 0 && !a.failed) ret = hl_writer_inherited(w, time_ns, a.n, a.p, a.len);
    if (a.p) hl_os_free(a.p, a.cap);
    return ret;
}
