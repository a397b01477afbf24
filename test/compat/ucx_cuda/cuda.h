/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The few CUDA driver declarations UCX 1.13.1's src/ucm/cuda/cudamem.c uses,
 * for building that module without the CUDA toolkit (the device's libcuda
 * provides the functions at run time).  Not NVIDIA's header.
 */
#ifndef UCX_CUDA_CHECK_CUDA_H_
#define UCX_CUDA_CHECK_CUDA_H_

#include <stddef.h>

typedef unsigned long long CUdeviceptr; /* 64-bit, as CUdeviceptr_v2 */
typedef int CUresult;
#define CUDA_SUCCESS 0

/* cuda.h maps the name to the _v2 entry point */
#define cuMemGetAddressRange cuMemGetAddressRange_v2
CUresult cuMemGetAddressRange(CUdeviceptr *base, size_t *size, CUdeviceptr p);

#endif
