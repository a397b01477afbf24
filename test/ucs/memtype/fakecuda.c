/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * TEST-ONLY stand-in for CUDA allocation entry points (see fakecuda.h).
 * Not CUDA: host memory from mmap behind the CUDA names.
 */
#include "fakecuda.h"
#include "fakecuda_int.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>

#define UCMT_FAKECUDA_MAX_LIVE 4096

typedef struct {
    uintptr_t address;
    size_t size;
} ucmt_fakecuda_alloc_t;

static pthread_mutex_t ucmt_fakecuda_lock = PTHREAD_MUTEX_INITIALIZER;
static ucmt_fakecuda_alloc_t ucmt_fakecuda_allocs[UCMT_FAKECUDA_MAX_LIVE];
static int ucmt_fakecuda_free_fails;

/* 0 on success, -1: out of memory, -2: invalid argument. */
static int ucmt_fakecuda_alloc(uintptr_t *address_p, size_t size)
{
    void *address;
    unsigned i;

    if (address_p == NULL) {
        return -2;
    }
    if (size == 0) {
        *address_p = 0;
        return 0;
    }
    if (size > UCMT_FAKECUDA_MAX_SIZE) {
        return -1;
    }

    address = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (address == MAP_FAILED) {
        return -1;
    }

    pthread_mutex_lock(&ucmt_fakecuda_lock);
    for (i = 0; i < UCMT_FAKECUDA_MAX_LIVE; ++i) {
        if (ucmt_fakecuda_allocs[i].address == 0) {
            ucmt_fakecuda_allocs[i].address = (uintptr_t)address;
            ucmt_fakecuda_allocs[i].size    = size;
            break;
        }
    }
    pthread_mutex_unlock(&ucmt_fakecuda_lock);

    if (i == UCMT_FAKECUDA_MAX_LIVE) {
        munmap(address, size);
        return -1;
    }
    *address_p = (uintptr_t)address;
    return 0;
}

static int ucmt_fakecuda_free(uintptr_t address)
{
    size_t size = 0;
    unsigned i;

    if (address == 0) {
        return 0;
    }

    pthread_mutex_lock(&ucmt_fakecuda_lock);
    if (ucmt_fakecuda_free_fails) {
        ucmt_fakecuda_free_fails = 0;
        pthread_mutex_unlock(&ucmt_fakecuda_lock);
        return -2;
    }
    for (i = 0; i < UCMT_FAKECUDA_MAX_LIVE; ++i) {
        if (ucmt_fakecuda_allocs[i].address == address) {
            size                            = ucmt_fakecuda_allocs[i].size;
            ucmt_fakecuda_allocs[i].address = 0;
            break;
        }
    }
    pthread_mutex_unlock(&ucmt_fakecuda_lock);

    if (size == 0) {
        return -2;
    }
    munmap((void *)address, size);
    return 0;
}

static CUresult ucmt_fakecuda_cu_result(int ret)
{
    return (ret == 0)    ? CUDA_SUCCESS
           : (ret == -1) ? CUDA_ERROR_OUT_OF_MEMORY
                         : CUDA_ERROR_INVALID_VALUE;
}

static cudaError_t ucmt_fakecuda_rt_result(int ret)
{
    return (ret == 0)    ? cudaSuccess
           : (ret == -1) ? cudaErrorMemoryAllocation
                         : cudaErrorInvalidValue;
}

static int ucmt_fakecuda_pitch(size_t *pitch_p, size_t width, size_t height,
                               size_t *size_p)
{
    size_t pitch;

    if ((pitch_p == NULL) || (width == 0) || (height == 0) ||
        (width > UCMT_FAKECUDA_MAX_SIZE)) {
        return -2;
    }
    pitch = (width + UCMT_FAKECUDA_PITCH - 1) & ~(UCMT_FAKECUDA_PITCH - 1);
    if (height > (UCMT_FAKECUDA_MAX_SIZE / pitch)) {
        return -1;
    }
    *pitch_p = pitch;
    *size_p  = pitch * height;
    return 0;
}

/* The exported functions call these helpers, never each other: a call
 * between exported names would go through this library's own GOT, which the
 * hooks patch too (one allocation would then be reported twice). */
CUresult ucmt_fakecuda_cu_alloc(CUdeviceptr *dptr, size_t bytesize)
{
    uintptr_t address;
    int ret = ucmt_fakecuda_alloc(&address, bytesize);

    if (ret == 0) {
        *dptr = address;
    }
    return ucmt_fakecuda_cu_result((dptr == NULL) ? -2 : ret);
}

cudaError_t ucmt_fakecuda_rt_alloc(void **devPtr, size_t size)
{
    uintptr_t address;
    int ret = (devPtr == NULL) ? -2 : ucmt_fakecuda_alloc(&address, size);

    if (ret == 0) {
        *devPtr = (void *)address;
    }
    return ucmt_fakecuda_rt_result(ret);
}

CUresult ucmt_fakecuda_cu_release(CUdeviceptr dptr)
{
    return ucmt_fakecuda_cu_result(ucmt_fakecuda_free(dptr));
}

cudaError_t ucmt_fakecuda_rt_release(void *devPtr)
{
    return ucmt_fakecuda_rt_result(ucmt_fakecuda_free((uintptr_t)devPtr));
}

int ucmt_fakecuda_range(uintptr_t address, uintptr_t *base_p, size_t *size_p)
{
    int ret = -1;
    unsigned i;

    pthread_mutex_lock(&ucmt_fakecuda_lock);
    for (i = 0; i < UCMT_FAKECUDA_MAX_LIVE; ++i) {
        if ((ucmt_fakecuda_allocs[i].address != 0) &&
            (address >= ucmt_fakecuda_allocs[i].address) &&
            (address - ucmt_fakecuda_allocs[i].address <
             ucmt_fakecuda_allocs[i].size)) {
            *base_p = ucmt_fakecuda_allocs[i].address;
            *size_p = ucmt_fakecuda_allocs[i].size;
            ret     = 0;
            break;
        }
    }
    pthread_mutex_unlock(&ucmt_fakecuda_lock);
    return ret;
}

/* ---- driver API names (the headers map cuMemAlloc to cuMemAlloc_v2...) */

CUresult cuMemAlloc(CUdeviceptr *dptr, size_t bytesize)
{
    return ucmt_fakecuda_cu_alloc(dptr, bytesize);
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize,
                           unsigned int flags)
{
    return ucmt_fakecuda_cu_alloc(dptr, bytesize);
}

CUresult cuMemAllocPitch(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                         size_t Height, unsigned int ElementSizeBytes)
{
    size_t pitch, size;
    int ret = ucmt_fakecuda_pitch(&pitch, WidthInBytes, Height, &size);

    if (ret == 0) {
        ret = ucmt_fakecuda_cu_alloc(dptr, size);
        if (ret == CUDA_SUCCESS) {
            *pPitch = pitch;
        }
        return ret;
    }
    return ucmt_fakecuda_cu_result(ret);
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return ucmt_fakecuda_cu_alloc(dptr, bytesize);
}

CUresult cuMemFree(CUdeviceptr dptr)
{
    return ucmt_fakecuda_cu_release(dptr);
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    return ucmt_fakecuda_cu_result(ucmt_fakecuda_free(dptr));
}

/* ---- runtime API names ---- */

cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    return ucmt_fakecuda_rt_alloc(devPtr, size);
}

cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    return ucmt_fakecuda_rt_alloc(devPtr, size);
}

cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width,
                            size_t height)
{
    size_t row, size;
    cudaError_t ret;
    int status = ucmt_fakecuda_pitch(&row, width, height, &size);

    if (status != 0) {
        return ucmt_fakecuda_rt_result(status);
    }
    ret = ucmt_fakecuda_rt_alloc(devPtr, size);
    if (ret == cudaSuccess) {
        *pitch = row;
    }
    return ret;
}

cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    return ucmt_fakecuda_rt_alloc(devPtr, size);
}

cudaError_t cudaFree(void *devPtr)
{
    return ucmt_fakecuda_rt_result(ucmt_fakecuda_free((uintptr_t)devPtr));
}

cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    return ucmt_fakecuda_rt_result(ucmt_fakecuda_free((uintptr_t)devPtr));
}

/* ---- test controls ---- */

size_t ucmt_fakecuda_size(const void *address)
{
    size_t size = 0;
    unsigned i;

    pthread_mutex_lock(&ucmt_fakecuda_lock);
    for (i = 0; i < UCMT_FAKECUDA_MAX_LIVE; ++i) {
        if ((address != NULL) &&
            (ucmt_fakecuda_allocs[i].address == (uintptr_t)address)) {
            size = ucmt_fakecuda_allocs[i].size;
            break;
        }
    }
    pthread_mutex_unlock(&ucmt_fakecuda_lock);
    return size;
}

size_t ucmt_fakecuda_live(void)
{
    size_t count = 0;
    unsigned i;

    pthread_mutex_lock(&ucmt_fakecuda_lock);
    for (i = 0; i < UCMT_FAKECUDA_MAX_LIVE; ++i) {
        count += (ucmt_fakecuda_allocs[i].address != 0);
    }
    pthread_mutex_unlock(&ucmt_fakecuda_lock);
    return count;
}

void ucmt_fakecuda_fail_next_free(void)
{
    pthread_mutex_lock(&ucmt_fakecuda_lock);
    ucmt_fakecuda_free_fails = 1;
    pthread_mutex_unlock(&ucmt_fakecuda_lock);
}
