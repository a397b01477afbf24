/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Address-range region type shared by the registration cache and its range
 * index (UCX 1.13 names, so users write region->super.start / .end).
 * Header only.  A region is the half-open range [start, end).
 */
#ifndef UCS_PGTABLE_H_
#define UCS_PGTABLE_H_

#include <ucs/sys/compiler_def.h>
#include <stdint.h>

BEGIN_C_DECLS

typedef unsigned long ucs_pgt_addr_t;

/* Smallest alignment of a region's start and end (UCX 1.13 value). */
#define UCS_PGT_ADDR_ALIGN 16ul

typedef struct ucs_pgt_region {
    ucs_pgt_addr_t start;
    ucs_pgt_addr_t end;
} ucs_pgt_region_t;

END_C_DECLS

#endif
