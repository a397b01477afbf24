/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * /proc/self/maps walker without malloc or stdio (raw open/read, a stack
 * buffer).  Usable in hook context; not async-signal-safe only in that the
 * kernel may take mmap_lock for reading.
 */
#ifndef UCM_PROCMAPS_H_
#define UCM_PROCMAPS_H_

#include <stddef.h>
#include <stdint.h>

typedef struct ucm_procmaps_entry {
    uintptr_t start;
    uintptr_t end;
    int prot;   /* PROT_* bits */
    int shared; /* 's' in the flags column */
    unsigned long offset;
    unsigned long dev_major; /* device of the mapped file ("MM:mm", hex) */
    unsigned long dev_minor;
    unsigned long inode; /* for SysV shm: the shmid */
    const char *path;    /* "" for anonymous; truncated to 255 bytes */
} ucm_procmaps_entry_t;

/* Return non-zero to stop the walk. */
typedef int (*ucm_procmaps_cb_t)(void *arg, const ucm_procmaps_entry_t *entry);

/* 0 on success (including a stopped walk), or a negative errno. */
int ucm_procmaps_walk(ucm_procmaps_cb_t cb, void *arg);

#endif
