/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Configuration value types shared by libucm and libucs (UCX 1.13 values).
 */
#ifndef UCS_CONFIG_TYPES_H_
#define UCS_CONFIG_TYPES_H_

#include <ucs/sys/compiler_def.h>

BEGIN_C_DECLS

typedef enum {
    UCS_LOG_LEVEL_FATAL,
    UCS_LOG_LEVEL_ERROR,
    UCS_LOG_LEVEL_WARN,
    UCS_LOG_LEVEL_DIAG,
    UCS_LOG_LEVEL_INFO,
    UCS_LOG_LEVEL_DEBUG,
    UCS_LOG_LEVEL_TRACE,
    UCS_LOG_LEVEL_TRACE_REQ,
    UCS_LOG_LEVEL_TRACE_DATA,
    UCS_LOG_LEVEL_TRACE_ASYNC,
    UCS_LOG_LEVEL_TRACE_FUNC,
    UCS_LOG_LEVEL_TRACE_POLL,
    UCS_LOG_LEVEL_LAST,
    UCS_LOG_LEVEL_PRINT
} ucs_log_level_t;

END_C_DECLS

#endif
