/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A tiny library that calls the memory functions through its own GOT/PLT.
 * Built several times with a different symbol prefix (UCMT_PREFIX):
 * linked to the test binary, as a static archive inside it, and as modules
 * dlopen()ed by the tests after the hooks are installed.
 */
#define _GNU_SOURCE
#include "testlib.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#ifndef UCMT_PREFIX
#define UCMT_PREFIX ucmt_lib_
#endif
#ifndef UCMT_LIB_NAME
#define UCMT_LIB_NAME "unnamed"
#endif

UCMT_TESTLIB_DECLARE(UCMT_PREFIX);

void *UCMT_FN(UCMT_PREFIX, mmap)(void *addr, size_t len, int prot, int flags,
                                 int fd, off_t off)
{
    return mmap(addr, len, prot, flags, fd, off);
}

int UCMT_FN(UCMT_PREFIX, munmap)(void *addr, size_t len)
{
    return munmap(addr, len);
}

void *UCMT_FN(UCMT_PREFIX, mremap)(void *addr, size_t old_len, size_t new_len,
                                   int flags, void *new_addr)
{
    return mremap(addr, old_len, new_len, flags, new_addr);
}

int UCMT_FN(UCMT_PREFIX, madvise)(void *addr, size_t len, int advice)
{
    return madvise(addr, len, advice);
}

int UCMT_FN(UCMT_PREFIX, shmdt)(const void *addr)
{
    return shmdt(addr);
}

void *UCMT_FN(UCMT_PREFIX, dlopen)(const char *path, int flags)
{
    return dlopen(path, flags);
}

/* munmap through a function pointer stored in initialized data: the
 * dynamic linker fills it with an absolute relocation (R_X86_64_64), not a
 * GOT/PLT slot. */
int (*UCMT_FN(UCMT_PREFIX, munmap_table)[1])(void *, size_t) = {munmap};

int UCMT_FN(UCMT_PREFIX, munmap_via_table)(void *addr, size_t len)
{
    int (*volatile * entry)(void *, size_t) =
        &UCMT_FN(UCMT_PREFIX, munmap_table)[0];

    return (*entry)(addr, len);
}

#ifdef UCMT_NEEDED_PREFIX
/* A library that depends (DT_NEEDED) on another test library: calls it. */
UCMT_TESTLIB_DECLARE(UCMT_NEEDED_PREFIX);

int UCMT_FN(UCMT_PREFIX, munmap_via_needed)(void *addr, size_t len)
{
    return UCMT_FN(UCMT_NEEDED_PREFIX, munmap)(addr, len);
}
#endif

/* Functions libucm never hooks, called through this library's GOT/PLT
 * (for ucm_reloc_modify). */
pid_t UCMT_FN(UCMT_PREFIX, getpgrp)(void)
{
    return getpgrp();
}

pid_t UCMT_FN(UCMT_PREFIX, getsid)(pid_t pid)
{
    return getsid(pid);
}

const char *UCMT_FN(UCMT_PREFIX, name)(void)
{
    return UCMT_LIB_NAME;
}
