/*
 * hltrace-selftest: the C trace code against itself and against a model.
 * Not a benchmark.
 *
 *  1. CRC-32C check value and chaining; varint edges and overlong rejection.
 *  2. Round trips: seeded random workloads (every kind, failures, inherited
 *     objects, realloc(NULL), several threads and stacks) written with
 *     several block sizes, stored and zstd, read back and compared field by
 *     field with what the model expects.
 *  3. Every prefix of a trace reads as "cut short" or "truncated", never
 *     more events than the complete blocks hold, never a crash.
 *  4. Every single-bit flip of a trace is reported as an error.
 *  5. Memory: the reader's peak memory on a long trace with few live objects
 *     stays far below the file's decoded size; nothing leaks.
 */
#include "hltrace.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

/* ---- memory that counts */
static size_t mem_now, mem_peak, mem_allocs, mem_releases;
static void *t_alloc(void *ctx, size_t n) {
    (void)ctx;
    mem_now += n;
    if (mem_now > mem_peak) mem_peak = mem_now;
    mem_allocs++;
    return malloc(n);
}
static void t_release(void *ctx, void *p, size_t n) {
    (void)ctx;
    mem_now -= n;
    mem_releases++;
    free(p);
}
static const hl_mem_t tmem = {t_alloc, t_release, NULL};

/* ---- an in-memory file */
typedef struct mfile {
    uint8_t *p;
    size_t len, cap, rpos, limit;
} mfile_t;
static int m_write(void *ctx, const void *buf, size_t n) {
    mfile_t *f = ctx;
    if (f->len + n > f->cap) {
        f->cap = (f->len + n) * 2;
        f->p = realloc(f->p, f->cap);
    }
    memcpy(f->p + f->len, buf, n);
    f->len += n;
    return 0;
}
static ssize_t m_read(void *ctx, void *buf, size_t n) {
    mfile_t *f = ctx;
    size_t end = f->limit ? f->limit : f->len;
    size_t k = end - f->rpos < n ? end - f->rpos : n;
    if (k > 7) k = k / 2 + 1; /* short reads, to exercise read_full */
    memcpy(buf, f->p + f->rpos, k);
    f->rpos += k;
    return (ssize_t)k;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void test_codec_helpers(void) {
    CHECK(hl_crc32c(0, "123456789", 9) == 0xE3069283u, "crc32c check value %08x",
          hl_crc32c(0, "123456789", 9));
    uint8_t buf[1000];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)rnd();
    for (size_t cut = 0; cut <= sizeof buf; cut += 37)
        CHECK(hl_crc32c(hl_crc32c(0, buf, cut), buf + cut, sizeof buf - cut) ==
                  hl_crc32c(0, buf, sizeof buf),
              "crc chaining at %zu", cut);
    const uint64_t vals[] = {0,         1, 127, 128, 255, 16383, 16384, UINT32_MAX, UINT64_MAX - 1,
                             UINT64_MAX};
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
        uint8_t b[10];
        size_t n = hl_varint_put(b, vals[i]);
        const uint8_t *p = b;
        uint64_t v;
        CHECK(hl_varint_get(&p, b + n, &v) == 0 && v == vals[i] && p == b + n, "varint %" PRIu64,
              vals[i]);
        p = b;
        CHECK(n == 1 || hl_varint_get(&p, b + n - 1, &v) == -1, "truncated varint %" PRIu64,
              vals[i]);
    }
    uint8_t eleven[11];
    memset(eleven, 0x80, 10);
    eleven[10] = 1;
    const uint8_t *p = eleven;
    uint64_t v;
    CHECK(hl_varint_get(&p, eleven + 11, &v) == -2, "11-byte varint accepted");
    uint8_t big[10];
    memset(big, 0xff, 9);
    big[9] = 2;
    p = big;
    CHECK(hl_varint_get(&p, big + 10, &v) == -2, "65-bit varint accepted");
}

/* ---- round trips against a model */
#define NLIVE 4096
typedef struct model {
    uint64_t live_id[NLIVE], live_size[NLIVE];
    int nlive;
} model_t;

typedef struct expect {
    hl_event_t *ev;
    size_t n, cap;
} expect_t;

static void push(expect_t *x, const hl_event_t *e) {
    if (x->n == x->cap) {
        x->cap = x->cap ? x->cap * 2 : 1024;
        x->ev = realloc(x->ev, x->cap * sizeof *x->ev);
    }
    x->ev[x->n++] = *e;
}

/* Writes a random trace of n events into f; the events as a reader must see them go to x. */
static void gen_trace(mfile_t *f, expect_t *x, uint64_t n, uint32_t block_events, int zstd,
                      int live_cap, hl_end_t *end_out) {
    model_t *m = calloc(1, sizeof *m);
    static const uint8_t a0[] = "prog", a1[] = "arg \"1\"\t\xff";
    hl_bytes_t argv[2] = {{a0, 4}, {a1, sizeof a1 - 1}};
    hl_meta_t meta = {.pid = 77,
                      .has_ppid = 1,
                      .ppid = 1,
                      .argv = argv,
                      .argc = 2,
                      .start_ns = 12345,
                      .pointer_size = 8,
                      .time_unit_ns = 1000,
                      .stack_depth = 4,
                      .recorder = {(const uint8_t *)"selftest", 8},
                      .clock = {(const uint8_t *)"CLOCK_MONOTONIC", 15}};
    hl_writer_opts_t o = {zstd ? 1 : 0, block_events};
    hl_writer_t *w = hl_writer_new(&tmem, m_write, f, &meta, &o);
    CHECK(w != NULL, "writer_new: %s", strerror(errno));
    if (!w) exit(1);
    uint32_t threads = 0, stacks = 0, modules = 0;
    uint64_t time = 0;
    x->n = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (threads == 0 || rnd() % 5000 == 0) {
            int64_t t = hl_writer_thread(w, 1000 + threads, "t", 1);
            CHECK(t == threads, "thread id");
            threads++;
        }
        if (modules == 0 || rnd() % 20000 == 0) {
            int64_t id = hl_writer_module(w, 0x400000 * (modules + 1), 0x1000, "/lib/x.so", 9,
                                          "\x01\x02", 2);
            modules++;
            CHECK(id == modules, "module id");
        }
        if (stacks == 0 || rnd() % 300 == 0) {
            hl_frame_t fr[4];
            unsigned nf = 1 + (unsigned)(rnd() % 4);
            for (unsigned k = 0; k < nf; k++)
                fr[k] = (hl_frame_t){(uint32_t)(rnd() % (modules + 1)), rnd() % 100000};
            CHECK(hl_writer_stack(w, fr, nf) == ++stacks, "stack id");
        }
        hl_event_t e = {0};
        e.thread = (uint32_t)(rnd() % threads);
        e.stack = rnd() % 3 ? (uint32_t)(rnd() % (stacks + 1)) : 0;
        uint64_t r = rnd() % 100;
        /* a time that sometimes runs backwards: the writer raises it */
        uint64_t t = rnd() % 8 ? time + rnd() % 50 : (time > 10 ? time - 10 : 0);
        e.time = t;
        if (t > time) time = t;
        int full = m->nlive >= live_cap || m->nlive >= NLIVE;
        if (m->nlive && (full || r < 40)) {
            int j = (int)(rnd() % (uint64_t)m->nlive);
            e.has_old = 1;
            e.old = m->live_id[j];
            e.old_size = m->live_size[j];
            uint64_t r2 = rnd() % 10;
            if (r2 < 6 || full) {
                e.kind = r2 == 0 ? HL_REALLOC_FREE : HL_FREE;
                e.size = e.old_size;
                m->live_id[j] = m->live_id[--m->nlive];
                m->live_size[j] = m->live_size[m->nlive];
            } else {
                e.kind = HL_REALLOC;
                e.size = rnd() % 5000;
                e.failed = rnd() % 20 == 0;
                if (!e.failed) {
                    m->live_id[j] = m->live_id[--m->nlive];
                    m->live_size[j] = m->live_size[m->nlive];
                }
            }
        } else {
            e.kind = (uint8_t)(rnd() % 8);
            e.size = rnd() % 4 ? rnd() % 1000 : rnd();
            if (hl_kind_has_align(e.kind)) e.align = 1ull << (rnd() % 16);
            e.failed = rnd() % 50 == 0;
            e.inherited = !e.failed && i < 20;
        }
        uint64_t id;
        CHECK(hl_writer_event(w, &e, &id) == 0, "writer_event: %s", hl_writer_error(w));
        if (!hl_kind_is_release(e.kind) && !e.failed) {
            CHECK(id == hl_writer_next_id(w) - 1, "new id");
            e.id = id;
            e.has_id = 1;
            m->live_id[m->nlive] = id;
            m->live_size[m->nlive++] = e.size;
        } else {
            CHECK(id == UINT64_MAX, "no id expected");
        }
        e.time = time;
        e.index = i;
        push(x, &e);
    }
    hl_end_t end = {.reason = HL_END_EXIT, .status = 3, .end_ns = 999, .unrecorded = 5, .unknown_frees = 6};
    CHECK(hl_writer_end(w, &end) == 0, "writer_end");
    end.events = hl_writer_events(w);
    end.objects = hl_writer_next_id(w);
    *end_out = end;
    hl_writer_free(w);
    free(m);
}

static void compare_read(mfile_t *f, const expect_t *x, const hl_end_t *end, const char *what) {
    f->rpos = 0;
    hl_error_t err;
    hl_reader_t *r = hl_reader_new(&tmem, m_read, f, what, &err);
    CHECK(r != NULL, "%s: reader_new: %s", what, err.msg);
    if (!r) return;
    const hl_meta_t *m = hl_reader_meta(r);
    CHECK(m->pid == 77 && m->has_ppid && m->ppid == 1 && m->argc == 2 && m->argv[1].len == 9 &&
              !memcmp(m->argv[1].ptr, "arg \"1\"\t\xff", 9) && m->stack_depth == 4 &&
              m->recorder.len == 8 && !m->executable.ptr && !m->has_parent_pid,
          "%s: meta", what);
    hl_item_t it;
    size_t i = 0;
    int rc, ends = 0;
    uint32_t nstack = 0, nthread = 0, nmod = 0;
    while ((rc = hl_reader_next(r, &it)) == 1) {
        if (it.kind == HL_ITEM_STACK) CHECK(it.u.stack.id == ++nstack, "%s: stack id", what);
        if (it.kind == HL_ITEM_THREAD)
            CHECK(it.u.thread.index == nthread++, "%s: thread index", what);
        if (it.kind == HL_ITEM_MODULE)
            CHECK(it.u.module.id == ++nmod && it.u.module.build_id.len == 2 &&
                      it.u.module.path.len == 9,
                  "%s: module", what);
        if (it.kind == HL_ITEM_END) {
            ends++;
            CHECK(!memcmp(&it.u.end, end, sizeof *end), "%s: end", what);
        }
        if (it.kind != HL_ITEM_EVENT) continue;
        if (i >= x->n) {
            CHECK(0, "%s: more events than written", what);
            break;
        }
        const hl_event_t *a = &it.u.event, *b = &x->ev[i++];
        int same = a->index == b->index && a->kind == b->kind && a->failed == b->failed &&
                   a->inherited == b->inherited && a->has_id == b->has_id &&
                   a->has_old == b->has_old && a->thread == b->thread && a->stack == b->stack &&
                   a->time == b->time && a->size == b->size && a->align == b->align &&
                   (!a->has_id || a->id == b->id) &&
                   (!a->has_old || (a->old == b->old && a->old_size == b->old_size));
        CHECK(same,
              "%s: event %zu differs (kind %u/%u size %" PRIu64 "/%" PRIu64 " time %" PRIu64
              "/%" PRIu64 ")",
              what, i - 1, a->kind, b->kind, a->size, b->size, a->time, b->time);
        if (!same) break;
    }
    CHECK(rc == 0, "%s: reader stopped with %d: %s", what, rc, hl_reader_error(r)->msg);
    CHECK(i == x->n && ends == 1, "%s: %zu of %zu events, %d ends", what, i, x->n, ends);
    hl_reader_free(r);
}

/* Reads a (possibly damaged) trace to its end; returns -1 if it reported an
 * error, else the number of events. */
static long read_all(mfile_t *f, uint64_t *events, hl_error_t *err) {
    f->rpos = 0;
    hl_reader_t *r = hl_reader_new(&tmem, m_read, f, "damaged", err);
    *events = 0;
    if (!r) return -1;
    hl_item_t it;
    int rc;
    while ((rc = hl_reader_next(r, &it)) == 1)
        (*events) += it.kind == HL_ITEM_EVENT;
    if (rc < 0) *err = *hl_reader_error(r);
    hl_reader_free(r);
    return rc < 0 ? -1 : (long)*events;
}

static void test_round_trips(void) {
    const uint32_t blocks[] = {1, 7, 256, 65536};
    for (int z = 0; z < 2; z++) {
        for (size_t b = 0; b < sizeof blocks / sizeof *blocks; b++) {
            mfile_t f = {0};
            expect_t x = {0};
            hl_end_t end;
            char what[64];
            snprintf(what, sizeof what, "round trip zstd=%d block_events=%u", z, blocks[b]);
            gen_trace(&f, &x, blocks[b] == 1 ? 3000 : 40000, blocks[b], z, 300, &end);
            compare_read(&f, &x, &end, what);
            free(f.p);
            free(x.ev);
        }
    }
    CHECK(mem_now == 0 && mem_allocs == mem_releases, "leak: %zu bytes in %zu allocations", mem_now,
          mem_allocs - mem_releases);
}

static void test_damage(void) {
    mfile_t f = {0};
    expect_t x = {0};
    hl_end_t end;
    gen_trace(&f, &x, 120, 16, 0, 50, &end);
    /* block boundaries and the events that precede each */
    size_t bounds[64], nb = 0;
    uint64_t ev_before[64];
    size_t at = HL_FILE_HEADER_LEN;
    uint64_t evs = 0;
    while (at < f.len && nb < 64) {
        bounds[nb] = at;
        ev_before[nb++] = evs;
        uint32_t stored = (uint32_t)f.p[at + 8] | (uint32_t)f.p[at + 9] << 8 |
                          (uint32_t)f.p[at + 10] << 16 | (uint32_t)f.p[at + 11] << 24;
        if (f.p[at + 4] == HL_STREAM_EVENTS) {
            const uint8_t *p = f.p + at + HL_BLOCK_HEADER_LEN;
            uint64_t n;
            hl_varint_get(&p, p + 10, &n);
            evs += n;
        }
        at += HL_BLOCK_HEADER_LEN + stored;
    }
    CHECK(at == f.len && evs == x.n, "block walk");
    for (size_t cut = 0; cut < f.len; cut++) {
        mfile_t g = f;
        g.len = cut;
        uint64_t events;
        hl_error_t err;
        long rc = read_all(&g, &events, &err);
        CHECK(rc < 0, "prefix of %zu bytes read without error", cut);
        /* the events of the complete blocks, no more */
        uint64_t complete = 0;
        for (size_t k = 0; k < nb; k++) {
            size_t block_end = k + 1 < nb ? bounds[k + 1] : f.len;
            if (block_end <= cut) complete = k + 1 < nb ? ev_before[k + 1] : evs;
        }
        if (cut > HL_FILE_HEADER_LEN && rc < 0)
            CHECK(hl_error_is_cut_short(&err) && events == complete && err.events == complete,
                  "prefix %zu: problem %d, %" PRIu64 " events (%" PRIu64 " complete): %s", cut,
                  err.problem, events, complete, err.msg);
    }
    f.limit = 0;
    for (size_t i = 0; i < f.len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            f.p[i] ^= (uint8_t)(1 << bit);
            uint64_t events;
            hl_error_t err;
            long rc = read_all(&f, &events, &err);
            CHECK(rc < 0, "flip of bit %d at byte %zu went unnoticed", bit, i);
            f.p[i] ^= (uint8_t)(1 << bit);
        }
    }
    free(f.p);
    free(x.ev);
}

/* The reader's peak memory must not grow with the length of the trace. */
static size_t reader_peak(uint64_t n, size_t *file_len) {
    mfile_t f = {0};
    expect_t x = {0};
    hl_end_t end;
    gen_trace(&f, &x, n, 65536, 1, 64, &end);
    size_t base = mem_now;
    mem_peak = mem_now;
    compare_read(&f, &x, &end, "memory bound");
    *file_len = f.len;
    free(f.p);
    free(x.ev);
    return mem_peak - base;
}

static void test_memory_bound(void) {
    if (getenv("HLTRACE_SELFTEST_QUICK")) return;
    size_t len1, len4;
    size_t p1 = reader_peak(150000, &len1), p4 = reader_peak(600000, &len4);
    CHECK(p4 <= p1 + p1 / 10 + 65536,
          "reader peak grew with the trace: %zu bytes for 150k events, %zu for 600k", p1, p4);
    printf("hltrace-selftest: reader peak memory %zu bytes for 150k events (%zu-byte file), %zu "
           "for 600k (%zu-byte "
           "file)\n",
           p1, len1, p4, len4);
}

int main(void) {
    test_codec_helpers();
    test_round_trips();
    test_damage();
    test_memory_bound();
    if (failures) {
        fprintf(stderr, "hltrace-selftest: %d failures\n", failures);
        return 1;
    }
    printf("hltrace-selftest: all passed\n");
    return 0;
}
