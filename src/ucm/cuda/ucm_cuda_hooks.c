/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Replacements of the CUDA driver and runtime allocation entry points and
 * their installation (see ucm_cuda.h).  Each replacement calls the real
 * function and reports the range through libucm's memory-type events; the
 * sizes of live allocations are kept in ucm_cuda_allocs.
 */
#include "ucm_cuda.h"
#include "ucm_cuda_allocs.h"
#include <ucm/util/ucm_log.h>

#include <common/ucs_env.h>
#include <ucm/api/ucm_ext.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef enum ucm_cuda_hook_id {
    UCM_CUDA_HOOK_MEM_ALLOC,
    UCM_CUDA_HOOK_MEM_ALLOC_MANAGED,
    UCM_CUDA_HOOK_MEM_ALLOC_PITCH,
    UCM_CUDA_HOOK_MEM_ALLOC_ASYNC,
    UCM_CUDA_HOOK_MEM_FREE,
    UCM_CUDA_HOOK_MEM_FREE_ASYNC,
    UCM_CUDA_HOOK_MALLOC,
    UCM_CUDA_HOOK_MALLOC_MANAGED,
    UCM_CUDA_HOOK_MALLOC_PITCH,
    UCM_CUDA_HOOK_MALLOC_ASYNC,
    UCM_CUDA_HOOK_FREE,
    UCM_CUDA_HOOK_FREE_ASYNC,
    /* per-thread default stream variants (same types) */
    UCM_CUDA_HOOK_MEM_ALLOC_ASYNC_PTSZ,
    UCM_CUDA_HOOK_MEM_FREE_ASYNC_PTSZ,
    UCM_CUDA_HOOK_MALLOC_ASYNC_PTSZ,
    UCM_CUDA_HOOK_FREE_ASYNC_PTSZ,
    UCM_CUDA_HOOK_LAST
} ucm_cuda_hook_id_t;

/* The replacements have exactly the types the CUDA headers declare (the
 * driver names are macros for their _v2 symbols). */
static __typeof__(cuMemAlloc) ucm_cuda_mem_alloc;
static __typeof__(cuMemAllocManaged) ucm_cuda_mem_alloc_managed;
static __typeof__(cuMemAllocPitch) ucm_cuda_mem_alloc_pitch;
static __typeof__(cuMemAllocAsync) ucm_cuda_mem_alloc_async;
static __typeof__(cuMemFree) ucm_cuda_mem_free;
static __typeof__(cuMemFreeAsync) ucm_cuda_mem_free_async;
static __typeof__(cudaMalloc) ucm_cudart_malloc;
static __typeof__(cudaMallocManaged) ucm_cudart_malloc_managed;
static __typeof__(cudaMallocPitch) ucm_cudart_malloc_pitch;
static __typeof__(cudaMallocAsync) ucm_cudart_malloc_async;
static __typeof__(cudaFree) ucm_cudart_free;
static __typeof__(cudaFreeAsync) ucm_cudart_free_async;
static __typeof__(cuMemAllocAsync) ucm_cuda_mem_alloc_async_ptsz;
static __typeof__(cuMemFreeAsync) ucm_cuda_mem_free_async_ptsz;
static __typeof__(cudaMallocAsync) ucm_cudart_malloc_async_ptsz;
static __typeof__(cudaFreeAsync) ucm_cudart_free_async_ptsz;

/* Symbol and hook of each entry point; ->real is written once, before any
 * slot points to ->hook. */
static ucm_got_patch_t ucm_cuda_patches[] = {
    [UCM_CUDA_HOOK_MEM_ALLOC] = {"cuMemAlloc_v2", (void *)ucm_cuda_mem_alloc,
                                 NULL},
    [UCM_CUDA_HOOK_MEM_ALLOC_MANAGED] = {"cuMemAllocManaged",
                                         (void *)ucm_cuda_mem_alloc_managed,
                                         NULL},
    [UCM_CUDA_HOOK_MEM_ALLOC_PITCH]   = {"cuMemAllocPitch_v2",
                                         (void *)ucm_cuda_mem_alloc_pitch, NULL},
    [UCM_CUDA_HOOK_MEM_ALLOC_ASYNC]   = {"cuMemAllocAsync",
                                         (void *)ucm_cuda_mem_alloc_async, NULL},
    [UCM_CUDA_HOOK_MEM_FREE]       = {"cuMemFree_v2", (void *)ucm_cuda_mem_free,
                                      NULL},
    [UCM_CUDA_HOOK_MEM_FREE_ASYNC] = {"cuMemFreeAsync",
                                      (void *)ucm_cuda_mem_free_async, NULL},
    [UCM_CUDA_HOOK_MALLOC] = {"cudaMalloc", (void *)ucm_cudart_malloc, NULL},
    [UCM_CUDA_HOOK_MALLOC_MANAGED] = {"cudaMallocManaged",
                                      (void *)ucm_cudart_malloc_managed, NULL},
    [UCM_CUDA_HOOK_MALLOC_PITCH]   = {"cudaMallocPitch",
                                      (void *)ucm_cudart_malloc_pitch, NULL},
    [UCM_CUDA_HOOK_MALLOC_ASYNC]   = {"cudaMallocAsync",
                                      (void *)ucm_cudart_malloc_async, NULL},
    [UCM_CUDA_HOOK_FREE]       = {"cudaFree", (void *)ucm_cudart_free, NULL},
    [UCM_CUDA_HOOK_FREE_ASYNC] = {"cudaFreeAsync",
                                  (void *)ucm_cudart_free_async, NULL},
    [UCM_CUDA_HOOK_MEM_ALLOC_ASYNC_PTSZ] =
        {"cuMemAllocAsync_ptsz", (void *)ucm_cuda_mem_alloc_async_ptsz, NULL},
    [UCM_CUDA_HOOK_MEM_FREE_ASYNC_PTSZ] = {"cuMemFreeAsync_ptsz",
                                           (void *)ucm_cuda_mem_free_async_ptsz,
                                           NULL},
    [UCM_CUDA_HOOK_MALLOC_ASYNC_PTSZ]   = {"cudaMallocAsync_ptsz",
                                           (void *)ucm_cudart_malloc_async_ptsz,
                                           NULL},
    [UCM_CUDA_HOOK_FREE_ASYNC_PTSZ]     = {
            "cudaFreeAsync_ptsz", (void *)ucm_cudart_free_async_ptsz, NULL}};

/* What each hook calls: the real function, or another hooker that had the
 * GOT slot before us (chained). */
static void *ucm_cuda_next[UCM_CUDA_HOOK_LAST];

static pthread_mutex_t ucm_cuda_install_lock = PTHREAD_MUTEX_INITIALIZER;
static ucm_cuda_hooks_stats_t ucm_cuda_stats;

#define UCM_CUDA_REAL(_id, _func)                                              \
    ((__typeof__(&_func))__atomic_load_n(&ucm_cuda_next[_id], __ATOMIC_ACQUIRE))

/* Record and announce a successful allocation.  If it cannot be recorded,
 * it is not announced either: its release could not be reported, and a
 * range known as CUDA after its release would be stale. */
static void ucm_cuda_report_alloc(uintptr_t address, size_t size,
                                  ucs_memory_type_t mem_type)
{
    if ((address == 0) || (size == 0)) {
        return;
    }

    if (ucm_cuda_allocs_add(address, size, mem_type) != UCS_OK) {
        ucm_error("allocation %p + %zu not tracked: out of memory",
                  (void *)address, size);
        return;
    }
    ucm_dispatch_mem_type_alloc((void *)address, size, mem_type);
}

/* Announce the release of a tracked allocation; *size_p and *mem_type_p
 * tell it back if the release fails.  Returns whether it was tracked. */
static int ucm_cuda_report_free(uintptr_t address, size_t *size_p,
                                ucs_memory_type_t *mem_type_p)
{
    if (ucm_cuda_allocs_take(address, size_p, mem_type_p) != UCS_OK) {
        return 0; /* NULL, or allocated before the hooks */
    }
    ucm_dispatch_mem_type_free((void *)address, *size_p, *mem_type_p);
    return 1;
}

/* A failed release leaves the memory allocated: announce it again. */
static void ucm_cuda_report_free_failed(int tracked, uintptr_t address,
                                        size_t size, ucs_memory_type_t mem_type)
{
    if (tracked) {
        ucm_cuda_report_alloc(address, size, mem_type);
    }
}

/* ---- driver API ---- */

static CUresult ucm_cuda_mem_alloc(CUdeviceptr *dptr, size_t bytesize)
{
    __typeof__(&cuMemAlloc) real =
        UCM_CUDA_REAL(UCM_CUDA_HOOK_MEM_ALLOC, cuMemAlloc);
    CUresult ret = real(dptr, bytesize);

    if (ret == CUDA_SUCCESS) {
        ucm_cuda_report_alloc(*dptr, bytesize, UCS_MEMORY_TYPE_CUDA);
    }
    return ret;
}

static CUresult ucm_cuda_mem_alloc_managed(CUdeviceptr *dptr, size_t bytesize,
                                           unsigned int flags)
{
    __typeof__(&cuMemAllocManaged) real =
        UCM_CUDA_REAL(UCM_CUDA_HOOK_MEM_ALLOC_MANAGED, cuMemAllocManaged);
    CUresult ret = real(dptr, bytesize, flags);

    if (ret == CUDA_SUCCESS) {
        ucm_cuda_report_alloc(*dptr, bytesize, UCS_MEMORY_TYPE_CUDA_MANAGED);
    }
    return ret;
}

static CUresult ucm_cuda_mem_alloc_pitch(CUdeviceptr *dptr, size_t *pPitch,
                                         size_t WidthInBytes, size_t Height,
                                         unsigned int ElementSizeBytes)
{
    __typeof__(&cuMemAllocPitch) real =
        UCM_CUDA_REAL(UCM_CUDA_HOOK_MEM_ALLOC_PITCH, cuMemAllocPitch);
    CUresult ret = real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);

    if (ret == CUDA_SUCCESS) {
        ucm_cuda_report_alloc(*dptr, *pPitch * Height, UCS_MEMORY_TYPE_CUDA);
    }
    return ret;
}

static CUresult ucm_cuda_mem_alloc_async_by(ucm_cuda_hook_id_t id,
                                            CUdeviceptr *dptr, size_t bytesize,
                                            CUstream hStream)
{
    __typeof__(&cuMemAllocAsync) real = UCM_CUDA_REAL(id, cuMemAllocAsync);
    CUresult ret                      = real(dptr, bytesize, hStream);

    if (ret == CUDA_SUCCESS) {
        ucm_cuda_report_alloc(*dptr, bytesize, UCS_MEMORY_TYPE_CUDA);
    }
    return ret;
}

static CUresult ucm_cuda_mem_alloc_async(CUdeviceptr *dptr, size_t bytesize,
                                         CUstream hStream)
{
    return ucm_cuda_mem_alloc_async_by(UCM_CUDA_HOOK_MEM_ALLOC_ASYNC, dptr,
                                       bytesize, hStream);
}

static CUresult ucm_cuda_mem_alloc_async_ptsz(CUdeviceptr *dptr,
                                              size_t bytesize, CUstream hStream)
{
    return ucm_cuda_mem_alloc_async_by(UCM_CUDA_HOOK_MEM_ALLOC_ASYNC_PTSZ, dptr,
                                       bytesize, hStream);
}

static CUresult ucm_cuda_mem_free(CUdeviceptr dptr)
{
    __typeof__(&cuMemFree) real =
        UCM_CUDA_REAL(UCM_CUDA_HOOK_MEM_FREE, cuMemFree);
    ucs_memory_type_t mem_type;
    size_t size;
    int tracked;
    CUresult ret;

    tracked = ucm_cuda_report_free(dptr, &size, &mem_type);
    ret     = real(dptr);
    if (ret != CUDA_SUCCESS) {
        ucm_cuda_report_free_failed(tracked, dptr, size, mem_type);
    }
    return ret;
}

static CUresult ucm_cuda_mem_free_async_by(ucm_cuda_hook_id_t id,
                                           CUdeviceptr dptr, CUstream hStream)
{
    __typeof__(&cuMemFreeAsync) real = UCM_CUDA_REAL(id, cuMemFreeAsync);
    ucs_memory_type_t mem_type;
    size_t size;
    int tracked;
    CUresult ret;

    tracked = ucm_cuda_report_free(dptr, &size, &mem_type);
    ret     = real(dptr, hStream);
    if (ret != CUDA_SUCCESS) {
        ucm_cuda_report_free_failed(tracked, dptr, size, mem_type);
    }
    return ret;
}

static CUresult ucm_cuda_mem_free_async(CUdeviceptr dptr, CUstream hStream)
{
    return ucm_cuda_mem_free_async_by(UCM_CUDA_HOOK_MEM_FREE_ASYNC, dptr,
                                      hStream);
}

static CUresult ucm_cuda_mem_free_async_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    return ucm_cuda_mem_free_async_by(UCM_CUDA_HOOK_MEM_FREE_ASYNC_PTSZ, dptr,
                                      hStream);
}

/* ---- runtime API ---- */

static cudaError_t ucm_cudart_malloc(void **devPtr, size_t size)
{
    __typeof__(&cudaMalloc) real =
        UCM_CUDA_REAL(UCM_CUDA_HOOK_MALLOC, cudaMalloc);
    cudaError_t ret = real(devPtr, size);

    if (ret == cudaSuccess) {
        ucm_cuda_report_alloc((uintptr_t)*devPtr, size, UCS_MEMORY_TYPE_CUDA);
    }
    return ret;
}

static cudaError_t ucm_cudart_malloc_managed(void **devPtr, size_t size,
                                             unsigned int flags)
{
    __typeof__(&cudaMallocManaged) real =
        UCM_CUDA_REAL(UCM_CUDA_HOOK_MALLOC_MANAGED, cudaMallocManaged);
    cudaError_t ret = real(devPtr, size, flags);

    if (ret == cudaSuccess) {
        ucm_cuda_report_alloc((uintptr_t)*devPtr, size,
                              UCS_MEMORY_TYPE_CUDA_MANAGED);
    }
    return ret;
}

static cudaError_t ucm_cudart_malloc_pitch(void **devPtr, size_t *pitch,
                                           size_t width, size_t height)
{
    __typeof__(&cudaMallocPitch) real =
        UCM_CUDA_REAL(UCM_CUDA_HOOK_MALLOC_PITCH, cudaMallocPitch);
    cudaError_t ret = real(devPtr, pitch, width, height);

    if (ret == cudaSuccess) {
        ucm_cuda_report_alloc((uintptr_t)*devPtr, *pitch * height,
                              UCS_MEMORY_TYPE_CUDA);
    }
    return ret;
}

static cudaError_t ucm_cudart_malloc_async_by(ucm_cuda_hook_id_t id,
                                              void **devPtr, size_t size,
                                              cudaStream_t hStream)
{
    __typeof__(&cudaMallocAsync) real = UCM_CUDA_REAL(id, cudaMallocAsync);
    cudaError_t ret                   = real(devPtr, size, hStream);

    if (ret == cudaSuccess) {
        ucm_cuda_report_alloc((uintptr_t)*devPtr, size, UCS_MEMORY_TYPE_CUDA);
    }
    return ret;
}

static cudaError_t ucm_cudart_malloc_async(void **devPtr, size_t size,
                                           cudaStream_t hStream)
{
    return ucm_cudart_malloc_async_by(UCM_CUDA_HOOK_MALLOC_ASYNC, devPtr, size,
                                      hStream);
}

static cudaError_t ucm_cudart_malloc_async_ptsz(void **devPtr, size_t size,
                                                cudaStream_t hStream)
{
    return ucm_cudart_malloc_async_by(UCM_CUDA_HOOK_MALLOC_ASYNC_PTSZ, devPtr,
                                      size, hStream);
}

static cudaError_t ucm_cudart_free(void *devPtr)
{
    __typeof__(&cudaFree) real = UCM_CUDA_REAL(UCM_CUDA_HOOK_FREE, cudaFree);
    ucs_memory_type_t mem_type;
    size_t size;
    cudaError_t ret;
    int tracked;

    tracked = ucm_cuda_report_free((uintptr_t)devPtr, &size, &mem_type);
    ret     = real(devPtr);
    if (ret != cudaSuccess) {
        ucm_cuda_report_free_failed(tracked, (uintptr_t)devPtr, size, mem_type);
    }
    return ret;
}

static cudaError_t ucm_cudart_free_async_by(ucm_cuda_hook_id_t id, void *devPtr,
                                            cudaStream_t hStream)
{
    __typeof__(&cudaFreeAsync) real = UCM_CUDA_REAL(id, cudaFreeAsync);
    ucs_memory_type_t mem_type;
    size_t size;
    cudaError_t ret;
    int tracked;

    tracked = ucm_cuda_report_free((uintptr_t)devPtr, &size, &mem_type);
    ret     = real(devPtr, hStream);
    if (ret != cudaSuccess) {
        ucm_cuda_report_free_failed(tracked, (uintptr_t)devPtr, size, mem_type);
    }
    return ret;
}

static cudaError_t ucm_cudart_free_async(void *devPtr, cudaStream_t hStream)
{
    return ucm_cudart_free_async_by(UCM_CUDA_HOOK_FREE_ASYNC, devPtr, hStream);
}

static cudaError_t ucm_cudart_free_async_ptsz(void *devPtr,
                                              cudaStream_t hStream)
{
    return ucm_cudart_free_async_by(UCM_CUDA_HOOK_FREE_ASYNC_PTSZ, devPtr,
                                    hStream);
}

/* ---- installation ---- */

/* The real function: the next definition after this library, else the
 * first global one (this library defines none of these names). */
static void *ucm_cuda_resolve(const char *symbol)
{
    void *func = dlsym(RTLD_NEXT, symbol);

    if (func == NULL) {
        func = dlsym(RTLD_DEFAULT, symbol);
    }
    return func;
}

/* UCM_EVENT_FLAG_EXISTING_ALLOC: the live allocations recorded so far, to a
 * handler being set (libucm calls this, no lock held). */
static void ucm_cuda_report_existing(ucm_event_callback_t cb, void *arg)
{
    ucm_cuda_alloc_t *allocs;
    ucm_event_t event;
    size_t i, count;

    if (ucm_cuda_allocs_copy(&allocs, &count) != UCS_OK) {
        ucm_error("no memory to report the %zu existing CUDA allocations",
                  ucm_cuda_allocs_count());
        return;
    }
    for (i = 0; i < count; ++i) {
        memset(&event, 0, sizeof(event));
        event.mem_type.address  = (void *)allocs[i].address;
        event.mem_type.size     = allocs[i].size;
        event.mem_type.mem_type = allocs[i].mem_type;
        event.mem_type.sys_dev  = UCM_EVENT_SYS_DEV_UNKNOWN;
        cb(UCM_EVENT_MEM_TYPE_ALLOC, &event, arg);
    }
    free(allocs);
}

ucs_status_t ucm_cuda_hooks_install(void)
{
    ucm_got_patch_t found[UCM_CUDA_HOOK_LAST];
    unsigned ids[UCM_CUDA_HOOK_LAST];
    unsigned long written = 0;
    ucs_status_t status;
    unsigned count = 0;
    unsigned i;
    void *real;

    if (!ucm_global_opts.enable_events) {
        return UCS_ERR_UNSUPPORTED;
    }

    pthread_mutex_lock(&ucm_cuda_install_lock);
    for (i = 0; i < UCM_CUDA_HOOK_LAST; ++i) {
        if (ucm_cuda_patches[i].real == NULL) {
            real = ucm_cuda_resolve(ucm_cuda_patches[i].symbol);
            ucm_cuda_patches[i].real = real;
            __atomic_store_n(&ucm_cuda_next[i], real, __ATOMIC_RELEASE);
        }
        if (ucm_cuda_patches[i].real != NULL) {
            ids[count]     = i;
            found[count++] = ucm_cuda_patches[i];
        }
    }

    if (count == 0) {
        status = UCS_ERR_UNSUPPORTED; /* no CUDA in the process (yet) */
        goto out;
    }
    (void)ucm_existing_alloc_source_add(ucm_cuda_report_existing);

    /* libucm's GOT engine: also follows dlopen for objects loaded later */
    status = ucm_got_patch_apply(found, count, &written);
    ucm_cuda_stats.slots_written += written;
    for (i = 0; (status == UCS_OK) && (i < count); ++i) {
        if ((found[i].foreign != NULL) &&
            (ucm_cuda_next[ids[i]] != found[i].foreign)) {
            ucm_debug("%s: chaining to another hooker at %p", found[i].symbol,
                      found[i].foreign);
            __atomic_store_n(&ucm_cuda_next[ids[i]], found[i].foreign,
                             __ATOMIC_RELEASE);
            ++ucm_cuda_stats.slots_foreign;
        }
    }

out:
    ucm_cuda_stats.entry_points = count;
    pthread_mutex_unlock(&ucm_cuda_install_lock);
    return status;
}

void ucm_cuda_hooks_stats(ucm_cuda_hooks_stats_t *stats)
{
    pthread_mutex_lock(&ucm_cuda_install_lock);
    *stats = ucm_cuda_stats;
    pthread_mutex_unlock(&ucm_cuda_install_lock);
}

static int ucm_cuda_hooks_disabled(void)
{
    static const char *const off[] = {"n", "no", "0", "off"};
    const char *value              = ucs_env_get("UCX_MEM_CUDA_HOOKS");
    unsigned i;

    if (value == NULL) {
        return 0;
    }
    for (i = 0; i < ucs_static_array_size(off); ++i) {
        if (strcasecmp(value, off[i]) == 0) {
            return 1;
        }
    }
    return 0;
}

static void UCS_F_CTOR ucm_cuda_hooks_init(void)
{
    if (!ucm_cuda_hooks_disabled()) {
        (void)ucm_cuda_hooks_install(); /* errors are logged */
    }
}
