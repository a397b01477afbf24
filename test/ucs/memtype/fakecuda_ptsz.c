/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * TEST-ONLY fake CUDA (not CUDA): the per-thread default stream variants.
 * With CUDA_API_PER_THREAD_DEFAULT_STREAM the headers map cudaMallocAsync
 * and friends to their _ptsz symbols, which this file defines.
 */
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1

#include "fakecuda_int.h"

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return ucmt_fakecuda_cu_alloc(dptr, bytesize);
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    return ucmt_fakecuda_cu_release(dptr);
}

cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    return ucmt_fakecuda_rt_alloc(devPtr, size);
}

cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    return ucmt_fakecuda_rt_release(devPtr);
}
