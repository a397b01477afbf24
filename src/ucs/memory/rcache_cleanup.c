/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Background cleanup: when the invalidated-but-registered bytes pass
 * UCX_RCACHE_MAX_UNRELEASED (params->max_unreleased), the unmap handler
 * wakes a thread (one eventfd write: async-signal-safe, no lock) that
 * purges the cache, so deregistration happens outside the hook even when
 * the application makes no further cache call.
 *
 * The thread is started by the registration path of a cache with a finite
 * limit (and again in a forked child, which has no threads but the one that
 * forked), stopped by destroy.
 */
#include "rcache_int.h"

#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

static void ucs_rcache_cleanup_signal(int efd)
{
    uint64_t one = 1;
    ssize_t ret;

    do {
        ret = write(efd, &one, sizeof(one));
    } while ((ret < 0) && (errno == EINTR));
}

static void *ucs_rcache_cleanup_thread(void *arg)
{
    ucs_rcache_t *rcache = arg;
    uint64_t value;
    ssize_t ret;

    for (;;) {
        ret = read(rcache->cleanup.efd, &value, sizeof(value));
        if ((ret < 0) && (errno == EINTR)) {
            continue;
        }
        if (ucs_rcache_atomic_load(&rcache->cleanup.stop) || (ret < 0)) {
            break;
        }
        ucs_rcache_atomic_store(&rcache->cleanup.wake_pending, 0);
        ucs_rcache_purge(rcache);
        ucs_rcache_atomic_add(&rcache->stats.counts.cleanups, 1);
    }
    return NULL;
}

ucs_status_t ucs_rcache_cleanup_launch(ucs_rcache_t *rcache)
{
    int efd, ret;

    if (rcache->cleanup.running) {
        /* forked child: the parent's thread is not here; its eventfd is
         * shared with the parent */
        close(rcache->cleanup.efd);
        ucs_rcache_atomic_store(&rcache->cleanup.running, 0);
    }
    efd = eventfd(0, EFD_CLOEXEC);
    if (efd < 0) {
        ucs_rcache_error("%s: eventfd for the cleanup thread failed: %m",
                         rcache->name);
        return UCS_ERR_IO_ERROR;
    }
    rcache->cleanup.efd          = efd;
    rcache->cleanup.stop         = 0;
    rcache->cleanup.wake_pending = 0;
    ret                          = pthread_create(&rcache->cleanup.thread, NULL,
                                                  ucs_rcache_cleanup_thread, rcache);
    if (ret != 0) {
        ucs_rcache_error("%s: cannot start the cleanup thread: %s",
                         rcache->name, strerror(ret));
        close(efd);
        return UCS_ERR_NO_RESOURCE;
    }
    rcache->cleanup.fork_gen = rcache->fork.gen;
    ucs_rcache_atomic_store(&rcache->cleanup.running, 1);
    return UCS_OK;
}

void ucs_rcache_cleanup_wake(ucs_rcache_t *rcache)
{
    if (ucs_rcache_atomic_load(&rcache->cleanup.running)) {
        ucs_rcache_cleanup_signal(rcache->cleanup.efd);
    } /* else the next operation purges */
}

void ucs_rcache_cleanup_stop(ucs_rcache_t *rcache)
{
    if (!rcache->cleanup.running) {
        return;
    }
    if (rcache->cleanup.fork_gen == rcache->fork.gen) {
        ucs_rcache_atomic_store(&rcache->cleanup.stop, 1);
        ucs_rcache_atomic_store(&rcache->cleanup.running, 0);
        ucs_rcache_cleanup_signal(rcache->cleanup.efd);
        pthread_join(rcache->cleanup.thread, NULL);
    }
    close(rcache->cleanup.efd);
    rcache->cleanup.running = 0;
}
