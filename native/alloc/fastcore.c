/*
 * fastcore.c: the slow paths of the fast core (fastcore.h draws the layout
 * and states the invariants): slots and their spans, slabs, the blocks
 * other threads free, reclaim, thread start and exit, fork, statistics and
 * the checker.  Everything that changes a slot's slabs, or hands a slot from
 * one thread to another, runs under the shim's lock (hl_front_enter), so the
 * child of a fork never sees it half done.
 */
#include "fastcore.h"
#include "hl_internal.h"

#define SF_COMMIT_GRANULE ((size_t)1 << 20) /* a span turns read-write 1 MiB at a time */

static inline char *span_of(const sf_slot_t *s, unsigned c) {
    return (char *)(s->base + ((uintptr_t)c << SF_CLASS_SHIFT));
}

/* The carve range of a slab of `bytes` at x: its blocks, carved downward. */
static inline void slab_range(const sf_core_t *core, unsigned c, char *x, size_t bytes, char **carve,
                              char **floor) {
    *floor = x;
    *carve = x + bytes / core->block[c] * core->block[c];
}

/* ------------------------------------------------------------------------ */
/* Slots                                                                     */
/* ------------------------------------------------------------------------ */

/* The bytes of a slot's record: bins for the classes with blocks only
 * (bin[c] for c >= nclass is never touched), so that a small program's
 * slot takes a page, not two. */
static size_t slot_bytes(const sf_core_t *core) {
    return offsetof(sf_slot_t, bin) + core->nclass * sizeof(sf_bin_t);
}

/* A new slot at `index` (0: the shared one; else the next unused index):
 * its address space, its bins.  Under the lock.  NULL when the OS gives no
 * more address space or every index is used. */
static sf_slot_t *slot_new(sf_core_t *core, unsigned index) {
    if (index > SF_MAX_SLOTS) return NULL;
    size_t bytes = (size_t)1 << SF_SLOT_SHIFT;
    char *base = hl_reserve(bytes, bytes);
    if (!base) return NULL;
    uintptr_t hi = (uintptr_t)base >> SF_SLOT_SHIFT;
    if (hi >= sizeof core->slot_of) return NULL; /* above 2^47: never, but then not ours */
    sf_slot_t *s = hl_pages_alloc(slot_bytes(core), 0);
    if (!s) return NULL;
    s->base = (uintptr_t)base;
    s->index = index;
    for (unsigned c = 0; c < core->nclass; c++) {
        s->bin[c].top = s->bin[c].committed = span_of(s, c);
        s->bin[c].floor = SF_FLOOR_EMPTY;
    }
    core->slots[index] = s;
    if (index == core->nslots) core->nslots++;
    /* Published after the slot is whole: sf_slot_of reads it without the lock. */
    __atomic_store_n(&core->slot_of[hi], (unsigned char)(index + 1), __ATOMIC_RELEASE);
    return s;
}

/* Slot 0, made when first needed.  Under the lock.  NULL: no address space. */
static sf_slot_t *shared_slot(sf_core_t *core) {
    return core->slots[0] ? core->slots[0] : slot_new(core, 0);
}

int sf_init_locked(sf_core_t *core, int front_on) {
    if (core->inited) return 0;
    if (core->nclass > SF_NONE) hl_fatal("%s: %u classes (at most %u)", core->name, core->nclass, SF_NONE);
    for (unsigned c = 0; c < core->nclass; c++) {
        uint32_t b = core->block[c], sb = core->slab[c], mx = core->slab_max ? core->slab_max[c] : sb;
        unsigned j = 0;
        while (j < 16 && ((size_t)sb << j) < mx)
            j++;
        if (b % 16 || !b || sb % hl_page_size() || sb < b || ((size_t)sb << j) != mx)
            hl_fatal("%s: class %u: block %u, slab %u, largest slab %u", core->name, c, b, sb, mx);
        core->growth[c] = (unsigned char)j;
    }
    core->nslots = 1; /* index 0 is the shared slot's, made when first needed */
    core->front_on = front_on;
    core->inited = 1;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Slabs and reclaim                                                         */
/* ------------------------------------------------------------------------ */

static int push_free_slab(sf_bin_t *b, uint32_t k) {
    if (b->nfree == b->room) {
        uint32_t room = b->room ? 2 * b->room : (uint32_t)(hl_page_size() / sizeof(uint32_t));
        uint32_t *n = hl_pages_alloc(room * sizeof *n, 0);
        if (!n) return 0;
        if (b->free_slabs) {
            memcpy(n, b->free_slabs, b->nfree * sizeof *n);
            hl_pages_free(b->free_slabs, b->room * sizeof *n);
        }
        b->free_slabs = n;
        b->room = room;
    }
    b->free_slabs[b->nfree++] = k;
    return 1;
}

/* Gives back every slab of class c of slot s whose blocks are all on the
 * list *headp (after taking the remote stack into it): unlinks them, hands
 * their pages to the OS, keeps them for reuse.  Returns the bytes given. */
static size_t reclaim_class(sf_core_t *core, sf_slot_t *s, unsigned c, void **headp) {
    sf_bin_t *b = &s->bin[c];
    if (__atomic_load_n(&b->remote, __ATOMIC_RELAXED)) { /* the remote stack joins the list */
        void **r = __atomic_exchange_n((void ***)&b->remote, NULL, __ATOMIC_ACQUIRE), **last = r;
        while (*last)
            last = *last;
        *last = *headp;
        *headp = r;
    }
    char *span = span_of(s, c);
    size_t nslabs = b->nslab, bs = core->block[c];
    /* A list shorter than the smallest slab's blocks frees no slab: most
     * lists, in a heap that grows, end here. */
    size_t least = core->slab[c] / bs, seen = 0;
    for (void **f = *headp; f && seen < least; f = *f)
        seen++;
    core->reclaim_walked += seen;
    if (seen < least) return 0;
    if (nslabs * sizeof(uint32_t) > core->scratch_bytes) {
        size_t want = HL_ALIGN_UP(nslabs * sizeof(uint32_t), hl_page_size());
        uint32_t *n = hl_pages_alloc(want, 0);
        if (!n) return 0;
        if (core->scratch) hl_pages_free(core->scratch, core->scratch_bytes);
        core->scratch = n;
        core->scratch_bytes = want;
    }
    uint32_t *count = core->scratch;
    memset(count, 0, nslabs * sizeof *count);
    /* Free blocks come in runs from one slab: the last slab found is tried
     * first ([lo, lo + len) holds per blocks, slab k). */
    size_t full = 0, walked = 0, k = 0, lo = 0, len = 0, per = 0, bytes;
    for (void **f = *headp; f; f = *f) {
        size_t off = (size_t)((char *)f - span);
        if (off - lo >= len) {
            k = sf_slab_index(core, c, off);
            lo = sf_slab_at(core, c, k, &len);
            per = len / bs;
        }
        if (++count[k] == per) full++;
        walked++;
    }
    core->reclaim_walked += walked;
    if (!full) return 0;
    /* Unlink the blocks of full slabs, keeping the order of the rest. */
    void **keep = headp;
    len = 0;
    int drop = 0;
    for (void **f = *headp; f; f = *f) {
        size_t off = (size_t)((char *)f - span);
        if (off - lo >= len) {
            k = sf_slab_index(core, c, off);
            lo = sf_slab_at(core, c, k, &len);
            drop = count[k] == len / bs;
        }
        if (!drop) {
            *keep = f;
            keep = f;
        }
    }
    *keep = NULL;
    size_t given = 0;
    for (k = 0; k < nslabs; k++) {
        size_t at = sf_slab_at(core, c, k, &bytes);
        if (count[k] != bytes / bs) continue;
        /* Neighbouring full slabs go back in one call. */
        size_t run = 0, nb = bytes;
        do {
            /* A slab there is no room to remember stays counted, empty (its
             * blocks are lost to reuse, never handed out twice). */
            if (push_free_slab(b, (uint32_t)k)) {
                given += nb;
                b->used--;
            }
            run += nb;
            if (k + 1 == nslabs) break;
            (void)sf_slab_at(core, c, k + 1, &nb);
            if (count[k + 1] != nb / bs) break;
            k++;
        } while (1);
        hl_decommit(span + at, run);
    }
    b->bytes -= given;
    return given;
}

/* Gives back empty slabs of slot s, classes in the instance's reclaim order
 * (002 §2.2), until twice `want` bytes are recovered.  `heads`: the lists
 * (the owner's, or the bins' for slot 0). */
static void reclaim_locked(sf_core_t *core, sf_slot_t *s, void **heads, size_t want) {
    size_t got = 0;
    for (unsigned i = 0; i < core->nclass && got < 2 * want; i++) {
        unsigned c = core->reclaim_order[i];
        got += reclaim_class(core, s, c, &heads[c]);
    }
    if (got) {
        s->footprint -= got;
        hl_footprint_add(-(intptr_t)got);
        core->reclaimed_bytes += got;
    }
    core->reclaims++;
}

/* A new slab for class c of slot s, its blocks set up as the carve range
 * *carve / *floor: a slab given back first, else the next slab of the
 * schedule from the top of the span; 0 when the span is full.  Under the
 * lock.  `heads`: the slot's lists, for reclaim. */
static int slab_next(sf_core_t *core, sf_slot_t *s, unsigned c, char **carve, char **floor, void **heads) {
    sf_bin_t *b = &s->bin[c];
    char *span = span_of(s, c);
    if (!b->nfree && s->taken >= SF_RECLAIM_MIN && s->taken >= s->footprint / SF_RECLAIM_SHARE) {
        reclaim_locked(core, s, heads, s->taken);
        s->taken = 0;
    }
    char *x;
    size_t sb;
    if (b->nfree) {
        x = span + sf_slab_at(core, c, b->free_slabs[--b->nfree], &sb);
    } else {
        size_t off = sf_slab_at(core, c, b->nslab, &sb);
        if (off + sb > ((size_t)1 << SF_CLASS_SHIFT)) return 0;
        x = span + off; /* == b->top */
        if (x + sb > b->committed) {
            size_t grow = HL_ALIGN_UP((size_t)(x + sb - b->committed), SF_COMMIT_GRANULE);
            size_t left = (size_t)(span + ((size_t)1 << SF_CLASS_SHIFT) - b->committed);
            if (grow > left) grow = left;
            if (hl_commit(b->committed, grow) != 0) return 0;
            b->committed += grow;
        }
        b->nslab++;
        b->top = x + sb;
        s->taken += sb;
    }
    b->used++;
    b->bytes += sb;
    s->footprint += sb;
    core->slabs_taken++;
    hl_footprint_add((intptr_t)sb);
    slab_range(core, c, x, sb, carve, floor);
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Threads                                                                   */
/* ------------------------------------------------------------------------ */

static void load_lists(sf_core_t *core, sf_tls_t *t, sf_slot_t *s) {
    for (unsigned c = 0; c < SF_NCLASS; c++) {
        if (c >= core->nclass) { /* no bin: never has blocks */
            t->head[c] = NULL;
            t->carve[c] = NULL;
            t->floor[c] = SF_FLOOR_EMPTY;
            t->bsize[c] = 0;
            continue;
        }
        t->head[c] = s->bin[c].head;
        t->carve[c] = s->bin[c].carve;
        t->floor[c] = s->bin[c].floor;
        s->bin[c].head = NULL;
        s->bin[c].carve = NULL;
        s->bin[c].floor = SF_FLOOR_EMPTY;
        t->bsize[c] = core->block[c];
    }
    memcpy(t->map, core->map, sizeof t->map);
}

/* The thread's lists go back to its slot, which it leaves. */
static void save_lists(sf_core_t *core, sf_tls_t *t, sf_slot_t *s) {
    for (unsigned c = 0; c < core->nclass; c++) {
        s->bin[c].head = t->head[c];
        s->bin[c].carve = t->carve[c];
        s->bin[c].floor = t->floor[c];
        t->head[c] = NULL;
        t->carve[c] = NULL;
        t->floor[c] = SF_FLOOR_EMPTY;
    }
    core->exited_mallocs += t->mallocs;
    core->exited_frees += t->frees;
    core->exited_reallocs += t->reallocs;
    t->mallocs = t->frees = t->reallocs = 0;
    t->base = SF_NO_BASE;
    t->slot = NULL;
    s->owned = 0;
    s->tls = NULL;
}

static void thread_exit(void *arg) {
    sf_tls_t *t = arg;
    sf_core_t *core = t->core;
    hl_front_enter();
    if (t->state == SF_ARMED && t->slot) save_lists(core, t, t->slot);
    t->state = SF_OFF;
    hl_front_leave();
}

/* The thread's first slow call: arrange for its lists to go back to its slot
 * when it exits (the pthread call may allocate: it then takes the locked
 * path), then give it a slot, an abandoned one first. */
static void thread_start(sf_core_t *core, sf_tls_t *t) {
    t->state = SF_STARTING;
    t->core = core;
    hl_front_enter(); /* initialises the allocator on first use */
    int on = core->front_on;
    hl_front_leave();
    if (!on || hl_platform_thread_exit(thread_exit, t) != 0) {
        t->state = SF_OFF;
        return;
    }
    hl_front_enter();
    sf_slot_t *s = NULL;
    for (unsigned i = 1; i < core->nslots && !s; i++)
        if (!core->slots[i]->owned) s = core->slots[i];
    if (!s) s = slot_new(core, core->nslots);
    if (s) {
        load_lists(core, t, s);
        s->owned = 1;
        s->tls = t;
        t->slot = s;
        t->base = s->base;
        t->state = SF_ARMED;
    } else {
        t->state = SF_OFF;
    }
    hl_front_leave();
}

/* ------------------------------------------------------------------------ */
/* The slow paths without the lock                                           */
/* ------------------------------------------------------------------------ */

void *sf_malloc_slow(sf_core_t *core, sf_tls_t *t, size_t n, int *fresh) {
    if (HL_UNLIKELY(t->state != SF_ARMED)) {
        if (t->state == SF_NEW) thread_start(core, t);
        if (t->state != SF_ARMED) return NULL;
    }
    unsigned c = sf_class_of(core, n);
    if (c >= core->nclass) return NULL;
    void *p = sf_take(t, c, fresh); /* medium sizes come here first */
    if (!p) {
        sf_slot_t *s = t->slot;
        void **r = __atomic_exchange_n((void ***)&s->bin[c].remote, NULL, __ATOMIC_ACQUIRE);
        if (r) {
            t->head[c] = *r;
            SF_COUNTED(t->mallocs);
            *fresh = 0;
            p = r;
        } else {
            hl_front_enter();
            int ok = slab_next(core, s, c, &t->carve[c], &t->floor[c], t->head);
            hl_front_leave();
            if (!ok) return NULL;
            p = sf_take(t, c, fresh);
        }
    }
    if (!SF_COUNT && p) t->mallocs++; /* without SF_COUNT, the slow path's calls alone */
    return p;
}

/* Pushes block p of slot s on its remote stack of class c. */
static void remote_push(sf_core_t *core, sf_slot_t *s, unsigned c, void *p) {
    void *old = __atomic_load_n(&s->bin[c].remote, __ATOMIC_RELAXED);
    do
        *(void **)p = old;
    while (!__atomic_compare_exchange_n(&s->bin[c].remote, &old, p, 1, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED));
    (void)core;
}

size_t sf_block_size(const sf_core_t *core, void *p, const char *what) {
    sf_slot_t *s = sf_slot_of(core, p);
    unsigned c = sf_class_at(p);
    if (HL_UNLIKELY(!s || c >= core->nclass))
        hl_fatal("%s(%p): not a block of this allocator", what, p);
    size_t off = (size_t)((char *)p - span_of(s, c)), bs = core->block[c], sb = 0, at = 0;
    int ok = (char *)p < __atomic_load_n(&s->bin[c].top, __ATOMIC_RELAXED);
    if (HL_LIKELY(ok)) at = sf_slab_at(core, c, sf_slab_index(core, c, off), &sb);
    /* Offsets in a span fit in 32 bits, and a 32-bit division is the cheaper
     * (a remote free comes here); a multiple of bs below sb - bs + 1 is a block. */
    uint32_t d = (uint32_t)(off - at);
    if (HL_UNLIKELY(!ok || d % (uint32_t)bs || d + bs > sb))
        hl_fatal("%s(%p): not the start of a block (corruption, or a pointer into a block)", what, p);
    return bs;
}

/* A block another thread frees, checked as cheaply as the owner's free is
 * (which checks nothing): a class with blocks, below the span's top (a slab
 * was taken there) and on the 16-byte grain every block starts on.  The
 * full check (sf_block_size: the slab's index from the schedule, a division)
 * took some 70 instructions, most of a consumer's free in a producer and
 * consumer program (bench/progs/prodcons.c: 127 a free, so that the
 * consumer, not the producer, set the pace); the checker (HEAPLAB_CHECK)
 * still verifies every list. */
static inline void remote_check(const sf_core_t *core, sf_slot_t *s, unsigned c, void *p) {
    if (HL_UNLIKELY(c >= core->nclass || ((uintptr_t)p & 15) || /* (spans are aligned) */
                    (char *)p >= __atomic_load_n(&s->bin[c].top, __ATOMIC_RELAXED)))
        hl_fatal("free(%p): not a block of this allocator (corruption, or a misaligned pointer)", p);
}

int sf_free_slow(sf_core_t *core, sf_tls_t *t, void *p) {
    if (!p) return 1;
    if (!core->front_on) return 0;
    sf_slot_t *s = sf_slot_of(core, p);
    if (!s) return 0;
    (void)t;
    unsigned c = sf_class_at(p);
    remote_check(core, s, c, p);
    remote_push(core, s, c, p);
    if (SF_COUNT) /* not counted by the shim */
        __atomic_fetch_add(&core->remote_frees, 1, __ATOMIC_RELAXED);
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Under the lock: slot 0                                                    */
/* ------------------------------------------------------------------------ */


void *sf_alloc_locked(sf_core_t *core, unsigned c, int *fresh) {
    sf_slot_t *s = shared_slot(core);
    if (!s) return NULL;
    sf_bin_t *b = &s->bin[c];
    core->locked_mallocs++;
    void **f = b->head;
    if (!f) f = b->head = __atomic_exchange_n(&b->remote, NULL, __ATOMIC_ACQUIRE);
    if (f) {
        b->head = *f;
        *fresh = 0;
        return f;
    }
    uintptr_t x = (uintptr_t)b->carve - core->block[c];
    if (x < (uintptr_t)b->floor) {
        void *heads[SF_NCLASS]; /* slot 0's lists, as reclaim takes them */
        for (unsigned k = 0; k < core->nclass; k++)
            heads[k] = s->bin[k].head;
        int ok = slab_next(core, s, c, &b->carve, &b->floor, heads);
        for (unsigned k = 0; k < core->nclass; k++)
            s->bin[k].head = heads[k];
        if (!ok) {
            core->locked_mallocs--;
            return NULL;
        }
        x = (uintptr_t)b->carve - core->block[c];
    }
    b->carve = (char *)x;
    *fresh = 1;
    return (void *)x;
}

void sf_free_locked(sf_core_t *core, void *p) {
    sf_slot_t *s = sf_slot_of(core, p);
    unsigned c = sf_class_at(p);
    (void)sf_block_size(core, p, "free");
    if (s->index == 0) {
        *(void **)p = s->bin[c].head;
        s->bin[c].head = p;
        core->locked_frees++;
        return;
    }
    remote_push(core, s, c, p);
}

/* ------------------------------------------------------------------------ */
/* Statistics, fork, checker                                                 */
/* ------------------------------------------------------------------------ */

void sf_stats_locked(sf_core_t *core, heaplab_alloc_stats_t *st) {
    unsigned long m = core->exited_mallocs, f = core->exited_frees, r = core->exited_reallocs;
    for (unsigned i = 1; i < core->nslots; i++) {
        sf_slot_t *s = core->slots[i];
        if (s->owned && s->tls) {
            m += __atomic_load_n(&s->tls->mallocs, __ATOMIC_RELAXED);
            f += __atomic_load_n(&s->tls->frees, __ATOMIC_RELAXED);
            r += __atomic_load_n(&s->tls->reallocs, __ATOMIC_RELAXED);
        }
    }
    st->reallocs += r;
    /* Without SF_COUNT these are lower bounds: the calls of the slow paths
     * and the locked ones (heaplab_alloc_stats_lower_bounds says so).
     * Remote frees are counted by whoever pushed them. */
    st->mallocs += m;
    st->frees += f + __atomic_load_n(&core->remote_frees, __ATOMIC_RELAXED);
}

/* In the child only the forking thread lives on: the other owners' lists
 * (in the copied memory) go back to their slots.  One of them may have
 * stopped half-way through a push or a pop: its list then lacks a block,
 * which stays unused (never handed out twice). */
void sf_fork_child_locked(sf_core_t *core, sf_tls_t *self) {
    for (unsigned i = 1; i < core->nslots; i++) {
        sf_slot_t *s = core->slots[i];
        if (s->owned && s->tls && s->tls != self) save_lists(core, s->tls, s);
    }
}

/* Walks one list: every block is a block of class c of slot s, not in a
 * given-back slab, and the list ends (at most the blocks the span held). */
static size_t check_list(sf_core_t *core, sf_slot_t *s, unsigned c, void *head) {
    sf_bin_t *b = &s->bin[c];
    char *span = span_of(s, c);
    size_t bs = core->block[c], most = (size_t)(b->top - span) / bs, n = 0;
    for (void **f = head; f; f = *f) {
        HL_CHECK(++n <= most);
        HL_CHECK(sf_slot_of(core, f) == s && sf_class_at(f) == c);
        HL_CHECK((char *)f < b->top);
        size_t off = (size_t)((char *)f - span), sb;
        size_t k = sf_slab_index(core, c, off), at = sf_slab_at(core, c, k, &sb);
        HL_CHECK(at <= off && (off - at) % bs == 0 && (off - at) / bs < sb / bs);
        for (uint32_t i = 0; i < b->nfree; i++)
            HL_CHECK(b->free_slabs[i] != k);
    }
    return n;
}

/* A carve range: empty, or the blocks of one slab below `carve` (a slab in
 * use while any are left). */
static void check_range(sf_core_t *core, sf_slot_t *s, unsigned c, char *carve, char *floor) {
    if (floor == SF_FLOOR_EMPTY) {
        HL_CHECK(carve == NULL);
        return;
    }
    sf_bin_t *b = &s->bin[c];
    char *span = span_of(s, c);
    size_t bs = core->block[c], sb;
    HL_CHECK(floor >= span && floor < b->top);
    size_t k = sf_slab_index(core, c, (size_t)(floor - span));
    HL_CHECK(span + sf_slab_at(core, c, k, &sb) == floor);
    HL_CHECK(carve >= floor && carve <= floor + sb / bs * bs && (size_t)(carve - floor) % bs == 0);
    /* A range carved to its end may lie in a slab given back since. */
    for (uint32_t i = 0; i < b->nfree && carve > floor; i++)
        HL_CHECK(b->free_slabs[i] != k);
}

void sf_check_locked(sf_core_t *core, sf_tls_t *self) {
    if (!core->inited) return;
    for (unsigned i = 0; i < core->nslots; i++) {
        sf_slot_t *s = core->slots[i];
        if (!s) { /* slot 0, not needed yet */
            HL_CHECK(i == 0);
            continue;
        }
        HL_CHECK(s->index == i && (s->base & (((uintptr_t)1 << SF_SLOT_SHIFT) - 1)) == 0);
        HL_CHECK(sf_slot_of(core, (void *)s->base) == s);
        HL_CHECK(i > 0 || !s->owned);
        size_t foot = 0;
        for (unsigned c = 0; c < core->nclass; c++) { /* no bin beyond nclass */
            sf_bin_t *b = &s->bin[c];
            char *span = span_of(s, c);
            size_t sb;
            HL_CHECK(span <= b->top && b->top <= b->committed &&
                     b->committed <= span + ((size_t)1 << SF_CLASS_SHIFT));
            HL_CHECK(span + sf_slab_at(core, c, b->nslab, &sb) == b->top);
            HL_CHECK(b->used + b->nfree == b->nslab);
            size_t bytes = 0;
            for (uint32_t k = 0; k < b->nslab; k++) {
                (void)sf_slab_at(core, c, k, &sb);
                HL_CHECK(sf_slab_index(core, c, sf_slab_at(core, c, k, &sb)) == k);
                bytes += sb;
            }
            for (uint32_t k = 0; k < b->nfree; k++) {
                HL_CHECK(b->free_slabs[k] < b->nslab);
                (void)sf_slab_at(core, c, b->free_slabs[k], &sb);
                bytes -= sb;
            }
            HL_CHECK(bytes == b->bytes);
            foot += b->bytes;
            /* The lists this caller may walk: unowned slots', slot 0's, its own. */
            void *head = NULL;
            char *carve = NULL, *floor = NULL;
            if (!s->owned) {
                head = b->head, carve = b->carve, floor = b->floor;
            } else if (s->tls == self) {
                head = self->head[c], carve = self->carve[c], floor = self->floor[c];
                HL_CHECK(!b->head && !b->carve && b->floor == SF_FLOOR_EMPTY);
            } else {
                continue;
            }
            check_list(core, s, c, head);
            check_range(core, s, c, carve, floor);
        }
        HL_CHECK(foot == s->footprint);
    }
}

/* A line per class of slot `s` with blocks: its slabs, the bytes on the
 * caller's list, the rest of its slab, blocks waiting on the remote stack. */
void sf_report_locked(sf_core_t *core, sf_tls_t *self, void (*line)(const char *, size_t)) {
    char buf[256];
    for (unsigned i = 0; i < core->nslots; i++) {
        sf_slot_t *s = core->slots[i];
        if (!s) continue;
        size_t n = hl_format(buf, sizeof buf, "%s: slot %u%s: footprint %zu bytes, taken since reclaim %zu\n",
                             core->name, i, s->owned ? (s->tls == self ? " (this thread)" : " (a thread)") : "",
                             s->footprint, s->taken);
        line(buf, n);
        for (unsigned c = 0; c < core->nclass; c++) {
            sf_bin_t *b = &s->bin[c];
            if (!b->nslab) continue;
            void *head = b->head;
            char *carve = b->carve, *floor = b->floor;
            if (s->owned && s->tls == self) head = self->head[c], carve = self->carve[c], floor = self->floor[c];
            else if (s->owned) head = NULL, carve = NULL, floor = SF_FLOOR_EMPTY;
            size_t listed = 0, remote = 0, sb;
            for (void **f = head; f; f = *f) listed++;
            for (void **f = __atomic_load_n(&b->remote, __ATOMIC_ACQUIRE); f; f = *f) remote++;
            size_t left = floor != SF_FLOOR_EMPTY ? (size_t)(carve - floor) / core->block[c] : 0;
            (void)sf_slab_at(core, c, b->nslab - 1, &sb);
            n = hl_format(buf, sizeof buf,
                          "  class %u block %u: %u slabs, %zu bytes (first %u, last %zu; %u given back), "
                          "%zu free listed, %zu remote, %zu uncarved\n",
                          c, core->block[c], b->used, b->bytes, core->slab[c], sb, b->nfree, listed, remote,
                          left);
            line(buf, n);
        }
    }
    size_t n = hl_format(buf, sizeof buf,
                         "%s: %lu reclaims walked %lu free blocks, gave back %lu bytes; %lu slabs taken\n",
                         core->name, core->reclaims, core->reclaim_walked, core->reclaimed_bytes,
                         core->slabs_taken);
    line(buf, n);
}
