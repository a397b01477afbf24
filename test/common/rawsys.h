/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A system call made by an inline syscall instruction, for tests and
 * benchmarks that need a call no hook sees: what code that bypasses libc
 * does (Go, static binaries, the loader).  libucm hooks libc's syscall()
 * function in both hook modes, so syscall(SYS_munmap, ...) is a HOOKED
 * call; use these instead.  Returns what syscall() would: the result, or
 * -1 with errno set.  x86_64 only.  C and C++.
 */
#ifndef UCMT_COMMON_RAWSYS_H_
#define UCMT_COMMON_RAWSYS_H_

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

#ifdef __cplusplus
/* Arguments as syscall() takes them (integers or pointers, up to six). */
template <typename... Args>
static inline long ucmt_rawsys(long nr, Args... args)
{
    const long a[6] = {(long)args...};

    return ucmt_rawsys6(nr, a);
}
#else
/* C: arguments cast to long by the caller, up to six:
 * UCMT_RAWSYS(SYS_munmap, (long)addr, (long)len) */
#define UCMT_RAWSYS(_nr, ...) ucmt_rawsys6((_nr), (const long[6]){__VA_ARGS__})
#endif

#endif
