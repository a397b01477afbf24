/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ======================================================================
 *  TEST-ONLY STAND-IN.  THIS IS NOT NVIDIA'S cuda_runtime_api.h, NOT CUDA.
 * ======================================================================
 * The few CUDA runtime API names that UCX 1.13.1's libucm_cuda, UCX's
 * configure and this project's fake CUDA library use, with CUDA's public
 * names, values and signatures (API facts); served by the fake library
 * (host memory).  See cuda.h beside it and README.md in the folder above.
 */
#ifndef UCMT_FAKECUDA_TOOLKIT_CUDA_RUNTIME_API_H_
#define UCMT_FAKECUDA_TOOLKIT_CUDA_RUNTIME_API_H_

#include <stddef.h>

#define CUDART_VERSION 12000
#define CUDARTAPI

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cudaError {
    cudaSuccess                  = 0,
    cudaErrorInvalidValue        = 1,
    cudaErrorMemoryAllocation    = 2,
    cudaErrorInitializationError = 3,
    cudaErrorNoDevice            = 100,
    cudaErrorInvalidDevice       = 101,
    cudaErrorNotSupported        = 801,
    cudaErrorUnknown             = 999
} cudaError_t;

typedef struct CUstream_st *cudaStream_t;

#define cudaMemAttachGlobal 0x01
#define cudaMemAttachHost   0x02
#define cudaMemAttachSingle 0x04

/* per-thread default stream variants (_ptsz entry points) */
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
#define UCMT_FAKECUDART_API_PTSZ(_api) _api##_ptsz
#else
#define UCMT_FAKECUDART_API_PTSZ(_api) _api
#endif
#define cudaMallocAsync UCMT_FAKECUDART_API_PTSZ(cudaMallocAsync)
#define cudaFreeAsync   UCMT_FAKECUDART_API_PTSZ(cudaFreeAsync)

cudaError_t CUDARTAPI cudaGetDeviceCount(int *count);
cudaError_t CUDARTAPI cudaMalloc(void **devPtr, size_t size);
cudaError_t CUDARTAPI cudaMallocManaged(void **devPtr, size_t size,
                                        unsigned int flags);
cudaError_t CUDARTAPI cudaMallocPitch(void **devPtr, size_t *pitch,
                                      size_t width, size_t height);
cudaError_t CUDARTAPI cudaFree(void *devPtr);
cudaError_t CUDARTAPI cudaMallocHost(void **ptr, size_t size);
cudaError_t CUDARTAPI cudaFreeHost(void *ptr);
cudaError_t CUDARTAPI cudaMallocAsync(void **devPtr, size_t size,
                                      cudaStream_t hStream);
cudaError_t CUDARTAPI cudaFreeAsync(void *devPtr, cudaStream_t hStream);

#ifdef __cplusplus
}
#endif

#endif
