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

size_t ucs_range_index_insert(ucs_range_index_t *index,
                              ucs_pgt_region_t *region)
{
    size_t pos  = ucs_range_index_lower(index, region->start);
    size_t tail = index->count - pos;

    memmove(&index->ends[pos + 1], &index->ends[pos],
            tail * sizeof(*index->ends));
    memmove(&index->regions[pos + 1], &index->regions[pos],
            tail * sizeof(*index->regions));
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

    memmove(&index->ends[pos], &index->ends[pos + 1],
            tail * sizeof(*index->ends));
    memmove(&index->regions[pos], &index->regions[pos + 1],
            tail * sizeof(*index->regions));
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

    if ((block == NULL) || (block->capacity <= index->capacity)) {
        return;
    }
    if (index->count != 0) {
        memcpy(block->ends, index->ends, index->count * sizeof(*index->ends));
        memcpy(block->regions, index->regions,
               index->count * sizeof(*index->regions));
        memcpy(block->tops, index->tops,
               ((index->count + UCS_RANGE_INDEX_GROUP - 1) /
                UCS_RANGE_INDEX_GROUP) * sizeof(*index->tops));
    }
    block->retired   = index->block;
    index->ends      = block->ends;
    index->regions   = block->regions;
    index->tops      = block->tops;
    index->capacity  = block->capacity;
    __atomic_store_n(&index->block, block, __ATOMIC_RELEASE);
    spare->block     = NULL;
}

void ucs_range_index_spare_free(ucs_range_index_spare_t *spare)
{
    free(spare->block);
    spare->block = NULL;
}
