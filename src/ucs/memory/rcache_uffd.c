/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * userfaultfd subscriptions of the registration cache (UCX_MEM_UFFD): a
 * region is subscribed just before its registration (its pages stay
 * subscribed until they are unmapped), so that unmaps no hook sees (raw
 * system calls, the dynamic loader, static code) invalidate it too:
 * libucm's monitor turns them into VM_UNMAPPED, which ucs_rcache_event_cb
 * handles like any other.
 *
 * The span a subscription lands in (libucm registers whole spans) stays
 * reported until a part of it is unmapped, and every such unmap reaches
 * ucs_rcache_unmap_range_locked(): the cache remembers the last span and
 * registers regions inside it without calling libucm (a call per miss
 * otherwise, ~20 ns); any unmap that touches the span forgets it.  A span
 * is remembered only if no unmap at all was handled between the start of
 * the registration that subscribed and its end (the span libucm returned
 * may already have been cut by then).
 */
#include "rcache_uffd.h"

#include <ucm/api/ucm_ext.h>
#include <ucs/debug/ucs_log.h>

ucs_status_t ucs_rcache_uffd_init(ucs_rcache_uffd_t *uffd, int events,
                                  const char *name)
{
    ucs_status_t status;
    int active = 0;

    *uffd = (ucs_rcache_uffd_t){0};
    if (!(events & UCM_EVENT_VM_UNMAPPED)) {
        return UCS_OK; /* nobody would hear the events */
    }
    status = ucm_uffd_start(&active);
    if (status != UCS_OK) {
        ucs_log_error("rcache",
                      "%s: UCX_MEM_UFFD=yes, but userfaultfd is unavailable "
                      "(see ucm_info)",
                      name);
        return status;
    }
    uffd->active = active;
    return UCS_OK;
}

void ucs_rcache_uffd_subscribe_range(ucs_rcache_uffd_t *uffd,
                                     ucs_pgt_addr_t start, ucs_pgt_addr_t end)
{
    uintptr_t span_start, span_end;
    uint64_t token;

    /* a refusal (file-backed, another owner) leaves the hooks in charge;
     * no ucm_uffd_unsubscribe() at release: it would only lower a span's
     * count (the pages stay registered until they are unmapped, see
     * ucm_ext.h), for a lock on every release */
    if (ucm_uffd_subscribe_span((void *)start, end - start, &token, &span_start,
                                &span_end) == UCS_OK) {
        uffd->fresh     = 1;
        uffd->new_start = span_start;
        uffd->new_end   = span_end;
    }
}

void ucs_rcache_uffd_span_forget_locked(ucs_rcache_uffd_t *uffd,
                                        ucs_pgt_addr_t start,
                                        ucs_pgt_addr_t end)
{
    if ((start < uffd->end) && (uffd->start < end)) {
        ucs_rcache_uffd_span_reset_locked(uffd);
    }
}
