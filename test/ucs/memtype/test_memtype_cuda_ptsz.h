/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Per-thread default stream calls (test_memtype_cuda_ptsz.c): each returns
 * 1 on success, 0 on failure.
 */
#ifndef UCMT_MEMTYPE_CUDA_PTSZ_H_
#define UCMT_MEMTYPE_CUDA_PTSZ_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

int ucmt_ptsz_cu_alloc(void **address_p, size_t size);
int ucmt_ptsz_cu_free(void *address);
int ucmt_ptsz_rt_alloc(void **address_p, size_t size);
int ucmt_ptsz_rt_free(void *address);

#ifdef __cplusplus
}
#endif

#endif
