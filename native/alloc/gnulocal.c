/*
 * gnulocal.c: Mike Haertel's GNU malloc ("GNU LOCAL", paper 000 §2.1), after
 * the structure of his gmalloc: the heap is cut into 4096-byte blocks; a
 * request above half a block takes whole blocks, first fit; a smaller one
 * takes a power-of-two fragment carved from a block given over to fragments
 * of that size.  Everything the allocator knows about a block is in a small
 * header kept apart from the block, in a table indexed by block number, so
 * objects carry no tags and a search touches only the headers.
 *
 *   The heap (default emulated sbrk region) and the chunk headers (own region)
 *
 *   heapbase = ADDRESS(1)                                            ADDRESS(heaplimit) = brk
 *   +-----------+-----------+-----------------------+-----------+---------------
 *   | block 1   | block 2   | blocks 3..5           | block 6   |
 *   | 256 x 16B | free run  | one 3-block object    | 2 x 2048B |
 *   +-----------+-----------+-----------------------+-----------+---------------
 *         |           |                 |                 |
 *   info: [0] [1]        [2]               [3]  [4] [5]        [6]
 *         head type=4    FREE size=1       LARGE size=3        type=11
 *              nfree,    next,prev         (4, 5 not heads)    nfree, first
 *              first
 *
 *   info[b] (32 bytes) is the header of block b (ADDRESS(b) = heapbase + (b-1)*4096):
 *     type FREE  (-1): the first block of a run of `size` free blocks, on the
 *                      free list: circular, doubly linked by index (next, prev),
 *                      in address order, through info[0] (size 0, the head)
 *     type LARGE  (0): the first block of an object of `size` blocks
 *     type 4..11:      a chunk cut into 2^type-byte fragments, `nfree` of them
 *                      free; `first` is the index of its first free fragment in
 *                      list order
 *     type INSIDE (-2), or anything: a block inside a run (never looked at)
 *
 *   A free fragment holds the links of fraghead[type], a NULL-terminated
 *   doubly-linked list per size; the free fragments of one chunk lie next to
 *   each other on it, starting at `first`, so a chunk whose fragments are all
 *   free is cut out of the list in one piece and goes back as a free block.
 *
 *        fragment (free)              fragment (in use)
 *        +--------+--------+----      +-------------------------+
 *        | next   | prev   |  ...     | payload: all 2^type bytes|
 *        +--------+--------+----      +-------------------------+
 *
 * Invariants: runs and fragment chunks tile blocks 1 .. heaplimit-1; no two
 * free runs are adjacent; the free list holds every free run, in increasing
 * address order; heapindex is 0 or on it; each chunk's nfree is below its
 * fragment count and equals the number of its fragments on fraghead[type],
 * which form one consecutive stretch starting at fragment `first`.
 *
 * From the paper and gmalloc: 4096-byte blocks (000 uses 4 KB pages); above
 * 4096 bytes first fit over the free runs, searching the circular free list
 * from the rover `heapindex` (where the last search or free happened),
 * splitting off the tail of a larger run; below, power-of-two classes carved
 * from page-sized chunks ("requests larger than a specific size (e.g., 4096
 * bytes) are managed using a first-fit strategy, while objects smaller than
 * this are allocated in specific size classes (powers of two)"); requests from
 * 2049 to 4096 bytes take one whole block, which is what a 4096-byte class
 * would be; chunk headers hold the object size and a count of free fragments,
 * and a chunk whose fragments are all free goes back to the free runs ("deallocates
 * entire chunks when all the objects in the chunk have been freed"); a freed run
 * coalesces with both neighbours; a free run of 8 or more blocks at the top of
 * the heap goes back to the system (gmalloc's FINAL_FREE_BLOCKS); realloc keeps
 * a fragment whose class does not change, frees the tail blocks of a shrinking
 * large object, and moves what crosses the fragment/block line.
 * Departures: the smallest fragment is 16 bytes (two 8-byte links, and
 * HL_ALIGN), not 8; the header table lives in its own emulated-sbrk region and
 * grows there, where gmalloc copied it into a bigger block of the heap;
 * headers are 32 bytes; a large object grows in place into a free run that
 * follows it or at the top of the heap, where gmalloc freed it and searched
 * again; merged-away headers are marked INSIDE, which lets free() catch most
 * double frees of whole blocks.  memalign needs no over-allocation for
 * alignments up to 2048 (a fragment of 2^k bytes is 2^k-aligned) or 4096
 * (blocks are page aligned); larger ones take a suitably aligned stretch of a
 * free run, first fit.
 */
#include "hl_alloc.h"

#include <stdbool.h>
#include <string.h>

#define BLOCKLOG          12
#define BLOCKSIZE         ((size_t)1 << BLOCKLOG)
#define MINLOG            4 /* 16-byte fragments */
#define NLOGS             BLOCKLOG
#define FINAL_FREE_BLOCKS 8
#define GL_FREE           (-1)
#define GL_LARGE          0
#define GL_INSIDE         (-2)

typedef struct gl_info {
    int32_t type;
    uint16_t nfree, first; /* fragment chunks */
    size_t size;           /* runs: blocks */
    size_t next, prev;     /* free runs */
} gl_info_t;

typedef struct gl_list {
    struct gl_list *next, *prev;
} gl_list_t;

static char *heapbase;
static gl_info_t *info;
static size_t info_cap; /* entries the table has room for */
static hl_heap_t *info_heap;
static size_t heaplimit; /* blocks are 1 .. heaplimit-1 */
static size_t heapindex; /* the rover: 0 or a free run */
static gl_list_t fraghead[NLOGS];

static inline char *ADDRESS(size_t b) {
    return heapbase + (b - 1) * BLOCKSIZE;
}
static inline size_t BLOCK(void *p) {
    return (size_t)((char *)p - heapbase) / BLOCKSIZE + 1;
}
static inline size_t BLOCKIFY(size_t n) {
    return (n + BLOCKSIZE - 1) / BLOCKSIZE;
}
static inline unsigned frag_log(size_t n) { /* n <= BLOCKSIZE / 2 */
    if (n <= ((size_t)1 << MINLOG)) return MINLOG;
    return 64u - (unsigned)__builtin_clzl(n - 1);
}

static bool ensure_info(size_t entries) {
    if (entries <= info_cap) return true;
    size_t bytes = HL_ALIGN_UP((entries - info_cap) * sizeof(gl_info_t), BLOCKSIZE);
    if (!hl_heap_sbrk(info_heap, (intptr_t)bytes)) return false;
    info_cap += bytes / sizeof(gl_info_t);
    return true;
}

static int gl_init(void) {
    /* The default heap first: hl_heap_new before any use of it would take its slot. */
    heapbase = hl_sbrk(0); /* reserve; page aligned */
    info_heap = hl_heap_new("gnulocal chunk headers");
    if (!heapbase || !info_heap) return -1;
    info = hl_heap_sbrk(info_heap, 0);
    if (!info || !ensure_info(1)) return -1;
    info[0] = (gl_info_t){.type = GL_FREE, .size = 0, .next = 0, .prev = 0};
    heaplimit = 1;
    heapindex = 0;
    return 0;
}

/* Get `blocks` more blocks at the top of the heap (their headers first). */
static char *morecore(size_t blocks) {
    if (!ensure_info(heaplimit + blocks)) return NULL;
    char *r = hl_sbrk((intptr_t)(blocks * BLOCKSIZE));
    if (!r) return NULL;
    HL_CHECK(r == ADDRESS(heaplimit)); /* we are the only user of the default heap */
    heaplimit += blocks;
    return r;
}

/* Allocate `blocks` blocks out of the free run at `block`, relinking its tail. */
static void take(size_t block, size_t blocks) {
    gl_info_t *r = &info[block];
    if (r->size > blocks) {
        size_t t = block + blocks;
        info[t] = (gl_info_t){
            .type = GL_FREE, .size = r->size - blocks, .next = r->next, .prev = r->prev};
        info[r->prev].next = info[r->next].prev = heapindex = t;
    } else {
        info[r->next].prev = r->prev;
        info[r->prev].next = heapindex = r->next;
    }
    r->type = GL_LARGE;
    r->size = blocks;
}

/* First fit over the free runs from the rover; grow the heap when none fits
 * (extending a free run at the top rather than starting a new one). */
static size_t alloc_blocks(size_t blocks) {
    size_t start = heapindex, block = start;
    while (info[block].size < blocks) {
        block = info[block].next;
        if (block == start) {
            size_t last = info[0].prev, lastblocks = info[last].size;
            if (last != 0 && last + lastblocks == heaplimit) {
                if (!morecore(blocks - lastblocks)) return 0;
                info[last].size = blocks;
                block = last;
                break;
            }
            char *r = morecore(blocks);
            if (!r) return 0;
            block = BLOCK(r);
            info[block].type = GL_LARGE;
            info[block].size = blocks;
            return block;
        }
    }
    take(block, blocks);
    return block;
}

/* Give back the object of info[block].size blocks: link it into the free list
 * after its predecessor (found from the rover), coalesce, and return a final
 * run of FINAL_FREE_BLOCKS or more to the system. */
static void free_blocks(size_t block) {
    size_t i = heapindex;
    if (i > block) {
        while (i > block)
            i = info[i].prev;
    } else {
        do
            i = info[i].next;
        while (i > 0 && i < block);
        i = info[i].prev;
    }
    if (block == i + info[i].size) { /* coalesce with the predecessor */
        info[i].size += info[block].size;
        info[block].type = GL_INSIDE;
        block = i;
    } else {
        info[block].type = GL_FREE;
        info[block].next = info[i].next;
        info[block].prev = i;
        info[i].next = block;
        info[info[block].next].prev = block;
    }
    size_t n = info[block].next;
    if (block + info[block].size == n) { /* and with the successor */
        info[block].size += info[n].size;
        info[block].next = info[n].next;
        info[info[block].next].prev = block;
        info[n].type = GL_INSIDE;
    }
    size_t blocks = info[block].size;
    if (blocks >= FINAL_FREE_BLOCKS && block + blocks == heaplimit &&
        hl_sbrk(-(intptr_t)(blocks * BLOCKSIZE))) {
        heaplimit -= blocks;
        info[info[block].prev].next = info[block].next;
        info[info[block].next].prev = info[block].prev;
        info[block].type = GL_INSIDE;
        block = info[block].prev;
    }
    heapindex = block;
}

/* A fragment of 2^log bytes: pop the head of fraghead[log] (its chunk's free
 * fragments follow it), or cut a fresh block into fragments.  Fast path: one
 * unlink and two header stores. */
static void *alloc_frag(unsigned log) {
    gl_list_t *next = fraghead[log].next;
    if (next) {
        next->prev->next = next->next;
        if (next->next) next->next->prev = next->prev;
        gl_info_t *c = &info[BLOCK(next)];
        if (--c->nfree != 0)
            c->first = (uint16_t)(((uintptr_t)next->next & (BLOCKSIZE - 1)) >> log);
        return next;
    }
    size_t block = alloc_blocks(1);
    if (!block) return NULL;
    char *r = ADDRESS(block);
    size_t n = BLOCKSIZE >> log, i;
    for (i = 1; i < n; i++) { /* all but the first, each pushed at the head */
        gl_list_t *f = (gl_list_t *)(r + (i << log));
        f->next = fraghead[log].next;
        f->prev = &fraghead[log];
        f->prev->next = f;
        if (f->next) f->next->prev = f;
    }
    info[block].type = (int32_t)log;
    info[block].nfree = (uint16_t)(i - 1);
    info[block].first = (uint16_t)(i - 1);
    return r;
}

static void free_frag(void *ptr, size_t block, unsigned log) {
    gl_info_t *c = &info[block];
    size_t n = BLOCKSIZE >> log;
    gl_list_t *prev = (gl_list_t *)(ADDRESS(block) + ((size_t)c->first << log));
    if (c->nfree == n - 1) { /* the last one in use: the whole chunk goes back */
        gl_list_t *next = prev;
        for (size_t i = 1; i < n; i++)
            next = next->next;
        prev->prev->next = next;
        if (next) next->prev = prev->prev;
        c->type = GL_LARGE;
        c->size = 1;
        free_blocks(block);
    } else if (c->nfree != 0) { /* after the chunk's first free fragment */
        gl_list_t *f = ptr;
        f->next = prev->next;
        f->prev = prev;
        prev->next = f;
        if (f->next) f->next->prev = f;
        c->nfree++;
    } else { /* the chunk's only free fragment: at the head */
        gl_list_t *f = ptr;
        c->nfree = 1;
        c->first = (uint16_t)(((uintptr_t)ptr & (BLOCKSIZE - 1)) >> log);
        f->next = fraghead[log].next;
        f->prev = &fraghead[log];
        f->prev->next = f;
        if (f->next) f->next->prev = f;
    }
}

static void *gl_malloc(size_t n) {
    if (n <= BLOCKSIZE / 2) return alloc_frag(frag_log(n));
    size_t block = alloc_blocks(BLOCKIFY(n));
    return block ? ADDRESS(block) : NULL;
}

/* The block of a live pointer; aborts on anything else that is cheap to see. */
static size_t checked(void *p, const char *what) {
    char *q = p;
    if (HL_LIKELY(q >= heapbase && q < ADDRESS(heaplimit))) {
        size_t block = BLOCK(q);
        int32_t t = info[block].type;
        size_t off = (size_t)(q - ADDRESS(block));
        if (t == GL_LARGE ? off == 0
                          : t >= MINLOG && t < NLOGS && (off & (((size_t)1 << t) - 1)) == 0 &&
                                info[block].nfree < (BLOCKSIZE >> t))
            return block;
    }
    hl_fatal("%s(%p): not a block in use (double free or corruption)", what, p);
}

static void gl_free(void *p) {
    size_t block = checked(p, "free");
    int32_t t = info[block].type;
    if (t == GL_LARGE)
        free_blocks(block);
    else
        free_frag(p, block, (unsigned)t);
}

static size_t gl_usable_size(void *p) {
    size_t block = checked(p, "malloc_usable_size");
    int32_t t = info[block].type;
    return t == GL_LARGE ? info[block].size * BLOCKSIZE : (size_t)1 << t;
}

static void *realloc_move(void *p, size_t n, size_t old) {
    void *q = gl_malloc(n);
    if (!q) return NULL;
    memcpy(q, p, n < old ? n : old);
    gl_free(p);
    return q;
}

static void *gl_realloc(void *p, size_t n) {
    size_t block = checked(p, "realloc");
    int32_t t = info[block].type;
    if (t != GL_LARGE) { /* a fragment keeps its place while its class stays */
        size_t cls = (size_t)1 << t;
        if (n <= cls && (t == MINLOG || n > cls / 2)) return p;
        return realloc_move(p, n, cls);
    }
    size_t size = info[block].size, blocks = BLOCKIFY(n);
    if (n <= BLOCKSIZE / 2) return realloc_move(p, n, size * BLOCKSIZE);
    if (blocks < size) { /* free the tail blocks */
        size_t tail = block + blocks;
        info[tail].type = GL_LARGE;
        info[tail].size = size - blocks;
        info[block].size = blocks;
        free_blocks(tail);
        return p;
    }
    if (blocks == size) return p;
    size_t nb = block + size;
    if (nb < heaplimit && info[nb].type == GL_FREE && size + info[nb].size >= blocks) {
        take(nb, blocks - size); /* grow into the free run that follows */
        info[nb].type = GL_INSIDE;
        info[block].size = blocks;
        return p;
    }
    if (nb == heaplimit && morecore(blocks - size)) { /* grow at the top */
        info[block].size = blocks;
        return p;
    }
    return realloc_move(p, n, size * BLOCKSIZE);
}

/* Make sure a free run of at least `blocks` blocks ends the heap. */
static bool grow_final_run(size_t blocks) {
    size_t last = info[0].prev, have = 0;
    if (last != 0 && last + info[last].size == heaplimit) have = info[last].size;
    if (have >= blocks) return true;
    size_t first = heaplimit;
    if (!morecore(blocks - have)) return false;
    if (have) {
        info[last].size = blocks;
    } else {
        info[first] = (gl_info_t){.type = GL_FREE, .size = blocks, .next = 0, .prev = last};
        info[last].next = first;
        info[0].prev = first;
    }
    return true;
}

/* `blocks` blocks starting at a multiple of `align` (> BLOCKSIZE): first fit
 * over the free runs in address order, splitting off what precedes and follows. */
static void *aligned_blocks(size_t blocks, size_t align) {
    for (int tries = 0; tries < 2; tries++) {
        for (size_t i = info[0].next; i != 0; i = info[i].next) {
            char *a = ADDRESS(i);
            size_t lead = (size_t)((char *)HL_ALIGN_UP((uintptr_t)a, align) - a) / BLOCKSIZE;
            size_t size = info[i].size;
            if (lead + blocks > size) continue;
            if (lead == 0) {
                take(i, blocks);
                return a;
            }
            size_t b = i + lead, rest = size - lead - blocks;
            info[i].size = lead;
            if (rest) {
                size_t t = b + blocks;
                info[t] =
                    (gl_info_t){.type = GL_FREE, .size = rest, .next = info[i].next, .prev = i};
                info[info[i].next].prev = t;
                info[i].next = t;
            }
            info[b].type = GL_LARGE;
            info[b].size = blocks;
            return ADDRESS(b);
        }
        if (tries || !grow_final_run(blocks + align / BLOCKSIZE - 1)) return NULL;
    }
    return NULL;
}

static void *gl_memalign(size_t align, size_t n) {
    if (n <= BLOCKSIZE / 2 && align <= BLOCKSIZE / 2) {
        unsigned log = frag_log(n), alog = (unsigned)__builtin_ctzl(align);
        return alloc_frag(log > alog ? log : alog);
    }
    size_t blocks = BLOCKIFY(n);
    if (align <= BLOCKSIZE) return gl_malloc(blocks * BLOCKSIZE);
    return aligned_blocks(blocks, align);
}

static void gl_check(void) {
    size_t nruns = 0, fragfree[NLOGS] = {0};
    HL_CHECK(ADDRESS(heaplimit) == (char *)hl_heap_brk(hl_default_heap()));
    HL_CHECK(heaplimit <= info_cap);
    HL_CHECK(info[0].type == GL_FREE && info[0].size == 0);
    bool prev_free = false;
    for (size_t b = 1; b < heaplimit;) {
        gl_info_t *h = &info[b];
        if (h->type == GL_FREE || h->type == GL_LARGE) {
            HL_CHECK(h->size >= 1 && h->size <= heaplimit - b);
            if (h->type == GL_FREE) {
                HL_CHECK(!prev_free); /* free runs coalesce */
                nruns++;
            }
            prev_free = h->type == GL_FREE;
            b += h->size;
        } else {
            HL_CHECK(h->type >= MINLOG && h->type < NLOGS);
            HL_CHECK(h->nfree < (BLOCKSIZE >> h->type));
            HL_CHECK(h->nfree == 0 || h->first < (BLOCKSIZE >> h->type));
            fragfree[h->type] += h->nfree;
            prev_free = false;
            b++;
        }
    }
    size_t listed = 0, prev = 0;
    bool rover_seen = heapindex == 0;
    for (size_t i = info[0].next; i != 0; i = info[i].next) {
        HL_CHECK(i > prev && i < heaplimit); /* address order, so no cycle */
        HL_CHECK(info[i].type == GL_FREE);
        HL_CHECK(info[i].prev == prev);
        rover_seen |= i == heapindex;
        listed++;
        prev = i;
    }
    HL_CHECK(info[0].prev == prev);
    HL_CHECK(listed == nruns);
    HL_CHECK(rover_seen);
    for (unsigned log = MINLOG; log < NLOGS; log++) {
        size_t total = 0, run = 0, cur = 0;
        gl_list_t *pf = &fraghead[log];
        for (gl_list_t *f = fraghead[log].next; f; pf = f, f = f->next) {
            HL_CHECK((char *)f >= heapbase && (char *)f < ADDRESS(heaplimit));
            HL_CHECK(f->prev == pf);
            size_t b = BLOCK(f), off = (size_t)((char *)f - ADDRESS(b));
            HL_CHECK(info[b].type == (int32_t)log);
            HL_CHECK((off & (((size_t)1 << log) - 1)) == 0);
            if (b != cur) { /* a chunk's stretch begins at its `first` */
                HL_CHECK(cur == 0 || run == info[cur].nfree);
                HL_CHECK(info[b].nfree > 0 && (off >> log) == info[b].first);
                cur = b;
                run = 0;
            }
            run++;
            HL_CHECK(++total <= fragfree[log]);
        }
        HL_CHECK(cur == 0 || run == info[cur].nfree);
        HL_CHECK(total == fragfree[log]); /* so no chunk has two stretches */
    }
}

const hl_alloc_t hl_alloc_gnulocal = {
    .info = {"gnulocal",
             "Haertel's GNU malloc: first-fit whole pages above 4096 bytes, power-of-two "
             "fragments in page chunks with separate chunk headers below",
             "000 §2.1"},
    .init = gl_init,
    .malloc = gl_malloc,
    .free = gl_free,
    .usable_size = gl_usable_size,
    .realloc = gl_realloc,
    .memalign = gl_memalign,
    .check = gl_check,
};
