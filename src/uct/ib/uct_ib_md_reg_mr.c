/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ibv_reg_mr for the rcache and direct methods:
 *  - above UCX_IB_REG_MT_THRESH the pages are first faulted in by
 *    reg_mt_threads threads (MADV_POPULATE_WRITE/READ on one slice each), so
 *    that the page allocation and zeroing, the bulk of registering fresh
 *    memory, runs in parallel; the single ibv_reg_mr then only pins present
 *    pages and the whole range keeps one lkey/rkey (plain verbs has no
 *    multi-MR key: UCX's parallel chunk registration needs mlx5 indirect
 *    keys);
 *  - a failure is diagnosed: RLIMIT_MEMLOCK (and CAP_IPC_LOCK), a hole in
 *    the range, or a mapping without the protection the access needs.
 */
#include "uct_ib_int.h"

#include <ucm/api/ucm.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define UCT_IB_CAP_IPC_LOCK 14

typedef struct {
    uintptr_t start;
    size_t length;
    int advice;
    int err;
} uct_ib_prefault_slice_t;

static void *uct_ib_prefault_thread(void *arg)
{
    uct_ib_prefault_slice_t *slice = arg;

    slice->err =
        (madvise((void *)slice->start, slice->length, slice->advice) == 0)
            ? 0
            : errno;
    return NULL;
}

ucs_status_t uct_ib_md_prefault_mt(void *address, size_t length, int write,
                                   unsigned nthreads)
{
    size_t page     = sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)address & ~(page - 1);
    uintptr_t end   = ((uintptr_t)address + length + page - 1) & ~(page - 1);
    size_t slice_len;
    uct_ib_prefault_slice_t slices[16];
    pthread_t threads[16];
    int started[16] = {0};
    unsigned i;

    nthreads  = ucs_max(1u, ucs_min(nthreads, 16u));
    slice_len = (((end - start) / nthreads) + page - 1) & ~(page - 1);
    for (i = 0; i < nthreads; ++i) {
        slices[i].start  = ucs_min(start + i * slice_len, end);
        slices[i].length = ucs_min(slice_len, end - slices[i].start);
        slices[i].advice = write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ;
        slices[i].err    = 0;
    }
    /* slice 0 in this thread, the others in helpers */
    for (i = 1; i < nthreads; ++i) {
        if (slices[i].length != 0) {
            started[i] =
                pthread_create(&threads[i], NULL, uct_ib_prefault_thread,
                               &slices[i]) == 0;
        }
    }
    uct_ib_prefault_thread(&slices[0]);
    for (i = 1; i < nthreads; ++i) {
        if (started[i]) {
            pthread_join(threads[i], NULL);
        } else if (slices[i].length != 0) {
            uct_ib_prefault_thread(&slices[i]);
        }
    }
    for (i = 0; i < nthreads; ++i) {
        if (slices[i].err == EINVAL) {
            return UCS_ERR_UNSUPPORTED; /* kernel < 5.14 */
        } else if (slices[i].err != 0) {
            return UCS_ERR_INVALID_ADDR; /* ibv_reg_mr will say why */
        }
    }
    return UCS_OK;
}

ucs_status_t uct_ib_md_reg_mr(uct_ib_md_t *md, void *address, size_t length,
                              int verbs_access, int silent,
                              struct ibv_mr **mr_p)
{
    int write =
        !!(verbs_access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
    ucs_status_t status;
    struct ibv_mr *mr;
    int err;

    if ((length >= md->config.reg_mt_thresh) && (md->attr.reg_mt_threads > 1)) {
        status = uct_ib_md_prefault_mt(address, length, write,
                                       md->attr.reg_mt_threads);
        uct_ib_debug("%s: prefault of %p length %zu with %u threads: %s",
                     md->name, address, length, md->attr.reg_mt_threads,
                     ucs_status_string(status));
    }
    mr = ibv_reg_mr(md->pd, address, length, verbs_access);
    if (mr == NULL) {
        err = errno;
        if (silent) {
            return UCS_ERR_IO_ERROR;
        }
        return uct_ib_md_reg_diagnose(md, address, length, verbs_access, err);
    }
    *mr_p = mr;
    return UCS_OK;
}

static int uct_ib_has_cap_ipc_lock(void)
{
    unsigned long long caps = 0;
    char line[128];
    FILE *f;
    int found = 0;

    f = fopen("/proc/self/status", "r");
    if (f == NULL) {
        return geteuid() == 0;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "CapEff: %llx", &caps) == 1) {
            found = 1;
            break;
        }
    }
    fclose(f);
    return found ? !!(caps & (1ull << UCT_IB_CAP_IPC_LOCK)) : (geteuid() == 0);
}

typedef struct {
    uintptr_t cur, end;
    int prot; /* intersection of the protections seen */
    int hole;
} uct_ib_maps_walk_t;

static int uct_ib_maps_walk_cb(void *arg, void *addr, size_t length, int prot,
                               const char *path)
{
    uct_ib_maps_walk_t *walk = arg;
    uintptr_t start = (uintptr_t)addr, end = start + length;

    if ((end <= walk->cur) || (walk->cur >= walk->end)) {
        return walk->cur >= walk->end;
    }
    if (start > walk->cur) {
        walk->hole = 1;
        return 1;
    }
    walk->prot &= prot;
    walk->cur = end;
    return walk->cur >= walk->end;
}

ucs_status_t uct_ib_md_reg_diagnose(const uct_ib_md_t *md, void *address,
                                    size_t length, int verbs_access, int err)
{
    int need_write =
        !!(verbs_access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
    uct_ib_maps_walk_t walk;
    struct rlimit rl;

    if ((err == ENOMEM) || (err == EPERM) || (err == EAGAIN)) {
        if ((getrlimit(RLIMIT_MEMLOCK, &rl) == 0) &&
            (rl.rlim_cur != RLIM_INFINITY) && !uct_ib_has_cap_ipc_lock()) {
            uct_ib_error("%s: cannot register %p length %zu: %s; the locked "
                         "memory limit RLIMIT_MEMLOCK is %llu KiB (hard %s%llu "
                         "KiB) and the process lacks CAP_IPC_LOCK: raise it "
                         "(ulimit -l unlimited, limits.conf memlock, systemd "
                         "LimitMEMLOCK=)",
                         md->name, address, length, strerror(err),
                         (unsigned long long)rl.rlim_cur / 1024,
                         (rl.rlim_max == RLIM_INFINITY) ? "unlimited, " : "",
                         (rl.rlim_max == RLIM_INFINITY)
                             ? 0ull
                             : (unsigned long long)rl.rlim_max / 1024);
            return UCS_ERR_EXCEEDS_LIMIT;
        }
        uct_ib_error("%s: cannot register %p length %zu: %s", md->name, address,
                     length, strerror(err));
        return UCS_ERR_NO_MEMORY;
    }

    if ((err == EFAULT) || (err == EACCES) || (err == EINVAL)) {
        walk.cur  = (uintptr_t)address;
        walk.end  = (uintptr_t)address + length;
        walk.prot = PROT_READ | PROT_WRITE | PROT_EXEC;
        walk.hole = 0;
        ucm_parse_proc_self_maps(uct_ib_maps_walk_cb, &walk);
        if (walk.hole || (walk.cur < walk.end)) {
            uct_ib_error("%s: cannot register %p length %zu: address 0x%lx is "
                         "not mapped",
                         md->name, address, length, (unsigned long)walk.cur);
            return UCS_ERR_INVALID_ADDR;
        }
        if ((need_write && !(walk.prot & PROT_WRITE)) ||
            !(walk.prot & PROT_READ)) {
            uct_ib_error("%s: cannot register %p length %zu for %s: the "
                         "mapping allows only %s%s",
                         md->name, address, length,
                         (verbs_access & IBV_ACCESS_REMOTE_WRITE)
                             ? "remote write"
                         : need_write ? "local write"
                                      : "read",
                         (walk.prot & PROT_READ) ? "read" : "no access",
                         (walk.prot & PROT_WRITE) ? "/write" : "");
            return UCS_ERR_INVALID_ADDR;
        }
        if (verbs_access & IBV_ACCESS_ON_DEMAND) {
            uct_ib_error("%s: on-demand paging registration of %p length %zu "
                         "rejected: %s",
                         md->name, address, length, strerror(err));
            return UCS_ERR_UNSUPPORTED;
        }
    }
    uct_ib_error("%s: ibv_reg_mr(%p, %zu, access 0x%x) failed: %s", md->name,
                 address, length, verbs_access, strerror(err));
    return UCS_ERR_IO_ERROR;
}
