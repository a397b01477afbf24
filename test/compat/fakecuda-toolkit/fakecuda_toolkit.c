/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * TEST-ONLY fake CUDA toolkit library (NOT CUDA, NOT NVML): the entry points
 * that UCX 1.13.1's configure and libucm_cuda need beyond those of
 * test/ucs/memtype/fakecuda.c, which this library includes as it is.
 *
 *   configure --with-cuda:  cuDeviceGetUuid, cudaGetDeviceCount, nvmlInit;
 *   libucm_cuda's free hooks: cuMemGetAddressRange (the freed block's size);
 *   pinned host memory:      cuMemAllocHost, cuMemFreeHost, cudaMallocHost,
 *                            cudaFreeHost (host memory, as everything here);
 *   address reservations:    cuMemAddressReserve/Free, an inaccessible
 *                            (PROT_NONE) mapping as a real driver makes for
 *                            its unified address space: what libucm_cuda's
 *                            existing-allocation scan of /proc/self/maps
 *                            reports.
 *
 * cuMemFreeHost is bistro-patched by UCX: its C body is named
 * ucmt_fakecuda_c_cuMemFreeHost and fakecuda_entry_x86_64.S gives the
 * exported name a prologue UCX's patcher can relocate.
 * Thread-safe (fakecuda.c's lock); none of it is hook context.
 */
#include "fakecuda_int.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include <nvml.h>

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- what configure links against ---- */

CUresult cuInit(unsigned int Flags)
{
    return (Flags == 0) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDriverGetVersion(int *driverVersion)
{
    if (driverVersion == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *driverVersion = CUDA_VERSION;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
    if (count == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *count = 1;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    if (uuid == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (dev != 0) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    memset(uuid->bytes, 0, sizeof(uuid->bytes));
    return CUDA_SUCCESS;
}

cudaError_t cudaGetDeviceCount(int *count)
{
    if (count == NULL) {
        return cudaErrorInvalidValue;
    }
    *count = 1;
    return cudaSuccess;
}

/* Both the versioned name and the unversioned one (older callers, and
 * configure's link test, which names the symbol without the header). */
nvmlReturn_t nvmlInit_v2(void)
{
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit(void)
{
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void)
{
    return NVML_SUCCESS;
}

/* ---- address lookup ---- */

CUresult cuMemGetAddressRange(CUdeviceptr *pbase, size_t *psize,
                              CUdeviceptr dptr)
{
    uintptr_t base;
    size_t size;

    if (ucmt_fakecuda_range(dptr, &base, &size) != 0) {
        return CUDA_ERROR_NOT_FOUND;
    }
    if (pbase != NULL) {
        *pbase = base;
    }
    if (psize != NULL) {
        *psize = size;
    }
    return CUDA_SUCCESS;
}

/* ---- pinned host memory ---- */

CUresult cuMemAllocHost(void **pp, size_t bytesize)
{
    CUdeviceptr address;
    CUresult ret;

    if (pp == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    ret = ucmt_fakecuda_cu_alloc(&address, bytesize);
    if (ret == CUDA_SUCCESS) {
        *pp = (void *)(uintptr_t)address;
    }
    return ret;
}

/* exported as cuMemFreeHost by fakecuda_entry_x86_64.S */
UCMT_FAKECUDA_HIDDEN CUresult ucmt_fakecuda_c_cuMemFreeHost(void *p)
{
    return ucmt_fakecuda_cu_release((uintptr_t)p);
}

cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    return ucmt_fakecuda_rt_alloc(ptr, size);
}

cudaError_t cudaFreeHost(void *ptr)
{
    return ucmt_fakecuda_rt_release(ptr);
}

/* ---- address reservations ---- */

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                             CUdeviceptr addr, unsigned long long flags)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t align, span;
    uintptr_t start, aligned;
    void *map;

    if ((ptr == NULL) || (size == 0) || (size % page) || (flags != 0) ||
        (alignment & (alignment - 1))) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    align = (alignment > page) ? alignment : page;
    span  = size + align - page;
    map   = mmap((void *)(uintptr_t)addr, span, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    start   = (uintptr_t)map;
    aligned = (start + align - 1) & ~(uintptr_t)(align - 1);
    if (aligned > start) {
        munmap(map, aligned - start);
    }
    if (aligned + size < start + span) {
        munmap((void *)(aligned + size), start + span - (aligned + size));
    }
    *ptr = aligned;
    return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    if ((ptr == 0) || (size == 0)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    return (munmap((void *)(uintptr_t)ptr, size) == 0)
               ? CUDA_SUCCESS
               : CUDA_ERROR_INVALID_VALUE;
}
