/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which registration-cache ABI the UCX release running in this process
 * speaks, for libucm_rcache.so.0's entry points (rcache_stock.c).  The one
 * table of releases is in rcache_stock_abi.c.
 *
 * Contract: ucs_rcache_stock_abi() returns the ABI to serve, deciding once
 * per process (the first call; thread-safe; not for hook context: it asks
 * libucm, which takes a mutex) and printing one line when the cache steps
 * aside.  UCS_RCACHE_STOCK_ABI_ASIDE: every call goes, untouched, to the
 * next definition (the running libucs's).
 */
#ifndef UCS_RCACHE_STOCK_ABI_H_
#define UCS_RCACHE_STOCK_ABI_H_

typedef enum {
    UCS_RCACHE_STOCK_ABI_UNDECIDED = 0,
    UCS_RCACHE_STOCK_ABI_113, /* served: UCX 1.13's layouts (rcache.h) */
    UCS_RCACHE_STOCK_ABI_ASIDE /* every call to libucs */
} ucs_rcache_stock_abi_t;

/* Decided ABI, UNDECIDED before the first ucs_rcache_stock_abi() */
extern int ucs_rcache_stock_abi_mode;

ucs_rcache_stock_abi_t ucs_rcache_stock_abi_decide(void);

static inline ucs_rcache_stock_abi_t ucs_rcache_stock_abi(void)
{
    int mode = __atomic_load_n(&ucs_rcache_stock_abi_mode, __ATOMIC_ACQUIRE);

    if (__builtin_expect(mode != UCS_RCACHE_STOCK_ABI_UNDECIDED, 1)) {
        return (ucs_rcache_stock_abi_t)mode;
    }
    return ucs_rcache_stock_abi_decide();
}

#endif
