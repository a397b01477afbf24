/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Protection check of a range against /proc/self/maps (rcache_prot.h),
 * remembering up to UCS_RCACHE_MAPS_CACHE mappings around the last range
 * checked.  Unmap events drop the mappings they touch (rcache_event.c).
 */
#include "rcache_int.h"

#include <ucm/api/ucm.h>
#include <string.h>

typedef struct {
    ucs_pgt_addr_t cur; /* checked up to here */
    ucs_pgt_addr_t end;
    int prot;
    int ok;
    int done;
    unsigned count; /* mappings recorded for the cache */
    struct {
        ucs_pgt_addr_t start, end;
        int prot;
    } entries[UCS_RCACHE_MAPS_CACHE];
} ucs_rcache_prot_walk_t;

static int ucs_rcache_prot_walk_cb(void *arg, void *addr, size_t length,
                                   int prot, const char *path)
{
    ucs_rcache_prot_walk_t *walk = arg;
    ucs_pgt_addr_t start         = (ucs_pgt_addr_t)addr;
    ucs_pgt_addr_t end           = start + length;

    if (!walk->done && (walk->count == UCS_RCACHE_MAPS_CACHE)) {
        /* still before the range: keep the most recent half */
        memmove(&walk->entries[0], &walk->entries[UCS_RCACHE_MAPS_CACHE / 2],
                (UCS_RCACHE_MAPS_CACHE / 2) * sizeof(walk->entries[0]));
        walk->count = UCS_RCACHE_MAPS_CACHE / 2;
    }
    if (walk->count < UCS_RCACHE_MAPS_CACHE) {
        walk->entries[walk->count].start = start;
        walk->entries[walk->count].end   = end;
        walk->entries[walk->count].prot  = prot;
        ++walk->count;
    }
    if (!walk->done && (end > walk->cur)) {
        if ((start > walk->cur) || ((prot & walk->prot) != walk->prot)) {
            walk->done = 1; /* hole, or lacks rights */
        } else {
            walk->cur = end;
            if (walk->cur >= walk->end) {
                walk->ok   = 1;
                walk->done = 1;
            }
        }
    }
    /* keep reading to fill the cache, unless it is full */
    return walk->done && (walk->count >= UCS_RCACHE_MAPS_CACHE);
}

int ucs_rcache_prot_cached_locked(ucs_rcache_t *rcache, ucs_pgt_addr_t start,
                                  ucs_pgt_addr_t end, int prot)
{
    ucs_pgt_addr_t cur = start & ~4095ul;
    unsigned i, lo = 0, n = rcache->maps.count, half;

    ucs_rcache_assert_locked(rcache);
    prot &= PROT_READ | PROT_WRITE | PROT_EXEC;
    /* requests tend to come from the mapping the previous one came from */
    i = rcache->maps.last;
    if ((i < rcache->maps.count) && (rcache->maps.entries[i].start <= cur) &&
        (end <= rcache->maps.entries[i].end) &&
        ((rcache->maps.entries[i].prot & prot) == prot)) {
        return 1;
    }
    /* skip the mappings that start at or before cur but the last one
     * (sorted by start, non-overlapping) */
    while (n > 1) {
        half = n / 2;
        if (rcache->maps.entries[lo + half].start <= cur) {
            lo += half;
            n -= half;
        } else {
            n = half;
        }
    }
    for (i = lo; i < rcache->maps.count; ++i) {
        if ((rcache->maps.entries[i].end <= cur) ||
            (rcache->maps.entries[i].end == 0)) {
            continue;
        }
        if ((rcache->maps.entries[i].start > cur) ||
            ((rcache->maps.entries[i].prot & prot) != prot)) {
            return 0;
        }
        cur = rcache->maps.entries[i].end;
        if (cur >= end) {
            if (rcache->maps.entries[i].start <= (start & ~4095ul)) {
                rcache->maps.last = i; /* covered by this one alone */
            }
            return 1;
        }
    }
    return 0;
}

void ucs_rcache_prot_forget_locked(ucs_rcache_t *rcache, ucs_pgt_addr_t start,
                                   ucs_pgt_addr_t end)
{
    unsigned i;

    ucs_rcache_assert_locked(rcache);
    for (i = 0; i < rcache->maps.count; ++i) {
        if (ucs_rcache_ranges_intersect(rcache->maps.entries[i].start,
                                        rcache->maps.entries[i].end, start,
                                        end)) {
            rcache->maps.entries[i].end = 0;
        }
    }
}

int ucs_rcache_prot_check(ucs_rcache_t *rcache, ucs_pgt_addr_t start,
                          ucs_pgt_addr_t end, int prot)
{
    ucs_rcache_prot_walk_t walk;
    unsigned long unmaps;
    unsigned i;
    int hit;

    prot &= PROT_READ | PROT_WRITE | PROT_EXEC;

    ucs_rcache_lock(rcache);
    hit    = ucs_rcache_prot_cached_locked(rcache, start, end, prot);
    unmaps = rcache->maps.unmaps;
    ucs_rcache_unlock(rcache);
    if (hit) {
        return 1;
    }

    walk.cur   = start & ~4095ul;
    walk.end   = end;
    walk.prot  = prot;
    walk.ok    = 0;
    walk.done  = 0;
    walk.count = 0;
    ucm_parse_proc_self_maps(ucs_rcache_prot_walk_cb, &walk);

    ucs_rcache_lock(rcache);
    if (rcache->maps.unmaps == unmaps) {
        /* no unmap since the read: the snapshot is current */
        for (i = 0; i < walk.count; ++i) {
            rcache->maps.entries[i].start = walk.entries[i].start;
            rcache->maps.entries[i].end   = walk.entries[i].end;
            rcache->maps.entries[i].prot  = walk.entries[i].prot;
        }
        rcache->maps.count = walk.count;
    }
    ucs_rcache_unlock(rcache);
    return walk.ok;
}
