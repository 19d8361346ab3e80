/* t_signal: allocations, then a fatal signal. "segv" dereferences NULL,
 * "abort" calls abort(), "sleep" waits to be killed (SIGTERM or SIGKILL from
 * the test), "churn" allocates and frees for ever (for SIGKILL mid-run),
 * "slow" allocates every 5 ms for ever. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "segv";
    void *keep[100];
    for (int i = 0; i < 100; i++)
        keep[i] = malloc(32 + (size_t)i);
    for (int i = 0; i < 50; i++)
        free(keep[i]);
    if (!strcmp(mode, "segv")) {
        volatile int *p = NULL;
        *p = 1;
    } else if (!strcmp(mode, "abort")) {
        abort();
    } else if (!strcmp(mode, "sleep")) {
        if (write(1, "ready\n", 6) != 6) return 1;
        for (;;)
            pause();
    } else if (!strcmp(mode, "slow")) {
        /* one allocation every 5 ms: the trace must keep up within flush_ms */
        if (write(1, "ready\n", 6) != 6) return 1;
        for (;;) {
            void *p = malloc(100);
            (void)p;
            usleep(5000);
        }
    } else if (!strcmp(mode, "churn")) {
        if (write(1, "ready\n", 6) != 6) return 1;
        for (unsigned long i = 0;; i++) {
            void *p = malloc(16 + i % 64);
            free(keep[50 + i % 50]);
            keep[50 + i % 50] = p;
            if (i % 1000 == 0) usleep(100);
        }
    }
    return 0;
}
