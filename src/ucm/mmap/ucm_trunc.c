/* SPDX-License-Identifier: BSD-3-Clause */
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
 * So before the call, VM_UNMAPPED is raised for the addresses of the
 * removed offsets in every mapping of the file, whichever descriptor the
 * call names (fstat/stat gives the inode): libucm's table of file mappings
 * (ucm_filemap.h) has them, fed by the mmap-family hooks; it rebuilds
 * itself from /proc/self/maps for a file it knows no mapping of (a mapping
 * made by a raw system call) and when it may be incomplete.  The mappings
 * themselves stay, so after a successful call the same lookup is made and
 * raised again: a registration made meanwhile (between the event and the
 * zap) may hold the old pages, and UCX 1.13's event set has no native
 * truncate event to hang that second invalidation on.
 *
 * Hook context: no malloc, no lock; nothing is done unless a VM_UNMAPPED
 * handler exists and the call really removes pages.  syscall() of these
 * numbers, and of open/openat/openat2/creat with O_TRUNC, comes here through
 * ucm_syscall.c.  Not seen: truncation by inline system call instructions,
 * by other processes, by libc's open(O_TRUNC), and (reloc mode)
 * libc-internal calls.
 */
#include "ucm_mmap.h"

#include "ucm_filemap.h"
#include "ucm_filewatch.h"
#include "ucm_filewatch_recent.h"
#include "ucm_syscall.h"

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

typedef struct {
    ucm_event_list_t *list;
    ucm_filemap_key_t key;
    int key_set;     /* key is the file's (a regular file) */
    uint64_t lo, hi; /* removed file offsets, page aligned */
    int saved_errno;
    unsigned watch_token; /* the file watch's record of what the hook
                             raises itself, or 0 */
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

static void ucm_trunc_deliver(void *arg, uintptr_t start, size_t len)
{
    ucm_trunc_ctx_t *ctx = arg;

    ucm_hook_vm(ctx->list, UCM_EVENT_VM_UNMAPPED, (void *)start, len);
}

/* Find the mappings of the removed offsets and raise VM_UNMAPPED for them. */
static void ucm_trunc_report(ucm_trunc_ctx_t *ctx)
{
    ucm_filemap_report_file(&ctx->key, ctx->lo, ctx->hi, ucm_trunc_deliver,
                            ctx);
}

/* Enter: 1 if somebody wants VM_UNMAPPED (then the caller must leave). */
static int ucm_trunc_enter(ucm_trunc_ctx_t *ctx)
{
    ctx->saved_errno = errno;
    ctx->list        = ucm_hook_enter(UCM_EVENT_VM_UNMAPPED);
    ctx->lo          = 0;
    ctx->hi          = 0;
    ctx->key_set     = 0;
    return ctx->list != NULL;
}

/* The file the call acts on, described by st. */
static void ucm_trunc_set_key(ucm_trunc_ctx_t *ctx, const struct stat *st)
{
    if (S_ISREG(st->st_mode)) {
        ctx->key.kind      = UCM_FILEMAP_FILE;
        ctx->key.ino       = st->st_ino;
        ctx->key.dev       = st->st_dev;
        ctx->key.dev_known = 1;
        ctx->key_set       = 1;
    }
}

/* Record which offsets of the file described by st the call removes. */
static void ucm_trunc_set_span(ucm_trunc_ctx_t *ctx, const struct stat *st,
                               uint64_t lo, uint64_t hi)
{
    hi = ucs_min(hi, ucm_trunc_page_up((uint64_t)st->st_size));
    ucm_trunc_set_key(ctx, st);
    if (ctx->key_set && (lo < hi)) {
        ctx->lo = lo;
        ctx->hi = hi;
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
    /* the file watch's report of this call (from its thread, later)
     * would repeat what the hook raises itself */
    ctx->watch_token = 0;
    if (ctx->key_set && (ctx->lo < ctx->hi) &&
        ucm_filewatch_watched(&ctx->key)) {
        ucm_filemap_range_t cover = {ctx->key, ctx->lo, ctx->hi};

        ctx->watch_token = ucm_filewatch_recent_arm(&cover);
    }
    ucm_hook_leave(ctx->saved_errno);
}

/* After a successful call, raise the same offsets again (in the mappings
 * that exist now); also after a failed one that the file watch was told
 * about (it may have left these offsets out of another caller's event). */
static void ucm_trunc_after(ucm_trunc_ctx_t *ctx, int result)
{
    int saved_errno = errno;

    if (((result == 0) || (ctx->watch_token != 0)) && (ctx->lo < ctx->hi)) {
        ctx->list = ucm_hook_enter(UCM_EVENT_VM_UNMAPPED);
        if (ctx->list != NULL) {
            ucm_trunc_report(ctx);
            ucm_hook_leave(saved_errno);
        }
    }
    ucm_filewatch_recent_done(ctx->watch_token, result == 0);
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
        ucm_trunc_set_key(&ctx, &st);
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
        ucm_trunc_set_key(&ctx, &st);
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
        ucm_trunc_set_key(&ctx, &st);
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

long ucm_trunc_open_syscall(long number, const long *args, int dirfd,
                            const char *path)
{
    ucm_trunc_ctx_t ctx;
    struct stat st;
    long ret;

    if (!ucm_trunc_enter(&ctx)) {
        return ucm_sys_to_libc(
            ucm_sys_syscall6(number, args[0], args[1], args[2], args[3], 0, 0));
    }
    if (ucm_sys_syscall6(SYS_newfstatat, dirfd, (long)path, (long)&st, 0, 0,
                         0) == 0) {
        ucm_trunc_span_shrink(&ctx, &st, 0);
    }
    ucm_trunc_before(&ctx);
    ret = ucm_sys_to_libc(
        ucm_sys_syscall6(number, args[0], args[1], args[2], args[3], 0, 0));
    ucm_trunc_after(&ctx, (ret >= 0) ? 0 : -1);
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
