/*
 * hl_fmt_test.c: hl_fmt.h against snprintf (the oracle), on edge values and
 * on 200,000 values from a seeded generator, in bases 2, 8, 10 and 16; then
 * hl_str at every capacity from 0 to past the text's length (truncation,
 * NUL, len).  Exit status 1 and a line per failure (at most 20).
 */
#include "hl_fmt.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static unsigned failures;
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        if (++failures <= 20) {                                                                    \
            fprintf(stderr, "hl_fmt_test: FAIL: " __VA_ARGS__);                                    \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

/* v in base b by the oracle (snprintf for 8, 10, 16; by hand, from the top bit, for 2). */
static void oracle(char *out, uint64_t v, unsigned b) {
    if (b == 8) snprintf(out, HL_FMT_MAX, "%" PRIo64, v);
    if (b == 10) snprintf(out, HL_FMT_MAX, "%" PRIu64, v);
    if (b == 16) snprintf(out, HL_FMT_MAX, "%" PRIx64, v);
    if (b == 2) {
        int top = 63;
        while (top > 0 && !((v >> top) & 1))
            top--;
        int n = 0;
        for (int i = top; i >= 0; i--)
            out[n++] = (char)('0' + ((v >> i) & 1));
        out[n] = 0;
    }
}

static void one(uint64_t v) {
    static const unsigned bases[] = {2, 8, 10, 16};
    for (unsigned k = 0; k < 4; k++) {
        char want[HL_FMT_MAX + 1], got[HL_FMT_MAX + 1];
        oracle(want, v, bases[k]);
        size_t n = hl_fmt_base(got, v, bases[k]);
        got[n] = 0;
        if (n != strlen(want) || strcmp(got, want)) FAIL("base %u of %" PRIu64 ": '%s', want '%s'", bases[k], v, got, want);
    }
    char t[HL_FMT_MAX + 1], w[HL_FMT_MAX + 1];
    t[hl_fmt_u(t, v)] = 0;
    snprintf(w, sizeof w, "%" PRIu64, v);
    if (strcmp(t, w)) FAIL("hl_fmt_u(%" PRIu64 ") = '%s'", v, t);
    t[hl_fmt_x(t, v)] = 0;
    snprintf(w, sizeof w, "%" PRIx64, v);
    if (strcmp(t, w)) FAIL("hl_fmt_x(%" PRIu64 ") = '%s'", v, t);
    t[hl_fmt_pad(t, v % 1000000, 10, 6)] = 0;
    snprintf(w, sizeof w, "%06" PRIu64, v % 1000000);
    if (strcmp(t, w)) FAIL("hl_fmt_pad(%" PRIu64 ", 10, 6) = '%s'", v % 1000000, t);
    t[hl_fmt_pad(t, v & 0xff, 16, 2)] = 0;
    snprintf(w, sizeof w, "%02" PRIx64, v & 0xff);
    if (strcmp(t, w)) FAIL("hl_fmt_pad(%" PRIu64 ", 16, 2) = '%s'", v & 0xff, t);
}

int main(void) {
    static const uint64_t edges[] = {0, 1, 9, 10, 15, 16, 99, 100, 255, 256, 4095, 4096,
                                     UINT32_MAX, (uint64_t)UINT32_MAX + 1, INT64_MAX,
                                     (uint64_t)INT64_MAX + 1, UINT64_MAX - 1, UINT64_MAX};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        one(edges[i]);
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 200000; i++) {
        s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
        uint64_t v = s * 0x2545F4914F6CDD1Dull;
        one(v >> (i % 64)); /* every magnitude */
    }

    /* hl_str: the same text at every capacity */
    char want[128];
    int wn = snprintf(want, sizeof want, "{\"pid\":%u,\"p\":0x%" PRIx64 ",\"s\":\"%s\"}", 4242u,
                      (uint64_t)0xdeadbeef, "ok");
    for (size_t cap = 0; cap <= (size_t)wn + 2; cap++) {
        char buf[128];
        memset(buf, '#', sizeof buf);
        hl_str_t o = hl_str(buf, cap);
        hl_str_puts(&o, "{\"pid\":");
        hl_str_u(&o, 4242);
        hl_str_puts(&o, ",\"p\":");
        hl_str_x(&o, 0xdeadbeef);
        hl_str_putn(&o, ",\"s\":\"okay", 8);
        hl_str_c(&o, '"');
        hl_str_c(&o, '}');
        size_t held = cap ? (cap - 1 < (size_t)wn ? cap - 1 : (size_t)wn) : 0;
        if (o.len != (size_t)wn) FAIL("cap %zu: len %zu, want %d", cap, o.len, wn);
        if (hl_str_held(&o) != held) FAIL("cap %zu: held %zu, want %zu", cap, hl_str_held(&o), held);
        if (cap && (memcmp(buf, want, held) || buf[held] != 0)) FAIL("cap %zu: text '%s'", cap, buf);
        if (buf[cap] != '#') FAIL("cap %zu: wrote past the capacity", cap);
    }
    printf("hl_fmt_test: %s (%u failures)\n", failures ? "FAIL" : "ok", failures);
    return failures ? 1 : 0;
}
