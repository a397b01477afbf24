/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reading the environment with secure_getenv() semantics.
 *
 * ucs_env_get(name) returns getenv(name), except in a secure-execution
 * process (the kernel set AT_SECURE: a setuid or setgid program, one with
 * file capabilities, or an LSM transition), where it returns NULL for every
 * name: such a process runs with the defaults and no variable can make
 * libucm, libucs or the IB transport log, print statistics or change how
 * they hook.  Every reader of UCX_*, UCM_* (and the malloc tunables libucm
 * predicts glibc's behaviour from) goes through it.
 *
 * Contract: no malloc, no locks, no stdio; safe in a library constructor,
 * in hook context and in a signal handler (getauxval() and getenv() only
 * read memory set up before main).  Header-only, so that every library and
 * tool that reads the environment has it without linking anything (libucm
 * hides the common library's names; some tools link no UCX library).
 * Tests make a process look secure by interposing getauxval() (a preloaded
 * test library, test/gtest/ucm/secure_auxv.c): AT_SECURE cannot be set
 * without privileges.
 */
#ifndef UCS_ENV_H_
#define UCS_ENV_H_

#include <stdlib.h>
#include <sys/auxv.h>

/* Non-zero in a secure-execution process. */
static inline int ucs_env_is_secure(void)
{
    return getauxval(AT_SECURE) != 0;
}

/* getenv(name), or NULL in a secure-execution process. */
static inline const char *ucs_env_get(const char *name)
{
    if (ucs_env_is_secure()) {
        return NULL;
    }
    return getenv(name);
}

#endif
