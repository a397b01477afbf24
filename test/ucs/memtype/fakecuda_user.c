/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * TEST-ONLY module, dlopen()ed by gtest_memtype_cuda after the CUDA hooks
 * are installed: it calls the CUDA names (served by the fake, not CUDA)
 * through its own GOT.  Built with -fno-plt (GLOB_DAT slots instead of
 * JUMP_SLOT) and full RELRO (the slots are read-only after loading), the
 * harder case for the GOT patcher.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>

int ucmt_fakecuda_user_alloc(void **address_p, size_t size)
{
    return cudaMalloc(address_p, size) == cudaSuccess;
}

int ucmt_fakecuda_user_free(void *address)
{
    return cuMemFree((CUdeviceptr)address) == CUDA_SUCCESS;
}
