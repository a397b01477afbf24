/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.13.1's __ucm_log, ucm_get_page_size and ucm_library_init on
 * libucm's own log and system layer; see ucm/api/ucm_compat.h.
 */
#include "ucm_compat_int.h"

#include <ucm/api/ucm_compat.h>
#include <ucm/util/ucm_log.h>
#include <ucm/util/ucm_sys.h>

#include <stdarg.h>
#include <stdlib.h>

void __ucm_log(const char *file, unsigned line, const char *function,
               ucs_log_level_t level, const char *message, ...)
{
    va_list ap;

    (void)function; /* UCX does not print it either */
    va_start(ap, message);
    ucm_log_vwrite(level, (file != NULL) ? file : "(null)", (int)line,
                   (message != NULL) ? message : "(null)", ap);
    va_end(ap);
    if (level <= UCS_LOG_LEVEL_FATAL) {
        abort();
    }
}

size_t ucm_get_page_size(void)
{
    return ucm_sys_page_size();
}

void ucm_library_init(void)
{
    void (*own)(void) = UCM_COMPAT_CALLER_OWN(ucm_library_init);

    /* everything UCX does here ran in libucm's constructor; but another
     * libucm's own call is its own initialization */
    if (own != NULL) {
        own();
    }
}
