/*
 * One-line diagnostics of the memory-type cache and its CUDA hooks.
 *
 * ucs_memtype_log_error(): writes "[ucs memtype] <message>" and a newline to
 * stderr with a single write(2), so that lines of concurrent threads never
 * interleave.  Never allocates; callable from hook context.  Messages longer
 * than 255 bytes are truncated.
 */
#ifndef UCS_MEMTYPE_LOG_H_
#define UCS_MEMTYPE_LOG_H_

#include <ucs/sys/compiler_def.h>

BEGIN_C_DECLS

void ucs_memtype_log_error(const char *fmt, ...) UCS_F_PRINTF(1, 2);

END_C_DECLS

#endif
