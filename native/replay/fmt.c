/*
 * fmt.c: a growable string buffer in mmap'd pages, with the few formatters
 * the replayer needs (unsigned decimals, hex, fixed-point ratios, JSON
 * strings).  No malloc and no stdio: stdio's buffers come from malloc.
 * A buffer with cap set by the caller and p pointing at caller memory never
 * grows (used for messages on the crash and out-of-memory paths).
 */
#include "rp.h"
#include "hl_fmt.h"

#include <string.h>

void rp_buf_init(rp_buf_t *b, size_t cap) {
    b->p = rp_map(cap);
    b->len = 0;
    b->cap = (cap + 4095) & ~(size_t)4095;
}

static int reserve(rp_buf_t *b, size_t n) {
    if (b->len + n <= b->cap) return 1;
    if (b->cap < 4096 || ((uintptr_t)b->p & 4095)) /* caller memory: truncate */
        return 0;
    size_t cap = b->cap;
    while (cap < b->len + n)
        cap *= 2;
    b->p = rp_remap(b->p, b->cap, cap);
    b->cap = cap;
    return 1;
}

void rp_putn(rp_buf_t *b, const char *s, size_t n) {
    if (!reserve(b, n)) n = b->cap - b->len;
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

void rp_puts(rp_buf_t *b, const char *s) {
    rp_putn(b, s, strlen(s));
}
void rp_putc(rp_buf_t *b, char c) {
    rp_putn(b, &c, 1);
}

void rp_putu(rp_buf_t *b, uint64_t v) {
    char t[HL_FMT_MAX];
    rp_putn(b, t, hl_fmt_u(t, v));
}

void rp_putx(rp_buf_t *b, uint64_t v) {
    char t[HL_FMT_MAX];
    rp_putn(b, "0x", 2);
    rp_putn(b, t, hl_fmt_x(t, v));
}

void rp_putfix(rp_buf_t *b, uint64_t num, uint64_t den, int decimals) {
    if (den == 0) {
        rp_puts(b, "null");
        return;
    }
    uint64_t scale = 1;
    for (int i = 0; i < decimals; i++)
        scale *= 10;
    unsigned __int128 q = ((unsigned __int128)num * scale * 2 + den) / ((unsigned __int128)den * 2);
    rp_putu(b, (uint64_t)(q / scale));
    if (decimals) {
        char t[HL_FMT_MAX];
        rp_putc(b, '.');
        rp_putn(b, t, hl_fmt_pad(t, (uint64_t)(q % scale), 10, (size_t)decimals));
    }
}

void rp_put_jstrn(rp_buf_t *b, const char *s, size_t n) {
    rp_putc(b, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            rp_putc(b, '\\');
            rp_putc(b, (char)c);
        } else if (c == '\n') {
            rp_puts(b, "\\n");
        } else if (c == '\t') {
            rp_puts(b, "\\t");
        } else if (c < 0x20 || c == 0x7f) {
            char t[6] = {'\\', 'u', '0', '0'};
            rp_putn(b, t, 4 + hl_fmt_pad(t + 4, c, 16, 2));
        } else if (c < 0x80) {
            rp_putc(b, (char)c);
        } else { /* valid UTF-8 passes through; a stray byte becomes U+FFFD */
            size_t k = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
            size_t j = 1;
            while (k && j < k && i + j < n && ((unsigned char)s[i + j] & 0xc0) == 0x80)
                j++;
            if (k && j == k) {
                rp_putn(b, s + i, k);
                i += k - 1;
            } else {
                rp_puts(b, "\\ufffd");
            }
        }
    }
    rp_putc(b, '"');
}

void rp_put_jstr(rp_buf_t *b, const char *s) {
    rp_put_jstrn(b, s, strlen(s));
}

void rp_key(rp_buf_t *b, int *first, const char *key) {
    if (!*first) rp_putc(b, ',');
    *first = 0;
    rp_put_jstr(b, key);
    rp_putc(b, ':');
}

void rp_flush(rp_buf_t *b, int fd) {
    rp_write_all(fd, b->p, b->len);
    b->len = 0;
}
