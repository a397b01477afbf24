/*
 * Region life cycle inside the cache: tombstoning (invalidation), purge of
 * tombstones, eviction, and the final deregistration outside every lock.
 */
#include "rcache_int.h"

#include <stdlib.h>

/* Compact the index in one pass when many tombstones are pending. */
#define UCS_RCACHE_PURGE_COMPACT_MIN 8

static void ucs_rcache_lru_remove_locked(ucs_rcache_region_t *region)
{
    if (region->lru_flags & UCS_RCACHE_LRU_FLAG_IN_LRU) {
        ucs_list_del(&region->lru_list);
        region->lru_flags &= ~UCS_RCACHE_LRU_FLAG_IN_LRU;
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
    if (region->flags & UCS_RCACHE_REGION_FLAG_INVALID) {
        return;
    }
    region->flags |= UCS_RCACHE_REGION_FLAG_INVALID;
    ucs_rcache_lru_remove_locked(region);
    rcache->num_regions--;
    rcache->total_size -= ucs_rcache_region_size(region);
    ucs_list_add_tail(&rcache->pending, &region->tmp_list);
    ucs_rcache_atomic_store(&rcache->pending_count, rcache->pending_count + 1);
}

static void ucs_rcache_purge_compact_locked(ucs_rcache_t *rcache)
{
    ucs_range_index_t *index = &rcache->index;
    size_t i, kept = 0;

    for (i = 0; i < index->count; ++i) {
        if (((ucs_rcache_region_t*)index->regions[i])->flags &
            UCS_RCACHE_REGION_FLAG_INVALID) {
            continue;
        }
        index->regions[kept] = index->regions[i];
        index->ends[kept]    = index->ends[i];
        ++kept;
    }
    __atomic_store_n(&index->count, kept, __ATOMIC_RELEASE);
    ucs_range_index_update_tops(index, 0);
}

void ucs_rcache_purge_locked(ucs_rcache_t *rcache, ucs_list_link_t *dead)
{
    ucs_list_link_t *link, *next;
    ucs_rcache_region_t *region;
    int compact;

    if (rcache->pending_count == 0) {
        return;
    }
    compact = rcache->pending_count >= UCS_RCACHE_PURGE_COMPACT_MIN;
    if (compact) {
        ucs_rcache_purge_compact_locked(rcache);
    }
    for (link = rcache->pending.next; link != &rcache->pending; link = next) {
        next   = link->next;
        region = ucs_container_of(link, ucs_rcache_region_t, tmp_list);
        if (!compact) {
            ucs_range_index_remove(&rcache->index, &region->super);
        }
        region->flags &= ~UCS_RCACHE_REGION_FLAG_PGTABLE;
        ucs_rcache_unref_locked(region, dead);
    }
    ucs_list_head_init(&rcache->pending);
    ucs_rcache_atomic_store(&rcache->pending_count, 0);
}

void ucs_rcache_region_drop_locked(ucs_rcache_t *rcache,
                                   ucs_rcache_region_t *region, size_t pos,
                                   ucs_list_link_t *dead)
{
    ucs_range_index_remove_at(&rcache->index, pos);
    ucs_rcache_lru_remove_locked(region);
    region->flags &= ~UCS_RCACHE_REGION_FLAG_PGTABLE;
    rcache->num_regions--;
    rcache->total_size -= ucs_rcache_region_size(region);
    ucs_rcache_unref_locked(region, dead);
}

static int ucs_rcache_over_limits(ucs_rcache_t *rcache)
{
    return (rcache->num_regions > rcache->max_regions) ||
           (rcache->total_size > rcache->max_size);
}

void ucs_rcache_evict_locked(ucs_rcache_t *rcache, int force,
                             ucs_list_link_t *dead)
{
    unsigned long steps = 2 * rcache->num_regions + 1;
    ucs_list_link_t *link, *next;
    ucs_rcache_region_hdr_t *hdr;
    ucs_rcache_region_t *region;
    size_t pos;

    for (link = rcache->lru.next; (link != &rcache->lru) && (steps-- > 0);
         link = next) {
        if (!force && !ucs_rcache_over_limits(rcache)) {
            break;
        }
        next   = link->next;
        region = ucs_container_of(link, ucs_rcache_region_t, lru_list);
        if (ucs_rcache_atomic_load(&region->refcount) != 1) {
            continue; /* in use */
        }
        hdr = ucs_rcache_region_hdr(region);
        if (!force && hdr->referenced) {
            /* hit since the last pass: second chance at the tail */
            hdr->referenced = 0;
            ucs_list_del(&region->lru_list);
            ucs_list_add_tail(&rcache->lru, &region->lru_list);
            continue;
        }
        pos = ucs_range_index_lower(&rcache->index, region->super.start);
        ucs_rcache_region_drop_locked(rcache, region, pos, dead);
        rcache->stats.evictions++;
    }
}

void ucs_rcache_region_release(ucs_rcache_t *rcache,
                               ucs_rcache_region_t *region)
{
    ucs_rcache_region_hdr_t *hdr = ucs_rcache_region_hdr(region);
    ucs_list_link_t comps;
    ucs_rcache_comp_t *comp;

    if ((region->flags & UCS_RCACHE_REGION_FLAG_REGISTERED) &&
        (hdr->fork_gen == rcache->fork_gen)) {
        rcache->params.ops->mem_dereg(rcache->params.context, rcache, region);
        ucs_rcache_atomic_add(&rcache->stats.deregs, 1);
    }
    region->flags &= ~UCS_RCACHE_REGION_FLAG_REGISTERED;

    /* nobody can add completions to a region nobody references any more;
     * the lock orders us after an invalidation that added one */
    ucs_list_head_init(&comps);
    if (!ucs_list_is_empty(&hdr->comps)) {
        pthread_spin_lock(&rcache->lock);
        ucs_list_splice_tail(&comps, &hdr->comps);
        pthread_spin_unlock(&rcache->lock);
    }
    while (!ucs_list_is_empty(&comps)) {
        comp = ucs_container_of(comps.next, ucs_rcache_comp_t, link);
        ucs_list_del(&comp->link);
        comp->cb(comp->arg);
        free(comp);
    }

    ucs_rcache_pfn_release(region);
    ucs_rcache_atomic_sub(&rcache->live_regions, 1);
    /* type-stable: lock-free lookups may still read this memory */
    pthread_spin_lock(&rcache->lock);
    ucs_list_add_tail(&rcache->pool, &region->tmp_list);
    pthread_spin_unlock(&rcache->lock);
}

void ucs_rcache_regions_release(ucs_rcache_t *rcache, ucs_list_link_t *dead)
{
    ucs_rcache_region_t *region;

    while (!ucs_list_is_empty(dead)) {
        region = ucs_container_of(dead->next, ucs_rcache_region_t, tmp_list);
        ucs_list_del(&region->tmp_list);
        ucs_rcache_region_release(rcache, region);
    }
}

void ucs_rcache_purge(ucs_rcache_t *rcache)
{
    ucs_list_link_t dead;

    ucs_list_head_init(&dead);
    pthread_spin_lock(&rcache->lock);
    ucs_rcache_purge_locked(rcache, &dead);
    pthread_spin_unlock(&rcache->lock);
    ucs_rcache_regions_release(rcache, &dead);
}
