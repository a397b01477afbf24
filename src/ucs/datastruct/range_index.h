/*
 * Sorted index of non-overlapping address ranges (ucs_pgt_region_t*).
 *
 * Lookup is a two-level binary search over packed 8-byte range ends: first
 * over the last end of every group of UCS_RANGE_INDEX_GROUP entries (small,
 * stays cached), then inside one group (two cache lines), then the one
 * region found.  Entries occupy [first, first + count) of the arrays, so an
 * insertion or removal shifts the shorter side (cheap near either end, as
 * with LRU eviction of the oldest and insertion of the newest).
 * Insertion and removal shift the tail of the arrays (memmove).
 *
 * Contract:
 *  - entries never overlap; the caller guarantees it (insert does not check);
 *  - no function here allocates except ucs_range_index_grow_alloc(), so the
 *    others are safe under a spinlock and in hook context;
 *  - growing is split in two: allocate without any lock held, then install
 *    the new arrays under the caller's lock (ucs_range_index_grow_install);
 *  - writers are serialized by the caller; lock-free readers may call
 *    ucs_range_index_find_racy() concurrently: arrays are never freed before
 *    ucs_range_index_cleanup(), so a racing reader reads valid (possibly
 *    outdated) entries and must validate what it finds.
 */
#ifndef UCS_RANGE_INDEX_H_
#define UCS_RANGE_INDEX_H_

#include <ucs/datastruct/pgtable.h>
#include <ucs/type/status.h>
#include <stddef.h>

BEGIN_C_DECLS

#define UCS_RANGE_INDEX_GROUP 16

/* One allocation: header, ends[capacity], regions[capacity], tops[]. */
typedef struct ucs_range_index_block {
    struct ucs_range_index_block *retired; /* older blocks, freed at cleanup */
    size_t                       capacity;
    ucs_pgt_addr_t               *ends;
    ucs_pgt_region_t             **regions;
    ucs_pgt_addr_t               *tops;    /* last end of each group */
} ucs_range_index_block_t;

typedef struct ucs_range_index {
    /* writers' view, entry i at ends[i] / regions[i] for i < count
     * (== block arrays + first) */
    ucs_pgt_addr_t          *ends;     /* ends[i] == regions[i]->end, ascending */
    ucs_pgt_addr_t          *tops;     /* tops[g] == ends[last of group g] */
    ucs_pgt_region_t        **regions;
    size_t                  first;     /* offset of entry 0 in the block */
    size_t                  count;
    size_t                  capacity;
    ucs_range_index_block_t *block;    /* published for racy readers */
} ucs_range_index_t;

/* Spare block allocated outside the lock for a later install. */
typedef struct ucs_range_index_spare {
    ucs_range_index_block_t *block;
} ucs_range_index_spare_t;

void ucs_range_index_init(ucs_range_index_t *index);

/* Free the arrays (entries are not touched).  Not under a spinlock. */
void ucs_range_index_cleanup(ucs_range_index_t *index);

/* Position of the first of ends[0..n) above addr (n if none). */
static inline size_t ucs_range_index_lower_n(const ucs_pgt_addr_t *ends,
                                             size_t n, ucs_pgt_addr_t addr)
{
    size_t lo = 0, half;

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

/* Two-level lower bound over n entries (n <= capacity of the arrays). */
static inline size_t ucs_range_index_lower_2l(const ucs_pgt_addr_t *tops,
                                              const ucs_pgt_addr_t *ends,
                                              size_t n, ucs_pgt_addr_t addr)
{
    size_t ngroups = (n + UCS_RANGE_INDEX_GROUP - 1) / UCS_RANGE_INDEX_GROUP;
    size_t group   = ucs_range_index_lower_n(tops, ngroups, addr);
    size_t first   = group * UCS_RANGE_INDEX_GROUP;

    if (group >= ngroups) {
        return n;
    }
    return first + ucs_range_index_lower_n(ends + first,
                                           ucs_min(UCS_RANGE_INDEX_GROUP,
                                                   n - first), addr);
}

/* Position of the first entry whose end is above addr (count if none). */
static inline size_t ucs_range_index_lower(const ucs_range_index_t *index,
                                           ucs_pgt_addr_t addr)
{
    return ucs_range_index_lower_2l(index->tops, index->ends, index->count,
                                    addr);
}

/* Lock-free lookup racing with writers: the entry that contained addr at
 * some recent moment, or NULL (also on a torn view).  Validate the result. */
static inline ucs_pgt_region_t *
ucs_range_index_find_racy(const ucs_range_index_t *index, ucs_pgt_addr_t addr)
{
    const ucs_range_index_block_t *block;
    size_t n, pos, ngroups, group, first;
    ucs_pgt_region_t *region;

    const ucs_pgt_addr_t *ends;
    ucs_pgt_region_t * const *regions;
    size_t base;

    block = __atomic_load_n(&index->block, __ATOMIC_ACQUIRE);
    if (block == NULL) {
        return NULL;
    }
    /* a torn view (first/count from another moment) stays in bounds */
    base    = ucs_min(__atomic_load_n(&index->first, __ATOMIC_RELAXED),
                      block->capacity);
    n       = ucs_min(__atomic_load_n(&index->count, __ATOMIC_RELAXED),
                      block->capacity - base);
    ends    = block->ends + base;
    regions = block->regions + base;
    ngroups = (n + UCS_RANGE_INDEX_GROUP - 1) / UCS_RANGE_INDEX_GROUP;
    group   = ucs_range_index_lower_n(block->tops, ngroups, addr);
    if (group >= ngroups) {
        return NULL;
    }
    first = group * UCS_RANGE_INDEX_GROUP;
    /* fetch the group's region pointers while searching its ends */
    __builtin_prefetch(&regions[first]);
    __builtin_prefetch(&regions[ucs_min(first + UCS_RANGE_INDEX_GROUP, n) - 1]);
    pos = first + ucs_range_index_lower_n(ends + first,
                                          ucs_min(UCS_RANGE_INDEX_GROUP,
                                                  n - first), addr);
    if (pos >= n) {
        return NULL;
    }
    region = __atomic_load_n(&regions[pos], __ATOMIC_RELAXED);
    return (region != NULL) ? region : NULL;
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

/* Recompute the group tops from entry pos on (after a bulk change of the
 * arrays by the caller, e.g. compaction: pos 0). */
void ucs_range_index_update_tops(ucs_range_index_t *index, size_t pos);

/* Remove region if present; returns 1 if it was found. */
int ucs_range_index_remove(ucs_range_index_t *index, ucs_pgt_region_t *region);

/* Allocate a spare block able to hold min_capacity entries (no lock held).
 * UCS_ERR_NO_MEMORY; spare is written only on success. */
ucs_status_t ucs_range_index_grow_alloc(size_t min_capacity,
                                        ucs_range_index_spare_t *spare);

/* Under the caller's lock: if spare is larger than the current block, copy
 * the entries into it and publish it; the old block is retired (kept for
 * racy readers) and spare emptied.  Otherwise spare is left to be freed. */
void ucs_range_index_grow_install(ucs_range_index_t *index,
                                  ucs_range_index_spare_t *spare);

/* Free a spare block that was not installed (no lock held). */
void ucs_range_index_spare_free(ucs_range_index_spare_t *spare);

END_C_DECLS

#endif
