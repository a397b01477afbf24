/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sorted set of disjoint address ranges, each tagged with a memory type: the
 * storage behind the memory-type cache.  Not thread-safe: the caller
 * serializes writers against everything and may run finds concurrently.
 *
 * Ranges are half-open [start, end) with start < end; callers validate that.
 * Kept in a B+tree (ucs/datastruct/range_index.h): lookups, insertion and
 * removal are O(log n + k), k the number of ranges overlapped.
 */
#ifndef UCS_MEMTYPE_RANGES_H_
#define UCS_MEMTYPE_RANGES_H_

#include <ucs/datastruct/range_index.h>
#include <ucs/memory/memory_type.h>
#include <ucs/type/status.h>
#include <stddef.h>
#include <stdint.h>

BEGIN_C_DECLS

typedef struct ucs_memtype_range {
    ucs_pgt_region_t super; /* [start, end) */
    ucs_memory_type_t type;
} ucs_memtype_range_t;

typedef struct ucs_memtype_ranges {
    ucs_range_index_t index; /* ucs_memtype_range_t, disjoint */
} ucs_memtype_ranges_t;

/* Empty set; allocates nothing. */
void ucs_memtype_ranges_init(ucs_memtype_ranges_t *ranges);

/* Release the storage; the set is empty afterwards. */
void ucs_memtype_ranges_cleanup(ucs_memtype_ranges_t *ranges);

/*
 * Tag [start, end) with 'type', replacing whatever overlapped it (newest
 * wins).  UCS_ERR_NO_MEMORY if the set cannot grow: the range is then left
 * untagged (the overlapped parts are still removed), never stale.
 */
ucs_status_t ucs_memtype_ranges_insert(ucs_memtype_ranges_t *ranges,
                                       uintptr_t start, uintptr_t end,
                                       ucs_memory_type_t type);

/*
 * Untag [start, end); parts of ranges outside it stay.  Never fails: when
 * cutting a hole would need memory that is not available, the whole
 * enclosing range is dropped (it becomes unknown, never stale).
 */
void ucs_memtype_ranges_remove(ucs_memtype_ranges_t *ranges, uintptr_t start,
                               uintptr_t end);

/*
 * Type of [start, end):
 *  - UCS_OK and *type_p = the type when contiguous ranges of one type cover
 *    all of it;
 *  - UCS_OK and *type_p = UCS_MEMORY_TYPE_UNKNOWN when it overlaps tagged
 *    ranges only in part, or ranges of different types;
 *  - UCS_ERR_NO_ELEM when nothing of it is tagged (*type_p untouched).
 */
ucs_status_t ucs_memtype_ranges_find(const ucs_memtype_ranges_t *ranges,
                                     uintptr_t start, uintptr_t end,
                                     ucs_memory_type_t *type_p);

END_C_DECLS

#endif
