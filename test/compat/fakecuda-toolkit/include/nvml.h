/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ======================================================================
 *  TEST-ONLY STAND-IN.  THIS IS NOT NVIDIA'S nvml.h AND NOT NVML.
 * ======================================================================
 * UCX 1.13.1's configure requires nvml.h and a libnvidia-ml with nvmlInit
 * for --with-cuda; libucm_cuda itself uses neither.  Only those names,
 * with NVML's public names, values and signatures (API facts).
 */
#ifndef UCMT_FAKECUDA_TOOLKIT_NVML_H_
#define UCMT_FAKECUDA_TOOLKIT_NVML_H_

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nvmlReturn_enum {
    NVML_SUCCESS                = 0,
    NVML_ERROR_UNINITIALIZED    = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED    = 3,
    NVML_ERROR_UNKNOWN          = 999
} nvmlReturn_t;

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);

#ifdef NVML_NO_UNVERSIONED_FUNC_DEFS
nvmlReturn_t nvmlInit(void); /* the legacy entry point */
#else
#define nvmlInit nvmlInit_v2
#endif

#ifdef __cplusplus
}
#endif

#endif
