/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ucs_bench_rcache's cache creation for the stock-ABI column, compiled
 * against the system's UCX headers (/usr/include/ucs: Debian 12's 1.13 or,
 * with STOCK_UCX_RCACHE_V117 from configure, 1.17 and newer), not this
 * project's:
 * the params and ops below are laid out by UCX's own declarations, as a
 * stock UCX caller lays them out, and handed to libucm_rcache.so.0's
 * ucs_rcache_create.
 */
#include "ucs_bench_rcache.h"

#include <ucm/api/ucm.h>
#include <ucs/memory/rcache.h>

#include <stdint.h>
#include <string.h>

static ucs_status_t bench_stock_mem_reg(void *context, ucs_rcache_t *rcache,
                                        void *arg, ucs_rcache_region_t *region,
                                        uint16_t flags)
{
    bench_cost_reg();
    return UCS_OK;
}

static void bench_stock_mem_dereg(void *context, ucs_rcache_t *rcache,
                                  ucs_rcache_region_t *region)
{
    bench_cost_dereg();
}

static const ucs_rcache_ops_t bench_stock_ops = {
    .mem_reg   = bench_stock_mem_reg,
    .mem_dereg = bench_stock_mem_dereg,
};

int bench_stock_create(void *create_fn, unsigned long max_regions,
                       void **rcache_p)
{
    ucs_status_t (*create)(const ucs_rcache_params_t *, const char *,
                           ucs_stats_node_t *, ucs_rcache_t **) = create_fn;
    ucs_rcache_params_t params;
    ucs_rcache_t *rcache;

    memset(&params, 0, sizeof(params));
    params.region_struct_size = sizeof(ucs_rcache_region_t);
#ifndef STOCK_UCX_RCACHE_V117
    params.alignment     = 4096; /* since 1.17 an argument of get */
    params.max_alignment = 4096;
#endif
    params.ucm_events         = UCM_EVENT_VM_UNMAPPED;
    params.ucm_event_priority = 1000;
    params.ops                = &bench_stock_ops;
    params.max_regions        = max_regions;
    params.max_size           = SIZE_MAX;
    params.max_unreleased     = SIZE_MAX;
    if (create(&params, "bench", NULL, &rcache) != UCS_OK) {
        return -1;
    }
    *rcache_p = rcache;
    return 0;
}
