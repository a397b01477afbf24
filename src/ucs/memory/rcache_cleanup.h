/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The registration cache's cleanup thread (rcache_cleanup.c says when it
 * runs): woken by the unmap handler when the tombstones' bytes pass
 * MAX_UNRELEASED, it purges the cache outside the hook.
 *
 * Contract, per field:
 *  - thread, efd, fork_gen: written by ucs_rcache_cleanup_launch() (the
 *    registration path owned) and read by _stop() (destroy) and the
 *    thread itself;
 *  - running, stop, wake_pending: atomic; wake_pending is set by the unmap
 *    handler before it wakes the thread (so that a burst of unmaps writes
 *    the eventfd once) and cleared by the thread before it purges.
 * Functions:
 *  - ucs_rcache_cleanup_start() (rcache_int.h, inline): the registration
 *    path owned; starts the thread when MAX_UNRELEASED asks for one and
 *    none runs in this fork generation (launch: UCS_ERR_IO_ERROR or
 *    UCS_ERR_NO_RESOURCE with one log line);
 *  - ucs_rcache_cleanup_wake(): hook context (one eventfd write,
 *    async-signal-safe, no lock);
 *  - ucs_rcache_cleanup_stop(): destroy, no lock held (joins the thread).
 */
#ifndef UCS_RCACHE_CLEANUP_H_
#define UCS_RCACHE_CLEANUP_H_

#include <ucs/memory/rcache.h>
#include <pthread.h>

typedef struct ucs_rcache_cleanup {
    pthread_t thread;
    int efd;           /* eventfd the thread reads */
    unsigned fork_gen; /* started in this generation */
    int running;       /* atomic */
    int stop;          /* atomic */
    int wake_pending;  /* atomic */
} ucs_rcache_cleanup_t;

#pragma GCC visibility push(hidden)

ucs_status_t ucs_rcache_cleanup_launch(ucs_rcache_t *rcache);
void ucs_rcache_cleanup_wake(ucs_rcache_t *rcache);
void ucs_rcache_cleanup_stop(ucs_rcache_t *rcache);

#pragma GCC visibility pop

#endif
