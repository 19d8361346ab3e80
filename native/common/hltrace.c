/*
 * hltrace.c: trace format v1 (docs/trace-format.md), writer and reader.
 *
 *   writer:  event -> 7 column buffers (ops, threads, times, sizes, aligns,
 *            refs, stacks) -> on block_events / flush / end:
 *            [MODULES][STACKS][THREADS] pending definitions, then
 *            EVENTS = n first_event first_id base_time |len ops|len threads|...
 *            each block: header(24) + payload (zstd if it shrinks)
 *
 *   reader:  header -> stored payload -> crc -> number -> codec -> decode the
 *            whole block, validating it, then hand its items out one by one.
 *
 * A block is all or nothing for the reader: an error anywhere in it is
 * reported before any of its items, with the offset of its header and the
 * count of events from the good blocks before it. That is what the Rust
 * reader does too, so the test vectors' `.err` files hold for both.
 *
 * Nothing here calls malloc; memory comes from the hl_mem_t given at
 * creation. The writer does not format messages (the recording agent runs it
 * inside a malloc hook); the reader uses snprintf for its error text only.
 */
#define ZSTD_STATIC_LINKING_ONLY
#include "hltrace.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>

#define LIKELY(x)   __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

static const uint8_t FILE_MAGIC[8] = {'H', 'L', 'T', 'R', 'A', 'C', 'E', 0};
static const uint8_t BLOCK_MAGIC[4] = {'H', 'L', 'B', 'K'};

/* ---------------------------------------------------------------- names */

static const char *const KIND_NAMES[HL_KIND_COUNT] = {
    "malloc",        "calloc", "realloc", "memalign", "posix_memalign",
    "aligned_alloc", "valloc", "pvalloc", "free",     "realloc_free",
};

/* Per kind: bit 0 releases only, bit 1 carries an alignment. */
static const uint8_t KIND_PROPS[16] = {0, 0, 0, 2, 2, 2, 2, 2, 1, 1};
#define K_RELEASE(k) (KIND_PROPS[(k)&15] & 1)
#define K_ALIGN(k)   (KIND_PROPS[(k)&15] & 2)

const char *hl_kind_name(unsigned kind) {
    return kind < HL_KIND_COUNT ? KIND_NAMES[kind] : NULL;
}
int hl_kind_is_release(unsigned kind) {
    return kind < HL_KIND_COUNT && K_RELEASE(kind);
}
int hl_kind_has_align(unsigned kind) {
    return kind < HL_KIND_COUNT && K_ALIGN(kind) != 0;
}

const char *hl_stream_name(unsigned kind) {
    switch (kind) {
    case HL_STREAM_META:
        return "META";
    case HL_STREAM_MODULES:
        return "MODULES";
    case HL_STREAM_STACKS:
        return "STACKS";
    case HL_STREAM_THREADS:
        return "THREADS";
    case HL_STREAM_EVENTS:
        return "EVENTS";
    case HL_STREAM_END:
        return "END";
    case HL_STREAM_REFS:
        return "REFS";
    default:
        return "unknown";
    }
}

const char *hl_end_reason_name(uint64_t reason) {
    switch (reason) {
    case HL_END_EXIT:
        return "exit";
    case HL_END_EXEC:
        return "exec";
    case HL_END_SIGNAL:
        return "signal";
    case HL_END_CLOSED:
        return "closed";
    default:
        return NULL;
    }
}

/* ---------------------------------------------------------------- memory */

static void *mmap_alloc(void *ctx, size_t size) {
    (void)ctx;
    if (size == 0) size = 1;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void mmap_release(void *ctx, void *p, size_t size) {
    (void)ctx;
    if (p) munmap(p, size ? size : 1);
}

const hl_mem_t hl_mem_mmap = {mmap_alloc, mmap_release, NULL};

/* zstd frees without a size: keep it in a 16-byte prefix. */
static void *zstd_alloc(void *opaque, size_t size) {
    const hl_mem_t *m = opaque;
    uint8_t *p = m->alloc(m->ctx, size + 16);
    if (!p) return NULL;
    memcpy(p, &(size_t){size + 16}, sizeof(size_t));
    return p + 16;
}

static void zstd_free(void *opaque, void *addr) {
    const hl_mem_t *m = opaque;
    if (!addr) return;
    uint8_t *p = (uint8_t *)addr - 16;
    size_t size;
    memcpy(&size, p, sizeof size);
    m->release(m->ctx, p, size);
}

/* ---------------------------------------------------------------- CRC-32C */

static uint32_t crc_table[8][256];
static volatile int crc_table_ready;

static void crc_table_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
    __atomic_store_n(&crc_table_ready, 1, __ATOMIC_RELEASE);
}

static uint32_t crc_soft(uint32_t c, const uint8_t *p, size_t n) {
    if (!__atomic_load_n(&crc_table_ready, __ATOMIC_ACQUIRE)) crc_table_init(); /* idempotent */
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        v ^= c;
        c = crc_table[7][v & 0xff] ^ crc_table[6][(v >> 8) & 0xff] ^
            crc_table[5][(v >> 16) & 0xff] ^ crc_table[4][(v >> 24) & 0xff] ^
            crc_table[3][(v >> 32) & 0xff] ^ crc_table[2][(v >> 40) & 0xff] ^
            crc_table[1][(v >> 48) & 0xff] ^ crc_table[0][v >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
    return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const uint8_t *p, size_t n) {
    uint64_t c64 = c;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = __builtin_ia32_crc32di(c64, v);
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
    while (n--)
        c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}

static int have_sse42(void) {
    static int cached = -1;
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("sse4.2") ? 1 : 0;
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v;
}
#endif

uint32_t hl_crc32c(uint32_t crc, const void *buf, size_t len) {
    uint32_t c = ~crc;
#if defined(__x86_64__)
    if (have_sse42()) return ~crc_hw(c, buf, len);
#endif
    return ~crc_soft(c, buf, len);
}

/* ---------------------------------------------------------------- varints */

static inline size_t varint_put(uint8_t *out, uint64_t v) {
    if (LIKELY(v < 0x80)) {
        out[0] = (uint8_t)v;
        return 1;
    }
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

size_t hl_varint_put(uint8_t *out, uint64_t v) {
    return varint_put(out, v);
}

int hl_varint_get(const uint8_t **pp, const uint8_t *end, uint64_t *out) {
    const uint8_t *p = *pp;
    uint64_t v = 0;
    unsigned shift = 0;
    for (;;) {
        if (p >= end) return -1;
        uint8_t b = *p++;
        if (shift == 63 && b > 1) return -2;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) break;
        shift += 7;
        if (shift > 63) return -2;
    }
    *pp = p;
    *out = v;
    return 0;
}

/* ---------------------------------------------------------------- growable buffers */

typedef struct buf {
    uint8_t *p;
    size_t len, cap;
} buf_t;

static int buf_grow(const hl_mem_t *m, buf_t *b, size_t need) {
    size_t cap = b->cap ? b->cap * 2 : 4096;
    while (cap < need)
        cap *= 2;
    uint8_t *p = m->alloc(m->ctx, cap);
    if (!p) return -1;
    if (b->len) memcpy(p, b->p, b->len);
    if (b->p) m->release(m->ctx, b->p, b->cap);
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int buf_reserve(const hl_mem_t *m, buf_t *b, size_t extra) {
    if (LIKELY(b->len + extra <= b->cap)) return 0;
    return buf_grow(m, b, b->len + extra);
}

static void buf_free(const hl_mem_t *m, buf_t *b) {
    if (b->p) m->release(m->ctx, b->p, b->cap);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* Callers reserve first. */
static inline void put_u(buf_t *b, uint64_t v) {
    b->len += varint_put(b->p + b->len, v);
}

static inline void put_raw(buf_t *b, const void *p, size_t n) {
    if (n) memcpy(b->p + b->len, p, n);
    b->len += n;
}

/* ---------------------------------------------------------------- writer */

struct hl_writer {
    hl_mem_t mem;
    hl_write_fn write;
    void *wctx;
    int zstd_level;
    uint32_t block_events;
    /* definitions waiting for the next events block */
    buf_t pend_mod, pend_stk, pend_thr;
    uint32_t n_modules, n_stacks, n_threads;
    /* the events block being built */
    buf_t col[7]; /* ops threads times sizes aligns refs stacks */
    uint64_t col_n, first_event, first_id, base_time;
    /* totals */
    uint64_t events, next_id, last_time, bytes;
    uint32_t block_no;
    buf_t payload, block;
    ZSTD_CCtx *zc;
    const char *err;
};

enum { C_OPS, C_THREADS, C_TIMES, C_SIZES, C_ALIGNS, C_REFS, C_STACKS };

/* Most bytes one event adds to each column: the columns are sized for a
 * whole block when the writer is made, so appending checks nothing. */
static const uint8_t COL_MAX[7] = {1, 5, 10, 10, 10, 10, 5};

/* Pending definitions past this size go out at once, so no block can reach
 * the 64 MiB limit (the Rust writer never gets there with real traces). */
#define PENDING_DEFS_LIMIT (16u << 20)

static int w_fail(hl_writer_t *w, const char *why, int err) {
    w->err = why;
    errno = err;
    return -1;
}

static int write_block(hl_writer_t *w, uint8_t kind, uint16_t flags, const uint8_t *payload,
                       size_t len, int may_compress) {
    if (len > HL_MAX_BLOCK_LEN) return w_fail(w, "block payload over 64 MiB", EFBIG);
    uint8_t codec = 0;
    size_t stored = len;
    w->block.len = 0;
    if (may_compress && w->zstd_level > 0 && len > 0) {
        size_t bound = ZSTD_compressBound(len);
        if (buf_reserve(&w->mem, &w->block, HL_BLOCK_HEADER_LEN + bound))
            return w_fail(w, "out of memory", ENOMEM);
        if (!w->zc) {
            ZSTD_customMem cm = {zstd_alloc, zstd_free, &w->mem};
            w->zc = ZSTD_createCCtx_advanced(cm);
            if (!w->zc) return w_fail(w, "cannot create a zstd context", ENOMEM);
        }
        size_t z = ZSTD_compressCCtx(w->zc, w->block.p + HL_BLOCK_HEADER_LEN, bound, payload, len,
                                     w->zstd_level);
        if (ZSTD_isError(z)) return w_fail(w, "zstd compression failed", EIO);
        if (z < len) {
            codec = 1;
            stored = z;
        }
    }
    if (buf_reserve(&w->mem, &w->block, HL_BLOCK_HEADER_LEN + stored))
        return w_fail(w, "out of memory", ENOMEM);
    uint8_t *h = w->block.p;
    if (codec == 0 && stored) memcpy(h + HL_BLOCK_HEADER_LEN, payload, stored);
    memcpy(h, BLOCK_MAGIC, 4);
    h[4] = kind;
    h[5] = codec;
    h[6] = (uint8_t)flags;
    h[7] = (uint8_t)(flags >> 8);
    uint32_t le[3] = {(uint32_t)stored, (uint32_t)len, w->block_no};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 4; k++)
            h[8 + 4 * i + k] = (uint8_t)(le[i] >> (8 * k));
    uint32_t crc = hl_crc32c(0, h, 20);
    crc = hl_crc32c(crc, h + HL_BLOCK_HEADER_LEN, stored);
    for (int k = 0; k < 4; k++)
        h[20 + k] = (uint8_t)(crc >> (8 * k));
    if (w->write(w->wctx, h, HL_BLOCK_HEADER_LEN + stored)) return w_fail(w, "write failed", errno);
    w->block_no++;
    w->bytes += HL_BLOCK_HEADER_LEN + stored;
    return 0;
}

static int put_field(hl_writer_t *w, buf_t *b, uint64_t key, const void *v, size_t n) {
    if (buf_reserve(&w->mem, b, 20 + n)) return -1;
    put_u(b, key);
    put_u(b, n);
    put_raw(b, v, n);
    return 0;
}

static int put_field_int(hl_writer_t *w, buf_t *b, uint64_t key, uint64_t v) {
    uint8_t tmp[10];
    return put_field(w, b, key, tmp, hl_varint_put(tmp, v));
}

static int put_field_str(hl_writer_t *w, buf_t *b, uint64_t key, hl_bytes_t s) {
    if (!s.ptr || !s.len) return 0; /* absent and empty are both left out */
    return put_field(w, b, key, s.ptr, s.len);
}

static int encode_meta(hl_writer_t *w, buf_t *b, const hl_meta_t *m) {
    int r = put_field_int(w, b, 1, m->pid);
    if (m->has_ppid) r |= put_field_int(w, b, 2, m->ppid);
    for (size_t i = 0; i < m->argc; i++)
        r |= put_field(w, b, 3, m->argv[i].ptr, m->argv[i].len);
    r |= put_field_int(w, b, 4, m->start_ns);
    r |= put_field_int(w, b, 5, m->pointer_size);
    r |= put_field_int(w, b, 6, m->endian);
    r |= put_field_int(w, b, 7, m->time_unit_ns);
    r |= put_field_int(w, b, 8, m->stack_depth);
    r |= put_field_str(w, b, 9, m->recorder);
    r |= put_field_str(w, b, 10, m->executable);
    r |= put_field_str(w, b, 11, m->options);
    if (m->has_parent_pid) r |= put_field_int(w, b, 12, m->parent_pid);
    r |= put_field_str(w, b, 13, m->clock);
    return r;
}

hl_writer_t *hl_writer_new(const hl_mem_t *mem, hl_write_fn write, void *wctx,
                           const hl_meta_t *meta, const hl_writer_opts_t *opts) {
    uint32_t be = opts && opts->block_events ? opts->block_events : 65536;
    if (!mem || !write || !meta || be > HL_MAX_BLOCK_EVENTS || meta->time_unit_ns == 0) {
        errno = EINVAL;
        return NULL;
    }
    hl_writer_t *w = mem->alloc(mem->ctx, sizeof *w);
    if (!w) {
        errno = ENOMEM;
        return NULL;
    }
    memset(w, 0, sizeof *w);
    w->mem = *mem;
    w->write = write;
    w->wctx = wctx;
    w->zstd_level = opts ? opts->zstd_level : 0;
    w->block_events = be;
    for (int c = 0; c < 7; c++)
        if (buf_reserve(mem, &w->col[c], (size_t)be * COL_MAX[c])) {
            errno = ENOMEM;
            goto fail;
        }

    uint8_t h[HL_FILE_HEADER_LEN] = {0};
    memcpy(h, FILE_MAGIC, 8);
    h[8] = 1;
    h[10] = HL_FILE_HEADER_LEN;
    if (w->write(w->wctx, h, sizeof h)) goto fail;
    w->bytes = sizeof h;
    w->payload.len = 0;
    if (encode_meta(w, &w->payload, meta)) {
        errno = ENOMEM;
        goto fail;
    }
    if (write_block(w, HL_STREAM_META, 0, w->payload.p, w->payload.len, 0)) goto fail;
    return w;
fail : {
    int e = errno;
    hl_writer_free(w);
    errno = e;
    return NULL;
}
}

static int maybe_spill_defs(hl_writer_t *w, buf_t *b, uint8_t kind) {
    if (b->len < PENDING_DEFS_LIMIT) return 0;
    if (write_block(w, kind, 0, b->p, b->len, 1)) return -1;
    b->len = 0;
    return 0;
}

int64_t hl_writer_module(hl_writer_t *w, uint64_t base, uint64_t size, const void *path,
                         size_t path_len, const void *build_id, size_t build_id_len) {
    buf_t *b = &w->pend_mod;
    if (buf_reserve(&w->mem, b, 50 + path_len + build_id_len))
        return w_fail(w, "out of memory", ENOMEM);
    uint32_t id = ++w->n_modules;
    put_u(b, id);
    put_u(b, base);
    put_u(b, size);
    put_u(b, path_len);
    put_raw(b, path, path_len);
    put_u(b, build_id_len);
    put_raw(b, build_id, build_id_len);
    if (maybe_spill_defs(w, b, HL_STREAM_MODULES)) return -1;
    return id;
}

int64_t hl_writer_stack(hl_writer_t *w, const hl_frame_t *frames, unsigned n) {
    if (n == 0 || n > HL_MAX_FRAMES) return w_fail(w, "a stack has 1 to 256 frames", EINVAL);
    for (unsigned i = 0; i < n; i++)
        if (frames[i].module > w->n_modules)
            return w_fail(w, "a frame names an undefined module", EINVAL);
    buf_t *b = &w->pend_stk;
    if (buf_reserve(&w->mem, b, 20 + (size_t)n * 15)) return w_fail(w, "out of memory", ENOMEM);
    uint32_t id = ++w->n_stacks;
    put_u(b, id);
    put_u(b, n);
    for (unsigned i = 0; i < n; i++) {
        put_u(b, frames[i].module);
        put_u(b, frames[i].offset);
    }
    if (maybe_spill_defs(w, b, HL_STREAM_STACKS)) return -1;
    return id;
}

int64_t hl_writer_thread(hl_writer_t *w, uint64_t tid, const void *name, size_t name_len) {
    buf_t *b = &w->pend_thr;
    if (buf_reserve(&w->mem, b, 30 + name_len)) return w_fail(w, "out of memory", ENOMEM);
    uint32_t idx = w->n_threads++;
    put_u(b, idx);
    put_u(b, tid);
    put_u(b, name_len);
    put_raw(b, name, name_len);
    if (maybe_spill_defs(w, b, HL_STREAM_THREADS)) return -1;
    return idx;
}

static int flush_blocks(hl_writer_t *w) {
    static const uint8_t kinds[3] = {HL_STREAM_MODULES, HL_STREAM_STACKS, HL_STREAM_THREADS};
    buf_t *defs[3] = {&w->pend_mod, &w->pend_stk, &w->pend_thr};
    for (int i = 0; i < 3; i++) {
        if (!defs[i]->len) continue;
        if (write_block(w, kinds[i], 0, defs[i]->p, defs[i]->len, 1)) return -1;
        defs[i]->len = 0;
    }
    if (!w->col_n) return 0;
    buf_t *p = &w->payload;
    size_t need = 40;
    for (int c = 0; c < 7; c++)
        need += 10 + w->col[c].len;
    p->len = 0;
    if (buf_reserve(&w->mem, p, need)) return w_fail(w, "out of memory", ENOMEM);
    put_u(p, w->col_n);
    put_u(p, w->first_event);
    put_u(p, w->first_id);
    put_u(p, w->base_time);
    for (int c = 0; c < 7; c++) {
        put_u(p, w->col[c].len);
        put_raw(p, w->col[c].p, w->col[c].len);
    }
    if (write_block(w, HL_STREAM_EVENTS, 0, p->p, p->len, 1)) return -1;
    w->col_n = 0;
    for (int c = 0; c < 7; c++)
        w->col[c].len = 0;
    return 0;
}

int hl_writer_event(hl_writer_t *w, const hl_event_t *ev, uint64_t *new_id) {
    unsigned k = ev->kind;
    if (UNLIKELY(k >= HL_KIND_COUNT)) return w_fail(w, "reserved event kind", EINVAL);
    unsigned release = K_RELEASE(k), align = K_ALIGN(k);
    int old_null = k == HL_REALLOC && !ev->has_old;
    int needs_ref = release || (k == HL_REALLOC && ev->has_old);
    if (UNLIKELY((release && ev->failed) || (ev->inherited && (ev->failed || release))))
        return w_fail(w, "a release cannot fail, and only a successful allocation can be inherited",
                      EINVAL);
    if (UNLIKELY(ev->thread >= w->n_threads)) return w_fail(w, "thread is not defined", EINVAL);
    if (UNLIKELY(ev->stack > w->n_stacks)) return w_fail(w, "stack is not defined", EINVAL);
    if (UNLIKELY(needs_ref && ev->old >= w->next_id))
        return w_fail(w, "the object does not exist", EINVAL);
    if (UNLIKELY(!needs_ref && ev->has_old && k != HL_REALLOC))
        return w_fail(w, "this kind takes no object", EINVAL);

    if (w->col_n == 0) {
        w->first_event = w->events;
        w->first_id = w->next_id;
        w->base_time = w->last_time;
    }
    uint64_t time = ev->time > w->last_time ? ev->time : w->last_time;
    unsigned op = k | (ev->failed ? HL_OP_FAILED : 0) | (old_null ? HL_OP_OLD_NULL : 0) |
                  (ev->stack ? HL_OP_HAS_STACK : 0) | (ev->inherited ? HL_OP_INHERITED : 0);
    buf_t *col = w->col; /* sized for a whole block when the writer was made */
    col[C_OPS].p[col[C_OPS].len++] = (uint8_t)op;
    put_u(&col[C_THREADS], ev->thread);
    put_u(&col[C_TIMES], time - w->last_time);
    if (!release) put_u(&col[C_SIZES], ev->size);
    if (align) put_u(&col[C_ALIGNS], ev->align);
    if (needs_ref) put_u(&col[C_REFS], w->next_id - 1 - ev->old);
    if (ev->stack) put_u(&col[C_STACKS], ev->stack);
    w->col_n++;
    w->last_time = time;
    w->events++;
    uint64_t id = UINT64_MAX;
    if (!release && !ev->failed) id = w->next_id++;
    if (new_id) *new_id = id;
    if (UNLIKELY(w->col_n >= w->block_events)) return flush_blocks(w);
    return 0;
}

int hl_writer_append(hl_writer_t *w, const hl_event_t *evs, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (w->col_n == 0) {
            w->first_event = w->events;
            w->first_id = w->next_id;
            w->base_time = w->last_time;
        }
        /* as many as fit in this block, with the cursors in locals */
        size_t room = w->block_events - w->col_n, end = n - i < room ? n : i + room;
        uint8_t *ops = w->col[C_OPS].p + w->col[C_OPS].len,
                *th = w->col[C_THREADS].p + w->col[C_THREADS].len;
        uint8_t *tm = w->col[C_TIMES].p + w->col[C_TIMES].len,
                *sz = w->col[C_SIZES].p + w->col[C_SIZES].len;
        uint8_t *al = w->col[C_ALIGNS].p + w->col[C_ALIGNS].len,
                *rf = w->col[C_REFS].p + w->col[C_REFS].len;
        uint8_t *st = w->col[C_STACKS].p + w->col[C_STACKS].len;
        uint64_t last = w->last_time, next_id = w->next_id, n_threads = w->n_threads,
                 n_stacks = w->n_stacks;
        const char *bad = NULL;
        size_t j = i;
        for (; j < end; j++) {
            const hl_event_t *ev = &evs[j];
            unsigned k = ev->kind;
            if (UNLIKELY(k >= HL_KIND_COUNT)) {
                bad = "reserved event kind";
                break;
            }
            unsigned release = K_RELEASE(k);
            int needs_ref = release || (k == HL_REALLOC && ev->has_old);
            if (UNLIKELY((release && ev->failed) || (ev->inherited && (ev->failed || release)) ||
                         ev->thread >= n_threads || ev->stack > n_stacks ||
                         (needs_ref && ev->old >= next_id) ||
                         (!needs_ref && ev->has_old && k != HL_REALLOC))) {
                bad = "an event names something undefined, or has impossible flags";
                break;
            }
            uint64_t time = ev->time > last ? ev->time : last;
            *ops++ = (uint8_t)(k | (ev->failed ? HL_OP_FAILED : 0) |
                               (k == HL_REALLOC && !ev->has_old ? HL_OP_OLD_NULL : 0) |
                               (ev->stack ? HL_OP_HAS_STACK : 0) |
                               (ev->inherited ? HL_OP_INHERITED : 0));
            th += varint_put(th, ev->thread);
            tm += varint_put(tm, time - last);
            last = time;
            if (!release) sz += varint_put(sz, ev->size);
            if (K_ALIGN(k)) al += varint_put(al, ev->align);
            if (needs_ref) rf += varint_put(rf, next_id - 1 - ev->old);
            if (ev->stack) st += varint_put(st, ev->stack);
            if (!release && !ev->failed) next_id++;
        }
        w->col[C_OPS].len = (size_t)(ops - w->col[C_OPS].p);
        w->col[C_THREADS].len = (size_t)(th - w->col[C_THREADS].p);
        w->col[C_TIMES].len = (size_t)(tm - w->col[C_TIMES].p);
        w->col[C_SIZES].len = (size_t)(sz - w->col[C_SIZES].p);
        w->col[C_ALIGNS].len = (size_t)(al - w->col[C_ALIGNS].p);
        w->col[C_REFS].len = (size_t)(rf - w->col[C_REFS].p);
        w->col[C_STACKS].len = (size_t)(st - w->col[C_STACKS].p);
        w->col_n += j - i;
        w->events += j - i;
        w->last_time = last;
        w->next_id = next_id;
        i = j;
        if (bad) return w_fail(w, bad, EINVAL);
        if (w->col_n >= w->block_events && flush_blocks(w)) return -1;
    }
    return 0;
}

int hl_writer_flush(hl_writer_t *w) {
    return flush_blocks(w);
}

int hl_writer_end(hl_writer_t *w, const hl_end_t *end) {
    if (flush_blocks(w)) return -1;
    const uint64_t v[7] = {end->reason, end->status,     end->end_ns,       w->events,
                           w->next_id,  end->unrecorded, end->unknown_frees};
    buf_t *p = &w->payload;
    p->len = 0;
    for (int i = 0; i < 7; i++)
        if (put_field_int(w, p, (uint64_t)i + 1, v[i])) return w_fail(w, "out of memory", ENOMEM);
    return write_block(w, HL_STREAM_END, 0, p->p, p->len, 0);
}

int hl_writer_raw_block(hl_writer_t *w, uint8_t kind, uint16_t flags, const void *payload,
                        size_t len) {
    if (flush_blocks(w)) return -1;
    return write_block(w, kind, flags, payload, len, 0);
}

uint64_t hl_writer_events(const hl_writer_t *w) {
    return w->events;
}
uint64_t hl_writer_next_id(const hl_writer_t *w) {
    return w->next_id;
}
uint64_t hl_writer_buffered(const hl_writer_t *w) {
    return w->col_n;
}
uint64_t hl_writer_bytes(const hl_writer_t *w) {
    return w->bytes;
}
uint32_t hl_writer_threads(const hl_writer_t *w) {
    return w->n_threads;
}
const char *hl_writer_error(const hl_writer_t *w) {
    return w->err ? w->err : "no error";
}

void hl_writer_free(hl_writer_t *w) {
    if (!w) return;
    hl_mem_t m = w->mem;
    buf_free(&m, &w->pend_mod);
    buf_free(&m, &w->pend_stk);
    buf_free(&m, &w->pend_thr);
    for (int c = 0; c < 7; c++)
        buf_free(&m, &w->col[c]);
    buf_free(&m, &w->payload);
    buf_free(&m, &w->block);
    if (w->zc) ZSTD_freeCCtx(w->zc);
    m.release(m.ctx, w, sizeof *w);
}

int hl_fd_write(void *ctx, const void *buf, size_t len) {
    int fd = (int)(intptr_t)ctx;
    const uint8_t *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* ---------------------------------------------------------------- reader: live objects */

/* Open addressing, linear probing, backward-shift deletion. key = id + 1, so
 * 0 marks an empty slot. */
typedef struct live_slot {
    uint64_t key, size;
} live_slot_t;

typedef struct live_map {
    live_slot_t *s;
    size_t cap, n; /* cap is 0 or a power of two */
} live_map_t;

static inline size_t live_hash(uint64_t key, size_t cap) {
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

static int live_grow(const hl_mem_t *m, live_map_t *t) {
    size_t cap = t->cap ? t->cap * 2 : 1024;
    live_slot_t *s = m->alloc(m->ctx, cap * sizeof *s);
    if (!s) return -1;
    memset(s, 0, cap * sizeof *s);
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->s[i].key) continue;
        size_t j = live_hash(t->s[i].key, cap);
        while (s[j].key)
            j = (j + 1) & (cap - 1);
        s[j] = t->s[i];
    }
    if (t->s) m->release(m->ctx, t->s, t->cap * sizeof *t->s);
    t->s = s;
    t->cap = cap;
    return 0;
}

static int live_insert(const hl_mem_t *m, live_map_t *t, uint64_t id, uint64_t size) {
    if ((t->n + 1) * 10 > t->cap * 7 && live_grow(m, t)) return -1;
    uint64_t key = id + 1;
    size_t j = live_hash(key, t->cap);
    while (t->s[j].key && t->s[j].key != key)
        j = (j + 1) & (t->cap - 1);
    if (!t->s[j].key) t->n++;
    t->s[j].key = key;
    t->s[j].size = size;
    return 0;
}

static live_slot_t *live_find(live_map_t *t, uint64_t id) {
    if (!t->cap) return NULL;
    uint64_t key = id + 1;
    size_t j = live_hash(key, t->cap);
    while (t->s[j].key) {
        if (t->s[j].key == key) return &t->s[j];
        j = (j + 1) & (t->cap - 1);
    }
    return NULL;
}

static void live_remove(live_map_t *t, live_slot_t *slot) {
    size_t mask = t->cap - 1, i = (size_t)(slot - t->s), j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!t->s[j].key) break;
        size_t home = live_hash(t->s[j].key, t->cap);
        /* move s[j] into the hole at i unless its home lies in (i, j] */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            t->s[i] = t->s[j];
            i = j;
        }
    }
    t->s[i].key = 0;
    t->n--;
}

/* ---------------------------------------------------------------- reader */

struct hl_reader {
    hl_mem_t mem;
    hl_read_fn read;
    void *rctx;
    const char *name;
    uint64_t pos; /* offset of the next block header */
    uint32_t block_no;
    hl_meta_t meta;
    buf_t meta_buf; /* a copy of the META payload the meta strings point into */
    buf_t argv_buf; /* hl_bytes_t[argc] */
    uint32_t n_modules, n_stacks, n_threads;
    int last_was_end, done, failed;
    uint64_t last_end_reason;
    uint64_t decoded; /* events in good blocks read so far */
    uint64_t handed;  /* events handed out */
    uint64_t next_id, time;
    live_map_t live;
    buf_t stored, raw;
    ZSTD_DCtx *zd;
    /* the block whose items are being handed out */
    int cur_kind; /* 0: none */
    const uint8_t *cur, *cur_end;
    buf_t evs; /* hl_event_t[] of an events block */
    size_t ev_i, ev_n;
    hl_end_t end;
    uint8_t skipped_kind;
    uint32_t skipped_bytes;
    hl_frame_t frames[HL_MAX_FRAMES];
    hl_error_t err;
};

__attribute__((format(printf, 4, 5))) static int r_fail(hl_reader_t *r, hl_problem_t p,
                                                        uint64_t offset, const char *fmt, ...) {
    r->failed = 1;
    r->err.problem = p;
    r->err.offset = offset;
    r->err.events = r->decoded;
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
    if (memcmp(hb, BLOCK_MAGIC, 4))
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
            ZSTD_customMem cm = {zstd_alloc, zstd_free, &r->mem};
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

static int cur_u(cur_t *c, uint64_t *v, const char *what) {
    int e = hl_varint_get(&c->p, c->end, v);
    if (e == 0) return 0;
    c->err = what;
    return e;
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
    if (n < 8 || memcmp(h, FILE_MAGIC, 8)) {
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
    if (version != 1) {
        r_fail(r, HL_E_VERSION, 8, "trace format version %u; this reader understands 1", version);
        goto fail;
    }
    if (hlen != HL_FILE_HEADER_LEN || flags != 0) {
        r_fail(r, HL_E_MALFORMED, 10,
               "malformed block: file header size %u / flags %#x; v1 has 16 / 0", hlen, flags);
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
    }
    r->cur = c.p;
    if (r->cur >= r->cur_end) r->cur_kind = 0;
}

static int decode_events(hl_reader_t *r, uint64_t at) {
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
            slot = live_find(&r->live, ev->old);
            if (!slot)
                EVFAIL("%s of object %llu, which is not live", hl_kind_name(k),
                       (unsigned long long)ev->old);
            ev->old_size = slot->size;
        }
        if (op & HL_OP_HAS_STACK) {
            if ((e = cur_u(&col[6], &v, "stack"))) EVFAIL("%s: %s", "stack", cur_why(e));
            if (v == 0 || v > r->n_stacks)
                EVFAIL("stack %llu is not defined", (unsigned long long)v);
            ev->stack = (uint32_t)v;
        }
        if (slot && (release || !ev->failed)) live_remove(&r->live, slot);
        if (!release && !ev->failed) {
            if (live_insert(&r->mem, &r->live, next_id, ev->size))
                return r_fail(r, HL_E_NOMEM, at, "out of memory for the live objects");
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

static int decode_end(hl_reader_t *r, uint64_t at) {
    cur_t c = {r->raw.p, r->raw.p + r->raw.len, NULL};
    hl_end_t *e = &r->end;
    memset(e, 0, sizeof *e);
    while (c.p < c.end) {
        uint64_t key, x;
        hl_bytes_t v;
        int er = cur_u(&c, &key, "END key");
        if (!er) er = cur_bytes(&c, &v, "END value");
        if (er)
            return r_fail(r, HL_E_MALFORMED, at, "malformed block: END: %s: %s", c.err,
                          cur_why(er));
        if (key < 1 || key > 7) continue;
        if (int_field(v, &x))
            return r_fail(r, HL_E_MALFORMED, at, "malformed block: END: field %llu: not one varint",
                          (unsigned long long)key);
        uint64_t *f[8] = {NULL,       &e->reason,  &e->status,     &e->end_ns,
                          &e->events, &e->objects, &e->unrecorded, &e->unknown_frees};
        *f[key] = x;
    }
    if (e->events != r->decoded)
        return r_fail(r, HL_E_MALFORMED, at,
                      "malformed block: END: END counts %llu events, the trace holds %llu",
                      (unsigned long long)e->events, (unsigned long long)r->decoded);
    r->last_was_end = 1;
    r->last_end_reason = e->reason;
    r->cur_kind = HL_STREAM_END;
    return 0;
}

static int decode_block(hl_reader_t *r, const bhdr_t *h, uint64_t at) {
    if (r->last_was_end && r->last_end_reason != HL_END_EXEC)
        return r_fail(r, HL_E_MALFORMED, at, "malformed block: %s: a block follows the END block",
                      hl_stream_name(h->kind));
    r->last_was_end = 0;
    switch (h->kind) {
    case HL_STREAM_META:
        return r_fail(r, HL_E_MALFORMED, at, "malformed block: META: a second META block");
    case HL_STREAM_MODULES:
    case HL_STREAM_STACKS:
    case HL_STREAM_THREADS:
        return check_defs(r, h, at);
    case HL_STREAM_EVENTS:
        return decode_events(r, at);
    case HL_STREAM_END:
        return decode_end(r, at);
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

int hl_reader_next(hl_reader_t *r, hl_item_t *it) {
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
            if (r->ev_i < r->ev_n) {
                it->kind = HL_ITEM_EVENT;
                it->u.event = ((hl_event_t *)r->evs.p)[r->ev_i++];
                r->handed++;
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
        if (r->done) return 0;
        uint64_t at = r->pos;
        bhdr_t h;
        int rb = read_block(r, &h);
        if (rb < 0) return -1;
        if (rb == 0) {
            r->done = 1;
            if (r->last_was_end) return 0;
            return r_fail(r, HL_E_CUT_SHORT, at, "no END block: the recording was cut short");
        }
        if (decode_block(r, &h, at)) return -1;
    }
}

void hl_reader_free(hl_reader_t *r) {
    if (!r) return;
    hl_mem_t m = r->mem;
    buf_free(&m, &r->meta_buf);
    buf_free(&m, &r->argv_buf);
    buf_free(&m, &r->stored);
    buf_free(&m, &r->raw);
    buf_free(&m, &r->evs);
    if (r->live.s) m.release(m.ctx, r->live.s, r->live.cap * sizeof(live_slot_t));
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
