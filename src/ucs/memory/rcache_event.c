/*
 * Unmap handler (hook context): tombstones every region intersecting the
 * unmapped range in O(log n + k) under the spinlock, without allocating or
 * calling user code; the deregistration is deferred to the next operation.
 */
#include "rcache_int.h"

#include <ucm/api/ucm.h>

static int ucs_rcache_ranges_intersect(ucs_pgt_addr_t s1, ucs_pgt_addr_t e1,
                                       ucs_pgt_addr_t s2, ucs_pgt_addr_t e2)
{
    return (s1 < e2) && (s2 < e1);
}

void ucs_rcache_unmap_range(ucs_rcache_t *rcache, ucs_pgt_addr_t start,
                            ucs_pgt_addr_t end)
{
    ucs_range_index_t *index = &rcache->index;
    ucs_rcache_region_t *region;
    size_t pos;

    pthread_spin_lock(&rcache->lock);
    for (pos = ucs_range_index_lower(index, start);
         (pos < index->count) && (index->regions[pos]->start < end); ++pos) {
        region = (ucs_rcache_region_t*)index->regions[pos];
        if (!(region->flags & UCS_RCACHE_REGION_FLAG_INVALID)) {
            ucs_rcache_region_tombstone_locked(rcache, region);
            rcache->stats.unmap_invalidations++;
        }
    }
    if (rcache->inflight.active &&
        ucs_rcache_ranges_intersect(start, end, rcache->inflight.start,
                                    rcache->inflight.end)) {
        rcache->inflight.invalidated = 1;
    }
    ucs_rcache_prot_forget_locked(rcache, start, end);
    pthread_spin_unlock(&rcache->lock);
}

void ucs_rcache_event_cb(int event_type, void *event_p, void *arg)
{
    ucm_event_t *event = event_p;
    ucs_pgt_addr_t start;
    size_t size;

    if (event_type == UCM_EVENT_VM_UNMAPPED) {
        start = (ucs_pgt_addr_t)event->vm_unmapped.address;
        size  = event->vm_unmapped.size;
    } else if (event_type == UCM_EVENT_MEM_TYPE_FREE) {
        start = (ucs_pgt_addr_t)event->mem_type.address;
        size  = event->mem_type.size;
    } else {
        return;
    }
    if (size == 0) {
        return;
    }
    ucs_rcache_unmap_range(arg, start,
                           (start + size < start) ? ~0ul : start + size);
}
