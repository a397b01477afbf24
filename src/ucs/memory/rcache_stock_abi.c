/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The one table of UCX releases whose registration-cache ABI
 * libucm_rcache.so.0 knows, and the decision it makes from it.
 *
 * The release comes from libucm (ucm_ucx_release(): ucp_get_version of a
 * loaded libucp, else the functions the loaded libucs exports).  Where this
 * libucm predates ucm_ucx_release, the same two sources are asked here
 * through the loader, coarser (see ucs_rcache_stock_release_fallback).
 * UCM_RCACHE_UCX=MAJOR.MINOR[.PATCH] names the release instead (a process
 * with no UCX loaded, such as ucs_bench_rcache; or to test the table).
 *
 * Why each row is what it is: docs/internals-stock-abi.md, "Releases".
 */
#include "rcache_stock_abi.h"
#include "rcache_int.h"

#include <common/ucs_env.h>
#include <ucm/api/ucm_ext.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* declared by libucm's ucm_ext.h since it has the function; weak: this
 * library also runs on a libucm without it */
ucs_status_t ucm_ucx_release(unsigned *major, unsigned *minor, unsigned *patch,
                             const char **how);
#pragma weak ucm_ucx_release

typedef struct {
    unsigned major, minor_first, minor_last;
    ucs_rcache_stock_abi_t abi;
    const char *why; /* for ASIDE: why libucs's own cache serves */
} ucs_rcache_stock_release_t;

static const ucs_rcache_stock_release_t ucs_rcache_stock_releases[] = {
    /* Debian 12; layouts checked at compile time in rcache_stock.c */
    {1, 13, 13, UCS_RCACHE_STOCK_ABI_113, NULL},
    /* Debian 13 (1.18) */
    {1, 17, 20, UCS_RCACHE_STOCK_ABI_ASIDE,
     "its libucp reads the cache object and its regions inline "
     "(ucs_rcache_lookup_unsafe, ucs_rcache_region_put_unsafe), which only "
     "UCX's own cache lays out"},
    /* upstream 1.22, forky's 1.23 */
    {1, 21, 23, UCS_RCACHE_STOCK_ABI_ASIDE,
     "its libucp reads the cache object and its regions inline "
     "(ucs_rcache_lookup_unsafe, ucs_rcache_region_put_unsafe; invalidation "
     "tree), which only UCX's own cache lays out"},
};

int ucs_rcache_stock_abi_mode = UCS_RCACHE_STOCK_ABI_UNDECIDED;

static pthread_mutex_t ucs_rcache_stock_abi_lock = PTHREAD_MUTEX_INITIALIZER;

/* A libucm without ucm_ucx_release: ucp_get_version of a loaded libucp,
 * else whether the loaded libucs exports a function that 1.17 added (a
 * 1.17+ release, minor 17) or only one that 1.13 had (1.13). */
static ucs_status_t ucs_rcache_stock_release_fallback(unsigned *major,
                                                      unsigned *minor,
                                                      unsigned *patch,
                                                      const char **how)
{
    void (*ucp_version)(unsigned *, unsigned *, unsigned *);

    *(void **)&ucp_version = dlsym(RTLD_DEFAULT, "ucp_get_version");
    if (ucp_version != NULL) {
        ucp_version(major, minor, patch);
        *how = "ucp_get_version";
        return UCS_OK;
    }
    *major = 1;
    *patch = 0;
    *how   = "libucs exports";
    if (dlsym(RTLD_DEFAULT, "ucs_config_sscanf_key_value") != NULL) {
        *minor = 17;
        return UCS_OK;
    }
    if (dlsym(RTLD_DEFAULT, "ucs_init_ucm_opts") != NULL) {
        *minor = 13;
        return UCS_OK;
    }
    return (dlsym(RTLD_DEFAULT, "ucs_load_modules") != NULL)
               ? UCS_ERR_UNSUPPORTED
               : UCS_ERR_NO_ELEM;
}

static ucs_status_t ucs_rcache_stock_release(unsigned *major, unsigned *minor,
                                             unsigned *patch, const char **how)
{
    const char *env = ucs_env_get("UCM_RCACHE_UCX");

    if ((env != NULL) && (*env != '\0')) {
        *patch = 0;
        *how   = "UCM_RCACHE_UCX";
        if (sscanf(env, "%u.%u.%u", major, minor, patch) >= 2) {
            return UCS_OK;
        }
        ucs_rcache_error("UCM_RCACHE_UCX=%s: not MAJOR.MINOR[.PATCH]; "
                         "ignored",
                         env);
    }
    if (ucm_ucx_release != NULL) {
        return ucm_ucx_release(major, minor, patch, how);
    }
    return ucs_rcache_stock_release_fallback(major, minor, patch, how);
}

ucs_rcache_stock_abi_t ucs_rcache_stock_abi_decide(void)
{
    const ucs_rcache_stock_release_t *row = NULL;
    unsigned major = 0, minor = 0, patch = 0, i;
    const char *how = "";
    ucs_status_t status;
    int mode;

    pthread_mutex_lock(&ucs_rcache_stock_abi_lock);
    mode = __atomic_load_n(&ucs_rcache_stock_abi_mode, __ATOMIC_ACQUIRE);
    if (mode != UCS_RCACHE_STOCK_ABI_UNDECIDED) {
        goto out;
    }
    status = ucs_rcache_stock_release(&major, &minor, &patch, &how);
    if (status == UCS_OK) {
        for (i = 0; i < sizeof(ucs_rcache_stock_releases) /
                            sizeof(ucs_rcache_stock_releases[0]);
             ++i) {
            if ((ucs_rcache_stock_releases[i].major == major) &&
                (minor >= ucs_rcache_stock_releases[i].minor_first) &&
                (minor <= ucs_rcache_stock_releases[i].minor_last)) {
                row = &ucs_rcache_stock_releases[i];
                break;
            }
        }
    }
    if (row == NULL) {
        mode = UCS_RCACHE_STOCK_ABI_ASIDE;
        if (status == UCS_OK) {
            ucs_rcache_warn("UCX %u.%u.%u (%s) is a release whose registration "
                            "cache ABI this library does not know: every "
                            "ucs_rcache call goes to UCX's libucs",
                            major, minor, patch, how);
        } else {
            ucs_rcache_warn("the UCX release cannot be told (%s): every "
                            "ucs_rcache call goes to UCX's libucs",
                            ucs_status_string(status));
        }
    } else {
        mode = row->abi;
        if (mode == UCS_RCACHE_STOCK_ABI_ASIDE) {
            ucs_rcache_warn("UCX %u.%u.%u (%s): registration caches left to "
                            "UCX's libucs: %s",
                            major, minor, patch, how, row->why);
        }
    }
    __atomic_store_n(&ucs_rcache_stock_abi_mode, mode, __ATOMIC_RELEASE);
out:
    pthread_mutex_unlock(&ucs_rcache_stock_abi_lock);
    return (ucs_rcache_stock_abi_t)mode;
}
