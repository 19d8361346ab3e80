/*
 * hltrace_writer.c: writes traces (docs/trace-format.md). It runs inside
 * malloc hooks (the recording agent), so it never calls malloc, never
 * formats text and takes no locks: memory from the hl_mem_t, bytes out
 * through the hl_write_fn, errors as static strings (hl_writer_error).
 *
 *   v1:  event -> 7 column buffers (ops, threads, times, sizes, aligns,
 *        refs, stacks) -> on block_events / flush / end:
 *        [MODULES][STACKS][THREADS] pending definitions, then
 *        EVENTS = n first_event first_id base_time |len ops|len threads|...
 *   v2:  the caller hands over one thread's op bytes and encoded rows
 *        (hltrace_enc.h) at a time -> [MODULES][STACKS][THREADS], then
 *        EVENTS = thread round first_event n clock |len ops|len data|
 *   each block: header(24) + payload (zstd if it shrinks), CRC-32C
 *
 * Invariants: ids (modules from 1, stacks from 1, threads from 0, v1
 * objects from 0) are dense and each definition reaches the file before the
 * first EVENTS block that uses it; v1 event time never decreases; v2 rounds
 * never decrease.
 */
#define ZSTD_STATIC_LINKING_ONLY
#include "hltrace_int.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

struct hl_writer {
    hl_mem_t mem;
    unsigned version; /* 1 or 2 */
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
    uint64_t round;     /* v2: the last EVENTS block's round */
    uint64_t inherited; /* v2: entries of the INHERITED block */
    int wrote_events; /* v2: an EVENTS block went out (INHERITED must come first) */
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

/* The zstd context, made on first use, with the level's parameters. For
 * version 2 at level 1 (the recording agent's default), a bigger hash table
 * and longer minimum matches: on its rows (churn, perl; 256 KiB blocks,
 * native/record/README.md "Cost") ~11% fewer instructions a byte than
 * level 1's own parameters and ~3-5% smaller. */
static int zstd_start(hl_writer_t *w) {
    ZSTD_customMem cm = {hl_zstd_alloc, hl_zstd_free, &w->mem};
    w->zc = ZSTD_createCCtx_advanced(cm);
    if (!w->zc) return w_fail(w, "cannot create a zstd context", ENOMEM);
    size_t r = ZSTD_CCtx_setParameter(w->zc, ZSTD_c_compressionLevel, w->zstd_level);
    if (!ZSTD_isError(r) && w->version == 2 && w->zstd_level == 1) {
        r = ZSTD_CCtx_setParameter(w->zc, ZSTD_c_hashLog, 17);
        if (!ZSTD_isError(r)) r = ZSTD_CCtx_setParameter(w->zc, ZSTD_c_minMatch, 7);
    }
    if (ZSTD_isError(r)) return w_fail(w, "cannot set the zstd parameters", EINVAL);
    return 0;
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
        if (!w->zc && zstd_start(w)) return -1;
        size_t z = ZSTD_compress2(w->zc, w->block.p + HL_BLOCK_HEADER_LEN, bound, payload, len);
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
    memcpy(h, hl_block_magic, 4);
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
    return put_field(w, b, key, tmp, hl_vput(tmp, v));
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

static hl_writer_t *writer_new(unsigned version, const hl_mem_t *mem, hl_write_fn write,
                               void *wctx, const hl_meta_t *meta, const hl_writer_opts_t *opts) {
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
    w->version = version;
    w->write = write;
    w->wctx = wctx;
    w->zstd_level = opts ? opts->zstd_level : 0;
    w->block_events = be;
    /* v1 builds its columns here, sized for a whole block; v2 is handed them */
    for (int c = 0; c < 7 && version == 1; c++)
        if (buf_reserve(mem, &w->col[c], (size_t)be * COL_MAX[c])) {
            errno = ENOMEM;
            goto fail;
        }

    uint8_t h[HL_FILE_HEADER_LEN] = {0};
    memcpy(h, hl_file_magic, 8);
    h[8] = (uint8_t)version;
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

hl_writer_t *hl_writer_new(const hl_mem_t *mem, hl_write_fn write, void *wctx,
                           const hl_meta_t *meta, const hl_writer_opts_t *opts) {
    return writer_new(1, mem, write, wctx, meta, opts);
}

hl_writer_t *hl_writer_new_v2(const hl_mem_t *mem, hl_write_fn write, void *wctx,
                              const hl_meta_t *meta, const hl_writer_opts_t *opts) {
    return writer_new(2, mem, write, wctx, meta, opts);
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

int64_t hl_writer_thread_v2(hl_writer_t *w, uint64_t tid, const void *name, size_t name_len,
                            int has_start, uint32_t start_thread, uint64_t start_steps) {
    buf_t *b = &w->pend_thr;
    if (has_start && (start_thread >= w->n_threads || start_steps == 0))
        return w_fail(w, "a thread starts after an undefined thread, or after 0 steps", EINVAL);
    if (buf_reserve(&w->mem, b, 50 + name_len)) return w_fail(w, "out of memory", ENOMEM);
    uint32_t idx = w->n_threads++;
    put_u(b, idx);
    put_u(b, tid);
    put_u(b, name_len);
    put_raw(b, name, name_len);
    if (w->version >= 2) {
        put_u(b, has_start ? (uint64_t)start_thread + 1 : 0);
        if (has_start) put_u(b, start_steps);
    }
    if (maybe_spill_defs(w, b, HL_STREAM_THREADS)) return -1;
    return idx;
}

int64_t hl_writer_thread(hl_writer_t *w, uint64_t tid, const void *name, size_t name_len) {
    return hl_writer_thread_v2(w, tid, name, name_len, 0, 0, 0);
}

static int flush_defs(hl_writer_t *w) {
    static const uint8_t kinds[3] = {HL_STREAM_MODULES, HL_STREAM_STACKS, HL_STREAM_THREADS};
    buf_t *defs[3] = {&w->pend_mod, &w->pend_stk, &w->pend_thr};
    for (int i = 0; i < 3; i++) {
        if (!defs[i]->len) continue;
        if (write_block(w, kinds[i], 0, defs[i]->p, defs[i]->len, 1)) return -1;
        defs[i]->len = 0;
    }
    return 0;
}

static int flush_blocks(hl_writer_t *w) {
    if (flush_defs(w)) return -1;
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
    if (UNLIKELY(w->version != 1)) return w_fail(w, "a version-2 writer takes rows", EINVAL);
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
    if (UNLIKELY(w->version != 1 && n)) return w_fail(w, "a version-2 writer takes rows", EINVAL);
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
            th += hl_vput(th, ev->thread);
            tm += hl_vput(tm, time - last);
            last = time;
            if (!release) sz += hl_vput(sz, ev->size);
            if (K_ALIGN(k)) al += hl_vput(al, ev->align);
            if (needs_ref) rf += hl_vput(rf, next_id - 1 - ev->old);
            if (ev->stack) st += hl_vput(st, ev->stack);
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

int hl_writer_events_v2_segs(hl_writer_t *w, uint32_t thread, uint64_t round, uint64_t first_byte,
                             const hl_clock_t *clock, const hl_bytes_t *segs, size_t n,
                             void (*copied)(void *arg), void *arg) {
    if (UNLIKELY(w->version != 2)) return w_fail(w, "a version-1 writer takes events", EINVAL);
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += segs[i].len;
    if (len == 0 || len > HL_MAX_BLOCK_LEN - 100)
        return w_fail(w, "an events block holds 1 byte to 64 MiB of rows", EINVAL);
    if (round < w->round) return w_fail(w, "rounds never decrease", EINVAL);
    if (flush_defs(w)) return -1;
    if (thread >= w->n_threads) return w_fail(w, "thread is not defined", EINVAL);
    buf_t *p = &w->payload;
    p->len = 0;
    if (buf_reserve(&w->mem, p, 80 + len)) return w_fail(w, "out of memory", ENOMEM);
    put_u(p, thread);
    put_u(p, round);
    put_u(p, first_byte);
    put_u(p, clock->tsc_ref);
    put_u(p, clock->ns_ref);
    put_u(p, clock->mult);
    for (size_t i = 0; i < n; i++)
        if (segs[i].len) put_raw(p, segs[i].ptr, segs[i].len);
    if (copied) copied(arg);
    if (write_block(w, HL_STREAM_EVENTS, 0, p->p, p->len, 1)) return -1;
    w->round = round;
    w->events += len;
    w->wrote_events = 1;
    return 0;
}

int hl_writer_events_v2(hl_writer_t *w, uint32_t thread, uint64_t round, uint64_t first_byte,
                        const hl_clock_t *clock, const uint8_t *rows, size_t len) {
    hl_bytes_t seg = {rows, len};
    return hl_writer_events_v2_segs(w, thread, round, first_byte, clock, &seg, 1, NULL, NULL);
}

int hl_writer_inherited(hl_writer_t *w, uint64_t time_ns, uint64_t n, const uint8_t *entries,
                        size_t len) {
    if (UNLIKELY(w->version != 2)) return w_fail(w, "INHERITED is a version-2 block", EINVAL);
    if (w->wrote_events) return w_fail(w, "INHERITED comes before the first EVENTS block", EINVAL);
    if (flush_defs(w)) return -1;
    buf_t *p = &w->payload;
    p->len = 0;
    if (buf_reserve(&w->mem, p, 30 + len)) return w_fail(w, "out of memory", ENOMEM);
    put_u(p, n);
    put_u(p, time_ns);
    put_raw(p, entries, len);
    if (write_block(w, HL_STREAM_INHERITED, 0, p->p, p->len, 1)) return -1;
    w->inherited += n;
    return 0;
}

int hl_writer_end(hl_writer_t *w, const hl_end_t *end) {
    if (flush_blocks(w)) return -1;
    buf_t *p = &w->payload;
    p->len = 0;
    if (w->version == 1) {
        const uint64_t v[7] = {end->reason, end->status,     end->end_ns,       w->events,
                               w->next_id,  end->unrecorded, end->unknown_frees};
        for (int i = 0; i < 7; i++)
            if (put_field_int(w, p, (uint64_t)i + 1, v[i]))
                return w_fail(w, "out of memory", ENOMEM);
    } else {
        /* objects and unknown frees are the reader's to count in version 2;
         * the rows (key 4, the caller counts them) and their bytes (key 11)
         * check that nothing is missing */
        static const uint8_t keys[9] = {1, 2, 3, 4, 6, 8, 9, 10, 11};
        const uint64_t v[9] = {end->reason,    end->status, end->end_ns,
                               end->events,    end->unrecorded, end->lost,
                               end->waited_ns, end->inflight,   w->events};
        for (int i = 0; i < 9; i++)
            if (put_field_int(w, p, keys[i], v[i])) return w_fail(w, "out of memory", ENOMEM);
    }
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
uint32_t hl_writer_stacks(const hl_writer_t *w) {
    return w->n_stacks;
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

