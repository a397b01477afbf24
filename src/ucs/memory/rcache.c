/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Registration cache front end: lookups (hit path), references and
 * invalidation requests.  See rcache.h for the contract.
 */
#include "rcache_int.h"

#include <ucm/api/ucm_ext.h>

#include <stdlib.h>

#define UCS_RCACHE_KNOWN_PROT (PROT_READ | PROT_WRITE | PROT_EXEC)

/* Slot number id (< UCS_RCACHE_SLOTS) of rcache, its address in one
 * register (the compiler would otherwise keep two forms of it). */
static inline ucs_rcache_slot_t *ucs_rcache_slot_at(ucs_rcache_t *rcache,
                                                    unsigned id)
{
    ucs_rcache_slot_t *slot = &rcache->slots[id];

    __asm__("" : "+r"(slot));
    return slot;
}

/* This thread's slot in rcache (assigned at its first call), or NULL. */
static inline ucs_rcache_slot_t *ucs_rcache_slot(ucs_rcache_t *rcache)
{
    unsigned slot = ucs_rcache_tid - 1;

    if (ucs_likely(slot < UCS_RCACHE_SLOTS)) {
        return &rcache->slots[slot];
    }
    return ucs_rcache_slot_assign(rcache);
}

/* One instruction on x86 (a signal handler of this thread cannot split
 * it), no lock prefix: the slot has one writer. */
static inline void ucs_rcache_local_add(uint32_t *local, int delta)
{
#if defined(__x86_64__)
    __asm__ volatile("addl %1, %0" : "+m"(*local) : "ri"(delta) : "cc");
#else
    __atomic_fetch_add(local, delta, __ATOMIC_RELAXED);
#endif
}

static inline void ucs_rcache_count_hit(ucs_rcache_t *rcache,
                                        ucs_rcache_slot_t *slot)
{
    if (ucs_likely(slot != NULL)) {
        __atomic_store_n(&slot->hits_fast, slot->hits_fast + 1,
                         __ATOMIC_RELAXED);
    } else {
        __atomic_fetch_add(&rcache->stats.hits_fast_shared, 1,
                           __ATOMIC_RELAXED);
    }
}

/* In the index and not invalidated. */
static inline int ucs_rcache_region_valid(const ucs_rcache_region_t *region)
{
    return (__atomic_load_n(&region->flags, __ATOMIC_ACQUIRE) &
            (UCS_RCACHE_REGION_FLAG_PGTABLE |
             UCS_RCACHE_REGION_FLAG_INVALID)) == UCS_RCACHE_REGION_FLAG_PGTABLE;
}

static inline int ucs_rcache_region_covers(const ucs_rcache_region_t *region,
                                           ucs_pgt_addr_t start,
                                           ucs_pgt_addr_t end, int prot)
{
    /* one branch for the caller: with random requests the outcome of each
     * compare alone is a coin toss */
    return (start >= region->super.start) & (end <= region->super.end) &
           !(prot & ~region->prot);
}

/* A reference taken only from a non-zero count (0: the region is being
 * released or recycled). */
static inline int ucs_rcache_region_try_ref(ucs_rcache_region_t *region)
{
    uint32_t refcount;

    refcount = __atomic_load_n(&region->refcount, __ATOMIC_RELAXED);
    do {
        if (refcount == 0) {
            return 0;
        }
    } while (!__atomic_compare_exchange_n(&region->refcount, &refcount,
                                          refcount + 1, 1, __ATOMIC_ACQ_REL,
                                          __ATOMIC_RELAXED));
    return 1;
}

/* A held candidate is still the answer: it cannot be released or recycled
 * now, so what was read before the reference is read again. */
static inline int ucs_rcache_region_confirm(ucs_rcache_t *rcache,
                                            ucs_rcache_region_t *region,
                                            ucs_pgt_addr_t start,
                                            ucs_pgt_addr_t end, int prot)
{
    if (ucs_unlikely(!ucs_rcache_region_valid(region) ||
                     !ucs_rcache_region_covers(region, start, end, prot))) {
        return 0;
    }
    if (!region->lru_flags) { /* referenced, see ucs_rcache_region_priv_t */
        region->lru_flags = 1;
    }
    return 1;
}

/* What taking a lock-free candidate gave (see the locking notes in
 * rcache_int.h). */
typedef enum {
    UCS_RCACHE_CANDIDATE_HELD, /* held and validated: the answer */
    UCS_RCACHE_CANDIDATE_NONE, /* not taken: NULL or released */
    UCS_RCACHE_CANDIDATE_STALE /* held but not the answer (invalid, not
                                  covering): put it */
} ucs_rcache_candidate_t;

/* A candidate (a hint or the index's answer, may be NULL): a reference
 * taken only from a non-zero count, then the region validated once, under
 * it (a region that does not answer is held only until it is put back:
 * one check instead of a check before the reference and again after). */
static UCS_F_ALWAYS_INLINE ucs_rcache_candidate_t
ucs_rcache_candidate_take(ucs_rcache_t *rcache, ucs_rcache_region_t *region,
                          ucs_pgt_addr_t start, ucs_pgt_addr_t end, int prot)
{
    if (ucs_unlikely((region == NULL) || !ucs_rcache_region_try_ref(region))) {
        return UCS_RCACHE_CANDIDATE_NONE;
    }
    if (ucs_unlikely(
            !ucs_rcache_region_confirm(rcache, region, start, end, prot))) {
        return UCS_RCACHE_CANDIDATE_STALE;
    }
    return UCS_RCACHE_CANDIDATE_HELD;
}

/* Unmaps seen by the lock owner's signal handlers and not applied yet: the
 * locked path applies them, hits must wait for it. */
static inline int ucs_rcache_deferred_unmaps(ucs_rcache_t *rcache)
{
    return ucs_rcache_deferred_pending(&rcache->deferred);
}

static UCS_F_NOINLINE ucs_status_t
ucs_rcache_hit_verify(ucs_rcache_t *rcache, ucs_rcache_region_t *region,
                      ucs_rcache_region_t **region_p)
{
    ucs_rcache_pfn_verify(rcache, region);
    *region_p = region;
    return UCS_OK;
}

/* The end of every lock-free hit: counted, checked (CHECK_PFN), given. */
static inline ucs_status_t ucs_rcache_hit_done(ucs_rcache_t *rcache,
                                               ucs_rcache_slot_t *slot,
                                               ucs_rcache_region_t *region,
                                               ucs_rcache_region_t **region_p)
{
    ucs_rcache_count_hit(rcache, slot);
    if (ucs_unlikely(rcache->hot.check_pfn)) {
        return ucs_rcache_hit_verify(rcache, region, region_p);
    }
    *region_p = region;
    return UCS_OK;
}

/* The arguments ucs_rcache_get() refused on its first test: NULL, a zero
 * length or an overflowing range (unknown protection bits are refused by
 * ucs_rcache_get_miss()).  Says which; always an error. */
static UCS_F_NOINLINE ucs_status_t
ucs_rcache_get_check(ucs_rcache_t *rcache, void *address, size_t length,
                     ucs_rcache_region_t **region_p)
{
    if ((rcache == NULL) || (region_p == NULL) || (address == NULL)) {
        ucs_rcache_error("ucs_rcache_get: NULL %s", (rcache == NULL) ? "rcache"
                                                    : (region_p == NULL)
                                                        ? "region_p"
                                                        : "address");
    } else if (length == 0) {
        ucs_rcache_error("%s: get of zero bytes at %p", rcache->name, address);
    } else {
        ucs_rcache_error("%s: range %p + %zu overflows", rcache->name, address,
                         length);
    }
    return UCS_ERR_INVALID_PARAM;
}

/* The registration path, out of line so that the hit path stays small. */
static UCS_F_NOINLINE ucs_status_t ucs_rcache_get_miss(
    ucs_rcache_t *rcache, ucs_pgt_addr_t start, ucs_pgt_addr_t end, int prot,
    void *arg, ucs_rcache_region_t **region_p)
{
    ucs_rcache_slot_t *slot = ucs_rcache_slot(rcache);
    ucs_rcache_region_t *region;
    ucs_status_t status;

    /* no region has other bits, so the hit paths refused them already */
    if (prot & ~UCS_RCACHE_KNOWN_PROT) {
        ucs_rcache_error("%s: unknown protection bits 0x%x", rcache->name,
                         prot);
        return UCS_ERR_INVALID_PARAM;
    }
    /* a thread that only misses checks its lease here (hits do it
     * periodically) */
    if ((slot != NULL) && (slot->lease != NULL) &&
        !ucs_rcache_region_valid(slot->lease)) {
        ucs_rcache_lease_drop(rcache, slot);
    }
    status = ucs_rcache_get_slow(rcache, start, end, prot, arg, &region);
    if (status != UCS_OK) {
        return status;
    }
    if (ucs_unlikely(rcache->hot.check_pfn)) {
        ucs_rcache_pfn_verify(rcache, region);
    }
    if (slot != NULL) {
        slot->last = region; /* a hit next time leases it */
    }
    *region_p = region;
    return UCS_OK;
}

/* The hint entry of a request's first page (see ucs_rcache_hints_t). */
static inline ucs_rcache_region_t **ucs_rcache_hint(ucs_rcache_t *rcache,
                                                    ucs_pgt_addr_t page)
{
    ucs_rcache_hints_t *hints =
        __atomic_load_n(&rcache->hot.hints, __ATOMIC_ACQUIRE);

    return &hints->entry[(page ^ (page >> hints->shift)) & hints->mask];
}

/* The rare slot work after a hit that was not on the thread's lease: the
 * periodic check of the lease (not read on every get), and the lease of a
 * region hit twice in a row (see "leases" in rcache_int.h). */
static UCS_F_NOINLINE ucs_status_t ucs_rcache_hit_slot_update(
    ucs_rcache_t *rcache, ucs_rcache_slot_t *slot, ucs_rcache_region_t *region,
    ucs_rcache_region_t **region_p)
{
    if ((slot->lease != NULL) &&
        ((slot->hits_fast % UCS_RCACHE_LEASE_CHECK) == 0) &&
        !ucs_rcache_region_valid(slot->lease)) {
        ucs_rcache_lease_drop(rcache, slot);
    }
    /* a pointer compare only: the last region's lines are not read */
    if ((region == slot->last) && (region != slot->lease)) {
        ucs_rcache_lease_take(rcache, slot, region);
    }
    slot->last = region;
    return ucs_rcache_hit_done(rcache, slot, region, region_p);
}

/* A held region from the hint or the index. */
static inline ucs_status_t
ucs_rcache_hit_candidate(ucs_rcache_t *rcache, ucs_rcache_slot_t *slot,
                         ucs_rcache_region_t *region,
                         ucs_rcache_region_t **region_p)
{
    if (ucs_likely(slot != NULL)) {
        if (ucs_unlikely((region == slot->last) ||
                         ((slot->lease != NULL) &&
                          ((slot->hits_fast % UCS_RCACHE_LEASE_CHECK) == 0)))) {
            return ucs_rcache_hit_slot_update(rcache, slot, region, region_p);
        }
        slot->last = region;
    }
    return ucs_rcache_hit_done(rcache, slot, region, region_p);
}

/* The page's hint did not answer: the index (lock-free), else miss. */
static UCS_F_NOINLINE ucs_status_t ucs_rcache_get_indexed(
    ucs_rcache_t *rcache, ucs_pgt_addr_t start, ucs_pgt_addr_t end, int prot,
    void *arg, ucs_rcache_region_t **region_p)
{
    ucs_rcache_region_t *region;

    region =
        (ucs_rcache_region_t *)ucs_range_index_find_racy(&rcache->index, start);
    if ((region != NULL) && (region->super.start > start)) {
        /* the first range ending above start begins after it: a miss
         * (read without a reference: a changed range only sends the
         * request to the locked lookup), no reference taken and put */
        return ucs_rcache_get_miss(rcache, start, end, prot, arg, region_p);
    }
    switch (ucs_rcache_candidate_take(rcache, region, start, end, prot)) {
    case UCS_RCACHE_CANDIDATE_HELD: break;
    case UCS_RCACHE_CANDIDATE_STALE:
        ucs_rcache_region_put(rcache, region);
        /* fall through */
    default:
        return ucs_rcache_get_miss(rcache, start, end, prot, arg, region_p);
    }
    __atomic_store_n(ucs_rcache_hint(rcache, start >> 12), region,
                     __ATOMIC_RELAXED);
    return ucs_rcache_hit_candidate(rcache, ucs_rcache_slot(rcache), region,
                                    region_p);
}

/* The page's hint held a region that failed validation (left in the
 * thread's slot): given back, then the index. */
static UCS_F_NOINLINE ucs_status_t ucs_rcache_get_stale(
    ucs_rcache_t *rcache, ucs_pgt_addr_t start, ucs_pgt_addr_t end, int prot,
    void *arg, ucs_rcache_region_t **region_p)
{
    ucs_rcache_slot_t *slot     = ucs_rcache_slot(rcache);
    ucs_rcache_region_t *region = slot->stale;

    slot->stale = NULL;
    ucs_rcache_region_put(rcache, region);
    return ucs_rcache_get_indexed(rcache, start, end, prot, arg, region_p);
}

/* Not on the thread's lease: the page's hint, then the index.  Every call
 * that is not the end of the hit is a tail call (nothing to keep across it,
 * no registers to save on the way in). */
static UCS_F_ALWAYS_INLINE ucs_status_t ucs_rcache_get_candidates(
    ucs_rcache_t *rcache, ucs_rcache_slot_t *slot, ucs_pgt_addr_t start,
    ucs_pgt_addr_t end, int prot, void *arg, ucs_rcache_region_t **region_p)
{
    ucs_rcache_region_t *region;

    region =
        __atomic_load_n(ucs_rcache_hint(rcache, start >> 12), __ATOMIC_RELAXED);
    switch (ucs_rcache_candidate_take(rcache, region, start, end, prot)) {
    case UCS_RCACHE_CANDIDATE_HELD:
        return ucs_rcache_hit_candidate(rcache, slot, region, region_p);
    case UCS_RCACHE_CANDIDATE_NONE:
        return ucs_rcache_get_indexed(rcache, start, end, prot, arg, region_p);
    default:
        if (ucs_likely(slot != NULL)) { /* a stale hint, given back there */
            slot->stale = region;
            return ucs_rcache_get_stale(rcache, start, end, prot, arg,
                                        region_p);
        }
        ucs_rcache_region_put(rcache, region);
        return ucs_rcache_get_indexed(rcache, start, end, prot, arg, region_p);
    }
}

/* The hit path without the lease, the thread's slot found the slow way
 * (assigned at the thread's first call; NULL: none left). */
static UCS_F_NOINLINE ucs_status_t ucs_rcache_get_unleased(
    ucs_rcache_t *rcache, ucs_pgt_addr_t start, ucs_pgt_addr_t end, int prot,
    void *arg, ucs_rcache_region_t **region_p)
{
    ucs_rcache_slot_t *slot = ucs_rcache_slot(rcache);

    if (ucs_rcache_deferred_unmaps(rcache)) {
        return ucs_rcache_get_miss(rcache, start, end, prot, arg, region_p);
    }
    return ucs_rcache_get_candidates(rcache, slot, start, end, prot, arg,
                                     region_p);
}

/* An unmap was read by the monitor and is not dispatched yet: wait. */
static UCS_F_NOINLINE ucs_status_t ucs_rcache_get_drained(
    ucs_rcache_t *rcache, ucs_pgt_addr_t start, ucs_pgt_addr_t end, int prot,
    void *arg, ucs_rcache_region_t **region_p)
{
    ucm_uffd_drain_wait();
    return ucs_rcache_get_unleased(rcache, start, end, prot, arg, region_p);
}

/* The thread's lease is invalid: dropped (released if unused). */
static UCS_F_NOINLINE ucs_status_t ucs_rcache_get_lease_invalid(
    ucs_rcache_t *rcache, ucs_pgt_addr_t start, ucs_pgt_addr_t end, int prot,
    void *arg, ucs_rcache_region_t **region_p)
{
    ucs_rcache_lease_drop(rcache, ucs_rcache_slot(rcache));
    return ucs_rcache_get_indexed(rcache, start, end, prot, arg, region_p);
}

UCS_F_HOT ucs_status_t ucs_rcache_get(ucs_rcache_t *rcache, void *address,
                                      size_t length, int prot, void *arg,
                                      ucs_rcache_region_t **region_p)
{
    ucs_rcache_region_t *region;
    ucs_rcache_slot_t *slot;
    ucs_pgt_addr_t start, end;
    size_t align_mask;
    unsigned id;

    /* a zero length or an overflow: the end is not above the address;
     * unknown protection bits are refused on the way to a registration
     * (ucs_rcache_get_miss) */
    if (ucs_unlikely((rcache == NULL) || (address == NULL) ||
                     (region_p == NULL) ||
                     ((uintptr_t)address + length <= (uintptr_t)address))) {
        if ((rcache != NULL) && UCS_RCACHE_FOREIGN(rcache)) {
            return ucs_rcache_stock_next_get(rcache, address, length, prot, arg,
                                             region_p);
        }
        return ucs_rcache_get_check(rcache, address, length, region_p);
    }
    if (UCS_RCACHE_FOREIGN(rcache)) {
        return ucs_rcache_stock_next_get(rcache, address, length, prot, arg,
                                         region_p);
    }

    align_mask = rcache->hot.align_mask;
    start      = (uintptr_t)address & ~align_mask;
    end        = ((uintptr_t)address + length + align_mask) & ~align_mask;
    if (ucs_unlikely(end < start)) {
        end = ~align_mask; /* the last aligned block of the address space */
    }

    if (ucs_unlikely(ucm_uffd_draining != 0)) {
        return ucs_rcache_get_drained(rcache, start, end, prot, arg, region_p);
    }
    id = ucs_rcache_tid - 1;
    if (ucs_unlikely(id >= UCS_RCACHE_SLOTS)) {
        return ucs_rcache_get_unleased(rcache, start, end, prot, arg, region_p);
    }
    slot = ucs_rcache_slot_at(rcache, id);
    if (ucs_unlikely(ucs_rcache_deferred_unmaps(rcache))) {
        return ucs_rcache_get_miss(rcache, start, end, prot, arg, region_p);
    }

    /* the thread's lease (a region nobody can release meanwhile), by the
     * range kept in the slot: the region is read only when it may answer
     * (reading it on every get costs random-access workloads ~10%) */
    if ((start >= slot->lease_start) & (end <= slot->lease_end)) {
        region = slot->lease;
        if (ucs_unlikely(!ucs_rcache_region_valid(region))) {
            return ucs_rcache_get_lease_invalid(rcache, start, end, prot, arg,
                                                region_p);
        }
        if (ucs_likely(!(prot & ~region->prot))) {
            ucs_rcache_local_add(&slot->local, 1);
            return ucs_rcache_hit_done(rcache, slot, region, region_p);
        }
    }
    return ucs_rcache_get_candidates(rcache, slot, start, end, prot, arg,
                                     region_p);
}

/* A NULL argument of hold or put: one log line, nothing else. */
static UCS_F_NOINLINE void ucs_rcache_region_null(const char *func,
                                                  ucs_rcache_t *rcache)
{
    ucs_rcache_error("%s: NULL %s", func,
                     (rcache == NULL) ? "rcache" : "region");
}

void ucs_rcache_region_hold(ucs_rcache_t *rcache, ucs_rcache_region_t *region)
{
    if (ucs_unlikely((rcache == NULL) || (region == NULL))) {
        ucs_rcache_region_null("ucs_rcache_region_hold", rcache);
        return;
    }
    if (UCS_RCACHE_FOREIGN(rcache)) {
        ucs_rcache_stock_next_hold(rcache, region);
        return;
    }
    ucs_rcache_atomic_add(&region->refcount, 1);
}

/* After a put: the release of a region that lost its last reference, and
 * the purge of pending tombstones (out of line: the put stays a leaf). */
static UCS_F_NOINLINE void ucs_rcache_put_done(ucs_rcache_t *rcache,
                                               ucs_rcache_region_t *region,
                                               int released)
{
    if (released) {
        ucs_rcache_region_release(rcache, region);
    }
    if (ucs_rcache_atomic_load(&rcache->hot.pending_count) != 0) {
        ucs_rcache_purge(rcache);
    }
}

/* The owner's put of its leased region found it invalid: the lease goes
 * (the region is released if unused). */
static UCS_F_NOINLINE void ucs_rcache_put_lease_invalid(ucs_rcache_t *rcache,
                                                        ucs_rcache_slot_t *slot)
{
    ucs_rcache_lease_drop(rcache, slot);
    ucs_rcache_put_done(rcache, NULL, 0);
}

/* The put's reference: the owner's slot for its leased region (its count
 * carries UCS_RCACHE_LEASE_BIAS), else the region's count; the last one
 * releases the region. */
static UCS_F_ALWAYS_INLINE void ucs_rcache_put_ref(ucs_rcache_t *rcache,
                                                   ucs_rcache_region_t *region)
{
    ucs_rcache_slot_t *slot;
    unsigned id;

    if (ucs_unlikely(__atomic_load_n(&region->refcount, __ATOMIC_RELAXED) >=
                     UCS_RCACHE_LEASE_BIAS / 2)) {
        id = ucs_rcache_tid - 1;
        if ((id < UCS_RCACHE_SLOTS) &&
            ((slot = ucs_rcache_slot_at(rcache, id))->lease == region) &&
            (slot->local != 0)) {
            ucs_rcache_local_add(&slot->local, -1);
            if (ucs_unlikely(!ucs_rcache_region_valid(region))) {
                ucs_rcache_put_lease_invalid(rcache, slot);
            }
            return;
        }
    }
    if (ucs_unlikely(ucs_rcache_atomic_sub(&region->refcount, 1) == 0)) {
        ucs_rcache_put_done(rcache, region, 1);
    }
}

/* A put while tombstones wait for their purge, or of another library's
 * region: that library's cache object (UCX 1.13.1's) has its
 * params.alignment, never 0, where ours has pending_count, so its puts
 * come here and are handed on whole (rcache_stock.c). */
static UCS_F_NOINLINE void ucs_rcache_put_pending(ucs_rcache_t *rcache,
                                                  ucs_rcache_region_t *region)
{
    if (UCS_RCACHE_FOREIGN(rcache)) {
        ucs_rcache_stock_next_put(rcache, region);
        return;
    }
    ucs_rcache_put_ref(rcache, region);
    ucs_rcache_put_done(rcache, NULL, 0);
}

UCS_F_HOT void ucs_rcache_region_put(ucs_rcache_t *rcache,
                                     ucs_rcache_region_t *region)
{
    if (ucs_unlikely((rcache == NULL) || (region == NULL))) {
        ucs_rcache_region_null("ucs_rcache_region_put", rcache);
        return;
    }
    if (ucs_unlikely(ucs_rcache_atomic_load(&rcache->hot.pending_count) != 0)) {
        ucs_rcache_put_pending(rcache, region);
        return;
    }
    ucs_rcache_put_ref(rcache, region);
}

void ucs_rcache_region_invalidate(ucs_rcache_t *rcache,
                                  ucs_rcache_region_t *region,
                                  ucs_rcache_invalidate_comp_func_t cb,
                                  void *arg)
{
    ucs_rcache_comp_t *comp = NULL;

    if ((rcache == NULL) || (region == NULL)) {
        ucs_rcache_region_null("ucs_rcache_region_invalidate", rcache);
        return;
    }
    if (UCS_RCACHE_FOREIGN(rcache)) {
        ucs_rcache_stock_next_invalidate(rcache, region, cb, arg);
        return;
    }
    if (cb != NULL) {
        comp = malloc(sizeof(*comp));
        if (comp == NULL) {
            ucs_rcache_error("%s: no memory for an invalidation callback; "
                             "calling it now",
                             rcache->name);
            cb(arg);
        } else {
            comp->cb  = cb;
            comp->arg = arg;
        }
    }

    ucs_rcache_lock(rcache);
    if (comp != NULL) {
        comp->next = ucs_rcache_region_priv(region)->comps;
        ucs_rcache_region_priv(region)->comps = comp;
    }
    if (region->flags & UCS_RCACHE_REGION_FLAG_PGTABLE) {
        ucs_rcache_region_tombstone_locked(rcache, region);
        rcache->stats.counts.invalidations++;
    }
    ucs_rcache_unlock(rcache);
    ucs_rcache_purge(rcache);
}
