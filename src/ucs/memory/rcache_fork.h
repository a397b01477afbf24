/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The registration cache and fork() (rcache_fork.c says what happens at
 * each step): the cache's place in the process-wide list that the
 * pthread_atfork() handlers walk, its fork generation, and whether it
 * invalidates everything before a fork (PURGE_ON_FORK).
 *
 * Contract:
 *  - gen: written only by the child handler (one thread then), read
 *    anywhere; a region registered in an earlier generation belongs to a
 *    parent and is freed without mem_dereg;
 *  - purge: set at create, read by the prepare handler;
 *  - link: the list's lock (rcache_fork.c);
 *  - ucs_rcache_fork_register(): create (link initialized), UCS_ERR_NO_MEMORY
 *    with one log line if pthread_atfork() failed; _unregister(): destroy,
 *    also when register was not called or failed;
 *    _drop_leases(): thread exit, no cache lock held.
 */
#ifndef UCS_RCACHE_FORK_H_
#define UCS_RCACHE_FORK_H_

#include <ucs/memory/rcache.h>

typedef struct ucs_rcache_fork {
    ucs_list_link_t link; /* in the process-wide list of caches */
    unsigned gen;         /* fork generation (child handler) */
    int purge;            /* invalidate everything before a fork */
} ucs_rcache_fork_t;

#pragma GCC visibility push(hidden)

ucs_status_t ucs_rcache_fork_register(ucs_rcache_t *rcache);
void ucs_rcache_fork_unregister(ucs_rcache_t *rcache);
/* Thread exit: drop slot's leases in every live cache. */
void ucs_rcache_fork_drop_leases(unsigned slot);

#pragma GCC visibility pop

#endif
