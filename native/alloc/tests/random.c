/*
 * random.c: a seeded random sequence of heap operations (not a benchmark).
 *
 *   alloc-random [SEED [OPS [CHECK_EVERY]]]      defaults: 1, 200000, 64
 *
 * 4096 slots; each operation picks one: an empty slot gets malloc, calloc or
 * an aligned allocation, a full one is freed or reallocated.  Every payload is
 * filled with a pattern derived from (slot, generation) and verified before
 * realloc and free, calloc memory must read zero, and all live blocks are
 * checked for overlap every 20000 operations.  The allocator's checker runs
 * every CHECK_EVERY operations.  At the end the allocator's statistics must
 * account for what the test saw: operations counted, and a peak footprint at
 * least as large as the most live bytes the test ever held.
 */
#include "testlib.h"

#define NSLOT 4096

typedef struct slot {
    char *p;
    size_t n;
    uint64_t seed;
} slot_t;

static slot_t slots[NSLOT];
static t_span_t spans[NSLOT];

static size_t pick_size(t_rng_t *r) {
    uint64_t k = t_below(r, 1000);
    if (k < 550) return (size_t)t_below(r, 64) + 1; /* small, where most programs live */
    if (k < 850) return (size_t)t_below(r, 1024) + 1;
    if (k < 970) return (size_t)t_below(r, 16384) + 1;
    if (k < 997) return (size_t)t_below(r, 65536) + 1;
    return (size_t)t_below(r, 1 << 20) + 1;
}

int main(int argc, char **argv) {
    t_prog = "random";
    t_lookup();
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : 1;
    long ops = argc > 2 ? strtol(argv[2], NULL, 0) : 200000;
    long every = argc > 3 ? strtol(argv[3], NULL, 0) : 64;
    t_rng_t r = {seed * 0x9E3779B97F4A7C15ull + 1};
    uint64_t gen = 0;
    size_t live = 0, max_live = 0;
    unsigned long mallocs = 0, frees = 0, reallocs = 0;
    for (long op = 0; op < ops; op++) {
        slot_t *s = &slots[t_below(&r, NSLOT)];
        if (!s->p) {
            size_t n = pick_size(&r);
            uint64_t kind = t_below(&r, 100);
            if (kind < 75) {
                s->p = malloc(n);
            } else if (kind < 92) {
                s->p = calloc(1, n);
                if (s->p) {
                    size_t nz = 0;
                    for (size_t i = 0; i < n; i++)
                        nz += s->p[i] != 0;
                    EXPECT(nz == 0, "op %ld: calloc(%zu) has %zu nonzero bytes", op, n, nz);
                }
            } else {
                size_t al = (size_t)32 << t_below(&r, 8); /* 32 .. 4096 */
                void *q = NULL;
                if (posix_memalign(&q, al, n) == 0) s->p = q;
                EXPECT(((uintptr_t)q & (al - 1)) == 0, "op %ld: posix_memalign(%zu) = %p", op, al,
                       q);
            }
            mallocs++;
            EXPECT(s->p != NULL, "op %ld: allocation of %zu bytes failed", op, n);
            if (!s->p) continue;
            EXPECT(((uintptr_t)s->p & 15) == 0, "op %ld: %p not aligned", op, (void *)s->p);
            EXPECT(malloc_usable_size(s->p) >= n, "op %ld: usable < %zu", op, n);
            s->n = n;
            s->seed = ++gen;
            t_fill(s->p, n, s->seed);
            live += n;
        } else {
            long bad = t_verify(s->p, s->n, s->seed);
            EXPECT(bad < 0, "op %ld: block %p of %zu bytes corrupted at byte %ld", op, (void *)s->p,
                   s->n, bad);
            if (t_below(&r, 2)) {
                free(s->p);
                frees++;
                live -= s->n;
                s->p = NULL;
            } else {
                size_t n = t_below(&r, 4) ? pick_size(&r) : s->n + t_below(&r, 64) + 1;
                char *q = realloc(s->p, n);
                reallocs++;
                EXPECT(q != NULL, "op %ld: realloc to %zu failed", op, n);
                if (!q) continue;
                size_t keep = n < s->n ? n : s->n;
                bad = t_verify(q, keep, s->seed);
                EXPECT(bad < 0, "op %ld: realloc(%zu -> %zu) lost byte %ld", op, s->n, n, bad);
                EXPECT(malloc_usable_size(q) >= n, "op %ld: usable after realloc < %zu", op, n);
                live = live - s->n + n;
                s->p = q;
                s->n = n;
                s->seed = ++gen;
                t_fill(q, n, s->seed);
            }
        }
        if (live > max_live) max_live = live;
        if (every > 0 && op % every == 0) t_check_heap();
        if (op % 20000 == 19999) {
            size_t ns = 0;
            for (int i = 0; i < NSLOT; i++)
                if (slots[i].p)
                    spans[ns++] =
                        (t_span_t){(uintptr_t)slots[i].p,
                                   (uintptr_t)slots[i].p + malloc_usable_size(slots[i].p)};
            EXPECT(t_overlaps(spans, ns) == 0, "op %ld: live blocks overlap", op);
        }
    }
    for (int i = 0; i < NSLOT; i++)
        if (slots[i].p) {
            EXPECT(t_verify(slots[i].p, slots[i].n, slots[i].seed) < 0, "final verify slot %d", i);
            free(slots[i].p);
            frees++;
        }
    t_check_heap();
    if (t_stats_fn) {
        heaplab_alloc_stats_t st;
        memset(&st, 0, sizeof st);
        t_stats_fn(&st, sizeof st);
        EXPECT(st.version == HEAPLAB_STATS_VERSION && st.size == sizeof st, "stats header");
        /* An allocator whose hot paths count nothing (a synthesized one
         * built without --count-calls: fastcore.h SF_COUNT) gives lower
         * bounds and says so (hl_alloc.h). */
        if (!dlsym(RTLD_DEFAULT, "heaplab_alloc_stats_lower_bounds")) {
            EXPECT(st.mallocs + st.memaligns >= mallocs, "stats: %lu mallocs < the test's %lu",
                   (unsigned long)st.mallocs, mallocs);
            EXPECT(st.frees >= frees, "stats: %lu frees < %lu", (unsigned long)st.frees, frees);
        }
        EXPECT(st.reallocs >= reallocs, "stats: %lu reallocs < %lu", (unsigned long)st.reallocs,
               reallocs);
        EXPECT(st.footprint_peak_bytes >= max_live,
               "stats: peak footprint %lu < peak live bytes %zu",
               (unsigned long)st.footprint_peak_bytes, max_live);
        EXPECT(st.footprint_peak_bytes <= 64 * (uint64_t)max_live + (64 << 20),
               "stats: peak footprint %lu absurd for peak live %zu",
               (unsigned long)st.footprint_peak_bytes, max_live);
        EXPECT(st.footprint_bytes <= st.footprint_peak_bytes, "stats: now > peak");
        EXPECT(every <= 0 || st.checks > 0, "stats: the checker never ran");
        printf("random: peak live %zu bytes, peak footprint %lu bytes, %lu checks\n", max_live,
               (unsigned long)st.footprint_peak_bytes, (unsigned long)st.checks);
    }
    return t_finish();
}
