/*
 * conform.c: does the loaded malloc behave as the C library promises?
 *
 *   alloc-conform [--info]   (run under LD_PRELOAD=libheaplab-NAME.so, or bare for glibc)
 *
 * Alignment and usable size for every size 0..4096 and for larger ones; no
 * overlap between live blocks; payload survives realloc; calloc zeroes and
 * overflowing sizes give NULL + ENOMEM; malloc(0), free(NULL), realloc edge
 * cases; huge requests give NULL + ENOMEM; the memalign family with
 * alignments 8 .. 1 MiB and its EINVAL cases; fork, also while another
 * thread is allocating.  Exit status 0 when every expectation held.
 */
#include "testlib.h"
#include "heaplab_site.h"

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile size_t v_huge = SIZE_MAX, v_half = SIZE_MAX / 2 + 1; /* hide from the compiler */

static void test_sizes(void) {
    enum { N = 4097 };
    static void *p[N];
    static t_span_t span[N + 16];
    size_t ns = 0;
    for (size_t n = 0; n < N; n++) {
        p[n] = malloc(n);
        EXPECT(p[n] != NULL, "malloc(%zu)", n);
        if (!p[n]) continue;
        EXPECT(((uintptr_t)p[n] & 15) == 0, "malloc(%zu) = %p not 16-aligned", n, p[n]);
        size_t u = malloc_usable_size(p[n]);
        EXPECT(u >= n, "malloc_usable_size(malloc(%zu)) = %zu", n, u);
        memset(p[n], 0xA5, u); /* the caller may use all of it */
        span[ns++] = (t_span_t){(uintptr_t)p[n], (uintptr_t)p[n] + (u ? u : 1)};
    }
    static const size_t big[] = {4097,          5000,    8191,          8192,    12345,
                                 65535,         65536,   65537,         100000,  1 << 20,
                                 (1 << 20) + 3, 3 << 20, (8 << 20) + 1, 32 << 20};
    void *b[sizeof big / sizeof *big];
    for (size_t i = 0; i < sizeof big / sizeof *big; i++) {
        b[i] = malloc(big[i]);
        EXPECT(b[i] != NULL, "malloc(%zu)", big[i]);
        if (!b[i]) continue;
        EXPECT(((uintptr_t)b[i] & 15) == 0, "malloc(%zu) = %p not 16-aligned", big[i], b[i]);
        size_t u = malloc_usable_size(b[i]);
        EXPECT(u >= big[i], "malloc_usable_size(malloc(%zu)) = %zu", big[i], u);
        memset(b[i], 0x5A, u);
        span[ns++] = (t_span_t){(uintptr_t)b[i], (uintptr_t)b[i] + u};
    }
    t_check_heap();
    EXPECT(t_overlaps(span, ns) == 0, "live blocks overlap");
    /* contents survived the other blocks being written */
    for (size_t n = 1; n < N; n += 97)
        if (p[n])
            EXPECT(((unsigned char *)p[n])[n - 1] == 0xA5, "block of %zu bytes overwritten", n);
    for (size_t n = 0; n < N; n++)
        free(p[n]);
    for (size_t i = 0; i < sizeof big / sizeof *big; i++)
        free(b[i]);
    t_check_heap();
}

static void test_realloc(void) {
    /* grow one block step by step, with other blocks allocated in between so
     * that some growths happen in place and some move */
    size_t n = 1;
    char *p = malloc(n);
    t_fill(p, n, 1);
    void *junk[64] = {0};
    int j = 0;
    while (n < 300000) {
        size_t m = n + n / 2 + 1;
        char *q = realloc(p, m);
        EXPECT(q != NULL, "realloc(%zu -> %zu)", n, m);
        if (!q) break;
        EXPECT(((uintptr_t)q & 15) == 0, "realloc to %zu not aligned", m);
        long bad = t_verify(q, n, 1);
        EXPECT(bad < 0, "realloc(%zu -> %zu) lost byte %ld", n, m, bad);
        EXPECT(malloc_usable_size(q) >= m, "usable after realloc to %zu", m);
        t_fill(q, m, 1);
        p = q;
        n = m;
        if (j < 64) junk[j++] = malloc(n / 3 + 1);
    }
    /* shrink back down */
    while (n > 2) {
        size_t m = n / 3 + 1;
        char *q = realloc(p, m);
        EXPECT(q != NULL, "realloc(%zu -> %zu)", n, m);
        if (!q) break;
        long bad = t_verify(q, m, 1);
        EXPECT(bad < 0, "shrinking realloc(%zu -> %zu) lost byte %ld", n, m, bad);
        p = q;
        n = m;
    }
    free(p);
    for (int i = 0; i < j; i++)
        free(junk[i]);
    /* realloc(NULL, n) is malloc(n); realloc(p, 0) frees p */
    p = realloc(NULL, 100);
    EXPECT(p != NULL, "realloc(NULL, 100)");
    t_fill(p, 100, 2);
    char *q = realloc(p, 0);
    if (q) /* glibc returns NULL; a unique pointer would be allowed too */
        free(q);
    /* a failed realloc leaves the block alone */
    p = malloc(64);
    t_fill(p, 64, 3);
    errno = 0;
    q = realloc(p, v_huge);
    EXPECT(q == NULL && errno == ENOMEM, "realloc(p, SIZE_MAX) = %p, errno %d", (void *)q, errno);
    EXPECT(t_verify(p, 64, 3) < 0, "failed realloc damaged the block");
    errno = 0;
    q = reallocarray(p, v_half, 2);
    EXPECT(q == NULL && errno == ENOMEM, "reallocarray overflow = %p, errno %d", (void *)q, errno);
    q = reallocarray(p, 10, 20);
    EXPECT(q != NULL && t_verify(q, 64, 3) < 0, "reallocarray(p, 10, 20)");
    free(q ? q : p);
    t_check_heap();
}

static void test_calloc(void) {
    /* dirty memory first so that calloc has to clear reused blocks */
    for (size_t n = 1; n < 3000; n += 37) {
        void *d = malloc(n);
        memset(d, 0xFF, n);
        free(d);
        unsigned char *c = calloc(1, n);
        EXPECT(c != NULL, "calloc(1, %zu)", n);
        if (!c) continue;
        size_t nz = 0;
        for (size_t i = 0; i < n; i++)
            nz += c[i] != 0;
        EXPECT(nz == 0, "calloc(1, %zu) has %zu nonzero bytes", n, nz);
        memset(c, 0xEE, n);
        free(c);
    }
    unsigned char *c = calloc(1000, 1000);
    EXPECT(c != NULL, "calloc(1000, 1000)");
    if (c) {
        size_t nz = 0;
        for (size_t i = 0; i < 1000000; i++)
            nz += c[i] != 0;
        EXPECT(nz == 0, "calloc(1000, 1000) has %zu nonzero bytes", nz);
        free(c);
    }
    static const size_t ov[][2] = {{SIZE_MAX / 2 + 1, 2},
                                   {(size_t)1 << 33, (size_t)1 << 33},
                                   {SIZE_MAX, SIZE_MAX},
                                   {3, SIZE_MAX / 3 + 1}};
    for (size_t i = 0; i < 4; i++) {
        errno = 0;
        void *p = calloc(ov[i][0], ov[i][1]);
        EXPECT(p == NULL && errno == ENOMEM, "calloc(%zu, %zu) = %p, errno %d", ov[i][0], ov[i][1],
               p, errno);
    }
    void *z = calloc(0, 0);
    free(z);
}

static void test_edges(void) {
    void *a = malloc(0), *b = malloc(0);
    EXPECT(a != NULL && b != NULL && a != b, "malloc(0) twice = %p, %p", a, b);
    free(a);
    free(b);
    free(NULL);
    EXPECT(malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL)");
    static const size_t huge[] = {SIZE_MAX,        SIZE_MAX - 4096, (size_t)PTRDIFF_MAX,
                                  (size_t)1 << 50, (size_t)1 << 46, (size_t)1 << 42,
                                  (size_t)1 << 38};
    for (size_t i = 0; i < sizeof huge / sizeof *huge; i++) {
        volatile size_t n = huge[i];
        errno = 0;
        void *p = malloc(n);
        EXPECT(p == NULL && errno == ENOMEM, "malloc(%zu) = %p, errno %d", huge[i], p, errno);
        free(p);
    }
    /* errno is not disturbed by success */
    errno = 1234;
    void *p = malloc(100);
    EXPECT(errno == 1234, "successful malloc changed errno to %d", errno);
    free(p);
    /* after a failure the allocator still works */
    p = malloc(1000);
    EXPECT(p != NULL, "malloc after failure");
    free(p);
    t_check_heap();
}

static void test_memalign(void) {
    static const size_t sizes[] = {0, 1, 7, 16, 24, 100, 1000, 4096, 5000, 100000};
    enum { NS = sizeof sizes / sizeof *sizes };
    static void *live[21 * NS * 3];
    static t_span_t span[21 * NS * 3];
    size_t nl = 0;
    for (size_t al = 8; al <= (1 << 20); al *= 2) {
        for (size_t i = 0; i < NS; i++) {
            size_t n = sizes[i];
            void *p = NULL;
            int r = posix_memalign(&p, al, n);
            EXPECT(r == 0 && p != NULL, "posix_memalign(%zu, %zu) = %d", al, n, r);
            void *q = aligned_alloc(al, n ? HL_ALIGN_UP(n, al) : al);
            EXPECT(q != NULL, "aligned_alloc(%zu, %zu)", al, n);
            void *m = memalign(al, n);
            EXPECT(m != NULL, "memalign(%zu, %zu)", al, n);
            void *got[3] = {p, q, m};
            size_t want[3] = {n, n ? HL_ALIGN_UP(n, al) : al, n};
            for (int k = 0; k < 3; k++) {
                if (!got[k]) continue;
                EXPECT(((uintptr_t)got[k] & (al - 1)) == 0, "alignment %zu: %p", al, got[k]);
                size_t u = malloc_usable_size(got[k]);
                EXPECT(u >= want[k], "usable %zu < %zu at alignment %zu", u, want[k], al);
                t_fill(got[k], want[k], al * 31 + n * 7 + (size_t)k);
                live[nl] = got[k];
                span[nl++] = (t_span_t){(uintptr_t)got[k], (uintptr_t)got[k] + (u ? u : 1)};
            }
        }
        t_check_heap();
    }
    size_t nspan = nl;
    EXPECT(t_overlaps(span, nspan) == 0, "aligned blocks overlap");
    /* every aligned block keeps its pattern; realloc one in three, free all */
    nl = 0;
    for (size_t al = 8; al <= (1 << 20); al *= 2)
        for (size_t i = 0; i < NS; i++)
            for (int k = 0; k < 3; k++) {
                size_t n = sizes[i], w = k == 1 ? (n ? HL_ALIGN_UP(n, al) : al) : n;
                void *b = live[nl++];
                if (!b) continue;
                long bad = t_verify(b, w, al * 31 + n * 7 + (size_t)k);
                EXPECT(bad < 0, "aligned block (%zu, %zu) lost byte %ld", al, w, bad);
                if (k == 2) {
                    void *r = realloc(b, w + 5000);
                    EXPECT(r != NULL, "realloc of aligned block");
                    if (r) {
                        bad = t_verify(r, w, al * 31 + n * 7 + (size_t)k);
                        EXPECT(bad < 0, "realloc of aligned block (%zu) lost byte %ld", al, bad);
                        b = r;
                    }
                }
                free(b);
            }
    t_check_heap();
    /* valloc and pvalloc */
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    void *v = valloc(100), *pv = pvalloc(100);
    EXPECT(v && ((uintptr_t)v & (ps - 1)) == 0, "valloc(100) = %p", v);
    EXPECT(pv && ((uintptr_t)pv & (ps - 1)) == 0 && malloc_usable_size(pv) >= ps,
           "pvalloc(100) = %p", pv);
    if (v) memset(v, 1, 100);
    if (pv) memset(pv, 2, ps);
    free(v);
    free(pv);
    /* error cases */
    void *p = (void *)1;
    EXPECT(posix_memalign(&p, 3, 8) == EINVAL && p == (void *)1, "posix_memalign(3) not EINVAL");
    EXPECT(posix_memalign(&p, 4, 8) == EINVAL, "posix_memalign(4): not a multiple of void *");
    EXPECT(posix_memalign(&p, 0, 8) == EINVAL, "posix_memalign(0)");
    errno = 0;
    EXPECT(posix_memalign(&p, 64, v_huge) == ENOMEM && p == (void *)1,
           "posix_memalign(64, SIZE_MAX)");
    errno = 0;
    void *h = memalign(64, v_huge);
    EXPECT(h == NULL && errno == ENOMEM, "memalign(64, SIZE_MAX) = %p errno %d", h, errno);
    errno = 0;
    h = memalign((size_t)1 << 62, 8);
    EXPECT(h == NULL && errno == ENOMEM, "memalign(2^62, 8) = %p errno %d", h, errno);
    errno = 0;
    h = pvalloc(v_huge - 100);
    EXPECT(h == NULL && errno == ENOMEM, "pvalloc(SIZE_MAX - 100) = %p errno %d", h, errno);
    /* non-power-of-two alignments: glibc 2.36 rounds up */
    h = memalign(24, 100);
    EXPECT(h && ((uintptr_t)h & 31) == 0, "memalign(24, 100) = %p", h);
    free(h);
    t_check_heap();
}

/* ---- fork ---- */

static volatile int churn_stop;
static void *churn(void *arg) {
    t_rng_t r = {(uintptr_t)arg | 1};
    void *slot[64] = {0};
    while (!churn_stop) {
        int i = (int)t_below(&r, 64);
        free(slot[i]);
        slot[i] = malloc(t_below(&r, 2000) + 1);
    }
    for (int i = 0; i < 64; i++)
        free(slot[i]);
    return NULL;
}

static void test_fork(void) {
    enum { NB = 200 };
    char *blk[NB];
    for (int i = 0; i < NB; i++) {
        blk[i] = malloc((size_t)i * 13 + 1);
        t_fill(blk[i], (size_t)i * 13 + 1, (uint64_t)i);
    }
    pthread_t th;
    pthread_create(&th, NULL, churn, (void *)7);
    for (int round = 0; round < 20; round++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            alarm(20); /* a lock left held across fork would hang here */
            int bad = 0;
            for (int i = 0; i < NB; i++)
                bad += t_verify(blk[i], (size_t)i * 13 + 1, (uint64_t)i) >= 0;
            void *m[100];
            for (int i = 0; i < 100; i++)
                m[i] = malloc((size_t)i * 100 + 1);
            for (int i = 0; i < 100; i++)
                free(m[i]);
            for (int i = 0; i < NB; i += 2)
                free(blk[i]);
            t_check_heap();
            _exit(bad ? 3 : 0);
        }
        EXPECT(pid > 0, "fork failed");
        int status = 0;
        waitpid(pid, &status, 0);
        EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
               "fork child (round %d) status %#x (signal %d)", round, status,
               WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    }
    churn_stop = 1;
    pthread_join(th, NULL);
    for (int i = 0; i < NB; i++) {
        EXPECT(t_verify(blk[i], (size_t)i * 13 + 1, (uint64_t)i) < 0, "parent block %d", i);
        free(blk[i]);
    }
    t_check_heap();
}

int main(int argc, char **argv) {
    t_prog = "conform";
    t_lookup();
    if (argc > 1 && !strcmp(argv[1], "--info")) { /* for the registry check in run.sh */
        if (!t_info_fn) return 1;
        const hl_alloc_info_t *i = t_info_fn();
        printf("%s|%s|%s\n", i->name, i->description, i->reference);
        return 0;
    }
    test_sizes();
    test_realloc();
    test_calloc();
    test_edges();
    test_memalign();
    test_fork();
    /* the site-hint export: callable, and the allocation after it works */
    heaplab_site_hint_fn hint = (heaplab_site_hint_fn)dlsym(RTLD_DEFAULT, "heaplab_site_hint");
    EXPECT(!t_info_fn || hint, "a heaplab allocator must export heaplab_site_hint");
    if (hint) {
        uint64_t keys[2] = {1, 2};
        heaplab_site_t site = {
            HEAPLAB_SITE_VERSION,       sizeof site, HEAPLAB_SITE_MALLOC, 2, 40, 0, 0,
            heaplab_site_hash(keys, 2), keys};
        hint(&site);
        void *p = malloc(40);
        EXPECT(p != NULL, "malloc after a site hint");
        free(p);
    }
    return t_finish();
}
