/*
 * digest.c: the address digest of a seeded random sequence (not a benchmark).
 *
 *   alloc-digest [SEED [OPS]]      defaults: 1, 400000
 *
 * Runs random.c's mix of operations (malloc, calloc, posix_memalign with
 * alignments 32 .. 4096, free, realloc; sizes 1 byte .. 1 MiB over 4096
 * slots) and prints one line:
 *
 *   digest 0123456789abcdef ops 400000 maps 3 footprint_peak 123456789
 *
 * The digest is FNV-1a over, for every block returned, where it is and its
 * malloc_usable_size, then the allocator's peak footprint.  "Where" must not
 * depend on where the kernel put things, so a block is named by the mapping
 * it lies in (the how-many-th mmap the allocator made) and its offset from
 * that mapping's first byte still mapped (after a head the allocator gave
 * back: an aligned reservation trims the bytes below its alignment, whose
 * number depends on where the kernel put the mapping, and so on the
 * libraries' sizes): this program defines mmap and munmap (linked with
 * -rdynamic, so the preloaded allocator's calls resolve here) and keeps the
 * allocator's mappings.  An emulated sbrk heap is one mapping, so a block's
 * offset is its offset in its heap.  The same allocator code gives the same
 * digest; a refactoring that moves one block changes it.  tests/run.sh
 * compares it with tests/digests.txt ("digest" test).
 *
 * The process runs with address-space randomisation off (it re-executes
 * itself once under personality(ADDR_NO_RANDOMIZE)), so that what depends on
 * a mapping's alignment (the segmented allocator places its first chunk at a
 * fixed offset modulo 2 MB) is the same in every run too.
 */
#define _GNU_SOURCE
#include "testlib.h"

#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NSLOT 4096
#define NMAP  4096

/* ---- the allocator's mappings: [lo, hi) from its ord-th mmap ---- */

typedef struct map {
    uintptr_t lo, hi; /* what of it is still mapped */
    uint64_t ord;
} map_t;

static map_t maps[NMAP];
static size_t nmaps;
static uint64_t nmmap; /* mmap calls so far */

__attribute__((visibility("default"))) void *mmap(void *addr, size_t len, int prot, int flags,
                                                  int fd, off_t off) {
    long r = syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    if (r == -1) return MAP_FAILED;
    uintptr_t lo = (uintptr_t)r;
    uint64_t ord = ++nmmap;
    if (nmaps < NMAP) maps[nmaps++] = (map_t){lo, lo + len, ord};
    return (void *)r;
}

__attribute__((visibility("default"))) int munmap(void *addr, size_t len) {
    uintptr_t lo = (uintptr_t)addr, hi = lo + len;
    for (size_t i = 0; i < nmaps; i++) {
        map_t *m = &maps[i];
        if (hi <= m->lo || lo >= m->hi) continue;
        if (lo <= m->lo && hi >= m->hi) { /* all of it */
            maps[i--] = maps[--nmaps];
        } else if (lo <= m->lo) { /* its head */
            m->lo = hi;
        } else if (hi >= m->hi) { /* its tail */
            m->hi = lo;
        } else if (nmaps < NMAP) { /* a hole: two pieces */
            maps[nmaps++] = (map_t){hi, m->hi, m->ord};
            m->hi = lo;
        }
    }
    return (int)syscall(SYS_munmap, addr, len);
}

/* ---- the digest ---- */

static uint64_t digest = 0xcbf29ce484222325ull;
static void mix(uint64_t w) {
    for (int i = 0; i < 8; i++) {
        digest ^= (w >> (8 * i)) & 0xff;
        digest *= 0x100000001b3ull;
    }
}

static void note(const void *p) {
    uintptr_t a = (uintptr_t)p;
    const map_t *m = NULL;
    for (size_t i = 0; i < nmaps && !m; i++)
        if (a >= maps[i].lo && a < maps[i].hi) m = &maps[i];
    EXPECT(m != NULL, "block %p lies in no mapping the allocator made", p);
    mix(m ? m->ord : 0);
    mix(m ? a - m->lo : a);
    mix(malloc_usable_size((void *)p));
}

static size_t pick_size(t_rng_t *r) { /* random.c's */
    uint64_t k = t_below(r, 1000);
    if (k < 550) return (size_t)t_below(r, 64) + 1;
    if (k < 850) return (size_t)t_below(r, 1024) + 1;
    if (k < 970) return (size_t)t_below(r, 16384) + 1;
    if (k < 997) return (size_t)t_below(r, 65536) + 1;
    return (size_t)t_below(r, 1 << 20) + 1;
}

static char *slots[NSLOT];
static size_t sizes[NSLOT];

int main(int argc, char **argv) {
    t_prog = "digest";
    int pers = personality(0xffffffff);
    if (pers != -1 && !(pers & ADDR_NO_RANDOMIZE) && !getenv("HL_DIGEST_AGAIN") &&
        personality((unsigned long)pers | ADDR_NO_RANDOMIZE) != -1) {
        setenv("HL_DIGEST_AGAIN", "1", 1);
        execv("/proc/self/exe", argv);
        /* no exec: go on with randomisation on */
    }
    t_lookup();
    if (!t_stats_fn) {
        fprintf(stderr, "digest: no heaplab allocator is loaded (the digest needs its mappings)\n");
        return 2;
    }
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : 1;
    long ops = argc > 2 ? strtol(argv[2], NULL, 0) : 400000;
    t_rng_t r = {seed * 0x9E3779B97F4A7C15ull + 1};
    for (long op = 0; op < ops; op++) {
        size_t k = (size_t)t_below(&r, NSLOT);
        if (!slots[k]) {
            size_t n = pick_size(&r);
            uint64_t kind = t_below(&r, 100);
            void *q = NULL;
            if (kind < 75) {
                q = malloc(n);
            } else if (kind < 92) {
                q = calloc(1, n);
            } else {
                size_t al = (size_t)32 << t_below(&r, 8);
                if (posix_memalign(&q, al, n) != 0) q = NULL;
            }
            EXPECT(q != NULL, "op %ld: allocation of %zu bytes failed", op, n);
            if (!q) continue;
            note(q);
            slots[k] = q;
            sizes[k] = n;
        } else if (t_below(&r, 2)) {
            free(slots[k]);
            slots[k] = NULL;
        } else {
            size_t n = t_below(&r, 4) ? pick_size(&r) : sizes[k] + t_below(&r, 64) + 1;
            char *q = realloc(slots[k], n);
            EXPECT(q != NULL, "op %ld: realloc to %zu failed", op, n);
            if (!q) continue;
            note(q);
            slots[k] = q;
            sizes[k] = n;
        }
    }
    t_check_heap();
    heaplab_alloc_stats_t st;
    memset(&st, 0, sizeof st);
    t_stats_fn(&st, sizeof st);
    mix(st.footprint_peak_bytes);
    printf("digest %016llx ops %ld maps %llu footprint_peak %llu\n", (unsigned long long)digest,
           ops, (unsigned long long)nmmap, (unsigned long long)st.footprint_peak_bytes);
    return t_failures ? 1 : 0;
}
