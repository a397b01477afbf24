/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libucm start-up: configuration, original functions, fork handlers.
 *
 * fork(): every libucm lock is taken before fork and released in both
 * processes, so the child never inherits a lock held by a thread that does
 * not exist there.  A thread that forks from inside an event handler cannot
 * wait for a writer that waits for it: it only try-locks, and the child
 * re-initializes a lock it could not take.  The loader-walk lock
 * (ucm_dl.h) is waited for in both cases: it guards a lock of glibc's that
 * the child cannot re-initialize, and its holders wait for nobody.
 */
#include <ucm/event/ucm_event.h>
#include <ucm/mmap/ucm_filewatch.h>
#include <ucm/mmap/ucm_mmap.h>
#include <ucm/reloc/ucm_reloc.h>
#include <ucm/util/ucm_config.h>
#include <ucm/util/ucm_dl.h>
#include <ucm/util/ucm_log.h>
#include <ucm/util/ucm_opts.h>
#include <ucm/util/ucm_release.h>
#include <ucm/util/ucm_sys.h>

#include <pthread.h>

/* In lock order. */
static pthread_mutex_t *ucm_init_fork_locks[] = {
    &ucm_opts_lock, &ucm_release_lock, &ucm_mmap_install_lock, &ucm_reloc_lock,
    &ucm_event_writer_lock};
static int ucm_init_fork_locked[ucs_static_array_size(ucm_init_fork_locks)];

static void ucm_init_atfork_prepare(void)
{
    int in_handler = ucm_rcu_in_read_section();
    unsigned i;

    for (i = 0; i < ucs_static_array_size(ucm_init_fork_locks); ++i) {
        if (in_handler) {
            ucm_init_fork_locked[i] =
                (pthread_mutex_trylock(ucm_init_fork_locks[i]) == 0);
        } else {
            pthread_mutex_lock(ucm_init_fork_locks[i]);
            ucm_init_fork_locked[i] = 1;
        }
    }
    ucm_dl_atfork_prepare(); /* a leaf: waited for, also in a handler */
}

static void ucm_init_atfork_parent(void)
{
    unsigned i = ucs_static_array_size(ucm_init_fork_locks);

    ucm_dl_atfork_parent();
    while (i-- > 0) {
        if (ucm_init_fork_locked[i]) {
            pthread_mutex_unlock(ucm_init_fork_locks[i]);
        }
    }
}

static void ucm_init_atfork_child(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    unsigned i            = ucs_static_array_size(ucm_init_fork_locks);

    ucm_rcu_atfork_child();
    ucm_dl_atfork_child();
    while (i-- > 0) {
        if (ucm_init_fork_locked[i]) {
            pthread_mutex_unlock(ucm_init_fork_locks[i]);
        } else {
            *ucm_init_fork_locks[i] = fresh;
        }
    }
    ucm_filewatch_atfork_child(); /* last: it starts a thread */
}

static void UCS_F_CTOR ucm_init(void)
{
    ucm_sys_page_size();
    ucm_config_init();
    ucm_filewatch_init();
    ucm_rcu_init();
    ucm_mmap_init();
    pthread_atfork(ucm_init_atfork_prepare, ucm_init_atfork_parent,
                   ucm_init_atfork_child);
}
