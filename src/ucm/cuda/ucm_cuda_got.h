/*
 * Small GOT/PLT patcher of libucm_cuda: writes hook addresses into the
 * GOT slots (JUMP_SLOT and GLOB_DAT relocations) that name a given symbol,
 * in every object loaded in the process (main namespace and dlmopen ones,
 * as dl_iterate_phdr reports them) except the patcher's own.
 *
 * A slot is written only when it holds the real function, or a lazy-binding
 * PLT address inside its own object; slots holding our hook are left (so
 * applying twice is harmless) and so are slots holding a third party's
 * function (another hooker keeps working, counted as foreign).  RELRO pages
 * are made writable for the single aligned 8-byte store and read-only again
 * right after.
 *
 * Not thread-safe against itself (the caller serializes calls); safe against
 * threads calling through the slots (each store is atomic).  Not for hook
 * context.  x86_64 and aarch64 only (UCS_ERR_UNSUPPORTED elsewhere).
 */
#ifndef UCM_CUDA_GOT_H_
#define UCM_CUDA_GOT_H_

#include <ucs/type/status.h>

typedef struct ucm_cuda_got_patch {
    const char *symbol;  /* e.g. "cudaMalloc" */
    void       *hook;    /* written into the slots */
    void       *real;    /* the real function; NULL: patch nothing */
} ucm_cuda_got_patch_t;

typedef struct ucm_cuda_got_result {
    unsigned long written;   /* slots written by this call */
    unsigned long hooked;    /* slots found already holding the hook */
    unsigned long foreign;   /* slots left to another hooker */
} ucm_cuda_got_result_t;

/*
 * Apply 'count' patches to every loaded object but the one whose loaded
 * segments contain 'skip_addr'.  Counts are added to *result.
 * UCS_ERR_IO_ERROR when a RELRO page could not be made writable (logged; the
 * other slots are still patched), UCS_ERR_UNSUPPORTED on other
 * architectures.
 */
ucs_status_t ucm_cuda_got_apply(const ucm_cuda_got_patch_t *patches,
                                unsigned count, const void *skip_addr,
                                ucm_cuda_got_result_t *result);

#endif
