/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the registration cache knows of the process's mappings, to check a
 * request's protection without reading /proc/self/maps at every miss
 * (rcache_prot.c): the mappings around the last range checked, and the
 * count of unmap events handled, by which what was learnt without the lock
 * (this snapshot, the userfaultfd span of rcache_uffd.h) is kept only if no
 * unmap was handled meanwhile.  mprotect() is not observed, like in UCX.
 *
 * Contract:
 *  - every field: under the cache's lock.  entries are written by
 *    ucs_rcache_prot_check() (a fresh snapshot) and dropped by the unmap
 *    handler (ucs_rcache_prot_forget_locked(), hook context); unmaps is
 *    bumped by the unmap handler (rcache_event.c); a forked child empties
 *    the snapshot;
 *  - ucs_rcache_prot_check(): no lock held, not for hook context (takes the
 *    lock twice, reads /proc/self/maps through libucm without allocating);
 *    1 if [start, end) is mapped with at least prot, else 0;
 *  - ucs_rcache_prot_cached_locked(): the same from the snapshot only (0:
 *    unknown); the lock held;
 *  - ucs_rcache_prot_forget_locked(): drop the mappings intersecting
 *    [start, end); the lock held (hook context allowed).
 */
#ifndef UCS_RCACHE_PROT_H_
#define UCS_RCACHE_PROT_H_

#include <ucs/memory/rcache.h>

/* Mappings remembered from /proc/self/maps. */
#define UCS_RCACHE_MAPS_CACHE 64

typedef struct ucs_rcache_maps {
    struct {
        ucs_pgt_addr_t start, end; /* end == 0: dropped */
        int prot;
    } entries[UCS_RCACHE_MAPS_CACHE];
    unsigned count;       /* sorted by start */
    unsigned last;        /* the entry that last covered a whole range
                             (tried first) */
    unsigned long unmaps; /* unmap events handled */
} ucs_rcache_maps_t;

#pragma GCC visibility push(hidden)

int ucs_rcache_prot_check(ucs_rcache_t *rcache, ucs_pgt_addr_t start,
                          ucs_pgt_addr_t end, int prot);
int ucs_rcache_prot_cached_locked(ucs_rcache_t *rcache, ucs_pgt_addr_t start,
                                  ucs_pgt_addr_t end, int prot);
void ucs_rcache_prot_forget_locked(ucs_rcache_t *rcache, ucs_pgt_addr_t start,
                                   ucs_pgt_addr_t end);

#pragma GCC visibility pop

#endif
