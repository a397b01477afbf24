/*
 * One-line diagnostics of libucm_cuda.
 *
 * ucm_cuda_log_error(): writes "[ucm cuda] <message>" and a newline to
 * stderr with a single write(2).  Never allocates; callable from hook
 * context.  Messages longer than 255 bytes are truncated.
 */
#ifndef UCM_CUDA_LOG_H_
#define UCM_CUDA_LOG_H_

#include <ucs/sys/compiler_def.h>

void ucm_cuda_log_error(const char *fmt, ...) UCS_F_PRINTF(1, 2);

#endif
