/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * How a hit finds its region without a lock: the range index (the
 * cache's index member, range_index.h: valid regions and tombstones,
 * written under the lock, read racily by lookups) and, in front of it,
 * the lookup hints below (the cache's hot.hints, rcache_int.h).
 *
 * Contract:
 *  - hot.hints: an atomic pointer, replaced only by
 *    ucs_rcache_hints_grow(); entries are read and written by lookups
 *    without a lock (an entry is only a candidate, validated like the
 *    index's answer);
 *  - ucs_rcache_hints_init(): create; UCS_ERR_NO_MEMORY with one log line;
 *  - ucs_rcache_hints_grow(): the registration path owned, not the
 *    spinlock; on no memory the table stays;
 *  - ucs_rcache_hints_free(): destroy (every table, retired ones too).
 */
#ifndef UCS_RCACHE_HINTS_H_
#define UCS_RCACHE_HINTS_H_

#include <ucs/memory/rcache.h>

/* Lookup hints (rcache.c, sized in rcache_hints.c): a direct-mapped table
 * from a request's first page to the region that last answered it from the
 * index.  Indexed by the page number itself, its higher bits folded in:
 * neighbouring pages use neighbouring entries, so regions laid out densely
 * do not collide.  At least UCS_RCACHE_HINTS_PER_REGION entries per region
 * in the index (grown by the registration path up to
 * 2^UCS_RCACHE_HINTS_MAX_SHIFT; 8 bytes each, see internals-rcache.md for
 * the trade against memory per region); a grown table
 * starts empty and the old one is retired, freed at destroy (lookups may
 * still read it).  Entries are read and written without a lock: an entry
 * is only a candidate, validated like the index's answer. */
#define UCS_RCACHE_HINTS_PER_REGION 1
#define UCS_RCACHE_HINTS_MIN_SHIFT  16
#define UCS_RCACHE_HINTS_MAX_SHIFT  24
typedef struct ucs_rcache_hints {
    unsigned long mask;               /* entries - 1 */
    unsigned shift;                   /* log2(entries) */
    struct ucs_rcache_hints *retired; /* the tables it replaced */
    ucs_rcache_region_t *entry[];
} ucs_rcache_hints_t;

#pragma GCC visibility push(hidden)

/* rcache_hints.c: the first table (create), a larger one if regions
 * need it (registration path owned, not the spinlock; on no
 * memory the table stays), all tables (destroy). */
ucs_status_t ucs_rcache_hints_init(ucs_rcache_t *rcache);
void ucs_rcache_hints_grow(ucs_rcache_t *rcache, unsigned long regions);
void ucs_rcache_hints_free(ucs_rcache_t *rcache);

#pragma GCC visibility pop

#endif
