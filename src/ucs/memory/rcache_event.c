/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unmap handler (hook context): tombstones every region intersecting the
 * unmapped range in O(log n + k) under the spinlock, without allocating or
 * calling user code; the deregistration is deferred to the next operation.
 *
 * VM_UNMAPPED arrives before the pages go away, so a registration made
 * between that moment and the end of the system call could record the old
 * pages.  The same ranges are therefore invalidated again after the call,
 * from native event handlers (priority >= 0 runs after the original).
 */
#include "rcache_int.h"

#include <ucm/api/ucm.h>
#include <sys/mman.h>

/* The last VM_UNMAPPED range of this thread: shmdt and brk events after
 * the call do not say how much went away (hook context: TLS only). */
static __thread struct {
    ucs_pgt_addr_t start, end;
} ucs_rcache_last_unmapped __attribute__((tls_model("initial-exec")));

/* After shmdt/brk: the range unmapped at addr, as VM_UNMAPPED told it
 * before the call; one page if that was overwritten (nested signal). */
static void ucs_rcache_unmap_after(ucs_rcache_t *rcache, const void *addr)
{
    ucs_pgt_addr_t start = (ucs_pgt_addr_t)addr;

    /* brk to an unaligned address unmaps from the next page boundary */
    if ((ucs_rcache_last_unmapped.start >= start) &&
        (ucs_rcache_last_unmapped.start - start < ucs_rcache_page_size)) {
        ucs_rcache_unmap_range(rcache, ucs_rcache_last_unmapped.start,
                               ucs_rcache_last_unmapped.end);
    } else {
        ucs_rcache_unmap_range(rcache, start, start + ucs_rcache_page_size);
    }
}

void ucs_rcache_unmap_range_locked(ucs_rcache_t *rcache, ucs_pgt_addr_t start,
                                   ucs_pgt_addr_t end)
{
    ucs_range_index_t *index = &rcache->index;
    ucs_rcache_region_t *region;
    ucs_range_index_iter_t iter;

    ucs_rcache_assert_locked(rcache);
    ++rcache->maps.unmaps;
    for (region =
             (ucs_rcache_region_t *)ucs_range_index_lower(index, start, &iter);
         (region != NULL) && (region->super.start < end);
         region = (ucs_rcache_region_t *)ucs_range_index_next(index, &iter)) {
        if (!(region->flags & UCS_RCACHE_REGION_FLAG_INVALID)) {
            ucs_rcache_region_tombstone_locked(rcache, region);
            rcache->stats.counts.unmap_invalidations++;
        }
    }
    ucs_rcache_inflight_unmap_locked(&rcache->inflight, start, end);
    ucs_rcache_prot_forget_locked(rcache, start, end);
    ucs_rcache_uffd_span_forget_locked(&rcache->uffd, start, end);
}

void ucs_rcache_unmap_range(ucs_rcache_t *rcache, ucs_pgt_addr_t start,
                            ucs_pgt_addr_t end)
{
    int wake;

    if (!ucs_rcache_lock_or_defer(rcache, start, end)) {
        return; /* the interrupted owner applies it */
    }
    ucs_rcache_unmap_range_locked(rcache, start, end);
    wake = (rcache->limits.unreleased_size > rcache->limits.max_unreleased) &&
           ucs_rcache_atomic_load(&rcache->cleanup.running) &&
           !rcache->cleanup.wake_pending;
    if (wake) {
        ucs_rcache_atomic_store(&rcache->cleanup.wake_pending, 1);
    }
    ucs_rcache_unlock(rcache);
    if (wake) {
        ucs_rcache_cleanup_wake(rcache);
    }
}

/* madvise() advices after which pages come back as new frames */
static int ucs_rcache_advice_discards(int advice)
{
    switch (advice) {
    case 4:   /* MADV_DONTNEED */
    case 8:   /* MADV_FREE */
    case 9:   /* MADV_REMOVE */
    case 21:  /* MADV_PAGEOUT */
    case 24:  /* MADV_DONTNEED_LOCKED */
    case 25:  /* MADV_COLLAPSE */
    case 100: /* MADV_HWPOISON */
    case 101: /* MADV_SOFT_OFFLINE */
    case 102: /* MADV_GUARD_INSTALL */ return 1;
    default: return 0;
    }
}

static void ucs_rcache_unmap_len(ucs_rcache_t *rcache, const void *addr,
                                 size_t size)
{
    ucs_pgt_addr_t start = (ucs_pgt_addr_t)addr;

    if (size != 0) {
        ucs_rcache_unmap_range(rcache, start,
                               (start + size < start) ? ~0ul : start + size);
    }
}

void ucs_rcache_native_after_cb(int event_type, void *event_p, void *arg)
{
    ucm_event_t *event = event_p;

    switch (event_type) {
    case UCM_EVENT_MUNMAP:
        ucs_rcache_unmap_len(arg, event->munmap.address, event->munmap.size);
        break;
    case UCM_EVENT_MMAP:
        if (event->mmap.flags & MAP_FIXED) {
            ucs_rcache_unmap_len(arg, event->mmap.address, event->mmap.size);
        }
        break;
    case UCM_EVENT_MREMAP:
        ucs_rcache_unmap_len(arg, event->mremap.address,
                             event->mremap.old_size);
        break;
    case UCM_EVENT_MADVISE:
        if (ucs_rcache_advice_discards(event->madvise.advice)) {
            ucs_rcache_unmap_len(arg, event->madvise.addr,
                                 event->madvise.length);
        }
        break;
    case UCM_EVENT_SHMDT:
        if (event->shmdt.result == 0) {
            ucs_rcache_unmap_after(arg, event->shmdt.shmaddr);
        }
        break;
    case UCM_EVENT_BRK:
        if (event->brk.result == 0) {
            ucs_rcache_unmap_after(arg, event->brk.addr);
        }
        break;
    case UCM_EVENT_SBRK:
        if ((event->sbrk.increment < 0) && (event->sbrk.result != (void *)-1)) {
            ucs_rcache_unmap_len(
                arg, (char *)event->sbrk.result + event->sbrk.increment,
                -event->sbrk.increment);
        }
        break;
    default: break;
    }
}

void ucs_rcache_event_cb(int event_type, void *event_p, void *arg)
{
    ucm_event_t *event = event_p;
    ucs_pgt_addr_t start;
    size_t size;

    if (event_type == UCM_EVENT_VM_UNMAPPED) {
        start = (ucs_pgt_addr_t)event->vm_unmapped.address;
        size  = event->vm_unmapped.size;
    } else if (event_type == UCM_EVENT_MEM_TYPE_FREE) {
        start = (ucs_pgt_addr_t)event->mem_type.address;
        size  = event->mem_type.size;
    } else {
        return;
    }
    if (size == 0) {
        return;
    }
    if (event_type == UCM_EVENT_VM_UNMAPPED) {
        ucs_rcache_last_unmapped.start = start;
        ucs_rcache_last_unmapped.end =
            (start + size < start) ? ~0ul : start + size;
    }
    ucs_rcache_unmap_range(arg, start,
                           (start + size < start) ? ~0ul : start + size);
}
