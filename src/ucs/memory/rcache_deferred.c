/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Deferred unmaps of the cache (rcache_deferred.h): applied by the lock
 * owner.
 */
#include "rcache_deferred.h"

unsigned long ucs_rcache_deferred_drain(ucs_rcache_deferred_t *deferred,
                                        ucs_rcache_deferred_apply_t apply,
                                        void *arg)
{
    unsigned long recorded = 0;
    unsigned done          = 0, count, i;

    for (;;) {
        count = __atomic_load_n(&deferred->count, __ATOMIC_ACQUIRE);
        if (count > UCS_RCACHE_DEFERRED) {
            apply(arg, 0, ~(ucs_pgt_addr_t)0);
        } else {
            for (i = done; i < count; ++i) {
                apply(arg, deferred->ranges[i].start, deferred->ranges[i].end);
            }
        }
        recorded += count - ((done < count) ? done : count);
        done = count;
        /* a handler interrupting us may have added one meanwhile */
        if (__atomic_compare_exchange_n(&deferred->count, &count, 0, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            return recorded;
        }
    }
}
