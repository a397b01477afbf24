/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Registration cache creation (parameter and UCX_RCACHE_* validation, event
 * handler) and destruction.
 */
#include "rcache_int.h"

#include <ucm/api/ucm.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int ucs_rcache_is_pow2(size_t x)
{
    return (x != 0) && ((x & (x - 1)) == 0);
}

size_t ucs_rcache_page_size = 4096;

static ucs_status_t ucs_rcache_params_check(const ucs_rcache_params_t *params,
                                            const char *name)
{
    size_t page_size = ucs_rcache_page_size;

    if (params->region_struct_size < sizeof(ucs_rcache_region_t)) {
        ucs_rcache_error("%s: region_struct_size %zu is below %zu", name,
                         params->region_struct_size,
                         sizeof(ucs_rcache_region_t));
        return UCS_ERR_INVALID_PARAM;
    }
    if (!ucs_rcache_is_pow2(params->alignment) ||
        (params->alignment < UCS_RCACHE_MIN_ALIGNMENT) ||
        (params->alignment > page_size)) {
        ucs_rcache_error("%s: alignment %zu is not a power of 2 in [%lu, %zu]",
                         name, params->alignment, UCS_RCACHE_MIN_ALIGNMENT,
                         page_size);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((params->max_alignment != 0) &&
        (!ucs_rcache_is_pow2(params->max_alignment) ||
         (params->max_alignment < params->alignment))) {
        ucs_rcache_error("%s: max_alignment %zu is not a power of 2 >= "
                         "alignment %zu",
                         name, params->max_alignment, params->alignment);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((params->ops == NULL) || (params->ops->mem_reg == NULL) ||
        (params->ops->mem_dereg == NULL)) {
        ucs_rcache_error("%s: ops->mem_reg and ops->mem_dereg are required",
                         name);
        return UCS_ERR_INVALID_PARAM;
    }
    if (params->ucm_events &
        ~(UCM_EVENT_VM_UNMAPPED | UCM_EVENT_MEM_TYPE_FREE)) {
        ucs_rcache_error("%s: ucm_events 0x%x: only VM_UNMAPPED and "
                         "MEM_TYPE_FREE are supported",
                         name, params->ucm_events);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

/* 0 in a limit parameter means "no limit". */
static size_t ucs_rcache_limit(size_t param, size_t config)
{
    return ucs_min((param == 0) ? SIZE_MAX : param, config);
}

static void ucs_rcache_apply_config(ucs_rcache_t *rcache,
                                    const ucs_rcache_params_t *params,
                                    const ucs_rcache_config_t *config,
                                    int explicit_prio, int explicit_purge)
{
    rcache->limits.max_regions =
        ucs_rcache_limit(params->max_regions, config->max_regions);
    rcache->limits.max_size =
        ucs_rcache_limit(params->max_size, config->max_size);
    /* under stock UCX, invalidated regions are deregistered at the next
     * cache operation, in the caller's thread, never on a thread of ours:
     * UCX's callbacks (UCP's mem_dereg, invalidation completions) are not
     * written to run elsewhere */
    rcache->limits.max_unreleased =
        UCS_RCACHE_STOCK
            ? SIZE_MAX
            : ucs_rcache_limit(params->max_unreleased, config->max_unreleased);
    if (explicit_prio) {
        rcache->params.ucm_event_priority = (int)config->mem_prio;
    }
    rcache->fork.purge =
        explicit_purge ? config->purge_on_fork
                       : !!(params->flags & UCS_RCACHE_FLAG_PURGE_ON_FORK);
    rcache->hot.check_pfn =
        (params->flags & UCS_RCACHE_FLAG_NO_PFN_CHECK) ? 0 : config->check_pfn;
    rcache->dontfork = (config->dontfork == UCS_RCACHE_DONTFORK_YES) ||
                       ((config->dontfork == UCS_RCACHE_DONTFORK_AUTO) &&
                        ucs_rcache_dontfork_needed());
}

ucs_status_t ucs_rcache_create(const ucs_rcache_params_t *params,
                               const char *name, ucs_stats_node_t *stats_parent,
                               ucs_rcache_t **rcache_p)
{
    int explicit_prio, explicit_purge;
    ucs_rcache_config_t config;
    ucs_rcache_t *rcache;
    ucs_status_t status;

    if ((params == NULL) || (rcache_p == NULL)) {
        ucs_rcache_error("ucs_rcache_create: NULL %s",
                         (params == NULL) ? "params" : "rcache_p");
        return UCS_ERR_INVALID_PARAM;
    }
    if (name == NULL) {
        name = "rcache";
    }
    /* every create stores the same value: no order needed */
    __atomic_store_n(&ucs_rcache_page_size, (size_t)sysconf(_SC_PAGESIZE),
                     __ATOMIC_RELAXED);
    status = ucs_rcache_params_check(params, name);
    if (status != UCS_OK) {
        goto err;
    }
    status = ucs_rcache_config_read(&config, &explicit_prio, &explicit_purge);
    if (status != UCS_OK) {
        goto err;
    }

    rcache = aligned_alloc(64, (sizeof(*rcache) + 63) & ~63ul);
    if (rcache != NULL) {
        memset(rcache, 0, sizeof(*rcache));
    } else {
        ucs_rcache_error("%s: no memory for the cache", name);
        status = UCS_ERR_NO_MEMORY;
        goto err;
    }
    rcache->params         = *params;
    rcache->hot.align_mask = params->alignment - 1;
    rcache->hot.stride     = (params->region_struct_size + 7) & ~(size_t)7;
    rcache->hot.self       = rcache;
    snprintf(rcache->name, sizeof(rcache->name), "%s", name);
    ucs_rcache_apply_config(rcache, params, &config, explicit_prio,
                            explicit_purge);
    ucs_rcache_regpath_init(&rcache->regpath);
    ucs_range_index_init(&rcache->index);
    ucs_list_head_init(&rcache->limits.lru);
    ucs_list_head_init(&rcache->limits.pending);
    ucs_list_head_init(&rcache->limits.orphans);
    ucs_list_head_init(&rcache->fork.link);
    ucs_list_head_init(&rcache->pool.free_list);
    ucs_list_head_init(&rcache->pool.spare);
    status = ucs_rcache_hints_init(rcache);
    if (status != UCS_OK) {
        goto err_free;
    }

    status = ucs_rcache_fork_register(rcache);
    if (status != UCS_OK) {
        goto err_free;
    }
    rcache->events = params->ucm_events;
    status = ucs_rcache_uffd_init(&rcache->uffd, rcache->events, rcache->name);
    if (status != UCS_OK) {
        goto err_fork;
    }
    if (rcache->events != 0) {
        status = ucm_set_event_handler(
            rcache->events, rcache->params.ucm_event_priority,
            (ucm_event_callback_t)ucs_rcache_event_cb, rcache);
        if (status != UCS_OK) {
            ucs_rcache_error("%s: cannot install memory event handler: %s",
                             name, ucs_status_string(status));
            goto err_fork;
        }
    }
    if (rcache->events & UCM_EVENT_VM_UNMAPPED) {
        status = ucm_set_event_handler(
            UCS_RCACHE_NATIVE_EVENTS,
            ucs_max(rcache->params.ucm_event_priority, 0),
            (ucm_event_callback_t)ucs_rcache_native_after_cb, rcache);
        if (status != UCS_OK) {
            ucs_rcache_error("%s: cannot install unmap completion handler: %s",
                             name, ucs_status_string(status));
            goto err_events;
        }
    }
    ucs_rcache_stock_created(rcache);
    *rcache_p = rcache;
    return UCS_OK;

err_events:
    ucm_unset_event_handler(rcache->events,
                            (ucm_event_callback_t)ucs_rcache_event_cb, rcache);
err_fork:
    ucs_rcache_fork_unregister(rcache);
err_free:
    ucs_rcache_hints_free(rcache);
    free(rcache);
err:
    return status;
}

ucs_status_t ucs_rcache_destroy_checked(ucs_rcache_t *rcache)
{
    ucs_list_link_t dead;
    unsigned long held;

    if (rcache == NULL) {
        ucs_rcache_error("ucs_rcache_destroy: NULL rcache");
        return UCS_ERR_INVALID_PARAM;
    }
    if (rcache->events & UCM_EVENT_VM_UNMAPPED) {
        ucm_unset_event_handler(
            UCS_RCACHE_NATIVE_EVENTS,
            (ucm_event_callback_t)ucs_rcache_native_after_cb, rcache);
    }
    if (rcache->events != 0) {
        ucm_unset_event_handler(
            rcache->events, (ucm_event_callback_t)ucs_rcache_event_cb, rcache);
    }
    ucs_rcache_fork_unregister(rcache);
    ucs_rcache_cleanup_stop(rcache);

    ucs_list_head_init(&dead);
    ucs_rcache_regpath_acquire(rcache);
    ucs_rcache_lock(rcache);
    ucs_rcache_leases_drop_all_locked(rcache);
    ucs_rcache_tombstone_all_locked(rcache);
    ucs_rcache_purge_locked(rcache, &dead);
    ucs_list_splice_tail(&rcache->pool.free_list, &rcache->pool.spare);
    rcache->pool.live_regions -= rcache->pool.spare_count;
    rcache->pool.spare_count = 0;
    ucs_rcache_unlock(rcache);
    ucs_rcache_regpath_release(rcache);
    ucs_rcache_regions_release(rcache, &dead);

    ucs_rcache_lock(rcache);
    held = rcache->pool.live_regions;
    ucs_rcache_unlock(rcache);
    ucs_rcache_stock_destroying(rcache);
    if (held != 0) {
        ucs_rcache_error("%s: destroyed with %lu region(s) still held; "
                         "leaking them and the cache",
                         rcache->name, held);
        return UCS_ERR_BUSY;
    }
    ucs_rcache_slabs_free(rcache);
    ucs_range_index_cleanup(&rcache->index);
    ucs_rcache_hints_free(rcache);
    rcache->hot.self = NULL;
    free(rcache);
    return UCS_OK;
}

void ucs_rcache_destroy(ucs_rcache_t *rcache)
{
    if ((rcache != NULL) && UCS_RCACHE_FOREIGN(rcache)) {
        ucs_rcache_stock_next_destroy(rcache);
        return;
    }
    (void)ucs_rcache_destroy_checked(rcache);
}
