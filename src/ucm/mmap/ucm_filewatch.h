/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pages of shared files removed by calls no hook sees (internal).
 *
 * An inline system call instruction, io_uring, or another process can
 * truncate a file, punch a hole in it or MADV_REMOVE its pages while this
 * process maps it; no code of libucm runs before the kernel drops the
 * pages.  With UCX_MEM_FILE_WATCH=y, libucm watches every shared file it
 * sees mapped (the mmap hook, with the descriptor; the shmat hook, through
 * /proc/self/map_files; those mapped before the hooks were installed, from
 * /proc/self/maps at installation) with one inotify instance.  The kernel
 * queues IN_MODIFY for a size change of the file (any caller) and for writes
 * and hole punches through descriptors that notify, and raises a real-time
 * signal (O_ASYNC, F_SETSIG) at the process; its handler reads the events
 * and raises VM_UNMAPPED for the pages of every mapping of the file (from
 * the table of file mappings, ucm_filemap.h) that are no longer in the
 * page table (/proc/self/pagemap): pages that a registration pinned and
 * that the file dropped.
 *
 * Reports come after the pages went away.  The signal is process-directed:
 * the kernel hands it to the main thread when that thread does not block
 * it, so a call made on the main thread is reported before it returns to
 * its caller; a call on another thread or in another process is reported
 * when the main thread next runs (microseconds).  Recent kernels do not
 * notify for memfd_create()'s own file (a pseudo file): the memfd_create
 * hook replaces the new descriptor by the same inode opened by path, which
 * does.  Not seen: hole punches through a memfd made by an inline system
 * call or before the hooks were installed, files mapped by an inline mmap
 * after installation, and a forked child (it stops watching).
 * Details: docs/internals-filemap.md.
 *
 * Contract: ucm_filewatch_on is 0 unless enabled at load time.  The add
 * functions are hook context: no malloc, no lock, errno kept; each costs
 * one inotify_add_watch() system call.
 */
#ifndef UCM_FILEWATCH_H_
#define UCM_FILEWATCH_H_

#include "ucm_filemap.h"

#include <ucs/config/ucs_config_parse.h>

#include <stdint.h>
#include <sys/stat.h>

/* UCX_MEM_FILE_WATCH, UCX_MEM_FILE_WATCH_SIGNAL (parsed by ucm_config.c). */
typedef struct {
    int enable;
    unsigned signal; /* 0: SIGRTMAX - 2 */
} ucm_filewatch_opts_t;

extern ucm_filewatch_opts_t ucm_filewatch_opts;
extern const ucs_config_field_t ucm_filewatch_config_table[];

extern int ucm_filewatch_on;

/* Start watching if UCX_MEM_FILE_WATCH=y: after ucm_config_init(), before
 * the hooks are installed.  A signal outside SIGRTMIN..SIGRTMAX, or no
 * inotify, leaves the watch off with one log line.  Not hook context. */
void ucm_filewatch_init(void);

/* A shared mapping of the regular file open as fd, described by st. */
void ucm_filewatch_add_fd(int fd, const struct stat *st);

/* A memfd just made by memfd_create(name, flags) as fd: replace it by the
 * same file opened through /proc/self/fd/<fd> (dup3, close-on-exec as
 * MFD_CLOEXEC asks), so that punches and MADV_REMOVE through it and through
 * its mappings notify the watch.  The number, inode, seals (the inode's),
 * access mode and offset (0) stay; where /proc or a descriptor is missing,
 * fd stays as it was (one debug line). */
void ucm_filewatch_reopen_memfd(int fd, unsigned flags);

/* SysV segment shmid attached at [addr, addr + size). */
void ucm_filewatch_add_shm(uintptr_t addr, size_t size, int shmid);

/* Watch every shared file mapping that exists now (/proc/self/maps,
 * through /proc/self/map_files): those made before the hooks were
 * installed.  Not hook context (installation). */
void ucm_filewatch_scan(void);

/* Set by a truncation hook, and by the madvise hook for MADV_REMOVE, around
 * its call: the file offsets whose pages the hook raises itself.  When the
 * watch's signal arrives on this thread meanwhile, an event of that file
 * reports only its other offsets (another thread's removal in the same
 * file is still reported).  NULL otherwise. */
extern __thread const ucm_filemap_range_t *ucm_filewatch_covered
    __attribute__((tls_model("initial-exec")));

/* Read the queued events and report (what the signal handler does; for
 * tests of the handler and for a caller that must not wait for the
 * signal).  Signal-safe. */
void ucm_filewatch_drain(void);

#endif
