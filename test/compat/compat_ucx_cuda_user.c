/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA calls from a library of their own; see compat_ucx_cuda_user.h.
 * Built against the test-only fake CUDA toolkit (test/compat/fakecuda-
 * toolkit), linked to its library: not CUDA.
 */
#include "compat_ucx_cuda_user.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>

static int compat_user_cu_alloc(void **ptr_p, size_t size)
{
    CUdeviceptr ptr;
    CUresult ret = cuMemAlloc(&ptr, size);

    if (ret == CUDA_SUCCESS) {
        *ptr_p = (void *)(uintptr_t)ptr;
    }
    return ret;
}

static int compat_user_cu_alloc_managed(void **ptr_p, size_t size)
{
    CUdeviceptr ptr;
    CUresult ret = cuMemAllocManaged(&ptr, size, CU_MEM_ATTACH_GLOBAL);

    if (ret == CUDA_SUCCESS) {
        *ptr_p = (void *)(uintptr_t)ptr;
    }
    return ret;
}

static int compat_user_cu_alloc_pitch(void **ptr_p, size_t *pitch_p,
                                      size_t width, size_t height)
{
    CUdeviceptr ptr;
    size_t pitch;
    CUresult ret = cuMemAllocPitch(&ptr, &pitch, width, height, 4);

    if (ret == CUDA_SUCCESS) {
        *ptr_p   = (void *)(uintptr_t)ptr;
        *pitch_p = pitch;
    }
    return ret;
}

static int compat_user_cu_free(void *ptr)
{
    return cuMemFree((CUdeviceptr)(uintptr_t)ptr);
}

static int compat_user_cu_alloc_host(void **ptr_p, size_t size)
{
    return cuMemAllocHost(ptr_p, size);
}

static int compat_user_cu_free_host(void *ptr)
{
    return cuMemFreeHost(ptr);
}

static int compat_user_cu_reserve(void **ptr_p, size_t size)
{
    CUdeviceptr ptr;
    CUresult ret = cuMemAddressReserve(&ptr, size, 0, 0, 0);

    if (ret == CUDA_SUCCESS) {
        *ptr_p = (void *)(uintptr_t)ptr;
    }
    return ret;
}

static int compat_user_cu_unreserve(void *ptr, size_t size)
{
    return cuMemAddressFree((CUdeviceptr)(uintptr_t)ptr, size);
}

static int compat_user_rt_alloc(void **ptr_p, size_t size)
{
    return cudaMalloc(ptr_p, size);
}

static int compat_user_rt_alloc_managed(void **ptr_p, size_t size)
{
    return cudaMallocManaged(ptr_p, size, cudaMemAttachGlobal);
}

static int compat_user_rt_alloc_pitch(void **ptr_p, size_t *pitch_p,
                                      size_t width, size_t height)
{
    return cudaMallocPitch(ptr_p, pitch_p, width, height);
}

static int compat_user_rt_free(void *ptr)
{
    return cudaFree(ptr);
}

static int compat_user_rt_alloc_host(void **ptr_p, size_t size)
{
    return cudaMallocHost(ptr_p, size);
}

static int compat_user_rt_free_host(void *ptr)
{
    return cudaFreeHost(ptr);
}

const compat_ucx_cuda_user_ops_t compat_ucx_cuda_user_ops = {
    .cu_alloc         = compat_user_cu_alloc,
    .cu_alloc_managed = compat_user_cu_alloc_managed,
    .cu_alloc_pitch   = compat_user_cu_alloc_pitch,
    .cu_free          = compat_user_cu_free,
    .cu_alloc_host    = compat_user_cu_alloc_host,
    .cu_free_host     = compat_user_cu_free_host,
    .cu_reserve       = compat_user_cu_reserve,
    .cu_unreserve     = compat_user_cu_unreserve,
    .rt_alloc         = compat_user_rt_alloc,
    .rt_alloc_managed = compat_user_rt_alloc_managed,
    .rt_alloc_pitch   = compat_user_rt_alloc_pitch,
    .rt_free          = compat_user_rt_free,
    .rt_alloc_host    = compat_user_rt_alloc_host,
    .rt_free_host     = compat_user_rt_free_host,
};
