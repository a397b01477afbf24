/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Live CUDA allocations (see ucm_cuda_allocs.h).  Linear probing with
 * tombstones; capacity is a power of two, grown (and tombstones dropped) when
 * used + deleted slots would pass 1/2 of it.
 */
#include "ucm_cuda_allocs.h"

#include <pthread.h>
#include <stdlib.h>

#define UCM_CUDA_ALLOCS_MIN_CAPACITY 64
#define UCM_CUDA_ALLOCS_TOMBSTONE    ((uintptr_t)1) /* never a device address */

static pthread_mutex_t ucm_cuda_allocs_lock = PTHREAD_MUTEX_INITIALIZER;
static ucm_cuda_alloc_t *ucm_cuda_allocs_slots;
static size_t ucm_cuda_allocs_capacity;
static size_t ucm_cuda_allocs_used;
static size_t ucm_cuda_allocs_deleted;

static size_t ucm_cuda_allocs_hash(uintptr_t address)
{
    uint64_t key = address;

    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return (size_t)key;
}

/* Slot of 'address', or of the first free slot on its probe path. */
static ucm_cuda_alloc_t *ucm_cuda_allocs_probe(ucm_cuda_alloc_t *slots,
                                               size_t capacity,
                                               uintptr_t address)
{
    size_t mask                = capacity - 1;
    size_t index               = ucm_cuda_allocs_hash(address) & mask;
    ucm_cuda_alloc_t *reusable = NULL;
    ucm_cuda_alloc_t *slot;

    for (;;) {
        slot = &slots[index];
        if (slot->address == address) {
            return slot;
        }
        if (slot->address == 0) {
            return (reusable != NULL) ? reusable : slot;
        }
        if ((slot->address == UCM_CUDA_ALLOCS_TOMBSTONE) &&
            (reusable == NULL)) {
            reusable = slot;
        }
        index = (index + 1) & mask;
    }
}

/* Grow (or just clean) so that one more entry keeps the load under 1/2. */
static ucs_status_t ucm_cuda_allocs_reserve(void)
{
    size_t capacity = ucm_cuda_allocs_capacity;
    ucm_cuda_alloc_t *slots, *old;
    size_t i;

    if (((ucm_cuda_allocs_used + ucm_cuda_allocs_deleted + 1) * 2) <=
        capacity) {
        return UCS_OK;
    }

    if (capacity == 0) {
        capacity = UCM_CUDA_ALLOCS_MIN_CAPACITY;
    }
    while (((ucm_cuda_allocs_used + 1) * 4) > capacity) {
        capacity *= 2; /* at most 1/4 full after a rehash */
    }

    slots = calloc(capacity, sizeof(*slots));
    if (slots == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    old = ucm_cuda_allocs_slots;
    for (i = 0; i < ucm_cuda_allocs_capacity; ++i) {
        if (old[i].address > UCM_CUDA_ALLOCS_TOMBSTONE) {
            *ucm_cuda_allocs_probe(slots, capacity, old[i].address) = old[i];
        }
    }
    free(old);

    ucm_cuda_allocs_slots    = slots;
    ucm_cuda_allocs_capacity = capacity;
    ucm_cuda_allocs_deleted  = 0;
    return UCS_OK;
}

ucs_status_t ucm_cuda_allocs_add(uintptr_t address, size_t size,
                                 ucs_memory_type_t mem_type)
{
    ucm_cuda_alloc_t *slot;
    ucs_status_t status;

    if (address <= UCM_CUDA_ALLOCS_TOMBSTONE) {
        return UCS_ERR_INVALID_PARAM;
    }

    pthread_mutex_lock(&ucm_cuda_allocs_lock);
    status = ucm_cuda_allocs_reserve();
    if (status == UCS_OK) {
        slot = ucm_cuda_allocs_probe(ucm_cuda_allocs_slots,
                                     ucm_cuda_allocs_capacity, address);
        if (slot->address == UCM_CUDA_ALLOCS_TOMBSTONE) {
            --ucm_cuda_allocs_deleted;
        }
        if (slot->address != address) {
            ++ucm_cuda_allocs_used;
        }
        slot->address  = address;
        slot->size     = size;
        slot->mem_type = mem_type;
    }
    pthread_mutex_unlock(&ucm_cuda_allocs_lock);
    return status;
}

ucs_status_t ucm_cuda_allocs_take(uintptr_t address, size_t *size_p,
                                  ucs_memory_type_t *mem_type_p)
{
    ucs_status_t status = UCS_ERR_NO_ELEM;
    ucm_cuda_alloc_t *slot;

    if (address <= UCM_CUDA_ALLOCS_TOMBSTONE) {
        return UCS_ERR_NO_ELEM;
    }

    pthread_mutex_lock(&ucm_cuda_allocs_lock);
    if (ucm_cuda_allocs_capacity != 0) {
        slot = ucm_cuda_allocs_probe(ucm_cuda_allocs_slots,
                                     ucm_cuda_allocs_capacity, address);
        if (slot->address == address) {
            *size_p       = slot->size;
            *mem_type_p   = slot->mem_type;
            slot->address = UCM_CUDA_ALLOCS_TOMBSTONE;
            --ucm_cuda_allocs_used;
            ++ucm_cuda_allocs_deleted;
            status = UCS_OK;
        }
    }
    pthread_mutex_unlock(&ucm_cuda_allocs_lock);
    return status;
}

ucs_status_t ucm_cuda_allocs_copy(ucm_cuda_alloc_t **allocs_p, size_t *count_p)
{
    ucm_cuda_alloc_t *copy = NULL;
    size_t i, n = 0;

    pthread_mutex_lock(&ucm_cuda_allocs_lock);
    if (ucm_cuda_allocs_used != 0) {
        copy = malloc(ucm_cuda_allocs_used * sizeof(*copy));
        if (copy == NULL) {
            pthread_mutex_unlock(&ucm_cuda_allocs_lock);
            return UCS_ERR_NO_MEMORY;
        }
        for (i = 0; i < ucm_cuda_allocs_capacity; ++i) {
            if (ucm_cuda_allocs_slots[i].address > UCM_CUDA_ALLOCS_TOMBSTONE) {
                copy[n++] = ucm_cuda_allocs_slots[i];
            }
        }
    }
    pthread_mutex_unlock(&ucm_cuda_allocs_lock);
    *allocs_p = copy;
    *count_p  = n;
    return UCS_OK;
}

size_t ucm_cuda_allocs_count(void)
{
    size_t count;

    pthread_mutex_lock(&ucm_cuda_allocs_lock);
    count = ucm_cuda_allocs_used;
    pthread_mutex_unlock(&ucm_cuda_allocs_lock);
    return count;
}
