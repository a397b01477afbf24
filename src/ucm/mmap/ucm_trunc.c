/*
 * Page-cache truncation: the replacements of ftruncate, truncate and
 * fallocate (the *64 names are the same functions on LP64).
 *
 * Shrinking a file or punching a hole in it takes its pages out of every
 * mapping of the file without any unmap: the kernel zaps the page-table
 * entries of the removed offsets in all mappings, shared and private, and
 * later accesses fault in new pages (or SIGBUS past the end).  A
 * registration of such a range pins pages the file no longer has.
 *
 * What the kernel removes (mm/truncate.c, mm/shmem.c, fs/ext4):
 *   shrink to N         truncate_pagecache(): whole pages from
 *                       round_up(N, page) to the old end, COW'd copies of
 *                       private mappings included (even_cows); the page
 *                       holding N is zeroed in place and stays.
 *   PUNCH_HOLE, ZERO_RANGE (and WRITE_ZEROES)
 *                       truncate_pagecache_range(): the whole pages inside
 *                       [offset, offset + len); partial pages are zeroed in
 *                       place.  Page-cache pages of private mappings are
 *                       zapped too (COW'd copies are kept).
 *   COLLAPSE_RANGE, INSERT_RANGE
 *                       truncate_pagecache(offset): every page from the
 *                       page holding offset to the end (data moves).
 *   growing, mode 0, KEEP_SIZE, UNSHARE_RANGE: nothing is removed.
 *
 * So before the call, for each mapping of the file (found in
 * /proc/self/maps by inode number: stat's st_dev differs from the maps
 * device on overlayfs and btrfs, and a rare collision of inode numbers only
 * over-reports), VM_UNMAPPED is raised for the addresses of the removed
 * offsets.  The mappings themselves stay, so after a successful call the
 * same ranges are raised again: a registration made meanwhile (between the
 * event and the zap) may hold the old pages, and UCX 1.13's event set has
 * no native truncate event to hang that second invalidation on.
 *
 * Hook context: no malloc, no lock (the maps walk reads with raw system
 * calls into a stack buffer); nothing is done unless a VM_UNMAPPED handler
 * exists and the call really removes pages.  Not seen: truncation through
 * raw system calls, by other processes, and (reloc mode) libc-internal
 * calls.
 */
#include "ucm_mmap.h"

#include <ucm/util/ucm_log.h>
#include <ucm/util/ucm_procmaps.h>
#include <ucm/util/ucm_sys.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

/* linux/falloc.h values (not every libc header has all of them) */
#define UCM_FALLOC_PUNCH_HOLE     0x02
#define UCM_FALLOC_COLLAPSE_RANGE 0x08
#define UCM_FALLOC_ZERO_RANGE     0x10
#define UCM_FALLOC_INSERT_RANGE   0x20
#define UCM_FALLOC_WRITE_ZEROES   0x80

/* Ranges gathered by one walk of /proc/self/maps before they are raised. */
#define UCM_TRUNC_BATCH 32

typedef struct {
    uintptr_t start, end;
} ucm_trunc_range_t;

typedef struct {
    ucm_event_list_t *list;
    unsigned long inode;
    uint64_t lo, hi; /* removed file offsets, page aligned */
    int saved_errno;
    int overflow; /* more ranges than the batch held */
    unsigned count;
    uint64_t last_off; /* file offset at ranges[count-1].end */
    ucm_trunc_range_t ranges[UCM_TRUNC_BATCH];
} ucm_trunc_ctx_t;

static uint64_t ucm_trunc_page_up(uint64_t x)
{
    uint64_t page = ucm_sys_page_size();

    return (x > UINT64_MAX - page) ? (UINT64_MAX & ~(page - 1))
                                   : ((x + page - 1) & ~(page - 1));
}

static uint64_t ucm_trunc_page_down(uint64_t x)
{
    return x & ~((uint64_t)ucm_sys_page_size() - 1);
}

static void ucm_trunc_deliver(ucm_trunc_ctx_t *ctx)
{
    unsigned i;

    for (i = 0; i < ctx->count; ++i) {
        ucm_hook_vm(ctx->list, UCM_EVENT_VM_UNMAPPED,
                    (void *)ctx->ranges[i].start,
                    ctx->ranges[i].end - ctx->ranges[i].start);
    }
}

/* One mapping: the addresses of its removed offsets, merged with the
 * previous range when it continues it (a mapping split by mprotect). */
static int ucm_trunc_maps_cb(void *arg, const ucm_procmaps_entry_t *e)
{
    ucm_trunc_ctx_t *ctx = arg;
    uint64_t first, last, size = e->end - e->start;
    uintptr_t start, end;

    if ((e->inode != ctx->inode) || (e->offset > UINT64_MAX - size)) {
        return 0;
    }
    first = ucs_max(e->offset, ctx->lo);
    last  = ucs_min(e->offset + size, ctx->hi);
    if (first >= last) {
        return 0;
    }
    start = e->start + (first - e->offset);
    end   = start + (last - first);
    if ((ctx->count > 0) && (ctx->ranges[ctx->count - 1].end == start) &&
        (ctx->last_off == first)) {
        ctx->ranges[ctx->count - 1].end = end;
    } else {
        if (ctx->count == UCM_TRUNC_BATCH) {
            ucm_trunc_deliver(ctx);
            ctx->count    = 0;
            ctx->overflow = 1;
        }
        ctx->ranges[ctx->count].start = start;
        ctx->ranges[ctx->count].end   = end;
        ++ctx->count;
    }
    ctx->last_off = last;
    return 0;
}

/* Find the mappings of the removed offsets and raise VM_UNMAPPED for them. */
static void ucm_trunc_report(ucm_trunc_ctx_t *ctx)
{
    int ret;

    ctx->count    = 0;
    ctx->overflow = 0;
    ret           = ucm_procmaps_walk(ucm_trunc_maps_cb, ctx);
    if (ret != 0) {
        ucm_diag("cannot read /proc/self/maps (%d): pages of inode %lu at "
                 "offsets 0x%lx..0x%lx not reported",
                 -ret, ctx->inode, (unsigned long)ctx->lo,
                 (unsigned long)ctx->hi);
    }
    ucm_trunc_deliver(ctx);
}

/* Enter: 1 if somebody wants VM_UNMAPPED (then the caller must leave). */
static int ucm_trunc_enter(ucm_trunc_ctx_t *ctx)
{
    ctx->saved_errno = errno;
    ctx->list        = ucm_hook_enter(UCM_EVENT_VM_UNMAPPED);
    ctx->lo          = 0;
    ctx->hi          = 0;
    return ctx->list != NULL;
}

/* Record which offsets of the file described by st the call removes. */
static void ucm_trunc_set_span(ucm_trunc_ctx_t *ctx, const struct stat *st,
                               uint64_t lo, uint64_t hi)
{
    hi = ucs_min(hi, ucm_trunc_page_up((uint64_t)st->st_size));
    if (S_ISREG(st->st_mode) && (lo < hi)) {
        ctx->inode = st->st_ino;
        ctx->lo    = lo;
        ctx->hi    = hi;
    }
}

static void ucm_trunc_span_shrink(ucm_trunc_ctx_t *ctx, const struct stat *st,
                                  off_t length)
{
    if (length >= 0) {
        ucm_trunc_set_span(ctx, st, ucm_trunc_page_up(length), UINT64_MAX);
    }
}

/* Raise the events before the call and leave the read section: the call
 * itself may take long, and handlers may be added meanwhile. */
static void ucm_trunc_before(ucm_trunc_ctx_t *ctx)
{
    if (ctx->lo < ctx->hi) {
        ucm_trunc_report(ctx);
    }
    ucm_hook_leave(ctx->saved_errno);
}

/* After a successful call, raise the same ranges again. */
static void ucm_trunc_after(ucm_trunc_ctx_t *ctx, int result)
{
    int saved_errno = errno;

    if ((result == 0) && (ctx->lo < ctx->hi)) {
        ctx->list = ucm_hook_enter(UCM_EVENT_VM_UNMAPPED);
        if (ctx->list != NULL) {
            if (ctx->overflow) {
                ucm_trunc_report(ctx);
            } else {
                ucm_trunc_deliver(ctx);
            }
            ucm_hook_leave(saved_errno);
        }
    }
    errno = saved_errno;
}

static long ucm_trunc_fstat(int fd, struct stat *st)
{
    return ucm_sys_syscall6(SYS_fstat, fd, (long)st, 0, 0, 0, 0);
}

int ucm_trunc_ftruncate(int fd, off_t length)
{
    ucm_trunc_ctx_t ctx;
    struct stat st;
    int ret;

    if (!ucm_trunc_enter(&ctx)) {
        return UCM_HOOK_CALL_ORIG(UCM_HOOK_FTRUNCATE, ucm_ftruncate_func_t, fd,
                                  length);
    }
    if (ucm_trunc_fstat(fd, &st) == 0) {
        ucm_trunc_span_shrink(&ctx, &st, length);
    }
    ucm_trunc_before(&ctx);
    ret = UCM_HOOK_CALL_ORIG(UCM_HOOK_FTRUNCATE, ucm_ftruncate_func_t, fd,
                             length);
    ucm_trunc_after(&ctx, ret);
    return ret;
}

int ucm_trunc_truncate(const char *path, off_t length)
{
    ucm_trunc_ctx_t ctx;
    struct stat st;
    int ret;

    if (!ucm_trunc_enter(&ctx)) {
        return UCM_HOOK_CALL_ORIG(UCM_HOOK_TRUNCATE, ucm_truncate_func_t, path,
                                  length);
    }
    if (ucm_sys_syscall6(SYS_newfstatat, AT_FDCWD, (long)path, (long)&st, 0, 0,
                         0) == 0) {
        ucm_trunc_span_shrink(&ctx, &st, length);
    }
    ucm_trunc_before(&ctx);
    ret = UCM_HOOK_CALL_ORIG(UCM_HOOK_TRUNCATE, ucm_truncate_func_t, path,
                             length);
    ucm_trunc_after(&ctx, ret);
    return ret;
}

int ucm_trunc_fallocate(int fd, int mode, off_t offset, off_t len)
{
    ucm_trunc_ctx_t ctx;
    uint64_t end;
    struct stat st;
    int ret;

    if (!ucm_trunc_enter(&ctx)) {
        return UCM_HOOK_CALL_ORIG(UCM_HOOK_FALLOCATE, ucm_fallocate_func_t, fd,
                                  mode, offset, len);
    }
    if ((offset >= 0) && (len > 0) && (ucm_trunc_fstat(fd, &st) == 0)) {
        end = ((uint64_t)offset > UINT64_MAX - (uint64_t)len)
                  ? UINT64_MAX
                  : (uint64_t)offset + (uint64_t)len;
        if (mode & (UCM_FALLOC_COLLAPSE_RANGE | UCM_FALLOC_INSERT_RANGE)) {
            ucm_trunc_set_span(&ctx, &st, ucm_trunc_page_down(offset),
                               UINT64_MAX);
        } else if (mode & (UCM_FALLOC_PUNCH_HOLE | UCM_FALLOC_ZERO_RANGE |
                           UCM_FALLOC_WRITE_ZEROES)) {
            ucm_trunc_set_span(&ctx, &st, ucm_trunc_page_up(offset),
                               ucm_trunc_page_down(end));
        }
    }
    ucm_trunc_before(&ctx);
    ret = UCM_HOOK_CALL_ORIG(UCM_HOOK_FALLOCATE, ucm_fallocate_func_t, fd, mode,
                             offset, len);
    ucm_trunc_after(&ctx, ret);
    return ret;
}

/* libucm's own equivalents of the originals (bistro). */
int ucm_trunc_ftruncate_raw(int fd, off_t length)
{
    return (int)ucm_sys_to_libc(
        ucm_sys_syscall6(SYS_ftruncate, fd, length, 0, 0, 0, 0));
}

int ucm_trunc_truncate_raw(const char *path, off_t length)
{
    return (int)ucm_sys_to_libc(
        ucm_sys_syscall6(SYS_truncate, (long)path, length, 0, 0, 0, 0));
}

int ucm_trunc_fallocate_raw(int fd, int mode, off_t offset, off_t len)
{
    return (int)ucm_sys_to_libc(
        ucm_sys_syscall6(SYS_fallocate, fd, mode, offset, len, 0, 0));
}
