/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Statistics query and print (rcache_ext.h).
 */
#include "rcache_int.h"

ucs_status_t ucs_rcache_query_stats(ucs_rcache_t *rcache,
                                    ucs_rcache_stats_t *stats)
{
    ucs_rcache_stats_t tmp;
    uint64_t hits;
    unsigned i;

    if ((rcache == NULL) || (stats == NULL)) {
        ucs_rcache_error("ucs_rcache_query_stats: NULL %s",
                         (rcache == NULL) ? "rcache" : "stats");
        return UCS_ERR_INVALID_PARAM;
    }
    ucs_rcache_lock(rcache);
    tmp            = rcache->stats.counts;
    tmp.regions    = rcache->limits.num_regions;
    tmp.total_size = rcache->limits.total_size;
    tmp.unreleased = rcache->limits.unreleased_size;
    ucs_rcache_unlock(rcache);
    hits = __atomic_load_n(&rcache->stats.hits_fast_shared, __ATOMIC_RELAXED);
    for (i = 0; i < UCS_RCACHE_SLOTS; ++i) {
        hits += __atomic_load_n(&rcache->slots[i].hits_fast, __ATOMIC_RELAXED);
    }
    tmp.gets += hits;
    tmp.hits_fast += hits;
    tmp.deregs += __atomic_load_n(&rcache->stats.path_deregs, __ATOMIC_RELAXED);
    *stats = tmp;
    return UCS_OK;
}

void ucs_rcache_print_stats(ucs_rcache_t *rcache, FILE *stream)
{
    ucs_rcache_stats_t s;

    if (ucs_rcache_query_stats(rcache, &s) != UCS_OK) {
        return;
    }
    fprintf(stream,
            "rcache '%s':\n"
            "  gets                %lu\n"
            "  hits_fast           %lu\n"
            "  hits_slow           %lu\n"
            "  misses              %lu\n"
            "  merges              %lu\n"
            "  evictions           %lu\n"
            "  unmap_invalidations %lu\n"
            "  regs                %lu\n"
            "  reg_failures        %lu\n"
            "  deregs              %lu\n"
            "  stale_pfn           %lu\n"
            "  regions             %lu\n"
            "  total_size          %lu\n"
            "  cleanups            %lu\n"
            "  unreleased          %lu\n"
            "  deferred_unmaps     %lu\n"
            "  invalidations       %lu\n"
            "  reg_waits           %lu\n",
            rcache->name, s.gets, s.hits_fast, s.hits_slow, s.misses, s.merges,
            s.evictions, s.unmap_invalidations, s.regs, s.reg_failures,
            s.deregs, s.stale_pfn, s.regions, s.total_size, s.cleanups,
            s.unreleased, s.deferred_unmaps, s.invalidations, s.reg_waits);
}
