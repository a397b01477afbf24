/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What ucs_bench_rcache.c and ucs_bench_rcache_stock.c share (the latter is
 * compiled against Debian's UCX headers, so nothing here names a UCX type).
 */
#ifndef UCS_BENCH_RCACHE_H_
#define UCS_BENCH_RCACHE_H_

/* The fake registration cost: mem_reg / mem_dereg spin this long. */
void bench_cost_reg(void);
void bench_cost_dereg(void);

/* A cache made by create_fn (a ucs_rcache_create of UCX 1.13.1's ABI) with
 * the bench's params and the cost model as ops; 0 on success. */
int bench_stock_create(void *create_fn, unsigned long max_regions,
                       void **rcache_p);

#endif
