/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Handler list and dispatch; see ucm_event.h.
 */
#include "ucm_event.h"

#include <ucm/api/ucm_ext.h>
#include <ucm/compat/ucm_compat_int.h>
#include <ucm/mmap/ucm_mmap.h>
#include <ucm/util/ucm_log.h>
#include <ucm/util/ucm_stats.h>

#include <ucm/util/ucm_sys.h>

#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

int ucm_event_external = 0;

pthread_mutex_t ucm_event_writer_lock = PTHREAD_MUTEX_INITIALIZER;

UCS_F_HOT void ucm_event_call(const ucm_event_list_t *list,
                              ucm_event_type_t type, ucm_event_t *event,
                              int before_orig)
{
    const ucm_event_handler_t *h;
    unsigned i;

    for (i = 0; i < list->count; ++i) {
        h = &list->handlers[i];
        if (before_orig == 1) {
            if (h->priority >= 0) {
                break;
            }
        } else if ((before_orig == 0) && (h->priority < 0)) {
            continue;
        }
        if (h->events & type) {
            h->cb(type, event, h->arg);
        }
    }
}

/* Deliver an event about a range from outside the hooks (external VM
 * events, memory-type events).  vm_mapped/vm_unmapped and mem_type share
 * their leading address/size fields. */
UCS_F_HOT static void ucm_event_range_dispatch(ucm_event_type_t type,
                                               void *addr, size_t len,
                                               ucs_memory_type_t mem_type)
{
    ucm_event_list_t *list;
    ucm_event_t event;

    ucm_rcu_read_lock();
    list = ucm_event_list_get();
    if (list->events & type) {
        event.mem_type.address  = addr;
        event.mem_type.size     = len;
        event.mem_type.mem_type = mem_type;
        /* what UCX 1.22's consumers read: nothing known of either */
        event.mem_type.sys_dev   = UCM_EVENT_SYS_DEV_UNKNOWN;
        event.mem_type.mem_flags = 0;
        ucm_event_call_all(list, type, &event);
    }
    ucm_rcu_read_unlock();
}

void ucm_vm_mmap(void *addr, size_t length)
{
    ucm_stats_external_call(UCM_EVENT_VM_MAPPED);
    ucm_event_range_dispatch(UCM_EVENT_VM_MAPPED, addr, length,
                             UCS_MEMORY_TYPE_HOST);
}

void ucm_vm_munmap(void *addr, size_t length)
{
    ucm_stats_external_call(UCM_EVENT_VM_UNMAPPED);
    ucm_event_range_dispatch(UCM_EVENT_VM_UNMAPPED, addr, length,
                             UCS_MEMORY_TYPE_HOST);
}

void ucm_dispatch_mem_type_alloc(void *addr, size_t length,
                                 ucs_memory_type_t mem_type)
{
    ucm_event_range_dispatch(UCM_EVENT_MEM_TYPE_ALLOC, addr, length, mem_type);
}

void ucm_dispatch_mem_type_free(void *addr, size_t length,
                                ucs_memory_type_t mem_type)
{
    ucm_event_range_dispatch(UCM_EVENT_MEM_TYPE_FREE, addr, length, mem_type);
}

/* A replaced list that readers may still see (until a grace period). */
static ucm_event_list_t *ucm_event_list_stale;

static size_t ucm_event_list_size(unsigned count)
{
    return sizeof(ucm_event_list_t) + (count * sizeof(ucm_event_handler_t));
}

/* Storage for a list of up to 'count' handlers: the static buffer of
 * ucm_hot that is not current (after a grace period if the previous list in
 * it may still be read), or, for long lists, an anonymous mapping (not
 * malloc: another library may replace malloc/free under us, as stock UCX's
 * malloc hooks do, and raw syscalls raise no events).  Writer lock held. */
static ucm_event_list_t *ucm_event_list_alloc(unsigned count)
{
    size_t page = ucm_sys_page_size();
    ucm_event_list_t *list;
    size_t size;
    long ret;

    if (ucm_event_list_size(count) <= UCM_HOT_LIST_BUF_SIZE) {
        list = (ucm_event_list_t *)&ucm_hot.list_buf[0];
        if (ucm_hot.event_list == list) {
            list = (ucm_event_list_t *)&ucm_hot.list_buf[1];
        }
        if (ucm_event_list_stale == list) {
            ucm_rcu_synchronize();
            ucm_event_list_stale = NULL;
        }
        list->alloc_size = 0;
        return list;
    }
    size = (ucm_event_list_size(count) + page - 1) & ~(page - 1);
    ret  = ucm_sys_mmap(NULL, size, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ucm_sys_is_err(ret)) {
        return NULL;
    }
    list             = (ucm_event_list_t *)ret;
    list->alloc_size = size;
    return list;
}

/* Build a new list from 'old' with 'add' inserted (if not NULL) and
 * 'remove_events' cleared from handlers matching (cb, arg). */
static ucm_event_list_t *ucm_event_list_build(const ucm_event_list_t *old,
                                              const ucm_event_handler_t *add,
                                              int remove_events,
                                              ucm_event_callback_t cb,
                                              void *arg)
{
    ucm_event_list_t *list;
    ucm_event_handler_t h;
    unsigned i, n = 0;
    int added = 0;

    list = ucm_event_list_alloc(old->count + 1);
    if (list == NULL) {
        return NULL;
    }
    list->events = 0;
    for (i = 0; i < old->count; ++i) {
        h = old->handlers[i];
        if ((add != NULL) && !added && (add->priority < h.priority)) {
            list->handlers[n++] = *add; /* after equal priorities */
            list->events |= add->events;
            added = 1;
        }
        if ((h.cb == cb) && (h.arg == arg)) {
            h.events &= ~remove_events;
        }
        if (h.events == 0) {
            continue;
        }
        list->handlers[n++] = h;
        list->events |= h.events;
    }
    if ((add != NULL) && !added) {
        list->handlers[n++] = *add;
        list->events |= add->events;
    }
    list->count = n;
    return list;
}

/* Publish a new list.  A removal waits for a grace period before returning
 * (the removed handler must not run afterwards); otherwise the old list is
 * only marked stale and the wait happens when its storage is reused. */
static void ucm_event_list_publish(ucm_event_list_t *list, int removal)
{
    ucm_event_list_t *old = ucm_hot.event_list;

    __atomic_store_n(&ucm_hot.event_list, list, __ATOMIC_RELEASE);
    if (removal || (old->alloc_size > 0) || (ucm_event_list_stale != NULL)) {
        ucm_rcu_synchronize();
        ucm_event_list_stale = NULL;
        if (old->alloc_size > 0) {
            ucm_sys_munmap(old, old->alloc_size);
        }
    } else {
        ucm_event_list_stale = old;
    }
}

ucs_status_t ucm_event_handler_add(int events, int priority,
                                   ucm_event_callback_t cb, void *arg)
{
    ucm_event_handler_t handler = {events, priority, cb, arg};
    ucm_event_list_t *list;

    pthread_mutex_lock(&ucm_event_writer_lock);
    list = ucm_event_list_build(ucm_hot.event_list, &handler, 0, NULL, NULL);
    if (list == NULL) {
        pthread_mutex_unlock(&ucm_event_writer_lock);
        ucm_error("failed to allocate the event handler list");
        return UCS_ERR_NO_MEMORY;
    }
    ucm_event_list_publish(list, 0);
    pthread_mutex_unlock(&ucm_event_writer_lock);
    return UCS_OK;
}

void ucm_event_handler_remove(int events, ucm_event_callback_t cb, void *arg)
{
    ucm_event_list_t *list, *cur;
    unsigned i;

    pthread_mutex_lock(&ucm_event_writer_lock);
    list = ucm_event_list_build(ucm_hot.event_list, NULL, events, cb, arg);
    if (list == NULL) {
        /* cannot allocate: clear the bits in place (readers tolerate it),
         * then wait for the readers that may have seen them set */
        cur = ucm_hot.event_list;
        for (i = 0; i < cur->count; ++i) {
            if ((cur->handlers[i].cb == cb) && (cur->handlers[i].arg == arg)) {
                __atomic_and_fetch(&cur->handlers[i].events, ~events,
                                   __ATOMIC_RELEASE);
            }
        }
        ucm_rcu_synchronize();
        pthread_mutex_unlock(&ucm_event_writer_lock);
        ucm_error("out of memory while removing an event handler");
        return;
    }
    ucm_event_list_publish(list, 1);
    pthread_mutex_unlock(&ucm_event_writer_lock);
}

ucs_status_t ucm_set_event_handler(int events, int priority,
                                   ucm_event_callback_t cb, void *arg)
{
    ucm_event_callback_t add_cb = cb;
    void *add_arg               = arg;
    int install_events, add_events, wrapped;
    ucs_status_t status;

    if (events & ~(UCM_EVENT_ALL | UCM_EVENT_FLAGS)) {
        ucm_error("ucm_set_event_handler: unknown events 0x%x",
                  events & ~(UCM_EVENT_ALL | UCM_EVENT_FLAGS));
        return UCS_ERR_INVALID_PARAM;
    }
    /* as in UCX 1.13: any bit set needs events on; a handler of no event
     * is accepted and kept nowhere (nothing would reach it) */
    if ((events != 0) && !ucm_global_opts.enable_events) {
        ucm_debug("events are disabled (UCX_MEM_EVENTS=n): handler %p not set",
                  cb);
        return UCS_ERR_UNSUPPORTED;
    }
    if (!(events & UCM_EVENT_ALL)) {
        ucm_debug("handler %p arg %p of no event (0x%x): nothing to add", cb,
                  arg, events);
        return UCS_OK;
    }
    if (cb == NULL) {
        ucm_error("ucm_set_event_handler: NULL callback (events 0x%x)", events);
        return UCS_ERR_INVALID_PARAM;
    }

    install_events = events & UCM_EVENT_MMAP_FAMILY & ~ucm_event_external;
    if (!(events & UCM_EVENT_FLAG_NO_INSTALL) && install_events) {
        status = ucm_mmap_install(install_events);
        if (status != UCS_OK) {
            return status;
        }
    }
    /* then, as UCX 1.13 does, the installers of UCX's modules */
    install_events = events & UCM_EVENT_ALL & ~ucm_event_external;
    if (!(events & UCM_EVENT_FLAG_NO_INSTALL) && install_events) {
        status = ucm_compat_installers_install(install_events);
        if (status != UCS_OK) {
            return status;
        }
    }

    add_events =
        events & ~(UCM_EVENT_FLAG_NO_INSTALL | UCM_EVENT_FLAG_EXISTING_ALLOC);
    wrapped = ucm_stats_handler_wrap(add_events, priority, &add_cb, &add_arg);
    status  = ucm_event_handler_add(add_events, priority, add_cb, add_arg);
    if ((status != UCS_OK) && wrapped) {
        ucm_stats_handler_wrap_cancel(add_arg);
    }
    if (status == UCS_OK) {
        ucm_debug("event handler %p arg %p events 0x%x priority %d added", cb,
                  arg, events, priority);
        ucm_existing_alloc_replay(events, add_cb, add_arg);
        if (events & UCM_EVENT_FLAG_EXISTING_ALLOC) {
            ucm_compat_installers_existing(add_events, priority, add_cb,
                                           add_arg);
        }
    }
    return status;
}

void ucm_unset_event_handler(int events, ucm_event_callback_t cb, void *arg)
{
    ucm_stats_handler_remove(events, cb, arg);
    ucm_event_handler_remove(events, cb, arg);
    ucm_debug("event handler %p arg %p events 0x%x removed", cb, arg, events);
}

void ucm_set_external_event(int events)
{
    __atomic_or_fetch(&ucm_event_external, events, __ATOMIC_RELAXED);
}

void ucm_unset_external_event(int events)
{
    __atomic_and_fetch(&ucm_event_external, ~events, __ATOMIC_RELAXED);
}
