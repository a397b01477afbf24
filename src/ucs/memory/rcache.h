/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Registration cache: maps [address, address+length) to a registered memory
 * region, registering on a miss through user callbacks, merging overlapping
 * and adjacent requests, and dropping regions whose pages are unmapped
 * (UCM_EVENT_VM_UNMAPPED / MEM_TYPE_FREE, delivered by libucm).
 *
 * Source-compatible with UCX 1.13's <ucs/memory/rcache.h>.
 *
 * Contract (all calls):
 *  - errors are ucs_status_t with one log line on stderr; outputs are
 *    written only on success;
 *  - thread-safe; mem_reg / mem_dereg / dump_region are called with no
 *    rcache lock held that lookups or the unmap handler need (they may
 *    allocate, free and unmap memory);
 *  - a region returned by ucs_rcache_get() covers the whole aligned request
 *    with at least the requested protection and stays registered until its
 *    last ucs_rcache_region_put(), even if its pages are unmapped meanwhile;
 *  - a region no longer cached (unmapped, evicted, invalidated) is
 *    deregistered at its last put; when that put comes from another thread
 *    than the one that leased the region (a thread's repeated hits on one
 *    region take it off the shared count, see rcache_int.h), at the leasing
 *    thread's next get of that range or put of it, within its next 16 gets,
 *    at its exit, or destroy;
 *  - none of these functions may be called from hook context (an unmap
 *    event handler), from a signal handler, or from mem_reg / mem_dereg of
 *    the same cache.
 */
#ifndef UCS_REG_CACHE_H_
#define UCS_REG_CACHE_H_

#include <ucs/datastruct/list.h>
#include <ucs/datastruct/pgtable.h>
#include <ucs/type/status.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

BEGIN_C_DECLS

/* libucm_rcache.so.0 (UCS_RCACHE_STOCK_ABI) exports these six names itself,
 * with the signatures of the running UCX release (rcache_stock.c); the
 * cache's own functions get other, hidden names there. */
#ifdef UCS_RCACHE_STOCK_ABI
#define ucs_rcache_create            ucs_rcache_stock_own_create
#define ucs_rcache_destroy           ucs_rcache_stock_own_destroy
#define ucs_rcache_get               ucs_rcache_stock_own_get
#define ucs_rcache_region_hold       ucs_rcache_stock_own_hold
#define ucs_rcache_region_put        ucs_rcache_stock_own_put
#define ucs_rcache_region_invalidate ucs_rcache_stock_own_invalidate
#endif

/* Opaque statistics parent (accepted for compatibility, may be NULL). */
typedef struct ucs_stats_node ucs_stats_node_t;

#define UCS_RCACHE_PROT_FMT "%c%c"
#define UCS_RCACHE_PROT_ARG(_prot)                                             \
    ((_prot)&PROT_READ) ? 'r' : '-', ((_prot)&PROT_WRITE) ? 'w' : '-'

/* Smallest alignment accepted in ucs_rcache_params_t::alignment. */
#define UCS_RCACHE_MIN_ALIGNMENT UCS_PGT_ADDR_ALIGN

typedef struct ucs_rcache ucs_rcache_t;
typedef struct ucs_rcache_ops ucs_rcache_ops_t;
typedef struct ucs_rcache_params ucs_rcache_params_t;
typedef struct ucs_rcache_region ucs_rcache_region_t;

/* Region flags (ucs_rcache_region_t::flags). */
enum {
    UCS_RCACHE_REGION_FLAG_REGISTERED = UCS_BIT(0), /* mem_reg succeeded */
    UCS_RCACHE_REGION_FLAG_PGTABLE    = UCS_BIT(1)  /* findable by lookups */
};

/* Flags of ops->mem_reg(). */
enum {
    UCS_RCACHE_MEM_REG_HIDE_ERRORS = UCS_BIT(0) /* a failure will be retried */
};

/* Cache flags (ucs_rcache_params_t::flags). */
enum {
    UCS_RCACHE_FLAG_NO_PFN_CHECK  = UCS_BIT(0), /* memory has no page frames */
    UCS_RCACHE_FLAG_PURGE_ON_FORK = UCS_BIT(1)  /* invalidate all before fork */
};

/* ucs_rcache_region_t::lru_flags. */
enum { UCS_RCACHE_LRU_FLAG_IN_LRU = UCS_BIT(0) };

/* Called once the invalidated region is deregistered; must not use the cache.
 */
typedef void (*ucs_rcache_invalidate_comp_func_t)(void *arg);

struct ucs_rcache_ops {
    /* Register region->super.start .. end with region->prot; may fill the
     * user part of the region.  Return an error (quietly if flags has
     * HIDE_ERRORS) for inaccessible memory. */
    ucs_status_t (*mem_reg)(void *context, ucs_rcache_t *rcache, void *arg,
                            ucs_rcache_region_t *region, uint16_t flags);
    /* Undo mem_reg. */
    void (*mem_dereg)(void *context, ucs_rcache_t *rcache,
                      ucs_rcache_region_t *region);
    /* Describe the user part of a region into buf[max] (may be NULL);
     * used in the report of a stale region (UCX_RCACHE_CHECK_PFN). */
    void (*dump_region)(void *context, ucs_rcache_t *rcache,
                        ucs_rcache_region_t *region, char *buf, size_t max);
};

struct ucs_rcache_params {
    size_t region_struct_size; /* >= sizeof(ucs_rcache_region_t) */
    size_t alignment;          /* power of 2, 16..page size */
    size_t max_alignment;      /* power of 2 >= alignment */
    int ucm_events;            /* VM_UNMAPPED, MEM_TYPE_FREE */
    int ucm_event_priority;
    const ucs_rcache_ops_t *ops;
    void *context;             /* passed to ops */
    int flags;                 /* UCS_RCACHE_FLAG_* */
    unsigned long max_regions; /* LRU limit on the count */
    size_t max_size;           /* LRU limit on total bytes */
    size_t max_unreleased;     /* cleanup threshold */
};

struct ucs_rcache_region {
    ucs_pgt_region_t super;     /* [start, end) */
    ucs_list_link_t lru_list;   /* internal */
    ucs_list_link_t tmp_list;   /* internal */
    ucs_list_link_t comp_list;  /* internal: invalidation completions */
    volatile uint32_t refcount; /* holders, +1 while in the cache */
    ucs_status_t status;        /* of the registration */
    uint8_t prot;               /* PROT_* registered */
    uint8_t flags;              /* UCS_RCACHE_REGION_FLAG_* */
    uint8_t lru_flags;          /* internal */
    union {
        uint64_t priv;      /* internal */
        unsigned long *pfn; /* internal: recorded page frames */
    };
};

/* Create a cache.  UCS_ERR_INVALID_PARAM for bad params or a malformed
 * UCX_RCACHE_* variable, UCS_ERR_NO_MEMORY, or the error of
 * ucm_set_event_handler().  *rcache_p is written only on success. */
ucs_status_t ucs_rcache_create(const ucs_rcache_params_t *params,
                               const char *name, ucs_stats_node_t *stats_parent,
                               ucs_rcache_t **rcache_p);

/* Destroy a cache, deregistering every region.  Regions still held are
 * reported and left to their holders, with the cache memory (see
 * ucs_rcache_destroy_checked()). */
void ucs_rcache_destroy(ucs_rcache_t *rcache);

/* Find or register a region covering [address, address+length) with at least
 * prot; takes one reference.  UCS_ERR_INVALID_PARAM (NULL, zero or
 * overflowing length, unknown prot bits), UCS_ERR_INVALID_ADDR (range not
 * mapped with prot), or the error of mem_reg. */
ucs_status_t ucs_rcache_get(ucs_rcache_t *rcache, void *address, size_t length,
                            int prot, void *arg,
                            ucs_rcache_region_t **region_p);

/* Take one more reference. */
void ucs_rcache_region_hold(ucs_rcache_t *rcache, ucs_rcache_region_t *region);

/* Drop one reference; the last one of a region no longer cached
 * deregisters and frees it. */
void ucs_rcache_region_put(ucs_rcache_t *rcache, ucs_rcache_region_t *region);

/* Drop region from the cache; cb(arg) runs once it is deregistered (after
 * the last put).  cb may be NULL. */
void ucs_rcache_region_invalidate(ucs_rcache_t *rcache,
                                  ucs_rcache_region_t *region,
                                  ucs_rcache_invalidate_comp_func_t cb,
                                  void *arg);

END_C_DECLS

#include <ucs/memory/rcache_ext.h>

#endif
