/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Registration path of ucs_rcache_get() (a miss): merge with overlapping and
 * adjacent regions, check protection against the mappings, register with no
 * spinlock held, retry unmerged / after eviction, and insert.
 */
#include "rcache_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Registrations redone because their range was unmapped meanwhile. */
#define UCS_RCACHE_INFLIGHT_RETRIES 16

typedef struct {
    ucs_pgt_addr_t start, end;
    int prot;
    int merged;
} ucs_rcache_span_t;

/* One walk over the regions the request overlaps or touches: the valid
 * region that covers it with its protection (a hit: returned, span left
 * as it was), or NULL with span grown to their union. */
static ucs_rcache_region_t *
ucs_rcache_lookup_merge_locked(ucs_rcache_t *rcache, ucs_rcache_span_t *span)
{
    ucs_range_index_t *index = &rcache->index;
    ucs_pgt_addr_t start = span->start, end = span->end;
    int prot = span->prot;
    ucs_rcache_region_t *region;
    ucs_range_index_iter_t iter;
    ucs_pgt_region_t *r;

    ucs_rcache_assert_locked(rcache);
    for (r = ucs_range_index_lower(index, start ? start - 1 : 0, &iter);
         (r != NULL) && (r->start <= end);
         r = ucs_range_index_next(index, &iter)) {
        if (r->end < start) {
            continue;
        }
        region = (ucs_rcache_region_t *)r;
        if ((r->start <= start) && (end <= r->end) && !(prot & ~region->prot) &&
            !(region->flags & UCS_RCACHE_REGION_FLAG_INVALID)) {
            *span = (ucs_rcache_span_t){start, end, prot, 0};
            return region;
        }
        span->start = ucs_min(span->start, r->start);
        span->end   = ucs_max(span->end, r->end);
        span->prot |= region->prot;
        span->merged = 1;
    }
    return NULL;
}

static void ucs_rcache_inflight_clear(ucs_rcache_t *rcache)
{
    ucs_rcache_lock(rcache);
    ucs_rcache_inflight_clear_locked(&rcache->inflight);
    ucs_rcache_unlock(rcache);
}

/* Make room for one more entry; only the registration path (owned)
 * inserts, so the room stays until the insertion (removals only
 * add free nodes). */
static ucs_status_t ucs_rcache_index_reserve(ucs_rcache_t *rcache,
                                             unsigned need)
{
    ucs_range_index_spare_t spare = {NULL};
    ucs_status_t status;

    if (ucs_range_index_free_nodes(&rcache->index) >= need) {
        return UCS_OK;
    }
    status = ucs_range_index_grow_alloc(&rcache->index, &spare);
    if (status != UCS_OK) {
        return status;
    }
    ucs_rcache_lock(rcache);
    ucs_range_index_grow_install(&rcache->index, &spare);
    ucs_rcache_unlock(rcache);
    ucs_range_index_spare_free(&spare);
    return UCS_OK;
}

/* Initialize a recycled region (if given) or a new one. */
static ucs_rcache_region_t *
ucs_rcache_region_alloc(ucs_rcache_t *rcache, ucs_rcache_region_t *recycled)
{
    ucs_rcache_region_t *region = recycled;

    if (region == NULL) {
        region = ucs_rcache_slab_alloc(rcache);
        if (region == NULL) {
            return NULL;
        }
    }
    /* refcount is 0 and stays 0: racing lookups cannot take it */
    memset(region, 0, rcache->hot.stride);
    ucs_rcache_region_priv(region)->fork_gen = rcache->fork.gen;
    return region;
}

/* mem_reg of span with the in-flight range published to the unmap handler. */
static UCS_F_ALWAYS_INLINE ucs_status_t
ucs_rcache_register(ucs_rcache_t *rcache, ucs_rcache_region_t *region,
                    const ucs_rcache_span_t *span, void *arg, uint16_t flags)
{
    ucs_status_t status;

    region->super.start = span->start;
    region->super.end   = span->end;
    region->prot        = span->prot;
    region->status      = UCS_INPROGRESS;

    /* only the registration path (owned) writes the range */
    if (!ucs_rcache_inflight_is(&rcache->inflight, span->start, span->end)) {
        ucs_rcache_lock(rcache);
        ucs_rcache_inflight_set_locked(&rcache->inflight, span->start,
                                       span->end);
        ucs_rcache_unlock(rcache);
    }
    /* subscribed before mem_reg: an unmap meanwhile marks inflight */
    ucs_rcache_uffd_subscribe(&rcache->uffd, span->start, span->end);

    /* mark before pinning: a fork in between must not share the pages */
    status = rcache->dontfork ? ucs_rcache_dontfork_add(span->start, span->end)
                              : UCS_OK;
    if (status == UCS_OK) {
        status = rcache->params.ops->mem_reg(rcache->params.context, rcache,
                                             arg, region, flags);
        if ((status != UCS_OK) && rcache->dontfork) {
            ucs_rcache_dontfork_remove(span->start, span->end);
        }
    }
    region->status = status;
    if (status == UCS_OK) {
        region->flags |=
            UCS_RCACHE_REGION_FLAG_REGISTERED |
            (rcache->dontfork ? UCS_RCACHE_REGION_FLAG_DONTFORK : 0);
    } else {
        ucs_rcache_lock(rcache);
        rcache->stats.counts.reg_failures++;
        ucs_rcache_inflight_clear_locked(&rcache->inflight);
        ucs_rcache_unlock(rcache);
    }
    return status;
}

/* Register merged, else unmerged, else after evicting every unused region. */
static ucs_status_t ucs_rcache_register_retry(ucs_rcache_t *rcache,
                                              ucs_rcache_region_t *region,
                                              ucs_rcache_span_t *span,
                                              const ucs_rcache_span_t *request,
                                              void *arg)
{
    ucs_list_link_t dead;
    ucs_status_t status;

    if (span->merged) {
        status = ucs_rcache_register(rcache, region, span, arg,
                                     UCS_RCACHE_MEM_REG_HIDE_ERRORS);
        if (status == UCS_OK) {
            return UCS_OK;
        }
        *span = *request;
    }
    status = ucs_rcache_register(rcache, region, span, arg,
                                 UCS_RCACHE_MEM_REG_HIDE_ERRORS);
    if (status == UCS_OK) {
        return UCS_OK;
    }

    ucs_list_head_init(&dead);
    ucs_rcache_lock(rcache);
    ucs_rcache_evict_locked(rcache, 1, &dead);
    ucs_rcache_unlock(rcache);
    ucs_rcache_regions_release(rcache, &dead);

    status = ucs_rcache_register(rcache, region, span, arg, 0);
    if (status != UCS_OK) {
        ucs_rcache_error(
            "%s: registration of [0x%lx, 0x%lx) " UCS_RCACHE_PROT_FMT
            " failed after evicting unused "
            "regions: %s",
            rcache->name, span->start, span->end,
            UCS_RCACHE_PROT_ARG(span->prot), ucs_status_string(status));
    }
    return status;
}

/* Under the lock: replace every region intersecting the new one by it. */
static void ucs_rcache_insert_locked(ucs_rcache_t *rcache,
                                     ucs_rcache_region_t *region, int overlaps,
                                     ucs_list_link_t *dead)
{
    ucs_range_index_t *index = &rcache->index;
    ucs_range_index_iter_t iter;
    ucs_rcache_region_t *old;
    int merged = 0;

    ucs_rcache_assert_locked(rcache);
    /* without overlaps at the walk nothing can overlap now: only this path
     * (owned) inserts */
    while (overlaps &&
           ((old = (ucs_rcache_region_t *)ucs_range_index_lower(
                 index, region->super.start, &iter)) != NULL) &&
           (old->super.start < region->super.end)) {
        ucs_rcache_region_drop_locked(rcache, old, dead);
        merged = 1;
    }
    rcache->stats.counts.merges += merged;

    region->flags |=
        UCS_RCACHE_REGION_FLAG_PGTABLE | UCS_RCACHE_REGION_FLAG_IN_LRU;
    region->lru_flags = 0; /* not referenced */
    /* the index and the caller; from now on lookups may take it */
    ucs_rcache_atomic_store(&region->refcount, 2);
    ucs_rcache_region_priv(region)->leaf =
        ucs_range_index_insert(index, &region->super);
    ucs_list_add_tail(&rcache->limits.lru, &region->lru_list);
    rcache->limits.num_regions++;
    rcache->limits.total_size += ucs_rcache_region_size(region);
    rcache->stats.counts.misses++;
    if (ucs_rcache_limits_over(&rcache->limits, 0, 0)) {
        /* room was made before the registration, unless the mappings had
         * to be read or the regions to evict were in use then */
        ucs_rcache_evict_locked(rcache, 0, dead);
    }
}

/* Let the lock go, the registration path too unless dead regions are left
 * for its owner (then *owned stays 1). */
static void ucs_rcache_unlock_give_if_done(ucs_rcache_t *rcache,
                                           ucs_list_link_t *dead, int *owned)
{
    if (!ucs_list_is_empty(dead)) {
        ucs_rcache_unlock(rcache);
        return;
    }
    *owned = 0;
    ucs_rcache_regpath_give_unlock(rcache);
}

/* Takes the registration path in its first locked section; gives it back
 * in its last one when nothing is left to do (*owned = 0), else leaves it
 * to the caller. */
static ucs_status_t ucs_rcache_get_locked_path(ucs_rcache_t *rcache,
                                               const ucs_rcache_span_t *request,
                                               void *arg, ucs_list_link_t *dead,
                                               int *owned,
                                               ucs_rcache_region_t **region_p)
{
    ucs_rcache_region_t *region, *recycled;
    ucs_rcache_span_t span;
    ucs_status_t status;
    unsigned long nregions;
    unsigned need;
    int retries, prot_ok, overlaps;

    for (retries = 0; retries < UCS_RCACHE_INFLIGHT_RETRIES; ++retries) {
        span = *request;
        ucs_rcache_lock(rcache);
        if (retries == 0) {
            ucs_rcache_regpath_take_locked(rcache);
            rcache->stats.counts.gets++;
        }
        ucs_rcache_purge_locked(rcache, dead);
        region = ucs_rcache_lookup_merge_locked(rcache, &span);
        if (region != NULL) {
            ucs_rcache_atomic_add(&region->refcount, 1);
            rcache->stats.counts.hits_slow++;
            ucs_rcache_unlock_give_if_done(rcache, dead, owned);
            *region_p = region;
            return UCS_OK;
        }
        /* gather in this one section what the miss needs from the cache,
         * and make room for it when the mappings known allow the request
         * (a bad one evicts nothing): the regions evicted are deregistered
         * before the registration, the path owned, no lock held */
        overlaps = span.merged;
        prot_ok  = ucs_rcache_prot_cached_locked(rcache, span.start, span.end,
                                                 span.prot);
        if (prot_ok) {
            ucs_rcache_evict_room_locked(rcache, span.end - span.start, dead);
        }
        need     = ucs_range_index_insert_needs(&rcache->index);
        nregions = rcache->limits.num_regions + 1;
        ucs_rcache_assert_locked(rcache);
        recycled =
            (ucs_list_is_empty(&rcache->pool.spare) && ucs_list_is_empty(dead))
                ? ucs_rcache_pool_pop_locked(&rcache->pool)
                : NULL;
        ucs_rcache_inflight_set_locked(&rcache->inflight, span.start, span.end);
        ucs_rcache_uffd_span_check_locked(&rcache->uffd, span.start, span.end,
                                          rcache->maps.unmaps);
        ucs_rcache_unlock(rcache);

        ucs_rcache_regions_recycle(rcache, dead);
        if (recycled == NULL) {
            recycled = ucs_rcache_pool_spare_pop(&rcache->pool);
        }
        if (ucs_unlikely(ucs_rcache_cleanup_start(rcache) != UCS_OK)) {
            /* said why; the next operations purge instead */
            rcache->limits.max_unreleased = SIZE_MAX;
        }

        if (!prot_ok &&
            !ucs_rcache_prot_check(rcache, span.start, span.end, span.prot)) {
            if (!span.merged ||
                !ucs_rcache_prot_check(rcache, request->start, request->end,
                                       request->prot)) {
                ucs_rcache_error("%s: [0x%lx, 0x%lx) is not mapped with "
                                 "access " UCS_RCACHE_PROT_FMT,
                                 rcache->name, request->start, request->end,
                                 UCS_RCACHE_PROT_ARG(request->prot));
                status = UCS_ERR_INVALID_ADDR;
                goto err_recycle;
            }
            span = *request; /* merging would add rights the pages lack */
        }

        status = ucs_rcache_index_reserve(rcache, need);
        if (status != UCS_OK) {
            goto err_recycle;
        }
        if ((UCS_RCACHE_HINTS_PER_REGION * nregions) >
            rcache->hot.hints->mask + 1) {
            ucs_rcache_hints_grow(rcache, nregions);
        }
        region = ucs_rcache_region_alloc(rcache, recycled);
        if (region == NULL) {
            ucs_rcache_error("%s: no memory for a region", rcache->name);
            ucs_rcache_inflight_clear(rcache);
            return UCS_ERR_NO_MEMORY;
        }
        status = ucs_rcache_register_retry(rcache, region, &span, request, arg);
        if (status != UCS_OK) {
            ucs_rcache_region_release(rcache, region);
            return status;
        }
        if (rcache->hot.check_pfn) {
            ucs_rcache_pfn_record(rcache, region);
        }

        ucs_rcache_lock(rcache);
        ucs_rcache_inflight_clear_locked(&rcache->inflight);
        rcache->stats.counts.regs++;
        ucs_rcache_uffd_span_update_locked(&rcache->uffd, rcache->maps.unmaps);
        if (!ucs_rcache_inflight_invalidated_locked(&rcache->inflight)) {
            ucs_rcache_purge_locked(rcache, dead);
            ucs_rcache_insert_locked(rcache, region, overlaps, dead);
            ucs_rcache_unlock_give_if_done(rcache, dead, owned);
            *region_p = region;
            return UCS_OK;
        }
        ucs_rcache_unlock(rcache);
        /* pages went away during mem_reg: the registration may be stale */
        ucs_rcache_region_release(rcache, region);
    }

    ucs_rcache_error("%s: [0x%lx, 0x%lx) kept being unmapped while it was "
                     "registered",
                     rcache->name, request->start, request->end);
    return UCS_ERR_INVALID_ADDR;

err_recycle:
    ucs_rcache_lock(rcache);
    ucs_rcache_inflight_clear_locked(&rcache->inflight);
    if (recycled != NULL) {
        ucs_list_add_tail(&rcache->pool.free_list, &recycled->tmp_list);
        --rcache->pool.live_regions;
    }
    ucs_rcache_unlock(rcache);
    return status;
}

ucs_status_t ucs_rcache_get_slow(ucs_rcache_t *rcache, ucs_pgt_addr_t start,
                                 ucs_pgt_addr_t end, int prot, void *arg,
                                 ucs_rcache_region_t **region_p)
{
    ucs_rcache_span_t request = {start, end, prot, 0};
    ucs_list_link_t dead;
    ucs_status_t status;
    int owned = 1;

    ucs_list_head_init(&dead);
    status = ucs_rcache_get_locked_path(rcache, &request, arg, &dead, &owned,
                                        region_p);
    if (owned) {
        /* regions purged or evicted at the end: mem_dereg here (not under a
         * lock the hooks or lookups take), reused by the next miss */
        ucs_rcache_regions_recycle(rcache, &dead);
        ucs_rcache_regpath_release(rcache);
    }
    ucs_rcache_regions_release(rcache, &dead);
    return status;
}
