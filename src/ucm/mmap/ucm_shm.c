/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Exact sizes of SysV shared memory segments, for SHMDT/VM_UNMAPPED.
 *
 * Order of sources: our own table of shmat() results (exact even after
 * IPC_RMID), then the segment id from /proc/self/maps (the inode of a SYSV
 * mapping is its shmid) and shmctl(IPC_STAT), then the extent of the mapping
 * in /proc/self/maps.  The table is lock-free: safe in hook context and in
 * signal handlers.
 */
#include "ucm_mmap.h"

#include <ucm/util/ucm_procmaps.h>
#include <ucm/util/ucm_sys.h>

#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>

#define UCM_SHM_TABLE_SIZE 512
#define UCM_SHM_SLOT_BUSY  ((uintptr_t)1)

typedef struct {
    uintptr_t addr; /* 0: free, 1: being written */
    size_t size;
} ucm_shm_entry_t;

static ucm_shm_entry_t ucm_shm_table[UCM_SHM_TABLE_SIZE];

static size_t ucm_shm_page_align(size_t size)
{
    size_t page = ucm_sys_page_size();

    return (size + page - 1) & ~(page - 1);
}

size_t ucm_shm_size_by_id(int shmid)
{
    struct shmid_ds ds;

    if (ucm_sys_shmctl(shmid, IPC_STAT, &ds) != 0) {
        return 0;
    }
    return ucm_shm_page_align(ds.shm_segsz);
}

void ucm_shm_table_add(const void *addr, size_t size)
{
    uintptr_t expected;
    int i;

    ucm_shm_table_remove(addr); /* stale entry of an earlier attach */
    for (i = 0; i < UCM_SHM_TABLE_SIZE; ++i) {
        expected = 0;
        if (__atomic_compare_exchange_n(&ucm_shm_table[i].addr, &expected,
                                        UCM_SHM_SLOT_BUSY, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED)) {
            ucm_shm_table[i].size = size;
            __atomic_store_n(&ucm_shm_table[i].addr, (uintptr_t)addr,
                             __ATOMIC_RELEASE);
            return;
        }
    }
    /* full: shmdt falls back to IPC_STAT and /proc/self/maps */
}

void ucm_shm_table_remove(const void *addr)
{
    uintptr_t expected;
    int i;

    for (i = 0; i < UCM_SHM_TABLE_SIZE; ++i) {
        expected = (uintptr_t)addr;
        if (__atomic_compare_exchange_n(&ucm_shm_table[i].addr, &expected, 0, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            return;
        }
    }
}

static size_t ucm_shm_table_lookup(const void *addr)
{
    size_t size;
    int i;

    for (i = 0; i < UCM_SHM_TABLE_SIZE; ++i) {
        if (__atomic_load_n(&ucm_shm_table[i].addr, __ATOMIC_ACQUIRE) ==
            (uintptr_t)addr) {
            size = ucm_shm_table[i].size;
            if (__atomic_load_n(&ucm_shm_table[i].addr, __ATOMIC_ACQUIRE) ==
                (uintptr_t)addr) {
                return size;
            }
        }
    }
    return 0;
}

typedef struct {
    uintptr_t addr;
    uintptr_t end; /* end of the segment's mappings found so far */
    unsigned long inode;
    int found;
} ucm_shm_maps_ctx_t;

/* Like the kernel's shmdt(): the segment is the first SysV mapping at or
 * above addr whose file offset matches its distance from addr (so a segment
 * whose first pages were unmapped is still found); all its fragments up to
 * the segment's size are detached. */
static int ucm_shm_maps_cb(void *arg, const ucm_procmaps_entry_t *e)
{
    ucm_shm_maps_ctx_t *ctx = arg;

    if (e->end <= ctx->addr) {
        return 0;
    }
    if (strncmp(e->path, "/SYSV", 5) != 0) {
        return ctx->found; /* a foreign mapping ends the segment */
    }
    if (!ctx->found) {
        if ((e->start < ctx->addr) || (e->start - ctx->addr != e->offset)) {
            return 0;
        }
        ctx->found = 1;
        ctx->inode = e->inode;
        ctx->end   = e->end;
        return 0;
    }
    if ((e->inode != ctx->inode) || (e->start - ctx->addr != e->offset)) {
        return 1;
    }
    ctx->end = e->end; /* a fragment (split by mprotect or a partial unmap) */
    return 0;
}

size_t ucm_shm_seg_size(const void *addr)
{
    ucm_shm_maps_ctx_t ctx = {(uintptr_t)addr, 0, 0, 0};
    size_t size;

    size = ucm_shm_table_lookup(addr);
    if (size > 0) {
        return size;
    }
    if ((ucm_procmaps_walk(ucm_shm_maps_cb, &ctx) != 0) || !ctx.found) {
        return 0;
    }
    size = ucm_shm_size_by_id((int)ctx.inode);
    return (size > 0) ? size : (ctx.end - ctx.addr);
}
