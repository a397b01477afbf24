/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The memory of the registration cache's regions: blocks ("slabs") that
 * regions are carved from, and the lists of regions out of use that the
 * miss path takes before it carves a new one.  Region memory is
 * type-stable: a region goes back to a list, never to the system, until
 * destroy frees every block (lock-free lookups may read any region at any
 * time).
 *
 * Contract, per field:
 *  - free_list: regions released by any path; under the cache's lock;
 *  - spare, spare_count: regions the registration path released itself
 *    (rcache_region.c) and reuses first, without the lock; written only
 *    by the path's owner (and by destroy, which owns it);
 *  - slabs: the blocks, newest first (the newest is carved from); pushed
 *    under the lock by the path's owner, freed by destroy;
 *  - live_regions: regions handed out and not back in free_list (spare
 *    ones count); under the lock; destroy reports any left.
 * Functions:
 *  - ucs_rcache_pool_pop_locked(): the lock held; a region of free_list
 *    (now live), or NULL;
 *  - ucs_rcache_pool_spare_pop(): the registration path owned; a region of
 *    spare (the last released: likeliest in the CPU cache), or NULL;
 *  - ucs_rcache_slab_alloc() (rcache_pool.c): the registration path owned,
 *    no lock held (takes it); a region never used before, zeroed, now
 *    live; NULL on no memory (no log line: the caller's);
 *  - ucs_rcache_slabs_free() (rcache_pool.c): destroy, no region in use.
 */
#ifndef UCS_RCACHE_POOL_H_
#define UCS_RCACHE_POOL_H_

#include <ucs/memory/rcache.h>

/* Regions are carved from blocks of this many (once the cache holds a
 * huge page of regions: blocks of a huge page), freed at destroy. */
#define UCS_RCACHE_SLAB_REGIONS 64

typedef struct ucs_rcache_pool {
    ucs_list_link_t free_list; /* free regions (tmp_list) */
    ucs_list_link_t spare;     /* (registration path), still live */
    unsigned long spare_count; /* (registration path) */
    struct ucs_rcache_slab *slabs;
    unsigned long live_regions; /* allocated, not yet freed (lock) */
} ucs_rcache_pool_t;

#pragma GCC visibility push(hidden)

ucs_rcache_region_t *ucs_rcache_slab_alloc(ucs_rcache_t *rcache);
void ucs_rcache_slabs_free(ucs_rcache_t *rcache);

#pragma GCC visibility pop

static inline ucs_rcache_region_t *
ucs_rcache_pool_pop_locked(ucs_rcache_pool_t *pool)
{
    ucs_rcache_region_t *region;

    if (ucs_list_is_empty(&pool->free_list)) {
        return NULL;
    }
    region =
        ucs_container_of(pool->free_list.prev, ucs_rcache_region_t, tmp_list);
    ucs_list_del(&region->tmp_list);
    ++pool->live_regions;
    return region;
}

static inline ucs_rcache_region_t *
ucs_rcache_pool_spare_pop(ucs_rcache_pool_t *pool)
{
    ucs_rcache_region_t *region;

    if (ucs_list_is_empty(&pool->spare)) {
        return NULL;
    }
    region = ucs_container_of(pool->spare.prev, ucs_rcache_region_t, tmp_list);
    ucs_list_del(&region->tmp_list);
    --pool->spare_count; /* stays in live_regions */
    return region;
}

#endif
