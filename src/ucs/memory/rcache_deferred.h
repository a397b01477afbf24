/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unmaps that the cache's unmap handler saw while it ran in a signal
 * handler of the very thread that holds the cache's lock (a munmap from a
 * handler that interrupted a cache call): that handler cannot take the
 * lock, so it records the range here and the owner applies it before it
 * unlocks (or the next owner right after locking).  Past
 * UCS_RCACHE_DEFERRED ranges, everything is invalidated (safe, slower).
 *
 * Contract:
 *  - ucs_rcache_deferred_add(): only from a signal handler of the lock
 *    owner's thread (async-signal-safe: atomics on this memory only);
 *  - ucs_rcache_deferred_pending(): any thread, no lock (hits: while it
 *    is true they take the locked path, which applies the ranges);
 *  - ucs_rcache_deferred_drain(), _reset(): the lock owner.
 */
#ifndef UCS_RCACHE_DEFERRED_H_
#define UCS_RCACHE_DEFERRED_H_

#include <ucs/datastruct/pgtable.h>

/* Ranges remembered while the lock owner is interrupted. */
#define UCS_RCACHE_DEFERRED 16

typedef struct ucs_rcache_deferred {
    unsigned count; /* atomic; > UCS_RCACHE_DEFERRED: all */
    struct {
        ucs_pgt_addr_t start, end;
    } ranges[UCS_RCACHE_DEFERRED];
} ucs_rcache_deferred_t;

/* What ucs_rcache_deferred_drain() does with each range. */
typedef void (*ucs_rcache_deferred_apply_t)(void *arg, ucs_pgt_addr_t start,
                                            ucs_pgt_addr_t end);

#pragma GCC visibility push(hidden)

/* Call apply(arg, ...) for every range recorded (once for the whole
 * address space past the array's room) until none is left, also those a
 * handler adds meanwhile.  Returns how many unmaps were recorded. */
unsigned long ucs_rcache_deferred_drain(ucs_rcache_deferred_t *deferred,
                                        ucs_rcache_deferred_apply_t apply,
                                        void *arg);

#pragma GCC visibility pop

static inline int
ucs_rcache_deferred_pending(const ucs_rcache_deferred_t *deferred)
{
    return __atomic_load_n(&deferred->count, __ATOMIC_ACQUIRE) != 0;
}

static inline void ucs_rcache_deferred_add(ucs_rcache_deferred_t *deferred,
                                           ucs_pgt_addr_t start,
                                           ucs_pgt_addr_t end)
{
    unsigned slot = __atomic_fetch_add(&deferred->count, 1, __ATOMIC_ACQ_REL);

    /* the owner cannot read it before we return: we interrupted it */
    if (slot < UCS_RCACHE_DEFERRED) {
        deferred->ranges[slot].start = start;
        deferred->ranges[slot].end   = end;
    }
}

/* A forked child: the parent's interrupted sections are not its own. */
static inline void ucs_rcache_deferred_reset(ucs_rcache_deferred_t *deferred)
{
    __atomic_store_n(&deferred->count, 0, __ATOMIC_RELAXED);
}

#endif
