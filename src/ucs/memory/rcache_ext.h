/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Additions to the UCX 1.13 registration cache API (nothing there changes):
 * statistics query and print, configuration print, and a destroy that
 * reports held regions.  Thread-safe; not callable from hook context.
 *
 * Behaviour beyond UCX 1.13 worth knowing:
 *  - with a finite max_unreleased (params or UCX_RCACHE_MAX_UNRELEASED) a
 *    background thread of the cache deregisters invalidated regions, so
 *    ops->mem_dereg may run on that thread (never in hook context);
 *  - UCX_RCACHE_DONTFORK=yes|no|auto marks registered pages MADV_DONTFORK
 *    (auto: kernels before 5.9), restored when the last registration of a
 *    page is deregistered: a forked child does not have those pages.
 */
#ifndef UCS_RCACHE_EXT_H_
#define UCS_RCACHE_EXT_H_

#include <ucs/memory/rcache.h>
#include <stdint.h>
#include <stdio.h>

BEGIN_C_DECLS

typedef struct ucs_rcache_stats {
    uint64_t gets;      /* ucs_rcache_get() calls that passed validation */
    uint64_t hits_fast; /* found without taking the registration path */
    uint64_t hits_slow; /* found on the registration path */
    uint64_t misses;    /* needed a registration */
    uint64_t merges;    /* registrations that absorbed other regions */
    uint64_t evictions; /* regions dropped by MAX_REGIONS / MAX_SIZE or
                           to retry a failed registration */
    uint64_t unmap_invalidations; /* regions dropped by unmap events */
    uint64_t regs;                /* successful mem_reg calls */
    uint64_t reg_failures;        /* failed mem_reg calls */
    uint64_t deregs;              /* mem_dereg calls */
    uint64_t stale_pfn;       /* CHECK_PFN: hits whose page frames changed */
    uint64_t regions;         /* regions in the cache now */
    uint64_t total_size;      /* their bytes */
    uint64_t cleanups;        /* purges by the background cleanup thread */
    uint64_t unreleased;      /* invalidated bytes not yet purged */
    uint64_t deferred_unmaps; /* unmaps from a signal handler of the thread
                                 holding the cache lock, applied after it */
    uint64_t invalidations;   /* ucs_rcache_region_invalidate() calls on a
                                 region still in the cache */
    uint64_t reg_waits;       /* waits while another thread owned the
                                 registration path (misses; also a destroy or
                                 a fork waiting for a registration) */
} ucs_rcache_stats_t;

/* Copy the counters.  UCS_ERR_INVALID_PARAM for NULL arguments. */
ucs_status_t ucs_rcache_query_stats(ucs_rcache_t *rcache,
                                    ucs_rcache_stats_t *stats);

/* Print name and counters, one line each, to stream. */
void ucs_rcache_print_stats(ucs_rcache_t *rcache, FILE *stream);

/* Like ucs_rcache_destroy(), but returns UCS_ERR_BUSY if regions are still
 * held: the cache then stops watching unmaps and stays allocated, its
 * holders may still put their regions, and a later call frees it.
 * UCS_ERR_INVALID_PARAM for NULL. */
ucs_status_t ucs_rcache_destroy_checked(ucs_rcache_t *rcache);

/* Print the effective UCX_RCACHE_* values, one "# doc" line and one
 * "UCX_NAME=value" line each.  UCS_ERR_INVALID_PARAM (after one error line
 * per malformed variable) if the environment holds a bad value. */
ucs_status_t ucs_rcache_print_config(FILE *stream);

END_C_DECLS

#endif
