/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Region blocks of the registration cache (rcache_pool.h): carved one
 * region at a time, a big cache's blocks on huge pages (rcache_huge.c),
 * all freed at destroy.
 */
#include "rcache_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* madvise(MADV_COLLAPSE), Linux 6.1; older kernels refuse it (EINVAL) */
#ifdef MADV_COLLAPSE
#define UCS_RCACHE_MADV_COLLAPSE MADV_COLLAPSE
#else
#define UCS_RCACHE_MADV_COLLAPSE 25
#endif

/* A block of regions starts with this (a whole cache line).  Regions are
 * carved from the newest block one at a time, when the pool has none: a
 * page of a block costs memory once a region on it is used. */
typedef struct ucs_rcache_slab {
    struct ucs_rcache_slab *next;
    size_t size;     /* bytes, this header included; 0: from malloc */
    unsigned count;  /* regions it holds */
    unsigned carved; /* regions handed out so far */
} __attribute__((aligned(64))) ucs_rcache_slab_t;

/* A big cache's block: a huge page, on small pages while regions are
 * carved from it (a huge page would cost its 2 MiB at the first), made
 * one huge page once full (regions are read at random from then on). */
static ucs_rcache_slab_t *ucs_rcache_slab_huge(ucs_rcache_t *rcache)
{
    ucs_rcache_slab_t *slab = ucs_rcache_huge_alloc(0, UCS_RCACHE_HUGE_PAGE);

    if (slab == NULL) {
        return NULL;
    }
#ifdef MADV_NOHUGEPAGE
    (void)madvise(slab, UCS_RCACHE_HUGE_PAGE, MADV_NOHUGEPAGE);
#endif
    slab->size  = UCS_RCACHE_HUGE_PAGE;
    slab->count = (UCS_RCACHE_HUGE_PAGE - sizeof(*slab)) / rcache->hot.stride;
    return slab;
}

/* Every region of a huge block is carved: onto a huge page now (a
 * synchronous collapse where the kernel has one, else the advice). */
static void ucs_rcache_slab_full(ucs_rcache_slab_t *slab)
{
#ifdef MADV_HUGEPAGE
    if (slab->size == UCS_RCACHE_HUGE_PAGE) {
        (void)madvise(slab, slab->size, MADV_HUGEPAGE);
        (void)madvise(slab, slab->size, UCS_RCACHE_MADV_COLLAPSE);
    }
#endif
}

/* A region never used before: carved from the newest block, else from a
 * new one (zeroed: refcount 0, never taken; an empty range, never
 * covers).  Blocks stay until destroy (lock-free lookups may read any
 * region at any time).  Registration path (owned, not the
 * spinlock). */
ucs_rcache_region_t *ucs_rcache_slab_alloc(ucs_rcache_t *rcache)
{
    size_t stride           = rcache->hot.stride;
    ucs_rcache_slab_t *slab = rcache->pool.slabs, *added = NULL;
    ucs_rcache_region_t *region;

    if ((slab == NULL) || (slab->carved == slab->count)) {
        if ((rcache->pool.live_regions * stride >= UCS_RCACHE_HUGE_PAGE) &&
            (UCS_RCACHE_SLAB_REGIONS * stride <=
             UCS_RCACHE_HUGE_PAGE - sizeof(*slab))) {
            slab = ucs_rcache_slab_huge(rcache);
        } else if (posix_memalign((void **)&slab, 64,
                                  sizeof(*slab) +
                                      UCS_RCACHE_SLAB_REGIONS * stride) != 0) {
            slab = NULL;
        } else {
            memset(slab, 0, sizeof(*slab) + UCS_RCACHE_SLAB_REGIONS * stride);
            slab->count = UCS_RCACHE_SLAB_REGIONS;
        }
        if (slab == NULL) {
            return NULL;
        }
        added = slab;
    }
    region =
        (ucs_rcache_region_t *)((char *)(slab + 1) + slab->carved * stride);
    if (++slab->carved == slab->count) {
        ucs_rcache_slab_full(slab);
    }
    ucs_rcache_lock(rcache);
    if (added != NULL) {
        added->next        = rcache->pool.slabs;
        rcache->pool.slabs = added;
    }
    ++rcache->pool.live_regions;
    ucs_rcache_unlock(rcache);
    return region;
}

/* Free every block (destroy, no region in use). */
void ucs_rcache_slabs_free(ucs_rcache_t *rcache)
{
    ucs_rcache_slab_t *slab, *next;

    for (slab = rcache->pool.slabs; slab != NULL; slab = next) {
        next = slab->next;
        if (slab->size != 0) {
            ucs_rcache_huge_free(slab, 0, slab->size);
        } else {
            free(slab);
        }
    }
    rcache->pool.slabs = NULL;
    ucs_list_head_init(&rcache->pool.free_list);
    ucs_list_head_init(&rcache->pool.spare);
    rcache->pool.spare_count = 0;
}
