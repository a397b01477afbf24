/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test-only preload: the process looks like a secure-execution one.
 *
 * The kernel sets AT_SECURE for setuid/setgid programs and file
 * capabilities, which an unprivileged test cannot arrange.  Preloaded
 * ahead of libc, this getauxval() answers 1 for AT_SECURE (what
 * ucs_env_get() asks) and glibc's own answer for everything else.  glibc
 * itself is not fooled (it keeps its own flag), so the variables are still
 * in the environment: only our readers' behaviour changes.
 * Used by test_secure_env.cc only; never installed.
 */
#include <sys/auxv.h>

extern unsigned long __getauxval(unsigned long type);

unsigned long getauxval(unsigned long type)
{
    return (type == AT_SECURE) ? 1 : __getauxval(type);
}
