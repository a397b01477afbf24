/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory-type cache: which kind of memory (host, CUDA, CUDA managed, ...)
 * lives at an address range, learned from the MEM_TYPE_ALLOC and
 * MEM_TYPE_FREE events of libucm (delivered by memory-type hooks such as
 * libucm_cuda) or told explicitly with ucs_memtype_cache_update().
 *
 * Answers are never guessed: a range that the cache does not know, or knows
 * only in part, is reported as unknown, never as host memory.
 *
 * Thread safety: every call except destroy and global_cleanup may run
 * concurrently with any other; lookups share a reader lock and never block
 * each other, updates take it exclusively for a short, bounded time (no
 * call-outs while held).  The event handler runs in the hook context of the
 * allocation functions (it allocates with malloc, so memory-type hooks must
 * not be raised from inside malloc).
 */
#ifndef UCS_MEMTYPE_CACHE_H_
#define UCS_MEMTYPE_CACHE_H_

#include <ucs/memory/memory_type.h>
#include <ucs/sys/compiler_def.h>
#include <ucs/type/status.h>
#include <stddef.h>

BEGIN_C_DECLS

typedef struct ucs_memtype_cache ucs_memtype_cache_t;

/* Flags of ucs_memtype_cache_create(). */
enum {
    /* Learn from libucm's MEM_TYPE_ALLOC / MEM_TYPE_FREE events */
    UCS_MEMTYPE_CACHE_FLAG_EVENTS = UCS_BIT(0)
};

/*
 * New, empty cache in *cache_p.  With UCS_MEMTYPE_CACHE_FLAG_EVENTS, a
 * handler for MEM_TYPE_ALLOC/FREE is registered with libucm (installing no
 * other hook), and the cache starts with the live allocations libucm's
 * sources recorded before (libucm_cuda's: UCM_EVENT_FLAG_EXISTING_ALLOC).
 * Errors: UCS_ERR_INVALID_PARAM (NULL cache_p, unknown flag),
 * UCS_ERR_NO_MEMORY, or libucm's status when events are disabled
 * (UCS_ERR_UNSUPPORTED).  *cache_p is set only on success.
 */
ucs_status_t ucs_memtype_cache_create(unsigned flags,
                                      ucs_memtype_cache_t **cache_p);

/*
 * Unregister the handler (when it returns, no event is still being applied)
 * and free the cache.  No other call on this cache may run concurrently or
 * follow.  NULL is ignored.
 */
void ucs_memtype_cache_destroy(ucs_memtype_cache_t *cache);

/*
 * Memory type of [address, address + length).
 *  UCS_OK: *mem_type_p is the type when known allocations of one type cover
 *          the whole range, or UCS_MEMORY_TYPE_UNKNOWN when the range only
 *          partially overlaps known allocations;
 *  UCS_ERR_NO_ELEM: nothing of the range is known;
 *  UCS_ERR_INVALID_PARAM: NULL cache or mem_type_p, zero length, or a range
 *          that wraps past the end of the address space (logged).
 * *mem_type_p is written only with UCS_OK.
 */
ucs_status_t ucs_memtype_cache_lookup(ucs_memtype_cache_t *cache,
                                      const void *address, size_t length,
                                      ucs_memory_type_t *mem_type_p);

/*
 * Record [address, address + length) as 'mem_type', replacing what the cache
 * knew about any part of it.  UCS_ERR_INVALID_PARAM as for lookup, or for a
 * mem_type outside [HOST, LAST); UCS_ERR_NO_MEMORY (the range is then
 * unknown).
 */
ucs_status_t ucs_memtype_cache_update(ucs_memtype_cache_t *cache,
                                      const void *address, size_t length,
                                      ucs_memory_type_t mem_type);

/*
 * Forget [address, address + length); parts of allocations outside it stay
 * known.  UCS_ERR_INVALID_PARAM as for lookup.
 */
ucs_status_t ucs_memtype_cache_remove(ucs_memtype_cache_t *cache,
                                      const void *address, size_t length);

/*
 * The process-wide cache, fed by libucm's events, created (and its handler
 * registered) by the first call; later calls return the same one.
 * Thread-safe.  Errors as ucs_memtype_cache_create() with
 * UCS_MEMTYPE_CACHE_FLAG_EVENTS; a failed creation is retried by the next
 * call.  *cache_p is set only on success.
 */
ucs_status_t ucs_memtype_cache_global(ucs_memtype_cache_t **cache_p);

/*
 * Destroy the process-wide cache (a later ucs_memtype_cache_global() makes a
 * new, empty one).  For tests and orderly shutdown: no call may be using the
 * global cache concurrently.
 */
void ucs_memtype_cache_global_cleanup(void);

END_C_DECLS

#endif
