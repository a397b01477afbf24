/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The registration cache's statistics: the counters that
 * ucs_rcache_query_stats() (rcache_stats.c, rcache_ext.h) adds up.
 *
 * Contract, per field:
 *  - counts: under the cache's lock, except deregs, stale_pfn and cleanups
 *    (atomic adds: released regions, CHECK_PFN hits and the cleanup thread
 *    count without it); its regions, total_size and unreleased are not
 *    kept here but filled by the query from limits (rcache_limits.h);
 *  - path_deregs: the registration path's own mem_dereg calls, one writer
 *    (the path's owner, a plain store), read atomic by the query; not in
 *    counts.deregs;
 *  - hits_fast_shared: lock-free hits of threads without a slot
 *    (rcache_slot.c), atomic adds; the hits of threads with a slot are
 *    counted in their slot (slot->hits_fast).
 * The query takes the lock and is not for hook context.
 */
#ifndef UCS_RCACHE_STATS_H_
#define UCS_RCACHE_STATS_H_

#include <ucs/memory/rcache_ext.h>
#include <stdint.h>

typedef struct ucs_rcache_counters {
    ucs_rcache_stats_t counts;
    uint64_t path_deregs;
    uint64_t hits_fast_shared;
} ucs_rcache_counters_t;

#endif
