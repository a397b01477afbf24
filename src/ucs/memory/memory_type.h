/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory types (UCX 1.13 values): the key of the memory-type cache and the
 * payload of UCM_EVENT_MEM_TYPE_ALLOC/FREE.
 */
#ifndef UCS_MEMORY_TYPE_H_
#define UCS_MEMORY_TYPE_H_

#include <ucs/sys/compiler_def.h>

BEGIN_C_DECLS

typedef enum ucs_memory_type {
    UCS_MEMORY_TYPE_HOST,
    UCS_MEMORY_TYPE_CUDA,
    UCS_MEMORY_TYPE_CUDA_MANAGED,
    UCS_MEMORY_TYPE_ROCM,
    UCS_MEMORY_TYPE_ROCM_MANAGED,
    UCS_MEMORY_TYPE_LAST,
    UCS_MEMORY_TYPE_UNKNOWN = UCS_MEMORY_TYPE_LAST
} ucs_memory_type_t;

END_C_DECLS

#endif
