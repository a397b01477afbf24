/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The replacement of libc's syscall() (internal).
 *
 * syscall(SYS_munmap, ...) and friends reach the kernel without passing
 * through the named libc functions, so neither hook mode sees them there.
 * ucm_syscall_hook() takes the place of syscall() (GOT/PLT slots in reloc
 * mode, libc's entry in bistro mode) and hands every number that maps,
 * unmaps, moves or removes pages to the hook of the named function, which
 * returns the same value and sets errno as syscall() would.  Every other
 * number is forwarded untouched: the six argument registers and the stack
 * word libc's syscall() reads are passed on as they came.
 *
 * Routed (x86_64 numbers): mmap, munmap, mremap, madvise, brk, shmat,
 * shmdt, ftruncate, truncate, fallocate, open/openat/creat with O_TRUNC,
 * remap_file_pages, process_madvise with an advice that discards pages,
 * memfd_create (the file watch's descriptor, ucm_filewatch.h).
 * brk keeps the kernel's convention (the new break, never -1).  A call
 * made inside an original function that a hook chains to (an interposer
 * whose munmap uses syscall()) goes straight to the kernel: the outer hook
 * reports it.
 *
 * Hook context: no malloc, no lock; errno as the routed hook leaves it, or
 * as libc's syscall() sets it for forwarded numbers.
 */
#ifndef UCM_SYSCALL_H_
#define UCM_SYSCALL_H_

#include "ucm_mmap.h"

/* The hook's slot in ucm_hot.orig: after the ids of ucm_mmap.h. */
#define UCM_SYSCALL_HOT_SLOT UCM_HOOK_LAST

_Static_assert(UCM_SYSCALL_HOT_SLOT < UCM_HOT_ORIG_MAX,
               "no ucm_hot.orig slot for syscall()");

/* The replacement (libc's prototype). */
long ucm_syscall_hook(long number, ...);

/* libucm's own equivalent of libc's syscall(): one system call, errno set
 * on failure; no events. */
long ucm_syscall_raw(long number, ...);

/* After installation: let the hook jump straight to the original for the
 * numbers it does not route, unless the original is another hooker's
 * (then the hook counts the chain depth around it).  libc: libc's syscall()
 * as found at start-up.  Not hook context. */
void ucm_syscall_fast_update(void *libc);

/* open/openat/openat2/creat (args: syscall()'s six) of dirfd/path with
 * O_TRUNC: raises VM_UNMAPPED for every mapping of the file's pages around
 * the call, as truncate(path, 0) does (ucm_trunc.c). */
long ucm_trunc_open_syscall(long number, const long *args, int dirfd,
                            const char *path);

#endif
