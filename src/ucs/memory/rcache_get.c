/*
 * Registration path of ucs_rcache_get() (a miss): merge with overlapping and
 * adjacent regions, check protection against the mappings, register with no
 * spinlock held, retry unmerged / after eviction, and insert.
 */
#include "rcache_int.h"

#include <stdlib.h>
#include <string.h>

/* Registrations redone because their range was unmapped meanwhile. */
#define UCS_RCACHE_INFLIGHT_RETRIES 16

typedef struct {
    ucs_pgt_addr_t start, end;
    int            prot;
    int            merged;
} ucs_rcache_span_t;

static ucs_rcache_region_t *
ucs_rcache_lookup_locked(ucs_rcache_t *rcache, ucs_pgt_addr_t start,
                         ucs_pgt_addr_t end, int prot)
{
    ucs_rcache_region_t *region;

    region = (ucs_rcache_region_t*)ucs_range_index_find(&rcache->index, start);
    if ((region == NULL) || (start < region->super.start) || (end > region->super.end) ||
        (prot & ~region->prot) ||
        (region->flags & UCS_RCACHE_REGION_FLAG_INVALID)) {
        return NULL;
    }
    return region;
}

/* Union of the request with every region it overlaps or touches. */
static void ucs_rcache_merge_span_locked(ucs_rcache_t *rcache,
                                         ucs_rcache_span_t *span)
{
    ucs_range_index_t *index = &rcache->index;
    ucs_range_index_iter_t iter;
    ucs_pgt_region_t *r;

    for (r = ucs_range_index_lower(index, span->start ? span->start - 1 : 0,
                                   &iter);
         (r != NULL) && (r->start <= span->end);
         r = ucs_range_index_next(index, &iter)) {
        if (r->end < span->start) {
            continue;
        }
        span->start   = ucs_min(span->start, r->start);
        span->end     = ucs_max(span->end, r->end);
        span->prot   |= ((ucs_rcache_region_t*)r)->prot;
        span->merged  = 1;
    }
}

/* Make room for one more entry; only the registration path (under
 * reg_lock) inserts, so the room stays until the insertion (removals only
 * add free nodes). */
static ucs_status_t ucs_rcache_index_reserve(ucs_rcache_t *rcache,
                                             unsigned need)
{
    ucs_range_index_spare_t spare = {NULL};
    ucs_status_t status;

    if (ucs_range_index_free_nodes(&rcache->index) >= need) {
        return UCS_OK;
    }
    status = ucs_range_index_grow_alloc(&rcache->index, &spare);
    if (status != UCS_OK) {
        return status;
    }
    ucs_rcache_lock(rcache);
    ucs_range_index_grow_install(&rcache->index, &spare);
    ucs_rcache_unlock(rcache);
    ucs_range_index_spare_free(&spare);
    return UCS_OK;
}

/* Under the lock: a recycled region, or NULL. */
static ucs_rcache_region_t *ucs_rcache_pool_pop_locked(ucs_rcache_t *rcache)
{
    ucs_rcache_region_t *region;

    if (ucs_list_is_empty(&rcache->pool)) {
        return NULL;
    }
    region = ucs_container_of(rcache->pool.next, ucs_rcache_region_t,
                              tmp_list);
    ucs_list_del(&region->tmp_list);
    return region;
}

/* Bytes of one region with its header, a whole number of cache lines: a
 * hit reads the header's last bytes, the range, the reference count and
 * the flags, two lines. */
static size_t ucs_rcache_region_stride(ucs_rcache_t *rcache)
{
    return (sizeof(ucs_rcache_region_hdr_t) +
            rcache->params.region_struct_size + 63) & ~(size_t)63;
}

/* A new block of regions: the first is returned, the others go to the
 * pool.  Blocks stay until destroy (lock-free lookups may read any region
 * at any time).  Registration path (reg_lock held, not the spinlock). */
static ucs_rcache_region_hdr_t *ucs_rcache_slab_alloc(ucs_rcache_t *rcache)
{
    size_t stride = ucs_rcache_region_stride(rcache);
    ucs_rcache_region_hdr_t *hdr;
    ucs_rcache_region_t *region;
    char *slab;
    unsigned i;

    if (posix_memalign((void**)&slab, 64,
                       64 + UCS_RCACHE_SLAB_REGIONS * stride) != 0) {
        return NULL;
    }
    ucs_rcache_lock(rcache);
    *(void**)slab = rcache->slabs;
    rcache->slabs = slab;
    for (i = 1; i < UCS_RCACHE_SLAB_REGIONS; ++i) {
        hdr    = (ucs_rcache_region_hdr_t*)(slab + 64 + i * stride);
        region = (ucs_rcache_region_t*)(hdr + 1);
        memset(region, 0, sizeof(*region)); /* refcount 0: never taken */
        ucs_list_add_tail(&rcache->pool, &region->tmp_list);
    }
    ucs_rcache_unlock(rcache);
    return (ucs_rcache_region_hdr_t*)(slab + 64);
}

/* Free every block (destroy, no region in use). */
void ucs_rcache_slabs_free(ucs_rcache_t *rcache)
{
    void *slab, *next;

    for (slab = rcache->slabs; slab != NULL; slab = next) {
        next = *(void**)slab;
        free(slab);
    }
    rcache->slabs = NULL;
    ucs_list_head_init(&rcache->pool);
}

/* Initialize a recycled region (if given) or a new one. */
static ucs_rcache_region_t *ucs_rcache_region_alloc(ucs_rcache_t *rcache,
                                                    ucs_rcache_region_t *recycled)
{
    ucs_rcache_region_hdr_t *hdr = NULL;
    ucs_rcache_region_t *region;

    if (recycled != NULL) {
        hdr = ucs_rcache_region_hdr(recycled);
    } else {
        hdr = ucs_rcache_slab_alloc(rcache);
        if (hdr == NULL) {
            return NULL;
        }
    }
    /* refcount is 0 and stays 0: racing lookups cannot take it */
    memset(hdr, 0, sizeof(*hdr) + rcache->params.region_struct_size);
    ucs_list_head_init(&hdr->comps);
    hdr->fork_gen = rcache->fork_gen;
    ucs_rcache_atomic_add(&rcache->live_regions, 1);
    region = (ucs_rcache_region_t*)(hdr + 1);
    return region;
}

/* mem_reg of span with the in-flight range published to the unmap handler. */
static ucs_status_t ucs_rcache_register(ucs_rcache_t *rcache,
                                        ucs_rcache_region_t *region,
                                        const ucs_rcache_span_t *span,
                                        void *arg, uint16_t flags)
{
    ucs_status_t status;

    region->super.start = span->start;
    region->super.end   = span->end;
    region->prot        = span->prot;
    region->status      = UCS_INPROGRESS;

    ucs_rcache_lock(rcache);
    rcache->inflight.start       = span->start;
    rcache->inflight.end         = span->end;
    rcache->inflight.invalidated = 0;
    rcache->inflight.active      = 1;
    ucs_rcache_unlock(rcache);
    /* subscribed before mem_reg: an unmap meanwhile marks inflight */
    ucs_rcache_uffd_subscribe(rcache, region);

    /* mark before pinning: a fork in between must not share the pages */
    status = rcache->dontfork ? ucs_rcache_dontfork_add(span->start, span->end) :
                                UCS_OK;
    if (status == UCS_OK) {
        status = rcache->params.ops->mem_reg(rcache->params.context, rcache,
                                             arg, region, flags);
        if ((status != UCS_OK) && rcache->dontfork) {
            ucs_rcache_dontfork_remove(span->start, span->end);
        }
    }
    region->status = status;
    if (status == UCS_OK) {
        region->flags |= UCS_RCACHE_REGION_FLAG_REGISTERED |
                         (rcache->dontfork ? UCS_RCACHE_REGION_FLAG_DONTFORK : 0);
        ucs_rcache_atomic_add(&rcache->stats.regs, 1);
    } else {
        ucs_rcache_atomic_add(&rcache->stats.reg_failures, 1);
        ucs_rcache_uffd_unsubscribe(rcache, region);
        ucs_rcache_lock(rcache);
        rcache->inflight.active = 0;
        ucs_rcache_unlock(rcache);
    }
    return status;
}

/* Register merged, else unmerged, else after evicting every unused region. */
static ucs_status_t ucs_rcache_register_retry(ucs_rcache_t *rcache,
                                              ucs_rcache_region_t *region,
                                              ucs_rcache_span_t *span,
                                              const ucs_rcache_span_t *request,
                                              void *arg)
{
    ucs_list_link_t dead;
    ucs_status_t status;

    if (span->merged) {
        status = ucs_rcache_register(rcache, region, span, arg,
                                     UCS_RCACHE_MEM_REG_HIDE_ERRORS);
        if (status == UCS_OK) {
            return UCS_OK;
        }
        *span = *request;
    }
    status = ucs_rcache_register(rcache, region, span, arg,
                                 UCS_RCACHE_MEM_REG_HIDE_ERRORS);
    if (status == UCS_OK) {
        return UCS_OK;
    }

    ucs_list_head_init(&dead);
    ucs_rcache_lock(rcache);
    ucs_rcache_evict_locked(rcache, 1, &dead);
    ucs_rcache_unlock(rcache);
    ucs_rcache_regions_release(rcache, &dead);

    status = ucs_rcache_register(rcache, region, span, arg, 0);
    if (status != UCS_OK) {
        ucs_rcache_error("%s: registration of [0x%lx, 0x%lx) "
                         UCS_RCACHE_PROT_FMT " failed after evicting unused "
                         "regions: %s", rcache->name, span->start, span->end,
                         UCS_RCACHE_PROT_ARG(span->prot),
                         ucs_status_string(status));
    }
    return status;
}

/* Under the lock: replace every region intersecting the new one by it. */
static void ucs_rcache_insert_locked(ucs_rcache_t *rcache,
                                     ucs_rcache_region_t *region,
                                     ucs_list_link_t *dead)
{
    ucs_range_index_t *index = &rcache->index;
    ucs_range_index_iter_t iter;
    ucs_rcache_region_t *old;
    int merged = 0;

    while (((old = (ucs_rcache_region_t*)ucs_range_index_lower(
                     index, region->super.start, &iter)) != NULL) &&
           (old->super.start < region->super.end)) {
        ucs_rcache_region_drop_locked(rcache, old, dead);
        merged = 1;
    }
    rcache->stats.merges += merged;

    region->flags   |= UCS_RCACHE_REGION_FLAG_PGTABLE;
    ucs_rcache_region_hdr(region)->referenced = 0;
    /* the index and the caller; from now on lookups may take it */
    ucs_rcache_atomic_store(&region->refcount, 2);
    ucs_range_index_insert(index, &region->super);
    ucs_list_add_tail(&rcache->lru, &region->lru_list);
    region->lru_flags |= UCS_RCACHE_LRU_FLAG_IN_LRU;
    rcache->num_regions++;
    rcache->total_size += ucs_rcache_region_size(region);
    rcache->stats.misses++;
    ucs_rcache_evict_locked(rcache, 0, dead);
}

static ucs_status_t ucs_rcache_get_locked_path(ucs_rcache_t *rcache,
                                               const ucs_rcache_span_t *request,
                                               void *arg, ucs_list_link_t *dead,
                                               ucs_rcache_region_t **region_p)
{
    ucs_rcache_region_t *region, *recycled;
    ucs_rcache_span_t span;
    ucs_status_t status;
    unsigned need;
    int retries, prot_ok;

    for (retries = 0; retries < UCS_RCACHE_INFLIGHT_RETRIES; ++retries) {
        span = *request;
        ucs_rcache_lock(rcache);
        rcache->stats.gets += (retries == 0);
        ucs_rcache_purge_locked(rcache, dead);
        region = ucs_rcache_lookup_locked(rcache, span.start, span.end,
                                          span.prot);
        if (region != NULL) {
            ucs_rcache_atomic_add(&region->refcount, 1);
            rcache->stats.hits_slow++;
            ucs_rcache_unlock(rcache);
            *region_p = region;
            return UCS_OK;
        }
        ucs_rcache_merge_span_locked(rcache, &span);
        /* gather in this one section what the miss needs from the cache */
        prot_ok  = ucs_rcache_prot_cached_locked(rcache, span.start, span.end,
                                                 span.prot);
        need     = ucs_range_index_insert_needs(&rcache->index);
        recycled = ucs_rcache_pool_pop_locked(rcache);
        ucs_rcache_unlock(rcache);

        if (!prot_ok &&
            !ucs_rcache_prot_check(rcache, span.start, span.end, span.prot)) {
            if (!span.merged ||
                !ucs_rcache_prot_check(rcache, request->start, request->end,
                                       request->prot)) {
                ucs_rcache_error("%s: [0x%lx, 0x%lx) is not mapped with "
                                 "access " UCS_RCACHE_PROT_FMT, rcache->name,
                                 request->start, request->end,
                                 UCS_RCACHE_PROT_ARG(request->prot));
                status = UCS_ERR_INVALID_ADDR;
                goto err_recycle;
            }
            span = *request; /* merging would add rights the pages lack */
        }

        status = ucs_rcache_index_reserve(rcache, need);
        if (status != UCS_OK) {
            goto err_recycle;
        }
        region = ucs_rcache_region_alloc(rcache, recycled);
        if (region == NULL) {
            ucs_rcache_error("%s: no memory for a region", rcache->name);
            return UCS_ERR_NO_MEMORY;
        }
        status = ucs_rcache_register_retry(rcache, region, &span, request,
                                           arg);
        if (status != UCS_OK) {
            ucs_rcache_region_release(rcache, region);
            return status;
        }
        if (rcache->check_pfn) {
            ucs_rcache_pfn_record(rcache, region);
        }

        ucs_rcache_lock(rcache);
        rcache->inflight.active = 0;
        if (!rcache->inflight.invalidated) {
            ucs_rcache_purge_locked(rcache, dead);
            ucs_rcache_insert_locked(rcache, region, dead);
            ucs_rcache_unlock(rcache);
            *region_p = region;
            return UCS_OK;
        }
        ucs_rcache_unlock(rcache);
        /* pages went away during mem_reg: the registration may be stale */
        ucs_rcache_region_release(rcache, region);
    }

    ucs_rcache_error("%s: [0x%lx, 0x%lx) kept being unmapped while it was "
                     "registered", rcache->name, request->start, request->end);
    return UCS_ERR_INVALID_ADDR;

err_recycle:
    if (recycled != NULL) {
        ucs_rcache_lock(rcache);
        ucs_list_add_tail(&rcache->pool, &recycled->tmp_list);
        ucs_rcache_unlock(rcache);
    }
    return status;
}

ucs_status_t ucs_rcache_get_slow(ucs_rcache_t *rcache, ucs_pgt_addr_t start,
                                 ucs_pgt_addr_t end, int prot, void *arg,
                                 ucs_rcache_region_t **region_p)
{
    ucs_rcache_span_t request = {start, end, prot, 0};
    ucs_list_link_t dead;
    ucs_status_t status;

    ucs_list_head_init(&dead);
    pthread_mutex_lock(&rcache->reg_lock);
    if (ucs_unlikely(ucs_rcache_cleanup_start(rcache) != UCS_OK)) {
        /* said why; the next operations purge instead */
        rcache->max_unreleased = SIZE_MAX;
    }
    status = ucs_rcache_get_locked_path(rcache, &request, arg, &dead,
                                        region_p);
    pthread_mutex_unlock(&rcache->reg_lock);
    ucs_rcache_regions_release(rcache, &dead);
    return status;
}
