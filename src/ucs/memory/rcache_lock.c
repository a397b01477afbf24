/*
 * The cache spinlock, with an owner so that the unmap handler, run by a
 * signal handler of the very thread that holds the lock (munmap from a
 * handler that interrupted a cache call), does not spin forever: it records
 * the range in a fixed array (async-signal-safe: only atomics on memory of
 * the cache) and the owner applies it under the lock before unlocking, or
 * the next owner right after locking.  Past UCS_RCACHE_DEFERRED ranges, the
 * whole cache is invalidated (safe, only slower).
 */
#include "rcache_int.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

static __thread char ucs_rcache_self_mark
    __attribute__((tls_model("initial-exec")));

static inline uintptr_t ucs_rcache_self(void)
{
    return (uintptr_t)&ucs_rcache_self_mark;
}

/* Apply the deferred ranges (lock held). */
static void ucs_rcache_deferred_apply(ucs_rcache_t *rcache)
{
    unsigned done = 0, count, i;

    for (;;) {
        count = ucs_rcache_atomic_load(&rcache->deferred.count);
        if (count > UCS_RCACHE_DEFERRED) {
            ucs_rcache_unmap_range_locked(rcache, 0, ~(ucs_pgt_addr_t)0);
        } else {
            for (i = done; i < count; ++i) {
                ucs_rcache_unmap_range_locked(rcache,
                                              rcache->deferred.ranges[i].start,
                                              rcache->deferred.ranges[i].end);
            }
        }
        rcache->stats.deferred_unmaps += count - ucs_min(done, count);
        done = count;
        /* a handler interrupting us may have added one meanwhile */
        if (__atomic_compare_exchange_n(&rcache->deferred.count, &count, 0, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            return;
        }
    }
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
    if (ucs_unlikely(ucs_rcache_atomic_load(&rcache->deferred.count) != 0)) {
        ucs_rcache_deferred_apply(rcache);
    }
}

void ucs_rcache_unlock(ucs_rcache_t *rcache)
{
    if (ucs_unlikely(ucs_rcache_atomic_load(&rcache->deferred.count) != 0)) {
        ucs_rcache_deferred_apply(rcache);
    }
    __atomic_store_n(&rcache->lock, 0, __ATOMIC_RELEASE);
}

int ucs_rcache_lock_or_defer(ucs_rcache_t *rcache, ucs_pgt_addr_t start,
                             ucs_pgt_addr_t end)
{
    unsigned slot;

    if (__atomic_load_n(&rcache->lock, __ATOMIC_RELAXED) != ucs_rcache_self()) {
        ucs_rcache_lock(rcache);
        return 1;
    }
    /* we interrupted our own critical section */
    slot = __atomic_fetch_add(&rcache->deferred.count, 1, __ATOMIC_ACQ_REL);
    if (slot < UCS_RCACHE_DEFERRED) {
        rcache->deferred.ranges[slot].start = start;
        rcache->deferred.ranges[slot].end   = end;
    }
    return 0;
}

/* reg_lock: one atomic operation each way when nobody waits (a futex word
 * instead of a pthread mutex: a third of the instructions, and the miss
 * path takes it once per registration). */
void ucs_rcache_reg_lock(ucs_rcache_t *rcache)
{
    uint32_t state = 0;

    if (__atomic_compare_exchange_n(&rcache->reg_lock, &state, 1, 0,
                                    __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        return;
    }
    /* held: say there is a waiter, sleep while it stays held */
    if (state != 2) {
        state = __atomic_exchange_n(&rcache->reg_lock, 2, __ATOMIC_ACQUIRE);
    }
    while (state != 0) {
        syscall(SYS_futex, &rcache->reg_lock, FUTEX_WAIT_PRIVATE, 2, NULL, NULL,
                0);
        state = __atomic_exchange_n(&rcache->reg_lock, 2, __ATOMIC_ACQUIRE);
    }
}

void ucs_rcache_reg_unlock(ucs_rcache_t *rcache)
{
    if (__atomic_exchange_n(&rcache->reg_lock, 0, __ATOMIC_RELEASE) == 2) {
        syscall(SYS_futex, &rcache->reg_lock, FUTEX_WAKE_PRIVATE, 1, NULL, NULL,
                0);
    }
}
