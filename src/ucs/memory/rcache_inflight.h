/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The registration in flight: the range the registration path is
 * registering with no lock held (mem_reg may take long), published to the
 * unmap handler so that an unmap of any part of it meanwhile makes the
 * registration redone instead of cached over pages that went away.
 *
 * Contract: every function needs the cache's lock held by the caller
 * (hook context allowed: nothing allocates, logs or blocks), except
 * ucs_rcache_inflight_is(), which the registration path (the only writer
 * of the range) may call without it.
 */
#ifndef UCS_RCACHE_INFLIGHT_H_
#define UCS_RCACHE_INFLIGHT_H_

#include <ucs/datastruct/pgtable.h>

typedef struct ucs_rcache_inflight {
    ucs_pgt_addr_t start, end;
    int active;      /* a registration of [start, end) runs */
    int invalidated; /* an unmap touched it since it was published */
} ucs_rcache_inflight_t;

/* Publish [start, end): from now on an unmap of it invalidates it. */
static inline void ucs_rcache_inflight_set_locked(ucs_rcache_inflight_t *inf,
                                                  ucs_pgt_addr_t start,
                                                  ucs_pgt_addr_t end)
{
    inf->start       = start;
    inf->end         = end;
    inf->invalidated = 0;
    inf->active      = 1;
}

/* Is [start, end) the range published and still active? */
static inline int ucs_rcache_inflight_is(const ucs_rcache_inflight_t *inf,
                                         ucs_pgt_addr_t start,
                                         ucs_pgt_addr_t end)
{
    return inf->active && (inf->start == start) && (inf->end == end);
}

/* The registration ended (or failed): unmaps no longer concern it. */
static inline void ucs_rcache_inflight_clear_locked(ucs_rcache_inflight_t *inf)
{
    inf->active = 0;
}

/* An unmap of [start, end) was handled. */
static inline void ucs_rcache_inflight_unmap_locked(ucs_rcache_inflight_t *inf,
                                                    ucs_pgt_addr_t start,
                                                    ucs_pgt_addr_t end)
{
    if (inf->active && (start < inf->end) && (inf->start < end)) {
        inf->invalidated = 1;
    }
}

/* Did an unmap touch the range since it was published? */
static inline int
ucs_rcache_inflight_invalidated_locked(const ucs_rcache_inflight_t *inf)
{
    return inf->invalidated;
}

#endif
