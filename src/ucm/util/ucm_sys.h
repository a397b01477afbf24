/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Raw system calls for libucm internals.
 *
 * Every OS primitive libucm needs goes through this header.  Contract: each
 * function issues exactly one system call, never raises memory events, never
 * allocates, never takes a lock and does not touch errno.  Errors come back
 * as in the kernel ABI: a negative errno value (for pointer-returning calls,
 * test with ucm_sys_is_err()).  All functions are async-signal-safe.
 */
#ifndef UCM_SYS_H_
#define UCM_SYS_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct shmid_ds;

long ucm_sys_syscall6(long nr, long a1, long a2, long a3, long a4, long a5,
                      long a6);

#if defined(__x86_64__)
/* The same, inlined into the caller (hot hooks: no call frame). */
static inline __attribute__((always_inline)) long
ucm_sys_syscall6_inline(long nr, long a1, long a2, long a3, long a4, long a5,
                        long a6)
{
    register long r10 __asm__("r10") = a4;
    register long r8 __asm__("r8")   = a5;
    register long r9 __asm__("r9")   = a6;
    long ret;

    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8),
                       "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}
#endif

static inline int ucm_sys_is_err(long ret)
{
    return (unsigned long)ret > (unsigned long)-4096l;
}

/* Convert a raw result to the libc convention (errno set, -1 / MAP_FAILED). */
long ucm_sys_to_libc(long ret);

long ucm_sys_mmap(void *addr, size_t len, int prot, int flags, int fd,
                  off_t off);
long ucm_sys_munmap(void *addr, size_t len);
long ucm_sys_mremap(void *old, size_t old_size, size_t new_size, int flags,
                    void *new_addr);
long ucm_sys_madvise(void *addr, size_t len, int advice);
long ucm_sys_mprotect(void *addr, size_t len, int prot);
long ucm_sys_shmat(int shmid, const void *addr, int flags);
long ucm_sys_shmdt(const void *addr);
long ucm_sys_shmctl(int shmid, int cmd, struct shmid_ds *buf);
long ucm_sys_brk(void *addr);
long ucm_sys_open(const char *path, int flags);
long ucm_sys_read(int fd, void *buf, size_t len);
long ucm_sys_write(int fd, const void *buf, size_t len);
long ucm_sys_close(int fd);
long ucm_sys_gettid(void);
long ucm_sys_getpid(void);
long ucm_sys_tgkill(long pid, long tid, int sig);
long ucm_sys_membarrier(int cmd, unsigned flags);
long ucm_sys_sched_yield(void);

/* Block until fd is readable (poll, EINTR retried): 0, or -errno; a
 * descriptor in error, hung up or closed is -EBADF.  For libucm's own
 * threads (monitor, watch), not hook context. */
long ucm_sys_wait_readable(int fd);

/* Page size (cached after the first call; 4096 until then). */
size_t ucm_sys_page_size(void);

#endif
