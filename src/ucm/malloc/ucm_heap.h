/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Heap events in reloc mode (internal).
 *
 * glibc's malloc grows and shrinks its heaps with system calls made inside
 * libc (sbrk, mmap, munmap, madvise), which GOT/PLT patching cannot see.
 * Where those calls are not hooked at libc's entries (reloc mode, or a bistro
 * patch that fell back to reloc) and the process allocates with glibc's
 * malloc, libucm wraps the malloc family through the GOT/PLT slots of every
 * object (libc's own included) and reports, as VM_MAPPED / VM_UNMAPPED, what
 * each call did to the heap:
 *   - blocks served by mmap: mapped when returned, unmapped before free or a
 *     realloc that may move them;
 *   - the main heap (the program break): every change of the break, found by
 *     comparing it with the last value reported;
 *   - the heaps of the other arenas: their size in the heap header, compared
 *     with the last value reported for that heap; a heap released whole is
 *     reported unmapped;
 *   - a release that will trim a heap (the freed chunk borders the heap's
 *     free end, which then exceeds glibc's trim threshold and top pad, both
 *     mirrored from mallopt() and the tunables) reports the free end before
 *     the call; any other change is reported right after the call;
 *   - malloc_trim(): it may discard free pages anywhere in the heaps, so every
 *     known heap range is reported unmapped before it runs.
 * Blocks of another allocator (jemalloc, tcmalloc, a sanitizer's) are never
 * looked at: then the wrappers are not installed, since such allocators call
 * mmap/munmap through their own GOT slots, which the mmap hooks see.
 *
 * Hook context: no malloc, no locks; errno is that of the wrapped call (a
 * handler that changes it is undone).
 */
#ifndef UCM_HEAP_H_
#define UCM_HEAP_H_

#include <stddef.h>

/* Non-zero if the malloc that the program's symbols resolve to is glibc's
 * (the only one whose heap layout the wrappers read).  Not hook context. */
int ucm_heap_is_glibc_malloc(void);

/* Prepare the tracker (the current break becomes the reported one).  Called
 * once, by the installer, before the wrappers are patched in. */
void ucm_heap_init(void);

/* The sbrk/brk hooks report a break change themselves: the current break is
 * noted as reported, so that the wrappers do not report it again.
 * Hook-context safe. */
void ucm_heap_brk_reported(void);

/* glibc's trim parameters as this libucm knows them (mallopt's numbers:
 * M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD, M_MMAP_MAX): read from the
 * tunables and MALLOC_*_ variables once (params_init, idempotent, not hook
 * context), then followed through mallopt() and, in reloc mode, glibc's
 * dynamic thresholds.  note() records a value glibc accepted; get() returns
 * 0 for a parameter it does not follow.  Hook-context safe. */
void ucm_heap_params_init(void);
void ucm_heap_param_note(int param, size_t value);
size_t ucm_heap_param_get(int param);

/* libucm itself (ucm_malloc_state_reset) has set glibc's thresholds: where
 * the wrappers are installed, glibc's dynamic thresholds are emulated from
 * now on while UCX_MEM_DYNAMIC_MMAP_THRESH is yes, until the program calls
 * mallopt().  Not hook context. */
void ucm_heap_dyn_thresh_take_over(void);

/* The wrappers (patched into GOT/PLT slots). */
void *ucm_heap_malloc(size_t size);
void *ucm_heap_calloc(size_t nmemb, size_t size);
void *ucm_heap_realloc(void *ptr, size_t size);
void *ucm_heap_reallocarray(void *ptr, size_t nmemb, size_t size);
void ucm_heap_free(void *ptr);
void *ucm_heap_memalign(size_t alignment, size_t size);
int ucm_heap_posix_memalign(void **memptr, size_t alignment, size_t size);
void *ucm_heap_aligned_alloc(size_t alignment, size_t size);
void *ucm_heap_valloc(size_t size);
void *ucm_heap_pvalloc(size_t size);
int ucm_heap_malloc_trim(size_t pad);
int ucm_heap_mallopt(int param, int value);

#endif
