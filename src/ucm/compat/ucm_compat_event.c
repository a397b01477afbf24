/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.13.1's event internals on libucm's dispatch: event sections, direct
 * dispatch and the installers of UCX's modules; see ucm/api/ucm_compat.h.
 */
#include "ucm_compat_int.h"

#include <ucm/api/ucm_compat.h>
#include <ucm/event/ucm_event.h>
#include <ucm/util/ucm_log.h>

#include <sys/mman.h>

/* Empty list; modules append themselves from their constructors.  An
 * interposable data object (a program may copy-relocate it): libucm reads
 * it through its symbol as the modules do. */
ucs_list_link_t ucm_event_installer_list = {&ucm_event_installer_list,
                                            &ucm_event_installer_list};

void ucm_event_enter(void)
{
    void (*own)(void) = UCM_COMPAT_CALLER_OWN(ucm_event_enter);

    if (own != NULL) {
        own();
        return;
    }
    ucm_rcu_read_lock();
}

void ucm_event_leave(void)
{
    void (*own)(void) = UCM_COMPAT_CALLER_OWN(ucm_event_leave);

    if (own != NULL) {
        own();
        return;
    }
    ucm_rcu_read_unlock();
}

/* What UCX's handler at priority 0 does for a native event: the original
 * call, unless a handler before it already produced the result. */
static void ucm_compat_event_call_orig(ucm_event_type_t type, ucm_event_t *e)
{
    switch (type) {
    case UCM_EVENT_MMAP:
        if (e->mmap.result == MAP_FAILED) {
            e->mmap.result =
                ucm_orig_mmap(e->mmap.address, e->mmap.size, e->mmap.prot,
                              e->mmap.flags, e->mmap.fd, e->mmap.offset);
        }
        break;
    case UCM_EVENT_MUNMAP:
        if (e->munmap.result == -1) {
            e->munmap.result =
                ucm_orig_munmap(e->munmap.address, e->munmap.size);
        }
        break;
    case UCM_EVENT_MREMAP:
        if (e->mremap.result == MAP_FAILED) {
            e->mremap.result = ucm_orig_mremap(
                e->mremap.address, e->mremap.old_size, e->mremap.new_size,
                e->mremap.flags, e->mremap.new_address);
        }
        break;
    case UCM_EVENT_SHMAT:
        if (e->shmat.result == MAP_FAILED) {
            e->shmat.result = ucm_orig_shmat(e->shmat.shmid, e->shmat.shmaddr,
                                             e->shmat.shmflg);
        }
        break;
    case UCM_EVENT_SHMDT:
        if (e->shmdt.result == -1) {
            e->shmdt.result = ucm_orig_shmdt(e->shmdt.shmaddr);
        }
        break;
    case UCM_EVENT_SBRK:
        if (e->sbrk.result == MAP_FAILED) {
            e->sbrk.result = ucm_orig_sbrk(e->sbrk.increment);
        }
        break;
    case UCM_EVENT_BRK:
        if (e->brk.result == -1) {
            e->brk.result = ucm_orig_brk(e->brk.addr);
        }
        break;
    case UCM_EVENT_MADVISE:
        if (e->madvise.result == -1) {
            e->madvise.result = ucm_orig_madvise(
                e->madvise.addr, e->madvise.length, e->madvise.advice);
        }
        break;
    default: break;
    }
}

#define UCM_COMPAT_NATIVE_EVENTS                                               \
    (UCM_EVENT_MMAP | UCM_EVENT_MUNMAP | UCM_EVENT_MREMAP | UCM_EVENT_SHMAT |  \
     UCM_EVENT_SHMDT | UCM_EVENT_SBRK | UCM_EVENT_BRK | UCM_EVENT_MADVISE)

void ucm_event_dispatch(ucm_event_type_t event_type, ucm_event_t *event)
{
    void (*own)(ucm_event_type_t, ucm_event_t *) =
        UCM_COMPAT_CALLER_OWN(ucm_event_dispatch);
    ucm_event_list_t *list;

    if (own != NULL) {
        own(event_type, event);
        return;
    }
    ucm_rcu_read_lock();
    list = ucm_event_list_get();
    if (event_type & UCM_COMPAT_NATIVE_EVENTS) {
        ucm_event_call(list, event_type, event, 1);
        ucm_compat_event_call_orig(event_type, event);
        ucm_event_call(list, event_type, event, 0);
    } else if (list->events & event_type) {
        ucm_event_call_all(list, event_type, event);
    }
    ucm_rcu_read_unlock();
}

static ucm_compat_event_installer_t *ucm_compat_installer(ucs_list_link_t *link)
{
    return ucs_container_of(link, ucm_compat_event_installer_t, list);
}

ucs_status_t ucm_compat_installers_install(int events)
{
    ucm_compat_event_installer_t *installer;
    ucs_list_link_t *link;
    ucs_status_t status;

    ucm_compat_modules_load();
    for (link = ucm_event_installer_list.next;
         link != &ucm_event_installer_list; link = link->next) {
        installer = ucm_compat_installer(link);
        if (installer->install == NULL) {
            continue;
        }
        status = installer->install(events);
        if (status != UCS_OK) {
            ucm_diag("event installer %p (install %p) failed for events 0x%x: "
                     "status %d",
                     installer, installer->install, events, (int)status);
            return status;
        }
    }
    return UCS_OK;
}

void ucm_compat_installers_existing(int events, int priority,
                                    ucm_event_callback_t cb, void *arg)
{
    ucm_compat_event_installer_t *installer;
    ucm_compat_event_handler_t handler;
    ucs_list_link_t *link;

    ucs_list_head_init(&handler.list);
    handler.events   = events;
    handler.priority = priority;
    handler.cb       = cb;
    handler.arg      = arg;
    for (link = ucm_event_installer_list.next;
         link != &ucm_event_installer_list; link = link->next) {
        installer = ucm_compat_installer(link);
        if (installer->get_existing_alloc != NULL) {
            installer->get_existing_alloc(&handler);
        }
    }
}
