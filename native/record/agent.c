/*
 * agent.c: start-up, configuration, and the ways a process ends or changes:
 * exit, _exit, exec, fork (writer.c does the work under its lock) and fatal
 * signals.
 *
 *   first malloc (or the constructor) -> resolve real functions -> read the
 *   environment -> open the trace, write META -> atfork, on_exit, signals
 *
 *   exit(status)    on_exit handler (registered first, so it runs after the
 *                   program's atexit handlers and destructors): END exit
 *   _exit/_Exit/quick_exit   wrapped: END exit, then the real one
 *   exec*           wrapped: END exec, then the real one; if it fails the
 *                   trace goes on (vfork children are left alone)
 *   fatal signal    handler: the writer drains and writes END signal (at most
 *                   ~2 s), then the default action runs
 *   dlclose         wrapped: the real one, then the stack walker forgets its
 *                   rules and memos (hl_unwind_reset)
 *
 * The handlers installed for SIGTERM, SIGINT, SIGHUP, SIGQUIT and SIGPIPE
 * (only where they were SIG_DFL) are hidden from the program: sigaction and
 * signal report SIG_DFL for them, so a program that installs its own
 * handlers only when it finds the default (python does) behaves as it would
 * without the agent.
 */
#include "agent.h"
#include "hl_unwind.h"

#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <errno.h>
#include <libunwind.h>
#include <link.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

hl_config_t hl_cfg;
uint64_t hl_self_lo, hl_self_len;
int hl_tsc;
uint64_t hl_tsc0, hl_mono0;

static _Atomic int init_state; /* 0 not yet, 1 under way, 2 recording, 3 failed */
static _Atomic int ctor_done;
static char exe_path[4096];

int hl_agent_ctor_done(void) {
    return atomic_load(&ctor_done);
}
const char *hl_agent_exe(void) {
    return exe_path;
}

uint64_t hl_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A (TSC, CLOCK_MONOTONIC) pair for the clock's calibration: the TSC read on
 * both sides of the clock, and the pair taken only when the two are close
 * (else the kernel delayed the read and the time is late for its tick: a
 * few tries); the tick is their midpoint. */
void hl_clock_pair(uint64_t *tsc, uint64_t *ns) {
    for (int i = 0;; i++) {
        uint64_t a = __builtin_ia32_rdtsc(), m = hl_now_ns(), b = __builtin_ia32_rdtsc();
        if (b - a < (1u << 15) || i == 7) { /* ~10 us at 3 GHz */
            *tsc = a + (b - a) / 2;
            *ns = m;
            return;
        }
    }
}

void hl_note(const char *a, const char *b, const char *c) {
    char line[1024];
    size_t n = 0;
    const char *parts[4] = {"heaplab-record: ", a, b, c};
    for (int i = 0; i < 4; i++)
        for (const char *p = parts[i]; p && *p && n < sizeof line - 1; p++)
            line[n++] = *p;
    line[n++] = '\n';
    ssize_t w = write(2, line, n);
    (void)w;
}

/* The TSC is used for time stamps when the CPU says it is invariant and the
 * kernel trusts it as its clocksource (then it is synchronised across CPUs). */
static void choose_clock(void) {
    char buf[4096];
    size_t n = hl_os_read_file("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                               buf, 16);
    int tsc_source = n >= 3 && !memcmp(buf, "tsc", 3);
    n = hl_os_read_file("/proc/cpuinfo", buf, sizeof buf - 1);
    buf[n] = 0;
    int invariant = strstr(buf, " constant_tsc") && strstr(buf, " nonstop_tsc");
    hl_clock_pair(&hl_tsc0, &hl_mono0);
    hl_tsc = tsc_source && invariant && !getenv("HEAPLAB_RECORD_NO_TSC");
}

/* ---------------------------------------------------------------- configuration */

static uint64_t env_num(const char *name, uint64_t def, uint64_t lo, uint64_t hi) {
    const char *v = getenv(name);
    if (!v || !*v) return def;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || x < lo || x > hi) {
        hl_note(
            name,
            ": not a number in the allowed range; using the default (see native/record/README.md)",
            "");
        return def;
    }
    return x;
}

static void opt(char **p, char *end, const char *key, uint64_t v) {
    char num[24];
    hl_fmt_u64(num, v);
    if (*p != hl_cfg.options && *p < end) *(*p)++ = ' ';
    for (const char *s = key; *s && *p < end; s++)
        *(*p)++ = *s;
    if (*p < end) *(*p)++ = '=';
    for (const char *s = num; *s && *p < end; s++)
        *(*p)++ = *s;
    **p = 0;
}

static void read_config(void) {
    hl_config_t *c = &hl_cfg;
    const char *out = getenv("HEAPLAB_RECORD_OUT");
    if (!out || !*out) out = "heaplab.hltrace";
    size_t n = 0;
    if (out[0] != '/' && getcwd(c->out, sizeof c->out - 2)) {
        n = strlen(c->out);
        c->out[n++] = '/';
    }
    strncpy(c->out + n, out, sizeof c->out - n - 1);
    c->stack_depth = (unsigned)env_num("HEAPLAB_RECORD_STACK_DEPTH", 8, 0, HL_MAX_DEPTH);
    c->free_stacks = (int)env_num("HEAPLAB_RECORD_FREE_STACKS", 0, 0, 1);
    c->free_walk = c->free_stacks && c->stack_depth;
    c->zstd_level = (int)env_num("HEAPLAB_RECORD_COMPRESS", 1, 0, 19);
    c->block_events =
        (uint32_t)env_num("HEAPLAB_RECORD_BLOCK_EVENTS", 65536, 1, HL_MAX_BLOCK_EVENTS / 2);
    c->flush_ns = env_num("HEAPLAB_RECORD_FLUSH_MS", 200, 1, 3600000) * 1000000u;
    c->follow_forks = (int)env_num("HEAPLAB_RECORD_FOLLOW_FORKS", 1, 0, 1);
    /* chunks a thread may hold before it waits, and all threads together */
    uint64_t kb = env_num("HEAPLAB_RECORD_RING_KB", 8192, 128, 1 << 22);
    uint64_t mb = env_num("HEAPLAB_RECORD_RING_TOTAL_MB", 256, 1, 1 << 20);
    c->thread_cap = (size_t)(kb << 10);
    c->total_cap = (size_t)(mb << 20);
    if (c->total_cap < 2 * (size_t)HL_CHUNK_BYTES) c->total_cap = 2 * HL_CHUNK_BYTES;
    c->verbose = (int)env_num("HEAPLAB_RECORD_VERBOSE", 0, 0, 1);
    char *p = c->options, *end = c->options + sizeof c->options - 1;
    opt(&p, end, "stack_depth", c->stack_depth);
    opt(&p, end, "free_stacks", (uint64_t)c->free_stacks);
    opt(&p, end, "compress", (uint64_t)c->zstd_level);
    opt(&p, end, "block_events", c->block_events);
    opt(&p, end, "flush_ms", c->flush_ns / 1000000u);
    opt(&p, end, "follow_forks", (uint64_t)c->follow_forks);
    opt(&p, end, "ring_kb", kb);
    opt(&p, end, "ring_total_mb", mb);
}

/* The text of this library, so that stacks start at the program's frame. */
static int self_cb(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    uint64_t a = (uint64_t)(uintptr_t)arg, lo = UINT64_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uint64_t s = info->dlpi_addr + ph->p_vaddr, e = s + ph->p_memsz;
        if (s < lo) lo = s;
        if (e > hi) hi = e;
    }
    if (a < lo || a >= hi) return 0;
    hl_self_lo = lo;
    hl_self_len = hi - lo;
    return 1;
}

void hl_agent_meta(hl_meta_t *m, hl_bytes_t *argv, size_t max_argv, char *buf, size_t bufsize) {
    memset(m, 0, sizeof *m);
    m->pid = (uint64_t)getpid();
    m->has_ppid = 1;
    m->ppid = (uint64_t)getppid();
    size_t n = hl_os_read_file("/proc/self/cmdline", buf, bufsize);
    size_t argc = 0, start = 0;
    for (size_t i = 0; i < n && argc < max_argv; i++) {
        if (buf[i]) continue;
        argv[argc++] = (hl_bytes_t){(const uint8_t *)buf + start, i - start};
        start = i + 1;
    }
    m->argv = argv;
    m->argc = argc;
    m->start_ns = hl_os_realtime_ns();
    m->pointer_size = sizeof(void *);
    m->endian = __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__;
    m->time_unit_ns = 1; /* version 2: times are nanoseconds (docs/trace-format.md, "Time") */
    m->stack_depth = hl_cfg.stack_depth;
    m->recorder = (hl_bytes_t){(const uint8_t *)HL_RECORDER, strlen(HL_RECORDER)};
    m->executable = (hl_bytes_t){(const uint8_t *)exe_path, strlen(exe_path)};
    m->options = (hl_bytes_t){(const uint8_t *)hl_cfg.options, strlen(hl_cfg.options)};
    m->clock = (hl_bytes_t){(const uint8_t *)"CLOCK_MONOTONIC", 15};
}

/* ---------------------------------------------------------------- fork */

static void atfork_prepare(void) {
    if (atomic_load(&init_state) != 2) return;
    hl_busy_enter();
    hl_fork_prepare();
    hl_busy_leave();
}

static void atfork_parent(void) {
    if (atomic_load(&init_state) != 2) return;
    hl_fork_parent();
}

static void atfork_child(void) {
    if (atomic_load(&init_state) != 2) return;
    hl_busy_enter();
    pid_t parent = hl_pid;
    atomic_store(&hl_fatal_sig, 0);
    atomic_store(&hl_fatal_done, 0);
    hl_fork_child(parent);
    hl_busy_leave();
}

/* ---------------------------------------------------------------- exit */

void hl_agent_exit(int status) {
    if (atomic_load(&init_state) != 2 || atomic_load(&hl_off) || getpid() != hl_pid) return;
    hl_busy_enter();
    if (hl_writer_helping()) {
        /* _exit from a signal handler that interrupted this very thread in
         * the writer: its state is half updated, and nobody else may take it */
        hl_note("exit inside the agent's writer: the trace ends without END; events since its "
                "last block are LOST",
                "", "");
    } else {
        /* whoever holds the lock (the writer thread, or a producer helping)
         * lets go within a pass: wait for it, however long that takes on a
         * busy machine (the writer runs at the program's own priority) */
        pthread_mutex_lock(&hl_wlock);
        if (hl_finish_locked(HL_END_EXIT, (uint64_t)(status & 0xff), 1) && !atomic_load(&hl_fatal_sig))
            hl_note("could not end the trace ", hl_cfg.out, "");
        pthread_mutex_unlock(&hl_wlock);
    }
    hl_busy_leave();
}

static void on_exit_handler(int status, void *arg) {
    (void)arg;
    hl_agent_exit(status);
}

/* ---------------------------------------------------------------- fatal signals */

static const int fatal_always[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
static const int fatal_if_default[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE};
static _Atomic uint64_t ours; /* bit per signal whose handler is ours */

static void fatal_handler(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    int saved = errno;
    int expected = 0;
    if (hl_writer_helping()) {
        /* this thread holds the writer's state half updated: a signal sent to
         * it is taken again when it lets go; a fault there is a bug of ours */
        int sync = si && si->si_code > 0 &&
                   (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE);
        if (!sync) {
            atomic_store(&hl_deferred_sig, sig);
            errno = saved;
            return;
        }
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        hl_real.sigaction(sig, &dfl, NULL);
        errno = saved;
        return;
    }
    hl_busy_enter();
    /* The first fatal signal writes END here (whoever holds the writer's
     * lock lets go within a pass); a second one, in another thread, waits
     * for that. At most ~2 s either way, then the default action. */
    if (atomic_compare_exchange_strong(&hl_fatal_sig, &expected, sig)) {
        int done = 0;
        for (int i = 0; i < 2000 && !done; i++) {
            if (pthread_mutex_trylock(&hl_wlock) == 0) {
                hl_finish_locked(HL_END_SIGNAL, (uint64_t)sig, 1);
                pthread_mutex_unlock(&hl_wlock);
                done = 1;
                break;
            }
            hl_os_sleep_ns(1000000);
        }
        if (!done && !atomic_load(&hl_fatal_done))
            hl_note("fatal signal: the writer did not let go within 2 s; the trace ends without "
                    "END and events since its last block are LOST",
                    "", "");
        atomic_store(&hl_fatal_done, 1);
    } else {
        for (int i = 0; i < 2000 && !atomic_load(&hl_fatal_done); i++)
            hl_os_sleep_ns(1000000);
    }
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    hl_real.sigaction(sig, &dfl, NULL);
    atomic_fetch_and(&ours, ~(1ull << sig));
    raise(sig); /* delivered, with the default action, when this handler returns */
    hl_busy_leave();
    errno = saved;
}

static void install_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fatal_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof fatal_always / sizeof *fatal_always; i++) {
        struct sigaction old;
        if (hl_real.sigaction(fatal_always[i], NULL, &old) || old.sa_handler != SIG_DFL) continue;
        if (hl_real.sigaction(fatal_always[i], &sa, NULL) == 0)
            atomic_fetch_or(&ours, 1ull << fatal_always[i]);
    }
    for (size_t i = 0; i < sizeof fatal_if_default / sizeof *fatal_if_default; i++) {
        struct sigaction old;
        if (hl_real.sigaction(fatal_if_default[i], NULL, &old) || old.sa_handler != SIG_DFL)
            continue;
        if (hl_real.sigaction(fatal_if_default[i], &sa, NULL) == 0)
            atomic_fetch_or(&ours, 1ull << fatal_if_default[i]);
    }
}

HL_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    if (!hl_real.sigaction) hl_hooks_resolve();
    int ours_before = sig > 0 && sig < 64 && (atomic_load(&ours) >> sig & 1);
    int r = hl_real.sigaction(sig, act, old);
    if (r == 0 && ours_before) {
        if (old && (void *)old->sa_sigaction == (void *)fatal_handler) {
            memset(old, 0, sizeof *old);
            old->sa_handler = SIG_DFL;
        }
        if (act) atomic_fetch_and(&ours, ~(1ull << sig)); /* the program's now */
    }
    return r;
}

HL_EXPORT sighandler_t signal(int sig, sighandler_t h) {
    if (!hl_real.signal) hl_hooks_resolve();
    int ours_before = sig > 0 && sig < 64 && (atomic_load(&ours) >> sig & 1);
    sighandler_t r = hl_real.signal(sig, h);
    if (ours_before && r != SIG_ERR) {
        atomic_fetch_and(&ours, ~(1ull << sig));
        if ((void *)r == (void *)fatal_handler) r = SIG_DFL;
    }
    return r;
}

/* ---------------------------------------------------------------- start-up */

/* heaplab record --follow exec|none (HEAPLAB_RECORD_FOLLOW, with
 * HEAPLAB_RECORD_LAUNCHER the pid of heaplab): only the process heaplab
 * launched is recorded, through its execs ("exec"), or its first program
 * alone ("none": a later image finds OUT already written). "fork" (or
 * unset): every process. */
static int followed(void) {
    const char *f = getenv("HEAPLAB_RECORD_FOLLOW");
    if (!f || !*f || !strcmp(f, "fork")) return 1;
    uint64_t launcher = env_num("HEAPLAB_RECORD_LAUNCHER", 0, 0, UINT64_MAX);
    if (launcher && (uint64_t)getppid() != launcher) return 0;
    struct stat st;
    if (!strcmp(f, "none") && stat(hl_cfg.out, &st) == 0 && st.st_size > 0) return 0;
    return 1;
}

static void init(void) {
    hl_pid = getpid();
    read_config();
    if (!followed()) {
        atomic_store(&hl_off, 1);
        atomic_store(&init_state, 3);
        return;
    }
    choose_clock();
    hl_os_readlink("/proc/self/exe", exe_path, sizeof exe_path);
    dl_iterate_phdr(self_cb, (void *)(uintptr_t)&init);
    unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
    hl_unwind_init(); /* HEAPLAB_UNWIND: fast (default) or libunwind */
    hl_threads_init();
    if (hl_writer_init()) {
        atomic_store(&hl_off, 1);
        atomic_store(&init_state, 3);
        return;
    }
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    on_exit(on_exit_handler, NULL);
    install_signals();
    atomic_store(&init_state, 2);
}

int hl_agent_ready(void) {
    int s = atomic_load_explicit(&init_state, memory_order_acquire);
    if (HL_LIKELY(s == 2)) return !atomic_load_explicit(&hl_off, memory_order_relaxed);
    if (s != 0) return 0;
    if (!atomic_compare_exchange_strong(&init_state, &s, 1)) return 0;
    hl_busy_enter();
    init();
    hl_busy_leave();
    return atomic_load(&init_state) == 2;
}

__attribute__((constructor)) static void agent_ctor(void) {
    hl_hooks_resolve();
    atomic_store(&ctor_done, 1);
    if (hl_agent_ready()) hl_writer_ensure_running();
}

/* ---------------------------------------------------------------- exec and exit wrappers */

extern char **environ;

static int exec_begin(void) {
    if (!hl_real.execve) hl_hooks_resolve();
    /* in a vfork child (another pid, no atfork handler ran) touch nothing */
    if (atomic_load(&init_state) != 2 || atomic_load(&hl_off) || getpid() != hl_pid) return 0;
    hl_busy_enter();
    hl_exec_prepare();
    hl_busy_leave();
    return 1;
}

static void exec_end(int began) {
    int e = errno;
    if (began) hl_exec_failed();
    errno = e;
}

/* A module that dlclose unloaded may be followed by another at the same
 * addresses: the stack walker forgets its cached rules and its memos of
 * walks (hl_unwind_reset), which it reads again from the new module's
 * .eh_frame as frames meet it. */
HL_EXPORT int dlclose(void *handle) {
    if (!hl_real.dlclose) hl_hooks_resolve();
    int r = hl_real.dlclose(handle);
    if (r == 0) hl_unwind_reset();
    return r;
}

HL_EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
    int b = exec_begin();
    int r = hl_real.execve(path, argv, envp);
    exec_end(b);
    return r;
}

HL_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
    int b = exec_begin();
    int r = hl_real.execvpe(file, argv, envp);
    exec_end(b);
    return r;
}

HL_EXPORT int fexecve(int fd, char *const argv[], char *const envp[]) {
    int b = exec_begin();
    int r = hl_real.fexecve(fd, argv, envp);
    exec_end(b);
    return r;
}

HL_EXPORT int execv(const char *path, char *const argv[]) {
    return execve(path, argv, environ);
}
HL_EXPORT int execvp(const char *file, char *const argv[]) {
    return execvpe(file, argv, environ);
}

/* execl, execle, execlp: the arguments into an array on the stack */
#define COLLECT_ARGS(first, ap, argv, n)                                                           \
    size_t n = 1;                                                                                  \
    va_start(ap, first);                                                                           \
    while (va_arg(ap, char *))                                                                     \
        n++;                                                                                       \
    va_end(ap);                                                                                    \
    char *argv[n + 1];                                                                             \
    argv[0] = (char *)first;                                                                       \
    va_start(ap, first);                                                                           \
    for (size_t i_ = 1; i_ <= n; i_++)                                                             \
        argv[i_] = va_arg(ap, char *);

HL_EXPORT int execl(const char *path, const char *arg, ...) {
    va_list ap;
    COLLECT_ARGS(arg, ap, argv, n);
    va_end(ap);
    return execve(path, argv, environ);
}

HL_EXPORT int execlp(const char *file, const char *arg, ...) {
    va_list ap;
    COLLECT_ARGS(arg, ap, argv, n);
    va_end(ap);
    return execvpe(file, argv, environ);
}

HL_EXPORT int execle(const char *path, const char *arg, ...) {
    va_list ap;
    COLLECT_ARGS(arg, ap, argv, n);
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return execve(path, argv, envp);
}

HL_EXPORT void _exit(int status) {
    if (!hl_real._exit) hl_hooks_resolve();
    hl_agent_exit(status);
    hl_real._exit(status);
}

HL_EXPORT void _Exit(int status) {
    if (!hl_real._Exit) hl_hooks_resolve();
    hl_agent_exit(status);
    hl_real._Exit(status);
}

HL_EXPORT void quick_exit(int status) {
    if (!hl_real.quick_exit) hl_hooks_resolve();
    hl_agent_exit(status);
    hl_real.quick_exit(status);
}
