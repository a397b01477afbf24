/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ======================================================================
 *  TEST-ONLY STAND-IN.  THIS IS NOT NVIDIA'S cuda.h AND NOT CUDA.
 * ======================================================================
 * Written for this project's tests, to compile UCX's libucm_cuda module
 * (src/ucm/cuda/cudamem.c of UCX 1.13.1), UCX's configure checks and the
 * fake CUDA library (test/ucs/memtype/fakecuda*.c) on machines without a
 * CUDA toolkit.  It declares only the few CUDA driver API names those
 * sources use, with CUDA's public names, values and signatures (API
 * facts); everything else of the real header is left out.  The functions
 * are served by the fake library, which hands out host memory: see
 * test/compat/fakecuda-toolkit/README.md.  Never install it or put it on
 * an include path next to a real toolkit.
 */
#ifndef UCMT_FAKECUDA_TOOLKIT_CUDA_H_
#define UCMT_FAKECUDA_TOOLKIT_CUDA_H_

#include <stddef.h>

#define UCMT_FAKECUDA_TOOLKIT 1 /* lets a source tell the stand-in apart */

#define CUDA_VERSION 12000
#define CUDAAPI

#ifdef __cplusplus
extern "C" {
#endif

/* ---- types ---- */
typedef unsigned long long CUdeviceptr_v2; /* 64-bit targets */
typedef CUdeviceptr_v2 CUdeviceptr;
typedef int CUdevice_v1;
typedef CUdevice_v1 CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;

typedef struct CUuuid_st {
    char bytes[16];
} CUuuid;

typedef enum cudaError_enum {
    CUDA_SUCCESS               = 0,
    CUDA_ERROR_INVALID_VALUE   = 1,
    CUDA_ERROR_OUT_OF_MEMORY   = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_DEINITIALIZED   = 4,
    CUDA_ERROR_NO_DEVICE       = 100,
    CUDA_ERROR_INVALID_DEVICE  = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_NOT_FOUND       = 500,
    CUDA_ERROR_NOT_SUPPORTED   = 801,
    CUDA_ERROR_UNKNOWN         = 999
} CUresult;

typedef enum CUmemAttach_flags_enum {
    CU_MEM_ATTACH_GLOBAL = 0x1,
    CU_MEM_ATTACH_HOST   = 0x2,
    CU_MEM_ATTACH_SINGLE = 0x4
} CUmemAttach_flags;

/* ---- versioned names: the library exports the _v2 entry points ---- */
#ifndef __CUDA_API_VERSION_INTERNAL
#define cuMemAlloc           cuMemAlloc_v2
#define cuMemAllocPitch      cuMemAllocPitch_v2
#define cuMemFree            cuMemFree_v2
#define cuMemGetAddressRange cuMemGetAddressRange_v2
#define cuMemAllocHost       cuMemAllocHost_v2
#endif

/* ---- per-thread default stream variants (_ptsz entry points) ---- */
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
#define UCMT_FAKECUDA_API_PTSZ(_api) _api##_ptsz
#else
#define UCMT_FAKECUDA_API_PTSZ(_api) _api
#endif
#ifndef __CUDA_API_VERSION_INTERNAL
#define cuMemAllocAsync UCMT_FAKECUDA_API_PTSZ(cuMemAllocAsync)
#define cuMemFreeAsync  UCMT_FAKECUDA_API_PTSZ(cuMemFreeAsync)
#endif

/* ---- functions ---- */
CUresult CUDAAPI cuInit(unsigned int Flags);
CUresult CUDAAPI cuDriverGetVersion(int *driverVersion);
CUresult CUDAAPI cuDeviceGetCount(int *count);
CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev);

CUresult CUDAAPI cuMemAlloc(CUdeviceptr *dptr, size_t bytesize);
CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize,
                                   unsigned int flags);
CUresult CUDAAPI cuMemAllocPitch(CUdeviceptr *dptr, size_t *pPitch,
                                 size_t WidthInBytes, size_t Height,
                                 unsigned int ElementSizeBytes);
CUresult CUDAAPI cuMemFree(CUdeviceptr dptr);
CUresult CUDAAPI cuMemAllocHost(void **pp, size_t bytesize);
CUresult CUDAAPI cuMemFreeHost(void *p);
CUresult CUDAAPI cuMemGetAddressRange(CUdeviceptr *pbase, size_t *psize,
                                      CUdeviceptr dptr);
CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize,
                                 CUstream hStream);
CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream);

/* Virtual address reservation (no memory behind it). */
CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size,
                                     size_t alignment, CUdeviceptr addr,
                                     unsigned long long flags);
CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size);

#ifdef __cplusplus
}
#endif

#endif
