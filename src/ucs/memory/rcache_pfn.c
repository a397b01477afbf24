/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CHECK_PFN debug mode: record the page frames of a region at registration
 * and compare them on hits, reporting a stale region loudly.
 */
#include "rcache_int.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#define UCS_RCACHE_PFN_MASK    ((1ul << 55) - 1)
#define UCS_RCACHE_PFN_PRESENT (1ul << 63)

ucs_status_t ucs_rcache_pfn_read(ucs_pgt_addr_t addr, unsigned npages,
                                 unsigned long *pfns)
{
    off_t offset = (addr / ucs_rcache_page_size) * sizeof(uint64_t);
    size_t bytes = npages * sizeof(uint64_t);
    uint64_t entry;
    ssize_t ret;
    unsigned i;
    int fd;

    fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return UCS_ERR_IO_ERROR;
    }
    ret = pread(fd, pfns, bytes, offset);
    close(fd);
    if (ret != (ssize_t)bytes) {
        return UCS_ERR_IO_ERROR;
    }
    for (i = 0; i < npages; ++i) {
        entry   = pfns[i];
        pfns[i] = (entry & UCS_RCACHE_PFN_PRESENT)
                      ? (entry & UCS_RCACHE_PFN_MASK)
                      : 0;
    }
    return UCS_OK;
}

static unsigned ucs_rcache_pfn_count(ucs_rcache_t *rcache,
                                     ucs_rcache_region_t *region)
{
    ucs_pgt_addr_t first = region->super.start / ucs_rcache_page_size;
    ucs_pgt_addr_t last  = (region->super.end - 1) / ucs_rcache_page_size;

    return ucs_min(ucs_min(rcache->hot.check_pfn, last - first + 1),
                   UCS_RCACHE_PFN_MAX);
}

/* region->pfn: [0] the count, then the frames. */
void ucs_rcache_pfn_record(ucs_rcache_t *rcache, ucs_rcache_region_t *region)
{
    unsigned npages = ucs_rcache_pfn_count(rcache, region);
    unsigned long *pfns;

    pfns = malloc((npages + 1) * sizeof(*pfns));
    if (pfns == NULL) {
        return;
    }
    if (ucs_rcache_pfn_read(region->super.start, npages, pfns + 1) != UCS_OK) {
        ucs_rcache_warn("%s: cannot read /proc/self/pagemap, PFN check off "
                        "for region [0x%lx, 0x%lx)",
                        rcache->name, region->super.start, region->super.end);
        free(pfns);
        return;
    }
    pfns[0]     = npages;
    region->pfn = pfns;
}

/* The user part of region as ops->dump_region describes it ("" without). */
static void ucs_rcache_pfn_describe(ucs_rcache_t *rcache,
                                    ucs_rcache_region_t *region, char *buf,
                                    size_t max)
{
    buf[0] = '\0';
    if (rcache->params.ops->dump_region != NULL) {
        rcache->params.ops->dump_region(rcache->params.context, rcache, region,
                                        buf, max);
        buf[max - 1] = '\0';
    }
}

void ucs_rcache_pfn_verify(ucs_rcache_t *rcache, ucs_rcache_region_t *region)
{
    unsigned long *then = region->pfn;
    char desc[128];
    unsigned long now[64];
    unsigned i, n, npages;

    if (then == NULL) {
        return;
    }
    npages = *then++;
    for (i = 0; i < npages; i += n) {
        n = ucs_min(npages - i, 64u);
        if (ucs_rcache_pfn_read(region->super.start + i * ucs_rcache_page_size,
                                n, now) != UCS_OK) {
            return;
        }
        for (unsigned j = 0; j < n; ++j) {
            if (now[j] == then[i + j]) {
                continue;
            }
            ucs_rcache_atomic_add(&rcache->stats.counts.stale_pfn, 1);
            ucs_rcache_pfn_describe(rcache, region, desc, sizeof(desc));
            ucs_rcache_error(
                "%s: STALE REGION [0x%lx, 0x%lx) " UCS_RCACHE_PROT_FMT
                " %s: page 0x%lx had frame 0x%lx at registration, "
                "now 0x%lx",
                rcache->name, region->super.start, region->super.end,
                UCS_RCACHE_PROT_ARG(region->prot), desc,
                region->super.start + (i + j) * ucs_rcache_page_size,
                then[i + j], now[j]);
            return;
        }
    }
}

void ucs_rcache_pfn_free(ucs_rcache_t *rcache, ucs_rcache_region_t *region)
{
    free(region->pfn);
    region->pfn = NULL;
}
