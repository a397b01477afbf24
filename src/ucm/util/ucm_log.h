/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libucm logging: one line per message, written with a single write(2) to
 * stderr.  No malloc, no stdio, no lock: async-signal-safe, usable in hook
 * context.  Level threshold: ucm_global_opts.log_level (UCX_MEM_LOG_LEVEL).
 *
 * ucm_log_write is exported for libucm's in-tree modules (libucm_cuda).
 * Supported conversions: %s %c %d %i %u %x %p %m (errno's text) %% with the
 * flags '0', '-', '+', a width and the l, ll and z length modifiers (those
 * of UCX's libucm, whose modules log through __ucm_log).  Messages are
 * truncated at 512 bytes.  errno is left unchanged.
 */
#ifndef UCM_LOG_H_
#define UCM_LOG_H_

#include <ucm/api/ucm.h>
#include <stdarg.h>

#define UCM_LOG_MAX 512

#define ucm_log(_level, _fmt, ...)                                             \
    do {                                                                       \
        if ((int)(_level) <= (int)ucm_global_opts.log_level) {                 \
            ucm_log_write(_level, __FILE__, __LINE__, _fmt, ##__VA_ARGS__);    \
        }                                                                      \
    } while (0)

#define ucm_fatal(_fmt, ...) ucm_log(UCS_LOG_LEVEL_FATAL, _fmt, ##__VA_ARGS__)
#define ucm_error(_fmt, ...) ucm_log(UCS_LOG_LEVEL_ERROR, _fmt, ##__VA_ARGS__)
#define ucm_warn(_fmt, ...)  ucm_log(UCS_LOG_LEVEL_WARN, _fmt, ##__VA_ARGS__)
#define ucm_diag(_fmt, ...)  ucm_log(UCS_LOG_LEVEL_DIAG, _fmt, ##__VA_ARGS__)
#define ucm_info(_fmt, ...)  ucm_log(UCS_LOG_LEVEL_INFO, _fmt, ##__VA_ARGS__)
#define ucm_debug(_fmt, ...) ucm_log(UCS_LOG_LEVEL_DEBUG, _fmt, ##__VA_ARGS__)
#define ucm_trace(_fmt, ...) ucm_log(UCS_LOG_LEVEL_TRACE, _fmt, ##__VA_ARGS__)

void ucm_log_write(ucs_log_level_t level, const char *file, int line,
                   const char *fmt, ...) UCS_F_PRINTF(4, 5);

/* The same with a va_list (__ucm_log). */
void ucm_log_vwrite(ucs_log_level_t level, const char *file, int line,
                    const char *fmt, va_list ap);

/* Format into buf (always NUL-terminated when max > 0); returns the length
 * written. */
size_t ucm_log_vsnprintf(char *buf, size_t max, const char *fmt, va_list ap);
size_t ucm_log_snprintf(char *buf, size_t max, const char *fmt, ...)
    UCS_F_PRINTF(3, 4);

#endif
