/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Per-thread slots of the registration cache and the leases they hold
 * (rcache_slot.c; biased reference counting).  A thread gets a slot number
 * at its first cache call; threads beyond UCS_RCACHE_SLOTS run without
 * one (atomic references, hits counted in stats.hits_fast_shared,
 * rcache_stats.h).  Every fast hit is also a get.
 *
 * Leases: a thread that hits the same region twice in a row leases it:
 * UCS_RCACHE_LEASE_BIAS is added to its refcount once, and the thread's
 * own gets and puts of it then count in its slot (slot->local, plain
 * stores: one writer) instead of the shared refcount.  refcount - BIAS +
 * local is the number of references; a leased region is never released,
 * recycled or evicted.  The lease goes (bias removed, local folded in)
 * when the owner's get of its range or its put finds it invalid, at the
 * owner's periodic check (UCS_RCACHE_LEASE_CHECK), when a new lease
 * replaces it, at thread exit, at destroy and in a forked child; so an
 * invalidated region the owner does not hold is deregistered within the
 * owner's next UCS_RCACHE_LEASE_CHECK calls on the cache, not before.
 *
 * Contract:
 *  - a slot is written only by the thread that has its number, except
 *    under the cache's lock at thread exit, destroy and in a forked child;
 *    hits_fast is read by the statistics query without its owner;
 *  - the functions below are not async-signal-safe (the unmap handler is)
 *    and not for hook context.
 */
#ifndef UCS_RCACHE_SLOT_H_
#define UCS_RCACHE_SLOT_H_

#include <ucs/memory/rcache.h>
#include <stdint.h>

#define UCS_RCACHE_SLOTS      64
#define UCS_RCACHE_NO_SLOT    (~0u)
#define UCS_RCACHE_LEASE_BIAS (1u << 30)
typedef struct ucs_rcache_slot {
    ucs_rcache_region_t *lease; /* leased region, or NULL */
    uint32_t local;             /* references counted here, not in it */
    ucs_rcache_region_t *last;  /* last hit (compared, never read) */
    ucs_rcache_region_t *stale; /* a held candidate that failed
                                   validation, on its way back */
    uint64_t hits_fast;         /* read by stats without the owner */
    ucs_pgt_addr_t lease_start, lease_end; /* its range (end 0: none) */
} __attribute__((aligned(64))) ucs_rcache_slot_t;

/* A lease whose range is not asked for is checked (dropped if invalid)
 * every this many hits of its thread that go past it. */
#define UCS_RCACHE_LEASE_CHECK 16

/* slot number + 1 of this thread, 0: not assigned, else none */
extern __thread unsigned ucs_rcache_tid
    __attribute__((tls_model("initial-exec")));

#pragma GCC visibility push(hidden)

/* rcache_slot.c: a slot for this thread (first call), or NULL: none. */
ucs_rcache_slot_t *ucs_rcache_slot_assign(ucs_rcache_t *rcache);
/* region is held by the caller (one reference): that reference becomes the
 * slot's first local hold of a new lease; the old lease is dropped.  No
 * lock held; the slot is the caller's. */
void ucs_rcache_lease_take(ucs_rcache_t *rcache, ucs_rcache_slot_t *slot,
                           ucs_rcache_region_t *region);
/* Drop the slot's lease (if any); the region is released if that was its
 * last reference.  No lock held; the slot is the caller's. */
void ucs_rcache_lease_drop(ucs_rcache_t *rcache, ucs_rcache_slot_t *slot);
/* Same under the lock (a region left unreferenced goes to orphans). */
void ucs_rcache_lease_drop_locked(ucs_rcache_t *rcache,
                                  ucs_rcache_slot_t *slot);
void ucs_rcache_leases_drop_all_locked(ucs_rcache_t *rcache);

#pragma GCC visibility pop

#endif
