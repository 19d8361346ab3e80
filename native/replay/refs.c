/*
 * refs.c: the replayer's measure mode for heaplab's Valgrind tool
 * (native/vgtool, --tool=heaplab-measure): `heaplab-replay --vg-marks TRACE`,
 * run by `heaplab locality` with the allocator under test LD_PRELOADed.
 *
 *   replayer ── HLVG_REPLAYER(text) ──▶ tool: never stream the replayer's own code
 *   for each chunk:  HLVG_ACTIVE(1)
 *     for each event:  the call, through the general path (exec.c)
 *                      HLVG_EVENT(index, block returned, created?)
 *                                   ──▶ tool: a marker after the allocator's references
 *                    HLVG_ACTIVE(0)
 *
 * The tool streams the references of everything but the replayer while
 * active, that is, of the allocator (and of the libc code it calls), each
 * event's before its marker. heaplab then re-issues the trace's recorded
 * references between the markers, at the addresses the markers give: the
 * application's stream as it would run on this allocator, interleaved
 * exactly with the allocator's. The replayer itself executes no recorded
 * reference, so its bookkeeping never reaches the simulated caches.
 */
#include "rp.h"

#include "../vgtool/heaplab_vg.h"

#include <stdint.h>

/* The replayer's code, from the linker. */
extern char __executable_start[], etext[];

int rp_refs_init(void) {
    return HLVG_REPLAYER((uintptr_t)__executable_start, (uintptr_t)etext);
}

void rp_refs_exec(const rp_op_t *op, rp_ctx_t *ctx) {
    uint64_t ev0 = ctx->event;
    const uint32_t *stacks = ctx->op_stack; /* --site-hints: the chunk's stack ids, by op */
    rp_op_t one[2];
    one[1].w = RP_OP_END;
    one[1].x = 0;
    (void)HLVG_ACTIVE(1);
    for (uint64_t i = 0; rp_op_byte(&op[i]) != RP_OP_END; i++) {
        uint64_t nid0 = ctx->nid;
        one[0] = op[i];
        ctx->event = ev0 + i;
        if (stacks) ctx->op_stack = stacks + i; /* the general loop reads op_stack[0] for one[0] */
        rp_exec_general(one, ctx);
        int created = ctx->nid > nid0;
        HLVG_EVENT(ev0 + i, created ? (uintptr_t)ctx->obj[nid0] : 0, created);
    }
    (void)HLVG_ACTIVE(0);
    ctx->event = ev0;
    ctx->op_stack = stacks;
}
