/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Calls of the per-thread default stream variants for gtest_memtype_cuda:
 * compiled with CUDA_API_PER_THREAD_DEFAULT_STREAM, so that the program's
 * GOT names the _ptsz symbols (served by the test-only fake, not CUDA).
 */
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1

#include "test_memtype_cuda_ptsz.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

int ucmt_ptsz_cu_alloc(void **address_p, size_t size)
{
    CUdeviceptr dptr;

    if (cuMemAllocAsync(&dptr, size, NULL) != CUDA_SUCCESS) {
        return 0;
    }
    *address_p = (void *)dptr;
    return 1;
}

int ucmt_ptsz_cu_free(void *address)
{
    return cuMemFreeAsync((CUdeviceptr)address, NULL) == CUDA_SUCCESS;
}

int ucmt_ptsz_rt_alloc(void **address_p, size_t size)
{
    return cudaMallocAsync(address_p, size, NULL) == cudaSuccess;
}

int ucmt_ptsz_rt_free(void *address)
{
    return cudaFreeAsync(address, NULL) == cudaSuccess;
}
