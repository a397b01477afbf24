/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Walking the loaded objects (dl_iterate_phdr) in a way fork() survives.
 *
 * glibc's dl_iterate_phdr holds a loader lock that fork() does not reset
 * in the child: a child forked while another thread walks the objects
 * hangs at its own first walk.  libucm walks often (every handler set,
 * every reloc update), so all of its walks go through ucm_dl_iterate(),
 * which holds a lock of its own that fork() waits for (see the atfork
 * functions below, called from ucm_init.c): no walk of libucm is ever in
 * flight in another thread when the child starts.  Walks by other code of
 * the process are outside libucm's reach.
 *
 * - ucm_dl_iterate(): as dl_iterate_phdr.  Async-signal-safe as far as
 *   libucm is concerned (the lock is a spin-and-yield word, no malloc);
 *   nests in the same thread (a signal handler, a callback that walks).
 *   The callback must not take other libucm locks (the walk lock is a
 *   leaf) and must not wait for event handlers.
 * - The walk lock is taken last by the fork prepare handler, also when
 *   fork() is called from an event handler: its holders never wait for
 *   anything a forking thread can hold.
 */
#ifndef UCM_DL_H_
#define UCM_DL_H_

#include <link.h>

int ucm_dl_iterate(int (*cb)(struct dl_phdr_info *, size_t, void *), void *arg);

/* pthread_atfork hooks (ucm_init.c calls them in lock order). */
void ucm_dl_atfork_prepare(void);
void ucm_dl_atfork_parent(void);
void ucm_dl_atfork_child(void);

#endif
