/*
 * seg_ident.h: the identification's fast paths, inline in the front end's
 * malloc and calloc (seg_front.h) where the shim is built for one predictor
 * (-DHL_SEG_INLINE_STACK: PATH and STACK; -DHL_SEG_INLINE_SP), so that a hit
 * costs no call; seg_ident.c has the rest, out of line.
 *
 *   STACK, PATH   e = t->ctxp[2 * set(ra0, fp)]    the context cache's first way
 *                 e->ra == ra0 && e->fp == fp && the words at fp + e->off[0..1]
 *                 are e->w[0..1]  ─▶  e->core (its class << 12)  (20 instructions)
 *                 else hl_seg_ident_miss / hl_seg_ident_other (seg_ident.c)
 *   SP            e = t->spp[slot(sp)]: e->ra == sp ─▶ e->core, else hl_seg_sp_miss
 *
 * t->ctxp and t->spp point at the thread's caches once it started with a
 * predictor that keeps them; before that, and for the one allocation after
 * a site hint (or the calloc that handed its miss over to malloc), they
 * point at hl_seg_ctx_none / hl_seg_ra_none, empty tables nothing writes:
 * every lookup misses, and the miss sees why (seg_ident.c, ident_redirected).
 * So the fast path tests neither the thread's state nor a pending hint.
 *
 * The instructions of this file and seg_ident.c are what the study counts
 * as the identification's (crates/heaplab-segregate/src/runtime.rs: the
 * callgrind lines of these two files, inline or not).
 */
#ifndef HL_SEG_IDENT_H
#define HL_SEG_IDENT_H

#include "seg_thread.h"

/* The caches' slots (seg_thread.h draws them). */
static inline unsigned hl_seg_ra_slot(uintptr_t ra) {
    return (uint32_t)ra * 0x9E3779B1u >> (32 - 9);
}
_Static_assert(SEG_RA_SLOTS == 1 << 9, "hl_seg_ra_slot's shift");

/* SP's slot of stack pointer sp: the byte offset of slot (sp / 16) mod 512
 * (sp is 16-aligned at a call), two instructions (lea, and); stack depths
 * 8 KiB apart share a slot. */
static inline uintptr_t hl_seg_sp_slot(uintptr_t sp) {
    return (sp * (sizeof(seg_ra_slot_t) / 16)) & ((uintptr_t)(SEG_RA_SLOTS - 1) * sizeof(seg_ra_slot_t));
}
_Static_assert(sizeof(seg_ra_slot_t) % 16 == 0, "hl_seg_sp_slot's product");

/* The context cache is SEG_CTX_WAYS-way set associative: the set of (ra,
 * fp) starts hl_seg_ctx_set(ra, fp) bytes into the cache, at set number
 * (fp / 16 + ra / 2) mod 1024.  The sum's terms are the bits that vary: fp
 * is 16-aligned (the ABI's frame), and two return addresses differ by at
 * least 2 (a call is 2 bytes or more).  It costs three instructions (lea,
 * shl, and) where a multiplicative hash of ra ^ fp cost five; measured on
 * the same runs, the sets it picks miss no more often (docs/segregate.md). */
static inline uintptr_t hl_seg_ctx_set(uintptr_t ra, uintptr_t fp) {
    return ((fp + ra * 8) << (SEG_CTX_SET_SHIFT - 4)) &
           ((uintptr_t)(SEG_CTX_SLOTS / SEG_CTX_WAYS - 1) << SEG_CTX_SET_SHIFT);
}
_Static_assert(sizeof(seg_ctx_t) * SEG_CTX_WAYS == 1 << SEG_CTX_SET_SHIFT, "a set's bytes");
_Static_assert(SEG_CTX_SET_SHIFT >= 4, "hl_seg_ctx_set's shift");

/* The misses (seg_ident.c; their arguments in the fast path's order, so that
 * its tail calls move nothing). */
unsigned hl_seg_ident_miss(void *const *fp, size_t size, seg_tls_t *t, seg_ctx_t *e);
unsigned hl_seg_ident_other(void *const *fp, size_t size, seg_tls_t *t, seg_ctx_t *e,
                            uintptr_t y0, uintptr_t y1);
unsigned hl_seg_sp_miss(void *const *fp, size_t size, seg_tls_t *t, seg_ra_slot_t *e);

/* STACK, PATH: the context cache's first way.  The class's core state
 * offset (class << SEG_CORE_SHIFT, kept in the slot so that the front end
 * need not shift it), or -1 (e holds another (ra, fp): hl_seg_ident_miss
 * decides) or -2 (e holds this one with other words: hl_seg_ident_other,
 * given the two words compared, *y0p and *y1p, so that it need not read
 * them again), with *ep = e.  A slot of three words or more has its second offset odd, so that
 * it never matches here (hl_seg_ident_other verifies it); a STACK+size slot
 * has a word that never matches. */
static inline __attribute__((always_inline)) int hl_seg_identify_find(void *const *fp,
                                                                     seg_tls_t *t,
                                                                     seg_ctx_t **ep,
                                                                     uintptr_t *y0p,
                                                                     uintptr_t *y1p) {
    uintptr_t ra = (uintptr_t)fp[1];
    seg_ctx_t *e = (seg_ctx_t *)((char *)t->ctxp + hl_seg_ctx_set(ra, (uintptr_t)fp));
    *ep = e;
    if (HL_UNLIKELY(e->ra != ra) || HL_UNLIKELY(e->fp != (uintptr_t)fp)) return -1;
    const char *f = (const char *)fp;
    uintptr_t y0 = *(const uintptr_t *)(f + e->off[0]);
    uintptr_t y1 = *(const uintptr_t *)(f + e->off[1]);
    *y0p = y0;
    *y1p = y1;
    if (HL_UNLIKELY(y0 != e->w[0]) || HL_UNLIKELY(y1 != e->w[1])) return -2;
    e->hits++;
    return e->core;
}

/* The same as a class, the misses decided out of line (STACK+size passes
 * `size`; the others pass 0, so that the fast path keeps no register for
 * it). */
static inline __attribute__((always_inline)) unsigned hl_seg_identify_fast(void *const *fp,
                                                                          size_t size,
                                                                          seg_tls_t *t) {
    seg_ctx_t *e;
    uintptr_t y0, y1;
    int c = hl_seg_identify_find(fp, t, &e, &y0, &y1);
    if (HL_UNLIKELY(c < 0))
        return c == -1 ? hl_seg_ident_miss(fp, size, t, e)
                       : hl_seg_ident_other(fp, size, t, e, y0, y1);
    return (unsigned)c >> SEG_CORE_SHIFT;
}

/* SP's slot for the caller at fp (its stack pointer is fp + 2): a hit when
 * its ra is that stack pointer, then hl_seg_sp_hit; else hl_seg_sp_miss
 * decides, given the slot. */
static inline __attribute__((always_inline)) seg_ra_slot_t *hl_seg_sp_lookup(void *const *fp,
                                                                            seg_tls_t *t) {
    return (seg_ra_slot_t *)((char *)t->spp + hl_seg_sp_slot((uintptr_t)(fp + 2)));
}
static inline __attribute__((always_inline)) int hl_seg_sp_is_hit(const seg_ra_slot_t *e,
                                                                  void *const *fp) {
    return e->ra == (uintptr_t)(fp + 2);
}
/* A hit, counted: the class's core state offset (kept in the slot). */
static inline __attribute__((always_inline)) size_t hl_seg_sp_hit(seg_ra_slot_t *e) {
    e->hits++;
    return e->core;
}

/* SP: the depth of the caller's stack pointer decides (main thread only);
 * the cache is keyed by the stack pointer.  The class's core state offset
 * (class << SEG_CORE_SHIFT, kept in the slot), for the front end. */
static inline __attribute__((always_inline)) size_t hl_seg_identify_sp_core(void *const *fp,
                                                                           size_t size,
                                                                           seg_tls_t *t) {
    seg_ra_slot_t *e = hl_seg_sp_lookup(fp, t);
    if (HL_UNLIKELY(!hl_seg_sp_is_hit(e, fp))) return (size_t)hl_seg_sp_miss(fp, size, t, e) << SEG_CORE_SHIFT;
    return hl_seg_sp_hit(e);
}

/* The same as a class. */
static inline __attribute__((always_inline)) unsigned hl_seg_identify_sp_fast(void *const *fp,
                                                                             size_t size,
                                                                             seg_tls_t *t) {
    return (unsigned)(hl_seg_identify_sp_core(fp, size, t) >> SEG_CORE_SHIFT);
}

#endif
