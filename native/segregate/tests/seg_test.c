/*
 * seg_test: tests of the segmented allocator, run with it preloaded
 * (tests/run.sh says which library goes with which test):
 *
 *   seg-test layout  N    segments: N of them, each a fast core's slots and a
 *                         best-fit heap; the heaps' first chunk at i × 64 KB
 *                         modulo 2 MB, breaks grown in 2 MB steps; no slot in
 *                         two segments; small objects in a slot of their
 *                         segment, large and aligned ones in its heap; realloc
 *                         keeps an object's segment, every segment used (N = 4)
 *   seg-test hint         site hints reach the STACK-3 tree: A, B, C decided by
 *                         the return address, D by the second frame, E by the third
 *   seg-test path         ... the PATH table: a node, else the innermost path point
 *   seg-test size         ... the STACK+size table: the same frames, two sizes
 *   seg-test runtime      the run-time walk: the keys it computed from this
 *                         program's own stack equal the keys computed here from
 *                         __builtin_return_address and dladdr1
 *   seg-test levels LIB   the run-time tree: learns its call sites' keys with
 *                         the walk above, then runs itself again with LIB (a
 *                         table from HEAPLAB_SEGTEST_NODES): a site decided by
 *                         its return address, a wrapper decided by its
 *                         callers, an unknown site; the objects' segments and
 *                         the levels that decided them
 *
 * Prints one line per check; exits 1 at the first failure.
 */
#define _GNU_SOURCE
#include "heaplab_site.h"
#include "seg.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const uint64_t FR_A[3] = {11, 12, 13}, FR_B[3] = {21, 22, 23}, FR_C[3] = {31, 32, 33};
static const uint64_t FR_D1[3] = {41, 42, 43}, FR_D2[3] = {41, 52, 53};
static const uint64_t FR_E1[3] = {61, 62, 63}, FR_E2[3] = {61, 62, 73};

typedef unsigned (*segments_fn)(uintptr_t *, uintptr_t *, uint64_t *, unsigned);
typedef unsigned (*slots_fn)(unsigned, uintptr_t *, unsigned);
typedef int (*class_fn)(const void *);
typedef int (*last_fn)(uint64_t *, unsigned, unsigned *, uint64_t *);

static heaplab_site_hint_fn site_hint;
static segments_fn segments;
static slots_fn slots;
static class_fn class_of;
static last_fn last;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                 \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void find_exports(void) {
    segments = (segments_fn)dlsym(RTLD_DEFAULT, "heaplab_seg_segments");
    slots = (slots_fn)dlsym(RTLD_DEFAULT, "heaplab_seg_slots");
    class_of = (class_fn)dlsym(RTLD_DEFAULT, "heaplab_seg_class_of");
    last = (last_fn)dlsym(RTLD_DEFAULT, "heaplab_seg_last");
    site_hint = (heaplab_site_hint_fn)dlsym(RTLD_DEFAULT, "heaplab_site_hint");
    CHECK(segments && slots && class_of && last && site_hint,
          "run with a segmented allocator preloaded");
}

/* ------------------------------------------------------------------ layout */

#define SLOT_BYTES ((uintptr_t)1 << 33) /* fastcore.h: 2^SF_SLOT_SHIFT */
#define FAST_MAX   32768                /* seg_thread.h SEG_FAST_MAX */

/* The segment whose slots hold p, or -1 (at most 64 slots a segment here). */
static int slot_segment(const void *p, unsigned nsegs) {
    for (unsigned s = 0; s < nsegs; s++) {
        uintptr_t b[64];
        unsigned n = slots(s, b, 64);
        for (unsigned k = 0; k < n && k < 64; k++)
            if ((uintptr_t)p - b[k] < SLOT_BYTES) return (int)s;
    }
    return -1;
}

static int layout(unsigned want) {
    enum { N = 4000 };
    static void *p[N];
    static int seg0[N];
    static char aligned[N];
    unsigned used[4] = {0};
    for (int i = 0; i < N; i++) {
        size_t n = (size_t)(i * 7919 % 3000) + 1;
        if (i % 1000 == 999) n = (size_t)3 << 20; /* larger than one growth */
        if (i % 13 == 6) n = (size_t)(i % 7 + 1) * 9000; /* medium: 9 .. 63 KB */
        if (i % 7 == 3)
            p[i] = calloc(1, n);
        else if (i % 11 == 5)
            p[i] = aligned_alloc(256, (n + 255) & ~(size_t)255), aligned[i] = 1;
        else
            p[i] = malloc(n);
        CHECK(p[i], "allocation %d failed", i);
        memset(p[i], i & 0xff, n < 64 ? n : 64);
        seg0[i] = class_of(p[i]);
        CHECK(seg0[i] >= 0 && seg0[i] < (int)want, "object %d at %p is in no segment", i, p[i]);
        used[seg0[i]]++;
        /* small ones in a slot of their segment's fast core, the others in its heap */
        int in_slot = slot_segment(p[i], want);
        if (n <= FAST_MAX && !aligned[i])
            CHECK(in_slot == seg0[i], "object %d (%zu bytes) in slot of segment %d, class_of says %d",
                  i, n, in_slot, seg0[i]);
        else
            CHECK(in_slot < 0, "object %d (%zu bytes%s) in a fast core's slot", i, n,
                  aligned[i] ? ", aligned" : "");
    }
    for (int i = 0; i < N; i += 3) { /* grow and shrink: the object stays in its segment */
        size_t m = (size_t)(i % 5000) + 4000;
        if (i % 9 == 0) m = (size_t)(i % 4) * 20000 + 40; /* across the fast core's limit */
        void *q = realloc(p[i], m);
        CHECK(q, "realloc %d failed", i);
        CHECK(class_of(q) == seg0[i], "realloc moved object %d from segment %d to %d", i, seg0[i],
              class_of(q));
        CHECK(((unsigned char *)q)[0] == (i & 0xff), "realloc lost object %d's bytes", i);
        p[i] = q;
    }
    for (int i = 0; i < N; i += 2)
        free(p[i]);
    uintptr_t first[4], end[4];
    uint64_t grows[4];
    unsigned n = segments(first, end, grows, 4);
    CHECK(n == want, "%u segments, expected %u", n, want);
    for (unsigned s = 0; s < n; s++) {
        uintptr_t b[64];
        unsigned ns = slots(s, b, 64);
        printf("segment %u: heap first %#lx (%lu KB into its 2 MB), %lu MB in %lu growths, "
               "%u slots, %u objects\n",
               s, (unsigned long)first[s], (unsigned long)(first[s] % (2u << 20)) >> 10,
               (unsigned long)(end[s] - first[s]) >> 20, (unsigned long)grows[s], ns, used[s]);
        CHECK(first[s] % (2u << 20) == s * (64u << 10), "segment %u starts %lu bytes into its 2 MB",
              s, (unsigned long)(first[s] % (2u << 20)));
        CHECK((end[s] - first[s]) % (2u << 20) == 0 && end[s] > first[s],
              "segment %u spans %lu bytes", s, (unsigned long)(end[s] - first[s]));
        CHECK(grows[s] >= 1, "segment %u never grew", s);
        CHECK(used[s] > 0, "segment %u holds no object (the predictor never chose it)", s);
        CHECK(ns >= 2 && ns <= 64, "segment %u has %u slots (the shared one and this thread's)", s,
              ns);
        for (unsigned k = 0; k < ns; k++) {
            CHECK(b[k] % SLOT_BYTES == 0, "segment %u's slot at %#lx", s, (unsigned long)b[k]);
            CHECK(slot_segment((void *)b[k], n) == (int)s, "slot %#lx is another segment's too",
                  (unsigned long)b[k]);
            CHECK(first[s] - b[k] >= SLOT_BYTES, "segment %u's heap in a slot", s);
        }
        for (unsigned t = 0; t < s; t++)
            CHECK(end[t] <= first[s] || end[s] <= first[t], "segments %u and %u overlap", t, s);
    }
    /* the 3 MB objects made some segment grow by more than one step */
    uint64_t most = 0;
    for (unsigned s = 0; s < n; s++)
        if (grows[s] > most) most = grows[s];
    CHECK(most >= 2, "no segment grew twice, though 3 MB objects were allocated");
    for (int i = 1; i < N; i += 2)
        free(p[i]);
    printf("PASS layout: %u segments\n", n);
    return 0;
}

/* ------------------------------------------------------------------- hints */

static void *hinted(const uint64_t *frames, unsigned n, size_t size) {
    heaplab_site_t s = {.version = HEAPLAB_SITE_VERSION,
                        .struct_size = sizeof s,
                        .kind = HEAPLAB_SITE_MALLOC,
                        .nframes = n,
                        .size = size,
                        .site_key = heaplab_site_hash(frames, n),
                        .frame_keys = frames};
    site_hint(&s);
    return malloc(size);
}

static void expect(const char *what, void *p, int cls) {
    CHECK(p, "%s: allocation failed", what);
    CHECK(class_of(p) == cls, "%s: object in segment %d, expected %d", what, class_of(p), cls);
    printf("ok %s: segment %d\n", what, cls);
}

static int hint(void) {
    expect("frames A", hinted(FR_A, 3, 40), HL_SEG_HR);
    expect("frames B", hinted(FR_B, 3, 40), HL_SEG_SL);
    expect("frames C", hinted(FR_C, 3, 40), HL_SEG_NOTHR);
    uint64_t a4[4] = {11, 12, 13, 99}; /* depth 3: the fourth frame does not count */
    expect("frames A + 1", hinted(a4, 4, 40), HL_SEG_HR);
    expect("frames A's first one: the return address decides", hinted(FR_A, 1, 40), HL_SEG_HR);
    uint64_t a_other[3] = {11, 99, 98}; /* A's return address, other callers */
    expect("A's return address, unseen callers", hinted(a_other, 3, 40), HL_SEG_HR);
    expect("frames D1: the second frame decides", hinted(FR_D1, 3, 40), HL_SEG_HR);
    expect("frames D2", hinted(FR_D2, 3, 40), HL_SEG_SL);
    uint64_t d3[3] = {41, 77, 43}; /* D's return address, a caller never seen */
    expect("D's return address, an unseen caller", hinted(d3, 3, 40), HL_SEG_OTHER);
    expect("frames E1: the third frame decides", hinted(FR_E1, 3, 40), HL_SEG_HR);
    expect("frames E2", hinted(FR_E2, 3, 40), HL_SEG_SL);
    expect("E's first two: the stack ends (padded with 0)", hinted(FR_E1, 2, 40), HL_SEG_OTHER);
    expect("no frames", hinted(FR_A, 0, 40), HL_SEG_OTHER);
    expect("no hint", malloc(40), HL_SEG_OTHER);
    /* a hint is spent by one allocation */
    void *p = hinted(FR_A, 3, 40);
    expect("after a hint, the hinted one", p, HL_SEG_HR);
    expect("after a hint, the next one", malloc(40), HL_SEG_OTHER);
    /* realloc keeps the segment, whatever hint came before it */
    heaplab_site_t s = {.version = HEAPLAB_SITE_VERSION,
                        .struct_size = sizeof s,
                        .kind = HEAPLAB_SITE_REALLOC,
                        .nframes = 3,
                        .size = 5000,
                        .frame_keys = FR_B};
    site_hint(&s);
    expect("realloc of an HR object", realloc(p, 5000), HL_SEG_HR);
    expect("the allocation after it", malloc(40), HL_SEG_OTHER);
    printf("PASS hint\n");
    return 0;
}

static int path(void) {
    expect("A: path point 12", hinted(FR_A, 3, 40), HL_SEG_HR);
    expect("B: path point 23", hinted(FR_B, 3, 40), HL_SEG_SL);
    uint64_t both[3] = {23, 5, 12}; /* innermost wins */
    expect("23 inside 12", hinted(both, 3, 40), HL_SEG_SL);
    uint64_t both2[3] = {12, 23, 5};
    expect("12 inside 23", hinted(both2, 3, 40), HL_SEG_HR);
    expect("C: none", hinted(FR_C, 3, 40), HL_SEG_OTHER);
    uint64_t node5[3] = {5, 12, 23}; /* the tree's node for 5 decides before any path point */
    expect("the node of 5 before the points", hinted(node5, 3, 40), HL_SEG_NOTHR);
    printf("PASS path\n");
    return 0;
}

static int size(void) {
    expect("A, 24 bytes", hinted(FR_A, 3, 24), HL_SEG_HR);
    expect("A, 40 bytes", hinted(FR_A, 3, 40), HL_SEG_SL);
    expect("A, 41 bytes", hinted(FR_A, 3, 41), HL_SEG_OTHER);
    expect("B, 24 bytes", hinted(FR_B, 3, 24), HL_SEG_OTHER);
    printf("PASS size\n");
    return 0;
}

/* ----------------------------------------------------------------- runtime */

/* The key of a return address, computed as heaplab_site.h says a program
 * computes it (dladdr1 for the module, /proc/self/exe's name for the main
 * program). */
static uint64_t key_of(void *ra) {
    Dl_info info;
    struct link_map *lm = NULL;
    CHECK(dladdr1(ra, &info, (void **)&lm, RTLD_DL_LINKMAP) && lm, "dladdr1(%p) failed", ra);
    const char *name = info.dli_fname;
    char exe[4096];
    if (!lm->l_name || !lm->l_name[0]) {
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        CHECK(n > 0, "readlink /proc/self/exe");
        exe[n] = 0;
        name = exe;
    }
    return heaplab_frame_key(name, strlen(name), (uintptr_t)ra - lm->l_addr);
}

static uint64_t expected[2];
static void *volatile sink;

__attribute__((noinline)) static void g(int how) {
    expected[0] = key_of(__builtin_return_address(0)); /* into f */
    if (how == 0)
        sink = malloc(48);
    else if (how == 1)
        sink = calloc(3, 16);
    else
        sink = realloc(NULL, 48);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void f(int how) {
    expected[1] = key_of(__builtin_return_address(0)); /* into runtime() */
    g(how);
    __asm__ volatile("" ::: "memory");
}

static int runtime(void) {
    static const char *via[3] = {"malloc", "calloc", "realloc(NULL)"};
    for (int how = 0; how < 3; how++) {
        f(how);
        uint64_t keys[16], sp;
        unsigned cls;
        int n = last(keys, 16, &cls, &sp);
        CHECK(n >= 0, "run with HEAPLAB_SEG_DEBUG=1");
        CHECK(n >= 3, "%s: %d frames unwound", via[how], n);
        CHECK(keys[1] == expected[0], "%s: frame 1 key %#llx, expected %#llx (the return into f)",
              via[how], (unsigned long long)keys[1], (unsigned long long)expected[0]);
        CHECK(keys[2] == expected[1], "%s: frame 2 key %#llx, expected %#llx", via[how],
              (unsigned long long)keys[2], (unsigned long long)expected[1]);
        /* frame 0 is the return into g: the same module as g, at an offset inside g */
        uint64_t k0 = key_of((void *)g);
        uint64_t inv = 1; /* the inverse of φ modulo 2^64, by Newton's iteration */
        for (int i = 0; i < 6; i++)
            inv *= 2 - 0x9E3779B97F4A7C15ull * inv;
        Dl_info info;
        struct link_map *lm = NULL;
        dladdr1((void *)g, &info, (void **)&lm, RTLD_DL_LINKMAP);
        uint64_t g_off = (uintptr_t)(void *)g - lm->l_addr;
        uint64_t modname = k0 ^ (g_off * 0x9E3779B97F4A7C15ull);
        uint64_t off0 = (keys[0] ^ modname) * inv;
        CHECK(off0 > g_off && off0 < g_off + 256,
              "%s: frame 0 at offset %#llx, not inside g (at %#llx)", via[how],
              (unsigned long long)off0, (unsigned long long)g_off);
        printf("ok runtime via %s: %d frames, the first three are g, f, runtime\n", via[how], n);
    }
    printf("PASS runtime\n");
    return 0;
}

/* ------------------------------------------------------------------ levels */

typedef uint64_t (*levels_fn)(uint64_t *, unsigned, uint64_t *);

__attribute__((noinline)) static void *wrap(size_t n) { /* a wrapper: its callers decide */
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}
__attribute__((noinline)) static void *via_a(size_t n) {
    void *p = wrap(n);
    __asm__ volatile("" ::: "memory");
    return p;
}
__attribute__((noinline)) static void *via_b(size_t n) {
    void *p = wrap(n);
    __asm__ volatile("" ::: "memory");
    return p;
}
__attribute__((noinline)) static void *wrap2(size_t n) { /* a wrapper of the wrapper */
    void *p = wrap(n);
    __asm__ volatile("" ::: "memory");
    return p;
}
__attribute__((noinline)) static void *via_c(size_t n) { /* decided at the third frame */
    void *p = wrap2(n);
    __asm__ volatile("" ::: "memory");
    return p;
}
__attribute__((noinline)) static void *via_d(size_t n) { /* the second frame is in no node */
    void *p = wrap(n);
    __asm__ volatile("" ::: "memory");
    return p;
}
__attribute__((noinline)) static void *direct(size_t n) { /* decided by its return address */
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}
__attribute__((noinline)) static void *unknown_site(size_t n) { /* in no node */
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

/* The keys the walk computed for the last allocation. */
static void last_keys(const char *what, uint64_t *k) {
    unsigned cls;
    uint64_t sp;
    int n = last(k, 3, &cls, &sp);
    CHECK(n >= 3, "%s: %d frames walked (run with HEAPLAB_SEG_DEBUG=1 and the walking table)",
          what, n);
}

/* First run (the walking table): learn the keys, build the tree, run again. */
static int levels(const char *lib, char **argv) {
    uint64_t kd[3], ka[3], kb[3], kc[3];
    free(direct(40));
    last_keys("direct", kd);
    free(via_a(40));
    last_keys("via_a", ka);
    free(via_b(40));
    last_keys("via_b", kb);
    free(via_c(40));
    last_keys("via_c", kc);
    CHECK(ka[0] == kb[0] && ka[0] == kc[0], "the wrapper's return address has several keys");
    CHECK(ka[1] != kb[1], "via_a and via_b return to the same key");
    static char nodes[512], preload[4096];
    snprintf(nodes, sizeof nodes,
             "HEAPLAB_SEGTEST_NODES=%llx=%x,%llx=%x,%llx=%x,%llx=%x,%llx=%x,%llx=%x",
             (unsigned long long)heaplab_site_hash(kd, 1), HL_SEG_LEAF(HL_SEG_HR),
             (unsigned long long)heaplab_site_hash(ka, 1), HL_SEG_WALKS(2),
             (unsigned long long)heaplab_site_hash(ka, 2), HL_SEG_LEAF(HL_SEG_SL),
             (unsigned long long)heaplab_site_hash(kb, 2), HL_SEG_LEAF(HL_SEG_NOTHR),
             (unsigned long long)heaplab_site_hash(kc, 2), HL_SEG_WALKS(1),
             (unsigned long long)heaplab_site_hash(kc, 3), HL_SEG_LEAF(HL_SEG_HR));
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s", lib);
    char *env[] = {nodes, preload, NULL};
    char *args[] = {argv[0], "levels-child", NULL};
    printf("ok levels: learned the keys; running again with the tree\n");
    execve("/proc/self/exe", args, env);
    CHECK(0, "execve: %s", strerror(errno));
    return 1;
}

/* Second run: each site lands where its node says, decided at its level. */
static int levels_child(void) {
    levels_fn levels_of = (levels_fn)dlsym(RTLD_DEFAULT, "heaplab_seg_levels");
    CHECK(levels_of, "no heaplab_seg_levels export");
    enum { SITES = 6, ROUNDS = 100 };
    uint64_t l0[4] = {0}, l1[4] = {0}, u0, u1;
    static void *p[ROUNDS][SITES];
    uint64_t n0 = levels_of(l0, 4, &u0);
    for (int r = 0; r < ROUNDS; r++) {
        p[r][0] = direct(40);
        p[r][1] = via_a(40);
        p[r][2] = via_b(40);
        p[r][3] = unknown_site(40);
        p[r][4] = via_c(40);
        p[r][5] = via_d(40);
        if (r % 2) /* every other round from the caches */
            for (int i = 0; i < SITES; i++)
                free(p[r][i]);
    }
    uint64_t n1 = levels_of(l1, 4, &u1);
    static const int want[SITES] = {HL_SEG_HR,    HL_SEG_SL, HL_SEG_NOTHR,
                                    HL_SEG_OTHER, HL_SEG_HR, HL_SEG_OTHER};
    static const char *site[SITES] = {"direct",       "via_a", "via_b",
                                      "unknown_site", "via_c", "via_d"};
    for (int r = 0; r < ROUNDS; r += 2)
        for (int i = 0; i < SITES; i++)
            CHECK(class_of(p[r][i]) == want[i], "round %d: %s's object in segment %d, expected %d",
                  r, site[i], class_of(p[r][i]), want[i]);
    CHECK(n1 - n0 == SITES * ROUNDS, "%llu identifications for %d allocations",
          (unsigned long long)(n1 - n0), SITES * ROUNDS);
    CHECK(l1[0] - l0[0] == 2 * ROUNDS, "%llu decided by the return address alone, expected %d",
          (unsigned long long)(l1[0] - l0[0]), 2 * ROUNDS);
    CHECK(l1[1] - l0[1] == 3 * ROUNDS, "%llu decided at the second frame, expected %d",
          (unsigned long long)(l1[1] - l0[1]), 3 * ROUNDS);
    CHECK(l1[2] - l0[2] == ROUNDS, "%llu decided at the third frame, expected %d",
          (unsigned long long)(l1[2] - l0[2]), ROUNDS);
    CHECK(u1 - u0 == 2 * ROUNDS, "%llu in no node, expected %d", (unsigned long long)(u1 - u0),
          2 * ROUNDS);
    for (int r = 0; r < ROUNDS; r += 2)
        for (int i = 0; i < SITES; i++)
            free(p[r][i]);
    printf("PASS levels: the return address decides direct and unknown_site, the second frame "
           "the wrapper's callers, the third the wrapper's wrapper's\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr,
                "usage: seg-test layout N | hint | path | size | runtime | levels LIB\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IONBF, 0);
    find_exports();
    if (!strcmp(argv[1], "layout")) return layout(argc > 2 ? (unsigned)atoi(argv[2]) : 4);
    if (!strcmp(argv[1], "hint")) return hint();
    if (!strcmp(argv[1], "path")) return path();
    if (!strcmp(argv[1], "size")) return size();
    if (!strcmp(argv[1], "runtime")) return runtime();
    if (!strcmp(argv[1], "levels") && argc > 2) return levels(argv[2], argv);
    if (!strcmp(argv[1], "levels-child")) return levels_child();
    fprintf(stderr, "seg-test: unknown test %s\n", argv[1]);
    return 2;
}
