/*
 * clock: allocation events at known wall-clock moments, for
 * crates/heaplab-refs/tests/vgtool.rs. The tool reads the clock at events
 * only now and then and interpolates between readings with the TSC
 * (hl_tool.c, event_ns); this program reads CLOCK_MONOTONIC itself just
 * before and just after each malloc, and the trace's time of that malloc
 * must lie between the two. Between mallocs it spins without calling the
 * allocator for 0, 0.1, 2 or 7 ms (past the tool's re-reading interval),
 * in turn.
 *
 *   clock OUT     writes N lines "before after" (ns) to OUT, with write(2):
 *                 nothing but the N mallocs allocates
 */
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define N 80

static long long now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* a decimal number into buf, backwards from its end; returns its start */
static char *dec(char *end, long long v) {
    do {
        *--end = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return end;
}

int main(int argc, char **argv) {
    static const long long gap_ns[4] = {0, 100000, 2000000, 7000000};
    static long long t[2 * N];
    static void *p[N];
    if (argc != 2) return 2;
    for (int i = 0; i < N; i++) {
        t[2 * i] = now();
        p[i] = malloc(16);
        t[2 * i + 1] = now();
        volatile unsigned long spin = 0;
        while (now() - t[2 * i + 1] < gap_ns[i % 4])
            for (int k = 0; k < 1000; k++)
                spin++;
    }
    for (int i = 0; i < N; i++)
        free(p[i]);
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return 3;
    for (int i = 0; i < N; i++) {
        char buf[64], *e = buf + sizeof buf;
        char *s = e;
        *--s = '\n';
        s = dec(s, t[2 * i + 1]);
        *--s = ' ';
        s = dec(s, t[2 * i]);
        if (write(fd, s, (size_t)(e - s)) != e - s) return 4;
    }
    close(fd);
    return 0;
}
