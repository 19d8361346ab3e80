/*
 * seg_os.c: the segmented allocator's contact with the operating system,
 * apart from memory (which comes from the zoo's platform.c):
 *
 *   - the program's call stack: return addresses from hl_unwind
 *     (native/common/hl_unwind.h: cached CFA rules, libunwind for odd
 *     frames), starting at the frame of the program that called malloc (the
 *     shim's frame pointer gives its return address, stack pointer and rbp),
 *     so that the allocator's own frames are never walked;
 *   - frame keys: a return address turned into the ASLR-stable key of
 *     native/common/heaplab_site.h through a map of the loaded modules
 *     (dl_iterate_phdr; the main program's name is /proc/self/exe's, as the
 *     recorders name it);
 *   - the stack pointer's depth, for the SP predictor: bytes between the
 *     main thread's first stack pointer (__libc_stack_end, rounded as _start
 *     aligns the stack) and the caller's stack pointer, exactly as the
 *     recorder measures it (native/vgtool; other threads: unknown);
 *   - the report at exit (HEAPLAB_SEG_REPORT=PATH: one JSON line appended).
 *
 *   ra (malloc's caller)          module map (sorted by address)
 *   ra0, ra1, ... (hl_unwind) ──▶ lo..hi, bias, fnv1a64(basename) ──▶ key = name ^ (ra - bias) * φ
 *                                 (rebuilt when a frame falls in no module: dlopen)
 *
 * Everything here runs outside the shim's lock (from HL_FRONT_MALLOC), so
 * that libunwind (hl_unwind's fallback) and dl_iterate_phdr may take the
 * loader's lock without a deadlock against a thread that holds it and calls
 * malloc.  A malloc made by them while we walk (there should be none)
 * predicts nothing (seg_tls_t.busy).
 */
#define _GNU_SOURCE
#include "seg.h"
#include "heaplab_site.h"
#include "hl_fmt.h"
#include "hl_unwind.h"

#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#define UNW_LOCAL_ONLY
#include <libunwind.h> /* HEAPLAB_UNWIND=libunwind: hl_unwind hands every walk to it */

extern void *__libc_stack_end;

#define MAX_MODS 512

typedef struct mod {
    uintptr_t lo, hi, bias;
    uint64_t name; /* fnv1a64 of the basename */
} mod_t;

static mod_t mods[MAX_MODS];
static unsigned nmods;
static int building; /* a spin flag: one builder at a time */
static char exe_base[256];
static size_t exe_len;
static int ready = -1;
static unsigned long misses;

static int mod_cb(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    unsigned *n = arg;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t s = info->dlpi_addr + ph->p_vaddr, e = s + ph->p_memsz;
        if (s < lo) lo = s;
        if (e > hi) hi = e;
    }
    if (lo >= hi) return 0;
    if (*n == MAX_MODS) return 0;
    const char *name = info->dlpi_name;
    size_t len = name ? strlen(name) : 0;
    char real[4096];
    if (!len) {
        name = exe_base;
        len = exe_len;
    } else {
        /* The recorder names a module by the file it maps (Valgrind resolves
         * symbolic links: libsqlite3.so.0.8.6), the loader by the name it
         * looked for (libsqlite3.so.0): follow the links, so that the keys
         * agree.  readlink, not realpath, which may allocate. */
        size_t k = len < sizeof real - 1 ? len : sizeof real - 1;
        memcpy(real, name, k);
        real[k] = 0;
        for (int hop = 0; hop < 8; hop++) {
            char t[4096];
            ssize_t m = readlink(real, t, sizeof t - 1);
            if (m <= 0) break;
            t[m] = 0;
            if (t[0] == '/') {
                memcpy(real, t, (size_t)m + 1);
            } else { /* relative to the link's folder */
                char *slash = strrchr(real, '/');
                size_t dir = slash ? (size_t)(slash - real) + 1 : 0;
                if (dir + (size_t)m >= sizeof real) break;
                memcpy(real + dir, t, (size_t)m + 1);
            }
        }
        name = real;
        len = strlen(real);
    }
    mods[*n] = (mod_t){lo, hi, info->dlpi_addr, heaplab_frame_key(name, len, 0)};
    (*n)++;
    return 0;
}

static void build_map(void) {
    if (__atomic_exchange_n(&building, 1, __ATOMIC_ACQUIRE)) return; /* another thread builds */
    if (!exe_len) {
        char path[4096];
        ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
        if (n > 0) {
            path[n] = 0;
            const char *b = strrchr(path, '/');
            b = b ? b + 1 : path;
            exe_len = strlen(b) < sizeof exe_base - 1 ? strlen(b) : sizeof exe_base - 1;
            memcpy(exe_base, b, exe_len);
        }
    }
    unsigned n = 0;
    dl_iterate_phdr(mod_cb, &n);
    /* sort by address (insertion: a few dozen modules) */
    for (unsigned i = 1; i < n; i++) {
        mod_t m = mods[i];
        unsigned j = i;
        while (j > 0 && mods[j - 1].lo > m.lo) {
            mods[j] = mods[j - 1];
            j--;
        }
        mods[j] = m;
    }
    __atomic_store_n(&nmods, n, __ATOMIC_RELEASE);
    __atomic_store_n(&building, 0, __ATOMIC_RELEASE);
}

int hl_seg_os_ready(void) {
    if (__atomic_load_n(&ready, __ATOMIC_ACQUIRE) < 0) {
        build_map();
        unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
        hl_unwind_init();
        __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
    }
    return ready;
}

static const mod_t *module_of(uintptr_t a) {
    unsigned lo = 0, hi = __atomic_load_n(&nmods, __ATOMIC_ACQUIRE);
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (a < mods[mid].lo)
            hi = mid;
        else if (a >= mods[mid].hi)
            lo = mid + 1;
        else
            return &mods[mid];
    }
    return NULL;
}

uint64_t hl_seg_os_key(uintptr_t ra) {
    const mod_t *m = module_of(ra);
    if (!m && __atomic_fetch_add(&misses, 1, __ATOMIC_RELAXED) % 4096 == 0) {
        /* a module loaded since the map was built (dlopen)?  Rebuilt at the
         * first miss and then once per 4096, so that frames in no module
         * (JIT code) do not rebuild it at every allocation. */
        build_map();
        m = module_of(ra);
    }
    if (!m) return heaplab_frame_key("", 0, ra);
    return m->name ^ ((uint64_t)(ra - m->bias) * 0x9E3779B97F4A7C15ull);
}

static _Thread_local int thread_kind; /* 0 unknown, 1 main, 2 another */

uint64_t hl_seg_os_sp_depth(uintptr_t sp) {
    if (!thread_kind) thread_kind = syscall(SYS_gettid) == getpid() ? 1 : 2;
    if (thread_kind != 1 || !__libc_stack_end) return 0;
    /* as the recorder does it (native/vgtool): _start aligns the stack to 16
     * bytes after popping argc, so deeper frames sit at fixed distances from
     * (sp0 + 8) & ~15, whatever the size of the environment */
    uintptr_t top = ((uintptr_t)__libc_stack_end + 8) & ~(uintptr_t)15;
    return sp < top ? (uint64_t)(top - sp) : 0;
}

unsigned hl_seg_os_walk(uintptr_t *ras, unsigned max, uintptr_t ra, uintptr_t cfa,
                        uintptr_t rbp) {
    if (!max) return 0;
    if (hl_seg_os_ready() <= 0) {
        ras[0] = ra;
        return 1;
    }
    int n = hl_unwind_from(ras, NULL, (int)max, ra, cfa, rbp);
    if (n <= 0) { /* an unknown stack: the first frame needs no walk */
        ras[0] = ra;
        n = 1;
    }
    return (unsigned)n;
}

/* ---- the report at exit ---- */

static void __attribute__((destructor)) seg_report_at_exit(void) {
    const char *path = getenv("HEAPLAB_SEG_REPORT");
    if (!path || !*path) return;
    static char line[8192];
    hl_str_t o = hl_str(line, sizeof line);
    hl_str_puts(&o, "{\"pid\":");
    hl_str_u(&o, (uint64_t)getpid());
    hl_str_c(&o, ',');
    size_t n = o.len;
    size_t r = hl_seg_report(line + n, sizeof line - n);
    if (n + r >= sizeof line || r < 2) return;
    /* the report is one object: drop its opening brace, keep the rest */
    memmove(line + n, line + n + 1, r - 1);
    n += r - 1;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    ssize_t w = write(fd, line, n);
    (void)w;
    close(fd);
}
