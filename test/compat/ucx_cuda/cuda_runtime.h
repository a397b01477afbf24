/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA runtime type UCX 1.13.1's cudamem.c uses (see cuda.h here). */
#ifndef UCX_CUDA_CHECK_CUDA_RUNTIME_H_
#define UCX_CUDA_CHECK_CUDA_RUNTIME_H_

typedef int cudaError_t;
#define cudaSuccess 0

#endif
