/*
 * edges.c: the address table that orders events across threads.
 *
 *   slot = hl_slots[(address >> 4) % HL_SLOTS]:  (thread index + 1) << 42 | steps
 *
 * Every step that takes or gives back an address (an allocation after it
 * returns, a free before it, a realloc's two steps) exchanges the slot of
 * that address: it learns which step touched the slot last, and leaves
 * itself there. Exchanges on one slot are totally ordered, so the steps that
 * touch an address form a chain; each step records an edge to its
 * predecessor when that is another thread's (hooks.c), and the reader
 * places it after that step. A free is thereby after the allocation it
 * frees, and an allocation that reuses an address after the step that
 * released it, in every thread, whatever the allocator does. Two addresses
 * that share a slot only add edges that real time already satisfies.
 *
 * The table exists only once the program has a second thread (hl_mt):
 * 2^19 slots, 4 MiB of address space, pages committed as slots are touched.
 * A single-threaded program pays nothing here.
 */
#include "agent.h"

_Atomic uint64_t *hl_slots;

static pthread_mutex_t edges_lock = PTHREAD_MUTEX_INITIALIZER;

int hl_edges_enable(void) {
    pthread_mutex_lock(&edges_lock);
    if (!hl_slots) {
        void *p = hl_os_alloc(HL_SLOTS * sizeof(uint64_t));
        if (p) {
            hl_slots = p; /* published to producers by the release store of hl_mt */
        }
    }
    int rc = hl_slots ? 0 : -1;
    pthread_mutex_unlock(&edges_lock);
    return rc;
}

void hl_edges_reset(void) {
    pthread_mutex_init(&edges_lock, NULL);
    atomic_store(&hl_mt, 0);
    if (hl_slots) hl_os_discard((void *)hl_slots, HL_SLOTS * sizeof(uint64_t));
}
