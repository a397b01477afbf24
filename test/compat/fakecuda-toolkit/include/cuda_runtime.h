/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ======================================================================
 *  TEST-ONLY STAND-IN.  THIS IS NOT NVIDIA'S cuda_runtime.h, NOT CUDA.
 * ======================================================================
 * The real header adds C++ helpers on top of the runtime API; the C
 * sources built against this stand-in need only the API itself.
 */
#ifndef UCMT_FAKECUDA_TOOLKIT_CUDA_RUNTIME_H_
#define UCMT_FAKECUDA_TOOLKIT_CUDA_RUNTIME_H_

#include <cuda.h>
#include <cuda_runtime_api.h>

#endif
