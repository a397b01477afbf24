/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Large blocks of cache memory that lookups read at random (region blocks
 * of a big cache, large hint tables), on transparent huge pages where the
 * system gives them on request: at a million regions a random hit touches
 * a hint and a region in ~150 MiB, and with 4 KiB pages each of those
 * reads also misses the TLB.
 */
#include "rcache_int.h"

#include <stdlib.h>
#include <sys/mman.h>

void *ucs_rcache_huge_alloc(size_t size)
{
    void *block;

    if (posix_memalign(&block, UCS_RCACHE_HUGE_PAGE, size) != 0) {
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    /* advice only: without THP (or with THP "never") the block is plain
     * memory, which changes nothing but the speed.  Whole huge pages only:
     * a few bytes past the last one (a table's header) stay on a small
     * page instead of costing a huge one. */
    if (size >= UCS_RCACHE_HUGE_PAGE) {
        (void)madvise(block, size & ~(UCS_RCACHE_HUGE_PAGE - 1), MADV_HUGEPAGE);
    }
#endif
    return block;
}
