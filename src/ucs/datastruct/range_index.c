/*
 * Sorted range index: insertion, removal and two-phase growth.
 */
#include "range_index.h"

#include <stdlib.h>
#include <string.h>

void ucs_range_index_init(ucs_range_index_t *index)
{
    memset(index, 0, sizeof(*index));
}

void ucs_range_index_cleanup(ucs_range_index_t *index)
{
    ucs_range_index_block_t *block = index->block, *next;

    for (; block != NULL; block = next) {
        next = block->retired;
        free(block);
    }
    ucs_range_index_init(index);
}

void ucs_range_index_update_tops(ucs_range_index_t *index, size_t pos)
{
    size_t group, last;

    if (index->count == 0) {
        return;
    }
    for (group = pos / UCS_RANGE_INDEX_GROUP;
         group * UCS_RANGE_INDEX_GROUP < index->count; ++group) {
        last = ucs_min((group + 1) * UCS_RANGE_INDEX_GROUP, index->count) - 1;
        index->tops[group] = index->ends[last];
    }
}

/* Move entry 0 of the writers' view to block offset first. */
static void ucs_range_index_set_first(ucs_range_index_t *index, size_t first)
{
    index->ends    = index->block->ends + first;
    index->regions = index->block->regions + first;
    __atomic_store_n(&index->first, first, __ATOMIC_RELEASE);
}

size_t ucs_range_index_insert(ucs_range_index_t *index,
                              ucs_pgt_region_t *region)
{
    size_t pos   = ucs_range_index_lower(index, region->start);
    size_t tail  = index->count - pos;
    int back_ok  = index->first + index->count < index->capacity;
    int front_ok = index->first > 0;

    if (front_ok && (!back_ok || (pos < tail))) {
        /* shift entries [0, pos) one slot down */
        memmove(index->ends - 1, index->ends, pos * sizeof(*index->ends));
        memmove(index->regions - 1, index->regions,
                pos * sizeof(*index->regions));
        ucs_range_index_set_first(index, index->first - 1);
    } else {
        memmove(&index->ends[pos + 1], &index->ends[pos],
                tail * sizeof(*index->ends));
        memmove(&index->regions[pos + 1], &index->regions[pos],
                tail * sizeof(*index->regions));
    }
    index->ends[pos]    = region->end;
    index->regions[pos] = region;
    /* racing readers may see new entries with old tops: they then miss or
     * find a region they validate (see ucs_range_index_find_racy) */
    __atomic_store_n(&index->count, index->count + 1, __ATOMIC_RELEASE);
    ucs_range_index_update_tops(index, pos);
    return pos;
}

void ucs_range_index_remove_at(ucs_range_index_t *index, size_t pos)
{
    size_t tail = index->count - pos - 1;

    if (pos < tail) {
        /* shift entries [0, pos) one slot up */
        memmove(index->ends + 1, index->ends, pos * sizeof(*index->ends));
        memmove(index->regions + 1, index->regions,
                pos * sizeof(*index->regions));
        ucs_range_index_set_first(index, index->first + 1);
    } else {
        memmove(&index->ends[pos], &index->ends[pos + 1],
                tail * sizeof(*index->ends));
        memmove(&index->regions[pos], &index->regions[pos + 1],
                tail * sizeof(*index->regions));
    }
    __atomic_store_n(&index->count, index->count - 1, __ATOMIC_RELEASE);
    ucs_range_index_update_tops(index, pos);
}

int ucs_range_index_remove(ucs_range_index_t *index, ucs_pgt_region_t *region)
{
    size_t pos = ucs_range_index_lower(index, region->start);

    if ((pos >= index->count) || (index->regions[pos] != region)) {
        return 0;
    }
    ucs_range_index_remove_at(index, pos);
    return 1;
}

ucs_status_t ucs_range_index_grow_alloc(size_t min_capacity,
                                        ucs_range_index_spare_t *spare)
{
    size_t capacity = 64;
    ucs_range_index_block_t *block;

    while (capacity < min_capacity) {
        capacity *= 2;
    }
    block = malloc(sizeof(*block) +
                   capacity * (sizeof(ucs_pgt_addr_t) +
                               sizeof(ucs_pgt_region_t*)) +
                   (capacity / UCS_RANGE_INDEX_GROUP + 1) *
                   sizeof(ucs_pgt_addr_t));
    if (block == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    block->retired  = NULL;
    block->capacity = capacity;
    block->ends     = (ucs_pgt_addr_t*)(block + 1);
    block->regions  = (ucs_pgt_region_t**)(block->ends + capacity);
    block->tops     = (ucs_pgt_addr_t*)(block->regions + capacity);
    spare->block    = block;
    return UCS_OK;
}

void ucs_range_index_grow_install(ucs_range_index_t *index,
                                  ucs_range_index_spare_t *spare)
{
    ucs_range_index_block_t *block = spare->block;
    size_t first;

    if ((block == NULL) || (block->capacity <= index->capacity)) {
        return;
    }
    /* room on both sides */
    first = (block->capacity - index->count) / 4;
    if (index->count != 0) {
        memcpy(block->ends + first, index->ends,
               index->count * sizeof(*index->ends));
        memcpy(block->regions + first, index->regions,
               index->count * sizeof(*index->regions));
        memcpy(block->tops, index->tops,
               ((index->count + UCS_RANGE_INDEX_GROUP - 1) /
                UCS_RANGE_INDEX_GROUP) * sizeof(*index->tops));
    }
    block->retired   = index->block;
    index->ends      = block->ends + first;
    index->regions   = block->regions + first;
    index->tops      = block->tops;
    index->capacity  = block->capacity;
    /* readers clamp a first/count from the old block to the new one */
    __atomic_store_n(&index->block, block, __ATOMIC_RELEASE);
    __atomic_store_n(&index->first, first, __ATOMIC_RELEASE);
    spare->block     = NULL;
}

void ucs_range_index_spare_free(ucs_range_index_spare_t *spare)
{
    free(spare->block);
    spare->block = NULL;
}
