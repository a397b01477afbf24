/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One line per thing the environment degrades; see ucm_info_env.h.
 */
#include "ucm_info_env.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#define UCM_INFO_CAP_IPC_LOCK  14
#define UCM_INFO_CAP_SYS_ADMIN 21

/* Effective capability bits from /proc/self/status (0 if unreadable). */
static uint64_t ucm_info_env_caps(void)
{
    char line[256];
    uint64_t caps = 0;
    FILE *f       = fopen("/proc/self/status", "r");

    if (f == NULL) {
        return 0;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "CapEff:", 7) == 0) {
            caps = strtoull(line + 7, NULL, 16);
            break;
        }
    }
    fclose(f);
    return caps;
}

static int ucm_info_env_memlock(uint64_t caps)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0) {
        printf("#   memlock: getrlimit(RLIMIT_MEMLOCK) failed: %m\n");
        return 1;
    }
    if ((rl.rlim_cur == RLIM_INFINITY) ||
        (caps & (1ull << UCM_INFO_CAP_IPC_LOCK))) {
        return 0;
    }
    printf("#   memlock: RLIMIT_MEMLOCK is %llu KiB without CAP_IPC_LOCK: no "
           "more is registered at once, the cache evicts unused regions "
           "beyond it (ulimit -l)\n",
           (unsigned long long)rl.rlim_cur / 1024);
    return 1;
}

/* The pagemap entry of a touched page: present, but PFN 0 when hidden. */
static int ucm_info_env_pagemap(uint64_t caps)
{
    size_t page    = (size_t)sysconf(_SC_PAGESIZE);
    uint64_t entry = 0;
    ssize_t n;
    char *p;
    int fd;

    p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
             -1, 0);
    if (p == MAP_FAILED) {
        printf("#   pagemap: not checked (mmap: %m)\n");
        return 1;
    }
    p[0] = 1;
    fd   = open("/proc/self/pagemap", O_RDONLY);
    if (fd < 0) {
        printf("#   pagemap: /proc/self/pagemap unreadable (%m): "
               "UCX_RCACHE_CHECK_PFN checks nothing\n");
        munmap(p, page);
        return 1;
    }
    n = pread(fd, &entry, sizeof(entry),
              (off_t)((uintptr_t)p / page * sizeof(entry)));
    close(fd);
    munmap(p, page);
    if ((n == sizeof(entry)) && (entry & (1ull << 63)) &&
        (entry & ((1ull << 55) - 1)) != 0) {
        return 0;
    }
    printf("#   pagemap: page frame numbers are hidden%s: "
           "UCX_RCACHE_CHECK_PFN checks nothing\n",
           (caps & (1ull << UCM_INFO_CAP_SYS_ADMIN))
               ? ""
               : " without CAP_SYS_ADMIN");
    return 1;
}

int ucm_info_env_print(int uffd_active, const char *uffd_reason)
{
    uint64_t caps = ucm_info_env_caps();
    int count     = 0;

    printf("#\n# Degraded by this environment\n");
    count += ucm_info_env_memlock(caps);
    count += ucm_info_env_pagemap(caps);
    if (!uffd_active) {
        printf("#   userfaultfd: %s: unmaps by raw system calls, the loader "
               "and static code reach no registration cache\n",
               uffd_reason);
        ++count;
    }
    if (count == 0) {
        printf("#   nothing\n");
    }
    return count;
}
