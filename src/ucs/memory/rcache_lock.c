/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The cache spinlock, with an owner so that the unmap handler, run by a
 * signal handler of the very thread that holds the lock (munmap from a
 * handler that interrupted a cache call), does not spin forever: it records
 * the range (rcache_deferred.h) and the owner applies it under the lock
 * before unlocking, or the next owner right after locking.
 */
#include "rcache_int.h"

#include <stdlib.h>

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
