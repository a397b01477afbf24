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
    free(index->ends);
    free(index->regions);
    ucs_range_index_init(index);
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
    ++index->count;
    return pos;
}

void ucs_range_index_remove_at(ucs_range_index_t *index, size_t pos)
{
    size_t tail = index->count - pos - 1;

    memmove(&index->ends[pos], &index->ends[pos + 1],
            tail * sizeof(*index->ends));
    memmove(&index->regions[pos], &index->regions[pos + 1],
            tail * sizeof(*index->regions));
    --index->count;
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
    ucs_pgt_addr_t *ends;
    ucs_pgt_region_t **regions;

    while (capacity < min_capacity) {
        capacity *= 2;
    }
    ends = malloc(capacity * sizeof(*ends));
    if (ends == NULL) {
        goto err;
    }
    regions = malloc(capacity * sizeof(*regions));
    if (regions == NULL) {
        goto err_free_ends;
    }
    spare->ends     = ends;
    spare->regions  = regions;
    spare->capacity = capacity;
    return UCS_OK;

err_free_ends:
    free(ends);
err:
    return UCS_ERR_NO_MEMORY;
}

void ucs_range_index_grow_install(ucs_range_index_t *index,
                                  ucs_range_index_spare_t *spare)
{
    ucs_pgt_addr_t *old_ends;
    ucs_pgt_region_t **old_regions;
    size_t old_capacity;

    if (spare->capacity <= index->capacity) {
        return;
    }
    if (index->count != 0) {
        memcpy(spare->ends, index->ends, index->count * sizeof(*index->ends));
        memcpy(spare->regions, index->regions,
               index->count * sizeof(*index->regions));
    }
    old_ends         = index->ends;
    old_regions      = index->regions;
    old_capacity     = index->capacity;
    index->ends      = spare->ends;
    index->regions   = spare->regions;
    index->capacity  = spare->capacity;
    spare->ends      = old_ends;
    spare->regions   = old_regions;
    spare->capacity  = old_capacity;
}

void ucs_range_index_spare_free(ucs_range_index_spare_t *spare)
{
    free(spare->ends);
    free(spare->regions);
    spare->ends     = NULL;
    spare->regions  = NULL;
    spare->capacity = 0;
}
