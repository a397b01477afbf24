/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A system call made by an inline syscall instruction: what code that
 * bypasses libc does (Go, static binaries, the loader).  Neither hook mode
 * sees it, unlike syscall(), which libucm hooks.  Returns what syscall()
 * would: the result, or -1 with errno set.  x86_64 only.
 */
#ifndef UCMT_RAWSYS_H_
#define UCMT_RAWSYS_H_

#include <errno.h>

static inline long ucmt_rawsys6(long nr, const long *a)
{
    register long r10 __asm__("r10") = a[3];
    register long r8 __asm__("r8")   = a[4];
    register long r9 __asm__("r9")   = a[5];
    long ret;

    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(nr), "D"(a[0]), "S"(a[1]), "d"(a[2]), "r"(r10),
                       "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    if ((unsigned long)ret > (unsigned long)-4096L) {
        errno = (int)-ret;
        return -1;
    }
    return ret;
}

/* Arguments as syscall() takes them (integers or pointers, up to six). */
template <typename... Args>
static inline long ucmt_rawsys(long nr, Args... args)
{
    const long a[6] = {(long)args...};

    return ucmt_rawsys6(nr, a);
}

#endif
