/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The replacement of memfd_create(): with the file watch on, the new
 * descriptor is made one that the kernel notifies the watch through
 * (ucm_filewatch_reopen_memfd() in ucm_filewatch.h).  Hook context.
 */
#include "ucm_mmap.h"

#include "ucm_filewatch.h"

#include <ucm/util/ucm_sys.h>

#include <sys/syscall.h>

int ucm_memfd_create(const char *name, unsigned flags)
{
    int fd = UCM_HOOK_CALL_ORIG(UCM_HOOK_MEMFD_CREATE, ucm_memfd_create_func_t,
                                name, flags);

    if ((fd >= 0) && __atomic_load_n(&ucm_filewatch_on, __ATOMIC_RELAXED)) {
        ucm_filewatch_reopen_memfd(fd, flags);
    }
    return fd;
}

int ucm_memfd_create_raw(const char *name, unsigned flags)
{
    return (int)ucm_sys_to_libc(
        ucm_sys_syscall6(SYS_memfd_create, (long)name, flags, 0, 0, 0, 0));
}
