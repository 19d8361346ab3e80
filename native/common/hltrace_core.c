/*
 * hltrace_core.c: what the trace writer and reader share: the names of
 * kinds, streams and END reasons, the mmap allocator, the zstd allocator
 * glue, CRC-32C (SSE4.2 when the CPU has it, else slicing-by-8 tables) and
 * varints. Nothing here allocates through malloc or keeps state beyond the
 * CRC tables, which are filled once, idempotently.
 */
#define ZSTD_STATIC_LINKING_ONLY
#include "hltrace_int.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <zstd.h>

const uint8_t hl_file_magic[8] = {'H', 'L', 'T', 'R', 'A', 'C', 'E', 0};
const uint8_t hl_block_magic[4] = {'H', 'L', 'B', 'K'};

/* ---------------------------------------------------------------- names */

static const char *const KIND_NAMES[HL_KIND_COUNT] = {
    "malloc",        "calloc", "realloc", "memalign", "posix_memalign",
    "aligned_alloc", "valloc", "pvalloc", "free",     "realloc_free",
};

/* Per kind: bit 0 releases only, bit 1 carries an alignment. */
const uint8_t hl_kind_props[16] = {0, 0, 0, 2, 2, 2, 2, 2, 1, 1};

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
    case HL_STREAM_INHERITED:
        return "INHERITED";
    case HL_STREAM_REFS:
        return "REFS";
    case HL_STREAM_SP:
        return "SP";
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
void *hl_zstd_alloc(void *opaque, size_t size) {
    const hl_mem_t *m = opaque;
    uint8_t *p = m->alloc(m->ctx, size + 16);
    if (!p) return NULL;
    memcpy(p, &(size_t){size + 16}, sizeof(size_t));
    return p + 16;
}

void hl_zstd_free(void *opaque, void *addr) {
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

size_t hl_varint_put(uint8_t *out, uint64_t v) {
    return hl_vput(out, v);
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

