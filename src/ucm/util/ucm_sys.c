/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Raw system calls; see ucm_sys.h.
 */
#include "ucm_sys.h"

#include <ucs/sys/compiler_def.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
UCS_F_HOT long ucm_sys_syscall6(long nr, long a1, long a2, long a3, long a4,
                                long a5, long a6)
{
    return ucm_sys_syscall6_inline(nr, a1, a2, a3, a4, a5, a6);
}
#else
/* Other CPUs: libc's syscall() is a thin wrapper that only touches errno. */
UCS_F_HOT long ucm_sys_syscall6(long nr, long a1, long a2, long a3, long a4,
                                long a5, long a6)
{
    int saved = errno;
    long ret  = syscall(nr, a1, a2, a3, a4, a5, a6);

    if (ret == -1) {
        ret = -errno;
    }
    errno = saved;
    return ret;
}
#endif

UCS_F_HOT long ucm_sys_to_libc(long ret)
{
    if (ucm_sys_is_err(ret)) {
        errno = (int)-ret;
        return -1;
    }
    return ret;
}

UCS_F_HOT long ucm_sys_mmap(void *addr, size_t len, int prot, int flags, int fd,
                            off_t off)
{
    return ucm_sys_syscall6(SYS_mmap, (long)addr, (long)len, prot, flags, fd,
                            (long)off);
}

UCS_F_HOT long ucm_sys_munmap(void *addr, size_t len)
{
    return ucm_sys_syscall6(SYS_munmap, (long)addr, (long)len, 0, 0, 0, 0);
}

UCS_F_HOT long ucm_sys_mremap(void *old, size_t old_size, size_t new_size,
                              int flags, void *new_addr)
{
    return ucm_sys_syscall6(SYS_mremap, (long)old, (long)old_size,
                            (long)new_size, flags, (long)new_addr, 0);
}

UCS_F_HOT long ucm_sys_madvise(void *addr, size_t len, int advice)
{
    return ucm_sys_syscall6(SYS_madvise, (long)addr, (long)len, advice, 0, 0,
                            0);
}

long ucm_sys_mprotect(void *addr, size_t len, int prot)
{
    return ucm_sys_syscall6(SYS_mprotect, (long)addr, (long)len, prot, 0, 0, 0);
}

long ucm_sys_shmat(int shmid, const void *addr, int flags)
{
    return ucm_sys_syscall6(SYS_shmat, shmid, (long)addr, flags, 0, 0, 0);
}

long ucm_sys_shmdt(const void *addr)
{
    return ucm_sys_syscall6(SYS_shmdt, (long)addr, 0, 0, 0, 0, 0);
}

long ucm_sys_shmctl(int shmid, int cmd, struct shmid_ds *buf)
{
    return ucm_sys_syscall6(SYS_shmctl, shmid, cmd, (long)buf, 0, 0, 0);
}

UCS_F_HOT long ucm_sys_brk(void *addr)
{
    return ucm_sys_syscall6(SYS_brk, (long)addr, 0, 0, 0, 0, 0);
}

long ucm_sys_open(const char *path, int flags)
{
    return ucm_sys_syscall6(SYS_openat, AT_FDCWD, (long)path, flags, 0, 0, 0);
}

long ucm_sys_read(int fd, void *buf, size_t len)
{
    return ucm_sys_syscall6(SYS_read, fd, (long)buf, (long)len, 0, 0, 0);
}

long ucm_sys_write(int fd, const void *buf, size_t len)
{
    return ucm_sys_syscall6(SYS_write, fd, (long)buf, (long)len, 0, 0, 0);
}

long ucm_sys_close(int fd)
{
    return ucm_sys_syscall6(SYS_close, fd, 0, 0, 0, 0, 0);
}

long ucm_sys_gettid(void)
{
    return ucm_sys_syscall6(SYS_gettid, 0, 0, 0, 0, 0, 0);
}

long ucm_sys_getpid(void)
{
    return ucm_sys_syscall6(SYS_getpid, 0, 0, 0, 0, 0, 0);
}

long ucm_sys_tgkill(long pid, long tid, int sig)
{
    return ucm_sys_syscall6(SYS_tgkill, pid, tid, sig, 0, 0, 0);
}

long ucm_sys_membarrier(int cmd, unsigned flags)
{
#ifdef SYS_membarrier
    return ucm_sys_syscall6(SYS_membarrier, cmd, flags, 0, 0, 0, 0);
#else
    return -ENOSYS;
#endif
}

long ucm_sys_sched_yield(void)
{
    return ucm_sys_syscall6(SYS_sched_yield, 0, 0, 0, 0, 0, 0);
}

long ucm_sys_wait_readable(int fd)
{
    struct pollfd pfd = {fd, POLLIN, 0};

    while (poll(&pfd, 1, -1) < 0) {
        if (errno != EINTR) {
            return -errno;
        }
    }
    return (pfd.revents & (POLLERR | POLLHUP | POLLNVAL)) ? -EBADF : 0;
}

size_t ucm_sys_page_size(void)
{
    static size_t page_size = 0;
    long value;

    if (page_size == 0) {
        value     = sysconf(_SC_PAGESIZE);
        page_size = (value > 0) ? (size_t)value : 4096;
    }
    return page_size;
}
