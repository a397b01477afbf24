/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Lookup hints: a direct-mapped table from a request's first page to the
 * region that last answered it from the index (see ucs_rcache_hints_t).
 * This file sizes it: created with the cache, grown by the registration
 * path as regions are added, freed at destroy.
 */
#include "rcache_int.h"

#include <stdlib.h>
#include <string.h>

static ucs_rcache_hints_t *ucs_rcache_hints_alloc(unsigned shift)
{
    size_t size =
        sizeof(ucs_rcache_hints_t) + (sizeof(ucs_rcache_region_t *) << shift);
    ucs_rcache_hints_t *hints;

    if (size < UCS_RCACHE_HUGE_PAGE) {
        hints = calloc(1, size);
    } else {
        /* read at random by every hit of a big cache: on huge pages (all
         * of it touched now, as lookups would soon) */
        hints = ucs_rcache_huge_alloc(size);
        if (hints != NULL) {
            memset(hints, 0, size);
        }
    }
    if (hints != NULL) {
        hints->shift = shift;
        hints->mask  = (1ul << shift) - 1;
    }
    return hints;
}

ucs_status_t ucs_rcache_hints_init(ucs_rcache_t *rcache)
{
    rcache->hot.hints = ucs_rcache_hints_alloc(UCS_RCACHE_HINTS_MIN_SHIFT);
    if (rcache->hot.hints == NULL) {
        ucs_rcache_error("%s: no memory for the lookup hints", rcache->name);
        return UCS_ERR_NO_MEMORY;
    }
    return UCS_OK;
}

void ucs_rcache_hints_grow(ucs_rcache_t *rcache, unsigned long regions)
{
    ucs_rcache_hints_t *old = rcache->hot.hints, *hints;
    unsigned shift          = old->shift;

    while ((shift < UCS_RCACHE_HINTS_MAX_SHIFT) &&
           ((2 * regions) >> shift) != 0) {
        ++shift;
    }
    if (shift == old->shift) {
        return;
    }
    hints = ucs_rcache_hints_alloc(shift);
    if (hints == NULL) {
        return; /* the table in use stays: lookups only go to the index
                   more often */
    }
    /* starts empty (index hits fill it); lookups may still read the old
     * one: retired, freed at destroy */
    hints->retired = old;
    __atomic_store_n(&rcache->hot.hints, hints, __ATOMIC_RELEASE);
}

void ucs_rcache_hints_free(ucs_rcache_t *rcache)
{
    ucs_rcache_hints_t *hints, *next;

    for (hints = rcache->hot.hints; hints != NULL; hints = next) {
        next = hints->retired;
        free(hints);
    }
    rcache->hot.hints = NULL;
}
