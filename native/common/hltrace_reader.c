/*
 * hltrace_reader.c: reads traces of versions 1 and 2 (docs/trace-format.md).
 * It runs in the replayer, in hltrace-dump and in the agent's fork child:
 * memory from the hl_mem_t, bytes in through the hl_read_fn, snprintf for
 * its error text only.
 *
 *   header -> stored payload -> crc -> number -> codec -> decode the whole
 *   block, validating it, then:
 *     definitions, END, skipped blocks, v1 events: handed out in file order
 *     v2 events: rows -> per-thread queues of steps (a realloc of a non-NULL
 *       pointer, and realloc_free, is two: release, then the event)
 *
 *   v2 merge (the order every reader must produce):
 *     thread queues ──► heap of ready heads, least (time, thread) first ──► address map
 *        ▲                 a head is ready when its round is closed, its      (address -> id,
 *        │                 edge's source has emitted that many steps, and      size, creator)
 *        │                 (first step) its thread's start edge holds          ──► events with
 *     blocked heads wait on their source thread's list, and return to the      dense ids
 *     heap when it has emitted enough
 *
 *   A round closes when a block of a later round, END or the end of the file
 *   is read; the merge then runs until no head is ready, and only then is
 *   the next block read. So the merged order depends on the file alone.
 *
 * Cost (hltrace-bench, the bignum trace of bench/compare.py: 67 M events,
 * one thread): about 330 instructions and 35-40 ns an event (617 and 95 ns before). Rows decode
 * into 64-byte queue entries, times interpolated as the next stamp is read
 * (a running quotient, no division per event); the thread that stepped
 * keeps the heap's top while its next head is still the least, so a
 * one-thread trace never moves the heap; the event is written straight
 * into the caller's item.
 *
 * A block is all or nothing: an error anywhere in it is reported before any
 * of its items. Before an error is reported, every event of the good blocks
 * before it that the merge can place is handed out (a killed program's
 * trace reads to its last complete block); the error then counts them.
 * Memory: the live objects, the thread table, and the events of the rounds
 * not yet merged (at most HL_MAX_PENDING, an error beyond).
 */
#define ZSTD_STATIC_LINKING_ONLY
#include "hltrace_enc.h"
#include "hltrace_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

/* Events decoded but not yet merged, over all threads. */
#define HL_MAX_PENDING (4u << 20)

/* ---------------------------------------------------------------- live objects */

/* Open addressing, linear probing, backward-shift deletion. key = v1: id + 1,
 * v2: the address (never 0), so 0 marks an empty slot.  The keys are an
 * array of their own (k[j] is s[j]'s), which the probes read: eight to a
 * cache line instead of one and a fifth, so that a lookup in a map larger
 * than the cache misses once or twice, not once per probe. */
typedef struct live_slot {
    uint64_t id, size, seq;
    uint32_t thread, stack;
    uint8_t kind, align_log2;
} live_slot_t;

typedef struct live_map {
    live_slot_t *s;
    uint64_t *k;   /* k[j]: s[j]'s key, 0 where s[j] is empty */
    size_t cap, n; /* cap is 0 or a power of two */
} live_map_t;

static inline size_t live_hash(uint64_t key, size_t cap) {
    /* Fibonacci hashing: the top bits of the product, which depend on
     * every bit of the key */
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> (64 - __builtin_ctzll(cap)));
}

static __attribute__((noinline)) int live_grow(const hl_mem_t *m, live_map_t *t) {
    size_t cap = t->cap ? t->cap * 2 : 1024;
    live_slot_t *s = m->alloc(m->ctx, cap * sizeof *s);
    uint64_t *k = s ? m->alloc(m->ctx, cap * sizeof *k) : NULL;
    if (!k) {
        if (s) m->release(m->ctx, s, cap * sizeof *s);
        return -1;
    }
    memset(s, 0, cap * sizeof *s);
    memset(k, 0, cap * sizeof *k);
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->k[i]) continue;
        size_t j = live_hash(t->k[i], cap);
        while (k[j])
            j = (j + 1) & (cap - 1);
        s[j] = t->s[i];
        k[j] = t->k[i];
    }
    if (t->s) {
        m->release(m->ctx, t->s, t->cap * sizeof *t->s);
        m->release(m->ctx, t->k, t->cap * sizeof *t->k);
    }
    t->s = s;
    t->k = k;
    t->cap = cap;
    return 0;
}

/* The slot for key, existing or new (key set, the rest to be filled). */
static inline live_slot_t *live_put(const hl_mem_t *m, live_map_t *t, uint64_t key) {
    if ((t->n + 1) * 10 > t->cap * 7 && live_grow(m, t)) return NULL;
    size_t j = live_hash(key, t->cap);
    while (t->k[j] && t->k[j] != key)
        j = (j + 1) & (t->cap - 1);
    if (!t->k[j]) t->n++;
    t->k[j] = key;
    return &t->s[j];
}

/* A hint for a lookup of key a few events later: its key's and its slot's
 * cache lines (the merge's time goes mostly to these misses on a large live
 * set). Reads nothing; the map may grow before the lookup. */
static inline void prefetch(const void *p) {
#if defined(__x86_64__)
    /* (gcc 12's dead-code elimination drops a __builtin_prefetch here:
     * nothing uses its result; a volatile asm stays) */
    __asm__ volatile("prefetcht0 %0" : : "m"(*(const char *)p));
#else
    __builtin_prefetch(p);
#endif
}

static inline void live_prefetch(const live_map_t *t, uint64_t key) {
    if (!t->cap) return;
    size_t j = live_hash(key, t->cap);
    prefetch(&t->k[j]);
    prefetch(&t->s[j]);
}

static inline live_slot_t *live_find(live_map_t *t, uint64_t key) {
    if (!t->cap || !key) return NULL;
    size_t j = live_hash(key, t->cap);
    while (t->k[j]) {
        if (t->k[j] == key) return &t->s[j];
        j = (j + 1) & (t->cap - 1);
    }
    return NULL;
}

static inline void live_remove(live_map_t *t, live_slot_t *slot) {
    size_t mask = t->cap - 1, i = (size_t)(slot - t->s), j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!t->k[j]) break;
        size_t home = live_hash(t->k[j], t->cap);
        /* move s[j] into the hole at i unless its home lies in (i, j] */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            t->s[i] = t->s[j];
            t->k[i] = t->k[j];
            i = j;
        }
    }
    t->k[i] = 0;
    t->n--;
}

/* ---------------------------------------------------------------- v2 thread state */

/* A decoded v2 event waiting to be merged: one cache line. Its thread_seq
 * is not kept: the head of a thread's queue is its event events_done. Nor
 * is its round: the events of closed rounds are the first ready_seq of the
 * thread's (a round closes for every block read before the one that closes
 * it, see close_rounds). */
typedef struct pend {
    uint64_t time, size, addr;
    uint64_t x; /* realloc: the old address; the memalign family: the alignment */
    uint64_t e1_steps, e2_steps; /* edges: after that many steps of e?_thread; 0: none */
    uint32_t e1_thread, e2_thread, stack;
    uint8_t kind, two, stamped;
} pend_t;

/* A thread's row decoder: what hltrace_enc.h's encoder keeps, but its table. */
typedef struct dec {
    uint64_t prev_addr, nalloc, nfree, last_tick;
    uint32_t lsrc[HL_ENC_EDGE_SLOTS];
    uint64_t ln[HL_ENC_EDGE_SLOTS];
} dec_t;

typedef struct thr {
    /* decoding */
    uint64_t events_dec, steps_dec, bytes_dec;
    dec_t enc;
    int have_stamp;
    uint64_t stamp_event, stamp_ns; /* the last stamped event and its time */
    int has_start;
    uint32_t start_thread;
    uint64_t start_steps;
    uint64_t *ring; /* the last HL_ENC_RING allocations, then releases (hltrace_enc.h) */
    /* the queue: q[qh .. qn) */
    pend_t *q;
    size_t qh, qn, qcap;
    int half_done; /* the head's release step is emitted */
    int stash;     /* ... and took `stashed` out of the map */
    live_slot_t stashed;
    /* merging */
    uint64_t ready_seq; /* events of closed rounds: the head may merge while events_done < it */
    uint64_t steps_done, events_done;
    int in_heap, blocked;
    uint32_t wait_thread;
    uint64_t wait_steps;
    uint32_t waiters;     /* first thread waiting on this one, + 1; 0: none */
    uint32_t next_waiter; /* + 1 */
} thr_t;

typedef struct hent {
    uint64_t time; /* of the thread's head */
    uint32_t t;
} hent_t;

struct hl_reader {
    hl_mem_t mem;
    hl_read_fn read;
    void *rctx;
    const char *name;
    unsigned version;
    uint64_t pos; /* offset of the next block header */
    uint32_t block_no;
    hl_meta_t meta;
    buf_t meta_buf; /* a copy of the META payload the meta strings point into */
    buf_t argv_buf; /* hl_bytes_t[argc] */
    uint32_t n_modules, n_stacks, n_threads;
    int last_was_end, done, failed;
    uint64_t last_end_reason;
    uint64_t decoded; /* v1: events in good blocks; v2: rows decoded */
    uint64_t row_bytes; /* v2: bytes of rows decoded */
    uint64_t handed;  /* events handed out */
    uint64_t next_id, time;
    live_map_t live;
    buf_t stored, raw;
    ZSTD_DCtx *zd;
    /* the block whose items are being handed out */
    int cur_kind; /* 0: none */
    const uint8_t *cur, *cur_end;
    buf_t evs; /* hl_event_t[] of a v1 events block or an INHERITED block */
    size_t ev_i, ev_n;
    hl_end_t end;
    uint8_t skipped_kind;
    uint32_t skipped_bytes;
    hl_frame_t frames[HL_MAX_FRAMES];
    hl_error_t err;
    /* per thread (v1: thread_seq counters; v2: streams and merge) */
    thr_t *thr;
    size_t thr_cap;
    /* v2 */
    int have_round;
    uint64_t round;        /* the last EVENTS block's round */
    hent_t *heap;
    size_t heap_n, heap_cap;
    uint64_t pending;      /* events in the queues */
    uint64_t last_out;     /* time of the last event handed out */
    uint64_t unknown_frees;
    uint64_t inherited;
    int wrote_events;      /* an EVENTS block was read (INHERITED must come first) */
    int end_wait;          /* an END block waits for the merge to finish */
    int err_wait;          /* an error waits for the merge to finish */
    int eof_wait;          /* end of file (no END) waits for the merge */
    uint64_t err_at;       /* offset of the block the waiting END or error is about */
};

__attribute__((format(printf, 4, 5))) static int r_fail(hl_reader_t *r, hl_problem_t p,
                                                        uint64_t offset, const char *fmt, ...) {
    r->failed = 1;
    r->err.problem = p;
    r->err.offset = offset;
    r->err.events = r->version >= 2 ? r->handed : r->decoded;
    r->err.file = r->name;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err.msg, sizeof r->err.msg, fmt, ap);
    va_end(ap);
    return -1;
}

/* Reads until len bytes or end of file; returns the count, or -1. */
static ssize_t read_full(hl_reader_t *r, void *buf, size_t len) {
    size_t n = 0;
    while (n < len) {
        ssize_t k = r->read(r->rctx, (uint8_t *)buf + n, len - n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (k == 0) break;
        n += (size_t)k;
    }
    return (ssize_t)n;
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

typedef struct bhdr {
    uint8_t kind, codec;
    uint16_t flags;
    uint32_t stored, raw, number, crc;
} bhdr_t;

/* One block into r->raw. Returns 1, 0 at end of file on a block boundary, -1. */
static int read_block(hl_reader_t *r, bhdr_t *h) {
    uint64_t at = r->pos;
    uint8_t hb[HL_BLOCK_HEADER_LEN];
    ssize_t n = read_full(r, hb, sizeof hb);
    if (n < 0) return r_fail(r, HL_E_IO, at, "%s", strerror(errno));
    if (n == 0) return 0;
    if (r->last_was_end && r->last_end_reason != HL_END_EXEC) /* not a cut: something follows */
        return r_fail(r, HL_E_MALFORMED, at,
                      "malformed block: trailing data after the END block (%zd%s bytes)", n,
                      n == HL_BLOCK_HEADER_LEN ? " or more" : "");
    if (n < HL_BLOCK_HEADER_LEN)
        return r_fail(r, HL_E_TRUNCATED, at, "truncated: block header: %zd of %d bytes", n,
                      HL_BLOCK_HEADER_LEN);
    if (memcmp(hb, hl_block_magic, 4))
        return r_fail(r, HL_E_BAD_BLOCK_MAGIC, at,
                      "bad block magic (corrupt data, or not a block boundary)");
    h->kind = hb[4];
    h->codec = hb[5];
    h->flags = (uint16_t)(hb[6] | hb[7] << 8);
    h->stored = le32(hb + 8);
    h->raw = le32(hb + 12);
    h->number = le32(hb + 16);
    h->crc = le32(hb + 20);
    if (h->stored > HL_MAX_BLOCK_LEN || h->raw > HL_MAX_BLOCK_LEN)
        return r_fail(r, HL_E_ABSURD_LENGTH, at,
                      "absurd length: block claims %u stored / %u raw bytes; the limit is %u",
                      h->stored, h->raw, HL_MAX_BLOCK_LEN);
    r->stored.len = 0;
    if (buf_reserve(&r->mem, &r->stored, h->stored ? h->stored : 1))
        return r_fail(r, HL_E_NOMEM, at, "out of memory for a %u-byte block", h->stored);
    n = read_full(r, r->stored.p, h->stored);
    if (n < 0) return r_fail(r, HL_E_IO, at, "%s", strerror(errno));
    if ((size_t)n < h->stored)
        return r_fail(r, HL_E_TRUNCATED, at,
                      "truncated: %s block: header says %u payload bytes, only %zd remain",
                      hl_stream_name(h->kind), h->stored, n);
    r->stored.len = h->stored;
    r->pos += HL_BLOCK_HEADER_LEN + (uint64_t)h->stored;
    uint32_t crc = hl_crc32c(hl_crc32c(0, hb, 20), r->stored.p, h->stored);
    if (crc != h->crc)
        return r_fail(
            r, HL_E_CHECKSUM, at,
            "checksum mismatch in %s block (stored %#010x, computed %#010x): the block is corrupt",
            hl_stream_name(h->kind), h->crc, crc);
    if (h->number != r->block_no)
        return r_fail(r, HL_E_MALFORMED, at,
                      "malformed block: block number %u where %u was expected (a block is missing "
                      "or out of order)",
                      h->number, r->block_no);
    if (h->flags & ~HL_BLOCK_FLAGS_KNOWN)
        return r_fail(r, HL_E_MALFORMED, at,
                      "malformed block: %s block has reserved flag bits set (flags %#06x)",
                      hl_stream_name(h->kind), h->flags);
    r->block_no++;
    switch (h->codec) {
    case 0: {
        if (h->raw != h->stored)
            return r_fail(r, HL_E_MALFORMED, at,
                          "malformed block: stored block with raw length != stored length");
        buf_t t = r->raw;
        r->raw = r->stored;
        r->stored = t;
        break;
    }
    case 1: {
        r->raw.len = 0;
        if (buf_reserve(&r->mem, &r->raw, h->raw ? h->raw : 1))
            return r_fail(r, HL_E_NOMEM, at, "out of memory for a %u-byte block", h->raw);
        if (!r->zd) {
            ZSTD_customMem cm = {hl_zstd_alloc, hl_zstd_free, &r->mem};
            r->zd = ZSTD_createDCtx_advanced(cm);
            if (!r->zd) return r_fail(r, HL_E_NOMEM, at, "cannot create a zstd context");
        }
        size_t z = ZSTD_decompressDCtx(r->zd, r->raw.p, h->raw, r->stored.p, h->stored);
        if (ZSTD_isError(z))
            return r_fail(r, HL_E_MALFORMED, at, "malformed block: zstd: %s", ZSTD_getErrorName(z));
        if (z != h->raw)
            return r_fail(r, HL_E_MALFORMED, at,
                          "malformed block: zstd payload decodes to %zu bytes, header says %u", z,
                          h->raw);
        r->raw.len = z;
        break;
    }
    default:
        return r_fail(r, HL_E_MALFORMED, at, "malformed block: unknown codec %u", h->codec);
    }
    return 1;
}

/* A cursor over a payload; errors carry what was being read. */
typedef struct cur {
    const uint8_t *p, *end;
    const char *err; /* static text */
} cur_t;

static __attribute__((noinline)) int cur_u_slow(cur_t *c, uint64_t *v, const char *what) {
    int e = hl_varint_get(&c->p, c->end, v);
    if (e == 0) return 0;
    c->err = what;
    return e;
}

/* One varint; most are one byte (a row's op, sizes under 128, recent
 * addresses), decoded here without a call. */
static inline int cur_u(cur_t *c, uint64_t *v, const char *what) {
    if (LIKELY(c->p < c->end && *c->p < 0x80)) {
        *v = *c->p++;
        return 0;
    }
    if (LIKELY(c->end - c->p >= 2 && c->p[1] < 0x80)) {
        *v = (uint64_t)(c->p[0] & 0x7f) | (uint64_t)c->p[1] << 7;
        c->p += 2;
        return 0;
    }
    return cur_u_slow(c, v, what);
}

/* A varint length then that many bytes. */
static int cur_bytes(cur_t *c, hl_bytes_t *out, const char *what) {
    uint64_t n;
    if (cur_u(c, &n, what)) return -1;
    if (n > (uint64_t)(c->end - c->p)) {
        c->err = what;
        return -3;
    }
    out->ptr = c->p;
    out->len = (size_t)n;
    c->p += n;
    return 0;
}

static const char *cur_why(int e) {
    return e == -1   ? "ran out of bytes inside a varint"
           : e == -2 ? "varint longer than 10 bytes or 64 bits"
                     : "length runs past the end";
}

static int int_field(hl_bytes_t v, uint64_t *out) {
    const uint8_t *p = v.ptr;
    if (hl_varint_get(&p, v.ptr + v.len, out)) return -1;
    return p == v.ptr + v.len ? 0 : -1;
}

static int parse_meta(hl_reader_t *r) {
    static const char *const names[14] = {NULL,          "pid",          "ppid",       "argv",
                                          "start time",  "pointer size", "endianness", "time unit",
                                          "stack depth", "recorder",     "executable", "options",
                                          "parent pid",  "clock"};
    uint64_t at = HL_FILE_HEADER_LEN;
    r->meta_buf.len = 0;
    if (buf_reserve(&r->mem, &r->meta_buf, r->raw.len + 1))
        return r_fail(r, HL_E_NOMEM, at, "out of memory");
    put_raw(&r->meta_buf, r->raw.p, r->raw.len);
    hl_meta_t *m = &r->meta;
    memset(m, 0, sizeof *m);
    m->version = r->version;
    int seen[14] = {0};
    size_t argc = 0;
    for (int pass = 0; pass < 2; pass++) {
        cur_t c = {r->meta_buf.p, r->meta_buf.p + r->meta_buf.len, NULL};
        hl_bytes_t *argv = (hl_bytes_t *)r->argv_buf.p;
        argc = 0;
        while (c.p < c.end) {
            uint64_t key;
            hl_bytes_t v;
            int e = cur_u(&c, &key, "META key");
            if (!e) e = cur_bytes(&c, &v, "META value");
            if (e)
                return r_fail(r, HL_E_MALFORMED, at, "malformed block: META: %s: %s", c.err,
                              cur_why(e));
            if (key == 3) {
                if (pass == 1) argv[argc] = v;
                argc++;
                continue;
            }
            if (pass == 0) continue;
            if (key < 14) seen[key] = 1;
            uint64_t x = 0;
            int is_int = key == 1 || key == 2 || (key >= 4 && key <= 8) || key == 12;
            if (is_int && int_field(v, &x))
                return r_fail(r, HL_E_MALFORMED, at, "malformed block: META: %s: not one varint",
                              names[key]);
            switch (key) {
            case 1:
                m->pid = x;
                break;
            case 2:
                m->has_ppid = 1, m->ppid = x;
                break;
            case 4:
                m->start_ns = x;
                break;
            case 5:
                m->pointer_size = x;
                break;
            case 6:
                m->endian = x;
                break;
            case 7:
                m->time_unit_ns = x;
                break;
            case 8:
                m->stack_depth = x;
                break;
            case 9:
                m->recorder = v;
                break;
            case 10:
                m->executable = v;
                break;
            case 11:
                m->options = v;
                break;
            case 12:
                m->has_parent_pid = 1, m->parent_pid = x;
                break;
            case 13:
                m->clock = v;
                break;
            default:
                break; /* a later version's field */
            }
        }
        if (pass == 0) {
            r->argv_buf.len = 0;
            if (buf_reserve(&r->mem, &r->argv_buf, (argc + 1) * sizeof(hl_bytes_t)))
                return r_fail(r, HL_E_NOMEM, at, "out of memory");
        }
    }
    m->argv = (const hl_bytes_t *)r->argv_buf.p;
    m->argc = argc;
    static const int required[6] = {1, 4, 5, 6, 7, 8};
    for (int i = 0; i < 6; i++)
        if (!seen[required[i]])
            return r_fail(r, HL_E_MALFORMED, at,
                          "malformed block: META lacks the required field %s (key %d)",
                          names[required[i]], required[i]);
    if (m->time_unit_ns == 0)
        return r_fail(r, HL_E_MALFORMED, at, "malformed block: META time unit is 0");
    return 0;
}

hl_reader_t *hl_reader_new(const hl_mem_t *mem, hl_read_fn read, void *rctx, const char *name,
                           hl_error_t *err) {
    hl_reader_t *r = mem->alloc(mem->ctx, sizeof *r);
    if (!r) {
        memset(err, 0, sizeof *err);
        err->problem = HL_E_NOMEM;
        err->file = name;
        snprintf(err->msg, sizeof err->msg, "out of memory");
        return NULL;
    }
    memset(r, 0, sizeof *r);
    r->mem = *mem;
    r->read = read;
    r->rctx = rctx;
    r->name = name;
    uint8_t h[HL_FILE_HEADER_LEN];
    ssize_t n = read_full(r, h, sizeof h);
    bhdr_t bh;
    int rb;
    if (n < 0) {
        r_fail(r, HL_E_IO, 0, "%s", strerror(errno));
        goto fail;
    }
    if (n < 8 || memcmp(h, hl_file_magic, 8)) {
        r_fail(r, HL_E_NOT_A_TRACE, 0, "not a heaplab trace (bad magic)");
        goto fail;
    }
    if (n < HL_FILE_HEADER_LEN) {
        r_fail(r, HL_E_TRUNCATED, (uint64_t)n, "truncated: file header: %zd of %d bytes", n,
               HL_FILE_HEADER_LEN);
        goto fail;
    }
    unsigned version = h[8] | h[9] << 8, hlen = h[10] | h[11] << 8;
    uint32_t flags = le32(h + 12);
    if (version < HL_VERSION_MIN || version > HL_VERSION_MAX) {
        r_fail(r, HL_E_VERSION, 8, "trace format version %u; this reader understands 1 and 2",
               version);
        goto fail;
    }
    r->version = version;
    if (hlen != HL_FILE_HEADER_LEN || flags != 0) {
        r_fail(r, HL_E_MALFORMED, 10,
               "malformed block: file header size %u / flags %#x; v%u has 16 / 0", hlen, flags,
               version);
        goto fail;
    }
    r->pos = HL_FILE_HEADER_LEN;
    rb = read_block(r, &bh);
    if (rb < 0) goto fail;
    if (rb == 0) {
        r_fail(r, HL_E_CUT_SHORT, HL_FILE_HEADER_LEN, "no END block: the recording was cut short");
        goto fail;
    }
    if (bh.kind != HL_STREAM_META) {
        r_fail(r, HL_E_MALFORMED, HL_FILE_HEADER_LEN,
               "malformed block: first block is %s, not META", hl_stream_name(bh.kind));
        goto fail;
    }
    if (parse_meta(r)) goto fail;
    return r;
fail:
    *err = r->err;
    hl_reader_free(r);
    return NULL;
}

const hl_meta_t *hl_reader_meta(const hl_reader_t *r) {
    return &r->meta;
}
const hl_error_t *hl_reader_error(const hl_reader_t *r) {
    return &r->err;
}
uint64_t hl_reader_events(const hl_reader_t *r) {
    return r->handed;
}
uint64_t hl_reader_live_objects(const hl_reader_t *r) {
    return r->live.n;
}
uint64_t hl_reader_position(const hl_reader_t *r) {
    return r->pos;
}
uint64_t hl_reader_unknown_frees(const hl_reader_t *r) {
    return r->unknown_frees;
}

/* The per-thread table, grown to hold thread `n - 1`. */
static int thr_reserve(hl_reader_t *r, size_t n) {
    if (n <= r->thr_cap) return 0;
    size_t cap = r->thr_cap ? r->thr_cap * 2 : 16;
    while (cap < n)
        cap *= 2;
    thr_t *t = r->mem.alloc(r->mem.ctx, cap * sizeof *t);
    if (!t) return -1;
    memset(t, 0, cap * sizeof *t);
    if (r->thr) {
        memcpy(t, r->thr, r->thr_cap * sizeof *t);
        r->mem.release(r->mem.ctx, r->thr, r->thr_cap * sizeof *t);
    }
    r->thr = t;
    r->thr_cap = cap;
    return 0;
}

/* Definitions: a first pass validates the whole block (and commits the
 * counts); the items are then handed out by a second pass. */
static int check_defs(hl_reader_t *r, const bhdr_t *h, uint64_t at) {
    cur_t c = {r->raw.p, r->raw.p + r->raw.len, NULL};
    const char *kn = hl_stream_name(h->kind);
    int e = 0;
    while (c.p < c.end) {
        uint64_t id, a, b;
        hl_bytes_t s1, s2;
        if (h->kind == HL_STREAM_MODULES) {
            if ((e = cur_u(&c, &id, "module id"))) break;
            if (id != (uint64_t)r->n_modules + 1)
                return r_fail(r, HL_E_MALFORMED, at,
                              "malformed block: %s: module id %llu where %u was expected", kn,
                              (unsigned long long)id, r->n_modules + 1);
            if ((e = cur_u(&c, &a, "module base")) || (e = cur_u(&c, &b, "module size")) ||
                (e = cur_bytes(&c, &s1, "module path")) ||
                (e = cur_bytes(&c, &s2, "module build-id")))
                break;
            r->n_modules++;
        } else if (h->kind == HL_STREAM_STACKS) {
            if ((e = cur_u(&c, &id, "stack id"))) break;
            if (id != (uint64_t)r->n_stacks + 1)
                return r_fail(r, HL_E_MALFORMED, at,
                              "malformed block: %s: stack id %llu where %u was expected", kn,
                              (unsigned long long)id, r->n_stacks + 1);
            uint64_t nf;
            if ((e = cur_u(&c, &nf, "frame count"))) break;
            if (nf == 0 || nf > HL_MAX_FRAMES)
                return r_fail(r, HL_E_MALFORMED, at,
                              "malformed block: %s: stack %llu has %llu frames; 1..=%d allowed", kn,
                              (unsigned long long)id, (unsigned long long)nf, HL_MAX_FRAMES);
            for (uint64_t i = 0; i < nf && !e; i++) {
                if ((e = cur_u(&c, &a, "frame module"))) break;
                if (a > r->n_modules)
                    return r_fail(
                        r, HL_E_MALFORMED, at,
                        "malformed block: %s: stack %llu names module %llu, which is not defined",
                        kn, (unsigned long long)id, (unsigned long long)a);
                e = cur_u(&c, &b, "frame offset");
            }
            if (e) break;
            r->n_stacks++;
        } else {
            if ((e = cur_u(&c, &id, "thread index"))) break;
            if (id != r->n_threads)
                return r_fail(r, HL_E_MALFORMED, at,
                              "malformed block: %s: thread index %llu where %u was expected", kn,
                              (unsigned long long)id, r->n_threads);
            if ((e = cur_u(&c, &a, "thread tid")) || (e = cur_bytes(&c, &s1, "thread name"))) break;
            if (thr_reserve(r, (size_t)r->n_threads + 1))
                return r_fail(r, HL_E_NOMEM, at, "out of memory for the thread table");
            thr_t *t = &r->thr[r->n_threads];
            if (r->version >= 2) {
                uint64_t st, ss = 0;
                if ((e = cur_u(&c, &st, "thread start"))) break;
                if (st) {
                    if ((e = cur_u(&c, &ss, "thread start steps"))) break;
                    if (st - 1 >= r->n_threads || ss == 0)
                        return r_fail(r, HL_E_MALFORMED, at,
                                      "malformed block: %s: thread %llu starts after %llu steps "
                                      "of thread %llu, which is not an earlier thread",
                                      kn, (unsigned long long)id, (unsigned long long)ss,
                                      (unsigned long long)(st - 1));
                    t->has_start = 1;
                    t->start_thread = (uint32_t)(st - 1);
                    t->start_steps = ss;
                }
            }
            r->n_threads++;
        }
    }
    if (e)
        return r_fail(r, HL_E_MALFORMED, at, "malformed block: %s: %s: %s", kn, c.err, cur_why(e));
    r->cur = r->raw.p;
    r->cur_end = r->raw.p + r->raw.len;
    r->cur_kind = h->kind;
    return 0;
}

/* The next definition of an already validated block. */
static void next_def(hl_reader_t *r, hl_item_t *it) {
    cur_t c = {r->cur, r->cur_end, NULL};
    uint64_t id = 0, a = 0, b = 0;
    if (r->cur_kind == HL_STREAM_MODULES) {
        it->kind = HL_ITEM_MODULE;
        cur_u(&c, &id, "");
        cur_u(&c, &a, "");
        cur_u(&c, &b, "");
        it->u.module.id = (uint32_t)id;
        it->u.module.base = a;
        it->u.module.size = b;
        cur_bytes(&c, &it->u.module.path, "");
        cur_bytes(&c, &it->u.module.build_id, "");
    } else if (r->cur_kind == HL_STREAM_STACKS) {
        it->kind = HL_ITEM_STACK;
        uint64_t nf = 0;
        cur_u(&c, &id, "");
        cur_u(&c, &nf, "");
        for (uint64_t i = 0; i < nf; i++) {
            cur_u(&c, &a, "");
            cur_u(&c, &b, "");
            r->frames[i].module = (uint32_t)a;
            r->frames[i].offset = b;
        }
        it->u.stack.id = (uint32_t)id;
        it->u.stack.nframes = (uint32_t)nf;
        it->u.stack.frames = r->frames;
    } else {
        it->kind = HL_ITEM_THREAD;
        cur_u(&c, &id, "");
        cur_u(&c, &a, "");
        it->u.thread.index = (uint32_t)id;
        it->u.thread.tid = a;
        cur_bytes(&c, &it->u.thread.name, "");
        it->u.thread.has_start = 0;
        it->u.thread.start_thread = 0;
        it->u.thread.start_steps = 0;
        if (r->version >= 2) {
            uint64_t st = 0, ss = 0;
            cur_u(&c, &st, "");
            if (st) cur_u(&c, &ss, "");
            it->u.thread.has_start = st != 0;
            it->u.thread.start_thread = st ? (uint32_t)(st - 1) : 0;
            it->u.thread.start_steps = ss;
        }
    }
    r->cur = c.p;
    if (r->cur >= r->cur_end) r->cur_kind = 0;
}

/* ---------------------------------------------------------------- v1 events */

static int decode_events_v1(hl_reader_t *r, uint64_t at) {
#define EFAIL(...) return r_fail(r, HL_E_MALFORMED, at, "malformed block: EVENTS: " __VA_ARGS__)
    cur_t c = {r->raw.p, r->raw.p + r->raw.len, NULL};
    uint64_t n, first_event, first_id, base_time;
    int e;
    if ((e = cur_u(&c, &n, "event count"))) EFAIL("%s: %s", c.err, cur_why(e));
    if (n == 0 || n > HL_MAX_BLOCK_EVENTS)
        EFAIL("%llu events in one block; 1..=%u allowed", (unsigned long long)n,
              HL_MAX_BLOCK_EVENTS);
    if ((e = cur_u(&c, &first_event, "first_event")) || (e = cur_u(&c, &first_id, "first_id")) ||
        (e = cur_u(&c, &base_time, "base_time")))
        EFAIL("%s: %s", c.err, cur_why(e));
    if (first_event != r->decoded)
        EFAIL("block starts at event %llu, but %llu events came before it (a block is missing)",
              (unsigned long long)first_event, (unsigned long long)r->decoded);
    if (first_id != r->next_id)
        EFAIL("block starts at object %llu, but %llu objects came before it",
              (unsigned long long)first_id, (unsigned long long)r->next_id);
    if (base_time != r->time)
        EFAIL("block base time %llu, but the previous event was at %llu",
              (unsigned long long)base_time, (unsigned long long)r->time);
    static const char *const colname[7] = {"ops column",   "threads column", "times column",
                                           "sizes column", "aligns column",  "refs column",
                                           "stacks column"};
    cur_t col[7];
    for (int i = 0; i < 7; i++) {
        hl_bytes_t b;
        if ((e = cur_bytes(&c, &b, colname[i]))) EFAIL("%s: %s", c.err, cur_why(e));
        col[i] = (cur_t){b.ptr, b.ptr + b.len, NULL};
    }
    if (c.p != c.end) EFAIL("%zu bytes after the last column", (size_t)(c.end - c.p));
    if ((uint64_t)(col[0].end - col[0].p) != n)
        EFAIL("ops column holds %zu bytes for %llu events", (size_t)(col[0].end - col[0].p),
              (unsigned long long)n);
    r->evs.len = 0;
    if (buf_reserve(&r->mem, &r->evs, n * sizeof(hl_event_t)))
        return r_fail(r, HL_E_NOMEM, at, "out of memory for %llu events", (unsigned long long)n);
    hl_event_t *evs = (hl_event_t *)r->evs.p;
    uint64_t next_id = r->next_id, time = r->time, base = r->decoded;
    for (uint64_t i = 0; i < n; i++) {
#define EVFAIL(fmt, ...)                                                                           \
    EFAIL("event %llu (#%llu of the block): " fmt, (unsigned long long)(base + i),                 \
          (unsigned long long)i, __VA_ARGS__)
        uint8_t op = col[0].p[i];
        unsigned k = op & HL_OP_KIND_MASK;
        hl_event_t *ev = &evs[i];
        memset(ev, 0, sizeof *ev);
        if (k >= HL_KIND_COUNT) EVFAIL("reserved kind %u", k);
        int release = hl_kind_is_release(k);
        ev->index = base + i;
        ev->kind = (uint8_t)k;
        ev->failed = !!(op & HL_OP_FAILED);
        ev->inherited = !!(op & HL_OP_INHERITED);
        int old_null = !!(op & HL_OP_OLD_NULL);
        if (old_null && k != HL_REALLOC) EVFAIL("OLD_NULL on %s", hl_kind_name(k));
        if (ev->failed && release) EVFAIL("FAILED on %s", hl_kind_name(k));
        if (ev->inherited && (ev->failed || release))
            EVFAIL("%s", "INHERITED on an event that creates no object");
        uint64_t v;
        if ((e = cur_u(&col[1], &v, "thread"))) EVFAIL("%s: %s", "thread", cur_why(e));
        if (v >= r->n_threads) EVFAIL("thread %llu is not defined", (unsigned long long)v);
        ev->thread = (uint32_t)v;
        ev->thread_seq = r->thr[v].events_dec++;
        if ((e = cur_u(&col[2], &v, "time"))) EVFAIL("%s: %s", "time", cur_why(e));
        if (time + v < time) EVFAIL("%s", "time overflows");
        time += v;
        ev->time = time;
        if (!release && (e = cur_u(&col[3], &ev->size, "size")))
            EVFAIL("%s: %s", "size", cur_why(e));
        if (hl_kind_has_align(k) && (e = cur_u(&col[4], &ev->align, "align")))
            EVFAIL("%s: %s", "align", cur_why(e));
        live_slot_t *slot = NULL;
        if (release || (k == HL_REALLOC && !old_null)) {
            if ((e = cur_u(&col[5], &v, "ref"))) EVFAIL("%s: %s", "ref", cur_why(e));
            if (v >= next_id) EVFAIL("ref %llu points before object 0", (unsigned long long)v);
            ev->old = next_id - 1 - v;
            ev->has_old = 1;
            slot = live_find(&r->live, ev->old + 1);
            if (!slot)
                EVFAIL("%s of object %llu, which is not live", hl_kind_name(k),
                       (unsigned long long)ev->old);
            ev->old_size = slot->size;
            ev->old_thread = slot->thread;
            ev->old_seq = slot->seq;
        }
        if (op & HL_OP_HAS_STACK) {
            if ((e = cur_u(&col[6], &v, "stack"))) EVFAIL("%s: %s", "stack", cur_why(e));
            if (v == 0 || v > r->n_stacks)
                EVFAIL("stack %llu is not defined", (unsigned long long)v);
            ev->stack = (uint32_t)v;
        }
        if (slot && (release || !ev->failed)) live_remove(&r->live, slot);
        if (!release && !ev->failed) {
            live_slot_t *s = live_put(&r->mem, &r->live, next_id + 1);
            if (!s) return r_fail(r, HL_E_NOMEM, at, "out of memory for the live objects");
            s->id = next_id;
            s->size = ev->size;
            s->thread = ev->thread;
            s->seq = ev->thread_seq;
            s->stack = ev->stack;
            s->kind = (uint8_t)k;
            s->align_log2 = (uint8_t)(ev->align ? __builtin_ctzll(ev->align) : 0);
            ev->id = next_id++;
            ev->has_id = 1;
        }
        if (release) ev->size = ev->old_size;
#undef EVFAIL
    }
    static const char *const names[7] = {"ops",    "threads", "times", "sizes",
                                         "aligns", "refs",    "stacks"};
    for (int i = 1; i < 7; i++)
        if (col[i].p != col[i].end)
            EFAIL("%zu unused bytes in the %s column", (size_t)(col[i].end - col[i].p), names[i]);
    r->next_id = next_id;
    r->time = time;
    r->decoded += n;
    r->ev_i = 0;
    r->ev_n = (size_t)n;
    r->cur_kind = HL_STREAM_EVENTS;
    return 0;
#undef EFAIL
}

/* ---------------------------------------------------------------- v2 events */

/* Ticks to ns with a block's clock: ns_ref + (tick - tsc_ref) * mult / 2^32,
 * signed and floored, 0 at the least. */
static uint64_t clock_ns(uint64_t tick, uint64_t tsc_ref, uint64_t ns_ref, uint64_t mult) {
    __int128 d = (__int128)(int64_t)(tick - tsc_ref);
    __int128 v = (__int128)ns_ref + ((d * (__int128)mult) >> 32);
    if (v < 0) return 0;
    if (v > (__int128)UINT64_MAX) return UINT64_MAX;
    return (uint64_t)v;
}

static int q_reserve(hl_reader_t *r, thr_t *t, size_t extra) {
    if (t->qh && t->qh == t->qn) t->qh = t->qn = 0;
    if (t->qn + extra <= t->qcap) return 0;
    if (t->qh > t->qcap / 2) { /* compact */
        memmove(t->q, t->q + t->qh, (t->qn - t->qh) * sizeof *t->q);
        t->qn -= t->qh;
        t->qh = 0;
        if (t->qn + extra <= t->qcap) return 0;
    }
    size_t cap = t->qcap ? t->qcap * 2 : 256;
    while (cap < t->qn + extra)
        cap *= 2;
    pend_t *q = r->mem.alloc(r->mem.ctx, cap * sizeof *q);
    if (!q) return -1;
    if (t->q) {
        memcpy(q, t->q + t->qh, (t->qn - t->qh) * sizeof *q);
        r->mem.release(r->mem.ctx, t->q, t->qcap * sizeof *q);
    }
    t->qn -= t->qh;
    t->qh = 0;
    t->q = q;
    t->qcap = cap;
    return 0;
}

enum { A_NEW, A_GONE, A_OLD };

/* An address field (hltrace_enc.h): 0 or a cur error; -4 an address of 0,
 * -5 a code that names an allocation or release the stream does not hold.
 * ring: the thread's last HL_ENC_RING allocations, then its releases. */
static inline __attribute__((always_inline)) int
decode_addr(uint64_t *ring, cur_t *c, dec_t *en, int role, uint64_t *out, const char *what) {
    uint64_t code;
    int e = cur_u(c, &code, what);
    if (UNLIKELY(e)) return e;
    if (code == 0) {
        *out = 0;
        return 0;
    }
    uint64_t v = code - 1, val = v >> 2, a;
    switch (v & 3) {
    case 0:
        a = en->prev_addr + ((uint64_t)hl_unzz(val) << 4);
        break;
    case 1:
    case 2: {
        uint64_t n = (v & 3) == 1 ? en->nalloc : en->nfree;
        if (UNLIKELY(val >= n || val >= HL_ENC_RING)) {
            c->err = what;
            return -5;
        }
        a = ring[((v & 3) == 2 ? HL_ENC_RING : 0) + ((n - 1 - val) & (HL_ENC_RING - 1))];
        break;
    }
    default: {
        uint64_t z;
        if (UNLIKELY(val)) {
            c->err = what;
            return -5;
        }
        if ((e = cur_u(c, &z, what))) return e;
        a = en->prev_addr + (uint64_t)hl_unzz(z);
        break;
    }
    }
    if (UNLIKELY(!a)) {
        c->err = what;
        return -4;
    }
    en->prev_addr = a;
    if (role == A_NEW) ring[en->nalloc++ & (HL_ENC_RING - 1)] = a;
    if (role == A_GONE) ring[HL_ENC_RING + (en->nfree++ & (HL_ENC_RING - 1))] = a;
    *out = a;
    return 0;
}

static const char *addr_why(int e) {
    return e == -4   ? "an address of 0 written as a delta"
           : e == -5 ? "names an allocation or release the thread's stream does not hold"
                     : cur_why(e);
}

static int decode_edge(cur_t *c, dec_t *en, uint32_t *src, uint64_t *steps) {
    uint64_t s, z;
    int e;
    if ((e = cur_u(c, &s, "edge thread")) || (e = cur_u(c, &z, "edge steps"))) return e;
    unsigned k = (unsigned)(s % HL_ENC_EDGE_SLOTS);
    uint64_t base = en->lsrc[k] == s + 1 && s < UINT32_MAX ? en->ln[k] : 0;
    *steps = base + (uint64_t)hl_unzz(z);
    *src = s >= UINT32_MAX ? UINT32_MAX : (uint32_t)s;
    en->lsrc[k] = (uint32_t)(s + 1);
    en->ln[k] = *steps;
    return 0;
}

/* The times of events q[0 .. n), of thread positions seq .. seq + n, which
 * lie between the stamp (pe, pt) and the next one (ne, nt):
 * pt + (nt - pt) * (i - pe) / (ne - pe), floored (pt when nt <= pt). One
 * division per gap, then a running quotient and remainder: no 128-bit
 * division per event. */
static void interpolate(pend_t *q, size_t n, uint64_t seq, uint64_t pe, uint64_t pt, uint64_t ne,
                        uint64_t nt) {
    if (nt <= pt) {
        for (size_t i = 0; i < n; i++)
            q[i].time = pt;
        return;
    }
    uint64_t d = nt - pt, den = ne - pe, k0 = seq - pe; /* 0 < k0, k0 + n <= den */
    uint64_t qd = d / den, rd = d % den, v, rem;
    if (k0 == 1) {
        v = qd;
        rem = rd;
    } else {
        unsigned __int128 x = (unsigned __int128)d * k0;
        v = (uint64_t)(x / den);
        rem = (uint64_t)(x % den);
    }
    for (size_t i = 0; i < n; i++) { /* v = floor(d * (k0 + i) / den), rem the rest */
        q[i].time = pt + v;
        v += qd;
        rem += rd;
        if (rem >= den) {
            v++;
            rem -= den;
        }
    }
}

static int decode_events_v2(hl_reader_t *r, uint64_t at) {
#define EFAIL(...) return r_fail(r, HL_E_MALFORMED, at, "malformed block: EVENTS: " __VA_ARGS__)
    cur_t c = {r->raw.p, r->raw.p + r->raw.len, NULL};
    uint64_t th, round, first, tsc_ref, ns_ref, mult;
    int e;
    if ((e = cur_u(&c, &th, "thread")) || (e = cur_u(&c, &round, "round")) ||
        (e = cur_u(&c, &first, "first_byte")) || (e = cur_u(&c, &tsc_ref, "clock tsc_ref")) ||
        (e = cur_u(&c, &ns_ref, "clock ns_ref")) || (e = cur_u(&c, &mult, "clock mult")))
        EFAIL("%s: %s", c.err, cur_why(e));
    if (th >= r->n_threads) EFAIL("thread %llu is not defined", (unsigned long long)th);
    if (c.p == c.end) EFAIL("%s", "no rows");
    if (r->have_round && round < r->round)
        EFAIL("round %llu after round %llu (rounds never go back)", (unsigned long long)round,
              (unsigned long long)r->round);
    thr_t *t = &r->thr[th];
    if (first != t->bytes_dec)
        EFAIL("thread %llu's block starts at byte %llu of its rows, but %llu came before it (a "
              "block is missing)",
              (unsigned long long)th, (unsigned long long)first, (unsigned long long)t->bytes_dec);
    size_t nbytes = (size_t)(c.end - c.p);
    /* every row takes two bytes at least: an upper bound on the events */
    size_t most = nbytes / 2 + 1;
    if (most > HL_MAX_BLOCK_EVENTS) most = HL_MAX_BLOCK_EVENTS + 1;
    if (r->pending + most > HL_MAX_PENDING + HL_MAX_BLOCK_EVENTS)
        EFAIL("more than %u events wait to be merged (edges to events the trace does not "
              "deliver?)",
              HL_MAX_PENDING);
    if (q_reserve(r, t, most))
        return r_fail(r, HL_E_NOMEM, at, "out of memory for the events of a block");
    if (!t->ring && !(t->ring = r->mem.alloc(r->mem.ctx, 2 * HL_ENC_RING * sizeof *t->ring)))
        return r_fail(r, HL_E_NOMEM, at, "out of memory for a thread's addresses");
    pend_t *q = t->q + t->qn;
    uint64_t *ring = t->ring;
    cur_t d = c;
    dec_t en = t->enc;
    const uint64_t seq0 = t->events_dec, n_threads = r->n_threads, n_stacks = r->n_stacks;
    uint64_t steps = t->steps_dec, n = 0;
    /* time stamps: the last one, (pe, pt), if any; the events after it in
     * this block, q[fill .. n), get their times at the next stamp, or pt at
     * the end of the block */
    int have = t->have_stamp;
    uint64_t pe = t->stamp_event, pt = t->stamp_ns;
    size_t fill = 0;
    while (d.p < d.end) {
        uint64_t i = n;
#define EVFAIL(fmt, ...)                                                                           \
    EFAIL("thread %llu event %llu (#%llu of the block): " fmt, (unsigned long long)th,             \
          (unsigned long long)(seq0 + i), (unsigned long long)i, __VA_ARGS__)
        if (UNLIKELY(n == most || n == HL_MAX_BLOCK_EVENTS))
            EFAIL("more than %u events in one block", HL_MAX_BLOCK_EVENTS);
        uint8_t op = *d.p++;
        unsigned k = op & HL_OP_KIND_MASK;
        pend_t *p = &q[n++];
        memset(p, 0, sizeof *p);
        if (UNLIKELY(k >= HL_KIND_COUNT)) EVFAIL("reserved kind %u", k);
        p->kind = (uint8_t)k;
        if (op & HL_OP2_TIME) {
            uint64_t dt;
            if ((e = cur_u(&d, &dt, "time"))) EVFAIL("%s: %s", d.err, cur_why(e));
            en.last_tick += dt;
            p->time = clock_ns(en.last_tick, tsc_ref, ns_ref, mult);
            p->stamped = 1;
        }
        if (UNLIKELY(op & (HL_OP2_EDGE | HL_OP2_EDGE2))) {
            if (op & HL_OP2_EDGE2) {
                if ((e = decode_edge(&d, &en, &p->e2_thread, &p->e2_steps)))
                    EVFAIL("%s: %s", d.err, cur_why(e));
            }
            if (op & HL_OP2_EDGE) {
                if ((e = decode_edge(&d, &en, &p->e1_thread, &p->e1_steps)))
                    EVFAIL("%s: %s", d.err, cur_why(e));
            }
        }
        switch (k) {
        case HL_REALLOC:
            if ((e = decode_addr(ring, &d, &en, A_OLD, &p->x, "old address")) ||
                (e = cur_u(&d, &p->size, "size")) ||
                (e = decode_addr(ring, &d, &en, A_NEW, &p->addr, "address")))
                EVFAIL("%s: %s", d.err, addr_why(e));
            p->two = p->x != 0;
            break;
        case HL_FREE:
        case HL_REALLOC_FREE: {
            /* peek: NULL is an error here, not an address to release */
            if (UNLIKELY(d.p < d.end && *d.p == 0)) EVFAIL("%s of NULL", hl_kind_name(k));
            if ((e = decode_addr(ring, &d, &en, A_GONE, &p->addr, "address")))
                EVFAIL("%s: %s", d.err, addr_why(e));
            p->two = k == HL_REALLOC_FREE;
            break;
        }
        default:
            if ((e = cur_u(&d, &p->size, "size"))) EVFAIL("%s: %s", d.err, cur_why(e));
            if (K_ALIGN(k) && (e = cur_u(&d, &p->x, "align")))
                EVFAIL("%s: %s", d.err, cur_why(e));
            if ((e = decode_addr(ring, &d, &en, A_NEW, &p->addr, "address")))
                EVFAIL("%s: %s", d.err, addr_why(e));
            break;
        }
        if (op & HL_OP2_STACK) {
            uint64_t s;
            if ((e = cur_u(&d, &s, "stack"))) EVFAIL("%s: %s", d.err, cur_why(e));
            if (UNLIKELY(s == 0 || s > n_stacks))
                EVFAIL("stack %llu is not defined", (unsigned long long)s);
            p->stack = (uint32_t)s;
        }
        if (UNLIKELY(op & (HL_OP2_EDGE | HL_OP2_EDGE2))) {
            if ((op & HL_OP2_EDGE2) && !p->two) EVFAIL("%s", "EDGE2 on a one-step event");
            for (int j = 0; j < 2; j++) {
                uint32_t src = j ? p->e2_thread : p->e1_thread;
                uint64_t ns = j ? p->e2_steps : p->e1_steps;
                if (!(op & (j ? HL_OP2_EDGE2 : HL_OP2_EDGE))) continue;
                if (src >= n_threads)
                    EVFAIL("an edge names thread %llu, which is not defined",
                           (unsigned long long)src);
                if (src == th) EVFAIL("%s", "an edge to its own thread");
                if (ns == 0) EVFAIL("%s", "an edge after 0 steps");
            }
        }
        steps += p->two ? 2 : 1;
        if (p->stamped) {
            uint64_t seq = seq0 + i;
            if (have) interpolate(q + fill, (size_t)(i - fill), seq0 + fill, pe, pt, seq, p->time);
            have = 1;
            pe = seq;
            pt = p->time;
            fill = (size_t)n;
        }
#undef EVFAIL
    }
    /* an event before any stamp of its thread has no time */
    if (!t->have_stamp && !q[0].stamped)
        EFAIL("thread %llu event %llu: no time stamp before it", (unsigned long long)th,
              (unsigned long long)seq0);
    for (size_t i = fill; i < n; i++) /* after the block's last stamp: its time */
        q[i].time = pt;
    t->have_stamp = have;
    t->stamp_event = pe;
    t->stamp_ns = pt;
    t->enc = en;
    t->events_dec += n;
    t->steps_dec = steps;
    t->bytes_dec += nbytes;
    r->row_bytes += nbytes;
    t->qn += (size_t)n;
    r->pending += n;
    r->decoded += n;
    r->round = round;
    r->have_round = 1;
    r->wrote_events = 1;
    return 0;
#undef EFAIL
}

/* ---------------------------------------------------------------- v2 merge */

/* The heap holds (time of the head, thread): least first, ties to the lower
 * thread. Keys are unique (one entry per thread), so the least is the same
 * whatever the heap's shape. */
static inline int hent_less(hent_t a, hent_t b) {
    return a.time < b.time || (a.time == b.time && a.t < b.t);
}

static void heap_up(hl_reader_t *r, size_t i) {
    hent_t x = r->heap[i];
    while (i) {
        size_t p = (i - 1) / 2;
        if (!hent_less(x, r->heap[p])) break;
        r->heap[i] = r->heap[p];
        i = p;
    }
    r->heap[i] = x;
}

static void heap_down(hl_reader_t *r, size_t i) {
    hent_t x = r->heap[i];
    size_t n = r->heap_n;
    for (;;) {
        size_t l = 2 * i + 1, m = l;
        if (l >= n) break;
        if (l + 1 < n && hent_less(r->heap[l + 1], r->heap[l])) m = l + 1;
        if (!hent_less(r->heap[m], x)) break;
        r->heap[i] = r->heap[m];
        i = m;
    }
    r->heap[i] = x;
}

static int heap_push(hl_reader_t *r, uint32_t ti) {
    if (r->heap_n == r->heap_cap) {
        size_t cap = r->heap_cap ? r->heap_cap * 2 : 64;
        hent_t *h = r->mem.alloc(r->mem.ctx, cap * sizeof *h);
        if (!h) return -1;
        if (r->heap) {
            memcpy(h, r->heap, r->heap_n * sizeof *h);
            r->mem.release(r->mem.ctx, r->heap, r->heap_cap * sizeof *h);
        }
        r->heap = h;
        r->heap_cap = cap;
    }
    thr_t *t = &r->thr[ti];
    r->heap[r->heap_n] = (hent_t){t->q[t->qh].time, ti};
    heap_up(r, r->heap_n++);
    t->in_heap = 1;
    return 0;
}

/* What the head of thread ti waits for: 0 ready, 1 nothing to merge (empty
 * or a round not yet closed), 2 blocked on (wait_thread, wait_steps). */
static inline int head_state(hl_reader_t *r, uint32_t ti) {
    thr_t *t = &r->thr[ti];
    if (t->qh == t->qn || t->events_done >= t->ready_seq) return 1;
    const pend_t *p = &t->q[t->qh];
    if (UNLIKELY(t->steps_done == 0 && t->has_start &&
                 r->thr[t->start_thread].steps_done < t->start_steps)) {
        t->wait_thread = t->start_thread;
        t->wait_steps = t->start_steps;
        return 2;
    }
    uint32_t et = p->two && !t->half_done ? p->e2_thread : p->e1_thread;
    uint64_t es = p->two && !t->half_done ? p->e2_steps : p->e1_steps;
    if (UNLIKELY(es && r->thr[et].steps_done < es)) {
        t->wait_thread = et;
        t->wait_steps = es;
        return 2;
    }
    return 0;
}

/* Thread ti's head waits on (wait_thread, wait_steps): onto its list. */
static void block_on(hl_reader_t *r, uint32_t ti) {
    thr_t *t = &r->thr[ti];
    t->blocked = 1;
    thr_t *w = &r->thr[t->wait_thread];
    t->next_waiter = w->waiters;
    w->waiters = ti + 1;
}

/* Puts thread ti where it belongs: in the heap, on a waiting list, or nowhere. */
static int place(hl_reader_t *r, uint32_t ti) {
    thr_t *t = &r->thr[ti];
    if (t->in_heap || t->blocked) return 0;
    int s = head_state(r, ti);
    if (s == 0) return heap_push(r, ti);
    if (s == 2) block_on(r, ti);
    return 0;
}

/* Thread ui emitted a step: its waiters whose wait is over are placed again. */
static int wake(hl_reader_t *r, uint32_t ui) {
    thr_t *u = &r->thr[ui];
    uint32_t list = u->waiters, keep = 0;
    u->waiters = 0;
    while (list) {
        uint32_t ti = list - 1;
        thr_t *t = &r->thr[ti];
        list = t->next_waiter;
        if (u->steps_done >= t->wait_steps) {
            t->blocked = 0;
            if (place(r, ti)) return -1;
        } else {
            t->next_waiter = keep;
            keep = ti + 1;
        }
    }
    /* place() may have added waiters meanwhile: append what is kept */
    while (keep) {
        uint32_t ti = keep - 1;
        keep = r->thr[ti].next_waiter;
        r->thr[ti].next_waiter = u->waiters;
        u->waiters = ti + 1;
    }
    return 0;
}

/* The rounds read so far close (a block of a later round, END, an error or
 * the end of the file was read): every event decoded so far may merge. */
static void close_rounds(hl_reader_t *r) {
    for (uint32_t i = 0; i < r->n_threads; i++)
        r->thr[i].ready_seq = r->thr[i].events_dec;
}

/* After rounds closed or a block was queued: every thread not in the heap
 * nor waiting. */
static int place_all(hl_reader_t *r) {
    for (uint32_t i = 0; i < r->n_threads; i++)
        if (place(r, i)) return -1;
    return 0;
}

static inline void fill_from(hl_event_t *ev, const live_slot_t *o) {
    ev->has_old = 1;
    ev->old = o->id;
    ev->old_size = o->size;
    ev->old_thread = o->thread;
    ev->old_seq = o->seq;
}

/* The release step of thread t's head p: the old block leaves the map
 * (unless the realloc failed and kept it), into t->stashed. */
static void do_release(hl_reader_t *r, thr_t *t, const pend_t *p) {
    uint64_t a = p->kind == HL_REALLOC ? p->x : p->addr;
    t->stash = 0;
    if (p->kind == HL_REALLOC && !p->addr && p->size != 0) return; /* failed: stays */
    live_slot_t *o = live_find(&r->live, a);
    if (!o) return;
    t->stash = 1;
    t->stashed = *o;
    live_remove(&r->live, o);
}

/* The event step of thread ti's head p, as an event in *ev; 0 when it
 * yields none (a free of an address never seen), -1 out of memory. */
static inline int do_event(hl_reader_t *r, uint32_t ti, thr_t *t, const pend_t *p,
                           hl_event_t *ev) {
    /* every field set one by one (a memset of the struct is a slow rep stos) */
    ev->index = 0;
    ev->kind = p->kind;
    ev->failed = ev->inherited = ev->has_id = ev->has_old = ev->n_after = 0;
    ev->thread = ti;
    ev->stack = p->stack;
    ev->time = p->time > r->last_out ? p->time : r->last_out;
    ev->size = p->size;
    ev->align = ev->id = ev->old = ev->old_size = 0;
    ev->thread_seq = t->events_done;
    ev->old_thread = 0;
    ev->old_seq = 0;
    ev->after[0].thread = ev->after[1].thread = 0; /* not after[0] = after[1]: a load of */
    ev->after[0].steps = ev->after[1].steps = 0;   /* what was just stored stalls */
    if (UNLIKELY(p->e2_steps | p->e1_steps)) {
        if (p->e2_steps) ev->after[ev->n_after++] = (hl_dep_t){p->e2_thread, p->e2_steps};
        if (p->e1_steps) ev->after[ev->n_after++] = (hl_dep_t){p->e1_thread, p->e1_steps};
    }
    uint64_t create = 0;
    switch (p->kind) {
    case HL_FREE: {
        live_slot_t *o = live_find(&r->live, p->addr);
        if (!o) {
            r->unknown_frees++;
            return 0;
        }
        fill_from(ev, o);
        ev->size = o->size;
        live_remove(&r->live, o);
        break;
    }
    case HL_REALLOC_FREE:
        if (!t->stash) {
            r->unknown_frees++;
            return 0;
        }
        fill_from(ev, &t->stashed);
        ev->size = t->stashed.size;
        break;
    case HL_REALLOC:
        if (!p->two) {
            create = p->addr;
        } else if (!p->addr && p->size != 0) { /* failed: the old block stays */
            live_slot_t *o = live_find(&r->live, p->x);
            if (o) fill_from(ev, o);
        } else if (!p->addr) { /* realloc(p, 0) that released p: realloc_free */
            ev->kind = HL_REALLOC_FREE;
            ev->size = 0;
            if (!t->stash) {
                r->unknown_frees++;
                return 0;
            }
            fill_from(ev, &t->stashed);
            ev->size = t->stashed.size;
        } else if (t->stash) {
            fill_from(ev, &t->stashed);
            create = p->addr;
        } else {
            r->unknown_frees++; /* realloc of a block never seen: realloc(NULL, n) */
            create = p->addr;
        }
        break;
    default:
        if (K_ALIGN(p->kind)) ev->align = p->x;
        create = p->addr;
        break;
    }
    if (create) {
        /* a new object; an address already live had its free unrecorded:
         * that object leaves the map as this one takes its slot */
        live_slot_t *o = live_put(&r->mem, &r->live, create);
        if (!o) return -1;
        o->id = r->next_id;
        o->size = p->size;
        o->thread = ti;
        o->seq = t->events_done;
        o->stack = p->stack;
        o->kind = p->kind;
        o->align_log2 = (uint8_t)(ev->align ? __builtin_ctzll(ev->align) : 0);
        ev->has_id = 1;
        ev->id = r->next_id++;
    } else if (!K_RELEASE(ev->kind)) {
        ev->failed = 1;
    }
    r->last_out = ev->time;
    return 1;
}

/* How far ahead in a thread's queue merge_next prefetches the live map's
 * slots (python3's trace: 8 is about where the time per event stops falling;
 * the Rust reader's merge.rs does the same). */
#define PREFETCH_AHEAD 8

/* Merges until an event comes out in *ev (1), nothing more can (0), or -1.
 * The thread that stepped keeps the heap's top while its next head is
 * ready and still the least (a one-thread trace never moves the heap). */
static int merge_next(hl_reader_t *r, hl_event_t *ev) {
    while (r->heap_n) {
        uint32_t ti = r->heap[0].t;
        thr_t *t = &r->thr[ti];
        const pend_t *p = &t->q[t->qh];
        int got = 0;
        /* the map slots of this thread's event PREFETCH_AHEAD on */
        if (t->qh + PREFETCH_AHEAD < t->qn && !t->half_done) {
            const pend_t *f = p + PREFETCH_AHEAD;
            live_prefetch(&r->live, f->addr);
            if (f->kind == HL_REALLOC) live_prefetch(&r->live, f->x);
        }
        if (p->two && !t->half_done) {
            do_release(r, t, p);
            t->half_done = 1;
        } else {
            got = do_event(r, ti, t, p, ev);
            if (UNLIKELY(got < 0))
                return r_fail(r, HL_E_NOMEM, r->pos, "out of memory for the live objects");
            t->qh++;
            t->half_done = 0;
            t->events_done++;
            r->pending--;
        }
        t->steps_done++;
        /* t's new head may be later, blocked or absent */
        int s = head_state(r, ti);
        if (LIKELY(s == 0)) {
            r->heap[0].time = t->q[t->qh].time;
            if (r->heap_n > 1) heap_down(r, 0);
        } else {
            r->heap[0] = r->heap[--r->heap_n];
            if (r->heap_n > 1) heap_down(r, 0);
            t->in_heap = 0;
            if (s == 2) block_on(r, ti);
        }
        if (UNLIKELY(t->waiters) && wake(r, ti))
            return r_fail(r, HL_E_NOMEM, r->pos, "out of memory for the merge");
        if (got) return 1;
    }
    return 0;
}

/* The merge is over (END or end of file) and heads are still waiting:
 * either on steps the trace does not hold (dangling), or on each other (a
 * cycle). Returns the thread of a waiting head and explains it. */
static int leftover(hl_reader_t *r, uint32_t *ti, int *dangling) {
    for (uint32_t i = 0; i < r->n_threads; i++) {
        thr_t *t = &r->thr[i];
        if (t->qh == t->qn) continue;
        *ti = i;
        *dangling = t->blocked && t->wait_steps > r->thr[t->wait_thread].steps_dec;
        return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- INHERITED, END */

static int decode_inherited(hl_reader_t *r, uint64_t at) {
#define IFAIL(...) return r_fail(r, HL_E_MALFORMED, at, "malformed block: INHERITED: " __VA_ARGS__)
    if (r->version < 2) return r_fail(r, HL_E_UNKNOWN_STREAM, at, "unknown stream kind 0x07 (written by a newer heaplab?)");
    if (r->wrote_events || r->inherited || r->handed) IFAIL("%s", "it must come before every EVENTS block, once");
    if (r->n_threads == 0) IFAIL("%s", "thread 0 is not defined");
    cur_t c = {r->raw.p, r->raw.p + r->raw.len, NULL};
    uint64_t n, tm;
    int e;
    if ((e = cur_u(&c, &n, "count")) || (e = cur_u(&c, &tm, "time")))
        IFAIL("%s: %s", c.err, cur_why(e));
    if (n > (uint64_t)(c.end - c.p)) IFAIL("%llu entries in %zu bytes", (unsigned long long)n, (size_t)(c.end - c.p));
    r->evs.len = 0;
    if (buf_reserve(&r->mem, &r->evs, (n ? n : 1) * sizeof(hl_event_t)))
        return r_fail(r, HL_E_NOMEM, at, "out of memory for %llu objects", (unsigned long long)n);
    hl_event_t *evs = (hl_event_t *)r->evs.p;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t k, size, align = 0, addr, stack;
        if ((e = cur_u(&c, &k, "kind")) || (e = cur_u(&c, &size, "size")))
            IFAIL("entry %llu: %s: %s", (unsigned long long)i, c.err, cur_why(e));
        if (k >= HL_KIND_COUNT || hl_kind_is_release((unsigned)k))
            IFAIL("entry %llu: kind %llu creates no object", (unsigned long long)i, (unsigned long long)k);
        if (hl_kind_has_align((unsigned)k) && (e = cur_u(&c, &align, "align")))
            IFAIL("entry %llu: %s: %s", (unsigned long long)i, c.err, cur_why(e));
        if ((e = cur_u(&c, &addr, "address")) || (e = cur_u(&c, &stack, "stack")))
            IFAIL("entry %llu: %s: %s", (unsigned long long)i, c.err, cur_why(e));
        if (!addr) IFAIL("entry %llu: address 0", (unsigned long long)i);
        if (stack > r->n_stacks) IFAIL("entry %llu: stack %llu is not defined", (unsigned long long)i, (unsigned long long)stack);
        if (live_find(&r->live, addr)) IFAIL("entry %llu: address %#llx is already live", (unsigned long long)i, (unsigned long long)addr);
        live_slot_t *o = live_put(&r->mem, &r->live, addr);
        if (!o) return r_fail(r, HL_E_NOMEM, at, "out of memory for the live objects");
        hl_event_t *ev = &evs[i];
        memset(ev, 0, sizeof *ev);
        ev->kind = (uint8_t)k;
        ev->inherited = 1;
        ev->has_id = 1;
        ev->id = r->next_id++;
        ev->size = size;
        ev->align = align;
        ev->stack = (uint32_t)stack;
        ev->time = tm;
        o->id = ev->id;
        o->size = size;
        o->thread = 0;
        o->seq = 0;
        o->stack = (uint32_t)stack;
        o->kind = (uint8_t)k;
        o->align_log2 = (uint8_t)(align ? __builtin_ctzll(align) : 0);
    }
    if (c.p != c.end) IFAIL("%zu bytes after the last entry", (size_t)(c.end - c.p));
    r->inherited = n;
    r->last_out = tm;
    r->ev_i = 0;
    r->ev_n = (size_t)n;
    r->cur_kind = HL_STREAM_INHERITED;
    return 0;
#undef IFAIL
}

static int decode_end(hl_reader_t *r, uint64_t at) {
    cur_t c = {r->raw.p, r->raw.p + r->raw.len, NULL};
    hl_end_t *e = &r->end;
    memset(e, 0, sizeof *e);
    uint64_t rows = 0;
    int seen_reason = 0, seen_events = 0, seen_rows = 0;
    while (c.p < c.end) {
        uint64_t key, x;
        hl_bytes_t v;
        int er = cur_u(&c, &key, "END key");
        if (!er) er = cur_bytes(&c, &v, "END value");
        if (er)
            return r_fail(r, HL_E_MALFORMED, at, "malformed block: END: %s: %s", c.err,
                          cur_why(er));
        if (key < 1 || key > 11) continue;
        if (int_field(v, &x))
            return r_fail(r, HL_E_MALFORMED, at, "malformed block: END: field %llu: not one varint",
                          (unsigned long long)key);
        uint64_t *f[12] = {NULL,          &e->reason,     &e->status, &e->end_ns,
                           &e->events,    &e->objects,    &e->unrecorded,
                           &e->unknown_frees, &e->lost,  &e->waited_ns, &e->inflight, &rows};
        *f[key] = x;
        seen_reason |= key == 1;
        seen_events |= key == 4;
        seen_rows |= key == 11;
    }
    if (!seen_reason || !seen_events || (r->version >= 2 && !seen_rows))
        return r_fail(r, HL_E_MALFORMED, at, "malformed block: END: lacks the required field %s",
                      !seen_reason   ? "reason (key 1)"
                      : !seen_events ? "events (key 4)"
                                     : "row bytes (key 11)");
    if (r->version >= 2 && rows != r->row_bytes)
        return r_fail(r, HL_E_MALFORMED, at,
                      "malformed block: END: END counts %llu bytes of rows, the trace holds %llu",
                      (unsigned long long)rows, (unsigned long long)r->row_bytes);
    /* v2: a thread inside a hook at the end may have counted a row it did
     * not publish; the bytes of rows are exact either way */
    if (e->events != r->decoded && !(r->version >= 2 && e->inflight))
        return r_fail(r, HL_E_MALFORMED, at,
                      "malformed block: END: END counts %llu events, the trace holds %llu",
                      (unsigned long long)e->events, (unsigned long long)r->decoded);
    r->last_was_end = 1;
    r->last_end_reason = e->reason;
    if (r->version >= 2) {
        /* the merge finishes first; END then carries the reader's counts */
        r->end_wait = 1;
        r->err_at = at;
        close_rounds(r);
        return place_all(r) ? r_fail(r, HL_E_NOMEM, at, "out of memory for the merge") : 0;
    }
    r->cur_kind = HL_STREAM_END;
    return 0;
}

static int decode_block(hl_reader_t *r, const bhdr_t *h, uint64_t at) {
    r->last_was_end = 0; /* read_block refused what follows an END that is not an exec's */
    switch (h->kind) {
    case HL_STREAM_META:
        return r_fail(r, HL_E_MALFORMED, at, "malformed block: META: a second META block");
    case HL_STREAM_MODULES:
    case HL_STREAM_STACKS:
    case HL_STREAM_THREADS:
        return check_defs(r, h, at);
    case HL_STREAM_EVENTS:
        if (r->version == 1) return decode_events_v1(r, at);
        if (r->have_round && r->raw.len) {
            /* a later round closes the current one (peek at the round field) */
            cur_t c = {r->raw.p, r->raw.p + r->raw.len, NULL};
            uint64_t th, round;
            if (!cur_u(&c, &th, "") && !cur_u(&c, &round, "") && round > r->round) {
                close_rounds(r); /* before this block's events are queued */
            }
        }
        if (decode_events_v2(r, at)) return -1;
        return place_all(r) ? r_fail(r, HL_E_NOMEM, at, "out of memory for the merge") : 0;
    case HL_STREAM_END:
        return decode_end(r, at);
    case HL_STREAM_INHERITED:
        if (r->version >= 2) return decode_inherited(r, at);
        __attribute__((fallthrough)); /* in v1 it is an unknown stream */
    default:
        if (h->flags & HL_BLOCK_SKIPPABLE) {
            r->skipped_kind = h->kind;
            r->skipped_bytes = h->raw;
            r->cur_kind = -1;
            return 0;
        }
        return r_fail(r, HL_E_UNKNOWN_STREAM, at,
                      "unknown stream kind %#04x (written by a newer heaplab?)", h->kind);
    }
}

/* v2: the merge has nothing more to give; what it leaves decides how the
 * waiting END, error or end of file is reported. Returns 1 when the caller
 * may go on (END handed out next), -1 on error. */
static int settle(hl_reader_t *r) {
    uint32_t ti;
    int dangling;
    while (leftover(r, &ti, &dangling)) {
        thr_t *t = &r->thr[ti];
        if (r->end_wait && dangling && r->end.inflight && t->blocked) {
            /* a thread was inside a hook when END was written: what it held
             * never came; drop that wait and merge on */
            uint32_t wt = t->wait_thread;
            thr_t *w = &r->thr[wt];
            /* unlink ti from wt's waiters */
            uint32_t *pp = &w->waiters;
            while (*pp && *pp != ti + 1)
                pp = &r->thr[*pp - 1].next_waiter;
            if (*pp) *pp = t->next_waiter;
            t->blocked = 0;
            pend_t *p = &t->q[t->qh];
            if (t->steps_done == 0 && t->has_start && t->start_thread == wt)
                t->has_start = 0;
            else if (p->two && !t->half_done)
                p->e2_steps = 0;
            else
                p->e1_steps = 0;
            if (place(r, ti)) return r_fail(r, HL_E_NOMEM, r->pos, "out of memory for the merge");
            return 0; /* merge again */
        }
        if (r->end_wait) {
            uint64_t at = r->err_at;
            r->end_wait = 0;
            if (dangling)
                return r_fail(r, HL_E_MALFORMED, at,
                              "malformed block: END: thread %u event %llu waits for step %llu of "
                              "thread %u, which the trace does not hold",
                              ti, (unsigned long long)t->events_done,
                              (unsigned long long)t->wait_steps, t->wait_thread);
            return r_fail(r, HL_E_MALFORMED, at,
                          "malformed block: END: the edges form a cycle (thread %u event %llu "
                          "waits for step %llu of thread %u)",
                          ti, (unsigned long long)t->events_done, (unsigned long long)t->wait_steps,
                          t->wait_thread);
        }
        break; /* an error or the end of file: what waits is dropped */
    }
    return 1;
}

static __attribute__((noinline)) int next_slow(hl_reader_t *r, hl_item_t *it) {
    for (;;) {
        if (r->failed) return -1;
        switch (r->cur_kind) {
        case 0:
            break;
        case HL_STREAM_MODULES:
        case HL_STREAM_STACKS:
        case HL_STREAM_THREADS:
            if (r->cur < r->cur_end) {
                next_def(r, it);
                return 1;
            }
            r->cur_kind = 0;
            break;
        case HL_STREAM_EVENTS:
        case HL_STREAM_INHERITED:
            if (r->ev_i < r->ev_n) {
                it->kind = HL_ITEM_EVENT;
                it->u.event = ((hl_event_t *)r->evs.p)[r->ev_i++];
                it->u.event.index = r->handed++;
                return 1;
            }
            r->cur_kind = 0;
            break;
        case HL_STREAM_END:
            it->kind = HL_ITEM_END;
            it->u.end = r->end;
            r->cur_kind = 0;
            return 1;
        default: /* skipped */
            it->kind = HL_ITEM_SKIPPED;
            it->u.skipped.kind = r->skipped_kind;
            it->u.skipped.bytes = r->skipped_bytes;
            r->cur_kind = 0;
            return 1;
        }
        if (r->version >= 2) {
            int m = merge_next(r, &it->u.event);
            if (m < 0) return -1;
            if (m) {
                it->kind = HL_ITEM_EVENT;
                it->u.event.index = r->handed++;
                return 1;
            }
            if (r->end_wait || r->err_wait || r->eof_wait) {
                int s = settle(r);
                if (s < 0) return -1;
                if (s == 0) continue;
                if (r->end_wait) {
                    r->end_wait = 0;
                    r->end.events = r->handed;
                    r->end.objects = r->next_id;
                    r->end.unknown_frees = r->unknown_frees;
                    r->cur_kind = HL_STREAM_END;
                    continue;
                }
                if (r->err_wait) {
                    r->failed = 1;
                    r->err.events = r->handed;
                    return -1;
                }
                r->done = 1;
                return r_fail(r, HL_E_CUT_SHORT, r->err_at,
                              "no END block: the recording was cut short");
            }
        }
        if (r->done) return 0;
        uint64_t at = r->pos;
        bhdr_t h;
        int rb = read_block(r, &h);
        if (rb > 0 && decode_block(r, &h, at) == 0) continue;
        if (rb < 0 || r->failed) {
            if (r->version < 2) return -1;
            /* hand out what the good blocks hold, then the error */
            r->failed = 0;
            r->err_wait = 1;
            close_rounds(r);
            if (place_all(r)) return r_fail(r, HL_E_NOMEM, at, "out of memory for the merge");
            continue;
        }
        /* end of file on a block boundary */
        if (r->version >= 2 && !r->last_was_end) {
            r->eof_wait = 1;
            r->err_at = at;
            close_rounds(r);
            if (place_all(r)) return r_fail(r, HL_E_NOMEM, at, "out of memory for the merge");
            continue;
        }
        r->done = 1;
        if (r->last_was_end) return 0;
        return r_fail(r, HL_E_CUT_SHORT, at, "no END block: the recording was cut short");
    }
}

/* The common case first: a version-2 event the merge can place now. */
int hl_reader_next(hl_reader_t *r, hl_item_t *it) {
    if (LIKELY(r->heap_n && !r->cur_kind && !r->failed)) {
        int m = merge_next(r, &it->u.event);
        if (LIKELY(m > 0)) {
            it->kind = HL_ITEM_EVENT;
            it->u.event.index = r->handed++;
            return 1;
        }
        if (m < 0) return -1;
    }
    return next_slow(r, it);
}

/* A live object with its key, as hl_reader_live_each lists them. */
typedef struct live_entry {
    uint64_t key;
    live_slot_t s;
} live_entry_t;

static int live_cmp_id(const void *a, const void *b) {
    const live_entry_t *x = a, *y = b;
    return x->s.id < y->s.id ? -1 : x->s.id > y->s.id;
}

int64_t hl_reader_live_each(hl_reader_t *r, void (*fn)(void *ctx, const hl_live_t *o), void *ctx) {
    size_t n = r->live.n, bytes = (n ? n : 1) * sizeof(live_entry_t);
    live_entry_t *v = r->mem.alloc(r->mem.ctx, bytes);
    if (!v) return -1;
    size_t k = 0;
    for (size_t i = 0; i < r->live.cap && k < n; i++)
        if (r->live.k[i]) v[k++] = (live_entry_t){r->live.k[i], r->live.s[i]};
    /* heapsort-free: qsort does not allocate for arrays of this kind in glibc,
     * but the agent may run this; a shell sort keeps it allocation-free */
    for (size_t gap = k / 2; gap > 0; gap /= 2)
        for (size_t i = gap; i < k; i++)
            for (size_t j = i; j >= gap && live_cmp_id(&v[j - gap], &v[j]) > 0; j -= gap) {
                live_entry_t x = v[j];
                v[j] = v[j - gap];
                v[j - gap] = x;
            }
    for (size_t i = 0; i < k; i++) {
        const live_slot_t *e = &v[i].s;
        hl_live_t o = {r->version >= 2 ? v[i].key : 0, e->id, e->size,
                       hl_kind_has_align(e->kind) ? 1ull << e->align_log2 : 0, e->stack, e->kind};
        fn(ctx, &o);
    }
    r->mem.release(r->mem.ctx, v, bytes);
    return (int64_t)k;
}

void hl_reader_free(hl_reader_t *r) {
    if (!r) return;
    hl_mem_t m = r->mem;
    buf_free(&m, &r->meta_buf);
    buf_free(&m, &r->argv_buf);
    buf_free(&m, &r->stored);
    buf_free(&m, &r->raw);
    buf_free(&m, &r->evs);
    if (r->live.s) {
        m.release(m.ctx, r->live.s, r->live.cap * sizeof(live_slot_t));
        m.release(m.ctx, r->live.k, r->live.cap * sizeof(uint64_t));
    }
    for (size_t i = 0; i < r->thr_cap && r->thr; i++) {
        if (r->thr[i].q) m.release(m.ctx, r->thr[i].q, r->thr[i].qcap * sizeof(pend_t));
        if (r->thr[i].ring)
            m.release(m.ctx, r->thr[i].ring, 2 * HL_ENC_RING * sizeof *r->thr[i].ring);
    }
    if (r->thr) m.release(m.ctx, r->thr, r->thr_cap * sizeof(thr_t));
    if (r->heap) m.release(m.ctx, r->heap, r->heap_cap * sizeof *r->heap);
    if (r->zd) ZSTD_freeDCtx(r->zd);
    m.release(m.ctx, r, sizeof *r);
}

ssize_t hl_fd_read(void *ctx, void *buf, size_t len) {
    return read((int)(intptr_t)ctx, buf, len);
}

int hl_error_format(const hl_error_t *e, char *buf, size_t size) {
    return snprintf(buf, size, "%s: byte %llu: %s (%llu events read before this point)",
                    e->file ? e->file : "-", (unsigned long long)e->offset, e->msg,
                    (unsigned long long)e->events);
}

int hl_error_is_cut_short(const hl_error_t *e) {
    return e->problem == HL_E_CUT_SHORT || e->problem == HL_E_TRUNCATED;
}
