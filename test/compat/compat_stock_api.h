/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The two registration-cache APIs of stock UCX, for test programs compiled
 * against the system's headers (libucx-dev): UCX 1.13 (Debian 12) and 1.17
 * and newer (Debian 13's 1.18), told apart by configure
 * (STOCK_UCX_RCACHE_V117, from STOCK_UCX_CPPFLAGS).
 *
 * COMPAT_RCACHE_GET(fn, rcache, address, length, alignment, prot, arg,
 * region_p) calls fn with the get signature of the headers (1.13 has no
 * alignment argument; the cache's params carry it), and
 * COMPAT_PARAMS_ALIGN(params, alignment) sets the params' alignment where
 * the headers have one.
 */
#ifndef COMPAT_STOCK_API_H_
#define COMPAT_STOCK_API_H_

#include <ucs/memory/rcache.h>

#ifdef STOCK_UCX_RCACHE_V117
#define COMPAT_STOCK_RELEASE       "1.17+"
#define COMPAT_STOCK_REGION_SIZE   88
#define COMPAT_STOCK_PARAMS_SIZE   64
#define COMPAT_PARAMS_ALIGN(_p, _a) ((void)(_p), (void)(_a))
#define COMPAT_RCACHE_GET(_fn, _rc, _addr, _len, _align, _prot, _arg, _rp)     \
    (_fn)(_rc, _addr, _len, _align, _prot, _arg, _rp)
#else
#define COMPAT_STOCK_RELEASE     "1.13"
#define COMPAT_STOCK_REGION_SIZE 80
#define COMPAT_STOCK_PARAMS_SIZE 80
#define COMPAT_PARAMS_ALIGN(_p, _a)                                            \
    do {                                                                       \
        (_p)->alignment     = (_a);                                            \
        (_p)->max_alignment = 4096;                                            \
    } while (0)
#define COMPAT_RCACHE_GET(_fn, _rc, _addr, _len, _align, _prot, _arg, _rp)     \
    ((void)(_align), (_fn)(_rc, _addr, _len, _prot, _arg, _rp))
#endif

#endif
