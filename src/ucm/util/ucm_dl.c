/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Walking the loaded objects in a way fork() survives; see ucm_dl.h.
 */
#include "ucm_dl.h"

#include <ucm/util/ucm_sys.h>

/* Thread id of the walker, 0 when no walk of libucm is in flight. */
static long ucm_dl_owner;

/* Set by the prepare handler when it took the lock (not when the forking
 * thread was walking itself). */
static int ucm_dl_fork_locked;

static void ucm_dl_lock(long tid)
{
    unsigned spins = 0;
    long expected;

    for (;;) {
        expected = 0;
        if (__atomic_compare_exchange_n(&ucm_dl_owner, &expected, tid, 0,
                                        __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
            return;
        }
        if (++spins > 64) {
            ucm_sys_sched_yield();
        }
    }
}

static void ucm_dl_unlock(void)
{
    __atomic_store_n(&ucm_dl_owner, 0, __ATOMIC_RELEASE);
}

int ucm_dl_iterate(int (*cb)(struct dl_phdr_info *, size_t, void *), void *arg)
{
    long tid = ucm_sys_gettid();
    int ret;

    if (__atomic_load_n(&ucm_dl_owner, __ATOMIC_RELAXED) == tid) {
        return dl_iterate_phdr(cb, arg); /* nested in this thread's walk */
    }
    ucm_dl_lock(tid);
    ret = dl_iterate_phdr(cb, arg);
    ucm_dl_unlock();
    return ret;
}

void ucm_dl_atfork_prepare(void)
{
    long tid = ucm_sys_gettid();

    if (__atomic_load_n(&ucm_dl_owner, __ATOMIC_RELAXED) == tid) {
        ucm_dl_fork_locked = 0; /* forked from inside its own walk */
        return;
    }
    ucm_dl_lock(tid);
    ucm_dl_fork_locked = 1;
}

void ucm_dl_atfork_parent(void)
{
    if (ucm_dl_fork_locked) {
        ucm_dl_unlock();
    }
}

void ucm_dl_atfork_child(void)
{
    if (ucm_dl_fork_locked) {
        ucm_dl_unlock();
    } else {
        /* the forking thread walks on, under its new thread id */
        __atomic_store_n(&ucm_dl_owner, ucm_sys_gettid(), __ATOMIC_RELAXED);
    }
}
