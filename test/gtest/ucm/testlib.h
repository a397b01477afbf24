/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Functions of the test libraries (see testlib.c), declared for one symbol
 * prefix: UCMT_TESTLIB_DECLARE(ucmt_linked_) declares ucmt_linked_munmap()...
 */
#ifndef UCMT_TESTLIB_H_
#define UCMT_TESTLIB_H_

#include <stddef.h>
#include <sys/types.h>

#define UCMT_CAT2(_a, _b)       _a##_b
#define UCMT_FN(_prefix, _name) UCMT_CAT2(_prefix, _name)

#ifdef __cplusplus
#define UCMT_EXTERN_C extern "C"
#else
#define UCMT_EXTERN_C
#endif

#define UCMT_TESTLIB_DECLARE(_p)                                               \
    UCMT_EXTERN_C void *UCMT_FN(_p, mmap)(void *addr, size_t len, int prot,    \
                                          int flags, int fd, off_t off);       \
    UCMT_EXTERN_C int UCMT_FN(_p, munmap)(void *addr, size_t len);             \
    UCMT_EXTERN_C void *UCMT_FN(_p, mremap)(void *addr, size_t old_len,        \
                                            size_t new_len, int flags,         \
                                            void *new_addr);                   \
    UCMT_EXTERN_C int UCMT_FN(_p, madvise)(void *addr, size_t len,             \
                                           int advice);                        \
    UCMT_EXTERN_C int UCMT_FN(_p, shmdt)(const void *addr);                    \
    UCMT_EXTERN_C void *UCMT_FN(_p, dlopen)(const char *path, int flags);      \
    UCMT_EXTERN_C int UCMT_FN(_p, munmap_via_table)(void *addr, size_t len);   \
    UCMT_EXTERN_C int UCMT_FN(_p, munmap_via_needed)(void *addr, size_t len);  \
    UCMT_EXTERN_C pid_t UCMT_FN(_p, getpgrp)(void);                            \
    UCMT_EXTERN_C pid_t UCMT_FN(_p, getsid)(pid_t pid);                        \
    UCMT_EXTERN_C const char *UCMT_FN(_p, name)(void)

#endif
