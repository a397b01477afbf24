/*
 * userfaultfd subscriptions of the registration cache (UCX_MEM_UFFD): a
 * region is subscribed just before its registration (its pages stay
 * subscribed until they are unmapped), so that unmaps no hook sees (raw
 * system calls, the dynamic loader, static code) invalidate it too:
 * libucm's monitor turns them into VM_UNMAPPED, which ucs_rcache_event_cb
 * handles like any other.
 */
#include "rcache_int.h"

#include <ucm/api/ucm_ext.h>

ucs_status_t ucs_rcache_uffd_init(ucs_rcache_t *rcache)
{
    ucs_status_t status;
    int active = 0;

    if (!(rcache->events & UCM_EVENT_VM_UNMAPPED)) {
        return UCS_OK; /* nobody would hear the events */
    }
    status = ucm_uffd_start(&active);
    if (status != UCS_OK) {
        ucs_rcache_error("%s: UCX_MEM_UFFD=yes, but userfaultfd is "
                         "unavailable (see ucm_info)",
                         rcache->name);
        return status;
    }
    rcache->uffd = active;
    return UCS_OK;
}

void ucs_rcache_uffd_subscribe_region(ucs_rcache_t *rcache,
                                      ucs_rcache_region_t *region)
{
    uint64_t token;

    /* a refusal (file-backed, another owner) leaves the hooks in charge;
     * no ucm_uffd_unsubscribe() at release: it would only lower a span's
     * count (the pages stay registered until they are unmapped, see
     * ucm_ext.h), for a lock on every release */
    (void)ucm_uffd_subscribe((void*)region->super.start,
                             ucs_rcache_region_size(region), &token);
}
