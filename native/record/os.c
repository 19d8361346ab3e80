/*
 * os.c: everything the agent asks of the operating system for its own
 * needs: memory (mmap, never malloc), the trace files, clocks, /proc.
 *
 * Trace file names: the first process of a recording claims OUT (it must be
 * absent or empty); every other process (fork children, programs it execs or
 * spawns) writes OUT.<pid>, or OUT.<pid>.N when that exists (an exec keeps the
 * pid). The claim holds an flock while checking the size and writing the
 * header, so two processes never both take OUT. `heaplab record` points OUT
 * into a private directory it made and moves the traces into place after the
 * run; here every trace is opened O_NOFOLLOW (never written through a
 * symbolic link) and created 0600 (traces hold command lines and paths).
 */
#include "agent.h"
#include "hl_fmt.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

void *hl_os_alloc(size_t size) {
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Pages faulted in at once: cheaper than one fault per page for a table
 * that is about to be written all over (the object map after a resize). */
void *hl_os_alloc_populated(size_t size) {
    void *p =
        mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void hl_os_free(void *p, size_t size) {
    if (p && size) munmap(p, size);
}

void hl_os_discard(void *p, size_t size) {
    if (p && size) madvise(p, size, MADV_DONTNEED);
}

/* The file behind fd, opened again read-only (the agent writes its trace
 * through a write-only descriptor; a fork child reads its parent's back). */
int hl_os_reopen_read(int fd) {
    char path[64] = "/proc/self/fd/";
    hl_fmt_u64(path + strlen(path), (uint64_t)fd);
    return open(path, O_RDONLY | O_CLOEXEC);
}

uint64_t hl_os_file_size(int fd) {
    struct stat st;
    return fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
}

void *hl_os_grow(void *p, size_t old_size, size_t new_size) {
    if (!p) return hl_os_alloc(new_size);
    void *q = mremap(p, old_size, new_size, MREMAP_MAYMOVE);
    return q == MAP_FAILED ? NULL : q;
}

static void *mem_alloc(void *ctx, size_t size) {
    (void)ctx;
    return hl_os_alloc(size ? size : 1);
}

static void mem_release(void *ctx, void *p, size_t size) {
    (void)ctx;
    hl_os_free(p, size ? size : 1);
}

const hl_mem_t hl_os_mem = {mem_alloc, mem_release, NULL};

pid_t hl_os_gettid(void) {
    return (pid_t)syscall(SYS_gettid);
}

uint64_t hl_os_realtime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void hl_os_sleep_ns(uint64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
}

size_t hl_os_read_file(const char *path, char *buf, size_t size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    size_t n = 0;
    while (n < size) {
        ssize_t k = read(fd, buf + n, size - n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        n += (size_t)k;
    }
    close(fd);
    return n;
}

size_t hl_os_readlink(const char *path, char *buf, size_t size) {
    ssize_t n = readlink(path, buf, size - 1);
    if (n < 0) n = 0;
    buf[n] = 0;
    return (size_t)n;
}

size_t hl_fmt_u64(char *out, uint64_t v) {
    size_t n = hl_fmt_u(out, v);
    out[n] = 0;
    return n;
}

void hl_os_thread_name(pid_t tid, char *name, size_t size) {
    name[0] = 0;
    if (tid == hl_os_gettid()) {
        char tmp[17] = {0};
        if (prctl(PR_GET_NAME, tmp, 0, 0, 0) == 0) {
            strncpy(name, tmp, size - 1);
            name[size - 1] = 0;
        }
        return;
    }
    char path[64] = "/proc/self/task/";
    hl_fmt_u64(path + strlen(path), (uint64_t)tid);
    strcat(path, "/comm");
    size_t n = hl_os_read_file(path, name, size - 1);
    while (n && (name[n - 1] == '\n'))
        n--;
    name[n] = 0;
}

int hl_os_thread_alive(pid_t tid) {
    return !(syscall(SYS_tgkill, getpid(), tid, 0) == -1 && errno == ESRCH);
}

/* The trace's descriptor lives high (programs juggle 0..10: shells dup2
 * onto low numbers, some close every descriptor they did not open). Before
 * each write the sink checks that the descriptor is still the file it
 * opened; if the program closed it or put something else there, the sink
 * opens its file again (appending) instead of writing into another file. */
void hl_sink_init(hl_sink_t *s, int fd, const char *path) {
    int high = fcntl(fd, F_DUPFD_CLOEXEC, 600);
    if (high >= 0) {
        close(fd);
        fd = high;
    }
    struct stat st;
    s->fd = fd;
    s->dev = s->ino = 0;
    if (fstat(fd, &st) == 0) s->dev = (uint64_t)st.st_dev, s->ino = (uint64_t)st.st_ino;
    s->path = path;
}

static int sink_check(hl_sink_t *s) {
    struct stat st;
    if (fstat(s->fd, &st) == 0 && (uint64_t)st.st_dev == s->dev && (uint64_t)st.st_ino == s->ino)
        return 0;
    int fd = open(s->path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    int high = fcntl(fd, F_DUPFD_CLOEXEC, 600);
    if (high >= 0) {
        close(fd);
        fd = high;
    }
    if (fstat(fd, &st) || (uint64_t)st.st_dev != s->dev || (uint64_t)st.st_ino != s->ino) {
        close(fd);
        return -1;
    }
    s->fd = fd; /* the old number is the program's now: leave it alone */
    return 0;
}

/* Closes the descriptor if it is still ours (a fork child drops its
 * parent's trace; the program may own that number by now). */
void hl_sink_close(hl_sink_t *s) {
    struct stat st;
    if (s->fd >= 0 && fstat(s->fd, &st) == 0 && (uint64_t)st.st_dev == s->dev &&
        (uint64_t)st.st_ino == s->ino)
        close(s->fd);
    s->fd = -1;
}

int hl_os_write(void *ctx, const void *buf, size_t len) {
    hl_sink_t *s = ctx;
    if (sink_check(s)) {
        errno = EBADF;
        return -1;
    }
    return hl_fd_write((void *)(intptr_t)s->fd, buf, len);
}

/* Opens the file this process records into, and writes its name to
 * path_out. With claim_root, OUT itself is taken when it is absent or empty;
 * the returned descriptor then holds an exclusive flock, which the caller
 * releases after writing the header. Returns the descriptor, or -1. */
int hl_os_open_trace(const char *out, int claim_root, char *path_out, size_t path_size) {
    if (claim_root) {
        int fd = open(out, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) {
            struct stat st;
            while (flock(fd, LOCK_EX) && errno == EINTR) {
            }
            if (fstat(fd, &st) == 0 && st.st_size == 0) {
                strncpy(path_out, out, path_size - 1);
                path_out[path_size - 1] = 0;
                return fd;
            }
            close(fd);
        }
    }
    size_t n = strlen(out);
    if (n + 32 > path_size) return -1;
    memcpy(path_out, out, n);
    path_out[n++] = '.';
    n += hl_fmt_u64(path_out + n, (uint64_t)getpid());
    for (uint64_t k = 0; k < 10000; k++) {
        if (k) {
            path_out[n] = '.';
            hl_fmt_u64(path_out + n + 1, k);
        } else {
            path_out[n] = 0;
        }
        int fd = open(path_out, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) {
            while (flock(fd, LOCK_EX) && errno == EINTR) {
            }
            return fd;
        }
        if (errno != EEXIST) return -1;
    }
    return -1;
}
