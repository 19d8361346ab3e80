/*
 * threads.c: thread states, their indices in the trace, and how a thread's
 * stream is tied to the thread that created it.
 *
 *   first hooked call of a thread -> hl_thread_create: a state (recycled or
 *     mmap'd, with its stack cache), the next index, what the writer needs
 *     to define it (tid, name, start edge) in `info[index]`
 *   pthread_create -> the multithreaded switch (hl_mt: edges from here on),
 *     then the child starts in a trampoline that knows how many steps its
 *     creator had taken: the child's stream starts after them
 *   thread exit (a pthread key destructor) -> TS_EXITING; the state keeps
 *     serving calls made later in the exit path; the writer recycles it once
 *     the thread is gone and its rows are written
 *
 * Invariants: indices are dense from 0 and never reused within a trace (a
 * recycled state gets a new one); hl_mt goes from 0 to 1 before any second
 * thread that pthread_create made can run, so every object it can reach was
 * made either before its start edge or with an edge of its own. A thread we
 * did not see created (raw clone, libc-internal helpers) switches hl_mt on
 * at its first call, without a start edge (README.md, "Limits").
 */
#include "agent.h"

#include <string.h>
#include <sys/prctl.h>

hl_thread_t *_Atomic hl_threads;
_Atomic int hl_mt;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static hl_thread_t *free_states;
static hl_tinfo_t *info;
static size_t info_cap; /* entries */
static uint32_t n_index;
static pthread_key_t thread_key;

/* Set by the trampoline: this thread's creator and its steps at the time. */
static __thread struct {
    int valid;
    uint32_t thread;
    uint64_t steps;
} t_start __attribute__((tls_model("initial-exec")));

/* Runs at thread exit (a pthread key destructor). The state stays this
 * thread's: frees made later in the exit path still go to its chunk. */
static void thread_exit(void *arg) {
    hl_thread_t *t = arg;
    atomic_store_explicit(&t->state, TS_EXITING, memory_order_release);
}

void hl_threads_init(void) {
    pthread_key_create(&thread_key, thread_exit);
}

static int give_index(hl_thread_t *t, int has_start, uint32_t st, uint64_t ss) {
    pthread_mutex_lock(&reg_lock);
    if (n_index + 1 > info_cap) {
        size_t cap = info_cap ? info_cap * 2 : 256;
        hl_tinfo_t *p = hl_os_grow(info, info_cap * sizeof *info, cap * sizeof *info);
        if (!p) {
            pthread_mutex_unlock(&reg_lock);
            return -1;
        }
        info = p;
        info_cap = cap;
    }
    uint32_t i = n_index++;
    hl_tinfo_t *x = &info[i];
    memset(x, 0, sizeof *x);
    x->tid = t->tid;
    prctl(PR_GET_NAME, x->name, 0, 0, 0);
    x->name[sizeof x->name - 1] = 0;
    x->has_start = has_start && ss > 0 && st < i;
    x->start_thread = st;
    x->start_steps = ss;
    t->index = i;
    t->slot_me = (uint64_t)(i + 1) << HL_SLOT_SHIFT;
    pthread_mutex_unlock(&reg_lock);
    return 0;
}

int hl_thread_info(uint32_t index, hl_tinfo_t *out) {
    pthread_mutex_lock(&reg_lock);
    int ok = index < n_index;
    if (ok) *out = info[index];
    pthread_mutex_unlock(&reg_lock);
    return ok;
}

uint32_t hl_thread_count(void) {
    pthread_mutex_lock(&reg_lock);
    uint32_t n = n_index;
    pthread_mutex_unlock(&reg_lock);
    return n;
}

/* The producer's view of a state, as new. */
static void reset_producer(hl_thread_t *t) {
    t->data = t->chunk_lim = NULL;
    atomic_store(&t->data_lim, NULL);
    t->chunk = NULL;
    t->steps = t->twos = 0;
    memset(&t->enc, 0, sizeof t->enc);
    atomic_store(&t->waited_ns, 0);
    t->gate = 0;
    hl_thread_sync_gate(t);
    atomic_store(&t->first, NULL);
}

void hl_thread_sync_gate(hl_thread_t *t) {
    t->mt = atomic_load_explicit(&hl_mt, memory_order_acquire) != 0;
    t->slots = t->mt ? hl_slots : NULL; /* (published by hl_mt's release store) */
    t->stacks = hl_cfg.stack_depth != 0;
    t->free_stacks = hl_cfg.free_walk != 0;
}

hl_thread_t *hl_thread_create(int start_writer) {
    pthread_mutex_lock(&reg_lock);
    hl_thread_t *t = free_states;
    if (t) free_states = t->free_next;
    pthread_mutex_unlock(&reg_lock);
    if (!t) {
        size_t hdr = (sizeof(hl_thread_t) + 4095) / 4096 * 4096;
        size_t sc = HL_SCACHE_SLOTS * 2 * sizeof(uint64_t);
        size_t um = HL_UMEMO_SLOTS * sizeof(hl_unwind_memo_t);
        uint8_t *m = hl_os_alloc(hdr + sc + um);
        if (!m) return NULL;
        t = (hl_thread_t *)m;
        t->map_bytes = hdr + sc + um;
        t->scache = (uint64_t *)(m + hdr);
        t->umemo.slots = (hl_unwind_memo_t *)(m + hdr + sc);
        t->umemo.mask = HL_UMEMO_SLOTS - 1;
        atomic_store(&t->state, TS_ACTIVE);
        /* publish in the registry (the writer walks it without a lock) */
        hl_thread_t *head = atomic_load(&hl_threads);
        do
            t->next = head;
        while (!atomic_compare_exchange_weak(&hl_threads, &head, t));
    } else {
        memset(t->scache, 0, HL_SCACHE_SLOTS * 2 * sizeof(uint64_t));
        memset(t->umemo.slots, 0, HL_UMEMO_SLOTS * sizeof(hl_unwind_memo_t));
        t->umemo.pending = NULL;
    }
    reset_producer(t);
    t->tid = hl_os_gettid();
    if (give_index(t, t_start.valid, t_start.thread, t_start.steps)) {
        hl_thread_recycle(t);
        return NULL;
    }
    if (t->index > 0 && !atomic_load(&hl_mt)) {
        /* a thread whose creation we did not see (README.md, "Limits"): the
         * others take the multithreaded rows from their next row on */
        if (hl_edges_enable() == 0) {
            atomic_store_explicit(&hl_mt, 1, memory_order_release);
            hl_threads_poke();
        }
    }
    hl_thread_sync_gate(t);
    atomic_store_explicit(&t->state, TS_ACTIVE, memory_order_release);
    pthread_setspecific(thread_key, t);
    if (start_writer) hl_writer_ensure_running();
    return t;
}

void hl_threads_poke(void) {
    for (hl_thread_t *t = atomic_load(&hl_threads); t; t = t->next)
        if (atomic_load_explicit(&t->state, memory_order_acquire) != TS_FREE)
            atomic_store_explicit(&t->data_lim, NULL, memory_order_relaxed);
}

void hl_thread_recycle(hl_thread_t *t) {
    pthread_mutex_lock(&reg_lock);
    atomic_store(&t->state, TS_FREE);
    t->free_next = free_states;
    free_states = t;
    pthread_mutex_unlock(&reg_lock);
}

void hl_threads_fork_prepare(void) {
    pthread_mutex_lock(&reg_lock);
}
void hl_threads_fork_parent(void) {
    pthread_mutex_unlock(&reg_lock);
}

/* In the child: self is the only thread, index 0 of a new trace. The other
 * states are recycled by the writer (writer.c, hl_fork_child). */
void hl_threads_fork_child(hl_thread_t *self) {
    pthread_mutex_init(&reg_lock, NULL);
    n_index = 0;
    if (self) {
        t_start.valid = 0;
        self->tid = hl_os_gettid();
        give_index(self, 0, 0, 0);
        self->steps = self->twos = 0;
        atomic_store(&self->data_lim, NULL);
        memset(&self->enc, 0, sizeof self->enc);
    }
}

/* ---------------------------------------------------------------- pthread_create */

typedef struct start_rec start_rec_t;
struct start_rec {
    void *(*fn)(void *);
    void *arg;
    int valid;
    uint32_t thread;
    uint64_t steps;
    start_rec_t *next;
};

static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;
static start_rec_t *rec_free;

static start_rec_t *rec_get(void) {
    pthread_mutex_lock(&rec_lock);
    if (!rec_free) {
        start_rec_t *slab = hl_os_alloc(4096);
        for (size_t i = 0; slab && i < 4096 / sizeof *slab; i++) {
            slab[i].next = rec_free;
            rec_free = &slab[i];
        }
    }
    start_rec_t *r = rec_free;
    if (r) rec_free = r->next;
    pthread_mutex_unlock(&rec_lock);
    return r;
}

static void rec_put(start_rec_t *r) {
    pthread_mutex_lock(&rec_lock);
    r->next = rec_free;
    rec_free = r;
    pthread_mutex_unlock(&rec_lock);
}

static void *trampoline(void *p) {
    start_rec_t *r = p;
    void *(*fn)(void *) = r->fn;
    void *arg = r->arg;
    t_start.valid = r->valid;
    t_start.thread = r->thread;
    t_start.steps = r->steps;
    rec_put(r);
    return fn(arg);
}

HL_EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
                             void *arg) {
    if (!hl_real.pthread_create) hl_hooks_resolve();
    if (hl_busy() || atomic_load(&hl_off)) return hl_real.pthread_create(th, attr, fn, arg);
    hl_busy_enter();
    start_rec_t *r = NULL;
    if (hl_agent_ready()) {
        hl_thread_t *me = hl_thread_self();
        if (!me) {
            me = hl_thread_create(1);
            hl_set_self(me);
        }
        if (!atomic_load(&hl_mt)) {
            if (hl_edges_enable() == 0) {
                atomic_store_explicit(&hl_mt, 1, memory_order_release);
                hl_threads_poke(); /* (other threads: raw clones, README.md "Limits") */
            } else
                hl_note("cannot map the edge table: the order across threads may be wrong", "",
                        "");
        }
        if (me) hl_thread_sync_gate(me); /* its next row has the edge */
        r = rec_get();
        if (r) {
            r->fn = fn;
            r->arg = arg;
            r->valid = me != NULL;
            r->thread = me ? me->index : 0;
            r->steps = me ? me->steps : 0;
        }
    }
    hl_busy_leave();
    if (!r) return hl_real.pthread_create(th, attr, fn, arg);
    int rc = hl_real.pthread_create(th, attr, trampoline, r);
    if (rc) rec_put(r);
    return rc;
}
