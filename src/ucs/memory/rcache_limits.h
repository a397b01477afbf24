/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the registration cache holds, counted against its limits: the valid
 * regions (LRU list, count, bytes; MAX_REGIONS and MAX_SIZE evict from the
 * LRU) and the tombstones (pending, orphans, bytes; MAX_UNRELEASED wakes
 * the cleanup thread).
 *
 * Contract:
 *  - max_*: the effective limits (params and UCX_RCACHE_*), set at create;
 *    max_unreleased is set to SIZE_MAX by the registration path when the
 *    cleanup thread cannot start (then the next operations purge);
 *  - everything else: under the cache's lock.  Written by the miss path
 *    (insertion, rcache_get.c), by tombstoning, purging and eviction
 *    (rcache_region.c) and by a lease's last drop (orphans, rcache_slot.c);
 *    read by the unmap handler (hook context) and the statistics query;
 *  - hot.pending_count (rcache_int.h) counts pending + orphans, so that
 *    lock-free paths see tombstones without reading these lists;
 *  - ucs_rcache_limits_over(): the lock held.
 */
#ifndef UCS_RCACHE_LIMITS_H_
#define UCS_RCACHE_LIMITS_H_

#include <ucs/datastruct/list.h>
#include <stddef.h>

typedef struct ucs_rcache_limits {
    unsigned long max_regions; /* effective limits */
    size_t max_size;
    size_t max_unreleased;
    ucs_list_link_t lru;       /* valid regions, least recent first */
    unsigned long num_regions; /* valid regions in the index */
    size_t total_size;         /* their bytes */
    ucs_list_link_t pending;   /* tombstones still in the index */
    ucs_list_link_t orphans;   /* out of the index, last lease
                                  dropped under the lock: release */
    size_t unreleased_size;    /* bytes of pending tombstones */
} ucs_rcache_limits_t;

/* Whether the cache is over its limits with room made for extra_regions
 * more regions of extra_size bytes. */
static inline int ucs_rcache_limits_over(const ucs_rcache_limits_t *limits,
                                         unsigned long extra_regions,
                                         size_t extra_size)
{
    return (limits->num_regions + extra_regions > limits->max_regions) ||
           (limits->total_size + extra_size > limits->max_size);
}

#endif
