/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fork() support: one pthread_atfork() set for all caches.
 *  - prepare: take every cache's locks (so the child never inherits one held
 *    mid-update) and, with PURGE_ON_FORK, tombstone every region;
 *  - parent: release the locks (tombstones are purged by the next call);
 *  - child: fresh locks, a new fork generation (regions registered by the
 *    parent are freed without mem_dereg), and every region tombstoned, so the
 *    child's cache is usable and empty of the parent's registrations.
 */
#include "rcache_int.h"

static pthread_mutex_t ucs_rcache_fork_lock = PTHREAD_MUTEX_INITIALIZER;
static ucs_list_link_t ucs_rcache_fork_list = {&ucs_rcache_fork_list,
                                               &ucs_rcache_fork_list};
static pthread_once_t ucs_rcache_fork_once  = PTHREAD_ONCE_INIT;
static int ucs_rcache_fork_status;

#define ucs_rcache_fork_for_each(_rcache)                                      \
    for (ucs_list_link_t *_l = ucs_rcache_fork_list.next;                      \
         (_l != &ucs_rcache_fork_list) &&                                      \
         ((_rcache = ucs_container_of(_l, ucs_rcache_t, fork.link)), 1);       \
         _l = _l->next)

static void ucs_rcache_fork_prepare(void)
{
    ucs_rcache_t *rcache;

    pthread_mutex_lock(&ucs_rcache_fork_lock);
    ucs_rcache_fork_for_each(rcache)
    {
        ucs_rcache_regpath_acquire(rcache);
        ucs_rcache_lock(rcache);
        if (rcache->fork.purge) {
            ucs_rcache_tombstone_all_locked(rcache);
        }
    }
}

static void ucs_rcache_fork_parent(void)
{
    ucs_rcache_t *rcache;

    ucs_rcache_fork_for_each(rcache)
    {
        ucs_rcache_unlock(rcache);
        ucs_rcache_regpath_release(rcache);
    }
    pthread_mutex_unlock(&ucs_rcache_fork_lock);
}

static void ucs_rcache_fork_child(void)
{
    ucs_rcache_t *rcache;

    ucs_rcache_fork_for_each(rcache)
    {
        /* the lock stays held by prepare's thread, the child's only one,
         * until the cache is set right; then it is let go */
        ucs_rcache_deferred_reset(&rcache->deferred);
        ucs_rcache_regpath_reset_locked(&rcache->regpath);
        rcache->fork.gen++;
        ucs_rcache_inflight_clear_locked(&rcache->inflight);
        rcache->maps.count = 0;
        ucs_rcache_uffd_span_reset_locked(&rcache->uffd);
        /* the other threads' slots have no owner here any more */
        ucs_rcache_leases_drop_all_locked(rcache);
        ucs_rcache_tombstone_all_locked(rcache);
        __atomic_store_n(&rcache->lock, 0, __ATOMIC_RELEASE);
    }
    pthread_mutex_init(&ucs_rcache_fork_lock, NULL);
}

static void ucs_rcache_fork_init(void)
{
    /* its fork handlers first: they then run after ours in prepare, so
     * the lock order is registration path -> MADV_DONTFORK map, as on misses */
    ucs_rcache_dontfork_init();
    ucs_rcache_fork_status = pthread_atfork(
        ucs_rcache_fork_prepare, ucs_rcache_fork_parent, ucs_rcache_fork_child);
}

ucs_status_t ucs_rcache_fork_register(ucs_rcache_t *rcache)
{
    pthread_once(&ucs_rcache_fork_once, ucs_rcache_fork_init);
    if (ucs_rcache_fork_status != 0) {
        ucs_rcache_error("%s: pthread_atfork failed", rcache->name);
        return UCS_ERR_NO_MEMORY;
    }
    pthread_mutex_lock(&ucs_rcache_fork_lock);
    ucs_list_add_tail(&ucs_rcache_fork_list, &rcache->fork.link);
    pthread_mutex_unlock(&ucs_rcache_fork_lock);
    return UCS_OK;
}

void ucs_rcache_fork_drop_leases(unsigned slot)
{
    ucs_rcache_t *rcache;

    pthread_mutex_lock(&ucs_rcache_fork_lock);
    ucs_rcache_fork_for_each(rcache)
    {
        ucs_rcache_lock(rcache);
        ucs_rcache_lease_drop_locked(rcache, &rcache->slots[slot]);
        rcache->slots[slot].last = NULL;
        ucs_rcache_unlock(rcache);
    }
    pthread_mutex_unlock(&ucs_rcache_fork_lock);
}

void ucs_rcache_fork_unregister(ucs_rcache_t *rcache)
{
    pthread_mutex_lock(&ucs_rcache_fork_lock);
    if (!ucs_list_is_empty(&rcache->fork.link)) {
        ucs_list_del(&rcache->fork.link);
        ucs_list_head_init(&rcache->fork.link);
    }
    pthread_mutex_unlock(&ucs_rcache_fork_lock);
}
