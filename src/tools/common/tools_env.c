/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One line per thing the environment degrades; see tools_env.h.
 */
#include "config.h"
#include "tools_env.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#ifdef HAVE_VALGRIND_VALGRIND_H
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif

#define TOOLS_ENV_CAP_IPC_LOCK  14
#define TOOLS_ENV_CAP_SYS_ADMIN 21
#define TOOLS_ENV_REASON_MAX    256

static const char *tools_env_labels[] = {[TOOLS_ENV_MEMLOCK]  = "memlock",
                                         [TOOLS_ENV_PAGEMAP]  = "pagemap",
                                         [TOOLS_ENV_VALGRIND] = "valgrind",
                                         [TOOLS_ENV_RDMA]     = "rdma",
                                         [TOOLS_ENV_GIVEN]    = "?"};

/* Effective capability bits from /proc/self/status (0 if unreadable). */
static uint64_t tools_env_caps(void)
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

/* Each check: 1 and the reason in buf if degraded, else 0. */
static int tools_env_memlock(size_t need, char *buf, size_t max)
{
    struct rlimit rl;
    int len;

    if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0) {
        snprintf(buf, max, "getrlimit(RLIMIT_MEMLOCK) failed: %s",
                 strerror(errno));
        return 1;
    }
    if ((rl.rlim_cur == RLIM_INFINITY) ||
        ((need != 0) && (rl.rlim_cur >= need)) ||
        (tools_env_caps() & (1ull << TOOLS_ENV_CAP_IPC_LOCK))) {
        return 0;
    }
    len = snprintf(buf, max, "RLIMIT_MEMLOCK is %llu KiB without CAP_IPC_LOCK",
                   (unsigned long long)rl.rlim_cur / 1024);
    if ((need != 0) && (len > 0) && ((size_t)len < max)) {
        snprintf(buf + len, max - len, ", this run pins about %zu KiB",
                 (need + 1023) / 1024);
    }
    return 1;
}

/* The pagemap entry of a touched page: present, but PFN 0 when hidden. */
static int tools_env_pagemap(char *buf, size_t max)
{
    size_t page    = (size_t)sysconf(_SC_PAGESIZE);
    uint64_t entry = 0;
    ssize_t n;
    char *p;
    int fd;

    p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
             -1, 0);
    if (p == MAP_FAILED) {
        snprintf(buf, max, "not checked (mmap: %s)", strerror(errno));
        return 1;
    }
    p[0] = 1;
    fd   = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(buf, max, "/proc/self/pagemap unreadable (%s)",
                 strerror(errno));
        munmap(p, page);
        return 1;
    }
    n = pread(fd, &entry, sizeof(entry),
              (off_t)((uintptr_t)p / page * sizeof(entry)));
    close(fd);
    munmap(p, page);
    if ((n == sizeof(entry)) && (entry & (1ull << 63)) &&
        ((entry & ((1ull << 55) - 1)) != 0)) {
        return 0;
    }
    snprintf(buf, max, "page frame numbers are hidden%s",
             (tools_env_caps() & (1ull << TOOLS_ENV_CAP_SYS_ADMIN))
                 ? ""
                 : " without CAP_SYS_ADMIN");
    return 1;
}

static int tools_env_rdma(char *buf, size_t max)
{
    DIR *dir = opendir("/sys/class/infiniband");
    struct dirent *entry;
    int found = 0;

    if (dir == NULL) {
        snprintf(buf, max, "no RDMA device (/sys/class/infiniband: %s)",
                 strerror(errno));
        return 1;
    }
    while (!found && ((entry = readdir(dir)) != NULL)) {
        found = (entry->d_name[0] != '.');
    }
    closedir(dir);
    if (found) {
        return 0;
    }
    snprintf(buf, max, "no RDMA device (/sys/class/infiniband is empty)");
    return 1;
}

static int tools_env_check(const tools_env_item_t *item, char *buf, size_t max)
{
    switch (item->check) {
    case TOOLS_ENV_MEMLOCK: return tools_env_memlock(item->need, buf, max);
    case TOOLS_ENV_PAGEMAP: return tools_env_pagemap(buf, max);
    case TOOLS_ENV_VALGRIND:
        snprintf(buf, max, "running under valgrind");
        return RUNNING_ON_VALGRIND ? 1 : 0;
    case TOOLS_ENV_RDMA: return tools_env_rdma(buf, max);
    case TOOLS_ENV_GIVEN:
        if (item->reason == NULL) {
            return 0;
        }
        snprintf(buf, max, "%s", item->reason);
        return 1;
    }
    return 0;
}

unsigned tools_env_report(FILE *stream, const char *prefix,
                          const tools_env_item_t *items, unsigned count)
{
    char reason[TOOLS_ENV_REASON_MAX];
    unsigned i, printed = 0;

    for (i = 0; i < count; ++i) {
        if (!tools_env_check(&items[i], reason, sizeof(reason))) {
            continue;
        }
        fprintf(stream, "%s%s: %s: %s\n", prefix,
                (items[i].label != NULL) ? items[i].label
                                         : tools_env_labels[items[i].check],
                reason, items[i].consequence);
        ++printed;
    }
    fflush(stream);
    return printed;
}
