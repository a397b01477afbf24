/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Lookup hints: a direct-mapped table from a request's first page to the
 * region that last answered it from the index (see ucs_rcache_hints_t).
 * This file sizes it: created with the cache, grown by the registration
 * path as regions are added, freed at destroy.
 */
#include "rcache_int.h"

#include <stddef.h>

#define UCS_RCACHE_HINTS_HEAD offsetof(ucs_rcache_hints_t, entry)

static size_t ucs_rcache_hints_bytes(unsigned shift)
{
    return sizeof(ucs_rcache_region_t *) << shift;
}

/* Every table is mapped by the system: zero, and costs memory only where
 * lookups write (from the heap a table would be cleared, and a table
 * retired early would keep all of it).  A big one is read at random by
 * every hit of a big cache: its entries go on huge pages, its header on
 * the small page before them (written at once; on the first huge page it
 * would make that page before any lookup wrote there). */
static ucs_rcache_hints_t *ucs_rcache_hints_alloc(unsigned shift)
{
    ucs_rcache_hints_t *hints;
    char *block;

    block = ucs_rcache_huge_alloc(ucs_rcache_page_size,
                                  ucs_rcache_hints_bytes(shift));
    if (block == NULL) {
        return NULL;
    }
    hints        = (ucs_rcache_hints_t *)(block + ucs_rcache_page_size -
                                   UCS_RCACHE_HINTS_HEAD);
    hints->shift = shift;
    hints->mask  = (1ul << shift) - 1;
    return hints;
}

static void ucs_rcache_hints_free_one(ucs_rcache_hints_t *hints)
{
    ucs_rcache_huge_free(
        (char *)hints + UCS_RCACHE_HINTS_HEAD - ucs_rcache_page_size,
        ucs_rcache_page_size, ucs_rcache_hints_bytes(hints->shift));
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
           ((UCS_RCACHE_HINTS_PER_REGION * regions) >> shift) != 0) {
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
        ucs_rcache_hints_free_one(hints);
    }
    rcache->hot.hints = NULL;
}
