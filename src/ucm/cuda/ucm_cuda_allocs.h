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

/* Number of recorded allocations (for tests). */
size_t ucm_cuda_allocs_count(void);

#endif
