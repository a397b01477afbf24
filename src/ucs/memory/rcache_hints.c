/*
 * Lookup hints: a direct-mapped table from a request's first page to the
 * region that last answered it from the index (see ucs_rcache_hints_t).
 * This file sizes it: created with the cache, grown by the registration
 * path as regions are added, freed at destroy.
 */
#include "rcache_int.h"

#include <stdlib.h>

static ucs_rcache_hints_t *ucs_rcache_hints_alloc(unsigned shift)
{
    ucs_rcache_hints_t *hints;

    /* large tables come zeroed from mmap: pages are touched as filled */
    hints = calloc(1, sizeof(*hints) + (sizeof(hints->entry[0]) << shift));
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
