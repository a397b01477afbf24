/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA calls of compat_ucx_cuda_module, made from a library of their
 * own (compat_ucx_cuda_user.c) as an application's library makes them: its
 * GOT names the CUDA symbols, which is what UCX's reloc-mode hooks patch.
 * The library is built twice, once linked to the test program and once
 * dlopen()ed after the hooks are in (-fno-plt, full RELRO); each exports
 * only its table, so the program reaches each copy's own calls.
 *
 * Every function returns 0 on success and the CUDA error code otherwise;
 * outputs are written only on success.  Not hook context.
 */
#ifndef COMPAT_UCX_CUDA_USER_H_
#define COMPAT_UCX_CUDA_USER_H_

#include <stddef.h>

typedef struct {
    /* driver API: cuMemAlloc, cuMemAllocManaged (attach global),
     * cuMemAllocPitch (4-byte elements), cuMemFree, cuMemAllocHost,
     * cuMemFreeHost, cuMemAddressReserve (no alignment, no address hint),
     * cuMemAddressFree */
    int (*cu_alloc)(void **ptr_p, size_t size);
    int (*cu_alloc_managed)(void **ptr_p, size_t size);
    int (*cu_alloc_pitch)(void **ptr_p, size_t *pitch_p, size_t width,
                          size_t height);
    int (*cu_free)(void *ptr);
    int (*cu_alloc_host)(void **ptr_p, size_t size);
    int (*cu_free_host)(void *ptr);
    int (*cu_reserve)(void **ptr_p, size_t size);
    int (*cu_unreserve)(void *ptr, size_t size);
    /* runtime API: cudaMalloc, cudaMallocManaged (attach global),
     * cudaMallocPitch, cudaFree, cudaMallocHost, cudaFreeHost */
    int (*rt_alloc)(void **ptr_p, size_t size);
    int (*rt_alloc_managed)(void **ptr_p, size_t size);
    int (*rt_alloc_pitch)(void **ptr_p, size_t *pitch_p, size_t width,
                          size_t height);
    int (*rt_free)(void *ptr);
    int (*rt_alloc_host)(void **ptr_p, size_t size);
    int (*rt_free_host)(void *ptr);
} compat_ucx_cuda_user_ops_t;

extern const compat_ucx_cuda_user_ops_t compat_ucx_cuda_user_ops;

#endif
