/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MADV_DONTFORK marking of registered pages, for kernels that do not copy
 * pinned pages at fork (before 5.9: a child writing to a shared
 * copy-on-write page would take the pinned frame away from the parent).
 *
 * One process-wide map of page ranges to the number of registrations
 * covering them (every cache shares it: the marking belongs to the pages).
 * A range is marked when its count goes from 0 to 1 and restored with
 * MADV_DOFORK when it goes back to 0.  Only the registration path and the
 * release path use it (never the unmap hook), under its own mutex; madvise
 * runs with no cache lock held.
 */
#include "rcache_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

typedef struct {
    ucs_pgt_region_t super; /* page-aligned [start, end) */
    unsigned long refs;     /* registrations covering it */
} ucs_rcache_dfseg_t;

static pthread_mutex_t ucs_rcache_df_lock = PTHREAD_MUTEX_INITIALIZER;
static ucs_range_index_t ucs_rcache_df_index;
static pthread_once_t ucs_rcache_df_once = PTHREAD_ONCE_INIT;
static unsigned long ucs_rcache_df_marked; /* pages, for tests */

static void ucs_rcache_df_prepare(void)
{
    pthread_mutex_lock(&ucs_rcache_df_lock);
}

static void ucs_rcache_df_parent(void)
{
    pthread_mutex_unlock(&ucs_rcache_df_lock);
}

/* The child has none of the marked pages: forget them. */
static void ucs_rcache_df_child(void)
{
    ucs_range_index_iter_t iter;
    ucs_pgt_region_t *seg;

    while ((seg = ucs_range_index_lower(&ucs_rcache_df_index, 0, &iter)) !=
           NULL) {
        ucs_range_index_remove(&ucs_rcache_df_index, seg);
        free(seg);
    }
    ucs_rcache_df_marked = 0;
    pthread_mutex_unlock(&ucs_rcache_df_lock);
}

static void ucs_rcache_df_init(void)
{
    ucs_range_index_init(&ucs_rcache_df_index);
    pthread_atfork(ucs_rcache_df_prepare, ucs_rcache_df_parent,
                   ucs_rcache_df_child);
}

void ucs_rcache_dontfork_init(void)
{
    pthread_once(&ucs_rcache_df_once, ucs_rcache_df_init);
}

int ucs_rcache_dontfork_needed(void)
{
    struct utsname u;
    unsigned major = 0, minor = 0;

    /* 5.9 copies pinned pages at fork ("early COW for pinned pages") */
    if ((uname(&u) != 0) || (sscanf(u.release, "%u.%u", &major, &minor) != 2)) {
        return 1;
    }
    return (major < 5) || ((major == 5) && (minor < 9));
}

static ucs_status_t ucs_rcache_df_room(void)
{
    ucs_range_index_spare_t spare = {NULL};
    ucs_status_t status;

    if (ucs_range_index_free_nodes(&ucs_rcache_df_index) >=
        ucs_range_index_insert_needs(&ucs_rcache_df_index)) {
        return UCS_OK;
    }
    status = ucs_range_index_grow_alloc(&ucs_rcache_df_index, &spare);
    if (status == UCS_OK) {
        ucs_range_index_grow_install(&ucs_rcache_df_index, &spare);
        ucs_range_index_spare_free(&spare);
    }
    return status;
}

static ucs_status_t ucs_rcache_df_insert(ucs_pgt_addr_t start,
                                         ucs_pgt_addr_t end, unsigned long refs)
{
    ucs_rcache_dfseg_t *seg;

    if (ucs_rcache_df_room() != UCS_OK) {
        return UCS_ERR_NO_MEMORY;
    }
    seg = malloc(sizeof(*seg));
    if (seg == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    seg->super.start = start;
    seg->super.end   = end;
    seg->refs        = refs;
    ucs_range_index_insert(&ucs_rcache_df_index, &seg->super);
    return UCS_OK;
}

/* Make addr a segment boundary (split the segment around it). */
static ucs_status_t ucs_rcache_df_cut(ucs_pgt_addr_t addr)
{
    ucs_rcache_dfseg_t *seg;
    ucs_pgt_addr_t end;
    ucs_status_t status;

    seg =
        (ucs_rcache_dfseg_t *)ucs_range_index_find(&ucs_rcache_df_index, addr);
    if ((seg == NULL) || (seg->super.start == addr)) {
        return UCS_OK;
    }
    /* the lower part keeps the segment, the upper part is new */
    status = ucs_rcache_df_room();
    if (status != UCS_OK) {
        return status;
    }
    end = seg->super.end;
    ucs_range_index_remove(&ucs_rcache_df_index, &seg->super);
    seg->super.end = addr;
    ucs_range_index_insert(&ucs_rcache_df_index, &seg->super);
    return ucs_rcache_df_insert(addr, end, seg->refs);
}

static int ucs_rcache_df_advise(ucs_pgt_addr_t start, ucs_pgt_addr_t end,
                                int advice)
{
    if (madvise((void *)start, end - start, advice) != 0) {
        ucs_rcache_error(
            "madvise(0x%lx, %lu, %s) failed: %m", start, end - start,
            (advice == MADV_DONTFORK) ? "MADV_DONTFORK" : "MADV_DOFORK");
        return -1;
    }
    return 0;
}

static void ucs_rcache_df_page_align(ucs_pgt_addr_t *start, ucs_pgt_addr_t *end)
{
    ucs_pgt_addr_t mask = (ucs_pgt_addr_t)sysconf(_SC_PAGESIZE) - 1;

    *start &= ~mask;
    *end = (*end + mask) & ~mask;
}

/* madvise(advice) every part of [start, end) that no segment counts, in
 * address order (each failure is logged).  With keep_going == 0 it stops at
 * the first failure, *stop_p (if not NULL) = start of the gap that failed;
 * otherwise it advises every gap.  Returns -1 if any failed, else 0 with
 * *stop_p = end.  Called with the lock held. */
static int ucs_rcache_df_advise_gaps(ucs_pgt_addr_t start, ucs_pgt_addr_t end,
                                     int advice, int keep_going,
                                     ucs_pgt_addr_t *stop_p)
{
    int ret = 0;

    ucs_range_index_iter_t iter;
    ucs_rcache_dfseg_t *seg;
    ucs_pgt_addr_t cur, gap_end;

    for (cur = start; cur < end; cur = gap_end) {
        seg = (ucs_rcache_dfseg_t *)ucs_range_index_lower(&ucs_rcache_df_index,
                                                          cur, &iter);
        if ((seg != NULL) && (seg->super.start <= cur)) {
            gap_end = ucs_min(seg->super.end, end);
            continue;
        }
        gap_end = (seg == NULL) ? end : ucs_min(seg->super.start, end);
        if (ucs_rcache_df_advise(cur, gap_end, advice) != 0) {
            ret = -1;
            if (!keep_going) {
                break;
            }
        }
    }
    if (stop_p != NULL) {
        *stop_p = (ret == 0) ? end : cur;
    }
    return ret;
}

ucs_status_t ucs_rcache_dontfork_add(ucs_pgt_addr_t start, ucs_pgt_addr_t end)
{
    ucs_range_index_iter_t iter;
    ucs_rcache_dfseg_t *seg;
    ucs_pgt_addr_t cur, gap_end;
    ucs_status_t status;

    pthread_once(&ucs_rcache_df_once, ucs_rcache_df_init);
    ucs_rcache_df_page_align(&start, &end);
    pthread_mutex_lock(&ucs_rcache_df_lock);

    /* mark the pages nobody marked yet; undo all on failure */
    if (ucs_rcache_df_advise_gaps(start, end, MADV_DONTFORK, 0, &cur) != 0) {
        status = UCS_ERR_IO_ERROR;
        goto err_undo;
    }

    status = ucs_rcache_df_cut(start);
    if (status == UCS_OK) {
        status = ucs_rcache_df_cut(end);
    }
    cur = start;
    while ((status == UCS_OK) && (cur < end)) {
        seg = (ucs_rcache_dfseg_t *)ucs_range_index_lower(&ucs_rcache_df_index,
                                                          cur, &iter);
        if ((seg != NULL) && (seg->super.start <= cur)) {
            ++seg->refs;
            cur = seg->super.end;
            continue;
        }
        gap_end = (seg == NULL) ? end : ucs_min(seg->super.start, end);
        status  = ucs_rcache_df_insert(cur, gap_end, 1);
        if (status == UCS_OK) {
            ucs_rcache_df_marked += (gap_end - cur) / sysconf(_SC_PAGESIZE);
            cur = gap_end;
        }
    }
    if (status != UCS_OK) {
        ucs_rcache_error("no memory to count MADV_DONTFORK pages");
        /* uncount [start, cur), then restore the gaps of [cur, end) */
        pthread_mutex_unlock(&ucs_rcache_df_lock);
        ucs_rcache_dontfork_remove(start, cur);
        pthread_mutex_lock(&ucs_rcache_df_lock);
        start = cur;
        goto err_undo_from;
    }
    pthread_mutex_unlock(&ucs_rcache_df_lock);
    return UCS_OK;

err_undo:
    end = cur;
err_undo_from:
    /* restore the pages this call marked and nobody counts */
    (void)ucs_rcache_df_advise_gaps(start, end, MADV_DOFORK, 1, NULL);
    pthread_mutex_unlock(&ucs_rcache_df_lock);
    return status;
}

void ucs_rcache_dontfork_remove(ucs_pgt_addr_t start, ucs_pgt_addr_t end)
{
    ucs_range_index_iter_t iter;
    ucs_rcache_dfseg_t *seg;
    ucs_pgt_addr_t cur, free_start = 0, free_end = 0;

    pthread_once(&ucs_rcache_df_once, ucs_rcache_df_init);
    ucs_rcache_df_page_align(&start, &end);
    pthread_mutex_lock(&ucs_rcache_df_lock);
    if ((ucs_rcache_df_cut(start) != UCS_OK) ||
        (ucs_rcache_df_cut(end) != UCS_OK)) {
        /* cannot split: keep the pages marked (safe, only not restored) */
        ucs_rcache_error("no memory to count MADV_DONTFORK pages; "
                         "[0x%lx, 0x%lx) stays marked",
                         start, end);
        pthread_mutex_unlock(&ucs_rcache_df_lock);
        return;
    }
    for (cur = start; cur < end;) {
        seg = (ucs_rcache_dfseg_t *)ucs_range_index_lower(&ucs_rcache_df_index,
                                                          cur, &iter);
        if ((seg == NULL) || (seg->super.start >= end)) {
            break;
        }
        cur = seg->super.end;
        if (--seg->refs > 0) {
            continue;
        }
        /* restore in runs of adjacent freed segments */
        if (seg->super.start != free_end) {
            if (free_end > free_start) {
                (void)ucs_rcache_df_advise(free_start, free_end, MADV_DOFORK);
            }
            free_start = seg->super.start;
        }
        free_end = seg->super.end;
        ucs_rcache_df_marked -=
            (seg->super.end - seg->super.start) / sysconf(_SC_PAGESIZE);
        ucs_range_index_remove(&ucs_rcache_df_index, &seg->super);
        free(seg);
    }
    if (free_end > free_start) {
        (void)ucs_rcache_df_advise(free_start, free_end, MADV_DOFORK);
    }
    pthread_mutex_unlock(&ucs_rcache_df_lock);
}

unsigned long ucs_rcache_dontfork_pages(void)
{
    unsigned long pages;

    pthread_once(&ucs_rcache_df_once, ucs_rcache_df_init);
    pthread_mutex_lock(&ucs_rcache_df_lock);
    pages = ucs_rcache_df_marked;
    pthread_mutex_unlock(&ucs_rcache_df_lock);
    return pages;
}
