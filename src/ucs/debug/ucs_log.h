/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libucs log lines: "[ucs <component>] LEVEL message", one write(2) to
 * stderr, formatted on the stack.  No malloc and no lock, so it may be used
 * while holding locks that malloc/free or the memory hooks need.
 * Threshold: UCX_LOG_LEVEL (fatal, error, warn, diag, info, debug, trace;
 * default warn), read on first use; a malformed value is reported once.
 */
#ifndef UCS_LOG_H_
#define UCS_LOG_H_

#include <ucs/config/types.h>
#include <ucs/sys/compiler_def.h>

BEGIN_C_DECLS

/* Non-zero if messages of this level are printed. */
int ucs_log_is_enabled(ucs_log_level_t level);

void ucs_log_write(ucs_log_level_t level, const char *component,
                   const char *fmt, ...) UCS_F_PRINTF(3, 4);

#define ucs_log(_level, _comp, _fmt, ...)                                      \
    do {                                                                       \
        if (ucs_log_is_enabled(_level)) {                                      \
            ucs_log_write(_level, _comp, _fmt, ##__VA_ARGS__);                 \
        }                                                                      \
    } while (0)

#define ucs_log_error(_comp, _fmt, ...)                                        \
    ucs_log(UCS_LOG_LEVEL_ERROR, _comp, _fmt, ##__VA_ARGS__)
#define ucs_log_warn(_comp, _fmt, ...)                                         \
    ucs_log(UCS_LOG_LEVEL_WARN, _comp, _fmt, ##__VA_ARGS__)
#define ucs_log_debug(_comp, _fmt, ...)                                        \
    ucs_log(UCS_LOG_LEVEL_DEBUG, _comp, _fmt, ##__VA_ARGS__)

END_C_DECLS

#endif
