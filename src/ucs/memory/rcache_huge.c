/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Large blocks of cache memory that lookups read at random (region blocks
 * of a big cache, large hint tables), on transparent huge pages where the
 * system gives them on request: at a million regions a random hit touches
 * a hint and a region in ~100 MiB, and with 4 KiB pages each of those
 * reads also misses the TLB.  Mapped directly, so that they come zeroed
 * and cost no memory before they are written.
 */
#include "rcache_int.h"

#include <stdint.h>
#include <sys/mman.h>

static size_t ucs_rcache_huge_length(size_t head, size_t size)
{
    return (head + size + ucs_rcache_page_size - 1) &
           ~(ucs_rcache_page_size - 1);
}

void *ucs_rcache_huge_alloc(size_t head, size_t size)
{
    size_t length = ucs_rcache_huge_length(head, size);
    uintptr_t start, block, end;
    void *map;

    /* room to align; what is left before and after goes back */
    map = mmap(NULL, length + UCS_RCACHE_HUGE_PAGE, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        return NULL;
    }
    start = (uintptr_t)map;
    end   = start + length + UCS_RCACHE_HUGE_PAGE;
    block = ((start + head + UCS_RCACHE_HUGE_PAGE - 1) &
             ~(UCS_RCACHE_HUGE_PAGE - 1)) -
            head;
    if (block > start) {
        (void)munmap(map, block - start);
    }
    if (end > block + length) {
        (void)munmap((void *)(block + length), end - (block + length));
    }
#ifdef MADV_HUGEPAGE
    /* advice only: without THP (or with THP "never") the block is plain
     * memory, which changes nothing but the speed.  Whole huge pages only:
     * the head (a table's header, written at once) stays on a small page
     * instead of making a huge one of memory nobody wrote yet. */
    if (size >= UCS_RCACHE_HUGE_PAGE) {
        (void)madvise((void *)(block + head),
                      size & ~(UCS_RCACHE_HUGE_PAGE - 1), MADV_HUGEPAGE);
    }
#endif
    return (void *)block;
}

void ucs_rcache_huge_free(void *block, size_t head, size_t size)
{
    (void)munmap(block, ucs_rcache_huge_length(head, size));
}
