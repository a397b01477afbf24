/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Region life cycle inside the cache: tombstoning (invalidation), purge of
 * tombstones, eviction, and the final deregistration outside every lock.
 */
#include "rcache_int.h"

#include <stdlib.h>

static void ucs_rcache_index_remove_locked(ucs_rcache_t *rcache,
                                           ucs_rcache_region_t *region)
{
    ucs_rcache_assert_locked(rcache);
    ucs_range_index_remove_hinted(&rcache->index, &region->super,
                                  ucs_rcache_region_priv(region)->leaf);
}

static void ucs_rcache_lru_remove_locked(ucs_rcache_region_t *region)
{
    if (region->flags & UCS_RCACHE_REGION_FLAG_IN_LRU) {
        ucs_list_del(&region->lru_list);
        region->flags &= ~UCS_RCACHE_REGION_FLAG_IN_LRU;
    }
}

static void ucs_rcache_unref_locked(ucs_rcache_region_t *region,
                                    ucs_list_link_t *dead)
{
    if (ucs_rcache_atomic_sub(&region->refcount, 1) == 0) {
        ucs_list_add_tail(dead, &region->tmp_list);
    }
}

void ucs_rcache_region_tombstone_locked(ucs_rcache_t *rcache,
                                        ucs_rcache_region_t *region)
{
    ucs_rcache_assert_locked(rcache);
    if (region->flags & UCS_RCACHE_REGION_FLAG_INVALID) {
        return;
    }
    region->flags |= UCS_RCACHE_REGION_FLAG_INVALID;
    ucs_rcache_lru_remove_locked(region);
    rcache->limits.num_regions--;
    rcache->limits.total_size -= ucs_rcache_region_size(region);
    rcache->limits.unreleased_size += ucs_rcache_region_size(region);
    ucs_list_add_tail(&rcache->limits.pending, &region->tmp_list);
    ucs_rcache_atomic_store(&rcache->hot.pending_count,
                            rcache->hot.pending_count + 1);
}

void ucs_rcache_tombstone_all_locked(ucs_rcache_t *rcache)
{
    ucs_range_index_iter_t iter;
    ucs_pgt_region_t *r;

    ucs_rcache_assert_locked(rcache);
    for (r = ucs_range_index_lower(&rcache->index, 0, &iter); r != NULL;
         r = ucs_range_index_next(&rcache->index, &iter)) {
        ucs_rcache_region_tombstone_locked(rcache, (ucs_rcache_region_t *)r);
    }
}

void ucs_rcache_purge_pending_locked(ucs_rcache_t *rcache,
                                     ucs_list_link_t *dead)
{
    ucs_list_link_t *link, *next;
    ucs_rcache_region_t *region;

    ucs_rcache_assert_locked(rcache);
    for (link = rcache->limits.pending.next; link != &rcache->limits.pending;
         link = next) {
        next   = link->next;
        region = ucs_container_of(link, ucs_rcache_region_t, tmp_list);
        ucs_rcache_index_remove_locked(rcache, region);
        region->flags &= ~UCS_RCACHE_REGION_FLAG_PGTABLE;
        ucs_rcache_unref_locked(region, dead);
    }
    ucs_list_head_init(&rcache->limits.pending);
    ucs_list_splice_tail(dead, &rcache->limits.orphans);
    rcache->limits.unreleased_size = 0;
    ucs_rcache_atomic_store(&rcache->hot.pending_count, 0);
}

static UCS_F_ALWAYS_INLINE void
ucs_rcache_region_drop_inline(ucs_rcache_t *rcache, ucs_rcache_region_t *region,
                              ucs_list_link_t *dead)
{
    ucs_rcache_index_remove_locked(rcache, region);
    ucs_rcache_lru_remove_locked(region);
    region->flags &= ~UCS_RCACHE_REGION_FLAG_PGTABLE;
    rcache->limits.num_regions--;
    rcache->limits.total_size -= ucs_rcache_region_size(region);
    ucs_rcache_unref_locked(region, dead);
}

void ucs_rcache_region_drop_locked(ucs_rcache_t *rcache,
                                   ucs_rcache_region_t *region,
                                   ucs_list_link_t *dead)
{
    ucs_rcache_assert_locked(rcache);
    ucs_rcache_region_drop_inline(rcache, region, dead);
}

static UCS_F_ALWAYS_INLINE void
ucs_rcache_evict_inline(ucs_rcache_t *rcache, int force,
                        unsigned long extra_regions, size_t extra_size,
                        ucs_list_link_t *dead)
{
    unsigned long steps = 2 * rcache->limits.num_regions + 1;
    ucs_list_link_t *link, *next;
    ucs_rcache_region_t *region;

    for (link = rcache->limits.lru.next;
         (link != &rcache->limits.lru) && (steps-- > 0); link = next) {
        if (!force && !ucs_rcache_limits_over(&rcache->limits, extra_regions,
                                              extra_size)) {
            break;
        }
        next   = link->next;
        region = ucs_container_of(link, ucs_rcache_region_t, lru_list);
        if (ucs_rcache_atomic_load(&region->refcount) != 1) {
            continue; /* in use */
        }
        if (!force && region->lru_flags) {
            /* hit since the last pass: second chance at the tail */
            region->lru_flags = 0;
            ucs_list_del(&region->lru_list);
            ucs_list_add_tail(&rcache->limits.lru, &region->lru_list);
            continue;
        }
        ucs_rcache_region_drop_inline(rcache, region, dead);
        rcache->stats.counts.evictions++;
    }
    if (!force &&
        (rcache->limits.num_regions + extra_regions + 1 >
         rcache->limits.max_regions) &&
        !ucs_list_is_empty(&rcache->limits.lru)) {
        /* the next miss evicts it: fetch its lines meanwhile */
        region = ucs_container_of(rcache->limits.lru.next, ucs_rcache_region_t,
                                  lru_list);
        __builtin_prefetch(region, 1);
        __builtin_prefetch(
            (char *)region + offsetof(ucs_rcache_region_t, refcount), 1);
    }
}

void ucs_rcache_evict_locked(ucs_rcache_t *rcache, int force,
                             ucs_list_link_t *dead)
{
    ucs_rcache_assert_locked(rcache);
    ucs_rcache_evict_inline(rcache, force, 0, 0, dead);
}

void ucs_rcache_evict_room_locked(ucs_rcache_t *rcache, size_t size,
                                  ucs_list_link_t *dead)
{
    ucs_rcache_assert_locked(rcache);
    ucs_rcache_evict_inline(rcache, 0, 1, size, dead);
}

/* Everything of a release but the return to the pool; 1 if it called
 * mem_dereg (counted by the caller under the lock). */
static UCS_F_ALWAYS_INLINE int
ucs_rcache_region_finish(ucs_rcache_t *rcache, ucs_rcache_region_t *region)
{
    ucs_rcache_region_priv_t *priv = ucs_rcache_region_priv(region);
    ucs_rcache_comp_t *comps       = NULL, *comp, *next;
    int dereg                      = 0;

    if ((region->flags & UCS_RCACHE_REGION_FLAG_REGISTERED) &&
        (priv->fork_gen == rcache->fork.gen)) {
        rcache->params.ops->mem_dereg(rcache->params.context, rcache, region);
        dereg = 1;
        if (region->flags & UCS_RCACHE_REGION_FLAG_DONTFORK) {
            ucs_rcache_dontfork_remove(region->super.start, region->super.end);
        }
    }
    region->flags &=
        ~(UCS_RCACHE_REGION_FLAG_REGISTERED | UCS_RCACHE_REGION_FLAG_DONTFORK);

    /* nobody can add completions to a region nobody references any more;
     * the lock orders us after an invalidation that added one */
    if (priv->comps != NULL) {
        ucs_rcache_lock(rcache);
        /* newest first: reversed, so that they run in the order given */
        for (comp = priv->comps; comp != NULL; comp = next) {
            next       = comp->next;
            comp->next = comps;
            comps      = comp;
        }
        priv->comps = NULL;
        ucs_rcache_unlock(rcache);
    }
    for (comp = comps; comp != NULL; comp = next) {
        next = comp->next;
        comp->cb(comp->arg);
        free(comp);
    }

    ucs_rcache_pfn_release(rcache, region);
    return dereg;
}

void ucs_rcache_region_release(ucs_rcache_t *rcache,
                               ucs_rcache_region_t *region)
{
    int dereg = ucs_rcache_region_finish(rcache, region);

    /* type-stable: lock-free lookups may still read this memory */
    ucs_rcache_lock(rcache);
    ucs_list_add_tail(&rcache->pool.free_list, &region->tmp_list);
    ucs_rcache_atomic_add(&rcache->stats.counts.deregs, dereg);
    --rcache->pool.live_regions;
    ucs_rcache_unlock(rcache);
}

void ucs_rcache_regions_release_all(ucs_rcache_t *rcache, ucs_list_link_t *dead)
{
    unsigned long count = 0, deregs = 0;
    ucs_list_link_t *link;

    for (link = dead->next; link != dead; link = link->next) {
        deregs += ucs_rcache_region_finish(
            rcache, ucs_container_of(link, ucs_rcache_region_t, tmp_list));
        ++count;
    }
    /* all of them back to the pool in one section */
    ucs_rcache_lock(rcache);
    ucs_list_splice_tail(&rcache->pool.free_list, dead);
    ucs_rcache_atomic_add(&rcache->stats.counts.deregs, deregs);
    rcache->pool.live_regions -= count;
    ucs_rcache_unlock(rcache);
}

void ucs_rcache_regions_recycle_all(ucs_rcache_t *rcache, ucs_list_link_t *dead)
{
    unsigned long deregs = 0;
    ucs_list_link_t *link, *next;
    ucs_rcache_region_t *region;

    for (link = dead->next; link != dead; link = next) {
        next   = link->next;
        region = ucs_container_of(link, ucs_rcache_region_t, tmp_list);
        if (ucs_rcache_region_priv(region)->comps != NULL) {
            continue; /* its callbacks run with no lock held */
        }
        ucs_list_del(link);
        deregs += ucs_rcache_region_finish(rcache, region);
        ucs_list_add_tail(&rcache->pool.spare, link);
        ++rcache->pool.spare_count;
    }
    /* the path's own count: one writer, no locked instruction */
    __atomic_store_n(&rcache->stats.path_deregs,
                     rcache->stats.path_deregs + deregs, __ATOMIC_RELAXED);
}

void ucs_rcache_purge(ucs_rcache_t *rcache)
{
    ucs_list_link_t dead;

    ucs_list_head_init(&dead);
    ucs_rcache_lock(rcache);
    ucs_rcache_purge_locked(rcache, &dead);
    ucs_rcache_unlock(rcache);
    ucs_rcache_regions_release(rcache, &dead);
}
