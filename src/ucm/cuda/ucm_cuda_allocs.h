/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Table of the live allocations seen by the CUDA hooks: address -> size and
 * memory type, so that a free (which only gets the address) can report the
 * range it releases.
 *
 * Open-addressing hash table under one mutex held for O(1) work (a growth
 * rehashes under it, amortized O(1)); never calls into CUDA or libucm with
 * it held.  Safe in the hook context of the CUDA allocation functions (not
 * in signal handlers: it allocates with malloc when growing).
 */
#ifndef UCM_CUDA_ALLOCS_H_
#define UCM_CUDA_ALLOCS_H_

#include <ucs/memory/memory_type.h>
#include <ucs/type/status.h>
#include <stddef.h>
#include <stdint.h>

/* One recorded allocation. */
typedef struct ucm_cuda_alloc {
    uintptr_t address; /* in the table: 0 empty, 1 deleted */
    size_t size;
    ucs_memory_type_t mem_type;
} ucm_cuda_alloc_t;

/*
 * Record a live allocation at 'address' (non-zero), replacing a stale entry
 * for the same address.  UCS_ERR_INVALID_PARAM for address 0,
 * UCS_ERR_NO_MEMORY when the table cannot grow (not recorded).
 */
ucs_status_t ucm_cuda_allocs_add(uintptr_t address, size_t size,
                                 ucs_memory_type_t mem_type);

/*
 * Remove the allocation at 'address' and return its size and type.
 * UCS_ERR_NO_ELEM if it is not recorded (outputs untouched).
 */
ucs_status_t ucm_cuda_allocs_take(uintptr_t address, size_t *size_p,
                                  ucs_memory_type_t *mem_type_p);

/*
 * A copy of every recorded allocation in a malloc'ed array (free() it; NULL
 * when there are none) of *count_p entries.  UCS_ERR_NO_MEMORY (outputs
 * untouched).  Not in hook context of the allocation functions' callers
 * that hold the table (it allocates).
 */
ucs_status_t ucm_cuda_allocs_copy(ucm_cuda_alloc_t **allocs_p, size_t *count_p);

/* Number of recorded allocations (for tests). */
size_t ucm_cuda_allocs_count(void);

#endif
