/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The registration path: owned by one thread at a time, the one running a
 * miss (user ops may run while it is owned, with no lock held); other
 * threads that miss sleep until it is given back.  Neither lookups nor the
 * unmap handler take it.  It is a flag under the cache's spinlock, taken
 * in the miss's first locked section and usually given back in its last
 * one, so it costs no atomic operation of its own (rcache_regpath.c).
 *
 * Contract:
 *  - every field: under the cache's lock; wake is also read without it by
 *    the futex sleep (rcache_regpath.c);
 *  - ucs_rcache_regpath_acquire() / _release(): no lock held, not for hook
 *    context (waiting sleeps); the fork handlers acquire it in prepare and
 *    a forked child starts with it free (ucs_rcache_regpath_reset_locked());
 *  - ucs_rcache_regpath_take_locked() (rcache_int.h): the lock held (let go
 *    while it waits, held again on return);
 *  - ucs_rcache_regpath_give_unlock() (rcache_int.h): the lock held; gives
 *    the path back, lets the lock go and wakes the waiters;
 *  - ucs_rcache_regpath_wait_locked(), _wake(): their helpers.
 * What is written only by the path's owner is marked "(registration path)"
 * where it is declared.
 */
#ifndef UCS_RCACHE_REGPATH_H_
#define UCS_RCACHE_REGPATH_H_

#include <ucs/memory/rcache.h>
#include <stdint.h>

typedef struct ucs_rcache_regpath {
    uint32_t owned;   /* a thread owns the path */
    uint32_t waiters; /* threads waiting for it */
    uint32_t wake;    /* futex word, bumped when the path is given back to
                         waiters */
} ucs_rcache_regpath_t;

#pragma GCC visibility push(hidden)

void ucs_rcache_regpath_acquire(ucs_rcache_t *rcache);
void ucs_rcache_regpath_release(ucs_rcache_t *rcache);
void ucs_rcache_regpath_wait_locked(ucs_rcache_t *rcache);
void ucs_rcache_regpath_wake(ucs_rcache_t *rcache);

#pragma GCC visibility pop

/* A new cache: the path free, nobody waiting. */
static inline void ucs_rcache_regpath_init(ucs_rcache_regpath_t *regpath)
{
    regpath->owned   = 0;
    regpath->waiters = 0;
    regpath->wake    = 0;
}

/* A forked child: the path was owned by the forking thread (prepare), and
 * the child has none of the threads that waited for it. */
static inline void
ucs_rcache_regpath_reset_locked(ucs_rcache_regpath_t *regpath)
{
    regpath->owned   = 0;
    regpath->waiters = 0;
}

#endif
