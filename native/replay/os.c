/*
 * os.c: the only file of the replayer that talks to the OS.
 *
 * Memory is mmap'd pages, never malloc.  The trace reader gets `rp_mem`, an
 * hl_mem_t that keeps every region it hands out mapped after release and
 * hands it out again (smallest cached region that fits, zeroed), so that the
 * second pass over a trace allocates exactly what the first pass left
 * behind.  Every region is written in full when it is first mapped, so it is
 * resident from the first pass on: the replayer's resident memory does not
 * grow while it replays, and "peak RSS minus the baseline" is the
 * allocator's.
 */
#define _GNU_SOURCE
#include "rp.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <linux/perf_event.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

static void die_nomem(size_t bytes) {
    rp_buf_t b;
    char tmp[160];
    b.p = tmp;
    b.len = 0;
    b.cap = sizeof tmp;
    rp_puts(&b, "heaplab-replay: mmap of ");
    rp_putu(&b, bytes);
    rp_puts(&b, " bytes failed: ");
    rp_puts(&b, strerror(errno));
    rp_putc(&b, '\n');
    rp_write_all(2, b.p, b.len);
    _exit(1);
}

static size_t page_round(size_t n) {
    return (n + 4095) & ~(size_t)4095;
}

void *rp_map(size_t bytes) {
    bytes = page_round(bytes ? bytes : 1);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) die_nomem(bytes);
    return p;
}

uint64_t rp_file_size(int fd) {
    struct stat st;
    return fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
}

void rp_unmap(void *p, size_t bytes) {
    if (p) munmap(p, page_round(bytes ? bytes : 1));
}

void *rp_remap(void *p, size_t old_bytes, size_t new_bytes) {
    if (!p) return rp_map(new_bytes);
    void *q =
        mremap(p, page_round(old_bytes ? old_bytes : 1), page_round(new_bytes), MREMAP_MAYMOVE);
    if (q == MAP_FAILED) die_nomem(new_bytes);
    return q;
}

/* ---------------------------------------------------------------- the caching hl_mem_t */

#define CACHE_SLOTS 512
static struct {
    void *p;
    size_t cap;
    int used;
} cache[CACHE_SLOTS];

static void *cache_alloc(void *ctx, size_t size) {
    (void)ctx;
    size_t need = page_round(size ? size : 1);
    int best = -1;
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (cache[i].p && !cache[i].used && cache[i].cap >= need &&
            (best < 0 || cache[i].cap < cache[best].cap))
            best = i;
    if (best >= 0) {
        cache[best].used = 1;
        memset(cache[best].p, 0, need);
        return cache[best].p;
    }
    void *p = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    /* Touch it all now (in the first pass), so that zeroing it on reuse in
     * the second pass does not grow the resident set after the baseline. */
    memset(p, 0, need);
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (!cache[i].p) {
            cache[i].p = p;
            cache[i].cap = need;
            cache[i].used = 1;
            return p;
        }
    return p; /* table full: an uncached region, unmapped at release */
}

static void cache_release(void *ctx, void *p, size_t size) {
    (void)ctx;
    if (!p) return;
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (cache[i].p == p) {
            cache[i].used = 0;
            return;
        }
    munmap(p, page_round(size ? size : 1));
}

const hl_mem_t rp_mem = {cache_alloc, cache_release, NULL};

/* ---------------------------------------------------------------- files, clocks, exit */

uint64_t rp_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int rp_open(const char *path) {
    return open(path, O_RDONLY | O_CLOEXEC);
}
int rp_rewind(int fd) {
    return lseek(fd, 0, SEEK_SET) == 0 ? 0 : -1;
}
void rp_close(int fd) {
    close(fd);
}
int rp_errno(void) {
    return errno;
}
const char *rp_strerror(int err) {
    return strerror(err);
}

void rp_write_all(int fd, const char *buf, size_t len) {
    while (len) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return;
        }
        buf += n;
        len -= (size_t)n;
    }
}

void rp_exit(int code) {
    _exit(code);
}

/* ---------------------------------------------------------------- the ops cache's files */

int rp_file_id(const char *path, char *abs, size_t abs_len, uint64_t *size, uint64_t *mtime_ns) {
    struct stat st;
    if (stat(path, &st) != 0 || !realpath(path, abs)) return -1;
    (void)abs_len; /* realpath writes at most PATH_MAX bytes: abs must hold them */
    *size = (uint64_t)st.st_size;
    *mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
    return 0;
}

int rp_create(const char *path) {
    return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}
int rp_mkdir(const char *path) {
    return mkdir(path, 0755) == 0 || errno == EEXIST ? 0 : -1;
}
int rp_rename(const char *from, const char *to) {
    return rename(from, to);
}
void rp_remove(const char *path) {
    unlink(path);
}
int rp_pid(void) {
    return (int)getpid();
}

int rp_lock(const char *path) {
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return -1;
    while (flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR) {
            close(fd);
            return -1;
        }
    }
    return fd;
}

void rp_unlock(int fd) {
    if (fd >= 0) close(fd); /* closing the last descriptor releases the lock */
}

int rp_pwrite_all(int fd, const void *buf, size_t len, uint64_t off) {
    const char *p = buf;
    while (len) {
        ssize_t n = pwrite(fd, p, len, (off_t)off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += n;
        off += (uint64_t)n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads up to len bytes; fewer only at end of file.  Returns the count or -1. */
ssize_t rp_read_full(int fd, void *buf, size_t len) {
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (n == 0) break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

/* ---------------------------------------------------------------- /proc */

static uint64_t status_field(const char *text, const char *name) {
    const char *s = strstr(text, name);
    if (!s) return 0;
    s += strlen(name);
    while (*s == ' ' || *s == '\t')
        s++;
    uint64_t v = 0;
    while (*s >= '0' && *s <= '9')
        v = v * 10 + (uint64_t)(*s++ - '0');
    return v * 1024; /* kB */
}

void rp_rss(uint64_t *rss, uint64_t *hwm) {
    static char text[8192];
    *rss = *hwm = 0;
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) return;
    text[n] = 0;
    *rss = status_field(text, "VmRSS:");
    *hwm = status_field(text, "VmHWM:");
}

int rp_reset_hwm(void) {
    int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    int ok = write(fd, "5", 1) == 1;
    close(fd);
    return ok;
}

/* ---------------------------------------------------------------- crashes */

static void (*crash_handler)(int);

static void on_signal(int sig) {
    crash_handler(sig);
    signal(sig, SIG_DFL);
    raise(sig);
}

void rp_on_crash(void (*handler)(int)) {
    static char altstack[65536];
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0};
    sigaltstack(&ss, NULL);
    crash_handler = handler;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_ONSTACK | SA_RESETHAND;
    int sigs[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        sigaction(sigs[i], &sa, NULL);
}

const char *rp_signal_name(int sig) {
    switch (sig) {
    case SIGSEGV:
        return "SIGSEGV";
    case SIGBUS:
        return "SIGBUS";
    case SIGABRT:
        return "SIGABRT";
    case SIGFPE:
        return "SIGFPE";
    case SIGILL:
        return "SIGILL";
    default:
        return "a signal";
    }
}

/* ---------------------------------------------------------------- the performance counter */

/* "text" into why, then errno's words and the sysctl that usually decides. */
static void perf_why(char *why, size_t len, const char *text, int err) {
    rp_buf_t b = {why, 0, len - 1};
    rp_puts(&b, text);
    if (err) {
        rp_puts(&b, ": ");
        rp_puts(&b, strerror(err));
    }
    char par[32] = "";
    int fd = open("/proc/sys/kernel/perf_event_paranoid", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, par, sizeof par - 1);
        close(fd);
        par[n > 0 ? n : 0] = 0;
        for (char *c = par; *c; c++)
            if (*c == '\n') *c = 0;
        rp_puts(&b, " (kernel.perf_event_paranoid = ");
        rp_puts(&b, par);
        rp_puts(&b, ")");
    }
    rp_puts(&b, "; count with --count vgcount under valgrind --tool=heaplab-count instead");
    why[b.len < len ? b.len : len - 1] = 0;
}

void *rp_perf_open(char *why, size_t why_len) {
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.type = PERF_TYPE_HARDWARE;
    a.size = sizeof a;
    a.config = PERF_COUNT_HW_INSTRUCTIONS;
    a.exclude_kernel = 1; /* user mode only, as Valgrind counts */
    a.exclude_hv = 1;
    a.pinned = 1; /* always on the PMU while this thread runs, so rdpmc reads it */
    int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
        perf_why(why, why_len, "no hardware instruction counter here: perf_event_open", errno);
        return NULL;
    }
    void *p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        perf_why(why, why_len, "cannot map the counter's page", errno);
        close(fd);
        return NULL;
    }
    const struct perf_event_mmap_page *pg = p;
    if (!pg->cap_user_rdpmc || !pg->index) {
        perf_why(why, why_len,
                 "the kernel does not let user code read the instruction counter with rdpmc "
                 "(cap_user_rdpmc = 0; see /sys/bus/event_source/devices/cpu/rdpmc)",
                 0);
        munmap(p, 4096);
        close(fd);
        return NULL;
    }
    return p; /* fd stays open: the page lives as long as the event */
}

/* ---------------------------------------------------------------- waiting (threads.c) */

void rp_relax(unsigned n) {
    if (n < 64) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        return;
    }
    sched_yield();
}

/* A private futex: sleeps while *word == expected (returns at once if not,
 * or on a wake-up, a signal, or spuriously: the caller re-checks). */
void rp_futex_wait(uint32_t *word, uint32_t expected) {
    int saved = errno;
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
    errno = saved;
}

void rp_futex_wake(uint32_t *word, int n) {
    int saved = errno;
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
    errno = saved;
}

/* CPU time of the whole process (every thread), for the timed region. */
uint64_t rp_cpu_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)) return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------- which object defines a symbol */

/* The base address of the object whose definition of `name` this process's
 * calls bind to (the global lookup order: the executable, LD_PRELOAD, then
 * libc ...); NULL if none.  dlsym and dladdr succeed here (the names asked
 * are libc's, always defined), so neither takes its malloc'ing error path. */
const void *rp_os_definer(const char *name) {
    void *f = dlsym(RTLD_DEFAULT, name);
    Dl_info di;
    if (!f || !dladdr(f, &di)) return NULL;
    return di.dli_fbase;
}

size_t rp_os_page_size(void) {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}
