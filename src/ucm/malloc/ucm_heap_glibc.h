/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the heap tracker reads of glibc's malloc (internal; 64-bit glibc
 * 2.27 and later, where this layout has not changed):
 *   - a block is preceded by its chunk header: the size of the previous chunk
 *     (or, for an mmap'ed chunk, the offset of the chunk in its mapping) and
 *     the chunk size, whose low bits say IS_MMAPPED and NON_MAIN_ARENA;
 *   - the chunks of an arena other than the main one live in heaps aligned to
 *     their maximum size (64 MiB), each starting with a header that names
 *     the arena, the previous heap and the heap's current size;
 *   - an arena's state keeps the top chunk (the free end of its newest heap)
 *     after three ints and ten fast-bin pointers.
 * Only blocks of glibc's malloc may be passed here (see ucm_heap.h).
 */
#ifndef UCM_HEAP_GLIBC_H_
#define UCM_HEAP_GLIBC_H_

#include <stddef.h>
#include <stdint.h>

#define UCM_HEAP_CHUNK_HDR      (2 * sizeof(size_t))
#define UCM_HEAP_PREV_INUSE     0x1ul
#define UCM_HEAP_IS_MMAPPED     0x2ul
#define UCM_HEAP_NON_MAIN_ARENA 0x4ul
#define UCM_HEAP_SIZE_BITS      0x7ul
#define UCM_HEAP_MAX_SIZE       (64ul << 20)
#define UCM_HEAP_ARENA_TOP_OFS  96 /* 3 ints (padded to 16) + 10 pointers */

#define UCM_HEAP_MIN_CHUNK 32ul

/* A release trims a heap only when the chunk it leaves free is at least this
 * big (FASTBIN_CONSOLIDATION_THRESHOLD), the top chunk is at least the trim
 * threshold, and the top chunk exceeds the top pad by a page. */
#define UCM_HEAP_CONSOLIDATE_MIN (64ul * 1024)
#define UCM_HEAP_DEFAULT_THRESH  (128ul * 1024) /* trim and mmap thresholds */
#define UCM_HEAP_DEFAULT_TOP_PAD (128ul * 1024)
#define UCM_HEAP_MMAP_THRESH_MAX (32ul << 20) /* of the dynamic threshold */

/* Chunk sizes above this are never fast-bin chunks (whatever M_MXFAST says):
 * only their release can consolidate into the top chunk and trim a heap. */
#define UCM_HEAP_FAST_MAX 160ul

typedef struct {
    void *ar_ptr; /* the arena */
    void *prev;   /* previous heap of the arena, NULL for its first */
    size_t size;  /* current size, header included */
} ucm_heap_info_t;

/* Where the first chunk of a heap other than its arena's first starts: after
 * the header (ar_ptr, prev, size, mprotect_size, and since 2.35 pagesize),
 * padded to the malloc alignment.  A release that leaves a free chunk
 * starting at or before it empties the heap. */
#define UCM_HEAP_INFO_SIZE 48

static inline uintptr_t ucm_heap_chunk(const void *mem)
{
    return (uintptr_t)mem - UCM_HEAP_CHUNK_HDR;
}

static inline size_t ucm_heap_chunk_field(const void *mem)
{
    return ((const volatile size_t *)mem)[-1];
}

static inline size_t ucm_heap_chunk_size(size_t field)
{
    return field & ~UCM_HEAP_SIZE_BITS;
}

/* Size field of the chunk at address 'chunk' (not of a block). */
static inline size_t ucm_heap_field_at(uintptr_t chunk)
{
    return ((const volatile size_t *)chunk)[1];
}

/* Size of the free chunk that precedes the chunk of 'mem' (valid only when
 * PREV_INUSE is clear in the chunk's field). */
static inline size_t ucm_heap_prev_size(const void *mem)
{
    return ((const volatile size_t *)mem)[-2];
}

/* The mapping that holds an mmap'ed chunk: [*start_p, *start_p + *len_p). */
static inline void ucm_heap_mmapped_range(const void *mem, size_t field,
                                          uintptr_t *start_p, size_t *len_p)
{
    size_t offset = ((const volatile size_t *)mem)[-2];

    *start_p = ucm_heap_chunk(mem) - offset;
    *len_p   = offset + ucm_heap_chunk_size(field);
}

static inline volatile ucm_heap_info_t *ucm_heap_of(uintptr_t addr)
{
    return (volatile ucm_heap_info_t *)(addr & ~(UCM_HEAP_MAX_SIZE - 1));
}

/* The heap that holds the arena's top chunk (the only one a release can
 * shrink or remove).  The arena's state lives in its first heap, which is
 * never unmapped, so reading it cannot fault. */
static inline volatile ucm_heap_info_t *
ucm_heap_top_of(volatile ucm_heap_info_t *heap)
{
    uintptr_t top = *(volatile uintptr_t *)((uintptr_t)heap->ar_ptr +
                                            UCM_HEAP_ARENA_TOP_OFS);

    return ucm_heap_of(top);
}

#endif
