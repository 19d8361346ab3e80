/*
 * hltrace_bench.c: benchmark (not a test) of the C trace reader. Reads a
 * trace to its end, as the replayer's passes do, and prints the events, the
 * CPU time per event and a digest of every field of every item, so two
 * builds of the reader can be checked for the same output on a trace too
 * big for a text dump. The Rust reader's benchmark computes the same digest
 * (cargo run --release -p heaplab-trace --example read-bench -- TRACE).
 *
 *   hltrace-bench [--repeat N] TRACE
 *   -> events=N items=N cpu_ns=N ns_per_event=X digest=HEX status=ok|error
 *
 * Under callgrind (--toggle-collect=hl_reader_next* is not needed: the
 * whole program is the reader) instructions / events is the reader's cost.
 */
#include "hltrace.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void *m_alloc(void *ctx, size_t n) {
    (void)ctx;
    return malloc(n);
}
static void m_release(void *ctx, void *p, size_t n) {
    (void)ctx;
    (void)n;
    free(p);
}

/* a cheap word hash: the digest must cost little beside the reader */
static inline uint64_t mix(uint64_t h, uint64_t v) {
    h = (h ^ v) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

static uint64_t cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv) {
    const char *path = NULL;
    int repeat = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: hltrace-bench [--repeat N] TRACE\n");
            return 2;
        } else
            path = argv[i];
    }
    if (!path || repeat < 1) {
        fprintf(stderr, "usage: hltrace-bench [--repeat N] TRACE\n");
        return 2;
    }
    hl_mem_t mem = {m_alloc, m_release, NULL};
    for (int rep = 0; rep < repeat; rep++) {
        int fd = open(path, O_RDONLY);
        if (fd < 0) {
            perror(path);
            return 1;
        }
        uint64_t c0 = cpu_ns();
        hl_error_t err;
        hl_reader_t *r = hl_reader_new(&mem, hl_fd_read, (void *)(intptr_t)fd, path, &err);
        if (!r) {
            char b[600];
            hl_error_format(&err, b, sizeof b);
            fprintf(stderr, "%s\n", b);
            return 1;
        }
        hl_item_t it;
        int rc;
        uint64_t h = 0xcbf29ce484222325ull, events = 0, items = 0;
        while ((rc = hl_reader_next(r, &it)) == 1) {
            items++;
            if (it.kind != HL_ITEM_EVENT) continue;
            const hl_event_t *e = &it.u.event;
            events++;
            /* independent products, one serial step per event */
            uint64_t x = e->index * 0xA24BAED4963EE407ull;
            x ^= ((uint64_t)e->kind | (uint64_t)e->failed << 8 | (uint64_t)e->inherited << 16 |
                  (uint64_t)e->has_id << 24 | (uint64_t)e->has_old << 32 |
                  (uint64_t)e->n_after << 40) *
                 0x9FB21C651E98DF25ull;
            x ^= ((uint64_t)e->thread << 32 | e->stack) * 0xC2B2AE3D27D4EB4Full;
            x ^= e->time * 0x165667B19E3779F9ull;
            x ^= e->size * 0xD6E8FEB86659FD93ull;
            x ^= e->align * 0xFF51AFD7ED558CCDull;
            x ^= (e->has_id ? e->id : 0) * 0xC4CEB9FE1A85EC53ull;
            x ^= (e->has_old ? e->old : 0) * 0x87C37B91114253D5ull;
            x ^= (e->has_old ? e->old_size : 0) * 0x4CF5AD432745937Full;
            x ^= e->thread_seq * 0x52DCE729DA3ED0E5ull;
            x ^= (e->has_old ? (uint64_t)e->old_thread : 0) * 0x9E3779B185EBCA87ull;
            x ^= (e->has_old ? e->old_seq : 0) * 0xC2B2AE3D27D4EB4Full;
            for (int k = 0; k < e->n_after; k++) {
                x ^= (uint64_t)e->after[k].thread * (0x27D4EB2F165667C5ull + (uint64_t)k);
                x ^= e->after[k].steps * (0x94D049BB133111EBull + (uint64_t)k);
            }
            h = mix(h, x);
        }
        uint64_t dt = cpu_ns() - c0;
        const char *status = "ok";
        if (rc < 0) {
            char b[600];
            hl_error_format(hl_reader_error(r), b, sizeof b);
            fprintf(stderr, "%s\n", b);
            status = "error";
        }
        printf("events=%" PRIu64 " items=%" PRIu64 " cpu_ns=%" PRIu64
               " ns_per_event=%.1f digest=%016" PRIx64 " status=%s\n",
               events, items, dt, events ? (double)dt / (double)events : 0.0, h, status);
        hl_reader_free(r);
        close(fd);
    }
    return 0;
}
