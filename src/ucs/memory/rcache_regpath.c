/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The registration path (rcache_regpath.h): taken and given back inside
 * the spinlock sections that a miss makes anyway (no atomic operation of
 * its own); waiters sleep on regpath.wake, which the owner bumps under the
 * lock when it gives the path back with waiters counted.
 */
#include "rcache_int.h"

#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

void ucs_rcache_regpath_wait_locked(ucs_rcache_t *rcache)
{
    uint32_t seen;

    ucs_rcache_assert_locked(rcache);
    rcache->stats.counts.reg_waits += (rcache->regpath.owned != 0);
    while (rcache->regpath.owned) {
        ++rcache->regpath.waiters;
        seen = __atomic_load_n(&rcache->regpath.wake, __ATOMIC_RELAXED);
        ucs_rcache_unlock(rcache);
        /* a give-back after the unlock changed regpath.wake: no sleep */
        syscall(SYS_futex, &rcache->regpath.wake, FUTEX_WAIT_PRIVATE, seen,
                NULL, NULL, 0);
        ucs_rcache_lock(rcache);
        --rcache->regpath.waiters;
    }
}

void ucs_rcache_regpath_wake(ucs_rcache_t *rcache)
{
    /* all of them: each one checks again, the first to get the lock takes
     * the path, the others wait again */
    syscall(SYS_futex, &rcache->regpath.wake, FUTEX_WAKE_PRIVATE, INT_MAX, NULL,
            NULL, 0);
}

void ucs_rcache_regpath_acquire(ucs_rcache_t *rcache)
{
    ucs_rcache_lock(rcache);
    ucs_rcache_regpath_take_locked(rcache);
    ucs_rcache_unlock(rcache);
}

void ucs_rcache_regpath_release(ucs_rcache_t *rcache)
{
    ucs_rcache_lock(rcache);
    ucs_rcache_regpath_give_unlock(rcache);
}
