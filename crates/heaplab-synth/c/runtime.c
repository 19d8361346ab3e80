/* ======================================================================== */
/* The runtime: the same in every synthesized allocator                      */
/* (crates/heaplab-synth/c/runtime.c, copied here verbatim).  Everything      */
/* above this part was generated from the profile.                           */
/* ======================================================================== */
/*
 *   A fast block (lists 0 .. SYN_NFAST-1) in the fast heap; b is 8 mod 16
 *
 *        b                    b+8                                   b + block
 *        +--------------------+-------------------------------------+
 *   used | TAG_USED(list)     | payload (block - 8 bytes) .......... |
 *        +--------------------+-------------------------------------+
 *   free | TAG_FREE(list)     | next free block | ...               |
 *        +--------------------+-------------------------------------+
 *
 *   TAG(l) = 0x5c000000 | l << 4 | (HL_TAG_USED 0xD, HL_TAG_FREE 0xC): the
 *   header-bit convention of hl_alloc.h (gnugpp's headers have 0 or 1 in
 *   their low four bits), so the word under a payload says whose block it is.
 *
 *   The fast heap (an emulated sbrk heap of its own, from the platform):
 *
 *   base  base+8       an extent of list 0     an extent of list 2
 *   +-----+------+------+------+------+--------+--------+-- ... --+---------+
 *   | pad | l0   | l0   | l0   | fill | l2 ..  | l2     | unused: a thread's |
 *   +-----+------+------+------+------+--------+--------+ extent [bump, end) +
 *
 *   A thread with lists carves each list's blocks from its own extent for that
 *   list, without the lock, so that blocks of one size lie together; an
 *   extent it leaves before the end is closed with a filler word
 *   (size << 32 | 0x5c00000E).  Threads without lists (while one starts,
 *   after it exits, and in the HEAPLAB_PAD / HEAPLAB_GENERIC test modes)
 *   carve from shared extents, under the lock.
 *
 *   A general block is one of gnugpp's (native/alloc/gnugpp.c, Lea's
 *   segregated first fit, on the default heap).  When its usable size falls in
 *   a general list's range, free keeps it on that list (second payload word
 *   SYN_LISTED); reclaim gives listed blocks back to gnugpp, which coalesces.
 *
 * Invariants (between calls):
 *  - a fast block never changes list, splits or coalesces; its tag says
 *    whether it is free; a free fast block is on exactly one list: a thread's
 *    head[l], a batch of the depot of l, or its spill list (or lost with a
 *    thread that was in the middle of a call when another one forked);
 *  - the depot of list l is a stack of whole lists (batches) of 1 .. cap(l)
 *    blocks, so that a thread gives or takes a full list in O(1); the spill
 *    list takes what the stack cannot when its array cannot grow;
 *  - for a thread with lists: length(head[l]) == cap(l) - left[l] and
 *    left[l] >= 0; summed over the lists, left - adj == pops - frees done
 *    without the lock (so the statistics need no count on free);
 *  - general_n[g] blocks are on general[g], each with SYN_LISTED and a usable
 *    size in the list's range; `reclaimable` is the sum of their blocks.
 *
 * Locking: the front end (the header's inline functions, run from the shim's
 * malloc and free before the lock) touches only the calling thread's lists
 * and extent.  Everything here runs under the shim's lock (hl_alloc_t calls,
 * hl_front_enter), except SYN_THREAD_START's pthread call.
 */

extern const hl_alloc_t hl_alloc_gnugpp;

#define SYN_W          8
#define SYN_KIND(t)    ((unsigned)(t) & HL_HDR_LOW_BITS)
#define SYN_IS_OURS(t) (((uint32_t)(t) & 0xFFFFF000u) == SYN_MAGIC && HL_TAG_IS_OWN(t))
#define SYN_LIST(t)    ((unsigned)((t) >> 4) & 0xFFu)
#define SYN_LISTED     ((uint64_t)0x4c49535445445f5full) /* "__LISTED" */
#define SYN_FILL(sz)   ((uint64_t)(sz) << 32 | SYN_MAGIC | HL_TAG_FILL)
#define SYN_NF1        (SYN_NFAST ? SYN_NFAST : 1)
#define SYN_NG1        (SYN_NGEN ? SYN_NGEN : 1)

enum { ST_NEW = 0, ST_STARTING = 1, ST_ARMED = 2, ST_OFF = 3 };

/* As variables, so that loops over no lists compile without warnings. */
static const unsigned syn_nfast = SYN_NFAST, syn_ngen = SYN_NGEN;

typedef struct syn_link {
    struct syn_link *next;
    uint64_t listed; /* general lists only */
} syn_link_t;

static hl_heap_t *fast_heap;
static char *fast_base;                 /* first block header of the fast heap */
static char *shared_bump[SYN_NF1], *shared_end[SYN_NF1]; /* extents of threads without lists */
typedef struct syn_batch {
    syn_link_t *head; /* a NULL-terminated list */
    size_t n;
} syn_batch_t;
static syn_batch_t *batches[SYN_NF1];   /* the depot: fast blocks no thread holds */
static size_t nbatches[SYN_NF1], batch_room[SYN_NF1];
static syn_link_t *spill[SYN_NF1];      /* when the depot's array cannot grow */
static size_t nspill[SYN_NF1];
/* Non-zero while the depot of l holds blocks; the front end reads it without
 * the lock, as a hint, before carving a new block. */
unsigned long SYN_DEPOT_HINT[SYN_NF1];
static syn_link_t *general[SYN_NG1];    /* the general lists */
static size_t general_n[SYN_NG1];
static size_t reclaimable;              /* bytes of blocks on the general lists */
static int deny_growth;                 /* gnugpp may not grow its heap (see SYN_GP_SBRK) */
static int front_on;                    /* threads get lists (0 under PAD/GENERIC) */
static int inited, walk_unreliable;
static SYN_T *threads;                  /* the threads with lists */
static unsigned long nthreads;
static unsigned long exited_mallocs, exited_frees; /* front-end calls of retired threads */
static unsigned long reclaims, reclaimed_bytes;

static inline uint64_t *syn_hdr(void *p) {
    return (uint64_t *)p - 1;
}

static inline int in_fast_heap(void *p) {
    char *b = (char *)p - SYN_W;
    return fast_heap && b >= fast_base && b < (char *)hl_heap_brk(fast_heap);
}

/* gnugpp.c is compiled with -Dhl_sbrk=SYN_GP_SBRK: every growth of its heap
 * comes here, and fails while deny_growth is set, so that gp_try() learns
 * that gnugpp has no fit before reclaiming the general lists. */
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
    return gp_malloc(syn_lists[SYN_NFAST + g].hi);
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
/* The fast allocator: contiguous extents, never coalesced                   */
/* ------------------------------------------------------------------------ */

static void fill(char *bump, char *end) {
    if (bump && end - bump >= 16) *(uint64_t *)bump = SYN_FILL(end - bump);
}

/* Make room for `need` bytes in the extent [*bump, *end): grow it in place
 * when it ends at the break (a single thread always does), else close it
 * with a filler and start a new one at the break. */
static int extent(char **bump, char **end, size_t need) {
    size_t have = (size_t)(*end - *bump);
    if (*end && *end == (char *)hl_heap_brk(fast_heap)) {
        size_t grow = HL_ALIGN_UP(need - have, 16);
        if (grow < SYN_EXTENT) grow = SYN_EXTENT;
        if (!hl_heap_sbrk(fast_heap, (intptr_t)grow)) return 0;
        *end += grow;
        return 1;
    }
    size_t e = need > SYN_EXTENT ? HL_ALIGN_UP(need, 16) : SYN_EXTENT;
    char *old = hl_heap_sbrk(fast_heap, (intptr_t)e);
    if (!old) return 0;
    fill(*bump, *end);
    *bump = old;
    *end = old + e;
    return 1;
}

static void *carve(char **bump, char **end, unsigned l) {
    size_t bs = syn_lists[l].block;
    if ((size_t)(*end - *bump) < bs && !extent(bump, end, bs)) return NULL;
    char *b = *bump;
    *bump = b + bs;
    *(uint64_t *)b = SYN_TAG_USED(l);
    return b + SYN_W;
}

/* ---- the depot ---- */

static void depot_hint(unsigned l) {
    SYN_DEPOT_HINT[l] = nbatches[l] + nspill[l];
}

static int grow_batches(unsigned l) {
    size_t room = batch_room[l] ? 2 * batch_room[l] : hl_page_size() / sizeof(syn_batch_t);
    syn_batch_t *b = hl_pages_alloc(room * sizeof *b, 0);
    if (!b) return 0;
    if (batches[l]) {
        memcpy(b, batches[l], nbatches[l] * sizeof *b);
        hl_pages_free(batches[l], batch_room[l] * sizeof *b);
    }
    batches[l] = b;
    batch_room[l] = room;
    return 1;
}

/* Give the depot a list of n >= 1 blocks (at most cap). */
static void depot_put(unsigned l, syn_link_t *head, size_t n) {
    if (nbatches[l] == batch_room[l] && !grow_batches(l)) {
        syn_link_t *last = head; /* out of memory: the slow way */
        while (last->next)
            last = last->next;
        last->next = spill[l];
        spill[l] = head;
        nspill[l] += n;
    } else {
        batches[l][nbatches[l]++] = (syn_batch_t){head, n};
    }
    depot_hint(l);
}

static void depot_put_one(unsigned l, syn_link_t *f) {
    if (nbatches[l] && batches[l][nbatches[l] - 1].n < syn_lists[l].cap) {
        syn_batch_t *b = &batches[l][nbatches[l] - 1];
        f->next = b->head;
        b->head = f;
        b->n++;
        return;
    }
    f->next = NULL;
    depot_put(l, f, 1);
}

/* Take a whole list (at most cap blocks) from the depot; NULL if empty. */
static syn_link_t *depot_take(unsigned l, size_t *n) {
    syn_link_t *head = NULL;
    if (nbatches[l]) {
        syn_batch_t b = batches[l][--nbatches[l]];
        head = b.head;
        *n = b.n;
    } else if (spill[l]) {
        size_t k = 1;
        syn_link_t *last = spill[l];
        while (k < syn_lists[l].cap && last->next) {
            last = last->next;
            k++;
        }
        head = spill[l];
        spill[l] = last->next;
        last->next = NULL;
        nspill[l] -= k;
        *n = k;
    }
    depot_hint(l);
    return head;
}

static syn_link_t *depot_take_one(unsigned l) {
    size_t n;
    if (nbatches[l]) {
        syn_batch_t *b = &batches[l][nbatches[l] - 1];
        syn_link_t *f = b->head;
        b->head = f->next;
        if (--b->n == 0) {
            nbatches[l]--;
            depot_hint(l);
        }
        return f;
    }
    syn_link_t *f = depot_take(l, &n);
    if (f && f->next) depot_put(l, f->next, n - 1);
    return f;
}

/* The thread's list is empty: take a whole list from the depot. */
static void refill(SYN_T *t, unsigned l) {
    size_t n = 0;
    syn_link_t *head = depot_take(l, &n);
    if (!head) return;
    t->head[l] = head;
    t->left[l] -= (long)n;
    t->adj[l] -= (long)n;
}

/* The thread's list is full (left == 0, cap blocks): give it all to the depot. */
static void flush(SYN_T *t, unsigned l) {
    size_t n = syn_lists[l].cap - (size_t)t->left[l];
    if (n) depot_put(l, t->head[l], n);
    t->head[l] = NULL;
    t->left[l] += (long)n;
    t->adj[l] += (long)n;
}

/* A fast block when the front end could not give one without the lock
 * (empty list and extent, a thread without lists, realloc, memalign). */
static void *fast_malloc(unsigned l) {
    SYN_T *t = &SYN_TLS;
    syn_link_t *f;
    if (t->state == ST_ARMED) {
        if (!t->head[l] && SYN_DEPOT_HINT[l]) refill(t, l);
        if ((f = t->head[l]) != NULL) {
            t->head[l] = f->next;
            t->left[l]++;
            t->adj[l]++;
            *syn_hdr(f) = SYN_TAG_USED(l);
            return f;
        }
        return carve(&t->bump[l], &t->end[l], l);
    }
    if ((f = depot_take_one(l)) != NULL) {
        *syn_hdr(f) = SYN_TAG_USED(l);
        return f;
    }
    return carve(&shared_bump[l], &shared_end[l], l);
}

static void fast_free(void *p, unsigned l) {
    SYN_T *t = &SYN_TLS;
    syn_link_t *f = p;
    *syn_hdr(p) = SYN_TAG_FREE(l);
    if (t->state == ST_ARMED) {
        if (t->left[l] <= 0) flush(t, l);
        f->next = t->head[l];
        t->head[l] = f;
        t->left[l]--;
        t->adj[l]--;
        return;
    }
    depot_put_one(l, f);
}

/* The list of a fast block in use, or a fatal error for anything of ours
 * that is not one. */
static unsigned fast_block_list(void *p, uint64_t tag, const char *what) {
    unsigned l = SYN_LIST(tag);
    if (HL_UNLIKELY(SYN_KIND(tag) != HL_TAG_USED || (tag >> 32) || l >= syn_nfast || !in_fast_heap(p) ||
                    ((uintptr_t)p & 15)))
        hl_fatal("%s(%p): %s", what, p,
                 SYN_KIND(tag) == HL_TAG_FREE ? "already free (double free)"
                                       : "not a block in use (corruption?)");
    return l;
}

/* ------------------------------------------------------------------------ */
/* The allocator under the shim's lock                                       */
/* ------------------------------------------------------------------------ */

static int syn_init(void) {
    if (inited) return 0;
    if (hl_alloc_gnugpp.init() != 0) return -1; /* gnugpp keeps the default heap */
    fast_heap = hl_heap_new(SYN_NAME "-fast");
    if (!fast_heap) return -1;
    char *base = hl_heap_sbrk(fast_heap, SYN_W); /* so that headers are 8 mod 16 */
    if (!base) return -1;
    fast_base = base + SYN_W;
    for (unsigned l = 0; l < syn_nfast; l++)
        shared_bump[l] = shared_end[l] = NULL;
    front_on = SYN_NFAST > 0 && !hl_tunable("HEAPLAB_PAD", 0) && !hl_tunable("HEAPLAB_GENERIC", 0);
    inited = 1;
    return 0;
}

static void *syn_malloc(size_t n) {
    int l = syn_list_of(n);
    if (l < 0) return gp_malloc(n);
    if (SYN_NGEN == 0 || l < SYN_NFAST) return fast_malloc((unsigned)l);
    return general_malloc((unsigned)l - SYN_NFAST);
}

static void syn_free(void *p) {
    uint64_t tag = *syn_hdr(p);
    if (SYN_IS_OURS(tag)) {
        fast_free(p, fast_block_list(p, tag, "free"));
        return;
    }
    general_free(p);
}

static size_t syn_usable_size(void *p) {
    uint64_t tag = *syn_hdr(p);
    if (SYN_IS_OURS(tag))
        return syn_lists[fast_block_list(p, tag, "malloc_usable_size")].block - SYN_W;
    return hl_alloc_gnugpp.usable_size(p);
}

/* A fast block keeps its list (002 §2.2: realloc'd objects go back to the
 * list of the closest suitable size); it stays put while the new size fits
 * and uses at least half of it, or falls in the same list. */
static void *syn_realloc(void *p, size_t n) {
    uint64_t tag = *syn_hdr(p);
    if (!SYN_IS_OURS(tag)) return gp_realloc(p, n);
    unsigned l = fast_block_list(p, tag, "realloc");
    size_t u = syn_lists[l].block - SYN_W;
    if (n <= u && (n >= u / 2 || n >= syn_lists[l].lo)) return p;
    void *q = syn_malloc(n);
    if (!q) return NULL;
    memcpy(q, p, n < u ? n : u);
    fast_free(p, l);
    return q;
}

static void *syn_memalign(size_t align, size_t n) {
    return gp_memalign(align, n);
}

/* ------------------------------------------------------------------------ */
/* Threads: start, exit, fork, statistics                                    */
/* ------------------------------------------------------------------------ */

static unsigned long front_frees(const SYN_T *t) {
    long d = 0;
    for (unsigned l = 0; l < syn_nfast; l++)
        d += t->left[l] - t->adj[l];
    return t->pops - (unsigned long)d;
}

/* The blocks on list l of a thread that may have stopped half-way through a
 * push or a pop (the other threads, in the child of a fork): `left` may be
 * one off the list it counts, so the list itself is counted, up to the cap,
 * and cut after the last block that is a free block of l (a block the
 * thread was popping is then lost to the child; walk_unreliable says so). */
static size_t recount(syn_link_t *head, unsigned l) {
    size_t n = 0;
    syn_link_t *last = NULL;
    for (syn_link_t *f = head; f && n < syn_lists[l].cap; f = f->next) {
        if (!in_fast_heap(f) || ((uintptr_t)f & 15) || *syn_hdr(f) != SYN_TAG_FREE(l)) break;
        last = f;
        n++;
    }
    if (last) last->next = NULL;
    return n;
}

/* Under the lock: a thread's lists go to the depot, its extent is closed,
 * its counts are kept, and it leaves the registry.  `interrupted`: the thread
 * may have been in the middle of a call (the child of a fork), so its lists
 * are counted rather than trusted to agree with `left`. */
static void retire(SYN_T *t, int interrupted) {
    exited_mallocs += t->pops + t->carved;
    exited_frees += front_frees(t);
    for (unsigned l = 0; l < syn_nfast; l++) {
        if (t->state == ST_ARMED && t->head[l]) {
            size_t n = interrupted ? recount(t->head[l], l)
                                   : syn_lists[l].cap - (size_t)t->left[l];
            if (n) depot_put(l, t->head[l], n);
        }
        t->head[l] = NULL;
        t->left[l] = t->adj[l] = 0;
    }
    for (unsigned l = 0; l < syn_nfast; l++) {
        fill(t->bump[l], t->end[l]);
        t->bump[l] = t->end[l] = NULL;
    }
    t->pops = t->carved = 0;
    for (SYN_T **pp = &threads; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            nthreads--;
            break;
        }
    t->next = NULL;
    t->state = ST_OFF;
}

static void thread_exit(void *arg) {
    hl_front_enter();
    retire(arg, 0);
    hl_front_leave();
}

/* Called by the front end on a thread's first miss, outside the lock:
 * arrange for its lists to go to the depot when it exits (the pthread call
 * may allocate, which then takes the locked path), then give it its lists. */
void SYN_THREAD_START(void) {
    SYN_T *t = &SYN_TLS;
    if (t->state != ST_NEW) return;
    t->state = ST_STARTING;
    hl_front_enter(); /* initialises the allocator on first use */
    int on = front_on;
    hl_front_leave();
    if (!on || hl_platform_thread_exit(thread_exit, t) != 0) {
        t->state = ST_OFF;
        return;
    }
    hl_front_enter();
    for (unsigned l = 0; l < syn_nfast; l++)
        t->left[l] = t->adj[l] = (long)syn_lists[l].cap;
    t->next = threads;
    threads = t;
    nthreads++;
    t->state = ST_ARMED;
    hl_front_leave();
}

/* The shim adds the calls the front end served to its statistics. */
void SYN_FRONT_STATS(heaplab_alloc_stats_t *s) {
    unsigned long m = exited_mallocs, f = exited_frees;
    for (SYN_T *t = threads; t; t = t->next) {
        m += t->pops + t->carved;
        f += front_frees(t);
    }
    s->mallocs += m;
    s->frees += f;
}

/* In the child of a fork only the forking thread lives on: the others'
 * lists (still in the copied memory) go to the depot. */
void SYN_FRONT_FORK_CHILD(void) {
    SYN_T *self = &SYN_TLS;
    for (SYN_T *t = threads, *n; t; t = n) {
        n = t->next;
        if (t != self) {
            retire(t, 1);
            walk_unreliable = 1; /* a thread may have been half-way through a call */
        }
    }
}

/* ------------------------------------------------------------------------ */
/* The checker                                                               */
/* ------------------------------------------------------------------------ */

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
    if (!fast_heap) return;
    SYN_T *self = &SYN_TLS;
    char *brk = hl_heap_brk(fast_heap);
    HL_CHECK(((uintptr_t)fast_base & 15) == 8 && ((uintptr_t)brk & 15) == 8);
    /* The unused tails of the extents being carved: skipped by the walk. */
    char *gap_lo[2 * SYN_NF1], *gap_hi[2 * SYN_NF1];
    unsigned ngap = 0;
    for (unsigned l = 0; l < syn_nfast; l++) {
        HL_CHECK(shared_bump[l] <= shared_end[l] && shared_end[l] <= brk);
        if (shared_end[l] > shared_bump[l]) {
            gap_lo[ngap] = shared_bump[l];
            gap_hi[ngap++] = shared_end[l];
        }
        if (self->end[l] > self->bump[l]) {
            gap_lo[ngap] = self->bump[l];
            gap_hi[ngap++] = self->end[l];
        }
    }
    /* Walk the heap only when no other thread can be carving from it. */
    int walk = !walk_unreliable && (nthreads == 0 || (nthreads == 1 && threads == self));
    size_t free_blocks = 0, listed = 0;
    if (walk) {
        for (char *b = fast_base; b < brk;) {
            unsigned g = 0;
            while (g < ngap && gap_lo[g] != b)
                g++;
            if (g < ngap) {
                b = gap_hi[g];
                continue;
            }
            uint64_t tag = *(uint64_t *)b;
            HL_CHECK(SYN_IS_OURS(tag));
            if (SYN_KIND(tag) == HL_TAG_FILL) {
                HL_CHECK((tag >> 32) >= 16 && (tag >> 32) % 16 == 0);
                b += tag >> 32;
            } else {
                HL_CHECK((tag >> 32) == 0 && SYN_LIST(tag) < syn_nfast);
                free_blocks += SYN_KIND(tag) == HL_TAG_FREE;
                b += syn_lists[SYN_LIST(tag)].block;
            }
            HL_CHECK(b <= brk);
        }
    }
    for (unsigned l = 0; l < syn_nfast; l++) {
        size_t n = 0;
        HL_CHECK(nbatches[l] <= batch_room[l]);
        for (size_t i = 0; i < nbatches[l]; i++) {
            size_t k = 0;
            for (syn_link_t *f = batches[l][i].head; f; f = f->next) {
                HL_CHECK(in_fast_heap(f) && *syn_hdr(f) == SYN_TAG_FREE(l));
                HL_CHECK(++k <= batches[l][i].n);
            }
            HL_CHECK(k == batches[l][i].n && k >= 1 && k <= syn_lists[l].cap);
            n += k;
        }
        size_t k = 0;
        for (syn_link_t *f = spill[l]; f; f = f->next) {
            HL_CHECK(in_fast_heap(f) && *syn_hdr(f) == SYN_TAG_FREE(l));
            HL_CHECK(++k <= nspill[l]);
        }
        HL_CHECK(k == nspill[l]);
        HL_CHECK(SYN_DEPOT_HINT[l] == nbatches[l] + nspill[l]);
        listed += n + k;
        if (self->state != ST_ARMED) continue;
        n = 0;
        for (syn_link_t *f = self->head[l]; f; f = f->next) {
            HL_CHECK(in_fast_heap(f) && *syn_hdr(f) == SYN_TAG_FREE(l));
            HL_CHECK(++n <= syn_lists[l].cap);
        }
        HL_CHECK(self->left[l] >= 0 && n == syn_lists[l].cap - (size_t)self->left[l]);
        listed += n;
    }
    if (walk) HL_CHECK(listed == free_blocks);
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
