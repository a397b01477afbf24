/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The replacements of mmap, munmap, mremap, madvise, shmat, shmdt, brk and
 * sbrk.  Each one delivers VM_UNMAPPED before the pages can go away, runs the
 * native event chain around the original call (handlers with priority < 0
 * before it, the others after it) and VM_MAPPED once the mapping exists.
 * After a successful call the table of file mappings (ucm_filemap.h) learns
 * what changed, whether or not anybody listens, before VM_MAPPED is raised.
 * Hook context: no malloc, no locks; errno is that of the original call.
 */
#include "ucm_mmap.h"

#include "ucm_filemap.h"
#include "ucm_filewatch.h"
#include "ucm_filewatch_recent.h"

#include <ucm/event/ucm_event.h>
#include <ucm/malloc/ucm_heap.h>
#include <ucm/util/ucm_sys.h>

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif
#ifndef SHM_REMAP
#define SHM_REMAP 040000
#endif

__thread int ucm_hook_in_sbrk __attribute__((tls_model("initial-exec")));
__thread int ucm_hook_chain_depth __attribute__((tls_model("initial-exec")));

/* The original call made here, by a syscall instruction, when the original
 * is a plain system call: libucm's own equivalent (bistro), or libc's stub
 * "mov $nr, %eax; syscall" (reloc; its remaining bytes only set errno).
 * Calling it instead would add a frame whose return, right after the
 * system call, costs several ns (the kernel leaves the return predictor
 * cold).  An entry that another hooker patched later no longer matches, so
 * the call still reaches that hooker.
 *
 * The entry's first bytes are read when the hook starts (peek): a system
 * call waits for every earlier load, and this one (code read as data)
 * misses the data cache and TLB; issued early it completes while the hook
 * dispatches its events. */
typedef struct {
    const void *orig; /* ucm_hot.orig[id] when the hook started */
    uint64_t code;    /* its first 8 bytes, 0 if not read */
} ucm_mmap_peek_t;

#if defined(__x86_64__)
static UCS_F_ALWAYS_INLINE ucm_mmap_peek_t ucm_mmap_orig_peek(int id,
                                                              const void *raw)
{
    ucm_mmap_peek_t peek = {ucm_hot.orig[id], 0};

    /* the 8 bytes within the page of the entry: nothing else is known to
     * be mapped (an entry too close to the end is called, never inlined) */
    if ((peek.orig != raw) && (peek.orig != NULL) &&
        (((uintptr_t)peek.orig & 4095) <= 4096 - sizeof(peek.code))) {
        memcpy(&peek.code, peek.orig, sizeof(peek.code));
        __asm__ volatile("" : : "r"(peek.code)); /* the load goes here */
    }
    return peek;
}

static UCS_F_ALWAYS_INLINE int
ucm_mmap_orig_is_stub(const void *orig, const void *raw, long nr,
                      const ucm_mmap_peek_t *peek)
{
    const uint64_t stub = 0xb8ull | ((uint64_t)nr << 8) | (0x050full << 40);

    return (orig == raw) || ((orig == peek->orig) &&
                             ((peek->code & 0x00ffffffffffffffull) == stub));
}

static UCS_F_ALWAYS_INLINE long
ucm_mmap_syscall6(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
    return ucm_sys_syscall6_inline(nr, a1, a2, a3, a4, a5, a6);
}
#else
static UCS_F_ALWAYS_INLINE ucm_mmap_peek_t ucm_mmap_orig_peek(int id,
                                                              const void *raw)
{
    ucm_mmap_peek_t peek = {NULL, 0};

    return peek;
}

static UCS_F_ALWAYS_INLINE int
ucm_mmap_orig_is_stub(const void *orig, const void *raw, long nr,
                      const ucm_mmap_peek_t *peek)
{
    return 0;
}

static UCS_F_ALWAYS_INLINE long
ucm_mmap_syscall6(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
    return -ENOSYS;
}
#endif

/* A system call's result as libc returns it. */
static UCS_F_ALWAYS_INLINE long ucm_mmap_syscall_ret(long ret)
{
    if (ucs_unlikely((unsigned long)ret > (unsigned long)-4096l)) {
        errno = (int)-ret;
        return -1;
    }
    return ret;
}

#define UCM_MUNMAP_PEEK()                                                      \
    ucm_mmap_orig_peek(UCM_HOOK_MUNMAP, (void *)ucm_orig_munmap)
#define UCM_MADVISE_PEEK()                                                     \
    ucm_mmap_orig_peek(UCM_HOOK_MADVISE, (void *)ucm_orig_madvise)

static UCS_F_ALWAYS_INLINE int ucm_munmap_call_orig(void *addr, size_t length,
                                                    const ucm_mmap_peek_t *peek)
{
    void *orig = ucm_hook_orig(UCM_HOOK_MUNMAP);

    if (ucs_likely(ucm_mmap_orig_is_stub(orig, (void *)ucm_orig_munmap,
                                         SYS_munmap, peek))) {
        return (int)ucm_mmap_syscall_ret(ucm_mmap_syscall6(
            SYS_munmap, (long)addr, (long)length, 0, 0, 0, 0));
    }
    return UCM_HOOK_CALL_ORIG(UCM_HOOK_MUNMAP, ucm_munmap_func_t, addr, length);
}

static UCS_F_ALWAYS_INLINE int
ucm_madvise_call_orig(void *addr, size_t length, int advice,
                      const ucm_mmap_peek_t *peek)
{
    void *orig = ucm_hook_orig(UCM_HOOK_MADVISE);

    if (ucs_likely(ucm_mmap_orig_is_stub(orig, (void *)ucm_orig_madvise,
                                         SYS_madvise, peek))) {
        return (int)ucm_mmap_syscall_ret(ucm_mmap_syscall6(
            SYS_madvise, (long)addr, (long)length, advice, 0, 0, 0));
    }
    return UCM_HOOK_CALL_ORIG(UCM_HOOK_MADVISE, ucm_madvise_func_t, addr,
                              length, advice);
}

/* glibc's mmap is no plain stub (it checks the offset): ours only. */
static UCS_F_ALWAYS_INLINE void *ucm_mmap_call_orig(void *addr, size_t length,
                                                    int prot, int flags, int fd,
                                                    off_t offset)
{
    void *orig = ucm_hook_orig(UCM_HOOK_MMAP);

    if (orig == (void *)ucm_orig_mmap) {
        return (void *)ucm_mmap_syscall_ret(ucm_mmap_syscall6(
            SYS_mmap, (long)addr, (long)length, prot, flags, fd, (long)offset));
    }
    return UCM_HOOK_CALL_ORIG(UCM_HOOK_MMAP, ucm_mmap_func_t, addr, length,
                              prot, flags, fd, offset);
}

int ucm_madvise_discards(int advice)
{
    switch (advice) {
    case 4:   /* MADV_DONTNEED */
    case 8:   /* MADV_FREE: pages may be dropped at any time afterwards */
    case 9:   /* MADV_REMOVE */
    case 21:  /* MADV_PAGEOUT: unpinned pages come back as new frames */
    case 24:  /* MADV_DONTNEED_LOCKED */
    case 25:  /* MADV_COLLAPSE: pages are copied into a huge page */
    case 100: /* MADV_HWPOISON */
    case 101: /* MADV_SOFT_OFFLINE: page migrated to a new frame */
    case 102: /* MADV_GUARD_INSTALL: zaps the range */ return 1;
    default: return 0;
    }
}

/* Advice that the kernel reports to a userfaultfd monitor (and waits). */
static int ucm_madvise_reported(int advice)
{
    switch (advice) {
    case 4: /* MADV_DONTNEED */
    case 8: /* MADV_FREE */
    case 9: /* MADV_REMOVE */
    case 24: /* MADV_DONTNEED_LOCKED */ return 1;
    default: return 0;
    }
}

/* The native handlers that run before the original call (priority < 0);
 * they may change the arguments, so VM_UNMAPPED is computed after them. */
static UCS_F_ALWAYS_INLINE void
ucm_hook_native_before(const ucm_event_list_t *list, ucm_event_type_t type,
                       ucm_event_t *event)
{
    if (list->events & type) {
        ucm_event_call(list, type, event, 1);
    }
}

static UCS_F_ALWAYS_INLINE void
ucm_hook_native_after(const ucm_event_list_t *list, ucm_event_type_t type,
                      ucm_event_t *event)
{
    if (list->events & type) {
        ucm_event_call(list, type, event, 0);
    }
}

UCS_F_HOT void *ucm_mmap(void *addr, size_t length, int prot, int flags, int fd,
                         off_t offset)
{
    ucm_event_list_t *list = ucm_hook_enter(
        UCM_EVENT_MMAP | UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED);
    ucm_event_t event;
    int saved_errno;

    if (list == NULL) {
        event.mmap.result =
            ucm_mmap_call_orig(addr, length, prot, flags, fd, offset);
        if (event.mmap.result != MAP_FAILED) {
            ucm_filemap_mapped(event.mmap.result, length, flags, fd, offset);
        }
        return event.mmap.result;
    }
    event.mmap.result  = MAP_FAILED;
    event.mmap.address = addr;
    event.mmap.size    = length;
    event.mmap.prot    = prot;
    event.mmap.flags   = flags;
    event.mmap.fd      = fd;
    event.mmap.offset  = offset;
    ucm_hook_native_before(list, UCM_EVENT_MMAP, &event);
    if ((event.mmap.flags & MAP_FIXED) &&
        !(event.mmap.flags & MAP_FIXED_NOREPLACE)) {
        ucm_hook_vm_unmapping(list, event.mmap.address, event.mmap.size);
    }
    event.mmap.result =
        ucm_mmap_call_orig(event.mmap.address, event.mmap.size, event.mmap.prot,
                           event.mmap.flags, event.mmap.fd, event.mmap.offset);
    saved_errno = errno;
    if (event.mmap.result != MAP_FAILED) {
        ucm_filemap_mapped(event.mmap.result, event.mmap.size, event.mmap.flags,
                           event.mmap.fd, event.mmap.offset);
    }
    ucm_hook_native_after(list, UCM_EVENT_MMAP, &event);
    if (event.mmap.result != MAP_FAILED) {
        ucm_hook_vm(list, UCM_EVENT_VM_MAPPED, event.mmap.result,
                    event.mmap.size);
    }
    ucm_hook_leave(saved_errno);
    return event.mmap.result;
}

/* munmap with handlers of UCM_EVENT_MUNMAP (in the read section). */
static int ucm_munmap_native(ucm_event_list_t *list, void *addr, size_t length,
                             const ucm_mmap_peek_t *peek)
{
    ucm_event_t event;
    int saved_errno;

    event.munmap.result  = -1;
    event.munmap.address = addr;
    event.munmap.size    = length;
    ucm_hook_native_before(list, UCM_EVENT_MUNMAP, &event);
    ucm_hook_vm_unmapping(list, event.munmap.address, event.munmap.size);
    event.munmap.result =
        ucm_munmap_call_orig(event.munmap.address, event.munmap.size, peek);
    saved_errno = errno;
    if (event.munmap.result == 0) {
        ucm_filemap_unmapped(event.munmap.address, event.munmap.size);
    }
    ucm_hook_native_after(list, UCM_EVENT_MUNMAP, &event);
    ucm_hook_leave(saved_errno);
    return event.munmap.result;
}

UCS_F_HOT int ucm_munmap(void *addr, size_t length)
{
    ucm_mmap_peek_t peek = UCM_MUNMAP_PEEK();
    ucm_event_list_t *list =
        ucm_hook_enter(UCM_EVENT_MUNMAP | UCM_EVENT_VM_UNMAPPED);
    int ret;

    if (list != NULL) {
        if (list->events & UCM_EVENT_MUNMAP) {
            return ucm_munmap_native(list, addr, length, &peek);
        }
        ucm_hook_vm_unmapping(list, addr, length);
        ucm_rcu_read_unlock(); /* the original call needs no read section */
    }
    ret = ucm_munmap_call_orig(addr, length, &peek);
    if (ret == 0) {
        ucm_filemap_unmapped(addr, length);
    }
    return ret;
}

UCS_F_HOT static void *ucm_mremap_common(void *old_address, size_t old_size,
                                         size_t new_size, int flags,
                                         void *new_address)
{
    ucm_event_list_t *list = ucm_hook_enter(
        UCM_EVENT_MREMAP | UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED);
    ucm_event_t event;
    int saved_errno;

    if (list == NULL) {
        event.mremap.result =
            UCM_HOOK_CALL_ORIG(UCM_HOOK_MREMAP, ucm_mremap_func_t, old_address,
                               old_size, new_size, flags, new_address);
        if (event.mremap.result != MAP_FAILED) {
            ucm_filemap_remapped(old_address, old_size, event.mremap.result,
                                 new_size, flags);
        }
        return event.mremap.result;
    }
    event.mremap.result      = MAP_FAILED;
    event.mremap.address     = old_address;
    event.mremap.old_size    = old_size;
    event.mremap.new_size    = new_size;
    event.mremap.flags       = flags;
    event.mremap.new_address = new_address;
    ucm_hook_native_before(list, UCM_EVENT_MREMAP, &event);
    old_address = event.mremap.address;
    old_size    = event.mremap.old_size;
    new_size    = event.mremap.new_size;
    flags       = event.mremap.flags;
    new_address = event.mremap.new_address;
    if (flags & MREMAP_FIXED) {
        /* whatever is mapped at the target is replaced */
        ucm_hook_vm_unmapping(list, new_address, new_size);
    }
    if ((flags & (MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP)) ||
        (new_size == 0)) {
        /* the pages may move away from the old range */
        ucm_hook_vm_unmapping(list, old_address, old_size);
    } else if (new_size < old_size) {
        /* shrink in place: only the tail goes away */
        ucm_hook_vm_unmapping(list, (char *)old_address + new_size,
                              old_size - new_size);
    }
    event.mremap.result =
        UCM_HOOK_CALL_ORIG(UCM_HOOK_MREMAP, ucm_mremap_func_t, old_address,
                           old_size, new_size, flags, new_address);
    saved_errno = errno;
    if (event.mremap.result != MAP_FAILED) {
        ucm_filemap_remapped(old_address, old_size, event.mremap.result,
                             new_size, flags);
    }
    ucm_hook_native_after(list, UCM_EVENT_MREMAP, &event);
    if (event.mremap.result != MAP_FAILED) {
        ucm_hook_vm(list, UCM_EVENT_VM_MAPPED, event.mremap.result, new_size);
    }
    ucm_hook_leave(saved_errno);
    return event.mremap.result;
}

/* UCX 1.15+ passes new_address with MREMAP_FIXED; 1.13 callers pass four
 * arguments (and no MREMAP_FIXED that could work). */
void *ucm_mremap(void *old_address, size_t old_size, size_t new_size, int flags,
                 ...)
{
    void *new_address = NULL;

    UCM_MREMAP_VA_NEW_ADDRESS(flags, new_address);
    return ucm_mremap_common(old_address, old_size, new_size, flags,
                             new_address);
}

/* The GOT/entry replacement: libc's prototype is variadic, as is the API
 * call above, so the two are one function. */
void *ucm_mremap_hook(void *old_address, size_t old_size, size_t new_size,
                      int flags, ...) __attribute__((alias("ucm_mremap")));

/* Advice that acts on the pages of the file (its page cache), so on every
 * mapping of the mapped file range, not only on this mapping's entries. */
static int ucm_madvise_file_wide(int advice)
{
    switch (advice) {
    case 9:   /* MADV_REMOVE: a hole punched in the file */
    case 25:  /* MADV_COLLAPSE: the file's pages replaced by a huge page */
    case 100: /* MADV_HWPOISON */
    case 101: /* MADV_SOFT_OFFLINE: the page migrated */ return 1;
    default: return 0;
    }
}

static void ucm_madvise_report(void *arg, uintptr_t start, size_t len)
{
    ucm_hook_vm(arg, UCM_EVENT_VM_UNMAPPED, (void *)start, len);
}

UCS_F_HOT int ucm_madvise(void *addr, size_t length, int advice)
{
    ucm_mmap_peek_t peek = UCM_MADVISE_PEEK();
    ucm_event_list_t *list =
        ucm_hook_enter(UCM_EVENT_MADVISE | UCM_EVENT_VM_UNMAPPED);
    unsigned watch_token = 0;
    ucm_filemap_range_t file;
    int saved_errno, file_wide, one_file = 0;
    ucm_event_t event;

    if (list == NULL) {
        return ucm_madvise_call_orig(addr, length, advice, &peek);
    }
    event.madvise.result = -1;
    event.madvise.addr   = addr;
    event.madvise.length = length;
    event.madvise.advice = advice;
    ucm_hook_native_before(list, UCM_EVENT_MADVISE, &event);
    if (ucm_madvise_reported(event.madvise.advice)) {
        ucm_hook_vm_unmapping(list, event.madvise.addr, event.madvise.length);
    } else if (ucm_madvise_discards(event.madvise.advice)) {
        ucm_hook_vm(list, UCM_EVENT_VM_UNMAPPED, event.madvise.addr,
                    event.madvise.length);
    }
    file_wide = (list->events & UCM_EVENT_VM_UNMAPPED) &&
                ucm_madvise_file_wide(event.madvise.advice);
    if (file_wide) {
        one_file = ucm_filemap_report_range((uintptr_t)event.madvise.addr,
                                            event.madvise.length,
                                            event.madvise.advice == MADV_REMOVE,
                                            ucm_madvise_report, list, &file);
    }
    one_file = one_file && (event.madvise.advice == MADV_REMOVE);
    if (one_file) {
        /* the file watch's report of this call (from its thread, later)
         * need not repeat what this hook reports (as ucm_trunc.c); the
         * other advice queues no event */
        if (ucm_filewatch_watched(&file.key)) {
            watch_token = ucm_filewatch_recent_arm(&file);
        }
    }
    event.madvise.result = ucm_madvise_call_orig(
        event.madvise.addr, event.madvise.length, event.madvise.advice, &peek);
    saved_errno = errno;
    /* also after a failed call that the file watch was told about: it may
     * have left this range out of another caller's event */
    if (file_wide && ((event.madvise.result == 0) || (watch_token != 0))) {
        /* as for truncation: a registration made between the event and
         * the removal holds the old pages */
        ucm_filemap_report_range((uintptr_t)event.madvise.addr,
                                 event.madvise.length,
                                 event.madvise.advice == MADV_REMOVE,
                                 ucm_madvise_report, list, NULL);
    }
    ucm_filewatch_recent_done(watch_token, event.madvise.result == 0);
    ucm_hook_native_after(list, UCM_EVENT_MADVISE, &event);
    ucm_hook_leave(saved_errno);
    return event.madvise.result;
}

void *ucm_shmat(int shmid, const void *shmaddr, int shmflg)
{
    ucm_event_list_t *list = ucm_hook_enter(
        UCM_EVENT_SHMAT | UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED);
    ucm_event_t event;
    int saved_errno;
    size_t size;

    if (list == NULL) {
        size               = ucm_shm_size_by_id(shmid);
        event.shmat.result = UCM_HOOK_CALL_ORIG(
            UCM_HOOK_SHMAT, ucm_shmat_func_t, shmid, shmaddr, shmflg);
        if (event.shmat.result != (void *)-1) {
            saved_errno = errno;
            if (size > 0) {
                ucm_shm_table_add(event.shmat.result, size);
            }
            ucm_filemap_shm_attached(event.shmat.result, size, shmid);
            errno = saved_errno;
        }
        return event.shmat.result;
    }
    event.shmat.result  = (void *)-1;
    event.shmat.shmid   = shmid;
    event.shmat.shmaddr = shmaddr;
    event.shmat.shmflg  = shmflg;
    ucm_hook_native_before(list, UCM_EVENT_SHMAT, &event);
    size = ucm_shm_size_by_id(event.shmat.shmid);
    if ((event.shmat.shmaddr != NULL) && (event.shmat.shmflg & SHM_REMAP)) {
        ucm_hook_vm_unmapping(list,
                              (void *)((uintptr_t)event.shmat.shmaddr &
                                       ~(ucm_sys_page_size() - 1)),
                              size);
    }
    event.shmat.result =
        UCM_HOOK_CALL_ORIG(UCM_HOOK_SHMAT, ucm_shmat_func_t, event.shmat.shmid,
                           event.shmat.shmaddr, event.shmat.shmflg);
    saved_errno = errno;
    if (event.shmat.result != (void *)-1) {
        if (size > 0) {
            ucm_shm_table_add(event.shmat.result, size);
        }
        ucm_filemap_shm_attached(event.shmat.result, size, event.shmat.shmid);
    }
    ucm_hook_native_after(list, UCM_EVENT_SHMAT, &event);
    if (event.shmat.result != (void *)-1) {
        ucm_hook_vm(list, UCM_EVENT_VM_MAPPED, event.shmat.result, size);
    }
    ucm_hook_leave(saved_errno);
    return event.shmat.result;
}

int ucm_shmdt(const void *shmaddr)
{
    ucm_event_list_t *list =
        ucm_hook_enter(UCM_EVENT_SHMDT | UCM_EVENT_VM_UNMAPPED);
    ucm_event_t event;
    int saved_errno;

    if (list == NULL) {
        event.shmdt.result =
            UCM_HOOK_CALL_ORIG(UCM_HOOK_SHMDT, ucm_shmdt_func_t, shmaddr);
        if (event.shmdt.result == 0) {
            saved_errno = errno;
            ucm_shm_table_remove(shmaddr);
            ucm_filemap_shm_detached(shmaddr);
            errno = saved_errno;
        }
        return event.shmdt.result;
    }
    event.shmdt.result  = -1;
    event.shmdt.shmaddr = shmaddr;
    ucm_hook_native_before(list, UCM_EVENT_SHMDT, &event);
    if (list->events & UCM_EVENT_VM_UNMAPPED) {
        ucm_hook_vm_unmapping(list, (void *)event.shmdt.shmaddr,
                              ucm_shm_seg_size(event.shmdt.shmaddr));
    }
    event.shmdt.result = UCM_HOOK_CALL_ORIG(UCM_HOOK_SHMDT, ucm_shmdt_func_t,
                                            event.shmdt.shmaddr);
    saved_errno        = errno;
    if (event.shmdt.result == 0) {
        ucm_shm_table_remove(event.shmdt.shmaddr);
        ucm_filemap_shm_detached(event.shmdt.shmaddr);
    }
    ucm_hook_native_after(list, UCM_EVENT_SHMDT, &event);
    ucm_hook_leave(saved_errno);
    return event.shmdt.result;
}

UCS_F_HOT static void *ucm_brk_current(void)
{
    return (void *)ucm_sys_brk(NULL);
}

UCS_F_HOT int ucm_brk(void *addr)
{
    ucm_event_list_t *list;
    char *old_brk, *new_brk;
    ucm_event_t event;
    int saved_errno;

    /* libc's sbrk calling its brk from inside our sbrk hook: reported there */
    if (ucs_unlikely(ucm_hook_in_sbrk)) {
        return UCM_HOOK_CALL_ORIG(UCM_HOOK_BRK, ucm_brk_func_t, addr);
    }
    list = ucm_hook_enter(UCM_EVENT_BRK | UCM_EVENT_VM_MAPPED |
                          UCM_EVENT_VM_UNMAPPED);
    if (list == NULL) {
        return UCM_HOOK_CALL_ORIG(UCM_HOOK_BRK, ucm_brk_func_t, addr);
    }
    event.brk.result = -1;
    event.brk.addr   = addr;
    ucm_hook_native_before(list, UCM_EVENT_BRK, &event);
    old_brk = ucm_brk_current();
    if ((event.brk.addr != NULL) && ((char *)event.brk.addr < old_brk)) {
        ucm_hook_vm_unmapping(list, event.brk.addr,
                              (size_t)(old_brk - (char *)event.brk.addr));
    }
    event.brk.result =
        UCM_HOOK_CALL_ORIG(UCM_HOOK_BRK, ucm_brk_func_t, event.brk.addr);
    saved_errno = errno;
    ucm_hook_native_after(list, UCM_EVENT_BRK, &event);
    new_brk = ucm_brk_current();
    if ((event.brk.result == 0) && (new_brk > old_brk)) {
        ucm_hook_vm(list, UCM_EVENT_VM_MAPPED, old_brk,
                    (size_t)(new_brk - old_brk));
    }
    ucm_heap_brk_reported();
    ucm_hook_leave(saved_errno);
    return event.brk.result;
}

/* Call the original sbrk: when it is libc's own code it calls brk
 * internally, which must not report the same change again. */
UCS_F_HOT static void *ucm_sbrk_call_orig(intptr_t increment)
{
    void *result;

    ++ucm_hook_in_sbrk;
    result = UCM_HOOK_CALL_ORIG(UCM_HOOK_SBRK, ucm_sbrk_func_t, increment);
    --ucm_hook_in_sbrk;
    return result;
}

UCS_F_HOT void *ucm_sbrk(intptr_t increment)
{
    ucm_event_list_t *list = ucm_hook_enter(
        UCM_EVENT_SBRK | UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED);
    ucm_event_t event;
    char *old_brk;
    int saved_errno;

    if (list == NULL) {
        return ucm_sbrk_call_orig(increment);
    }
    event.sbrk.result    = (void *)-1;
    event.sbrk.increment = increment;
    ucm_hook_native_before(list, UCM_EVENT_SBRK, &event);
    if (event.sbrk.increment < 0) {
        old_brk = ucm_brk_current();
        ucm_hook_vm_unmapping(list, old_brk + event.sbrk.increment,
                              (size_t)-event.sbrk.increment);
    }
    event.sbrk.result = ucm_sbrk_call_orig(event.sbrk.increment);
    saved_errno       = errno;
    ucm_hook_native_after(list, UCM_EVENT_SBRK, &event);
    if ((event.sbrk.result != (void *)-1) && (event.sbrk.increment > 0)) {
        ucm_hook_vm(list, UCM_EVENT_VM_MAPPED, event.sbrk.result,
                    (size_t)event.sbrk.increment);
    }
    ucm_heap_brk_reported();
    ucm_hook_leave(saved_errno);
    return event.sbrk.result;
}

/* glibc's record of the program break (exported by libc since 2.2.5, as
 * ucm_heap.c uses it).  A data reference: the loader binds it when libucm
 * is loaded, before any constructor, so these functions, which run inside
 * glibc's sysmalloc with an arena lock held, look nothing up (a lazy dlsym
 * here could deadlock against a concurrent dlopen). */
extern void *__curbrk;

/* brk() as glibc does it, keeping its __curbrk in step. */
UCS_F_HOT int ucm_mmap_brk_raw(void *addr)
{
    void *result = (void *)ucm_sys_brk(addr);

    __curbrk = result;
    if ((uintptr_t)result < (uintptr_t)addr) {
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

/* sbrk() as glibc does it. */
UCS_F_HOT void *ucm_mmap_sbrk_raw(intptr_t increment)
{
    uintptr_t old;

    if (__curbrk == NULL) {
        if (ucm_mmap_brk_raw(NULL) < 0) {
            return (void *)-1;
        }
    }
    old = (uintptr_t)__curbrk;
    if (increment == 0) {
        return (void *)old;
    }
    if (((increment > 0) && (old + (uintptr_t)increment < old)) ||
        ((increment < 0) && (old < (uintptr_t)-increment))) {
        errno = ENOMEM;
        return (void *)-1;
    }
    if (ucm_mmap_brk_raw((void *)(old + (uintptr_t)increment)) < 0) {
        return (void *)-1;
    }
    return (void *)old;
}

UCS_F_HOT void *ucm_mmap_mremap_raw(void *old_address, size_t old_size,
                                    size_t new_size, int flags, ...)
{
    void *new_address = NULL;

    UCM_MREMAP_VA_NEW_ADDRESS(flags, new_address);
    return (void *)ucm_sys_to_libc(
        ucm_sys_mremap(old_address, old_size, new_size, flags, new_address));
}

/* The originals, without events. */
UCS_F_HOT void *ucm_orig_mmap(void *addr, size_t length, int prot, int flags,
                              int fd, off_t offset)
{
    return (void *)ucm_sys_to_libc(
        ucm_sys_mmap(addr, length, prot, flags, fd, offset));
}

UCS_F_HOT int ucm_orig_munmap(void *addr, size_t length)
{
    return (int)ucm_sys_to_libc(ucm_sys_munmap(addr, length));
}

/* the same call as ucm_mmap_mremap_raw() */
UCS_F_HOT void *ucm_orig_mremap(void *old_address, size_t old_size,
                                size_t new_size, int flags, ...)
    __attribute__((alias("ucm_mmap_mremap_raw")));

UCS_F_HOT int ucm_orig_madvise(void *addr, size_t length, int advice)
{
    return (int)ucm_sys_to_libc(ucm_sys_madvise(addr, length, advice));
}

void *ucm_orig_shmat(int shmid, const void *shmaddr, int shmflg)
{
    return (void *)ucm_sys_to_libc(ucm_sys_shmat(shmid, shmaddr, shmflg));
}

int ucm_orig_shmdt(const void *shmaddr)
{
    return (int)ucm_sys_to_libc(ucm_sys_shmdt(shmaddr));
}

int ucm_orig_brk(void *addr)
{
    return ucm_mmap_brk_raw(addr);
}

void *ucm_orig_sbrk(intptr_t increment)
{
    return ucm_mmap_sbrk_raw(increment);
}
