/*
 * adaptivecache.c: ADAPTIVECACHE of paper 002 §4 (Grunwald and Zorn's
 * comparison allocator for CUSTOMALLOC, after Oldehoeft and Allan's adaptive
 * exact-fit and Bozman's lookaside lists): requests rounded up to 32-byte
 * allocation units, one free list per size class, and the free lists kept in a
 * list of their own that both malloc and free search, moving the entry they
 * touch to the front.  New objects come from CUSTOMALLOC's fast allocator: a
 * bump pointer over contiguous extents that never coalesces and never takes
 * anything back, so every object ever carved stays that size for good.
 *
 *   An object (every block is 16-aligned; payload classes are multiples of 32)
 *
 *        b              b+8            b+16                         b+size
 *        +--------------+--------------+------------------------------+
 *   used | size | U     | AC_MAGIC     | payload (class = size - 16)  |
 *        +--------------+--------------+------------------------------+
 *   free | size | 0     | AC_MAGIC     | next free of its class | ... |
 *        +--------------+--------------+------------------------------+
 *   gap  | size | G     | AC_MAGIC     | (filler left by memalign)    |
 *        +--------------+--------------+------------------------------+
 *
 *   The heap (the default emulated sbrk region): carved bottom up, never reused
 *   except through the free lists
 *
 *   base                                                top            brk
 *   +--------+--------+------+--------+-- ... --+--------+--------------+
 *   | object | object | gap  | object |         | object | (bump room)  |
 *   +--------+--------+------+--------+-- ... --+--------+--------------+
 *
 *   The list of free lists, most recently used first:
 *
 *   mtf -> [class 32 | head -> o -> o -> NULL] -> [class 96 | head] -> [class 64 | ...] -> NULL
 *
 * Invariants: objects and gaps tile [base, top) exactly; an object's size is
 * 32k + 16 (k >= 1); an object is on a free list iff it is not in use, on the
 * list of its own class, and on exactly one; no two entries of the mtf list
 * have the same class.
 *
 * From the paper: allocation units of 32 bytes, a request of B bytes becoming
 * one of 32 * ceil(B / 32) (002 §2.1); malloc searches the list of free lists
 * for its class and, if there is none or it is empty, takes a new object from
 * the fast allocator; free searches again and creates an entry if its class
 * has none; in both, the entry touched moves to the front; objects are tagged
 * with their size (002 Figure 3) and are never coalesced; the fast allocator
 * bumps a pointer through contiguous extents, asking the system for 8192-byte
 * units (002 §4.3; HEAPLAB_ADAPTIVECACHE_CHUNK).
 * Departures: the size tag is one 8-byte word plus a magic word, 16 bytes so
 * that payloads stay 16-aligned (the paper's tag was Lea's two 4-byte words);
 * the entries of the list of free lists live in pages of their own.  Not in
 * the paper: realloc keeps an object whose class is unchanged, resizes the
 * object at the bump pointer in place, keeps one that shrinks by less than
 * half, and otherwise moves; memalign bumps the pointer to an aligned payload
 * and files the skipped bytes as a free object when they make one.
 */
#include "hl_alloc.h"

#include <stdbool.h>
#include <string.h>

#define HDR      16
#define UNIT     32
#define INUSE    ((size_t)1)
#define GAP      ((size_t)2)
#define AC_MAGIC ((size_t)0xADA9C0DEADA9C0DEull)

typedef struct ac_list {
    size_t cls;           /* payload bytes: a multiple of UNIT */
    void *head;           /* free objects of this class, LIFO, linked through payloads */
    struct ac_list *next; /* the move-to-front list */
    size_t count;         /* objects on `head` */
} ac_list_t;

static char *base, *top, *brk_; /* carved: [base, top); room: [top, brk_) */
static size_t chunk;
static ac_list_t *mtf;                 /* the list of free lists */
static ac_list_t *pool, *pool_end;     /* room for more entries */
static size_t nentries, nfree_objects; /* for the checker */

static inline size_t *tag(char *b) {
    return (size_t *)b;
}
static inline size_t bsize(char *b) {
    return *tag(b) & ~(size_t)15;
}
static inline void set_hdr(char *b, size_t sz, size_t flags) {
    tag(b)[0] = sz | flags;
    tag(b)[1] = AC_MAGIC;
}

static int ac_init(void) {
    chunk = hl_tunable("HEAPLAB_ADAPTIVECACHE_CHUNK", 8192);
    if (chunk < 16 || chunk > ((size_t)1 << 30))
        hl_fatal("HEAPLAB_ADAPTIVECACHE_CHUNK=%zu: expected 16 to 1g", chunk);
    chunk = HL_ALIGN_UP(chunk, 16);
    base = top = brk_ = hl_sbrk(0); /* reserves the region; takes no memory */
    return base ? 0 : -1;
}

/* Make room up to `want` by asking for whole extents of `chunk` bytes. */
static bool __attribute__((noinline)) room(char *want) {
    size_t incr = HL_ALIGN_UP((size_t)(want - brk_), chunk);
    char *old = hl_sbrk((intptr_t)incr);
    if (!old) return false;
    HL_CHECK(old == brk_); /* we are the only user of the default heap */
    brk_ += incr;
    return true;
}

/* The fast allocator: carve an object of class `cls` at the bump pointer. */
static void *bump(size_t cls) {
    size_t sz = cls + HDR;
    if (HL_UNLIKELY(sz > (size_t)(brk_ - top)) && !room(top + sz)) return NULL;
    char *b = top;
    top += sz;
    set_hdr(b, sz, INUSE);
    return b + HDR;
}

/* Search the list of free lists for `cls`; move the entry found to the front. */
static inline ac_list_t *lookup(size_t cls) {
    ac_list_t **pp = &mtf, *e;
    for (e = mtf; e; pp = &e->next, e = e->next) {
        if (e->cls == cls) {
            if (pp != &mtf) {
                *pp = e->next;
                e->next = mtf;
                mtf = e;
            }
            return e;
        }
    }
    return NULL;
}

static ac_list_t *__attribute__((noinline)) new_entry(size_t cls) {
    if (pool == pool_end) {
        size_t ps = hl_page_size();
        pool = hl_pages_alloc(ps, 0);
        if (!pool) return NULL;
        pool_end = pool + ps / sizeof *pool;
    }
    ac_list_t *e = pool++;
    e->cls = cls;
    e->head = NULL;
    e->count = 0;
    e->next = mtf;
    mtf = e;
    nentries++;
    return e;
}

/* Fast path: a walk of the mtf list (one compare per class passed, usually
 * none: the class in use is at the front), then a pop. */
static void *ac_malloc(size_t n) {
    size_t cls = HL_ALIGN_UP(n, UNIT);
    ac_list_t *e = lookup(cls);
    if (e && e->head) {
        void **p = e->head;
        e->head = *p;
        e->count--;
        nfree_objects--;
        *tag((char *)p - HDR) |= INUSE;
        return p;
    }
    return bump(cls);
}

static char *checked(void *p, const char *what) {
    char *b = (char *)p - HDR;
    if (HL_UNLIKELY(((uintptr_t)p & 15) || b < base || b >= top || tag(b)[1] != AC_MAGIC ||
                    (tag(b)[0] & (INUSE | GAP)) != INUSE || bsize(b) > (size_t)(top - b)))
        hl_fatal("%s(%p): not a block in use (double free or corruption)", what, p);
    return b;
}

static void put(char *b) {
    size_t cls = bsize(b) - HDR;
    ac_list_t *e = lookup(cls);
    if (HL_UNLIKELY(!e) && !(e = new_entry(cls))) {
        *tag(b) = bsize(b) | GAP; /* no memory for a list: the object is lost */
        return;
    }
    *tag(b) &= ~INUSE;
    void **p = (void **)(b + HDR);
    *p = e->head;
    e->head = p;
    e->count++;
    nfree_objects++;
}

static void ac_free(void *p) {
    put(checked(p, "free"));
}

static size_t ac_usable_size(void *p) {
    return bsize(checked(p, "malloc_usable_size")) - HDR;
}

static void *ac_realloc(void *p, size_t n) {
    char *b = checked(p, "realloc");
    size_t old = bsize(b) - HDR, cls = HL_ALIGN_UP(n, UNIT);
    if (cls == old) return p;
    if (b + old + HDR == top) { /* the last object carved: resize it at the bump pointer */
        if (cls > old && cls + HDR > (size_t)(brk_ - b) && !room(b + cls + HDR)) goto move;
        top = b + cls + HDR;
        *tag(b) = (cls + HDR) | INUSE;
        return p;
    }
    if (cls < old && n >= old / 2) return p;
move:;
    void *q = ac_malloc(n);
    if (!q) return NULL;
    memcpy(q, p, n < old ? n : old);
    put(b);
    return q;
}

/* Bump to an aligned payload; the bytes skipped become a free object of the
 * largest class they hold (on its list) and, for what is left, a gap. */
static void *ac_memalign(size_t align, size_t n) {
    size_t cls = HL_ALIGN_UP(n, UNIT);
    char *q = (char *)HL_ALIGN_UP((uintptr_t)top + HDR, align);
    size_t skip = (size_t)(q - HDR - top);
    if ((size_t)(brk_ - top) < skip + cls + HDR && !room(q + cls)) return NULL;
    if (skip) {
        char *g = top;
        size_t obj = skip >= UNIT + HDR ? skip - (skip - HDR) % UNIT : 0;
        top = q - HDR;
        if (obj) {
            set_hdr(g, obj, INUSE);
            put(g);
            g += obj;
        }
        if (g < top) set_hdr(g, (size_t)(top - g), GAP);
    }
    return bump(cls);
}

static void ac_check(void) {
    size_t walked_free = 0;
    HL_CHECK(base <= top && top <= brk_);
    HL_CHECK(brk_ == (char *)hl_heap_brk(hl_default_heap()));
    for (char *b = base; b < top; b += bsize(b)) {
        size_t t = *tag(b), sz = bsize(b);
        HL_CHECK(tag(b)[1] == AC_MAGIC);
        HL_CHECK(sz >= HDR && sz <= (size_t)(top - b) && (t & 12) == 0);
        if (t & GAP) {
            HL_CHECK(!(t & INUSE));
        } else {
            HL_CHECK(sz >= UNIT + HDR && (sz - HDR) % UNIT == 0);
            walked_free += !(t & INUSE);
        }
    }
    size_t entries = 0, listed = 0;
    uint64_t seen[2048 / 64] = {0}; /* classes up to 64 KiB: one bit each */
    for (ac_list_t *e = mtf; e; e = e->next) {
        HL_CHECK(++entries <= nentries);
        HL_CHECK(e->cls >= UNIT && e->cls % UNIT == 0);
        size_t u = e->cls / UNIT - 1;
        if (u < 2048) {
            HL_CHECK(!(seen[u / 64] >> (u % 64) & 1)); /* one list per class */
            seen[u / 64] |= (uint64_t)1 << (u % 64);
        } else {
            for (ac_list_t *o = e->next; o; o = o->next)
                HL_CHECK(o->cls != e->cls);
        }
        size_t c = 0;
        for (void **p = e->head; p; p = *p) {
            char *b = (char *)p - HDR;
            HL_CHECK(b >= base && b < top && ((uintptr_t)p & 15) == 0);
            HL_CHECK(tag(b)[1] == AC_MAGIC && !(*tag(b) & (INUSE | GAP)));
            HL_CHECK(bsize(b) - HDR == e->cls);
            HL_CHECK(++c <= e->count);
        }
        HL_CHECK(c == e->count);
        listed += c;
    }
    HL_CHECK(entries == nentries);
    HL_CHECK(listed == nfree_objects && listed == walked_free);
}

const hl_alloc_t hl_alloc_adaptivecache = {
    .info = {"adaptivecache",
             "Free lists per 32-byte class in a move-to-front list searched by malloc and free, "
             "over a bump allocator that never coalesces",
             "002 §4"},
    .init = ac_init,
    .malloc = ac_malloc,
    .free = ac_free,
    .usable_size = ac_usable_size,
    .realloc = ac_realloc,
    .memalign = ac_memalign,
    .check = ac_check,
};
