/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * TEST-ONLY fake CUDA (not CUDA): helpers shared by the files of
 * libucmt_fakecuda, hidden from other objects.  The exported CUDA names call
 * these, never each other, so that one call is one hooked call.
 */
#ifndef UCMT_FAKECUDA_INT_H_
#define UCMT_FAKECUDA_INT_H_

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#define UCMT_FAKECUDA_HIDDEN __attribute__((visibility("hidden")))

UCMT_FAKECUDA_HIDDEN CUresult ucmt_fakecuda_cu_alloc(CUdeviceptr *dptr,
                                                     size_t bytesize);
UCMT_FAKECUDA_HIDDEN CUresult ucmt_fakecuda_cu_release(CUdeviceptr dptr);
UCMT_FAKECUDA_HIDDEN cudaError_t ucmt_fakecuda_rt_alloc(void **devPtr,
                                                        size_t size);
UCMT_FAKECUDA_HIDDEN cudaError_t ucmt_fakecuda_rt_release(void *devPtr);

/* The live allocation that holds address: 0 with its base and size, or -1
 * (outputs untouched) if there is none. */
UCMT_FAKECUDA_HIDDEN int ucmt_fakecuda_range(uintptr_t address,
                                             uintptr_t *base_p, size_t *size_p);

#endif
