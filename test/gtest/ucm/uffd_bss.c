/* SPDX-License-Identifier: BSD-3-Clause */
/* Test module for test_uffd.cc: a large .bss registered, then dlclose()d. */
#include <stddef.h>

#define UCMT_BSS_SIZE (64 * 4096)

static char ucmt_uffd_bss[UCMT_BSS_SIZE];

char *ucmt_uffd_bss_get(size_t *size_p)
{
    *size_p = sizeof(ucmt_uffd_bss);
    return ucmt_uffd_bss;
}
