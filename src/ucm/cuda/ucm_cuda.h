/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libucm_cuda: memory-type hooks for CUDA.  Reports every allocation and
 * release made through the CUDA driver and runtime allocation entry points
 * as libucm's UCM_EVENT_MEM_TYPE_ALLOC (after a successful allocation, type
 * UCS_MEMORY_TYPE_CUDA, or UCS_MEMORY_TYPE_CUDA_MANAGED for the managed
 * allocators) and UCM_EVENT_MEM_TYPE_FREE (before the release, with the size
 * recorded at allocation; releases of memory allocated before the hooks
 * were installed are not reported).  A handler set later with
 * UCM_EVENT_FLAG_EXISTING_ALLOC gets a MEM_TYPE_ALLOC for every live
 * allocation recorded so far (ucm_existing_alloc_source_add()).
 *
 * Hooked entry points (the symbols applications link to with CUDA >= 11
 * headers): cuMemAlloc_v2, cuMemAllocManaged, cuMemAllocPitch_v2,
 * cuMemAllocAsync, cuMemFree_v2, cuMemFreeAsync, cudaMalloc,
 * cudaMallocManaged, cudaMallocPitch, cudaMallocAsync, cudaFree,
 * cudaFreeAsync, and the per-thread default stream variants
 * cuMemAllocAsync_ptsz, cuMemFreeAsync_ptsz, cudaMallocAsync_ptsz and
 * cudaFreeAsync_ptsz.  The hooks patch the GOT/PLT slots naming them in every
 * loaded object (not the entry of the functions themselves), and call the
 * real function found with dlsym(RTLD_NEXT), else dlsym(RTLD_DEFAULT).
 * Not hooked: calls through pointers from cuGetProcAddress, a statically
 * linked CUDA runtime, the pre-v2 driver symbols, entry points defined only
 * in objects loaded with RTLD_LOCAL (invisible to both dlsym lookups),
 * and a hooker that patched a slot after us.  A slot that already points to
 * another hooker's function is taken and our hook calls that hooker
 * (chained), so both keep seeing the calls.
 *
 * Installation: the constructor of libucm_cuda installs the hooks when the
 * library is loaded (linked, LD_PRELOAD or dlopen), unless UCX_MEM_CUDA_HOOKS
 * is set to "n", "no", "0" or "off".  Patching uses libucm's GOT engine
 * (ucm_got_patch_apply), so objects loaded later with dlopen/dlmopen are
 * patched when they are loaded.  The library is never unloaded
 * (hooks point into it).
 */
#ifndef UCM_CUDA_H_
#define UCM_CUDA_H_

#include <ucs/sys/compiler_def.h>
#include <ucs/type/status.h>

BEGIN_C_DECLS

/*
 * Patch every loaded object that is not patched yet.  Idempotent and
 * thread-safe; not callable from hook context.  Returns UCS_OK when at
 * least one CUDA entry point exists in the process (its slots, if any, are
 * patched); UCS_ERR_UNSUPPORTED when none does (nothing to hook yet: call it
 * again after loading CUDA), or when events are disabled
 * (UCX_MEM_EVENTS=n); UCS_ERR_EXCEEDS_LIMIT when libucm's patch table is
 * full (logged).  A GOT page that cannot be made writable is logged and
 * skipped; the other slots are patched.
 */
ucs_status_t ucm_cuda_hooks_install(void);

/* Totals of the GOT slots written and of the entry points whose slots held
 * another hooker (our hook calls that hooker: chained). */
typedef struct ucm_cuda_hooks_stats {
    unsigned long slots_written;
    unsigned long slots_foreign;
    unsigned entry_points; /* CUDA entry points found in the process */
} ucm_cuda_hooks_stats_t;

/* Fill *stats (for tests and the info tool). */
void ucm_cuda_hooks_stats(ucm_cuda_hooks_stats_t *stats);

END_C_DECLS

#endif
