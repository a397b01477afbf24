/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Tiny module that ucm_bench_hooks dlopen()s and dlclose()s in a loop.  It
 * imports mmap/munmap so that reloc-mode hooks have GOT slots to patch in it,
 * like any real library that manages memory.
 */
#include <stddef.h>
#include <sys/mman.h>

int ucm_bench_dl_touch(size_t length);

int ucm_bench_dl_touch(size_t length)
{
    void *ptr = mmap(NULL, length, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (ptr == MAP_FAILED) {
        return -1;
    }
    return munmap(ptr, length);
}
