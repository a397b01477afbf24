/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Event handler list and dispatch.
 *
 * The list is an immutable array sorted by priority, replaced as a whole by
 * writers (ucm_set_event_handler / ucm_unset_event_handler, serialized by a
 * mutex) and read under ucm_rcu_read_lock() by the hooks, so dispatch takes
 * no lock and never allocates.
 */
#ifndef UCM_EVENT_H_
#define UCM_EVENT_H_

#include "ucm_rcu.h"

#include <ucm/api/ucm.h>
#include <pthread.h>

typedef struct ucm_event_handler {
    int events;
    int priority;
    ucm_event_callback_t cb;
    void *arg;
} ucm_event_handler_t;

struct ucm_event_list {
    int events; /* union of the handlers' events */
    unsigned count;
    size_t alloc_size; /* own mapping's size; 0: in ucm_hot */
    ucm_event_handler_t handlers[];
};

/* Events whose delivery needs the mmap-family hooks. */
#define UCM_EVENT_MMAP_FAMILY                                                  \
    (UCM_EVENT_MMAP | UCM_EVENT_MUNMAP | UCM_EVENT_MREMAP | UCM_EVENT_SHMAT |  \
     UCM_EVENT_SHMDT | UCM_EVENT_SBRK | UCM_EVENT_MADVISE | UCM_EVENT_BRK |    \
     UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED)

/* Every event a handler may ask for, and the flags that may come with them
 * in ucm_set_event_handler(). */
#define UCM_EVENT_ALL                                                          \
    (UCM_EVENT_MMAP_FAMILY | UCM_EVENT_MEM_TYPE_ALLOC | UCM_EVENT_MEM_TYPE_FREE)
#define UCM_EVENT_FLAGS                                                        \
    (UCM_EVENT_FLAG_NO_INSTALL | UCM_EVENT_FLAG_EXISTING_ALLOC)

/* Must be called inside a read section; returns the current list. */
static UCS_F_ALWAYS_INLINE ucm_event_list_t *ucm_event_list_get(void)
{
    return __atomic_load_n(&ucm_hot.event_list, __ATOMIC_CONSUME);
}

/* Call the handlers of 'type' in priority order: before_orig 1 calls those
 * with priority < 0, 0 those with priority >= 0, -1 all of them. */
void ucm_event_call(const ucm_event_list_t *list, ucm_event_type_t type,
                    ucm_event_t *event, int before_orig);

/* Call every handler of 'type' (aggregate events: no original call).
 * Inline: the hooks raise VM_UNMAPPED on every call. */
static UCS_F_ALWAYS_INLINE void ucm_event_call_all(const ucm_event_list_t *list,
                                                   ucm_event_type_t type,
                                                   ucm_event_t *event)
{
    const ucm_event_handler_t *h   = list->handlers;
    const ucm_event_handler_t *end = h + list->count;

    for (; h < end; ++h) {
        if (h->events & type) {
            h->cb(type, event, h->arg);
        }
    }
}

/* Add/remove a handler without installing hooks (internal: stock UCX's
 * libucm exports the same names with other signatures, so these are never
 * exported). */
/* ucm_existing.c: a handler of MEM_TYPE_ALLOC set with
 * UCM_EVENT_FLAG_EXISTING_ALLOC in events gets every source's report of the
 * allocations that existed before it (no lock held; not hook context). */
void ucm_existing_alloc_replay(int events, ucm_event_callback_t cb, void *arg);

ucs_status_t ucm_event_handler_add(int events, int priority,
                                   ucm_event_callback_t cb, void *arg);
void ucm_event_handler_remove(int events, ucm_event_callback_t cb, void *arg);

/* Serializes writers of the handler list. */
extern pthread_mutex_t ucm_event_writer_lock;

/* Events declared external (ucm_set_external_event). */
extern int ucm_event_external;

#endif
