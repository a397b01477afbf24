/*
 * Sorted set of typed address ranges (see ucs_memtype_ranges.h).
 */
#include "ucs_memtype_ranges.h"

#include <stdlib.h>
#include <string.h>

#define UCS_MEMTYPE_RANGES_MIN_CAPACITY 16

void ucs_memtype_ranges_init(ucs_memtype_ranges_t *ranges)
{
    ranges->items    = NULL;
    ranges->count    = 0;
    ranges->capacity = 0;
}

void ucs_memtype_ranges_cleanup(ucs_memtype_ranges_t *ranges)
{
    free(ranges->items);
    ucs_memtype_ranges_init(ranges);
}

/* Index of the first range that ends after 'addr' (count if none). */
static size_t ucs_memtype_ranges_search(const ucs_memtype_ranges_t *ranges,
                                        uintptr_t addr)
{
    size_t low  = 0;
    size_t high = ranges->count;
    size_t middle;

    while (low < high) {
        middle = low + ((high - low) / 2);
        if (ranges->items[middle].end <= addr) {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    return low;
}

/* Make room for 'extra' more entries. */
static ucs_status_t ucs_memtype_ranges_reserve(ucs_memtype_ranges_t *ranges,
                                               size_t extra)
{
    ucs_memtype_range_t *items;
    size_t capacity;

    if ((ranges->count + extra) <= ranges->capacity) {
        return UCS_OK;
    }

    capacity = ucs_max(ranges->capacity * 2, UCS_MEMTYPE_RANGES_MIN_CAPACITY);
    capacity = ucs_max(capacity, ranges->count + extra);
    items    = realloc(ranges->items, capacity * sizeof(*items));
    if (items == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    ranges->items    = items;
    ranges->capacity = capacity;
    return UCS_OK;
}

/* Open a gap at 'index' and store the range there (capacity reserved). */
static void ucs_memtype_ranges_put(ucs_memtype_ranges_t *ranges, size_t index,
                                   uintptr_t start, uintptr_t end,
                                   ucs_memory_type_t type)
{
    memmove(&ranges->items[index + 1], &ranges->items[index],
            (ranges->count - index) * sizeof(ranges->items[0]));
    ranges->items[index].start = start;
    ranges->items[index].end   = end;
    ranges->items[index].type  = type;
    ++ranges->count;
}

static void ucs_memtype_ranges_erase(ucs_memtype_ranges_t *ranges,
                                     size_t first, size_t last)
{
    memmove(&ranges->items[first], &ranges->items[last],
            (ranges->count - last) * sizeof(ranges->items[0]));
    ranges->count -= last - first;
}

void ucs_memtype_ranges_remove(ucs_memtype_ranges_t *ranges, uintptr_t start,
                               uintptr_t end)
{
    size_t first = ucs_memtype_ranges_search(ranges, start);
    size_t last  = first;
    ucs_memtype_range_t *item;
    uintptr_t item_end;

    while ((last < ranges->count) && (ranges->items[last].start < end)) {
        ++last;
    }
    if (first == last) {
        return; /* nothing overlaps */
    }

    item = &ranges->items[first];
    if ((last == first + 1) && (item->start < start) && (item->end > end)) {
        /* one range sticks out on both sides: cut a hole */
        if (ucs_memtype_ranges_reserve(ranges, 1) != UCS_OK) {
            ucs_memtype_ranges_erase(ranges, first, last);
            return;
        }
        item     = &ranges->items[first];
        item_end = item->end;
        item->end = start;
        ucs_memtype_ranges_put(ranges, first + 1, end, item_end, item->type);
        return;
    }

    if (item->start < start) {
        item->end = start; /* keep the head */
        ++first;
    }
    item = &ranges->items[last - 1];
    if (item->end > end) {
        item->start = end; /* keep the tail */
        --last;
    }
    ucs_memtype_ranges_erase(ranges, first, last);
}

ucs_status_t ucs_memtype_ranges_insert(ucs_memtype_ranges_t *ranges,
                                       uintptr_t start, uintptr_t end,
                                       ucs_memory_type_t type)
{
    ucs_status_t status;

    /* room for the new range and for a hole cut into an older one */
    status = ucs_memtype_ranges_reserve(ranges, 2);
    ucs_memtype_ranges_remove(ranges, start, end);
    if (status != UCS_OK) {
        return status;
    }

    ucs_memtype_ranges_put(ranges, ucs_memtype_ranges_search(ranges, start),
                           start, end, type);
    return UCS_OK;
}

ucs_status_t ucs_memtype_ranges_find(const ucs_memtype_ranges_t *ranges,
                                     uintptr_t start, uintptr_t end,
                                     ucs_memory_type_t *type_p)
{
    size_t index = ucs_memtype_ranges_search(ranges, start);
    const ucs_memtype_range_t *item;
    ucs_memory_type_t type;
    uintptr_t covered;

    if ((index == ranges->count) || (ranges->items[index].start >= end)) {
        return UCS_ERR_NO_ELEM;
    }

    item = &ranges->items[index];
    if (item->start > start) {
        *type_p = UCS_MEMORY_TYPE_UNKNOWN; /* a leading part is untagged */
        return UCS_OK;
    }

    type    = item->type;
    covered = item->end;
    while (covered < end) {
        ++index;
        item = &ranges->items[index];
        if ((index == ranges->count) || (item->start != covered) ||
            (item->type != type)) {
            type = UCS_MEMORY_TYPE_UNKNOWN;
            break;
        }
        covered = item->end;
    }

    *type_p = type;
    return UCS_OK;
}
