/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sources of allocations that existed before a handler was set
 * (UCM_EVENT_FLAG_EXISTING_ALLOC, see ucm_ext.h): a fixed table of report
 * functions, appended to without a lock (a compare-and-swap on the count of
 * claimed slots, then the slot is published), read by the replay.
 */
#include "ucm_event.h"

#include <ucm/api/ucm_ext.h>
#include <ucm/util/ucm_log.h>

static ucm_existing_alloc_report_t
    ucm_existing_sources[UCM_EXISTING_ALLOC_SOURCES];
static unsigned ucm_existing_claimed;

ucs_status_t ucm_existing_alloc_source_add(ucm_existing_alloc_report_t report)
{
    unsigned i, n;

    if (report == NULL) {
        ucm_error("ucm_existing_alloc_source_add: NULL report function");
        return UCS_ERR_INVALID_PARAM;
    }
    n = __atomic_load_n(&ucm_existing_claimed, __ATOMIC_ACQUIRE);
    do {
        for (i = 0; i < n; ++i) {
            if (__atomic_load_n(&ucm_existing_sources[i], __ATOMIC_ACQUIRE) ==
                report) {
                return UCS_OK;
            }
        }
        if (n == UCM_EXISTING_ALLOC_SOURCES) {
            ucm_error("ucm_existing_alloc_source_add: more than %d sources",
                      UCM_EXISTING_ALLOC_SOURCES);
            return UCS_ERR_EXCEEDS_LIMIT;
        }
    } while (!__atomic_compare_exchange_n(&ucm_existing_claimed, &n, n + 1, 0,
                                          __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
    __atomic_store_n(&ucm_existing_sources[n], report, __ATOMIC_RELEASE);
    return UCS_OK;
}

void ucm_existing_alloc_replay(int events, ucm_event_callback_t cb, void *arg)
{
    unsigned i, n;
    ucm_existing_alloc_report_t report;

    if (!(events & UCM_EVENT_FLAG_EXISTING_ALLOC) ||
        !(events & UCM_EVENT_MEM_TYPE_ALLOC)) {
        return;
    }
    n = __atomic_load_n(&ucm_existing_claimed, __ATOMIC_ACQUIRE);
    for (i = 0; i < n; ++i) {
        report = __atomic_load_n(&ucm_existing_sources[i], __ATOMIC_ACQUIRE);
        if (report != NULL) { /* NULL: claimed, not published yet */
            report(cb, arg);
        }
    }
}
