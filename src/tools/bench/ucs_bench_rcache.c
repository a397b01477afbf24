/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ucs_bench_rcache: registration cache speed, ours against Debian's stock
 * UCX 1.13 rcache and against no cache (register on every use), with the
 * same fake registration cost model, in one run.
 *
 * Usage: ucs_bench_rcache [--quick] [--ours PATH] [--abi PATH] [--ucx PATH]
 *   --ours PATH  our libucs.so.0 (env UCS_BENCH_OURS; default: the build
 *                tree's src/ucs/.libs/libucs.so.0)
 *   --abi PATH   our libucm_rcache.so.0, the same cache behind UCX 1.13.1's
 *                ABI, its caches created by code compiled against Debian's
 *                headers (ucs_bench_rcache_stock.c) as a stock UCX caller
 *                would (env UCS_BENCH_ABI; default: the build tree's);
 *                the column is left out when Debian's headers were missing
 *   --ucx PATH   stock libucs.so.0 (env UCS_BENCH_UCX; default
 *                /usr/lib/x86_64-linux-gnu/libucs.so.0)
 *   --quick      fewer regions and iterations
 *
 * Both libraries have the soname libucs.so.0, so each implementation runs
 * in its own forked worker that dlopen()s it; workers report "name value"
 * lines through a pipe and the driver prints one table.  Every timing is
 * the best of a few rounds (the machine may be shared); single-thread
 * rows time the thread's CPU time, the Mops/s rows wall-clock time.
 *
 * Cost model: mem_reg spins UCS_BENCH_REG_NS, mem_dereg UCS_BENCH_DEREG_NS.
 * "none" calls them directly for every get+put.
 */
#include "bench_count.h"
#include "tools_env.h"
#include "ucs_bench_rcache.h"

#include <common/ucs_env.h>
#include <ucm/api/ucm_ext.h>
#include <ucs/memory/rcache.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef UCS_BENCH_OURS_BUILD
#define UCS_BENCH_OURS_BUILD "src/ucs/.libs/libucs.so.0"
#endif
#define UCS_BENCH_UCX_DEFAULT "/usr/lib/x86_64-linux-gnu/libucs.so.0"
#define UCS_BENCH_REG_NS      300
#define UCS_BENCH_DEREG_NS    100
#define UCS_BENCH_PAGE        4096ul
#define UCS_BENCH_VM_UNMAPPED (1 << 17)
#define UCS_BENCH_ROUNDS      9
#define UCS_BENCH_MAX_RESULTS 64

typedef struct {
    ucs_status_t (*create)(const ucs_rcache_params_t *, const char *, void *,
                           ucs_rcache_t **);
    void (*destroy)(ucs_rcache_t *);
    ucs_status_t (*get)(ucs_rcache_t *, void *, size_t, int, void *,
                        ucs_rcache_region_t **);
    void (*put)(ucs_rcache_t *, ucs_rcache_region_t *);
} bench_api_t;

typedef struct {
    char name[128];
    double value[4]; /* ours, ucx, none, abi */
    int valid[4];
} bench_result_t;

#define UCS_BENCH_IMPLS 4
static const char *bench_impl_names[] = {"ours", "ucx", "none", "abi"};
static bench_api_t bench_api;
static void *bench_abi_create; /* abi: the library's create */
static int bench_impl;         /* 0 ours, 1 ucx, 2 none, 3 abi */
static int bench_quick;
static int bench_counting; /* --count: the cost model costs nothing */
static FILE *bench_out;

static double bench_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* The calling thread's CPU time: single-thread timings use it, so that
 * time the machine gives to other work does not count (the fake
 * registration cost below stays wall-clock time). */
static double bench_cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void bench_spin_ns(double ns)
{
    double end = bench_now_ns() + ns;

    if (bench_counting) {
        return; /* instructions that depend on time are not counted */
    }
    while (bench_now_ns() < end) {
    }
}

void bench_cost_reg(void)
{
    bench_spin_ns(UCS_BENCH_REG_NS);
}

void bench_cost_dereg(void)
{
    bench_spin_ns(UCS_BENCH_DEREG_NS);
}

static ucs_status_t bench_mem_reg(void *context, ucs_rcache_t *rcache,
                                  void *arg, ucs_rcache_region_t *region,
                                  uint16_t flags)
{
    bench_cost_reg();
    return UCS_OK;
}

static void bench_mem_dereg(void *context, ucs_rcache_t *rcache,
                            ucs_rcache_region_t *region)
{
    bench_cost_dereg();
}

static const ucs_rcache_ops_t bench_ops = {bench_mem_reg, bench_mem_dereg,
                                           NULL};

/* "none": a registration per use */
static ucs_rcache_region_t bench_none_region;

static ucs_status_t bench_none_create(const ucs_rcache_params_t *params,
                                      const char *name, void *stats,
                                      ucs_rcache_t **rcache_p)
{
    *rcache_p = (ucs_rcache_t *)&bench_none_region;
    return UCS_OK;
}

static void bench_none_destroy(ucs_rcache_t *rcache)
{
}

static ucs_status_t bench_none_get(ucs_rcache_t *rcache, void *addr, size_t len,
                                   int prot, void *arg,
                                   ucs_rcache_region_t **region_p)
{
    bench_mem_reg(NULL, rcache, arg, &bench_none_region, 0);
    *region_p = &bench_none_region;
    return UCS_OK;
}

static void bench_none_put(ucs_rcache_t *rcache, ucs_rcache_region_t *region)
{
    bench_mem_dereg(NULL, rcache, region);
}

static void bench_report(const char *name, double value)
{
    fprintf(bench_out, "%s %.3f\n", name, value);
    fflush(bench_out);
}

static ucs_rcache_t *bench_create(unsigned long max_regions)
{
    ucs_rcache_params_t params;
    ucs_rcache_t *rcache;

#ifdef UCS_BENCH_HAVE_STOCK_ABI
    if (bench_impl == 3) {
        if (bench_stock_create(bench_abi_create, max_regions,
                               (void **)&rcache) != 0) {
            fprintf(stderr, "abi: rcache create failed\n");
            exit(3);
        }
        return rcache;
    }
#endif
    memset(&params, 0, sizeof(params));
    params.region_struct_size = sizeof(ucs_rcache_region_t);
    params.alignment          = UCS_BENCH_PAGE;
    params.max_alignment      = UCS_BENCH_PAGE;
    params.ucm_events         = UCS_BENCH_VM_UNMAPPED;
    params.ucm_event_priority = 1000;
    params.ops                = &bench_ops;
    params.max_regions        = max_regions;
    params.max_size           = SIZE_MAX;
    params.max_unreleased     = SIZE_MAX;
    if (bench_api.create(&params, "bench", NULL, &rcache) != UCS_OK) {
        fprintf(stderr, "%s: rcache create failed\n",
                bench_impl_names[bench_impl]);
        exit(3);
    }
    return rcache;
}

static void *bench_map(size_t npages)
{
    void *p = mmap(NULL, npages * UCS_BENCH_PAGE, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

    if (p == MAP_FAILED) {
        perror("mmap");
        exit(3);
    }
    return p;
}

static inline void bench_get_put(ucs_rcache_t *rcache, void *addr, size_t len)
{
    ucs_rcache_region_t *region;

    if (bench_api.get(rcache, addr, len, PROT_READ | PROT_WRITE, NULL,
                      &region) != UCS_OK) {
        fprintf(stderr, "get failed\n");
        exit(3);
    }
    bench_api.put(rcache, region);
}

static long bench_rss_kb(void)
{
    long size, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &size, &rss) != 2) {
            rss = 0;
        }
        fclose(f);
    }
    return rss * (UCS_BENCH_PAGE / 1024);
}

/* xorshift64 step, then a number uniform in [0, n) (n < 2^32) by
 * multiply-shift instead of a division */
static inline unsigned long bench_random_below(uint64_t *x, unsigned long n)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return ((*x >> 32) * n) >> 32;
}

/* random get+put over n regions at every other page */
static void bench_random_hits(unsigned long n, const char *name)
{
    unsigned long iters = bench_quick ? 70000 : 700000;
    char *area          = bench_map(2 * n);
    ucs_rcache_t *rcache;
    uint64_t x  = 88172645463325252ull;
    double best = 1e30, t;
    unsigned long i, r;
    long rss0, rss1;
    char key[64];

    /* memory the earlier rows freed but malloc kept would be reused here
     * without counting: given back first, so that each implementation's
     * row is what its cache takes from the system */
    malloc_trim(0);
    rss0   = bench_rss_kb();
    rcache = bench_create(~0ul);
    for (i = 0; i < n; ++i) {
        bench_get_put(rcache, area + 2 * i * UCS_BENCH_PAGE, 64);
    }
    for (r = 0; r < UCS_BENCH_ROUNDS; ++r) {
        t = bench_cpu_ns();
        for (i = 0; i < iters; ++i) {
            bench_get_put(
                rcache,
                area + 2 * bench_random_below(&x, n) * UCS_BENCH_PAGE + 8, 64);
        }
        t    = (bench_cpu_ns() - t) / iters;
        best = (t < best) ? t : best;
    }
    /* after the hits: what lookups touch (hint tables) counts too */
    rss1 = bench_rss_kb();
    if ((n >= 100000) && (bench_impl != 2)) {
        snprintf(key, sizeof(key), "memory/region %lu (bytes)", n);
        bench_report(key, (rss1 - rss0) * 1024.0 / n);
    }
    bench_report(name, best);
    bench_api.destroy(rcache);
    munmap(area, 2 * n * UCS_BENCH_PAGE);
}

/* The machine's floor for a hit on one region: the two atomic read-modify-
 * writes a get+put must make on the region's reference count (a
 * compare-and-swap that takes a reference only from a live count, then a
 * fetch-and-sub), nothing else.  Reported in the "none" column. */
static void bench_atomic_floor(void)
{
    unsigned long iters               = bench_quick ? 3000000 : 30000000;
    static volatile uint32_t refcount = 1;
    double best                       = 1e30, t;
    unsigned long i, r;
    uint32_t old;

    for (r = 0; r < UCS_BENCH_ROUNDS; ++r) {
        t = bench_cpu_ns();
        for (i = 0; i < iters; ++i) {
            old = refcount;
            while (!__atomic_compare_exchange_n(&refcount, &old, old + 1, 0,
                                                __ATOMIC_ACQUIRE,
                                                __ATOMIC_RELAXED)) {
            }
            __atomic_fetch_sub(&refcount, 1, __ATOMIC_RELEASE);
        }
        t    = (bench_cpu_ns() - t) / iters;
        best = (t < best) ? t : best;
    }
    bench_report("floor: hold+release atomics, 1 region (ns)", best);
}

/* The machine's floor for a random hit over n regions: one dependent load
 * of a random cache line in n x 128 bytes (about the memory the cache
 * itself holds per region), a pointer chase along a random cycle (Sattolo)
 * so that no load can start before the previous one ends.  A hit over
 * many regions needs at least two such loads (the index leaf, then the
 * region's reference count).  Reported in the "none" column, ns per load. */
static void bench_memory_floor(unsigned long n, const char *name)
{
    unsigned long iters = bench_quick ? 70000 : 700000;
    const size_t slot   = 128;
    uint64_t x          = 0x9e3779b97f4a7c15ull;
    double best         = 1e30, t;
    unsigned long i, j, r;
    uint32_t *perm, tmp;
    char *buf;
    void **p;

    buf  = malloc(n * slot);
    perm = malloc(n * sizeof(*perm));
    if ((buf == NULL) || (perm == NULL)) {
        fprintf(stderr, "memory floor: out of memory\n");
        exit(3);
    }
    for (i = 0; i < n; ++i) {
        perm[i] = i;
    }
    for (i = n - 1; i > 0; --i) { /* Sattolo: one cycle through all */
        j       = bench_random_below(&x, i);
        tmp     = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    for (i = 0; i < n; ++i) {
        *(void **)(buf + perm[i] * slot) = buf + perm[(i + 1) % n] * slot;
    }
    p = (void **)buf;
    for (r = 0; r < UCS_BENCH_ROUNDS; ++r) {
        t = bench_cpu_ns();
        for (i = 0; i < iters; ++i) {
            p = (void **)*p;
        }
        t    = (bench_cpu_ns() - t) / iters;
        best = (t < best) ? t : best;
    }
    if (p == NULL) { /* keeps the chase */
        fprintf(stderr, "memory floor: broken chain\n");
    }
    bench_report(name, best);
    free(perm);
    free(buf);
}

typedef struct {
    ucs_rcache_t *rcache;
    char *addr;
    unsigned long iters;
    double cpu_ns; /* out: the thread's CPU time */
} bench_thread_arg_t;

static void *bench_thread(void *p)
{
    bench_thread_arg_t *arg = p;
    double cpu              = bench_cpu_ns();
    unsigned long i;

    for (i = 0; i < arg->iters; ++i) {
        bench_get_put(arg->rcache, arg->addr, 64);
    }
    arg->cpu_ns = bench_cpu_ns() - cpu;
    return NULL;
}

/* aggregate Mops/s of nthreads on one shared or on private regions, and
 * the threads' CPU time per operation (on a machine shared with other
 * work the two threads may not get two cores; CPU time per operation
 * still shows what they cost each other: 2 threads scale by
 * 2 x cpu_1 / cpu_2 when each has a core) */
static double bench_threads(ucs_rcache_t *rcache, char *area, int nthreads,
                            int shared, double *cpu_per_op)
{
    unsigned long iters = bench_quick ? 100000 : 1000000;
    bench_thread_arg_t args[2];
    pthread_t threads[2];
    double best = 0, best_cpu = 1e30, t, rate, cpu;
    int r, i;

    for (r = 0; r < UCS_BENCH_ROUNDS; ++r) {
        for (i = 0; i < nthreads; ++i) {
            args[i].rcache = rcache;
            args[i].addr   = area + (shared ? 0 : 2 * i * UCS_BENCH_PAGE);
            args[i].iters  = iters;
        }
        t = bench_now_ns();
        for (i = 0; i < nthreads; ++i) {
            pthread_create(&threads[i], NULL, bench_thread, &args[i]);
        }
        for (i = 0; i < nthreads; ++i) {
            pthread_join(threads[i], NULL);
        }
        t    = bench_now_ns() - t;
        rate = nthreads * iters / t * 1e3;
        best = (rate > best) ? rate : best;
        for (cpu = 0, i = 0; i < nthreads; ++i) {
            cpu += args[i].cpu_ns;
        }
        cpu /= nthreads * iters;
        best_cpu = (cpu < best_cpu) ? cpu : best_cpu;
    }
    *cpu_per_op = best_cpu;
    return best;
}

static void bench_scaling(void)
{
    char *area           = bench_map(4);
    ucs_rcache_t *rcache = bench_create(~0ul);
    double one, shared, priv, cpu_one, cpu_shared, cpu_priv;

    bench_get_put(rcache, area, 64);
    bench_get_put(rcache, area + 2 * UCS_BENCH_PAGE, 64);
    one    = bench_threads(rcache, area, 1, 1, &cpu_one);
    shared = bench_threads(rcache, area, 2, 1, &cpu_shared);
    priv   = bench_threads(rcache, area, 2, 0, &cpu_priv);
    bench_report("1 thread (Mops/s)", one);
    bench_report("2 threads, one region (Mops/s)", shared);
    bench_report("2 threads, private regions (Mops/s)", priv);
    bench_report("1 thread, CPU per op (ns)", cpu_one);
    bench_report("2 threads, one region, CPU per op (ns)", cpu_shared);
    bench_report("2 threads, private, CPU per op (ns)", cpu_priv);
    bench_api.destroy(rcache);
    munmap(area, 4 * UCS_BENCH_PAGE);
}

/* every get misses and evicts the least recently used region; each round
 * also times the bare cost model (mem_reg + mem_dereg per iteration) in
 * this worker, so that the overhead is a difference within one run */
static void bench_miss_evict(void)
{
    unsigned long n = 4096, iters = bench_quick ? 7000 : 70000;
    char *area           = bench_map(2 * n);
    ucs_rcache_t *rcache = bench_create(1000);
    double best = 1e30, bare = 1e30, t;
    unsigned long i, r;

    for (i = 0; i < n; ++i) {
        bench_get_put(rcache, area + 2 * i * UCS_BENCH_PAGE, 64);
    }
    for (r = 0; r < UCS_BENCH_ROUNDS; ++r) {
        t = bench_cpu_ns();
        for (i = 0; i < iters; ++i) {
            bench_get_put(rcache, area + 2 * (i % n) * UCS_BENCH_PAGE, 64);
        }
        t    = (bench_cpu_ns() - t) / iters;
        best = (t < best) ? t : best;

        t = bench_cpu_ns();
        for (i = 0; i < iters; ++i) {
            bench_mem_reg(NULL, rcache, NULL, &bench_none_region, 0);
            bench_mem_dereg(NULL, rcache, &bench_none_region);
        }
        t    = (bench_cpu_ns() - t) / iters;
        bare = (t < bare) ? t : bare;
    }
    bench_report("miss + LRU eviction (ns)", best);
    if (bench_impl != 2) {
        bench_report("miss overhead over the cost model (ns)", best - bare);
    }
    bench_api.destroy(rcache);
    munmap(area, 2 * n * UCS_BENCH_PAGE);
}

/* munmap of an area holding n cached regions, per region, over empty */
static void bench_munmap(unsigned long n, const char *name)
{
    ucs_rcache_t *rcache = bench_create(~0ul);
    double best = 1e30, base = 1e30, t;
    unsigned long i, r;
    char *area;

    for (r = 0; r < UCS_BENCH_ROUNDS; ++r) {
        area = bench_map(2 * n);
        t    = bench_cpu_ns();
        munmap(area, 2 * n * UCS_BENCH_PAGE);
        t    = bench_cpu_ns() - t;
        base = (t < base) ? t : base;

        area = bench_map(2 * n);
        for (i = 0; i < n; ++i) {
            bench_get_put(rcache, area + 2 * i * UCS_BENCH_PAGE, 64);
        }
        t = bench_cpu_ns();
        munmap(area, 2 * n * UCS_BENCH_PAGE);
        t    = bench_cpu_ns() - t;
        best = (t < best) ? t : best;
        /* let the cache release them before the next round */
        area = bench_map(1);
        bench_get_put(rcache, area, 64);
        munmap(area, UCS_BENCH_PAGE);
    }
    bench_report(name, (best - base) / n);
    bench_api.destroy(rcache);
}

static void bench_load_api(const char *lib)
{
    void *handle;

    if (bench_impl == 2) {
        bench_api.create  = bench_none_create;
        bench_api.destroy = bench_none_destroy;
        bench_api.get     = bench_none_get;
        bench_api.put     = bench_none_put;
    } else {
        handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        if (handle == NULL) {
            fprintf(stderr, "%s: %s\n", bench_impl_names[bench_impl],
                    dlerror());
            exit(3);
        }
        bench_api.create  = dlsym(handle, "ucs_rcache_create");
        bench_api.destroy = dlsym(handle, "ucs_rcache_destroy");
        bench_api.get     = dlsym(handle, "ucs_rcache_get");
        bench_api.put     = dlsym(handle, "ucs_rcache_region_put");
        bench_abi_create  = (void *)bench_api.create;
        if (!bench_api.create || !bench_api.destroy || !bench_api.get ||
            !bench_api.put) {
            fprintf(stderr, "%s: ucs_rcache_* not found in %s\n",
                    bench_impl_names[bench_impl], lib);
            exit(3);
        }
    }
}

static void bench_worker(const char *lib)
{
    char *area;
    ucs_rcache_t *rcache;
    double best = 1e30, t;
    unsigned long i, r, iters = bench_quick ? 300000 : 3000000;

    bench_load_api(lib);
    if (bench_impl == 2) {
        iters /= 100;
    }
    area   = bench_map(2);
    rcache = bench_create(~0ul);
    bench_get_put(rcache, area, 64);
    for (r = 0; r < UCS_BENCH_ROUNDS; ++r) {
        t = bench_cpu_ns();
        for (i = 0; i < iters; ++i) {
            bench_get_put(rcache, area + 8, 64);
        }
        t    = (bench_cpu_ns() - t) / iters;
        best = (t < best) ? t : best;
    }
    bench_report("hit get+put, 1 region (ns)", best);
    bench_api.destroy(rcache);
    munmap(area, 2 * UCS_BENCH_PAGE);

    bench_random_hits(10000, "random hits, 10k regions (ns)");
    bench_random_hits(100000, "random hits, 100k regions (ns)");
    if (bench_impl != 2) {
        bench_random_hits(bench_quick ? 200000 : 1000000,
                          bench_quick ? "random hits, 200k regions (ns)"
                                      : "random hits, 1M regions (ns)");
    }
    if (bench_impl == 2) {
        bench_atomic_floor();
        bench_memory_floor(10000, "floor: 1 random load, 10k x 128 B (ns)");
        bench_memory_floor(100000, "floor: 1 random load, 100k x 128 B (ns)");
        bench_memory_floor(bench_quick ? 200000 : 1000000,
                           bench_quick
                               ? "floor: 1 random load, 200k x 128 B (ns)"
                               : "floor: 1 random load, 1M x 128 B (ns)");
    }
    bench_scaling();
    bench_miss_evict();
    if (bench_impl != 2) {
        bench_munmap(1000, "munmap per cached region, 1k (ns)");
        bench_munmap(10000, "munmap per cached region, 10k (ns)");
    }
}

/* ------------------------------------------------------------------------ */
/* Counting mode (--count): instructions and misses per operation           */
/* ------------------------------------------------------------------------ */

#define UCS_BENCH_COUNT_HITS  50000 /* counted operations per hit row */
#define UCS_BENCH_COUNT_MISS  5000
#define UCS_BENCH_COUNT_UNMAP 10000 /* regions in the munmap row */
#define UCS_BENCH_TARGET_HIT  40.0
#define UCS_BENCH_TARGET_MISS 0.6

/*
 * The limit of a hit, counted in the "none" worker: the least a cache can
 * do, here for regions at known pages of one area: one load of the index
 * slot, the bounds check, the reference count's compare-and-swap, and its
 * release in put; each through a function pointer as the real API is.
 */
typedef struct {
    uintptr_t start, end;
    uint32_t refcount;
} __attribute__((aligned(64))) bench_floor_region_t;

static bench_floor_region_t **bench_floor_table, *bench_floor_regions;
static uintptr_t bench_floor_base;
static size_t bench_floor_pages, bench_floor_used;

static void bench_floor_setup(char *area, size_t npages)
{
    bench_floor_base  = (uintptr_t)area;
    bench_floor_pages = npages;
    bench_floor_used  = 0;
    bench_floor_table = calloc(npages, sizeof(*bench_floor_table));
    bench_floor_regions =
        aligned_alloc(64, npages * sizeof(bench_floor_region_t));
    if ((bench_floor_table == NULL) || (bench_floor_regions == NULL)) {
        fprintf(stderr, "floor cache: out of memory\n");
        exit(3);
    }
}

static void bench_floor_destroy(ucs_rcache_t *rcache)
{
    free(bench_floor_table);
    free(bench_floor_regions);
    bench_floor_table   = NULL;
    bench_floor_regions = NULL;
}

static ucs_status_t bench_floor_get(ucs_rcache_t *rcache, void *addr,
                                    size_t len, int prot, void *arg,
                                    ucs_rcache_region_t **region_p)
{
    uintptr_t start = (uintptr_t)addr,
              page  = (start - bench_floor_base) / UCS_BENCH_PAGE;
    bench_floor_region_t *region;
    uint32_t old;

    if (page >= bench_floor_pages) {
        return UCS_ERR_INVALID_PARAM;
    }
    region = bench_floor_table[page];
    if (region == NULL) { /* setup only: register the page */
        region                  = &bench_floor_regions[bench_floor_used++];
        region->start           = bench_floor_base + page * UCS_BENCH_PAGE;
        region->end             = region->start + UCS_BENCH_PAGE;
        region->refcount        = 1;
        bench_floor_table[page] = region;
    }
    if ((start < region->start) || (start + len > region->end)) {
        return UCS_ERR_INVALID_PARAM;
    }
    old = region->refcount;
    while (!__atomic_compare_exchange_n(&region->refcount, &old, old + 1, 0,
                                        __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
    }
    *region_p = (ucs_rcache_region_t *)region;
    return UCS_OK;
}

static void bench_floor_put(ucs_rcache_t *rcache, ucs_rcache_region_t *region)
{
    __atomic_fetch_sub(&((bench_floor_region_t *)region)->refcount, 1,
                       __ATOMIC_RELEASE);
}

/* The harness alone: the loop and two indirect calls that do nothing;
 * subtracted from every hit row. */
static ucs_status_t bench_empty_get(ucs_rcache_t *rcache, void *addr,
                                    size_t len, int prot, void *arg,
                                    ucs_rcache_region_t **region_p)
{
    *region_p = &bench_none_region;
    return UCS_OK;
}

static void bench_empty_put(ucs_rcache_t *rcache, ucs_rcache_region_t *region)
{
}

typedef struct {
    ucs_rcache_t *rcache;
    char *area;
    unsigned long n;
    unsigned long next; /* miss row: the next region */
    uint64_t x;
} bench_count_arg_t;

static void bench_count_loop_hit(void *p, long iters)
{
    bench_count_arg_t *arg = p;
    long i;

    for (i = 0; i < iters; ++i) {
        bench_get_put(arg->rcache, arg->area + 8, 64);
    }
}

static void bench_count_loop_random(void *p, long iters)
{
    bench_count_arg_t *arg = p;
    long i;

    for (i = 0; i < iters; ++i) {
        bench_get_put(
            arg->rcache,
            arg->area +
                2 * bench_random_below(&arg->x, arg->n) * UCS_BENCH_PAGE + 8,
            64);
    }
}

static void bench_count_loop_miss(void *p, long iters)
{
    bench_count_arg_t *arg = p;
    long i;

    for (i = 0; i < iters; ++i) {
        bench_get_put(arg->rcache, arg->area + 2 * arg->next * UCS_BENCH_PAGE,
                      64);
        arg->next = (arg->next + 1 == arg->n) ? 0 : arg->next + 1;
    }
}

/* the same loop around the bare cost model */
static void bench_count_loop_model(void *p, long iters)
{
    bench_count_arg_t *arg = p;
    long i;

    for (i = 0; i < iters; ++i) {
        bench_mem_reg(NULL, arg->rcache, NULL, &bench_none_region, 0);
        bench_mem_dereg(NULL, arg->rcache, &bench_none_region);
        arg->next = (arg->next + 1 == arg->n) ? 0 : arg->next + 1;
    }
}

/* Hits on n regions: key with the API as loaded, in "none" the harness
 * (key "harness...") and the floor cache (key itself) */
static void bench_count_hits(unsigned long n, const char *key)
{
    bench_count_arg_t arg = {NULL, NULL, n, 0, 88172645463325252ull};
    void (*loop)(void *, long) =
        (n == 1) ? bench_count_loop_hit : bench_count_loop_random;
    char name[64];
    unsigned long i;

    arg.area = bench_map(2 * n);
    if (bench_impl == 2) {
        bench_api.get = bench_empty_get;
        bench_api.put = bench_empty_put;
        snprintf(name, sizeof(name), "harness%s", key + 3);
        bench_count_row_arg(name, loop, &arg, UCS_BENCH_COUNT_HITS);
        bench_floor_setup(arg.area, 2 * n);
        bench_api.get     = bench_floor_get;
        bench_api.put     = bench_floor_put;
        bench_api.destroy = bench_floor_destroy;
        arg.x             = 88172645463325252ull;
    }
    arg.rcache = bench_create(~0ul);
    for (i = 0; i < n; ++i) {
        bench_get_put(arg.rcache, arg.area + 2 * i * UCS_BENCH_PAGE, 64);
    }
    bench_count_row_arg(key, loop, &arg, UCS_BENCH_COUNT_HITS);
    bench_api.destroy(arg.rcache);
    munmap(arg.area, 2 * n * UCS_BENCH_PAGE);
}

/* Every get misses and evicts the least recently used region (as
 * bench_miss_evict); "model" is the same loop around the bare cost model */
static void bench_count_miss(void)
{
    bench_count_arg_t arg = {NULL, NULL, 4096, 0, 0};
    unsigned long i;

    arg.area   = bench_map(2 * arg.n);
    arg.rcache = bench_create(1000);
    for (i = 0; i < arg.n; ++i) {
        bench_get_put(arg.rcache, arg.area + 2 * i * UCS_BENCH_PAGE, 64);
    }
    bench_count_row_arg("miss", bench_count_loop_miss, &arg,
                        UCS_BENCH_COUNT_MISS);
    bench_count_row_arg("model", bench_count_loop_model, &arg,
                        UCS_BENCH_COUNT_MISS);
    bench_api.destroy(arg.rcache);
    munmap(arg.area, 2 * arg.n * UCS_BENCH_PAGE);
}

/* munmap of an area with n cached regions, and the next get (a cache may
 * leave the invalidation to it), over the same for an empty area */
static void bench_count_munmap(unsigned long n)
{
    ucs_rcache_t *rcache = bench_create(~0ul);
    char *area, *one = bench_map(2);
    unsigned long i;
    int pass;

    bench_get_put(rcache, one, 64);
    for (pass = 0; pass < 2; ++pass) { /* the first one warms */
        area = bench_map(2 * n);
        bench_count_begin();
        munmap(area, 2 * n * UCS_BENCH_PAGE);
        bench_get_put(rcache, one, 64);
        if (pass == 1) {
            bench_count_end("unmap_empty", n);
        } else {
            bench_count_end("warm_empty", n);
        }
        area = bench_map(2 * n);
        for (i = 0; i < n; ++i) {
            bench_get_put(rcache, area + 2 * i * UCS_BENCH_PAGE, 64);
        }
        bench_count_begin();
        munmap(area, 2 * n * UCS_BENCH_PAGE);
        bench_get_put(rcache, one, 64);
        bench_count_end((pass == 1) ? "unmap" : "warm_unmap", n);
    }
    bench_api.destroy(rcache);
    munmap(one, 2 * UCS_BENCH_PAGE);
}

static void bench_count_worker(const char *lib)
{
    bench_load_api(lib);
    bench_count_hits(1, "hit1");
    bench_load_api(lib);
    bench_count_hits(10000, "hit10k");
    bench_load_api(lib);
    bench_count_hits(100000, "hit100k");
    if (bench_impl != 2) {
        bench_count_miss();
        bench_count_munmap(UCS_BENCH_COUNT_UNMAP);
    }
}

/* The figures of every worker, by dump name */
typedef struct {
    char key[32];
    bench_count_t value[UCS_BENCH_IMPLS];
    int valid[UCS_BENCH_IMPLS];
} bench_count_result_t;

typedef struct {
    bench_count_result_t rows[16];
    unsigned nrows;
    int impl;
} bench_count_table_t;

static void bench_count_store(void *p, const char *key,
                              const bench_count_t *count)
{
    bench_count_table_t *table = p;
    unsigned i;

    for (i = 0; (i < table->nrows) && strcmp(table->rows[i].key, key); ++i) {
    }
    if (i == 16) {
        return;
    }
    if (i == table->nrows) {
        snprintf(table->rows[i].key, sizeof(table->rows[i].key), "%s", key);
        ++table->nrows;
    }
    table->rows[i].value[table->impl] = *count;
    table->rows[i].valid[table->impl] = 1;
}

static const bench_count_t *bench_count_find(const bench_count_table_t *table,
                                             const char *key, int impl)
{
    unsigned i;

    for (i = 0; i < table->nrows; ++i) {
        if (!strcmp(table->rows[i].key, key) && table->rows[i].valid[impl]) {
            return &table->rows[i].value[impl];
        }
    }
    return NULL;
}

/* One worker under callgrind: its dumps into the table; 0 on success */
static int bench_count_run(int impl, const char *lib, const char *self,
                           bench_count_table_t *table)
{
    char dir[4096], valgrind[4096], impl_str[8];
    const char *argv[40];
    int argc, status, devnull;
    pid_t pid;

    if (lib == NULL) {
        return 0;
    }
    if (bench_count_mkdir(dir, sizeof(dir)) != 0) {
        perror("mkdtemp");
        return -1;
    }
    argc = bench_count_argv(argv, dir, valgrind, sizeof(valgrind));
    snprintf(impl_str, sizeof(impl_str), "%d", impl);
    argv[argc++] = self;
    argv[argc++] = "--count-worker";
    argv[argc++] = impl_str;
    argv[argc++] = lib;
    argv[argc]   = NULL;
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        devnull = open("/dev/null", O_WRONLY); /* the libraries' log */
        if (devnull >= 0) {
            dup2(devnull, 1);
            dup2(devnull, 2);
        }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    if ((pid < 0) || (waitpid(pid, &status, 0) < 0) || !WIFEXITED(status) ||
        (WEXITSTATUS(status) != 0)) {
        fprintf(stderr, "count worker '%s' failed (status 0x%x)\n",
                bench_impl_names[impl], (pid < 0) ? -1 : status);
        bench_count_collect(dir, bench_count_store, table);
        return -1;
    }
    table->impl = impl;
    return (bench_count_collect(dir, bench_count_store, table) > 0) ? 0 : -1;
}

/* A row's figure for impl, net of what is subtracted from it; 0 when
 * missing */
static int bench_count_net(const bench_count_table_t *table, int row, int impl,
                           int metric, double *value_p)
{
    static const char *keys[][3] = {
        {"hit1", "harness1", "2"},       {"hit10k", "harness10k", "2"},
        {"hit100k", "harness100k", "2"}, {"miss", "model", "="},
        {"unmap", "unmap_empty", "="},
    };
    const bench_count_t *value, *base;
    double v, b;

    value = bench_count_find(table, keys[row][0], impl);
    base  = bench_count_find(table, keys[row][1],
                            (keys[row][2][0] == '2') ? 2 : impl);
    if ((value == NULL) || (base == NULL)) {
        return 0;
    }
    v = (metric == 0) ? value->ir : (metric == 1) ? value->d1 : value->ll;
    b = (metric == 0) ? base->ir : (metric == 1) ? base->d1 : base->ll;
    *value_p = v - b;
    return 1;
}

static int bench_count_main(const char *ours, const char *abi, const char *ucx,
                            int csv)
{
    static const char *labels[] = {
        "hit, 1 region", "hit, random of 10k", "hit, random of 100k",
        "miss+evict over cost model", "munmap per cached region"};
    static const char *csv_keys[] = {"hit1", "hit10k", "hit100k",
                                     "miss_over_model", "munmap_per_region"};
    static const char *titles[]   = {"Instructions per operation",
                                     "D1 data misses per operation",
                                     "LL data misses per operation"};
    static const int order[]      = {2, 0, 3, 1}; /* limit ours abi ucx */
    static const char *cols[]     = {"ours", "ucx-1.13", "limit", "stock-abi"};
    static bench_count_table_t table;
    char self[4096], valgrind[4096];
    const char *argv[40];
    double start = bench_now_ns(), value, base;
    ssize_t len;
    int ret = 0, metric, row, i;

    if (bench_count_argv(argv, "/", valgrind, sizeof(valgrind)) == 0) {
        printf("ucs_bench_rcache: --count needs valgrind in PATH\n");
        return 77;
    }
    len = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (len <= 0) {
        perror("readlink /proc/self/exe");
        return 1;
    }
    self[len] = '\0';
    if (!csv) {
        printf("ucs_bench_rcache --count: callgrind, %s\n"
               "ours: %s\nabi:  %s\nucx:  %s\n\n",
               BENCH_COUNT_GEOMETRY, ours, (abi != NULL) ? abi : "-", ucx);
        fflush(stdout);
    }
    ret |= bench_count_run(0, ours, self, &table) ? 1 : 0;
    ret |= bench_count_run(3, abi, self, &table) ? 1 : 0;
    bench_count_run(1, ucx, self, &table);
    ret |= bench_count_run(2, "", self, &table) ? 1 : 0;

    if (csv) {
        printf("row,config,ir_per_op,d1_miss_per_op,ll_miss_per_op\n");
        for (row = 0; row < 5; ++row) {
            for (i = 0; i < 4; ++i) {
                double ir, d1, ll;

                if (bench_count_net(&table, row, order[i], 0, &ir) &&
                    bench_count_net(&table, row, order[i], 1, &d1) &&
                    bench_count_net(&table, row, order[i], 2, &ll)) {
                    printf("%s,%s,%.2f,%.4f,%.4f\n", csv_keys[row],
                           cols[order[i]], ir, d1, ll);
                }
            }
        }
        return ret;
    }
    for (metric = 0; metric < 3; ++metric) {
        printf("%s\n%-28s", titles[metric], "row");
        for (i = 0; i < 4; ++i) {
            printf(" %10s", cols[order[i]]);
        }
        printf(" %9s\n", "ours/ucx");
        for (row = 0; row < 5; ++row) {
            printf("%-28s", labels[row]);
            for (i = 0; i < 4; ++i) {
                if (bench_count_net(&table, row, order[i], metric, &value)) {
                    printf(" %10.*f", metric ? 3 : 1, value);
                } else {
                    printf(" %10s", "-");
                }
            }
            if (bench_count_net(&table, row, 0, metric, &value) &&
                bench_count_net(&table, row, 1, metric, &base) && (base > 0)) {
                printf(" %9.2f\n", value / base);
            } else {
                printf(" %9s\n", "-");
            }
        }
        printf("\n");
    }
    printf("hit rows: net of the harness (the loop and two indirect calls to "
           "an empty get/put: %.1f, %.1f, %.1f instructions);\nlimit: a "
           "cache of one index load, a bounds check and the reference "
           "count's atomics; miss: the same loop around the cost model "
           "(mem_reg/mem_dereg, no-ops here) subtracted;\nmunmap: munmap "
           "and the next get, over the same for an empty area.\n",
           bench_count_find(&table, "harness1", 2)
               ? bench_count_find(&table, "harness1", 2)->ir
               : 0,
           bench_count_find(&table, "harness10k", 2)
               ? bench_count_find(&table, "harness10k", 2)->ir
               : 0,
           bench_count_find(&table, "harness100k", 2)
               ? bench_count_find(&table, "harness100k", 2)->ir
               : 0);
    printf("Targets: hit <= %.0f instructions; <= 1 LL miss at 100k; miss "
           "<= %.0f%% of UCX 1.13's over the cost model\n",
           UCS_BENCH_TARGET_HIT, UCS_BENCH_TARGET_MISS * 100);
    for (row = 0; row < 3; ++row) {
        if (bench_count_net(&table, row, 0, 0, &value)) {
            printf("  ours %-22s %6.1f instructions %s\n", labels[row], value,
                   (value <= UCS_BENCH_TARGET_HIT) ? "ok" : "MISS");
        }
    }
    if (bench_count_net(&table, 2, 0, 2, &value)) {
        printf("  ours %-22s %6.3f LL misses %s\n", labels[2], value,
               (value <= 1.0) ? "ok" : "MISS");
    }
    if (bench_count_net(&table, 3, 0, 0, &value) &&
        bench_count_net(&table, 3, 1, 0, &base)) {
        printf("  ours %-22s %6.1f = %.0f%% of UCX's %.1f %s\n", labels[3],
               value, 100 * value / base, base,
               (value <= UCS_BENCH_TARGET_MISS * base) ? "ok" : "MISS");
    }
    printf("total time: %.1f s\n", (bench_now_ns() - start) / 1e9);
    return ret;
}

static int bench_run_worker(int impl, const char *lib, bench_result_t *results,
                            unsigned *nresults)
{
    char line[256], name[128];
    size_t len;
    double value;
    int fds[2], status;
    unsigned i;

    if (lib == NULL) {
        return 0; /* a column this build leaves out */
    }
    pid_t pid;
    FILE *in;
    char *sp;

    if (pipe(fds) != 0) {
        return -1;
    }
    pid = fork();
    if (pid == 0) {
        close(fds[0]);
        bench_out  = fdopen(fds[1], "w");
        bench_impl = impl;
        bench_worker(lib);
        fclose(bench_out);
        _exit(0);
    }
    close(fds[1]);
    in = fdopen(fds[0], "r");
    while (fgets(line, sizeof(line), in) != NULL) {
        sp = strrchr(line, ' ');
        if (sp == NULL) {
            continue;
        }
        *sp   = '\0';
        value = atof(sp + 1);
        len   = ucs_min(strlen(line), sizeof(name) - 1); /* truncates */
        memcpy(name, line, len);
        name[len] = '\0';
        for (i = 0; i < *nresults; ++i) {
            if (!strcmp(results[i].name, name)) {
                break;
            }
        }
        if ((i == *nresults) && (i < UCS_BENCH_MAX_RESULTS)) {
            memcpy(results[i].name, name, sizeof(name));
            ++*nresults;
        }
        if (i < UCS_BENCH_MAX_RESULTS) {
            results[i].value[impl] = value;
            results[i].valid[impl] = 1;
        }
    }
    fclose(in);
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "worker '%s' failed (status 0x%x)\n",
                bench_impl_names[impl], status);
        return -1;
    }
    return 0;
}

/* The userfaultfd monitor as the caches of lib will find it, asked in a
 * forked child that loads lib (the driver loads no libucs): NULL when it
 * runs or the child cannot tell, else the reason, in buf. */
static const char *bench_uffd_probe(const char *lib, char *buf, size_t max)
{
    ucs_status_t (*start)(int *);
    void (*query)(ucm_uffd_info_t *);
    ucm_uffd_info_t info;
    int fds[2], status, active = 1, devnull;
    size_t used = 0;
    void *handle;
    ssize_t n;
    pid_t pid;

    if (pipe(fds) != 0) {
        return NULL;
    }
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        close(fds[0]);
        devnull = open("/dev/null", O_WRONLY); /* the workers log for it */
        if (devnull >= 0) {
            dup2(devnull, 2);
        }
        handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        if (handle != NULL) {
            *(void **)&start = dlsym(handle, "ucm_uffd_start");
            *(void **)&query = dlsym(handle, "ucm_uffd_query");
            if ((start != NULL) && (query != NULL)) {
                start(&active);
                query(&info);
                if (!active &&
                    (write(fds[1], info.reason,
                           strnlen(info.reason, sizeof(info.reason))) < 0)) {
                    _exit(1);
                }
            }
        }
        _exit(0);
    }
    close(fds[1]);
    while ((pid > 0) && ((n = read(fds[0], buf + used, max - 1 - used)) > 0)) {
        used += n;
    }
    close(fds[0]);
    if (pid > 0) {
        waitpid(pid, &status, 0);
    }
    buf[used] = '\0';
    return (used > 0) ? buf : NULL;
}

/* What degrades the columns of ours (and stock-abi, on the same libucm),
 * one line each on stderr; the table on stdout stays as it is. */
static void bench_degraded(const char *ours)
{
    const char *pfn = ucs_env_get("UCX_RCACHE_CHECK_PFN");
    char uffd_reason[200];
    tools_env_item_t items[] = {
        {TOOLS_ENV_GIVEN, "userfaultfd", NULL, 0,
         "the ours and stock-abi caches run on the memory hooks only (no "
         "subscription in their miss rows)"},
        {TOOLS_ENV_PAGEMAP, NULL, NULL, 0,
         "UCX_RCACHE_CHECK_PFN compares zeros: its rows pay the pagemap "
         "reads and check nothing"},
    };
    /* hidden page frames only matter to a cache that checks them */
    unsigned count = ((pfn != NULL) && (strtoul(pfn, NULL, 0) != 0)) ? 2 : 1;

    items[0].reason = bench_uffd_probe(ours, uffd_reason, sizeof(uffd_reason));
    tools_env_report(stderr, TOOLS_ENV_PREFIX, items, count);
}

/* Column impl against ours, as text ("-" without both values). */
static void bench_ratio(const bench_result_t *result, int impl, char *buf,
                        size_t max)
{
    if (result->valid[0] && result->valid[impl] && (result->value[0] > 0)) {
        snprintf(buf, max, "%.2fx", result->value[impl] / result->value[0]);
    } else {
        snprintf(buf, max, "-");
    }
}

int main(int argc, char **argv)
{
    const char *ours = ucs_env_get("UCS_BENCH_OURS");
    const char *ucx  = ucs_env_get("UCS_BENCH_UCX");
    const char *abi  = ucs_env_get("UCS_BENCH_ABI");
    bench_result_t results[UCS_BENCH_MAX_RESULTS];
    unsigned nresults = 0, i, j;
    char cell[UCS_BENCH_IMPLS][24], ratio[2][24];
    int ret = 0, count = 0, csv = 0;

    for (i = 1; i < (unsigned)argc; ++i) {
        if (!strcmp(argv[i], "--count-worker") && (i + 2 < (unsigned)argc)) {
            bench_out      = stdout;
            bench_counting = 1;
            bench_impl     = atoi(argv[i + 1]);
            if (!bench_count_active()) {
                fprintf(stderr, "--count-worker runs under callgrind\n");
                return 3;
            }
            bench_count_worker(argv[i + 2]);
            return 0;
        } else if (!strcmp(argv[i], "--count")) {
            count = 1;
        } else if (!strcmp(argv[i], "--csv")) {
            csv = 1;
        } else if (!strcmp(argv[i], "--quick")) {
            bench_quick = 1;
        } else if (!strcmp(argv[i], "--ours") && (i + 1 < (unsigned)argc)) {
            ours = argv[++i];
        } else if (!strcmp(argv[i], "--ucx") && (i + 1 < (unsigned)argc)) {
            ucx = argv[++i];
        } else if (!strcmp(argv[i], "--abi") && (i + 1 < (unsigned)argc)) {
            abi = argv[++i];
        } else {
            fprintf(stderr,
                    "usage: %s [--quick | --count [--csv]] [--ours PATH] "
                    "[--abi PATH] [--ucx PATH]\n",
                    argv[0]);
            return 2;
        }
    }
    if (ours == NULL) {
        ours = UCS_BENCH_OURS_BUILD;
    }
    if (ucx == NULL) {
        ucx = UCS_BENCH_UCX_DEFAULT;
    }
#ifdef UCS_BENCH_HAVE_STOCK_ABI
    if (abi == NULL) {
        abi = UCS_BENCH_STOCK_ABI_BUILD;
    }
    /* no UCX is loaded in its worker to tell the release: the column is
     * the 1.13 entry (rcache_stock_abi.c) */
    setenv("UCM_RCACHE_UCX", "1.13", 0);
#else
    abi = NULL;
#endif
    if (count) {
        return bench_count_main(ours, abi, ucx, csv);
    }
    memset(results, 0, sizeof(results));
    bench_degraded(ours);
    printf("fake registration: mem_reg %d ns, mem_dereg %d ns; best of %d "
           "rounds\nours: %s\nabi:  %s\nucx:  %s\n\n",
           UCS_BENCH_REG_NS, UCS_BENCH_DEREG_NS, UCS_BENCH_ROUNDS, ours,
           (abi != NULL) ? abi
                         : "(left out: built without UCX 1.13's "
                           "headers)",
           ucx);
    fflush(stdout);
    ret |= bench_run_worker(0, ours, results, &nresults) ? 1 : 0;
    ret |= bench_run_worker(3, abi, results, &nresults) ? 1 : 0;
    bench_run_worker(1, ucx, results, &nresults);
    bench_run_worker(2, "", results, &nresults);

    printf("%-40s %10s %10s %10s %10s %9s %9s\n", "case", "ours", "stock-abi",
           "ucx-1.13", "none", "ucx/ours", "abi/ours");
    for (i = 0; i < nresults; ++i) {
        for (j = 0; j < UCS_BENCH_IMPLS; ++j) {
            if (results[i].valid[j]) {
                snprintf(cell[j], sizeof(cell[j]), "%.1f", results[i].value[j]);
            } else {
                snprintf(cell[j], sizeof(cell[j]), "-");
            }
        }
        for (j = 0; j < 2; ++j) {
            bench_ratio(&results[i], (j == 0) ? 1 : 3, ratio[j],
                        sizeof(ratio[j]));
        }
        printf("%-40s %10s %10s %10s %10s %9s %9s\n", results[i].name, cell[0],
               cell[3], cell[1], cell[2], ratio[0], ratio[1]);
    }
    printf("\n(Mops/s rows: higher is better, a ratio < 1 means ours is "
           "faster;\n memory rows: bytes of resident memory per cached "
           "region, a ratio >= 1 means\n ours takes no more;"
           "\n other rows: ns, a ratio > 1 means ours is faster; "
           "stock-abi: libucm_rcache.so.0\n through UCX 1.13.1's ABI, "
           "abi/ours near 1 means the ABI costs nothing.)\n");
    return ret;
}
