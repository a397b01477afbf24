/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the userfaultfd monitor leaves of vm.max_map_count to the
 * application (issue 30): a registration cache registers N one-page
 * regions STRIDE apart (each subscribed with the monitor), releases them
 * all (the cache is destroyed), and then the application makes M ordinary
 * one-page mmap() calls that cannot merge with each other.  Printed:
 * /proc/self/maps lines before and after, the monitor's spans and budget,
 * and how many of the M mmap() calls failed.  Not installed; the numbers
 * are in docs/internals-uffd.md.  UCX_MEM_UFFD_VMA_SHARE=1 gives the
 * behaviour without a budget (every span fits).
 *
 * usage: ucs_bench_vmas [REGIONS [STRIDE_KIB [MMAPS]]]
 *        (defaults: 32748 128 1000)
 */
#include <ucm/api/ucm.h>
#include <ucm/api/ucm_ext.h>
#include <ucs/memory/rcache.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static ucs_status_t bench_vmas_reg(void *context, ucs_rcache_t *rcache,
                                   void *arg, ucs_rcache_region_t *region,
                                   uint16_t flags)
{
    return UCS_OK;
}

static void bench_vmas_dereg(void *context, ucs_rcache_t *rcache,
                             ucs_rcache_region_t *region)
{
}

static const ucs_rcache_ops_t bench_vmas_ops = {bench_vmas_reg,
                                                bench_vmas_dereg, NULL};

static unsigned long bench_vmas_maps(void)
{
    FILE *f             = fopen("/proc/self/maps", "r");
    unsigned long lines = 0;
    int c;

    if (f == NULL) {
        return 0;
    }
    while ((c = fgetc(f)) != EOF) {
        lines += (c == '\n');
    }
    fclose(f);
    return lines;
}

static void bench_vmas_print_uffd(const char *when)
{
    ucm_uffd_info_t info;

    ucm_uffd_drain_wait();
    ucm_uffd_query(&info);
    printf("%s: maps %lu, uffd %s, spans %lu, VMA use %lu of budget %lu "
           "(vm.max_map_count %lu), refused %lu\n",
           when, bench_vmas_maps(), info.active ? "active" : "off", info.spans,
           info.vma_use, info.vma_budget, info.max_map_count, info.over_budget);
}

int main(int argc, char **argv)
{
    unsigned long regions = (argc > 1) ? strtoul(argv[1], NULL, 0) : 32748;
    size_t stride  = ((argc > 2) ? strtoul(argv[2], NULL, 0) : 128) * 1024;
    unsigned mmaps = (argc > 3) ? strtoul(argv[3], NULL, 0) : 1000;
    size_t page    = sysconf(_SC_PAGESIZE);
    ucs_rcache_params_t params;
    ucs_rcache_region_t *region;
    ucs_rcache_t *rcache;
    unsigned long i, failed = 0, get_errors = 0;
    char *area;
    void *p;

    area = mmap(NULL, regions * stride, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (area == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    memset(&params, 0, sizeof(params));
    params.region_struct_size = sizeof(ucs_rcache_region_t);
    params.alignment          = page;
    params.max_alignment      = page;
    params.ucm_events         = UCM_EVENT_VM_UNMAPPED;
    params.ucm_event_priority = 1000;
    params.ops                = &bench_vmas_ops;
    params.max_regions        = regions + 1;
    params.max_size           = SIZE_MAX;
    params.max_unreleased     = SIZE_MAX;
    if (ucs_rcache_create(&params, "vmas", NULL, &rcache) != UCS_OK) {
        fprintf(stderr, "rcache create failed\n");
        return 2;
    }
    bench_vmas_print_uffd("start");
    for (i = 0; i < regions; ++i) {
        if (ucs_rcache_get(rcache, area + i * stride, page,
                           PROT_READ | PROT_WRITE, NULL, &region) != UCS_OK) {
            ++get_errors;
            continue;
        }
        ucs_rcache_region_put(rcache, region);
    }
    ucs_rcache_destroy(rcache); /* every region released */
    printf("%lu regions %zu KiB apart registered and released (%lu get "
           "errors)\n",
           regions, stride / 1024, get_errors);
    bench_vmas_print_uffd("released");

    for (i = 0; i < mmaps; ++i) {
        /* alternate protections: neighbours never merge */
        p = mmap(NULL, page, (i & 1) ? PROT_READ : PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            ++failed;
        }
    }
    printf("application: %lu of %u mmap() calls failed\n", failed, mmaps);
    bench_vmas_print_uffd("end");
    return 0;
}
