/*
 * cache.c: the decoded-ops cache, so that the many runs of a comparison
 * (touch, callgrind, timing, for every allocator) decode a trace once.
 *
 *   DIR/KEY.ops:
 *   | header: "HLOPS\0\0\1", key, the first pass's summary (4096 bytes) | op 0 | op 1 | ... |
 *                                                                       |<-16->|
 *   its size is 4096 + 16 * the summary's events, else it is stale (a
 *   mapped, not copied, chunk was measured and cost more: populating and
 *   replacing 257 pages a chunk took twice the system time of read(2))
 *
 * KEY = fnv1a64(absolute path of the trace, its size, its mtime in ns, the
 * replayer's version), so an edited trace or a new replayer misses the
 * cache.  A writer fills KEY.ops.PID and renames it into place only when the
 * whole trace has been written, so readers never see a partial file.  A run
 * that misses takes an exclusive flock on KEY.ops.lock first and looks
 * again, so that of runs started together one decodes the trace (in its
 * first pass, straight into the cache) and the others wait for it and read
 * the cache, instead of each decoding it; where flock fails, concurrent
 * writers are still harmless (the last rename wins, with identical
 * content).  Runs with --site-hints neither read nor write the cache: it
 * holds no stacks.
 */
#include "rp.h"

#include <limits.h>
#include <string.h>

#define HDR_BYTES 4096
static const char MAGIC[8] = {'H', 'L', 'O', 'P', 'S', 0, 0, 2};

typedef struct hdr {
    char magic[8];
    uint64_t key;
    rp_summary_t s;
} hdr_t;

_Static_assert(sizeof(hdr_t) <= HDR_BYTES, "the header fits its block");

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

int rp_cache_name(const char *dir, const char *trace, const char *version, char *file, size_t len,
                  uint64_t *key) {
    char abs[PATH_MAX];
    uint64_t size, mtime;
    if (rp_file_id(trace, abs, sizeof abs, &size, &mtime) != 0) return -1;
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv(h, abs, strlen(abs) + 1);
    h = fnv(h, &size, sizeof size);
    h = fnv(h, &mtime, sizeof mtime);
    h = fnv(h, version, strlen(version));
    *key = h;
    rp_buf_t b = {file, 0, len};
    rp_puts(&b, dir);
    rp_puts(&b, "/");
    rp_putx(&b, h);
    rp_puts(&b, ".ops");
    if (b.len >= len) return -1;
    file[b.len] = 0;
    return 0;
}

int rp_cache_open(const char *file, uint64_t key, rp_summary_t *s) {
    int fd = rp_open(file);
    if (fd < 0) return -1;
    static char block[HDR_BYTES];
    hdr_t h;
    if (rp_read_full(fd, block, HDR_BYTES) != HDR_BYTES) {
        rp_close(fd);
        return -1;
    }
    memcpy(&h, block, sizeof h);
    if (memcmp(h.magic, MAGIC, 8) || h.key != key ||
        rp_file_size(fd) != HDR_BYTES + h.s.events * sizeof(rp_op_t)) {
        rp_close(fd);
        return -1;
    }
    *s = h.s;
    return fd;
}

/* The directory is made on first use; a failure shows as the caller's. */
static void make_dir(const char *file) {
    char dir[PATH_MAX];
    size_t n = strlen(file);
    while (n && file[n - 1] != '/')
        n--;
    if (n && n < sizeof dir) {
        memcpy(dir, file, n - 1);
        dir[n - 1] = 0;
        rp_mkdir(dir);
    }
}

int rp_cache_begin(const char *file, char *tmp, size_t len) {
    rp_buf_t b = {tmp, 0, len};
    rp_puts(&b, file);
    rp_puts(&b, ".");
    rp_putu(&b, (uint64_t)rp_pid());
    if (b.len >= len) return -1;
    tmp[b.len] = 0;
    make_dir(file);
    return rp_create(tmp);
}

int rp_cache_lock(const char *file) {
    char lock[PATH_MAX + 8];
    rp_buf_t b = {lock, 0, sizeof lock};
    rp_puts(&b, file);
    rp_puts(&b, ".lock");
    if (b.len >= sizeof lock) return -1;
    lock[b.len] = 0;
    make_dir(file);
    return rp_lock(lock);
}

int rp_cache_add(int fd, const rp_op_t *ops, size_t n, uint64_t *off) {
    if (rp_pwrite_all(fd, ops, n * sizeof *ops, HDR_BYTES + *off) != 0) return -1;
    *off += n * sizeof *ops;
    return 0;
}

void rp_cache_commit(int fd, const char *tmp, const char *file, uint64_t key, const rp_summary_t *s,
                     int ok) {
    static char block[HDR_BYTES];
    hdr_t h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, MAGIC, 8);
    h.key = key;
    h.s = *s;
    memcpy(block, &h, sizeof h);
    if (ok) ok = rp_pwrite_all(fd, block, HDR_BYTES, 0) == 0;
    rp_close(fd);
    if (!ok || rp_rename(tmp, file) != 0) rp_remove(tmp);
}
