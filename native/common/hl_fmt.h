/*
 * hl_fmt.h: numbers to text without malloc, stdio or locale, for the C code
 * that may not allocate: the zoo's messages and the segmented allocator's
 * report (inside malloc), the preloaded test allocators, the replayer (whose
 * heap is the one being measured), the recording agent.  Header only.
 *
 *   char t[HL_FMT_MAX];
 *   size_t n = hl_fmt_u(t, 1234);          t = "1234", n = 4     (no NUL written)
 *   n = hl_fmt_x(t, 255);                  t = "ff"              (no prefix)
 *   n = hl_fmt_pad(t, 7, 10, 3);           t = "007"             (exactly 3 digits)
 *
 *   A bounded string in the caller's memory, for a line built piece by piece:
 *
 *   char line[64];
 *   hl_str_t s = hl_str(line, sizeof line);
 *   hl_str_puts(&s, "{\"pid\":"); hl_str_u(&s, 1234); hl_str_c(&s, '}');
 *
 *       line: | { | " | p | i | d | " | : | 1 | 2 | 3 | 4 | } | \0 | ... |
 *              <------------- written: min(len, cap - 1) ------>
 *
 * Invariants: s.len counts every byte asked for, written or not, so
 * s.len >= s.cap says the text was cut; the first min(len, cap - 1) bytes of
 * s.p hold the text and a NUL follows them (cap > 0).
 */
#ifndef HL_FMT_H
#define HL_FMT_H

#include <stddef.h>
#include <stdint.h>

#define HL_FMT_MAX 64 /* enough for any uint64_t in any base from 2 */

static const char hl_fmt_digit[16] = {'0', '1', '2', '3', '4', '5', '6', '7',
                                      '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};

/* v in `base` (2..16, lower case), written at out; returns the length. */
static inline size_t hl_fmt_base(char *out, uint64_t v, unsigned base) {
    char t[HL_FMT_MAX];
    size_t n = 0;
    do {
        t[n++] = hl_fmt_digit[v % base];
        v /= base;
    } while (v);
    for (size_t i = 0; i < n; i++)
        out[i] = t[n - 1 - i];
    return n;
}
static inline size_t hl_fmt_u(char *out, uint64_t v) {
    return hl_fmt_base(out, v, 10);
}
static inline size_t hl_fmt_x(char *out, uint64_t v) {
    return hl_fmt_base(out, v, 16);
}
/* Exactly `width` digits of v in `base`, with leading zeros (the low digits
 * of v when it has more); returns width. */
static inline size_t hl_fmt_pad(char *out, uint64_t v, unsigned base, size_t width) {
    for (size_t i = width; i > 0; i--) {
        out[i - 1] = hl_fmt_digit[v % base];
        v /= base;
    }
    return width;
}

/* ---- a bounded string in the caller's memory ---- */

typedef struct hl_str {
    char *p;
    size_t cap; /* bytes at p, the NUL included */
    size_t len; /* bytes asked for so far */
} hl_str_t;

static inline hl_str_t hl_str(char *p, size_t cap) {
    hl_str_t s = {p, cap, 0};
    if (cap) p[0] = 0;
    return s;
}
static inline void hl_str_putn(hl_str_t *s, const char *t, size_t n) {
    for (size_t i = 0; i < n; i++, s->len++)
        if (s->len + 1 < s->cap) s->p[s->len] = t[i];
    if (s->cap) s->p[s->len < s->cap ? s->len : s->cap - 1] = 0;
}
static inline void hl_str_puts(hl_str_t *s, const char *t) {
    size_t n = 0;
    while (t[n])
        n++;
    hl_str_putn(s, t, n);
}
static inline void hl_str_c(hl_str_t *s, char c) {
    hl_str_putn(s, &c, 1);
}
static inline void hl_str_u(hl_str_t *s, uint64_t v) {
    char t[HL_FMT_MAX];
    hl_str_putn(s, t, hl_fmt_u(t, v));
}
/* v in hex with a 0x prefix, as %p prints. */
static inline void hl_str_x(hl_str_t *s, uint64_t v) {
    char t[HL_FMT_MAX];
    hl_str_putn(s, "0x", 2);
    hl_str_putn(s, t, hl_fmt_x(t, v));
}
/* The bytes of text held (len, or cap - 1 when it was cut). */
static inline size_t hl_str_held(const hl_str_t *s) {
    return s->len < s->cap ? s->len : s->cap ? s->cap - 1 : 0;
}

#endif
