/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Self-test: perform the real calls behind each requested event through the
 * hooked entry points, and check that a temporary handler sees each event
 * for exactly the memory the test used (events of other threads are
 * ignored).  Not hook context.
 */
#include "ucm_mmap.h"

#include <ucm/event/ucm_event.h>
#include "ucm_filemap.h"

#include <ucm/util/ucm_degrade.h>
#include <ucm/util/ucm_log.h>
#include <ucm/util/ucm_sys.h>

#include <errno.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    void *addr;   /* address the current step is about */
    int received; /* events seen for it */
} ucm_test_ctx_t;

static void ucm_test_event_cb(ucm_event_type_t type, ucm_event_t *event,
                              void *arg)
{
    ucm_test_ctx_t *ctx = arg;
    const void *addr;

    switch (type) {
    case UCM_EVENT_MMAP: addr = event->mmap.address; break;
    case UCM_EVENT_MUNMAP: addr = event->munmap.address; break;
    case UCM_EVENT_MREMAP: addr = event->mremap.address; break;
    case UCM_EVENT_SHMAT: addr = event->shmat.shmaddr; break;
    case UCM_EVENT_SHMDT: addr = event->shmdt.shmaddr; break;
    case UCM_EVENT_MADVISE: addr = event->madvise.addr; break;
    case UCM_EVENT_SBRK: addr = NULL; break; /* increment 0 */
    case UCM_EVENT_BRK: addr = event->brk.addr; break;
    case UCM_EVENT_VM_MAPPED:
    case UCM_EVENT_VM_UNMAPPED: addr = event->vm_mapped.address; break;
    default: return;
    }
    if ((type == UCM_EVENT_SBRK) ? (event->sbrk.increment == 0)
                                 : (addr == ctx->addr)) {
        __atomic_or_fetch(&ctx->received, type, __ATOMIC_RELAXED);
    }
}

/* Check that the step delivered 'expected' (restricted to 'events'). */
static void ucm_test_step_check(ucm_test_ctx_t *ctx, int events, int expected,
                                int *failed)
{
    *failed |= (events & expected) & ~ctx->received;
    ctx->received = 0;
}

/* Page-cache truncation: shrinking a mapped memfd by a page must report
 * that page of the mapping (ftruncate hook).  The file table is kept from
 * before the mapping, so that without /proc/self/maps the hooks' records
 * still find it. */
static void ucm_test_truncate(ucm_test_ctx_t *ctx, int events, int *failed)
{
    int was_active = ucm_filemap_selftest_begin();
    size_t page    = ucm_sys_page_size();
    char *p;
    int fd;

    fd = memfd_create("ucm_test", MFD_CLOEXEC);
    if ((fd < 0) || (ftruncate(fd, 2 * page) != 0)) {
        ucm_debug("memfd_create failed (%d): truncation not tested", errno);
        goto out;
    }
    p = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        ucm_debug("mmap of a memfd failed (%d): truncation not tested", errno);
        goto out;
    }
    ctx->addr     = p + page;
    ctx->received = 0;
    if (ftruncate(fd, page) == 0) {
        ucm_test_step_check(ctx, events, UCM_EVENT_VM_UNMAPPED, failed);
    } else {
        *failed |= UCM_EVENT_VM_UNMAPPED;
    }
    munmap(p, 2 * page);
out:
    if (fd >= 0) {
        close(fd);
    }
    ucm_filemap_selftest_end(was_active);
}

static void ucm_test_run(ucm_test_ctx_t *ctx, int events, int quick,
                         int *failed)
{
    size_t page = ucm_sys_page_size();
    void *p, *shm;
    int shmid;

    /* mmap (MAP_FIXED over a reservation of ours, so that the address is
     * known before the call), madvise, mremap (shrink), munmap */
    p = (void *)ucm_sys_mmap(NULL, 2 * page, PROT_NONE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ucm_sys_is_err((long)p)) {
        *failed |= events & UCM_EVENT_MMAP_FAMILY;
        return;
    }
    ctx->addr     = p;
    ctx->received = 0;
    if (mmap(p, 2 * page, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != p) {
        ucm_sys_munmap(p, 2 * page);
        *failed |= events & UCM_EVENT_MMAP_FAMILY;
        return;
    }
    ucm_test_step_check(
        ctx, events,
        UCM_EVENT_MMAP | UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED, failed);
    if (!quick || (events & UCM_EVENT_MADVISE)) {
        madvise(p, page, MADV_DONTNEED);
        ucm_test_step_check(ctx, events,
                            UCM_EVENT_MADVISE | UCM_EVENT_VM_UNMAPPED, failed);
    }
    if ((!quick || (events & UCM_EVENT_MREMAP)) &&
        (mremap(p, 2 * page, page, 0) == p)) {
        ucm_test_step_check(ctx, events, UCM_EVENT_MREMAP, failed);
    }
    munmap(p, page);
    ucm_test_step_check(ctx, events, UCM_EVENT_MUNMAP | UCM_EVENT_VM_UNMAPPED,
                        failed);

    /* SysV shm, if the system has it: attached over a page of ours
     * (SHM_REMAP) so that its address is known before the call */
    if (events & (UCM_EVENT_SHMAT | UCM_EVENT_SHMDT)) {
        shmid = shmget(IPC_PRIVATE, page, IPC_CREAT | 0600);
        p     = mmap(NULL, page, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if ((shmid >= 0) && (p != MAP_FAILED)) {
            ctx->addr     = p;
            ctx->received = 0;
            shm           = shmat(shmid, p, SHM_REMAP);
            if (shm == p) {
                ucm_test_step_check(
                    ctx, events, UCM_EVENT_SHMAT | UCM_EVENT_VM_MAPPED, failed);
                shmdt(shm);
                ucm_test_step_check(ctx, events,
                                    UCM_EVENT_SHMDT | UCM_EVENT_VM_UNMAPPED,
                                    failed);
            } else {
                ucm_debug("shmat failed (%d): SHMAT/SHMDT not tested", errno);
                munmap(p, page);
            }
        } else {
            ucm_debug("shmget failed (%d): SHMAT/SHMDT not tested", errno);
            if (p != MAP_FAILED) {
                munmap(p, page);
            }
        }
        if (shmid >= 0) {
            shmctl(shmid, IPC_RMID, NULL);
        }
    }

    /* only where our ftruncate hook is in place: with VM_UNMAPPED declared
     * external (Open MPI's patcher feeding ucm_vm_munmap) the hooks are not
     * installed and nobody reports truncation */
    if (!quick && (events & UCM_EVENT_VM_UNMAPPED) &&
        ((ucm_hook_funcs[UCM_HOOK_FTRUNCATE].state == UCM_HOOK_STATE_BISTRO) ||
         (ucm_hook_funcs[UCM_HOOK_FTRUNCATE].state == UCM_HOOK_STATE_RELOC))) {
        ucm_test_truncate(ctx, events, failed);
    }

    /* sbrk/brk without changing the heap */
    if (events & (UCM_EVENT_SBRK | UCM_EVENT_BRK)) {
        ctx->addr = sbrk(0);
        ucm_test_step_check(ctx, events, UCM_EVENT_SBRK, failed);
        if (brk(ctx->addr) != 0) {
            ucm_debug("brk(%p) of the current break failed: %m", ctx->addr);
        }
        ucm_test_step_check(ctx, events, UCM_EVENT_BRK, failed);
    }
}

ucs_status_t ucm_mmap_test_events(int events, int quick, int *failed_p)
{
    ucm_test_ctx_t ctx = {NULL, 0};
    ucs_status_t status;
    int failed = 0;

    events &= UCM_EVENT_MMAP_FAMILY;
    status = ucm_event_handler_add(events, -1000, ucm_test_event_cb, &ctx);
    if (status != UCS_OK) {
        return status;
    }
    ucm_test_run(&ctx, events, quick, &failed);
    ucm_event_handler_remove(events, ucm_test_event_cb, &ctx);
    *failed_p = failed;
    return (failed == 0) ? UCS_OK : UCS_ERR_UNSUPPORTED;
}

void ucm_mmap_test_truncation(double *usec_p)
{
    ucm_test_ctx_t ctx = {NULL, 0};
    struct timespec t0, t1;
    int failed = 0;

    *usec_p = 0;
    if ((ucm_hook_funcs[UCM_HOOK_FTRUNCATE].state != UCM_HOOK_STATE_BISTRO) &&
        (ucm_hook_funcs[UCM_HOOK_FTRUNCATE].state != UCM_HOOK_STATE_RELOC)) {
        return; /* not ours to report (external VM_UNMAPPED) */
    }
    if (ucm_event_handler_add(UCM_EVENT_VM_UNMAPPED, -1000, ucm_test_event_cb,
                              &ctx) != UCS_OK) {
        return;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ucm_test_truncate(&ctx, UCM_EVENT_VM_UNMAPPED, &failed);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ucm_event_handler_remove(UCM_EVENT_VM_UNMAPPED, ucm_test_event_cb, &ctx);
    *usec_p =
        ((t1.tv_sec - t0.tv_sec) * 1e6) + ((t1.tv_nsec - t0.tv_nsec) / 1e3);
    if (failed) {
        ucm_degrade_report(UCM_DEGRADE_TRUNC, 0,
                           "truncation of mapped files is not caught: the "
                           "install self-test saw no unmap event for a "
                           "truncated memfd");
    }
}

ucs_status_t ucm_test_events_detail(int events, int *failed_p)
{
    return ucm_mmap_test_events(events, 0, failed_p);
}

ucs_status_t ucm_test_events(int events)
{
    ucs_status_t status;
    int failed;

    status = ucm_test_events_detail(events, &failed);
    if (status != UCS_OK) {
        ucm_diag("memory events 0x%x requested, 0x%x not delivered", events,
                 failed);
    }
    return status;
}

/* As UCX: only the events declared external are tested (the others are
 * libucm's own business: a caller feeding VM_UNMAPPED itself asks about that
 * one); none of them external: nothing to test, UCS_OK. */
ucs_status_t ucm_test_external_events(int events)
{
    events &= ucm_event_external;
    return (events == 0) ? UCS_OK : ucm_test_events(events);
}
