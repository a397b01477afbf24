/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Per-thread slots of the registration cache and the leases they hold
 * (biased reference counting, see "leases" in rcache_slot.h).
 *
 * A thread gets a process-wide slot number at its first cache call (one of
 * UCS_RCACHE_SLOTS; later threads run without one, on atomics only) and
 * gives it back at exit, after dropping its leases in every live cache.
 */
#include "rcache_int.h"

#include <pthread.h>

/* 0: not assigned yet; 1..UCS_RCACHE_SLOTS: slot + 1; else none */
__thread unsigned ucs_rcache_tid __attribute__((tls_model("initial-exec")));

static uint64_t ucs_rcache_slot_map; /* atomic: slots in use */
static pthread_key_t ucs_rcache_slot_key;
static pthread_once_t ucs_rcache_slot_once = PTHREAD_ONCE_INIT;
static int ucs_rcache_slot_key_ok;

static void ucs_rcache_slot_exit(void *arg)
{
    unsigned slot = ucs_rcache_tid - 1;

    (void)arg;
    ucs_rcache_tid = UCS_RCACHE_NO_SLOT; /* later calls of this thread */
    if (slot >= UCS_RCACHE_SLOTS) {
        return;
    }
    ucs_rcache_fork_drop_leases(slot);
    __atomic_fetch_and(&ucs_rcache_slot_map, ~(1ull << slot), __ATOMIC_RELEASE);
}

/* A forked child has only the thread that forked. */
static void ucs_rcache_slot_fork_child(void)
{
    unsigned slot = ucs_rcache_tid - 1;

    ucs_rcache_slot_map = (slot < UCS_RCACHE_SLOTS) ? (1ull << slot) : 0;
}

static void ucs_rcache_slot_init(void)
{
    ucs_rcache_slot_key_ok =
        (pthread_key_create(&ucs_rcache_slot_key, ucs_rcache_slot_exit) == 0) &&
        (pthread_atfork(NULL, NULL, ucs_rcache_slot_fork_child) == 0);
}

ucs_rcache_slot_t *ucs_rcache_slot_assign(ucs_rcache_t *rcache)
{
    uint64_t map;
    unsigned slot;

    if (ucs_rcache_tid != 0) {
        return NULL; /* none left when this thread came, or exiting */
    }
    ucs_rcache_tid = UCS_RCACHE_NO_SLOT;
    pthread_once(&ucs_rcache_slot_once, ucs_rcache_slot_init);
    if (!ucs_rcache_slot_key_ok) {
        return NULL; /* no exit callback: the slot would never come back */
    }
    map = __atomic_load_n(&ucs_rcache_slot_map, __ATOMIC_RELAXED);
    do {
        if (map == UINT64_MAX) {
            return NULL;
        }
        slot = __builtin_ctzll(~map);
    } while (!__atomic_compare_exchange_n(&ucs_rcache_slot_map, &map,
                                          map | (1ull << slot), 1,
                                          __ATOMIC_ACQUIRE, __ATOMIC_RELAXED));
    if (pthread_setspecific(ucs_rcache_slot_key, (void *)1) != 0) {
        __atomic_fetch_and(&ucs_rcache_slot_map, ~(1ull << slot),
                           __ATOMIC_RELEASE);
        return NULL;
    }
    ucs_rcache_tid = slot + 1;
    return &rcache->slots[slot];
}

void ucs_rcache_lease_take(ucs_rcache_t *rcache, ucs_rcache_slot_t *slot,
                           ucs_rcache_region_t *region)
{
    ucs_rcache_lease_drop(rcache, slot);
    /* the caller's reference becomes the slot's first local hold */
    ucs_rcache_atomic_add(&region->refcount, UCS_RCACHE_LEASE_BIAS - 1);
    slot->local       = 1;
    slot->lease       = region;
    slot->lease_start = region->super.start;
    slot->lease_end   = region->super.end;
}

/* Give the bias back, the slot's local holds becoming plain references:
 * the count left (0: the region is out of the index and unused), nonzero
 * if there was no lease. */
static uint32_t ucs_rcache_lease_fold(ucs_rcache_t *rcache,
                                      ucs_rcache_slot_t *slot,
                                      ucs_rcache_region_t **region_p)
{
    ucs_rcache_region_t *region = slot->lease;
    uint32_t local              = slot->local;

    *region_p = region;
    if (region == NULL) {
        return 1;
    }
    slot->lease     = NULL;
    slot->local     = 0;
    slot->lease_end = 0; /* no range matches */
    /* it was hot: keep it from being the next LRU victim */
    region->lru_flags = 1; /* referenced */
    return ucs_rcache_atomic_sub(&region->refcount,
                                 UCS_RCACHE_LEASE_BIAS - local);
}

void ucs_rcache_lease_drop(ucs_rcache_t *rcache, ucs_rcache_slot_t *slot)
{
    ucs_rcache_region_t *region;

    if (ucs_rcache_lease_fold(rcache, slot, &region) == 0) {
        ucs_rcache_region_release(rcache, region); /* out of the index */
    }
}

void ucs_rcache_lease_drop_locked(ucs_rcache_t *rcache, ucs_rcache_slot_t *slot)
{
    ucs_rcache_assert_locked(rcache);
    ucs_rcache_region_t *region;

    if (ucs_rcache_lease_fold(rcache, slot, &region) == 0) {
        /* released by the next purge, outside the lock */
        ucs_list_add_tail(&rcache->limits.orphans, &region->tmp_list);
        ucs_rcache_atomic_store(&rcache->hot.pending_count,
                                rcache->hot.pending_count + 1);
    }
}

void ucs_rcache_leases_drop_all_locked(ucs_rcache_t *rcache)
{
    unsigned i;

    ucs_rcache_assert_locked(rcache);
    for (i = 0; i < UCS_RCACHE_SLOTS; ++i) {
        ucs_rcache_lease_drop_locked(rcache, &rcache->slots[i]);
    }
}
