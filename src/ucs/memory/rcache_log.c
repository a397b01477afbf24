/*
 * Registration cache log lines: formatted on the stack and written with one
 * write(2), so they never allocate (usable with locks that free() needs).
 */
#include "rcache_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void ucs_rcache_log(const char *level, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    int len;
    ssize_t ret;

    len = snprintf(buf, sizeof(buf), "[rcache] %s: ", level);
    va_start(ap, fmt);
    vsnprintf(buf + len, sizeof(buf) - len - 1, fmt, ap);
    va_end(ap);
    len = strlen(buf);
    buf[len++] = '\n';
    ret = write(2, buf, len);
    (void)ret;
}
