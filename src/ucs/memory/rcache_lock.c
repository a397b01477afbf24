/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The cache spinlock, with an owner so that the unmap handler, run by a
 * signal handler of the very thread that holds the lock (munmap from a
 * handler that interrupted a cache call), does not spin forever: it records
 * the range (rcache_deferred.h) and the owner applies it under the lock
 * before unlocking, or the next owner right after locking.
 */
#include "rcache_int.h"

#include <limits.h>
#include <stdlib.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

static __thread char ucs_rcache_self_mark
    __attribute__((tls_model("initial-exec")));

static inline uintptr_t ucs_rcache_self(void)
{
    return (uintptr_t)&ucs_rcache_self_mark;
}

void ucs_rcache_assert_owner(ucs_rcache_t *rcache, const char *func)
{
    if (__atomic_load_n(&rcache->lock, __ATOMIC_RELAXED) != ucs_rcache_self()) {
        ucs_rcache_error("%s: assertion failed: %s called without its lock "
                         "held by this thread",
                         rcache->name, func);
        abort();
    }
}

static void ucs_rcache_deferred_unmap(void *arg, ucs_pgt_addr_t start,
                                      ucs_pgt_addr_t end)
{
    ucs_rcache_unmap_range_locked((ucs_rcache_t *)arg, start, end);
}

/* Apply the deferred ranges (lock held). */
static void ucs_rcache_deferred_apply(ucs_rcache_t *rcache)
{
    rcache->stats.counts.deferred_unmaps += ucs_rcache_deferred_drain(
        &rcache->deferred, ucs_rcache_deferred_unmap, rcache);
}

void ucs_rcache_lock(ucs_rcache_t *rcache)
{
    uintptr_t self = ucs_rcache_self(), free_owner;

    for (;;) {
        free_owner = 0;
        if (__atomic_compare_exchange_n(&rcache->lock, &free_owner, self, 0,
                                        __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
            break;
        }
        while (__atomic_load_n(&rcache->lock, __ATOMIC_RELAXED) != 0) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
    }
    if (ucs_unlikely(ucs_rcache_deferred_pending(&rcache->deferred))) {
        ucs_rcache_deferred_apply(rcache);
    }
}

void ucs_rcache_unlock(ucs_rcache_t *rcache)
{
    if (ucs_unlikely(ucs_rcache_deferred_pending(&rcache->deferred))) {
        ucs_rcache_deferred_apply(rcache);
    }
    __atomic_store_n(&rcache->lock, 0, __ATOMIC_RELEASE);
}

int ucs_rcache_lock_or_defer(ucs_rcache_t *rcache, ucs_pgt_addr_t start,
                             ucs_pgt_addr_t end)
{
    if (__atomic_load_n(&rcache->lock, __ATOMIC_RELAXED) != ucs_rcache_self()) {
        ucs_rcache_lock(rcache);
        return 1;
    }
    /* we interrupted our own critical section */
    ucs_rcache_deferred_add(&rcache->deferred, start, end);
    return 0;
}

/* The registration path: owned by one thread at a time, taken and given
 * back inside the spinlock sections that a miss makes anyway (no atomic
 * operation of its own); waiters sleep on regpath_wake, which the owner bumps
 * under the lock when it gives the path back with waiters counted. */
void ucs_rcache_regpath_wait_locked(ucs_rcache_t *rcache)
{
    uint32_t seen;

    ucs_rcache_assert_locked(rcache);
    rcache->stats.counts.reg_waits += (rcache->regpath_owned != 0);
    while (rcache->regpath_owned) {
        ++rcache->regpath_waiters;
        seen = __atomic_load_n(&rcache->regpath_wake, __ATOMIC_RELAXED);
        ucs_rcache_unlock(rcache);
        /* a give-back after the unlock changed regpath_wake: no sleep */
        syscall(SYS_futex, &rcache->regpath_wake, FUTEX_WAIT_PRIVATE, seen,
                NULL, NULL, 0);
        ucs_rcache_lock(rcache);
        --rcache->regpath_waiters;
    }
}

void ucs_rcache_regpath_wake(ucs_rcache_t *rcache)
{
    /* all of them: each one checks again, the first to get the lock takes
     * the path, the others wait again */
    syscall(SYS_futex, &rcache->regpath_wake, FUTEX_WAKE_PRIVATE, INT_MAX, NULL,
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
