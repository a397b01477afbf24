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
 * a thread of libucm's (ucm-filewatch), waiting in poll() on the instance,
 * reads the events and raises VM_UNMAPPED for the pages of every mapping of
 * the file (from the table of file mappings, ucm_filemap.h) that are no
 * longer in the page table (/proc/self/pagemap): pages that a registration
 * pinned and that the file dropped.
 *
 * Reports come after the pages went away, from that thread: no signal is
 * taken, and the VM_UNMAPPED handlers never run on an application thread
 * for the watch (they may wait for locks that thread holds).  The instance
 * and the thread are made at first use (the first shared file mapping
 * watched), not at load time; a forked child makes its own and watches the
 * shared file mappings it inherited (through /proc/self/map_files: root).
 * A removal that a hook sees is still reported synchronously by the hook,
 * which records it (ucm_filewatch_recent.h) so that the thread does not
 * report it again.  Recent kernels do not notify for memfd_create()'s own
 * file (a pseudo file): the memfd_create hook replaces the new descriptor
 * by the same inode opened by path, which does.  Not seen: hole punches
 * through a memfd made by an inline system call or before the hooks were
 * installed, and files mapped by an inline mmap after installation.
 * Details: docs/internals-filemap.md.
 *
 * Contract: ucm_filewatch_on is 0 unless enabled at load time (and 0 again
 * when the watch could not start).  The add functions are hook context: no
 * malloc, no lock, errno kept; each costs one inotify_add_watch() system
 * call.  The first one also makes the instance and the thread
 * (pthread_create): reached only from an mmap of a shared file, shmat and
 * memfd_create, which the allocator never calls.
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
    unsigned signal; /* ignored: no signal is taken */
} ucm_filewatch_opts_t;

extern ucm_filewatch_opts_t ucm_filewatch_opts;
extern const ucs_config_field_t ucm_filewatch_config_table[];

extern int ucm_filewatch_on;

/* Turn the watch on if UCX_MEM_FILE_WATCH=y: after ucm_config_init(),
 * before the hooks are installed.  Makes nothing yet: the first watched
 * file makes the instance and the thread (one WARN line, and the watch off,
 * if that fails).  Not hook context. */
void ucm_filewatch_init(void);

/* In a forked child, from libucm's own fork handler after its locks and
 * event lists are usable again: close the parent's instance, forget the
 * watches, and watch the inherited shared file mappings with an instance
 * and a thread of the child's own. */
void ucm_filewatch_atfork_child(void);

/* Whether the file of key is watched (its events will come): hook
 * context, one load; a file the small cache of watched inodes lost counts
 * as not watched. */
int ucm_filewatch_watched(const ucm_filemap_key_t *key);

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

#endif
