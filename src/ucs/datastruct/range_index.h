/*
 * Sorted index of non-overlapping address ranges (ucs_pgt_region_t*).
 *
 * Lookup is a binary search over a packed array of range ends, so a query
 * touches O(log n) cache lines of 8-byte keys plus the one region found.
 * Insertion and removal shift the tail of the arrays (memmove).
 *
 * Contract:
 *  - entries never overlap; the caller guarantees it (insert does not check);
 *  - no function here allocates except ucs_range_index_grow_alloc(), so the
 *    others are safe under a spinlock and in hook context;
 *  - growing is split in two: allocate without any lock held, then install
 *    the new arrays under the caller's lock (ucs_range_index_grow_install);
 *  - not thread-safe: the caller serializes every call.
 */
#ifndef UCS_RANGE_INDEX_H_
#define UCS_RANGE_INDEX_H_

#include <ucs/datastruct/pgtable.h>
#include <ucs/type/status.h>
#include <stddef.h>

BEGIN_C_DECLS

typedef struct ucs_range_index {
    ucs_pgt_addr_t   *ends;     /* ends[i] == regions[i]->end, ascending */
    ucs_pgt_region_t **regions;
    size_t           count;
    size_t           capacity;
} ucs_range_index_t;

/* Spare arrays allocated outside the lock for a later install. */
typedef struct ucs_range_index_spare {
    ucs_pgt_addr_t   *ends;
    ucs_pgt_region_t **regions;
    size_t           capacity;
} ucs_range_index_spare_t;

void ucs_range_index_init(ucs_range_index_t *index);

/* Free the arrays (entries are not touched).  Not under a spinlock. */
void ucs_range_index_cleanup(ucs_range_index_t *index);

/* Position of the first entry whose end is above addr (count if none). */
static inline size_t ucs_range_index_lower(const ucs_range_index_t *index,
                                           ucs_pgt_addr_t addr)
{
    const ucs_pgt_addr_t *ends = index->ends;
    size_t lo = 0, n = index->count, half;

    /* branch-free lower bound */
    while (n > 1) {
        half = n / 2;
        lo   = (ends[lo + half - 1] <= addr) ? lo + half : lo;
        n   -= half;
    }
    if ((n == 1) && (ends[lo] <= addr)) {
        ++lo;
    }
    return lo;
}

/* Entry containing addr, or NULL. */
static inline ucs_pgt_region_t *
ucs_range_index_find(const ucs_range_index_t *index, ucs_pgt_addr_t addr)
{
    size_t pos = ucs_range_index_lower(index, addr);
    ucs_pgt_region_t *region;

    if (pos >= index->count) {
        return NULL;
    }
    region = index->regions[pos];
    return (region->start <= addr) ? region : NULL;
}

/* Insert region (capacity must allow one more entry).  Returns its position. */
size_t ucs_range_index_insert(ucs_range_index_t *index,
                              ucs_pgt_region_t *region);

/* Remove the entry at pos. */
void ucs_range_index_remove_at(ucs_range_index_t *index, size_t pos);

/* Remove region if present; returns 1 if it was found. */
int ucs_range_index_remove(ucs_range_index_t *index, ucs_pgt_region_t *region);

/* Allocate spare arrays able to hold min_capacity entries (no lock held).
 * UCS_ERR_NO_MEMORY; spare is written only on success. */
ucs_status_t ucs_range_index_grow_alloc(size_t min_capacity,
                                        ucs_range_index_spare_t *spare);

/* Under the caller's lock: if spare is larger than the current arrays, copy
 * the entries into it and swap, leaving the old arrays in spare to be freed
 * by ucs_range_index_spare_free() after unlocking. */
void ucs_range_index_grow_install(ucs_range_index_t *index,
                                  ucs_range_index_spare_t *spare);

/* Free spare arrays (no lock held); NULL arrays are fine. */
void ucs_range_index_spare_free(ucs_range_index_spare_t *spare);

END_C_DECLS

#endif
