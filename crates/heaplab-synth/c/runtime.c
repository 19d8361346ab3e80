/* ======================================================================== */
/* The runtime: the same in every synthesized allocator                      */
/* (crates/heaplab-synth/c/runtime.c, copied here verbatim).  Everything      */
/* above this part was generated from the profile; the entry points below it */
/* are too.                                                                  */
/* ======================================================================== */
/*
 * Three allocators in one, told apart by where a block lies:
 *
 *   the fast core (native/alloc/fastcore.h)   every size up to SYN_CORE's fast_max
 *     per-thread slots of 8 GiB,              that the plan did not make general:
 *     a 128 MiB span per class, slabs         lock-free lists per thread, class
 *                                              from the address
 *   general lists over gnugpp                 the classes the plan made general
 *     (002 §2.2: storage that can be          (episodic ones, when the measured
 *     given back and coalesced)                cost agreed): under the lock
 *   gnugpp (native/alloc/gnugpp.c)            requests over fast_max and under
 *     Lea's segregated first fit               SYN_HUGE, memalign, a full span:
 *                                              under the lock
 *   huge blocks                               requests of SYN_HUGE and more: their
 *     their own pages from the OS              own mapping each, given back when
 *                                              freed; calloc needs no memset
 *
 *   a huge block   m                m+8                  m+16 (16-aligned, 16 mod the page)
 *                  +----------------+--------------------+----------------------------+
 *                  | SYN_HUGE_MAGIC | bytes | HL_TAG_USED | payload (bytes - 16) ...   |
 *                  +----------------+--------------------+----------------------------+
 *   (the word below the payload ends in HL_TAG_USED, which gnugpp never
 *   writes there: hl_alloc.h's header-bit convention)
 *
 * A general block is one of gnugpp's (on the default heap).  When its usable
 * size falls in a general list's range, free keeps it on that list (second
 * payload word SYN_LISTED); reclaim gives listed blocks back to gnugpp, in
 * the synthesized priority order, when gnugpp would otherwise grow its heap.
 *
 * Invariants (between calls): general_n[g] blocks are on general[g], each
 * with SYN_LISTED and a usable size in the list's range; `reclaimable` is
 * the sum of their blocks; the fast core's own (fastcore.h).
 *
 * Locking: the entry points run the fast core's hot paths without the lock;
 * everything else goes through the shim's locked API (SYN_LOCKED_*), which
 * calls this file's hl_alloc_t under the shim's one lock.
 */

extern const hl_alloc_t hl_alloc_gnugpp;

#define SYN_LISTED ((uint64_t)0x4c49535445445f5full) /* "__LISTED" */
#define SYN_NG1    (SYN_NGEN ? SYN_NGEN : 1)

/* As a variable, so that loops over no lists compile without warnings. */
static const unsigned syn_ngen = SYN_NGEN;

typedef struct syn_link {
    struct syn_link *next;
    uint64_t listed;
} syn_link_t;

static syn_link_t *general[SYN_NG1]; /* the general lists */
static size_t general_n[SYN_NG1];
static size_t reclaimable;           /* bytes of blocks on the general lists */
static int deny_growth;              /* gnugpp may not grow its heap (see SYN_GP_SBRK) */
static size_t huge_blocks;           /* live huge blocks (the checker's count) */

#define SYN_HUGE       ((size_t)128 << 10)
#define SYN_HUGE_MAGIC ((uint64_t)0x4b434f4c42454755ull) /* "UGEBLOCK" */
static unsigned long reclaims, reclaimed_bytes;

/* The shim's API, exported by it under these names (build.rs: -DHL_API_...);
 * hidden, so that the calls are direct. */
HL_HIDDEN void *SYN_LOCKED_MALLOC(size_t n);
HL_HIDDEN void SYN_LOCKED_FREE(void *p);
HL_HIDDEN void *SYN_LOCKED_CALLOC(size_t a, size_t b);
HL_HIDDEN void *SYN_LOCKED_REALLOC(void *p, size_t n);
HL_HIDDEN size_t SYN_LOCKED_USABLE(void *p);

/* gnugpp.c is compiled with -Dhl_sbrk=SYN_GP_SBRK: every growth of its heap
 * comes here, and fails while deny_growth is set, so that GP_TRY learns that
 * gnugpp has no fit before reclaiming the general lists. */
void *SYN_GP_SBRK(intptr_t incr);
void *SYN_GP_SBRK(intptr_t incr) {
    if (incr > 0 && deny_growth) return NULL;
    return hl_sbrk(incr);
}

/* ------------------------------------------------------------------------ */
/* The general allocator, with reclaim (002 §2.2)                            */
/* ------------------------------------------------------------------------ */

static inline size_t gp_block(void *p) {
    return hl_alloc_gnugpp.usable_size(p) + 16;
}

/* Give listed blocks back to gnugpp in the synthesized priority order until
 * `want` bytes are recovered. */
static void __attribute__((noinline)) reclaim(size_t want) {
    size_t got = 0;
    for (unsigned i = 0; i < syn_ngen && got < want; i++) {
        unsigned g = syn_reclaim_order[i];
        while (general[g] && got < want) {
            syn_link_t *f = general[g];
            general[g] = f->next;
            general_n[g]--;
            f->listed = 0;
            size_t b = gp_block(f);
            reclaimable -= b;
            got += b;
            hl_alloc_gnugpp.free(f);
        }
    }
    reclaims++;
    reclaimed_bytes += got;
}

/* Run a gnugpp call that may need memory: first without letting its heap
 * grow; if it has no fit, reclaim twice the request and call it again
 * (growing the heap if the reclaimed blocks did not coalesce into a fit). */
#define GP_TRY(expr, bytes)                                                                        \
    do {                                                                                           \
        if (!reclaimable) return (expr);                                                           \
        deny_growth = 1;                                                                           \
        void *r_ = (expr);                                                                         \
        deny_growth = 0;                                                                           \
        if (r_) return r_;                                                                         \
        reclaim(2 * (bytes));                                                                      \
        return (expr);                                                                             \
    } while (0)

static void *gp_malloc(size_t n) {
    GP_TRY(hl_alloc_gnugpp.malloc(n), n);
}
static void *gp_realloc(void *p, size_t n) {
    GP_TRY(hl_alloc_gnugpp.realloc(p, n), n);
}
static void *gp_memalign(size_t align, size_t n) {
    GP_TRY(hl_alloc_gnugpp.memalign(align, n), n + align);
}

static void *general_malloc(unsigned g) {
    syn_link_t *f = general[g];
    if (f) {
        general[g] = f->next;
        general_n[g]--;
        f->listed = 0;
        reclaimable -= gp_block(f);
        return f;
    }
    return gp_malloc(syn_general[g].hi);
}

static void general_free(void *p) {
    size_t u = hl_alloc_gnugpp.usable_size(p); /* aborts on a block gnugpp does not own */
    int g = syn_general_of_usable(u);
    if (g < 0) {
        hl_alloc_gnugpp.free(p);
        return;
    }
    syn_link_t *f = p;
    if (HL_UNLIKELY(f->listed == SYN_LISTED))
        for (syn_link_t *q = general[g]; q; q = q->next)
            if (q == f) hl_fatal("free(%p): already free (double free)", p);
    f->listed = SYN_LISTED;
    f->next = general[g];
    general[g] = f;
    general_n[g]++;
    reclaimable += u + 16;
}

/* ------------------------------------------------------------------------ */
/* Huge blocks: their own pages                                              */
/* ------------------------------------------------------------------------ */

static void *huge_alloc(size_t n) {
    size_t bytes = HL_ALIGN_UP(n + 16, hl_page_size());
    uint64_t *m = hl_pages_alloc(bytes, 0);
    if (!m) return NULL;
    m[0] = SYN_HUGE_MAGIC;
    m[1] = bytes | HL_TAG_USED;
    huge_blocks++;
    return m + 2;
}

/* p is not the fast core's: is it a huge block?  The word below a gnugpp
 * payload never ends in HL_TAG_USED, so the magic is read only for ours. */
static int is_huge(void *p) {
    const uint64_t *h = (const uint64_t *)p - 2;
    return ((uintptr_t)p & (hl_page_size() - 1)) == 16 &&
           (h[1] & HL_HDR_LOW_BITS) == HL_TAG_USED && h[0] == SYN_HUGE_MAGIC;
}

static size_t huge_bytes(void *p) {
    return ((const uint64_t *)p)[-1] & ~(uint64_t)HL_HDR_LOW_BITS;
}

/* A huge block resized to n (>= SYN_HUGE) bytes where its pages are
 * (mremap moves page tables, not bytes: perl's hash arrays grow to MiBs by
 * doubling), or NULL (the block is as it was). */
static void *huge_resize(void *p, size_t n) {
    uint64_t *m = (uint64_t *)p - 2;
    size_t bytes = HL_ALIGN_UP(n + 16, hl_page_size());
    uint64_t *q = hl_pages_resize(m, huge_bytes(p), bytes);
    if (!q) return NULL;
    q[1] = bytes | HL_TAG_USED;
    return q + 2;
}

static void huge_free(void *p) {
    uint64_t *m = (uint64_t *)p - 2;
    size_t bytes = huge_bytes(p);
    m[0] = 0;
    huge_blocks--;
    hl_pages_free(m, bytes);
}

/* ------------------------------------------------------------------------ */
/* The allocator under the shim's lock                                       */
/* ------------------------------------------------------------------------ */

static int syn_init(void) {
    /* gnugpp keeps the default heap; built with GNUGPP_LAZY_START, it reads
     * its tunables now (getenv: outside the calls a replay counts) and
     * starts the heap at its first growth, so a program the fast core serves
     * whole pays no page for it. */
    if (hl_alloc_gnugpp.init() != 0) return -1;
    /* The zoo's test modes run every call under the lock, on slot 0. */
    int front = !hl_tunable("HEAPLAB_PAD", 0) && !hl_tunable("HEAPLAB_GENERIC", 0);
    return sf_init_locked(&SYN_CORE, front);
}

static void *syn_malloc(size_t n) {
    unsigned c = sf_class_of(&SYN_CORE, n);
    if (c < SYN_CORE.nclass) {
        int fresh;
        void *p = sf_alloc_locked(&SYN_CORE, c, &fresh);
        if (p) return p;
    }
    int g = syn_general_of(n);
    if (g >= 0) return general_malloc((unsigned)g);
    if (n >= SYN_HUGE) return huge_alloc(n);
    return gp_malloc(n);
}

static void syn_free(void *p) {
    if (sf_slot_of(&SYN_CORE, p)) {
        sf_free_locked(&SYN_CORE, p);
        return;
    }
    if (is_huge(p)) {
        huge_free(p);
        return;
    }
    general_free(p);
}

static size_t syn_usable_size(void *p) {
    if (sf_slot_of(&SYN_CORE, p)) return sf_block_size(&SYN_CORE, p, "malloc_usable_size");
    if (is_huge(p)) return huge_bytes(p) - 16;
    return hl_alloc_gnugpp.usable_size(p);
}

/* Moves a block to a new one of n bytes (realloc across allocators). */
static void *moved(void *p, size_t u, size_t n) {
    void *q = syn_malloc(n);
    if (!q) return NULL;
    memcpy(q, p, n < u ? n : u);
    syn_free(p);
    return q;
}

/* A fast block stays put while the new size is of its class or uses at
 * least half of it (002 §2.2: realloc'd objects go to the list of the
 * closest suitable size). */
static void *syn_realloc(void *p, size_t n) {
    if (sf_slot_of(&SYN_CORE, p)) {
        size_t u = sf_block_size(&SYN_CORE, p, "realloc");
        if (n <= u && (n >= u / 2 || sf_class_of(&SYN_CORE, n) == sf_class_at(p))) return p;
        return moved(p, u, n);
    }
    if (is_huge(p)) {
        size_t u = huge_bytes(p) - 16;
        if (n <= u && n >= u / 2) return p;
        void *q = n >= SYN_HUGE ? huge_resize(p, n) : NULL;
        return q ? q : moved(p, u, n);
    }
    if (n >= SYN_HUGE) return moved(p, hl_alloc_gnugpp.usable_size(p), n);
    return gp_realloc(p, n);
}

static void *syn_memalign(size_t align, size_t n) {
    return gp_memalign(align, n);
}

static void syn_check(void) {
    hl_alloc_gnugpp.check();
    size_t sum = 0;
    for (unsigned g = 0; g < syn_ngen; g++) {
        size_t n = 0;
        for (syn_link_t *f = general[g]; f; f = f->next) {
            HL_CHECK(f->listed == SYN_LISTED);
            size_t u = hl_alloc_gnugpp.usable_size(f);
            HL_CHECK(syn_general_of_usable(u) == (int)g);
            sum += u + 16;
            HL_CHECK(++n <= general_n[g]);
        }
        HL_CHECK(n == general_n[g]);
    }
    HL_CHECK(sum == reclaimable);
    sf_check_locked(&SYN_CORE, &SYN_TLS);
}

const hl_alloc_t SYN_ALLOC_SYM = {
    .info = {SYN_NAME, SYN_DESCRIPTION, "002 §2.2"},
    .init = syn_init,
    .malloc = syn_malloc,
    .free = syn_free,
    .usable_size = syn_usable_size,
    .realloc = syn_realloc,
    .memalign = syn_memalign,
    .check = syn_check,
};

/* The shim adds the calls served without the lock to its statistics, and
 * hands the lists of the threads a fork left behind back to their slots. */
void SYN_FRONT_STATS(heaplab_alloc_stats_t *s) {
    sf_stats_locked(&SYN_CORE, s);
}

#if !SF_COUNT
/* The hot paths count nothing (fastcore.h SF_COUNT): the statistics' mallocs
 * and frees are lower bounds (hl_alloc.h). */
HL_EXPORT const int heaplab_alloc_stats_lower_bounds = 1;
#endif

void SYN_FRONT_FORK_CHILD(void) {
    sf_fork_child_locked(&SYN_CORE, &SYN_TLS);
}

/* HEAPLAB_SYNTH_REPORT=1: at exit, where the fast core's footprint is, on
 * standard error (native/alloc/README.md lists the tunable). */
static void report_line(const char *s, size_t n) {
    hl_platform_append("stderr", s, n);
}

static void __attribute__((destructor)) syn_report(void) {
    if (!SYN_CORE.inited || !hl_tunable("HEAPLAB_SYNTH_REPORT", 0)) return;
    hl_front_enter();
    sf_report_locked(&SYN_CORE, &SYN_TLS, report_line);
    hl_front_leave();
}

/* ------------------------------------------------------------------------ */
/* The slow paths of the entry points (out of line, so the hits keep no     */
/* stack frame)                                                              */
/* ------------------------------------------------------------------------ */

static void *__attribute__((noinline)) syn_malloc_slow(size_t n) {
    int fresh;
    void *p = sf_malloc_slow(&SYN_CORE, &SYN_TLS, n, &fresh);
    return p ? p : SYN_LOCKED_MALLOC(n);
}

static void __attribute__((noinline)) syn_free_slow(void *p) {
    if (!sf_free_slow(&SYN_CORE, &SYN_TLS, p)) SYN_LOCKED_FREE(p);
}

/* The same for a program rebuilt with NAME.h. */
HL_EXPORT void *SYN_MALLOC_SLOW(size_t n) {
    return syn_malloc_slow(n);
}

HL_EXPORT void SYN_FREE_SLOW(void *p) {
    syn_free_slow(p);
}

static void *__attribute__((noinline)) syn_calloc_slow(size_t a, size_t b) {
    size_t n;
    if (__builtin_mul_overflow(a, b, &n) || n > HL_MAX_REQUEST) return SYN_LOCKED_CALLOC(a, b);
    int fresh;
    void *p = sf_malloc_slow(&SYN_CORE, &SYN_TLS, n, &fresh);
    if (p) {
        if (!fresh) memset(p, 0, n);
        return p;
    }
    if (n < SYN_HUGE || !SYN_CORE.front_on) return SYN_LOCKED_CALLOC(a, b);
    /* A huge block is a new mapping, which reads as zero (the pad layer,
     * when on, is the locked calloc's). */
    p = SYN_LOCKED_MALLOC(n);
    if (p && !is_huge(p)) memset(p, 0, n);
    return p;
}

/* realloc's slow path: realloc(NULL, n) (malloc's fast path: a fifth of
 * jsonparse's reallocs), a block of the thread's own that must move, and
 * everything else under the lock.  realloc() itself keeps an own block that
 * still fits. */
static void *__attribute__((noinline)) syn_realloc_entry(void *p, size_t n) {
    if (!p) return sf_malloc(&SYN_TLS, n, syn_medium, SYN_FAST_MAX, syn_malloc_slow);
    if (!SYN_CORE.front_on || !sf_slot_of(&SYN_CORE, p) || n == 0 || n > HL_MAX_REQUEST)
        return SYN_LOCKED_REALLOC(p, n);
    size_t u = sf_block_size(&SYN_CORE, p, "realloc");
    SYN_TLS.reallocs++; /* the locked path counts its own */
    if (n <= u && (n >= u / 2 || sf_class_of(&SYN_CORE, n) == sf_class_at(p))) return p;
    void *q = NULL;
    if (n <= SF_MAP_MAX) q = sf_malloc_small(&SYN_TLS, n);
    if (!q) q = syn_malloc_slow(n);
    if (!q) return NULL; /* errno is ENOMEM */
    memcpy(q, p, n < u ? n : u);
    if (!sf_free_own(&SYN_TLS, p)) syn_free_slow(p);
    return q;
}

/* realloc of a block of the thread's own slot that stays: the new size is
 * at most the block's and uses at least half of it, or is of its class (002
 * §2.2: realloc'd objects go to the list of the closest suitable size).  As
 * free, it trusts an address in its own slot to be a block's (the slow path
 * checks); 1: p stays. */
static inline __attribute__((always_inline)) int syn_realloc_stays(void *p, size_t n) {
    uintptr_t c = ((uintptr_t)p - SYN_TLS.base) >> SF_CLASS_SHIFT; /* NULL: not < SF_NCLASS */
    if (HL_LIKELY(c < SF_NCLASS && n - 1 < SYN_TLS.bsize[c])) {       /* 0 < n <= block */
        size_t u = SYN_TLS.bsize[c];
        if (HL_LIKELY(n >= u / 2 || sf_class_of(&SYN_CORE, n) == c)) {
            SYN_TLS.reallocs++;
            return 1;
        }
    }
    return 0;
}

static size_t __attribute__((noinline)) syn_usable_entry(void *p) {
    if (p && SYN_CORE.front_on && sf_slot_of(&SYN_CORE, p))
        return sf_block_size(&SYN_CORE, p, "malloc_usable_size");
    return SYN_LOCKED_USABLE(p);
}
