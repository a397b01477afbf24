/*
 * Diagnostics of libucm_cuda (see ucm_cuda_log.h).
 */
#include "ucm_cuda_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void ucm_cuda_log_error(const char *fmt, ...)
{
    static const char prefix[] = "[ucm cuda] ";
    char line[256];
    size_t length;
    va_list ap;
    int ret;

    memcpy(line, prefix, sizeof(prefix) - 1);
    va_start(ap, fmt);
    ret = vsnprintf(line + sizeof(prefix) - 1,
                    sizeof(line) - sizeof(prefix), fmt, ap);
    va_end(ap);
    if (ret < 0) {
        return;
    }

    length         = strlen(line);
    line[length++] = '\n';
    if (write(STDERR_FILENO, line, length) < 0) {
        /* nowhere left to report it */
    }
}
