/*
 * Registration cache front end: lookups (hit path), references and
 * invalidation requests.  See rcache.h for the contract.
 */
#include "rcache_int.h"

#include <stdlib.h>

#define UCS_RCACHE_KNOWN_PROT (PROT_READ | PROT_WRITE | PROT_EXEC)

static ucs_status_t ucs_rcache_get_check(ucs_rcache_t *rcache, void *address,
                                         size_t length, int prot,
                                         ucs_rcache_region_t **region_p)
{
    if ((rcache == NULL) || (region_p == NULL) || (address == NULL)) {
        ucs_rcache_error("ucs_rcache_get: NULL %s",
                         (rcache == NULL) ? "rcache" :
                         (region_p == NULL) ? "region_p" : "address");
        return UCS_ERR_INVALID_PARAM;
    }
    if (length == 0) {
        ucs_rcache_error("%s: get of zero bytes at %p", rcache->name, address);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((uintptr_t)address + length < (uintptr_t)address) {
        ucs_rcache_error("%s: range %p + %zu overflows", rcache->name,
                         address, length);
        return UCS_ERR_INVALID_PARAM;
    }
    if (prot & ~UCS_RCACHE_KNOWN_PROT) {
        ucs_rcache_error("%s: unknown protection bits 0x%x", rcache->name,
                         prot);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

UCS_F_HOT ucs_status_t ucs_rcache_get(ucs_rcache_t *rcache, void *address,
                                      size_t length, int prot, void *arg,
                                      ucs_rcache_region_t **region_p)
{
    ucs_pgt_addr_t start, end;
    ucs_rcache_region_t *region;
    ucs_status_t status;
    size_t align_mask;

    if (ucs_unlikely((rcache == NULL) || (address == NULL) || (length == 0) ||
                     (region_p == NULL) ||
                     ((uintptr_t)address + length < (uintptr_t)address) ||
                     (prot & ~UCS_RCACHE_KNOWN_PROT))) {
        return ucs_rcache_get_check(rcache, address, length, prot, region_p);
    }

    align_mask = rcache->params.alignment - 1;
    start      = (uintptr_t)address & ~align_mask;
    end        = ((uintptr_t)address + length + align_mask) & ~align_mask;
    if (ucs_unlikely(end < start)) {
        end = ~align_mask; /* the last aligned block of the address space */
    }

    pthread_spin_lock(&rcache->lock);
    rcache->stats.gets++;
    if (ucs_likely(rcache->pending_count == 0)) {
        region = (ucs_rcache_region_t*)ucs_range_index_find(&rcache->index,
                                                            start);
        if (ucs_likely((region != NULL) && (end <= region->super.end) &&
                       !(prot & ~region->prot))) {
            ucs_rcache_atomic_add(&region->refcount, 1);
            if (region->lru_list.next != &rcache->lru) {
                ucs_list_del(&region->lru_list);
                ucs_list_add_tail(&rcache->lru, &region->lru_list);
            }
            rcache->stats.hits_fast++;
            pthread_spin_unlock(&rcache->lock);
            if (ucs_unlikely(rcache->check_pfn)) {
                ucs_rcache_pfn_verify(rcache, region);
            }
            *region_p = region;
            return UCS_OK;
        }
    }
    pthread_spin_unlock(&rcache->lock);

    status = ucs_rcache_get_slow(rcache, start, end, prot, arg, &region);
    if (status != UCS_OK) {
        return status;
    }
    if (ucs_unlikely(rcache->check_pfn)) {
        ucs_rcache_pfn_verify(rcache, region);
    }
    *region_p = region;
    return UCS_OK;
}

void ucs_rcache_region_hold(ucs_rcache_t *rcache, ucs_rcache_region_t *region)
{
    ucs_rcache_atomic_add(&region->refcount, 1);
}

UCS_F_HOT void ucs_rcache_region_put(ucs_rcache_t *rcache,
                                     ucs_rcache_region_t *region)
{
    if (ucs_unlikely(ucs_rcache_atomic_sub(&region->refcount, 1) == 0)) {
        ucs_rcache_region_release(rcache, region);
    }
    if (ucs_unlikely(ucs_rcache_atomic_load(&rcache->pending_count) != 0)) {
        ucs_rcache_purge(rcache);
    }
}

void ucs_rcache_region_invalidate(ucs_rcache_t *rcache,
                                  ucs_rcache_region_t *region,
                                  ucs_rcache_invalidate_comp_func_t cb,
                                  void *arg)
{
    ucs_rcache_comp_t *comp = NULL;

    if ((rcache == NULL) || (region == NULL)) {
        ucs_rcache_error("ucs_rcache_region_invalidate: NULL %s",
                         (rcache == NULL) ? "rcache" : "region");
        return;
    }
    if (cb != NULL) {
        comp = malloc(sizeof(*comp));
        if (comp == NULL) {
            ucs_rcache_error("%s: no memory for an invalidation callback; "
                             "calling it now", rcache->name);
            cb(arg);
        } else {
            comp->cb  = cb;
            comp->arg = arg;
        }
    }

    pthread_spin_lock(&rcache->lock);
    if (comp != NULL) {
        ucs_list_add_tail(&ucs_rcache_region_hdr(region)->comps, &comp->link);
    }
    if (region->flags & UCS_RCACHE_REGION_FLAG_PGTABLE) {
        ucs_rcache_region_tombstone_locked(rcache, region);
    }
    pthread_spin_unlock(&rcache->lock);
    ucs_rcache_purge(rcache);
}
