/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Signal-safe logging; see ucm_log.h.
 */
#include "ucm_log.h"
#include "ucm_sys.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    char *buf;
    size_t max;
    size_t len;
} ucm_log_out_t;

static void ucm_log_putc(ucm_log_out_t *out, char c)
{
    if (out->len + 1 < out->max) {
        out->buf[out->len++] = c;
    }
}

/* Padding goes on the right when width is negative ('-' flag). */
static void ucm_log_puts(ucm_log_out_t *out, const char *s, int width, char pad)
{
    int len  = (int)strlen(s);
    int left = (width < 0);

    width = left ? -width : width;
    for (; !left && (width > len); --width) {
        ucm_log_putc(out, pad);
    }
    for (; *s != '\0'; ++s) {
        ucm_log_putc(out, *s);
    }
    for (; left && (width > len); --width) {
        ucm_log_putc(out, ' ');
    }
}

/* sign: 0, '-' or '+'; a negative width pads on the right with spaces. */
static void ucm_log_putnum(ucm_log_out_t *out, unsigned long long v,
                           unsigned base, char sign, int width, char pad)
{
    static const char digits[] = "0123456789abcdef";
    int left                   = (width < 0);
    char tmp[24];
    int n = 0, fill;

    width = left ? -width : width;
    pad   = left ? ' ' : pad;
    do {
        tmp[n++] = digits[v % base];
        v /= base;
    } while (v != 0);
    if ((sign != 0) && (pad == '0')) {
        ucm_log_putc(out, sign); /* before the zeros */
        --width;
    } else if (sign != 0) {
        tmp[n++] = sign;
    }
    fill = (width > n) ? (width - n) : 0;
    for (; !left && (fill > 0); --fill) {
        ucm_log_putc(out, pad);
    }
    while (n > 0) {
        ucm_log_putc(out, tmp[--n]);
    }
    for (; fill > 0; --fill) {
        ucm_log_putc(out, ' ');
    }
}

/* Text of an errno value without allocating (for %m). */
static const char *ucm_log_strerror(int eno, char *buf, size_t max)
{
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 32)
    const char *desc = strerrordesc_np(eno);

    if (desc != NULL) {
        return desc;
    }
#endif
    ucm_log_snprintf(buf, max, "errno %d", eno);
    return buf;
}

size_t ucm_log_vsnprintf(char *buf, size_t max, const char *fmt, va_list ap)
{
    ucm_log_out_t out = {buf, max, 0};
    int eno           = errno; /* for %m, before anything changes it */
    char pad, sign, errbuf[24];
    int width, lmod, left;
    unsigned long long u;
    const char *str;
    long long s;

    if (max == 0) {
        return 0;
    }
    for (; *fmt != '\0'; ++fmt) {
        if (*fmt != '%') {
            ucm_log_putc(&out, *fmt);
            continue;
        }
        ++fmt;
        pad   = ' ';
        sign  = 0;
        left  = 0;
        width = 0;
        lmod  = 0;
        for (;; ++fmt) { /* flags, in any order */
            if (*fmt == '0') {
                pad = '0';
            } else if (*fmt == '-') {
                left = 1;
            } else if (*fmt == '+') {
                sign = '+';
            } else {
                break;
            }
        }
        while ((*fmt >= '0') && (*fmt <= '9')) {
            width = (width * 10) + (*fmt++ - '0');
        }
        width = left ? -width : width;
        while ((*fmt == 'l') || (*fmt == 'z')) {
            ++lmod; /* "z" is "l" on LP64 */
            ++fmt;
        }
        switch (*fmt) {
        case 'd':
        case 'i':
            s = (lmod == 0)   ? va_arg(ap, int)
                : (lmod == 1) ? va_arg(ap, long)
                              : va_arg(ap, long long);
            u = (s < 0) ? (unsigned long long)(-(s + 1)) + 1
                        : (unsigned long long)s;
            ucm_log_putnum(&out, u, 10, (s < 0) ? '-' : sign, width, pad);
            break;
        case 'u':
        case 'x':
            u = (lmod == 0)   ? va_arg(ap, unsigned)
                : (lmod == 1) ? va_arg(ap, unsigned long)
                              : va_arg(ap, unsigned long long);
            ucm_log_putnum(&out, u, (*fmt == 'x') ? 16 : 10, 0, width, pad);
            break;
        case 'p':
            ucm_log_puts(&out, "0x", 0, ' ');
            ucm_log_putnum(&out, (uintptr_t)va_arg(ap, void *), 16, 0, width,
                           pad);
            break;
        case 's':
            str = va_arg(ap, const char *);
            ucm_log_puts(&out, (str != NULL) ? str : "(null)", width, ' ');
            break;
        case 'm':
            ucm_log_puts(&out, ucm_log_strerror(eno, errbuf, sizeof(errbuf)),
                         width, ' ');
            break;
        case 'c': ucm_log_putc(&out, (char)va_arg(ap, int)); break;
        case '%': ucm_log_putc(&out, '%'); break;
        case '\0': --fmt; break;
        default:
            ucm_log_putc(&out, '%');
            ucm_log_putc(&out, *fmt);
            break;
        }
    }
    buf[out.len] = '\0';
    return out.len;
}

size_t ucm_log_snprintf(char *buf, size_t max, const char *fmt, ...)
{
    va_list ap;
    size_t len;

    va_start(ap, fmt);
    len = ucm_log_vsnprintf(buf, max, fmt, ap);
    va_end(ap);
    return len;
}

void ucm_log_vwrite(ucs_log_level_t level, const char *file, int line,
                    const char *fmt, va_list ap)
{
    char buf[UCM_LOG_MAX];
    const char *base = strrchr(file, '/');
    const char *level_name;
    int eno = errno;
    size_t len;

    level_name =
        ((int)level < UCS_LOG_LEVEL_LAST && (int)level <= UCS_LOG_LEVEL_TRACE)
            ? ucm_log_level_names[level]
            : "TRACE";
    len   = ucm_log_snprintf(buf, sizeof(buf) - 1, "[%ld:%ld] %s:%d UCM %s ",
                             ucm_sys_getpid(), ucm_sys_gettid(),
                           (base != NULL) ? base + 1 : file, line, level_name);
    errno = eno; /* the message's %m */
    len += ucm_log_vsnprintf(buf + len, sizeof(buf) - 1 - len, fmt, ap);
    buf[len++] = '\n';
    ucm_sys_write(2, buf, len);
    errno = eno;
}

void ucm_log_write(ucs_log_level_t level, const char *file, int line,
                   const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    ucm_log_vwrite(level, file, line, fmt, ap);
    va_end(ap);
}
