/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Set of typed address ranges (see ucs_memtype_ranges.h), on the range
 * index B+tree; ranges are allocated one by one.
 */
#include "ucs_memtype_ranges.h"

#include <stdlib.h>
#include <string.h>

void ucs_memtype_ranges_init(ucs_memtype_ranges_t *ranges)
{
    ucs_range_index_init(&ranges->index);
}

void ucs_memtype_ranges_cleanup(ucs_memtype_ranges_t *ranges)
{
    ucs_range_index_iter_t iter;
    ucs_pgt_region_t *item;

    while ((item = ucs_range_index_lower(&ranges->index, 0, &iter)) != NULL) {
        ucs_range_index_remove(&ranges->index, item);
        free(item);
    }
    ucs_range_index_cleanup(&ranges->index);
}

/* Room in the tree for one insertion. */
static ucs_status_t ucs_memtype_ranges_room(ucs_memtype_ranges_t *ranges)
{
    ucs_range_index_spare_t spare = {NULL};
    ucs_status_t status;

    if (ucs_range_index_free_nodes(&ranges->index) >=
        ucs_range_index_insert_needs(&ranges->index)) {
        return UCS_OK;
    }
    status = ucs_range_index_grow_alloc(&ranges->index, &spare);
    if (status == UCS_OK) {
        ucs_range_index_grow_install(&ranges->index, &spare);
        ucs_range_index_spare_free(&spare);
    }
    return status;
}

/* A new range in the tree, or UCS_ERR_NO_MEMORY. */
static ucs_status_t ucs_memtype_ranges_put(ucs_memtype_ranges_t *ranges,
                                           uintptr_t start, uintptr_t end,
                                           ucs_memory_type_t type)
{
    ucs_memtype_range_t *item;

    if (ucs_memtype_ranges_room(ranges) != UCS_OK) {
        return UCS_ERR_NO_MEMORY;
    }
    item = malloc(sizeof(*item));
    if (item == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    item->super.start = start;
    item->super.end   = end;
    item->type        = type;
    ucs_range_index_insert(&ranges->index, &item->super);
    return UCS_OK;
}

static void ucs_memtype_ranges_drop(ucs_memtype_ranges_t *ranges,
                                    ucs_memtype_range_t *item)
{
    ucs_range_index_remove(&ranges->index, &item->super);
    free(item);
}

void ucs_memtype_ranges_remove(ucs_memtype_ranges_t *ranges, uintptr_t start,
                               uintptr_t end)
{
    ucs_range_index_iter_t iter;
    ucs_memtype_range_t *item;
    uintptr_t item_end;

    while (((item = (ucs_memtype_range_t *)ucs_range_index_lower(
                 &ranges->index, start, &iter)) != NULL) &&
           (item->super.start < end)) {
        if (item->super.start < start) {
            /* keep the head (its end is the key: reinsert) */
            item_end = item->super.end;
            ucs_range_index_remove(&ranges->index, &item->super);
            item->super.end = start;
            ucs_range_index_insert(&ranges->index, &item->super);
            if ((item_end > end) &&
                (ucs_memtype_ranges_put(ranges, end, item_end, item->type) !=
                 UCS_OK)) {
                /* no memory for the tail: it becomes unknown, not stale */
                ucs_memtype_ranges_drop(ranges, item);
            }
            continue; /* the head now ends at start: not found again */
        }
        if (item->super.end > end) {
            item->super.start = end; /* keep the tail; the key is unchanged */
            break;
        }
        ucs_memtype_ranges_drop(ranges, item);
    }
}

ucs_status_t ucs_memtype_ranges_insert(ucs_memtype_ranges_t *ranges,
                                       uintptr_t start, uintptr_t end,
                                       ucs_memory_type_t type)
{
    ucs_memtype_ranges_remove(ranges, start, end);
    return ucs_memtype_ranges_put(ranges, start, end, type);
}

ucs_status_t ucs_memtype_ranges_find(const ucs_memtype_ranges_t *ranges,
                                     uintptr_t start, uintptr_t end,
                                     ucs_memory_type_t *type_p)
{
    const ucs_memtype_range_t *item;
    ucs_range_index_iter_t iter;
    ucs_memory_type_t type;
    uintptr_t covered;

    item = (const ucs_memtype_range_t *)ucs_range_index_lower(&ranges->index,
                                                              start, &iter);
    if ((item == NULL) || (item->super.start >= end)) {
        return UCS_ERR_NO_ELEM;
    }
    if (item->super.start > start) {
        *type_p = UCS_MEMORY_TYPE_UNKNOWN; /* a leading part is untagged */
        return UCS_OK;
    }

    type    = item->type;
    covered = item->super.end;
    while (covered < end) {
        item = (const ucs_memtype_range_t *)ucs_range_index_next(&ranges->index,
                                                                 &iter);
        if ((item == NULL) || (item->super.start != covered) ||
            (item->type != type)) {
            type = UCS_MEMORY_TYPE_UNKNOWN;
            break;
        }
        covered = item->super.end;
    }

    *type_p = type;
    return UCS_OK;
}
