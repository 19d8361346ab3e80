/*
 * tprog.h: shared by the agent's test programs. Between two marker
 * allocations (sizes MARK_BEGIN and MARK_END) a program does a known
 * sequence of calls and says, on stdout, which events the trace must hold
 * there, one per line (check.py compares):
 *
 *   malloc 24 -> #0          an allocation and the label of its object
 *   realloc #0 100 -> #2     a realloc of labelled object #0
 *   realloc null 8 -> #3     realloc(NULL, 8)
 *   realloc_free #2          realloc(p, 0) that freed
 *   free #1
 *   malloc 1099511627776 failed
 *   memalign 64 4096 -> #4   size, then alignment
 *
 * Output goes through write(2) from a static buffer, so that printing adds
 * no allocations of its own.
 */
#ifndef TPROG_H
#define TPROG_H
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MARK_BEGIN 987654321
#define MARK_END   987654322

static char tp_buf[1 << 16];
static size_t tp_len;
static int tp_next_label;

static void tp_say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tp_buf + tp_len, sizeof tp_buf - tp_len, fmt, ap);
    va_end(ap);
    if (n > 0 && tp_len + (size_t)n < sizeof tp_buf) tp_len += (size_t)n;
}

static void tp_flush(void) {
    size_t off = 0;
    while (off < tp_len) {
        ssize_t w = write(1, tp_buf + off, tp_len - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
    tp_len = 0;
}

static void *tp_mark_begin(void) {
    void *m = malloc(MARK_BEGIN);
    tp_say("begin\n");
    return m;
}

static void tp_mark_end(void *begin) {
    void *m = malloc(MARK_END);
    free(m);
    free(begin);
    tp_say("end\n");
}

static int tp_label(void) {
    return tp_next_label++;
}
#endif
