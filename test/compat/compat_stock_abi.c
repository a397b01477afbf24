/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.13.1's registration-cache ABI, as a stock program sees it: this file
 * is compiled against Debian's headers (/usr/include/ucs) and linked with
 * Debian's libucs, and run with our libucm.so.0 and libucm_rcache.so.0
 * preloaded (run-compat.sh), so its ucs_rcache_* calls must reach our cache.
 *
 * Cases (each with its own oracle: registration and deregistration counts
 * kept by the ops below, page frame numbers from /proc/self/pagemap when
 * readable (root), data written by mem_reg into the user part of regions,
 * error lines on stderr):
 *   0. the preload is in effect: the six entry points resolve (dladdr) into
 *      libucm_rcache.so.0; 1.13.1 struct sizes
 *   1. UCP/UCT-like caches: region_struct_size > 80 with user fields,
 *      alignment 16/max 4096 and 4096, unlimited limits; max_regions 4 (LRU)
 *   2. get / hold / put / hit / invalidate with a completion callback
 *   3. munmap, mmap(MAP_FIXED) over a region, raw SYS_munmap (userfaultfd)
 *   4. mem_reg of cache A getting regions of cache B (UCP over MD caches)
 *   5. destroy with a region still held, then its put
 *   6. fork: the child's cache, the parent's regions after the child
 *   7. two threads, own and shared buffers
 *   8. bad input: error status, one "[ucs rcache] error" line each; a
 *      malformed UCX_RCACHE_* variable UCX owns is never reported (UCX
 *      does), the cache's own UCX_RCACHE_DONTFORK is
 *   9. caches created by Debian's own libucs, through its symbols and ours
 *
 * Exit status: 0 pass, 1 fail, 77 skip (with the reason printed).
 * COMPAT_ABI_ITERS: iterations per thread in case 7 (default 100000).
 */
#define _GNU_SOURCE
#include <ucs/memory/rcache.h>
#include <ucs/type/status.h>
#include <ucm/api/ucm.h>

#include "compat_stock_api.h"

/* Debian's rcache.h pulls in mpool.h, ours does not: prove which one this is */
#ifndef UCS_MPOOL_H_
#error "compat_stock_abi must be compiled against Debian's UCX 1.13 headers"
#endif

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/rawsys.h"

_Static_assert(sizeof(ucs_rcache_region_t) == COMPAT_STOCK_REGION_SIZE,
               "UCX region size");
_Static_assert(sizeof(ucs_rcache_params_t) == COMPAT_STOCK_PARAMS_SIZE,
               "UCX params size");

/* The alignment a get asks for where the API has one (1.17+); 1.13 takes
 * it from the params. */
static size_t abi_get_align = 4096;

#define abi_get_with(_fn, _rc, _addr, _len, _prot, _arg, _rp)                  \
    COMPAT_RCACHE_GET(_fn, _rc, _addr, _len, abi_get_align, _prot, _arg, _rp)
#define abi_get(...) abi_get_with(ucs_rcache_get, __VA_ARGS__)

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define ABI_MAGIC 0x5ca1ab1e0ddba11ull
#define ABI_ERR   "[ucs rcache] error"

#define ABI_CHECK(_cond, ...)                                                  \
    do {                                                                       \
        if (!(_cond)) {                                                        \
            printf("FAIL: %s:%d: %s: ", __func__, __LINE__, #_cond);           \
            printf(__VA_ARGS__);                                               \
            printf("\n");                                                      \
            fflush(stdout);                                                    \
            return 1;                                                          \
        }                                                                      \
    } while (0)

/* One cache and what its ops saw. */
typedef struct abi_cache {
    const char *name;
    ucs_rcache_t *rcache;
    long regs;                /* atomic: mem_reg calls that succeeded */
    long deregs;              /* atomic: mem_dereg calls */
    long corrupt;             /* atomic: dereg saw user fields changed */
    int fail;                 /* mem_reg returns UCS_ERR_IO_ERROR */
    struct abi_cache *nested; /* mem_reg also gets a region of this one */
} abi_cache_t;

/* The caller's region: the cache's part first, user fields after it. */
typedef struct abi_region {
    ucs_rcache_region_t super;
    uint64_t magic;              /* ABI_MAGIC ^ start, written by mem_reg */
    uintptr_t start;             /* super.start at registration */
    uintptr_t end;               /* super.end at registration */
    uint64_t pfn;                /* first page's frame at registration */
    ucs_rcache_region_t *nested; /* region of abi_cache_t::nested */
    char tail[24];
} abi_region_t;

static size_t page_size;
static int have_pfn; /* /proc/self/pagemap gives frame numbers (root) */

static uint64_t abi_pfn(const void *addr)
{
    uint64_t entry = 0;
    int fd         = open("/proc/self/pagemap", O_RDONLY);

    if (fd < 0) {
        return 0;
    }
    if (pread(fd, &entry, sizeof(entry),
              (off_t)((uintptr_t)addr / page_size * sizeof(entry))) !=
        sizeof(entry)) {
        entry = 0;
    }
    close(fd);
    return (entry >> 63) ? (entry & ((1ull << 55) - 1)) : 0;
}

static ucs_status_t abi_mem_reg(void *context, ucs_rcache_t *rcache, void *arg,
                                ucs_rcache_region_t *region, uint16_t flags)
{
    abi_cache_t *cache = context;
    abi_region_t *r    = (abi_region_t *)region;
    ucs_status_t status;

    if (cache->fail) {
        return UCS_ERR_IO_ERROR;
    }
    r->magic  = ABI_MAGIC ^ region->super.start;
    r->start  = region->super.start;
    r->end    = region->super.end;
    r->pfn    = abi_pfn((void *)region->super.start);
    r->nested = NULL;
    memset(r->tail, 0x5a, sizeof(r->tail));
    if (cache->nested != NULL) {
        status = abi_get(cache->nested->rcache, (void *)region->super.start,
                         region->super.end - region->super.start, region->prot,
                         NULL, &r->nested);
        if (status != UCS_OK) {
            return status;
        }
    }
    __atomic_add_fetch(&cache->regs, 1, __ATOMIC_ACQ_REL);
    return UCS_OK;
}

static void abi_mem_dereg(void *context, ucs_rcache_t *rcache,
                          ucs_rcache_region_t *region)
{
    abi_cache_t *cache = context;
    abi_region_t *r    = (abi_region_t *)region;
    unsigned i;

    if ((r->magic != (ABI_MAGIC ^ r->start)) ||
        (r->start != region->super.start) || (r->end != region->super.end)) {
        __atomic_add_fetch(&cache->corrupt, 1, __ATOMIC_ACQ_REL);
    }
    for (i = 0; i < sizeof(r->tail); ++i) {
        if (r->tail[i] != 0x5a) {
            __atomic_add_fetch(&cache->corrupt, 1, __ATOMIC_ACQ_REL);
            break;
        }
    }
    if (r->nested != NULL) {
        ucs_rcache_region_put(cache->nested->rcache, r->nested);
        r->nested = NULL;
    }
    r->magic = 0;
    __atomic_add_fetch(&cache->deregs, 1, __ATOMIC_ACQ_REL);
}

static void abi_dump_region(void *context, ucs_rcache_t *rcache,
                            ucs_rcache_region_t *region, char *buf, size_t max)
{
    snprintf(buf, max, "magic 0x%llx",
             (unsigned long long)((abi_region_t *)region)->magic);
}

static const ucs_rcache_ops_t abi_ops = {
    .mem_reg     = abi_mem_reg,
    .mem_dereg   = abi_mem_dereg,
    .dump_region = abi_dump_region,
};

/* UCP/UCT-like parameters. */
static void abi_params(ucs_rcache_params_t *params, abi_cache_t *cache,
                       size_t alignment)
{
    memset(params, 0, sizeof(*params));
    params->region_struct_size = sizeof(abi_region_t);
    COMPAT_PARAMS_ALIGN(params, alignment);
    params->ucm_events = UCM_EVENT_VM_UNMAPPED | UCM_EVENT_MEM_TYPE_FREE;
    params->ucm_event_priority = 1000;
    params->ops                = &abi_ops;
    params->context            = cache;
    params->flags              = 0;
    params->max_regions        = (unsigned long)-1;
    params->max_size           = (size_t)-1;
    params->max_unreleased     = (size_t)-1;
}

static int abi_create(abi_cache_t *cache, const char *name, size_t alignment,
                      int flags, unsigned long max_regions)
{
    ucs_rcache_params_t params;
    ucs_status_t status;

    memset(cache, 0, sizeof(*cache));
    cache->name = name;
    abi_params(&params, cache, alignment);
    params.flags = flags;
    if (max_regions != 0) {
        params.max_regions = max_regions;
    }
    status = ucs_rcache_create(&params, name, NULL, &cache->rcache);
    ABI_CHECK(status == UCS_OK, "create %s: %s", name,
              ucs_status_string(status));
    return 0;
}

static void *abi_map(size_t size, int fill)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    memset(p, fill, size);
    return p;
}

/* Checks a region returned for [addr, addr+len) by cache. */
static int abi_region_ok(abi_cache_t *cache, ucs_rcache_region_t *region,
                         void *addr, size_t len, size_t alignment)
{
    abi_region_t *r = (abi_region_t *)region;
    uintptr_t start = (uintptr_t)addr & ~(alignment - 1);
    uintptr_t end = ((uintptr_t)addr + len + alignment - 1) & ~(alignment - 1);

    ABI_CHECK((region->super.start <= start) && (region->super.end >= end),
              "%s: region [0x%lx, 0x%lx) does not cover [0x%lx, 0x%lx)",
              cache->name, region->super.start, region->super.end, start, end);
    ABI_CHECK(region->super.start % alignment == 0,
              "%s: start 0x%lx not aligned to %zu", cache->name,
              region->super.start, alignment);
    ABI_CHECK((r->magic == (ABI_MAGIC ^ region->super.start)) &&
                  (r->start == region->super.start) &&
                  (r->end == region->super.end),
              "%s: user fields of the region lost", cache->name);
    ABI_CHECK(region->prot & PROT_READ, "%s: prot 0x%x", cache->name,
              region->prot);
    ABI_CHECK(region->refcount >= 1, "%s: refcount %u", cache->name,
              region->refcount);
    return 0;
}

/* --- stderr capture ------------------------------------------------------ */

static int abi_saved_stderr = -1;
static int abi_capture_fd   = -1;

static void abi_capture_begin(void)
{
    char path[] = "/tmp/compat_stock_abi.XXXXXX";

    fflush(stderr);
    abi_capture_fd = mkstemp(path);
    if (abi_capture_fd < 0) {
        perror("mkstemp");
        exit(1);
    }
    unlink(path);
    abi_saved_stderr = dup(2);
    dup2(abi_capture_fd, 2);
}

/* Restores stderr, echoes what was captured, returns its error lines. */
static int abi_capture_end(void)
{
    char buf[8192], *line, *save;
    int count = 0;
    ssize_t n;

    fflush(stderr);
    dup2(abi_saved_stderr, 2);
    close(abi_saved_stderr);
    n = pread(abi_capture_fd, buf, sizeof(buf) - 1, 0);
    close(abi_capture_fd);
    buf[(n > 0) ? n : 0] = '\0';
    for (line = strtok_r(buf, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        printf("    stderr: %s\n", line);
        count += (strstr(line, ABI_ERR) != NULL);
    }
    return count;
}

/* --- 0: preload ---------------------------------------------------------- */

static int abi_in_ours(const char *name, void *fn)
{
    Dl_info info;

    if ((dladdr(fn, &info) == 0) || (info.dli_fname == NULL)) {
        printf("FAIL: %s at %p is in no loaded object\n", name, fn);
        return 0;
    }
    printf("  %s -> %s\n", name, info.dli_fname);
    return strstr(info.dli_fname, "libucm_rcache.so") != NULL;
}

static int case0_preload(void)
{
    int ours =
        abi_in_ours("ucs_rcache_create", (void *)ucs_rcache_create) &
        abi_in_ours("ucs_rcache_destroy", (void *)ucs_rcache_destroy) &
        abi_in_ours("ucs_rcache_get", (void *)ucs_rcache_get) &
        abi_in_ours("ucs_rcache_region_hold", (void *)ucs_rcache_region_hold) &
        abi_in_ours("ucs_rcache_region_put", (void *)ucs_rcache_region_put) &
        abi_in_ours("ucs_rcache_region_invalidate",
                    (void *)ucs_rcache_region_invalidate);

    printf("  sizeof(ucs_rcache_region_t) %zu sizeof(ucs_rcache_params_t) "
           "%zu (Debian's headers)\n",
           sizeof(ucs_rcache_region_t), sizeof(ucs_rcache_params_t));
    ABI_CHECK(ours, "the rcache entry points are not libucm_rcache.so.0's: "
                    "run with LD_PRELOAD=<libucm.so.0>:<libucm_rcache.so.0> "
                    "(see run-compat.sh)");
    return 0;
}

/* --- 1 + 2: UCP-like caches, get/hold/put/invalidate ---------------------- */

static void abi_comp(void *arg)
{
    ++*(int *)arg;
}

static int case12_basic(const char *name, size_t alignment)
{
    size_t size = 16 * page_size;
    char *buf   = abi_map(size, 1);
    ucs_rcache_region_t *r1, *r2, *r3;
    abi_cache_t c;
    int comp = 0;

    if (abi_create(&c, name, alignment, 0, 0)) {
        return 1;
    }
    abi_get_align = alignment; /* main() sets 4096 again */
    /* miss: a registration covering the aligned request */
    ABI_CHECK(abi_get(c.rcache, buf + 100, 5000, PROT_READ | PROT_WRITE, NULL,
                      &r1) == UCS_OK,
              "first get");
    ABI_CHECK(c.regs == 1, "regs %ld", c.regs);
    if (abi_region_ok(&c, r1, buf + 100, 5000, alignment)) {
        return 1;
    }
    ABI_CHECK(r1->prot & PROT_WRITE, "prot 0x%x", r1->prot);
    if (have_pfn) {
        ABI_CHECK(((abi_region_t *)r1)->pfn == abi_pfn((void *)r1->super.start),
                  "pfn at registration");
    }
    ucs_rcache_region_hold(c.rcache, r1);
    ucs_rcache_region_put(c.rcache, r1);

    /* hit inside it: same region, nothing registered */
    ABI_CHECK(abi_get(c.rcache, buf + 200, 100, PROT_READ, NULL, &r2) == UCS_OK,
              "second get");
    ABI_CHECK(r2 == r1, "hit returned another region");
    ABI_CHECK(c.regs == 1, "a hit registered: regs %ld", c.regs);
    if (abi_region_ok(&c, r2, buf + 200, 100, alignment)) {
        return 1;
    }

    /* invalidate while held twice: the callback waits for the last put */
    ucs_rcache_region_invalidate(c.rcache, r2, abi_comp, &comp);
    ABI_CHECK(comp == 0, "callback ran while the region is held");
    ABI_CHECK(c.deregs == 0, "held region deregistered");
    ucs_rcache_region_put(c.rcache, r2);
    ABI_CHECK(comp == 0, "callback ran while the region is still held once");
    ABI_CHECK(c.deregs == 0, "held region deregistered");
    ucs_rcache_region_put(c.rcache, r1);
    ABI_CHECK(comp == 1, "callback ran %d times after the last put", comp);
    ABI_CHECK(c.deregs == 1, "deregs %ld after the last put", c.deregs);

    /* the same range again: a new registration */
    ABI_CHECK(abi_get(c.rcache, buf + 100, 5000, PROT_READ, NULL, &r3) ==
                  UCS_OK,
              "get after invalidate");
    ABI_CHECK(c.regs == 2, "invalidated region reused: regs %ld", c.regs);
    if (abi_region_ok(&c, r3, buf + 100, 5000, alignment)) {
        return 1;
    }
    /* invalidate with no holder but the caller, NULL callback */
    ucs_rcache_region_invalidate(c.rcache, r3, NULL, NULL);
    ucs_rcache_region_put(c.rcache, r3);
    ABI_CHECK(c.deregs == 2, "deregs %ld", c.deregs);

    /* a request overlapping a cached region: a region covering it */
    ABI_CHECK(abi_get(c.rcache, buf, 3 * page_size, PROT_READ, NULL, &r1) ==
                  UCS_OK,
              "get");
    ucs_rcache_region_put(c.rcache, r1);
    ABI_CHECK(abi_get(c.rcache, buf + 2 * page_size, 4 * page_size, PROT_READ,
                      NULL, &r2) == UCS_OK,
              "overlap get");
    if (abi_region_ok(&c, r2, buf + 2 * page_size, 4 * page_size, alignment)) {
        return 1;
    }
    ucs_rcache_region_put(c.rcache, r2);

    ucs_rcache_destroy(c.rcache);
    ABI_CHECK(comp == 1, "callback ran %d times", comp);
    ABI_CHECK(c.regs == c.deregs, "after destroy: regs %ld deregs %ld", c.regs,
              c.deregs);
    ABI_CHECK(c.corrupt == 0, "user fields changed under the cache");
    printf("  %s (alignment %zu): regs %ld deregs %ld, callback once\n", name,
           alignment, c.regs, c.deregs);
    munmap(buf, size);
    return 0;
}

static int case1_lru(void)
{
    const int count = 10;
    size_t size     = 2 * count * page_size;
    char *buf       = abi_map(size, 1);
    ucs_rcache_region_t *r;
    long max_live = 0;
    abi_cache_t c;
    int i;

    if (abi_create(&c, "abi-lru4", 4096, 0, 4)) {
        return 1;
    }
    /* ten distinct unused regions (one page apart: nothing merges) */
    for (i = 0; i < count; ++i) {
        ABI_CHECK(abi_get(c.rcache, buf + 2 * i * page_size, page_size,
                          PROT_READ | PROT_WRITE, NULL, &r) == UCS_OK,
                  "get %d", i);
        ucs_rcache_region_put(c.rcache, r);
        if (c.regs - c.deregs > max_live) {
            max_live = c.regs - c.deregs;
        }
    }
    printf("  abi-lru4: regs %ld deregs %ld, at most %ld registered\n", c.regs,
           c.deregs, max_live);
    ABI_CHECK(c.regs == count, "regs %ld", c.regs);
    ABI_CHECK(c.regs - c.deregs <= 4, "max_regions 4: %ld still registered",
              c.regs - c.deregs);
    ucs_rcache_destroy(c.rcache);
    ABI_CHECK(c.regs == c.deregs, "after destroy: regs %ld deregs %ld", c.regs,
              c.deregs);
    munmap(buf, size);
    return 0;
}

/* --- 3: unmaps ------------------------------------------------------------ */

/* 1: active, 0: off (reason in *reason), -1: unknown.  ucm_uffd_query() is
 * our libucm's extension (not in Debian's headers): its info starts with
 * int mode, int active, char reason[160]. */
static int abi_uffd_active(char *reason, size_t max)
{
    void (*query)(void *) =
        (void (*)(void *))dlsym(RTLD_DEFAULT, "ucm_uffd_query");
    union {
        struct {
            int mode;
            int active;
            char reason[160];
        } head;
        char space[4096];
    } info;

    snprintf(reason, max, "ucm_uffd_query() not found");
    if (query == NULL) {
        return -1;
    }
    memset(&info, 0, sizeof(info));
    query(&info);
    snprintf(reason, max, "%.*s", (int)sizeof(info.head.reason),
             info.head.reason);
    return info.head.active;
}

static int case3_unmap(void)
{
    size_t size = 16 * page_size;
    char *buf   = abi_map(size, 1);
    ucs_rcache_region_t *r;
    char reason[200];
    uint64_t old_pfn;
    abi_cache_t c;
    long regs;
    void *p;
    int active;

    if (abi_create(&c, "abi-unmap", 4096, 0, 0)) {
        return 1;
    }
    ABI_CHECK(abi_get(c.rcache, buf, size, PROT_READ | PROT_WRITE, NULL, &r) ==
                  UCS_OK,
              "get");
    old_pfn = ((abi_region_t *)r)->pfn;
    ucs_rcache_region_put(c.rcache, r);

    /* mmap(MAP_FIXED) over it: new pages at the same address */
    p = mmap(buf, size, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    ABI_CHECK(p == buf, "mmap(MAP_FIXED)");
    memset(buf, 2, size);
    ABI_CHECK(abi_get(c.rcache, buf, size, PROT_READ | PROT_WRITE, NULL, &r) ==
                  UCS_OK,
              "get after mmap(MAP_FIXED)");
    ABI_CHECK(c.regs == 2,
              "stale region reused after mmap(MAP_FIXED): "
              "regs %ld",
              c.regs);
    if (have_pfn) {
        ABI_CHECK(((abi_region_t *)r)->pfn == abi_pfn(buf) &&
                      (old_pfn != abi_pfn(buf)),
                  "pfn %llx -> %llx, registered %llx",
                  (unsigned long long)old_pfn, (unsigned long long)abi_pfn(buf),
                  (unsigned long long)((abi_region_t *)r)->pfn);
    }
    ucs_rcache_region_put(c.rcache, r);
    ABI_CHECK(c.deregs >= 1, "old region not deregistered: deregs %ld",
              c.deregs);

    /* munmap, then a new mapping at the same address */
    old_pfn = abi_pfn(buf);
    munmap(buf, size);
    p = mmap(buf, size, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p != buf) {
        printf("  munmap+mmap: address %p not available again (%p): "
               "sub-case skipped\n",
               (void *)buf, p);
        if (p != MAP_FAILED) {
            munmap(p, size);
        }
        buf = abi_map(size, 3);
    } else {
        memset(buf, 3, size);
        ABI_CHECK(abi_get(c.rcache, buf, size, PROT_READ, NULL, &r) == UCS_OK,
                  "get after munmap+mmap");
        ABI_CHECK(c.regs == 3, "stale region reused after munmap: regs %ld",
                  c.regs);
        ucs_rcache_region_put(c.rcache, r);
        ABI_CHECK(c.deregs == 2, "deregs %ld", c.deregs);
    }

    /* munmap by an inline syscall instruction (libucm hooks syscall()): no
     * hook sees it, the userfaultfd monitor may */
    ABI_CHECK(abi_get(c.rcache, buf, size, PROT_READ, NULL, &r) == UCS_OK,
              "get");
    ucs_rcache_region_put(c.rcache, r);
    regs   = c.regs;
    active = abi_uffd_active(reason, sizeof(reason));
    ABI_CHECK(UCMT_RAWSYS(SYS_munmap, (long)buf, (long)size) == 0,
              "SYS_munmap: %m");
    p = mmap(buf, size, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p != buf) {
        printf("  raw munmap: address %p not available again: sub-case "
               "skipped\n",
               (void *)buf);
        if (p != MAP_FAILED) {
            munmap(p, size);
        }
        buf = NULL;
    } else {
        memset(buf, 4, size);
        ABI_CHECK(abi_get(c.rcache, buf, size, PROT_READ, NULL, &r) == UCS_OK,
                  "get after raw munmap");
        ucs_rcache_region_put(c.rcache, r);
        if (c.regs == regs + 1) {
            printf("  raw SYS_munmap seen (userfaultfd %s)\n",
                   (active == 1) ? "active" : "not active?");
        } else if (active == 1) {
            ABI_CHECK(0,
                      "raw SYS_munmap missed while the userfaultfd "
                      "monitor is active (%s)",
                      reason);
        } else {
            printf("  SKIP (sub-case): raw SYS_munmap not seen: userfaultfd "
                   "off (%s)\n",
                   reason);
        }
    }

    ucs_rcache_destroy(c.rcache);
    ABI_CHECK(c.regs == c.deregs, "after destroy: regs %ld deregs %ld", c.regs,
              c.deregs);
    ABI_CHECK(c.corrupt == 0, "user fields changed");
    printf("  abi-unmap: regs %ld deregs %ld\n", c.regs, c.deregs);
    if (buf != NULL) {
        munmap(buf, size);
    }
    return 0;
}

/* --- 4: a cache whose mem_reg uses another cache ------------------------- */

static int case4_nested(void)
{
    size_t size = 16 * page_size;
    char *buf   = abi_map(size, 1);
    char *other = abi_map(size, 1);
    ucs_rcache_region_t *r, *r2;
    abi_cache_t a, b;
    int errors;

    if (abi_create(&b, "abi-md-b", 4096, 0, 0) ||
        abi_create(&a, "abi-md-a", 4096, 0, 0)) {
        return 1;
    }
    a.nested = &b;

    ABI_CHECK(abi_get(a.rcache, buf, size, PROT_READ | PROT_WRITE, NULL, &r) ==
                  UCS_OK,
              "get");
    ABI_CHECK((a.regs == 1) && (b.regs == 1), "regs %ld %ld", a.regs, b.regs);
    ABI_CHECK(((abi_region_t *)r)->nested != NULL, "no nested region");
    if (abi_region_ok(&b, ((abi_region_t *)r)->nested, buf, size, 4096)) {
        return 1;
    }
    ABI_CHECK(abi_get(a.rcache, buf, size, PROT_READ, NULL, &r2) == UCS_OK,
              "get");
    ABI_CHECK((r2 == r) && (a.regs == 1) && (b.regs == 1), "hit: regs %ld %ld",
              a.regs, b.regs);
    ucs_rcache_region_put(a.rcache, r2);
    ucs_rcache_region_put(a.rcache, r);

    /* unmapped: A's region goes at A's next call, and with it B's */
    munmap(buf, size);
    ABI_CHECK(abi_get(a.rcache, other, page_size, PROT_READ, NULL, &r) ==
                  UCS_OK,
              "get");
    ucs_rcache_region_put(a.rcache, r);
    ABI_CHECK(abi_get(b.rcache, other, page_size, PROT_READ, NULL, &r) ==
                  UCS_OK,
              "get");
    ucs_rcache_region_put(b.rcache, r);
    ABI_CHECK((a.deregs == 1) && (b.deregs == 1),
              "after munmap: A regs %ld deregs %ld, B regs %ld deregs %ld",
              a.regs, a.deregs, b.regs, b.deregs);

    /* A destroyed: its regions put B's, B then has none held */
    ucs_rcache_destroy(a.rcache);
    ABI_CHECK(a.regs == a.deregs, "A: regs %ld deregs %ld", a.regs, a.deregs);
    abi_capture_begin();
    ucs_rcache_destroy(b.rcache);
    errors = abi_capture_end();
    ABI_CHECK(errors == 0, "B destroyed with %d error line(s)", errors);
    ABI_CHECK(b.regs == b.deregs, "B: regs %ld deregs %ld", b.regs, b.deregs);
    ABI_CHECK((a.corrupt == 0) && (b.corrupt == 0), "user fields changed");
    printf("  A regs %ld deregs %ld, B regs %ld deregs %ld\n", a.regs, a.deregs,
           b.regs, b.deregs);
    munmap(other, size);
    return 0;
}

/* --- 5: destroy with a held region ---------------------------------------- */

static int case5_destroy_held(void)
{
    size_t size = 4 * page_size;
    char *buf   = abi_map(size, 1);
    ucs_rcache_region_t *r, *r2;
    abi_cache_t c;
    int errors;

    if (abi_create(&c, "abi-destroy-held", 4096, 0, 0)) {
        return 1;
    }
    ABI_CHECK(abi_get(c.rcache, buf, size, PROT_READ, NULL, &r) == UCS_OK,
              "get");
    ABI_CHECK(abi_get(c.rcache, buf + page_size, page_size, PROT_READ, NULL,
                      &r2) == UCS_OK,
              "get");
    ucs_rcache_region_put(c.rcache, r2);
    abi_capture_begin();
    ucs_rcache_destroy(c.rcache);
    errors = abi_capture_end();
    ABI_CHECK(errors == 1, "%d error lines from destroy with a held region",
              errors);
    ABI_CHECK(((abi_region_t *)r)->magic == (ABI_MAGIC ^ r->super.start),
              "held region's user fields changed by destroy");
    ucs_rcache_region_put(c.rcache, r); /* must be safe */
    printf("  regs %ld deregs %ld after the late put\n", c.regs, c.deregs);
    ABI_CHECK(c.regs == c.deregs, "late put: regs %ld deregs %ld", c.regs,
              c.deregs);
    munmap(buf, size);
    return 0;
}

/* --- 6: fork ------------------------------------------------------------- */

static int abi_child(abi_cache_t *c, char *buf, size_t size)
{
    size_t nsize = 4 * page_size;
    char *nbuf   = abi_map(nsize, 7);
    long regs    = c->regs;
    ucs_rcache_region_t *r;

    if ((abi_get(c->rcache, nbuf, nsize, PROT_READ | PROT_WRITE, NULL, &r) !=
         UCS_OK) ||
        (c->regs != regs + 1)) {
        printf("FAIL: child: get of a new buffer (regs %ld)\n", c->regs);
        return 1;
    }
    ucs_rcache_region_put(c->rcache, r);
    /* the parent's registration is not the child's */
    if ((abi_get(c->rcache, buf, size, PROT_READ, NULL, &r) != UCS_OK) ||
        (c->regs != regs + 2)) {
        printf("FAIL: child: get of the parent's buffer (regs %ld)\n", c->regs);
        return 1;
    }
    ucs_rcache_region_put(c->rcache, r);
    return 0;
}

static int abi_wait(pid_t pid)
{
    int st;

    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR) {
            return -1;
        }
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int case6_fork(void)
{
    size_t size = 16 * page_size;
    char *buf   = abi_map(size, 1);
    ucs_rcache_region_t *r;
    uint64_t pfn_before;
    int pipefd[2], rc;
    abi_cache_t c, p;
    long regs;
    pid_t pid;
    char ch;

    if (abi_create(&c, "abi-fork", 4096, 0, 0)) {
        return 1;
    }
    ABI_CHECK(abi_get(c.rcache, buf, size, PROT_READ | PROT_WRITE, NULL, &r) ==
                  UCS_OK,
              "get");
    ucs_rcache_region_put(c.rcache, r);
    pfn_before = abi_pfn(buf);

    fflush(stdout);
    pid = fork();
    ABI_CHECK(pid >= 0, "fork: %m");
    if (pid == 0) {
        _exit(abi_child(&c, buf, size));
    }
    rc = abi_wait(pid);
    ABI_CHECK(rc == 0, "child exit status %d", rc);

    /* parent, child gone: write, then get */
    memset(buf, 8, size);
    regs = c.regs;
    ABI_CHECK(abi_get(c.rcache, buf, size, PROT_READ | PROT_WRITE, NULL, &r) ==
                  UCS_OK,
              "get after fork");
    printf("  after the child: pfn %llx -> %llx, region's %llx, regs %ld -> "
           "%ld\n",
           (unsigned long long)pfn_before, (unsigned long long)abi_pfn(buf),
           (unsigned long long)((abi_region_t *)r)->pfn, regs, c.regs);
    if (have_pfn) {
        ABI_CHECK(((abi_region_t *)r)->pfn == abi_pfn(buf),
                  "region registered on frame %llx, the page is now on %llx",
                  (unsigned long long)((abi_region_t *)r)->pfn,
                  (unsigned long long)abi_pfn(buf));
    }
    ucs_rcache_region_put(c.rcache, r);
    ucs_rcache_destroy(c.rcache);
    ABI_CHECK(c.regs == c.deregs, "regs %ld deregs %ld", c.regs, c.deregs);

    /* PURGE_ON_FORK, the parent writing while the child lives (copy on
     * write: the parent's pages move) */
    if (abi_create(&p, "abi-fork-purge", 4096, UCS_RCACHE_FLAG_PURGE_ON_FORK,
                   0)) {
        return 1;
    }
    ABI_CHECK(abi_get(p.rcache, buf, size, PROT_READ | PROT_WRITE, NULL, &r) ==
                  UCS_OK,
              "get");
    ucs_rcache_region_put(p.rcache, r);
    pfn_before = abi_pfn(buf);
    ABI_CHECK(pipe(pipefd) == 0, "pipe");
    fflush(stdout);
    pid = fork();
    ABI_CHECK(pid >= 0, "fork: %m");
    if (pid == 0) {
        close(pipefd[1]);
        rc = abi_child(&p, buf, size);
        while ((read(pipefd[0], &ch, 1) < 0) && (errno == EINTR)) {
        }
        _exit(rc);
    }
    close(pipefd[0]);
    memset(buf, 9, size);
    regs = p.regs;
    ABI_CHECK(abi_get(p.rcache, buf, size, PROT_READ | PROT_WRITE, NULL, &r) ==
                  UCS_OK,
              "get after fork");
    printf("  PURGE_ON_FORK, child alive: pfn %llx -> %llx, region's %llx, "
           "regs %ld -> %ld\n",
           (unsigned long long)pfn_before, (unsigned long long)abi_pfn(buf),
           (unsigned long long)((abi_region_t *)r)->pfn, regs, p.regs);
    ABI_CHECK(p.regs == regs + 1, "PURGE_ON_FORK: region from before the "
                                  "fork reused");
    if (have_pfn) {
        ABI_CHECK(((abi_region_t *)r)->pfn == abi_pfn(buf), "stale frame");
    }
    ucs_rcache_region_put(p.rcache, r);
    close(pipefd[1]);
    rc = abi_wait(pid);
    ABI_CHECK(rc == 0, "child exit status %d", rc);
    ucs_rcache_destroy(p.rcache);
    ABI_CHECK(p.regs == p.deregs, "regs %ld deregs %ld", p.regs, p.deregs);
    munmap(buf, size);
    return 0;
}

/* --- 7: threads ---------------------------------------------------------- */

typedef struct {
    abi_cache_t *cache;
    char *own;
    char *shared;
    size_t size;
    long iters;
    long errors;
    pthread_barrier_t *barrier;
} abi_thread_t;

static void *abi_thread(void *arg)
{
    abi_thread_t *t = arg;
    ucs_rcache_region_t *r;
    size_t off;
    long i;

    pthread_barrier_wait(t->barrier);
    for (i = 0; i < t->iters; ++i) {
        off = (i % 8) * 64;
        if (abi_get(t->cache->rcache, t->own + off, t->size / 2,
                    PROT_READ | PROT_WRITE, NULL, &r) != UCS_OK) {
            ++t->errors;
            continue;
        }
        if ((r->super.start > (uintptr_t)t->own + off) ||
            (r->super.end < (uintptr_t)t->own + off + t->size / 2)) {
            ++t->errors;
        }
        ucs_rcache_region_put(t->cache->rcache, r);
        if (abi_get(t->cache->rcache, t->shared + off, t->size / 2, PROT_READ,
                    NULL, &r) != UCS_OK) {
            ++t->errors;
            continue;
        }
        if ((r->super.start > (uintptr_t)t->shared + off) ||
            (r->super.end < (uintptr_t)t->shared + off + t->size / 2)) {
            ++t->errors;
        }
        ucs_rcache_region_put(t->cache->rcache, r);
    }
    return NULL;
}

static int case7_threads(long iters)
{
    size_t size  = 16 * page_size;
    char *shared = abi_map(size, 1);
    pthread_barrier_t barrier;
    abi_thread_t t[2];
    pthread_t tid[2];
    abi_cache_t c;
    int i;

    if (abi_create(&c, "abi-threads", 16, 0, 0)) {
        return 1;
    }
    pthread_barrier_init(&barrier, NULL, 2);
    for (i = 0; i < 2; ++i) {
        t[i].cache   = &c;
        t[i].own     = abi_map(size, 2);
        t[i].shared  = shared;
        t[i].size    = size;
        t[i].iters   = iters;
        t[i].errors  = 0;
        t[i].barrier = &barrier;
        ABI_CHECK(pthread_create(&tid[i], NULL, abi_thread, &t[i]) == 0,
                  "pthread_create");
    }
    for (i = 0; i < 2; ++i) {
        pthread_join(tid[i], NULL);
    }
    pthread_barrier_destroy(&barrier);
    printf("  2 threads x %ld x 2 get/put: errors %ld %ld, regs %ld deregs "
           "%ld (before destroy)\n",
           iters, t[0].errors, t[1].errors, c.regs, c.deregs);
    printf("EXPECT-GETS abi-threads %ld\n", 4 * iters);
    ABI_CHECK(t[0].errors + t[1].errors == 0, "get errors");
    ucs_rcache_destroy(c.rcache);
    ABI_CHECK(c.regs == c.deregs, "after destroy: regs %ld deregs %ld", c.regs,
              c.deregs);
    ABI_CHECK(c.corrupt == 0, "user fields changed");
    for (i = 0; i < 2; ++i) {
        munmap(t[i].own, size);
    }
    munmap(shared, size);
    return 0;
}

/* --- 8: bad input -------------------------------------------------------- */

#define ABI_SENTINEL ((ucs_rcache_region_t *)(uintptr_t)0xdeadbeef)

/* One bad get: a negative status, *region_p untouched, 'lines' error lines
 * (-1: not checked). */
static int abi_bad_get(const char *what, ucs_rcache_t *rcache, void *addr,
                       size_t len, int prot, int lines, ucs_status_t expected)
{
    ucs_rcache_region_t *r = ABI_SENTINEL;
    ucs_status_t status;
    int errors;

    abi_capture_begin();
    status = abi_get(rcache, addr, len, prot, NULL, &r);
    errors = abi_capture_end();
    printf("  %s: %s, %d error line(s)\n", what, ucs_status_string(status),
           errors);
    ABI_CHECK(status < 0, "%s: status %d", what, status);
    ABI_CHECK((expected == UCS_OK) || (status == expected),
              "%s: %s, expected %s", what, ucs_status_string(status),
              ucs_status_string(expected));
    ABI_CHECK(r == ABI_SENTINEL, "%s: region_p written on an error", what);
    ABI_CHECK((lines < 0) || (errors == lines), "%s: %d error lines, not %d",
              what, errors, lines);
    return 0;
}

static int case8_bad_input(void)
{
    size_t size = 4 * page_size;
    char *buf   = abi_map(size, 1);
    char *ro    = abi_map(size, 1);
    char *hole  = abi_map(size, 1);
    ucs_rcache_params_t params;
    ucs_rcache_t *rc = (ucs_rcache_t *)(uintptr_t)0xdeadbeef;
    ucs_rcache_region_t *r;
    ucs_status_t status;
    abi_cache_t c;
    int errors;

    if (abi_create(&c, "abi-bad", 4096, 0, 0)) {
        return 1;
    }
    mprotect(ro, size, PROT_READ);
    munmap(hole, size);

    if (abi_bad_get("NULL rcache", NULL, buf, page_size, PROT_READ, 1,
                    UCS_ERR_INVALID_PARAM) ||
        abi_bad_get("NULL address", c.rcache, NULL, page_size, PROT_READ, 1,
                    UCS_ERR_INVALID_PARAM) ||
        abi_bad_get("zero length", c.rcache, buf, 0, PROT_READ, 1,
                    UCS_ERR_INVALID_PARAM) ||
        abi_bad_get("overflowing length", c.rcache, buf,
                    SIZE_MAX - (uintptr_t)buf + 2, PROT_READ, 1,
                    UCS_ERR_INVALID_PARAM) ||
        abi_bad_get("prot 0x100", c.rcache, buf, page_size, PROT_READ | 0x100,
                    1, UCS_ERR_INVALID_PARAM) ||
        abi_bad_get("unmapped range", c.rcache, hole, page_size, PROT_READ, 1,
                    UCS_ERR_INVALID_ADDR) ||
        abi_bad_get("write to read-only", c.rcache, ro, page_size,
                    PROT_READ | PROT_WRITE, 1, UCS_ERR_INVALID_ADDR)) {
        return 1;
    }
    ABI_CHECK(c.regs == 0, "bad gets registered: regs %ld", c.regs);

    /* a failing mem_reg: its error, nothing cached */
    c.fail = 1;
    if (abi_bad_get("failing mem_reg", c.rcache, buf, page_size, PROT_READ, -1,
                    UCS_ERR_IO_ERROR)) {
        return 1;
    }
    c.fail = 0;
    ABI_CHECK(abi_get(c.rcache, buf, page_size, PROT_READ, NULL, &r) == UCS_OK,
              "get after a failed registration");
    ABI_CHECK(c.regs == 1, "regs %ld", c.regs);
    ucs_rcache_region_put(c.rcache, r);
    ucs_rcache_destroy(c.rcache);
    ABI_CHECK(c.regs == c.deregs, "regs %ld deregs %ld", c.regs, c.deregs);

    /* create: NULL params, region_struct_size below the base struct */
    abi_capture_begin();
    status = ucs_rcache_create(NULL, "abi-null", NULL, &rc);
    errors = abi_capture_end();
    printf("  create(NULL params): %s, %d error line(s)\n",
           ucs_status_string(status), errors);
    ABI_CHECK((status < 0) && (errors == 1) &&
                  (rc == (ucs_rcache_t *)(uintptr_t)0xdeadbeef),
              "create(NULL params)");
    abi_params(&params, &c, 4096);
    params.region_struct_size = sizeof(ucs_rcache_region_t) / 2;
    abi_capture_begin();
    status = ucs_rcache_create(&params, "abi-small", NULL, &rc);
    errors = abi_capture_end();
    printf("  create(region_struct_size %zu): %s, %d error line(s)\n",
           params.region_struct_size, ucs_status_string(status), errors);
    ABI_CHECK((status < 0) && (errors == 1) &&
                  (rc == (ucs_rcache_t *)(uintptr_t)0xdeadbeef),
              "create(small region_struct_size)");

    /* UCX_RCACHE_* variables UCX owns (it reports their bad values itself
     * and passes what they say in the params): the cache creates quietly;
     * UCX_RCACHE_DONTFORK is the cache's own: one line, an error */
    setenv("UCX_RCACHE_MAX_REGIONS", "many", 1);
    setenv("UCX_RCACHE_MAX_SIZE", "auto", 1);
    setenv("UCX_RCACHE_MEM_PRIO", "high", 1);
    setenv("UCX_RCACHE_PURGE_ON_FORK", "perhaps", 1);
    setenv("UCX_RCACHE_CHECK_PFN", "-1x", 1);
    setenv("UCX_RCACHE_ADDR_ALIGN", "16", 1);
    abi_capture_begin();
    status = abi_create(&c, "abi-stock-vars", 4096, 0, 0) ? UCS_ERR_IO_ERROR
                                                          : UCS_OK;
    errors = abi_capture_end();
    printf("  create with malformed UCX-owned UCX_RCACHE_*: %s, %d error "
           "line(s)\n",
           ucs_status_string(status), errors);
    ABI_CHECK((status == UCS_OK) && (errors == 0),
              "variables UCX owns reported by the cache");
    ucs_rcache_destroy(c.rcache);
    unsetenv("UCX_RCACHE_MAX_REGIONS");
    unsetenv("UCX_RCACHE_MAX_SIZE");
    unsetenv("UCX_RCACHE_MEM_PRIO");
    unsetenv("UCX_RCACHE_PURGE_ON_FORK");
    unsetenv("UCX_RCACHE_CHECK_PFN");
    unsetenv("UCX_RCACHE_ADDR_ALIGN");
    setenv("UCX_RCACHE_DONTFORK", "sometimes", 1);
    abi_params(&params, &c, 4096);
    rc = (ucs_rcache_t *)(uintptr_t)0xdeadbeef;
    abi_capture_begin();
    status = ucs_rcache_create(&params, "abi-dontfork", NULL, &rc);
    errors = abi_capture_end();
    unsetenv("UCX_RCACHE_DONTFORK");
    printf("  create with UCX_RCACHE_DONTFORK=sometimes: %s, %d error "
           "line(s)\n",
           ucs_status_string(status), errors);
    ABI_CHECK((status == UCS_ERR_INVALID_PARAM) && (errors == 1) &&
                  (rc == (ucs_rcache_t *)(uintptr_t)0xdeadbeef),
              "malformed UCX_RCACHE_DONTFORK");
    munmap(buf, size);
    munmap(ro, size);
    return 0;
}

/* --- 9: caches of Debian's libucs ---------------------------------------- */

typedef ucs_status_t (*abi_create_f)(const ucs_rcache_params_t *, const char *,
                                     ucs_stats_node_t *, ucs_rcache_t **);
typedef void (*abi_destroy_f)(ucs_rcache_t *);
typedef __typeof__(&ucs_rcache_get) abi_get_f;
typedef void (*abi_region_f)(ucs_rcache_t *, ucs_rcache_region_t *);
typedef void (*abi_invalidate_f)(ucs_rcache_t *, ucs_rcache_region_t *,
                                 ucs_rcache_invalidate_comp_func_t, void *);

typedef struct {
    abi_create_f create;
    abi_destroy_f destroy;
    abi_get_f get;
    abi_region_f hold;
    abi_region_f put;
    abi_invalidate_f invalidate;
} abi_api_t;

/* The whole life of a cache created by 'create', driven through 'api'. */
static int abi_stock_cache(const char *name, abi_create_f create,
                           const abi_api_t *api)
{
    size_t size = 16 * page_size;
    char *buf   = abi_map(size, 1);
    ucs_rcache_params_t params;
    ucs_rcache_region_t *r1, *r2;
    abi_cache_t c;
    int comp = 0;

    memset(&c, 0, sizeof(c));
    c.name = name;
    abi_params(&params, &c, 4096);
    ABI_CHECK(create(&params, name, NULL, &c.rcache) == UCS_OK, "create");
    ABI_CHECK(abi_get_with(api->get, c.rcache, buf + 10, 3 * page_size,
                           PROT_READ, NULL, &r1) == UCS_OK,
              "get");
    ABI_CHECK(c.regs == 1, "regs %ld", c.regs);
    if (abi_region_ok(&c, r1, buf + 10, 3 * page_size, 4096)) {
        return 1;
    }
    /* a hit: Debian's get holds the region through ucs_rcache_region_hold,
     * which lands in our library and must reach Debian's */
    ABI_CHECK(abi_get_with(api->get, c.rcache, buf + 20, page_size, PROT_READ,
                           NULL, &r2) == UCS_OK,
              "get");
    ABI_CHECK((r2 == r1) && (c.regs == 1), "hit: regs %ld", c.regs);
    api->hold(c.rcache, r1);
    api->invalidate(c.rcache, r1, abi_comp, &comp);
    api->put(c.rcache, r1);
    api->put(c.rcache, r2);
    ABI_CHECK((comp == 0) && (c.deregs == 0),
              "released while held: callback %d deregs %ld", comp, c.deregs);
    api->put(c.rcache, r1);
    ABI_CHECK((comp == 1) && (c.deregs == 1),
              "after the last put: callback %d deregs %ld", comp, c.deregs);
    ABI_CHECK(abi_get_with(api->get, c.rcache, buf + 10, page_size, PROT_READ,
                           NULL, &r1) == UCS_OK,
              "get");
    ABI_CHECK(c.regs == 2, "invalidated region reused: regs %ld", c.regs);
    api->put(c.rcache, r1);
    /* its unmap events come from our libucm */
    munmap(buf, size);
    buf = abi_map(size, 2);
    ABI_CHECK(abi_get_with(api->get, c.rcache, buf, page_size, PROT_READ, NULL,
                           &r1) == UCS_OK,
              "get");
    api->put(c.rcache, r1);
    api->destroy(c.rcache);
    ABI_CHECK(c.regs == c.deregs, "after destroy: regs %ld deregs %ld", c.regs,
              c.deregs);
    ABI_CHECK(c.corrupt == 0, "user fields changed");
    printf("  %s: regs %ld deregs %ld, callback once\n", name, c.regs,
           c.deregs);
    munmap(buf, size);
    return 0;
}

/* max_regions 4 on a cache of libucs: ten distinct unused regions leave at
 * most four registered, whichever library's put the caller reaches (libucs
 * keeps its LRU list in its put). */
static int abi_stock_lru(const char *name, abi_create_f create,
                         const abi_api_t *api)
{
    const int count = 10;
    size_t size     = 2 * count * page_size;
    char *buf       = abi_map(size, 1);
    ucs_rcache_params_t params;
    ucs_rcache_region_t *r;
    abi_cache_t c;
    int i;

    memset(&c, 0, sizeof(c));
    c.name = name;
    abi_params(&params, &c, 4096);
    params.max_regions = 4;
    ABI_CHECK(create(&params, name, NULL, &c.rcache) == UCS_OK, "create");
    for (i = 0; i < count; ++i) {
        ABI_CHECK(abi_get_with(api->get, c.rcache, buf + 2 * i * page_size,
                               page_size, PROT_READ, NULL, &r) == UCS_OK,
                  "get %d", i);
        api->put(c.rcache, r);
    }
    printf("  %s: max_regions 4: regs %ld deregs %ld\n", name, c.regs,
           c.deregs);
    /* also through our put: it hands a libucs cache's put on whole, so
     * libucs's LRU list keeps the region */
    ABI_CHECK(c.regs - c.deregs <= 4, "%s: max_regions 4, %ld registered", name,
              c.regs - c.deregs);
    api->destroy(c.rcache);
    ABI_CHECK(c.regs == c.deregs, "after destroy: regs %ld deregs %ld", c.regs,
              c.deregs);
    munmap(buf, size);
    return 0;
}

static int case9_stock_cache(void)
{
    static const abi_api_t plain = {
        ucs_rcache_create,     ucs_rcache_destroy,
        ucs_rcache_get,        ucs_rcache_region_hold,
        ucs_rcache_region_put, ucs_rcache_region_invalidate};
    void *handle = dlopen("libucs.so.0", RTLD_NOW | RTLD_NOLOAD);
    abi_api_t stock;
    Dl_info info;

    ABI_CHECK(handle != NULL, "libucs.so.0 not loaded: %s", dlerror());
    stock.create  = (abi_create_f)dlsym(handle, "ucs_rcache_create");
    stock.destroy = (abi_destroy_f)dlsym(handle, "ucs_rcache_destroy");
    stock.get     = (abi_get_f)dlsym(handle, "ucs_rcache_get");
    stock.hold    = (abi_region_f)dlsym(handle, "ucs_rcache_region_hold");
    stock.put     = (abi_region_f)dlsym(handle, "ucs_rcache_region_put");
    stock.invalidate =
        (abi_invalidate_f)dlsym(handle, "ucs_rcache_region_invalidate");
    ABI_CHECK(stock.create && stock.destroy && stock.get && stock.hold &&
                  stock.put && stock.invalidate,
              "libucs symbols");
    ABI_CHECK((dladdr((void *)stock.create, &info) != 0) &&
                  (strstr(info.dli_fname, "libucs.so") != NULL) &&
                  ((void *)stock.create != (void *)ucs_rcache_create),
              "libucs's ucs_rcache_create is not its own");
    printf("  libucs's own ucs_rcache_create -> %s\n", info.dli_fname);

    if (abi_stock_cache("abi-stock-own-symbols", stock.create, &stock) ||
        abi_stock_cache("abi-stock-preloaded-symbols", stock.create, &plain)) {
        return 1;
    }
    if (abi_stock_lru("abi-stock-lru-own-symbols", stock.create, &stock) ||
        abi_stock_lru("abi-stock-lru-preloaded-symbols", stock.create,
                      &plain)) {
        return 1;
    }
    dlclose(handle);
    return 0;
}

/* ------------------------------------------------------------------------- */

int main(void)
{
    const char *env = getenv("COMPAT_ABI_ITERS");
    long iters      = (env != NULL) ? atol(env) : 100000;
    int fails       = 0;
    char *probe;

    setvbuf(stdout, NULL, _IOLBF, 0);
    page_size = sysconf(_SC_PAGESIZE);
    probe     = abi_map(page_size, 1);
    have_pfn  = abi_pfn(probe) != 0;
    munmap(probe, page_size);
    printf("page frame numbers %s\n",
           have_pfn ? "readable"
                    : "not readable (not root): those checks are skipped");

#define ABI_RUN(_name, _call)                                                  \
    do {                                                                       \
        printf("--- %s\n", _name);                                             \
        if (_call) {                                                           \
            ++fails;                                                           \
        }                                                                      \
    } while (0)

    printf("--- 0: preload\n");
    if (case0_preload()) {
        return 1; /* nothing else means anything */
    }
    ABI_RUN("1+2: UCP-like caches, get/hold/put/invalidate",
            case12_basic("abi-ucp16", 16) | case12_basic("abi-ucp4k", 4096));
    abi_get_align = 4096;
    ABI_RUN("1: max_regions 4", case1_lru());
    ABI_RUN("3: unmaps", case3_unmap());
    ABI_RUN("4: mem_reg using another cache", case4_nested());
    ABI_RUN("5: destroy with a held region", case5_destroy_held());
    ABI_RUN("6: fork", case6_fork());
    ABI_RUN("7: threads", case7_threads(iters));
    ABI_RUN("8: bad input", case8_bad_input());
    ABI_RUN("9: caches of Debian's libucs", case9_stock_cache());

    printf("EXPECT-STATS abi-ucp16 abi-ucp4k abi-lru4 abi-unmap abi-md-a "
           "abi-md-b abi-destroy-held abi-fork abi-fork-purge abi-threads "
           "abi-bad\n");
    printf("%s: %d case(s) failed\n", fails ? "FAIL" : "PASS", fails);
    return fails ? 1 : 0;
}
