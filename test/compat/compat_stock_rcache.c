/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Stock UCX 1.13's registration cache (libucs from Debian) running on our
 * libucm (LD_PRELOAD): a region registered through the cache must be
 * invalidated when its memory is replaced by new pages at the same address
 * (mmap MAP_FIXED over it), so the next get registers anew.  The oracle is the
 * page frame number read from /proc/self/pagemap (as root) and the registration
 * count.
 *
 * Exit status: 0 pass, 1 fail, 77 skip (with the reason printed).
 */
#include <ucm/api/ucm.h>
#include <ucs/memory/rcache.h>

#include "compat_stock_api.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int compat_regs, compat_deregs;
static uint64_t compat_reg_pfn;

static uint64_t compat_pfn(const void *addr)
{
    uint64_t entry = 0;
    int fd         = open("/proc/self/pagemap", O_RDONLY);

    if (fd < 0) {
        return 0;
    }
    if (pread(fd, &entry, sizeof(entry),
              (off_t)((uintptr_t)addr / 4096 * sizeof(entry))) !=
        sizeof(entry)) {
        entry = 0;
    }
    close(fd);
    return (entry >> 63) ? (entry & ((1ull << 55) - 1)) : 0;
}

static ucs_status_t compat_reg(void *ctx, ucs_rcache_t *rc, void *arg,
                               ucs_rcache_region_t *region, uint16_t flags)
{
    ++compat_regs;
    compat_reg_pfn = compat_pfn((void *)region->super.start);
    return UCS_OK;
}

static void compat_dereg(void *ctx, ucs_rcache_t *rc,
                         ucs_rcache_region_t *region)
{
    ++compat_deregs;
}

static const ucs_rcache_ops_t compat_ops = {
    .mem_reg   = compat_reg,
    .mem_dereg = compat_dereg,
};

int main(void)
{
    const size_t size = 1 << 20;
    ucs_rcache_params_t params;
    ucs_rcache_region_t *region;
    ucs_rcache_t *rcache;
    uint64_t old_pfn;
    char *buf, *again;

    memset(&params, 0, sizeof(params));
    params.region_struct_size = sizeof(ucs_rcache_region_t);
    COMPAT_PARAMS_ALIGN(&params, 4096);
    params.ucm_events         = UCM_EVENT_VM_UNMAPPED;
    params.ucm_event_priority = 1000;
    params.ops                = &compat_ops;
    params.max_regions        = (unsigned long)-1;
    params.max_size           = (size_t)-1;
    if (ucs_rcache_create(&params, "compat", NULL, &rcache) != UCS_OK) {
        printf("FAIL: stock rcache could not be created on this libucm\n");
        return 1;
    }

    buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
               -1, 0);
    memset(buf, 1, size);
    if (COMPAT_RCACHE_GET(ucs_rcache_get, rcache, buf, 4096, 4096,
                          PROT_READ | PROT_WRITE, NULL, &region) != UCS_OK) {
        printf("FAIL: first get\n");
        return 1;
    }
    ucs_rcache_region_put(rcache, region);
    old_pfn = compat_reg_pfn;

    /* same address, new pages: mmap(MAP_FIXED) replaces the live mapping in
     * one call (munmap first and MAP_FIXED later could clobber whatever the
     * process mapped there in between, e.g. the rcache's own memory) */
    again = mmap(buf, size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    memset(again, 2, size);
    if (COMPAT_RCACHE_GET(ucs_rcache_get, rcache, again, 4096, 4096,
                          PROT_READ | PROT_WRITE, NULL, &region) != UCS_OK) {
        printf("FAIL: second get\n");
        return 1;
    }
    ucs_rcache_region_put(rcache, region);

    printf("regs %d deregs %d pfn %llx -> %llx\n", compat_regs, compat_deregs,
           (unsigned long long)old_pfn, (unsigned long long)compat_reg_pfn);
    if ((compat_regs != 2) || (compat_deregs < 1)) {
        printf("FAIL: stale registration reused after mmap(MAP_FIXED)\n");
        return 1;
    }
    if ((old_pfn != 0) && (old_pfn == compat_reg_pfn)) {
        printf("FAIL: new registration sees the old page frame\n");
        return 1;
    }
    ucs_rcache_destroy(rcache);
    munmap(again, size);
    printf("PASS\n");
    return 0;
}
